# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

import pytest

from ansible_collections.ramdisk.provision.plugins.module_utils._zram_generator import (
    GeneratorError,
    render_section,
    zram_size,
)

MIB = 1024 ** 2
SWAP = {"name": "swap", "use": "swap", "priority": 100, "fstype": None, "mem_limit_bytes": None}
CACHE = {"name": "cache", "use": "filesystem", "priority": None, "fstype": "ext4", "mem_limit_bytes": None}


@pytest.mark.parametrize("size, text", [
    (72 * MIB, "72"),
    (1, "9.5367431640625e-07"),
    (MIB + 4096, "1.00390625"),
    (100000000, "95.367431640625"),
    (8 * 1024 * MIB, "8192"),
])
def test_zram_size_is_exact_mib(size, text):
    assert zram_size(size) == text
    # The generator computes zram-size * 1024 * 1024 in floating point: the bytes come back exactly.
    assert float(text) * MIB == size


@pytest.mark.parametrize("size", [0, -MIB, None, "72M", 1.5, True])
def test_zram_size_refuses_what_is_not_a_size(size):
    with pytest.raises(GeneratorError):
        zram_size(size)


def test_swap_section():
    assert render_section(SWAP, "zram3", 72 * MIB, "lz4") == (
        "[zram3]\n"
        "# Entry 'swap' of zram_devices (swap).\n"
        "zram-size = 72\n"
        "compression-algorithm = lz4\n"
        "swap-priority = 100\n"
    )


def test_file_system_section_has_fs_type_and_no_mount_point():
    text = render_section(CACHE, "zram4", 88 * MIB)
    assert text == "[zram4]\n# Entry 'cache' of zram_devices (filesystem).\nzram-size = 88\nfs-type = ext4\n"
    assert "mount-point" not in text and "compression-algorithm" not in text and "swap-priority" not in text


@pytest.mark.parametrize("priority", [-1, 0, 32767])
def test_priority_bounds_kept(priority):
    assert "swap-priority = %d\n" % priority in render_section(dict(SWAP, priority=priority), "zram0", MIB)


@pytest.mark.parametrize("entry, device, size, algorithm, words", [
    (SWAP, "ram0", MIB, None, "zram device name"),
    (SWAP, "zram", MIB, None, "zram device name"),
    (SWAP, None, MIB, None, "zram device name"),
    (dict(SWAP, use="other"), "zram0", MIB, None, "swap or filesystem"),
    (dict(SWAP, priority=32768), "zram0", MIB, None, "-1 to 32767"),
    (dict(SWAP, priority=-2), "zram0", MIB, None, "-1 to 32767"),
    (dict(SWAP, priority=True), "zram0", MIB, None, "-1 to 32767"),
    (dict(SWAP, mem_limit_bytes=MIB), "zram0", MIB, None, "memory limit"),
    (dict(CACHE, fstype=None), "zram0", MIB, None, "fstype"),
    (SWAP, "zram0", MIB, "lz4\nswap-priority = 1", "algorithm"),
    (SWAP, "zram0", 0, None, "above 0"),
])
def test_refuses_what_the_generator_cannot_keep(entry, device, size, algorithm, words):
    with pytest.raises(GeneratorError, match=words):
        render_section(entry, device, size, algorithm)
