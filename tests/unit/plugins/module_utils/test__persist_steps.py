# SPDX-License-Identifier: GPL-3.0-or-later
"""persist as executor steps: the transaction built for each situation, and the steps that touch the backing, on
files in a scratch directory (the executor's test fixture). What needs systemd and mounts runs in the lab
containers (molecule/database, molecule/vm)."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.ramdisk.provision.plugins.module_utils import _executor as ex_mod
from ansible_collections.ramdisk.provision.plugins.module_utils import _mount_txn
from ansible_collections.ramdisk.provision.plugins.module_utils import _steps as steps_mod
from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths as paths
from ansible_collections.ramdisk.provision.plugins.module_utils import _persist_steps as ps
from ansible_collections.ramdisk.provision.plugins.module_utils import _trust
from ansible_collections.ramdisk.provision.plugins.module_utils._dry_run import mark_todo
from ansible_collections.ramdisk.provision.plugins.module_utils._journal import Journal
from ansible_collections.ramdisk.provision.plugins.module_utils._persist import conf_text, unit_texts
from ansible_collections.ramdisk.provision.plugins.module_utils._persist_steps import (
    _read_current,
    delta_helper_text,
    persist_helper_text,
)

# host is a fixture that persist_host builds on.
from test__executor import Recorder, entry, host  # noqa: F401 # pylint: disable=unused-import


@pytest.fixture
def persist_host(host, monkeypatch):  # noqa: F811
    for name, value in (("PERSIST_CONF_DIR", host / "etc" / "ramdisk-provision" / "persist"),
                        ("LIBEXEC_DIR", host / "libexec"), ("PERSIST_HELPER", host / "libexec" / "persist"),
                        ("PERSIST_DELTA", host / "libexec" / "persist-delta.py"),
                        ("PERSIST_STATE_DIR", host / "run" / "persist"),
                        ("PERSIST_STATUS_DIR", host / "var" / "persist")):
        monkeypatch.setattr(paths, name, str(value))
    # The scratch host stands for /: a backing under it is checked from there down, not through /tmp (1777).
    real_check = _trust.check_backing

    def check_below_host(path, root="/"):
        inside = path.startswith(str(host) + "/")
        return real_check(path[len(str(host)):] if inside else path, str(host) if inside else root)
    monkeypatch.setattr(_trust, "check_backing", check_below_host)
    return host


class Systemd(Recorder):
    """A Recorder whose systemctl show answers from UNITS: {unit: (ActiveState, UnitFileState)}."""

    def __init__(self, units=None, **kwargs):
        super().__init__(**kwargs)
        self.units = units or {}
        self.persist_helper = None

    def _run(self, argv):
        self.calls.append(" ".join(argv))
        if argv[:2] == ["systemctl", "show"]:
            active, enabled = self.units.get(argv[-1], ("inactive", "disabled"))
            if "--value" in argv:
                return 0, active + "\n", ""
            return 0, "ActiveState=%s\nUnitFileState=%s\n" % (active, enabled), ""
        return 0, "", ""


def persisted(backing, **changes):
    persist = {"backing": str(backing), "interval": "5min", "interval_seconds": 300, "services": ["db.service"]}
    return entry(persist=persist, **changes)


def names(steps):
    return [step["step"] + ("" if step["step"] not in ("systemctl", "systemctl_start") else
                            " " + " ".join(step["args"]["argv"][:1])) for step in steps]


def test_a_new_persisted_mount_is_mounted_copied_to_the_backing_checked_then_started(persist_host):
    backing = persist_host / "backing"
    ex = Systemd(units={"db.service": ("active", "enabled")})
    steps, pivot = ex_mod.build(persisted(backing), True, ex)
    got = names(steps)
    assert got[0] == "systemctl stop" and got[-1] == "systemctl start"
    assert steps[0]["args"]["undo"] == ["start", "db.service"]
    assert steps[pivot]["step"] == "mount"
    # The backing's first copy is made and checked and the persist unit enabled before the fstab line (a boot never
    # mounts the path before the backing holds a checked copy and the unit that restores it first is enabled); the
    # unit starts after the line, and the record comes last.
    order = ["mount", "sync", "verify", "systemctl enable", "fstab", "systemctl_start start"]
    assert [got.index(name) for name in order] == sorted(got.index(name) for name in order)
    assert steps[got.index("systemctl_start start")]["args"]["unrestore"].endswith(".restored")
    assert steps[-2]["args"]["file"] == paths.record_file(persisted(backing)["token"])
    assert [step["args"]["mode"] for step in steps if step["step"] == "mkdir" and step["args"].get("mode")] == ["0700"]
    # After a reboot the fstab line is the point of no return (a boot mounts and restores the path from it on); a new
    # mount held nothing the undo could lose.
    assert ex_mod.boot_pivot(steps) == got.index("fstab") and steps[got.index("sync")]["args"]["disk"]
    assert not any(step["args"].get("boot_pivot") for step in steps if step["step"] != "fstab")


def test_a_journal_mount_moves_journald_out_and_back_and_restarts_it_with_its_size_limit(persist_host, monkeypatch):
    monkeypatch.setattr(paths, "JOURNALD_DROPIN_DIR", str(persist_host / "etc" / "journald.conf.d"))
    backing = persist_host / "backing"
    flush = "systemd-journal-flush.service"
    ex = Systemd(units={flush: ("active", "static")})
    item = persisted(backing, size_bytes=64 * 1024 * 1024)
    item["persist"]["services"] = [flush]
    monkeypatch.setattr(ps, "holds_journal", lambda path: path == item["path"])
    monkeypatch.setattr(ps, "journald_dropin_text", lambda entry: "[Journal]\nSystemMaxUse=33554432\n")
    steps, _pivot = ex_mod.build(item, True, ex)
    got = names(steps)
    # journalctl --relinquish-var: the flush service's own stop does nothing while the journal is on the root.
    assert got[:2] == ["systemctl stop", "journal_var"] and steps[1]["args"] == {"to": "relinquish"}
    assert got[-2:] == ["journal_var", "systemctl start"] and steps[-2]["args"] == {"to": "flush"}
    dropin = paths.journald_dropin_file(item["token"])
    at = [i for i, step in enumerate(steps) if step["step"] == "file" and step["args"]["file"] == dropin]
    assert len(at) == 1
    # A restart after the drop-in is written; one before it restarts journald when the change is undone.
    assert [steps[at[0] - 1]["args"], steps[at[0] + 1]["args"]] == [{"on": "undo"}, {"on": "do"}]
    assert got.index("mount") < at[0] < got.index("systemctl_start start")

    ex.do("journal_var", {"to": "relinquish"})
    ex.do("journald", {"on": "undo"})
    ex.do("journald", {"on": "do"})
    ex.undo("journald", {"on": "do"}, {}, True)
    ex.undo("journald", {"on": "undo"}, {}, True)
    ex.undo("journal_var", {"to": "relinquish"}, {}, True)
    ex.undo("journal_var", {"to": "flush"}, {}, False)  # another boot: journald is where the boot put it
    assert ex.calls[-4:] == ["journalctl --relinquish-var", "systemctl restart systemd-journald.service",
                             "systemctl restart systemd-journald.service", "journalctl --flush"]


def test_a_migrate_whose_backing_holds_the_data_is_a_plain_mount_filled_by_the_restore(persist_host):
    backing = persist_host / "backing"
    os.makedirs(backing / "snap-1")
    os.symlink("snap-1", str(backing / "current"))
    item = persisted(backing, action="migrate", migrate=True)
    # An earlier run set persist up; the mount is gone (unmounted by hand): the backing holds the data of record.
    with open(paths.persist_unit_files(item["token"])["persist"], "w") as handle:
        handle.write("x\n")
    ex = Systemd()
    steps, pivot = ex_mod.build(item, True, ex)
    got = names(steps)
    assert "copy" not in got and "move" not in got and steps[pivot]["step"] == "mount"
    assert "sync" not in got
    restored = got.index("verify")
    assert got.index("systemctl_start start") < restored
    assert steps[restored]["args"]["dest"] == "/srv/a"


def settled(persist_host):
    """A persisted mount an earlier run set up whole, and the state of its units: (item, units)."""
    backing = persist_host / "backing"
    os.makedirs(backing / "snap-1")
    os.symlink("snap-1", str(backing / "current"))
    mounted = persist_host / "data"
    os.makedirs(mounted)
    item = persisted(backing, action="ok", path=str(mounted))
    token = item["token"]
    os.makedirs(os.path.dirname(paths.PERSIST_HELPER))
    with open(paths.PERSIST_HELPER, "w") as handle:
        handle.write(persist_helper_text())
    with open(paths.PERSIST_DELTA, "w") as handle:
        handle.write(delta_helper_text())
    os.makedirs(paths.PERSIST_CONF_DIR)
    with open(paths.persist_conf_file(token), "w") as handle:
        handle.write(steps_mod.HEADER + conf_text(item))
    for kind, text in unit_texts(item).items():
        with open(paths.persist_unit_files(token)[kind], "w") as handle:
            handle.write(steps_mod.HEADER + text)
    with open(item["files"]["record"], "w") as handle:
        handle.write(_mount_txn.record_text(item))
    with open(paths.FSTAB, "a") as handle:
        handle.write("tmpfs %s tmpfs size=1M,mode=755,nosuid 0 0\n" % mounted)
    units = {"ramdisk-persist-%s.service" % token: ("active", "enabled"),
             "ramdisk-persist-sync-%s.timer" % token: ("active", "static")}
    item["mode"] = None  # the root as it is: nothing to set
    return item, units


def test_a_settled_persisted_mount_has_nothing_to_do(persist_host):
    item, units = settled(persist_host)
    steps, pivot = ex_mod.build(item, True, Systemd(units=units))
    assert steps == [] and pivot is None


def test_the_helper_gets_its_copy_and_a_newer_copy_is_installed(persist_host):
    item, units = settled(persist_host)
    with open(paths.PERSIST_DELTA, "w") as handle:
        handle.write("# an older copy\n")
    steps, _pivot = ex_mod.build(item, True, Systemd(units=units))
    assert [(step["step"], step["args"]["file"], step["args"]["text"]) for step in steps] == [
        ("file", paths.PERSIST_DELTA, delta_helper_text())]
    assert "def sync(" in delta_helper_text()


def test_reading_the_backing_finishes_a_sync_cut_short_first(tmp_path):
    """The executor's readers of current (return, writeback, verify) roll a committed sync forward first."""
    backing = tmp_path / "backing"
    os.makedirs(backing / "snap-1")
    os.symlink("snap-1", str(backing / "current"))
    (backing / "snap-1" / "a").write_text("old", encoding="utf-8")
    state = backing / ".persist-delta"
    os.makedirs(state / "stage")
    (state / "stage" / "0").write_text("new", encoding="utf-8")
    record = {"gen": 1, "keep": 2, "ops": [{"op": "put", "path": "a", "had_old": True}], "digest": "", "made": 0,
              "base": "snap-1"}
    (state / "commit.json").write_text(json.dumps(record), encoding="utf-8")
    _read_current(str(backing))
    assert (backing / "current" / "a").read_text(encoding="utf-8") == "new"
    assert sorted(os.listdir(state)) == ["gen-1.json", "lock", "undo-1"]
    assert _read_current(str(tmp_path / "none")) is None


