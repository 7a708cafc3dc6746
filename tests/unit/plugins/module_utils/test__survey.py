# SPDX-License-Identifier: GPL-3.0-or-later
"""The fleet survey's arithmetic against hand-computed answers, and a synthetic fleet of 502 hosts built
to give the write-up's own headline figures."""

from __future__ import annotations

import csv
import io

import pytest

from ansible_collections.ramdisk.provision.plugins.module_utils import _survey
from ansible_collections.ramdisk.provision.plugins.module_utils._survey import GIB, KIB, MIB


def _host(name, tmp, total=8 * GIB, available=6 * GIB, swap_total=2 * GIB, swap_free=2 * GIB, complete=True,
          groups=("all",)):
    return {"host": name, "tmp_bytes": tmp, "tmp_inodes": 10, "mem_total": total, "mem_used": total - available,
            "mem_free": available, "mem_shared": 0, "mem_buff_cache": 0, "mem_available": available,
            "swap_total": swap_total, "swap_used": swap_total - swap_free, "swap_free": swap_free,
            "complete": complete, "groups": list(groups)}


@pytest.mark.parametrize("values, expected", [
    ([4096, 8192, 4096, 12288], 4096),        # the most common size
    ([8192, 4096, 8192, 4096, 1], 4096),       # two as common: the smaller
    ([1, 2, 3], None),                         # nothing repeats: no mode
    ([7], 7),
    ([], None),
])
def test_mode_of_sizes(values, expected):
    assert _survey.mode(values) == expected


@pytest.mark.parametrize("values, expected", [([4, 1, 3, 2], 2.5), ([3, 1, 2], 2), ([5], 5), ([], None)])
def test_median_of_an_even_and_an_odd_count(values, expected):
    assert _survey.median(values) == expected


def test_statistics():
    assert _survey.statistics([10, 30, 20, 20]) == {"hosts": 4, "max": 30, "min": 10, "mean": 20.0, "median": 20.0,
                                                    "mode": 20}
    assert _survey.statistics([None])["hosts"] == 0


def test_bands_at_their_edges():
    hosts = [
        _host("a", MIB - 1),                              # under 1 MB
        _host("b", MIB),                                  # 1 MB exactly: not under 1 MB, under 10 MB
        _host("c", int(4.8 * GIB) - 1, total=2 * GIB),    # just under 4.8 GB; exactly 2 GB of RAM
        _host("d", int(4.8 * GIB), total=2 * GIB - 1, swap_total=0, swap_free=0),
    ]
    rows = dict((name, (count, share)) for name, count, share in _survey.bands(hosts))
    assert rows["/tmp under 1 MB"] == (1, 25.0)
    assert rows["/tmp under 10 MB"] == (2, 50.0)
    assert rows["/tmp under 4.8 GB"] == (3, 75.0)
    assert rows["at least 2 GB of RAM"] == (3, 75.0)
    assert rows["at least 8 GB of RAM"] == (2, 50.0)
    assert rows["some swap"] == (3, 75.0)


def test_verdicts_follow_the_tmp_gate():
    hosts = [
        _host("fits", 1 * GIB),
        # More than half of 8 GiB, but within 6 GiB available plus 2 GiB swap.
        _host("over-half", 5 * GIB),
        # Beyond available plus swap: an outlier.
        _host("outlier", 9 * GIB),
        # The scan stopped: a lower bound.
        _host("slow", 100 * MIB, complete=False),
    ]
    found = _survey.verdict_summary(hosts)
    assert (found["fits_half_ram"], found["fits_half_ram_share"]) == (2, 50.0)
    assert (found["fits_free_memory_and_swap"], found["fits_free_memory_and_swap_share"]) == (3, 75.0)
    assert [row["host"] for row in found["outliers"]] == ["outlier"]
    assert found["outliers"][0]["tmp_bytes"] == 9 * GIB and found["outliers"][0]["fits_half_ram"] is False
    assert found["lower_bound"] == ["slow"]
    reasons = _survey.verdict(hosts[2])["reasons"]
    assert any("does not fit in free memory and swap" in reason for reason in reasons)


