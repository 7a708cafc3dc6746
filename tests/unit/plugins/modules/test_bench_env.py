# SPDX-License-Identifier: GPL-3.0-or-later
"""Run bench_env for real on this host, as Ansible does (read-only): the environment manifest, the block device
stack and lsblk of two paths, the memory copy probe as the report reads it, and its refusals."""

from __future__ import annotations

import os
import shutil

from conftest import run_module_process

import ansible_collections.ramdisk.provision.plugins.modules.bench_env as module_under_test
from ansible_collections.ramdisk.provision.plugins.module_utils import _bench
from ansible_collections.ramdisk.provision.plugins.module_utils import _bench_counters
from ansible_collections.ramdisk.provision.plugins.module_utils import _bench_env

MODULE_NAME = module_under_test.__name__
MIB = 1024 * 1024


def run(tmp_path, **args):
    return run_module_process(MODULE_NAME, tmp_path, args, timeout=120)


def test_the_environment_of_this_host(tmp_path):
    paths = [str(tmp_path), "/proc"]
    result = run(tmp_path, host="testhost", paths=paths, memcopy_bytes=4 * MIB, memcopy_passes=2, memcopy_copiers=2)
    assert result.get("failed") is not True, result
    assert result["changed"] is False
    env = result["environment"]
    assert env["kernel"] == os.uname().release and env["cores"] == _bench_env.cores()
    with open("/proc/cpuinfo", encoding="utf-8") as handle:
        cpuinfo = handle.read()
    assert env["cpuinfo"] == cpuinfo.split("\n\n")[0] and env["cpu_model"] == _bench.cpu_model(cpuinfo)
    assert set(env["governors"]) == set(_bench_env.governors())
    assert env["virtualization"]["source"] in ("systemd-detect-virt", "/sys/hypervisor/type",
                                               "/proc/cpuinfo hypervisor flag", "/sys/class/dmi/id/sys_vendor", "none")
    if shutil.which("systemd-detect-virt"):
        assert env["virtualization"]["source"] == "systemd-detect-virt"
    assert env["container"] == _bench_env.container()
    assert set(env["dirty"]) == set("vm." + name for name in _bench_env.DIRTY_SYSCTLS)
    assert env["cpu_ticks"] == _bench_env.parse_cpu_line(env["cpu_stat"]) and "steal" in env["cpu_ticks"]
    assert set(env["load"]) == {"load1", "load5", "load15"}
    # Each path: its stack as bench_probe reads its counters; lsblk of its device where there is one.
    disk, proc = env["targets"]
    assert disk["path"] == str(tmp_path) and disk["stack"] == _bench_counters.stack(str(tmp_path))
    if disk["stack"] and shutil.which("lsblk") and os.path.exists("/dev/" + disk["device"]):
        assert disk["lsblk_error"] == "" and disk["lsblk"][0]["kname"] == disk["device"]
    assert proc == {"path": "/proc", "stack": [], "device": None, "lsblk": None, "lsblk_error": ""}
    assert env["zram"] == []
    memcopy = result["memcopy"]
    assert memcopy["bytes"] == 4 * MIB and memcopy["copiers"] == 2 and len(memcopy["seconds"]) == 2
    assert _bench.memcopy_bw(memcopy) > 0


def test_check_mode_reads_the_same_and_the_probe_is_skipped_at_0(tmp_path):
    result = run(tmp_path, _ansible_check_mode=True)
    assert result.get("failed") is not True, result
    assert result["changed"] is False and result["memcopy"] is None
    assert result["environment"]["targets"] == [] and result["environment"]["cores"] >= 1
    result = run(tmp_path, memcopy_bytes=4 * MIB, memcopy_passes=0)
    assert result.get("failed") is not True and result["memcopy"] is None


def test_refusals_name_the_host_the_value_and_the_fix(tmp_path):
    result = run(tmp_path, host="testhost", memcopy_bytes=1000, memcopy_passes=1)
    assert result["failed"] is True
    assert result["msg"] == ("Host testhost: memcopy_bytes of bench_env is 1000, under the 1 MiB the memory copy probe"
                             " copies at the least. Give 1048576 or more, or 0 to skip it.")
    result = run(tmp_path, host="testhost", memcopy_passes=-1)
    assert result["failed"] is True and "memcopy_passes is -1" in result["msg"]
    missing = str(tmp_path / "missing")
    result = run(tmp_path, host="testhost", paths=[missing])
    assert result["failed"] is True
    assert result["msg"].startswith("Host testhost: the block device stack under the benchmark path %s could not be"
                                    " read: No such file or directory." % missing)
    result = run(tmp_path, host="testhost", zram_devices=["../sda"])
    assert result["failed"] is True
    assert "the compression state of the zram device '../sda' could not be read: '../sda' is no zram device name" in (
        result["msg"])
