#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: ramdisk_facts
short_description: Gather memory, RAM-backed mount and kernel support facts
version_added: 1.0.0
description:
  - Reads C(/proc), C(/sys) and C(statvfs) to report memory and swap, every RAM-backed mount (tmpfs, ramfs, and
    file systems on C(/dev/zramN) or C(/dev/ramN)), what the kernel supports, and the usage of chosen paths.
  - Measures the usage of each path like C(du -sx) (hard links once, no symlinks followed, one file system) and
    counts its entries like C(find -xdev | wc -l), stopping after O(scan_timeout) seconds.
  - Judges whether C(/tmp) should go to tmpfs (C(tmp_gate)). C(/tmp) is scanned for that even when it is not in
    O(paths); it is then not added to C(paths).
  - Reports every zram device with its algorithm, disk size, memory limit, C(mm_stat) and compression ratio,
    and whether it is swap, a mounted file system or unused.
  - Never changes the host and creates no zram or brd devices.
author: ramdisk.provision maintainers (@ramdisk-provision)
options:
  paths:
    description:
      - Absolute paths whose usage, owner, mode and mount are reported under C(paths).
      - A relative path is reported with C(exists=false) and an C(error).
    type: list
    elements: str
    default: ["/tmp"]
  scan_timeout:
    description:
      - Seconds to spend walking each path; when they pass, the figures are a lower bound and C(complete) is
        false.
    type: float
    default: 10
extends_documentation_fragment:
  - ramdisk.provision._attributes
  - ramdisk.provision._attributes.facts
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  facts:
    support: full
  platform:
    support: full
    platforms: linux
notes:
  - In a container, C(/proc/meminfo) usually shows the host's memory; C(memory.cgroup_limit_bytes) shows the
    container's limit when there is one.
"""

EXAMPLES = r"""
- name: Gather RAM disk facts for /tmp and a build directory
  ramdisk.provision.ramdisk_facts:
    paths:
      - /tmp
      - /var/cache/build
    scan_timeout: 5