def _fleet_502():
    """502 hosts built so that 485 (96.6%) fit /tmp in half of RAM, 498 (99.2%) in available memory plus
    free swap, and 4 do not: the write-up's figures. /tmp sizes: 300 hosts at 4 KiB (the mode), the rest
    spread; RAM 4 or 16 GiB; swap on 400 hosts."""
    hosts = []
    for number in range(502):
        total = 16 * GIB if number % 2 else 4 * GIB
        swap = 2 * GIB if number < 400 else 0
        tmp = 4 * KIB if number < 300 else (number - 299) * MIB
        hosts.append(_host("h%03d" % number, tmp, total=total, available=total // 2, swap_total=swap, swap_free=swap,
                           groups=("all", "web" if number < 251 else "db")))
    # 13 hosts over half of RAM that still fit in available plus swap (2 GiB available + 2 GiB swap on 4 GiB).
    for number in range(13):
        hosts[number * 2].update(tmp_bytes=3 * GIB)
    # 4 outliers: /tmp beyond available memory and free swap.
    for number in range(4):
        hosts[401 + number * 2].update(tmp_bytes=40 * GIB + number)
    return hosts


def test_a_synthetic_fleet_of_502_hosts_gives_the_write_ups_figures():
    hosts = _fleet_502()
    result = _survey.summary(hosts)
    verdicts = result["verdicts"]
    assert verdicts["hosts"] == 502
    assert (verdicts["fits_half_ram"], verdicts["fits_half_ram_share"]) == (485, 96.6)
    assert (verdicts["fits_free_memory_and_swap"], verdicts["fits_free_memory_and_swap_share"]) == (498, 99.2)
    assert [row["host"] for row in verdicts["outliers"]] == ["h407", "h405", "h403", "h401"]
    tmp = result["statistics"]["/tmp usage"]
    assert tmp["mode"] == 4 * KIB and tmp["max"] == 40 * GIB + 3 and tmp["min"] == 4 * KIB
    assert result["statistics"]["total memory"]["median"] == 10 * GIB   # 251 of 4 GiB, 251 of 16 GiB
    bands = dict((name, (count, share)) for name, count, share in result["bands"])
    assert bands["some swap"] == (400, 79.7)
    assert bands["at least 8 GB of RAM"] == (251, 50.0)
    groups = dict(_survey.by_group(hosts))
    assert list(groups)[0] == "all" and groups["web"]["verdicts"]["hosts"] == 251
    assert groups["db"]["verdicts"]["outliers"] and not groups["web"]["verdicts"]["outliers"]


def test_survey_csv_has_the_columns_in_order():
    text = _survey.csv_text([_host("b,2", 5), _host("a", 7)])
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == list(_survey.SURVEY_COLUMNS)
    assert [row[0] for row in rows[1:]] == ["a", "b,2"] and rows[1][1] == "7"


def test_a_host_under_a_cgroup_limit_is_judged_on_it():
    # ramdisk_facts' figures of a container limited to 192 MiB on a 24 GiB machine, with 256 MiB in /tmp.
    memory = {"total_bytes": 192 * MIB, "available_bytes": 150 * MIB, "free_bytes": 40 * MIB, "shmem_bytes": 0,
              "used_bytes": 42 * MIB, "buff_cache_bytes": 100 * MIB, "cgroup_limit_bytes": 192 * MIB,
              "cgroup_limit_set_by": "/docker/abc", "cgroup_version": 1, "capped_by_cgroup": True,
              "meminfo_total_bytes": 24 * GIB, "meminfo_available_bytes": 20 * GIB}
    plan = {"ansible_facts": {"ramdisk": {
        "memory": memory, "swap": {"total_bytes": 0, "free_bytes": 0},
        "paths": {"/tmp": {"usage_bytes": 256 * MIB, "inodes": 2, "complete": True}},
        "tmp_gate": {"usage_bytes": 256 * MIB, "complete": True, "tmp_is_ram_backed": False}}}}
    row = _survey.host_row("small", plan)
    assert (row["mem_total"], row["mem_available"], row["mem_used"]) == (192 * MIB, 150 * MIB, 42 * MIB)
    assert (row["mem_limited_by"], row["mem_meminfo_total"]) == ("/docker/abc", 24 * GIB)
    found = _survey.verdict(row)
    assert found["fits_half_ram"] is False and found["fits_free_memory_and_swap"] is False
    assert found["reasons"][0].startswith("RAM here is the memory limit of cgroup /docker/abc (192.0 MiB)")
    (outlier,) = _survey.verdict_summary([row, _host("big", GIB)])["outliers"]
    assert (outlier["host"], outlier["mem_total"], outlier["mem_limited_by"]) == ("small", 192 * MIB, "/docker/abc")
    # Without a limit the row says so, and the figures are those of /proc/meminfo.
    plain = dict(memory, total_bytes=24 * GIB, available_bytes=20 * GIB, capped_by_cgroup=False,
                 cgroup_limit_bytes=None, cgroup_limit_set_by=None)
    facts = dict(plan["ansible_facts"]["ramdisk"], memory=plain)
    row = _survey.host_row("big", dict(plan, ansible_facts={"ramdisk": facts}))
    assert (row["mem_total"], row["mem_limited_by"]) == (24 * GIB, None)


