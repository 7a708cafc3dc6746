# SPDX-License-Identifier: GPL-3.0-or-later
"""Run bench_settle for real on records as bench_probe returns them, and bench_report on a run where further rounds
ran and a figure did not settle."""

from __future__ import annotations

import json
import os
import shutil

from conftest import run_module_process

import ansible_collections.ramdisk.provision.plugins.modules.bench_settle as module_under_test
from ansible_collections.ramdisk.provision.plugins.module_utils import _probes

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "fixtures")
ROUNDS = os.path.join(FIXTURES, "run-rounds", "lab-debian12")


def run_module(tmp_path, module, **args):
    return run_module_process(module, tmp_path, args)


def _manifest():
    with open(os.path.join(ROUNDS, "manifest.json"), encoding="utf-8") as handle:
        return json.load(handle)


MIB = 1024 * 1024
PROFILE = {"runs": 5, "fio_runtime": 1, "small_files": 20, "meta_dirs": 2, "meta_files_per_dir": 5,
           "meta_file_bytes": 1024, "meta_seconds": 1}
TARGETS = [{"label": "ram", "path": "/srv/ram", "kind": "ram", "file_size_bytes": 8 * MIB, "direct_ok": False},
           {"label": "disk", "path": "/var/tmp", "kind": "disk", "file_size_bytes": 8 * MIB, "direct_ok": True}]
ARGS = {"host": "h", "tests": ["dd"], "fio_jobs": [], "runs": 0, "cores": 2, "dir_name": "rb",
        "random_file": "/var/tmp/rb.random", "raw_dir": "/var/tmp/rb.raw", "mem_total": 4 << 30, "pg_bin": "",
        "compile_command": [], "compile_user": "", "compile_source": "", "seeds": [], "seed_tools": {}}


def records(values):
    """What bench_probe would have returned for the plan's write_fdatasync items: VALUES per label, by round."""
    plan = _probes.plan(TARGETS, PROFILE, **ARGS)
    out = []
    for item in plan["items"]:
        if item["probe"] != "write_fdatasync":
            continue
        value = 1.0 if item["warmup"] else values[item["label"]][item["round"] - 1]
        figure = {"op": "write", "io_bytes": 8 * MIB, "bw_bytes": value, "probe": item["probe"], "tool": "dd",
                  "test": item["test"], "label": item["label"], "mode": item["mode"], "round": item["round"],
                  "warmup": item["warmup"]}
        out.append({"item": item, "result": {"figures": [figure], "row_label": "sync"}})
    return out


def settle_args():
    return dict(ARGS, targets=TARGETS, profile=PROFILE)


def test_a_noisy_disk_gets_one_more_round_on_both_sides_and_steady_figures_none(tmp_path):
    noisy = records({"ram": [100.0, 101.0, 99.0, 100.0, 100.0], "disk": [100.0, 130.0, 70.0, 120.0, 80.0]})
    result = run_module(tmp_path, module_under_test.__name__, plan=settle_args(), records=noisy,
                        _ansible_check_mode=True)
    assert result.get("failed") is not True, result
    assert result["changed"] is False
    assert [one for items in result["probe_rounds"] for one in items] == result["probe_items"]
    assert [(one["label"], one["probe"], one["round"]) for one in result["probe_items"]] == [
        ("ram", "write_fdatasync", 6), ("disk", "write_fdatasync", 6)]
    reasons = dict((rule["label"], rule["reason"]) for rule in result["status"])
    assert reasons == {"ram": "steady", "disk": "needs-runs"}
    # A looser limit calls the disk steady too: nothing more to run.
    loose = run_module(tmp_path, module_under_test.__name__, plan=settle_args(), records=noisy, cov_limit=0.5)
    assert loose["probe_items"] == [] and {rule["reason"] for rule in loose["status"]} == {"steady"}
    # At the cap (5 runs here) the noisy figure stops, and says so.
    capped = run_module(tmp_path, module_under_test.__name__, plan=settle_args(), records=noisy, max_runs=5)
    assert capped["probe_items"] == []
    assert [rule["reason"] for rule in capped["status"] if rule["label"] == "disk"] == ["cap"]


def test_refuses_limits_out_of_range_and_a_plan_without_targets(tmp_path):
    args = {"records": [], "plan": settle_args()}
    result = run_module(tmp_path, module_under_test.__name__, max_runs=4, **args)
    assert result["failed"] is True and result["msg"] == "Host h: max_runs is 4: give from 5 to 30 (benchmark_max_runs)."
    result = run_module(tmp_path, module_under_test.__name__, cov_limit=0, **args)
    assert result["failed"] is True and "give a coefficient of variation above 0 and below 1" in result["msg"]
    result = run_module(tmp_path, module_under_test.__name__, plan=ARGS, records=[])
    assert result["failed"] is True and result["msg"].startswith("Host h: plan has no targets, profile.")


def test_report_of_a_run_with_further_rounds_and_an_unsettled_figure(tmp_path):
    """The role's record after settle.yml: more rounds on one target (its fio files named on), and what did not
    settle. The report says how many runs the medians come from and lists the figure that did not settle."""
    run_dir = tmp_path / "run"
    shutil.copytree(os.path.join(FIXTURES, "run-rounds"), run_dir)
    host_dir = run_dir / "lab-debian12"
    manifest = _manifest()
    web = [t for t in manifest["targets"] if t["label"] == "web"][0]
    # Rounds 4 to 6 of fio on the tmpfs: the same runs again, as files of their own.
    for number in (4, 5, 6):
        shutil.copy(host_dir / ("fio-web-%d.json" % (number - 3)), host_dir / ("fio-web-%d.json" % number))
    web["fio"] = ["fio-web-%d.json" % number for number in range(1, 7)]
    web["rounds"] = 6
    web["unsettled"] = [{"tool": "fio", "test": "randrw", "op": "read", "metric": "iops", "runs": 6, "median": 50000.0,
                         "low": 40000.0, "high": 61000.0, "width": 0.42, "settled": False}]
    (host_dir / "manifest.json").write_text(json.dumps(manifest))
    result = run_module(tmp_path, "ansible_collections.ramdisk.provision.plugins.modules.bench_report", path=str(run_dir),
                        charts=False)
    assert result.get("failed") is not True, result
    with open(run_dir / "results.json", encoding="utf-8") as handle:
        data = json.load(handle)
    assert (data["runs_fewest"], data["runs_per_figure"]) == (3, 6)
    assert data["unsettled"] == [dict(web["unsettled"][0], host="lab-debian12", label="web")]
    fio_web = [r for r in data["records"] if r["label"] == "web" and r["tool"] == "fio"]
    assert fio_web and all(r["runs"] == 6 for r in fio_web)
    report = (run_dir / "report.md").read_text(encoding="utf-8")
    assert "Every figure is the median of 3 to 6 runs (more where the first ones scattered)" in report
    assert "## Figures that did not settle" in report
    assert ("| lab-debian12 | web | random 4 KiB read, mixed (fio) | 6 | 50000/s | 40000/s – 61000/s | 42% |") in report, report
    assert any("1 figures had not settled" in line for line in result["summary"]), result["summary"]
