# SPDX-License-Identifier: GPL-3.0-or-later
"""Sizing, fio json+ and dd parsing, records, ratios and tables of the benchmark, on real output
captured from fio 3.33 and GNU dd (tests/unit/fixtures/)."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import subprocess
import sys

import pytest

from ansible_collections.ramdisk.provision.plugins.module_utils import _bench

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "fixtures")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(FIXTURES)))
MIB = 1024 * 1024


def fixture(*parts):
    with open(os.path.join(FIXTURES, *parts), encoding="utf-8") as handle:
        return handle.read()


def fio_doc(name):
    return _bench.parse_fio_json(fixture("fio", name))


@pytest.mark.parametrize("profile, available, free, expected", [
    (64 * MIB, 16 * 1024 * MIB, 10 * 1024 * MIB, 64 * MIB),           # the profile decides
    (64 * MIB, 100 * MIB, 10 * 1024 * MIB, 25 * MIB),                 # a quarter of MemAvailable
    (64 * MIB, 16 * 1024 * MIB, 100 * MIB, 25 * MIB),                 # a quarter of the mount's free space
    (64 * MIB, 16 * 1024 * MIB, None, 64 * MIB),                      # ramfs: no free space to share
    (64 * MIB, 16 * 1024 * MIB, 3 * MIB, 0),                          # not even 1 MiB: refused
    (64 * MIB, 16 * 1024 * MIB, 10 * MIB + 12345, 2 * MIB),           # rounded down to whole MiB
])
def test_file_size(profile, available, free, expected):
    assert _bench.file_size(profile, available, free, 0.25, 0.25) == expected


def test_parse_fio_json_skips_notes_before_the_json():
    text = "note: both iodepth >= 1 and synchronous I/O engine are selected\n" + fixture("fio", "randrw.json")
    assert _bench.parse_fio_json(text)["fio version"].startswith("fio-")
    with pytest.raises(ValueError):
        _bench.parse_fio_json("fio: no such file\n")


@pytest.mark.parametrize("name, op, bw_bytes, iops", [
    ("seq_write.json", "write", 5964266783, 5687.968048),
    ("randrw.json", "read", 844232475, 206111.444278),
    ("randrw.json", "write", 842930598, 205793.603198),
    ("fsync_disk.json", "write", 8478576, 2069.965017),
])
def test_fio_figures_one_job_are_fio_own(name, op, bw_bytes, iops):
    doc = fio_doc(name)
    (record,) = [r for r in _bench.fio_figures(doc) if r["op"] == op]
    assert record["bw_bytes"] == bw_bytes
    assert record["iops"] == pytest.approx(iops)
    clat = doc["jobs"][0][op]["clat_ns"]
    assert record["clat_ns_p99"] == clat["percentile"]["99.000000"]
    assert record["clat_ns_p50"] == clat["percentile"]["50.000000"]
    assert record["clat_ns_mean"] == pytest.approx(clat["mean"])


def test_fio_figures_sync_latency_is_the_fdatasync_latency():
    doc = fio_doc("fsync_disk.json")
    (sync,) = [r for r in _bench.fio_figures(doc) if r["op"] == "sync"]
    lat = doc["jobs"][0]["sync"]["lat_ns"]
    # fio leaves sync.total_ios at 0; the sample count is the number of fdatasyncs.
    assert doc["jobs"][0]["sync"]["total_ios"] == 0
    assert sync["total_ios"] == lat["N"] == 4142
    assert sync["clat_ns_p99"] == lat["percentile"]["99.000000"] == 3981312
    assert sync["iops"] == pytest.approx(4142 / 2.001)
    assert sync["bw_bytes"] is None


def test_fio_figures_merge_several_jobs_through_their_bins():
    doc = fio_doc("seq_read_nogroup.json")
    jobs = doc["jobs"]
    assert len(jobs) == 2
    (record,) = _bench.fio_figures(doc)
    assert record["op"] == "read"
    assert record["bw_bytes"] == sum(job["read"]["bw_bytes"] for job in jobs)
    assert record["io_bytes"] == sum(job["read"]["io_bytes"] for job in jobs)
    assert record["iops"] == pytest.approx(sum(job["read"]["iops"] for job in jobs))
    p99 = [job["read"]["clat_ns"]["percentile"]["99.000000"] for job in jobs]
    assert min(p99) <= record["clat_ns_p99"] <= max(p99)
    for job in jobs:
        # Each job's own percentile, recomputed from its bins, is fio's figure.
        assert _bench.percentile_from_bins(job["read"]["clat_ns"]["bins"], 99.0) == job["read"]["clat_ns"]["percentile"]["99.000000"]


def test_fio_figures_pick_one_job_of_a_run():
    doc = _bench.parse_fio_json(fixture("run", "lab-debian12", "fio-tmp.json"))
    assert _bench.fio_job_names(doc) == ["seq_write", "seq_read", "randrw", "fsync"]
    ops = {job: [r["op"] for r in _bench.fio_figures(doc, job)] for job in _bench.fio_job_names(doc)}
    assert ops == {"seq_write": ["write"], "seq_read": ["read"], "randrw": ["read", "write"], "fsync": ["write", "sync"]}


@pytest.mark.parametrize("bins, percent, expected", [
    ({"10": 1, "20": 1, "30": 1, "40": 1}, 50.0, 20),
    ({"10": 1, "20": 1, "30": 1, "40": 1}, 99.0, 40),
    ({"10": 98, "1000": 2}, 99.0, 1000),
    ({"10": 99, "1000": 1}, 99.0, 10),
    ({}, 99.0, None),
])
def test_percentile_from_bins(bins, percent, expected):
    assert _bench.percentile_from_bins(bins, percent) == expected


def test_fio_argv_is_one_job():
    argv = _bench.fio_argv("seq_read", [("rw", "read"), ("bs", "1M")], "/srv/ram/x", "/var/tmp/out.json",
                           [("runtime", 1), ("time_based", 1)])
    assert argv == ["fio", "--output-format=json+", "--output=/var/tmp/out.json", "--directory=/srv/ram/x",
                    "--runtime=1", "--time_based=1", "--name=seq_read", "--rw=read", "--bs=1M"]


@pytest.mark.parametrize("name, op, block, bytes_, seconds", [
    ("write_fdatasync.txt", "write", MIB, 33554432, 0.0456361),
    ("write_dsync.txt", "write", MIB, 33554432, 0.101999),
    ("read.txt", "read", MIB, 33554432, 0.00347072),
])
def test_dd_figures_one_transfer(name, op, block, bytes_, seconds):
    record = _bench.dd_figures(fixture("dd", name), op, block)
    assert record["io_bytes"] == bytes_
    assert record["bw_bytes"] == int(bytes_ / seconds)
    assert record["iops"] == pytest.approx(bytes_ / block / seconds)
    assert record["op"] == op


def test_dd_figures_many_small_files_use_the_wall_time():
    text = fixture("dd", "small_files.txt")
    runs = _bench.parse_dd(text)
    assert [run["bytes"] for run in runs] == [1024, 1024, 1024]
    record = _bench.dd_figures(text, "write", 1024, wall_seconds=0.03)
    assert record["iops"] == pytest.approx(100.0)
    assert record["io_bytes"] == 3072
    assert record["clat_ns_mean"] == pytest.approx(sum(run["seconds"] for run in runs) / 3 * 1e9)
    # Without the wall time, dd's own seconds.
    assert _bench.dd_figures(text, "write", 1024)["iops"] == pytest.approx(3 / sum(run["seconds"] for run in runs))


@pytest.mark.parametrize("text", ["", "dd: failed to open 'x': No such file or directory\n"])
def test_parse_dd_refuses_output_without_a_transfer(text):
    with pytest.raises(ValueError):
        _bench.parse_dd(text)


def test_parse_dd_reads_one_byte_and_exponent_forms():
    assert _bench.parse_dd("1 byte copied, 2e-05 s, 50.0 kB/s\n") == [{"bytes": 1, "seconds": 2e-05}]


def test_dd_sections():
    sections = _bench.dd_sections(fixture("run", "lab-debian12", "dd.txt"))
    assert sorted(sections) == sorted("%s %s" % (label, test) for label in ("tmp", "disk")
                                      for test in ("write_fdatasync", "write_dsync", "read", "small_files"))
    assert len(_bench.parse_dd(sections["tmp small_files"])) == 200


def test_metadata_and_memcopy_probes():
    doc = {"files": 1000, "dirs": 10, "file_bytes": 1024,
           "seconds": {"create": 0.5, "stat": 0.01, "read": 0.02, "delete": 0.1}}
    records = {r["op"]: r for r in _bench.metadata_figures(doc)}
    assert records["create"]["iops"] == pytest.approx(2000.0)
    assert records["stat"]["iops"] == pytest.approx(100000.0)
    assert records["read"]["io_bytes"] == 1024000 and records["stat"]["io_bytes"] is None
    assert _bench.memcopy_bw({"bytes": 1000, "seconds": [0.2, 0.1, 0.4]}) == 10000


@pytest.mark.parametrize("text, expected", [
    ("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\n", "AMD EPYC 7B13"),
    ("processor\t: 0\nBogoMIPS\t: 50.00\nCPU part\t: 0xd0c\n", "0xd0c"),
    ("Hardware\t: BCM2835\nmodel name\t: ARMv7 Processor rev 4 (v7l)\n", "ARMv7 Processor rev 4 (v7l)"),
    ("", None),
])
def test_cpu_model(text, expected):
    assert _bench.cpu_model(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("  4096   74   12288   0   12288   1   0   0   0\n",
     {"orig_data_size": 4096, "compr_data_size": 74, "mem_used_total": 12288, "mem_limit": 0, "mem_used_max": 12288,
      "same_pages": 1, "pages_compacted": 0, "huge_pages": 0, "huge_pages_since": 0}),
    ("4096 74 12288 0 12288 1 0\n",
     {"orig_data_size": 4096, "compr_data_size": 74, "mem_used_total": 12288, "mem_limit": 0, "mem_used_max": 12288,
      "same_pages": 1, "pages_compacted": 0}),
    ("", None),
    (None, None),
])
def test_parse_mm_stat(text, expected):
    assert _bench.parse_mm_stat(text) == expected


@pytest.mark.parametrize("text, expected", [("lzo [lzo-rle] lz4", "lzo-rle"), ("[zstd]", "zstd"), ("lzo lz4", None), (None, None)])
def test_zram_algorithm(text, expected):
    assert _bench.zram_algorithm(text) == expected


@pytest.mark.parametrize("ratio, higher, words", [
    (9.6, True, "writes \u00d79.6 faster than disk"),
    (0.8, True, "writes \u00d71.2 slower than disk"),
    (8421.0, False, "writes \u00d78421 lower than disk"),
    (0.5, False, "writes \u00d72.0 higher than disk"),
    (12.4, True, "writes \u00d712 faster than disk"),
    # A clear ratio near 1 keeps two decimals: never "×1.0 faster".
    (1.02, True, "writes \u00d71.02 faster than disk"),
    (0.96, True, "writes \u00d71.04 slower than disk"),
])
def test_sentence(ratio, higher, words):
    text = _bench.sentence("tmpfs", "/srv/ram", "/var/tmp", "h1", "writes", ratio, higher)
    assert text == "tmpfs (/srv/ram) %s (/var/tmp) on host h1" % words


def _record(host, label, kind, test, op, **figures):
    record = dict((column, None) for column in _bench.COLUMNS)
    record.update(host=host, label=label, kind=kind, backend="tmpfs" if kind == "ram" else "ext4", tool="fio",
                  test=test, op=op, path="/" + label, groups="all")
    record.update(figures)
    return record


def test_ratio_rows_and_groups():
    records = [
        _record("h1", "ram", "ram", "seq_write", "write", bw_bytes=1000),
        _record("h1", "disk", "disk", "seq_write", "write", bw_bytes=100),
        _record("h1", "ram", "ram", "fsync", "sync", clat_ns_mean=10),
        _record("h1", "disk", "disk", "fsync", "sync", clat_ns_mean=1000),
        _record("h2", "ram", "ram", "seq_write", "write", bw_bytes=400),
        _record("h2", "disk", "disk", "seq_write", "write", bw_bytes=100),
        _record("h2", "disk", "disk", "fsync", "sync", clat_ns_mean=1000),   # no RAM figure: no ratio
    ]
    rows = _bench.ratio_rows(records)
    assert [(r["host"], r["test"], r["ratio"]) for r in rows] == [
        ("h1", "seq_write", 10.0), ("h1", "fsync", 100.0), ("h2", "seq_write", 4.0)]
    assert rows[0]["sentence"] == "tmpfs (/ram) writes sequentially \u00d710 faster than disk (/disk) on host h1"
    groups = _bench.group_rows(rows, {"h1": ["db", "all"], "h2": ["web", "all"]})
    by = {(g["group"], g["test"]): g for g in groups}
    assert by[("all", "seq_write")]["ratio_geomean"] == pytest.approx(round((10.0 * 4.0) ** 0.5, 3))
    assert by[("all", "seq_write")]["hosts"] == 2
    assert by[("db", "fsync")]["ratio_geomean"] == 100.0
    assert ("web", "fsync") not in by


@pytest.mark.parametrize("ratio, higher, low, high, runs, words", [
    (9.6, True, 8.1, 11.2, 5, "writes \u00d79.6 faster than disk (/var/tmp) on host h1 (\u00d78.1-11 over 5 runs)"),
    # Slower: the range turns round with the ratio, lowest first.
    (0.8, True, 0.7, 0.9, 3, "writes \u00d71.2 slower than disk (/var/tmp) on host h1 (\u00d71.1-1.4 over 3 runs)"),
    (9.6, True, 9.6, 9.6, 1, "writes \u00d79.6 faster than disk (/var/tmp) on host h1"),
])
def test_sentence_with_the_spread_of_the_runs(ratio, higher, low, high, runs, words):
    text = _bench.sentence("tmpfs", "/srv/ram", "/var/tmp", "h1", "writes", ratio, higher, low=low, high=high, runs=runs)
    assert text == "tmpfs (/srv/ram) " + words


def test_sentence_when_the_runs_overlap():
    text = _bench.sentence("tmpfs", "/srv/ram", "/var/tmp", "h1", "stats small files", 1.1, True, clear=False,
                           low=0.8, high=1.4, runs=3)
    assert text == ("tmpfs (/srv/ram) stats small files: no clear difference from disk (/var/tmp) on host h1 "
                    "(\u00d71.1, runs \u00d70.8-1.4)")


@pytest.mark.parametrize("ratio, higher, clear, words", [
    (9.6, True, True, "\u00d79.6 faster"), (0.8, True, True, "\u00d71.2 slower"), (40.0, False, True, "\u00d740 lower"),
    (0.5, False, True, "\u00d72.0 higher"), (1.1, True, False, "no clear difference"),
])
def test_ratio_words_say_what_the_sentence_says(ratio, higher, clear, words):
    assert _bench.ratio_words(ratio, higher, clear) == words


@pytest.mark.parametrize("values, expected", [([3], 3), ([1, 3, 2], 2), ([4, 1, 3, 2], 2.5), ([], None)])
def test_median(values, expected):
    assert _bench.median(values) == expected


def test_summarize_takes_the_median_and_the_range_of_the_runs():
    runs = [_record("h1", "ram", "ram", "seq_write", "write", bw_bytes=value, iops=value / 10.0, clat_ns_p99=p99,
                    clat_ns_mean=p99 / 2.0, round=number)
            for number, (value, p99) in enumerate(((300, 9), (100, 7), (200, 8)), 1)]
    runs.append(_record("h1", "disk", "disk", "seq_write", "write", bw_bytes=50, round=1))
    summary = _bench.summarize(runs)
    assert len(summary) == 2 and all(set(r) == set(_bench.COLUMNS) for r in summary)
    ram = summary[0]
    assert (ram["bw_bytes"], ram["bw_bytes_min"], ram["bw_bytes_max"], ram["runs"]) == (200, 100, 300, 3)
    assert (ram["iops"], ram["clat_ns_p99"], ram["clat_ns_p99_min"], ram["clat_ns_p99_max"]) == (20.0, 8, 7, 9)
    # The mean latency carries its spread too: fdatasync is compared by it.
    assert (ram["clat_ns_mean"], ram["clat_ns_mean_min"], ram["clat_ns_mean_max"]) == (4.0, 3.5, 4.5)
    assert ram["clat_ns_mean_gmean"] == pytest.approx((3.5 * 4.5 * 4.0) ** (1 / 3.0))
    assert summary[1]["runs"] == 1 and summary[1]["bw_bytes_min"] == summary[1]["bw_bytes_max"] == 50


def test_ratio_rows_say_no_clear_difference_when_the_runs_overlap():
    records = [
        # RAM 90-110 against disk 100-120: they overlap, whatever the medians say.
        _record("h1", "ram", "ram", "seq_write", "write", bw_bytes=105, bw_bytes_min=90, bw_bytes_max=110, runs=3),
        _record("h1", "disk", "disk", "seq_write", "write", bw_bytes=100, bw_bytes_min=95, bw_bytes_max=120, runs=3),
        # Latency: RAM 10-12 ns, disk 900-1100 ns: clear, disk over RAM.
        _record("h1", "ram", "ram", "fsync", "sync", clat_ns_mean=10, clat_ns_mean_min=10, clat_ns_mean_max=12, runs=3),
        _record("h1", "disk", "disk", "fsync", "sync", clat_ns_mean=1000, clat_ns_mean_min=900, clat_ns_mean_max=1100,
                runs=3),
    ]
    rows = dict((row["test"], row) for row in _bench.ratio_rows(records))
    write = rows["seq_write"]
    assert (write["clear"], write["words"], write["ratio"]) == (False, "no clear difference", 1.05)
    assert (write["ratio_low"], write["ratio_high"]) == (0.75, round(110 / 95.0, 3))
    assert "no clear difference from disk (/disk)" in write["sentence"]
    sync = rows["fsync"]
    assert (sync["clear"], sync["words"], sync["ratio"]) == (True, "\u00d7100 lower", 100.0)
    assert (sync["ratio_low"], sync["ratio_high"]) == (75.0, 110.0)
    assert sync["title"] == "fdatasync after 4 KiB writes, mean latency (fio)"


def test_groups_with_the_same_hosts_are_one_row():
    records = [_record(host, label, kind, "seq_write", "write", bw_bytes=value)
               for host, label, kind, value in (("h1", "ram", "ram", 1000), ("h1", "disk", "disk", 100),
                                                ("h2", "ram", "ram", 400), ("h2", "disk", "disk", 100))]
    rows = _bench.ratio_rows(records)
    groups = _bench.group_rows(rows, {"h1": ["lab", "db", "all"], "h2": ["lab", "all"]})
    assert [(g["group"], g["hosts"], g["clear"], g["words"]) for g in groups] == [
        ("all, lab", 2, 2, "\u00d76.3 faster"), ("db", 1, 1, "\u00d710 faster")]


def test_test_titles_are_unique():
    titles = [_bench.test_title(tool, test, op) for tool, test, op, _metric, _higher, _verb in _bench.RATIO_METRICS]
    assert len(set(titles)) == len(titles)


def test_csv_text_quotes_and_round_trips():
    records = [{"host": "h1", "mount_options": "rw,nosuid", "iops": 1.23456789, "label": 'a"b', "bw_bytes": None}]
    text = _bench.csv_text(records, ("host", "mount_options", "iops", "label", "bw_bytes"))
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows == [{"host": "h1", "mount_options": "rw,nosuid", "iops": "1.234568", "label": 'a"b', "bw_bytes": ""}]


def _fixture_run(name):
    """The manifest and a reader of the raw files of the fetched run tests/unit/fixtures/<name>."""
    base = os.path.join(FIXTURES, name, "lab-debian12")
    with open(os.path.join(base, "manifest.json"), encoding="utf-8") as handle:
        manifest = json.load(handle)

    def read_raw(raw):
        with open(os.path.join(base, raw), encoding="utf-8") as handle:
            return handle.read()

    return manifest, read_raw


def test_host_records_from_a_real_run_carry_every_column():
    manifest, read_raw = _fixture_run("run")
    records, problems = _bench.host_records(manifest, read_raw)
    assert problems == []
    # A run from before the rounds (one fio file, one dd entry and one metadata document per target).
    assert all(set(r) == set(_bench.COLUMNS) | {"round"} and r["round"] == 1 for r in records)
    tests = set((r["label"], r["tool"], r["test"], r["op"]) for r in records)
    for label in ("tmp", "disk"):
        for expected in (("fio", "seq_write", "write"), ("fio", "seq_read", "read"), ("fio", "randrw", "read"),
                         ("fio", "randrw", "write"), ("fio", "fsync", "sync"), ("dd", "write_fdatasync", "write"),
                         ("dd", "write_dsync", "write"), ("dd", "read", "read"), ("dd", "small_files", "write"),
                         ("metadata", "metadata", "create"), ("metadata", "metadata", "delete")):
            assert (label,) + expected in tests
    ram = [r for r in records if r["kind"] == "ram"]
    assert ram and all(r["direct"] == 0 for r in ram)
    assert all(r["cpu_model"] and r["kernel"] and r["cores"] and r["mem_total_bytes"] for r in records)
    fractions = [r["memcopy_fraction"] for r in ram if r["test"] in ("seq_read", "seq_write") and r["tool"] == "fio"]
    assert len(fractions) == 2 and all(0 < f < 10 for f in fractions)


def test_host_records_report_a_missing_raw_file():
    manifest = {"host": "h", "targets": [{"label": "t", "path": "/t", "kind": "ram", "backend": "tmpfs",
                                          "fio": "fio-t.json", "fio_jobs": ["seq_write"]}]}

    def read_raw(name):
        raise IOError("no such file: %s" % name)

    records, problems = _bench.host_records(manifest, read_raw)
    assert records == [] and problems == ["h: fio-t.json: no such file: fio-t.json"]


def test_host_records_and_summary_of_a_real_run_with_three_rounds():
    """tests/unit/fixtures/run-rounds: the quick profile on a lab host, 3 rounds of every test on a tmpfs
    (web) and on the container's disk (overlay), as the role fetched it."""
    manifest, read_raw = _fixture_run("run-rounds")
    records, problems = _bench.host_records(manifest, read_raw)
    assert problems == []
    keys = set((r["label"], r["tool"], r["test"], r["op"]) for r in records)
    assert len(keys) == 2 * 14
    for key in keys:
        assert sorted(r["round"] for r in records if (r["label"], r["tool"], r["test"], r["op"]) == key) == [1, 2, 3]
    summary = _bench.summarize(records)
    assert len(summary) == len(keys) and all(r["runs"] == 3 for r in summary)
    for record in summary:
        for metric in _bench.SPREAD_METRICS:
            if record[metric] is not None:
                assert record[metric + "_min"] <= record[metric] <= record[metric + "_max"]
    small = [r for r in summary if r["test"] == "small_files"]
    assert small and all(r["bw_bytes"] is None and r["iops"] > 0 for r in small)
    rows = _bench.ratio_rows(summary)
    assert len(rows) == 13 and all(r["ratio_low"] <= r["ratio"] <= r["ratio_high"] for r in rows)
    assert all(r["runs"] == 3 for r in rows)
    assert manifest["measure_seconds"] > 0