def checking(units):
    ex = Systemd(units=units)
    ex.check = True
    return ex


def test_the_plan_skips_a_settled_persisted_mount_and_not_one_whose_helper_changed(persist_host):
    item, units = settled(persist_host)
    plan = {"tmpfs": [dict(item, todo=True)], "ramfs": [], "zram": [], "brd": {}}
    assert mark_todo(plan, checking(units), {}, False) is False
    assert plan["tmpfs"][0]["todo"] is False
    # An older helper installed (persist.sh's text, say): the run installs this one.
    with open(paths.PERSIST_HELPER, "w") as handle:
        handle.write("#!/bin/sh\n# the helper before\n")
    plan["tmpfs"][0]["todo"] = True
    assert mark_todo(plan, checking(units), {}, False) is True and plan["tmpfs"][0]["todo"] is True


def test_the_plan_counts_as_to_do_what_the_dry_run_refuses_and_a_persisted_zram_mount(persist_host):
    item, units = settled(persist_host)
    units["ramdisk-persist-%s.service" % item["token"]] = ("failed", "enabled")
    os.unlink(paths.PERSIST_HELPER)
    plan = {"tmpfs": [dict(item, todo=True)], "ramfs": [], "brd": {},
            "zram": [{"name": "z", "mount": {"path": "/srv/z", "persist": {"backing": "/srv/zb"}}}]}
    assert mark_todo(plan, checking(units), {}, False) is True
    assert plan["tmpfs"][0]["todo"] is True and plan["zram"][0]["todo"] is True


