# SPDX-License-Identifier: GPL-3.0-or-later
"""Run survey_report for real, in a temporary directory, on plans shaped as ramdisk_plan returns them."""

from __future__ import annotations

import csv
import json
import os

from conftest import run_module_process

import ansible_collections.ramdisk.provision.plugins.modules.survey_report as module_under_test
from ansible_collections.ramdisk.provision.plugins.module_utils._survey import GIB, MIB, SURVEY_COLUMNS

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def run_module(tmp_path, **args):
    return run_module_process(module_under_test.__name__, tmp_path, args)


def plan(tmp, total, available, swap_total=0, swap_free=0, complete=True, errors=(), actions=()):
    """A ramdisk_plan result with the fields the survey reads."""
    return {
        "errors": list(errors), "plan_warnings": [],
        "policy": {"entries": [{"path": "/tmp", "backend": "tmpfs"}],
                   "budget": {"limit": "80%", "limit_bytes": int(total * 0.8), "total_bytes": total // 2}},
        "tmpfs": [{"path": path, "action": action, "state": "mounted", "fstype": "tmpfs", "options": ["size=50%"],
                   "ram_bytes": total // 2} for path, action in actions],
        "ramfs": [], "zram": [], "zram_swap": [], "brd": {},
        "ansible_facts": {"ramdisk": {
            "memory": {"total_bytes": total, "available_bytes": available, "free_bytes": available // 2,
                       "shmem_bytes": 4096, "used_bytes": total - available, "buff_cache_bytes": available // 2},
            "swap": {"total_bytes": swap_total, "free_bytes": swap_free, "devices": []},
            "paths": {"/tmp": {"usage_bytes": tmp, "inodes": 12, "complete": complete}},
            "tmp_gate": {"usage_bytes": tmp, "complete": complete, "tmp_is_ram_backed": False},
            "support": {"tmpfs": True, "ramfs": True, "zram": True, "brd": False},
            "mounts": [{"path": "/dev/shm", "kind": "tmpfs"}],
        }},
    }


def test_survey_files_verdicts_outliers_and_the_hosts_that_did_not_answer(tmp_path):
    plans = {
        "web1": plan(10 * MIB, 8 * GIB, 6 * GIB, actions=[("/tmp", "migrate")]),
        "web2": plan(5 * GIB, 8 * GIB, 6 * GIB, swap_total=2 * GIB, swap_free=GIB),   # over half, fits with swap
        "db1": plan(30 * GIB, 16 * GIB, 8 * GIB, complete=False,
                    errors=["Host db1: ramdisk_mounts__lab[0] /tmp: its 30.0 GiB do not fit in half of RAM."]),
    }
    path = tmp_path / "survey" / "run1"
    result = run_module(tmp_path, path=str(path), hosts=["web1", "web2", "db1", "gone"], plans=plans,
                        groups={"web1": ["web"], "web2": ["web"], "db1": ["db"], "gone": ["db"]})
    assert result.get("failed") is not True, result
    assert result["changed"] is False and result["outliers"] == ["db1"] and result["unanswered"] == ["gone"]
    names = set(os.path.basename(name) for name in result["files"])
    assert {"survey.csv", "survey.json", "report.md", "report.html", "tmp_usage.png", "tmp_vs_ram.png",
            "memory_swap.png"} <= names
    for name in names:
        assert (path / name).is_file()
        if name.endswith(".png"):
            assert (path / name).read_bytes()[:8] == PNG_SIGNATURE
    summary = result["summary"]
    assert summary[0] == "3 hosts answered, 1 did not: gone."
    assert summary[1] == ("/tmp fits in half of RAM on 1 of 3 hosts (33.3%), in available memory plus free swap on 2 "
                          "(66.7%).")
    assert summary[2].startswith("Outliers (/tmp beyond available memory plus free swap): db1 (30.0 GiB of /tmp")
    assert "lower bound" in summary[3] and "db1" in summary[3]
    assert summary[4] == "What-if of the policy: site.yml would be refused on 1 host(s): db1."
    with open(path / "survey.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == list(SURVEY_COLUMNS) and [row["host"] for row in rows] == ["db1", "web1", "web2"]
    assert rows[2]["tmp_bytes"] == str(5 * GIB) and rows[2]["swap_used"] == str(GIB)
    report = (path / "report.md").read_text()
    assert "| web | 2 | 1 (50.0%) | 2 (100.0%) | - | - |" in report
    assert "/tmp: migrate tmpfs of 4.0 GiB with size=50%" in report
    assert "refused" in report and "do not fit in half of RAM" in report
    assert "Hosts that did not answer" in report and "gone" in report
    html = (path / "report.html").read_text()
    assert html.count('src="data:image/png;base64,') == 3


def test_check_mode_writes_nothing(tmp_path):
    path = tmp_path / "survey" / "run2"
    result = run_module(tmp_path, path=str(path), hosts=["web1"], plans={"web1": plan(MIB, 8 * GIB, 6 * GIB)},
                        _ansible_check_mode=True)
    assert result.get("failed") is not True, result
    assert not path.exists() and result["summary"][0] == "1 hosts answered, 0 did not."


def test_a_host_under_a_cgroup_limit_is_an_outlier_on_its_limit(tmp_path):
    small = plan(256 * MIB, 192 * MIB, 150 * MIB,
                 errors=["Host small: ramdisk_mounts__lab[0] puts '/tmp' in RAM, but it does not fit."])
    small["ansible_facts"]["ramdisk"]["memory"].update(
        cgroup_limit_bytes=192 * MIB, cgroup_limit_set_by="/docker/abc", capped_by_cgroup=True,
        meminfo_total_bytes=24 * GIB)
    path = tmp_path / "survey" / "run3"
    result = run_module(tmp_path, path=str(path), hosts=["small", "web1"], charts=False,
                        plans={"small": small, "web1": plan(10 * MIB, 8 * GIB, 6 * GIB)})
    assert result.get("failed") is not True, result
    assert result["outliers"] == ["small"]
    assert result["summary"][2] == ("Outliers (/tmp beyond available memory plus free swap): small (256.0 MiB of /tmp, "
                                    "192.0 MiB RAM, its cgroup's memory limit).")
    report = (path / "report.md").read_text()
    assert "| small | 256.0 MiB | 192.0 MiB (cgroup limit) | 150.0 MiB | 0 B | no |" in report
    data = json.loads((path / "survey.json").read_text())
    (row,) = [row for row in data["rows"] if row["host"] == "small"]
    assert row["mem_limited_by"] == "/docker/abc" and row["mem_meminfo_total"] == 24 * GIB


def _png_size(path):
    with open(path, "rb") as handle:
        head = handle.read(24)
    assert head[:8] == PNG_SIGNATURE
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def test_charts_draw_nothing_for_swap_no_host_has_and_fit_their_axes(tmp_path):
    rows = [{"host": "h%d" % n, "tmp_bytes": 256 * 1024, "mem_total": 24 * GIB, "swap_total": 0, "swap_used": 0,
             "fits_half_ram": True, "fits_free": True} for n in range(3)]
    names = module_under_test.draw_charts(str(tmp_path), rows)
    assert names == ["tmp_usage.png", "tmp_vs_ram.png", "memory_swap.png"]
    # One panel, memory only: no swap panel of zero-height bars.
    assert _png_size(str(tmp_path / "memory_swap.png"))[0] == 600
    with_swap = [dict(row, swap_total=2 * GIB) for row in rows]
    module_under_test.draw_charts(str(tmp_path), with_swap)
    assert _png_size(str(tmp_path / "memory_swap.png"))[0] == 1000
    # The size ticks span the data (and the half-of-RAM line), not 1 B to 1 TiB.
    axis = module_under_test.plt.figure().gca().yaxis
    module_under_test._size_ticks(axis, 64 * 1024, 48 * GIB)
    labels = [label.get_text() for label in axis.get_ticklabels()]
    assert labels[0] == "64 KiB" and labels[-1] == "4 GiB" and "1 B" not in labels and "1 TiB" not in labels
