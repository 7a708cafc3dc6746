# SPDX-License-Identifier: GPL-3.0-or-later
"""The planning core's own helpers; the planners' tests (test__plan, test__zram_plan, test__brd_plan,
test__policy) check the rest through them."""
from __future__ import annotations

import hashlib

from ansible_collections.ramdisk.provision.plugins.module_utils._plan_core import (
    _check_migration_xattrs,
    mount_token,
)


def test_migration_into_a_disk_file_system_keeps_user_xattrs_on_any_kernel():
    # A zram or brd entry's file system (ext4 here) keeps user.* attributes: nothing to refuse, even on a kernel
    # whose tmpfs holds none.
    planned_fs = {"path": "/var/tmp", "fstype": "ext4", "warnings": [], "action": "migrate"}
    path_facts = {"exists": True, "empty": False, "user_xattrs": {"user.mime_type": [2, "a.txt"]}}
    support = {"tmpfs": True, "tmpfs_user_xattrs": False, "kernel": "6.1.0"}
    errors = []
    _check_migration_xattrs(planned_fs, path_facts, support, "web01", "x", errors)
    assert errors == [] and planned_fs["action"] == "migrate" and "dropped_xattrs" not in planned_fs
    # The same data on tmpfs is refused: the test above is not passing for want of anything to look at.
    planned_tmpfs = dict(planned_fs, fstype="tmpfs", warnings=[])
    _check_migration_xattrs(planned_tmpfs, path_facts, support, "web01", "x", errors)
    assert planned_tmpfs["action"] == "refuse" and len(errors) == 1


def test_mount_token_matches_the_role():
    # module_utils/_mount_steps.py token(): path[1:] | regex_replace('[^A-Za-z0-9_.]', '-') ~ '-' ~ (path | hash('sha1'))[:8]
    assert mount_token("/var/lib/postgresql") == "var-lib-postgresql-" + hashlib.sha1(
        b"/var/lib/postgresql").hexdigest()[:8]
    assert mount_token("/srv/a-b") != mount_token("/srv/a/b")