def test_what_if_carries_the_plans_warnings():
    plan = {"errors": [], "plan_warnings": ["Host h: the variable ramdisk_mount__web looks like a policy."],
            "tmpfs": [], "ramfs": [], "zram": [], "zram_swap": [], "brd": {}, "policy": {}}
    found = _survey.what_if(plan)
    assert found["refused"] is False
    assert found["warnings"] == ["Host h: the variable ramdisk_mount__web looks like a policy."]


def test_what_if_names_a_tmp_the_gate_action_skips():
    plan = {"errors": [], "tmpfs": [], "ramfs": [], "zram": [], "zram_swap": [], "brd": {},
            "policy": {"skipped": [{"path": "/tmp", "label": "ramdisk_mounts__all[0]", "reasons": []}]}}
    found = _survey.what_if(plan)
    assert found["refused"] is False
    assert found["lines"] == ["/tmp: skipped, stays as it is (the /tmp gate, ramdisk_tmp_gate_action: skip)"]


def test_the_peak_record_is_judged_by_the_same_rule():
    # 8 GiB of RAM: half is 4 GiB. /tmp holds 1 GiB now; its peak record says 5 GiB (over half, but within
    # 6 GiB available plus 2 GiB of free swap). A host without a record is not counted in the peak verdicts.
    steady = dict(_host("steady", GIB), tmp_peak_bytes=GIB + MIB)
    spiky = dict(_host("spiky", GIB), tmp_peak_bytes=5 * GIB)
    found = _survey.verdict_summary([steady, spiky, _host("new", GIB)])
    assert found["fits_half_ram"] == 3 and found["outliers"] == []
    assert found["with_peak"] == 2
    assert found["peak_fits_half_ram"] == 1 and found["peak_fits_half_ram_share"] == 50.0
    assert found["peak_fits_free_memory_and_swap"] == 2
    assert found["peak_outliers"] == ["spiky"]


def test_host_row_reads_the_peak_record_from_the_facts():
    plan = {"errors": [], "tmpfs": [], "ramfs": [], "zram": [], "zram_swap": [], "brd": {},
            "policy": {"entries": [{"path": "/tmp", "backend": "tmpfs"}, {"path": "/srv/x", "backend": "tmpfs"}]},
            "ansible_facts": {"ramdisk": {
                "memory": {"total_bytes": 8 * GIB, "available_bytes": 6 * GIB},
                "swap": {"total_bytes": 0, "free_bytes": 0},
                "paths": {"/tmp": {"usage_bytes": MIB, "inodes": 3, "complete": True}},
                "tmp_gate": {"usage_bytes": MIB, "complete": True},
                "peaks": {"since": 1700000000, "paths": {"/tmp": {"peak_bytes": 3 * MIB, "peak_at": 1700000600}}}}}}
    row = _survey.host_row("h", plan)
    assert row["tmp_peak_bytes"] == 3 * MIB and row["peak_since"] == 1700000000
    assert [entry["peak_bytes"] for entry in row["policy_paths"]] == [3 * MIB, None]
    del plan["ansible_facts"]["ramdisk"]["peaks"]
    assert _survey.host_row("h", plan)["tmp_peak_bytes"] is None


def test_a_peak_on_a_ram_backed_tmp_is_not_already_in_memory():
    # /tmp on tmpfs holds 1 GiB now, which is in memory and would be freed: the room is 6 GiB available + 1 GiB
    # + 2 GiB of free swap = 9 GiB. A peak of 9 GiB fits in it; one byte more does not.
    fits = dict(_host("fits", GIB), tmp_peak_bytes=9 * GIB)
    over = dict(_host("over", GIB), tmp_peak_bytes=9 * GIB + 1)
    assert _survey.verdict(fits, tmp_is_ram_backed=True)["peak_fits_free_memory_and_swap"] is True
    assert _survey.verdict(over, tmp_is_ram_backed=True)["peak_fits_free_memory_and_swap"] is False