def test_a_persisted_mount_that_goes_is_written_back_unmounted_then_returned_to_disk(persist_host, monkeypatch):
    backing = persist_host / "backing"
    os.makedirs(backing / "snap-1")
    os.symlink("snap-1", str(backing / "current"))
    item = persisted(backing, path="/srv/old", state="absent", action="unmount")
    token = item["token"]
    for kind in ("persist", "sync", "timer"):
        with open(paths.persist_unit_files(token)[kind], "w") as handle:
            handle.write("x\n")
    os.makedirs(paths.PERSIST_STATUS_DIR)
    status = "%s/%s.status" % (paths.PERSIST_STATUS_DIR, token)
    with open(status, "w") as handle:
        handle.write("RESULT=ok\n")
    monkeypatch.setattr(steps_mod, "mountinfo", lambda: [{"mount_point": "/srv/old", "mount_id": 42, "fstype": "tmpfs",
                                                          "source": "tmpfs"}])
    units = {"ramdisk-persist-%s.service" % token: ("active", "enabled"),
             "ramdisk-persist-sync-%s.timer" % token: ("active", "static"), "db.service": ("active", "enabled")}
    steps, pivot = ex_mod.build(item, True, Systemd(units=units))
    got = names(steps)
    assert got[:4] == ["systemctl stop", "systemctl stop", "systemctl stop", "writeback"]
    assert steps[pivot]["step"] == "unmount"
    assert got.index("unmount") < got.index("return") < got.index("clear_backing") < got.index("systemctl disable")
    # After a reboot: undone while the boot still mounts it from its fstab line, finished once the line is gone.
    assert got.index("unmount") < ex_mod.boot_pivot(steps) == got.index("fstab") < got.index("return")
    assert got[-1] == "systemctl start"
    removed = [step["args"]["file"] for step in steps if step["step"] == "file" and step["args"]["text"] is None]
    assert set(paths.persist_unit_files(token).values()) | {status} <= set(removed)


