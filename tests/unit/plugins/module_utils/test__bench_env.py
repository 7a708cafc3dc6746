# SPDX-License-Identifier: GPL-3.0-or-later
"""The benchmark's environment manifest read from fake /proc and /sys trees (CPU ticks and steal, load, governors,
virtualization, container, dirty sysctls, zram), the memory copy probe and the memory sampler's rows, which the
report's own parsers must read; and once from this host, read-only."""

from __future__ import annotations

import os

import pytest

from ansible_collections.ramdisk.provision.plugins.module_utils import _bench
from ansible_collections.ramdisk.provision.plugins.module_utils import _bench_env

STAT = ("cpu  1000 10 500 8000 100 0 20 40 0 0\n"
        "cpu0 500 5 250 4000 50 0 10 20 0 0\n"
        "intr 12345\n")
STAT_LATER = ("cpu  1600 10 700 8100 100 0 30 60 0 0\n"
              "cpu0 800 5 350 4050 50 0 15 30 0 0\n")
CPUINFO = ("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu vme hypervisor lm\n"
           "\nprocessor\t: 1\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu vme hypervisor lm\n")
MEMINFO = ("MemTotal:        4014080 kB\nMemFree:          120000 kB\nMemAvailable:    3000000 kB\n"
           "Shmem:             65536 kB\nActive:           500000 kB\nInactive:         400000 kB\n"
           "SwapTotal:       1048576 kB\nSwapFree:        1048000 kB\nHugePages_Total:       0\n")
VMSTAT = "nr_free_pages 30000\npswpin 12\npswpout 34\npgfault 999\n"


