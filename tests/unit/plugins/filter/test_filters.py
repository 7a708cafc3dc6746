# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.ramdisk.provision.plugins.filter.bench import FilterModule as BenchFilters
from ansible_collections.ramdisk.provision.plugins.filter.plan import FilterModule as PlanFilters
from ansible_collections.ramdisk.provision.plugins.filter.size import FilterModule as SizeFilters

FACTS = {"memory": {"total_bytes": 8 * 1024 ** 3}, "support": {"tmpfs_noswap": False},
         "paths": {"/tmp": {"exists": True, "is_dir": True, "empty": True}}, "mounts": []}


def test_filter_names():
    assert set(PlanFilters().filters()) == {"tmpfs_plan", "ramfs_plan", "zram_plan", "brd_plan", "mount_plan_summary",
                                            "persist_review"}
    assert set(SizeFilters().filters()) == {"to_bytes", "human_size"}
    assert set(BenchFilters().filters()) == {"bench_visits"}


def test_bench_visits_reads_runs_and_turns_as_older_cores_give_them():
    visits = BenchFilters().filters()["bench_visits"]([{"label": "ram"}, {"label": "disk"}], "2", True)
    assert [(v["target"]["label"], v["rounds"]) for v in visits] == [("ram", [1]), ("disk", [1]), ("ram", [2]),
                                                                     ("disk", [2])]
    once = BenchFilters().filters()["bench_visits"]([{"label": "ram"}, {"label": "disk"}], "2", "False")
    assert [(v["target"]["label"], v["rounds"]) for v in once] == [("ram", [1, 2]), ("disk", [1, 2])]
    with pytest.raises(AnsibleFilterError, match="runs must be at least 1"):
        BenchFilters().filters()["bench_visits"]([{"label": "ram"}], 0)


@pytest.mark.parametrize(
    "expr, ram, expected",
    [("2G", None, 2 * 1024 ** 3), ("50%", 8 * 1024 ** 3, 4 * 1024 ** 3), ("min(ram / 2, 1G)", "8589934592", 1024 ** 3)],
)
def test_to_bytes(expr, ram, expected):
    assert SizeFilters().filters()["to_bytes"](expr, ram_bytes=ram) == expected


@pytest.mark.parametrize("expr, words", [("10X", "unknown unit 'X'"), ("50%", "RAM size"), ("0", "above zero")])
def test_to_bytes_errors(expr, words):
    with pytest.raises(AnsibleFilterError) as info:
        SizeFilters().filters()["to_bytes"](expr)
    assert words in str(info.value) and expr in str(info.value)


def test_human_size():
    assert SizeFilters().filters()["human_size"](3 * 1024 ** 2) == "3.0 MiB"
    with pytest.raises(AnsibleFilterError):
        SizeFilters().filters()["human_size"]("many")


def test_tmpfs_plan_filter():
    filters = PlanFilters().filters()
    result = filters["tmpfs_plan"]([{"path": "/tmp", "size": "50%"}], FACTS, "h1", "tmpfs_mounts", {"mode": "1777"})
    assert result["errors"] == []
    assert result["mounts"][0]["options"] == ["size=50%", "mode=1777"]
    assert result["mounts"][0]["action"] == "mount"
    assert filters["mount_plan_summary"](result) == ["/tmp: mount tmpfs of 4.0 GiB with size=50%,mode=1777"]


def test_tmpfs_plan_filter_rejects_bad_facts():
    with pytest.raises(AnsibleFilterError):
        PlanFilters().filters()["tmpfs_plan"]([], "not facts")


def test_persist_review_filter():
    review = PlanFilters().filters()["persist_review"]
    mounts = [{"label": "m[0]", "path": "/srv/db", "token": "srv-db-1", "state": "mounted", "action": "migrate",
               "persist": {"backing": "/var/lib/b", "interval": "15min", "services": []}}]
    result = review(mounts, {"srv-db-1": {"unit": False, "current": "missing"}}, "h1")
    assert result["errors"] == []
    assert result["decisions"]["srv-db-1"] == {"source": "ram", "adopt": True, "verify": "sync"}
    with pytest.raises(AnsibleFilterError):
        review("not a list")
    with pytest.raises(AnsibleFilterError):
        review(mounts, ["not", "a", "mapping"])
