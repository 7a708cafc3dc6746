# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters that plan RAM-backed mounts from a user list and ramdisk_facts."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.ramdisk.provision.plugins.module_utils._plan import plan_summary, plan_tmpfs


def tmpfs_plan(mounts, facts=None, host="localhost", var_name="tmpfs_mounts", defaults=None):
    if facts is not None and not isinstance(facts, dict):
        raise AnsibleFilterError("tmpfs_plan: facts must be ansible_facts['ramdisk'] (a mapping), not %s"
                                 % type(facts).__name__)
    if defaults is not None and not isinstance(defaults, dict):
        raise AnsibleFilterError("tmpfs_plan: defaults must be a mapping, not %s" % type(defaults).__name__)
    return plan_tmpfs(mounts, facts or {}, host=str(host), var_name=str(var_name), defaults=defaults)


def tmpfs_plan_summary(plan):
    if not isinstance(plan, dict):
        raise AnsibleFilterError("tmpfs_plan_summary: the input must be the result of tmpfs_plan, not %s"
                                 % type(plan).__name__)
    return plan_summary(plan)


class FilterModule(object):
    def filters(self):
        return {
            "tmpfs_plan": tmpfs_plan,
            "tmpfs_plan_summary": tmpfs_plan_summary,
        }