def test_cdf_points_rise_to_one():
    assert _bench.cdf_points({"300": 1, "100": 2, "200": 0, "400": 1}) == [(100, 0.5), (300, 0.75), (400, 1.0)]


def test_latency_histograms_of_every_round_merged():
    manifest, read_raw = _fixture_run("run-rounds")
    found = _bench.host_latency_bins(manifest, read_raw)
    assert set(found) == set(("lab-debian12", label, job, op) for label in ("web", "disk")
                             for job, op in _bench.LATENCY_JOBS)
    one = _bench.fio_latency_bins(_bench.parse_fio_json(read_raw("fio-web-1.json")), "fsync", "sync")
    merged = found[("lab-debian12", "web", "fsync", "sync")]
    # Three rounds hold more samples than the first alone, and the first's are all among them.
    assert sum(merged.values()) > sum(one.values()) > 0
    assert all(merged[value] >= count for value, count in one.items())
    points = _bench.cdf_points(merged)
    assert points[-1][1] == 1.0 and all(a[0] < b[0] and a[1] <= b[1] for a, b in zip(points, points[1:]))


MEMORY_TSV = (
    "time\tMemTotal\tMemAvailable\tMemFree\tShmem\tActive\tInactive\tSwapTotal\tSwapFree\tpswpin\tpswpout\n"
    "100.0\t1000\t600\t500\t10\t1\t1\t400\t400\t5\t7\n"
    "100.5\t1000\t80\t50\t300\t1\t1\t400\t350\t6\t19\n"
    "101.0\t1000\t550\t450\t20\t1\t1\t400\t380\t9\t19\n"
    "101.5\t1000\t55"
)


