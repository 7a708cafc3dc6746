# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Validation and planning for the brd role: block RAM disks (/dev/ramN) with a file system each.

brd makes all its disks at load time from two module parameters, rd_nr (how many) and rd_size (KiB
each), so a change means unloading the module, which drops every disk's contents. plan_brd() only
plans that reload when no disk is mounted, swapped on or open; otherwise it says a reboot is needed.
It never touches the host.
"""

from __future__ import annotations

from ansible_collections.ramdisk.provision.plugins.module_utils._plan_core import (
    Entry,
    block_filesystem,
    check_backings,
    decide,
    intake,
    is_under,
)
from ansible_collections.ramdisk.provision.plugins.module_utils._size import SizeError, format_size, parse_size

ENTRY_KEYS = (
    "disk", "path", "state", "fstype", "mkfs_options", "mode", "owner", "group", "discard", "noatime", "nosuid",
    "nodev", "noexec", "options", "migrate", "persist", "label",
)
MAX_DISKS = 64
# Made by systemd-modules-load from /etc/modules-load.d at boot, before local file systems.
BOOT_UNIT = "systemd-modules-load.service"


def plan_brd(request, facts, host="localhost", defaults=None):
    """REQUEST: {'state', 'count', 'size', 'mounts'}; returns {'module': {...}, 'mounts': [...], 'errors': [...]}."""
    errors = []
    facts = facts or {}
    defaults = dict(defaults or {})
    request = request or {}
    mem_total = (facts.get("memory") or {}).get("total_bytes")
    support = facts.get("support") or {}
    brd = facts.get("brd") or {}
    state = request.get("state", "present")

    def error(name, value, problem, fix):
        errors.append("Host %s: %s is %r: %s. %s" % (host, name, value, problem, fix))

    if state not in ("present", "absent"):
        error("brd_state", state, "not a known state", "Use present or absent.")
    count = request.get("count")
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_DISKS:
        error("brd_count", count, "not a number of disks", "Use a whole number from 1 to %d." % MAX_DISKS)
        count = None
    size_bytes = None
    size = request.get("size")
    try:
        size_bytes = parse_size(size, ram_bytes=mem_total)
    except SizeError as exc:
        error("brd_size", size, str(exc), "Use a size such as 64M, 1G or 10% (of RAM, per disk).")
    if size_bytes is not None and size_bytes % 1024:
        error("brd_size", size, "not a whole number of KiB", "brd takes its size in KiB; use e.g. 64M.")
        size_bytes = None
    if size_bytes and count and mem_total and size_bytes * count > mem_total:
        error("brd_size", size, "%d disks of %s need %s, above this host's RAM of %s" % (
            count, format_size(size_bytes), format_size(size_bytes * count), format_size(mem_total)),
            "Use fewer or smaller disks; brd holds every byte written in RAM until the module is unloaded.")
    if state == "present" and not support.get("brd"):
        errors.append("Host %s: brd_state is 'present', but brd cannot load on this host: kernel %s has no brd "
                      "module it can load (none built, or module loading is off). Use zram or tmpfs here, or a "
                      "kernel built with CONFIG_BLK_DEV_RAM=m." % (host, support.get("kernel", "(unknown)")))

    mounts = request.get("mounts") or []
    planned = []
    seen_disks = {}
    seen_paths = {}
    if not isinstance(mounts, (list, tuple)):
        error("brd_mounts", mounts, "not a list", "Give a list such as [{disk: 0, path: /srv/scratch}].")
        mounts = []
    for index, item in enumerate(mounts):
        entry = Entry(host, "brd_mounts", index, errors, item.get("label") if isinstance(item, dict) else None)
        values = intake(entry, item, ENTRY_KEYS, defaults, "mount, with disk and path,")
        if values is None:
            continue
        if state == "absent":
            values["state"] = "absent"
        disk = values.get("disk")
        if isinstance(disk, bool) or not isinstance(disk, int) or disk < 0:
            entry.error("disk", disk, "not a disk number", "Use 0 for /dev/ram0, 1 for /dev/ram1, and so on.")
            disk = None
        elif count is not None and disk >= count:
            entry.error("disk", disk, "above the %d disk(s) of brd_count" % count,
                        "Use a number from 0 to %d, or raise brd_count." % (count - 1))
        elif disk in seen_disks:
            entry.error("disk", disk, "the same disk as %s.disk" % seen_disks[disk], "Give each disk one mount.")
        else:
            seen_disks[disk] = entry.where
        entry_state = values.get("state", "mounted")
        if entry_state not in ("mounted", "absent"):
            entry.error("state", entry_state, "not a known state", "Use mounted or absent.")
        mount = block_filesystem(entry, values, size_bytes, "present" if entry_state == "mounted" else "absent",
                                 BOOT_UNIT)
        if mount is not None:
            if mount["path"] in seen_paths:
                entry.error("path", values.get("path"), "the same mount point as %s.path" % seen_paths[mount["path"]],
                            "Mount each disk at its own path.")
            else:
                seen_paths[mount["path"]] = entry.where
        if not entry.ok or mount is None:
            continue
        mount["src"] = "/dev/ram%d" % disk
        mount["disk"] = disk
        planned.append(mount)

    live = [mount for mount in planned if mount["state"] == "mounted"]
    for inner in live:
        for outer in live:
            if outer["path"] != inner["path"] and is_under(inner["path"], outer["path"]):
                errors.append("Host %s: %s.path is '%s': it is inside %s.path '%s', and nested RAM mounts hide "
                              "each other depending on mount order. Choose paths that do not contain one another."
                              % (host, inner["label"], inner["path"], outer["label"], outer["path"]))
    check_backings(planned, facts, host, errors)
    for mount in planned:
        decide(mount, facts, host, "brd_mounts", errors)

    # Disks this run unmounts itself do not keep brd loaded.
    unmounted = set(mount["src"] for mount in planned if mount["action"] == "unmount")
    module = _module_action(state, count, size_bytes, brd, unmounted if state == "absent" else ())
    return {"module": module, "mounts": planned, "errors": errors}


def _module_action(state, count, size_bytes, brd, unmounted=()):
    """load, ok, reload, unload, absent-ok, or blocked (a disk is in use: a reboot applies the change); STATE goes
    with it, as the executor orders the transactions by it (the mounts before the module when absent)."""
    loaded = bool(brd.get("loaded"))
    in_use = ["%s (%s%s)" % (dev["path"], dev["used_as"], " at " + dev["mountpoint"] if dev.get("mountpoint") else "")
              for dev in brd.get("devices") or () if dev.get("used_as") != "unused" and dev["path"] not in unmounted]
    wanted_kib = size_bytes // 1024 if size_bytes else None
    plan = {"state": state, "loaded": loaded, "rd_nr": count, "rd_size_kib": wanted_kib, "in_use": in_use,
            "reboot_required": False, "reason": None}
    if state == "absent":
        if not loaded:
            plan["action"] = "absent-ok"
        elif in_use:
            plan.update(action="blocked", reboot_required=True,
                        reason="brd stays loaded: %s still in use; unloading would drop its data" % ", ".join(in_use))
        else:
            plan["action"] = "unload"
        return plan
    if not loaded:
        plan["action"] = "load"
    elif brd.get("rd_nr") == count and brd.get("rd_size_kib") == wanted_kib:
        plan["action"] = "ok"
    elif in_use:
        plan.update(action="blocked", reboot_required=True,
                    reason="brd is loaded with rd_nr=%s rd_size=%s; the new rd_nr=%s rd_size=%s applies at the next "
                           "boot, because %s in use and a reload would drop its data" % (
                               brd.get("rd_nr"), brd.get("rd_size_kib"), count, wanted_kib, ", ".join(in_use)))
    else:
        plan["action"] = "reload"
    return plan
