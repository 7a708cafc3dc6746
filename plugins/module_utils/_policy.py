# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Per-host-group policies for the ramdisk entry role: merge, purposes, gates and the RAM budget.

A host's policy is the list ``ramdisk_mounts`` plus every variable named ``ramdisk_mounts__<anything>``
(one per host group, say). plan_policy() merges them, fills each entry from its purpose's defaults,
checks what only the whole policy can show (the same path set twice, nested paths across backends,
the /tmp gate, the RAM budget), and splits the result into the requests the backend roles take
(tmpfs_mounts, ramfs_mounts, zram_devices, brd). Each backend's own planner then checks the rest.
It never touches the host.
"""

from __future__ import annotations

import hashlib
import re

from ansible_collections.ramdisk.provision.plugins.module_utils._gate import tmp_gate
from ansible_collections.ramdisk.provision.plugins.module_utils._tmpfs_options import NAMES as TMPFS_OPTION_NAMES
from ansible_collections.ramdisk.provision.plugins.module_utils._plan_core import (
    Entry,
    check_backings,
    check_path,
    is_under,
    normalize_path,
    show,
)
from ansible_collections.ramdisk.provision.plugins.module_utils._size import (
    SizeError,
    format_size,
    parse_size,
    tmpfs_size_bytes,
)

MIB = 1024 * 1024
# Stands in an error's advice for the room the RAM budget leaves, known only once every entry is counted.
ROOM = "\0room\0"
BACKENDS = ("tmpfs", "ramfs", "zram", "brd")
PURPOSES = ("tmp", "build", "cache", "database", "log", "custom")
STATES = ("mounted", "absent")
GATES = ("enforce", "warn", "off")
# What an enforced gate that refuses a tmp-purpose entry does to the host (ramdisk_tmp_gate_action).
GATE_ACTIONS = ("fail", "skip")
COMMON_KEYS = (
    "path", "backend", "purpose", "state", "size", "mode", "owner", "group", "nosuid", "nodev", "noexec",
    "noatime", "options", "migrate", "persist",
)
# Keys only one backend (or the tmp purpose) understands; anywhere else they are a mistake, not a no-op.
BACKEND_KEYS = {
    "tmpfs": ("nr_inodes", "huge", "mpol", "noswap") + TMPFS_OPTION_NAMES,
    "ramfs": (),
    "zram": ("name", "algorithm", "mem_limit", "fstype", "mkfs_options", "discard"),
    "brd": ("fstype", "mkfs_options", "discard"),
}
PURPOSE_KEYS = {"tmp": ("gate",)}
ALL_KEYS = COMMON_KEYS + tuple(sorted({key for keys in BACKEND_KEYS.values() for key in keys} | {"gate"}))
# What tmpfs, ramfs, zram and brd mounts are allowed to hold when the request does not say.
MERGE_PREFIX = "ramdisk_mounts__"
# Kernel and systemd API mounts: their limits are defaults nobody fills, so they count with their usage.
SYSTEM_MOUNT_TREES = ("/run", "/dev", "/sys", "/proc")
_ZRAM_NAME_RE = re.compile(r"[^a-z0-9_-]+")


class PolicyError(ValueError):
    """A setting of the role itself (not of one entry) is unusable."""


def policy_sources(variables):
    """[(name, value)] for ramdisk_mounts and every ramdisk_mounts__* in VARIABLES, in a stable order."""
    sources = []
    if "ramdisk_mounts" in variables:
        sources.append(("ramdisk_mounts", variables["ramdisk_mounts"]))
    for name in sorted(variables):
        if name.startswith(MERGE_PREFIX) and len(name) > len(MERGE_PREFIX):
            sources.append((name, variables[name]))
    return sources


def zram_device_name(path):
    """A zram role device name for a mount path: readable, at most 32 characters, unique by a hash."""
    stem = _ZRAM_NAME_RE.sub("-", path.strip("/").lower()).strip("-_")[:22] or "root"
    return "%s-%s" % (stem, hashlib.sha1(path.encode("utf-8")).hexdigest()[:8])


def _canonical(entry):
    """An entry's settings with the path normalised and a fixed size in bytes, to tell a repeat from a conflict."""
    out = dict((key, value) for key, value in entry.items() if value is not None)
    if isinstance(out.get("path"), str):
        out["path"] = normalize_path(out["path"]) or out["path"]
    try:
        # 16M and 16384K are one size; a share of RAM stays as written.
        out["size"] = parse_size(out["size"]) if "size" in out else None
    except (SizeError, TypeError, ValueError, OverflowError):
        pass
    return out


