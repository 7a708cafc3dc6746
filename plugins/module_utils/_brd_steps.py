# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""brd block RAM disks as journaled transactions: the brd steps of the executor, and the transactions of a plan.

brd makes all its disks (/dev/ram0 .. /dev/ram<rd_nr-1>) when it loads, from two parameters, so the module is
one transaction and each mounted disk one more, run by _transaction.Transaction under the host lock, all or nothing
per run:

- the module: brd_load (modprobe brd rd_nr=N rd_size=K, the pivot), or for a new count or size brd_unload then
  brd_load (the pivot), then the files that load it at boot with the same parameters (systemd hosts). With the
  module loaded as asked, only those files, when they differ.
- each disk with state mounted: mkfs (a disk brd just made, or one without a file system of the wanted type),
  then the mount's own steps as _mount_txn.build_mount() makes them (mount or migrate, root, fstab, record).
  A mount with persist gets only its mkfs here: ramdisk_apply carries out its mount as a mount of its own.
- state absent: first each disk's unmount transaction, then the module's: brd_unload (the pivot) and the boot
  files removed (also when brd is not loaded now).

A plan that is `blocked` (a disk in use that a reload or unload would empty) changes nothing live; with state
present the boot files get the new parameters, which the next boot applies, as the plan's reason says.

