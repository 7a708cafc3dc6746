# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a host holds for RAM-backed storage: memory, swap, RAM mounts, zram, brd, kernel support and paths.

gather() is what the module ramdisk_facts returns as ansible_facts['ramdisk'], and what ramdisk_plan reads
once per run before it decides anything. It only reads /proc, /sys and statvfs.
"""

from __future__ import annotations

import json
import os
import re
import stat

from ansible_collections.ramdisk.provision.plugins.module_utils._gate import tmp_gate
from ansible_collections.ramdisk.provision.plugins.module_utils._procfs import (
    detect_container,
    is_ram_backed,
    kernel_at_least,
    merged_options,
    mount_for_path,
    parse_filesystems,
    parse_meminfo,
    parse_mountinfo,
    parse_swaps,
    ram_block_kind,
    ram_storage_mounts,
)
from ansible_collections.ramdisk.provision.plugins.module_utils._tree import is_empty_dir, tree_usage
from ansible_collections.ramdisk.provision.plugins.module_utils._zram import (
    device_number,
    device_usage,
    read_device,
    swap_devs,
)

TMP = "/tmp"
BRD_NAME = re.compile(r"^ram[0-9]+$")
_MODULE_FILE_SUFFIXES = (".ko", ".ko.xz", ".ko.zst", ".ko.gz")


def _read(path, default=None):
    try:
        with open(path, "r", errors="replace") as handle:
            return handle.read()
    except (IOError, OSError):
        return default


def _cgroup_limit():
    """Memory limit of this cgroup in bytes, or None when unlimited or unknown."""
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        text = _read(path)
        if text is None:
            continue
        text = text.strip()
        if text.isdigit() and int(text) < (1 << 62):
            return int(text)
        return None
    return None


def memory_facts(meminfo):
    available = meminfo.get("MemAvailable")
    if available is None:
        # Kernels before 3.14 lack MemAvailable; this is the usual estimate.
        available = meminfo.get("MemFree", 0) + meminfo.get("Buffers", 0) + meminfo.get("Cached", 0)
    total = meminfo.get("MemTotal", 0)
    return {
        "total_bytes": total,
        "available_bytes": available,
        "free_bytes": meminfo.get("MemFree", 0),
        "shmem_bytes": meminfo.get("Shmem", 0),
        # free(1)'s other columns, as procps-ng 4 computes them: used is what is not available, buff/cache
        # the buffers, the page cache and the reclaimable slab.
        "used_bytes": max(total - available, 0),
        "buff_cache_bytes": meminfo.get("Buffers", 0) + meminfo.get("Cached", 0) + meminfo.get("SReclaimable", 0),
        "cgroup_limit_bytes": _cgroup_limit(),
    }


def _module_present(release, names):
    """True when one of the module names is built in or has a file under /lib/modules/<release>."""
    for base in ("/lib/modules", "/usr/lib/modules"):
        directory = os.path.join(base, release)
        for listing in ("modules.builtin", "modules.dep"):
            text = _read(os.path.join(directory, listing))
            if not text:
                continue
            for line in text.splitlines():
                module_path = line.split(":", 1)[0].strip()
                filename = module_path.rsplit("/", 1)[-1]
                for name in names:
                    if any(filename == name + suffix for suffix in _MODULE_FILE_SUFFIXES):
                        return True
    return False


def support_facts(filesystems, release, container, zram_devices=()):
    modules_disabled = (_read("/proc/sys/kernel/modules_disabled", "0") or "0").strip() == "1"
    zram = bool(
        os.path.exists("/sys/class/zram-control")
        or zram_devices
        or os.path.exists("/sys/module/zram")
        or (not modules_disabled and _module_present(release, ("zram",)))
    )
    brd = bool(os.path.exists("/sys/module/brd") or (not modules_disabled and _module_present(release, ("brd",))))
    # The kernel offers the same algorithms on every device; the first one tells.
    algorithms = list(zram_devices[0]["algorithms_offered"]) if zram_devices else []
    return {
        "tmpfs": "tmpfs" in filesystems,
        "ramfs": "ramfs" in filesystems,
        "zram": zram,
        "brd": brd,
        "zram_algorithms": algorithms,
        "tmpfs_noswap": kernel_at_least(release, (6, 4)),
        "container": container,
        "kernel": release,
    }


def zram_facts(mountinfo, swaps):
    """One entry per zram device, in number order."""
    try:
        names = sorted((name for name in os.listdir("/sys/block") if device_number(name) is not None),
                       key=device_number)
    except OSError:
        names = []
    devs = swap_devs(swaps, os.stat)
    devices = []
    for name in names:
        state = read_device(name, _read)
        if state is None:
            continue
        try:
            holders = sorted(os.listdir(os.path.join("/sys/block", name, "holders")))
        except OSError:
            holders = []
        usage = device_usage(name, state["dev"], swaps, mountinfo, holders, swap_devs=devs)
        devices.append({
            "device": name,
            "path": "/dev/" + name,
            "disksize_bytes": state["disksize"],
            "algorithm": state["algorithm"],
            "algorithms_offered": state["algorithms"],
            "mem_limit_bytes": state["mem_limit"],
            "mm_stat": state["mm_stat"],
            "compression_ratio": state["mm_stat"]["compression_ratio"],
            "used_as": usage["used_as"],
            "mountpoint": usage["mountpoints"][0] if usage["mountpoints"] else None,
            "swap_priority": usage["swap_priority"],
        })
    return devices


def brd_facts(mountinfo, swaps):
    """brd's parameters and its /dev/ramN disks with what uses them."""
    params = "/sys/module/brd/parameters"
    loaded = os.path.isdir("/sys/module/brd")

    def param(name):
        value = (_read(os.path.join(params, name)) or "").strip()
        return int(value) if value.isdigit() else None

    try:
        names = sorted((name for name in os.listdir("/sys/block") if BRD_NAME.match(name)), key=lambda n: int(n[3:]))
    except OSError:
        names = []
    swapped = set(entry["path"] for entry in swaps)
    devices = []
    for name in names:
        path = "/dev/" + name
        sectors = (_read(os.path.join("/sys/block", name, "size")) or "0").strip()
        mountpoints = [entry["mount_point"] for entry in mountinfo if entry.get("source") == path]
        used_as = "swap" if path in swapped else "filesystem" if mountpoints else "unused"
        devices.append({
            "device": name,
            "path": path,
            "size_bytes": int(sectors) * 512 if sectors.isdigit() else 0,
            "used_as": used_as,
            "mountpoint": mountpoints[0] if mountpoints else None,
        })
    return {"loaded": loaded, "rd_nr": param("rd_nr") if loaded else None,
            "rd_size_kib": param("rd_size") if loaded else None, "devices": devices}


