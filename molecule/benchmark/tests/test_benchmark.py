"""The benchmark's results on the controller, and a clean host; read again after the restart.

testinfra runs on the controller: the results are read as plain files from molecule's ephemeral
directory, where converge put them: one round of every quick test (run id "molecule"), rounds with a further
batch where they scatter ("molecule-settle") and the seeds profile ("molecule-seeds")."""

from __future__ import annotations

import csv
import json
import os

import pytest

RESULTS = os.path.join(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", ""), "results", "molecule")
# The quick run's rounds (benchmark_runs in converge): one; the settle run below has the rounds and their spread.
RUNS = 1
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
    # The profile's own count is 3 rounds; benchmark_runs asked for one.
    assert manifest["profile_spec"]["runs"] == 3
    assert manifest["runs"] == RUNS and manifest["measure_seconds"] > 0
    for target in manifest["targets"]:
        # Every test once per round: per round, one fio output per job, each job a fio run of its own (so the target
        # held one job's files at a time).
        assert len(target["fio"]) == RUNS and len(target["metadata"]) == RUNS
        assert all(len(entries) == RUNS for entries in target["dd"].values())
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
    assert "copied" in dd and "=== ram write_fdatasync %d" % RUNS in dd


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


def test_every_figure_carries_its_runs_and_range(name, results):
    records = [r for r in results["records"] if r["host"] == name]
    assert results["runs_per_figure"] == RUNS and all(r["runs"] == RUNS for r in records)
    for record in records:
        for metric in ("bw_bytes", "iops", "clat_ns_mean", "clat_ns_p50", "clat_ns_p99"):
            if record[metric] is not None:
                assert record[metric + "_min"] <= record[metric] <= record[metric + "_max"], (record["test"], metric)
    runs = [r for r in results["runs"] if r["host"] == name]
    assert len(runs) == RUNS * len(records) and set(r["round"] for r in runs) == set(range(1, RUNS + 1))
    for row in (row for row in results["ratios"] if row["host"] == name):
        assert row["runs"] == RUNS and row["ratio_low"] <= row["ratio"] <= row["ratio_high"]
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
    assert {"ratios.png", "throughput_write.png", "throughput_read.png", "iops.png",
            "latency_p99.png", "memcopy_fraction.png", "latency_randrw_read.png", "latency_fsync_sync.png"} <= set(pngs)
    # Both hosts are in the same groups (lab, all): no per-group chart repeating the per-host ones.
    assert "throughput_groups.png" not in pngs
    for png in pngs:
        with open(os.path.join(RESULTS, png), "rb") as handle:
            assert handle.read(8) == PNG_SIGNATURE, png
    report = open(os.path.join(RESULTS, "report.md"), encoding="utf-8").read()
    assert "ram (tmpfs, /srv/ram)" in report
    # The report opens with one sentence per host on what RAM bought.
    opening = report.split("\n\n", 3)[2]
    with open(os.path.join(RESULTS, "results.json"), encoding="utf-8") as handle:
        hosts = set(row["host"] for row in json.load(handle)["ratios"])
    assert opening.count("- Host ") == len(hosts)


def _visits(directory, name):
    """The labels of a host's visits in the order they began (the controller's clock), and whether each visit
    ended before the next began."""
    manifest = json.load(open(os.path.join(directory, name, "manifest.json"), encoding="utf-8"))
    spans = sorted((float(began), float(ended), target["label"]) for target in manifest["targets"]
                   for began, ended in target["visits"])
    apart = all(ended <= next_began for (_b, ended, _l), (next_began, _e, _n) in zip(spans, spans[1:]))
    return [label for _began, _ended, label in spans], apart


def test_targets_took_turns_round_by_round(name):
    """benchmark_interleave (on by default): round 1 on /srv/ram, round 1 on the disk, round 2 on /srv/ram, ...; each
    visit is recorded with the controller's clock, one after the other. The settle run shows it on Debian 13 over 2
    rounds (its further rounds at the end of each target's last visit); Debian 12 visits /srv/ram once there
    (benchmark_interleave false). The one-round quick run visits each target once, in order."""
    assert _visits(RESULTS, name) == (["ram", "disk"], True)
    if name.startswith("debian13"):
        assert _visits(SETTLE, name) == (["ram", "disk"] * 2, True)
    else:
        assert _visits(SETTLE, name) == (["ram"], True)


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
        assert record["runs"] == RUNS and record["iops"] > 0
        assert record["iops_min"] <= record["iops"] <= record["iops_max"]
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
        assert ("compile did not run on host %s: benchmark_compile_source /usr/local/src/tiny is not a directory" % name
                in report)
        return
    cores = int(host.run("nproc").stdout)
    assert manifest["compile_skip"] == "" and manifest["compile_command"] == ["make", "-j%d" % cores]
    for target in manifest["targets"]:
        assert [int(run["round"]) for run in target["compile"]] == list(range(1, RUNS + 1))
    got = dict((r["label"], r) for r in records)
    assert set(got) == {"ram", "disk"}
    for record in got.values():
        # prepare's project compiles three files and links them: tens of milliseconds at least, where a make that
        # found nothing to do takes a few.
        assert record["runs"] == RUNS and record["runtime_ms_min"] <= record["runtime_ms"] <= record["runtime_ms_max"]
        assert record["runtime_ms_min"] >= 30
        assert abs(record["iops"] - 1000.0 / record["runtime_ms"]) < 0.05 * record["iops"]
    (row,) = [row for row in results["ratios"] if row["host"] == name and row["tool"] == "compile"]
    assert row["title"] == "build of a code base (compile)" and row["ratio_low"] <= row["ratio"] <= row["ratio_high"]
    assert "build of a code base (compile)" in report
    # The copies and their builds went with the test directory.
    assert host.run("ls -a /srv/ram /var/tmp").stdout.count("ramdisk-bench") == 0


SETTLE = os.path.join(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", ""), "results", "molecule-settle")
# The figure each test of that run is judged by (the ratio table's), per (tool, test, op).
JUDGED = {("fio", "seq_read", "read"): "bw_bytes", ("metadata", "metadata", "create"): "iops",
          ("metadata", "metadata", "stat"): "iops", ("metadata", "metadata", "read"): "iops",
          ("metadata", "metadata", "delete"): "iops",
          ("dd", "write_fdatasync", "write"): "bw_bytes", ("dd", "write_dsync", "write"): "bw_bytes",
          ("dd", "read", "read"): "bw_bytes", ("dd", "small_files", "write"): "iops",
          ("pgbench", "tpcb_like", "transaction"): "iops", ("pgbench", "select_only", "transaction"): "iops",
          ("compile", "build", "build"): "iops"}
# benchmark_settle_spread of that run.
SPREAD = 0.005


def _width(values):
    """Below 6 rounds the 95% interval of the median is the lowest to the highest run."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    median = ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2.0
    return (ordered[-1] - ordered[0]) / median


def test_further_rounds_ran_only_where_the_first_ones_scattered(name, host):
    """Read every round of the settle run back from runs.csv and check the role's decision: a test ran rounds 3 and 4
    when, and only when, one of its figures spread more than SPREAD over rounds 1 and 2; what still spread more than
    SPREAD over all its rounds is listed as unsettled."""
    with open(os.path.join(SETTLE, "results.json"), encoding="utf-8") as handle:
        settle = json.load(handle)
    manifest = json.load(open(os.path.join(SETTLE, name, "manifest.json"), encoding="utf-8"))
    runs = [row for row in settle["runs"] if row["host"] == name]
    # Debian 13 measures both targets; Debian 12 /srv/ram alone (benchmark_disk_path null).
    assert [t["label"] for t in manifest["targets"]] == (["ram", "disk"] if name.startswith("debian13") else ["ram"])
    repeated = 0
    for target in manifest["targets"]:
        figures = {}
        for row in runs:
            key = (row["tool"], row["test"], row["op"])
            if row["label"] == target["label"] and key in JUDGED:
                figures.setdefault(key, {})[int(row["round"])] = row[JUDGED[key]]
        tools = sorted(set(key[0] for key in figures))
        assert tools == (["compile"] if name.startswith("debian13") else ["dd", "fio", "metadata", "pgbench"]), tools
        expected_unsettled = []
        for tool in tools:
            mine = dict((key, rounds) for key, rounds in figures.items() if key[0] == tool)
            scattered = any(_width([rounds[n] for n in (1, 2)]) > SPREAD for rounds in mine.values())
            for key, rounds in mine.items():
                assert sorted(rounds) == ([1, 2, 3, 4] if scattered else [1, 2]), (target["label"], key)
                if _width(list(rounds.values())) > SPREAD:
                    expected_unsettled.append(key)
            repeated += scattered
        got = sorted((u["tool"], u["test"], u["op"]) for u in target["unsettled"])
        assert got == sorted(expected_unsettled), (target["label"], got, expected_unsettled)
        assert target["rounds"] == max(max(rounds) for rounds in figures.values())
    # Timings of a fraction of a second never agree within 0.5% over 2 rounds: at least one test ran again.
    assert repeated > 0
    # pgbench's cluster is stopped; the compile's copies went with the test directory.
    assert [line for line in host.run("ps -eo args").stdout.splitlines() if "ramdisk-bench" in line] == []
    assert host.run("ls -a /srv/ram /var/tmp").stdout.count("ramdisk-bench") == 0


def test_rounds_of_dd_pgbench_and_the_compile_keep_their_spread(name):
    """Every figure of the settle run is the median of the rounds that test ran (2, or 4 after a further batch), with
    the lowest and highest round beside it; the raw files of fio and the metadata test, the compile's builds and
    pgbench's runs (one private cluster, started again for the further batch) are listed round by round."""
    with open(os.path.join(SETTLE, "results.json"), encoding="utf-8") as handle:
        settle = json.load(handle)
    manifest = json.load(open(os.path.join(SETTLE, name, "manifest.json"), encoding="utf-8"))
    records = [r for r in settle["records"] if r["host"] == name and (r["tool"], r["test"], r["op"]) in JUDGED]
    rounds = {}
    for row in settle["runs"]:
        if row["host"] == name:
            rounds.setdefault((row["label"], row["tool"], row["test"], row["op"]), set()).add(int(row["round"]))
    tool = "compile" if name.startswith("debian13") else "pgbench"
    assert set(r["tool"] for r in records) == ({tool} if tool == "compile" else {"dd", "fio", "metadata", tool})
    for record in records:
        key = (record["label"], record["tool"], record["test"], record["op"])
        metric = JUDGED[key[1:]]
        assert record["runs"] == len(rounds[key]) and record["runs"] in (2, 4), key
        assert 0 < record[metric + "_min"] <= record[metric] <= record[metric + "_max"], key
    for target in manifest["targets"]:
        if tool == "compile":
            built = [int(run["round"]) for run in target["compile"]]
            assert built == sorted(rounds[(target["label"], "compile", "build", "build")]), built
            (record,) = [r for r in records if r["label"] == target["label"] and r["tool"] == "compile"]
            # Builds per second is one over each build's time: the fastest build gives the most.
            assert abs(record["iops_max"] - 1000.0 / record["runtime_ms_min"]) < 0.05 * record["iops_max"]
        else:
            assert len(target["fio"]) == len(rounds[(target["label"], "fio", "seq_read", "read")])
            assert len(target["metadata"]) == len(rounds[(target["label"], "metadata", "metadata", "create")])
            assert sorted(set((run["test"], int(run["round"])) for run in target["pgbench"])) == sorted(
                (test, number) for test in ("select_only", "tpcb_like")
                for number in rounds[(target["label"], "pgbench", test, "transaction")])
