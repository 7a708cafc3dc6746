# SPDX-License-Identifier: GPL-3.0-or-later
"""scripts/bench/stability.py: the verdict of the role against fio run directly, from every turn's samples."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import bench_schema3
from bench_role_vars import assert_the_role_takes
from conftest import load_script

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO_ROOT, "scripts", "bench", "stability.py")


@pytest.fixture(scope="module")
def stability():
    return load_script("scripts/bench/stability.py", "bench_stability")


def turns(role, fio, job="seq_write", op="write", metric="bw_bytes"):
    """Samples as direct_fio writes them: turn n has role[n-1] and fio[n-1] (None: that side has no run)."""
    samples = []
    for number, (mine, theirs) in enumerate(zip(role, fio), 1):
        for side, value in (("role", mine), ("fio", theirs)):
            if value is not None:
                samples.append({"turn": number, "side": side, "job": job, "op": op, "metric": metric, "value": value})
    return samples


def test_paired_ratios_cancel_the_machines_drift(stability):
    # The machine slows down by half over the check; within each turn the role is 2% above fio. The two sides'
    # medians are far apart only because the role's runs fell at other moments; the turns' ratios are not.
    speeds = [10.0, 10.0, 9.0, 9.0, 6.0, 6.0, 5.0, 5.0]
    role = [speed * 1.02 for speed in speeds]
    (row,) = stability.direct_verdicts(turns(role, speeds))
    assert row["gap"] == pytest.approx(0.02)
    assert row["met"]
    assert row["role_higher"] == 8 and row["pairs"] == 8
    assert row["role"] == pytest.approx(7.5 * 1.02) and row["fio_range"] == (5.0, 10.0)


@pytest.mark.parametrize("factor, met", [(1.09, True), (1.11, False), (0.91, True), (0.89, False)])
def test_the_verdict_is_the_paired_median_within_ten_percent(stability, factor, met):
    fio = [100.0, 120.0, 90.0, 110.0, 105.0, 95.0]
    (row,) = stability.direct_verdicts(turns([value * factor for value in fio], fio))
    assert row["gap"] == pytest.approx(factor - 1.0)
    assert row["met"] is met


def test_the_interval_and_the_count_show_a_scatter(stability):
    # Nine turns with ratios 0.8 ... 1.2: the median is 1.0, the role higher in four, and the 95% interval
    # of the median (order statistics for nine values: the 2nd lowest to the 2nd highest) spans -15% to +15%.
    ratios = [0.8, 0.85, 0.9, 0.95, 1.0, 1.05, 1.1, 1.15, 1.2]
    fio = [1000.0] * len(ratios)
    (row,) = stability.direct_verdicts(turns([1000.0 * ratio for ratio in ratios], fio))
    assert row["gap"] == pytest.approx(0.0)
    assert row["role_higher"] == 4
    assert row["interval"][0] == pytest.approx(-0.15) and row["interval"][1] == pytest.approx(0.15)


def test_a_turn_with_one_side_only_is_left_out(stability):
    samples = turns([110.0, 200.0, 110.0], [100.0, None, 100.0])
    samples += turns([None, None, 5.0], [None, None, 4.0], job="fsync", op="write", metric="iops")
    rows = stability.direct_verdicts(samples)
    assert [(row["job"], row["pairs"]) for row in rows] == [("fsync", 1), ("seq_write", 2)]
    assert rows[1]["gap"] == pytest.approx(0.10)


def test_the_script_prints_a_saved_check(tmp_path):
    saved = tmp_path / "run-direct.json"
    gaps = [{"turn": 1, "side": "role", "gaps": [0.8, 0.7, 0.9]}, {"turn": 1, "side": "fio", "gaps": [0.75, None, 0.85]}]
    saved.write_text(json.dumps({"host": "lab-build", "target": "/tmp", "profile": "quick",
                                 "samples": turns([5.0e9, 5.5e9], [5.0e9, 5.0e9]), "gaps": gaps}))
    result = subprocess.run([sys.executable, SCRIPT, "--direct", str(saved)], capture_output=True, text=True, check=True)
    assert "on lab-build /tmp, quick profile" in result.stdout
    assert "seq_write write bw_bytes: role/fio per pair, median +5%" in result.stdout
    assert "role higher in 1 of 2 pairs (target within 10%: met)" in result.stdout
    assert "role: 0.80 s (0.70-0.90) from one fio run's end to the next one's start, median of 3" in result.stdout
    assert "fio: 0.80 s (0.75-0.85) from one fio run's end to the next one's start, median of 2" in result.stdout


def test_run_gaps_read_fios_own_clock(stability):
    # End of one run (timestamp_ms) to the start of the next one's job (job_start); a run without job_start
    # (fio before 3.28) gives None.
    docs = [{"timestamp_ms": 1000, "jobs": [{"job_start": 0}]},
            {"timestamp_ms": 2900, "jobs": [{"job_start": 1800}]},
            {"timestamp_ms": 4000, "jobs": [{}]},
            {"timestamp_ms": 6000, "jobs": [{"job_start": 4750}]}]
    assert stability.run_gaps(docs) == [0.8, None, 0.75]
    assert stability.run_gaps(docs[:1]) == []


def run_results(ram, disk, title="sequential write (fio)", host="lab-db"):
    """One run's results.json as far as disagreement_by_test reads it: per RAM target label its geometric mean, one
    disk (the denominator of every ratio), and the ratio rows the report takes between them."""
    records = [{"host": host, "label": label, "tool": "fio", "test": "seq_write", "op": "write",
                "bw_bytes_gmean": value} for label, value in list(ram.items()) + [("disk", disk)]]
    rows = [{"host": host, "ram_label": label, "disk_label": "disk", "title": title, "tool": "fio",
             "test": "seq_write", "op": "write", "metric": "bw_bytes", "ratio": value / disk} for label, value in ram.items()]
    return {"records": records, "ratios": rows}


def test_disagreements_are_counted_per_test_with_the_side_that_moved(stability):
    # The disk slowed from 100 to 70 between the runs (1.43x): both ratios on it disagree, led by the disk. On
    # another host a RAM target moved from 1000 to 700 while its disk held (RAM led); its other target held.
    first = run_results({"tmp": 1000.0, "cache": 500.0}, 100.0)
    second = run_results({"tmp": 1000.0, "cache": 500.0}, 70.0)
    other_first = run_results({"tmp": 1000.0, "pg": 800.0}, 100.0, host="lab-build")
    other_second = run_results({"tmp": 700.0, "pg": 820.0}, 100.0, host="lab-build")
    for run, other in ((first, other_first), (second, other_second)):
        run["records"] += other["records"]
        run["ratios"] += other["ratios"]
    keys = sorted(set(stability.ratios(first)) & set(stability.ratios(second)))
    assert stability.disagreement_by_test(first, second, keys) == [("sequential write (fio)", 3, 4, 2, 1)]


def test_each_round_of_a_turn_is_a_pair_of_its_own(stability):
    # A turn now holds a warm-up and five rounds a side: round n of the role pairs with round n of fio in the same
    # turn. Two turns, the role 5% above fio in every round while the machine slows round by round.
    samples = []
    for turn in (1, 2):
        for number, speed in enumerate((100.0, 90.0, 80.0, 70.0, 60.0), 1):
            for side, value in (("role", speed * 1.05), ("fio", speed)):
                samples.append({"turn": turn, "round": number, "side": side, "job": "randrw", "op": "read",
                                "metric": "iops", "value": value})
    (row,) = stability.direct_verdicts(samples)
    assert row["pairs"] == 10 and row["role_higher"] == 10
    assert row["gap"] == pytest.approx(0.05)
    assert row["fio_range"] == (60.0, 100.0)


def schema3_run(directory, run_id, host):
    """A role run of the fio test alone on one tmpfs target, as bench_schema3 makes it: <dir>/<run_id>/<host>/."""
    doc, files = bench_schema3.manifest(targets=(bench_schema3.RAM,), tests=("fio",), host=host)
    return doc, bench_schema3.write_run(os.path.join(str(directory), run_id), doc, files)


def test_the_role_side_comes_from_the_manifests_probes(stability, tmp_path):
    doc, host_dir = schema3_run(tmp_path, "run", "lab-db")
    assert [target["label"] for target in stability.fio_rams(doc)] == ["ram"]
    runs = stability.role_runs(doc, host_dir)
    # The warm-up and five rounds of the four jobs, in the order they ran, each with the fio JSON the probe kept.
    assert [(item["round"], item["probe"]) for item, _result, _doc in runs] == [
        (number, job) for number in range(6) for job in ("seq_write", "seq_read", "randrw", "fsync")]
    assert all(fio_doc["jobs"][0]["jobname"] == item["probe"] for item, _result, fio_doc in runs)
    samples = stability.role_samples(3, runs)
    assert {(sample["turn"], sample["side"]) for sample in samples} == {(3, "role")}
    assert sorted(set(sample["round"] for sample in samples)) == [1, 2, 3, 4, 5]
    # Per round: seq_write, seq_read and fsync one figure each, randrw its reads and writes.
    assert len(samples) == 5 * 5
    (item, result, _fio_doc) = runs[4 + 2]
    assert (item["round"], item["probe"]) == (1, "randrw")
    (write,) = [sample for sample in samples if (sample["round"], sample["job"], sample["op"]) == (1, "randrw", "write")]
    assert write["value"] == [found["iops"] for found in result["figures"] if found["op"] == "write"][0]


def test_a_target_qualifies_only_with_fio_probes_on_it(stability):
    doc, _files = bench_schema3.manifest(tests=("dd", "metadata"))
    assert stability.fio_rams(doc) == []
    doc, _files = bench_schema3.manifest(tests=("fio",))
    assert [target["label"] for target in stability.fio_rams(doc)] == ["ram"]


def test_direct_fio_takes_turns_with_the_role_round_by_round(stability, tmp_path, monkeypatch):
    # The whole check with the lab faked: the role's runs are schema 3 manifests, docker exec answers with the
    # fio JSON of the job it was asked for. Before each direct run the file systems the role's run wrote out are
    # written out too, the raw directory (gone with the role's run) by the directory that held it.
    calls = []

    def benchmark(profile, run_id, extra):
        variables = json.loads(extra[extra.index("-e") + 1])
        assert_the_role_takes(variables)
        calls.append(("role", run_id))
        schema3_run(tmp_path, run_id, "lab-db")
        return {}, 1.0

    def run(argv, **kwargs):
        if "fio" in argv:
            (name,) = [part.split("=", 1)[1] for part in argv if part.startswith("--name=")]
            directory = [part for part in argv if part.startswith("--directory=")]
            assert directory == ["--directory=/srv/ram/ramdisk-stability-direct"]
            calls.append(("fio", name))
            raw = bench_schema3.RAW.get((name, None)) or bench_schema3.RAW[(name, "direct")]
            with open(os.path.join(bench_schema3.PROBE_FIXTURES, raw), encoding="utf-8") as handle:
                return subprocess.CompletedProcess(argv, 0, stdout=handle.read(), stderr="")
        assert argv == ["docker", "exec", "lab-db", "sync", "--file-system", "/srv/ram", "/var/tmp"] or (
            argv[3:] in (["mkdir", "-p", "/srv/ram/ramdisk-stability-direct"],
                         ["rm", "-rf", "/srv/ram/ramdisk-stability-direct"])), argv
        return subprocess.CompletedProcess(argv, 0, stdout="", stderr="")

    doc, _host_dir = schema3_run(tmp_path, "first", "lab-db")
    monkeypatch.setattr(stability, "RESULTS", str(tmp_path))
    monkeypatch.setattr(stability, "benchmark", benchmark)
    monkeypatch.setattr(stability.subprocess, "run", run)
    monkeypatch.setattr(stability.time, "sleep", lambda seconds: None)
    saved = tmp_path / "first-direct.json"
    host, path, samples, gaps = stability.direct_fio({"hosts": ["lab-db"]}, str(tmp_path / "first"), "standard", str(saved))
    assert (host, path) == ("lab-db", doc["targets"][0]["path"])
    # Two turns: role first, then fio first; each side runs the warm-up and five rounds of the four jobs.
    sides = [side for side, _what in calls]
    assert sides == ["role"] + ["fio"] * 24 + ["fio"] * 24 + ["role"]
    rows = stability.direct_verdicts(samples)
    assert [(row["job"], row["op"], row["pairs"]) for row in rows] == [
        ("fsync", "write", 10), ("randrw", "read", 10), ("randrw", "write", 10), ("seq_read", "read", 10),
        ("seq_write", "write", 10)]
    assert [(turn["turn"], turn["side"], len(turn["gaps"])) for turn in gaps] == [
        (1, "role", 23), (1, "fio", 23), (2, "fio", 23), (2, "role", 23)]
    assert json.loads(saved.read_text())["samples"] == samples


def test_comparisons_without_a_ratio_are_counted_apart(stability):
    # Schema 3 ratio rows carry no ratio where none means anything (a no-op side): such a row in either run is
    # neither agreement nor disagreement.
    first = run_results({"tmp": 1000.0, "cache": 500.0}, 100.0)
    second = run_results({"tmp": 1000.0, "cache": 500.0}, 100.0)
    second["ratios"][1]["ratio"] = None
    one, two = stability.ratios(first), stability.ratios(second)
    keys, without = stability.common_keys(one, two)
    assert keys == [("lab-db", "tmp", "disk", "sequential write (fio)")] and without == 1
    assert stability.disagreement_by_test(first, second, keys) == [("sequential write (fio)", 0, 1, 0, 0)]


def test_buffered_and_direct_figures_move_apart(stability):
    # Schema 3: one test on one target in two modes is two figures. The disk's buffered figure (a cache) doubled
    # between the runs while RAM's buffered one held: that comparison disagrees, led by the disk. Direct, RAM moved
    # by 1.2x and the disk held: within AGREE, and no part of the buffered verdict.
    def run(buffered_disk, direct_ram):
        records, rows = [], []
        for mode, ram, disk in (("buffered", 1000.0, buffered_disk), ("direct", direct_ram, 100.0)):
            records += [{"host": "h", "label": label, "tool": "fio", "test": "seq_read", "op": "read", "mode": mode,
                         "bw_bytes_gmean": value} for label, value in (("tmp", ram), ("disk", disk))]
            rows.append({"host": "h", "ram_label": "tmp", "disk_label": "disk", "title": "sequential read, " + mode,
                         "tool": "fio", "test": "seq_read", "op": "read", "mode": mode, "metric": "bw_bytes",
                         "ratio": ram / disk})
        return {"records": records, "ratios": rows}

    first, second = run(100.0, 1000.0), run(200.0, 1200.0)
    keys, _without = stability.common_keys(stability.ratios(first), stability.ratios(second))
    assert stability.disagreement_by_test(first, second, keys) == [
        ("sequential read, buffered", 1, 1, 1, 0), ("sequential read, direct", 0, 1, 0, 0)]