def test_memory_samples_summary_and_warnings():
    samples = _bench.parse_memory_tsv(MEMORY_TSV)
    assert len(samples) == 3 and samples[1]["Shmem"] == 300 and samples[0]["time"] == 100.0
    summary = _bench.memory_summary(samples)
    assert summary == {
        "samples": 3, "seconds": 1.0, "mem_total_bytes": 1000, "mem_available_first_bytes": 600,
        "mem_available_min_bytes": 80, "mem_available_min_share": 0.08, "shmem_rise_bytes": 290,
        "swap_free_min_bytes": 350, "swap_out_pages": 12, "swap_in_pages": 4,
    }
    warnings = _bench.memory_warnings("h1", summary)
    assert warnings[0].startswith("Host h1 went into swap during the benchmark: 12 pages swapped out, 4 in.")
    assert warnings[1].startswith("Host h1: MemAvailable fell to 8.0% of MemTotal during the benchmark (under 10%)")
    calm = dict(summary, swap_out_pages=0, mem_available_min_share=0.5)
    assert _bench.memory_warnings("h1", calm) == [] and _bench.memory_summary([]) is None


def test_compare_runs_counts_a_move_only_beyond_the_spread():
    before = [_record("h1", "ram", "ram", "seq_write", "write", bw_bytes=100, bw_bytes_min=90, bw_bytes_max=110),
              _record("h1", "ram", "ram", "fsync", "sync", clat_ns_mean=1000, clat_ns_mean_min=900, clat_ns_mean_max=1100),
              _record("h1", "ram", "ram", "randrw", "read", iops=50, iops_min=40, iops_max=60)]
    after = [_record("h1", "ram", "ram", "seq_write", "write", bw_bytes=105, bw_bytes_min=95, bw_bytes_max=115),
             # Latency halved, clear of the old range: better, factor 2.
             _record("h1", "ram", "ram", "fsync", "sync", clat_ns_mean=500, clat_ns_mean_min=450, clat_ns_mean_max=550),
             _record("h1", "ram", "ram", "randrw", "read", iops=20, iops_min=18, iops_max=25),
             _record("h2", "ram", "ram", "randrw", "read", iops=20)]   # not in the earlier run
    rows = dict((row["test"], row) for row in _bench.compare_runs(before, after))
    assert set(rows) == {"seq_write", "fsync", "randrw"}
    assert (rows["seq_write"]["changed"], rows["seq_write"]["factor"]) == (False, 1.05)
    assert (rows["fsync"]["changed"], rows["fsync"]["factor"]) == (True, 2.0)
    assert (rows["randrw"]["changed"], rows["randrw"]["factor"]) == (True, 0.4)


