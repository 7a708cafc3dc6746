# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Carry out planned RAM mounts on the host as journaled transactions, and recover what a dead run left.

One transaction per planned mount: its steps are worked out in full before the first one runs (with what each
undoes: the old fstab lines, the old file texts, the mount below), written to the intent journal (_journal),
then run one by one, each flushed to the journal before it acts and marked done after. Each transaction has a
point of no return, its pivot: the new mount in place (mount, or the move of a filled and verified mount over
the directory), the remount, or the unmount. A run that dies before the pivot is rolled back by the next run;
one that dies after it is rolled forward (in the same boot; after a reboot only its file steps are finished, as
the boot itself mounted what the files say).

A migrate fills the new file system where nobody sees it, under a private mount of our own (NEW_ROOT), from a
private, non-recursive bind of the directory (what is on disk there, without the mounts under it), verifies the
copy, sets the root's owner and mode, and only then moves the mount over the directory: until that instant the
directory is untouched and visible, so a kill anywhere before it hides nothing.

The steps come in families, each an object given the executor as its context (_steps.Context) and offering a
table {kind: (do, undo)}: the mount and file steps (_mount_txn), zram's, brd's and persist's. The executor composes
the tables and runs a journaled step by its kind; a kind no family offers is a StepError. A family imports
_steps, _transaction and _mount_txn, never this module.

