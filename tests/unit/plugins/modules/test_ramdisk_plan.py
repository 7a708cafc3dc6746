# SPDX-License-Identifier: GPL-3.0-or-later
"""ramdisk_plan's look at the host where a unit test can make it real: the processes using a path."""

from __future__ import annotations

import os
import subprocess

import ansible_collections.ramdisk.provision.plugins.modules.ramdisk_plan as module_under_test


def test_users_of_a_path_are_the_processes_of_this_mount_namespace(tmp_path, monkeypatch):
    sleeper = subprocess.Popen(["sleep", "30"], cwd=str(tmp_path))
    try:
        assert (sleeper.pid, "sleep") in module_under_test.HostView.users_of(str(tmp_path))
        real_readlink = os.readlink

        def readlink(name):
            # The sleeper as a process of another mount namespace, where the same path is another mount.
            if name == "/proc/%d/ns/mnt" % sleeper.pid:
                return "mnt:[1]"
            return real_readlink(name)

        monkeypatch.setattr(os, "readlink", readlink)
        assert (sleeper.pid, "sleep") not in module_under_test.HostView.users_of(str(tmp_path))
    finally:
        sleeper.kill()
        sleeper.wait()
