# SPDX-License-Identifier: GPL-3.0-or-later
"""Run bench_report for real on a fetched run (tests/unit/fixtures/run) in a temporary directory."""

from __future__ import annotations

import csv
import json
import os
import shutil

import pytest

from conftest import run_module_process

import ansible_collections.ramdisk.provision.plugins.modules.bench_report as module_under_test
from ansible_collections.ramdisk.provision.plugins.module_utils._bench import COLUMNS

MODULE_NAME = module_under_test.__name__
RUN = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "fixtures", "run")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def run_module(tmp_path, **args):
    return run_module_process(MODULE_NAME, tmp_path, args)


@pytest.fixture()
def run_dir(tmp_path):
    target = tmp_path / "run"
    shutil.copytree(RUN, target)
    return target


def test_check_mode_writes_nothing(tmp_path, run_dir):
    before = sorted(os.listdir(run_dir))
    result = run_module(tmp_path, path=str(run_dir), _ansible_check_mode=True)
    assert result.get("failed") is not True, result
    assert result["changed"] is True
    assert sorted(os.listdir(run_dir)) == before


def test_report_files_fields_and_a_second_run(tmp_path, run_dir):
    result = run_module(tmp_path, path=str(run_dir), groups={"lab-debian12": ["lab", "all"]})
    assert result.get("failed") is not True, result
    assert result["changed"] is True and result["problems"] == []
    assert result["hosts"] == ["lab-debian12"]
    names = set(os.path.basename(f) for f in result["files"])
    assert {"results.json", "results.csv", "runs.csv", "report.md", "report.html", "ratios.png", "throughput_write.png",
            "throughput_read.png", "iops.png", "latency_p99.png",
            "memcopy_fraction.png", "latency_randrw_read.png", "latency_randrw_write.png",
            "latency_fsync_sync.png"} <= names
    for name in names:
        assert (run_dir / name).is_file()
        if name.endswith(".png"):
            assert (run_dir / name).read_bytes()[:8] == PNG_SIGNATURE
    data = json.loads((run_dir / "results.json").read_text())
    assert data["records"] and all(set(COLUMNS) <= set(r) for r in data["records"])
    assert data["context"]["lab-debian12"]["memcopy_bw_bytes"] > 0
    assert any("tmpfs (/tmp)" in r["sentence"] for r in data["ratios"])
    # 'lab' holds the same hosts as 'all': one row, named for both.
    assert set(g["group"] for g in data["group_ratios"]) == {"all, lab"}
    with open(run_dir / "results.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(data["records"]) and list(rows[0]) == list(COLUMNS)
    report = (run_dir / "report.md").read_text()
    assert "![Sequential write throughput per host](throughput_write.png)" in report
    # One host in every group: no per-group table or chart repeating the per-host figures; the report opens
    # with what RAM bought on each host.
    assert "throughput_groups.png" not in names and "Per group" not in report
    lines = report.splitlines()
    assert lines[2] == "## What RAM bought" and lines[4].startswith("- Host lab-debian12: RAM was clearly ahead of disk in ")
    verdict = lines[4]
    clear = sum(1 for r in data["ratios"] if r["clear"])
    assert " in %d of %d comparisons" % (clear, len(data["ratios"])) in verdict
    shaky = sum(1 for r in data["ratios"] if r["ratio_high"] / r["ratio_low"] > 1.25)
    assert ("%d of %d %s unsteady" % (shaky, len(data["ratios"]), "is" if shaky == 1 else "are") in verdict) == bool(shaky)
    assert "Memory ceiling" in report and "\u00d7" in report
    # The HTML carries its charts inline: one file to mail or attach.
    html = (run_dir / "report.html").read_text()
    assert 'title="latency_p99.png"' in html and 'src="latency_p99.png"' not in html
    assert html.count('src="data:image/png;base64,') == len([name for name in names if name.endswith(".png")])

    again = run_module(tmp_path, path=str(run_dir), groups={"lab-debian12": ["lab", "all"]})
    assert again["changed"] is False, again


def test_tables_only_and_errors(tmp_path, run_dir):
    result = run_module(tmp_path, path=str(run_dir), charts=False)
    assert result.get("failed") is not True, result
    assert not [name for name in os.listdir(run_dir) if name.endswith(".png")]
    missing = run_module(tmp_path, path=str(tmp_path / "nothing"))
    assert missing["failed"] is True and "run the benchmark role first" in missing["msg"]
    empty = tmp_path / "empty"
    empty.mkdir()
    none = run_module(tmp_path, path=str(empty))
    assert none["failed"] is True and "manifest.json" in none["msg"]


def test_report_of_three_rounds_carries_the_spread(tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(RUN + "-rounds", run_dir)
    result = run_module(tmp_path, path=str(run_dir), groups={"lab-debian12": ["lab", "all"]}, charts=False)
    assert result.get("failed") is not True, result
    # The answer first: one sentence for the one host, then the figures.
    assert result["summary"][0].startswith("Host lab-debian12: RAM was clearly ahead of disk in 13 of 13 comparisons")
    assert result["summary"][1].startswith("RAM against disk on host lab-debian12 (quick profile, geometric means of 3 runs")
    assert len(result["summary"]) == 2 + 13
    data = json.loads((run_dir / "results.json").read_text())
    assert data["runs_per_figure"] == 3 and len(data["runs"]) == 3 * len(data["records"])
    with open(run_dir / "runs.csv", newline="") as handle:
        runs = list(csv.DictReader(handle))
    assert sorted(set(row["round"] for row in runs)) == ["1", "2", "3"]
    report = (run_dir / "report.md").read_text()
    assert "median of 3 runs" in report and "range of the runs" in report and "geometric means" in report
    # Test names are told apart, and the ratio column says what the sentence says.
    assert "metadata metadata" not in report and "fio fsync sync" not in report
    for row in data["ratios"]:
        assert row["words"] in report
        assert ("faster" in row["words"]) == ("faster" in row["sentence"])
    assert "measuring time" in report


def test_a_run_held_against_an_earlier_one(tmp_path):
    earlier, later = tmp_path / "earlier", tmp_path / "later"
    shutil.copytree(RUN + "-rounds", earlier)
    shutil.copytree(RUN + "-rounds", later)
    first = run_module(tmp_path, path=str(earlier), charts=False)
    assert first.get("failed") is not True, first
    # The same figures: nothing moved.
    same = run_module(tmp_path, path=str(later), charts=False, compare=str(earlier))
    assert same.get("failed") is not True, same
    assert same["summary"][-1].startswith("Against run try1: 0 of 26 figures moved beyond the spread")
    # Halve every disk figure of the earlier run (a slower disk before): RAM is as it was, disk moved.
    data = json.loads((earlier / "results.json").read_text())
    for record in data["records"]:
        if record["kind"] == "disk":
            for key in [key for key in record if key.startswith(("bw_bytes", "iops"))]:
                record[key] = record[key] / 4 if record[key] else record[key]
    (earlier / "results.json").write_text(json.dumps(data))
    moved = run_module(tmp_path, path=str(later), charts=False, compare=str(earlier / "results.json"))
    line = moved["summary"][-1]
    assert line.startswith("Against run try1: ") and " worse)" in line and "(0 better" not in line, line
    assert "## Against run try1" in (later / "report.md").read_text()
    wrong = run_module(tmp_path, path=str(later), charts=False, compare=str(tmp_path / "nothing"))
    assert wrong["failed"] and "it is not the results.json of an earlier benchmark run" in wrong["msg"]


def test_numbers_written_as_text_by_older_cores(tmp_path):
    """ansible-core 2.17 and 2.18 template the manifest's numbers into text ("54.3"): the report reads them."""
    run_dir = tmp_path / "run"
    shutil.copytree(RUN + "-rounds", run_dir)
    manifest_path = run_dir / "lab-debian12" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["measure_seconds"] = "54.3"
    manifest["runs"] = "3"
    for target in manifest["targets"]:
        target["started"], target["ended"] = "1795490000.5", "1795490020.25"
    manifest_path.write_text(json.dumps(manifest))
    result = run_module(tmp_path, path=str(run_dir), charts=False)
    assert result.get("failed") is not True, result
    assert "| 54.3 s |" in (run_dir / "report.md").read_text()


def test_seeds_report_prints_each_seed_beside_the_published_and_why_one_was_skipped(tmp_path):
    """A seeds run of 2 rounds: every write-up's table, our figures with their spread beside the published ones, the
    terminal summary naming each source, and the reason a test did not run (here, as on a host without
    PostgreSQL). The scale is text, as ansible-core 2.17 and 2.18 write it."""
    run_dir = tmp_path / "run"
    shutil.copytree(RUN + "-seeds", run_dir)
    manifest_path = run_dir / "lab-debian12" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    why = "PostgreSQL is not installed on this host (pg_test_fsync comes with the server package)."
    manifest["seed_skips"]["pg_test_fsync"] = why
    for target in manifest["targets"]:
        target["seeds"] = dict((test, entries) for test, entries in target["seeds"].items() if test != "pg_test_fsync")
        target["seed_scale"] = dict((key, str(value)) for key, value in target["seed_scale"].items())
    manifest_path.write_text(json.dumps(manifest))
    result = run_module(tmp_path, path=str(run_dir), charts=False)
    assert result.get("failed") is not True, result
    assert result["problems"] == []
    summary = "\n".join(result["summary"])
    for source in ("the /tmp write-up (502 servers)", "the tmpfs vs ext3 write-up", "the ramdisk guide",
                   "the PostgreSQL write-up", "the dd write-up"):
        assert source in summary
    assert "skipped on lab-debian12: " + why in summary
    assert "published ×4.9 faster (tmpfs 1.4 GB/s, SSD 285 MB/s)" in summary
    report = (run_dir / "report.md").read_text()
    assert "Host lab-debian12: skipped: " + why in report
    assert "Host lab-debian12, target ram: one block of 16.0 MiB, 200 files of 1 KiB (the write-up: 10,000; files per second compares)." in report
    assert "Host lab-debian12, target disk: -n 1:32768:0:1000, 1,024 files" in report
    assert "too quick for bonnie++ to time (+++++)" in report
    assert "| tmpfs 1,137,033 ops/s |" not in report          # no pg_test_fsync figures of ours: no row
    assert "<h3>fio_dbtest: the ramdisk guide</h3>" in (run_dir / "report.html").read_text()
    data = json.loads((run_dir / "results.json").read_text())
    assert [seed["id"] for seed in data["seeds"]] == ["tmp_dd", "bonnie", "fio_dbtest", "pg_test_fsync", "dd_64k"]
    assert all(row["ram"]["runs"] == 2 for seed in data["seeds"] for row in seed["rows"])


def test_every_test_skipped_says_why_not_that_figures_were_unreadable(tmp_path):
    """pgbench and compile asked for on a host with neither PostgreSQL nor a source tree: nothing was measured and
    nothing failed, so the module says each test was skipped and why, not that no figure could be read."""
    run_dir = tmp_path / "run"
    shutil.copytree(RUN, run_dir)
    for manifest_path in run_dir.glob("*/manifest.json"):
        manifest = json.loads(manifest_path.read_text())
        manifest["tests"] = ["pgbench", "compile"]
        manifest["pgbench_skip"] = "PostgreSQL is not installed on this host, so pgbench could not run here."
        manifest["compile_skip"] = "benchmark_compile_source /src is not a directory on this host, so there is nothing to build."
        for target in manifest["targets"]:
            for test in ("fio", "dd", "metadata", "pgbench", "compile"):
                target.pop(test, None)
        manifest_path.write_text(json.dumps(manifest))
    host = sorted(path.parent.name for path in run_dir.glob("*/manifest.json"))[0]
    result = run_module(tmp_path, path=str(run_dir), charts=False)
    assert result["failed"] is True and "No figures could be read" not in result["msg"]
    assert "Nothing was measured under %s: every test asked for was skipped on every host." % run_dir in result["msg"]
    assert ("compile did not run on host %s: benchmark_compile_source /src is not a directory on this host" % host
            in result["msg"])
    assert "pgbench did not run on host %s: PostgreSQL is not installed" % host in result["msg"]
    assert not (run_dir / "results.json").exists()


def test_a_target_left_out_of_the_compile_test_is_named_with_its_reason(tmp_path, run_dir):
    manifest_path = sorted(run_dir.glob("*/manifest.json"))[0]
    manifest = json.loads(manifest_path.read_text())
    manifest["tests"] = list(manifest.get("tests") or []) + ["compile"]
    target = [t for t in manifest["targets"] if t["kind"] == "ram"][0]
    target["compile_skip"] = "the target directory %s lets no other user in, and the build runs as nobody." % target["path"]
    manifest_path.write_text(json.dumps(manifest))
    result = run_module(tmp_path, path=str(run_dir), charts=False)
    assert result.get("failed") is not True, result
    line = "compile did not run on host %s, target %s: the target directory %s lets no other user in" % (
        manifest_path.parent.name, target["label"], target["path"])
    assert line in (run_dir / "report.md").read_text() and line in "\n".join(result["summary"])


@pytest.mark.parametrize("low, high, ratio, clear, text", [
    (3.0, 4.0, 3.5, True, "\u00d73.0-4.0"),          # ×3.5 faster: how many times faster
    (0.5, 0.9, 0.8, True, "\u00d71.1-2.0"),          # ×1.2 slower: how many times slower, not ×0.5-0.9
    (0.5, 1.4, 0.9, False, "\u00d70.5-1.4"),         # no clear difference: the ratios as they are
    (None, 1.0, 0.9, True, "-"),
])
def test_the_range_reads_the_way_its_words_do(low, high, ratio, clear, text):
    assert module_under_test._range(low, high, ratio, clear) == text


# --- schema 1 and 2 as before, schema 3 from the probes' results -----------------------------------------

def _built(path):
    data = module_under_test.build(str(path), module_under_test.find_hosts(str(path)), {}, "T")
    data["generated"] = "G"
    data.pop("memory_samples")
    return data


def test_a_schema_1_run_reports_as_it_did_before_schema_3():
    """tests/unit/fixtures/run-rounds-report holds what main at ca78187 wrote for the run-rounds fixture (report,
    terminal summary, results and runs): reading schema 3 changed none of it."""
    data = _built(RUN + "-rounds")
    expected = os.path.join(os.path.dirname(RUN), "run-rounds-report")
    with open(os.path.join(expected, "report.md"), encoding="utf-8") as handle:
        assert module_under_test.render_markdown(module_under_test.report_sections(data, [])) == handle.read()
    with open(os.path.join(expected, "summary.txt"), encoding="utf-8") as handle:
        assert "\n".join(module_under_test.summary_lines(data)) == handle.read()
    from ansible_collections.ramdisk.provision.plugins.module_utils import _bench
    with open(os.path.join(expected, "results-and-runs.csv"), encoding="utf-8") as handle:
        assert _bench.csv_text(data["records"]) + _bench.csv_text(data["runs"], _bench.RUN_COLUMNS) == handle.read()
    assert data["schema"] == 2 and data["columns"] == list(COLUMNS) and "environment" not in data


def test_a_schema_3_run_is_reported_from_the_probes_results(tmp_path):
    import bench_schema3
    doc, files = bench_schema3.manifest(ram_factor={"write_dsync": 0.5}, steal=(("randrw", "disk", 2),))
    run_dir = tmp_path / "run"
    bench_schema3.write_run(run_dir, doc, files)
    result = run_module(tmp_path, path=str(run_dir), charts=True)
    assert result.get("failed") is not True, result
    assert result["problems"] == []
    names = set(os.path.basename(f) for f in result["files"])
    # The latency distributions come from the raw fio files, by their names.
    assert {"latency_randrw_read.png", "latency_randrw_write.png", "latency_fsync_sync.png", "ratios.png"} <= names
    # The headline counts jobs, only where RAM is ahead: not the cache row, not the job where it is behind.
    headline = result["summary"][0]
    assert headline.startswith("Host lab3: RAM clearly ahead of disk in 6 of 8 jobs: "), headline
    assert "Behind in 1: large write, every block synced (dd) \u00d72.0 slower" in headline
    assert "No clear difference in 1. Not counted: 1 where the disk row measured a cache (read back (dd), buffered)" in headline
    assert "2 probe runs had more than 2% of the CPU stolen" in "\n".join(result["summary"])
    data = json.loads((run_dir / "results.json").read_text())
    assert data["schema"] == 3 and data["environment"]["lab3"]["governor"] == "performance"
    with open(run_dir / "results.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {"mode", "row_label", "device_share", "device_write_bytes", "cov", "ci_coverage"} <= set(rows[0])
    cache = [row for row in rows if (row["label"], row["probe"], row["mode"]) == ("disk", "read", "buffered")][0]
    assert cache["row_label"] == "cache" and cache["cache_runs"] == "5" and cache["device_share"] == "0.0"
    with open(run_dir / "runs.csv", newline="") as handle:
        runs = list(csv.DictReader(handle))
    warm = [row for row in runs if row["warmup"] == "True"]
    assert warm and set(row["round"] for row in warm) == {"0"}
    assert len(runs) == len(warm) * 6 and all(row["runs"] == "5" for row in rows)
    report = (run_dir / "report.md").read_text()
    assert "95% (exact 96.8%)" in report and "93.8% only (lowest to highest of 5 runs)" in report
    assert "## Environment" in report and "| governor | performance |" in report and "`-vda  254:0" in report
    assert "round 2: CPU steal 5.0%" in report
    assert "Disk figures with no RAM side to compare with" in report
    html = (run_dir / "report.html").read_text()
    assert "<pre>NAME   MAJ:MIN" in html


def test_a_schema_3_seeds_run_judges_each_write_up_figure_by_the_decision_rule(tmp_path):
    """The seeds' table takes each figure's comparison from the decision rule (the exact interval on the log ratio),
    as the comparisons table does, not from whether the ranges of the runs overlap: the same verdict and interval
    for the same job in both tables, and its true coverage printed."""
    import bench_schema3
    doc, files = bench_schema3.manifest(seeds=("tmp_dd", "dd_64k"), jitter=0.05)
    run_dir = tmp_path / "run"
    bench_schema3.write_run(run_dir, doc, files)
    result = run_module(tmp_path, path=str(run_dir))
    assert result.get("failed") is not True, result
    data = json.loads((run_dir / "results.json").read_text())
    judged = dict(((row["ram_label"], row["disk_label"], row["tool"], row["test"], row["op"]), row)
                  for row in data["ratios"] if row.get("verdict"))
    seeds = dict((seed["id"], seed) for seed in data["seeds"])
    rows = seeds["tmp_dd"]["rows"] + seeds["dd_64k"]["rows"]
    assert len(rows) == 6
    for row in rows:
        rule = judged[(row["ram_label"], row["disk_label"], row["tool"], row["test"], row["op"])]
        assert (row["verdict"], row["ratio"], row["ratio_low"], row["ratio_high"], row["coverage"]) == (
            rule["verdict"], rule["ratio"], rule["ratio_low"], rule["ratio_high"], rule["coverage"])
    files_row = [row for row in rows if row["test"] == "seed_files_dsync"][0]
    assert files_row["verdict"] == "ahead" and 30 < files_row["ratio"] < 55
    report = (run_dir / "report.md").read_text()
    seeds_part = report[report.index("## The seeds' experiments"):]
    line = [text for text in seeds_part.split("\n") if "dsync" in text and "| ram (tmpfs) |" in text][0]
    assert "faster (\u00d7" in line and "95% (exact 96.8%)" in line, line


@pytest.mark.parametrize("jitter", [0.0005, 0.08])
def test_figures_the_stopping_rule_gave_up_on_are_listed_with_their_cap_and_cov(tmp_path, jitter):
    """A figure stopped at the run's cap (benchmark_max_runs, here 5) with its CoV above benchmark_cov_limit is named
    in the summary, in the report's "did not settle" section and beside the figure, with the cap and CoV of this
    run; runs that scatter little stop steady and none is listed."""
    import bench_schema3
    doc, files = bench_schema3.manifest(jitter=jitter, max_runs=5, cov_limit=0.035)
    run_dir = tmp_path / "run"
    bench_schema3.write_run(run_dir, doc, files)
    result = run_module(tmp_path, path=str(run_dir))
    assert result.get("failed") is not True, result
    data = json.loads((run_dir / "results.json").read_text())
    report = (run_dir / "report.md").read_text()
    capped = [status for status in doc["settle"] if status["reason"] == "cap"]
    assert len(data["stopped"]) == len(capped)
    if jitter < 0.001:
        assert not capped and "## Figures that did not settle" not in report
        assert not any("stopped before they settled" in line for line in result["summary"])
        return
    assert capped and all(status["cov"] > 0.035 and status["rounds"] == 5 for status in capped)
    assert "%d figures stopped before they settled" % len(capped) in "\n".join(result["summary"])
    section = report[report.index("## Figures that did not settle"):]
    first = capped[0]
    words = "stopped at the cap of 5 runs, CoV %.1f%% (limit 3.5%%)" % (100 * first["cov"])
    assert words in section.split("\n## ")[0]
    assert report.count(words) >= 2, "the figures table notes it too"
