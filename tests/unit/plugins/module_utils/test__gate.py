# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

import pytest

from ansible_collections.ramdisk.provision.plugins.module_utils._gate import tmp_gate

GIB = 1024 ** 3
MIB = 1024 ** 2


@pytest.mark.parametrize(
    "usage, complete, total, available, swap, ram_backed, tmpfs, half, free, recommended",
    [
        (100 * MIB, True, 16 * GIB, 12 * GIB, 0, False, True, True, True, True),
        (8 * GIB, True, 16 * GIB, 12 * GIB, 0, False, True, True, True, True),  # exactly half fits
        (8 * GIB + 1, True, 16 * GIB, 12 * GIB, 0, False, True, False, True, False),
        (3 * GIB, True, 16 * GIB, 1 * GIB, 1 * GIB, False, True, True, False, False),
        (3 * GIB, True, 16 * GIB, 1 * GIB, 2 * GIB, False, True, True, True, True),  # swap counts
        (3 * GIB, True, 16 * GIB, 1 * GIB, 0, True, True, True, True, True),  # already in RAM: added back
        (100 * MIB, False, 16 * GIB, 12 * GIB, 0, False, True, True, True, False),  # scan stopped
        (100 * MIB, True, 16 * GIB, 12 * GIB, 0, False, False, True, True, False),  # no tmpfs
        (0, True, 1 * GIB, 0, 0, False, True, True, True, True),
    ],
)
def test_tmp_gate_table(usage, complete, total, available, swap, ram_backed, tmpfs, half, free, recommended):
    gate = tmp_gate(usage, complete, total, available, swap, ram_backed, tmpfs)
    assert gate["fits_half_ram"] is half
    assert gate["fits_free_memory_and_swap"] is free
    assert gate["recommended"] is recommended
    assert all(reason.endswith(".") for reason in gate["reasons"])


def test_reasons_name_figures():
    gate = tmp_gate(10 * GIB, True, 16 * GIB, 4 * GIB, 1 * GIB, False, True)
    text = " ".join(gate["reasons"])
    assert "10.0 GiB" in text and "8.0 GiB" in text and "4.0 GiB available" in text and "1.0 GiB free swap" in text


def test_ram_backed_reason():
    gate = tmp_gate(2 * GIB, True, 16 * GIB, 1 * GIB, 0, True, True)
    assert any("already RAM-backed" in reason and "added back" in reason for reason in gate["reasons"])


def test_incomplete_reason_says_at_least():
    gate = tmp_gate(5 * GIB, False, 64 * GIB, 60 * GIB, 0, False, True)
    assert any("stopped" in reason and "at least 5.0 GiB" in reason for reason in gate["reasons"])


def test_no_tmpfs_reason():
    gate = tmp_gate(0, True, 64 * GIB, 60 * GIB, 0, False, False)
    assert any("tmpfs" in reason and "/proc/filesystems" in reason for reason in gate["reasons"])


def test_a_cgroup_limit_is_named_as_the_hosts_ram():
    memory = {"capped_by_cgroup": True, "cgroup_limit_set_by": "/docker/abc", "meminfo_total_bytes": 24 * GIB}
    gate = tmp_gate(256 * MIB, True, 192 * MIB, 150 * MIB, 0, False, True, memory=memory)
    assert gate["reasons"][0] == ("RAM here is the memory limit of cgroup /docker/abc (192.0 MiB), not the 24.0 GiB "
                                  "/proc/meminfo shows.")
    assert gate["reasons"][1] == "/tmp uses 256.0 MiB, more than half of RAM (96.0 MiB)."
    assert gate["fits_half_ram"] is False and gate["fits_free_memory_and_swap"] is False
    # Not capped: the reasons are those of a host without a limit.
    plain = tmp_gate(256 * MIB, True, 192 * MIB, 150 * MIB, 0, False, True)
    assert tmp_gate(256 * MIB, True, 192 * MIB, 150 * MIB, 0, False, True, memory={"capped_by_cgroup": False}) == plain
    assert gate["reasons"][1:] == plain["reasons"]