# --- settling: the interval of a median, and which tests need more rounds -------------------------------------

def _coverage(count, k):
    """The chance that the k-th lowest to the k-th highest of COUNT values holds the true median (exact)."""
    below = sum(math.comb(count, j) for j in range(k)) / 2.0 ** count
    return 1 - 2 * below


@pytest.mark.parametrize("count, low, high", [(1, 1, 1), (3, 1, 3), (5, 1, 5), (7, 1, 7), (10, 2, 9), (14, 3, 12),
                                              (17, 5, 13), (21, 6, 16)])
def test_median_interval_takes_the_order_statistics_the_binomial_law_allows(count, low, high):
    assert _bench.median_interval(list(range(count, 0, -1))) == (low, high)


def test_median_interval_is_the_narrowest_that_holds_95_percent():
    for count in range(6, 61):
        values = list(range(1, count + 1))
        low, _high = _bench.median_interval(values)
        k = low
        assert _coverage(count, k) >= 0.95
        # One step narrower would hold the median less often than 95% (or cross it).
        assert k + 1 > count // 2 or _coverage(count, k + 1) < 0.95
    assert _bench.median_interval([]) == (None, None)


def test_more_rounds_of_the_same_scatter_narrow_the_interval():
    # The same seven values again and again: min-max stays, while the median's interval closes in.
    once = [90, 95, 98, 100, 102, 105, 130]
    low7, high7 = _bench.median_interval(once)
    low21, high21 = _bench.median_interval(once * 3)
    assert (low7, high7) == (90, 130) and (low21, high21) == (95, 105)


