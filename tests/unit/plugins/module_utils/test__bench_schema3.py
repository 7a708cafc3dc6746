# SPDX-License-Identifier: GPL-3.0-or-later
"""Records, figures and comparisons from a schema 3 manifest (the probes' results), built by bench_schema3 from
_probes.plan()'s items and the registry's parsers on real raw output; and the decision rule's false alarms in A/A."""

from __future__ import annotations

import random

import pytest

import bench_schema3
from ansible_collections.ramdisk.provision.plugins.module_utils import _bench
from ansible_collections.ramdisk.provision.plugins.module_utils import _bench_stats as stats


def records_of(doc, files=None, warmups=False):
    records, problems = _bench.host_records(doc, (files or {}).__getitem__, warmups=warmups)
    assert problems == []
    return records


def rows_of(doc):
    runs = records_of(doc)
    return stats.probe_ratio_rows(stats.summarize(runs), runs)


def one(rows, probe, mode=None, op=None):
    found = [row for row in rows if row["probe"] == probe and (mode is None or row["mode"] == mode)
             and (op is None or row["op"] == op)]
    assert len(found) == 1, (probe, mode, op, found)
    return found[0]


def test_records_come_from_the_results_figures_warm_ups_only_when_asked():
    doc, files = bench_schema3.manifest()
    measured = records_of(doc)
    everything = records_of(doc, warmups=True)
    assert measured and all(record["round"] >= 1 and not record["warmup"] for record in measured)
    warm = [record for record in everything if record["warmup"]]
    assert warm and all(record["round"] == 0 for record in warm)
    assert len(everything) == len(measured) + len(warm)
    # The figure is the parser's, as the host returned it: no raw file is read (the read_raw here has none).
    first = [entry for entry in doc["probes"] if not entry["item"]["warmup"]][0]
    record = [r for r in measured if (r["probe"], r["label"], r["round"]) == (first["item"]["probe"],
              first["item"]["label"], first["item"]["round"])][0]
    assert record["bw_bytes"] == first["result"]["figures"][0]["bw_bytes"]
    assert set(_bench.COLUMNS + _bench.PROBE_COLUMNS) <= set(record)


def test_each_record_carries_mode_row_label_device_share_and_counters():
    doc, _files = bench_schema3.manifest()
    records = records_of(doc)
    disk = [r for r in records if r["label"] == "disk" and r["probe"] == "write_dsync"][0]
    assert (disk["mode"], disk["row_label"], disk["device_share"]) == ("sync", "sync", 1.0)
    assert disk["device_stack"] == "vda1 > vda" and disk["device_write_bytes"] == 8 * 1024 * 1024
    assert disk["judged_metric"] == "bw_bytes" and disk["higher_is_better"] is True
    cached = [r for r in records if r["label"] == "disk" and r["probe"] == "read" and r["mode"] == "buffered"][0]
    assert cached["row_label"] == "cache" and cached["device_share"] == 0.0
    ram = [r for r in records if r["label"] == "ram" and r["probe"] == "write_dsync"][0]
    assert (ram["row_label"], ram["device_share"], ram["device_stack"]) == ("ram", None, None)
    # randrw's writes are shown, its reads judged.
    ops = dict((r["op"], r["judged_metric"]) for r in records if r["probe"] == "randrw" and r["label"] == "ram")
    assert ops == {"read": "iops", "write": None}


def test_a_broken_entry_is_a_problem_not_a_failure():
    doc, _files = bench_schema3.manifest()
    doc["probes"][3]["result"] = {"row_label": "ram"}
    records, problems = _bench.host_records(doc, {}.__getitem__, warmups=True)
    assert len(problems) == 1 and "KeyError" in problems[0] and records


def test_figures_carry_n_cov_and_the_interval_with_its_true_coverage():
    doc, _files = bench_schema3.manifest()
    summary = stats.summarize(records_of(doc))
    record = [r for r in summary if r["label"] == "disk" and r["probe"] == "seq_write" and r["mode"] == "direct"][0]
    assert record["runs"] == 5 and record["stat_metric"] == "bw_bytes"
    assert 0 < record["cov"] < 0.1
    assert record["ci_low"] <= record["bw_bytes"] <= record["ci_high"]
    # 5 runs allow no 95% interval of the median: the lowest to the highest, 93.75%, and it says so.
    assert record["ci_coverage"] == pytest.approx(0.9375)
    assert stats.coverage_words(record["ci_coverage"], 5) == "93.8% only (lowest to highest of 5 runs)"
    assert stats.coverage_words(0.96875) == "95% (exact 96.9%)"