def _parse_budget(budget, mem_total):
    try:
        limit = parse_size(budget, ram_bytes=mem_total)
    except SizeError as exc:
        raise PolicyError("ramdisk_ram_budget is %s: %s. Use a share of RAM such as '80%%', a size such as 12G, "
                          "or an expression such as 'ram - 2G'." % (show(budget), exc))
    if limit > mem_total:
        raise PolicyError("ramdisk_ram_budget is %s: %s, more than all of this host's RAM (%s). Use at most 100%%; "
                          "80%% leaves room for everything else." % (show(budget), format_size(limit),
                                                                     format_size(mem_total)))
    return limit


def plan_policy(sources, facts, host="localhost", purposes=None, defaults=None, state="present",
                budget="80%", zram_ratio=2.0, swap_devices=None, swap_known=None, swap_defaults=None, roots=None,
                gate_action="fail"):
    """Merge and check a host's policy.

    SOURCES: [(variable name, list of entries)], see policy_sources(). PURPOSES: purpose -> defaults
    for its entries. DEFAULTS: defaults for every entry, under the purpose's. STATE absent turns every
    entry to absent (rollback). SWAP_DEVICES: the host's zram_devices, which the zram role sets up beside
    the policy (site.yml); their swap devices count in the budget. SWAP_KNOWN: entry name -> the zramN it
    got on an earlier run. SWAP_DEFAULTS: zram_device_defaults, under each of them. ROOTS: path -> mode, owner
    and group that a mount's root keeps from the directory it goes over (over DEFAULTS, under the purpose and
    the entry). GATE_ACTION (ramdisk_tmp_gate_action): what a tmp-purpose entry whose enforced gate refuses it
    does to the host: fail (the host's whole request is refused) or skip (that entry is left out, its directory
    stays on disk as it is, the rest of the policy goes ahead; named in skipped and in a warning).
    Returns entries, skipped, errors, warnings, gates, budget and the backend requests.
    """
    errors = []
    warnings = []
    facts = facts or {}
    purposes = dict(purposes or {})
    defaults = dict(defaults or {})
    mem_total = (facts.get("memory") or {}).get("total_bytes")
    result = {"entries": [], "skipped": [], "errors": errors, "warnings": warnings, "gates": [], "budget": None,
              "backends": {"tmpfs_mounts": [], "ramfs_mounts": [], "zram_devices": [], "brd": None}}

    if gate_action not in GATE_ACTIONS:
        errors.append("Host %s: ramdisk_tmp_gate_action is %s: not a gate action. Use fail (a /tmp that does not fit "
                      "refuses the host's whole request) or skip (that /tmp stays on disk, the rest goes ahead)."
                      % (host, show(gate_action)))
        return result

    if state not in ("present", "absent"):
        errors.append("Host %s: ramdisk_state is %s: not a known state. Use present, or absent to remove every "
                      "mount of the policy." % (host, show(state)))
        return result
    if not mem_total:
        errors.append("Host %s: ansible_facts['ramdisk'].memory.total_bytes is missing: sizes cannot be checked. "
                      "Run ramdisk.provision.ramdisk_facts before planning." % host)
        return result
    try:
        ratio = float(zram_ratio)
        if isinstance(zram_ratio, bool) or not 1.0 <= ratio <= 10.0:
            raise ValueError
    except (TypeError, ValueError):
        errors.append("Host %s: ramdisk_zram_assumed_ratio is %s: not a compression ratio from 1 to 10. Use the "
                      "ratio your data gets (mm_stat in ramdisk_facts shows it); 2 is a cautious default."
                      % (host, show(zram_ratio)))
        return result
    try:
        limit = _parse_budget(budget, mem_total)
    except PolicyError as exc:
        errors.append("Host %s: %s" % (host, exc))
        return result

    entries = _merge(sources, host, errors)
    normalized = []
    for where, item in entries:
        normal = _normalize(where, item, host, purposes, defaults, state, mem_total, errors, roots or {})
        if normal is not None:
            normalized.append(normal)
    result["entries"] = normalized

    mounted = [entry for entry in normalized if entry["state"] == "mounted"]
    for inner in mounted:
        for outer in mounted:
            if inner is not outer and is_under(inner["path"], outer["path"]):
                errors.append("Host %s: %s.path is '%s': it is inside %s.path '%s' (%s), and nested RAM mounts hide "
                              "each other depending on mount order. Choose paths that do not contain one another."
                              % (host, inner["label"], inner["path"], outer["label"], outer["path"], outer["backend"]))

    # Each backend's planner sees only its own share: a backing inside a RAM mount of another backend, or
    # shared with an entry of another backend, shows only here.
    check_backings([_backing_view(entry) for entry in normalized], {}, host, errors)

    brd_sizes = sorted(set(entry["size_bytes"] for entry in normalized
                           if entry["backend"] == "brd" and entry["size_bytes"]))
    if len(brd_sizes) > 1:
        errors.append("Host %s: the brd entries ask for disks of different sizes (%s), but brd makes every disk the "
                      "same size (its rd_size parameter). Give every brd entry the same size, or use zram or tmpfs "
                      "for the odd one out." % (host, ", ".join(
                          "%s: %s" % (entry["label"], format_size(entry["size_bytes"]))
                          for entry in normalized if entry["backend"] == "brd" and entry["size_bytes"])))

    result["gates"], result["skipped"] = _gates(normalized, facts, host, errors, warnings, gate_action)
    if result["skipped"]:
        left_out = set(item["label"] for item in result["skipped"])
        normalized = [entry for entry in normalized if entry["label"] not in left_out]
        result["entries"] = normalized
    result["budget"] = ram_budget(normalized, facts, limit, ratio, budget,
                                  swap=_swap_to_count(swap_devices, swap_known, facts, mem_total, swap_defaults))
    # Advice that is accepted when followed: the room the budget leaves beside everything else it counts (the
    # entries refused here are not counted), in whole MiB rounded down.
    room = max(min(limit, mem_total) - result["budget"]["total_bytes"], 0) // MIB
    errors[:] = [error.replace(ROOM, "Use at most %dM (%s): ramdisk_ram_budget (%s = %s, less %s counted already)"
                               % (room, format_size(room * MIB), budget, format_size(limit),
                                  format_size(result["budget"]["total_bytes"]))) for error in errors]
    if not result["budget"]["within"]:
        over = result["budget"]
        errors.append("Host %s: the policy needs up to %s of RAM-backed storage, %s over ramdisk_ram_budget (%s = %s "
                      "of this host's %s). Counted: %s. Shrink or drop mounts, or raise ramdisk_ram_budget."
                      % (host, format_size(over["total_bytes"]), format_size(over["total_bytes"] - over["limit_bytes"]),
                         over["limit"], format_size(over["limit_bytes"]), format_size(mem_total),
                         "; ".join("%s %s" % (item["what"], format_size(item["bytes"])) for item in over["counted"])))
    result["backends"] = _backend_requests(normalized)
    return result


