# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Which mount is at a path, by an identity the kernel does not give out again.

The mount ID of /proc/self/mountinfo and the device number of a tmpfs are reused: an umount and a mount of a tmpfs at
one path gave the same ID three times out of three, so "the mount we made" cannot be told from an admin's new one
by them. Linux 6.8 and later give each mount a 64-bit ID that is never reused while the machine runs (statx with
STATX_MNT_ID_UNIQUE); with the boot ID it names one mount for good. On older kernels there is nothing as good:
identity() says so (unique None) and callers fall back on the mount ID, as before.

Standard library only, and no import of this collection: the persist helper on the host uses it too.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys

STATX_MNT_ID_UNIQUE = 0x4000
AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW = 0x100
AT_NO_AUTOMOUNT = 0x800
# struct statx: stx_mask is its first 32 bits, stx_mnt_id the 64 bits at byte 144; the kernel writes 256 bytes.
STATX_SIZE = 256
MNT_ID_OFFSET = 144
# statx's system call number by machine (Linux's syscall tables); elsewhere identity() falls back.
STATX_SYSCALL = {"x86_64": 332, "amd64": 332, "aarch64": 291, "arm64": 291, "riscv64": 291, "i386": 383,
                 "i686": 383, "armv7l": 397, "armv6l": 397, "ppc64le": 383, "ppc64": 383, "s390x": 379}
BOOT_ID = "/proc/sys/kernel/random/boot_id"


def boot_id():
    try:
        with open(BOOT_ID) as handle:
            return handle.read().strip() or None
    except (IOError, OSError):
        return None


def unique_mount_id(path):
    """The never-reused 64-bit ID of the mount PATH is on (its top mount when PATH is a mount point), or None when
    this kernel has none (before 6.8), the machine's statx number is unknown, or PATH cannot be read."""
    number = STATX_SYSCALL.get(platform.machine())
    if number is None:
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    buf = ctypes.create_string_buffer(STATX_SIZE)
    name = os.fsencode(path)
    rc = libc.syscall(ctypes.c_long(number), ctypes.c_int(AT_FDCWD), ctypes.c_char_p(name),
                      ctypes.c_int(AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT), ctypes.c_uint(STATX_MNT_ID_UNIQUE), buf)
    if rc != 0:
        return None
    if not int.from_bytes(buf.raw[0:4], sys.byteorder) & STATX_MNT_ID_UNIQUE:
        return None  # an older kernel: stx_mnt_id would be the reused one
    return int.from_bytes(buf.raw[MNT_ID_OFFSET:MNT_ID_OFFSET + 8], sys.byteorder)


def identity(path):
    """{"boot", "unique"}: the mount at PATH as this boot's kernel names it for good; unique is None where the
    kernel gives no such ID (then only the reused mount ID can tell, as callers do without this)."""
    return {"boot": boot_id(), "unique": unique_mount_id(path)}


def same_mount(seen, now):
    """Whether identity() SEEN and NOW name one mount: True or False when both have a unique ID of one boot, None
    when they cannot tell (an older kernel, another boot's record): the caller decides by what it has."""
    if not isinstance(seen, dict) or not isinstance(now, dict):
        return None
    if seen.get("unique") is None or now.get("unique") is None or seen.get("boot") != now.get("boot"):
        return None
    return seen["unique"] == now["unique"]
