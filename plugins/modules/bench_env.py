#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: bench_env
short_description: Read what the host is doing around the RAM-versus-disk benchmark, for its manifest
version_added: 1.1.0
description:
  - Returns the environment a benchmark visit ran in, so a figure can be read against it - the kernel, the CPU
    (its name and the first block of C(/proc/cpuinfo)), the cores this process may run on, the scaling governor of
    every CPU, the virtualization and which source told it, the container, the C(vm.dirty_*) sysctls, the load
    averages and the all-CPU line of C(/proc/stat) (two of them give the share of CPU time a hypervisor stole).
  - For each of O(paths), the block device stack under it (level by level, as M(ramdisk.provision.bench_probe)
    reads its counters) and C(lsblk -s --json) of its device, where lsblk is installed.
  - For each of O(zram_devices), its C(comp_algorithm) and C(mm_stat).
  - With O(memcopy_bytes) and O(memcopy_passes) above 0, measures the memory copy bandwidth with one copier process
    per core, the ceiling RAM storage is measured against, and returns it as RV(memcopy).
  - Virtualization - C(systemd-detect-virt --vm) where it is installed, else Xen's C(/sys/hypervisor/type), else
    the CPU's C(hypervisor) flag (named by the DMI vendor where it names one), else a DMI vendor
    (C(/sys/class/dmi/id/sys_vendor)) that names a hypervisor.
  - Never changes the host; runs in check mode as it does otherwise.
author: ramdisk.provision maintainers (@ramdisk-provision)
options:
  host:
    description: The name errors give the host (the inventory name); the host's own name when not given.
    type: str
  paths:
    description: The benchmark's targets and disk path; for each, the block device stack under it.
    type: list
    elements: path
    default: []
  zram_devices:
    description: The zram devices (C(zram0), ...) under the targets, whose compression state the manifest keeps.
    type: list
    elements: str
    default: []
  memcopy_bytes:
    description:
      - The bytes the memory copy probe copies per pass, all copiers together, at least 1 MiB (whole MiB are
        used); 0 skips the probe. Each copier holds its share twice.
    type: int
    default: 0
  memcopy_passes:
    description: The timed passes of the memory copy probe (a first untimed pass comes before them); 0 skips it.
    type: int
    default: 0
  memcopy_copiers:
    description:
      - The copier processes, at most one per MiB of O(memcopy_bytes); 0 for one per core this process may run on,
        as many as the sequential fio jobs run.
    type: int
    default: 0
extends_documentation_fragment:
  - ramdisk.provision._attributes
  - ramdisk.provision._attributes.check_mode_full
attributes:
  platform:
    support: full
    platforms: linux
notes:
  - The memory copy probe needs nothing but the Python Ansible runs; it fills its source before it copies, so a
    zeroed buffer that the kernel backs by one shared page is not read as if cached.
seealso:
  - module: ramdisk.provision.bench_probe
  - module: ramdisk.provision.bench_memory
"""

EXAMPLES = r"""
- name: Read the environment of the visit and the memory copy ceiling
  ramdisk.provision.bench_env:
    host: "{{ inventory_hostname }}"
    paths: [/srv/ram, /var/tmp]
    zram_devices: [zram0]
    memcopy_bytes: 67108864
    memcopy_passes: 5
  register: __benchmark_env
"""

RETURN = r"""
environment:
  description:
    - C(kernel) (release), C(kernel_version), C(machine), C(cpu_model) (the first C(model name) of C(/proc/cpuinfo),
      or the ARM fields), C(cpuinfo) (its first block), C(cores), C(governors) (per CPU, null where it has no
      cpufreq), C(virtualization) (C(kind), null where no source tells, C(none) where systemd-detect-virt says
      so; C(source)), C(container) (null outside one), C(dirty) (the C(vm.dirty_*) sysctls, null where
      unreadable), C(load) (C(load1), C(load5), C(load15)), C(cpu_stat) (the all-CPU line of C(/proc/stat)) and
      C(cpu_ticks) (its fields).
    - C(targets) - per path of O(paths), C(path), C(device) (its own block device, null on tmpfs and ramfs),
      C(stack) (the devices level by level), C(lsblk) (the devices of C(lsblk -s --json), null where lsblk is
      missing or failed) and C(lsblk_error).
    - C(zram) - per device of O(zram_devices), C(device), C(comp_algorithm) and C(mm_stat) as the files hold them.
  returned: always
  type: dict
  sample:
    kernel: 6.1.0-27-amd64
    kernel_version: "#1 SMP PREEMPT_DYNAMIC Debian 6.1.115-1 (2024-11-01)"
    machine: x86_64
    cpu_model: AMD EPYC 7B13
    cpuinfo: "processor\t: 0\nvendor_id\t: AuthenticAMD\n..."
    cores: 2
    governors: {cpu0: null, cpu1: null}
    virtualization: {kind: kvm, source: systemd-detect-virt}
    container: null
    dirty: {vm.dirty_ratio: 20, vm.dirty_background_ratio: 10, vm.dirty_bytes: 0, vm.dirty_background_bytes: 0,
            vm.dirty_expire_centisecs: 3000, vm.dirty_writeback_centisecs: 500}
    load: {load1: 0.12, load5: 0.3, load15: 0.25}
    cpu_stat: "cpu  2600181 38176 1365074 1418424 44721 0 13078 9439 0 0"
    cpu_ticks: {user: 2600181, nice: 38176, system: 1365074, idle: 1418424, iowait: 44721, irq: 0, softirq: 13078,
                steal: 9439, guest: 0, guest_nice: 0}
    targets:
      - {path: /srv/ram, device: null, stack: [], lsblk: null, lsblk_error: ""}
      - path: /var/tmp
        device: vda1
        stack: [[vda1], [vda]]
        lsblk: [{name: vda1, kname: vda1, "maj:min": "254:1", type: part, size: 21474836480, rota: true,
                 sched: mq-deadline, ro: false, mountpoint: /, children: [{name: vda, type: disk}]}]
        lsblk_error: ""
    zram:
      - {device: zram0, comp_algorithm: "lzo [lzo-rle] lz4 zstd", mm_stat: "4096 74 12288 0 12288 1 0 0 0"}