Every undo reads the host first (/sys/module/brd, the mount table, /proc/swaps): brd_load's undo unloads brd only
when it was not loaded before the step and no disk is in use; brd_unload's loads it again with the old
parameters.
"""

from __future__ import annotations

import os

from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths as paths
from ansible_collections.ramdisk.provision.plugins.module_utils._atomic import AtomicWriteError
from ansible_collections.ramdisk.provision.plugins.module_utils._mount_steps import item as mount_item
from ansible_collections.ramdisk.provision.plugins.module_utils._mount_txn import build_mount
from ansible_collections.ramdisk.provision.plugins.module_utils._steps import (
    ApplyError, StepError, blkid_type, error_text, file_step)
from ansible_collections.ramdisk.provision.plugins.module_utils._transaction import (
    Transaction, back_out, ensure_new_root, sweep_new_root)

# Steps that act on the kernel: after a reboot there is nothing left for them to undo or finish.
LIVE_STEPS = ("brd_load", "brd_unload")
PIVOTS = LIVE_STEPS


def params_text(rd_nr, rd_size_kib):
    return "options brd rd_nr=%d rd_size=%d\n" % (rd_nr, rd_size_kib)


def brd_state(kernel):
    """{'rd_nr', 'rd_size_kib'} of the loaded module, or None when it is not loaded. KERNEL: _zram_steps.Kernel."""
    if not os.path.isdir(paths.BRD_MODULE):
        return None

    def param(name):
        value = (kernel.read(os.path.join(paths.BRD_PARAMETERS, name)) or "").strip()
        return int(value) if value.isdigit() else None
    return {"rd_nr": param("rd_nr"), "rd_size_kib": param("rd_size")}


def brd_in_use(kernel):
    """{ramN: what uses it} for the disks in use now (mounted, or swap)."""
    used = {}
    for mount in kernel.mounts():
        name = mount["source"][len("/dev/"):] if mount["source"].startswith("/dev/") else ""
        if name.startswith("ram") and name[3:].isdigit():
            used.setdefault(name, "%s (mounted at %s)" % (name, mount["mount_point"]))
    for swap in kernel.swaps():
        name = swap["path"].rsplit("/", 1)[-1]
        if name.startswith("ram") and name[3:].isdigit():
            used.setdefault(name, "%s (swap)" % name)
    return used


class BrdSteps(object):
    """The brd steps, acting through CTX (an _steps.Context, whose kernel, a _zram_steps.Kernel, reads the mount
    table and swaps)."""

    live = LIVE_STEPS

    def __init__(self, ctx):
        self.ctx = ctx

    def steps(self):
        return {"brd_load": (self.do_brd_load, self.undo_brd_load),
                "brd_unload": (self.do_brd_unload, self.undo_brd_unload)}

    def probes(self):
        return {"brd_load": self.load_took_effect, "brd_unload": self.unload_took_effect}

    def _state(self):
        return brd_state(self.ctx.kernel)

    def _in_use(self):
        return brd_in_use(self.ctx.kernel)

    def _modprobe_load(self, rd_nr, rd_size_kib, what):
        self.ctx.tool(["modprobe", "brd", "rd_nr=%d" % rd_nr, "rd_size=%d" % rd_size_kib], what)

    def _modprobe_unload(self, what):
        used = self._in_use()
        if used:
            raise StepError("%s: %s in use, and unloading brd would drop its data"
                            % (what, ", ".join(used.values())))
        self.ctx.tool(["modprobe", "-r", "brd"], what)

    # brd_load: the module with its disks; undone only when this step loaded it -------------------------

    def do_brd_load(self, args):
        state = self._state()
        if state is not None:
            if state == {"rd_nr": args["rd_nr"], "rd_size_kib": args["rd_size_kib"]}:
                return {}  # a run rolled forward: loaded already
            raise StepError("brd is loaded already with rd_nr=%s rd_size=%s, not rd_nr=%s rd_size=%s: something "
                            "loaded it after the plan" % (state["rd_nr"], state["rd_size_kib"], args["rd_nr"],
                                                          args["rd_size_kib"]))
        self._modprobe_load(args["rd_nr"], args["rd_size_kib"], "Loading brd")
        return {"loaded": True}

    def undo_brd_load(self, args, result, same_boot):
        if not same_boot or args.get("loaded_before") or self._state() is None:
            return True
        used = self._in_use()
        if used:
            self.ctx.warnings.append("brd stays loaded: %s in use, so undoing its load would drop data"
                                     % ", ".join(used.values()))
            return True
        self.ctx.tool(["modprobe", "-r", "brd"], "Unloading brd again")
        return True

    # brd_unload: every disk's contents go; undo loads it again, empty, with the old parameters -----------

    def do_brd_unload(self, args):
        if self._state() is not None:
            self._modprobe_unload("Unloading brd")
        return {"unloaded": True}

    def undo_brd_unload(self, args, result, same_boot):
        if same_boot and self._state() is None and args.get("rd_nr") and args.get("rd_size_kib"):
            self._modprobe_load(args["rd_nr"], args["rd_size_kib"], "Loading brd again with its old parameters")
        return True

    # Did a pivot that never said done take effect (in the same boot)? ------------------------------------

    def unload_took_effect(self, args):
        return self._state() is None

    def load_took_effect(self, args):
        return self._state() == {"rd_nr": args["rd_nr"], "rd_size_kib": args["rd_size_kib"]}


# Transactions ---------------------------------------------------------------------------------------------

def _module_steps(module, ex, state):
    """(steps, pivot) of the module's transaction."""
    steps = []
    pivot = None
    action = module["action"]
    live = brd_state(ex.kernel)
    if action == "reload":
        steps.append({"step": "brd_unload", "args": {"rd_nr": (live or {}).get("rd_nr"),
                                                     "rd_size_kib": (live or {}).get("rd_size_kib")}})
    if action in ("load", "reload"):
        pivot = len(steps)
        steps.append({"step": "brd_load", "args": {"rd_nr": module["rd_nr"], "rd_size_kib": module["rd_size_kib"],
                                                   "loaded_before": action == "load" and live is not None}})
    if action == "unload":
        pivot = len(steps)
        steps.append({"step": "brd_unload", "args": {"rd_nr": (live or {}).get("rd_nr"),
                                                     "rd_size_kib": (live or {}).get("rd_size_kib")}})
    if not ex.systemd:
        return steps, pivot
    if state == "present":
        # blocked too: the next boot loads brd with the new parameters, as the plan's reason says.
        file_step(steps, paths.BRD_MODULES_LOAD, "brd\n")
        file_step(steps, paths.BRD_MODPROBE, params_text(module["rd_nr"], module["rd_size_kib"]))
    elif action in ("unload", "absent-ok"):
        file_step(steps, paths.BRD_MODULES_LOAD, None)
        file_step(steps, paths.BRD_MODPROBE, None)
    return steps, pivot


