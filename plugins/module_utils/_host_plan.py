# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""One decision per host, made on the host from what is really there, before anything changes.

plan_host() takes the whole request (the policy variables, purposes, defaults, budget and zram_devices),
the host's facts (gathered once) and a HostView that answers questions only the host can (links in a
path, live mounts, accounts, records of earlier runs, what the kernel and mkfs accept), and returns every
error, every warning, the budget and each backend's plan. The ramdisk role then only carries the plans out.
Everything that reads the host goes through the HostView, so the rules here are tested without one.
"""

from __future__ import annotations

import difflib
import shlex
import stat

from ansible_collections.ramdisk.provision.plugins.module_utils import _fstab
from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths
from ansible_collections.ramdisk.provision.plugins.module_utils import _mount_steps
from ansible_collections.ramdisk.provision.plugins.module_utils._brd_plan import plan_brd
from ansible_collections.ramdisk.provision.plugins.module_utils._persist import review_persist
from ansible_collections.ramdisk.provision.plugins.module_utils._plan import plan_ramfs, plan_tmpfs
from ansible_collections.ramdisk.provision.plugins.module_utils._plan_core import (
    ID_MAX,
    is_under,
    normalize_path,
    path_text_problem,
    refused_directory,
    show,
)
from ansible_collections.ramdisk.provision.plugins.module_utils._policy import (
    ALL_KEYS,
    PURPOSES,
    SYSTEM_MOUNT_TREES,
    plan_policy,
)
from ansible_collections.ramdisk.provision.plugins.module_utils._procfs import is_ram_backed, ram_block_kind
from ansible_collections.ramdisk.provision.plugins.module_utils._zram_plan import plan_zram

# The entry role's public variables (roles/ramdisk/defaults/main.yml; a unit test keeps them in step).
ROLE_VARIABLES = (
    "ramdisk_mounts", "ramdisk_merge_policies", "ramdisk_state", "ramdisk_ram_budget", "ramdisk_zram_assumed_ratio",
    "ramdisk_zram_swap_devices", "ramdisk_mount_defaults", "ramdisk_build_owner", "ramdisk_build_group",
    "ramdisk_database_owner", "ramdisk_database_group", "ramdisk_tmp_gate", "ramdisk_tmp_gate_action", "ramdisk_purposes",
    "ramdisk_scan_timeout", "ramdisk_metrics", "ramdisk_metrics_dir", "ramdisk_metrics_interval", "ramdisk_recover",
)
POLICY_PREFIX = "ramdisk_mounts__"
# Keys a purpose or ramdisk_mount_defaults may set: those of an entry, less the path.
SETTABLE_KEYS = tuple(key for key in ALL_KEYS if key != "path")
SCAN_TIMEOUT_MAX = 3600
# Where ramdisk_apply records each mount it made.
RECORD_DIR = _host_paths.RECORD_DIR


def lookalike_warnings(names, host):
    """Warnings for variables that look like the entry role's and are not, so they would be ignored."""
    warnings = []
    known = set(ROLE_VARIABLES)
    for name in sorted(set(names or ())):
        if not isinstance(name, str) or name in known or (name.startswith(POLICY_PREFIX) and len(name) > len(POLICY_PREFIX)):
            continue
        lowered = name.lower()
        if lowered.startswith(("ramdisk_mount_", "ramdisk_mounts_", "ramdiskmounts")) or (
                lowered.startswith("ramdisk_mounts") and lowered != name):
            like = POLICY_PREFIX + "<group>"
        else:
            close = difflib.get_close_matches(lowered, sorted(known) + [POLICY_PREFIX], n=1, cutoff=0.85)
            if not close:
                continue
            like = close[0] if close[0] != POLICY_PREFIX else POLICY_PREFIX + "<group>"
        warnings.append("Host %s: the variable %s looks like %s but is not one, so the ramdisk role ignores it. "
                        "Rename it (a group policy is named %s<group>), or remove it." % (host, name, like,
                                                                                          POLICY_PREFIX))
    return warnings


def setting_errors(host, purposes_given, defaults, scan_timeout):
    """Errors in the role's own settings that the policy planner does not see."""
    errors = []
    if isinstance(scan_timeout, bool) or not isinstance(scan_timeout, (int, float)) or not (
            0 <= scan_timeout <= SCAN_TIMEOUT_MAX):
        errors.append("Host %s: ramdisk_scan_timeout is %s: not a number of seconds from 0 to %d. Use e.g. 10; it "
                      "bounds how long each path's usage is measured." % (host, show(scan_timeout), SCAN_TIMEOUT_MAX))
    if purposes_given is not None and not isinstance(purposes_given, dict):
        errors.append("Host %s: ramdisk_purposes is %s: not a mapping. Give changes per purpose, e.g. "
                      "{cache: {noatime: true}}." % (host, show(purposes_given)))
    for purpose, values in sorted((purposes_given or {}).items() if isinstance(purposes_given, dict) else ()):
        if purpose not in PURPOSES:
            close = difflib.get_close_matches(str(purpose), PURPOSES, n=1)
            errors.append("Host %s: ramdisk_purposes.%s is %s: not a known purpose%s. Purposes are %s."
                          % (host, purpose, show(values), " (did you mean %s?)" % close[0] if close else "",
                             ", ".join(PURPOSES)))
            continue
        if not isinstance(values, dict):
            errors.append("Host %s: ramdisk_purposes.%s is %s: not a mapping. Give the keys to change, e.g. "
                          "{noatime: true}." % (host, purpose, show(values)))
            continue
        errors.extend(_unknown_keys(host, "ramdisk_purposes.%s" % purpose, values))
    if not isinstance(defaults, dict):
        errors.append("Host %s: ramdisk_mount_defaults is %s: not a mapping. Leave it unset, or give keys of a "
                      "mount entry." % (host, show(defaults)))
    else:
        errors.extend(_unknown_keys(host, "ramdisk_mount_defaults", defaults))
    return errors


