# SPDX-License-Identifier: GPL-3.0-or-later
"""scripts/bench/stability.py: the verdict of the role against fio run directly, from every turn's samples."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

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
    assert row["role_higher"] == 8 and row["turns"] == 8
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
    assert [(row["job"], row["turns"]) for row in rows] == [("fsync", 1), ("seq_write", 2)]
    assert rows[1]["gap"] == pytest.approx(0.10)


def test_the_script_prints_a_saved_check(tmp_path):
    saved = tmp_path / "run-direct.json"
    gaps = [{"turn": 1, "side": "role", "gaps": [0.8, 0.7, 0.9]}, {"turn": 1, "side": "fio", "gaps": [0.75, None, 0.85]}]
    saved.write_text(json.dumps({"host": "lab-build", "target": "/tmp", "profile": "quick",
                                 "samples": turns([5.0e9, 5.5e9], [5.0e9, 5.0e9]), "gaps": gaps}))
    result = subprocess.run([sys.executable, SCRIPT, "--direct", str(saved)], capture_output=True, text=True, check=True)
    assert "on lab-build /tmp, quick profile" in result.stdout
    assert "seq_write write bw_bytes: role/fio per turn, median +5%" in result.stdout
    assert "role higher in 1 of 2 turns (target within 10%: met)" in result.stdout
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
