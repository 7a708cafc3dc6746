# SPDX-License-Identifier: GPL-3.0-or-later
"""The seeds profile's parsers and tables, on real output of dd, bonnie++ 2.00a, fio 3.33 and PostgreSQL 15's
pg_test_fsync, captured from a scaled-down run on the lab's database image (tests/unit/fixtures/run-seeds/)."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.ramdisk.provision.plugins.module_utils import _bench

HOST = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "fixtures",
                    "run-seeds", "lab-debian12")


def raw(name):
    with open(os.path.join(HOST, name), encoding="utf-8") as handle:
        return handle.read()


@pytest.fixture(scope="module")
def sections():
    return _bench.dd_sections(raw("seeds.txt"))


@pytest.fixture(scope="module")
def host():
    manifest = json.loads(raw("manifest.json"))
    return _bench.host_records(manifest, raw)


def test_bonnie_too_quick_on_tmpfs_keeps_the_latency(sections):
    figures = dict((f["op"], f) for f in _bench.parse_bonnie_csv(sections["ram files 1"]))
    assert list(figures) == list(_bench.BONNIE_OPS)
    assert all(f["iops"] is None and f["too_fast"] for f in figures.values())
    assert figures["create_seq"]["lat_ns_max"] == 2259000.0 and figures["delete_random"]["lat_ns_max"] == 2857000.0


def test_bonnie_rates_on_disk(sections):
    figures = dict((f["op"], f) for f in _bench.parse_bonnie_csv(sections["disk files 1"]))
    timed = [f for f in figures.values() if f["iops"] is not None]
    assert timed and all(f["iops"] > 0 and not f["too_fast"] for f in timed)
    assert all(f["lat_ns_max"] > 0 for f in figures.values())


@pytest.mark.parametrize("text, nanoseconds", [("193us", 193e3), ("1430ms", 1.43e9), ("2s", 2e9), ("+++", None)])
def test_bonnie_latency_units(text, nanoseconds):
    assert _bench._bonnie_latency_ns(text) == nanoseconds


def test_bonnie_without_its_csv_line():
    with pytest.raises(ValueError, match="no CSV line in bonnie"):
        _bench.parse_bonnie_csv("Writing intelligently...done\n")


def test_pg_test_fsync_every_method_with_a_rate(sections):
    figures = _bench.parse_pg_test_fsync(sections["ram pg_test_fsync 1"])
    by_key = dict(((f["test"], f["op"]), f) for f in figures)
    assert set(test for test, _op in by_key) == {"one_8k_write", "two_8k_writes", "open_sync_sizes",
                                                 "fsync_other_descriptor", "no_sync"}
    assert ("one_8k_write", "fsync_writethrough") not in by_key        # n/a on Linux
    assert ("open_sync_sizes", "2x8kB_open_sync_writes") in by_key and ("open_sync_sizes", "16x1kB_open_sync_writes") in by_key
    fdatasync = by_key[("one_8k_write", "fdatasync")]
    assert fdatasync["iops"] > 1000 and fdatasync["clat_ns_mean"] > 0
    with pytest.raises(ValueError, match="pg_test_fsync"):
        _bench.parse_pg_test_fsync("could not open output file: Permission denied\n")


def test_dd_average_of_repeated_runs(sections):
    text = sections["ram seed_64k_write 1"]
    figure = _bench.dd_average(text, "write")
    runs = _bench.parse_dd(text)
    assert figure["repeats"] == len(runs) == 3
    rates = [run["bytes"] / run["seconds"] for run in runs]
    assert figure["bw_bytes"] == int(sum(rates) / 3) and figure["io_bytes"] == 3 * 256 * 65536


def test_one_dd_per_file_counts_files_per_second_of_the_wall_time():
    entry = {"kind": "dd_files", "test": "seed_files_dsync", "files": "200", "wall_seconds": "0.5"}
    (figure,) = _bench.seed_figures(entry, "")
    assert figure["iops"] == 400.0 and figure["runtime_ms"] == 500 and figure["io_bytes"] == 200 * 1024


def test_unknown_kind_is_a_problem_not_a_crash():
    with pytest.raises(KeyError):
        _bench.seed_figures({"kind": "hdparm"}, "")


def test_every_seed_figure_of_both_targets_has_two_runs_and_a_spread(host):
    records, problems = host
    assert problems == []
    summary = dict(((r["label"], r["tool"], r["test"], r["op"]), r) for r in _bench.summarize(records))
    for seed in _bench.SEEDS:
        for tool, test, op, metric, _higher, _title, _ram, _disk, _ratio in seed["rows"]:
            for label in ("ram", "disk"):
                record = summary[(label, tool, test, op)]
                assert record["runs"] == 2 and record["profile"] == "seeds"
                if record[metric] is None:
                    assert (tool, metric) == ("bonnie++", "iops") and record["too_fast"], (label, test, op)
                    continue
                assert record[metric + "_min"] <= record[metric] <= record[metric + "_max"], (label, test, op)
    # fio dbtest quoted as one IOPS figure: read and write together, per run.
    rw = summary[("ram", "fio", "dbtest", "readwrite")]
    assert rw["iops"] == pytest.approx(summary[("ram", "fio", "dbtest", "read")]["iops"]
                                       + summary[("ram", "fio", "dbtest", "write")]["iops"], rel=0.1)


def test_seed_rows_put_ours_beside_the_published(host):
    records, _problems = host
    manifest = json.loads(raw("manifest.json"))
    rows = _bench.seed_rows(_bench.summarize(records), {"lab-debian12": {"pg_test_fsync": {"skipped": "x"}}})
    assert [seed["id"] for seed in rows] == list(_bench.SEED_IDS)
    tmp = rows[0]
    block = [row for row in tmp["rows"] if row["test"] == "seed_block_write"][0]
    assert block["published_ram"] == "1.4 GB/s" and block["published_disk"] == "285 MB/s"
    assert block["published_ratio"] == pytest.approx(4.91, abs=0.01)
    assert block["ram"]["value"] > 0 and block["disk"]["value"] > 0 and block["ratio"] > 0
    assert block["ratio_low"] <= block["ratio"] <= block["ratio_high"]
    latency = [row for row in rows[2]["rows"] if row["op"] == "read"][0]
    assert latency["metric"] == "clat_ns_p99" and latency["higher_is_better"] is False
    assert rows[3]["hosts"] == {"lab-debian12": {"skipped": "x"}}
    assert manifest["seed_skips"]["bonnie"] == ""


def test_seed_figures_in_the_ratio_table(host):
    records, _problems = host
    ratios = _bench.ratio_rows(_bench.summarize(records))
    titles = set(row["title"] for row in ratios)
    assert "one large block written (dd)" in titles and "dbtest p99 read latency (fio)" in titles
    assert "create files, sequential order, worst latency (bonnie++)" in titles
    assert all("seed test" in row["sentence"] for row in ratios)


@pytest.mark.parametrize("name, transactions", [("tpcb_like", 1000), ("select_only", 10000)])
def test_pgbench_output(name, transactions):
    """Real output of PostgreSQL 15's pgbench on the lab's database image (tests/unit/fixtures/pgbench/)."""
    fixtures = os.path.join(os.path.dirname(HOST), os.pardir, "pgbench")
    with open(os.path.join(fixtures, name + ".txt"), encoding="utf-8") as handle:
        figure = _bench.pgbench_figures(handle.read())
    assert figure["op"] == "transaction" and figure["iops"] > 0 and figure["clat_ns_mean"] > 0
    assert figure["total_ios"] > transactions


def test_pgbench_without_a_result():
    with pytest.raises(ValueError, match="pgbench output"):
        _bench.pgbench_figures('pgbench: error: connection to server on socket "/x/.s.PGSQL.5433" failed\n')


def test_pgbench_runs_become_records_with_ratios():
    with open(os.path.join(os.path.dirname(HOST), os.pardir, "pgbench", "tpcb_like.txt"), encoding="utf-8") as handle:
        text = handle.read()
    # The same output on both targets, rounds given as text (as ansible-core 2.17 writes them): no clear difference.
    manifest = {"host": "h", "profile": "quick", "targets": [
        {"label": label, "path": path, "kind": kind, "backend": backend,
         "pgbench": [{"test": "tpcb_like", "round": str(number), "output": text} for number in (1, 2)]}
        for label, path, kind, backend in (("ram", "/srv/ram", "ram", "tmpfs"), ("disk", "/var/tmp", "disk", "ext4"))]}
    records, problems = _bench.host_records(manifest, lambda name: "")
    assert problems == [] and len(records) == 4
    summary = _bench.summarize(records)
    assert all(r["tool"] == "pgbench" and r["runs"] == 2 for r in summary)
    (row,) = _bench.ratio_rows(summary)
    assert row["title"] == "TPC-B-like transactions (pgbench)" and row["words"] == "no clear difference"


def test_compile_rounds_become_records_with_ratios():
    # Build times as the role records them (rounds and seconds as text, as ansible-core 2.17 writes them): the
    # RAM builds all faster than every disk build, so the ratio is clear; the time keeps its spread.
    manifest = {"host": "h", "profile": "quick", "targets": [
        {"label": "ram", "path": "/srv/ram", "kind": "ram", "backend": "tmpfs",
         "compile": [{"round": "1", "seconds": "4.0"}, {"round": "2", "seconds": "5.0"}, {"round": "3", "seconds": "4.5"}]},
        {"label": "disk", "path": "/var/tmp", "kind": "disk", "backend": "ext4",
         "compile": [{"round": 1, "seconds": 9.0}, {"round": 2, "seconds": 10.0}, {"round": 3, "seconds": 6.0}]}]}
    records, problems = _bench.host_records(manifest, lambda name: "")
    assert problems == [] and len(records) == 6
    summary = _bench.summarize(records)
    ram = [r for r in summary if r["label"] == "ram"][0]
    assert (ram["runtime_ms"], ram["runtime_ms_min"], ram["runtime_ms_max"]) == (4500, 4000, 5000)
    assert _bench.human_metric("runtime_ms", ram["runtime_ms"]) == "4.50 s"
    (row,) = _bench.ratio_rows(summary)
    assert row["title"] == "build of a code base (compile)" and row["clear"]
    # The ratio is between the two sides' geometric means (every run counts), the figures shown stay the medians.
    ratio = (9.0 * 10.0 * 6.0) ** (1 / 3.0) / (4.0 * 5.0 * 4.5) ** (1 / 3.0)
    assert (row["ram_value"], row["disk_value"]) == (pytest.approx(1 / 4.5), pytest.approx(1 / 9.0))
    assert row["ratio"] == pytest.approx(ratio, rel=1e-3) and row["words"] == "\u00d71.8 faster"
    assert row["sentence"].startswith("tmpfs (/srv/ram) builds the code base \u00d71.8 faster than disk (/var/tmp)")


def test_compile_round_without_a_time_is_a_problem():
    manifest = {"host": "h", "targets": [{"label": "ram", "path": "/srv/ram", "kind": "ram", "backend": "tmpfs",
                                          "compile": [{"round": 1, "seconds": 0}]}]}
    records, problems = _bench.host_records(manifest, lambda name: "")
    assert records == [] and problems == ["h: compile on ram: a build cannot take 0.0 seconds"]
