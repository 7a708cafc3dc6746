# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

import os

import pytest

from ansible_collections.ramdisk.provision.plugins.module_utils._zram import (
    MM_STAT_FIELDS,
    ZramError,
    choose_algorithm,
    compression_ratio,
    decide,
    device_number,
    device_usage,
    kernel_zram_algorithms,
    lowest_free_number,
    max_swap_areas,
    parse_comp_algorithm,
    parse_crypto_compressors,
    parse_dev,
    parse_kernel_config,
    parse_mm_stat,
    read_device,
    removal_blocker,
    swap_cycle_fits,
    swap_cycle_need,
    swap_devs,
    unavailable_reason,
)

MIB, GIB = 1024 ** 2, 1024 ** 3

MM_STAT_6X = "  8192       74    12288        0    12288        1        0        0        0\n"
MM_STAT_5X = "  4096     2048     8192  33554432     8192        0        0        0\n"


@pytest.mark.parametrize(
    "text, algorithms, selected",
    [
        ("lzo [lzo-rle] lz4\n", ["lzo", "lzo-rle", "lz4"], "lzo-rle"),
        ("[lzo-rle] lzo lz4 \n", ["lzo-rle", "lzo", "lz4"], "lzo-rle"),
        ("lzo lzo-rle lz4 lz4hc 842 [zstd]\n", ["lzo", "lzo-rle", "lz4", "lz4hc", "842", "zstd"], "zstd"),
        ("", [], None),
        (None, [], None),
    ],
)
def test_parse_comp_algorithm(text, algorithms, selected):
    assert parse_comp_algorithm(text) == {"algorithms": algorithms, "selected": selected}


@pytest.mark.parametrize(
    "text, expected",
    [
        (MM_STAT_6X, dict(zip(MM_STAT_FIELDS, (8192, 74, 12288, 0, 12288, 1, 0, 0, 0)), compression_ratio=110.7)),
        # Linux before 5.15 lacks huge_pages_since.
        (MM_STAT_5X, dict(zip(MM_STAT_FIELDS, (4096, 2048, 8192, 33554432, 8192, 0, 0, 0, None)),
                          compression_ratio=2.0)),
        ("0 0 0 0 0 0 0 0 0", dict(zip(MM_STAT_FIELDS, (0,) * 9), compression_ratio=None)),
        ("", dict(dict.fromkeys(MM_STAT_FIELDS), compression_ratio=None)),
    ],
)
def test_parse_mm_stat(text, expected):
    assert parse_mm_stat(text) == expected


@pytest.mark.parametrize(
    "orig, compr, ratio",
    [(1000, 250, 4.0), (3, 2, 1.5), (0, 0, None), (4096, 0, None), (None, 10, None), (10, 3, 3.33)],
)
def test_compression_ratio(orig, compr, ratio):
    assert compression_ratio(orig, compr) == ratio


@pytest.mark.parametrize(
    "name, number",
    [("zram0", 0), ("zram12", 12), ("zram", None), ("zram1p1", None), ("sda", None), ("", None), (None, None)],
)
def test_device_number(name, number):
    assert device_number(name) == number


@pytest.mark.parametrize(
    "names, expected",
    [([], 0), (["zram0"], 1), (["zram0", "zram2"], 1), (["zram1"], 0), (["zram0", "zram1", "loop0"], 2)],
)
def test_lowest_free_number(names, expected):
    assert lowest_free_number(names) == expected


@pytest.mark.parametrize("text, expected", [("253:0\n", (253, 0)), ("253:12", (253, 12)), ("", None), (None, None),
                                            ("x:1", None)])
def test_parse_dev(text, expected):
    assert parse_dev(text) == expected


OFFERED = ["lzo-rle", "lzo", "lz4"]


@pytest.mark.parametrize(
    "wanted, offered, fallback, chosen, warned",
    [
        ("lz4", OFFERED, False, "lz4", False),
        ("lzo", OFFERED, True, "lzo", False),
        ("zstd", OFFERED, True, "lz4", True),
        ("zstd", ["lzo", "lzo-rle"], True, "lzo-rle", True),
        ("zstd", ["lzo", "zstd", "lz4"], True, "zstd", False),
        ("lz4hc", ["842", "deflate"], True, "842", True),
        ("lz4hc", ["lzo", "zstd", "lz4"], True, "zstd", True),
    ],
)
def test_choose_algorithm(wanted, offered, fallback, chosen, warned):
    algorithm, warning = choose_algorithm(wanted, offered, fallback)
    assert algorithm == chosen
    assert bool(warning) is warned
    if warned:
        assert "'%s' is not offered" % wanted in warning and ", ".join(offered) in warning