def _merge(sources, host, errors):
    """[(label, entry)] from every source; a path set twice the same way counts once."""
    merged = []
    by_path = {}
    for name, value in sources:
        if value is None:
            continue
        if not isinstance(value, (list, tuple)):
            errors.append("Host %s: %s is %s: not a list. Give a list of mounts, e.g. [{path: /var/cache/build, "
                          "backend: tmpfs, purpose: build, size: 2G}]." % (host, name, show(value)))
            continue
        for index, item in enumerate(value):
            where = "%s[%d]" % (name, index)
            path = item.get("path") if isinstance(item, dict) else None
            key = normalize_path(path) if isinstance(path, str) and path.startswith("/") else None
            if key is not None and key in by_path:
                first_where, first_item = by_path[key]
                if _canonical(first_item) == _canonical(item):
                    continue
                errors.append("Host %s: %s and %s both set path '%s', differently (%s against %s). Set each path in "
                              "one policy variable only, or give it the same settings in both."
                              % (host, first_where, where, key, _differences(first_item, item), first_where))
                continue
            if key is not None:
                by_path[key] = (where, item)
            merged.append((where, item))
    return merged


def _differences(first, second):
    first, second = _canonical(first), _canonical(second)
    keys = sorted(key for key in set(first) | set(second) if first.get(key) != second.get(key))
    return ", ".join("%s: %s" % (key, show(second.get(key))) for key in keys)


