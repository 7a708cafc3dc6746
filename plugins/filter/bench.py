# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of the benchmark role: the order it visits its targets in."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.ramdisk.provision.plugins.module_utils._bench import visit_order


def bench_visits(targets, runs, interleave=True):
    # ansible-core 2.17 and 2.18 hand task vars over as text ("False"): read them as Ansible reads booleans.
    try:
        return visit_order(targets, int(runs), interleave=boolean(interleave, strict=True))
    except (ValueError, TypeError) as exc:
        raise AnsibleFilterError("bench_visits: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"bench_visits": bench_visits}