def container_facts():
    present = [path for path in ("/.dockerenv", "/run/.containerenv") if os.path.exists(path)]
    environ = _read("/proc/1/environ")
    return detect_container(environ, present, _read("/run/systemd/container"))


# Where the mount role records what it made (ramdisk_plan's RECORD_DIR): a ramfs's declared max_size is there.
RECORD_DIR = "/etc/ramdisk-provision/mounts"


def declared_sizes(record_dir=RECORD_DIR):
    """Path -> the size a mount was declared with when this collection made it (ramfs has none of its own)."""
    out = {}
    try:
        names = sorted(os.listdir(record_dir))
    except OSError:
        return out
    for name in names:
        try:
            record = json.loads(_read(os.path.join(record_dir, name)) or "")
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("path"), str) and isinstance(record.get("size_bytes"), int):
            out[record["path"]] = record["size_bytes"]
    return out


def mount_facts(mountinfo, scan_timeout):
    mounts = []
    declared = declared_sizes()
    for mount in ram_storage_mounts(mountinfo):
        kind = ram_block_kind(mount["source"]) or mount["fstype"]
        entry = {
            "path": mount["mount_point"],
            "fstype": mount["fstype"],
            "source": mount["source"],
            "kind": kind,
            "options": merged_options(mount),
            "size_bytes": None,
            "used_bytes": None,
            "inodes_total": None,
            "inodes_used": None,
            "usage_from": "statvfs",
            "complete": True,
        }
        try:
            vfs = os.statvfs(mount["mount_point"])
        except OSError:
            entry["usage_from"] = None
            entry["complete"] = False
            mounts.append(entry)
            continue
        entry["size_bytes"] = vfs.f_blocks * vfs.f_frsize
        entry["used_bytes"] = (vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize
        entry["inodes_total"] = vfs.f_files
        entry["inodes_used"] = vfs.f_files - vfs.f_ffree
        if mount["fstype"] == "ramfs":
            # ramfs keeps no counters; statvfs reports zeros.
            usage = tree_usage(mount["mount_point"], scan_timeout)
            entry["used_bytes"] = usage["usage_bytes"]
            entry["inodes_used"] = usage["inodes"]
            entry["usage_from"] = "tree"
            entry["complete"] = usage["complete"]
            entry["declared_size_bytes"] = declared.get(mount["mount_point"])
        mounts.append(entry)
    return mounts


def path_facts(path, mountinfo, scan_timeout):
    entry = {
        "exists": False, "is_dir": None, "mountpoint": False, "mount_point": None, "fstype": None,
        "source": None, "usage_bytes": None, "inodes": None, "complete": None, "errors": 0, "empty": None,
        "scan_seconds": None, "uid": None, "gid": None, "mode": None,
    }
    if not os.path.isabs(path):
        entry["error"] = "not an absolute path"
        return entry
    try:
        st = os.stat(path)
    except OSError:
        return entry
    real = os.path.realpath(path)
    holder = mount_for_path(mountinfo, real)
    entry.update(
        exists=True,
        is_dir=stat.S_ISDIR(st.st_mode),
        mountpoint=any(mount["mount_point"] == real for mount in mountinfo),
        mount_point=holder["mount_point"] if holder else None,
        fstype=holder["fstype"] if holder else None,
        source=holder["source"] if holder else None,
        uid=st.st_uid,
        gid=st.st_gid,
        mode="%04o" % stat.S_IMODE(st.st_mode),
    )
    if entry["is_dir"]:
        usage = tree_usage(real, scan_timeout)
        entry.update(
            usage_bytes=usage["usage_bytes"],
            inodes=usage["inodes"],
            complete=usage["complete"],
            errors=usage["errors"],
            scan_seconds=usage["seconds"],
            empty=is_empty_dir(real),
        )
    return entry


def gather(paths, scan_timeout):
    meminfo = parse_meminfo(_read("/proc/meminfo", ""))
    mountinfo = parse_mountinfo(_read("/proc/self/mountinfo", ""))
    release = os.uname()[2]
    memory = memory_facts(meminfo)
    swap = {
        "total_bytes": meminfo.get("SwapTotal", 0),
        "free_bytes": meminfo.get("SwapFree", 0),
        "devices": parse_swaps(_read("/proc/swaps", "")),
    }
    zram = zram_facts(mountinfo, swap["devices"])
    support = support_facts(parse_filesystems(_read("/proc/filesystems", "")), release, container_facts(), zram)

    path_entries = {}
    for path in paths:
        if path not in path_entries:
            path_entries[path] = path_facts(path, mountinfo, scan_timeout)
    tmp = None
    for path in paths:
        if os.path.isabs(path) and os.path.normpath(path) == TMP:
            tmp = path_entries[path]
            break
    if tmp is None:
        tmp = path_facts(TMP, mountinfo, scan_timeout)

    holder = mount_for_path(mountinfo, os.path.realpath(TMP))
    tmp_ram_backed = bool(holder and is_ram_backed(holder["fstype"], holder["source"]))
    # A missing /tmp has nothing to scan, so its (zero) usage is complete.
    tmp_complete = bool(tmp["complete"]) if tmp["is_dir"] else True
    gate = tmp_gate(
        usage_bytes=tmp["usage_bytes"] or 0,
        complete=tmp_complete,
        mem_total=memory["total_bytes"],
        mem_available=memory["available_bytes"],
        swap_free=swap["free_bytes"],
        tmp_is_ram_backed=tmp_ram_backed,
        tmpfs_supported=support["tmpfs"],
    )
    gate.update(path=TMP, usage_bytes=tmp["usage_bytes"] or 0, complete=tmp_complete,
                tmp_is_ram_backed=tmp_ram_backed)

    return {
        "memory": memory,
        "swap": swap,
        "paths": path_entries,
        "mounts": mount_facts(mountinfo, scan_timeout),
        "support": support,
        "tmp_gate": gate,
        "zram": zram,
        "brd": brd_facts(mountinfo, swap["devices"]),
    }
