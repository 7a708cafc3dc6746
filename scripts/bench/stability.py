# SPDX-License-Identifier: GPL-3.0-or-later
"""Run the benchmark twice back to back on the lab and print how far its RAM/disk ratios agree.

Runs playbooks/benchmark.yml on the lab (which must be up: `make lab`, the Makefile target does it)
twice, with the same profile and two run ids, and compares the two results.json: for each host, RAM
target, disk target and test (and mode: buffered or direct), the two ratios (each the report's ratio of the
comparison, from every run of the profile; one with no ratio in either run, such as against a no-op, is counted apart)
agree when the larger is at most 1.25 times the smaller. Prints the share that agree beside the target (80% for
quick, 90% for standard), the comparisons that disagree most, per test how many disagree and which side
(the disk's figure or the RAM target's) moved more, and how often each run called a comparison "no clear
difference". Then the role against fio run directly, taking turns on one tmpfs: per job figure, the median of the
ratios of the same round of the two sides in a turn (target within 10%). Run through `make bench-stability`
(PROFILE=standard for the other); `--direct-only RUN_ID` repeats only that check, `--direct FILE` reprints a saved one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import REPO_ROOT, ansible_playbook, load_bench  # noqa: E402  (scripts/bench, also when loaded by its path)

RESULTS = os.path.join(REPO_ROOT, "build", "bench-stability")
TARGETS = {"quick": 0.80, "standard": 0.90, "thorough": 0.90}
AGREE = 1.25
DIRECT_TOLERANCE = 0.10


def benchmark(profile, run_id, extra):
    # As the Makefile sets them, so the script also runs by itself (`--direct-only`, more rounds).
    env = dict(os.environ)
    env.setdefault("ANSIBLE_CONFIG", os.path.join(REPO_ROOT, "scripts", "ansible.cfg"))
    env.setdefault("ANSIBLE_COLLECTIONS_PATH", os.path.join(REPO_ROOT, ".cache", "collections"))
    argv = [ansible_playbook(), "-i", "inventories/lab", "playbooks/benchmark.yml", "-e",
            json.dumps({"benchmark_profile": profile, "benchmark_run_id": run_id, "benchmark_results_dir": RESULTS})] + extra
    started = time.monotonic()
    log_path = os.path.join(RESULTS, run_id + ".log")
    with open(log_path, "w", encoding="utf-8") as log:
        returncode = subprocess.call(argv, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
    if returncode != 0:
        with open(log_path, encoding="utf-8") as log:
            sys.stdout.write(log.read()[-5000:])
        raise SystemExit("stability: benchmark run %s failed (exit %d); log: %s"
                         % (run_id, returncode, os.path.relpath(log_path, REPO_ROOT)))
    with open(os.path.join(RESULTS, run_id, "results.json"), encoding="utf-8") as handle:
        return json.load(handle), time.monotonic() - started


def direct_fio(results, run_dir, profile, saved, runs=None):
    """The role against fio run directly (docker exec) on one tmpfs target of one lab host, taking turns: the
    role's fio test alone on that target (through ansible-playbook: a warm-up round and ROLE_ROUNDS rounds, the
    least the role runs, with the stopping rule capped there), and each of its fio runs again directly, in the same
    order, with the options fio recorded in the role's own output ("global options" and "job options"), so the
    only difference is that the role ran it; ``runs`` turns, every other one with fio first. The role runs its
    rounds in one ansible-playbook run, so the sides cannot alternate run by run: round n of the role is paired
    with round n of the direct side in the same turn, one block of rounds apart. Taking turns puts the host's slow
    drift (minutes apart, a sequential figure moved by 15% between the role's run and a check after it) on both
    sides alike, and changing who goes first puts on both sides what one side leaves behind for the next (page
    cache, freed memory). The role must report what fio itself reports, within 10% for every job's main figure
    (direct_verdicts): the role's side is the figures the role recorded per round (the manifest's probes), the
    direct side fio's own JSON.

    Turns: 4 for quick (20 pairs a figure), 2 otherwise (10). quick's fio jobs ran 1 s when this was measured, and
    one such run scattered by about 10% (the coefficient of variation of 32 runs of the same jobs with fio alone,
    two interleaved sets of 16: the sets' medians 1-7% apart); 8 pairs a side left a median 20% off in one check
    out of three. They run 3 s now, and at least 16 pairs are kept. Every pair's figures go to ``saved`` (<run
    id>-direct.json beside the results), so the scatter behind a gap can be read; the role's turns are the runs
    <that file's name>-<turn>."""
    if runs is None:
        runs = 4 if profile == "quick" else 2
    for host in results["hosts"]:
        with open(os.path.join(run_dir, host, "manifest.json"), encoding="utf-8") as handle:
            manifest = json.load(handle)
        rams = fio_rams(manifest)
        if rams:
            break
    else:
        return None
    target = rams[0]
    scratch = target["path"].rstrip("/") + "/ramdisk-stability-direct"
    samples = []  # every figure of every round of every turn, written out beside the results so the scatter can be read
    gaps = []  # each turn's seconds between one fio run's end and the next one's start, on each side

    def role_turn(number):
        """The role's fio test on the target: a warm-up and ROLE_ROUNDS rounds; returns [(item, fio document)] of
        every run it made, in the order it ran them."""
        run_id = "%s-%d" % (os.path.splitext(os.path.basename(saved))[0], number)
        extra = {"benchmark_profile": profile, "benchmark_tests": ["fio"], "benchmark_runs": ROLE_ROUNDS,
                 "benchmark_max_runs": ROLE_ROUNDS,
                 "benchmark_targets": [{"path": target["path"], "label": target["label"]}],
                 "benchmark_disk_path": None, "benchmark_charts": False, "benchmark_memory_interval": 0}
        benchmark(profile, run_id, ["--limit", host, "-e", json.dumps(extra)])
        host_dir = os.path.join(RESULTS, run_id, host)
        with open(os.path.join(host_dir, "manifest.json"), encoding="utf-8") as handle:
            runs_made = role_runs(json.load(handle), host_dir)
        samples.extend(role_samples(number, runs_made))
        docs = [doc for _item, _result, doc in runs_made]
        gaps.append({"turn": number, "side": "role", "gaps": run_gaps(docs)})
        return [(item, doc) for item, _result, doc in runs_made]

    def direct_turn(number, runs_made):
        """Each of the role's fio runs again, directly, with the options fio recorded in the role's output, paced
        as the role's runs were: each starts as long after the previous one ended as the role's did (about 0.8 s
        of Ansible between loop items, against 0.1-0.2 s for docker exec alone), each after a syncfs as the role's
        bench_probe does. Back to back, the direct side kept both cores busy for 5-6 s on end, which the role's
        runs never do."""
        wanted = run_gaps([doc for _item, doc in runs_made])
        ran, ends, startup = [], [], 0.0
        for index, (item, role_doc) in enumerate(runs_made):
            options = dict(role_doc["global options"], directory=scratch)
            argv = ["fio", "--output-format=json"] + ["--%s=%s" % pair for pair in sorted(options.items())]
            for job in role_doc["jobs"]:
                argv += ["--%s" % key if value == "" else "--%s=%s" % (key, value)
                         for key, value in job["job options"].items()]
            # As bench_probe does before each run: the file systems of the item's sync list are written out (the
            # target's and the one the role keeps its raw files in; benchmark_disk_path unset: /var/tmp).
            subprocess.run(["docker", "exec", host, "sync", "--file-system"] + sync_paths(item), check=True)
            if index and wanted[index - 1] is not None:
                # fio's clock is this machine's (a container shares its kernel); the start-up of docker exec and
                # fio is taken as long as the previous run's.
                time.sleep(max(0.0, ends[-1] + wanted[index - 1] - startup - time.time()))
            launched = time.time()
            output = subprocess.run(["docker", "exec", host] + argv, capture_output=True, text=True, check=True).stdout
            doc = json.loads(output[output.index("{"):])
            ends.append(doc["timestamp_ms"] / 1000.0)
            if doc["jobs"][0].get("job_start"):
                startup = max(0.0, doc["jobs"][0]["job_start"] / 1000.0 - launched)
            if not item["warmup"]:
                samples.extend(direct_samples(number, item, doc))
            ran.append(doc)
        gaps.append({"turn": number, "side": "fio", "gaps": run_gaps(ran)})

    subprocess.run(["docker", "exec", host, "mkdir", "-p", scratch], check=True)
    try:
        # Turns in the order role, direct, direct, role, role, direct...: whichever side goes first in a turn
        # meets the host as the other side left it, so neither side always goes first. A turn where fio goes
        # first uses the options of the role's previous run (the same profile on the same target).
        runs_made = None
        for number in range(1, runs + 1):
            if number % 2:
                runs_made = role_turn(number)
                direct_turn(number, runs_made)
            else:
                direct_turn(number, runs_made)
                runs_made = role_turn(number)
    finally:
        subprocess.run(["docker", "exec", host, "rm", "-rf", scratch], check=False)
        with open(saved, "w", encoding="utf-8") as handle:
            json.dump({"host": host, "target": target["path"], "profile": profile, "samples": samples, "gaps": gaps},
                      handle, indent=1)
    return host, target["path"], samples, gaps


