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


def _zram_fs(name, state, backing):
    return {"name": name, "use": "filesystem", "state": state,
            "mount": {"path": "/srv/%s" % name, "fstype": "ext4", "state": "mounted" if state == "present" else "absent",
                      "persist": {"backing": backing}}}


@pytest.mark.parametrize("check", [False, True])
def test_persisted_zram_and_brd_mounts_go_before_their_device_and_come_after_it(state, capsys, monkeypatch, check):
    """A persisted zram or brd file system is carried out by the same module run, in the order a device needs:
    written back and unmounted before its device goes, mounted after its device is made (the mount role's three
    task includes did this before, one module run each)."""
    calls = []

    def fake_apply(items, executor, journal, run):
        calls.append(("mounts", [(item["path"], item.get("src")) for item in items]))
        return [{"path": item["path"], "changed": True} for item in items]

    def fake_zram(devices, executor, journal, run, settings):
        calls.append(("zram", [device["name"] for device in devices]))
        return [{"name": device["name"], "device": "zram3", "mount": dict(device["mount"], src="/dev/zram3")
                 if device["state"] == "present" else None} for device in devices]

    def fake_brd(plan, executor, journal, run):
        calls.append(("brd", [mount["path"] for mount in plan.get("mounts") or []]))
        return [{"what": "brd module", "mount": None}]

    monkeypatch.setattr(module_under_test, "apply", fake_apply)
    monkeypatch.setattr(module_under_test, "apply_zram", fake_zram)
    monkeypatch.setattr(module_under_test, "apply_brd", fake_brd)
    monkeypatch.setattr(module_under_test, "mount_items", lambda entries, vendor_tmp, systemd: list(entries))
    monkeypatch.setattr(module_under_test, "report_line", lambda info, systemd: info["name"])
    brd = {"module": {"state": "absent", "action": "unload"},
           "mounts": [{"path": "/srv/ram0", "src": "/dev/ram0", "state": "absent", "persist": {"backing": "/b0"}},
                      {"path": "/srv/ram1", "src": "/dev/ram1", "state": "absent", "persist": None}]}
    result = _module_result(capsys, {"host": "web1", "_ansible_check_mode": check, "brd": brd,
                                     "zram_known": {"old": "zram5"},
                                     "zram_devices": [_zram_fs("old", "absent", "/b1"), _zram_fs("new", "present", "/b2")]})
    assert "failed" not in result, result
    assert calls == [("mounts", [("/srv/old", "/dev/zram5"), ("/srv/ram0", "/dev/ram0")]),
                     ("zram", ["old", "new"]), ("brd", ["/srv/ram1"]), ("mounts", [("/srv/new", "/dev/zram3")])]
    assert [entry["path"] for entry in result["mounts"]] == ["/srv/old", "/srv/ram0", "/srv/new"]
