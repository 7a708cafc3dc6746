# SPDX-License-Identifier: GPL-3.0-or-later
"""Cost of converging one lab host: playbooks/site.yml against a plain ansible.posix.mount playbook, and what a
persisted mount and a zram device cost.

Each case runs on a fresh container from the lab's Debian 12 image (scripts/lab/lab.yml with a generated
inventory under .cache/bconv): a first run, then a re-run that should change nothing.
- tmpfs, 1 and 10 mounts (/srv/bench/m01.., 16M, purpose custom): site.yml, and beside it the plain side,
  scripts/bench/converge-plain.yml, a loop of ansible.posix.mount and ansible.builtin.file over the same
  ramdisk_mounts.
- persist: one 16M tmpfs at /srv/bench/persisted kept on disk (persist: backing, interval, services), with a
  small service (bench-app.service, a sleep in that directory) and a few files in it, made before the first run
  as a database host has its server and data (inventories/lab/group_vars/databases.yml, smaller).
- zram: one 64M zram file system at /srv/bench/zram (backend zram). The container gets this machine's /sys and
  /dev and zram's block major (as molecule/zram does); its zram records (/etc/ramdisk-provision/zram) are a
  directory under .cache/bconv/zram, so that every device the run made is removed from the kernel at the end
  (swap off, reset, hot_remove; a device the kernel had before, unused, is given back), also after a failure.
  Left out, and said so, when the kernel has no zram.
Each run is repeated --runs times (fresh containers every time) and measured by:

- wall seconds of ansible-playbook, median and min-max, and the controller's CPU seconds (ansible-playbook
  and its workers: less sensitive than wall time to other work on the machine, whose load is shown);
- task results: ok (which counts changed ones) + skipped + failed from the recap, and changed;
- task headers: TASK banners printed for the host (one host, so one banner per task run), and how many
  different ones (a task included once per mount prints the same banner again);
- module runs: modules executed on the host ("Using module file" in a -vvv log kept beside the quiet
  output, ANSIBLE_LOG_VERBOSITY=3), and round trips: every EXEC and PUT the connection made;
- runs of each ramdisk.provision module (ramdisk_facts and any planning module), per host: the aim is one
  read of the host per run, by ramdisk_facts or a module named *plan*.

Then the project's targets (issue 33): a no-op re-run of any policy at most 10 task headers and 2 module runs
per host; a no-op re-run of site.yml within 1.2x the plain playbook doing the same mounts (wall time, the
controller's CPU beside it); no task result added per extra mount. For every site.yml case whose no-op re-run
misses a target, the tasks that printed a header there, and the modules it ran. It prints figures and says
met or not met; it fails only when the lab cannot start. A failing run is shown, and the rest goes on.
Run through `make bench-converge` (RUNS=N for N repetitions); the containers (bconv-*) are removed at the
end, also after a failure.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORK_DIR = os.path.join(REPO_ROOT, ".cache", "bconv")
ZRAM_RECORDS = os.path.join(WORK_DIR, "zram")
IMAGE = "ramdisk-lab/debian:12"
PREFIX = "bconv"
PLAYBOOKS = {"site": "playbooks/site.yml", "plain": "scripts/bench/converge-plain.yml"}
SIDES = ("site", "plain")
PHASES = ("first", "re-run")
MOUNT_SIZE = "16M"
PERSIST_PATH = "/srv/bench/persisted"
PERSIST_SERVICE = "bench-app.service"
ZRAM_PATH = "/srv/bench/zram"
TARGET_RERUN_RATIO = 1.2
TARGET_HEADERS = 10
TARGET_MODULES = 2
_RECAP_RE = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)"
                       r"\s+skipped=(\d+)", re.M)
_MODULE_RE = re.compile(r"Using module file (\S+)")
_OUR_MODULE_RE = re.compile(r"/ramdisk/provision/plugins/modules/(\w+)\.py$")
_ANY_MODULE_RE = re.compile(r"/(?:ansible_collections/|ansible/modules/)(.*)\.py$")


def tmpfs_mounts(count):
    return [{"path": "/srv/bench/m%02d" % number, "purpose": "custom", "size": MOUNT_SIZE}
            for number in range(1, count + 1)]


# Each case: its label, the sides that run it, the host's ramdisk_mounts, and the mounts the re-run must show.
CASES = {
    "tmpfs-01": {"label": "1 tmpfs", "sides": SIDES, "mounts": tmpfs_mounts(1), "count": 1},
    "tmpfs-10": {"label": "10 tmpfs", "sides": SIDES, "mounts": tmpfs_mounts(10), "count": 10},
    "persist": {"label": "persisted tmpfs", "sides": ("site",), "count": 1,
                "mounts": [{"path": PERSIST_PATH, "purpose": "custom", "size": MOUNT_SIZE,
                            "persist": {"backing": "/var/lib/ramdisk-backing/bench", "interval": "5min",
                                        "services": [PERSIST_SERVICE]}}]},
    "zram": {"label": "zram file system", "sides": ("site",), "count": 1,
             "mounts": [{"path": ZRAM_PATH, "backend": "zram", "purpose": "custom", "size": "64M"}]},
}
TMPFS_CASES = ("tmpfs-01", "tmpfs-10")

# The persisted mount's service and data, made before the first run (not measured): a unit that keeps the
# directory open, as a server keeps its data directory.
PERSIST_SETUP = """set -e
mkdir -p %(path)s
for n in 1 2 3 4 5; do printf 'row %%s\\n' $n > %(path)s/data-$n; done
cat > /etc/systemd/system/%(service)s <<'UNIT'
[Unit]
Description=ramdisk.provision bench: a small service that uses %(path)s