def test_persist_without_systemd_is_refused_before_any_step(persist_host):
    with pytest.raises(ex_mod.StepError, match="does not run systemd"):
        ex_mod.build(persisted(persist_host / "backing"), False, Systemd(systemd=False))


def test_a_backing_with_files_of_its_own_is_refused_under_the_lock(persist_host):
    backing = persist_host / "backing"
    os.makedirs(backing)
    (backing / "notes.txt").write_text("mine")
    ex = Systemd()
    journal = Journal(str(persist_host / "journal.jsonl"))
    with pytest.raises(ex_mod.ApplyError, match="cannot be carried out, so this run changed nothing.*notes.txt"):
        ex_mod.apply([persisted(backing)], ex, journal, "run1")
    assert not any(call.startswith("do ") for call in ex.calls) and not os.path.exists(journal.path)


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_a_backing_a_user_planted_records_in_is_refused_under_the_lock(persist_host):
    backing = persist_host / "backing"
    os.makedirs(backing / ".persist-delta")
    (backing / ".persist-delta" / "commit.json").write_text('{"gen": 1, "ops": []}')
    os.chown(str(backing / ".persist-delta"), 65534, 65534)
    ex = Systemd()
    journal = Journal(str(persist_host / "journal.jsonl"))
    with pytest.raises(ex_mod.ApplyError, match="changed nothing.*/backing/.persist-delta' is owned by .*uid 65534"):
        ex_mod.apply([persisted(backing)], ex, journal, "run1")
    assert not any(call.startswith("do ") for call in ex.calls) and not os.path.exists(journal.path)