def _unknown_keys(host, where, values):
    errors = []
    for key in sorted(values, key=str):
        if key not in SETTABLE_KEYS:
            close = difflib.get_close_matches(str(key), SETTABLE_KEYS, n=1)
            errors.append("Host %s: %s.%s is %s: an unknown key%s, which would be ignored. Valid keys are %s."
                          % (host, where, key, show(values[key]), " (did you mean %s?)" % close[0] if close else "",
                             ", ".join(SETTABLE_KEYS)))
    return errors


def _label(name, index, item):
    """What messages call an entry: its label where it has one (tmpfs_tmp), else variable[index]."""
    label = item.get("label") if isinstance(item, dict) else None
    return label if isinstance(label, str) and label else "%s[%d]" % (name, index)


def _raw_entries(sources, swap_devices):
    """(label, entry) for every mapping with a path in the request, before any planning."""
    out = []
    for name, value in sources:
        if isinstance(value, (list, tuple)):
            for index, item in enumerate(value):
                if isinstance(item, dict):
                    out.append((_label(name, index, item), item))
    if isinstance(swap_devices, (list, tuple)):
        for index, item in enumerate(swap_devices):
            if isinstance(item, dict):
                out.append((_label("zram_devices", index, item), item))
    return out


def path_errors(host, sources, swap_devices, view):
    """Paths no planner may take: control characters, names Linux refuses, a parent that is not a directory (a
    file, or a link to one), and links anywhere in the path.

    A path is never mounted through a link: the mount would land on the link's target (a link to /etc
    puts the RAM mount over /etc). Returns (errors, labels of the refused entries).
    """
    errors = []
    refused = set()
    for label, item in _raw_entries(sources, swap_devices):
        for key in ("path", "persist.backing"):
            raw = item.get("path") if key == "path" else (
                item.get("persist").get("backing") if isinstance(item.get("persist"), dict) else None)
            if not isinstance(raw, str) or not raw.startswith("/"):
                continue
            problem = path_text_problem(raw)
            if problem is not None:
                errors.append("Host %s: %s.%s is %s: %s. %s" % (host, label, key, show(raw), problem[0], problem[1]))
                refused.add(label)
                continue
            path = normalize_path(raw)
            if path is None or (key == "path" and refused_directory(path) is not None):
                continue  # the planner says what is wrong with it (a system directory: /lib may be a link to /usr/lib)
            blocker = view.not_a_directory(path)
            if blocker is not None:
                errors.append("Host %s: %s.%s is %s: '%s' on this host is %s, not a directory, so nothing can be made "
                              "or mounted under it. Choose a path whose parents are all directories, or move '%s' "
                              "away." % (host, label, key, show(raw), blocker[0], blocker[1], blocker[0]))
                refused.add(label)
                continue
            link = view.first_link(path)
            if link is not None:
                errors.append("Host %s: %s.%s is %s: a symlink on this host (%s leads to '%s'), and a mount or copy "
                              "through a link lands on its target. Use the real path '%s', or remove the link."
                              % (host, label, key, show(raw), link[0], link[1], view.realpath(path)))
                refused.add(label)
    return errors, refused


