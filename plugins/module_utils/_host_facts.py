# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a host holds for RAM-backed storage: memory, swap, RAM mounts, zram, brd, kernel support and paths.

gather() is what the module ramdisk_facts returns as ansible_facts['ramdisk'], and what ramdisk_plan reads
once per run before it decides anything. It only reads /proc, /sys and statvfs.
"""

from __future__ import annotations

import ctypes
import errno
import gzip
import json
import os
import platform
import re
import stat

from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths
from ansible_collections.ramdisk.provision.plugins.module_utils._gate import tmp_gate
from ansible_collections.ramdisk.provision.plugins.module_utils._procfs import (
    cgroup_directories,
    cgroup_mount,
    detect_container,
    is_ram_backed,
    kernel_at_least,
    merged_options,
    mount_for_path,
    parse_cgroup_bytes,
    parse_filesystems,
    parse_flat_keyed,
    parse_meminfo,
    parse_mountinfo,
    parse_proc_cgroup,
    parse_swaps,
    ram_block_kind,
    ram_storage_mounts,
)
from ansible_collections.ramdisk.provision.plugins.module_utils._tree import is_empty_dir, tree_usage
from ansible_collections.ramdisk.provision.plugins.module_utils._zram import (
    device_number,
    device_usage,
    kernel_zram_algorithms,
    max_swap_areas,
    parse_kernel_config,
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


# Per cgroup version: the files of a cgroup's limit and usage, and the memory.stat keys used. v1's memsw files
# count memory and swap together.
_CGROUP_FILES = {
    2: {"limit": "memory.max", "usage": "memory.current", "swap_limit": "memory.swap.max",
        "swap_usage": "memory.swap.current", "inactive_file": "inactive_file", "cache": ("file", "slab_reclaimable"),
        "shmem": "shmem"},
    1: {"limit": "memory.limit_in_bytes", "usage": "memory.usage_in_bytes", "swap_limit": "memory.memsw.limit_in_bytes",
        "swap_usage": "memory.memsw.usage_in_bytes", "inactive_file": "total_inactive_file", "cache": ("total_cache",),
        "shmem": "total_shmem"},
}
# cgroup v1 writes "no limit" as the largest page-aligned number (9223372036854771712 with 4 KiB pages).
_NO_LIMIT = 1 << 62


def _cgroup_level(version, cgroup, directory, read):
    """One cgroup's memory limit, usage and swap limit, or None when it sets no memory or swap limit."""
    names = _CGROUP_FILES[version]
    limit = parse_cgroup_bytes(read(os.path.join(directory, names["limit"])))
    limit = limit if limit is not None and limit < _NO_LIMIT else None
    swap_limit = parse_cgroup_bytes(read(os.path.join(directory, names["swap_limit"])))
    swap_limit = swap_limit if swap_limit is not None and swap_limit < _NO_LIMIT else None
    if version == 1:
        # memsw is memory plus swap, and means something only below a memory limit.
        swap_limit = max(swap_limit - limit, 0) if limit is not None and swap_limit is not None else None
    if limit is None and swap_limit is None:
        return None
    level = {"version": version, "cgroup": cgroup, "limit": limit, "swap_limit": swap_limit,
             "usage": parse_cgroup_bytes(read(os.path.join(directory, names["usage"]))), "swap_usage": None, "stat": {}}
    if swap_limit is not None:
        level["swap_usage"] = parse_cgroup_bytes(read(os.path.join(directory, names["swap_usage"])))
        if version == 1 and level["swap_usage"] is not None:
            level["swap_usage"] = max(level["swap_usage"] - (level["usage"] or 0), 0)
    if limit is not None:
        level["stat"] = parse_flat_keyed(read(os.path.join(directory, "memory.stat")))
    return level


