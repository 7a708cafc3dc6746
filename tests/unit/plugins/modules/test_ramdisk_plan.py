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


def test_an_error_nobody_foresaw_ends_the_plan_with_what_happened_and_what_the_host_holds(tmp_path, monkeypatch, capsys):
    import json

    import pytest
    from ansible.module_utils.testing import patch_module_args

    from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths

    monkeypatch.setattr(_host_paths, "JOURNAL", str(tmp_path / "journal.jsonl"))
    # A source that is not a mapping: the plan reads the host, then stops on it (no traceback, no bare message).
    with patch_module_args({"host": "web1", "sources": ["not a mapping"], "trial": False}), pytest.raises(SystemExit):
        module_under_test.main()
    result = json.loads(capsys.readouterr().out)
    assert result["failed"] is True
    assert result["msg"].startswith("Host web1: ramdisk_plan stopped on an unexpected error: ValueError")
    assert "holds no transaction left open" in result["msg"] and "mounted now: " in result["msg"]


def test_the_plan_returns_the_host_paths_the_roles_name(tmp_path, monkeypatch, capsys):
    """The ramdisk role's tasks and templates take the collector's paths from here (issue 43: no role writes a path)."""
    import json

    import pytest
    from ansible.module_utils.testing import patch_module_args

    from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths

    monkeypatch.setattr(_host_paths, "JOURNAL", str(tmp_path / "journal.jsonl"))
    args = {"host": "web1", "sources": [], "trial": False, "recover": False, "_ansible_check_mode": True}
    with patch_module_args(args), pytest.raises(SystemExit):
        module_under_test.main()
    result = json.loads(capsys.readouterr().out)
    assert not result.get("failed"), result.get("msg")
    assert result["errors"] == [] and result["host_paths"] == _host_paths.for_roles()
    assert result["host_paths"]["metrics_collector"] == _host_paths.METRICS_COLLECTOR
