"""The quick benchmark's results on the controller, and a clean host; read again after the restart.

testinfra runs on the controller: the results are read as plain files from molecule's ephemeral
directory, where converge put them (run id "molecule")."""

from __future__ import annotations

import csv
import json
import os

import pytest

RESULTS = os.path.join(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", ""), "results", "molecule")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Every figure named as fio names it, and the context to compare it.
FIELDS = (
    "bw_bytes", "iops", "clat_ns_p50", "clat_ns_p99", "clat_ns_p99_9", "kernel", "cpu_model", "cores", "mem_total_bytes",
    "backend", "mount_options", "zram_algorithm", "zram_mm_stat_before", "zram_mm_stat_after", "profile",
    "memcopy_bw_bytes", "memcopy_fraction", "host", "groups", "label", "path", "kind", "tool", "test", "op",
)
EXPECTED = {
    ("fio", "seq_write", "write"), ("fio", "seq_read", "read"), ("fio", "randrw", "read"), ("fio", "randrw", "write"),
    ("fio", "fsync", "sync"), ("dd", "write_fdatasync", "write"), ("dd", "write_dsync", "write"), ("dd", "read", "read"),
    ("dd", "small_files", "write"), ("metadata", "metadata", "create"), ("metadata", "metadata", "stat"),
    ("metadata", "metadata", "read"), ("metadata", "metadata", "delete"),
}


@pytest.fixture(scope="module")
def results():
    with open(os.path.join(RESULTS, "results.json"), encoding="utf-8") as handle:
        return json.load(handle)


@pytest.fixture()
def name(host):
    return host.backend.get_hostname()


def test_raw_files_arrived(name, results):
    directory = os.path.join(RESULTS, name)
    manifest = json.load(open(os.path.join(directory, "manifest.json"), encoding="utf-8"))
    assert manifest["profile"] == "quick" and manifest["host"] == name
    assert manifest["runs"] == 3 and manifest["measure_seconds"] > 0
    for target in manifest["targets"]:
        # The quick profile runs every test 3 times: per round, one fio output per job, each job a fio run of
        # its own (so the target held one job's files at a time).
        assert len(target["fio"]) == 3 and len(target["metadata"]) == 3
        assert all(len(entries) == 3 for entries in target["dd"].values())
        for round_files in target["fio"]:
            jobs = []
            for name_ in round_files:
                fio = json.load(open(os.path.join(directory, name_), encoding="utf-8"))
                assert len(fio["jobs"]) == 1 and "stonewall" not in fio["jobs"][0]["job options"]
                assert "bins" in (fio["jobs"][0]["write"]["clat_ns"] if fio["jobs"][0]["write"]["total_ios"]
                                  else fio["jobs"][0]["read"]["clat_ns"]), "not json+ output"
                jobs.append(fio["jobs"][0]["jobname"])
            assert jobs == ["seq_write", "seq_read", "randrw", "fsync"]
    dd = open(os.path.join(directory, "dd.txt"), encoding="utf-8").read()
    assert "copied" in dd and "=== ram write_fdatasync 3" in dd


def test_results_carry_every_field(name, results):
    records = [r for r in results["records"] if r["host"] == name]
    assert records, "no records for %s" % name
    for record in records:
        missing = [field for field in FIELDS if field not in record]
        assert not missing, missing
    for label in ("ram", "disk"):
        got = set((r["tool"], r["test"], r["op"]) for r in records if r["label"] == label)
        assert EXPECTED <= got, EXPECTED - got
    ram = [r for r in records if r["label"] == "ram"]
    assert all(r["kind"] == "ram" and r["backend"] == "tmpfs" and r["direct"] == 0 for r in ram)
    assert all(r["profile"] == "quick" and r["kernel"] and r["cores"] >= 1 and r["mem_total_bytes"] > 0 for r in records)
    assert all(r["bw_bytes"] > 0 for r in records if r["tool"] == "fio" and r["op"] in ("read", "write"))
    assert all(r["clat_ns_p99"] > 0 for r in records if r["tool"] == "fio")
    assert results["context"][name]["memcopy_bw_bytes"] > 0
    assert any(r["memcopy_fraction"] for r in ram)
    assert any(row["host"] == name and "faster" in row["sentence"] or "slower" in row["sentence"]
               for row in results["ratios"])


def test_every_figure_is_the_median_of_three_runs_with_its_range(name, results):
    records = [r for r in results["records"] if r["host"] == name]
    assert results["runs_per_figure"] == 3 and all(r["runs"] == 3 for r in records)
    for record in records:
        for metric in ("bw_bytes", "iops", "clat_ns_mean", "clat_ns_p50", "clat_ns_p99"):
            if record[metric] is not None:
                assert record[metric + "_min"] <= record[metric] <= record[metric + "_max"], (record["test"], metric)
    runs = [r for r in results["runs"] if r["host"] == name]
    assert len(runs) == 3 * len(records) and set(r["round"] for r in runs) == {1, 2, 3}
    for row in (row for row in results["ratios"] if row["host"] == name):
        assert row["runs"] == 3 and row["ratio_low"] <= row["ratio"] <= row["ratio_high"]
        assert row["words"] == "no clear difference" or row["clear"]


def test_csv_matches_json(results):
    with open(os.path.join(RESULTS, "results.csv"), newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(results["records"])
    assert set(FIELDS) <= set(rows[0])


def test_report_and_charts():
    for name in ("report.md", "report.html"):
        assert os.path.getsize(os.path.join(RESULTS, name)) > 0
    pngs = [name for name in os.listdir(RESULTS) if name.endswith(".png")]
    assert {"ratios.png", "throughput_write.png", "throughput_read.png", "throughput_groups.png", "iops.png",
            "latency_p99.png", "memcopy_fraction.png", "latency_randrw_read.png", "latency_fsync_sync.png"} <= set(pngs)
    for png in pngs:
        with open(os.path.join(RESULTS, png), "rb") as handle:
            assert handle.read(8) == PNG_SIGNATURE, png
    assert "ram (tmpfs, /srv/ram)" in open(os.path.join(RESULTS, "report.md"), encoding="utf-8").read()


def test_targets_took_turns_round_by_round(name):
    """benchmark_interleave (on by default): round 1 on /srv/ram, round 1 on the disk, round 2 on /srv/ram, ...; each
    visit is recorded with the controller's clock, one after the other."""
    manifest = json.load(open(os.path.join(RESULTS, name, "manifest.json"), encoding="utf-8"))
    spans = sorted((float(began), float(ended), target["label"]) for target in manifest["targets"]
                   for began, ended in target["visits"])
    assert [label for _began, _ended, label in spans] == ["ram", "disk"] * 3
    assert all(ended <= next_began for (_b, ended, _l), (next_began, _e, _n) in zip(spans, spans[1:]))


def test_no_benchmark_file_left_on_the_host(host):
    for path in ("/srv/ram", "/var/tmp", "/tmp"):
        left = host.run("find %s -maxdepth 1 -name 'ramdisk-bench.*'", path)
        assert left.rc == 0 and left.stdout.strip() == "", left.stdout
    assert host.mount_point("/srv/ram").filesystem == "tmpfs"


# --- the seeds profile (run id "molecule-seeds", 2 runs, scaled down) -------------------------------------

SEEDS = os.path.join(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", ""), "results", "molecule-seeds")
# Every seed test's figures: (tool, test, op) and the metric each is judged by.
SEED_FIGURES = {
    "tmp_dd": [("dd", "seed_block_write", "write", "bw_bytes"), ("dd", "seed_block_write_dsync", "write", "bw_bytes"),
               ("dd", "seed_block_read", "read", "bw_bytes"), ("dd", "seed_files_dsync", "write", "iops")],
    # bonnie++ may find a test too quick to time (+++++) on tmpfs: its worst latency is always there.
    "bonnie": [("bonnie++", "files", op, "lat_ns_max") for op in
               ("create_seq", "stat_seq", "delete_seq", "create_random", "stat_random", "delete_random")],
    "fio_dbtest": [("fio", "dbtest", "readwrite", "iops"), ("fio", "dbtest", "read", "clat_ns_p99"),
                   ("fio", "dbtest", "write", "clat_ns_p99")],
    "pg_test_fsync": [("pg_test_fsync", "one_8k_write", "fdatasync", "iops"),
                      ("pg_test_fsync", "one_8k_write", "fsync", "iops")],
    "dd_64k": [("dd", "seed_64k_write", "write", "bw_bytes"), ("dd", "seed_64k_read", "read", "bw_bytes")],
}
SEEDS_ON = {"debian12": set(SEED_FIGURES), "debian13": {"dd_64k"}}


@pytest.fixture(scope="module")
def seeds():
    with open(os.path.join(SEEDS, "results.json"), encoding="utf-8") as handle:
        return json.load(handle)


def test_every_seed_test_ran_twice_and_carries_its_spread(name, seeds):
    records = dict(((r["label"], r["tool"], r["test"], r["op"]), r) for r in seeds["records"] if r["host"] == name)
    ran = SEEDS_ON[name.split("-")[0]]
    for seed in ran:
        for tool, test, op, metric in SEED_FIGURES[seed]:
            for label in ("ram", "disk"):
                record = records.get((label, tool, test, op))
                assert record, (seed, label, test, op)
                assert record["profile"] == "seeds" and record["runs"] == 2, (seed, label, test, op)
                assert record[metric] > 0, (seed, label, test, op, metric)
                assert record[metric + "_min"] <= record[metric] <= record[metric + "_max"], (seed, label, test, op)
    for seed in set(SEED_FIGURES) - ran:
        assert not any(key[1:] == figure[:3] for key in records for figure in SEED_FIGURES[seed]), seed
    runs = [r for r in seeds["runs"] if r["host"] == name]
    assert set(r["round"] for r in runs) == {1, 2}


def test_seeds_report_prints_the_published_figures_and_the_skips(name, seeds):
    report = open(os.path.join(SEEDS, "report.md"), encoding="utf-8").read()
    for text in ("## The seeds' experiments", "the /tmp write-up (502 servers)", "1.4 GB/s", "869 MB/s",
                 "10,000 files in 26.7 s", "the tmpfs vs ext3 write-up", "the ramdisk guide", "1089k", "1536 µs",
                 "the PostgreSQL write-up", "1,137,033 ops/s", "the dd write-up", "×3.5 faster"):
        assert text in report, text
    if name.startswith("debian13"):
        assert "Host %s: skipped: PostgreSQL is not installed on this host" % name in report
        assert "Host %s: skipped: not asked for" % name in report
    else:
        assert "Host %s: skipped" % name not in report
        assert "Host %s, target ram: -n 1:" % name in report
    manifest = json.load(open(os.path.join(SEEDS, name, "manifest.json"), encoding="utf-8"))
    assert manifest["profile"] == "seeds" and manifest["tests"] == []
    assert os.path.getsize(os.path.join(SEEDS, name, "seeds.txt")) > 0


def test_pgbench_on_a_private_cluster_or_why_not(name, host, results):
    records = [r for r in results["records"] if r["host"] == name and r["tool"] == "pgbench"]
    if name.startswith("debian13"):
        assert not records
        assert "pgbench did not run on host %s: PostgreSQL is not installed" % name in open(
            os.path.join(RESULTS, "report.md"), encoding="utf-8").read()
        return
    got = set((r["label"], r["test"]) for r in records)
    assert got == {(label, test) for label in ("ram", "disk") for test in ("tpcb_like", "select_only")}
    for record in records:
        assert record["runs"] == 3 and record["iops_min"] <= record["iops"] <= record["iops_max"] and record["iops"] > 0
    assert any(row["host"] == name and row["tool"] == "pgbench" for row in results["ratios"])
    # The private cluster is stopped and gone; the image's own server, if running, kept its data directory.
    # (ps, not pgrep -f, which would find the shell that runs it, its pattern in the command line.)
    assert [line for line in host.run("ps -eo args").stdout.splitlines() if "ramdisk-bench" in line] == []


def test_compile_in_each_target_or_why_not(name, host, results):
    records = [r for r in results["records"] if r["host"] == name and r["tool"] == "compile"]
    report = open(os.path.join(RESULTS, "report.md"), encoding="utf-8").read()
    manifest = json.load(open(os.path.join(RESULTS, name, "manifest.json"), encoding="utf-8"))
    if name.startswith("debian12"):
        # The database image has no source tree to build (nor a compiler): skipped on that host, and the report says why.
        assert not records and manifest["compile_skip"]
        assert ("compile did not run on host %s: benchmark_compile_source /usr/local/src/lua is not a directory" % name
                in report)
        return
    cores = int(host.run("nproc").stdout)
    assert manifest["compile_skip"] == "" and manifest["compile_command"] == ["make", "-j%d" % cores]
    for target in manifest["targets"]:
        assert [int(run["round"]) for run in target["compile"]] == [1, 2, 3]
    got = dict((r["label"], r) for r in records)
    assert set(got) == {"ram", "disk"}
    for record in got.values():
        # Each figure is the median of 3 builds, with their spread; a build of Lua takes seconds, not milliseconds.
        assert record["runs"] == 3 and record["runtime_ms_min"] <= record["runtime_ms"] <= record["runtime_ms_max"]
        assert record["runtime_ms"] > 200
        assert abs(record["iops"] - 1000.0 / record["runtime_ms"]) < 0.05 * record["iops"]
    (row,) = [row for row in results["ratios"] if row["host"] == name and row["tool"] == "compile"]
    assert row["title"] == "build of a code base (compile)" and row["ratio_low"] <= row["ratio"] <= row["ratio_high"]
    assert "build of a code base (compile)" in report
    # The copies and their builds went with the test directory.
    assert host.run("ls -a /srv/ram /var/tmp").stdout.count("ramdisk-bench") == 0


SETTLE = os.path.join(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", ""), "results", "molecule-settle")
# The figure each test of that run is judged by (the ratio table's), per (tool, test, op).
JUDGED = {("dd", "write_fdatasync", "write"): "bw_bytes", ("dd", "write_dsync", "write"): "bw_bytes",
          ("dd", "read", "read"): "bw_bytes", ("dd", "small_files", "write"): "iops",
          ("pgbench", "tpcb_like", "transaction"): "iops", ("pgbench", "select_only", "transaction"): "iops",
          ("compile", "build", "build"): "iops"}


def _width(values):
    """Below 6 rounds the 95% interval of the median is the lowest to the highest run."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    median = ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2.0
    return (ordered[-1] - ordered[0]) / median


def test_further_rounds_ran_only_where_the_first_ones_scattered(name, host):
    """Read every round of the settle run back from runs.csv and check the role's decision: a test ran rounds 3 and 4
    when, and only when, one of its figures spread more than 5% over rounds 1 and 2; what still spread more than 5%
    over all its rounds is listed as unsettled."""
    with open(os.path.join(SETTLE, "results.json"), encoding="utf-8") as handle:
        settle = json.load(handle)
    manifest = json.load(open(os.path.join(SETTLE, name, "manifest.json"), encoding="utf-8"))
    runs = [row for row in settle["runs"] if row["host"] == name]
    repeated = 0
    for target in manifest["targets"]:
        figures = {}
        for row in runs:
            key = (row["tool"], row["test"], row["op"])
            if row["label"] == target["label"] and key in JUDGED:
                figures.setdefault(key, {})[int(row["round"])] = row[JUDGED[key]]
        tools = sorted(set(key[0] for key in figures))
        assert tools == (["compile", "dd"] if name.startswith("debian13") else ["dd", "pgbench"]), tools
        expected_unsettled = []
        for tool in tools:
            mine = dict((key, rounds) for key, rounds in figures.items() if key[0] == tool)
            scattered = any(_width([rounds[n] for n in (1, 2)]) > 0.05 for rounds in mine.values())
            for key, rounds in mine.items():
                assert sorted(rounds) == ([1, 2, 3, 4] if scattered else [1, 2]), (target["label"], key)
                if _width(list(rounds.values())) > 0.05:
                    expected_unsettled.append(key)
            repeated += scattered
        got = sorted((u["tool"], u["test"], u["op"]) for u in target["unsettled"])
        assert got == sorted(expected_unsettled), (target["label"], got, expected_unsettled)
        assert target["rounds"] == max(max(rounds) for rounds in figures.values())
    # The disk's dsync writes never agree within 5% over 2 rounds in the lab: at least one test ran again.
    assert repeated > 0
    # pgbench's cluster is stopped; the compile's copies went with the test directory.
    assert [line for line in host.run("ps -eo args").stdout.splitlines() if "ramdisk-bench" in line] == []
    assert host.run("ls -a /srv/ram /var/tmp").stdout.count("ramdisk-bench") == 0
