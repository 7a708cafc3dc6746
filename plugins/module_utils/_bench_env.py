# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the host was doing while the benchmark ran: the environment manifest (kernel, CPU, governors,
virtualization, container, dirty_* sysctls, load, /proc/stat's CPU ticks for steal, the block device stack under
each target, zram's state), the memory-copy ceiling, and the memory sampler's rows.

Every reader takes the /proc or /sys root, so tests build a fake tree; the parsers are pure. bench_env and
bench_memory (the modules) and bench_probe (steal and load around one item) call them."""

from __future__ import annotations

import glob
import os
import re
import struct
import time
import traceback

from ansible_collections.ramdisk.provision.plugins.module_utils import _bench
from ansible_collections.ramdisk.provision.plugins.module_utils import _bench_counters
from ansible_collections.ramdisk.provision.plugins.module_utils import _procfs

MIB = 1 << 20
# A visit whose steal share is above this ran on a host whose hypervisor took the CPU away: flagged in the report.
STEAL_FLAG = 0.02
# The writeback knobs: how much dirty data may wait in the page cache, and for how long, before a disk row pays.
DIRTY_SYSCTLS = ("dirty_ratio", "dirty_background_ratio", "dirty_bytes", "dirty_background_bytes",
                 "dirty_expire_centisecs", "dirty_writeback_centisecs")
# /proc/stat's cpu line (proc(5)); guest and guest_nice are already counted in user and nice.
CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest", "guest_nice")
_COUNTED = CPU_FIELDS[:8]
# sys_vendor strings of the common hypervisors (/sys/class/dmi/id/sys_vendor), and the name each goes by.
VM_VENDORS = (("QEMU", "qemu"), ("KVM", "kvm"), ("VMware", "vmware"), ("Microsoft Corporation", "microsoft"),
              ("innotek", "oracle"), ("Oracle Corporation", "oracle"), ("Xen", "xen"), ("Amazon EC2", "amazon"),
              ("Google", "google"), ("Parallels", "parallels"), ("Bochs", "bochs"), ("OpenStack", "openstack"))
ZRAM_NAME = re.compile(r"^zram[0-9]+$")
# The columns of the memory sampler's file (bench_memory), in order: what _bench.parse_memory_tsv reads.
MEMINFO_KEYS = ("MemTotal", "MemAvailable", "MemFree", "Shmem", "Active", "Inactive", "SwapTotal", "SwapFree")
VMSTAT_KEYS = ("pswpin", "pswpout")
MEMORY_COLUMNS = ("time",) + MEMINFO_KEYS + VMSTAT_KEYS


def read_text(path, default=None):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return default


# --- CPU time and load ----------------------------------------------------------------------------

def parse_cpu_line(text):
    """{field: ticks} of /proc/stat's all-CPU line (TEXT: that line, or the whole of /proc/stat); None when there is
    none or it is not numbers. Older kernels print fewer fields: those are left out."""
    for line in (text or "").splitlines():
        fields = line.split()
        if fields[:1] == ["cpu"]:
            try:
                return dict(zip(CPU_FIELDS, (int(value) for value in fields[1:])))
            except ValueError:
                return None
    return None


def read_cpu_line(proc_root="/proc"):
    """/proc/stat's all-CPU line as it is, or None when unreadable."""
    text = read_text(os.path.join(proc_root, "stat"))
    for line in (text or "").splitlines():
        if line.split()[:1] == ["cpu"]:
            return line
    return None


def steal_share(before, after):
    """The share of all CPU ticks between two readings of /proc/stat's cpu line (BEFORE and AFTER: the lines, or
    what parse_cpu_line made of them) that the hypervisor stole; None when either is unreadable or no tick passed."""
    old = before if isinstance(before, dict) else parse_cpu_line(before)
    new = after if isinstance(after, dict) else parse_cpu_line(after)
    if not old or not new or "steal" not in old or "steal" not in new:
        return None
    total = sum(new[key] - old[key] for key in _COUNTED)
    if total <= 0:
        return None
    return round((new["steal"] - old["steal"]) / float(total), 6)


def parse_loadavg(text):
    """{load1, load5, load15} of /proc/loadavg; None when it is not that."""
    fields = (text or "").split()
    try:
        return {"load1": float(fields[0]), "load5": float(fields[1]), "load15": float(fields[2])}
    except (IndexError, ValueError):
        return None


def read_loadavg(proc_root="/proc"):
    return parse_loadavg(read_text(os.path.join(proc_root, "loadavg")))


def cpu_reading(proc_root="/proc"):
    """What bench_probe reads before and after an item: (the cpu line, load averages); either may be None."""
    return read_cpu_line(proc_root), read_loadavg(proc_root)