def test_one_comparison_per_job_and_mode_and_a_cache_row_is_shown_not_counted():
    doc, _files = bench_schema3.manifest()
    rows = rows_of(doc)
    keys = [(row["probe"], row["mode"], row["op"]) for row in rows]
    assert len(keys) == len(set(keys))
    # randrw once (its reads); the direct disk runs have no RAM side; the buffered pair is compared.
    assert [key for key in keys if key[0] == "randrw"] == [("randrw", "buffered", "read")]
    assert not [key for key in keys if key[1] == "direct"]
    cache = one(rows, "read", "buffered")
    assert cache["disk_row_label"] == "cache" and cache["counted"] is False and "cache" in cache["why"]
    assert cache["verdict"] == stats.AHEAD
    randrw = one(rows, "randrw")
    assert randrw["verdict"] == stats.AHEAD and randrw["counted"] and randrw["coverage"] >= 0.95
    assert randrw["ratio_low"] <= randrw["ratio"] <= randrw["ratio_high"] and 15 < randrw["ratio"] < 25
    assert randrw["ram_figure"]["n"] == randrw["disk_figure"]["n"] == 5


def test_behind_is_never_ahead():
    doc, _files = bench_schema3.manifest(ram_factor={"write_dsync": 0.5})
    row = one(rows_of(doc), "write_dsync")
    assert row["verdict"] == stats.BEHIND and row["clear"] and row["ratio"] < 1
    assert row["words"].endswith("slower")


def test_a_ratio_to_a_no_op_is_no_ratio_and_not_counted():
    """fdatasync on tmpfs returns in 0.2 us: judged by that latency, the ratio would be thousands."""
    doc, _files = bench_schema3.manifest()
    for entry in doc["probes"]:
        if entry["item"]["probe"] == "fsync":
            entry["item"]["figures"] = [{"op": "sync", "metric": "clat_ns_mean", "unit": "ns",
                                         "higher_is_better": False}]
            if entry["item"]["kind"] == "ram":
                for figure in entry["result"]["figures"]:
                    if figure["op"] == "sync":
                        figure["clat_ns_mean"] = 200.0
    row = one(rows_of(doc), "fsync")
    assert row["verdict"] == stats.NOT_COMPARABLE and row["ratio"] is None and not row["counted"]
    assert "no-op" in row["why"] and "0.20 \u00b5s" in row["why"]


def test_latency_bins_come_from_the_raw_fio_files_by_their_names():
    doc, files = bench_schema3.manifest()
    found = _bench.host_latency_bins(doc, files.__getitem__)
    assert set(found) == set(("lab3", label, job, op) for label in ("ram", "disk")
                             for job, op in (("randrw", "read"), ("randrw", "write"), ("fsync", "sync")))
    # Five measured rounds of the buffered pair merged; the warm-up and the direct disk runs left out.
    single = _bench.fio_latency_bins(_bench.parse_fio_json(files["randrw-disk-buffered-1.out"]), "randrw", "read")
    assert sum(found[("lab3", "disk", "randrw", "read")].values()) == 5 * sum(single.values())


def test_steal_above_two_percent_is_flagged():
    doc, _files = bench_schema3.manifest(steal=(("randrw", "disk", 2),))
    flags = _bench.steal_flags(doc)
    assert len(flags) == 2 and all("CPU steal 5.0%" in flag and "round 2" in flag for flag in flags)


def test_schema_1_and_2_records_carry_no_schema_3_columns(tmp_path):
    manifest = {"host": "h", "targets": [{"label": "ram", "path": "/r", "kind": "ram", "backend": "tmpfs",
                                          "compile": [{"round": 1, "seconds": 2.0}]}]}
    records, problems = _bench.host_records(manifest, {}.__getitem__)
    assert problems == [] and "mode" not in records[0]
    assert list(stats.summarize(records)[0]) == list(_bench.summarize(records)[0])