def _normalize(where, item, host, purposes, defaults, state, mem_total, errors, roots):
    entry = Entry(host, "ramdisk_mounts", 0, errors, where)
    if not isinstance(item, dict):
        entry.error(None, item, "not a mapping", "Give each mount as a mapping with at least path and size.")
        return None
    for key in item:
        if key not in ALL_KEYS:
            entry.error(key, item[key], "an unknown key", "Valid keys are %s." % ", ".join(ALL_KEYS))

    purpose = item.get("purpose", defaults.get("purpose", "custom"))
    if purpose not in PURPOSES:
        entry.error("purpose", purpose, "not a known purpose", "Use one of %s." % ", ".join(PURPOSES))
        return None
    values = dict(defaults)
    # A directory's own mode and owners win over the general defaults; a purpose says what its mounts need
    # (database: 0700, postgres), and the entry has the last word.
    if isinstance(item.get("path"), str) and item["path"].startswith("/"):
        values.update(roots.get(normalize_path(item["path"])) or {})
    values.update(dict((key, value) for key, value in (purposes.get(purpose) or {}).items() if value is not None))
    values.update(dict((key, value) for key, value in item.items() if value is not None))
    values["purpose"] = purpose

    backend = values.get("backend")
    if backend not in BACKENDS:
        entry.error("backend", backend, "not a known backend", "Use one of %s." % ", ".join(BACKENDS))
        return None
    for key in item:
        owners = [other for other, keys in BACKEND_KEYS.items() if key in keys]
        if owners and backend not in owners:
            entry.error(key, item[key], "a %s key, and this entry's backend is %s" % (" and ".join(owners), backend),
                        "Remove it, or set backend: %s." % " or ".join(owners))
        if key == "gate" and purpose != "tmp":
            entry.error(key, item[key], "a key of the tmp purpose, and this entry's purpose is %s" % purpose,
                        "Remove it, or set purpose: tmp.")

    path = check_path(entry, item.get("path"))
    entry_state = values.get("state", "mounted")
    if entry_state not in STATES:
        entry.error("state", entry_state, "not a known state", "Use mounted or absent.")
    if state == "absent":
        entry_state = "absent"

    size_bytes = None
    size = values.get("size")
    if entry_state == "mounted":
        if size is None:
            entry.error("size", size, "required for a mounted entry",
                        "Set size, e.g. '25%%', '2G' or 'min(ram / 4, 8G)'%s." % (
                            "; ramfs has no limit of its own, so size is what it may hold, counted against RAM"
                            if backend == "ramfs" else ""))
        else:
            try:
                size_bytes = (tmpfs_size_bytes(size, mem_total) if backend == "tmpfs"
                              else parse_size(size, ram_bytes=mem_total))
            except SizeError as exc:
                entry.error("size", size, str(exc), "Use bytes, a binary unit (512M, 2G), a share of RAM (25%) or an "
                            "expression such as min(ram / 4, 8G).")
            else:
                if size_bytes > mem_total:
                    # The advice is filled in by plan_policy once the budget knows what the rest takes (ROOM).
                    entry.error("size", size, "%s, above this host's RAM of %s" % (
                        format_size(size_bytes), format_size(mem_total)), ROOM + " caps all mounts together.")
    mem_limit_bytes = None
    if backend == "zram" and values.get("mem_limit") is not None:
        try:
            mem_limit_bytes = parse_size(values["mem_limit"], ram_bytes=mem_total)
        except SizeError as exc:
            entry.error("mem_limit", values["mem_limit"], str(exc), "Use a size such as 1G or 10%.")

    if purpose == "tmp":
        gate = values.get("gate", "enforce")
        if gate is False:
            # YAML reads an unquoted off as false.
            gate = values["gate"] = "off"
        if gate not in GATES:
            entry.error("gate", gate, "not a gate setting",
                        "Use enforce (refuse when the data does not fit in RAM), warn or off.")
        if backend == "ramfs":
            entry.error("backend", backend, "ramfs for a tmp-purpose mount",
                        "ramfs has no size limit, so anyone filling a temporary directory could take all RAM; use "
                        "backend tmpfs.")
    if path == "/tmp" and purpose != "tmp" and entry_state == "mounted":
        entry.error("purpose", purpose, "not tmp for /tmp",
                    "Set purpose: tmp, so /tmp gets mode 1777 and the gate that checks it fits in RAM.")

    persist = values.get("persist")
    if purpose == "database" and entry_state == "mounted" and not persist:
        entry.error("persist", persist, "off for a database-purpose mount, which must never lose its data",
                    "Set persist: {backing: /var/lib/ramdisk-backing/<name>} (a directory on disk), or use "
                    "purpose custom if losing the data at a crash or reboot is acceptable.")
    if purpose == "log" and entry_state == "mounted":
        if not persist:
            entry.error("persist", persist, "off for a log-purpose mount, whose logs would all go at every reboot",
                        "Set persist: {backing: /var/lib/ramdisk-backing/log} (a directory on disk), or use purpose "
                        "custom if the logs may go at every reboot.")
        if backend == "ramfs":
            entry.error("backend", backend, "ramfs for a log-purpose mount",
                        "ramfs has no size limit, so a flood of log lines (any user can log) could take all RAM; "
                        "use backend tmpfs or zram.")
    if purpose == "database" and isinstance(persist, dict) and persist.get("stop_services") is None:
        # A copy of a running database's files is not one it can start from: each interval sync stops the
        # services that write it, unless the entry says otherwise.
        if entry_state == "mounted" and not persist.get("services"):
            entry.error("persist.services", persist.get("services"), "empty for a database-purpose mount, whose "
                        "interval syncs stop these services so that each copy is consistent (persist.stop_services "
                        "is true by default for this purpose)",
                        "Name the database's units, e.g. persist.services: [postgresql@15-main.service], or set "
                        "persist.stop_services: false to copy the live files (a copy the database may not start "
                        "from).")
        values["persist"] = dict(persist, stop_services=True)
    if backend == "zram" and values.get("name") is not None and not isinstance(values.get("name"), str):
        entry.error("name", values.get("name"), "not a device name", "Use a short name such as build.")

    if not entry.ok:
        return None
    values.update({"path": path, "backend": backend, "state": entry_state, "label": where,
                   "size_bytes": size_bytes if entry_state == "mounted" else None,
                   "mem_limit_bytes": mem_limit_bytes})
    if backend == "zram" and not values.get("name"):
        values["name"] = zram_device_name(path)
    return values