memcopy:
  description:
    - The memory copy probe's result - C(bytes) copied per pass, C(seconds) of each timed pass, C(copiers); the
      document the report reads its ceiling from (the best pass). Null when the probe was skipped.
  returned: always
  type: dict
  sample: {bytes: 67108864, seconds: [0.0061, 0.0058, 0.0059, 0.0060, 0.0058], copiers: 2}
"""

import json
import platform

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ramdisk.provision.plugins.module_utils import _bench_env

LSBLK_COLUMNS = "NAME,KNAME,MAJ:MIN,TYPE,SIZE,ROTA,SCHED,RO,MOUNTPOINT"


def _tail(text):
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return " / ".join(lines[-3:])


def detect_virt(module):
    """systemd-detect-virt --vm's answer (its "none" included), or None where it is absent or fails."""
    program = module.get_bin_path("systemd-detect-virt")
    if not program:
        return None
    rc, out, _err = module.run_command([program, "--vm"], environ_update={"LC_ALL": "C"})
    # It exits 1 with "none" outside a virtual machine.
    return out.strip() if rc in (0, 1) and out.strip() else None


def lsblk(module, device):
    """(the block devices of lsblk -s --json for DEVICE, ""), or (None, why not)."""
    if device is None:
        return None, ""
    program = module.get_bin_path("lsblk")
    if not program:
        return None, "lsblk is not installed"
    # /dev names a device as the kernel does, but with / where /sys has ! (cciss!c0d0).
    rc, out, err = module.run_command([program, "-s", "--json", "-b", "-o", LSBLK_COLUMNS,
                                       "/dev/" + device.replace("!", "/")], environ_update={"LC_ALL": "C"})
    if rc != 0:
        return None, "lsblk exited with %d: %s" % (rc, _tail(err) or _tail(out) or "no output")
    try:
        return json.loads(out).get("blockdevices"), ""
    except (ValueError, AttributeError) as exc:
        return None, "lsblk printed no JSON: %s" % exc


def main():
    module = AnsibleModule(
        argument_spec=dict(
            host=dict(type="str"),
            paths=dict(type="list", elements="path", default=[]),
            zram_devices=dict(type="list", elements="str", default=[]),
            memcopy_bytes=dict(type="int", default=0),
            # A count of passes, no secret.
            memcopy_passes=dict(type="int", default=0, no_log=False),
            memcopy_copiers=dict(type="int", default=0),
        ),
        supports_check_mode=True,
    )
    params = module.params
    host = params["host"] or platform.node()
    for name in ("memcopy_bytes", "memcopy_passes", "memcopy_copiers"):
        if params[name] < 0:
            module.fail_json(msg="Host %s: memcopy_bytes, memcopy_passes and memcopy_copiers of bench_env cannot be"
                                 " below 0, and %s is %d. Give 0 to skip the memory copy probe (or, for the"
                                 " copiers, one per core)." % (host, name, params[name]))
    if 0 < params["memcopy_bytes"] < _bench_env.MIB:
        module.fail_json(msg="Host %s: memcopy_bytes of bench_env is %d, under the 1 MiB the memory copy probe"
                             " copies at the least. Give 1048576 or more, or 0 to skip it."
                         % (host, params["memcopy_bytes"]))

    environment = _bench_env.environment(detect_virt(module))
    targets = []
    for path in params["paths"]:
        try:
            target = _bench_env.target_stack(path)
        except OSError as exc:
            module.fail_json(msg="Host %s: the block device stack under the benchmark path %s could not be read: %s."
                                 " Give paths that exist, on a host whose /sys shows its block devices."
                                 % (host, path, exc.strerror or exc))
        target["lsblk"], target["lsblk_error"] = lsblk(module, target["device"])
        targets.append(target)
    environment["targets"] = targets
    zram = []
    for device in params["zram_devices"]:
        try:
            zram.append(_bench_env.zram_state(device))
        except (OSError, ValueError) as exc:
            module.fail_json(msg="Host %s: the compression state of the zram device %r could not be read: %s. Give"
                                 " the zram devices under the benchmark's targets, as ramdisk_facts lists them."
                                 % (host, device, exc))
    environment["zram"] = zram

    memcopy = None
    if params["memcopy_bytes"] and params["memcopy_passes"]:
        try:
            memcopy = _bench_env.memcopy(params["memcopy_bytes"], params["memcopy_passes"],
                                         params["memcopy_copiers"] or _bench_env.cores())
        except (OSError, MemoryError) as exc:
            module.fail_json(msg="Host %s: the memory copy probe (%d bytes, %d passes) failed: %s. Lower memcopy_bytes"
                                 " (each copier holds its share twice) or free memory."
                                 % (host, params["memcopy_bytes"], params["memcopy_passes"], exc))
    module.exit_json(changed=False, environment=environment, memcopy=memcopy)


if __name__ == "__main__":
    main()