def cgroup_memory(proc_cgroup, mountinfo, mem_total, swap_total, read=None):
    """The memory and swap limits of a cgroup and of its ancestors, and what is left under the tightest.

    PROC_CGROUP is /proc/PID/cgroup's text; the cgroup trees are found through MOUNTINFO (parsed). Both the
    cgroup v2 tree and the cgroup v1 memory hierarchy are read: the memory controller is on one of them. A
    missing or unreadable file counts as no limit. Returns limit_bytes (the tightest memory limit, even one
    above MEM_TOTAL), set_by (its cgroup), version, capped (it is below MEM_TOTAL), available_bytes,
    free_bytes, cache_bytes and shmem_bytes under the limits below MEM_TOTAL (None where not capped), and
    swap_limit_bytes, swap_capped and swap_free_bytes likewise against SWAP_TOTAL.
    """
    read = read or _read
    unified, controllers = parse_proc_cgroup(proc_cgroup or "")
    levels = []
    for version, path in ((2, unified), (1, controllers.get("memory"))):
        mount = cgroup_mount(mountinfo, version) if path else None
        if mount is None:
            continue
        for cgroup, directory in cgroup_directories(mount, path):
            level = _cgroup_level(version, cgroup, directory, read)
            if level is not None:
                levels.append(level)
    out = {"limit_bytes": None, "set_by": None, "version": None, "capped": False, "available_bytes": None,
           "free_bytes": None, "cache_bytes": None, "shmem_bytes": None,
           "swap_limit_bytes": None, "swap_capped": False, "swap_free_bytes": None}
    limited = [level for level in levels if level["limit"] is not None]
    if limited:
        tightest = min(limited, key=lambda level: level["limit"])
        out.update(limit_bytes=tightest["limit"], set_by=tightest["cgroup"], version=tightest["version"])
    binding = [level for level in limited if level["limit"] < mem_total]
    if binding:
        names = _CGROUP_FILES[tightest["version"]]
        rooms, frees = [], []
        for level in binding:
            if level["usage"] is None:
                rooms.append(level["limit"])
                frees.append(level["limit"])
                continue
            # What the kernel takes back before it fails a charge: the inactive page cache, as docker stats counts.
            reclaimable = level["stat"].get(_CGROUP_FILES[level["version"]]["inactive_file"], 0)
            rooms.append(min(max(level["limit"] - level["usage"] + reclaimable, 0), level["limit"]))
            frees.append(max(level["limit"] - level["usage"], 0))
        stat = tightest["stat"]
        cache = sum(stat[key] for key in names["cache"] if key in stat) if names["cache"][0] in stat else None
        out.update(capped=True, available_bytes=min(rooms), free_bytes=min(frees), cache_bytes=cache,
                   shmem_bytes=stat.get(names["shmem"]))
    swapped = [level for level in levels if level["swap_limit"] is not None]
    if swapped:
        out["swap_limit_bytes"] = min(level["swap_limit"] for level in swapped)
    swap_binding = [level for level in swapped if level["swap_limit"] < swap_total]
    if swap_binding:
        rooms = [max(level["swap_limit"] - (level["swap_usage"] or 0), 0) for level in swap_binding]
        out.update(swap_capped=True, swap_free_bytes=min(rooms))
    return out


def read_cgroup_memory(mountinfo, meminfo):
    """cgroup_memory() for the host's own services: the cgroup of process 1, not this module's.

    The module runs in the cgroup of the ssh session or of `docker exec`, and a session's limit (user.slice,
    a scope) is not the host's. Process 1 is the host's or the container's init: the limits above its cgroup
    are those of the whole host or container (docker --memory, an LXC or nspawn container, a slice's
    MemoryMax), which every service there, and a tmpfs's pages, are charged to. Where /proc/1 is hidden
    (hidepid), this process's own cgroup is the next best.
    """
    text = _read("/proc/1/cgroup") or _read("/proc/self/cgroup", "")
    return cgroup_memory(text, mountinfo, meminfo.get("MemTotal", 0), meminfo.get("SwapTotal", 0))


def memory_facts(meminfo, cgroup=None):
    """Memory in bytes as free(1) shows it, capped by the cgroup's limit when CGROUP (cgroup_memory()) has one
    below MemTotal: such a host cannot use more RAM than that whatever /proc/meminfo says."""
    available = meminfo.get("MemAvailable")
    if available is None:
        # Kernels before 3.14 lack MemAvailable; this is the usual estimate.
        available = meminfo.get("MemFree", 0) + meminfo.get("Buffers", 0) + meminfo.get("Cached", 0)
    total = meminfo.get("MemTotal", 0)
    cgroup = cgroup or {}
    facts = {
        "total_bytes": total,
        "available_bytes": available,
        "free_bytes": meminfo.get("MemFree", 0),
        "shmem_bytes": meminfo.get("Shmem", 0),
        # free(1)'s other columns, as procps-ng 4 computes them: used is what is not available, buff/cache
        # the buffers, the page cache and the reclaimable slab.
        "used_bytes": max(total - available, 0),
        "buff_cache_bytes": meminfo.get("Buffers", 0) + meminfo.get("Cached", 0) + meminfo.get("SReclaimable", 0),
        "cgroup_limit_bytes": cgroup.get("limit_bytes"),
        "cgroup_limit_set_by": cgroup.get("set_by"),
        "cgroup_version": cgroup.get("version"),
        "capped_by_cgroup": bool(cgroup.get("capped")),
        "meminfo_total_bytes": total,
        "meminfo_available_bytes": available,
    }
    if cgroup.get("capped"):
        limit = cgroup["limit_bytes"]
        facts["total_bytes"] = limit
        facts["available_bytes"] = min(available, cgroup["available_bytes"])
        facts["free_bytes"] = min(facts["free_bytes"], cgroup["free_bytes"])
        # The cgroup's own page cache and shared memory where memory.stat gives them, else the host's, capped.
        for key, found in (("buff_cache_bytes", cgroup.get("cache_bytes")), ("shmem_bytes", cgroup.get("shmem_bytes"))):
            facts[key] = min(found if found is not None else facts[key], limit)
        facts["used_bytes"] = max(limit - facts["available_bytes"], 0)
    return facts