def cpu_over(before, after):
    """{steal_share, load1, load1_after} over one item, from two cpu_reading()s; null where unreadable."""
    return {"steal_share": steal_share(before[0], after[0]),
            "load1": before[1]["load1"] if before[1] else None,
            "load1_after": after[1]["load1"] if after[1] else None}


# --- CPU, kernel, virtualization ------------------------------------------------------------------

def first_block(cpuinfo):
    """The first processor's block of /proc/cpuinfo (up to the first empty line), as the manifest keeps it."""
    return (cpuinfo or "").split("\n\n")[0]


def cores():
    """The cores this process may run on, as nproc counts them."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def governors(sys_root="/sys"):
    """{cpuN: scaling governor or None where the CPU has no cpufreq} for every CPU /sys lists, in number order."""
    found = {}
    pattern = os.path.join(sys_root, "devices", "system", "cpu", "cpu[0-9]*")
    for folder in glob.glob(pattern):
        name = os.path.basename(folder)
        if not name[3:].isdigit():
            continue
        text = read_text(os.path.join(folder, "cpufreq", "scaling_governor"))
        found[name] = (text.strip() or None) if text is not None else None
    return dict(sorted(found.items(), key=lambda pair: int(pair[0][3:])))


def cpu_flags(cpuinfo):
    for line in (cpuinfo or "").splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() in ("flags", "Features"):
            return value.split()
    return []


def vm_vendor(sys_vendor):
    """The hypervisor a DMI sys_vendor names, or None."""
    text = (sys_vendor or "").strip()
    for prefix, name in VM_VENDORS:
        if text.startswith(prefix):
            return name
    return None


def virtualization(detect_virt=None, hypervisor_type=None, cpuinfo=None, sys_vendor=None):
    """{kind, source}: the virtual machine this host is, and which source said so. In order: systemd-detect-virt
    --vm's answer (DETECT_VIRT: its output, None where it is absent or failed; its "none" is kind "none"), Xen's
    /sys/hypervisor/type, the CPU's hypervisor flag (kind from the DMI vendor where it names one, else "unknown"),
    a DMI vendor that names a hypervisor. Kind None where no source tells (source "none")."""
    if detect_virt is not None and detect_virt.strip():
        return {"kind": detect_virt.strip(), "source": "systemd-detect-virt"}
    if hypervisor_type and hypervisor_type.strip():
        return {"kind": hypervisor_type.strip(), "source": "/sys/hypervisor/type"}
    vendor = vm_vendor(sys_vendor)
    if "hypervisor" in cpu_flags(cpuinfo):
        return {"kind": vendor or "unknown", "source": "/proc/cpuinfo hypervisor flag"}
    if vendor:
        return {"kind": vendor, "source": "/sys/class/dmi/id/sys_vendor"}
    return {"kind": None, "source": "none"}


def container(root="/", proc_root="/proc"):
    """The container manager this runs under, or None (ramdisk_facts' rule: _procfs.detect_container)."""
    present = [marker for marker in ("/.dockerenv", "/run/.containerenv")
               if os.path.exists(os.path.join(root, marker.lstrip("/")))]
    return _procfs.detect_container(read_text(os.path.join(proc_root, "1", "environ")), present,
                                    read_text(os.path.join(root, "run", "systemd", "container")))


def dirty_sysctls(proc_root="/proc"):
    """{vm.dirty_*: value or None where unreadable}."""
    out = {}
    for name in DIRTY_SYSCTLS:
        text = read_text(os.path.join(proc_root, "sys", "vm", name))
        try:
            out["vm." + name] = int(text.strip()) if text is not None else None
        except ValueError:
            out["vm." + name] = None
    return out


def environment(detect_virt=None, proc_root="/proc", sys_root="/sys", root="/"):
    """Everything of the manifest that does not depend on a target."""
    cpuinfo = read_text(os.path.join(proc_root, "cpuinfo"), "")
    uname = os.uname()
    cpu_line = read_cpu_line(proc_root)
    return {
        "kernel": uname.release,
        "kernel_version": uname.version,
        "machine": uname.machine,
        "cpu_model": _bench.cpu_model(cpuinfo),
        "cpuinfo": first_block(cpuinfo),
        "cores": cores(),
        "governors": governors(sys_root),
        "virtualization": virtualization(detect_virt, read_text(os.path.join(sys_root, "hypervisor", "type")),
                                         cpuinfo, read_text(os.path.join(sys_root, "class", "dmi", "id", "sys_vendor"))),
        "container": container(root, proc_root),
        "dirty": dirty_sysctls(proc_root),
        "load": read_loadavg(proc_root),
        "cpu_stat": cpu_line,
        "cpu_ticks": parse_cpu_line(cpu_line),
    }


# --- targets and zram -----------------------------------------------------------------------------

def target_stack(path, sys_root="/sys", stat=os.stat):
    """{path, stack, device}: the block devices under PATH (_bench_counters.stack), its own device (None on none)."""
    levels = _bench_counters.stack(path, sys_root, stat)
    return {"path": path, "stack": levels, "device": levels[0][0] if levels else None}


def zram_state(device, sys_root="/sys"):
    """{device, comp_algorithm, mm_stat}: the two files as the manifest keeps them (trimmed text). Raises ValueError
    on a name that is no zram device, OSError where the files cannot be read."""
    if not ZRAM_NAME.match(device or ""):
        raise ValueError("%r is no zram device name (zram0, zram1, ...)" % (device,))
    out = {"device": device}
    for name in ("comp_algorithm", "mm_stat"):
        with open(os.path.join(sys_root, "block", device, name), encoding="utf-8") as handle:
            out[name] = handle.read().strip()
    return out


# --- memory copy ceiling --------------------------------------------------------------------------

def _copier(share, go, report):
    chunk = os.urandom(MIB)
    source = bytearray(share)
    for at in range(0, share, MIB):
        source[at:at + MIB] = chunk
    src, dst = memoryview(source), memoryview(bytearray(share))
    dst[:] = src
    os.write(report, struct.pack("dd", 0.0, 0.0))
    while os.read(go, 1):
        start = time.clock_gettime(time.CLOCK_MONOTONIC)
        dst[:] = src
        os.write(report, struct.pack("dd", start, time.clock_gettime(time.CLOCK_MONOTONIC)))


def memcopy(size, passes, copiers):
    """Memory copy bandwidth with COPIERS processes (at most one per MiB of SIZE), the ceiling RAM storage is
    measured against: each copies its share of SIZE from one bytearray into another (one memcpy), a process each
    since a memoryview copy holds the GIL. The source is filled first (a zeroed buffer can be the shared zero page);
    the first pass only faults the destination in and does not count. Each pass starts in every copier at once and
    is timed from the first start to the last end (CLOCK_MONOTONIC is one clock for all). Returns {bytes, seconds
    (one per pass), copiers}, the document _bench.memcopy_bw() reads. Raises OSError when a copier stops."""
    copiers = max(1, min(int(copiers), int(size) >> 20))
    share = (int(size) >> 20) // copiers << 20
    gos, reports, children = [], [], []
    try:
        for _number in range(copiers):
            go_r, go_w = os.pipe()
            report_r, report_w = os.pipe()
            child = os.fork()
            if child == 0:
                # Only this copier's ends stay open, so it sees EOF as soon as the parent is gone.
                for fd in gos + reports + [go_w, report_r]:
                    os.close(fd)
                try:
                    _copier(share, go_r, report_w)
                except BaseException:
                    traceback.print_exc()
                    os._exit(1)
                os._exit(0)
            children.append(child)
            os.close(go_r)
            os.close(report_w)
            gos.append(go_w)
            reports.append(report_r)

        def stamps():
            got = [os.read(fd, 16) for fd in reports]
            if any(len(one) != 16 for one in got):
                raise OSError("a copier stopped before its pass ended (out of memory?)")
            return [struct.unpack("dd", one) for one in got]

        stamps()
        seconds = []
        for _number in range(int(passes)):
            for fd in gos:
                os.write(fd, b"g")
            got = stamps()
            seconds.append(max(end for _start, end in got) - min(start for start, _end in got))
    finally:
        for fd in gos + reports:
            os.close(fd)
        for child in children:
            os.waitpid(child, 0)
    return {"bytes": share * copiers, "seconds": seconds, "copiers": copiers}


# --- the memory sampler's rows --------------------------------------------------------------------

def memory_header():
    return "\t".join(MEMORY_COLUMNS) + "\n"


def memory_row(meminfo, vmstat, now):
    """One line of the sampler's file from the texts of /proc/meminfo and /proc/vmstat at NOW (epoch seconds):
    the time, the meminfo fields in bytes, the swap counters; a field the kernel lacks is empty."""
    mem = _procfs.parse_meminfo(meminfo)
    vm = {}
    for line in vmstat.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0] in VMSTAT_KEYS:
            vm[fields[0]] = fields[1]
    row = ["%.3f" % now] + [str(mem.get(key, "")) for key in MEMINFO_KEYS] + [str(vm.get(key, "")) for key in VMSTAT_KEYS]
    return "\t".join(row) + "\n"
