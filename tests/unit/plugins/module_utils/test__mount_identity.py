# SPDX-License-Identifier: GPL-3.0-or-later
"""The mount identity on this machine's kernel: the mount ID comes back after an umount, the unique one does not."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys

import pytest

from ansible_collections.ramdisk.provision.plugins.module_utils import _mount_identity as mi

KERNEL = tuple(int(part) for part in platform.release().split("-")[0].split(".")[:2])
UNIQUE = KERNEL >= (6, 8) and platform.machine() in mi.STATX_SYSCALL
COLLECTIONS = os.path.abspath(mi.__file__).rsplit(os.sep + "ansible_collections" + os.sep, 1)[0]


@pytest.mark.skipif(not UNIQUE, reason="the unique mount ID needs Linux 6.8 or later")
def test_each_mount_has_its_unique_id_and_a_path_that_is_not_there_none(tmp_path):
    assert isinstance(mi.unique_mount_id("/"), int) and mi.unique_mount_id("/") != mi.unique_mount_id("/proc")
    assert mi.unique_mount_id(str(tmp_path / "missing")) is None
    assert mi.identity("/")["boot"] == open(mi.BOOT_ID).read().strip()


def test_two_identities_are_compared_only_by_a_unique_id_of_one_boot():
    assert mi.same_mount({"boot": "b1", "unique": 5}, {"boot": "b1", "unique": 5}) is True
    assert mi.same_mount({"boot": "b1", "unique": 5}, {"boot": "b1", "unique": 6}) is False
    assert mi.same_mount({"boot": "b1", "unique": 5}, {"boot": "b2", "unique": 5}) is None
    assert mi.same_mount({"boot": "b1", "unique": None}, {"boot": "b1", "unique": 6}) is None
    assert mi.same_mount({"mount_id": 3}, {"boot": "b1", "unique": 6}) is None


REMOUNTS = r"""
import json, subprocess, sys
sys.path.insert(0, sys.argv[1])
from ansible_collections.ramdisk.provision.plugins.module_utils._mount_identity import unique_mount_id
seen = []
for _ in range(3):
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "identity-test", sys.argv[2]], check=True)
    line = [l for l in open("/proc/self/mountinfo") if l.split()[4] == sys.argv[2]][-1].split()
    seen.append([int(line[0]), line[2], unique_mount_id(sys.argv[2])])
    subprocess.run(["umount", sys.argv[2]], check=True)
print(json.dumps(seen))
"""


@pytest.mark.skipif(not UNIQUE or os.geteuid() != 0 or not shutil.which("unshare"),
                    reason="needs root, unshare and Linux 6.8 or later")
def test_a_tmpfs_mounted_again_at_a_path_gets_a_new_unique_id(tmp_path):
    import json
    out = subprocess.run(["unshare", "--mount", "--propagation", "private", "--", sys.executable, "-c", REMOUNTS,
                          COLLECTIONS, str(tmp_path)], check=True, capture_output=True, text=True).stdout
    seen = json.loads(out)
    assert len(set(unique for _id, _dev, unique in seen)) == 3