def test_settle_figures_of_a_real_run_with_three_rounds():
    manifest, read_raw = _fixture_run("run-rounds")
    records, problems = _bench.host_records(manifest, read_raw)
    assert problems == []
    web = [r for r in records if r["label"] == "web"]
    figures = _bench.settle_figures(web, 0.1)
    assert len(figures) == 13 and all(f["runs"] == 3 for f in figures)
    for figure in figures:
        values = [r[figure["metric"]] for r in web
                  if (r["tool"], r["test"], r["op"]) == (figure["tool"], figure["test"], figure["op"])]
        # Three rounds: the interval is the lowest to the highest, the width that range over the median.
        assert (figure["low"], figure["high"], figure["median"]) == (min(values), max(values), sorted(values)[1])
        assert figure["width"] == round((max(values) - min(values)) / sorted(values)[1], 4)
        assert figure["settled"] is (figure["width"] <= 0.1)
    # Nothing is settled when no spread is allowed, everything when any is.
    assert _bench.unsettled_tools(_bench.settle_figures(web, 1e-9)) == ["fio", "metadata", "dd"]
    assert _bench.unsettled_tools(_bench.settle_figures(web, 1000)) == []


def test_settle_figures_of_a_median_of_zero():
    records = [dict(tool="fio", test="randrw", op="read", iops=value) for value in (0, 0, 0)]
    assert _bench.settle_figures(records, 0.1)[0]["settled"] is True
    records[0]["iops"] = 5
    figure = _bench.settle_figures(records, 0.1)[0]
    assert figure["width"] is None and figure["settled"] is False


