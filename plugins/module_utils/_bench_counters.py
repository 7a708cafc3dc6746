# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Did a benchmark row reach the disk? The block device stack under a path, read from /sys, and the deltas of
its /sys/block/<dev>/stat counters over one probe.

The stack is a list of levels, the path's own device first: a partition's disk, a device-mapper or md device's
lower devices (``slaves/``), a loop device's backing file's device (``loop/backing_file``), until a device with
nothing below. A row whose weakest level saw under 10% of the bytes (or flushes) the probe issued was served by a
cache on the way down, such as a loop device's backing file in the host's page cache: it is labelled ``cache``
and never counted as disk. A path on no block device (tmpfs, ramfs) has an empty stack.

Every function takes the /sys root and a stat function, so tests build a fake tree."""

from __future__ import annotations

import os

SECTOR = 512
CACHE_SHARE = 0.10

# Fields of /sys/block/<dev>/stat (Documentation/block/stat.rst); flushes only from Linux 5.5.
STAT_FIELDS = ("read_ios", "read_merges", "read_sectors", "read_ticks", "write_ios", "write_merges",
               "write_sectors", "write_ticks", "in_flight", "io_ticks", "time_in_queue", "discard_ios",
               "discard_merges", "discard_sectors", "discard_ticks", "flush_ios", "flush_ticks")


def parse_stat(text):
    """The counters of one stat file as a dict (the fields the kernel printed)."""
    values = [int(part) for part in text.split()]
    return dict(zip(STAT_FIELDS, values))


def _block_dir(sys_root, name):
    return os.path.join(sys_root, "class", "block", name)


def device_name(dev, sys_root="/sys"):
    """The kernel name (sda1, dm-0, loop3) of the block device number DEV (st_dev), or None when it is no
    block device (tmpfs, ramfs, overlay: anonymous device numbers)."""
    link = os.path.join(sys_root, "dev", "block", "%d:%d" % (os.major(dev), os.minor(dev)))
    if not os.path.exists(link):
        return None
    return os.path.basename(os.path.realpath(link))


def _lower(name, sys_root, stat):
    """The devices right below NAME."""
    base = _block_dir(sys_root, name)
    if os.path.exists(os.path.join(base, "partition")):
        return [os.path.basename(os.path.dirname(os.path.realpath(base)))]
    slaves = os.path.join(base, "slaves")
    if os.path.isdir(slaves) and os.listdir(slaves):
        return sorted(os.listdir(slaves))
    backing = os.path.join(base, "loop", "backing_file")
    if os.path.exists(backing):
        with open(backing, encoding="utf-8") as handle:
            path = handle.read().strip()
        # The kernel appends " (deleted)" to a backing file that was removed after attaching.
        if path.endswith(" (deleted)"):
            path = path[:-len(" (deleted)")]
        try:
            lower = device_name(stat(path).st_dev, sys_root)
        except OSError:
            return []
        return [lower] if lower else []
    return []


def stack(path, sys_root="/sys", stat=os.stat):
    """[[device, ...], ...]: the block devices under PATH, level by level, its own device first; [] when PATH is
    on no block device."""
    name = device_name(stat(path).st_dev, sys_root)
    if name is None:
        return []
    levels, seen = [[name]], {name}
    while True:
        below = []
        for upper in levels[-1]:
            for lower in _lower(upper, sys_root, stat):
                if lower not in seen:
                    seen.add(lower)
                    below.append(lower)
        if not below:
            return levels
        levels.append(below)


def read_counters(levels, sys_root="/sys"):
    """{device: counters} of every device of LEVELS (stack())."""
    out = {}
    for level in levels:
        for name in level:
            with open(os.path.join(_block_dir(sys_root, name), "stat"), encoding="utf-8") as handle:
                out[name] = parse_stat(handle.read())
    return out


def deltas(levels, before, after):
    """Per level, what its devices did between BEFORE and AFTER (read_counters()): bytes read and written,
    read and write requests and flushes, summed over the level's devices."""
    out = []
    for level in levels:
        total = {"devices": list(level), "read_bytes": 0, "write_bytes": 0, "read_ios": 0, "write_ios": 0,
                 "flush_ios": 0}
        for name in level:
            old, new = before[name], after[name]
            total["read_bytes"] += (new["read_sectors"] - old["read_sectors"]) * SECTOR
            total["write_bytes"] += (new["write_sectors"] - old["write_sectors"]) * SECTOR
            total["read_ios"] += new["read_ios"] - old["read_ios"]
            total["write_ios"] += new["write_ios"] - old["write_ios"]
            total["flush_ios"] += new.get("flush_ios", 0) - old.get("flush_ios", 0)
        out.append(total)
    return out


def reached_share(issued, level_deltas, what):
    """The share of ISSUED (bytes read, bytes written or syncs, by WHAT: read, write or flush) that the weakest
    level of the stack saw; None when nothing was issued or there is no device."""
    if not issued or not level_deltas:
        return None
    key = {"read": "read_bytes", "write": "write_bytes", "flush": "flush_ios"}[what]
    return min(level[key] for level in level_deltas) / float(issued)


def row_label(policy, issued, level_deltas, what, share=CACHE_SHARE, kind="ram"):
    """How a row is labelled: on no block device ``ram`` for a RAM target and ``unknown`` for a disk target (an
    overlay or network file system: nothing shows whether the test reached a disk), ``cache`` when under SHARE of
    what the probe issued reached the device at every level, else the probe's cache POLICY (direct, buffered, sync,
    cached)."""
    if not level_deltas:
        return "unknown" if kind == "disk" else "ram"
    reached = reached_share(issued, level_deltas, what)
    if reached is not None and reached < share:
        return "cache"
    return policy