def _backing_view(entry):
    """ENTRY in the shape check_backings() takes; a backing the backend's planner will refuse is left out."""
    persist = entry.get("persist")
    backing = persist.get("backing") if isinstance(persist, dict) else None
    if isinstance(backing, str) and backing.startswith("/"):
        backing = normalize_path(backing)
    else:
        backing = None
    return {"label": entry["label"], "path": entry["path"], "state": entry["state"],
            "persist": {"backing": backing} if backing else None}


def _gates(entries, facts, host, errors, warnings, action="fail"):
    """The /tmp rule of the 502-server survey, applied to every mounted tmp-purpose entry. Returns the verdicts,
    and the entries an enforced gate refused that ACTION skip leaves out ({path, label, reasons})."""
    memory = facts.get("memory") or {}
    swap = facts.get("swap") or {}
    paths = facts.get("paths") or {}
    live = set(mount.get("path") for mount in facts.get("mounts") or ())
    gates = []
    skipped = []
    for entry in entries:
        if entry["purpose"] != "tmp" or entry["state"] != "mounted" or entry.get("gate", "enforce") == "off":
            continue
        path_facts = paths.get(entry["path"]) or {}
        verdict = tmp_gate(path_facts.get("usage_bytes") or 0, path_facts.get("complete", True),
                           memory.get("total_bytes") or 0, memory.get("available_bytes") or 0,
                           swap.get("free_bytes") or 0, entry["path"] in live,
                           (facts.get("support") or {}).get("tmpfs", True) or entry["backend"] != "tmpfs",
                           path=entry["path"], memory=memory)
        verdict.update({"path": entry["path"], "label": entry["label"], "gate": entry.get("gate", "enforce")})
        gates.append(verdict)
        if verdict["recommended"]:
            continue
        words = " ".join(verdict["reasons"])
        if verdict["gate"] == "enforce" and action == "skip":
            verdict["skipped"] = True
            skipped.append({"path": entry["path"], "label": entry["label"], "reasons": verdict["reasons"]})
            warnings.append("Host %s: %s would put '%s' in RAM, but it does not fit, so it is skipped "
                            "(ramdisk_tmp_gate_action: skip): '%s' stays as it is and the rest of the policy goes "
                            "ahead. %s Free some of it or add memory, then run again."
                            % (host, entry["label"], entry["path"], entry["path"], words))
        elif verdict["gate"] == "enforce":
            errors.append("Host %s: %s puts '%s' in RAM, but it does not fit: %s Free some of it, add memory, or set "
                          "%s.gate to warn or off to go ahead anyway." % (host, entry["label"], entry["path"], words,
                                                                          entry["label"]))
        else:
            warnings.append("Host %s: %s puts '%s' in RAM although it may not fit (gate: warn): %s"
                            % (host, entry["label"], entry["path"], words))
    return gates, skipped


