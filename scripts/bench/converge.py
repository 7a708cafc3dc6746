# SPDX-License-Identifier: GPL-3.0-or-later
"""Cost of converging one lab host: playbooks/site.yml against a plain ansible.posix.mount playbook.

For 1 and for 10 tmpfs mounts (/srv/bench/m01.., 16M, purpose custom), each side runs on a fresh container
from the lab's Debian 12 image (scripts/lab/lab.yml with a generated inventory under .cache/bconv): a first
run, then a re-run that should change nothing. The plain side is scripts/bench/converge-plain.yml, a loop of
ansible.posix.mount and ansible.builtin.file over the same ramdisk_mounts. Each of the 8 runs is repeated
--runs times (fresh containers every time) and measured by:

- wall seconds of ansible-playbook, median and min-max, and the controller's CPU seconds (ansible-playbook
  and its workers: less sensitive than wall time to other work on the machine, whose load is shown);
- task results: ok (which counts changed ones) + skipped + failed from the recap, and changed;
- task headers: TASK banners printed for the host (one host, so one banner per task run), and how many
  different ones (a task included once per mount prints the same banner again);
- module runs: modules executed on the host ("Using module file" in a -vvv log kept beside the quiet
  output, ANSIBLE_LOG_VERBOSITY=3), and round trips: every EXEC and PUT the connection made;
- runs of each ramdisk.provision module (ramdisk_facts and any planning module), per host: the aim is one
  read of the host per run, by ramdisk_facts or a module named *plan*.

Then the project's targets: a no-op re-run of site.yml within 1.5x the plain playbook's, no task result
added per extra mount, at most 25 task headers in a no-op run. It prints figures and says met or not met; it
fails only when the lab cannot start. A failing site.yml run is shown, and the rest goes on.
Run through `make bench-converge` (RUNS=N for N repetitions); the containers (bconv-*) are removed at the
end, also after a failure.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORK_DIR = os.path.join(REPO_ROOT, ".cache", "bconv")
IMAGE = "ramdisk-lab/debian:12"
PREFIX = "bconv"
PLAYBOOKS = {"site": "playbooks/site.yml", "plain": "scripts/bench/converge-plain.yml"}
SIDES = ("site", "plain")
COUNTS = (1, 10)
PHASES = ("first", "re-run")
MOUNT_SIZE = "16M"
TARGET_RERUN_RATIO = 1.5
TARGET_HEADERS = 25
_RECAP_RE = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)"
                       r"\s+skipped=(\d+)", re.M)
_MODULE_RE = re.compile(r"Using module file (\S+)")
_OUR_MODULE_RE = re.compile(r"/ramdisk/provision/plugins/modules/(\w+)\.py$")


def host_name(rep, side, count):
    return "%s-%d-%s-%02d" % (PREFIX, rep, side, count)


def mounts(count):
    return [{"path": "/srv/bench/m%02d" % number, "purpose": "custom", "size": MOUNT_SIZE}
            for number in range(1, count + 1)]


def write_inventory(runs):
    """JSON is YAML: one host per repetition, side and mount count, each with its own ramdisk_mounts."""
    hosts = {}
    for rep in range(1, runs + 1):
        for side in SIDES:
            for count in COUNTS:
                hosts[host_name(rep, side, count)] = {"lab_image": IMAGE, "ramdisk_mounts": mounts(count)}
    inventory = {"all": {"vars": {"ansible_connection": "community.docker.docker",
                                  "ansible_python_interpreter": "/usr/bin/python3"},
                         "hosts": hosts}}
    os.makedirs(os.path.join(WORK_DIR, "logs"), exist_ok=True)
    path = os.path.join(WORK_DIR, "hosts.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(inventory, handle, indent=1)
        handle.write("\n")
    return path


def environment():
    env = dict(os.environ)
    env.setdefault("ANSIBLE_CONFIG", os.path.join(REPO_ROOT, "scripts", "ansible.cfg"))
    env.setdefault("ANSIBLE_COLLECTIONS_PATH", os.path.join(REPO_ROOT, ".cache", "collections"))
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    # The figures are read from the default callback's output: no colour, no other stdout callback.
    env["ANSIBLE_STDOUT_CALLBACK"] = "ansible.builtin.default"
    env["ANSIBLE_NOCOLOR"] = "1"
    env.pop("ANSIBLE_FORCE_COLOR", None)
    return env


def lab(inventory, env, hosts, state):
    argv = ["ansible-playbook", "-i", inventory, "scripts/lab/lab.yml", "--limit", ",".join(hosts),
            "--forks", str(len(hosts)), "-e", "lab_state=%s" % state]
    proc = subprocess.run(argv, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, check=False)
    if proc.returncode != 0:
        sys.stdout.write(proc.stdout[-6000:])
        raise SystemExit("converge: scripts/lab/lab.yml -e lab_state=%s failed with exit code %d"
                         % (state, proc.returncode))


def play(inventory, env, host, side, phase):
    """One ansible-playbook run on one host: wall time and what its output and -vvv log say."""
    log = os.path.join(WORK_DIR, "logs", "%s-%s.log" % (host, phase))
    if os.path.exists(log):
        os.remove(log)
    run_env = dict(env, ANSIBLE_LOG_PATH=log, ANSIBLE_LOG_VERBOSITY="3")
    argv = ["ansible-playbook", "-i", inventory, "--limit", host, PLAYBOOKS[side]]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=REPO_ROOT, env=run_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, check=False)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    log_text = ""
    if os.path.exists(log):  # not written when ansible-playbook stops before the play (a syntax error)
        with open(log, encoding="utf-8", errors="replace") as handle:
            log_text = handle.read()
    banners = re.findall(r"^TASK \[(.*)\]", proc.stdout, re.M)
    result = {"wall": wall, "cpu": cpu, "rc": proc.returncode, "headers": len(banners), "unique": len(set(banners))}
    recap = [match for match in _RECAP_RE.findall(proc.stdout) if match[0] == host]
    if recap:
        ok, changed, _unreachable, failed, skipped = (int(value) for value in recap[0][1:])
        result.update(results=ok + skipped + failed, changed=changed)
    modules = _MODULE_RE.findall(log_text)
    result["modules"] = len(modules)
    result["ours"] = {}
    for path in modules:
        match = _OUR_MODULE_RE.search(path)
        if match:
            result["ours"][match.group(1)] = result["ours"].get(match.group(1), 0) + 1
    result["trips"] = len(re.findall(r"<%s> (?:EXEC|PUT|FETCH) " % re.escape(host), log_text))
    if proc.returncode != 0:
        result["output"] = proc.stdout
    return result


def mounted(host):
    """tmpfs mounts under /srv/bench on the host after its re-run: both sides should show them all."""
    proc = subprocess.run(["docker", "exec", host, "findmnt", "-rn", "-t", "tmpfs", "-o", "TARGET"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, check=False)
    return sum(1 for line in proc.stdout.splitlines() if line.startswith("/srv/bench/"))


def show_failure(host, side, phase, result):
    lines = result["output"].splitlines()
    wanted = [line for line in lines if re.match(r"(fatal|failed|ERROR|\[ERROR\])", line)]
    print("converge: %s %s on %s failed (exit code %d); its errors, then its last lines:"
          % (PLAYBOOKS[side], phase, host, result["rc"]))
    for line in (wanted[-5:] + ["..."] if wanted else []) + lines[-25:]:
        print("  | " + line[:300])
    sys.stdout.flush()


def spread(values, form="%d"):
    """One figure, or min-max when the repetitions disagree."""
    if not values:
        return "-"
    low, high = min(values), max(values)
    return form % low if low == high else (form + "-" + form) % (low, high)


def summarise(results):
    good = [item for item in results if item["rc"] == 0]
    walls = [item["wall"] for item in good]
    summary = {"ran": len(results), "failed": len(results) - len(good)}
    if walls:
        summary["median"] = statistics.median(walls)
        summary["wall"] = "%.1f (%.1f-%.1f)" % (summary["median"], min(walls), max(walls))
    else:
        summary["wall"] = "failed"
    summary["cpu_median"] = statistics.median(item["cpu"] for item in good) if good else None
    summary["cpu"] = "%.1f" % summary["cpu_median"] if good else "-"
    for key in ("results", "changed", "headers", "unique", "modules", "trips"):
        values = [item[key] for item in good if key in item]
        summary[key] = spread(values)
        summary[key + "_low"] = min(values) if values else None
    ours = sorted({name for item in good for name in item["ours"]})
    summary["ours"] = ", ".join("%s %s" % (name, spread([item["ours"].get(name, 0) for item in good]))
                                for name in ours) or "-"
    reads = [sum(runs for name, runs in item["ours"].items() if name == "ramdisk_facts" or "plan" in name)
             for item in good]
    summary["reads_low"] = min(reads, default=None)
    summary["mounted"] = spread([item["mounted"] for item in good if "mounted" in item])
    return summary


def verdict(value, target):
    if value is None:
        return "no figure (failed runs)"
    return "met" if value <= target else "NOT met"


def report(table, runs, loads):
    print()
    print("One fresh lab host (%s) per side and mount count; %d repetition(s); %d cores on this machine;"
          % (IMAGE, runs, os.cpu_count()))
    print("load average (1 min) at the start of each repetition and at the end: %s"
          % ", ".join("%.1f" % load for load in loads))
    head = ("%-8s %6s %-6s %-20s %5s %7s %7s %-12s %7s %5s %7s  %s"
            % ("playbook", "mounts", "run", "wall s med (min-max)", "cpu s", "results", "changed", "headers/diff",
               "modules", "trips", "mounted", "ramdisk.provision modules"))
    print(head)
    print("-" * len(head))
    for side in SIDES:
        for count in COUNTS:
            for phase in PHASES:
                item = table[side, count, phase]
                failed = " (%d of %d failed)" % (item["failed"], item["ran"]) if item["failed"] else ""
                print("%-8s %6d %-6s %-20s %5s %7s %7s %-12s %7s %5s %7s  %s%s"
                      % (side, count, phase, item["wall"], item["cpu"], item["results"], item["changed"],
                         "%s/%s" % (item["headers"], item["unique"]), item["modules"], item["trips"],
                         item["mounted"] if phase == "re-run" else "", item["ours"], failed))
    print("cpu: controller CPU seconds (median); results: task results in the recap (ok, which counts changed,")
    print("+ skipped + failed); headers/diff: TASK banners printed / different ones; modules: module runs on the")
    print("host; trips: connection round trips (EXEC + PUT); mounted: tmpfs under /srv/bench after the re-run.")
    print()
    print("Targets")
    for phase in ("re-run", "first"):
        for count in COUNTS:
            site, plain = table["site", count, phase], table["plain", count, phase]
            ratio = site["median"] / plain["median"] if "median" in site and "median" in plain else None
            cpu = (" (controller CPU %.2fx)" % (site["cpu_median"] / plain["cpu_median"])
                   if site["cpu_median"] and plain["cpu_median"] else "")
            figure = ("%.2fx" % ratio if ratio is not None else "-") + cpu
            if phase == "re-run":
                print("  no-op re-run wall time, site.yml / plain, %2d mount(s): %-30s target <= %.1fx  %s"
                      % (count, figure, TARGET_RERUN_RATIO, verdict(ratio, TARGET_RERUN_RATIO)))
            else:
                print("  first run wall time,    site.yml / plain, %2d mount(s): %-30s no target" % (count, figure))
    for phase in PHASES:
        for key, label in (("results", "task results"), ("modules", "module runs")):
            per = {}
            for side in SIDES:
                one, ten = table[side, 1, phase][key + "_low"], table[side, 10, phase][key + "_low"]
                per[side] = (ten - one) / 9.0 if one is not None and ten is not None else None
            text = "%.1f" % per["site"] if per["site"] is not None else "-"
            plain = "%.1f" % per["plain"] if per["plain"] is not None else "-"
            if key == "results":
                print("  %-12s added per extra mount, site.yml, %-7s %-5s target < 1 (a loop item; plain %s)  %s"
                      % (label, phase + ":", text, plain, verdict(per["site"], 0.99)))
            else:
                print("  %-12s added per extra mount, site.yml, %-7s %-5s no target (plain %s)"
                      % (label, phase + ":", text, plain))
    for count in COUNTS:
        item = table["site", count, "re-run"]
        value = item["headers_low"]
        print("  task headers of a no-op run, site.yml, %2d mount(s): %-4s (%s different) target <= %d  %s"
              % (count, value if value is not None else "-", item["unique"], TARGET_HEADERS,
                 verdict(value, TARGET_HEADERS)))
    for phase in PHASES:
        value = table["site", 10, phase]["reads_low"]
        print("  ramdisk_facts + *plan* module runs, site.yml, 10 mounts, %-7s %-3s aim 1 per run  %s"
              % (phase + ":", value if value is not None else "-", verdict(value, 1)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="repetitions of each run, fresh hosts each time (3)")
    parser.add_argument("--keep", action="store_true", help="leave the last repetition's containers running")
    args = parser.parse_args()
    if not 1 <= args.runs <= 20:
        raise SystemExit("converge: --runs must be from 1 to 20")
    # A SIGTERM (make interrupted, CI timeout) still removes the containers, through the finally below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    env = environment()
    inventory = write_inventory(args.runs)
    every_host = [host_name(rep, side, count) for rep in range(1, args.runs + 1) for side in SIDES
                  for count in COUNTS]
    results = {(side, count, phase): [] for side in SIDES for count in COUNTS for phase in PHASES}
    loads = []
    lab(inventory, env, every_host, "absent")  # leftovers of an interrupted run
    try:
        for rep in range(1, args.runs + 1):
            hosts = [host_name(rep, side, count) for side in SIDES for count in COUNTS]
            loads.append(os.getloadavg()[0])
            started = time.monotonic()
            lab(inventory, env, hosts, "started")
            print("converge: repetition %d of %d: %d containers from %s up in %.1f s"
                  % (rep, args.runs, len(hosts), IMAGE, time.monotonic() - started), flush=True)
            for side in SIDES:
                for count in COUNTS:
                    host = host_name(rep, side, count)
                    for phase in PHASES:
                        result = play(inventory, env, host, side, phase)
                        if phase == "re-run":
                            result["mounted"] = mounted(host)
                        results[side, count, phase].append(result)
                        print("converge:   %-8s %2d mount(s) %-6s %6.1f s%s"
                              % (side, count, phase, result["wall"],
                                 "  FAILED" if result["rc"] else ""), flush=True)
                        if result["rc"]:
                            show_failure(host, side, phase, result)
            if not (args.keep and rep == args.runs):
                lab(inventory, env, hosts, "absent")
    finally:
        if not args.keep:
            lab(inventory, env, every_host, "absent")
    loads.append(os.getloadavg()[0])
    report({key: summarise(value) for key, value in results.items()}, args.runs, loads)


if __name__ == "__main__":
    main()