def _mount_steps(mount, ex, fresh):
    """(steps, pivot, for_role) of one disk's transaction; FRESH: brd makes its disks again in this run."""
    device = mount["src"][len("/dev/"):]
    steps = []
    if mount["state"] != "absent":
        in_use = device in brd_in_use(ex.kernel)
        if fresh or (not in_use and blkid_type(ex, device) != mount["fstype"]):
            steps.append({"step": "mkfs", "args": {"device": device, "fstype": mount["fstype"],
                                                   "options": list(mount.get("mkfs_options") or [])}})
    if mount.get("persist"):
        return steps, None, mount  # ramdisk_apply makes it a mount of its own, after brd's transactions
    mount_steps, mount_pivot = build_mount(mount_item(mount, False, ex.systemd), ex.systemd)
    pivot = None if mount_pivot is None else len(steps) + mount_pivot
    return steps + mount_steps, pivot, None


def build_brd(plan, ex):
    """The transactions of PLAN (plan_brd()'s module and mounts), in their order, as [(what, steps, pivot)] from what
    the host holds now. WHAT: {what, path, action, reason, mount (with persist: the mount ramdisk_apply makes after brd's transactions)}.
    With the module's state absent the mounts go first, then the module."""
    module = plan.get("module") or {}
    mounts = plan.get("mounts") or []
    state = module.get("state") or ("absent" if module.get("action") in ("unload", "absent-ok") else "present")
    fresh = module.get("action") in ("load", "reload")
    module_steps, module_pivot = _module_steps(module, ex, state) if module else ([], None)
    module_txn = ({"what": "brd module", "path": "brd module", "action": module.get("action"),
                   "reason": module.get("reason"), "mount": None}, module_steps, module_pivot)
    out = [] if state == "absent" or not module else [module_txn]
    for mount in mounts:
        steps, pivot, for_role = _mount_steps(mount, ex, fresh)
        label = "%s (%s)" % (mount["path"], mount["src"])
        out.append(({"what": label, "path": label, "action": mount.get("action"), "reason": None,
                     "mount": for_role}, steps, pivot))
    if state == "absent" and module:
        out.append(module_txn)
    return out


def apply_brd(plan, ex, journal, run):
    """Carry out PLAN's transactions. Returns [{what, action, reason, mount, steps, changed}]. In check mode
    builds only. A failure undoes every transaction of this run, newest first, and raises ApplyError saying what
    failed, what was undone and what the host holds now."""
    if not plan:
        return []
    try:
        planned = build_brd(plan, ex)
    except (StepError, OSError, KeyError) as exc:
        raise ApplyError("Host %s: the brd plan cannot be carried out, so this run changed nothing: %s."
                         % (ex.host, error_text(exc)))
    out = [dict(what, steps=[step["step"] for step in steps], changed=bool(steps)) for what, steps, pivot in planned]
    if ex.check:
        return out
    done = []
    staging = False
    try:
        for index, (info, steps, pivot) in enumerate(planned):
            if not steps:
                continue
            what = {"path": info["path"], "action": "brd %s" % info["action"], "pivot": pivot, "steps": steps}
            txn = Transaction(ex, journal, run, "brd-%d" % index, what)
            try:
                if any(step["step"] == "move" for step in steps):
                    ensure_new_root(ex)  # a migrate fills its new mount under our private staging mount
                    staging = True
                txn.start()
                txn.forward()
            except (StepError, AtomicWriteError, OSError, KeyError) as exc:
                failed = what["steps"][max(txn.begun)]["step"] if txn.begun else None
                _fail_brd(ex, journal, txn, done, info, failed, exc)
            done.append(txn)
        if staging:
            sweep_new_root(ex)
    finally:
        journal.close()
    journal.clear()
    return out


def _fail_brd(ex, journal, txn, done, info, failed, exc):
    undone, problems = back_out(ex, journal, [txn] + list(reversed(done)))
    state = brd_state(ex.kernel)
    now = "brd %s" % ("not loaded" if state is None else "loaded with rd_nr=%s rd_size=%s" % (
        state["rd_nr"], state["rd_size_kib"]))
    used = list(brd_in_use(ex.kernel).values())
    raise ApplyError(
        "Host %s: brd's %s failed %s: %s. Undone, newest first (brd loaded or unloaded as before, each disk's "
        "mount taken away; the boot files, fstab lines and records as before the run): %s.%s On the host now: "
        "%s; disks in use: %s."
        % (ex.host, info["what"], "at its step '%s'" % failed if failed else "before its first step",
           error_text(exc), ", ".join(undone) or "nothing", (" " + " ".join(problems) + ".") if problems else "",
           now, ", ".join(used) or "none"))