def _is_system_mount(path):
    return any(path == tree or path.startswith(tree + "/") for tree in SYSTEM_MOUNT_TREES)


def _swap_to_count(devices, known, facts, mem_total, defaults=None):
    """The zram swap devices of DEVICES (zram_devices, over DEFAULTS) as the budget counts them.

    [{label, size_bytes, mem_limit_bytes, live}]: LIVE is the facts entry of the device an earlier run
    made (KNOWN: name -> zramN), which the entry replaces in the count, since the zram role may resize it
    in the same run. Entries the zram role would refuse are left out: its own preflight names what is
    wrong with them.
    """
    if not isinstance(devices, (list, tuple)):
        return []
    defaults = defaults if isinstance(defaults, dict) else {}
    live = dict((device.get("device"), device) for device in facts.get("zram") or ()
                if device.get("disksize_bytes") and device.get("used_as") == "swap")
    known = known if isinstance(known, dict) else {}
    swaps = []
    for index, given in enumerate(devices):
        if not isinstance(given, dict):
            continue
        device = dict(defaults, **given)
        if device.get("use") != "swap" or device.get("state", "present") != "present":
            continue
        try:
            size = parse_size(device.get("size"), ram_bytes=mem_total)
            limit = parse_size(device["mem_limit"], ram_bytes=mem_total) if device.get("mem_limit") else None
        except (SizeError, TypeError, ValueError):
            continue
        swaps.append({"label": "zram_devices[%d] %s" % (index, device.get("name")), "size_bytes": size,
                      "mem_limit_bytes": limit, "live": live.get(known.get(device.get("name")))})
    return swaps


def _zram_amount(size_bytes, mem_limit_bytes, zram_ratio):
    """What a zram device can take from RAM at most, and on what basis."""
    if mem_limit_bytes:
        return mem_limit_bytes, "mem_limit"
    basis = "size %s at an assumed %.1f:1 compression" % (format_size(size_bytes), zram_ratio)
    return int(size_bytes / zram_ratio), basis


