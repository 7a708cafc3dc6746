# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Validation and planning for the zram role: swap devices and file systems on zram.

plan_zram() checks a user list such as zram_devices against a host's ramdisk_facts and returns one
normalized entry per device, plus error sentences that name the host, the variable, the bad value
and the fix. File-system entries also carry a mount entry in the shape the shared mount pipeline
(the ramdisk.provision.mount role) takes, with its action decided like any other RAM mount.
It never touches the host.
"""

from __future__ import annotations

import re

from ansible_collections.ramdisk.provision.plugins.module_utils._plan_core import (
    Entry,
    as_bool,
    block_filesystem,
    check_backings,
    decide,
    intake,
    is_under,
)
from ansible_collections.ramdisk.provision.plugins.module_utils._size import SizeError, format_size, parse_size

ENTRY_KEYS = (
    "name", "use", "state", "size", "algorithm", "mem_limit", "priority", "path", "fstype", "mkfs_options",
    "mode", "owner", "group", "discard", "noatime", "nosuid", "nodev", "noexec", "options", "migrate", "persist",
    "label",
)
# The one set of defaults under every zram entry, whichever door it comes through: the zram role (its
# zram_device_defaults, empty unless set, are merged over these key by key), ramdisk_plan's zram_devices and the
# policy's zram entries (whose own settings come first). Documented in the zram role's argument spec.
DEVICE_DEFAULTS = {
    "state": "present",
    # None keeps the kernel's default compressor, which is always offered.
    "algorithm": None,
    "mem_limit": None,
    # Above any disk swap (those default to -2 and below), so zram fills first.
    "priority": 100,
    "fstype": "ext4",
    "mkfs_options": [],
    "mode": "0755",
    "owner": "root",
    "group": "root",
    "discard": True,
    "noatime": False,
    "nosuid": True,
    "nodev": True,
    "noexec": False,
    "options": [],
    "migrate": False,
    # Off; for a file system only.
    "persist": None,
}
# A file system's root: what an entry leaves unset, a directory that exists keeps (as a tmpfs over it does).
ROOT_KEYS = ("mode", "owner", "group")
USES = ("swap", "filesystem")
STATES = ("present", "absent")
# Kernel swap priorities: -1 lets the kernel choose, 0..32767 are set by hand (swapon(8)).
PRIORITY_RANGE = (-1, 32767)
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}\Z")
_ALGORITHM_RE = re.compile(r"^[a-z0-9-]+\Z")


def unit_name(name):
    """The boot-time unit that creates and sizes the device of entry NAME."""
    return "ramdisk-zram@%s.service" % name


def plan_zram(devices, facts, host="localhost", var_name="zram_devices", defaults=None):
    """Validate and plan zram devices. Returns {'devices': [...], 'errors': [...]}.

    DEFAULTS (zram_device_defaults, plus allow_algorithm_fallback) go over DEVICE_DEFAULTS, key by key; a key set
    to None there leaves the shipped default.
    """
    errors = []
    planned = []
    facts = facts or {}
    # The root's keys the user's defaults set; those neither they nor an entry set keep the directory's own.
    root_set = set(key for key in ROOT_KEYS if (defaults or {}).get(key) is not None)
    defaults = dict(DEVICE_DEFAULTS, **dict((key, value) for key, value in (defaults or {}).items()
                                            if value is not None or key not in DEVICE_DEFAULTS))
    mem_total = (facts.get("memory") or {}).get("total_bytes")
    support = facts.get("support") or {}
    # What zram takes here: a device's comp_algorithm, else the kernel's config or crypto API (ramdisk_facts).
    offered = list(support.get("zram_algorithms") or support.get("zram_algorithms_offered") or [])
    offered_from = support.get("zram_algorithms_from") or "comp_algorithm"

    if devices is None:
        devices = []
    if not isinstance(devices, (list, tuple)):
        errors.append("Host %s: %s is %r: not a list. Give a list of devices, e.g. [{name: swap, use: swap, "
                      "size: '50%%'}]." % (host, var_name, devices))
        return {"devices": [], "errors": errors}
    if not mem_total:
        errors.append("Host %s: ansible_facts['ramdisk'].memory.total_bytes is missing: sizes cannot be checked. "
                      "Run ramdisk.provision.ramdisk_facts before planning." % host)

    names = {}
    paths = {}
    for index, item in enumerate(devices):
        entry = Entry(host, var_name, index, errors, item.get("label") if isinstance(item, dict) else None)
        values = intake(entry, item, ENTRY_KEYS, defaults, "device, with at least name, use and size,")
        if values is None:
            continue

        name = values.get("name")
        if not isinstance(name, str) or not _NAME_RE.match(name):
            entry.error("name", name, "not a device name this role can use",
                        "Use 1 to 32 lower-case letters, digits, '-' or '_', starting with a letter or digit, "
                        "e.g. swap or build; it names the boot unit %s." % unit_name("<name>"))
            name = None
        elif name in names:
            entry.error("name", name, "the same device as %s.name" % names[name], "Give each device its own name.")
        else:
            names[name] = entry.where

        state = values.get("state", "present")
        if state not in STATES:
            entry.error("state", state, "not a known state", "Use present or absent.")
        use = values.get("use")
        if use not in USES:
            entry.error("use", use, "not a zram use", "Use swap or filesystem.")

        size_bytes = None
        size = values.get("size")
        if state == "present":
            size_bytes = _size(entry, "size", size, mem_total, required=True)
        mem_limit_bytes = _size(entry, "mem_limit", values.get("mem_limit"), mem_total, required=False)

        algorithm = values.get("algorithm")
        if algorithm is not None:
            if not isinstance(algorithm, str) or not _ALGORITHM_RE.match(algorithm):
                entry.error("algorithm", algorithm, "not an algorithm name", "Use a name such as lz4 or zstd.")
            elif offered and algorithm not in offered and not as_bool(
                    entry, "allow_algorithm_fallback", values.get("allow_algorithm_fallback", False)):
                entry.error("algorithm", algorithm, "not offered by this host's kernel, which offers %s (from %s)"
                            % (", ".join(offered), offered_from), "Choose one of those, or allow the fallback "
                            "(zram_allow_algorithm_fallback: true) to take the best one offered.")

        priority = values.get("priority")
        if use == "swap":
            if isinstance(priority, bool) or not isinstance(priority, int) or not (
                    PRIORITY_RANGE[0] <= priority <= PRIORITY_RANGE[1]):
                entry.error("priority", priority, "not a swap priority",
                            "Use a whole number from -1 to 32767; 100 puts zram above any disk swap.")

        mount = None
        if use == "swap" and values.get("persist") not in (None, False):
            entry.error("persist", values.get("persist"), "only for a file system",
                        "Remove persist from this swap device (swap holds nothing to keep), or set use: filesystem.")
        if use == "filesystem":
            mount = block_filesystem(entry, values, size_bytes, state, unit_name(name or "unnamed"))
            if mount is not None:
                mount["root_keep"] = [key for key in ROOT_KEYS if key not in root_set and item.get(key) is None]
                if mount["path"] in paths:
                    entry.error("path", values.get("path"), "the same mount point as %s.path" % paths[mount["path"]],
                                "Mount each device at its own path.")
                else:
                    paths[mount["path"]] = entry.where

        if not entry.ok:
            continue
        planned.append({
            "index": index,
            "label": entry.where,
            "name": name,
            "unit": unit_name(name),
            "use": use,
            "state": state,
            "size": size,
            "size_bytes": size_bytes,
            "algorithm": algorithm,
            "mem_limit_bytes": mem_limit_bytes,
            "priority": priority if use == "swap" else None,
            "fstype": mount["fstype"] if mount else None,
            "mkfs_options": mount["mkfs_options"] if mount else [],
            "mount": mount,
        })

    errors.extend(swap_area_errors(planned, facts, host, var_name))
    mounted = [device["mount"] for device in planned if device["mount"] and device["state"] == "present"]
    for inner in mounted:
        for outer in mounted:
            if outer["path"] != inner["path"] and is_under(inner["path"], outer["path"]):
                errors.append("Host %s: %s.path is '%s': it is inside %s.path '%s', and nested RAM mounts hide "
                              "each other depending on mount order. Choose paths that do not contain one another."
                              % (host, inner["label"], inner["path"], outer["label"], outer["path"]))
    check_backings([device["mount"] for device in planned if device["mount"]], facts, host, errors)
    for device in planned:
        if device["mount"] is not None:
            decide(device["mount"], facts, host, var_name, errors)
    return {"devices": planned, "errors": errors}


def swap_area_errors(planned, facts, host, var_name):
    """The swap areas the planned devices add must fit in what the kernel takes (support.swap_areas_max).

    Counted in list order, as the zram role works: /proc/swaps now, less a device of an entry going absent, plus
    each swap entry present whose device (by the zram role's records, facts' zram[].entry) is not swap yet.
    """
    support = facts.get("support") or {}
    limit = support.get("swap_areas_max")
    if not isinstance(limit, int) or isinstance(limit, bool):
        return []
    now = len((facts.get("swap") or {}).get("devices") or ())
    swapping = set(device.get("entry") for device in facts.get("zram") or ()
                   if device.get("entry") and device.get("used_as") == "swap")
    count = now
    over = None
    new = 0
    for device in planned:
        if device["use"] != "swap":
            continue
        if device["state"] == "absent":
            count -= 1 if device["name"] in swapping else 0
        elif device["name"] not in swapping:
            count += 1
            new += 1
            if count > limit and over is None:
                over = (device, count)
    errors = []
    if over is not None:
        device, area = over
        errors.append("Host %s: %s.use is 'swap': it would be swap area %d on this host, and this kernel takes at most "
                      "%d (MAX_SWAPFILES: %s); %d in /proc/swaps now, and %s asks for %d more. Ask for at most %d new "
                      "zram swap devices here (one device of their combined size swaps as well as several), or turn "
                      "other swap off first."
                      % (host, device["label"], area, limit,
                         support.get("swap_areas_basis") or "worked out on the host", now, var_name, new,
                         max(limit - now, 0)))
    return errors


def _size(entry, key, value, mem_total, required):
    if value is None:
        if required:
            entry.error(key, value, "required for a device that is present",
                        "Set %s, e.g. '50%%', '2G' or 'min(ram / 2, 8G)'." % key)
        return None
    if not mem_total:
        return None
    try:
        size_bytes = parse_size(value, ram_bytes=mem_total)
    except SizeError as exc:
        entry.error(key, value, str(exc), "Use bytes, a binary unit (512M, 2G), a percentage of RAM (50%) or an "
                    "expression such as min(ram / 2, 8G).")
        return None
    if size_bytes > mem_total:
        entry.error(key, value, "%s, above this host's RAM of %s" % (format_size(size_bytes), format_size(mem_total)),
                    "Use at most %s; zram compresses, but what it stores still comes out of RAM." % format_size(mem_total))
        return None
    return size_bytes
