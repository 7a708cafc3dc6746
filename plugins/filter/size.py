# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters for size expressions such as 2G, 50% and min(ram / 2, 8G)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.ramdisk.provision.plugins.module_utils._size import SizeError, format_size, parse_size


def to_bytes(expr, ram_bytes=None):
    try:
        return parse_size(expr, ram_bytes=None if ram_bytes is None else int(ram_bytes))
    except (SizeError, ValueError, TypeError) as exc:
        raise AnsibleFilterError("to_bytes: %r is not a usable size: %s" % (expr, exc))


def human_size(num_bytes):
    try:
        return format_size(int(num_bytes))
    except (ValueError, TypeError) as exc:
        raise AnsibleFilterError("human_size: %r is not a number of bytes: %s" % (num_bytes, exc))


class FilterModule(object):
    def filters(self):
        return {
            "to_bytes": to_bytes,
            "human_size": human_size,
        }
