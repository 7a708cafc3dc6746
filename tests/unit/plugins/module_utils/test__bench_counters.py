# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The block device stack under a path, from a fake /sys tree, and the rule that labels a row cache."""

from __future__ import annotations

import collections
import os

import pytest

from ansible_collections.ramdisk.provision.plugins.module_utils import _bench_counters as counters

Stat = collections.namedtuple("Stat", "st_dev")

# Where each path of the fake host lives: ext4 on dm-0 (253:0) on loop0 (7:0), whose backing file is on sda1 (8:1);
# a tmpfs on an anonymous device.
DEVICES = {
    "/mnt/data": os.makedev(253, 0),
    "/images/disk.img": os.makedev(8, 1),
    "/srv/ram": os.makedev(0, 45),
}


def fake_stat(path):
    if path not in DEVICES:
        raise FileNotFoundError(path)
    return Stat(DEVICES[path])


def stat_line(read_ios=0, read_sectors=0, write_ios=0, write_sectors=0, flush_ios=0):
    fields = [read_ios, 0, read_sectors, 0, write_ios, 0, write_sectors, 0, 0, 0, 0, 0, 0, 0, 0, flush_ios, 0]
    return " ".join(str(value) for value in fields) + "\n"


def block(root, device_dir, name, number, stat=""):
    """A block device directory under devices/, with its class/block and dev/block links."""
    path = os.path.join(root, "devices", device_dir, name)
    os.makedirs(path)
    with open(os.path.join(path, "stat"), "w", encoding="utf-8") as handle:
        handle.write(stat or stat_line())
    os.makedirs(os.path.join(root, "class", "block"), exist_ok=True)
    os.makedirs(os.path.join(root, "dev", "block"), exist_ok=True)
    os.symlink(path, os.path.join(root, "class", "block", name))
    os.symlink(path, os.path.join(root, "dev", "block", "%d:%d" % number))
    return path


@pytest.fixture
def sys_root(tmp_path):
    root = str(tmp_path / "sys")
    block(root, "pci0000:00/block", "sda", (8, 0))
    part = block(root, "pci0000:00/block/sda", "sda1", (8, 1))
    with open(os.path.join(part, "partition"), "w", encoding="utf-8") as handle:
        handle.write("1\n")
    loop = block(root, "virtual/block", "loop0", (7, 0))
    os.makedirs(os.path.join(loop, "loop"))
    with open(os.path.join(loop, "loop", "backing_file"), "w", encoding="utf-8") as handle:
        handle.write("/images/disk.img\n")
    dm = block(root, "virtual/block", "dm-0", (253, 0))
    os.makedirs(os.path.join(dm, "slaves"))
    os.symlink(loop, os.path.join(dm, "slaves", "loop0"))
    return root


def write_stats(root, stats):
    for name, line in stats.items():
        with open(os.path.join(root, "class", "block", name, "stat"), "w", encoding="utf-8") as handle:
            handle.write(line)


def test_the_stack_goes_through_device_mapper_loop_and_partition(sys_root):
    assert counters.stack("/mnt/data", sys_root, fake_stat) == [["dm-0"], ["loop0"], ["sda1"], ["sda"]]


def test_a_partition_alone(sys_root):
    assert counters.stack("/images/disk.img", sys_root, fake_stat) == [["sda1"], ["sda"]]


def test_a_ram_file_system_has_no_stack(sys_root):
    assert counters.stack("/srv/ram", sys_root, fake_stat) == []


def test_a_deleted_backing_file_is_followed_and_a_missing_one_ends_the_stack(sys_root):
    backing = os.path.join(sys_root, "class", "block", "loop0", "loop", "backing_file")
    with open(backing, "w", encoding="utf-8") as handle:
        handle.write("/images/disk.img (deleted)\n")
    assert counters.stack("/mnt/data", sys_root, fake_stat)[-1] == ["sda"]
    with open(backing, "w", encoding="utf-8") as handle:
        handle.write("/gone/disk.img\n")
    assert counters.stack("/mnt/data", sys_root, fake_stat) == [["dm-0"], ["loop0"]]


def test_parse_stat_of_an_older_kernel_without_flush_fields():
    got = counters.parse_stat("1 2 3 4 5 6 7 8 9 10 11")
    assert got["read_sectors"] == 3 and got["write_sectors"] == 7 and "flush_ios" not in got


def test_deltas_and_the_cache_label_when_the_backing_disk_saw_almost_nothing(sys_root):
    levels = counters.stack("/mnt/data", sys_root, fake_stat)
    before = counters.read_counters(levels, sys_root)
    issued = 64 * 1024 * 1024
    sectors = issued // 512
    # dm-0 and loop0 saw all 64 MiB read; the backing file came from the host's page cache: sda saw 1 MiB.
    write_stats(sys_root, {"dm-0": stat_line(read_ios=64, read_sectors=sectors),
                           "loop0": stat_line(read_ios=64, read_sectors=sectors),
                           "sda1": stat_line(read_ios=8, read_sectors=2048),
                           "sda": stat_line(read_ios=8, read_sectors=2048)})
    after = counters.read_counters(levels, sys_root)
    found = counters.deltas(levels, before, after)
    assert [level["read_bytes"] for level in found] == [issued, issued, 1048576, 1048576]
    assert counters.reached_share(issued, found, "read") == pytest.approx(1 / 64.0)
    assert counters.row_label("direct", issued, found, "read") == "cache"


def test_a_row_that_reached_the_device_keeps_its_policy(sys_root):
    levels = counters.stack("/images/disk.img", sys_root, fake_stat)
    before = counters.read_counters(levels, sys_root)
    write_stats(sys_root, {"sda1": stat_line(write_ios=100, write_sectors=20480, flush_ios=100),
                           "sda": stat_line(write_ios=100, write_sectors=20480, flush_ios=100)})
    found = counters.deltas(levels, before, counters.read_counters(levels, sys_root))
    assert counters.row_label("sync", 10 * 1048576, found, "write") == "sync"
    assert counters.row_label("sync", 100, found, "flush") == "sync"
    # Exactly 10% reached: not under 10%, not cache.
    assert counters.row_label("direct", 100 * 1048576, found, "write") == "direct"
    # Fewer flushes than a tenth of the syncs issued: the syncs were absorbed above the device.
    assert counters.row_label("sync", 1001, found, "flush") == "cache"


def test_no_device_is_ram_and_nothing_issued_is_no_share():
    assert counters.row_label("direct", 1048576, [], "write") == "ram"
    # A disk target on no block device (overlay, NFS): nothing shows the test reached a disk.
    assert counters.row_label("direct", 1048576, [], "write", kind="disk") == "unknown"
    assert counters.reached_share(0, [{"write_bytes": 0}], "write") is None
    assert counters.row_label("cached", 0, [{"write_bytes": 0}], "write") == "cached"