# --- the order targets are measured in -----------------------------------------------------------------------------

def test_interleaved_targets_take_turns_round_by_round():
    visits = _bench.visit_order(["ram", "disk"], 3)
    assert [(v["target"], v["rounds"]) for v in visits] == [
        ("ram", [1]), ("disk", [1]), ("ram", [2]), ("disk", [2]), ("ram", [3]), ("disk", [3])]
    assert [(v["first"], v["last"]) for v in visits if v["target"] == "disk"] == [(True, False), (False, False),
                                                                                  (False, True)]
    # Every round of every target, once.
    assert sorted((v["target"], r) for v in visits for r in v["rounds"]) == sorted(
        (t, r) for t in ("ram", "disk") for r in (1, 2, 3))


@pytest.mark.parametrize("targets, runs, interleave", [(["ram", "disk"], 3, False), (["ram", "disk"], 1, True),
                                                       (["disk"], 5, True)])
def test_one_visit_per_target_when_turns_would_change_nothing_or_are_off(targets, runs, interleave):
    visits = _bench.visit_order(targets, runs, interleave=interleave)
    assert [v["target"] for v in visits] == targets
    assert all(v["rounds"] == list(range(1, runs + 1)) and v["first"] and v["last"] for v in visits)


def test_visits_of_alike_orders_are_equal_and_of_other_orders_never():
    """Ansible shares a looped include between hosts whose items are equal (see visit_order): only hosts with the
    same whole order may share one, at the same place."""
    ram, disk, build = {"label": "ram", "size": 1}, {"label": "disk"}, {"label": "build"}
    one = _bench.visit_order([ram, disk], 2)
    assert one == _bench.visit_order([dict(ram), dict(disk)], 2)
    assert len({v["order"] for v in one}) == len(one)
    for other in (_bench.visit_order([ram, build, disk], 2), _bench.visit_order([dict(ram, size=2), disk], 2),
                  _bench.visit_order([ram, disk], 3), _bench.visit_order([ram, disk], 2, interleave=False)):
        assert not {v["order"] for v in one} & {v["order"] for v in other}