Why by hand: ansible.posix.mount rewrites /etc/fstab in place (a full disk left it empty) and neither it nor any
other module journals or moves mounts; the steps use the kernel's tools (mount, umount, cp, systemctl) with
argument lists, and _atomic for every file.
"""

from __future__ import annotations

import json
import os

from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths as paths
from ansible_collections.ramdisk.provision.plugins.module_utils import _steps
from ansible_collections.ramdisk.provision.plugins.module_utils._atomic import AtomicWriteError
from ansible_collections.ramdisk.provision.plugins.module_utils._brd_steps import BrdSteps
from ansible_collections.ramdisk.provision.plugins.module_utils._journal import Journal
from ansible_collections.ramdisk.provision.plugins.module_utils._mount_txn import MountSteps, build_mount
from ansible_collections.ramdisk.provision.plugins.module_utils._persist_steps import PersistSteps
from ansible_collections.ramdisk.provision.plugins.module_utils._persist_steps import build as build_persisted
from ansible_collections.ramdisk.provision.plugins.module_utils._persist_steps import persisted_after
from ansible_collections.ramdisk.provision.plugins.module_utils._steps import (
    ApplyError, Context, StepError, compose, error_text, mount_result)
from ansible_collections.ramdisk.provision.plugins.module_utils._transaction import (
    Transaction, back_out, ensure_new_root, sweep_new_root)
from ansible_collections.ramdisk.provision.plugins.module_utils._zram_steps import Kernel, ZramSteps


class Executor(Context):
    """Runs and undoes steps by their kind, through the table composed from the step families: the mount and file
    steps (_mount_txn.MountSteps), zram's (_zram_steps.ZramSteps), brd's (_brd_steps.BrdSteps) and persist's
    (_persist_steps.PersistSteps), each given this executor as its context (_steps.Context)."""

    def __init__(self, run, systemd, host, journal=None, check=False, persist_helper=None, kernel=None):
        super().__init__(run, systemd, host, journal=journal, check=check, persist_helper=persist_helper,
                         kernel=kernel if kernel is not None else Kernel())
        self.families = (MountSteps(self), ZramSteps(self), BrdSteps(self), PersistSteps(self))
        self.registry, self.probes = compose(self.families)
        self.boot_probes = dict((kind, probe) for family in self.families
                                for kind, probe in (family.boot_probes() if hasattr(family, "boot_probes") else {}).items())
        # Steps that act on the kernel or a mount: after a reboot there is nothing left for them to undo or finish.
        self.live = frozenset(kind for family in self.families for kind in family.live)

    def _kind(self, kind):
        try:
            return self.registry[kind]
        except KeyError:
            raise StepError("the step '%s' is not one this version of ramdisk.provision knows (it knows %s): a "
                            "journal of a newer version? Recover with that version"
                            % (kind, ", ".join(sorted(self.registry)))) from None

    def do(self, kind, args):
        """Do a step of KIND with its ARGS; returns what it learnt."""
        return self._kind(kind)[0](args)

    def undo(self, kind, args, result, same_boot):
        return self._kind(kind)[1](args, result, same_boot)

    def is_live(self, kind):
        return kind in self.live

    def took_effect(self, step, args, same_boot):
        """Whether a pivot that never said done took effect: its family's probe reads the host (in the same boot).
        Without a probe (remount, start): done or not, going on is right."""
        if not same_boot:
            # A reboot took what a live step made; a boot probe reads what the step left in files.
            probe = self.boot_probes.get(step["step"])
            return probe is not None and bool(probe(args))
        probe = self.probes.get(step["step"])
        return probe(args) if probe is not None else True


def build(item, systemd, ex=None, after=None):
    """(steps, pivot) of ITEM (a mount_items() entry) from what the host holds now; pivot is None when the
    transaction has no point of no return (files only). EX (the executor) answers a persisted mount's questions;
    AFTER: the persisted mounts at the end of the run (_persist_steps.persisted_after)."""
    if item.get("persist"):
        return build_persisted(item, ex, after)
    return build_mount(item, systemd)


def boot_pivot(steps):
    """The index of the step after which a transaction is rolled forward after a reboot, when it is not its pivot
    (a step whose args say boot_pivot): a persisted mount's first copy checked (the only copy left once RAM is gone),
    or the removal of its fstab line (before it, the boot mounted and restored it again). None: the pivot decides."""
    for i, step in enumerate(steps):
        if (step.get("args") or {}).get("boot_pivot"):
            return i
    return None


def recover(ex, journal):
    """Finish or undo what a dead run left in the journal. Returns [{path, action, way, steps}] (way: forward
    or back), and removes the journal once every transaction in it is closed. In check mode only says."""
    lines = journal.read()
    txns = [txn for txn in Journal.transactions(lines) if not txn["closed"]]
    report = []
    unreadable = [str(line["line"]) for line in lines if line.get("t") == "unreadable"]
    if unreadable and not any(txn["assumed"] for txn in txns):
        ex.warnings.append("Host %s: line %s of the journal %s cannot be read; no later line names a transaction it "
                           "could have begun, so recovery assumed that none of its steps began"
                           % (ex.host, ", ".join(unreadable), journal.path))
    for found in reversed(txns):
        what = found["what"]
        steps = what.get("steps") or []
        pivot = what.get("pivot")
        same_boot = found["boot"] is not None and found["boot"] == ex.boot
        forward = found["forward"] and not found["aborted"]
        # A step an unreadable journal line may have begun counts as begun: the host's state decides.
        begun = found["begun"] | found["maybe_begun"]
        if not forward and not found["aborted"] and pivot is not None and pivot in begun:
            if pivot in found["results"]:
                forward = True
            elif ex.took_effect(steps[pivot], steps[pivot]["args"], same_boot):
                forward = True
                found["results"][pivot] = mount_result(steps[pivot]["args"].get("path", ""))
                found["results"].update((i, {}) for i in begun if i < pivot and i not in found["results"])
        if forward and not same_boot and pivot is not None and steps[pivot]["step"] in ("mount", "move", "systemctl_start") \
                and pivot not in found["results"]:
            forward = False
        if forward and pivot is not None and pivot not in found["results"]:
            found["results"][pivot] = {}  # a forward line comes after the pivot's done, or its probe: it took effect
        after_boot = boot_pivot(steps)
        if not same_boot and after_boot is not None:
            # The reboot took RAM: a persisted mount's data is where the boot pivot says (see boot_pivot), whatever
            # the pivot of the boot the run began in said. A boot pivot begun and not said done counts as done when
            # its probe finds its effect on disk (an fstab line written: the boot mounted and restored the path).
            if after_boot in begun and after_boot not in found["results"] and not found["aborted"] and \
                    ex.took_effect(steps[after_boot], steps[after_boot]["args"], same_boot):
                found["results"][after_boot] = {}
                found["results"].update((i, {}) for i in begun if i < after_boot and i not in found["results"])
            forward = after_boot in found["results"] and not found["aborted"]
        entry = {"path": what.get("path"), "action": what.get("action"), "way": "forward" if forward else "back",
                 "run": found["run"], "boot": "same" if same_boot else "earlier",
                 "steps_done": sorted(found["results"]), "steps": [step["step"] for step in steps]}
        if found["assumed"]:
            entry["assumed"] = found["assumed"]
            ex.warnings.append("Host %s: the journal %s of a run that died, for %s: %s. It was %s."
                               % (ex.host, journal.path, what.get("path"), "; ".join(found["assumed"]),
                                  "left as it is (check mode)" if ex.check else "finished" if forward else "undone"))
        report.append(entry)
        if ex.check:
            continue
        journal.require(found, [i for i in range(len(steps)) if i not in found["results"]] if forward
                        else begun - found["undone"], "finish" if forward else "undo")
        txn = Transaction(ex, journal, found["run"], found["txn"], what)
        txn.begun = set(begun)
        txn.results = dict(found["results"])
        txn.undone = set(found["undone"])
        if forward:
            # What the probe found or the order of the lines showed, journaled: a death from here on goes on forward.
            for i in sorted(set(found["results"]) - found["done_lines"]):
                journal.mark("done", found["run"], found["txn"], i, found["results"][i])
            journal.mark("forward", found["run"], found["txn"])
            txn.forward(same_boot=same_boot)
        else:
            txn.back(same_boot=same_boot)
    if not ex.check:
        swept = sweep_new_root(ex)
        if swept:
            report.append({"path": paths.NEW_ROOT, "action": "staging", "way": "back", "unmounted": swept})
        journal.clear()
    return report


def planned_records(lines):
    """{path: the record each open transaction of journal LINES was to write}: what the dead run's plan found at
    the path before it began (whether the directory was there, its root), which a later plan cannot see."""
    out = {}
    for found in Journal.transactions(lines):
        if found["closed"]:
            continue
        for step in found["what"].get("steps") or []:
            args = step.get("args") or {}
            if step.get("step") == "file" and isinstance(args.get("text"), str) and \
                    os.path.dirname(args.get("file") or "") == paths.RECORD_DIR:
                try:
                    record = json.loads(args["text"])
                except ValueError:
                    continue
                if isinstance(record, dict):
                    out[found["what"].get("path")] = record
    return out


def apply(items, ex, journal, run):
    """Carry out ITEMS (mount_items() entries), one transaction each. Returns [{path, action, steps, changed}].

    A step that fails undoes its transaction, then the new mounts (mount, migrate) that this run made before
    it, newest first, and raises ApplyError saying what failed, what was undone and what was left.
    """
    planned = []
    after = persisted_after(items)
    for item in items:
        try:
            steps, pivot = build(item, ex.systemd, ex, after)
        except (StepError, OSError) as exc:
            raise ApplyError("Host %s: %s cannot be carried out, so this run changed nothing: %s."
                             % (ex.host, item["path"], error_text(exc)))
        planned.append((item, steps, pivot))
    out = [{"path": item["path"], "action": item.get("action"), "steps": [step["step"] for step in steps],
            "changed": bool(steps)} for item, steps, pivot in planned]
    if ex.check:
        return out
    done = []
    try:
        if any(item.get("action") == "migrate" and steps for item, steps, pivot in planned):
            ensure_new_root(ex)
        for item, steps, pivot in planned:
            if not steps:
                continue
            what = {"path": item["path"], "action": item.get("action"), "pivot": pivot, "steps": steps}
            txn = Transaction(ex, journal, run, item["token"], what)
            txn.start()
            try:
                txn.forward()
            except (StepError, AtomicWriteError, OSError, KeyError) as exc:
                failed = what["steps"][max(txn.begun)]["step"] if txn.begun else "start"
                _fail(ex, journal, txn, done, item, failed, exc)
            done.append(txn)
        sweep_new_root(ex)
    finally:
        journal.close()
    journal.clear()
    return out


def _fail(ex, journal, txn, done, item, failed, exc):
    left = []
    going = [txn]
    for older in reversed(done):
        if older.what.get("action") not in ("mount", "migrate"):
            left.append("%s (%s, kept)" % (older.what["path"], older.what.get("action")))
        else:
            going.append(older)
    undone, problems = back_out(ex, journal, going)
    now = ["%s %s %s" % (mount["mount_point"], mount["fstype"], mount["source"]) for mount in _steps.mountinfo()
           if mount["mount_point"] in [older.what["path"] for older in [txn] + done]]
    raise ApplyError(
        "Host %s: %s (%s) failed at its step '%s': %s. Undone, in this order (each directory on disk shows as it "
        "was; its fstab line, units and record are as before): %s. Left as this run changed them: %s.%s Mounted "
        "now at those paths: %s."
        % (ex.host, item["path"], item.get("action"), failed, error_text(exc), ", ".join(undone) or "nothing",
           ", ".join(left) or "nothing", (" " + " ".join(problems) + ".") if problems else "",
           "; ".join(now) or "nothing"))
