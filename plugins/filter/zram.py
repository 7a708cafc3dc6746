# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of the zram role."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.ramdisk.provision.plugins.module_utils._zram_generator import GeneratorError, render_section


def zram_generator_conf(entry, device, disksize_bytes, algorithm=None):
    if not isinstance(entry, dict):
        raise AnsibleFilterError("zram_generator_conf: the input must be a planned zram device (a mapping), not %s"
                                 % type(entry).__name__)
    try:
        return render_section(entry, device, int(disksize_bytes), algorithm or None)
    except (GeneratorError, ValueError, TypeError) as exc:
        raise AnsibleFilterError("zram_generator_conf: entry %r: %s" % (entry.get("name"), exc))


class FilterModule(object):
    def filters(self):
        return {"zram_generator_conf": zram_generator_conf}
