# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""One transaction's steps run through the intent journal, undone newest first; and the private staging mount
under which a migrate fills its new mount. Used by every kind of transaction (_executor's mounts, _zram_steps',
_brd_steps'): the executor they are given runs each step by its kind (_executor.Executor.do and undo)."""

from __future__ import annotations

import os

from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths as paths
from ansible_collections.ramdisk.provision.plugins.module_utils import _steps
from ansible_collections.ramdisk.provision.plugins.module_utils._atomic import AtomicWriteError
from ansible_collections.ramdisk.provision.plugins.module_utils._steps import StepError, error_text


class Transaction(object):
    """One planned mount's steps, run through the journal."""

    def __init__(self, ex, journal, run, txn, what):
        self.ex = ex
        self.journal = journal
        self.run = run
        self.txn = txn
        self.what = what
        self.begun = set()
        self.results = {}
        self.undone = set()

    def start(self):
        self.journal.txn(self.run, self.txn, self.what)

    def _do(self, i):
        step = self.what["steps"][i]
        self.ex.txn_results = self.results
        self.begun.add(i)
        self.journal.mark("begin", self.run, self.txn, i)
        result = self.ex.do(step["step"], step["args"]) or {}
        self.results[i] = result
        self.journal.mark("done", self.run, self.txn, i, result)
        if i == self.what.get("pivot"):
            self.journal.mark("forward", self.run, self.txn)

    def forward(self, start=0, same_boot=True):
        for i in range(start, len(self.what["steps"])):
            if i in self.results:
                continue
            if not same_boot and self.ex.is_live(self.what["steps"][i]["step"]):
                continue
            self._do(i)
        self.journal.mark("close", self.run, self.txn)

    def back(self, same_boot=True):
        """Undo every begun step, newest first. The abort line is written first, so a death midway goes on
        backwards at the next run, never forwards."""
        self.journal.mark("abort", self.run, self.txn)
        self.ex.txn_results = self.results
        if not same_boot:
            self.stop_services_again()
        for i in sorted(self.begun - self.undone, reverse=True):
            step = self.what["steps"][i]
            self.ex.undo(step["step"], step["args"], self.results.get(i) or {}, same_boot)
            self.undone.add(i)
            self.journal.mark("undone", self.run, self.txn, i)
        self.journal.mark("close", self.run, self.txn)

    def stop_services_again(self):
        """After a reboot the services the dead run stopped (persist.services) run again, started by the boot, and
        may hold files in what the boot mounted from the new fstab line (a logger in /var/log), which the undo takes
        away: stopped again first. The undo of their stop step starts them, last, as in the same boot."""
        for i in sorted(self.begun - self.undone):
            step = self.what["steps"][i]
            if step["step"] == "systemctl" and (step.get("args") or {}).get("services"):
                self.ex.do("systemctl", step["args"])


def back_out(ex, journal, txns):
    """Undo TXNS in their order; then, when all went, the staging area and the journal. Returns (the paths undone,
    sentences for what could not be)."""
    undone = []
    problems = []
    for older in txns:
        try:
            older.back()
            undone.append(older.what["path"])
        except (StepError, AtomicWriteError, OSError) as undo_exc:
            problems.append("undoing %s failed: %s; the journal keeps it, and the next run goes on undoing it"
                            % (older.what["path"], error_text(undo_exc)))
    if not problems:
        try:
            sweep_new_root(ex)
            journal.clear()  # every transaction of the run is closed
        except (StepError, OSError) as sweep_exc:
            problems.append("clearing the staging area failed: %s" % error_text(sweep_exc))
    return undone, problems


def ensure_new_root(ex):
    """A private mount of our own under which a migrate fills its new mount: a mount can only be moved out of
    a parent that does not share its mounts, and nobody else sees it there half filled."""
    if _steps.top_mount(paths.NEW_ROOT) is not None:
        return
    if not os.path.isdir(paths.NEW_ROOT):
        os.makedirs(paths.NEW_ROOT, 0o700)
    ex.tool(["mount", "-t", "tmpfs", "-o", "mode=0700,size=1m,nosuid,nodev,noexec", "ramdisk-provision",
             paths.NEW_ROOT], "Mounting the private staging area %s" % paths.NEW_ROOT)
    ex.tool(["mount", "--make-private", paths.NEW_ROOT], "Making %s private" % paths.NEW_ROOT)


def sweep_new_root(ex):
    """Take away what a dead run left under NEW_ROOT (never seen by anyone: it is ours by where it is), then
    NEW_ROOT itself. Returns the paths unmounted."""
    prefix = paths.NEW_ROOT + "/"
    left = [mount["mount_point"] for mount in _steps.mountinfo() if mount["mount_point"].startswith(prefix)]
    for point in sorted(set(left), key=len, reverse=True):
        ex.tool(["umount", point], "Taking away %s, left by a run that died" % point)
    if _steps.top_mount(paths.NEW_ROOT) is not None:
        ex.tool(["umount", paths.NEW_ROOT], "Releasing %s" % paths.NEW_ROOT)
    try:
        os.rmdir(paths.NEW_ROOT)
    except OSError:
        pass
    return left
