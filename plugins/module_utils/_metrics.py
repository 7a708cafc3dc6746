# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The metrics collector: RAM mounts, zram devices and persist copies as Prometheus text, and as a table.

The ramdisk role copies this file, _procfs.py, _size.py and _host_paths.py to the host (ramdisk_metrics: true), where a systemd timer,
the persist helper after every sync and the role at the end of each run start it with
``python3 _metrics.py collect``; ``ramdisk-status`` runs ``python3 _metrics.py status``. It needs only the
standard library there. What it reads: its config (written by the role), /proc/self/mountinfo, statvfs of
each mount, /proc/meminfo, /proc/swaps, /sys/block/zramN, the persist records and each backing's top
directory. It never walks a tree that statvfs already measures; a policy path that is not a RAM mount is
scanned within a short deadline for the peak record only.

The pure parts (samples, render, table, peaks, gate) take plain data, so tests feed them hand-made figures.
"""

from __future__ import annotations

import calendar
import json
import os
import re
import shlex
import sys
import tempfile
import time

try:
    from ansible_collections.ramdisk.provision.plugins.module_utils._size import format_size
except ImportError:  # on the managed host, beside a copy of _size.py
    from _size import format_size  # type: ignore
try:
    from ansible_collections.ramdisk.provision.plugins.module_utils._procfs import (
        is_ram_backed, parse_meminfo, parse_mountinfo, parse_swaps, parse_zram_algorithms)
    from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths as paths
except ImportError:  # on the managed host, beside copies of _procfs.py and _host_paths.py
    from _procfs import is_ram_backed, parse_meminfo, parse_mountinfo, parse_swaps, parse_zram_algorithms  # type: ignore
    import _host_paths as paths  # type: ignore

CONFIG = paths.METRICS_CONFIG
# The peak record (docs/metrics.md): ramdisk_facts reads it too, and the fleet survey judges /tmp on it.
PEAK_RECORD = paths.METRICS_PEAK
PROM_NAME = "ramdisk.prom"
STATE_VERSION = 1
# A policy path that is not a RAM mount is scanned for its peak at most this long per run.
SCAN_DEADLINE = 0.5

# The kernel's mm_stat columns, in order (Documentation/admin-guide/blockdev/zram.rst).
MM_STAT_FIELDS = ("orig_data_size", "compr_data_size", "mem_used_total", "mem_limit", "mem_used_max",
                  "same_pages", "pages_compacted", "huge_pages", "huge_pages_since")
_STAMP_RE = re.compile(r"^snap-(\d{8}T\d{6})(?:\.(\d+))?Z$")
_LABEL_ESCAPES = {"\\": "\\\\", "\n": "\\n", '"': '\\"'}

# name: (type, help). One HELP and TYPE each; base units in the names.
METRICS = {
    "ramdisk_mount_mounted": ("gauge", "1 when the policy path is a RAM-backed mount now, else 0."),
    "ramdisk_mount_size_bytes": ("gauge", "Size of the RAM mount (statvfs blocks times fragment size)."),
    "ramdisk_mount_used_bytes": ("gauge", "Bytes in use on the RAM mount, as df counts them."),
    "ramdisk_mount_free_bytes": ("gauge", "Bytes still available on the RAM mount, as df counts them."),
    "ramdisk_mount_inodes": ("gauge", "Inodes of the RAM mount, in use or free."),
    "ramdisk_mount_inodes_used": ("gauge", "Inodes in use on the RAM mount."),
    "ramdisk_zram_disksize_bytes": ("gauge", "Uncompressed capacity of the zram device."),
    "ramdisk_zram_original_bytes": ("gauge", "Data stored in the zram device before compression (mm_stat orig_data_size)."),
    "ramdisk_zram_compressed_bytes": ("gauge", "Data stored in the zram device after compression (mm_stat compr_data_size)."),
    "ramdisk_zram_memory_used_bytes": ("gauge", "Memory the zram device takes, with overhead (mm_stat mem_used_total)."),
    "ramdisk_zram_memory_used_max_bytes": ("gauge", "Most memory the zram device took (mm_stat mem_used_max)."),
    "ramdisk_zram_memory_limit_bytes": ("gauge", "Memory limit of the zram device, 0 for none (mm_stat mem_limit)."),
    "ramdisk_zram_same_pages": ("gauge", "Pages filled with one repeated value, stored without memory (mm_stat same_pages)."),
    "ramdisk_zram_huge_pages": ("gauge", "Pages stored uncompressed because they did not compress (mm_stat huge_pages)."),
    "ramdisk_zram_compression_ratio": ("gauge", "Original over compressed bytes of the zram device; absent while it stores nothing."),
    "ramdisk_persist_last_success_timestamp_seconds": ("gauge", "When the backing's current copy was completed (Unix time)."),
    "ramdisk_persist_last_attempt_timestamp_seconds": ("gauge", "When the last sync attempt ended (Unix time)."),
    "ramdisk_persist_last_success": ("gauge", "1 when the last sync attempt succeeded, 0 when it failed or was refused."),
    "ramdisk_persist_last_refused": ("gauge", "1 when the last sync attempt was refused: the mount is not the one the "
                                              "persist helper restored (a remount, a mount not restored), or it "
                                              "holds nothing while the backing holds data; else 0."),
    "ramdisk_persist_skipped_mounts": ("gauge", "File systems mounted inside the persisted mount that the last sync "
                                                "attempt left out of the copy (named in the helper's status)."),
    "ramdisk_persist_last_exit_code": ("gauge", "Exit status of the persist helper's last sync attempt."),
    "ramdisk_persist_last_duration_seconds": ("gauge", "How long the last sync attempt took."),
    "ramdisk_persist_last_sync_bytes": ("gauge", "Bytes the copy made by the last successful sync takes on disk, its "
                                                 "files shared with the copy before it included."),
    "ramdisk_persist_last_sync_written_bytes": ("gauge", "Bytes the last successful sync wrote to the backing: what "
                                                         "changed since the copy before it (the entries copied and "
                                                         "the commit record), or all of the copy when it copied "
                                                         "everything."),
    "ramdisk_persist_full_copy": ("gauge", "1 when the last sync attempt copied everything with cp -a (no python3 "
                                           "for the helper's copy, and no rsync with ACL and xattr support), else 0."),
    "ramdisk_persist_copies": ("gauge", "Copies in the backing directory: complete ones (snap-*) and the older ones "
                                        "kept as reverse deltas of the syncs in place."),
    "ramdisk_persist_backing_bytes": ("gauge", "Bytes the backing directory held after the last successful sync."),
    "ramdisk_persist_backing_free_bytes": ("gauge", "Bytes available on the file system of the backing directory."),
    "ramdisk_persist_interval_seconds": ("gauge", "How often the persist timer syncs the mount."),
    "ramdisk_persist_last_services_down_seconds": ("gauge", "How long the last sync attempt held the services that "
                                                            "write the data stopped (persist.stop_services), stop and "
                                                            "start included."),
    "ramdisk_persist_services_left_down": ("gauge", "Services the last sync attempt stopped and could not start again "
                                                    "(0 when all started)."),
    "ramdisk_budget_limit_bytes": ("gauge", "The RAM budget (ramdisk_ram_budget) in bytes, as the last run of the role computed it."),
    "ramdisk_budget_planned_bytes": ("gauge", "What the policy's mounts and zram swap devices may take at most, as the last run of the role counted it."),
    "ramdisk_ram_storage_used_bytes": ("gauge", "Memory the collection's RAM storage takes now: used bytes of its mounts, memory of its zram devices."),
    "ramdisk_tmp_gate_fits_half_ram": ("gauge", "1 when the tmp-purpose path's usage fits in half of RAM."),
    "ramdisk_tmp_gate_fits_free_memory": ("gauge", "1 when the tmp-purpose path's usage fits in available memory plus free swap."),
    "ramdisk_tmp_gate_recommended": ("gauge", "1 when the /tmp gate would let the path go to RAM now."),
    "ramdisk_tmp_gate_skipped": ("gauge", "1 when the last run left the tmp-purpose path on disk because it did not fit "
                                          "(ramdisk_tmp_gate_action: skip), else 0."),
    "ramdisk_path_peak_used_bytes": ("gauge", "Most bytes seen in use at the policy path since the peak record began."),
    "ramdisk_path_peak_timestamp_seconds": ("gauge", "When the peak of the policy path was seen (Unix time)."),
    "ramdisk_peak_record_start_timestamp_seconds": ("gauge", "When the peak record began (Unix time)."),
    "ramdisk_metrics_last_run_timestamp_seconds": ("gauge", "When the collector last ran (Unix time)."),
    "ramdisk_metrics_collect_duration_seconds": ("gauge", "How long the collector's last run took."),
}


# ---------------------------------------------------------------------------------------------- parsers

def parse_mm_stat(text):
    """mm_stat as {field: int}; columns this kernel lacks are left out."""
    values = [int(word) for word in (text or "").split() if word.lstrip("-").isdigit()]
    return dict(zip(MM_STAT_FIELDS, values))


def parse_shell_vars(text):
    """NAME=value lines (the persist and zram records, the helper's status) as a dict; values may be
    quoted as the role's ``quote`` filter writes them. Comments and other lines are skipped."""
    result = {}
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, _sep, value = line.partition("=")
        if not re.match(r"^[A-Z_][A-Z0-9_]*$", name):
            continue
        try:
            words = shlex.split(value)
        except ValueError:
            continue
        result[name] = words[0] if words else ""
    return result


def snapshot_time(name):
    """Unix time in the name of a copy the persist helper made (snap-20261124T054848.123456789Z), else None."""
    match = _STAMP_RE.match(name or "")
    if not match:
        return None
    seconds = calendar.timegm(time.strptime(match.group(1), "%Y%m%dT%H%M%S"))
    fraction = float("0." + match.group(2)) if match.group(2) else 0.0
    return round(seconds + fraction, 3)


def number(value, default=None):
    """An int from a number or its text (ansible-core 2.17 and 2.18 write templated numbers as text)."""
    if value is None or value == "" or isinstance(value, bool):
        return default
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return default


# ---------------------------------------------------------------------------------------------- pure logic

def gate_verdict(usage, mem_total, mem_available, swap_free, ram_backed):
    """The /tmp rule of _gate.tmp_gate on live figures: fits in half of RAM; fits in available memory plus
    free swap (a RAM-backed path's own pages count as free, since moving it frees them)."""
    room = mem_available + swap_free + (usage if ram_backed else 0)
    half = usage <= mem_total // 2
    free = usage <= room
    return {"fits_half_ram": half, "fits_free_memory": free, "recommended": half and free}


def update_peaks(state, usages, now):
    """The peak record after a run: STATE is the earlier record (or None), USAGES {path: used bytes} of this
    run (None where it was not measured). Returns the new record; a peak only grows."""
    if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
        state = {"version": STATE_VERSION, "since": now, "paths": {}}
    paths = dict(state.get("paths") or {})
    for path, used in sorted(usages.items()):
        if used is None:
            continue
        old = paths.get(path)
        if not old or used > number(old.get("peak_bytes"), -1):
            paths[path] = {"peak_bytes": int(used), "peak_at": now}
    return {"version": STATE_VERSION, "since": state.get("since", now), "paths": paths}


def ram_storage_used(snapshot):
    """Memory the collection's RAM storage takes: used bytes of tmpfs, ramfs and brd mounts, plus the memory
    of its zram devices (a file system on zram is counted once, as its device)."""
    total = 0
    for mount in snapshot.get("mounts", []):
        if mount.get("mounted") and not (mount.get("device") or "").startswith("/dev/zram"):
            total += mount.get("used_bytes") or 0
    for device in snapshot.get("zram", []):
        total += device.get("mm_stat", {}).get("mem_used_total") or 0
    return total


def samples(snapshot):
    """The metric samples of a snapshot (see collect()): a list of (name, labels, value), in METRICS order."""
    out = []

    def add(name, labels, value):
        if value is not None:
            out.append((name, labels, value))

    for mount in snapshot.get("mounts", []):
        labels = {"path": mount["path"], "backend": mount.get("backend") or "", "purpose": mount.get("purpose") or "",
                  "device": mount.get("device") or ""}
        add("ramdisk_mount_mounted", labels, 1 if mount.get("mounted") else 0)
        if mount.get("mounted"):
            add("ramdisk_mount_size_bytes", labels, mount.get("size_bytes"))
            add("ramdisk_mount_used_bytes", labels, mount.get("used_bytes"))
            add("ramdisk_mount_free_bytes", labels, mount.get("free_bytes"))
            add("ramdisk_mount_inodes", labels, mount.get("inodes_total"))
            add("ramdisk_mount_inodes_used", labels, mount.get("inodes_used"))
    for device in snapshot.get("zram", []):
        labels = {"device": device["device"], "algorithm": device.get("algorithm") or "", "use": device.get("use") or ""}
        stat = device.get("mm_stat", {})
        add("ramdisk_zram_disksize_bytes", labels, device.get("disksize_bytes"))
        add("ramdisk_zram_original_bytes", labels, stat.get("orig_data_size"))
        add("ramdisk_zram_compressed_bytes", labels, stat.get("compr_data_size"))
        add("ramdisk_zram_memory_used_bytes", labels, stat.get("mem_used_total"))
        add("ramdisk_zram_memory_used_max_bytes", labels, stat.get("mem_used_max"))
        add("ramdisk_zram_memory_limit_bytes", labels, stat.get("mem_limit"))
        add("ramdisk_zram_same_pages", labels, stat.get("same_pages"))
        add("ramdisk_zram_huge_pages", labels, stat.get("huge_pages"))
        if stat.get("orig_data_size") and stat.get("compr_data_size"):
            add("ramdisk_zram_compression_ratio", labels, round(float(stat["orig_data_size"]) / stat["compr_data_size"], 4))
    for item in snapshot.get("persist", []):
        labels = {"path": item["path"], "backing": item["backing"]}
        add("ramdisk_persist_last_success_timestamp_seconds", labels, item.get("last_success"))
        add("ramdisk_persist_last_attempt_timestamp_seconds", labels, item.get("last_attempt"))
        if item.get("result") is not None:
            add("ramdisk_persist_last_success", labels, 1 if item["result"] == "ok" else 0)
            add("ramdisk_persist_last_refused", labels, 1 if item["result"] == "refused" else 0)
            add("ramdisk_persist_skipped_mounts", labels, len(item.get("skipped_mounts") or ()))
        add("ramdisk_persist_last_exit_code", labels, item.get("exit_code"))
        add("ramdisk_persist_last_duration_seconds", labels, item.get("duration"))
        add("ramdisk_persist_last_sync_bytes", labels, item.get("sync_bytes"))
        add("ramdisk_persist_last_sync_written_bytes", labels, item.get("written_bytes"))
        if item.get("copy_tool"):
            add("ramdisk_persist_full_copy", labels, 0 if item["copy_tool"] in ("rsync", "persist-delta") else 1)
        add("ramdisk_persist_copies", labels, item.get("copies"))
        add("ramdisk_persist_backing_bytes", labels, item.get("backing_bytes"))
        add("ramdisk_persist_backing_free_bytes", labels, item.get("backing_free_bytes"))
        add("ramdisk_persist_interval_seconds", labels, item.get("interval_seconds"))
        if item.get("services_stopped"):
            add("ramdisk_persist_last_services_down_seconds", labels, item.get("services_down_seconds"))
            add("ramdisk_persist_services_left_down", labels, len(item.get("services_left_down") or ()))
    host = snapshot.get("host", {})
    add("ramdisk_budget_limit_bytes", {}, host.get("budget_limit_bytes"))
    add("ramdisk_budget_planned_bytes", {}, host.get("budget_planned_bytes"))
    add("ramdisk_ram_storage_used_bytes", {}, ram_storage_used(snapshot))
    for gate in snapshot.get("gates", []):
        labels = {"path": gate["path"]}
        add("ramdisk_tmp_gate_skipped", labels, 1 if gate.get("skipped") else 0)
        if "recommended" not in gate:
            continue  # skipped, and its usage not scanned this time
        add("ramdisk_tmp_gate_fits_half_ram", labels, 1 if gate["fits_half_ram"] else 0)
        add("ramdisk_tmp_gate_fits_free_memory", labels, 1 if gate["fits_free_memory"] else 0)
        add("ramdisk_tmp_gate_recommended", labels, 1 if gate["recommended"] else 0)
    peaks = snapshot.get("peaks") or {}
    purposes = dict((p["path"], p.get("purpose") or "") for p in snapshot.get("policy_paths", []))
    for path, peak in sorted((peaks.get("paths") or {}).items()):
        labels = {"path": path, "purpose": purposes.get(path, "")}
        add("ramdisk_path_peak_used_bytes", labels, peak.get("peak_bytes"))
        add("ramdisk_path_peak_timestamp_seconds", labels, peak.get("peak_at"))
    add("ramdisk_peak_record_start_timestamp_seconds", {}, peaks.get("since"))
    add("ramdisk_metrics_last_run_timestamp_seconds", {}, snapshot.get("time"))
    add("ramdisk_metrics_collect_duration_seconds", {}, snapshot.get("duration"))
    order = list(METRICS)
    return sorted(out, key=lambda sample: order.index(sample[0]))


def _value(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


def render(sample_list):
    """Prometheus text exposition format: each family's HELP and TYPE once, then its samples."""
    lines = []
    current = None
    for name, labels, value in sample_list:
        if name != current:
            kind, text = METRICS[name]
            lines.append("# HELP %s %s" % (name, text.replace("\\", "\\\\").replace("\n", "\\n")))
            lines.append("# TYPE %s %s" % (name, kind))
            current = name
        if labels:
            pairs = ",".join('%s="%s"' % (key, "".join(_LABEL_ESCAPES.get(c, c) for c in str(labels[key])))
                             for key in sorted(labels))
            lines.append("%s{%s} %s" % (name, pairs, _value(value)))
        else:
            lines.append("%s %s" % (name, _value(value)))
    return "\n".join(lines) + "\n"


def human(num):
    """Bytes as a short binary figure: 0B, 512B, 1.5K, 64.0M, 2.0G (ramdisk-status; docs/metrics.md)."""
    return format_size(num, short=True, measured=True)


def age(seconds):
    """An age as 45s, 12m, 3h, 2d; '-' when unknown."""
    if seconds is None:
        return "-"
    seconds = max(0, int(seconds))
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size:
            return "%d%s" % (seconds // size, unit)
    return "%ds" % seconds


def _columns(rows):
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]


def _services_text(item):
    """What the last sync did to the services it stopped, for ramdisk-status."""
    if not item.get("services_stopped"):
        return ""
    if item.get("services_left_down"):
        return "; %s LEFT STOPPED" % " ".join(item["services_left_down"])
    down = item.get("services_down_seconds")
    return "; services down %s" % ("%.1fs" % down if down is not None else "?")


def table(snapshot):
    """The snapshot as the short text ramdisk-status prints."""
    now = snapshot.get("time") or 0
    persisted = dict((item["path"], item) for item in snapshot.get("persist", []))
    lines = []
    rows = [("PATH", "BACKEND", "PURPOSE", "SIZE", "USED", "USE%", "INODES", "PERSIST")]
    for mount in snapshot.get("mounts", []):
        item = persisted.get(mount["path"])
        if item is None:
            keep = "-"
        else:
            keep = "%s, last copy %s ago%s, %s %s, to %s%s%s" % (
                {"ok": "ok", "failed": "LAST SYNC FAILED", "refused": "LAST SYNC REFUSED"}.get(item.get("result"), "no sync yet"),
                age(now - item["last_success"]) if item.get("last_success") else "never",
                " (wrote %s)" % human(item["written_bytes"]) if item.get("written_bytes") is not None else "",
                item.get("copies", 0), "copy" if item.get("copies") == 1 else "copies", item["backing"],
                "; copies all, no rsync" if item.get("copy_tool") == "cp" else "",
                _services_text(item) + ("; left out mounts inside: %s" % ", ".join(item["skipped_mounts"])
                                        if item.get("skipped_mounts") else ""))
        if not mount.get("mounted"):
            rows.append((mount["path"], mount.get("backend") or "", mount.get("purpose") or "", "-", "-", "-", "-",
                         "NOT MOUNTED; " + keep if keep != "-" else "NOT MOUNTED"))
            continue
        size, used = mount.get("size_bytes") or 0, mount.get("used_bytes") or 0
        rows.append((mount["path"], mount.get("backend") or "", mount.get("purpose") or "", human(size), human(used),
                     "%d%%" % (100 * used // size) if size else "-",
                     "%d/%d" % (mount.get("inodes_used") or 0, mount.get("inodes_total") or 0) if mount.get("inodes_total") else "-",
                     keep))
    lines.append("RAM mounts")
    lines.extend(_columns(rows) if len(rows) > 1 else ["  (none in the policy)"])
    rows = [("DEVICE", "USE", "ALGORITHM", "DISKSIZE", "ORIGINAL", "COMPRESSED", "MEMORY", "LIMIT", "RATIO")]
    for device in snapshot.get("zram", []):
        stat = device.get("mm_stat", {})
        ratio = ("%.2f" % (float(stat["orig_data_size"]) / stat["compr_data_size"])
                 if stat.get("orig_data_size") and stat.get("compr_data_size") else "-")
        rows.append((device["device"], device.get("use") or "-", device.get("algorithm") or "-", human(device.get("disksize_bytes")),
                     human(stat.get("orig_data_size")), human(stat.get("compr_data_size")), human(stat.get("mem_used_total")),
                     human(stat.get("mem_limit")) if stat.get("mem_limit") else "none", ratio))
    lines.append("")
    lines.append("zram devices")
    lines.extend(_columns(rows) if len(rows) > 1 else ["  (none made by the collection)"])
    host = snapshot.get("host", {})
    lines.append("")
    lines.append("RAM storage uses %s now; the last run planned up to %s of a budget of %s." % (
        human(ram_storage_used(snapshot)), human(host.get("budget_planned_bytes")), human(host.get("budget_limit_bytes"))))
    for gate in snapshot.get("gates", []):
        if "recommended" not in gate:
            lines.append("/tmp gate for %s: skipped by the last run, so it is on disk." % gate["path"])
            continue
        lines.append("/tmp gate for %s: %s (fits in half of RAM: %s; in available memory and swap: %s)%s." % (
            gate["path"], "passes" if gate["recommended"] else "FAILS", "yes" if gate["fits_half_ram"] else "no",
            "yes" if gate["fits_free_memory"] else "no",
            "; skipped by the last run, so it is on disk" if gate.get("skipped") else ""))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------- the host

def _listdir(path):
    try:
        return os.listdir(path)
    except OSError:
        return []


def _read(path, default=None):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return default


def _statvfs(path):
    st = os.statvfs(path)
    return {"size_bytes": st.f_blocks * st.f_frsize, "used_bytes": (st.f_blocks - st.f_bfree) * st.f_frsize,
            "free_bytes": st.f_bavail * st.f_frsize, "inodes_total": st.f_files, "inodes_used": st.f_files - st.f_ffree}


def _scan(path, deadline):
    """Bytes allocated under PATH as du -s counts them, on its file system only; None past the deadline."""
    try:
        device = os.lstat(path).st_dev
    except OSError:
        return None
    total = 0
    stack = [path]
    while stack:
        if time.monotonic() > deadline:
            return None
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    st = entry.stat(follow_symlinks=False)
                    if st.st_dev != device:
                        continue
                    total += st.st_blocks * 512
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
        except OSError:
            continue
    return total + os.lstat(path).st_blocks * 512


def _top_mounts(mountinfo):
    """{mount point: the top mount there}."""
    top = {}
    for mount in mountinfo:
        top[mount["mount_point"]] = mount
    return top


def _zram_devices(conf_dir, top, swaps):
    devices = []
    try:
        names = sorted(name for name in os.listdir(conf_dir) if name.endswith(".conf"))
    except OSError:
        names = []
    swap_paths = set(swap["path"] for swap in swaps)
    seen = set()
    for name in names:
        record = parse_shell_vars(_read(os.path.join(conf_dir, name), ""))
        device = record.get("DEVICE", "")
        if not re.match(r"^zram\d+$", device) or device in seen:
            continue
        sys_dir = "/sys/block/%s" % device
        disksize = number((_read(sys_dir + "/disksize") or "").strip())
        if not disksize:
            continue  # gone, or reset: nothing to report
        seen.add(device)
        if "/dev/" + device in swap_paths:
            use = "swap"
        elif any(mount["source"] == "/dev/" + device for mount in top.values()):
            use = "fs"
        else:
            use = "none"
        devices.append({"device": device, "name": name[:-5], "use": use, "disksize_bytes": disksize,
                        "algorithm": parse_zram_algorithms(_read(sys_dir + "/comp_algorithm", "")).get("selected"),
                        "mm_stat": parse_mm_stat(_read(sys_dir + "/mm_stat", ""))})
    return devices


def _persisted(conf_dir, status_dir):
    items = []
    try:
        names = sorted(name for name in os.listdir(conf_dir) if name.endswith(".conf"))
    except OSError:
        names = []
    for name in names:
        token = name[:-5]
        conf = parse_shell_vars(_read(os.path.join(conf_dir, name), ""))
        if not conf.get("MOUNT") or not conf.get("BACKING"):
            continue
        backing = conf["BACKING"]
        status = parse_shell_vars(_read(os.path.join(status_dir, token + ".status"), ""))
        item = {"path": conf["MOUNT"], "backing": backing, "token": token,
                "interval_seconds": number(conf.get("INTERVAL_SECONDS"))}
        try:
            entries = os.listdir(backing)
        except OSError:
            entries = []
        item["copies"] = len([entry for entry in entries if _STAMP_RE.match(entry)])
        if ".persist-delta" in entries:
            # The older copies of the syncs in place: a reverse delta (undo-N) beside the record of its sync.
            delta = _listdir(os.path.join(backing, ".persist-delta"))
            item["copies"] += len([entry for entry in delta if entry.startswith("undo-")
                                   and "gen-%s.json" % entry[5:] in delta])
        try:
            current = os.readlink(os.path.join(backing, "current"))
        except OSError:
            current = None
        item["current"] = current
        item["last_success"] = snapshot_time(current)
        if status.get("RESULT"):
            item["result"] = status["RESULT"]
            item["exit_code"] = number(status.get("EXIT"))
            item["last_attempt"] = _float(status.get("FINISHED"))
            item["copy_tool"] = status.get("COPY_TOOL") or None
            item["refused_reason"] = status.get("REASON") or None
            try:
                item["skipped_mounts"] = json.loads(status.get("SKIPPED_MOUNTS") or "[]")
            except ValueError:
                item["skipped_mounts"] = []
            if status.get("SERVICES_STOPPED"):
                item["services_stopped"] = status["SERVICES_STOPPED"].split()
                item["services_down_seconds"] = _float(status.get("SERVICES_DOWN_SECONDS"))
                item["services_left_down"] = (status.get("SERVICES_LEFT_DOWN") or "").split()
            started = _float(status.get("STARTED"))
            if started is not None and item["last_attempt"] is not None:
                item["duration"] = round(item["last_attempt"] - started, 3)
        if status.get("LAST_OK_SNAPSHOT") and status.get("LAST_OK_SNAPSHOT") == current:
            # The helper's own end time of the sync that made the current copy.
            item["last_success"] = _float(status.get("LAST_OK_FINISHED")) or item["last_success"]
            item["sync_bytes"] = number(status.get("LAST_OK_BYTES"))
            item["written_bytes"] = number(status.get("LAST_OK_WRITTEN_BYTES"))
            item["backing_bytes"] = number(status.get("LAST_OK_BACKING_BYTES"))
        try:
            st = os.statvfs(backing)
            item["backing_free_bytes"] = st.f_bavail * st.f_frsize
        except OSError:
            pass
        items.append(item)
    return items


def _float(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def collect(config, state=None, scan=True):
    """Read the host's real state into a snapshot: mounts, zram, persist, gates, budget, peaks (the peak record
    updated with this run's figures when SCAN is true)."""
    started = time.monotonic()
    now = round(time.time(), 3)
    mountinfo = parse_mountinfo(_read("/proc/self/mountinfo", ""))
    top = _top_mounts(mountinfo)
    swaps = parse_swaps(_read("/proc/swaps", ""))
    meminfo = parse_meminfo(_read("/proc/meminfo", ""))
    snapshot = {"time": now, "mounts": [], "gates": [], "policy_paths": list(config.get("policy_paths") or [])}
    usages = {}
    for entry in config.get("mounts") or []:
        path = entry["path"]
        mount = top.get(path)
        item = {"path": path, "backend": entry.get("backend"), "purpose": entry.get("purpose"), "mounted": False}
        if mount is not None and is_ram_backed(mount["fstype"], mount["source"]):
            item.update({"mounted": True, "device": mount["source"], "fstype": mount["fstype"]})
            try:
                item.update(_statvfs(path))
            except OSError:
                item["mounted"] = False
        if item["mounted"]:
            usages[path] = item["used_bytes"]
            if entry.get("purpose") == "tmp":
                snapshot["gates"].append(dict(gate_verdict(
                    item["used_bytes"], meminfo.get("MemTotal", 0), meminfo.get("MemAvailable", 0),
                    meminfo.get("SwapFree", 0), True), path=path))
        snapshot["mounts"].append(item)
    if scan:
        deadline = time.monotonic() + SCAN_DEADLINE
        for entry in snapshot["policy_paths"]:
            if entry["path"] not in usages and os.path.isdir(entry["path"]):
                usages[entry["path"]] = _scan(entry["path"], deadline)
        snapshot["peaks"] = update_peaks(state, usages, now)
    else:
        snapshot["peaks"] = state if isinstance(state, dict) else {}
    for path in config.get("gate_skipped") or []:
        # Left on disk by the last run (ramdisk_tmp_gate_action: skip): whether it would fit now, from its usage.
        usage = usages.get(path)
        verdict = {}
        if usage is not None:
            verdict = gate_verdict(usage, meminfo.get("MemTotal", 0), meminfo.get("MemAvailable", 0),
                                   meminfo.get("SwapFree", 0), False)
        snapshot["gates"].append(dict(verdict, path=path, skipped=True))
    snapshot["zram"] = _zram_devices(config.get("zram_conf_dir") or paths.ZRAM_RECORD_DIR, top, swaps)
    snapshot["persist"] = _persisted(config.get("persist_conf_dir") or paths.PERSIST_CONF_DIR,
                                     config.get("persist_status_dir") or paths.PERSIST_STATUS_DIR)
    budget = config.get("budget") or {}
    snapshot["host"] = {"budget_limit_bytes": number(budget.get("limit_bytes")),
                        "budget_planned_bytes": number(budget.get("planned_bytes"))}
    snapshot["duration"] = round(time.monotonic() - started, 6)
    return snapshot


def write_atomic(path, text, mode=0o644):
    """Write TEXT to PATH through a temporary file in the same directory and a rename: a reader sees the old
    file or the new one, never a part. The temporary name does not end in .prom, so node_exporter skips it."""
    directory = os.path.dirname(path) or "."
    handle, temp = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, mode)
        os.rename(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise


def load_state(path):
    try:
        return json.loads(_read(path, "") or "null")
    except ValueError:
        return None


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[0] if argv else "collect"
    config_path = argv[argv.index("--config") + 1] if "--config" in argv else CONFIG
    if command not in ("collect", "status"):
        sys.stderr.write("usage: _metrics.py collect|status [--config FILE]\n")
        return 2
    config = load_state(config_path)
    if not isinstance(config, dict):
        sys.stderr.write("%s is missing or not JSON: run the ramdisk role with ramdisk_metrics: true\n" % config_path)
        return 1
    state_file = config.get("state_file") or PEAK_RECORD
    state = load_state(state_file)
    if command == "status":
        sys.stdout.write(table(collect(config, state, scan=False)))
        return 0
    snapshot = collect(config, state)
    os.makedirs(os.path.dirname(state_file), mode=0o755, exist_ok=True)
    write_atomic(state_file, json.dumps(snapshot["peaks"], indent=1, sort_keys=True) + "\n")
    write_atomic(os.path.join(config.get("textfile_dir") or "/var/lib/prometheus/node-exporter", PROM_NAME),
                 render(samples(snapshot)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