[Service]
WorkingDirectory=%(path)s
ExecStart=/bin/sleep infinity

[Install]
WantedBy=multi-user.target
UNIT
systemctl daemon-reload
systemctl enable --now %(service)s
""" % {"path": PERSIST_PATH, "service": PERSIST_SERVICE}


def host_name(rep, side, case):
    return "%s-%d-%s-%s" % (PREFIX, rep, side, case)


def zram_major():
    """zram's block major from this machine's /proc/devices, or None when the kernel has no zram."""
    try:
        with open("/proc/devices", encoding="ascii") as handle:
            for line in handle:
                fields = line.split()
                if len(fields) == 2 and fields[1] == "zram":
                    return int(fields[0])
    except OSError:
        pass
    return None


def write_inventory(runs, cases, major):
    """JSON is YAML: one host per repetition, side and case, each with its own ramdisk_mounts."""
    hosts = {}
    for rep in range(1, runs + 1):
        for case in cases:
            for side in CASES[case]["sides"]:
                name = host_name(rep, side, case)
                hosts[name] = {"lab_image": IMAGE, "ramdisk_mounts": CASES[case]["mounts"]}
                if case == "zram":
                    hosts[name].update(
                        lab_volumes=["/sys:/sys:rw", "/dev:/dev",
                                     "%s:/etc/ramdisk-provision/zram:rw" % os.path.join(ZRAM_RECORDS, name)],
                        lab_device_cgroup_rules=["b %d:* rwm" % major])
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


def zram_devices():
    try:
        return sorted(name for name in os.listdir("/sys/block") if re.match(r"zram\d+$", name))
    except OSError:
        return []


def _write(path, text):
    with open(path, "w", encoding="ascii") as handle:
        handle.write(text)


def _retry(action, tries=10):
    """A device that a container just let go of can stay busy for a moment."""
    for attempt in range(tries):
        try:
            return action()
        except OSError:
            if attempt == tries - 1:
                raise
            time.sleep(1)
    return None


def zram_remove_made():
    """Removes from the kernel every zram device the bench's containers recorded (their record directories
    under .cache/bconv/zram), once the containers are gone: swap off, reset, hot_remove. A device whose disk
    size is no longer the recorded one is someone else's now and is left alone; a device the kernel had
    before the bench (unused, as loading zram leaves zram0) is made again with hot_add. Returns what it did."""
    if not os.path.isdir(ZRAM_RECORDS):
        return []
    before_file = os.path.join(ZRAM_RECORDS, "before")
    before = open(before_file, encoding="ascii").read().split() if os.path.exists(before_file) else []
    notes = []
    for host in sorted(os.listdir(ZRAM_RECORDS)):
        directory = os.path.join(ZRAM_RECORDS, host)
        if not os.path.isdir(directory):
            continue
        for conf in sorted(os.listdir(directory)):
            if not conf.endswith(".conf"):
                continue
            with open(os.path.join(directory, conf), encoding="utf-8", errors="replace") as handle:
                text = handle.read()
            device = re.search(r"(?m)^DEVICE=(zram\d+)$", text)
            size = re.search(r"(?m)^SIZE=(\d+)$", text)
            if not device or not size:
                continue
            device, size = device.group(1), int(size.group(1))
            try:
                with open("/sys/block/%s/disksize" % device, encoding="ascii") as handle:
                    disksize = int(handle.read().strip() or 0)
            except OSError:
                notes.append("%s (%s): gone already" % (device, host))
                continue
            if disksize != size:
                notes.append("%s (%s): disk size %d, not the recorded %d: someone else's now, left alone"
                             % (device, host, disksize, size))
                continue
            with open("/proc/swaps", encoding="utf-8") as handle:
                if re.search(r"(?m)^\S*/%s\s" % device, handle.read()):
                    subprocess.run(["swapoff", "/dev/" + device], check=False)
            try:
                _retry(lambda: _write("/sys/block/%s/reset" % device, "1"))
                _retry(lambda: _write("/sys/class/zram-control/hot_remove", device[4:]))
            except OSError as error:
                notes.append("%s (%s): NOT removed (%s); remove it with 'echo %s > /sys/class/zram-control/"
                             "hot_remove'" % (device, host, error, device[4:]))
                continue
            note = "%s (%s): removed" % (device, host)
            if device in before:
                with open("/sys/class/zram-control/hot_add", encoding="ascii") as handle:
                    added = "zram" + handle.read().strip()
                note += ", and given back unused as the kernel had it" if added == device else (
                    "; the kernel had it before, and hot_add gave back %s instead" % added)
            notes.append(note)
    shutil.rmtree(ZRAM_RECORDS, ignore_errors=True)
    return notes


def zram_prepare(hosts):
    """The record directories the zram containers bind, and the devices the kernel has before the bench."""
    for host in hosts:
        os.makedirs(os.path.join(ZRAM_RECORDS, host), exist_ok=True)
    _write(os.path.join(ZRAM_RECORDS, "before"), "\n".join(zram_devices()) + "\n")


def setup_host(host, case):
    """What a case's host holds before the first run (not measured)."""
    if case != "persist":
        return
    proc = subprocess.run(["docker", "exec", host, "sh", "-c", PERSIST_SETUP], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, check=False)
    if proc.returncode != 0:
        sys.stdout.write(proc.stdout[-3000:])
        raise SystemExit("converge: could not make %s and its data on %s" % (PERSIST_SERVICE, host))