def test_the_backings_copies_are_removed_without_following_a_link(tmp_path):
    outside = tmp_path / "outside"
    os.makedirs(outside / "kept")
    backing = tmp_path / "backing"
    os.makedirs(backing / "snap-1" / "sub")
    (backing / "snap-1" / "sub" / "f").write_text("x")
    os.symlink(str(outside), str(backing / "current"))
    for name in ("current", "snap-1", "snap-gone"):
        ps._remove(str(backing / name))
    ps._remove(str(tmp_path / "no-such-dir" / "snap-1"))
    assert os.listdir(backing) == [] and os.listdir(outside) == ["kept"]
    (tmp_path / ".d.ramdisk-return").write_text("someone's file")
    with pytest.raises(OSError, match="is in the way of the data's return and is not a directory"):
        ps._remove_ours(str(tmp_path / ".d.ramdisk-return"))
    os.makedirs(tmp_path / ".d.ramdisk-replaced" / "deep")
    ps._remove_ours(str(tmp_path / ".d.ramdisk-replaced"))
    ps._remove_ours(str(tmp_path / ".d.ramdisk-replaced"))
    assert not (tmp_path / ".d.ramdisk-replaced").exists()


def test_undoing_the_first_copy_puts_the_backing_back(tmp_path):
    backing = tmp_path / "backing"
    os.makedirs(backing / "snap-old")
    os.symlink("snap-old", str(backing / "current"))
    args = {"backing": str(backing), "before": ["current", "snap-old"], "current": "snap-old", "disk": True,
            "path": str(tmp_path / "data")}
    # What a sync did: a new copy, current switched to it, and one cut short.
    os.makedirs(backing / "snap-new")
    os.makedirs(backing / ".new-2")
    os.unlink(str(backing / "current"))
    os.symlink("snap-new", str(backing / "current"))
    ps.PersistSteps(None).undo_sync(args, {}, True)
    assert sorted(os.listdir(backing)) == ["current", "snap-old"] and os.readlink(str(backing / "current")) == "snap-old"
    # A backing that had no copy before has none after.
    args = {"backing": str(backing), "before": [], "current": None, "disk": True, "path": str(tmp_path / "data")}
    ps.PersistSteps(None).undo_sync(args, {}, True)
    assert os.listdir(backing) == []


def test_undoing_a_live_mounts_first_copy_keeps_it_once_the_ram_is_gone(tmp_path):
    """A live mount's first copy is its only one after a reboot, or once the mount it was made from is gone."""
    backing = tmp_path / "backing"
    os.makedirs(backing / "snap-new" / "sub")
    os.symlink("snap-new", str(backing / "current"))
    args = {"backing": str(backing), "before": [], "current": None, "path": str(tmp_path / "data"), "mount_id": 4242}
    for same_boot in (False, True):  # True: nothing is mounted at the path any more
        ps.PersistSteps(None).undo_sync(args, {}, same_boot)
        assert sorted(os.listdir(backing)) == ["current", "snap-new"]


def test_undoing_the_start_of_persist_first_takes_away_the_mark_of_its_restore(persist_host):
    mark = persist_host / "restored"
    mark.write_text("42 0:50\n")
    ex = Systemd()
    ex.undo("systemctl", {"argv": ["start", "p.service"], "undo": ["stop", "p.service"], "unrestore": str(mark)}, {}, True)
    assert not mark.exists() and ex.calls[-1] == "systemctl stop p.service"


def _returning(tmp_path):
    """(a backing whose current copy holds sub/f, a directory on disk with older entries)."""
    backing = tmp_path / "backing"
    os.makedirs(backing / "snap-1" / "sub")
    (backing / "snap-1" / "sub" / "f").write_text("new")
    os.symlink("snap-1", str(backing / "current"))
    disk = tmp_path / "disk"
    os.makedirs(disk / "old")
    (disk / "stale").write_text("old")
    return backing, disk


