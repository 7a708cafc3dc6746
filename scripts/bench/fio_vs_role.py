# SPDX-License-Identifier: GPL-3.0-or-later
"""Run one fio job directly and through the benchmark role, on the same tmpfs, and compare.

Mounts a tmpfs in a temporary directory (root needed), then takes turns. A role turn runs the role
against localhost (ansible-playbook, connection local, only that fio job) with benchmark_runs and
benchmark_max_runs 5: a warm-up round and 5 measured rounds, the stopping rule capped there, and
reads each measured round's fio JSON (the manifest's probes, result.raw). A direct turn runs fio
itself as many times, a warm-up and 5 runs, with the argv the registry builds for the same job
and target (plugins/module_utils/_probes.plan with the manifest's target, profile and cores; its
file systems written out first, as bench_probe does), checked against the options fio recorded
in the role's JSON. The role runs its rounds in one ansible-playbook run, so rounds cannot
alternate with direct runs one by one: round n of a role turn is paired with direct run n of the
same turn (one block of rounds apart), and every other turn the direct runs go first, so a drift
of the machine's load does not favour one side. The verdict is the median of the pairs' ratios;
exits 1 when it is more than --tolerance (10%) away from 1, 2 on a setup error. The tmpfs is
unmounted and every temporary file removed at the end.

    python scripts/bench/fio_vs_role.py [--job seq_read] [--profile standard] [--turns 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_PYTHON = os.path.join(REPO_ROOT, ".venv", "bin", "python")
COLLECTIONS = os.path.join(REPO_ROOT, ".cache", "collections")
METRIC = {"seq_write": ("write", "bw_bytes"), "seq_read": ("read", "bw_bytes"), "randrw": ("read", "iops"),
          "fsync": ("sync", "iops")}
# Measured rounds per role run (after its warm-up), and as many direct runs: the least the role takes.
ROUNDS = 5
DIRECT_DIR = "fio-vs-role-direct"

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ansible_playbook, load_bench  # noqa: E402  (scripts/bench, this script's own directory)

try:
    import yaml
except ImportError:  # the system Python may lack PyYAML; the project's venv has it
    if os.path.exists(VENV_PYTHON) and os.path.realpath(sys.executable) != os.path.realpath(VENV_PYTHON):
        os.execv(VENV_PYTHON, [VENV_PYTHON] + sys.argv)
    raise


def load_probes():
    """plugins/module_utils/_probes.py, the registry the role plans with (through .cache/collections, which
    scripts/lab/link_collection.sh makes)."""
    if COLLECTIONS not in sys.path:
        sys.path.insert(0, COLLECTIONS)
    from ansible_collections.ramdisk.provision.plugins.module_utils import _probes  # pylint: disable=import-outside-toplevel
    return _probes


def run_role(work, mount, job, profile, run_id):
    playbook = os.path.join(work, "role.yml")
    results = os.path.join(work, "results")
    play = [{
        "name": "The benchmark role on this machine, one fio job",
        "hosts": "localhost",
        "connection": "local",
        "gather_facts": False,
        "roles": [{
            "role": "ramdisk.provision.benchmark",
            "benchmark_profile": profile,
            "benchmark_targets": [{"path": mount, "label": "ram"}],
            "benchmark_disk_path": None,
            "benchmark_tests": ["fio"],
            "benchmark_fio_jobs": [job],
            # A warm-up and exactly ROUNDS rounds: the runs asked for, and the stopping rule capped there.
            "benchmark_runs": ROUNDS,
            "benchmark_max_runs": ROUNDS,
            "benchmark_results_dir": results,
            "benchmark_run_id": run_id,
            "benchmark_charts": False,
        }],
    }]
    with open(playbook, "w", encoding="utf-8") as handle:
        yaml.safe_dump(play, handle)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_CONFIG=os.path.join(REPO_ROOT, "scripts", "ansible.cfg"),
               ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false",
               # Here the controller is the host: Ansible's main process checks for results every 1 ms by
               # default, CPU that fio would otherwise have; on a remote host that polling is elsewhere.
               ANSIBLE_INTERNAL_POLL_INTERVAL="0.2",
               # The host side of the role runs on this machine's own Python, as on any managed host.
               ANSIBLE_PYTHON_INTERPRETER="/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable)
    proc = subprocess.run([ansible_playbook(), "-i", "localhost,", playbook], capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-2000:])
        raise SystemExit("fio_vs_role: the role failed (ansible-playbook exit %d)" % proc.returncode)
    host_dir = os.path.join(results, run_id, "localhost")
    with open(os.path.join(host_dir, "manifest.json"), encoding="utf-8") as handle:
        manifest = json.load(handle)
    return manifest, role_rounds(load_bench(), manifest, host_dir, job)


def role_rounds(bench, manifest, host_dir, job):
    """[(item, fio document)] of JOB's measured rounds in the manifest (schema 3: its probes, the warm-up left out),
    in round order; each document is the raw file the probe kept (result.raw, unpacked beside the manifest)."""
    if manifest.get("schema") != 3:
        raise SystemExit("fio_vs_role: the role wrote a schema %r manifest; this script reads schema 3"
                         % manifest.get("schema"))
    (target,) = manifest["targets"]
    rounds = []
    for probe in manifest["probes"]:
        item = probe["item"]
        if item["probe"] != job or item["label"] != target["label"] or item["warmup"]:
            continue
        with open(os.path.join(host_dir, os.path.basename(probe["result"]["raw"])), encoding="utf-8") as handle:
            rounds.append((item, bench.parse_fio_json(handle.read())))
    rounds.sort(key=lambda pair: pair[0]["round"])
    if [item["round"] for item, _doc in rounds] != list(range(1, ROUNDS + 1)):
        raise SystemExit("fio_vs_role: the role ran %s of %s on %s in rounds %s, not 1 to %d"
                         % (job, target["label"], target["path"], [item["round"] for item, _doc in rounds], ROUNDS))
    return rounds


def direct_items(probes, manifest, job, mount, raw_dir):
    """The items the registry plans for JOB on the role's target, as the role planned them (the manifest's target,
    profile and cores), with a test directory of their own in MOUNT and raw files in RAW_DIR: round 0 the warm-up,
    then ROUNDS runs. Returns (items, directories to make)."""
    (target,) = manifest["targets"]
    target = dict(target, path=mount)
    plan = probes.plan([target], manifest["profile_spec"], host="localhost", tests=("fio",), fio_jobs=(job,),
                       runs=ROUNDS, cores=int(manifest["cores"]), dir_name=DIRECT_DIR, raw_dir=raw_dir)
    if plan["errors"]:
        raise SystemExit("fio_vs_role: the registry plans no direct run: %s" % " ".join(plan["errors"]))
    items = [item for item in plan["items"] if item["probe"] == job]
    return items, [one["path"] for one in plan["dirs"]]


def run_direct(bench, probes, manifest, job, mount, raw_dir):
    """The registry's items for JOB (direct_items), each argv in order, each after its file systems are written out
    (bench_probe's syncfs); returns [(item, fio document)] of the measured runs (the warm-up left out). The test
    directory goes at the end."""
    items, directories = direct_items(probes, manifest, job, mount, raw_dir)
    for path in directories:
        os.makedirs(path, mode=0o700, exist_ok=True)
    docs = []
    try:
        for item in items:
            subprocess.run(["sync", "--file-system"] + list(item["sync"]), check=True)
            subprocess.run(item["argv"], check=True, env=dict(os.environ, LC_ALL="C"))
            with open(item["raw"], encoding="utf-8") as handle:
                doc = bench.parse_fio_json(handle.read())
            if not item["warmup"]:
                docs.append((item, doc))
    finally:
        shutil.rmtree(os.path.join(mount, DIRECT_DIR), ignore_errors=True)
    return docs


def figure(bench, doc, job):
    op, metric = METRIC[job]
    (record,) = [r for r in bench.fio_figures(doc, job) if r["op"] == op]
    return record[metric]


def options_of(doc):
    """Global and job options fio recorded, minus where it wrote."""
    options = dict(doc.get("global options") or {})
    options.update(doc["jobs"][0].get("job options") or {})
    for key in ("directory", "output"):
        options.pop(key, None)
    return options


def paired_ratios(role_rounds_, direct_runs):
    """Role over direct, round n against run n of the same turn: [(round, ratio)]."""
    direct = dict((item["round"], value) for item, value in direct_runs)
    return [(item["round"], value / direct[item["round"]]) for item, value in role_rounds_
            if direct.get(item["round"])]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    # One job (numjobs=1) by default: a job per core is thrown off by any other process on a shared
    # machine, which would measure the neighbours rather than the role.
    parser.add_argument("--job", choices=sorted(METRIC), default="randrw")
    parser.add_argument("--profile", choices=("quick", "standard", "thorough"), default="standard")
    parser.add_argument("--turns", type=int, default=2,
                        help="role runs (each a warm-up and %d rounds) and as many direct blocks, taking turns" % ROUNDS)
    parser.add_argument("--tolerance", type=float, default=0.10)
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("fio_vs_role: run as root: it mounts a tmpfs")
    if not shutil.which("fio"):
        raise SystemExit("fio_vs_role: fio is not installed here (apt-get install fio)")
    bench = load_bench()
    probes = load_probes()
    work = tempfile.mkdtemp(prefix="fio-vs-role.")
    mount = os.path.join(work, "ram")
    os.mkdir(mount)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1G,mode=0700", "tmpfs", mount], check=True)
    role_figures, direct_figures, ratios = [], [], []
    manifest = None
    try:
        for number in range(args.turns):
            raw_dir = os.path.join(work, "direct-%d" % number)
            os.mkdir(raw_dir)
            # Every other turn the direct runs go first, so a drift in the machine's load does not favour one side.
            # The first turn starts with the role: the direct runs are planned from its manifest.
            if number % 2:
                direct_runs = run_direct(bench, probes, manifest, args.job, mount, raw_dir)
                manifest, rounds = run_role(work, mount, args.job, args.profile, "turn%d" % number)
            else:
                manifest, rounds = run_role(work, mount, args.job, args.profile, "turn%d" % number)
                direct_runs = run_direct(bench, probes, manifest, args.job, mount, raw_dir)
            for (_item, role_doc), (_direct_item, direct_doc) in zip(rounds, direct_runs):
                if options_of(direct_doc) != options_of(role_doc):
                    raise SystemExit("fio_vs_role: not the same job: role %s, direct %s"
                                     % (options_of(role_doc), options_of(direct_doc)))
            role_values = [(item, figure(bench, doc, args.job)) for item, doc in rounds]
            direct_values = [(item, figure(bench, doc, args.job)) for item, doc in direct_runs]
            role_figures += [value for _item, value in role_values]
            direct_figures += [value for _item, value in direct_values]
            turn_ratios = paired_ratios(role_values, direct_values)
            ratios += [ratio for _round, ratio in turn_ratios]
            print("turn %d (%s first): role/direct per round %s" % (
                number + 1, "direct" if number % 2 else "role",
                ", ".join("%d: %.3f" % pair for pair in turn_ratios)))
            if os.listdir(mount):
                raise SystemExit("fio_vs_role: files left in the tmpfs: %s" % os.listdir(mount))
    finally:
        subprocess.run(["umount", mount], check=False)
        shutil.rmtree(work, ignore_errors=True)
    op, metric = METRIC[args.job]
    role, direct = statistics.median(role_figures), statistics.median(direct_figures)
    # A round and its direct run are one block of rounds apart in the same turn, the order swapped every other turn;
    # the median of those ratios is the verdict (medians of each side are printed too).
    difference = statistics.median(ratios) - 1.0
    unit = (lambda v: "%.1f MiB/s" % (v / 1048576.0)) if metric == "bw_bytes" else (lambda v: "%.0f IOPS" % v)
    print("fio job %s (%s %s), profile %s, tmpfs, %d turns of %d rounds a side, medians:"
          % (args.job, op, metric, args.profile, args.turns, ROUNDS))
    print("  direct fio : %s" % unit(direct))
    print("  via role   : %s" % unit(role))
    print("  difference : %+.1f%% (median of %d paired ratios, round n against direct run n; tolerance %.0f%%)"
          % (100 * difference, len(ratios), 100 * args.tolerance))
    if abs(difference) > args.tolerance:
        print("FAIL: the role's figure is more than %.0f%% away from the direct run" % (100 * args.tolerance))
        return 1
    print("OK: the role measures what fio measures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
