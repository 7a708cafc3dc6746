# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fleet survey's arithmetic: the 502-server /tmp analysis, run on any list of hosts.

Each host is a dict of the survey's columns in bytes (``SURVEY_COLUMNS``), plus ``complete`` (the
/tmp scan ended before its time limit) and ``groups``. From them: the survey's statistics (max, min,
mean, median, mode), its bands (shares of hosts under a /tmp size, with at least a RAM size, with
swap) and its two verdicts per host, decided by the same rule as the /tmp gate (``_gate.tmp_gate``):
/tmp fits in half of RAM; /tmp fits in available memory plus free swap. Hosts that fail the second
are the outliers. A host under a cgroup memory limit below its RAM (a container, a limited slice) has
that limit as its RAM, as ramdisk_facts reports it (``mem_limited_by`` names the cgroup). Plain data
in, plain data out: unit tested without a host.
"""

from __future__ import annotations

from ansible_collections.ramdisk.provision.plugins.module_utils._bench import median
from ansible_collections.ramdisk.provision.plugins.module_utils._gate import tmp_gate
from ansible_collections.ramdisk.provision.plugins.module_utils._plan_core import plan_summary
from ansible_collections.ramdisk.provision.plugins.module_utils._size import format_size

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

# The survey's columns, in its order: /tmp as `du -s` counts it, then free's memory and swap columns.
SURVEY_COLUMNS = (
    "host", "tmp_bytes", "tmp_inodes", "mem_total", "mem_used", "mem_free", "mem_shared", "mem_buff_cache",
    "mem_available", "swap_total", "swap_used", "swap_free",
)

# The write-up's bands. Sizes as du -h and free -h print them (1 MB = 1024 KiB).
TMP_BANDS = (("1 MB", MIB), ("10 MB", 10 * MIB), ("100 MB", 100 * MIB), ("1 GB", GIB), ("4.8 GB", int(4.8 * GIB)))
RAM_BANDS = (("2 GB", 2 * GIB), ("4 GB", 4 * GIB), ("8 GB", 8 * GIB))

# The figures the write-up gives statistics for.
STATISTICS = (("/tmp usage", "tmp_bytes"), ("total memory", "mem_total"), ("total swap", "swap_total"),
              ("swap used", "swap_used"))


def mode(values):
    """The value most hosts share; of several as common, the smallest. None when no value repeats
    (every host its own figure: a mode would name one host at random)."""
    counts = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    if not counts:
        return None
    best = max(counts.values())
    if best == 1 and len(values) > 1:
        return None
    return min(value for value, count in counts.items() if count == best)


def statistics(values):
    values = [value for value in values if value is not None]
    if not values:
        return {"hosts": 0, "max": None, "min": None, "mean": None, "median": None, "mode": None}
    return {"hosts": len(values), "max": max(values), "min": min(values), "mean": sum(values) / float(len(values)),
            "median": median(values), "mode": mode(values)}


def _share(count, total):
    return round(100.0 * count / total, 1) if total else None


def bands(hosts):
    """[(what, count, share %)] for each band of the write-up. A /tmp band counts hosts strictly under
    its size; a RAM band hosts with at least that much."""
    total = len(hosts)
    rows = []
    for name, limit in TMP_BANDS:
        count = sum(1 for host in hosts if host["tmp_bytes"] < limit)
        rows.append(("/tmp under %s" % name, count, _share(count, total)))
    for name, limit in RAM_BANDS:
        count = sum(1 for host in hosts if host["mem_total"] >= limit)
        rows.append(("at least %s of RAM" % name, count, _share(count, total)))
    count = sum(1 for host in hosts if host["swap_total"] > 0)
    rows.append(("some swap", count, _share(count, total)))
    return rows


def verdict(host, tmp_is_ram_backed=False):
    """The two verdicts for one host, by the /tmp gate's own rule, with its reasons."""
    memory = None
    if host.get("mem_limited_by"):
        memory = {"capped_by_cgroup": True, "cgroup_limit_set_by": host["mem_limited_by"],
                  "meminfo_total_bytes": host.get("mem_meminfo_total")}
    gate = tmp_gate(host["tmp_bytes"], host.get("complete", True), host["mem_total"], host["mem_available"],
                    host["swap_free"], tmp_is_ram_backed, True, memory=memory)
    found = {"host": host["host"], "fits_half_ram": gate["fits_half_ram"],
             "fits_free_memory_and_swap": gate["fits_free_memory_and_swap"], "reasons": gate["reasons"],
             "lower_bound": not host.get("complete", True)}
    # History, where the metrics collector keeps a peak record: the same rule on the most /tmp held since.
    peak = host.get("tmp_peak_bytes")
    if peak is not None:
        # Where /tmp is RAM-backed already, only what it holds now is in memory (and would be freed), not its peak.
        available = host["mem_available"] + (host["tmp_bytes"] if tmp_is_ram_backed else 0)
        at_peak = tmp_gate(max(peak, host["tmp_bytes"]), True, host["mem_total"], available,
                           host["swap_free"], False, True, memory=memory)
        found.update(peak_fits_half_ram=at_peak["fits_half_ram"],
                     peak_fits_free_memory_and_swap=at_peak["fits_free_memory_and_swap"])
    return found