def test_the_copy_returns_to_disk_only_once_nothing_is_mounted_there(tmp_path, monkeypatch):
    backing, disk = _returning(tmp_path)

    args = {"path": str(disk), "backing": str(backing), "fstype": "tmpfs"}
    monkeypatch.setattr(ps, "_is_mount_point", lambda path: True)
    with pytest.raises(RuntimeError, match="still a mount point"):
        returner().do_return(args)
    assert (disk / "stale").exists()
    monkeypatch.setattr(ps, "_is_mount_point", lambda path: False)
    assert returner().do_return(args)["returned"]
    assert sorted(os.listdir(disk)) == ["sub"] and (disk / "sub" / "f").read_text() == "new"
    returner().do_clear_backing({"backing": str(backing)})
    assert not backing.exists()


class Tools(object):
    """A context whose tools run for real and whose errors are RuntimeErrors."""

    def tool(self, argv, what):
        import subprocess
        subprocess.run(argv, check=True)

    def error(self, message):
        raise RuntimeError(message)


def returner():
    """The persist steps with their tools for real (do_return's copy killed or cut short by _returning_copy)."""
    return ps.PersistSteps(Tools())


def _returning_copy(monkeypatch):
    """The helper's return copies for real; then what it is told says whether it was killed or cut short."""
    real = ps._persist_helper.return_copy
    told = {}

    def return_copy(backing, dest):
        real(backing, dest)
        if told.get("cp") == "kill":
            raise SystemExit("killed after the copy")
        if told.get("cp") == "short":
            os.unlink(os.path.join(dest, "sub", "f"))
    monkeypatch.setattr(ps._persist_helper, "return_copy", return_copy)
    return told


def test_a_return_cut_short_or_refused_leaves_the_directory_on_disk_whole(tmp_path, monkeypatch):
    """The copy is made beside the directory and swapped in: a kill or a bad copy never leaves it emptied or half
    filled, and the next try finishes it (a swap by two renames killed in between included)."""
    backing, disk = _returning(tmp_path)
    monkeypatch.setattr(ps, "_is_mount_point", lambda path: False)
    args = {"path": str(disk), "backing": str(backing), "fstype": "tmpfs"}
    told = _returning_copy(monkeypatch)
    told["cp"] = "short"
    with pytest.raises(RuntimeError, match="differs from the backing's copy"):
        returner().do_return(args)
    assert sorted(os.listdir(disk)) == ["old", "stale"]
    told["cp"] = "kill"
    with pytest.raises(SystemExit):
        returner().do_return(args)
    assert sorted(os.listdir(disk)) == ["old", "stale"]
    told["cp"] = None
    # Killed between the two renames of a swap: the directory is away, the copy beside it.
    fresh, aside = ps.return_names(str(disk))
    os.rename(str(disk), aside)
    assert returner().do_return(args)["returned"]
    assert sorted(os.listdir(disk)) == ["sub"] and (disk / "sub" / "f").read_text() == "new"
    assert sorted(os.listdir(tmp_path)) == ["backing", "disk"]


def test_the_copy_returns_into_a_setgid_directory_with_the_modes_of_the_copy(tmp_path, monkeypatch):
    # The disk directory of a mount with mode 2750: without care, every directory cp makes in it inherits the bit.
    backing = tmp_path / "backing"
    os.makedirs(backing / "snap-1" / "sub" / "deeper")
    for directory, mode in ((backing / "snap-1" / "sub" / "deeper", 0o750), (backing / "snap-1" / "sub", 0o750),
                            (backing / "snap-1", 0o2750)):
        os.chmod(directory, mode)
    os.symlink("snap-1", str(backing / "current"))
    disk = tmp_path / "disk"
    os.makedirs(disk)
    os.chmod(disk, 0o2750)

    monkeypatch.setattr(ps, "_is_mount_point", lambda path: False)
    assert returner().do_return({"path": str(disk), "backing": str(backing), "fstype": "tmpfs"})["returned"]
    assert [oct(os.stat(path).st_mode & 0o7777) for path in (disk, disk / "sub", disk / "sub" / "deeper")] == \
        ["0o2750", "0o750", "0o750"]


