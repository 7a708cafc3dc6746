# SPDX-License-Identifier: GPL-3.0-or-later
"""Run ramdisk_facts for real on this machine and check it against /proc."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import ansible_collections.ramdisk.provision.plugins.modules.ramdisk_facts as module_under_test
from ansible_collections.ramdisk.provision.plugins.module_utils._procfs import (
    in_kernel_tree,
    parse_meminfo,
    parse_mountinfo,
)

MODULE_NAME = module_under_test.__name__


def run_module(tmp_path, **args):
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.run([sys.executable, "-m", MODULE_NAME, str(args_file)], capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def facts(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("facts")
    scanned = tmp_path / "scanned"
    (scanned / "sub").mkdir(parents=True)
    (scanned / "sub" / "file").write_bytes(b"z" * 10000)
    result = run_module(tmp_path, paths=[str(scanned), str(tmp_path / "missing"), "relative"], scan_timeout=5)
    assert result.get("failed") is not True, result
    assert result["changed"] is False
    assert set(result) - {"changed", "invocation", "_ansible_no_log", "warnings", "deprecations"} == {"ansible_facts"}
    return result["ansible_facts"]["ramdisk"], scanned, tmp_path


def test_top_level_keys(facts):
    ramdisk, _scanned, _tmp = facts
    assert set(ramdisk) == {"memory", "swap", "paths", "mounts", "support", "tmp_gate", "peaks", "metrics_installed", "zram", "brd"}


def test_memory_matches_proc(facts):
    ramdisk, _scanned, _tmp = facts
    with open("/proc/meminfo") as handle:
        meminfo = parse_meminfo(handle.read())
    memory = ramdisk["memory"]
    assert memory["total_bytes"] == meminfo["MemTotal"]
    # Available and free memory move between the two reads; allow 512 MiB.
    assert abs(memory["available_bytes"] - meminfo["MemAvailable"]) < 512 * 1024 ** 2
    assert abs(memory["free_bytes"] - meminfo["MemFree"]) < 512 * 1024 ** 2
    assert memory["shmem_bytes"] >= 0
    assert memory["used_bytes"] == memory["total_bytes"] - memory["available_bytes"]
    cached = meminfo["Buffers"] + meminfo["Cached"] + meminfo["SReclaimable"]
    assert abs(memory["buff_cache_bytes"] - cached) < 512 * 1024 ** 2


def test_swap_matches_proc(tmp_path):
    # Swap on this kernel can change between the module's read and ours (a zram test turning swap on in a
    # container on the same kernel): take a read that /proc/meminfo agrees with on both sides of it.
    for _attempt in range(5):
        with open("/proc/meminfo") as handle:
            before = parse_meminfo(handle.read())["SwapTotal"]
        swap = run_module(tmp_path, paths=[])["ansible_facts"]["ramdisk"]["swap"]
        with open("/proc/meminfo") as handle:
            after = parse_meminfo(handle.read())["SwapTotal"]
        if before == after:
            break
    assert swap["total_bytes"] == before == after
    assert sum(device["size_bytes"] for device in swap["devices"]) <= before + 1024 ** 2


def test_paths(facts):
    ramdisk, scanned, tmp_path = facts
    entry = ramdisk["paths"][str(scanned)]
    assert entry["exists"] and entry["is_dir"] and entry["complete"]
    assert entry["empty"] is False
    assert entry["inodes"] == 3
    assert entry["usage_bytes"] >= 10000
    assert entry["mountpoint"] is False
    assert entry["uid"] == os.getuid()
    assert len(entry["mode"]) == 4
    missing = ramdisk["paths"][str(tmp_path / "missing")]
    assert missing["exists"] is False and missing["empty"] is None and missing["usage_bytes"] is None
    assert ramdisk["paths"]["relative"]["error"] == "not an absolute path"


def test_mounts_consistent_with_mountinfo(facts):
    ramdisk, _scanned, _tmp = facts
    with open("/proc/self/mountinfo") as handle:
        live = parse_mountinfo(handle.read())
    tmpfs_points = sorted(mount["mount_point"] for mount in live if mount["fstype"] in ("tmpfs", "ramfs")
                          and not in_kernel_tree(mount["mount_point"]))
    reported = sorted(mount["path"] for mount in ramdisk["mounts"] if mount["fstype"] in ("tmpfs", "ramfs"))
    assert reported == tmpfs_points
    for mount in ramdisk["mounts"]:
        assert set(mount) >= {"path", "fstype", "source", "options", "size_bytes", "used_bytes", "inodes_total",
                              "inodes_used", "usage_from"}
        if mount["usage_from"] == "statvfs" and mount["size_bytes"]:
            assert 0 <= mount["used_bytes"] <= mount["size_bytes"]


def test_support_and_gate(facts):
    ramdisk, _scanned, _tmp = facts
    support = ramdisk["support"]
    with open("/proc/filesystems") as handle:
        assert support["tmpfs"] is ("tmpfs" in handle.read())
    assert support["kernel"] == os.uname().release
    assert isinstance(support["zram_algorithms"], list)
    # What zram takes even with no device yet, and the most swap areas the kernel takes (worked out, never above it).
    assert isinstance(support["zram_algorithms_offered"], list)
    assert (support["zram_algorithms_from"] is None) is (support["zram_algorithms_offered"] == [])
    assert 1 <= support["swap_areas_max"] <= 32 and support["swap_areas_basis"].startswith("32 swap types less ")
    assert support["container"] in (None, "docker", "podman", "lxc", "systemd-nspawn") or support["container"]
    gate = ramdisk["tmp_gate"]
    assert gate["path"] == "/tmp"
    assert set(gate) >= {"fits_half_ram", "fits_free_memory_and_swap", "recommended", "reasons", "usage_bytes",
                         "complete", "tmp_is_ram_backed"}
    assert gate["reasons"]


def test_bad_scan_timeout_fails(tmp_path):
    result = run_module(tmp_path, scan_timeout=-1)
    assert result["failed"] is True
    assert "scan_timeout" in result["msg"]


def test_tree_verify_module(tmp_path):
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "d" / "f").write_text("data")
    dest = tmp_path / "dest"
    subprocess.run(["cp", "-a", str(src), str(dest)], check=True)
    args_file = tmp_path / "verify.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    name = MODULE_NAME.replace("ramdisk_facts", "tree_verify")

    def verify(**args):
        args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
        proc = subprocess.run([sys.executable, "-m", name, str(args_file)], capture_output=True, text=True, env=env,
                              check=False)
        return json.loads(proc.stdout)

    good = verify(src=str(src), dest=str(dest))
    assert good["matched"] is True and good["entries"] == 3 and good["changed"] is False
    (dest / "d" / "f").write_text("DATA")
    bad = verify(src=str(src), dest=str(dest))
    assert bad["failed"] is True and bad["matched"] is False
    assert "'d/f' differs in content (sha256)" in bad["msg"]
    soft = verify(src=str(src), dest=str(dest), fail_on_mismatch=False, compare_mtime=False)
    assert soft.get("failed") is not True and soft["mismatch_count"] == 1


def test_zram_list_matches_sysfs(facts):
    ramdisk, _scanned, _tmp = facts
    zram = ramdisk["zram"]
    assert isinstance(zram, list)
    for entry in zram:
        assert set(entry) == {"device", "path", "disksize_bytes", "algorithm", "algorithms_offered", "mem_limit_bytes",
                              "mm_stat", "compression_ratio", "used_as", "mountpoint", "swap_priority",
                              "entry"}
        assert entry["path"] == "/dev/" + entry["device"]
        assert entry["used_as"] in ("swap", "filesystem", "other", "unused")
    if zram:
        assert ramdisk["support"]["zram_algorithms"] == zram[0]["algorithms_offered"]
    else:
        assert ramdisk["support"]["zram_algorithms"] == []


ZRAM_CONTROL = "/sys/class/zram-control"


@pytest.fixture
def zram_device():
    """A zram device of 64 MiB with lz4 made through sysfs, removed afterwards (swap off first)."""
    if not os.path.isdir(ZRAM_CONTROL) or os.geteuid() != 0 or not os.access(ZRAM_CONTROL + "/hot_remove", os.W_OK):
        pytest.skip("zram cannot be driven here: no writable %s, or not root" % ZRAM_CONTROL)
    with open(ZRAM_CONTROL + "/hot_add") as handle:
        number = int(handle.read())
    name = "zram%d" % number
    try:
        for attr, value in (("comp_algorithm", "lz4"), ("disksize", 64 * 1024 ** 2)):
            with open("/sys/block/%s/%s" % (name, attr), "w") as handle:
                handle.write(str(value))
        yield name
    finally:
        subprocess.run(["swapoff", "/dev/" + name], capture_output=True, check=False)
        with open("/sys/block/%s/reset" % name, "w") as handle:
            handle.write("1")
        with open(ZRAM_CONTROL + "/hot_remove", "w") as handle:
            handle.write(str(number))


def test_zram_device_facts(tmp_path, zram_device):
    path = "/dev/" + zram_device
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, b"ramdisk facts zram " * 50000)
        os.fsync(fd)
    finally:
        os.close(fd)
    subprocess.run(["mkswap", path], check=True, capture_output=True)
    subprocess.run(["swapon", "-p", "3", path], check=True)

    result = run_module(tmp_path, paths=[], scan_timeout=1)
    entry = [item for item in result["ansible_facts"]["ramdisk"]["zram"] if item["device"] == zram_device][0]
    assert entry["disksize_bytes"] == 64 * 1024 ** 2
    assert entry["algorithm"] == "lz4" and "lz4" in entry["algorithms_offered"]
    assert entry["mem_limit_bytes"] == 0
    assert entry["used_as"] == "swap" and entry["swap_priority"] == 3 and entry["mountpoint"] is None
    stats = entry["mm_stat"]
    assert stats["orig_data_size"] > 0 and stats["compr_data_size"] > 0
    assert stats["mem_used_total"] >= stats["compr_data_size"]
    assert entry["compression_ratio"] == round(stats["orig_data_size"] / stats["compr_data_size"], 2) > 1
    assert result["ansible_facts"]["ramdisk"]["support"]["zram"] is True


def test_brd_facts_match_sysfs(tmp_path):
    brd = run_module(tmp_path)["ansible_facts"]["ramdisk"]["brd"]
    loaded = os.path.isdir("/sys/module/brd")
    assert brd["loaded"] is loaded
    disks = sorted(name for name in os.listdir("/sys/block") if name.startswith("ram") and name[3:].isdigit())
    assert [entry["device"] for entry in brd["devices"]] == sorted(disks, key=lambda name: int(name[3:]))
    for entry in brd["devices"]:
        with open("/sys/block/%s/size" % entry["device"]) as handle:
            assert entry["size_bytes"] == int(handle.read()) * 512
    if not loaded:
        assert brd["rd_nr"] is None and brd["devices"] == []