def verdict_summary(hosts):
    """Counts and shares of the two verdicts, the outliers (hosts whose /tmp does not fit in available
    memory plus free swap) with their figures, and the hosts whose figure is only a lower bound."""
    total = len(hosts)
    # A host judged once (its "verdict", as survey_report keeps it) is not judged again for each group.
    judged = [(host, host.get("verdict") or verdict(host, host.get("tmp_is_ram_backed", False))) for host in hosts]
    half = sum(1 for _host, found in judged if found["fits_half_ram"])
    free = sum(1 for _host, found in judged if found["fits_free_memory_and_swap"])
    outliers = [{"host": host["host"], "tmp_bytes": host["tmp_bytes"], "mem_total": host["mem_total"],
                 "mem_available": host["mem_available"], "swap_free": host["swap_free"],
                 "fits_half_ram": found["fits_half_ram"], "mem_limited_by": host.get("mem_limited_by")}
                for host, found in judged if not found["fits_free_memory_and_swap"]]
    with_peak = [(host, found) for host, found in judged if "peak_fits_half_ram" in found]
    peak_half = sum(1 for _host, found in with_peak if found["peak_fits_half_ram"])
    peak_free = sum(1 for _host, found in with_peak if found["peak_fits_free_memory_and_swap"])
    return {
        "hosts": total,
        "with_peak": len(with_peak),
        "peak_fits_half_ram": peak_half, "peak_fits_half_ram_share": _share(peak_half, len(with_peak)),
        "peak_fits_free_memory_and_swap": peak_free,
        "peak_fits_free_memory_and_swap_share": _share(peak_free, len(with_peak)),
        "peak_outliers": sorted(host["host"] for host, found in with_peak if not found["peak_fits_half_ram"]),
        "fits_half_ram": half, "fits_half_ram_share": _share(half, total),
        "fits_free_memory_and_swap": free, "fits_free_memory_and_swap_share": _share(free, total),
        "outliers": sorted(outliers, key=lambda row: (-row["tmp_bytes"], row["host"])),
        "lower_bound": sorted(host["host"] for host in hosts if not host.get("complete", True)),
    }


def summary(hosts):
    """Everything the report says of a set of hosts: statistics, bands and verdicts."""
    return {
        "statistics": dict((name, statistics([host[column] for host in hosts])) for name, column in STATISTICS),
        "bands": bands(hosts),
        "verdicts": verdict_summary(hosts),
    }


def by_group(hosts):
    """summary() per inventory group (a host counts in each of its groups), 'all' first."""
    groups = {}
    for host in hosts:
        for group in host.get("groups") or ["all"]:
            groups.setdefault(group, []).append(host)
    groups.setdefault("all", list(hosts))
    return [(group, summary(groups[group])) for group in sorted(groups, key=lambda name: (name != "all", name))]


def csv_text(hosts):
    """survey.csv: one row per host, the survey's columns in its order, in bytes."""
    lines = [",".join(SURVEY_COLUMNS)]
    for host in sorted(hosts, key=lambda row: row["host"]):
        cells = []
        for column in SURVEY_COLUMNS:
            value = host.get(column)
            text = "" if value is None else str(value)
            if any(char in text for char in ',"\n'):
                text = '"%s"' % text.replace('"', '""')
            cells.append(text)
        lines.append(",".join(cells))
    return "\n".join(lines) + "\n"