@pytest.mark.parametrize(
    "wanted, offered, words",
    [
        ("zstd", OFFERED, ["'zstd'", "lzo-rle, lzo, lz4", "allow_algorithm_fallback"]),
        ("lz4", [], ["offers no zram compression algorithm"]),
    ],
)
def test_choose_algorithm_errors(wanted, offered, words):
    with pytest.raises(ZramError) as info:
        choose_algorithm(wanted, offered, False)
    for word in words:
        assert word in str(info.value)


def _sysfs(**files):
    """A reader over a fake /sys/block/zram0."""
    def read(path):
        return files.get(os.path.basename(path))
    return read


def test_read_device():
    state = read_device("zram0", _sysfs(disksize="67108864\n", comp_algorithm="lzo-rle lzo [lz4]\n",
                                        mm_stat=MM_STAT_5X, dev="253:0\n"))
    assert state["name"] == "zram0"
    assert state["disksize"] == 64 * MIB and state["initialised"] is True
    assert state["algorithm"] == "lz4" and state["algorithms"] == ["lzo-rle", "lzo", "lz4"]
    assert state["mem_limit"] == 32 * MIB
    assert state["mm_stat"]["compression_ratio"] == 2.0
    assert state["dev"] == (253, 0)
    fresh = read_device("zram0", _sysfs(disksize="0\n", comp_algorithm="[lzo-rle] lzo lz4",
                                        mm_stat="0 0 0 0 0 0 0 0 0"))
    assert fresh["initialised"] is False and fresh["mem_limit"] == 0 and fresh["dev"] is None
    assert read_device("zram9", _sysfs()) is None


SWAPS = [{"path": "/dev/zram0", "type": "partition", "size_bytes": 64 * MIB, "used_bytes": 4 * MIB, "priority": 100},
         {"path": "/dev/disk/by-id/zram-link", "type": "partition", "size_bytes": MIB, "used_bytes": 0,
          "priority": -2}]
MOUNTS = [{"mount_point": "/", "source": "/dev/vda1", "major": 254, "minor": 1},
          {"mount_point": "/var/cache/build", "source": "/dev/zram1", "major": 253, "minor": 1},
          {"mount_point": "/srv/other", "source": "/dev/root", "major": 253, "minor": 3}]


@pytest.mark.parametrize(
    "name, dev, holders, busy, swap_paths, used_as, extra",
    [
        ("zram0", (253, 0), [], True, {}, "swap", {"swap_used_bytes": 4 * MIB, "swap_priority": 100}),
        ("zram1", (253, 1), [], True, {}, "filesystem", {"mountpoints": ["/var/cache/build"]}),
        # Found by device number although the mount source is spelt otherwise.
        ("zram3", (253, 3), [], False, {}, "filesystem", {"mountpoints": ["/srv/other"]}),
        ("zram2", (253, 2), ["dm-0"], True, {}, "other", {"holders": ["dm-0"]}),
        ("zram2", (253, 2), [], True, {}, "other", {"busy": True}),
        ("zram2", (253, 2), [], False, {}, "unused", {"swap_active": False, "swap_priority": None}),
        # Swap opened through a link is matched by device number.
        ("zram4", (253, 4), [], False, {"/dev/disk/by-id/zram-link": (253, 4)}, "swap", {"swap_priority": -2}),
        ("zram4", None, [], False, {"/dev/disk/by-id/zram-link": (253, 4)}, "unused", {}),
    ],
)
def test_device_usage(name, dev, holders, busy, swap_paths, used_as, extra):
    usage = device_usage(name, dev, SWAPS, MOUNTS, holders, busy, swap_paths)
    assert usage["used_as"] == used_as
    for key, value in extra.items():
        assert usage[key] == value


class _Stat(object):
    def __init__(self, rdev):
        self.st_rdev = rdev


def test_swap_devs():
    table = {"/dev/zram0": _Stat(os.makedev(253, 0)), "/swapfile": _Stat(0)}

    def stat(path):
        if path not in table:
            raise OSError(2, "No such file")
        return table[path]

    swaps = [{"path": "/dev/zram0"}, {"path": "/swapfile"}, {"path": "/gone"}]
    assert swap_devs(swaps, stat) == {"/dev/zram0": (253, 0)}


