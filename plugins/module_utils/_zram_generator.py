# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""zram-generator persistence: one device's section of zram-generator.conf(5).

Pure logic: render_section() takes a planned entry of the zram role (see _zram_plan.plan_zram) and what the
device got on the host, and returns the text of its drop-in. Keys are those zram-generator 1.1 (Debian 12)
and later read: zram-size (MiB, the generator multiplies by 1024 * 1024), compression-algorithm,
swap-priority and fs-type.
"""

from __future__ import annotations

import re

MIB = 1024 ** 2
_DEVICE_RE = re.compile(r"^zram\d+\Z")
_ALGORITHM_RE = re.compile(r"^[a-z0-9-]+\Z")


class GeneratorError(ValueError):
    """An entry that zram-generator cannot express; the message is a plain sentence."""


def zram_size(disksize_bytes):
    """zram-size for a disk size in bytes: MiB, whole where it divides, else the exact binary fraction."""
    if isinstance(disksize_bytes, bool) or not isinstance(disksize_bytes, int) or disksize_bytes <= 0:
        raise GeneratorError("the disk size must be a whole number of bytes above 0, not %r" % (disksize_bytes,))
    if disksize_bytes % MIB == 0:
        return str(disksize_bytes // MIB)
    # A power-of-two divisor keeps the quotient exact in a double, and repr() is its shortest exact form,
    # so the generator's zram-size * 1024 * 1024 gives these bytes back.
    return repr(disksize_bytes / float(MIB))


def render_section(entry, device, disksize_bytes, algorithm=None):
    """The [zramN] section for ENTRY (a planned zram device) on DEVICE (zramN), as text ending in a newline.

    A swap device gets its priority. A file system gets fs-type but no mount-point: its mount stays with the
    shared mount pipeline (fstab, owner and mode, migrate), which orders it after systemd-zram-setup@DEVICE.
    """
    if not isinstance(device, str) or not _DEVICE_RE.match(device):
        raise GeneratorError("device must be a zram device name such as zram0, not %r" % (device,))
    use = entry.get("use")
    if use not in ("swap", "filesystem"):
        raise GeneratorError("use must be swap or filesystem, not %r" % (use,))
    if entry.get("mem_limit_bytes"):
        raise GeneratorError("zram-generator 1.1 (Debian 12) has no memory limit, so mem_limit cannot be kept")
    lines = [
        "[%s]" % device,
        "# Entry '%s' of zram_devices (%s)." % (entry.get("name"), use),
        "zram-size = %s" % zram_size(disksize_bytes),
    ]
    if algorithm:
        if not _ALGORITHM_RE.match(algorithm):
            raise GeneratorError("algorithm must be a name such as lz4, not %r" % (algorithm,))
        lines.append("compression-algorithm = %s" % algorithm)
    if use == "swap":
        priority = entry.get("priority")
        if isinstance(priority, bool) or not isinstance(priority, int) or not -1 <= priority <= 32767:
            raise GeneratorError("priority must be a whole number from -1 to 32767, not %r" % (priority,))
        lines.append("swap-priority = %d" % priority)
    else:
        fstype = entry.get("fstype")
        if not fstype:
            raise GeneratorError("a file system entry needs its fstype")
        lines.append("fs-type = %s" % fstype)
    return "\n".join(lines) + "\n"