# --- A/A: two samples of one thing -----------------------------------------------------------------

def test_an_a_a_run_of_two_tmpfs_targets_is_counted():
    twin = dict(bench_schema3.RAM, label="twin", path="/srv/twin", kind="disk")
    doc, _files = bench_schema3.manifest(ram_factor=dict((key, 1.0) for key in bench_schema3.RAM_FACTOR),
                                         targets=(bench_schema3.RAM, twin))
    found = stats.aa_check(doc)
    assert found["problems"] == []
    assert found["comparisons"] == 9 and found["clear"] == 1 and 0.3 < found["p_value"] < 0.4
    # Metadata: its four figures moved together by one chance draw, one job called clear, not four.
    assert [row["probe"] for row in found["rows"] if row["verdict"] != stats.UNCLEAR] == ["metadata"]
    # The same targets with one really faster (1.5 to 50 times): every job is clear.
    doc, _files = bench_schema3.manifest(ram_factor={"metadata": 1.5}, targets=(bench_schema3.RAM, twin))
    found = stats.aa_check(doc)
    assert found["clear"] == found["comparisons"] == 9 and found["p_value"] < 1e-6


def test_the_decision_rule_calls_at_most_five_percent_of_a_a_comparisons_clear():
    """Many comparisons of 5 to 15 runs a side, both drawn from one lognormal distribution (a figure with a 20% spread):
    the exact interval calls at most 5% of them clear. Its own false-alarm rate is 1 - coverage, 4.99% at worst
    (15 against 14 runs) and 4.4% on average over these sizes."""
    rates = [1 - stats.log_ratio_interval(range(1, n + 1), range(1, m + 1))["coverage"]
             for n in range(5, 16) for m in range(5, 16)]
    assert max(rates) <= 0.05
    rng = random.Random(20261129)
    trials = 1000
    clear = 0
    for _trial in range(trials):
        n, m = rng.randint(5, 15), rng.randint(5, 15)
        ram = [rng.lognormvariate(0, 0.2) for _index in range(n)]
        disk = [rng.lognormvariate(0, 0.2) for _index in range(m)]
        clear += stats.compare(ram, disk)["verdict"] != stats.UNCLEAR
    assert clear <= 0.05 * trials, clear
    # And it is what the rule's rate predicts, not a lucky draw: within three standard deviations of it.
    expected = trials * sum(rates) / len(rates)
    assert abs(clear - expected) <= 3 * (expected * (1 - expected / trials)) ** 0.5, (clear, expected)


def test_the_a_a_gate_in_numbers():
    """Why the A/A gate should read p_value: at the rule's 4.4%, 2 clear of 20 (10%) comes one time in five."""
    assert stats.binomial_tail(2, 20, 0.0443) == pytest.approx(0.22, abs=0.01)
    assert stats.binomial_tail(0, 20, 0.05) == 1.0
    assert stats.binomial_tail(5, 20, 0.05) < 0.01


def test_a_schema_3_run_held_against_an_earlier_one_keeps_its_modes_apart():
    doc, _files = bench_schema3.manifest()
    summary = stats.summarize(records_of(doc))
    same = _bench.compare_runs(summary, summary)
    keys = [(row["label"], row["test"], row["mode"]) for row in same]
    assert ("disk", "seq_read", "buffered") in keys and ("disk", "seq_read", "direct") in keys
    assert len(set((row["label"], row["test"], row["mode"], row["op"]) for row in same)) == len(same)
    assert not [row for row in same if row["changed"]]
    slower = []
    for record in summary:
        record = dict(record)
        if (record["label"], record["probe"], record["mode"]) == ("disk", "seq_read", "direct"):
            for key in [key for key in record if key.startswith("bw_bytes")]:
                record[key] = record[key] / 2
        slower.append(record)
    moved = [row for row in _bench.compare_runs(summary, slower) if row["changed"]]
    assert [(row["label"], row["test"], row["factor"]) for row in moved] == [("disk", "seq_read", 0.5)]