def file_kind(mode):
    """What a file of MODE (st_mode) is, in words."""
    for test, words in ((stat.S_ISREG, "a regular file"), (stat.S_ISLNK, "a symlink"), (stat.S_ISFIFO, "a FIFO"),
                        (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                        (stat.S_ISBLK, "a block device")):
        if test(mode):
            return words
    return "not a directory"


def root_overrides(sources, facts, records, view):
    """Mode, owner and group that a mount's root keeps from the directory it goes over.

    Only for keys the entry itself leaves unset, and over the general defaults only (a purpose's own mode and
    owner win): a directory that exists keeps its own, as a service that owns its data directory must keep it
    once the data is in RAM. A live mount keeps what its record says was kept
    when it was made; a directory the role made itself takes the purpose's.
    """
    out = {}
    paths = facts.get("paths") or {}
    for _label, item in _raw_entries(sources, ()):
        raw = item.get("path")
        if not isinstance(raw, str) or not raw.startswith("/"):
            continue
        path = normalize_path(raw)
        if path is None:
            continue
        record = records.get(path) or {}
        if path_is_live(facts, path):
            kept = record.get("root_kept") or {}
        elif record.get("created_dir"):
            kept = {}
        else:
            found = paths.get(path) or paths.get(raw) or {}
            if not found.get("exists") or not found.get("is_dir"):
                continue
            kept = {"mode": found.get("mode"), "owner": view.user_name(found.get("uid")),
                    "group": view.group_name(found.get("gid"))}
        kept = dict((key, value) for key, value in kept.items() if value is not None and key not in item)
        if kept:
            out[path] = kept
    return out


def path_is_live(facts, path):
    return any(mount.get("path") == path for mount in facts.get("all_mounts") or facts.get("mounts") or ())


def mount_errors(host, mounts, facts, records, policy_paths, vendor_tmp=False):
    """What live mounts say about each planned mount: never hide one, never nest in RAM, remove only our own.

    MOUNTS: planned mount entries (label, path, state, action, fstype). ALL_MOUNTS in FACTS: every mount of
    the host (path, fstype, source), not only RAM ones. RECORDS: path -> what the mount role recorded.
    VENDOR_TMP: the distribution mounts /tmp itself (its tmp.mount), so removing /tmp only drops our drop-in.
    """
    errors = []
    every = facts.get("all_mounts") or []
    for entry in mounts:
        path, label = entry["path"], entry["label"]
        if entry["state"] == "mounted" and entry.get("action") in ("mount", "migrate"):
            under = [mount for mount in every if is_under(mount["path"], path) and mount["path"] != path]
            if under:
                errors.append("Host %s: %s.path is '%s': live mounts are under it (%s), and a new mount over '%s' "
                              "would hide them and their data. Unmount them first, or choose another path."
                              % (host, label, path, ", ".join("%s (%s)" % (mount["path"], mount["fstype"])
                                                              for mount in under[:5]), path))
                continue
            holder = _holder(every, path)
            if holder is not None and holder["path"] not in policy_paths and is_ram_backed(
                    holder["fstype"], holder["source"]) and not any(
                    holder["path"] == tree or is_under(holder["path"], tree) for tree in SYSTEM_MOUNT_TREES):
                errors.append("Host %s: %s.path is '%s': it is inside the %s mounted at '%s', which is already in "
                              "RAM, so a RAM mount there only splits the same memory and hides what '%s' holds now. "
                              "Use '%s' itself, or a path on disk." % (
                                  host, label, path, ram_block_kind(holder["source"]) or holder["fstype"],
                                  holder["path"], path, holder["path"]))
        if entry["state"] == "absent" and entry.get("action") == "unmount" and path not in records and not (
                vendor_tmp and path == "/tmp" and entry.get("fstype") == "tmpfs"):
            errors.append("Host %s: %s.state is 'absent': the %s at '%s' was not made by this collection (no record "
                          "of it in %s), so removing it could drop data that is not ours. Unmount it yourself; if an "
                          "earlier release of this collection made it, apply the entry with state: mounted once, "
                          "which records it, then remove it." % (host, label, entry.get("fstype"), path, RECORD_DIR))
    return errors


def unaccounted_errors(host, mounts, records, view, vendor_tmp=False):
    """A live tmpfs or ramfs at a path to mount is taken over only when something accounts for it: a record of
    this collection, an /etc/fstab line of that type, a mount unit, the distribution's tmp.mount for /tmp, or an
    open transaction of the journal. Anything else (a mount a killed run left, say) may hide the directory's disk
    contents, and adopting it would make that permanent."""
    errors = []
    fstab = view.read(_host_paths.FSTAB) or ""
    journal = set(view.journal_paths())
    for entry in mounts:
        live = entry.get("current")
        path = entry["path"]
        taken_over = entry.get("action") in ("ok", "remount") or entry.get("refill")
        if entry["state"] != "mounted" or not taken_over or not live or live.get("fstype") not in ("tmpfs", "ramfs"):
            continue
        if path in records or path in journal or (vendor_tmp and path == "/tmp" and live["fstype"] == "tmpfs"):
            continue
        if any(line["entry"]["fstype"] == live["fstype"] for line in _fstab.lines_for(fstab, path)):
            continue
        unit = _mount_steps.mount_unit(path)
        if any(view.exists("%s/%s" % (directory, unit)) for directory in _host_paths.MOUNT_UNIT_DIRS):
            continue
        errors.append("Host %s: %s.path is '%s': a %s is mounted there that nothing accounts for, so this collection "
                      "will not take it over. It has no record in %s, no %s line, no unit %s and no open "
                      "journal entry: a run that was killed may have left it, and it hides what the directory holds "
                      "on disk. Look at it with findmnt %s and at its files; if it is yours, add its %s line "
                      "and run again; if not, copy out what you need from it, unmount it (umount %s) and run again."
                      % (host, entry["label"], path, live["fstype"], RECORD_DIR, _host_paths.FSTAB, unit,
                         shlex.quote(path), _host_paths.FSTAB, shlex.quote(path)))
    return errors


def busy_errors(host, mounts, view, vendor_tmp=False):
    """A mount to remove (or, empty, to replace by a filled one) that processes still use cannot be unmounted: say so
    before anything changes.

    With persist, the services it names are stopped first, so they are not counted here (others still are,
    by the umount itself). /tmp under the distribution's tmp.mount is not unmounted by this collection.
    """
    errors = []
    for entry in mounts:
        refill = entry.get("refill") and entry.get("action") == "migrate"
        if refill and entry.get("persist"):
            continue  # the services persist names are stopped first, as for a removal; others fail its umount
        if not refill and (entry["state"] != "absent" or entry.get("action") != "unmount" or entry.get("persist") or (
                vendor_tmp and entry["path"] == "/tmp" and entry.get("fstype") == "tmpfs")):
            continue
        users = view.users_of(entry["path"])
        if not users:
            continue
        named = ", ".join("pid %d (%s)" % user for user in users[:5]) + (
            " and %d more" % (len(users) - 5) if len(users) > 5 else "")
        fix = "Stop %s first (fuser -vm %s lists them), then run again." % (
            "it" if len(users) == 1 else "them", entry["path"])
        if refill:
            errors.append("Host %s: %s.path is '%s': the %s mounted there is empty over what the directory holds on "
                          "disk and is to be replaced by one filled from it, but it is in use by %s. %s"
                          % (host, entry["label"], entry["path"], entry.get("fstype"), named, fix))
        else:
            errors.append("Host %s: %s.state is 'absent', but '%s' is in use by %s, so it cannot be unmounted. %s"
                          % (host, entry["label"], entry["path"], named, fix))
    return errors


def _holder(mounts, path):
    best = None
    for mount in mounts:
        if mount["path"] == path or is_under(path, mount["path"]):
            if best is None or len(mount["path"]) >= len(best["path"]):
                best = mount
    return best


def account_errors(host, mounts, view, kept):
    """Owners and groups must exist (names and numbers alike), within uid_t; uid=/gid= options for tmpfs.

    KEPT: path -> keys taken from the directory on disk, whose numeric owner may have no account.
    Returns (errors, ids: path -> ['uid=N', 'gid=N']).
    """
    errors = []
    ids = {}
    for entry in mounts:
        if entry["state"] != "mounted":
            continue
        options = []
        for key, lookup, option in (("owner", view.user, "uid"), ("group", view.group, "gid")):
            value = entry.get(key)
            if value is None:
                continue
            number = lookup(value)
            from_disk = key in (kept.get(entry["path"]) or {})
            if number is None and isinstance(value, int) and from_disk and 0 <= value <= ID_MAX:
                number = value
            if number is None:
                errors.append("Host %s: %s.%s is %s: no such %s on this host. Create it first, or choose another %s."
                              % (host, entry["label"], key, show(value), "user" if key == "owner" else "group", key))
                continue
            if number != 0:
                options.append("%s=%d" % (option, number))
        ids[entry["path"]] = options
    return errors, ids


def backing_facts(lists, view):
    """{backing: {'current': bool}} for each backing the tmpfs and ramfs entries of LISTS name: whether it holds a
    copy of the mount yet, read through VIEW, for the plan (its refill of a persisted mount a boot left empty)."""
    out = {}
    for items in lists:
        for item in items if isinstance(items, (list, tuple)) else ():
            persist = item.get("persist") if isinstance(item, dict) else None
            raw = persist.get("backing") if isinstance(persist, dict) else None
            backing = normalize_path(raw) if isinstance(raw, str) and raw.startswith("/") else None
            if backing is not None and backing not in out:
                out[backing] = {"current": view.backing_has_copy(backing)}
    return out


def persist_states(mounts, view):
    """What persist_review decides from, read through the view for every planned mount with a token."""
    states = {}
    for entry in mounts:
        token = entry.get("token")
        if token is None:
            continue
        persist = entry.get("persist")
        states[token] = view.persist_state(token, persist.get("backing") if persist else None,
                                           entry["path"] if entry["state"] == "mounted"
                                           and entry.get("action") in ("ok", "remount") and persist else None)
    return states


def trial_errors(host, mounts, view, ids):
    """Each new or changed tmpfs and ramfs, mounted with its exact options where nobody sees it, and taken away.

    Only the kernel knows some refusals (mpol nodes, huge pages, noswap, quota): a refusal is tried again one
    option at a time to name the one at fault.
    """
    errors = []
    warnings = []
    for entry in mounts:
        if entry["state"] != "mounted" or entry.get("action") not in ("mount", "migrate", "remount"):
            continue
        options = list(entry["options"]) + list(ids.get(entry["path"]) or [])
        outcome = view.trial_mount(entry["fstype"], options)
        if outcome is None:
            continue
        if outcome.get("unavailable"):
            warnings.append("Host %s: %s: the options could not be tried before the change (%s); the kernel checks "
                            "them when the mount is made." % (host, entry["label"], outcome["unavailable"]))
            continue
        culprits = [option for option in options if view.trial_mount(entry["fstype"], [option]) is not None]
        if culprits:
            for option in culprits:
                key, _sep, value = option.partition("=")
                name = {"uid": "owner", "gid": "group", "nr_blocks": "size"}.get(key, key)
                errors.append("Host %s: %s.%s is %s: the kernel refused the mount option '%s' in a trial mount (%s). "
                              "Fix or remove that setting." % (host, entry["label"], name,
                                                               show(entry.get(name, value or True)), option,
                                                               outcome.get("message", "refused")))
        else:
            errors.append("Host %s: %s.path is '%s': the kernel refused a trial %s mount with the options %s (%s). "
                          "Fix the entry's options." % (host, entry["label"], entry["path"], entry["fstype"],
                                                        ",".join(options), outcome.get("message", "refused")))
    return errors, warnings


def mkfs_errors(host, devices, view):
    """A file system of each RAM block device must be makeable: mkfs there, the size enough, the options taken.

    DEVICES: (label, fstype, size as given, size_bytes, mkfs_options). mkfs runs in its dry-run mode on a sparse
    file.
    """
    errors = []
    for label, fstype, size, size_bytes, options in devices:
        if not view.has_mkfs(fstype):
            errors.append("Host %s: %s.fstype is '%s': mkfs.%s is not installed on this host. Install it (Debian: %s), "
                          "or use ext4." % (host, label, fstype, fstype,
                                            "xfsprogs" if fstype == "xfs" else "e2fsprogs"))
            continue
        if not size_bytes:
            continue
        message = view.mkfs_dry_run(fstype, size_bytes, [])
        if message is not None:
            errors.append("Host %s: %s.size is %s: mkfs.%s refused a device of %d bytes (%s). Give the device more "
                          "room, e.g. 64M." % (host, label, show(size), fstype, size_bytes, message))
            continue
        if options:
            message = view.mkfs_dry_run(fstype, size_bytes, list(options))
            if message is not None:
                errors.append("Host %s: %s.mkfs_options is %s: mkfs.%s refused them (%s). Fix or remove them."
                              % (host, label, show(list(options)), fstype, message))
    return errors


def _policy_sources(sources):
    out = []
    for source in sources or ():
        if isinstance(source, dict):
            out.append((source.get("name"), source.get("value")))
        else:
            out.append(tuple(source))
    return out


def merge_zram_sources(sources, host):
    """zram_devices and every zram_devices__<group> (SOURCES: [{name, value}] in the order the roles give them) as
    one list, each device labelled NAME[index]: a host in several groups gets every group's devices, as
    ramdisk_mounts__<group> merges mounts. A device named twice the same way counts once; twice differently is an
    error naming both. Returns (devices, errors)."""
    devices, errors, by_name = [], [], {}
    for name, value in _policy_sources(sources):
        if value is None:
            continue
        if not isinstance(value, (list, tuple)):
            errors.append("Host %s: %s is %s: not a list. Give a list of zram devices, e.g. [{name: swap, use: swap, "
                          "size: 25%%}]." % (host, name, show(value)))
            continue
        for index, item in enumerate(value):
            where = "%s[%d]" % (name, index)
            key = item.get("name") if isinstance(item, dict) else None
            if isinstance(key, str) and key in by_name:
                first_where, first = by_name[key]
                if first == item:
                    continue
                differ = sorted(k for k in set(first) | set(item) if first.get(k) != item.get(k))
                errors.append("Host %s: %s and %s both set zram device '%s', differently (%s). Set each device in one "
                              "variable only, or give it the same settings in both."
                              % (host, first_where, where, key, ", ".join("%s: %s against %s" % (
                                  k, show(item.get(k)), show(first.get(k))) for k in differ)))
                continue
            if isinstance(key, str):
                by_name[key] = (where, item)
            devices.append(dict(item, label=where) if isinstance(item, dict) and not item.get("label") else item)
    return devices, errors


def plan_host(request, facts, view, host="localhost"):
    """The whole decision for one host. REQUEST keys: sources, purposes, purpose_overrides, defaults, state,
    budget, zram_ratio, swap_devices, swap_defaults, swap_allow_fallback, scan_timeout, variables,
    zram_persistence. Returns errors, warnings, policy (entries, budget, gates) and the backend plans."""
    if request.get("backend_requests") is not None:
        result = _plan_backends(request, facts, view, host)
        result["errors"][:0] = list(request.get("source_errors") or [])
        return result
    errors = list(request.get("source_errors") or [])
    warnings = list(lookalike_warnings(request.get("variables"), host))
    sources = _policy_sources(request.get("sources"))
    state = request.get("state", "present")
    swap_devices = request.get("swap_devices") if state == "present" else []
    defaults = request.get("defaults")
    errors.extend(setting_errors(host, request.get("purpose_overrides"), defaults, request.get("scan_timeout", 10)))
    refused_paths, refused = path_errors(host, sources, swap_devices, view)
    errors.extend(refused_paths)
    records = view.records()

    # A refused path goes no further: every later check would only say the same thing again.
    clean = _without(sources, refused)
    kept = root_overrides(clean, facts, records, view)
    purposes = dict(request.get("purposes") or {})
    for purpose, values in (request.get("purpose_overrides") or {}).items() if isinstance(
            request.get("purpose_overrides"), dict) else ():
        if purpose in purposes and isinstance(values, dict):
            purposes[purpose] = dict(purposes[purpose] or {}, **values)
    swap_known = dict((name, record.get("device")) for name, record in view.zram_records().items())
    policy = plan_policy(clean, facts, host=host, purposes=purposes,
                         defaults=defaults if isinstance(defaults, dict) else {}, state=state,
                         budget=request.get("budget", "80%"), zram_ratio=request.get("zram_ratio", 2.0),
                         swap_devices=swap_devices or [], swap_known=swap_known,
                         swap_defaults=request.get("swap_defaults") or {}, roots=kept,
                         gate_action=request.get("tmp_gate_action", "fail"))
    errors.extend(policy["errors"])
    warnings.extend(policy["warnings"])
    backends = policy["backends"]

    facts = dict(facts, backings=backing_facts((backends["tmpfs_mounts"], backends["ramfs_mounts"]), view))
    tmpfs = plan_tmpfs(backends["tmpfs_mounts"], facts, host=host, var_name="tmpfs_mounts")
    ramfs = plan_ramfs(backends["ramfs_mounts"], facts, host=host, var_name="ramfs_mounts")
    for plan in (tmpfs, ramfs):
        errors.extend(error for error in plan["errors"] if error not in errors)
    zram_defaults = {"allow_algorithm_fallback": bool(request.get("swap_allow_fallback"))}
    # The zram role's zram_device_defaults fill what a policy entry leaves unset, as they do for zram_devices.
    zram = plan_zram(backends["zram_devices"], facts, host=host, var_name="zram_devices",
                     defaults=dict(request.get("swap_defaults") or {}, **zram_defaults))
    swap = plan_zram([item for label, item in _raw_entries((), swap_devices)
                      if "%s" % label not in refused] if swap_devices else [], facts, host=host,
                     var_name="zram_devices", defaults=dict(request.get("swap_defaults") or {}, **zram_defaults))
    brd = plan_brd(backends["brd"], facts, host=host) if backends["brd"] else None
    for plan in (zram, swap, brd):
        if plan:
            errors.extend(error for error in plan["errors"] if error not in errors)
    result = _check_on_host(host, errors, warnings, facts, view, records, kept, policy, backends, tmpfs, ramfs, zram,
                            swap, brd, backends["brd"])
    _zram_host_checks(result, host, zram["devices"] + swap["devices"], facts, view,
                      request.get("zram_persistence") or "units")
    return result


ZRAM_GENERATORS = _host_paths.ZRAM_GENERATORS


def zram_support_errors(host, devices, facts):
    """zram asked for on a host where it cannot work: neither /sys/class/zram-control nor a module to load."""
    support = facts.get("support") or {}
    if not devices or support.get("zram", True):
        return []
    container = support.get("container")
    return ["Host %s: zram_devices asks for zram, but zram cannot work here: no %s and no zram "
            "module for kernel %s%s. Load the zram module (modprobe zram), or leave zram_devices empty for this host."
            % (host, _host_paths.ZRAM_CONTROL, support.get("kernel"), " (in a %s container, bind the host's /sys and /dev)" % container
               if container else "")]


def generator_errors(host, devices, view, persistence):
    """zram_persistence: generator needs zram-generator, systemd, and no mem_limit (zram-generator 1.1 has none)."""
    if persistence != "generator" or not devices:
        return []
    errors = []
    if not any(view.exists(path) for path in ZRAM_GENERATORS):
        errors.append("Host %s: zram_persistence is generator, but zram-generator is not installed (no %s). Install "
                      "the Debian package systemd-zram-generator, or set zram_persistence: units (the default)."
                      % (host, " or ".join(ZRAM_GENERATORS)))
    if not view.systemd():
        errors.append("Host %s: zram_persistence is generator, but the service manager is %s; zram-generator needs "
                      "systemd. Set zram_persistence: units." % (host, view.service_manager()))
    for device in devices:
        if device.get("mem_limit_bytes"):
            errors.append("Host %s: %s.mem_limit is set, but zram_persistence is generator and zram-generator 1.1 "
                          "(Debian 12) has no memory limit, so it would not come back at boot. Remove mem_limit from "
                          "this entry, or set zram_persistence: units." % (host, device["label"]))
    return errors


def zswap_warnings(host, devices, view):
    """zswap in front of zram swap compresses each page twice."""
    if not any(device.get("use") == "swap" for device in devices):
        return []
    if (view.read(_host_paths.ZSWAP_ENABLED) or "").strip() not in ("Y", "1"):
        return []
    return ["Host %s has zswap on as well as zram swap: pages are compressed twice on their way out. Turn zswap off "
            "(zswap.enabled=0 on the kernel command line) when zram is the swap." % host]


def _without(sources, refused):
    """SOURCES less the entries whose labels are in REFUSED."""
    return [(name, [item for index, item in enumerate(value) if _label(name, index, item) not in refused]
             if isinstance(value, (list, tuple)) else value) for name, value in sources]


def _labelled(name, value):
    """VALUE's mappings, each with its label (NAME[index]) where it has none: an entry refused and left out of the
    list must not shift the index that later messages give the others."""
    if not isinstance(value, (list, tuple)):
        return value
    return [dict(item, label="%s[%d]" % (name, index)) if isinstance(item, dict) and not item.get("label") else item
            for index, item in enumerate(value)]


def _brd_request(given):
    """The brd role's request as it plans it: brd_count as a number where it came as one in a string
    (ansible-core 2.17 and 2.18, and -e, hand a number on as a string)."""
    request = dict(given)
    count = request.get("count")
    if isinstance(count, str) and count.strip().isdigit():
        request["count"] = int(count.strip())
    return request


def _plan_backends(request, facts, view, host):
    """A backend role used on its own: its lists, planned and checked on the host the same way as the policy's
    entries, without the policy layer (no purposes, no budget). BACKEND_REQUESTS: tmpfs_mounts, tmpfs_defaults
    (the tmpfs role), ramfs_mounts, ramfs_defaults (the ramfs role), zram_devices (the zram role, with the
    request's swap_defaults and swap_allow_fallback as its zram_device_defaults and
    zram_allow_algorithm_fallback), brd ({state, count, size, mounts}) and brd_defaults (the brd role)."""
    given = request.get("backend_requests") or {}
    errors = []
    timeout = request.get("scan_timeout", 10)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        errors.append("Host %s: the scan timeout is %s: not a number of seconds. Use e.g. 10."
                      % (host, show(request.get("scan_timeout"))))
    sources = [(name, given.get(name)) for name in ("tmpfs_mounts", "ramfs_mounts") if given.get(name) is not None]
    zram_given = _labelled("zram_devices", given.get("zram_devices"))
    brd_given = given.get("brd")
    if brd_given is not None and not isinstance(brd_given, dict):
        errors.append("Host %s: the brd request is %s: not a mapping of state, count, size and mounts."
                      % (host, show(brd_given)))
        brd_given = None
    brd_given = _brd_request(brd_given) if brd_given is not None else None
    brd_mounts = _labelled("brd_mounts", brd_given.get("mounts")) if brd_given is not None else None
    if brd_given is not None:
        sources.append(("brd_mounts", brd_mounts))
    refused_paths, refused = path_errors(host, sources, zram_given, view)
    errors.extend(refused_paths)
    records = view.records()
    clean = dict(_without(sources, refused))
    kept = root_overrides(list(clean.items()), facts, records, view)

    def with_kept(items):
        if not isinstance(items, (list, tuple)):
            return items
        return [dict(kept.get(normalize_path(item["path"])) or {}, **item)
                if isinstance(item, dict) and isinstance(item.get("path"), str) and item["path"].startswith("/")
                and normalize_path(item["path"]) else item for item in items]

    facts = dict(facts, backings=backing_facts((clean.get("tmpfs_mounts"), clean.get("ramfs_mounts")), view))
    tmpfs = plan_tmpfs(with_kept(clean.get("tmpfs_mounts") or []), facts, host=host, var_name="tmpfs_mounts",
                       defaults=given.get("tmpfs_defaults") or {})
    ramfs = plan_ramfs(with_kept(clean.get("ramfs_mounts") or []), facts, host=host, var_name="ramfs_mounts",
                       defaults=given.get("ramfs_defaults") or {})
    zram_defaults = request.get("swap_defaults") or {}
    if not isinstance(zram_defaults, dict):
        errors.append("Host %s: zram_device_defaults is %s: not a mapping. Give the defaults as a mapping, e.g. "
                      "{algorithm: zstd}." % (host, show(zram_defaults)))
        zram_defaults = {}
    zram = plan_zram([item for index, item in enumerate(zram_given) if "zram_devices[%d]" % index not in refused]
                     if isinstance(zram_given, (list, tuple)) else zram_given, facts, host=host,
                     var_name="zram_devices",
                     defaults=dict(zram_defaults, allow_algorithm_fallback=bool(request.get("swap_allow_fallback"))))
    brd = plan_brd(dict(brd_given, mounts=clean.get("brd_mounts")), facts, host=host,
                   defaults=given.get("brd_defaults") or {}) if brd_given is not None else None
    for plan in (tmpfs, ramfs, zram, brd):
        if plan:
            errors.extend(error for error in plan["errors"] if error not in errors)
    policy = {"entries": [], "budget": None, "gates": [], "warnings": []}
    backends = {"tmpfs_mounts": [], "ramfs_mounts": [], "zram_devices": [], "brd": None}
    result = _check_on_host(host, errors, [], facts, view, records, kept, policy, backends, tmpfs, ramfs, zram,
                            {"devices": []}, brd, brd_given)
    _zram_host_checks(result, host, zram["devices"], facts, view, request.get("zram_persistence") or "units")
    return result


def _zram_host_checks(result, host, devices, facts, view, persistence):
    """What zram needs of the host (the module, zram-generator), and zswap in front of zram swap."""
    devices = [device for device in devices if device.get("state") == "present"]
    result["errors"].extend(zram_support_errors(host, devices, facts))
    result["errors"].extend(generator_errors(host, devices, view, persistence))
    result["warnings"].extend(zswap_warnings(host, devices, view))


def _check_on_host(host, errors, warnings, facts, view, records, kept, policy, backends, tmpfs, ramfs, zram, swap,
                   brd, brd_request):
    """What the host says about the planned mounts, then the trials; the result plan_host() returns."""
    zram_mounts = [device["mount"] for device in zram["devices"] + swap["devices"] if device.get("mount")]
    mounts = tmpfs["mounts"] + ramfs["mounts"] + zram_mounts + (brd["mounts"] if brd else [])
    policy_paths = set(entry["path"] for entry in policy["entries"]) | set(
        entry["path"] for entry in tmpfs["mounts"] + ramfs["mounts"])
    for device in swap["devices"]:
        mount = device.get("mount")
        if mount and mount["path"] in policy_paths:
            errors.append("Host %s: %s.path is '%s': the policy mounts that path too. Mount each path from one "
                          "place only: drop it from zram_devices or from the policy." % (host, device["label"],
                                                                                         mount["path"]))
    swap_names = set(device["name"] for device in swap["devices"])
    for device in zram["devices"]:
        if device["name"] in swap_names:
            errors.append("Host %s: %s.name is '%s': zram_devices names a device so too. Give the policy entry "
                          "another name." % (host, device["label"], device["name"]))

    errors.extend(mount_errors(host, mounts, facts, records, policy_paths | set(m["path"] for m in zram_mounts),
                               view.systemd() and view.vendor_tmp_mount()))
    errors.extend(unaccounted_errors(host, tmpfs["mounts"] + ramfs["mounts"], records, view,
                                     view.systemd() and view.vendor_tmp_mount()))
    errors.extend(busy_errors(host, mounts, view, view.systemd() and view.vendor_tmp_mount()))
    problems, ids = account_errors(host, mounts, view, kept)
    errors.extend(problems)

    review = review_persist(mounts, persist_states(mounts, view), host)
    errors.extend(review["errors"])
    warnings.extend("Host %s: %s" % (host, warning) if not warning.startswith("Host ") else warning
                    for warning in review["warnings"])
    persisted = [entry for entry in mounts if entry.get("persist") and entry["state"] == "mounted"]
    if persisted and not view.systemd():
        errors.append("Host %s: %s.persist is set, but this host does not run systemd, and persist needs systemd "
                      "units to restore the data at boot and write it back. Set persist: null here."
                      % (host, persisted[0]["label"]))
    elif persisted and not view.has_program("python3"):
        # The persist helper is a Python program its units run at boot (before other file systems) and at shutdown.
        errors.append("Host %s: %s.persist is set, but this host has no python3, which the persist units run their "
                      "helper with at boot and at shutdown. Install python3 (Debian package python3), or set "
                      "persist: null here." % (host, persisted[0]["label"]))

    if not errors:
        # Only a request that passed every other check is tried against the kernel and mkfs.
        problems, notes = trial_errors(host, tmpfs["mounts"] + ramfs["mounts"], view, ids)
        errors.extend(problems)
        warnings.extend(notes)
        devices = [(device["label"], device["fstype"], device["size"], device["size_bytes"], device["mkfs_options"])
                   for device in zram["devices"] + swap["devices"]
                   if device.get("mount") and device["state"] == "present"]
        if brd and (brd.get("module") or {}).get("rd_size_kib"):
            devices += [(mount["label"], mount["fstype"], brd_request.get("size"),
                         brd["module"]["rd_size_kib"] * 1024, mount.get("mkfs_options") or [])
                        for mount in brd["mounts"] if mount["state"] == "mounted"]
        errors.extend(mkfs_errors(host, devices, view))

    for entry in tmpfs["mounts"]:
        entry["options"] = entry["options"] + (ids.get(entry["path"]) or [])
    for entry in mounts:
        record = records.get(entry["path"]) or {}
        entry["record"] = {
            "path": entry["path"], "fstype": entry["fstype"],
            "created_dir": bool(record.get("created_dir")) if record else not (
                (facts.get("paths") or {}).get(entry["path"]) or {}).get("exists", False) and not path_is_live(
                    facts, entry["path"]),
            "root_kept": kept.get(entry["path"]) or record.get("root_kept") or {},
            # ramfs has no size of its own: ramdisk_facts shows this one as its declared cap.
            "size_bytes": entry.get("ram_bytes"),
        }
    if not errors:
        plan_items(tmpfs["mounts"] + ramfs["mounts"], view)
    return {
        "errors": errors,
        "warnings": warnings,
        "policy": {"entries": policy["entries"], "budget": policy["budget"], "gates": policy["gates"],
                   "skipped": policy.get("skipped") or []},
        "tmpfs": tmpfs["mounts"],
        "ramfs": ramfs["mounts"],
        "zram": zram["devices"],
        "zram_swap": swap["devices"],
        "brd": brd or {},
        "persist": review["decisions"],
        "backends": dict(backends, brd=backends["brd"] or {}),
        "zram_known": dict((name, record.get("device")) for name, record in view.zram_records().items()),
    }


def plan_items(mounts, view):
    """Give each tmpfs and ramfs entry the names and texts ramdisk_apply carries out (_mount_steps.item); its `todo`
    comes from the executor's dry run (_dry_run.mark_todo)."""
    systemd = view.systemd()
    vendor_tmp = view.vendor_tmp_mount()
    for entry in mounts:
        entry.update(_mount_steps.item(entry, vendor_tmp, systemd))