def swap_facts(meminfo, swaps_text, cgroup=None):
    """Swap totals and devices; totals capped by a cgroup's swap limit below SwapTotal."""
    cgroup = cgroup or {}
    total, free = meminfo.get("SwapTotal", 0), meminfo.get("SwapFree", 0)
    if cgroup.get("swap_capped"):
        total = cgroup["swap_limit_bytes"]
        free = min(free, cgroup["swap_free_bytes"], total)
    return {
        "total_bytes": total,
        "free_bytes": free,
        "devices": parse_swaps(swaps_text),
        "cgroup_limit_bytes": cgroup.get("swap_limit_bytes"),
        "capped_by_cgroup": bool(cgroup.get("swap_capped")),
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


def kernel_config(release):
    """The running kernel's build config as {option: value}, or None where no copy of it can be read."""
    try:
        with gzip.open("/proc/config.gz", "rt", errors="replace") as handle:
            return parse_kernel_config(handle.read())
    except (IOError, OSError, EOFError, ValueError):
        pass
    for pattern in ("/boot/config-%s", "/lib/modules/%s/config", "/usr/lib/modules/%s/config"):
        text = _read(pattern % release)
        if text:
            return parse_kernel_config(text)
    return None


# fsopen(2) and fsconfig(2): the same numbers on every architecture since Linux 5.2, but alpha's.
_FSOPEN, _FSCONFIG, _FSCONFIG_SET_FLAG = 430, 431, 0


def probe_tmpfs_flag(name):
    """Whether the kernel's tmpfs takes the mount option NAME (a flag), or None when it cannot be asked.

    fsopen("tmpfs") makes a file system context and fsconfig() parses the one option into it; closing it drops
    the context. No superblock is made and nothing is mounted: the host does not change.
    """
    if platform.system() != "Linux" or platform.machine().startswith("alpha"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.syscall(_FSOPEN, b"tmpfs", 0)
        if fd < 0:
            return None
        try:
            if libc.syscall(_FSCONFIG, fd, _FSCONFIG_SET_FLAG, name.encode(), None, 0) == 0:
                return True
            return False if ctypes.get_errno() == errno.EINVAL else None
        finally:
            os.close(fd)
    except (OSError, AttributeError):
        return None


def tmpfs_quota_support(release, config, probe=probe_tmpfs_flag):
    """(whether tmpfs takes usrquota here, what says so): the kernel when it can be asked without a change, else
    its config (CONFIG_TMPFS_QUOTA), else its version (6.6 brought tmpfs quotas)."""
    if not kernel_at_least(release or "", (6, 6)):
        return False, "Linux %s is older than 6.6" % release
    answer = probe("usrquota") if probe else None
    if answer is not None:
        return answer, "the kernel %s usrquota for tmpfs (fsopen probe)" % ("takes" if answer else "refuses")
    if config is not None:
        if config.get("CONFIG_TMPFS_QUOTA") == "y":
            return True, "CONFIG_TMPFS_QUOTA=y in the kernel's config"
        return False, "CONFIG_TMPFS_QUOTA is not set in the kernel's config"
    return True, "Linux %s is 6.6 or later (its config could not be read)" % release


def support_facts(filesystems, release, container, zram_devices=(), config=None, crypto_text=None,
                  probe=probe_tmpfs_flag):
    """What the kernel offers. CONFIG: kernel_config(); CRYPTO_TEXT: /proc/crypto (both read here when None);
    PROBE: probe_tmpfs_flag, or None not to ask the kernel."""
    modules_disabled = (_read("/proc/sys/kernel/modules_disabled", "0") or "0").strip() == "1"
    zram_loaded = os.path.exists(_host_paths.ZRAM_CONTROL)
    zram = bool(
        zram_loaded
        or zram_devices
        or os.path.exists("/sys/module/zram")
        or (not modules_disabled and _module_present(release, ("zram",)))
    )
    brd = bool(os.path.exists(_host_paths.BRD_MODULE) or (not modules_disabled and _module_present(release, ("brd",))))
    # The kernel offers the same algorithms on every device; the first one tells.
    algorithms = list(zram_devices[0]["algorithms_offered"]) if zram_devices else []
    if config is None:
        config = kernel_config(release)
    if algorithms:
        offered, offered_from = algorithms, "the comp_algorithm of %s" % zram_devices[0]["device"]
    else:
        # No device to ask (making one to ask would change the host): the kernel's config, or its crypto API.
        offered, offered_from = kernel_zram_algorithms(
            release, config, crypto_text if crypto_text is not None else _read("/proc/crypto", ""),
            None if modules_disabled else (lambda name: _module_present(release, (name,))))
    swap_areas_max, swap_areas_basis = max_swap_areas(release, config)
    tmpfs_quota, tmpfs_quota_from = tmpfs_quota_support(release, config, probe if "tmpfs" in filesystems else None)
    return {
        "tmpfs": "tmpfs" in filesystems,
        "ramfs": "ramfs" in filesystems,
        "zram": zram,
        # zram is there now (built in, or its module loaded): no modprobe first.
        "zram_loaded": zram_loaded,
        "brd": brd,
        "zram_algorithms": algorithms,
        # What zram takes here even with no device yet, and what says so ([] and None where nothing can tell).
        "zram_algorithms_offered": list(offered),
        "zram_algorithms_from": offered_from,
        # The most swap areas the kernel takes (MAX_SWAPFILES), worked out: see _zram.SWAP_TYPES.
        "swap_areas_max": swap_areas_max,
        "swap_areas_basis": swap_areas_basis,
        "tmpfs_noswap": kernel_at_least(release, (6, 4)),
        "tmpfs_quota": tmpfs_quota,
        "tmpfs_quota_from": tmpfs_quota_from,
        # user.* extended attributes on tmpfs came with Linux 6.6; before, tmpfs keeps only trusted.* and security.*.
        "tmpfs_user_xattrs": kernel_at_least(release, (6, 6)) and (config is None or config.get("CONFIG_TMPFS_XATTR") == "y"),
        "container": container,
        "kernel": release,
    }


# Where the zram role records the device each entry got (its __zram_conf_dir; ramdisk_plan's ZRAM_RECORD_DIR).
ZRAM_RECORD_DIR = _host_paths.ZRAM_RECORD_DIR


def zram_records(record_dir=ZRAM_RECORD_DIR):
    """zramN -> the name of the zram_devices entry whose record (<name>.conf, DEVICE=zramN) names it."""
    out = {}
    try:
        names = sorted(name for name in os.listdir(record_dir) if name.endswith(".conf"))
    except OSError:
        return out
    for name in names:
        for line in (_read(os.path.join(record_dir, name)) or "").splitlines():
            if line.startswith("DEVICE=") and device_number(line[7:].strip()) is not None:
                out[line[7:].strip()] = name[:-5]
    return out


def zram_facts(mountinfo, swaps, records=None):
    """One entry per zram device, in number order; RECORDS: zram_records(), read here when None."""
    try:
        names = sorted((name for name in os.listdir("/sys/block") if device_number(name) is not None),
                       key=device_number)
    except OSError:
        names = []
    devs = swap_devs(swaps, os.stat)
    records = zram_records() if records is None else records
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
            # The zram_devices entry the zram role made it for, by its records; None for a device it did not make.
            "entry": records.get(name),
        })
    return devices


