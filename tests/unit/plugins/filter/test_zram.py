# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.ramdisk.provision.plugins.filter.zram import FilterModule

MIB = 1024 ** 2
render = FilterModule().filters()["zram_generator_conf"]


def test_filter_names():
    assert set(FilterModule().filters()) == {"zram_generator_conf"}


def test_renders_what_the_role_passes():
    # The role passes the size as a string from a fact and an empty algorithm for the kernel's default.
    entry = {"name": "swap", "use": "swap", "priority": 100, "mem_limit_bytes": None}
    assert render(entry, "zram2", str(72 * MIB), "") == (
        "[zram2]\n# Entry 'swap' of zram_devices (swap).\nzram-size = 72\nswap-priority = 100\n")


@pytest.mark.parametrize("entry, device, size", [
    ("swap", "zram0", MIB),
    ({"name": "swap", "use": "swap", "priority": 100}, "zram0", "72M"),
    ({"name": "swap", "use": "swap", "priority": 100, "mem_limit_bytes": MIB}, "zram0", MIB),
])
def test_bad_input_is_a_filter_error(entry, device, size):
    with pytest.raises(AnsibleFilterError, match="zram_generator_conf"):
        render(entry, device, size)
