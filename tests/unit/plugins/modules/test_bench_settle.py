# SPDX-License-Identifier: GPL-3.0-or-later
"""Run bench_settle for real on the rounds of a fetched run (tests/unit/fixtures/run-rounds), and bench_report on
a run where further rounds ran and a figure did not settle."""

from __future__ import annotations

import json
import os
import shutil

from conftest import run_module_process

import ansible_collections.ramdisk.provision.plugins.modules.bench_settle as module_under_test

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "fixtures")
ROUNDS = os.path.join(FIXTURES, "run-rounds", "lab-debian12")


def run_module(tmp_path, module, **args):
    return run_module_process(module, tmp_path, args)


def _manifest():
    with open(os.path.join(ROUNDS, "manifest.json"), encoding="utf-8") as handle:
        return json.load(handle)


def _dd_text():
    with open(os.path.join(ROUNDS, "dd.txt"), encoding="utf-8") as handle:
        return handle.read()


def test_every_figure_of_the_target_is_judged_from_the_host_files(tmp_path):
    target = [t for t in _manifest()["targets"] if t["label"] == "disk"][0]
    result = run_module(tmp_path, module_under_test.__name__, target=target, raw_dir=ROUNDS, dd_text=_dd_text(),
                        spread=0.1, _ansible_check_mode=True)
    assert result.get("failed") is not True, result
    assert result["changed"] is False and result["problems"] == []
    figures = result["figures"]
    assert len(figures) == 13 and all(f["runs"] == 3 for f in figures)
    assert set(f["tool"] for f in figures) == {"fio", "dd", "metadata"}
    assert result["unsettled"] == [tool for tool in ("fio", "metadata", "dd")
                                   if any(not f["settled"] for f in figures if f["tool"] == tool)]
    for figure in figures:
        assert figure["low"] <= figure["median"] <= figure["high"]
    # A looser spread leaves unsettled only the tests with a figure whose interval is wider still.
    loose = run_module(tmp_path, module_under_test.__name__, target=target, raw_dir=ROUNDS, dd_text=_dd_text(), spread=1)
    wide = set(f["tool"] for f in figures if f["width"] is None or f["width"] > 1)
    assert set(loose["unsettled"]) == wide and len(wide) < len(result["unsettled"]) + 1


def test_a_missing_fio_file_is_a_problem_not_a_failure(tmp_path):
    target = [t for t in _manifest()["targets"] if t["label"] == "web"][0]
    target["fio"] = target["fio"] + ["fio-web-4.json"]
    result = run_module(tmp_path, module_under_test.__name__, target=target, raw_dir=ROUNDS, dd_text=_dd_text(), spread=0.1)
    assert result.get("failed") is not True, result
    assert len(result["problems"]) == 1 and "fio-web-4.json" in result["problems"][0]


def test_refuses_a_spread_out_of_range_and_a_target_without_its_names(tmp_path):
    result = run_module(tmp_path, module_under_test.__name__, target={"label": "web"}, raw_dir=ROUNDS, spread=0.1)
    assert result["failed"] is True and result["msg"].startswith("target has no path, kind, backend.")
    target = _manifest()["targets"][0]
    result = run_module(tmp_path, module_under_test.__name__, target=target, raw_dir=ROUNDS, spread=0)
    assert result["failed"] is True and "give a share of the median above 0 and at most 1" in result["msg"]


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
