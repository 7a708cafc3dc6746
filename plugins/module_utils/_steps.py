# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""What every family of executor steps shares: the errors, the context the steps act in, and a few host reads.

A family (the mount and file steps of _mount_txn, zram's, brd's, persist's) is an object made from a Context and
offering steps(): {kind: (do, undo)}, and probes(): {kind: took_effect} for its pivots. The executor composes the
families into one table of step kinds and runs a journaled step by its kind through that table (_executor). Each
do gets the step's ARGS (as journaled) and returns what it learnt (journaled with `done`); each undo gets ARGS,
RESULT ({} when the step never said it was done) and SAME_BOOT, and reads the host before it acts, so it is safe
whether its step ran, half ran or never started. This module imports no family, so none imports another to reach
these.
"""

from __future__ import annotations

import os
import stat

from ansible_collections.ramdisk.provision.plugins.module_utils._journal import boot_id
from ansible_collections.ramdisk.provision.plugins.module_utils._mount_identity import unique_mount_id
from ansible_collections.ramdisk.provision.plugins.module_utils._mount_steps import written
from ansible_collections.ramdisk.provision.plugins.module_utils._procfs import parse_mountinfo

HEADER = "# Written by the ramdisk.provision collection: changes here are overwritten on its next run.\n"
MAX_LISTED = 10


class StepError(Exception):
    pass


class ApplyError(Exception):
    pass


def error_text(exc):
    return str(exc).rstrip(".") if str(exc) else exc.__class__.__name__


class Context(object):
    """What the steps of every family act through. RUN(argv) -> (rc, out, err); SYSTEMD: whether systemd is the
    service manager; HOST: the inventory name the messages give; KERNEL: the zram devices, swaps and mount table
    (_zram_steps.Kernel; a fake in unit tests). PERSIST_HELPER: the text of the persist helper, for mounts with
    persist."""

    def __init__(self, run, systemd, host, journal=None, check=False, persist_helper=None, kernel=None):
        self.run_command = run
        self.persist_helper = persist_helper
        # Sentences for the user that do not stop the run (a persisted mount's last sync refused, ...).
        self.warnings = []
        self.systemd = systemd
        self.host = host
        self.journal = journal
        self.check = check
        self.boot = boot_id()
        self.kernel = kernel
        # The results of the transaction at hand, by step index (a move's undo needs the mount it moved).
        self.txn_results = {}

    def tool(self, argv, what):
        rc, out, err = self.run_command(argv)
        if rc != 0:
            raise StepError("%s failed (%s): %s" % (what, " ".join(argv), (err or out or "exit %d" % rc).strip()))
        return out

    def error(self, message):
        raise StepError(message)

    def reload(self):
        if self.systemd:
            self.tool(["systemctl", "daemon-reload"], "Reloading systemd")


def compose(families):
    """({kind: (do, undo)}, {kind: took_effect}) of FAMILIES, whose kinds are all different (a unit test checks)."""
    table = {}
    probes = {}
    for family in families:
        table.update(family.steps())
        probes.update(family.probes())
    return table, probes


# Host reads ------------------------------------------------------------------------------------------------

def read_text(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def mountinfo():
    return parse_mountinfo(read_text("/proc/self/mountinfo") or "")


def top_mount(path, mounts=None):
    """The mount on top at PATH (the last one listed there), or None."""
    found = None
    for mount in mounts if mounts is not None else mountinfo():
        if mount["mount_point"] == path:
            found = mount
    return found


def mount_result(path):
    """What a step that mounted at PATH journals of the mount on top there: its mount ID and, where the kernel has
    one, its unique ID (the mount ID alone is given out again after an umount)."""
    mount = top_mount(path)
    return {"mount_id": mount["mount_id"] if mount else None, "unique": unique_mount_id(path) if mount else None}


def is_mount(path, mount, mount_id, unique):
    """Whether MOUNT (top_mount(PATH)) is the one a step saw as MOUNT_ID and UNIQUE (None: not known)."""
    if mount is None or mount["mount_id"] != mount_id:
        return False
    return unique is None or unique_mount_id(path) in (None, unique)


def blkid_type(ctx, name):
    """The signature on /dev/NAME (swap, ext4, ...), or None."""
    rc, out, _err = ctx.run_command(["blkid", "-p", "-o", "value", "-s", "TYPE", "/dev/" + name])
    return out.strip() or None if rc == 0 else None


# Building steps ----------------------------------------------------------------------------------------------

def file_step(steps, name, text, mode=0o644, header=True):
    """Append to STEPS a step that makes NAME hold TEXT under our header (None: removes it), unless it already
    does; returns whether it did. A record is JSON, read by the plan: no header."""
    old = read_text(name)
    if text is None:
        if old is None and not os.path.lexists(name):
            return False
        want = None
    else:
        if (old == text) if not header else written(old, text):
            return False
        want = HEADER + text if header else text
    old_mode = None
    if old is not None:
        old_mode = stat.S_IMODE(os.stat(name).st_mode)
    steps.append({"step": "file", "args": {"file": name, "text": want, "mode": mode, "old": old, "old_mode": old_mode}})
    return True


def missing_dirs(directory):
    """The directories to make, outermost first, for DIRECTORY to exist."""
    create = []
    current = directory
    while current not in ("", "/") and not os.path.lexists(current):
        create.insert(0, current)
        current = os.path.dirname(current)
    return create