@pytest.mark.parametrize(
    "used, available, fits",
    [
        (0, 256 * MIB, True),
        (0, 256 * MIB - 1, False),
        (GIB, GIB + 512 * MIB, True),  # needs 1.25 GiB + 256 MiB = 1.5 GiB
        (GIB, GIB + 512 * MIB - 1, False),
        (8 * GIB, 4 * GIB, False),
    ],
)
def test_swap_cycle_rule(used, available, fits):
    assert swap_cycle_fits(used, available) is fits
    assert swap_cycle_need(used) == used * 5 // 4 + 256 * MIB


def _state(disksize=64 * MIB, algorithm="lz4", mem_limit=0, name="zram0"):
    return {"name": name, "disksize": disksize, "initialised": disksize > 0, "algorithm": algorithm,
            "algorithms": OFFERED, "mem_limit": mem_limit, "mm_stat": {}, "dev": (253, 0)}


def _usage(**kwargs):
    usage = {"used_as": "unused", "swap_active": False, "swap_used_bytes": 0, "swap_priority": None,
             "mountpoints": [], "holders": [], "busy": False, "mem_available_bytes": 8 * GIB}
    usage.update(kwargs)
    return usage


def _wanted(disksize=64 * MIB, algorithm="lz4", mem_limit=None):
    return {"disksize": disksize, "algorithm": algorithm, "mem_limit": mem_limit}


SWAP_LIGHT = dict(used_as="swap", swap_active=True, swap_used_bytes=100 * MIB, swap_priority=5)
SWAP_HEAVY = dict(used_as="swap", swap_active=True, swap_used_bytes=6 * GIB, swap_priority=5,
                  mem_available_bytes=4 * GIB)


@pytest.mark.parametrize(
    "current, wanted, usage, action, steps, reason_words",
    [
        # A device that does not exist: algorithm before disksize, mem_limit last.
        (None, _wanted(mem_limit=32 * MIB), _usage(), "create",
         [("comp_algorithm", "lz4"), ("disksize", 64 * MIB), ("mem_limit", 32 * MIB)], []),
        (None, _wanted(algorithm=None), _usage(), "create", [("disksize", 64 * MIB)], []),
        # Disk size is rounded up to whole pages as the kernel does.
        (None, _wanted(disksize=1000, algorithm=None), _usage(), "create", [("disksize", 4096)], []),
        (_state(disksize=0, algorithm="lzo-rle"), _wanted(), _usage(), "configure",
         [("comp_algorithm", "lz4"), ("disksize", 64 * MIB)], []),
        (_state(disksize=0, algorithm="lz4"), _wanted(), _usage(), "configure", [("disksize", 64 * MIB)], []),
        (_state(), _wanted(), _usage(), "ok", [], []),
        (_state(), _wanted(algorithm=None), _usage(**SWAP_HEAVY), "ok", [], []),
        (_state(mem_limit=32 * MIB), _wanted(), _usage(), "ok", [], []),
        # mem_limit alone changes live, even under a mounted file system.
        (_state(), _wanted(mem_limit=16 * MIB), _usage(mountpoints=["/srv"]), "configure",
         [("mem_limit", 16 * MIB)], []),
        (_state(mem_limit=16 * MIB), _wanted(mem_limit=0), _usage(), "configure", [("mem_limit", 0)], []),
        # Unused: reset, then restore the algorithm and limit that were not asked to change.
        (_state(mem_limit=32 * MIB), _wanted(disksize=128 * MIB, algorithm=None), _usage(), "reset-then-configure",
         [("reset", 1), ("comp_algorithm", "lz4"), ("disksize", 128 * MIB), ("mem_limit", 32 * MIB)],
         ["unused", "disksize 64.0 MiB -> 128.0 MiB"]),
        (_state(), _wanted(algorithm="lzo"), _usage(), "reset-then-configure",
         [("reset", 1), ("comp_algorithm", "lzo"), ("disksize", 64 * MIB)], ["algorithm lz4 -> lzo"]),
        (_state(), _wanted(disksize=128 * MIB), _usage(mountpoints=["/var/cache/build"], used_as="filesystem"),
         "reboot-required", None, ["mounted at /var/cache/build", "never reset", "reboot"]),
        (_state(), _wanted(disksize=128 * MIB), _usage(**SWAP_LIGHT), "cycle-swap", None,
         ["active swap", "100.0 MiB in use", "used * 1.25 + 256 MiB"]),
        (_state(), _wanted(disksize=128 * MIB), _usage(**SWAP_HEAVY), "reboot-required", None,
         ["6.0 GiB in use", "below the 7.8 GiB needed", "after a reboot"]),
        (_state(), _wanted(algorithm="lzo"), _usage(holders=["dm-0"], used_as="other"), "reboot-required", None,
         ["held by dm-0"]),
        (_state(), _wanted(algorithm="lzo"), _usage(busy=True, used_as="other"), "reboot-required", None,
         ["held by another process"]),
    ],
)
def test_decide(current, wanted, usage, action, steps, reason_words):
    decision = decide(current, wanted, usage)
    assert decision["action"] == action
    if steps is not None:
        assert decision["steps"] == steps
    for word in reason_words:
        assert word in decision["reason"]
    if action in ("ok",):
        assert decision["changes"] == {} and decision["reason"] is None
    if action in ("cycle-swap", "reboot-required", "reset-then-configure"):
        assert decision["needs_reset"] is True
        assert decision["steps"][0] == ("reset", 1)
        names = [attr for attr, _value in decision["steps"]]
        assert names.index("disksize") > names.index("comp_algorithm")


