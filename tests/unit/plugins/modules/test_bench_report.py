# SPDX-License-Identifier: GPL-3.0-or-later
"""Run bench_report for real on a fetched run (tests/unit/fixtures/run) in a temporary directory."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys

import pytest

import ansible_collections.ramdisk.provision.plugins.modules.bench_report as module_under_test
from ansible_collections.ramdisk.provision.plugins.module_utils._bench import COLUMNS

MODULE_NAME = module_under_test.__name__
RUN = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "fixtures", "run")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def run_module(tmp_path, **args):
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), MPLBACKEND="Agg")
    proc = subprocess.run([sys.executable, "-m", MODULE_NAME, str(args_file)], capture_output=True, text=True,
                          env=env, timeout=300, check=False)
    return json.loads(proc.stdout)


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
    assert {"results.json", "results.csv", "report.md", "report.html", "throughput_write.png", "throughput_read.png",
            "throughput_groups.png", "iops.png", "latency_p99.png", "memcopy_fraction.png"} <= names
    for name in names:
        assert (run_dir / name).is_file()
        if name.endswith(".png"):
            assert (run_dir / name).read_bytes()[:8] == PNG_SIGNATURE
    data = json.loads((run_dir / "results.json").read_text())
    assert data["records"] and all(set(COLUMNS) <= set(r) for r in data["records"])
    assert data["context"]["lab-debian12"]["memcopy_bw_bytes"] > 0
    assert any("tmpfs (/tmp)" in r["sentence"] for r in data["ratios"])
    assert set(g["group"] for g in data["group_ratios"]) == {"lab", "all"}
    with open(run_dir / "results.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(data["records"]) and list(rows[0]) == list(COLUMNS)
    report = (run_dir / "report.md").read_text()
    assert "![Sequential write throughput per host](throughput_write.png)" in report
    assert "Memory ceiling" in report and "\u00d7" in report
    assert '<img src="latency_p99.png"' in (run_dir / "report.html").read_text()

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