@pytest.mark.parametrize("runs", [0, -1])
def test_visits_need_a_round(runs):
    with pytest.raises(ValueError):
        _bench.visit_order(["ram"], runs)


def test_phases_follow_every_visit_in_time_order():
    targets = [{"label": "ram", "started": 10.0, "ended": 50.0, "visits": [[10.0, 20.0], [40.0, 50.0]]},
               {"label": "disk", "started": "20.5", "ended": "39.0", "visits": [[20.5, 30.0], [30.0, 39.0]]}]
    assert _bench.target_phases(targets) == [("ram", 10.0, 20.0), ("disk", 20.5, 30.0), ("disk", 30.0, 39.0),
                                             ("ram", 40.0, 50.0)]
    # A manifest from before visits were recorded: the target's start and end.
    old = [{"label": "disk", "started": "5", "ended": "9"}, {"label": "ram", "started": 1, "ended": 4}, {"label": "x"}]
    assert _bench.target_phases(old) == [("ram", 1, 4), ("disk", "5", "9")]


def test_host_records_read_a_fio_run_per_job(tmp_path):
    """The role writes a raw file per round and job; a round listed as those files gives the same records
    as the same jobs in one file (the 1.0.0 layout)."""
    whole = _bench.parse_fio_json(fixture("run", "lab-debian12", "fio-tmp.json"))
    files = {}
    for job in whole["jobs"]:
        files["fio-tmp-1-%s.json" % job["jobname"]] = json.dumps(dict(whole, jobs=[job]))
    files["fio-tmp.json"] = json.dumps(whole)
    target = {"label": "tmp", "path": "/tmp", "kind": "ram", "backend": "tmpfs", "fio_jobs": _bench.fio_job_names(whole)}
    per_job = dict(target, fio=[["fio-tmp-1-%s.json" % name for name in _bench.fio_job_names(whole)]])
    one_file = dict(target, fio=["fio-tmp.json"])
    found = {}
    for key, entry in (("per_job", per_job), ("one_file", one_file)):
        manifest = {"host": "h", "targets": [entry]}
        records, problems = _bench.host_records(manifest, files.__getitem__)
        assert problems == []
        found[key] = [(r["test"], r["op"], r["bw_bytes"], r["iops"], r["clat_ns_p99"]) for r in records if r["tool"] == "fio"]
        assert _bench.host_latency_bins(manifest, files.__getitem__)
    assert found["per_job"] == found["one_file"] and len(found["per_job"]) == 6


def test_the_bench_scripts_load_it_without_the_collection():
    """scripts/bench/common.py loads this file by its path in a python with no collection (-I: no PYTHONPATH); the
    _size.py beside it then formats the bytes, and what needs the collection (_bench_counters) is left out."""
    script = ("import sys; sys.path.insert(0, %r); import common; bench = common.load_bench(); "
              "print(bench.human_metric('bw_bytes', 1075.2), bench._reached_share)" % os.path.join(REPO, "scripts", "bench"))
    run = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, check=False)
    assert (run.returncode, run.stdout, run.stderr) == (0, "1.1 KiB/s None\n", "")