def test_decide_changes_before_after():
    decision = decide(_state(mem_limit=0), _wanted(disksize=128 * MIB, algorithm="lzo", mem_limit=MIB), _usage())
    assert decision["changes"] == {"disksize": [64 * MIB, 128 * MIB], "algorithm": ["lz4", "lzo"],
                                   "mem_limit": [0, MIB]}


@pytest.mark.parametrize(
    "usage, words",
    [
        (_usage(swap_active=True), ["active swap", "swapoff /dev/zram0"]),
        (_usage(mountpoints=["/mnt/a"]), ["mounted at /mnt/a", "unmount"]),
        (_usage(holders=["md0"]), ["held by md0"]),
        (_usage(busy=True), ["held by another process"]),
    ],
)
def test_removal_blocker(usage, words):
    text = removal_blocker("zram0", usage)
    for word in words:
        assert word in text
    assert removal_blocker("zram0", _usage()) is None


@pytest.mark.parametrize(
    "control, devices, read_only, container, words",
    [
        (False, [], False, None, ["not available", "modprobe zram", "bind the host's /sys and /dev"]),
        (False, [], False, "docker", ["docker container", "modprobe zram"]),
        (True, [], True, "docker", ["read-only", "-v /sys:/sys:rw"]),
        (False, ["zram0"], True, None, ["read-only"]),
    ],
)
def test_unavailable_reason(control, devices, read_only, container, words):
    text = unavailable_reason(control, devices, read_only, container)
    for word in words:
        assert word in text


@pytest.mark.parametrize("control, devices", [(True, []), (False, ["zram0"]), (True, ["zram0", "zram1"])])
def test_available(control, devices):
    assert unavailable_reason(control, devices, False) is None


# --- what the kernel takes, read without making a device ---------------------------------------------

# The lab's 6.18 (/proc/config.gz): swapon of the 29th zram swap device failed with EPERM, 28 were taken.
LAB_CONFIG = parse_kernel_config("""
CONFIG_SWAP=y
CONFIG_MIGRATION=y
# CONFIG_DEVICE_PRIVATE is not set
CONFIG_PTE_MARKER_UFFD_WP=y
CONFIG_ZRAM=y
CONFIG_ZRAM_BACKEND_LZ4=y
# CONFIG_ZRAM_BACKEND_ZSTD is not set
CONFIG_ZRAM_BACKEND_LZO=y
CONFIG_ZRAM_DEF_COMP="lzo-rle"
CONFIG_CRYPTO_DEFLATE=y
CONFIG_CRYPTO_LZO=y
""")
EVERY_OPTION = {"CONFIG_DEVICE_PRIVATE": "y", "CONFIG_MIGRATION": "y", "CONFIG_MEMORY_FAILURE": "y",
                "CONFIG_PTE_MARKER": "y"}


def test_kernel_config_is_parsed():
    assert LAB_CONFIG["CONFIG_ZRAM_DEF_COMP"] == "lzo-rle"
    assert "CONFIG_DEVICE_PRIVATE" not in LAB_CONFIG and LAB_CONFIG["CONFIG_MIGRATION"] == "y"


