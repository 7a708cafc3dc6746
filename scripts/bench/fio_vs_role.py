# SPDX-License-Identifier: GPL-3.0-or-later
"""Run one fio job directly and through the benchmark role, on the same tmpfs, and compare.

Mounts a tmpfs in a temporary directory (root needed), then alternates: the role against
localhost (ansible-playbook, connection local, only that fio job), then fio run directly with the
argv the role builds (same options from roles/benchmark/vars/main.yml, same file size, checked
against the options fio recorded in the role's JSON). Prints both medians and the difference;
exits 1 when they differ by more than --tolerance (10%), 2 on a setup error. The tmpfs is
unmounted and every temporary file removed at the end.

    python scripts/bench/fio_vs_role.py [--job seq_read] [--profile standard] [--rounds 3]
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

from common import ansible_playbook, load_bench  # scripts/bench, this script's own directory

try:
    import yaml
except ImportError:  # the system Python may lack PyYAML; the project's venv has it
    if os.path.exists(VENV_PYTHON) and os.path.realpath(sys.executable) != os.path.realpath(VENV_PYTHON):
        os.execv(VENV_PYTHON, [VENV_PYTHON] + sys.argv)
    raise


def role_vars():
    with open(os.path.join(REPO_ROOT, "roles", "benchmark", "vars", "main.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


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
            # One round per role run: the rounds alternate with the direct runs.
            "benchmark_runs": 1,
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
    (target,) = manifest["targets"]
    (round_files,) = target["fio"]
    (name,) = round_files if isinstance(round_files, list) else [round_files]
    with open(os.path.join(host_dir, name), encoding="utf-8") as handle:
        text = handle.read()
    doc = json.loads(text[text.index("{"):])
    return target, doc


def direct_argv(bench, variables, job, profile, mount, output, size_bytes):
    """The argv the role builds for one job on a RAM target (fio.yml), from the same definitions."""
    spec = variables["__benchmark_fio_jobs"][job]
    runtime = variables["__benchmark_profiles"][profile]["fio_runtime"]
    mib = size_bytes // (1024 * 1024)
    numjobs = min(len(os.sched_getaffinity(0)), mib) if spec["per_core"] else 1
    options = [tuple(pair) for pair in spec["options"]] + [("numjobs", numjobs), ("size", (mib // numjobs) * 1024 * 1024),
                                                           ("direct", 0)]
    global_options = [("runtime", runtime)] + [tuple(pair) for pair in variables["__benchmark_fio_common"]]
    return bench.fio_argv(job, options, mount, output, global_options)


def run_direct(bench, variables, args, mount, output, size_bytes):
    argv = direct_argv(bench, variables, args.job, args.profile, mount, output, size_bytes)
    subprocess.run(argv, check=True, env=dict(os.environ, LC_ALL="C"))
    with open(output, encoding="utf-8") as handle:
        return bench.parse_fio_json(handle.read())


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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    # One job (numjobs=1) by default: a job per core is thrown off by any other process on a shared
    # machine, which would measure the neighbours rather than the role.
    parser.add_argument("--job", choices=sorted(METRIC), default="randrw")
    parser.add_argument("--profile", choices=("quick", "standard", "thorough"), default="standard")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tolerance", type=float, default=0.10)
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("fio_vs_role: run as root: it mounts a tmpfs")
    if not shutil.which("fio"):
        raise SystemExit("fio_vs_role: fio is not installed here (apt-get install fio)")
    bench = load_bench()
    variables = role_vars()
    work = tempfile.mkdtemp(prefix="fio-vs-role.")
    mount = os.path.join(work, "ram")
    os.mkdir(mount)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1G,mode=0700", "tmpfs", mount], check=True)
    role_figures, direct_figures = [], []
    size = None
    try:
        for number in range(args.rounds):
            # Alternate which side goes first, so a drift in the machine's load does not favour one.
            output = os.path.join(work, "direct-%d.json" % number)
            if number % 2:
                direct_doc = run_direct(bench, variables, args, mount, output, size)
                target, role_doc = run_role(work, mount, args.job, args.profile, "round%d" % number)
            else:
                target, role_doc = run_role(work, mount, args.job, args.profile, "round%d" % number)
                size = target["file_size_bytes"]
                direct_doc = run_direct(bench, variables, args, mount, output, size)
            role_figures.append(figure(bench, role_doc, args.job))
            if options_of(direct_doc) != options_of(role_doc):
                raise SystemExit("fio_vs_role: not the same job: role %s, direct %s" % (options_of(role_doc), options_of(direct_doc)))
            direct_figures.append(figure(bench, direct_doc, args.job))
            print("round %d: role %.4g, direct %.4g" % (number + 1, role_figures[-1], direct_figures[-1]))
            if os.listdir(mount):
                raise SystemExit("fio_vs_role: files left in the tmpfs: %s" % os.listdir(mount))
    finally:
        subprocess.run(["umount", mount], check=False)
        shutil.rmtree(work, ignore_errors=True)
    op, metric = METRIC[args.job]
    role, direct = statistics.median(role_figures), statistics.median(direct_figures)
    # Each round's two runs are back to back, so their ratio cancels the machine's load of the
    # moment; the median of those ratios is the verdict (medians of each side are printed too).
    difference = statistics.median(r / d for r, d in zip(role_figures, direct_figures)) - 1.0
    unit = (lambda v: "%.1f MiB/s" % (v / 1048576.0)) if metric == "bw_bytes" else (lambda v: "%.0f IOPS" % v)
    print("fio job %s (%s %s), profile %s, tmpfs, medians of %d rounds:" % (args.job, op, metric, args.profile, args.rounds))
    print("  direct fio : %s" % unit(direct))
    print("  via role   : %s" % unit(role))
    print("  difference : %+.1f%% (median of the rounds' paired ratios; tolerance %.0f%%)"
          % (100 * difference, 100 * args.tolerance))
    if abs(difference) > args.tolerance:
        print("FAIL: the role's figure is more than %.0f%% away from the direct run" % (100 * args.tolerance))
        return 1
    print("OK: the role measures what fio measures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
