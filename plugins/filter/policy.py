# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter that merges and checks a host's RAM-disk policy (the ramdisk role's ramdisk_mounts__* variables)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.ramdisk.provision.plugins.module_utils._policy import plan_policy


def ramdisk_policy(sources, facts=None, host="localhost", purposes=None, defaults=None, state="present",
                   budget="80%", zram_ratio=2.0, swap_devices=None, swap_known=None,
                   swap_defaults=None):
    if not isinstance(sources, (list, tuple)):
        raise AnsibleFilterError("ramdisk_policy: the input must be a list of {name, value} mappings, not %s"
                                 % type(sources).__name__)
    pairs = []
    for source in sources:
        if not isinstance(source, dict) or "name" not in source:
            raise AnsibleFilterError("ramdisk_policy: each input item must be a mapping with name and value, not %r"
                                     % (source,))
        pairs.append((str(source["name"]), source.get("value")))
    for name, value in (("facts", facts), ("purposes", purposes), ("defaults", defaults)):
        if value is not None and not isinstance(value, dict):
            raise AnsibleFilterError("ramdisk_policy: %s must be a mapping, not %s" % (name, type(value).__name__))
    return plan_policy(pairs, facts or {}, host=str(host), purposes=purposes, defaults=defaults, state=state,
                       budget=budget, zram_ratio=zram_ratio, swap_devices=swap_devices, swap_known=swap_known,
                       swap_defaults=swap_defaults)


class FilterModule(object):
    def filters(self):
        return {"ramdisk_policy": ramdisk_policy}