@pytest.mark.parametrize("release, config, limit", [
    ("6.18.44-fc-v669", LAB_CONFIG, 28),  # measured: 28 swapons, the 29th refused
    ("6.12.43+deb13-amd64", EVERY_OPTION, 23),
    ("6.1.0-37-amd64", EVERY_OPTION, 22),  # swap-in errors still had a type of their own
    ("6.1.0-37-amd64", {"CONFIG_MIGRATION": "y"}, 28),  # no PTE_MARKER before 6.2: only what the config sets
    ("5.10.0-30-amd64", EVERY_OPTION, 26),  # before device-exclusive entries, PTE markers and swap-in errors
    ("4.9.0", {"CONFIG_MIGRATION": "y"}, 29),
    # Unreadable config: every option counted, so never above the kernel's own figure.
    ("6.18.44-fc-v669", None, 23),
    ("6.1.0-37-amd64", None, 22),
    ("", None, 22),
    (None, None, 22),
])
def test_max_swap_areas(release, config, limit):
    found, basis = max_swap_areas(release, config)
    assert found == limit, basis
    assert basis.startswith("32 swap types less ")


def test_max_swap_areas_says_how_it_was_worked_out():
    assert max_swap_areas("6.18.44-fc-v669", LAB_CONFIG)[1] == (
        "32 swap types less 3 for page migration, 1 for PTE markers, on Linux 6.18.44-fc-v669 as its config has it")
    assert "every option counted, as its config is unreadable" in max_swap_areas("6.18.44", None)[1]


PROC_CRYPTO = """name         : lzo-rle
driver       : lzo-rle-scomp
module       : kernel
type         : scomp

name         : sha256
driver       : sha256-generic
type         : shash

name         : deflate
driver       : deflate-generic
type         : compression

name         : lz4
driver       : lz4-scomp
type         : acomp
"""


def test_crypto_compressors():
    assert parse_crypto_compressors(PROC_CRYPTO) == ["lzo-rle", "deflate", "lz4"]
    assert parse_crypto_compressors("") == []


@pytest.mark.parametrize("release, config, crypto, modules, offered, source", [
    # 6.12 and later: zram's own compressors, only in the config; /proc/crypto (deflate here) says nothing of them.
    ("6.18.44-fc-v669", LAB_CONFIG, PROC_CRYPTO, None, ["lzo-rle", "lzo", "lz4"], "CONFIG_ZRAM_BACKEND_*"),
    ("6.12.43", {"CONFIG_ZRAM_BACKEND_ZSTD": "y", "CONFIG_ZRAM_BACKEND_LZ4K": "y",
                 "CONFIG_ZRAM_BACKEND_FORCE_ANY": "y"}, "", None, ["zstd", "lz4k"], "CONFIG_ZRAM_BACKEND_*"),
    ("6.18.0", None, PROC_CRYPTO, None, [], None),  # no config: nothing tells
    # Before 6.12: the crypto API, built in or a module crypto_has_comp() would load.
    ("6.1.0-37-amd64", {"CONFIG_CRYPTO_LZO": "y", "CONFIG_CRYPTO_ZSTD": "m", "CONFIG_CRYPTO_LZ4": "m"}, "",
     lambda name: True, ["lzo", "lzo-rle", "lz4", "zstd"], "CONFIG_CRYPTO_*"),
    ("6.1.0-37-amd64", {"CONFIG_CRYPTO_LZO": "y", "CONFIG_CRYPTO_ZSTD": "m"}, "", None, ["lzo", "lzo-rle"],
     "CONFIG_CRYPTO_*"),  # modules cannot be loaded
    ("6.1.0-37-amd64", None, PROC_CRYPTO, lambda name: name == "zstd", ["lzo-rle", "deflate", "lz4", "zstd"],
     "/proc/crypto"),
    ("4.19.0", None, PROC_CRYPTO, None, ["deflate", "lz4"], "/proc/crypto"),  # lzo-rle came with 5.1
    ("", None, PROC_CRYPTO, None, [], None),
])
def test_kernel_zram_algorithms(release, config, crypto, modules, offered, source):
    found, said = kernel_zram_algorithms(release, config, crypto, modules)
    assert found == offered
    assert (said is None) if source is None else (source in said)