- name: Show whether /tmp should go to tmpfs
  ansible.builtin.debug:
    msg: "{{ ansible_facts['ramdisk']['tmp_gate']['reasons'] }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts added to the host.
  returned: always
  type: dict
  contains:
    ramdisk:
      description: Memory, swap, RAM-backed mounts, kernel support, path usage and the /tmp gate.
      returned: always
      type: dict
      contains:
        memory:
          description: Memory from /proc/meminfo in bytes, and the cgroup memory limit if any.
          type: dict
          returned: always
          sample:
            total_bytes: 25274793984
            available_bytes: 20113534976
            free_bytes: 18013534976
            shmem_bytes: 4096
            cgroup_limit_bytes: null
        swap:
          description: Swap totals and the devices from /proc/swaps.
          type: dict
          returned: always
          sample:
            total_bytes: 4294963200
            free_bytes: 4294963200
            devices:
              - path: /dev/zram0
                type: partition
                size_bytes: 4294963200
                used_bytes: 0
                priority: 100
        paths:
          description:
            - One entry per path in O(paths), keyed by the path as given.
            - C(fstype), C(source) and C(mount_point) describe the file system holding the path; C(mountpoint)
              is true when the path itself is a mount point.
            - C(usage_bytes) and C(inodes) are null when the path does not exist or is not a directory.
          type: dict
          returned: always
          sample:
            /tmp:
              exists: true
              is_dir: true
              mountpoint: false
              mount_point: /
              fstype: ext4
              source: /dev/vda1
              usage_bytes: 1232896
              inodes: 41
              complete: true
              errors: 0
              empty: false
              scan_seconds: 0.0012
              uid: 0
              gid: 0
              mode: "1777"
        mounts:
          description:
            - Every RAM-backed mount now, in mount order.
            - ramfs reports no usage through statvfs, so its usage is read from the tree (C(usage_from=tree));
              otherwise C(usage_from=statvfs).
          type: list
          elements: dict
          returned: always
          sample:
            - path: /dev/shm
              fstype: tmpfs
              source: tmpfs
              kind: tmpfs
              options: [rw, nosuid, nodev, size=24682416k]
              size_bytes: 25274793984
              used_bytes: 0
              inodes_total: 6170604
              inodes_used: 1
              usage_from: statvfs
              complete: true
        support:
          description:
            - What the kernel offers now. Loadable modules count unless module loading is disabled.
            - C(zram_algorithms) are those the first zram device offers; empty when there is no zram device.
          type: dict
          returned: always
          sample:
            tmpfs: true
            ramfs: true
            zram: true
            brd: false
            zram_algorithms: [lzo, lzo-rle, lz4, zstd]
            tmpfs_noswap: true
            container: null
            kernel: 6.8.0-45-generic
        zram:
          description:
            - One entry per zram device (C(/sys/block/zramN)), in number order; empty when there is none.
            - C(disksize_bytes) is 0 for a device that is not initialised; C(mem_limit_bytes) is 0 for no limit.
            - C(mm_stat) holds the kernel's fields (Documentation/admin-guide/blockdev/zram.rst); sizes in bytes,
              C(same_pages), C(pages_compacted), C(huge_pages) and C(huge_pages_since) in pages, null where
              the kernel lacks the column.
            - C(compression_ratio) is C(orig_data_size / compr_data_size), null while nothing is stored.
            - C(used_as) is V(swap) (active swap), V(filesystem) (mounted), V(other) (held by another block
              device) or V(unused). C(mountpoint) is the first mount point, C(swap_priority) the swap priority.
          type: list
          elements: dict
          returned: always
          sample:
            - device: zram0
              path: /dev/zram0
              disksize_bytes: 4294967296
              algorithm: lz4
              algorithms_offered: [lzo-rle, lzo, lz4]
              mem_limit_bytes: 0
              mm_stat:
                orig_data_size: 1048576
                compr_data_size: 262144
                mem_used_total: 282624
                mem_limit: 0
                mem_used_max: 282624
                same_pages: 12
                pages_compacted: 0
                huge_pages: 0
                huge_pages_since: 0
                compression_ratio: 4.0
              compression_ratio: 4.0
              used_as: swap
              mountpoint: null
              swap_priority: 100
        brd:
          description:
            - The brd block RAM disks (C(/dev/ramN)) and the module's parameters; C(loaded) is false and
              C(devices) empty when brd is not loaded.
            - C(rd_nr) and C(rd_size_kib) are the module's parameters as loaded (disks, and KiB per disk).
            - Per device C(size_bytes), and C(used_as) V(filesystem) (mounted, C(mountpoint) is the first mount
              point), V(swap) or V(unused).
          type: dict
          returned: always
          sample:
            loaded: true
            rd_nr: 1
            rd_size_kib: 65536
            devices:
              - device: ram0
                path: /dev/ram0
                size_bytes: 67108864
                used_as: filesystem
                mountpoint: /srv/scratch
        tmp_gate:
          description:
            - Whether /tmp should go to tmpfs. It fits when its usage is at most half of RAM and at most
              MemAvailable plus free swap (plus its own usage when /tmp is already RAM-backed).
            - Also carries the figures it used.
          type: dict
          returned: always
          sample:
            path: /tmp
            usage_bytes: 1232896
            complete: true
            tmp_is_ram_backed: false
            fits_half_ram: true
            fits_free_memory_and_swap: true
            recommended: true
            reasons:
              - /tmp uses 1.2 MiB, which fits in half of RAM (11.8 GiB).
              - /tmp's 1.2 MiB fits in free memory and swap (22.7 GiB).
"""

import os
import re
import stat

from ansible.module_utils.basic import AnsibleModule

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
    return {
        "total_bytes": meminfo.get("MemTotal", 0),
        "available_bytes": available,
        "free_bytes": meminfo.get("MemFree", 0),
        "shmem_bytes": meminfo.get("Shmem", 0),
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


def mount_facts(mountinfo, scan_timeout):
    mounts = []
    for mount in mountinfo:
        if not is_ram_backed(mount["fstype"], mount["source"]):
            continue
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


def main():
    module = AnsibleModule(
        argument_spec=dict(
            paths=dict(type="list", elements="str", default=[TMP]),
            scan_timeout=dict(type="float", default=10.0),
        ),
        supports_check_mode=True,
    )
    if module.params["scan_timeout"] < 0:
        module.fail_json(msg="scan_timeout is %s: it must be 0 or more seconds." % module.params["scan_timeout"])
    if not os.path.exists("/proc/meminfo"):
        module.fail_json(msg="/proc/meminfo is missing: ramdisk_facts needs Linux with /proc mounted.")
    try:
        facts = gather(module.params["paths"], module.params["scan_timeout"])
    except (IOError, OSError) as exc:
        module.fail_json(msg="Could not read the host's memory and mount facts: %s." % exc)
    module.exit_json(changed=False, ansible_facts={"ramdisk": facts})


if __name__ == "__main__":
    main()
