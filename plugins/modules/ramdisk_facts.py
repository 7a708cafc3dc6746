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
  - Reads C(/proc), C(/sys) and C(statvfs) to report memory and swap, every RAM-backed mount that can hold data
    (tmpfs, ramfs, and file systems on C(/dev/zramN) or C(/dev/ramN)), what the kernel supports, and the usage
    of chosen paths.
  - Measures the usage of each path like C(du -sx) (hard links once, no symlinks followed, one file system) and
    counts its entries like C(find -xdev | wc -l), stopping after O(scan_timeout) seconds.
  - Judges whether C(/tmp) should go to tmpfs (C(tmp_gate)). C(/tmp) is scanned for that even when it is not in
    O(paths); it is then not added to C(paths).
  - Honours a cgroup memory limit. A container started with a memory limit (C(docker --memory), LXC without
    lxcfs) or a host under a slice with C(MemoryMax) cannot use more RAM than that, although C(/proc/meminfo) shows
    the whole machine. The limits of the cgroup of process 1 (the host's or the container's init, whose limits hold
    for every service there) and of each cgroup above it are read, from cgroup v2 (C(memory.max),
    C(memory.swap.max)) or from the cgroup v1 memory hierarchy (C(memory.limit_in_bytes),
    C(memory.memsw.limit_in_bytes)). When the tightest is below C(MemTotal), the memory figures, and the gate, use
    it. A limit above C(MemTotal), or missing files, change nothing.
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
  - In a container, C(/proc/meminfo) usually shows the whole machine's memory. When the container has a memory
    limit below it, C(memory.capped_by_cgroup) is true, C(memory.total_bytes) is that limit and
    C(memory.meminfo_total_bytes) keeps what C(/proc/meminfo) says.
  - A tmpfs sized in percent (C(size=50%)) is sized by the kernel from the machine's RAM, not from a cgroup limit.
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
          description:
            - Memory from /proc/meminfo in bytes (with free(1)'s used and buff/cache columns, as procps-ng 4
              computes them), capped by a cgroup memory limit below C(MemTotal).
            - C(cgroup_limit_bytes) is the tightest memory limit on the cgroup of process 1 or above it (null when
              there is none), C(cgroup_limit_set_by) the cgroup that sets it, as C(/proc/1/cgroup) names it, and
              C(cgroup_version) 1 or 2.
            - When that limit is below C(MemTotal), C(capped_by_cgroup) is true. C(total_bytes) is then the limit.
              C(available_bytes) is at most what is left under each limit (the limit, less the cgroup's usage, plus
              its inactive page cache). C(free_bytes) is at most the limit less the usage. C(buff_cache_bytes) and
              C(shmem_bytes) are the cgroup's own (from its C(memory.stat)), and C(used_bytes) is C(total_bytes)
              less C(available_bytes).
            - C(meminfo_total_bytes) and C(meminfo_available_bytes) are what /proc/meminfo says, capped or not.
          type: dict
          returned: always
          sample:
            total_bytes: 25274793984
            available_bytes: 20113534976
            free_bytes: 18013534976
            shmem_bytes: 4096
            used_bytes: 5161259008
            buff_cache_bytes: 2307473408
            cgroup_limit_bytes: null
            cgroup_limit_set_by: null
            cgroup_version: null
            capped_by_cgroup: false
            meminfo_total_bytes: 25274793984
            meminfo_available_bytes: 20113534976
        swap:
          description:
            - Swap totals and the devices from /proc/swaps.
            - C(cgroup_limit_bytes) is the tightest swap limit on the cgroup of process 1 or above it (cgroup v2
              C(memory.swap.max); on cgroup v1, C(memory.memsw.limit_in_bytes) less the memory limit), null when
              there is none. When it is below C(SwapTotal), C(capped_by_cgroup) is true and the totals are capped
              by it and by what the cgroup has left of it.
          type: dict
          returned: always
          sample:
            total_bytes: 4294963200
            free_bytes: 4294963200
            cgroup_limit_bytes: null
            capped_by_cgroup: false
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
            - C(xattr_bytes) is what the entries' extended attributes would take of a tmpfs's C(nr_inodes), which
              tmpfs counts as 1 KiB an inode (names, values and 41 bytes each; POSIX ACLs cost tmpfs nothing);
              null where the file system has no extended attributes.
            - C(user_xattrs) maps each C(user.*) extended attribute's name met in the tree to how many entries have
              it and the first of them (relative to the path), as a list of the two. tmpfs keeps those from Linux
              6.6 only, so a migrate before that would lose them; null where C(xattr_bytes) is.
            - C(below), for an empty RAM mount at the path, is what the directory under it holds on disk, with the
              same keys (C(exists), C(is_dir), C(empty), C(usage_bytes), C(inodes), ...), seen through a detached
              copy of the parent's mount that nobody else sees (open_tree(2), Linux 5.2); null otherwise, or when
              the kernel cannot show it. A migrated mount that a boot mounted empty still has to take that in.
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
              xattr_bytes: 0
              user_xattrs: {}
              complete: true
              errors: 0
              empty: false
              scan_seconds: 0.0012
              uid: 0
              gid: 0
              mode: "1777"
              below: null
        mounts:
          description:
            - Every RAM-backed mount that can hold data, as mounted now, in mount order.
            - Mounts at or under C(/proc) and C(/sys) are left out, as those trees are kernel interfaces, never
              storage. Container runtimes such as Docker hide kernel files there (C(/proc/acpi), C(/proc/keys),
              C(/sys/firmware)) under empty tmpfs mounts whose size, often half of RAM, is never used, and
              cgroup v1 puts its tree on a tmpfs at C(/sys/fs/cgroup).
            - C(size_bytes) and C(used_bytes) are what statvfs reports (C(usage_from=statvfs)). ramfs has no
              size limit and keeps no counters, so its C(size_bytes) is 0 and what it holds is measured from
              the tree into C(used_bytes) and C(inodes_used) (C(usage_from=tree)), like C(du -sx).
            - A ramfs this collection made also has C(declared_size_bytes), the C(max_size) it was made with
              (read from the collection's record of the mount), or null when it has no record.
            - When statvfs fails, the figures are null, C(usage_from) is null and C(complete) is false.
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
            - path: /srv/ramfs-cache
              fstype: ramfs
              source: ramfs
              kind: ramfs
              options: [rw, nosuid, nodev, relatime, mode=755]
              size_bytes: 0
              used_bytes: 1052672
              inodes_total: 0
              inodes_used: 3
              usage_from: tree
              complete: true
              declared_size_bytes: 67108864
        support:
          description:
            - What the kernel offers now. Loadable modules count unless module loading is disabled.
            - C(zram_loaded) is whether zram is there now (its control files exist), so that no C(modprobe zram) is
              needed; C(zram) is whether it is or can be loaded.
            - C(zram_algorithms) are those the first zram device offers; empty when there is no zram device.
            - C(tmpfs_quota) is whether tmpfs takes quotas (C(usrquota)); C(tmpfs_quota_from) says what told, the
              kernel's answer to an fsopen probe that mounts nothing, else its config, else its version.
            - C(tmpfs_user_xattrs) is whether tmpfs keeps C(user.*) extended attributes (Linux 6.6 and later, with
              CONFIG_TMPFS_XATTR).
          type: dict
          returned: always
          sample:
            tmpfs: true
            ramfs: true
            zram: true
            zram_loaded: true
            brd: false
            zram_algorithms: [lzo, lzo-rle, lz4, zstd]
            tmpfs_noswap: true
            tmpfs_quota: true
            tmpfs_quota_from: CONFIG_TMPFS_QUOTA=y in the kernel's config
            tmpfs_user_xattrs: true
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
        peaks:
          description:
            - The peak record of the metrics collector (the ramdisk role's C(ramdisk_metrics)), when the host
              has one - since when it has recorded, and the most bytes seen in use at each policy
              path with the time it was seen. Empty when the collector was never installed.
            - C(playbooks/survey.yml) judges /tmp on its peak as well as on its usage now.
          type: dict
          returned: always
          sample:
            since: 1763956800
            paths:
              /tmp: {peak_bytes: 734003200, peak_at: 1763989200}
        metrics_installed:
          description:
            - Whether the metrics collector of the ramdisk role (C(ramdisk_metrics)) is installed on the host.
          type: bool
          returned: always
          sample: false
        tmp_gate:
          description:
            - Whether /tmp should go to tmpfs. It fits when its usage is at most half of RAM and at most
              MemAvailable plus free swap (plus its own usage when /tmp is already RAM-backed).
            - RAM, MemAvailable and free swap are those of C(memory) and C(swap), capped by a cgroup limit; the
              first reason then says which cgroup's limit is the host's RAM.
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

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ramdisk.provision.plugins.module_utils._host_facts import TMP, gather


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
