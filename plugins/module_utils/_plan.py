# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Validation and planning for tmpfs and ramfs mounts.

plan_tmpfs() and plan_ramfs() turn the user's list (e.g. tmpfs_mounts) and the ramdisk_facts of a host into
normalized entries with an action each, plus error sentences that name the host, the variable,
the bad value and the fix. It never touches the host.

The checks an entry shares with the other planners (path, mode, owner, options, persist), the rules between
entries' backings and the decision of each mount's action are _plan_core's; here are the keys, sizes, inodes,
huge pages and NUMA policy of tmpfs and ramfs. Two mounted entries may not nest (the mount order would decide
which one is seen).
"""

from __future__ import annotations

import re

from ansible_collections.ramdisk.provision.plugins.module_utils._plan_core import (
    FLAG_KEYS,
    Entry,
    as_bool,
    check_backings,
    check_extra_options,
    check_path,
    check_persist,
    check_root,
    decide,
    intake,
    is_under,
    mount_token,
    show,
)
from ansible_collections.ramdisk.provision.plugins.module_utils._size import (
    SizeError,
    format_size,
    parse_count,
    plain_percent,
    tmpfs_size_bytes,
    tmpfs_size_option,
)
from ansible_collections.ramdisk.provision.plugins.module_utils import _tmpfs_options

HUGE_CHOICES = ("never", "always", "within_size", "advise")
STATES = ("mounted", "absent")
ENTRY_KEYS = (
    "path", "size", "nr_inodes", "mode", "owner", "group", "huge", "mpol", "noswap", "noatime",
    "nosuid", "nodev", "noexec", "options", "state", "migrate", "persist", "label",
) + _tmpfs_options.NAMES
# ramfs has no size limit, inode limit, huge pages, NUMA policy or noswap: max_size is what it is
# allowed to hold, counted against RAM by the planner, never given to the kernel.
RAMFS_ENTRY_KEYS = (
    "path", "max_size", "mode", "owner", "group", "noatime", "nosuid", "nodev", "noexec", "options", "state",
    "migrate", "persist", "label",
)
# Options a live tmpfs remount changes; the rest need an unmount.
REMOUNTABLE = ("size", "nr_inodes", "huge", "mpol")

_NODELIST = r"\d+(?:-\d+)?(?::\d+/\d+)?(?:,\d+(?:-\d+)?(?::\d+/\d+)?)*"
_MPOL_RE = re.compile(
    r"^(?:default|local|prefer(?::\d+)?|bind:%s|interleave(?::%s)?|weighted-interleave(?::%s)?|"
    r"preferred-many:%s)(?:=(?:static|relative))?$" % (_NODELIST, _NODELIST, _NODELIST, _NODELIST)
)
# tmpfs takes nr_inodes as an unsigned long and wraps larger ones (2**64 becomes 0: unlimited); each inode
# takes about 1 KiB of RAM, so 2**32 is beyond any host.
NR_INODES_MAX = 2 ** 32


def plan_tmpfs(mounts, facts, host="localhost", var_name="tmpfs_mounts", defaults=None):
    """Validate and plan tmpfs mounts; see the module docstring. Returns {'mounts', 'errors'}."""
    return _plan(mounts, facts, host, var_name, defaults, "tmpfs")


def plan_ramfs(mounts, facts, host="localhost", var_name="ramfs_mounts", defaults=None):
    """Validate and plan ramfs mounts: like tmpfs, with a declared max_size instead of a kernel limit."""
    return _plan(mounts, facts, host, var_name, defaults, "ramfs")


def _plan(mounts, facts, host, var_name, defaults, backend):
    ramfs = backend == "ramfs"
    entry_keys = RAMFS_ENTRY_KEYS if ramfs else ENTRY_KEYS
    size_key = "max_size" if ramfs else "size"
    errors = []
    planned = []
    facts = facts or {}
    defaults = dict(defaults or {})
    memory = facts.get("memory") or {}
    mem_total = memory.get("total_bytes")
    support = facts.get("support") or {}

    if mounts is None:
        mounts = []
    if not isinstance(mounts, (list, tuple)):
        errors.append("Host %s: %s is %s: not a list. Give a list of mounts, e.g. [{path: /tmp, size: '50%%'}]."
                      % (host, var_name, show(mounts)))
        return {"mounts": [], "errors": errors}
    if not mem_total:
        errors.append("Host %s: ansible_facts['ramdisk'].memory.total_bytes is missing: sizes cannot be checked. "
                      "Run ramdisk.provision.ramdisk_facts before planning." % host)

    seen_paths = {}
    for index, item in enumerate(mounts):
        entry = Entry(host, var_name, index, errors, item.get("label") if isinstance(item, dict) else None)
        values = intake(entry, item, entry_keys, defaults, "mount, with at least path and size,")
        if values is None:
            continue

        raw_path = item.get("path")
        path = check_path(entry, raw_path)
        state = values.get("state", "mounted")
        if state not in STATES:
            entry.error("state", state, "not a known state", "Use mounted or absent.")
        migrate = as_bool(entry, "migrate", values.get("migrate", False))
        persist = check_persist(entry, values.get("persist"), path)
        if persist is not None:
            # The data already there is adopted: copied in now, then kept in the backing.
            migrate = True
        flags = {}
        for flag in FLAG_KEYS:
            flags[flag] = as_bool(entry, flag, values.get(flag, False))

        size = values.get(size_key)
        size_bytes = size_option = None
        if size is None:
            if state == "mounted":
                entry.error(size_key, size, "required for a mounted %s" % backend,
                            "Set %s, e.g. '50%%', '2G' or 'min(ram / 2, 8G)'." % size_key
                            + (" ramfs itself has no limit: this is what the mount may hold, counted against "
                               "RAM." if ramfs else ""))
        elif mem_total:
            try:
                size_option = None if ramfs else tmpfs_size_option(size, mem_total)
                size_bytes = tmpfs_size_bytes(size, mem_total)
                if size_option and size_option.endswith("%") and memory.get("capped_by_cgroup"):
                    # The kernel reads N% of the machine's RAM, not of the cgroup's limit that is this
                    # host's RAM here: it gets the bytes instead, so the live size is the planned one.
                    size_option = str(size_bytes)
            except SizeError as exc:
                entry.error(size_key, size, str(exc),
                            "Use bytes, a binary unit (512M, 2G), a percentage of RAM (50%) or an "
                            "expression such as min(ram / 2, 8G).")
            else:
                if size_bytes > mem_total:
                    entry.error(size_key, size, "%s, above this host's RAM of %s" % (
                        format_size(size_bytes), format_size(mem_total)),
                        "Use at most %s, e.g. '50%%' or 'min(ram / 2, 8G)'." % format_size(mem_total))

        nr_inodes = None if ramfs else values.get("nr_inodes")
        if nr_inodes is not None:
            try:
                nr_inodes = parse_count(nr_inodes)
                if nr_inodes > NR_INODES_MAX:
                    raise SizeError("above %d, more inodes than any host's RAM could hold (each takes about "
                                    "1 KiB); the kernel would wrap a larger number, even to unlimited" % NR_INODES_MAX)
            except SizeError as exc:
                entry.error("nr_inodes", values.get("nr_inodes"), str(exc),
                            "Use a positive whole number, optionally with k, m or g (e.g. 1m).")
                nr_inodes = None

        mode, owner, group = check_root(entry, values)
        huge = None if ramfs else values.get("huge")
        if huge is not None and huge not in HUGE_CHOICES:
            entry.error("huge", huge, "not a tmpfs huge page policy", "Use one of %s." % ", ".join(HUGE_CHOICES))
            huge = None
        mpol = None if ramfs else values.get("mpol")
        if mpol is not None and (not isinstance(mpol, str) or not _MPOL_RE.match(mpol)):
            entry.error("mpol", mpol, "not a NUMA memory policy",
                        "Use default, local, prefer:<node>, bind:<nodelist> or interleave[:<nodelist>].")
            mpol = None
        if flags.get("noswap") and not support.get("tmpfs_noswap", False):
            entry.error("noswap", True, "not supported by this host's kernel %s (noswap needs Linux 6.4 or later)"
                        % support.get("kernel", "(unknown)"), "Set noswap: false or upgrade the kernel.")
        extras = check_extra_options(entry, values.get("options"), flags)
        tmpfs_options = {} if ramfs else _tmpfs_options.check_options(entry, values, support, size_bytes)

        if path is not None:
            if path in seen_paths:
                entry.error("path", raw_path, "the same mount point as %s.path" % seen_paths[path],
                            "List each mount point once.")
            else:
                seen_paths[path] = entry.where
        if not entry.ok:
            continue

        options = []
        if size_option is not None:
            options.append("size=%s" % size_option)
        if nr_inodes is not None:
            options.append("nr_inodes=%d" % nr_inodes)
        if mode is not None:
            options.append("mode=%s" % mode)
        if huge is not None:
            options.append("huge=%s" % huge)
        if mpol is not None:
            options.append("mpol=%s" % mpol)
        options.extend(_tmpfs_options.mount_options(tmpfs_options))
        for flag in FLAG_KEYS:
            if flags[flag]:
                options.append(flag)
        options.extend(extras)

        planned.append({
            "index": index,
            "label": entry.where,
            "backend": backend,
            "path": path,
            "path_given": raw_path,
            "state": state,
            "fstype": backend,
            "src": backend,
            "size": size,
            "size_option": size_option,
            # ramfs: what the mount may hold (max_size), counted against RAM; the kernel never sees it.
            "size_bytes": None if ramfs else size_bytes,
            "ram_bytes": size_bytes,
            "nr_inodes": nr_inodes,
            "mode": mode,
            "owner": owner,
            "group": group,
            "huge": huge,
            "mpol": mpol,
            "tmpfs_options": tmpfs_options,
            "noswap": flags["noswap"],
            "migrate": migrate,
            "persist": persist,
            "token": mount_token(path),
            "options": options,
            "remount_options": [],
            "current": None,
            "action": None,
            "changes": [],
            "warnings": [],
            "noswap_change": False,
            "reboot_required": False,
        })

    mounted = [entry for entry in planned if entry["state"] == "mounted"]
    nested_bad = set()
    for inner in mounted:
        for outer in mounted:
            if outer["path"] != inner["path"] and is_under(inner["path"], outer["path"]):
                errors.append(
                    "Host %s: %s.path is '%s': it is inside %s.path '%s', and nested RAM mounts hide each "
                    "other depending on mount order. Choose paths that do not contain one another."
                    % (host, inner["label"], inner["path"], outer["label"], outer["path"]))
                nested_bad.add(inner["index"])
    planned = [entry for entry in planned if entry["index"] not in nested_bad]
    check_backings(planned, facts, host, errors)

    for entry in planned:
        decide(entry, facts, host, var_name, errors)
    return {"mounts": planned, "errors": errors}


def size_is_percent(size):
    """True when a size is a plain percentage the kernel resolves at mount time."""
    return plain_percent(size) is not None