# Measured rounds of each role turn (after its warm-up): the least the role runs.
ROLE_ROUNDS = 5


def fio_rams(manifest):
    """The tmpfs targets of a schema 3 manifest that its fio jobs ran on (probes whose item is a JOB_FIGURES job)."""
    measured = set(probe["item"]["label"] for probe in manifest.get("probes") or ()
                   if probe["item"]["probe"] in JOB_FIGURES)
    return [target for target in manifest["targets"] if target["kind"] == "ram" and target["backend"] == "tmpfs"
            and target["label"] in measured]


def role_runs(manifest, host_dir):
    """[(item, result, fio document)]: every fio job the role ran on the manifest's one target (JOB_FIGURES), the
    warm-up included, in the order it ran them; each document is the raw file the probe kept (result.raw), fetched
    into HOST_DIR beside the manifest."""
    (target,) = manifest["targets"]
    found = []
    for probe in manifest["probes"]:
        item, result = probe["item"], probe["result"]
        if item["probe"] not in JOB_FIGURES or item["label"] != target["label"]:
            continue
        with open(os.path.join(host_dir, os.path.basename(result["raw"])), encoding="utf-8") as handle:
            text = handle.read()
        found.append((item, result, json.loads(text[text.index("{"):])))
    return found


def sync_paths(item):
    """The file systems bench_probe wrote out before ITEM ran (its sync list), each by a path that still exists once
    the role's run is over: the run's raw directory is removed by then, and the directory that held the run's
    directory is on its file system."""
    raw_dir = os.path.dirname(item["raw"])
    return [os.path.dirname(os.path.dirname(path)) if path == raw_dir else path for path in item["sync"]]