def module_name(path):
    match = _ANY_MODULE_RE.search(path)
    if not match:
        return os.path.basename(path)
    name = match.group(1)
    if "/plugins/modules/" in name:
        collection, module = name.split("/plugins/modules/", 1)
        return "%s.%s" % (collection.replace("/", "."), module.replace("/", "."))
    return "ansible.builtin." + name.replace("/", ".")


def banners(output):
    """Each TASK banner of the output, with the first result printed under it (ok, changed, skipping...)."""
    found = []
    for line in output.splitlines():
        match = re.match(r"^TASK \[(.*)\]", line)
        if match:
            found.append([match.group(1), "-"])
            continue
        status = re.match(r"^(ok|changed|skipping|included|fatal|failed):", line)
        if status and found and found[-1][1] == "-":
            found[-1][1] = status.group(1)
    return [tuple(item) for item in found]


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
    tasks = banners(proc.stdout)
    result = {"wall": wall, "cpu": cpu, "rc": proc.returncode, "headers": len(tasks),
              "unique": len({name for name, _status in tasks}), "tasks": tasks}
    recap = [match for match in _RECAP_RE.findall(proc.stdout) if match[0] == host]
    if recap:
        ok, changed, _unreachable, failed, skipped = (int(value) for value in recap[0][1:])
        result.update(results=ok + skipped + failed, changed=changed)
    modules = _MODULE_RE.findall(log_text)
    result["modules"] = len(modules)
    result["module_names"] = [module_name(path) for path in modules]
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
    """Mounts under /srv/bench on the host after its re-run (tmpfs, or the zram file system): all of the case's."""
    proc = subprocess.run(["docker", "exec", host, "findmnt", "-rn", "-o", "TARGET"],
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
    summary = {"ran": len(results), "failed": len(results) - len(good), "example": good[0] if good else None}
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
        summary[key + "_high"] = max(values) if values else None
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


def report(table, cases, runs, loads, skipped, zram_notes):
    print()
    print("One fresh lab host (%s) per side and case; %d repetition(s); %d cores on this machine;"
          % (IMAGE, runs, os.cpu_count()))
    print("load average (1 min) at the start of each repetition and at the end: %s"
          % ", ".join("%.1f" % load for load in loads))
    for note in skipped:
        print(note)
    head = ("%-8s %-16s %-6s %-20s %5s %7s %7s %-12s %7s %5s %7s  %s"
            % ("playbook", "case", "run", "wall s med (min-max)", "cpu s", "results", "changed", "headers/diff",
               "modules", "trips", "mounted", "ramdisk.provision modules"))
    print(head)
    print("-" * len(head))
    for side in SIDES:
        for case in cases:
            if side not in CASES[case]["sides"]:
                continue
            for phase in PHASES:
                item = table[side, case, phase]
                failed = " (%d of %d failed)" % (item["failed"], item["ran"]) if item["failed"] else ""
                print("%-8s %-16s %-6s %-20s %5s %7s %7s %-12s %7s %5s %7s  %s%s"
                      % (side, CASES[case]["label"], phase, item["wall"], item["cpu"], item["results"],
                         item["changed"], "%s/%s" % (item["headers"], item["unique"]), item["modules"],
                         item["trips"], item["mounted"] if phase == "re-run" else "", item["ours"], failed))
    print("cpu: controller CPU seconds (median); results: task results in the recap (ok, which counts changed,")
    print("+ skipped + failed); headers/diff: TASK banners printed / different ones; modules: module runs on the")
    print("host; trips: connection round trips (EXEC + PUT); mounted: mounts under /srv/bench after the re-run.")
    if zram_notes:
        print("zram devices the bench made, after the containers were removed: %s" % "; ".join(zram_notes))
    print()
    print("Targets (issue 33)")
    missed = []
    for case in cases:
        item = table["site", case, "re-run"]
        headers, modules = item["headers_high"], item["modules_high"]
        print("  no-op re-run of site.yml, %-16s task headers %-4s target <= %d  %-8s module runs %-4s target <= %d  %s"
              % (CASES[case]["label"] + ":", headers if headers is not None else "-", TARGET_HEADERS,
                 verdict(headers, TARGET_HEADERS), modules if modules is not None else "-", TARGET_MODULES,
                 verdict(modules, TARGET_MODULES)))
        if headers is None or headers > TARGET_HEADERS or modules is None or modules > TARGET_MODULES:
            missed.append(case)
    for phase in ("re-run", "first"):
        for case in cases:
            if "plain" not in CASES[case]["sides"]:
                continue
            site, plain = table["site", case, phase], table["plain", case, phase]
            ratio = site["median"] / plain["median"] if "median" in site and "median" in plain else None
            cpu = (site["cpu_median"] / plain["cpu_median"]
                   if site["cpu_median"] and plain["cpu_median"] else None)
            figure = "%.2fx" % ratio if ratio is not None else "-"
            cpu_text = "%.2fx" % cpu if cpu is not None else "-"
            if phase == "re-run":
                print("  no-op re-run, site.yml / plain, %-9s wall %-6s target <= %.1fx  %-8s controller CPU %-6s %s"
                      % (CASES[case]["label"] + ":", figure, TARGET_RERUN_RATIO, verdict(ratio, TARGET_RERUN_RATIO),
                         cpu_text, verdict(cpu, TARGET_RERUN_RATIO)))
            else:
                print("  first run,    site.yml / plain, %-9s wall %-6s no target          controller CPU %s"
                      % (CASES[case]["label"] + ":", figure, cpu_text))
    if all(case in cases for case in TMPFS_CASES):
        extra = CASES["tmpfs-10"]["count"] - CASES["tmpfs-01"]["count"]
        for phase in PHASES:
            for key, label in (("results", "task results"), ("modules", "module runs")):
                per = {}
                for side in SIDES:
                    one = table[side, "tmpfs-01", phase][key + "_low"]
                    ten = table[side, "tmpfs-10", phase][key + "_low"]
                    per[side] = (ten - one) / float(extra) if one is not None and ten is not None else None
                text = "%.1f" % per["site"] if per["site"] is not None else "-"
                plain = "%.1f" % per["plain"] if per["plain"] is not None else "-"
                if key == "results":
                    print("  %-12s added per extra mount, site.yml, %-7s %-5s target < 1 (a loop item; plain %s)  %s"
                          % (label, phase + ":", text, plain, verdict(per["site"], 0.99)))
                else:
                    print("  %-12s added per extra mount, site.yml, %-7s %-5s no target (plain %s)"
                          % (label, phase + ":", text, plain))
        for phase in PHASES:
            value = table["site", "tmpfs-10", phase]["reads_low"]
            print("  ramdisk_facts + *plan* module runs, site.yml, 10 tmpfs, %-7s %-3s aim 1 per run  %s"
                  % (phase + ":", value if value is not None else "-", verdict(value, 1)))
    print()
    print("Where the no-op re-run's task headers and module runs come from (site.yml, first good repetition;")
    print("'*' marks the tasks that are not ramdisk_plan or ramdisk_apply)")
    for case in cases:
        example = table["site", case, "re-run"]["example"]
        if example is None:
            print("  %s: no good run" % CASES[case]["label"])
            continue
        mark = "" if case in missed else " (within the targets)"
        print("  %s: %d headers, %d module runs%s" % (CASES[case]["label"], example["headers"], example["modules"],
                                                      mark))
        for name, status in example["tasks"]:
            ours = "ramdisk_plan" in name or "ramdisk_apply" in name or name.endswith(
                ("Decide the whole request on the host", "Carry out the mounts as journaled transactions"))
            print("    %s %-9s %s" % (" " if ours else "*", status, name))
        counts = {}
        for name in example["module_names"]:
            counts[name] = counts.get(name, 0) + 1
        print("    modules: %s" % (", ".join("%s x%d" % (name, runs) for name, runs in counts.items()) or "none"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="repetitions of each run, fresh hosts each time (3)")
    parser.add_argument("--cases", default=",".join(CASES),
                        help="the cases to run, comma-separated (default: %s)" % ",".join(CASES))
    parser.add_argument("--keep", action="store_true", help="leave the last repetition's containers running "
                        "(zram devices stay too: a later run of the bench removes them)")
    args = parser.parse_args()
    if not 1 <= args.runs <= 20:
        raise SystemExit("converge: --runs must be from 1 to 20")
    cases = [case for case in args.cases.split(",") if case]
    unknown = [case for case in cases if case not in CASES]
    if unknown or not cases:
        raise SystemExit("converge: --cases takes some of %s, not %s" % (", ".join(CASES), args.cases))
    skipped = []
    major = zram_major()
    if "zram" in cases and major is None:
        cases.remove("zram")
        skipped.append("zram case left out: this machine's kernel has no zram (no 'zram' line in /proc/devices)")
    # A SIGTERM (make interrupted, CI timeout) still removes the containers, through the finally below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    env = environment()
    inventory = write_inventory(args.runs, cases, major)
    every_host = [host_name(rep, side, case) for rep in range(1, args.runs + 1) for case in cases
                  for side in CASES[case]["sides"]]
    results = {(side, case, phase): [] for case in cases for side in CASES[case]["sides"] for phase in PHASES}
    loads = []
    zram_notes = []
    lab(inventory, env, every_host, "absent")  # leftovers of an interrupted run
    zram_notes += zram_remove_made()
    try:
        for rep in range(1, args.runs + 1):
            hosts = [host_name(rep, side, case) for case in cases for side in CASES[case]["sides"]]
            if "zram" in cases:
                zram_prepare([host_name(rep, "site", "zram")])
            loads.append(os.getloadavg()[0])
            started = time.monotonic()
            lab(inventory, env, hosts, "started")
            for case in cases:
                for side in CASES[case]["sides"]:
                    setup_host(host_name(rep, side, case), case)
            print("converge: repetition %d of %d: %d containers from %s up in %.1f s"
                  % (rep, args.runs, len(hosts), IMAGE, time.monotonic() - started), flush=True)
            for side in SIDES:
                for case in cases:
                    if side not in CASES[case]["sides"]:
                        continue
                    host = host_name(rep, side, case)
                    for phase in PHASES:
                        result = play(inventory, env, host, side, phase)
                        if phase == "re-run":
                            result["mounted"] = mounted(host)
                        results[side, case, phase].append(result)
                        print("converge:   %-8s %-16s %-6s %6.1f s%s"
                              % (side, CASES[case]["label"], phase, result["wall"],
                                 "  FAILED" if result["rc"] else ""), flush=True)
                        if result["rc"]:
                            show_failure(host, side, phase, result)
            if not (args.keep and rep == args.runs):
                lab(inventory, env, hosts, "absent")
                zram_notes += zram_remove_made()
    finally:
        if not args.keep:
            lab(inventory, env, every_host, "absent")
            zram_notes += zram_remove_made()
    loads.append(os.getloadavg()[0])
    report({key: summarise(value) for key, value in results.items()}, cases, args.runs, loads, skipped, zram_notes)


if __name__ == "__main__":
    main()
