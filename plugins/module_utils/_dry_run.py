# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Whether ramdisk_apply would change anything, asked by the plan, so that a run with nothing to do skips the
backend roles and their module runs.

Every tmpfs and ramfs mount and every zram device gets its `todo` from the executor itself: the same build()
ramdisk_apply runs, in check mode, which reads the host (mount table, fstab, root, records, unit files, a persisted
mount's helper, timer and backing; a zram device's sysfs, boot script and units) and changes nothing. One decision,
one place: the plan reports what the executor would do, it does not decide it again. Whatever the dry run cannot
answer (a step it refuses, a read that fails) counts as work to do, so that ramdisk_apply runs and says why.
"""

from __future__ import annotations

from ansible_collections.ramdisk.provision.plugins.module_utils._brd_steps import apply_brd
from ansible_collections.ramdisk.provision.plugins.module_utils._executor import apply
from ansible_collections.ramdisk.provision.plugins.module_utils._journal import Journal
from ansible_collections.ramdisk.provision.plugins.module_utils._mount_steps import items as mount_items
from ansible_collections.ramdisk.provision.plugins.module_utils._steps import ApplyError, StepError
from ansible_collections.ramdisk.provision.plugins.module_utils._zram_steps import apply_zram


def _changed(run):
    try:
        return any(item["changed"] for item in run())
    except (ApplyError, StepError, OSError, KeyError, ValueError):
        return True


def _refusal(host, run):
    """Why the executor refuses RUN's steps on this host (a missing owner, a backing or unit it cannot take),
    or None: a failure of another kind is left for ramdisk_apply to say."""
    try:
        run()
    except ApplyError as exc:
        return str(exc)
    except StepError as exc:
        return "Host %s: %s" % (host, exc)
    except (OSError, KeyError, ValueError):
        return None
    return None


def _mark_mounts(entries, ex, journal, vendor_tmp):
    """`todo` on each tmpfs and ramfs entry: whether the executor would take any step for it. All in one dry run,
    as ramdisk_apply builds them (one entry's steps may depend on another's, e.g. persist's helper); where that
    fails, one at a time, and what fails still counts as work."""
    try:
        done = apply(mount_items(entries, vendor_tmp, ex.systemd), ex, journal, "plan")
    except (ApplyError, StepError, OSError, KeyError, ValueError):
        done = None
    if done is not None and len(done) == len(entries):
        for entry, result in zip(entries, done):
            entry["todo"] = bool(result["changed"])
        return
    for entry in entries:
        entry["todo"] = _changed(lambda entry=entry: apply(mount_items([entry], vendor_tmp, ex.systemd), ex,
                                                           journal, "plan"))


def mark_todo(plan, ex, zram_settings, vendor_tmp):
    """Set `todo` on PLAN's tmpfs and ramfs mounts, on its zram devices (zram, zram_swap) and on its brd plan (PLAN:
    ramdisk_plan's result; EX: an executor in check mode). A zram or brd file system whose mount is persisted counts
    as work to do; its mount is carried out apart from its device, so its steps are built here too, and what the
    executor refuses there is a plan error (PLAN's errors), before the first change.
    Returns whether anything has work."""
    journal = Journal()  # check mode neither opens nor writes it
    _mark_mounts((plan.get("tmpfs") or []) + (plan.get("ramfs") or []), ex, journal, vendor_tmp)
    brd = plan.get("brd") or {}
    persisted = [entry["mount"] for entry in (plan.get("zram") or []) + (plan.get("zram_swap") or [])
                 if (entry.get("mount") or {}).get("persist")]
    persisted += [mount for mount in brd.get("mounts") or [] if mount.get("persist")]
    for mount in persisted:
        problem = _refusal(ex.host, lambda mount=mount: apply(mount_items([mount], vendor_tmp, ex.systemd), ex,
                                                              journal, "plan"))
        if problem is not None and problem not in plan.setdefault("errors", []):
            plan["errors"].append(problem)
    for entry in (plan.get("zram") or []) + (plan.get("zram_swap") or []):
        if (entry.get("mount") or {}).get("persist"):
            entry["todo"] = True  # its mount's units and backing are checked by ramdisk_apply on every run
        else:
            entry["todo"] = _changed(lambda entry=entry: apply_zram([entry], ex, journal, "plan", zram_settings))
    if brd:
        # A persisted disk's mount is checked by ramdisk_apply on every run, as for zram.
        brd["todo"] = any(mount.get("persist") for mount in brd.get("mounts") or []) or _changed(
            lambda: apply_brd(brd, ex, journal, "plan"))
    mounts = (plan.get("tmpfs") or []) + (plan.get("ramfs") or [])
    return bool(any(entry.get("todo") for entry in mounts + (plan.get("zram") or [])) or brd.get("todo"))