def role_samples(number, runs_made):
    """The role's side of turn NUMBER: each measured round's main figures as the role recorded them (result.figures,
    parsed by the registry from fio's output)."""
    samples = []
    for item, result, _doc in runs_made:
        if item["warmup"]:
            continue
        for op, metric in JOB_FIGURES[item["probe"]]:
            for found in result["figures"]:
                if found.get("op") == op and found.get(metric) is not None:
                    samples.append({"turn": number, "round": item["round"], "side": "role", "job": item["probe"],
                                    "mode": item["mode"], "op": op, "metric": metric, "value": float(found[metric]),
                                    "time": time.time()})
    return samples


def direct_samples(number, item, doc):
    """The direct side of turn NUMBER for the role's ITEM run again: the main figures fio itself reports."""
    samples = []
    for job in doc["jobs"]:
        for op, metric in JOB_FIGURES[job["jobname"]]:
            samples.append({"turn": number, "round": item["round"], "side": "fio", "job": job["jobname"],
                            "mode": item["mode"], "op": op, "metric": metric, "value": float(job[op][metric]),
                            "time": time.time()})
    return samples


# Each fio job's main figure: what the report compares.
JOB_FIGURES = {
    "seq_write": (("write", "bw_bytes"),),
    "seq_read": (("read", "bw_bytes"),),
    "randrw": (("read", "iops"), ("write", "iops")),
    "fsync": (("write", "iops"),),
}


