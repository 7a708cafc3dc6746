#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: ramdisk_apply
short_description: Carry out planned RAM mounts as journaled transactions, one run at a time per host
version_added: 1.1.0
description:
  - Carries out the tmpfs and ramfs mounts that M(ramdisk.provision.ramdisk_plan) planned (or a backend role's own
    plan) - mount points, mounts, remounts and unmounts, the copy of a directory's contents into its new mount
    (migrate), the root's owner and mode, the C(/etc/fstab) line, the boot-time copy unit, the tmp.mount drop-in,
    the tmpfiles line and the collection's record of each mount.
  - Holds the host lock (C(/run/ramdisk-provision/lock)) for the whole run, so two runs never act at once; a
    second run waits up to O(lock_timeout) seconds, then fails naming the holder (run, pid, start, controller).
  - Writes every change to an intent journal (C(/var/lib/ramdisk-provision/journal.jsonl)) before making it. A run
    that died (killed, power cut) is finished or undone by the next run, check mode included (which only says
    what it would do), before anything else.
  - A migrate fills the new mount out of sight, from a private bind of the directory, verifies the copy, sets the
    root's owner and mode, and only then moves the mount over the directory.
  - Every file is replaced atomically (temporary file, flush, rename, flush of the directory); a full file system
    leaves it as it was.
  - When a step fails, the mount being made and the new mounts this run made before it are undone, and the
    message says what was undone and what is mounted now.
  - Refuses, before any change, a mount whose path changed after it was planned (another run, or a person), and
    says to run again.
  - An entry with persist (its data kept in a backing directory on disk) is one transaction too, decided again
    under the lock from what the host holds, as the plan decided it - the services named in C(persist.services)
    stopped, the mount, the persist helper and its units, the backing's first copy (checked against the mount),
    the persist unit enabled, then the C(/etc/fstab) line when the run writes one (a boot before it leaves the path
    on disk, a boot after it restores the mount before the services), or the mount's restore from the backing
    (checked), the timer, the record, the services started again. With
    C(state=absent), the mount is written back, unmounted, and the backing's copy returned to the directory on
    disk (checked) before the copies, units and helper go.
  - With O(zram_devices), also carries out the zram role's devices, one transaction each, after the mounts - the
    device (C(hot_add), algorithm, size, memory limit), C(mkswap) and C(swapon), or C(mkfs) and the mount of its
    file system (migrate included), the boot-time setup unit or zram-generator drop-in, the record and the
    C(/etc/fstab) line. When one fails, every device this run made is turned off, reset and removed, every file
    is put back, and the message says which devices of these entries the host holds now.
  - With O(brd), also carries out the brd role's plan, after the zram devices - the module as one transaction
    (C(modprobe brd rd_nr=N rd_size=K), for a new count or size C(modprobe -r brd) first, then
    C(/etc/modules-load.d/brd.conf) and C(/etc/modprobe.d/brd.conf), which load it at boot on systemd hosts), then
    each disk as one more (C(mkfs) where the disk has no file system of its type, and its mount). With state
    absent, the disks are unmounted first, then brd is unloaded and its boot files removed. A plan that is
    C(blocked) (a disk in use) changes nothing live. When one fails, every brd transaction of this run is undone.
