# SPDX-License-Identifier: GPL-3.0-or-later
"""ramdisk_apply as a module in this process, with its state directories under tmp_path: how it fails."""

from __future__ import annotations

import json
import os

import pytest
from ansible.module_utils.testing import patch_module_args

import ansible_collections.ramdisk.provision.plugins.modules.ramdisk_apply as module_under_test
from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths as paths
from ansible_collections.ramdisk.provision.plugins.module_utils import _lock
from ansible_collections.ramdisk.provision.plugins.module_utils._failure import MISSING, program_runner
from ansible_collections.ramdisk.provision.plugins.module_utils._journal import Journal


@pytest.fixture
def state(tmp_path, monkeypatch):
    for name, value in (("JOURNAL", tmp_path / "lib" / "journal.jsonl"), ("RUN_DIR", tmp_path / "run"),
                        ("LOCK", tmp_path / "run" / "lock")):
        monkeypatch.setattr(paths, name, str(value))
    # HostLock's default path was bound when it was defined.
    monkeypatch.setattr(_lock.HostLock.__init__, "__defaults__", (str(tmp_path / "run" / "lock"), None, 0.0))
    os.makedirs(tmp_path / "lib")
    os.makedirs(tmp_path / "run")
    return tmp_path


def _module_result(capsys, args):
    with patch_module_args(args), pytest.raises(SystemExit):
        module_under_test.main()
    return json.loads(capsys.readouterr().out)


def test_an_error_nobody_foresaw_says_what_happened_and_what_the_host_holds(state, capsys):
    # An entry without the keys a plan gives it: a KeyError deep in the module, no bare traceback.
    result = _module_result(capsys, {"host": "web1", "mounts": [{"path": "/srv/never-planned"}]})
    assert result["failed"] is True
    assert result["msg"].startswith("Host web1: ramdisk_apply stopped on an unexpected error: KeyError")
    assert "the journal %s holds no transaction left open" % paths.JOURNAL in result["msg"]
    assert "mounted now: /srv/never-planned: nothing mounted" in result["msg"]


def test_the_failure_names_the_open_transactions_of_the_journal(state, capsys):
    journal = Journal(paths.JOURNAL)
    journal.txn("run0", "t0", {"path": "/srv/a", "action": "mount", "pivot": 1,
                               "steps": [{"step": "mkdir", "args": {}}, {"step": "mount", "args": {}}]})
    journal.mark("begin", "run0", "t0", 0)
    journal.mark("done", "run0", "t0", 0, {})
    journal.close()
    from ansible_collections.ramdisk.provision.plugins.module_utils._failure import journal_state
    said = journal_state()
    assert "holds 1 open transaction(s)" in said and "/srv/a (mount, before its pivot: 1 of 2 steps done)" in said


def test_a_program_that_is_not_there_is_an_exit_status_not_the_end_of_the_module(state):
    class Module(object):
        def get_bin_path(self, name):
            return None

        def run_command(self, argv, environ_update=None):
            raise AssertionError("never started: %s" % argv)

    run = program_runner(Module())
    rc, out, err = run([str(state / "libexec" / "persist"), "sync", "t0"])
    assert (rc, out) == (MISSING, "") and "libexec/persist: no such program on this host" in err
    assert run(["no-such-tool"])[0] == MISSING