def run_gaps(docs):
    """Seconds from the end of each fio run (its JSON's timestamp_ms) to the start of the next one's job (job_start,
    which fio writes from 3.28 on; None where a run lacks it), for runs in the order they ran."""
    gaps = []
    for before, after in zip(docs, docs[1:]):
        start = (after.get("jobs") or [{}])[0].get("job_start")
        gaps.append((start - before["timestamp_ms"]) / 1000.0 if start and before.get("timestamp_ms") else None)
    return gaps


def direct_verdicts(samples, tolerance=DIRECT_TOLERANCE):
    """The role against fio directly, per job figure, from every turn's samples ({"turn", "round", "side": "role"
    or "fio", "job", "op", "metric", "value"}; checks saved before rounds have no "round": one run a side per
    turn). The verdict is the median of the pairs' ratios, role over fio, a pair being the same round of one turn
    on both sides: its two runs are one block of rounds apart (about 2 minutes for quick), so their ratio cancels
    the machine's slower drift, where the two sides' own medians keep it (this machine's speed drifted by 20-30%
    within one check); who goes first changes every other turn. Beside it: the
    95% interval of that median (order statistics, _bench.median_interval), in how many pairs the role was higher,
    and each side's median and min-max. A figure with no pair that has both sides is left out."""
    bench = load_bench()
    sides = {}
    for sample in samples:
        key = (sample["job"], sample["op"], sample["metric"])
        pair = (sample["turn"], sample.get("round"))
        sides.setdefault(key, {}).setdefault(sample["side"], {})[pair] = float(sample["value"])
    verdicts = []
    for key in sorted(sides):
        role, fio = sides[key].get("role", {}), sides[key].get("fio", {})
        pairs = sorted(set(role) & set(fio), key=lambda pair: (pair[0], pair[1] or 0))
        paired = [role[pair] / fio[pair] for pair in pairs if fio[pair]]
        if not paired:
            continue
        gap = bench.median(paired) - 1.0
        verdicts.append({
            "job": key[0], "op": key[1], "metric": key[2], "pairs": len(paired),
            "gap": gap, "interval": tuple(value - 1.0 for value in bench.median_interval(paired)),
            "role_higher": sum(1 for ratio in paired if ratio > 1.0),
            "role": bench.median(list(role.values())), "role_range": (min(role.values()), max(role.values())),
            "fio": bench.median(list(fio.values())), "fio_range": (min(fio.values()), max(fio.values())),
            "met": abs(gap) <= tolerance,
        })
    return verdicts


def print_direct(verdicts, gaps=()):
    bench = load_bench()
    for side in ("role", "fio"):
        seconds = [gap for turn in gaps if turn.get("side") == side for gap in turn["gaps"] if gap is not None]
        if seconds:
            print("  %s: %.2f s (%.2f-%.2f) from one fio run's end to the next one's start, median of %d"
                  % (side, bench.median(seconds), min(seconds), max(seconds), len(seconds)))
    for row in verdicts:
        print("  %s %s %s: role/fio per pair, median %+.0f%% (95%% interval %+.0f%% to %+.0f%%), role higher in %d of %d "
              "pairs (target within %.0f%%: %s); medians role %.4g (%.3g-%.3g), fio %.4g (%.3g-%.3g)"
              % ((row["job"], row["op"], row["metric"], 100 * row["gap"]) + tuple(100 * end for end in row["interval"])
                 + (row["role_higher"], row["pairs"], 100 * DIRECT_TOLERANCE, "met" if row["met"] else "not met",
                    row["role"]) + row["role_range"] + (row["fio"],) + row["fio_range"]))