def brd_facts(mountinfo, swaps):
    """brd's parameters and its /dev/ramN disks with what uses them."""
    params = _host_paths.BRD_PARAMETERS
    loaded = os.path.isdir(_host_paths.BRD_MODULE)

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
RECORD_DIR = _host_paths.RECORD_DIR


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


def _directory_facts(path, scan_timeout):
    """What a migrate into RAM needs of the directory at PATH: its usage, with what its extended attributes take
    of a tmpfs's nr_inodes (charged there), and whether it is empty."""
    usage = tree_usage(path, scan_timeout, xattrs=True)
    return {"usage_bytes": usage["usage_bytes"], "inodes": usage["inodes"], "xattr_bytes": usage["xattr_bytes"],
            "user_xattrs": usage["user_xattrs"],
            "complete": usage["complete"], "errors": usage["errors"], "scan_seconds": usage["seconds"],
            "empty": is_empty_dir(path)}


_OPEN_TREE, _OPEN_TREE_CLONE = 428, 1


def clone_parent(path):
    """A file descriptor of a detached, non-recursive bind of PATH's parent (open_tree(2) with OPEN_TREE_CLONE,
    Linux 5.2, CAP_SYS_ADMIN): nobody sees it, it goes when the descriptor is closed, and the mounts under the
    parent, the one at PATH among them, are not in it. None when the kernel cannot give one."""
    if platform.system() != "Linux" or platform.machine().startswith("alpha"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.syscall(_OPEN_TREE, -100, os.path.dirname(path).encode("utf-8", "surrogateescape"),
                          _OPEN_TREE_CLONE | getattr(os, "O_CLOEXEC", 0))
    except (OSError, AttributeError):
        return None
    return fd if fd >= 0 else None


def disk_below(path, scan_timeout, clone=clone_parent):
    """What lies on disk under the mount at PATH (absolute, real), seen through clone_parent(): the host's mount
    table does not change. The facts path_facts() gives a directory (exists, is_dir, uid, gid, mode, usage_bytes,
    inodes, xattr_bytes, complete, errors, empty), or None when it cannot be seen."""
    fd = clone(path)
    if fd is None:
        return None
    try:
        below = "/proc/self/fd/%d/%s" % (fd, os.path.basename(path))
        try:
            st = os.lstat(below)
        except OSError:
            return {"exists": False, "is_dir": None, "empty": None}
        out = {"exists": True, "is_dir": stat.S_ISDIR(st.st_mode), "uid": st.st_uid, "gid": st.st_gid,
               "mode": "%04o" % stat.S_IMODE(st.st_mode), "empty": None}
        if out["is_dir"]:
            out.update(_directory_facts(below, scan_timeout))
        return out
    finally:
        os.close(fd)


def path_facts(path, mountinfo, scan_timeout):
    """What is at PATH. BELOW: for an empty RAM mount, what the directory under it holds on disk (disk_below()),
    which a migrated mount that a boot mounted from /etc/fstab and nothing filled still has to take in."""
    entry = {
        "exists": False, "is_dir": None, "mountpoint": False, "mount_point": None, "fstype": None,
        "source": None, "usage_bytes": None, "inodes": None, "complete": None, "errors": 0, "empty": None,
        "xattr_bytes": None, "user_xattrs": None, "scan_seconds": None, "uid": None, "gid": None, "mode": None, "below": None,
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
        entry.update(_directory_facts(real, scan_timeout))
        ram_backed = bool(holder) and is_ram_backed(holder["fstype"], holder["source"])
        if entry["empty"] and entry["mountpoint"] and real != "/" and ram_backed:
            entry["below"] = disk_below(real, scan_timeout)
    return entry


def peak_facts(text):
    """The metrics collector's peak record (ramdisk_metrics), if the host has one: when it began and the most
    bytes seen in use at each policy path since. {} when there is none, or it is not version 1."""
    try:
        record = json.loads(text) if text else None
    except ValueError:
        return {}
    if not isinstance(record, dict) or record.get("version") != 1 or not isinstance(record.get("paths"), dict):
        return {}
    paths = {}
    for path, peak in record["paths"].items():
        if isinstance(peak, dict) and isinstance(peak.get("peak_bytes"), int):
            paths[path] = {"peak_bytes": peak["peak_bytes"], "peak_at": peak.get("peak_at")}
    return {"since": record.get("since"), "paths": paths}


def gather(paths, scan_timeout, mountinfo=None):
    """The facts of PATHS and the host. MOUNTINFO: the mount table the caller read (parse_mountinfo()), for facts
    and decisions made from one reading of it; read here when None."""
    meminfo = parse_meminfo(_read("/proc/meminfo", ""))
    if mountinfo is None:
        mountinfo = parse_mountinfo(_read("/proc/self/mountinfo", ""))
    release = os.uname()[2]
    cgroup = read_cgroup_memory(mountinfo, meminfo)
    memory = memory_facts(meminfo, cgroup)
    swap = swap_facts(meminfo, _read("/proc/swaps", ""), cgroup)
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
        memory=memory,
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
        "peaks": peak_facts(_read(_host_paths.METRICS_PEAK, "")),
        # Whether an earlier run installed the metrics collector: the role removes it when ramdisk_metrics is off.
        "metrics_installed": os.path.exists(_host_paths.METRICS_CONFIG),
        "zram": zram,
        "brd": brd_facts(mountinfo, swap["devices"]),
    }