author: ramdisk.provision maintainers (@ramdisk-provision)
options:
  host:
    description: The inventory name of the host, for messages.
    type: str
    required: true
  mounts:
    description:
      - The planned entries, as M(ramdisk.provision.ramdisk_plan) returns them in C(tmpfs) and C(ramfs), or as a
        backend role's plan gives them.
    type: list
    elements: dict
    default: []
  zram_devices:
    description:
      - The zram devices as the zram role's plan (or M(ramdisk.provision.ramdisk_plan)'s C(zram) and C(zram_swap))
        gives them. A file system entry with persist is a mount of its own, written back and unmounted before its
        device goes, mounted and restored after its device is made, each as one more transaction of this run.
    type: list
    elements: dict
    default: []
  zram_known:
    description: The device each zram entry got on earlier runs (entry name to C(zramN)), from the zram records.
    type: dict
    default: {}
  zram_persistence:
    description: How the zram devices come back at boot, C(units) or C(generator) (the zram role's variable).
    type: str
    choices: [units, generator]
    default: units
  zram_allow_swap_cycle:
    description: The zram role's C(zram_allow_swap_cycle).
    type: bool
    default: true
  zram_allow_algorithm_fallback:
    description: The zram role's C(zram_allow_algorithm_fallback).
    type: bool
    default: false
  brd:
    description:
      - The brd role's plan (C(module) and C(mounts), as M(ramdisk.provision.ramdisk_plan) returns them in C(brd)). A
        mount with persist gets its C(mkfs) with brd's transactions and is a mount of its own, as for zram.
    type: dict
    default: {}
  lock_timeout:
    description: Seconds to wait for another run on the host to finish before failing.
    type: int
    default: 300
  run_id:
    description: A name for this run, shown to other runs that wait for it. A random one when not given.
    type: str
  persist_helper:
    description:
      - Deprecated, unused (issue 41). The persist helper the units run is this collection's own program, installed
        from its module_utils; the text given here is ignored. Accepted so that existing playbooks keep working;
        it will be removed in a later major release.
    type: str
extends_documentation_fragment:
  - ramdisk.provision._attributes
  - ramdisk.provision._attributes.check_mode_full
attributes:
  platform:
    support: full
    platforms: linux
notes:
  - Needs root, C(mount), C(umount) and C(cp) (util-linux and coreutils), and C(systemctl) where systemd runs.
"""

EXAMPLES = r"""
- name: Decide the mounts on the host
  ramdisk.provision.ramdisk_plan:
    host: "{{ inventory_hostname }}"
    sources: [{name: ramdisk_mounts, value: "{{ ramdisk_mounts }}"}]
  register: __plan

- name: Carry them out
  ramdisk.provision.ramdisk_apply:
    host: "{{ inventory_hostname }}"
    mounts: "{{ __plan.tmpfs + __plan.ramfs }}"
"""

RETURN = r"""
mounts:
  description: For each entry, its path, the plan's action, and the steps this run took (or would take).
  returned: always
  type: list
  elements: dict
  sample:
    - path: /var/cache/build
      action: migrate
      steps: [mkdir, bind, mount, copy, release, root, move, fstab, reload, file]
      changed: true
recovered:
  description: What a run that died left, and whether it was rolled forward (finished) or back (undone).
  returned: always
  type: list
  elements: dict
  sample:
    - path: /var/cache/build
      action: migrate
      way: back
      run: 5f0c2a9e11d4
      boot: same
      steps_done: [0, 1, 2]
      steps: [mkdir, bind, mount, copy, release, root, move, fstab, reload, file]
zram:
  description: For each zram entry, its device, what was decided, and the steps this run took (or would take).
  returned: always
  type: list
  elements: dict
  sample:
    - name: swap
      use: swap
      state: present
      device: zram1
      action: create
      reboot_required: false
      reason: null
      mount: null
      steps: [zram_add, zram_set, mkswap, swapon, file, file, file, reload, systemctl, swap_fstab]
      changed: true
      report: "swap: /dev/zram1, swap priority 100, 72.0 MiB lz4"
brd:
  description:
    - For each brd transaction in its order (the module, each disk), what it is, the plan's action and reason, the
      steps this run took (or would take), and C(mount), a persisted disk's mount (else null), carried out after
      brd's transactions; RV(mounts) has its steps.
  returned: always
  type: list
  elements: dict
  sample:
    - what: brd module
      path: brd module
      action: load
      reason: null
      mount: null
      steps: [brd_load, file, file]
      changed: true
    - what: /srv/brd (/dev/ram0)
      path: /srv/brd (/dev/ram0)
      action: mount
      reason: null
      mount: null
      steps: [mkfs, mkdir, mount, root, fstab, reload, file, file]
      changed: true
lock:
  description: How long this run waited for the host lock, and the run that left it without releasing it, if any.
  returned: when not in check mode
  type: dict
  sample: {waited: 0.0, stale: null}
"""

import os
import traceback
import uuid

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths as paths
from ansible_collections.ramdisk.provision.plugins.module_utils._brd_steps import apply_brd
from ansible_collections.ramdisk.provision.plugins.module_utils._executor import Executor, apply, planned_records, recover
from ansible_collections.ramdisk.provision.plugins.module_utils._failure import program_runner, unexpected
from ansible_collections.ramdisk.provision.plugins.module_utils._journal import Journal, JournalError
from ansible_collections.ramdisk.provision.plugins.module_utils._lock import HostLock, LockHeld, describe
from ansible_collections.ramdisk.provision.plugins.module_utils._mount_identity import identity, same_mount
from ansible_collections.ramdisk.provision.plugins.module_utils._mount_steps import items as mount_items, notes
from ansible_collections.ramdisk.provision.plugins.module_utils._procfs import mem_available
from ansible_collections.ramdisk.provision.plugins.module_utils._steps import ApplyError, StepError, top_mount
from ansible_collections.ramdisk.provision.plugins.module_utils._trust import state_dirs_error
from ansible_collections.ramdisk.provision.plugins.module_utils._zram_steps import apply_zram, report_line


def _stale(host, entries):
    """Sentences for each entry whose path changed after the plan was made (it carries what the plan saw)."""
    out = []
    for entry in entries:
        seen = entry.get("seen")
        if not isinstance(seen, dict):
            continue
        mount = top_mount(entry["path"])
        now = mount["mount_id"] if mount else None
        same = same_mount(seen, identity(entry["path"])) if mount else None
        # The mount ID alone only where the kernel has no unique one: it comes back after an umount and a mount.
        if now != seen.get("mount_id") or same is False:
            out.append("%s: %s" % (entry["path"], "%s from %s is mounted there now" % (mount["fstype"], mount["source"])
                                   if mount else "what the plan saw mounted there is gone"))
    return out


def _as_found_before(entries, records):
    """ENTRIES with what a dead run's own plan found at each path it was changing (RECORDS: path -> the record it
    was to write). A plan made while that run's transaction was open saw its half-done work (a directory it made,
    its mount without a record), and would record the collection's own directory as the user's."""
    out = []
    for entry in entries:
        found = records.get(entry.get("path"))
        if found and isinstance(entry.get("record"), dict):
            entry = dict(entry, record=dict(entry["record"], created_dir=bool(found.get("created_dir")),
                                            root_kept=found.get("root_kept") or {}))
        out.append(entry)
    return out


def _brd_as_found_before(plan, records):
    """The brd PLAN with its mounts as _as_found_before() gives them."""
    if not plan.get("mounts"):
        return plan
    return dict(plan, mounts=_as_found_before(plan["mounts"], records))


def _persisted_first(zram_devices, known, brd_plan):
    """The persisted zram and brd file systems that go before their device: written back to their backing and
    unmounted first, as one more mount of the run, and brd's PLAN without them. A device that goes drops its
    data, so its mount has to be gone (and written back) before it."""
    first = [dict(device["mount"], src="/dev/%s" % ((known or {}).get(device["name"]) or "none"))
             for device in zram_devices or () if isinstance(device, dict) and device.get("state") == "absent"
             and (device.get("mount") or {}).get("persist")]
    if (brd_plan.get("module") or {}).get("state") == "absent" and brd_plan.get("mounts"):
        first += [mount for mount in brd_plan["mounts"] if mount.get("persist")]
        brd_plan = dict(brd_plan, mounts=[mount for mount in brd_plan["mounts"] if not mount.get("persist")])
    return first, brd_plan


def _persisted_after(zram, brd):
    """The persisted zram and brd file systems whose device this run has made (or kept): mounted, restored from
    their backing and given their units after it, each as its own transaction (ZRAM, BRD: what apply_zram and
    apply_brd returned, whose `mount` is such a mount with its device as src)."""
    return [info["mount"] for info in list(zram) + list(brd) if info.get("mount")]


def main():
    module = AnsibleModule(
        argument_spec=dict(
            host=dict(type="str", required=True),
            mounts=dict(type="list", elements="dict", default=[]),
            zram_devices=dict(type="list", elements="dict", default=[]),
            zram_known=dict(type="dict", default={}),
            zram_persistence=dict(type="str", choices=["units", "generator"], default="units"),
            zram_allow_swap_cycle=dict(type="bool", default=True),
            zram_allow_algorithm_fallback=dict(type="bool", default=False),
            brd=dict(type="dict", default={}),
            lock_timeout=dict(type="int", default=300),
            run_id=dict(type="str"),
            persist_helper=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    try:
        _main(module)
    except Exception as exc:  # pylint: disable=broad-except
        # Whatever nobody foresaw still says what happened and what the host holds.
        wanted = [entry.get("path") for entry in module.params["mounts"] + list((module.params["brd"] or {}).get(
            "mounts") or []) if isinstance(entry, dict) and isinstance(entry.get("path"), str)]
        module.fail_json(msg=unexpected(module.params["host"], "ramdisk_apply", exc, wanted),
                         exception=traceback.format_exc())


def _main(module):
    host = module.params["host"]
    run = module.params["run_id"] or uuid.uuid4().hex[:12]
    systemd = os.path.isdir(paths.SYSTEMD_RUN_DIR)
    vendor_tmp = any(os.path.exists(path) for path in paths.VENDOR_TMP_UNITS)
    entries = module.params["mounts"]
    brd_plan = module.params["brd"] or {}
    # Before the journal is read: a journal or record someone else could have written would steer root.
    untrusted = state_dirs_error(host, paths.STATE_DIRS)
    if untrusted:
        module.fail_json(msg=untrusted)

    executor = Executor(program_runner(module), systemd, host, check=module.check_mode,
                        persist_helper=module.params["persist_helper"])
    journal = Journal(paths.JOURNAL)
    zram_settings = {"known": module.params["zram_known"], "persistence": module.params["zram_persistence"],
                     "allow_swap_cycle": module.params["zram_allow_swap_cycle"],
                     "allow_algorithm_fallback": module.params["zram_allow_algorithm_fallback"],
                     "vendor_tmp": vendor_tmp, "mem_available_bytes": mem_available()}

    # A persisted zram or brd file system is a mount of its own, carried out as the tmpfs ones are: before its
    # device goes, or after it is made.
    first, brd_plan = _persisted_first(module.params["zram_devices"], module.params["zram_known"], brd_plan)

    def zram_out(found):
        return [dict(info, report=report_line(info, systemd)) for info in found]

    if module.check_mode:
        try:
            records = planned_records(journal.read())
            recovered = recover(executor, journal)
            done = apply(mount_items(_as_found_before(entries + first, records), vendor_tmp, systemd), executor,
                         journal, run)
            zram = apply_zram(module.params["zram_devices"], executor, journal, run, zram_settings)
            brd = apply_brd(_brd_as_found_before(brd_plan, records), executor, journal, run)
            done += apply(mount_items(_persisted_after(zram, brd), vendor_tmp, systemd), executor, journal, run)
        except (ApplyError, JournalError, StepError) as exc:
            module.fail_json(msg=str(exc) if isinstance(exc, ApplyError) else "Host %s: %s" % (host, exc))
        for warning in executor.warnings:
            module.warn(warning)
        module.exit_json(changed=bool(recovered) or any(item["changed"] for item in done + zram + brd), mounts=done,
                         zram=zram_out(zram), brd=brd, recovered=recovered)

    client = (os.environ.get("SSH_CLIENT") or "").split()
    lock = HostLock(holder={"run": run, "controller": client[0] if client else "local connection",
                            "user": os.environ.get("SUDO_USER") or os.environ.get("LOGNAME") or "root"})
    try:
        taken = lock.acquire(module.params["lock_timeout"])
    except LockHeld as exc:
        module.fail_json(msg="Host %s: another run is changing this host's RAM mounts, so this one changed "
                             "nothing: %s" % (host, exc))
    try:
        records = planned_records(journal.read())
        recovered = recover(executor, journal)
        items = mount_items(_as_found_before(entries + first, records), vendor_tmp, systemd)
        stale = _stale(host, entries + first + list(brd_plan.get("mounts") or []))
        if stale:
            module.fail_json(msg="Host %s: the host changed after this run planned it, so this run changed nothing "
                                 "(%s). %s Run again: the next run plans from what is there now."
                                 % (host, "; ".join(stale), "This run waited %.1f s for %s, which held the host lock."
                                    % (taken["waited"], describe(taken["waited_for"]))
                                    if taken.get("waited_for") else ""),
                             recovered=recovered)
        done = apply(items, executor, journal, run)
        zram = apply_zram(module.params["zram_devices"], executor, journal, run, zram_settings)
        brd = apply_brd(_brd_as_found_before(brd_plan, records), executor, journal, run)
        after = mount_items(_persisted_after(zram, brd), vendor_tmp, systemd)
        done += apply(after, executor, journal, run)
        items += after
    except (ApplyError, JournalError) as exc:
        module.fail_json(msg=str(exc) if isinstance(exc, ApplyError) else "Host %s: %s" % (host, exc))
    except StepError as exc:
        module.fail_json(msg="Host %s: recovering what an earlier run left failed: %s. The journal %s keeps it; "
                             "run again once the cause is fixed." % (host, exc, paths.JOURNAL))
    finally:
        lock.release()
    for warning in executor.warnings + notes(host, items, done, recovered, systemd):
        module.warn(warning)
    module.exit_json(changed=bool(recovered) or any(item["changed"] for item in done + zram + brd), mounts=done,
                     zram=zram_out(zram), brd=brd, recovered=recovered,
                     lock={"waited": round(taken.get("waited") or 0, 1), "stale": taken.get("stale")})


if __name__ == "__main__":
    main()