def write(root, relative, text):
    path = os.path.join(str(root), relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


@pytest.fixture
def proc_root(tmp_path):
    root = tmp_path / "proc"
    write(root, "stat", STAT)
    write(root, "loadavg", "0.52 0.40 0.31 2/160 5914\n")
    write(root, "cpuinfo", CPUINFO)
    write(root, "1/environ", "PATH=/bin\0container=lxc\0")
    for name, value in (("dirty_ratio", "20"), ("dirty_background_ratio", "10"), ("dirty_bytes", "0"),
                        ("dirty_expire_centisecs", "3000"), ("dirty_writeback_centisecs", "500")):
        write(root, "sys/vm/" + name, value + "\n")
    return str(root)


@pytest.fixture
def sys_root(tmp_path):
    root = tmp_path / "sys"
    write(root, "devices/system/cpu/cpu0/cpufreq/scaling_governor", "performance\n")
    write(root, "devices/system/cpu/cpu10/cpufreq/scaling_governor", "powersave\n")
    os.makedirs(str(root / "devices/system/cpu/cpu2"))
    os.makedirs(str(root / "devices/system/cpu/cpufreq"))
    os.makedirs(str(root / "devices/system/cpu/cpuidle"))
    write(root, "block/zram0/comp_algorithm", "lzo [lzo-rle] lz4 zstd\n")
    write(root, "block/zram0/mm_stat", "    4096       74    12288        0    12288        1        0        0        0\n")
    return str(root)


@pytest.mark.parametrize("text, expected", [
    (STAT, {"user": 1000, "nice": 10, "system": 500, "idle": 8000, "iowait": 100, "irq": 0, "softirq": 20,
            "steal": 40, "guest": 0, "guest_nice": 0}),
    ("cpu  1 2 3 4\n", {"user": 1, "nice": 2, "system": 3, "idle": 4}),
    ("cpu0 1 2 3 4\n", None),
    ("cpu  1 x 3\n", None),
    ("", None),
    (None, None),
])
def test_parse_cpu_line(text, expected):
    assert _bench_env.parse_cpu_line(text) == expected


def test_steal_share_is_stolen_ticks_over_all_ticks():
    # 1000 ticks passed (600 user, 200 system, 100 idle, 10 softirq, 20 steal... summed over the counted fields).
    total = (1600 - 1000) + (700 - 500) + (8100 - 8000) + (30 - 20) + (60 - 40)
    assert _bench_env.steal_share(STAT, STAT_LATER) == round(20.0 / total, 6)
    # The lines alone, or what parse_cpu_line made of them, read the same.
    assert _bench_env.steal_share(STAT.splitlines()[0], _bench_env.parse_cpu_line(STAT_LATER)) == round(20.0 / total, 6)
    # Unreadable, no tick passed, or a kernel without the steal field: null, never 0.
    assert _bench_env.steal_share(None, STAT_LATER) is None
    assert _bench_env.steal_share(STAT, "") is None
    assert _bench_env.steal_share(STAT, STAT) is None
    assert _bench_env.steal_share("cpu  1 2 3 4\n", "cpu  5 6 7 8\n") is None


def test_cpu_over_one_item(proc_root):
    before = _bench_env.cpu_reading(proc_root)
    assert before == (STAT.splitlines()[0], {"load1": 0.52, "load5": 0.40, "load15": 0.31})
    write(proc_root, "stat", STAT_LATER)
    write(proc_root, "loadavg", "1.50 0.60 0.35 3/161 5920\n")
    after = _bench_env.cpu_reading(proc_root)
    over = _bench_env.cpu_over(before, after)
    assert over == {"steal_share": _bench_env.steal_share(STAT, STAT_LATER), "load1": 0.52, "load1_after": 1.5}
    assert over["steal_share"] > _bench_env.STEAL_FLAG
    assert _bench_env.cpu_over(_bench_env.cpu_reading("/nonexistent"), after) == {
        "steal_share": None, "load1": None, "load1_after": 1.5}


@pytest.mark.parametrize("text, expected", [
    ("0.52 0.40 0.31 2/160 5914\n", {"load1": 0.52, "load5": 0.40, "load15": 0.31}),
    ("0.52\n", None),
    ("", None),
    (None, None),
])
def test_parse_loadavg(text, expected):
    assert _bench_env.parse_loadavg(text) == expected


def test_governors_per_cpu_in_number_order_null_without_cpufreq(sys_root):
    assert list(_bench_env.governors(sys_root).items()) == [("cpu0", "performance"), ("cpu2", None),
                                                            ("cpu10", "powersave")]
    assert _bench_env.governors("/nonexistent") == {}


@pytest.mark.parametrize("detect, hypervisor, cpuinfo, vendor, expected", [
    ("kvm\n", None, CPUINFO, "QEMU\n", {"kind": "kvm", "source": "systemd-detect-virt"}),
    ("none\n", None, CPUINFO, None, {"kind": "none", "source": "systemd-detect-virt"}),
    (None, "xen\n", "", None, {"kind": "xen", "source": "/sys/hypervisor/type"}),
    (None, None, CPUINFO, "QEMU\n", {"kind": "qemu", "source": "/proc/cpuinfo hypervisor flag"}),
    (None, None, CPUINFO, "Dell Inc.\n", {"kind": "unknown", "source": "/proc/cpuinfo hypervisor flag"}),
    ("", None, "flags\t: fpu vme\n", "VMware, Inc.\n", {"kind": "vmware", "source": "/sys/class/dmi/id/sys_vendor"}),
    (None, None, "flags\t: fpu vme\n", "Dell Inc.\n", {"kind": None, "source": "none"}),
    (None, None, None, None, {"kind": None, "source": "none"}),
])
def test_virtualization_says_which_source(detect, hypervisor, cpuinfo, vendor, expected):
    assert _bench_env.virtualization(detect, hypervisor, cpuinfo, vendor) == expected


def test_container_by_ramdisk_facts_rule(tmp_path, proc_root):
    root = tmp_path / "root"
    root.mkdir()
    assert _bench_env.container(str(root), proc_root) == "lxc"
    write(proc_root, "1/environ", "PATH=/bin\0")
    assert _bench_env.container(str(root), proc_root) is None
    write(root, ".dockerenv", "")
    assert _bench_env.container(str(root), proc_root) == "docker"
    write(root, "run/systemd/container", "systemd-nspawn\n")
    assert _bench_env.container(str(root), proc_root) == "systemd-nspawn"


def test_dirty_sysctls_null_where_unreadable(proc_root):
    assert _bench_env.dirty_sysctls(proc_root) == {
        "vm.dirty_ratio": 20, "vm.dirty_background_ratio": 10, "vm.dirty_bytes": 0, "vm.dirty_background_bytes": None,
        "vm.dirty_expire_centisecs": 3000, "vm.dirty_writeback_centisecs": 500}


def test_environment_from_fake_trees(tmp_path, proc_root, sys_root):
    env = _bench_env.environment("none", proc_root=proc_root, sys_root=sys_root, root=str(tmp_path))
    assert env["cpu_model"] == "AMD EPYC 7B13"
    # The first block of /proc/cpuinfo, as the role's manifest kept it.
    assert env["cpuinfo"] == CPUINFO.split("\n\n", maxsplit=1)[0]
    assert env["governors"] == {"cpu0": "performance", "cpu2": None, "cpu10": "powersave"}
    assert env["virtualization"] == {"kind": "none", "source": "systemd-detect-virt"}
    assert env["container"] == "lxc"
    assert env["load"]["load1"] == 0.52
    assert env["cpu_stat"] == STAT.splitlines()[0] and env["cpu_ticks"]["steal"] == 40
    assert env["dirty"]["vm.dirty_ratio"] == 20
    assert env["kernel"] == os.uname().release and env["cores"] >= 1


def test_environment_of_this_host_read_only():
    env = _bench_env.environment()
    assert env["cores"] >= 1 and env["kernel"]
    assert isinstance(env["governors"], dict) and env["virtualization"]["source"]
    assert set(env["dirty"]) == set("vm." + name for name in _bench_env.DIRTY_SYSCTLS)
    assert env["cpu_ticks"] is not None and env["load"] is not None
    target = _bench_env.target_stack(os.getcwd())
    assert target["device"] == (target["stack"][0][0] if target["stack"] else None)


def test_zram_state_as_the_manifest_keeps_it(sys_root):
    state = _bench_env.zram_state("zram0", sys_root)
    assert state == {"device": "zram0", "comp_algorithm": "lzo [lzo-rle] lz4 zstd",
                     "mm_stat": "4096       74    12288        0    12288        1        0        0        0"}
    # What the report reads from it.
    assert _bench.zram_algorithm(state["comp_algorithm"]) == "lzo-rle"
    assert _bench.parse_mm_stat(state["mm_stat"])["compr_data_size"] == 74
    with pytest.raises(OSError):
        _bench_env.zram_state("zram1", sys_root)
    for bad in ("../zram0", "sda", "zram0/..", ""):
        with pytest.raises(ValueError):
            _bench_env.zram_state(bad, sys_root)


def test_memcopy_document_reads_as_the_report_reads_it():
    doc = _bench_env.memcopy(4 << 20, 3, 2)
    assert doc["bytes"] == 4 << 20 and doc["copiers"] == 2 and len(doc["seconds"]) == 3
    assert all(seconds > 0 for seconds in doc["seconds"])
    assert _bench.memcopy_bw(doc) > 0
    # No more copiers than MiB, and whole MiB per copier.
    assert _bench_env.memcopy(2 << 20, 1, 8)["copiers"] == 2
    assert _bench_env.memcopy(3 << 20, 1, 2)["bytes"] == 2 << 20


def test_memory_rows_read_by_the_report():
    text = (_bench_env.memory_header() + _bench_env.memory_row(MEMINFO, VMSTAT, 1700000000.0)
            + _bench_env.memory_row(MEMINFO, "pswpin 12\n", 1700000001.5))
    samples = _bench.parse_memory_tsv(text)
    assert samples[0] == {"time": 1700000000.0, "MemTotal": 4014080 * 1024, "MemAvailable": 3000000 * 1024,
                          "MemFree": 120000 * 1024, "Shmem": 65536 * 1024, "Active": 500000 * 1024,
                          "Inactive": 400000 * 1024, "SwapTotal": 1048576 * 1024, "SwapFree": 1048000 * 1024,
                          "pswpin": 12, "pswpout": 34}
    # A field the kernel lacks is empty, and left out.
    assert "pswpout" not in samples[1] and samples[1]["time"] == 1700000001.5
    assert _bench.memory_summary(samples)["samples"] == 2