def host_row(host, plan, groups=None):
    """The survey's row of one host from what ramdisk_plan returned for it (its facts, and the plan of
    its policy): the survey's columns in bytes, whether the /tmp scan was complete, the groups, what the
    kernel supports, the RAM mounts already there, and the usage of every path the policy names."""
    facts = (plan.get("ansible_facts") or {}).get("ramdisk") or {}
    memory, swap = facts.get("memory") or {}, facts.get("swap") or {}
    gate = facts.get("tmp_gate") or {}
    tmp = (facts.get("paths") or {}).get("/tmp") or {}
    # A cgroup memory limit below MemTotal is the host's RAM: ramdisk_facts has capped the figures with it.
    total, available = memory.get("total_bytes") or 0, memory.get("available_bytes") or 0
    limited_by = memory.get("cgroup_limit_set_by") if memory.get("capped_by_cgroup") else None
    peaks = (facts.get("peaks") or {}).get("paths") or {}
    policy_paths = []
    for entry in (plan.get("policy") or {}).get("entries") or []:
        found = (facts.get("paths") or {}).get(entry.get("path")) or {}
        policy_paths.append({"path": entry.get("path"), "backend": entry.get("backend"),
                             "usage_bytes": found.get("usage_bytes"), "complete": found.get("complete"),
                             "peak_bytes": (peaks.get(entry.get("path")) or {}).get("peak_bytes")})
    return {
        "host": host,
        "tmp_bytes": gate.get("usage_bytes", tmp.get("usage_bytes") or 0) or 0,
        "tmp_inodes": tmp.get("inodes"),
        "mem_total": total,
        "mem_used": memory.get("used_bytes", max(total - available, 0)),
        "mem_free": memory.get("free_bytes"),
        "mem_shared": memory.get("shmem_bytes"),
        "mem_buff_cache": memory.get("buff_cache_bytes"),
        "mem_available": available,
        "swap_total": swap.get("total_bytes") or 0,
        "swap_used": (swap.get("total_bytes") or 0) - (swap.get("free_bytes") or 0),
        "swap_free": swap.get("free_bytes") or 0,
        "mem_limited_by": limited_by,
        # The most /tmp held since the metrics collector's peak record began (None: no record on the host).
        "tmp_peak_bytes": (peaks.get("/tmp") or {}).get("peak_bytes"),
        "peak_since": (facts.get("peaks") or {}).get("since"),
        "mem_meminfo_total": memory.get("meminfo_total_bytes", total),
        "complete": bool(gate.get("complete", True)),
        "tmp_is_ram_backed": bool(gate.get("tmp_is_ram_backed")),
        "groups": sorted(set(groups or []) | {"all"}),
        "support": dict((name, bool((facts.get("support") or {}).get(name))) for name in ("tmpfs", "ramfs", "zram", "brd")),
        "ram_mounts": sorted(set("%s (%s)" % (mount.get("path"), mount.get("kind")) for mount in facts.get("mounts") or [])),
        "policy_paths": policy_paths,
        "what_if": what_if(plan),
    }


def what_if(plan):
    """What site.yml would do on the host with its policy, from the plan, changing nothing: refused (with
    every reason), or one line per mount, zram device and brd disk, and the RAM budget."""
    errors = list(plan.get("errors") or [])
    lines = plan_summary({"mounts": list(plan.get("tmpfs") or []) + list(plan.get("ramfs") or [])})
    for device in list(plan.get("zram") or []) + list(plan.get("zram_swap") or []):
        lines.append("zram %s: %s %s of %s" % (device.get("name"), device.get("state", "present"),
                                               device.get("use", "fs"), device.get("size", "?")))
    brd = plan.get("brd") or {}
    for mount in brd.get("mounts") or []:
        lines.append("brd %s: %s" % (mount.get("path"), mount.get("action", brd.get("action", "present"))))
    for skipped in (plan.get("policy") or {}).get("skipped") or []:
        lines.append("%s: skipped, stays as it is (the /tmp gate, ramdisk_tmp_gate_action: skip)" % skipped.get("path"))
    budget = (plan.get("policy") or {}).get("budget") or {}
    if budget.get("limit_bytes"):
        lines.append("RAM budget: %s of %s allowed (%s)" % (format_size(budget.get("total_bytes") or 0),
                                                            format_size(budget["limit_bytes"]), budget.get("limit")))
    return {"refused": bool(errors), "errors": errors, "warnings": list(plan.get("plan_warnings") or []), "lines": lines}
