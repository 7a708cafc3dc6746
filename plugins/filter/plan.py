# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters that plan RAM-backed mounts from a user list and ramdisk_facts."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.ramdisk.provision.plugins.module_utils._brd_plan import plan_brd
from ansible_collections.ramdisk.provision.plugins.module_utils._persist import review_persist
from ansible_collections.ramdisk.provision.plugins.module_utils._plan import plan_ramfs, plan_tmpfs
from ansible_collections.ramdisk.provision.plugins.module_utils._plan_core import plan_summary
from ansible_collections.ramdisk.provision.plugins.module_utils._zram_plan import plan_zram


def _checked(name, planner, mounts, facts, host, var_name, defaults):
    if facts is not None and not isinstance(facts, dict):
        raise AnsibleFilterError("%s: facts must be ansible_facts['ramdisk'] (a mapping), not %s"
                                 % (name, type(facts).__name__))
    if defaults is not None and not isinstance(defaults, dict):
        raise AnsibleFilterError("%s: defaults must be a mapping, not %s" % (name, type(defaults).__name__))
    return planner(mounts, facts or {}, host=str(host), var_name=str(var_name), defaults=defaults)


def tmpfs_plan(mounts, facts=None, host="localhost", var_name="tmpfs_mounts", defaults=None):
    return _checked("tmpfs_plan", plan_tmpfs, mounts, facts, host, var_name, defaults)


def zram_plan(devices, facts=None, host="localhost", var_name="zram_devices", defaults=None):
    return _checked("zram_plan", plan_zram, devices, facts, host, var_name, defaults)


def brd_plan(request, facts=None, host="localhost", defaults=None):
    if not isinstance(request, dict):
        raise AnsibleFilterError("brd_plan: the input must be a mapping with state, count, size and mounts, not %s"
                                 % type(request).__name__)
    return _checked("brd_plan", lambda req, fac, host, var_name, defaults: plan_brd(req, fac, host, defaults),
                    request, facts, host, "brd", defaults)


def ramfs_plan(mounts, facts=None, host="localhost", var_name="ramfs_mounts", defaults=None):
    return _checked("ramfs_plan", plan_ramfs, mounts, facts, host, var_name, defaults)


def persist_review(mounts, states=None, host="localhost"):
    if not isinstance(mounts, (list, tuple)):
        raise AnsibleFilterError("persist_review: the input must be a list of planned mounts, not %s"
                                 % type(mounts).__name__)
    if states is not None and not isinstance(states, dict):
        raise AnsibleFilterError("persist_review: states must be a mapping of token to host state, not %s"
                                 % type(states).__name__)
    return review_persist(mounts, states or {}, host=str(host))


def mount_plan_summary(plan):
    if not isinstance(plan, dict):
        raise AnsibleFilterError("mount_plan_summary: the input must be the result of tmpfs_plan, not %s"
                                 % type(plan).__name__)
    return plan_summary(plan)


class FilterModule(object):
    def filters(self):
        return {
            "tmpfs_plan": tmpfs_plan,
            "ramfs_plan": ramfs_plan,
            "zram_plan": zram_plan,
            "brd_plan": brd_plan,
            "mount_plan_summary": mount_plan_summary,
            "persist_review": persist_review,
        }