def ram_budget(entries, facts, limit_bytes, zram_ratio, limit_expr="80%", swap=()):
    """Worst-case RAM of all RAM-backed storage once the policy is applied, against LIMIT_BYTES.

    The policy's mounts count with their limits (zram with mem_limit, else its size at ZRAM_RATIO);
    RAM storage already on the host that the policy does not name counts too: other tmpfs mounts with
    their size, kernel/systemd ones (/run, /dev/shm) and ramfs with what they hold, zram devices like
    the policy's, brd disks with their size unless the policy takes brd over. SWAP: the zram swap devices
    set up beside the policy (_swap_to_count()), a live one at the larger of its planned and live size.
    """
    counted = []
    replaced = set(swap_device["live"]["device"] for swap_device in swap if swap_device["live"])
    named = set(entry["path"] for entry in entries)
    for entry in entries:
        if entry["state"] != "mounted":
            continue
        if entry["backend"] == "zram":
            amount, basis = _zram_amount(entry["size_bytes"], entry.get("mem_limit_bytes"), zram_ratio)
        else:
            amount = entry["size_bytes"]
            basis = "max_size" if entry["backend"] == "ramfs" else "size"
        counted.append({"what": "%s %s (%s)" % (entry["label"], entry["path"], entry["backend"]), "bytes": amount,
                        "basis": basis, "source": "policy"})

    seen = set()
    for mount in facts.get("mounts") or ():
        path, kind = mount.get("path"), mount.get("kind")
        if path in named or path in seen or kind not in ("tmpfs", "ramfs"):
            continue
        seen.add(path)
        if kind == "ramfs" and mount.get("declared_size_bytes"):
            amount = max(mount["declared_size_bytes"], mount.get("used_bytes") or 0)
            basis = "declared max_size (ramfs has no limit)"
        elif kind == "ramfs" or _is_system_mount(path):
            amount, basis = mount.get("used_bytes") or 0, "in use (%s)" % (
                "ramfs has no limit" if kind == "ramfs" else "system mount")
        else:
            amount, basis = mount.get("size_bytes") or 0, "size"
        counted.append({"what": "%s (%s, on the host)" % (path, kind), "bytes": amount, "basis": basis,
                        "source": "host"})
    for device in facts.get("zram") or ():
        if not device.get("disksize_bytes") or device.get("mountpoint") in named or device.get("device") in replaced:
            continue
        amount, basis = _zram_amount(device["disksize_bytes"], device.get("mem_limit_bytes"), zram_ratio)
        counted.append({"what": "%s (zram %s, on the host)" % (device.get("path"), device.get("used_as")),
                        "bytes": amount, "basis": basis, "source": "host"})
    for swap_device in swap:
        amount, basis = _zram_amount(swap_device["size_bytes"], swap_device["mem_limit_bytes"], zram_ratio)
        live = swap_device["live"]
        if live:
            live_amount, live_basis = _zram_amount(live["disksize_bytes"], live.get("mem_limit_bytes"), zram_ratio)
            if live_amount > amount:
                amount, basis = live_amount, "as it is now: " + live_basis
        counted.append({"what": "%s (zram swap, %s)" % (swap_device["label"], live["path"] if live else "to be made"),
                        "bytes": amount, "basis": basis, "source": "zram_devices"})
    brd = facts.get("brd") or {}
    if brd.get("loaded") and not any(entry["backend"] == "brd" for entry in entries):
        for device in brd.get("devices") or ():
            amount = (brd.get("rd_size_kib") or 0) * 1024
            counted.append({"what": "%s (brd, on the host)" % device.get("path", device), "bytes": amount,
                            "basis": "size", "source": "host"})

    total = sum(item["bytes"] for item in counted)
    return {"limit": limit_expr, "limit_bytes": limit_bytes, "total_bytes": total, "within": total <= limit_bytes,
            "zram_assumed_ratio": zram_ratio, "counted": counted}


_TMPFS_KEYS = ("path", "size", "nr_inodes", "mode", "owner", "group", "huge", "mpol", "noswap", "noatime", "nosuid",
               "nodev", "noexec", "options", "state", "migrate", "label", "persist") + TMPFS_OPTION_NAMES
_RAMFS_KEYS = ("path", "mode", "owner", "group", "noatime", "nosuid", "nodev", "noexec", "options", "state",
               "migrate", "label", "persist")
_BLOCK_KEYS = ("path", "fstype", "mkfs_options", "mode", "owner", "group", "discard", "noatime", "nosuid", "nodev",
               "noexec", "options", "migrate", "label", "persist")


def _pick(values, keys):
    # Keys left unset go to the backend role's own defaults; persist only where asked, so a backend
    # without it never sees the key.
    return dict((key, values[key]) for key in keys if values.get(key) is not None)


def _backend_requests(entries):
    tmpfs, ramfs, zram, brd_mounts = [], [], [], []
    brd_size = None
    for entry in entries:
        backend = entry["backend"]
        if backend == "tmpfs":
            tmpfs.append(_pick(entry, _TMPFS_KEYS))
        elif backend == "ramfs":
            item = _pick(entry, _RAMFS_KEYS)
            if entry.get("size") is not None:
                item["max_size"] = entry["size"]
            ramfs.append(item)
        elif backend == "zram":
            item = _pick(entry, _BLOCK_KEYS + ("name", "algorithm", "mem_limit", "size"))
            item.update({"use": "filesystem", "state": "present" if entry["state"] == "mounted" else "absent"})
            zram.append(item)
        else:
            item = _pick(entry, _BLOCK_KEYS)
            item.update({"disk": len(brd_mounts), "state": entry["state"]})
            brd_mounts.append(item)
            brd_size = brd_size or entry.get("size")
    brd = None
    if brd_mounts:
        present = any(item["state"] == "mounted" for item in brd_mounts)
        brd = {"state": "present" if present else "absent", "count": len(brd_mounts),
               "size": brd_size or "64M", "mounts": brd_mounts}
    return {"tmpfs_mounts": tmpfs, "ramfs_mounts": ramfs, "zram_devices": zram, "brd": brd}