def ratios(results):
    return dict(((row["host"], row["ram_label"], row["disk_label"], row["title"]), row) for row in results["ratios"])


def common_keys(one, two):
    """The comparisons both runs hold, each with a ratio in both (a schema 3 row has none where no ratio means
    anything: a side that is a no-op, a figure that could not be compared), and how many of those in both runs
    lack a ratio in either."""
    both = set(one) & set(two)
    keys = sorted(key for key in both if one[key].get("ratio") and two[key].get("ratio"))
    return keys, len(both) - len(keys)


def figures_moved(one, two, keys):
    """How many of the figures the ratios are made of (each target's median, per host and test) moved by more than
    AGREE between the two runs, disk and RAM apart: which side a disagreement comes from."""
    figures = {"disk": {}, "ram": {}}
    for key in keys:
        host, ram_label, disk_label, title = key
        for side, label, field in (("ram", ram_label, "ram_value"), ("disk", disk_label, "disk_value")):
            a, b = one[key][field], two[key][field]
            if a and b:
                figures[side][(host, label, title)] = max(a, b) / min(a, b) > AGREE
    return dict((side, (sum(found.values()), len(found))) for side, found in figures.items())


def gmeans(results):
    """Each target's geometric mean of its runs, per host, target, figure and mode (schema 3: buffered and direct are
    figures apart; None before), from results.json's records: how far each side of a ratio moved."""
    found = {}
    for record in results.get("records", ()):
        for name, value in record.items():
            if name.endswith("_gmean") and value:
                found[(record["host"], record["label"], record["tool"], record["test"], record["op"],
                       name[:-len("_gmean")], record.get("mode"))] = float(value)
    return found


def disagreement_by_test(first, second, keys):
    """Per test (the ratio's title): how many of its comparisons disagree by more than AGREE between the two runs,
    out of how many, and in how many of those the disk's geometric mean moved more between the runs than the RAM
    target's (the rest: RAM moved more). Rows whose sides the records do not give count as neither."""
    one, two = ratios(first), ratios(second)
    sides_one, sides_two = gmeans(first), gmeans(second)
    table = {}
    for key in keys:
        a, b = one[key], two[key]
        counts = table.setdefault(key[3], [0, 0, 0, 0])
        counts[1] += 1
        if max(a["ratio"], b["ratio"]) / min(a["ratio"], b["ratio"]) <= AGREE:
            continue
        counts[0] += 1
        moves = {}
        for side, label in (("ram", a["ram_label"]), ("disk", a["disk_label"])):
            figure = (a["host"], label, a["tool"], a["test"], a["op"], a["metric"], a.get("mode"))
            if sides_one.get(figure) and sides_two.get(figure):
                moves[side] = max(sides_one[figure], sides_two[figure]) / min(sides_one[figure], sides_two[figure])
        if len(moves) == 2:
            counts[2 if moves["disk"] >= moves["ram"] else 3] += 1
    return sorted(((title,) + tuple(counts) for title, counts in table.items()), key=lambda row: (-row[1], row[0]))