class Verifier(Systemd):
    """Systemd whose checks of a copy against a mount are recorded: the new mount here is not mounted for real."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.registry["verify"] = (self.do_verify, self.registry["verify"][1])

    def do_verify(self, args):
        self.calls.append("do verify %s" % args["dest"])
        return {"entries": 0}

    def _run(self, argv):
        if argv[0] in ("cp", "sync"):
            # The return's copy is real: it is checked against the backing's before it is swapped in.
            self.calls.append(" ".join(argv))
            import subprocess
            done = subprocess.run(argv, capture_output=True, text=True, check=False)
            return done.returncode, done.stdout, done.stderr
        return super()._run(argv)


def test_a_run_that_releases_the_last_persisted_mount_and_adds_another_keeps_the_helper(persist_host, monkeypatch):
    old, units = settled(persist_host)
    old = dict(old, state="absent", action="unmount")
    monkeypatch.setattr(steps_mod, "mountinfo", lambda: [{"mount_point": old["path"], "mount_id": 42, "fstype": "tmpfs",
                                                          "source": "tmpfs"}])
    new = persisted(persist_host / "backing-new", path="/srv/b")
    ex = Verifier(units=dict(units, **{"db.service": ("active", "enabled")}))
    ex_mod.apply([old, new], ex, Journal(str(persist_host / "journal.jsonl")), "run1")
    # The release went whole, and the helper that the new mount's units run is still there.
    assert not os.path.exists(paths.persist_conf_file(old["token"]))
    assert os.path.exists(paths.persist_conf_file(new["token"]))
    assert open(paths.PERSIST_HELPER).read() == persist_helper_text()
    assert open(paths.PERSIST_DELTA).read() == delta_helper_text()
    assert "%s sync %s" % (paths.PERSIST_HELPER, new["token"]) in ex.calls


def test_the_end_state_of_a_run_decides_which_persisted_mounts_remain(persist_host):
    old, _units = settled(persist_host)
    new = persisted(persist_host / "backing-new", path="/srv/b")
    gone = dict(old, state="absent", action="unmount")
    assert ps.persisted_after([]) == {old["token"]}
    assert ps.persisted_after([gone]) == set()
    assert ps.persisted_after([gone, new]) == {new["token"]}
    assert ps.persisted_after([new, gone]) == {new["token"]}


@pytest.mark.parametrize("cut", [None, "aside", "moving up"])
def test_a_directory_that_is_a_mount_point_of_its_own_gets_the_copy_in_place(tmp_path, monkeypatch, cut):
    """The tarball lab's /var/lib/postgresql is a container volume: renaming it over gives EXDEV. The copy is made
    inside it and swapped in entry by entry; a kill while the old entries go aside is undone, one while the new ones
    move up is finished, and the data is whole on disk or in the backing at every instant."""
    backing, disk = _returning(tmp_path)
    monkeypatch.setattr(ps, "_is_mount_point", lambda path: False)
    monkeypatch.setattr(ps, "_own_mount", lambda path: True)
    args = {"path": str(disk), "backing": str(backing), "fstype": "tmpfs"}
    if cut:
        # The state a kill leaves: a checked copy inside, the old entries aside (all, or some).
        new, part, whole = (disk / name for name in ps.IN_PLACE)
        os.makedirs(new / "sub")
        (new / "sub" / "f").write_text("new")
        os.makedirs(part)
        os.rename(str(disk / "old"), str(part / "old"))
        if cut == "moving up":
            os.rename(str(disk / "stale"), str(part / "stale"))
            os.rename(str(part), str(whole))
            os.rename(str(new / "sub"), str(disk / "sub"))
    assert returner().do_return(args)["returned"]
    assert sorted(os.listdir(disk)) == ["sub"] and (disk / "sub" / "f").read_text() == "new"
    assert sorted(os.listdir(tmp_path)) == ["backing", "disk"]


def test_a_directory_no_rename_can_swap_gets_the_checked_copy_copied_over(tmp_path, monkeypatch):
    """A container's overlayfs refuses to rename a directory of its image (EXDEV): the tarball lab's
    /var/lib/postgresql. The checked copy beside it is copied over it instead, then goes."""
    import errno as errno_mod
    backing, disk = _returning(tmp_path)
    monkeypatch.setattr(ps, "_is_mount_point", lambda path: False)
    monkeypatch.setattr(ps, "_own_mount", lambda path: False)

    def exdev(new, path, aside):
        raise OSError(errno_mod.EXDEV, "exchanging %s and %s: Invalid cross-device link" % (new, path))
    monkeypatch.setattr(ps, "exchange", exdev)
    args = {"path": str(disk), "backing": str(backing), "fstype": "tmpfs"}
    assert returner().do_return(args)["returned"]
    assert sorted(os.listdir(disk)) == ["sub"] and (disk / "sub" / "f").read_text() == "new"
    assert sorted(os.listdir(tmp_path)) == ["backing", "disk"]


def test_a_persist_unit_is_enabled_before_a_boot_can_mount_the_path(persist_host):
    """A boot mounts the path once a fstab line names it. A new line comes after the first copy is checked and the
    persist unit enabled, and is the point of no return after a reboot: a boot before it leaves the path on disk,
    one after it restores the mount before its services (a cut between the line and the enable let them write
    into an empty mount, which the next run took for newer data: the power-cut matrix's log kind, point 53). Where
    a line was there already (a live mount gaining persist), the unit is enabled before the first copy, and the
    copy made is the point of no return: a boot before it fails the unit and the services that require it, one
    after it restores the copy."""
    backing = persist_host / "backing"
    mounted = persist_host / "data"
    os.makedirs(mounted)
    with open(mounted / "kept", "w") as handle:
        handle.write("data")
    ex = Systemd(units={"db.service": ("active", "enabled")})
    for item, line_there in ((persisted(backing, path=str(mounted)), False),
                             (persisted(backing, action="ok", path=str(mounted)), True)):
        if line_there:
            with open(paths.FSTAB, "a") as handle:
                handle.write("tmpfs %s tmpfs size=64M,mode=755,nosuid,nodev 0 0\n" % mounted)
            item["fstype"], item["src"], item["options"] = "tmpfs", "tmpfs", ["size=64M", "mode=755", "nosuid", "nodev"]
        steps, _pivot = ex_mod.build(item, True, ex)
        got = names(steps)
        assert all("boot" not in step for step in steps)
        assert ("fstab" in got) is not line_there, got
        assert [step["step"] for step in steps if step["args"].get("boot_pivot")] == ["sync" if line_there else "fstab"]
        if not line_there:
            assert got.index("sync") < got.index("verify") < got.index("systemctl enable") < got.index("fstab") < \
                got.index("systemctl_start start"), got
        else:
            assert got.index("systemctl enable") < got.index("sync") < got.index("verify"), got


@pytest.mark.parametrize("backend", ["zram", "brd"])
def test_a_persisted_zram_or_brd_mount_the_executor_refuses_is_a_plan_error(persist_host, backend):
    """Its mount is carried out apart from its device (after it, or before it goes), so the plan builds its steps
    too: a refusal there stops the run before the first change, not after other backends changed the host."""
    backing = persist_host / "backing"
    os.makedirs(backing)
    (backing / "notes.txt").write_text("mine")
    mount = persisted(backing)
    plan = {"tmpfs": [], "ramfs": [], "errors": [],
            "zram": [{"name": "z", "mount": mount}] if backend == "zram" else [],
            "brd": {"module": {"action": "ok"}, "mounts": [mount]} if backend == "brd" else {}}
    mark_todo(plan, checking({}), {}, False)
    assert len(plan["errors"]) == 1 and "cannot be carried out" in plan["errors"][0], plan["errors"]
    assert "notes.txt" in plan["errors"][0]
