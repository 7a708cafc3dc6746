# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Whether /tmp should go to tmpfs on a host, from measured figures.

The rule comes from a survey of 502 production servers: /tmp goes to tmpfs when its usage
fits in half of RAM, and it must at least fit in free memory (MemAvailable) plus free swap.
"""

from __future__ import annotations

from ansible_collections.ramdisk.provision.plugins.module_utils._size import format_size


def tmp_gate(usage_bytes, complete, mem_total, mem_available, swap_free, tmp_is_ram_backed, tmpfs_supported,
             path="/tmp", memory=None):
    """Return fits_half_ram, fits_free_memory_and_swap, recommended and reasons (sentences).

    PATH only names the directory in the reasons: the ramdisk role gates any tmp-purpose path the same way.
    MEMORY, ramdisk_facts' memory facts, only adds a reason when a cgroup's limit is the host's RAM.
    """
    usage = int(usage_bytes or 0)
    half_ram = int(mem_total) // 2
    room = int(mem_available) + int(swap_free)
    reasons = []
    if memory and memory.get("capped_by_cgroup"):
        reasons.append("RAM here is the memory limit of cgroup %s (%s), not the %s /proc/meminfo shows." % (
            memory.get("cgroup_limit_set_by"), format_size(int(mem_total)),
            format_size(int(memory.get("meminfo_total_bytes") or 0))))

    fits_half_ram = usage <= half_ram
    if fits_half_ram:
        reasons.append("%s uses %s, which fits in half of RAM (%s)." % (path, format_size(usage), format_size(half_ram)))
    else:
        reasons.append("%s uses %s, more than half of RAM (%s)." % (path, format_size(usage), format_size(half_ram)))

    if tmp_is_ram_backed:
        # Its pages are already counted as used memory, so moving it frees them first.
        room += usage
        reasons.append(
            "%s is already RAM-backed, so its %s is already in memory and is added back to the "
            "%s available plus %s free swap." % (path, format_size(usage), format_size(mem_available), format_size(swap_free))
        )
    fits_free = usage <= room
    if fits_free:
        reasons.append("%s's %s fits in free memory and swap (%s)." % (path, format_size(usage), format_size(room)))
    else:
        reasons.append(
            "%s's %s does not fit in free memory and swap (%s available, %s free swap)."
            % (path, format_size(usage), format_size(mem_available), format_size(swap_free))
        )

    if not complete:
        reasons.append(
            "The scan of %s stopped before the end, so its usage is at least %s; run again with a "
            "longer scan_timeout." % (path, format_size(usage))
        )
    if not tmpfs_supported:
        reasons.append("The kernel does not list tmpfs in /proc/filesystems, so %s cannot go to tmpfs." % path)

    recommended = bool(complete and tmpfs_supported and fits_half_ram and fits_free)
    return {
        "fits_half_ram": fits_half_ram,
        "fits_free_memory_and_swap": fits_free,
        "recommended": recommended,
        "reasons": reasons,
    }
