# SPDX-License-Identifier: GPL-3.0-or-later
"""cgroup memory limits read from fixture trees (cgroup v2 and the v1 memory hierarchy), and memory_facts() and
swap_facts() capped by them, against hand-computed answers."""

from __future__ import annotations

from ansible_collections.ramdisk.provision.plugins.module_utils import _host_facts
from ansible_collections.ramdisk.provision.plugins.module_utils._procfs import (
    cgroup_directories,
    parse_cgroup_bytes,
    parse_flat_keyed,
    parse_mountinfo,
    parse_proc_cgroup,
)

MIB = 1024 ** 2
GIB = 1024 ** 3
# What a 24 GiB host's /proc/meminfo says (no swap unless a test adds it).
MEMINFO = {"MemTotal": 24 * GIB, "MemFree": 18 * GIB, "MemAvailable": 20 * GIB, "Buffers": GIB, "Cached": 2 * GIB,
           "SReclaimable": GIB // 2, "Shmem": 64 * MIB, "SwapTotal": 0, "SwapFree": 0}
V1_NO_LIMIT = "9223372036854771712"
# The keys ramdisk_facts reported before cgroup limits were applied: a host without one keeps them all.
FIGURES = ("total_bytes", "available_bytes", "free_bytes", "shmem_bytes", "used_bytes", "buff_cache_bytes")


def _tree(base, files):
    """Write FILES ({relative path: text}) under BASE."""
    for name, text in files.items():
        path = base / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")


def _v2_mount(base, root="/"):
    return parse_mountinfo("35 24 0:30 %s %s rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw\n"
                           % (root, base))


def _v1_mount(base, root="/"):
    return parse_mountinfo("93 89 0:32 %s %s rw,relatime - cgroup cgroup rw,memory\n" % (root, base))


def _measure(proc_cgroup, mountinfo, meminfo=None):
    meminfo = meminfo or MEMINFO
    return _host_facts.cgroup_memory(proc_cgroup, mountinfo, meminfo["MemTotal"], meminfo["SwapTotal"])


def test_parsers():
    text = "4:memory:/docker/abc\n1:cpu,cpuacct:/docker/abc\n9:name=systemd:/docker/abc/init.scope\n0::/init.scope\n"
    assert parse_proc_cgroup(text) == ("/init.scope", {"memory": "/docker/abc", "cpu": "/docker/abc",
                                                       "cpuacct": "/docker/abc", "name=systemd": "/docker/abc/init.scope"})
    assert parse_proc_cgroup("garbage\n1:cpu:relative\n") == (None, {})
    assert [parse_cgroup_bytes(text) for text in ("268435456\n", "max\n", "", None)] == [268435456, None, None, None]
    assert parse_flat_keyed("anon 10\nfile 20\nbad line here\nodd x\n") == {"anon": 10, "file": 20}


def test_directories_walk_up_to_the_mount_and_stay_inside_it():
    (mount,) = _v2_mount("/sys/fs/cgroup")
    assert cgroup_directories(mount, "/machine.slice/ct.scope") == [
        ("/machine.slice/ct.scope", "/sys/fs/cgroup/machine.slice/ct.scope"),
        ("/machine.slice", "/sys/fs/cgroup/machine.slice"),
        ("/", "/sys/fs/cgroup")]
    # A container without its own cgroup namespace, its cgroup bound at the mount point: the walk starts there.
    (own,) = _v1_mount("/sys/fs/cgroup/memory", root="/docker/abc")
    assert cgroup_directories(own, "/docker/abc/init.scope") == [
        ("/docker/abc/init.scope", "/sys/fs/cgroup/memory/init.scope"), ("/docker/abc", "/sys/fs/cgroup/memory")]
    assert cgroup_directories(own, "/docker/other") == []
    assert cgroup_directories(mount, "/../../elsewhere") == []


def test_no_limit_reports_exactly_what_meminfo_says(tmp_path):
    # A systemd host on cgroup v2: every memory.max on the way is "max", the root has none.
    _tree(tmp_path, {"init.scope/memory.max": "max", "init.scope/memory.current": "4194304",
                     "init.scope/memory.swap.max": "max"})
    found = _measure("0::/init.scope", _v2_mount(tmp_path))
    assert found["limit_bytes"] is None and found["capped"] is False and found["swap_capped"] is False
    capped, plain = _host_facts.memory_facts(MEMINFO, found), _host_facts.memory_facts(MEMINFO)
    assert dict((key, capped[key]) for key in FIGURES) == dict((key, plain[key]) for key in FIGURES) == {
        "total_bytes": 24 * GIB, "available_bytes": 20 * GIB, "free_bytes": 18 * GIB, "shmem_bytes": 64 * MIB,
        "used_bytes": 4 * GIB, "buff_cache_bytes": 3 * GIB + GIB // 2}
    assert capped["capped_by_cgroup"] is False and capped["cgroup_limit_bytes"] is None
    assert capped["meminfo_total_bytes"] == 24 * GIB


def test_the_tightest_limit_deeper_in_the_tree_caps_total_and_available(tmp_path):
    # A container's scope (256 MiB) inside a slice (8 GiB); init runs one level below the scope.
    _tree(tmp_path, {
        "machine.slice/memory.max": str(8 * GIB), "machine.slice/memory.current": str(GIB),
        "machine.slice/memory.stat": "inactive_file 0",
        "machine.slice/ct.scope/memory.max": str(256 * MIB), "machine.slice/ct.scope/memory.current": str(100 * MIB),
        "machine.slice/ct.scope/memory.stat": "anon 40000000\nfile %d\ninactive_file %d\nshmem %d\nslab_reclaimable %d"
                                              % (50 * MIB, 20 * MIB, MIB, 2 * MIB),
        "machine.slice/ct.scope/init.scope/memory.max": "max",
    })
    found = _measure("0::/machine.slice/ct.scope/init.scope", _v2_mount(tmp_path))
    assert found["limit_bytes"] == 256 * MIB and found["set_by"] == "/machine.slice/ct.scope" and found["version"] == 2
    # 256 MiB - 100 MiB used + 20 MiB of inactive page cache; the slice leaves 7 GiB, more.
    assert found["available_bytes"] == 176 * MIB and found["free_bytes"] == 156 * MIB
    memory = _host_facts.memory_facts(MEMINFO, found)
    assert memory["capped_by_cgroup"] is True
    assert (memory["total_bytes"], memory["available_bytes"], memory["free_bytes"], memory["used_bytes"]) == (
        256 * MIB, 176 * MIB, 156 * MIB, 80 * MIB)
    # The cgroup's own page cache (file + reclaimable slab) and shared memory, not the host's.
    assert (memory["buff_cache_bytes"], memory["shmem_bytes"]) == (52 * MIB, MIB)
    assert (memory["meminfo_total_bytes"], memory["meminfo_available_bytes"]) == (24 * GIB, 20 * GIB)


def test_a_nearly_full_parent_leaves_less_than_the_tighter_child(tmp_path):
    # The parent's 512 MiB holds 480 MiB of other cgroups' memory: 32 MiB left for all of them.
    _tree(tmp_path, {
        "parent/memory.max": str(512 * MIB), "parent/memory.current": str(480 * MIB),
        "parent/child/memory.max": str(256 * MIB), "parent/child/memory.current": str(100 * MIB),
    })
    found = _measure("0::/parent/child", _v2_mount(tmp_path))
    assert found["limit_bytes"] == 256 * MIB and found["set_by"] == "/parent/child"
    assert found["available_bytes"] == 32 * MIB and found["free_bytes"] == 32 * MIB
    assert _host_facts.memory_facts(MEMINFO, found)["used_bytes"] == 224 * MIB


def test_a_limit_above_memtotal_is_reported_but_caps_nothing(tmp_path):
    _tree(tmp_path, {"memory.max": str(32 * GIB), "memory.current": str(GIB)})
    found = _measure("0::/", _v2_mount(tmp_path))
    assert found["limit_bytes"] == 32 * GIB and found["capped"] is False and found["available_bytes"] is None
    memory = _host_facts.memory_facts(MEMINFO, found)
    assert memory["total_bytes"] == 24 * GIB and memory["available_bytes"] == 20 * GIB
    assert memory["cgroup_limit_bytes"] == 32 * GIB and memory["capped_by_cgroup"] is False


def test_cgroup_v1_memory_hierarchy_with_memsw(tmp_path):
    # docker --memory 192m on a cgroup v1 host (memsw: memory plus swap, docker's default of twice the memory).
    meminfo = dict(MEMINFO, SwapTotal=GIB, SwapFree=GIB)
    _tree(tmp_path, {
        "memory.limit_in_bytes": V1_NO_LIMIT, "memory.memsw.limit_in_bytes": V1_NO_LIMIT,
        "docker/abc/memory.limit_in_bytes": str(192 * MIB), "docker/abc/memory.usage_in_bytes": str(150 * MIB),
        "docker/abc/memory.memsw.limit_in_bytes": str(384 * MIB),
        "docker/abc/memory.memsw.usage_in_bytes": str(160 * MIB),
        "docker/abc/memory.stat": "cache 1\ntotal_cache %d\ntotal_shmem 8192\ntotal_inactive_file %d"
                                  % (120 * MIB, 100 * MIB),
    })
    proc = "4:memory:/docker/abc/init.scope\n1:cpu:/docker/abc\n0::/docker/abc/init.scope\n"
    found = _measure(proc, _v1_mount(tmp_path), meminfo)
    assert (found["limit_bytes"], found["set_by"], found["version"]) == (192 * MIB, "/docker/abc", 1)
    # 192 - 150 + 100 of inactive page cache = 142 MiB.
    assert found["available_bytes"] == 142 * MIB and found["free_bytes"] == 42 * MIB
    # Swap: 384 - 192 = 192 MiB allowed, 160 - 150 = 10 MiB of it used.
    assert found["swap_limit_bytes"] == 192 * MIB and found["swap_capped"] is True
    assert found["swap_free_bytes"] == 182 * MIB
    swap = _host_facts.swap_facts(meminfo, "", found)
    assert (swap["total_bytes"], swap["free_bytes"], swap["capped_by_cgroup"]) == (192 * MIB, 182 * MIB, True)
    memory = _host_facts.memory_facts(meminfo, found)
    assert (memory["total_bytes"], memory["buff_cache_bytes"], memory["shmem_bytes"]) == (192 * MIB, 120 * MIB, 8192)


def test_cgroup_v1_own_cgroup_bound_at_the_mount_point(tmp_path):
    # Docker on cgroup v1 without the host's tree: the container's cgroup is the mount's root.
    _tree(tmp_path, {"memory.limit_in_bytes": str(64 * MIB), "memory.usage_in_bytes": str(16 * MIB)})
    found = _measure("4:memory:/docker/abc\n", _v1_mount(tmp_path, root="/docker/abc"))
    assert (found["limit_bytes"], found["set_by"], found["available_bytes"]) == (64 * MIB, "/docker/abc", 48 * MIB)


def test_a_v2_swap_limit_caps_swap(tmp_path):
    meminfo = dict(MEMINFO, SwapTotal=4 * GIB, SwapFree=3 * GIB)
    _tree(tmp_path, {"ct/memory.max": str(GIB), "ct/memory.current": str(GIB // 2),
                     "ct/memory.swap.max": str(GIB // 2), "ct/memory.swap.current": str(GIB // 8)})
    found = _measure("0::/ct", _v2_mount(tmp_path), meminfo)
    swap = _host_facts.swap_facts(meminfo, "", found)
    assert (swap["total_bytes"], swap["free_bytes"], swap["cgroup_limit_bytes"]) == (GIB // 2, 3 * GIB // 8, GIB // 2)


def test_missing_files_v1_without_memory_and_odd_text_are_ignored(tmp_path):
    # A hybrid host: cgroup v2 mounted without the memory controller, the v1 lines without memory.
    (tmp_path / "unified" / "init.scope").mkdir(parents=True)
    mountinfo = _v2_mount(tmp_path / "unified")
    proc = "9:name=systemd:/init.scope\n1:cpu:/\n0::/init.scope\n"
    for text, mounts in ((proc, mountinfo), (proc, []), ("", mountinfo), ("not a cgroup file", mountinfo),
                         ("0::/does/not/exist", mountinfo), ("4:memory:/docker/abc\n", mountinfo)):
        found = _measure(text, mounts)
        assert found["limit_bytes"] is None and found["capped"] is False and found["swap_capped"] is False


def test_an_unreadable_usage_still_caps_at_the_limit(tmp_path):
    _tree(tmp_path, {"ct/memory.max": str(128 * MIB)})
    found = _measure("0::/ct", _v2_mount(tmp_path))
    memory = _host_facts.memory_facts(MEMINFO, found)
    assert (memory["total_bytes"], memory["available_bytes"], memory["used_bytes"]) == (128 * MIB, 128 * MIB, 0)
    # Without memory.stat the host's cache and shared memory are shown, never more than the limit.
    assert (memory["buff_cache_bytes"], memory["shmem_bytes"]) == (128 * MIB, 64 * MIB)