def check_direct(results, profile, saved):
    direct = direct_fio(results, os.path.join(RESULTS, results["run_id"]), profile, saved)
    if direct:
        host, path, samples, gaps = direct
        print("  on %s %s:" % (host, path))
        print_direct(direct_verdicts(samples), gaps)
        print("every turn's figures: %s" % os.path.relpath(saved, REPO_ROOT))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="quick", choices=sorted(TARGETS))
    parser.add_argument("--direct", metavar="FILE",
                        help="print the role-against-fio verdicts of a check already run (its <run id>-direct.json), "
                             "running nothing")
    parser.add_argument("--direct-only", metavar="RUN_ID",
                        help="run only the role against fio directly, on the lab as RUN_ID (a run of this script, "
                             "in build/bench-stability) measured it")
    parser.add_argument("extra", nargs="*", help="more ansible-playbook arguments, such as --limit")
    args = parser.parse_args()
    os.makedirs(RESULTS, exist_ok=True)
    if args.direct_only:
        with open(os.path.join(RESULTS, args.direct_only, "results.json"), encoding="utf-8") as handle:
            results = json.load(handle)
        # Files and role runs of its own, so an earlier check of the same run is kept.
        check_direct(results, results.get("profile") or args.profile, os.path.join(
            RESULTS, "%s-direct-%s.json" % (args.direct_only, time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))))
        return
    if args.direct:
        with open(args.direct, encoding="utf-8") as handle:
            saved = json.load(handle)
        print("the role against fio run directly on %s %s, %s profile:" % (saved["host"], saved["target"], saved["profile"]))
        print_direct(direct_verdicts(saved["samples"]), saved.get("gaps", ()))
        return
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    first, first_seconds = benchmark(args.profile, "%s-%s-a" % (stamp, args.profile), args.extra)
    print("stability: first run in %.0f s" % first_seconds, flush=True)
    second, second_seconds = benchmark(args.profile, "%s-%s-b" % (stamp, args.profile), args.extra)
    print("stability: second run in %.0f s" % second_seconds, flush=True)
    one, two = ratios(first), ratios(second)
    keys, without = common_keys(one, two)
    if not keys:
        raise SystemExit("stability: the two runs have no RAM/disk comparison with a ratio in common")
    spread = []
    for key in keys:
        a, b = one[key]["ratio"], two[key]["ratio"]
        spread.append((max(a, b) / min(a, b), key, a, b))
    agree = [item for item in spread if item[0] <= AGREE]
    share = len(agree) / float(len(spread))
    target = TARGETS[args.profile]
    runs = first.get("runs_per_figure")
    print()
    print("%s profile, %s runs per figure, two benchmark runs back to back on the lab" % (args.profile, runs))
    print("comparisons in both runs: %d; agree within %.2fx: %d (%.0f%%), target at least %.0f%%: %s" % (
        len(spread), AGREE, len(agree), 100 * share, 100 * target, "met" if share >= target else "not met"))
    if without:
        print("comparisons in both runs with no ratio in one of them (not counted above): %d" % without)
    unclear = [sum(1 for key in keys if not rows[key]["clear"]) for rows in (one, two)]
    print("called no clear difference: %d in the first run, %d in the second" % tuple(unclear))
    moved = figures_moved(one, two, keys)
    print("the figures behind the ratios that moved more than %.2fx between the runs: disk %d of %d, RAM %d of %d "
          "(a disk figure is the denominator of one ratio per RAM target of its host)"
          % ((AGREE,) + moved["disk"] + moved["ram"]))
    print("the comparisons that disagree, by test (which side's geometric mean moved more between the runs):")
    for title, disagree, total, disk, ram in disagreement_by_test(first, second, keys):
        if disagree:
            print("  %d of %d %s: the disk in %d, RAM in %d" % (disagree, total, title, disk, ram))
    print("the comparisons that moved most between the runs (ratio in run 1, run 2):")
    for factor, key, a, b in sorted(spread, reverse=True)[:8]:
        print("  %5.2fx  %s %s vs %s, %s: %.3g, %.3g" % (factor, key[0], key[1], key[2], key[3], a, b))
    print("the role against fio run directly, the same jobs, taking turns after the second run:")
    check_direct(second, args.profile, os.path.join(RESULTS, second["run_id"] + "-direct.json"))
    print("results: %s" % os.path.relpath(RESULTS, REPO_ROOT))


if __name__ == "__main__":
    main()
