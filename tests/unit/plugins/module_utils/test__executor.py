# SPDX-License-Identifier: GPL-3.0-or-later
"""The executor's steps, transactions and recovery, on files in a scratch directory.

What acts on mounts runs for real in private mount namespaces (scripts/test/transaction.sh); here the file
steps run for real in tmp_path, and the mount steps are replaced by recorders to check the order of doing and
undoing, and the way recovery chooses (forward past the pivot in the same boot, back otherwise).
"""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.ramdisk.provision.plugins.module_utils import _dry_run
from ansible_collections.ramdisk.provision.plugins.module_utils import _executor as ex_mod
from ansible_collections.ramdisk.provision.plugins.module_utils import _mount_txn
from ansible_collections.ramdisk.provision.plugins.module_utils import _steps as steps_mod
from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths as paths
from ansible_collections.ramdisk.provision.plugins.module_utils._journal import Journal
from ansible_collections.ramdisk.provision.plugins.module_utils._mount_steps import item as mount_item

FSTAB = "# static\nUUID=1 / ext4 defaults 0 1\ntmpfs /srv/old tmpfs size=1M 0 0\n"


@pytest.fixture
def host(tmp_path, monkeypatch):
    """Every path the executor writes, under tmp_path; nothing mounted at the test's paths, and /srv/a... taken
    as missing (mkdir and rmdir are recorded, never run)."""
    etc = tmp_path / "etc"
    for name, value in (("FSTAB", etc / "fstab"), ("RECORD_DIR", etc / "ramdisk-provision" / "mounts"),
                        ("UNIT_DIR", etc / "systemd" / "system"), ("TMPFILES_DIR", etc / "tmpfiles.d"),
                        ("SEED_WANTS", etc / "systemd" / "system" / "local-fs.target.wants"),
                        ("TMP_DROPIN", etc / "systemd" / "system" / "tmp.mount.d" / "50.conf"),
                        ("NEW_ROOT", tmp_path / "run" / "new"), ("STAGE_ROOT", tmp_path / "run" / "lower")):
        monkeypatch.setattr(paths, name, str(value))
    os.makedirs(paths.RECORD_DIR)
    os.makedirs(paths.UNIT_DIR)
    (etc / "fstab").write_text(FSTAB)
    monkeypatch.setattr(steps_mod, "mountinfo", lambda: [])
    real_isdir, real_lexists = os.path.isdir, os.path.lexists
    monkeypatch.setattr(os.path, "isdir", lambda p: False if str(p).startswith("/srv/") else real_isdir(p))
    monkeypatch.setattr(os.path, "lexists", lambda p: False if str(p).startswith("/srv/") else real_lexists(p))
    return tmp_path


class Recorder(ex_mod.Executor):
    """File steps for real; mount steps (RECORDED) and tools recorded."""

    def __init__(self, systemd=True, fail_at=None, boot="boot-1"):
        self.calls = []
        super().__init__(self._run, systemd, "web1")
        self.boot = boot
        self.fail_at = fail_at
        self.registry.update((name, _recording(self, name)) for name in RECORDED)

    def _run(self, argv):
        self.calls.append(" ".join(argv))
        return 0, "", ""


RECORDED = ("mkdir", "rmdir", "mount", "move", "bind", "copy", "release", "root", "unmount", "remount")


def _recording(ex, name):
    """(do, undo) of the step NAME that only say, in EX.calls, that they ran."""
    def do(args):
        ex.calls.append("do %s %s" % (name, args.get("path")))
        if ex.fail_at == name:
            raise ex_mod.StepError("%s refused" % name)
        return {"mount_id": 99} if name in ("mount", "move", "bind") else {}

    def undo(args, result, same_boot):
        ex.calls.append("undo %s %s" % (name, args.get("path")))
        return True
    return do, undo


def entry(**changes):
    base = {"path": "/srv/a", "path_given": "/srv/a", "label": "ramdisk_mounts[0]", "state": "mounted",
            "action": "mount", "fstype": "tmpfs", "src": "tmpfs", "options": ["size=1M", "mode=755", "nosuid"],
            "remount_options": ["size=1M"], "mode": "0755", "owner": None, "group": None, "migrate": False,
            "persist": None, "record": {"path": "/srv/a", "fstype": "tmpfs", "created_dir": True, "root_kept": {}}}
    base.update(changes)
    return mount_item(base, vendor_tmp=False, systemd=True)


def test_a_new_mount_is_mounted_then_written_for_the_boot(host):
    steps, pivot = ex_mod.build(entry(), systemd=True)
    assert [step["step"] for step in steps] == ["mkdir", "mount", "root", "fstab", "reload", "file"]
    assert steps[pivot]["step"] == "mount"
    assert steps[0]["args"]["create"][-1] == "/srv/a"


def test_a_migrate_fills_out_of_sight_and_moves_in_at_the_pivot(host):
    steps, pivot = ex_mod.build(entry(action="migrate", migrate=True, mode="2750"), systemd=True)
    names = [step["step"] for step in steps]
    filling = ["bind", "mkdir", "mount", "copy", "release", "root", "move"]
    assert names[names.index("bind"):names.index("move") + 1] == filling
    assert steps[pivot]["step"] == "move"
    staged = steps[names.index("mount")]["args"]
    assert staged["path"].startswith(paths.NEW_ROOT + "/") and "mode=755" in staged["options"]
    # The boot-time copy unit is written and enabled before the fstab line that mounts the path at boot.
    assert names.index("systemctl") < names.index("fstab")
    assert "mode=2750" not in _mount_txn.fill_options(["mode=2750"]) and _mount_txn.fill_options(["mode=2750"]) == ["mode=750"]


def test_a_read_only_tmpfs_gets_its_root_from_its_mount_options(host):
    steps, _pivot = ex_mod.build(entry(options=["size=1M", "ro"], mode="0750", owner="0", group="0"), systemd=True)
    mounted = steps[[step["step"] for step in steps].index("mount")]["args"]
    # The kernel sets the root at mount: a read-only file system takes no chown or chmod after.
    assert mounted["options"] == ["size=1M", "ro", "mode=0750", "uid=0", "gid=0"]
    fstab = [step for step in steps if step["step"] == "fstab"][0]["args"]["line"]
    assert fstab[3] == ["size=1M", "ro"]


def test_a_read_only_migrate_is_filled_rooted_then_made_read_only_before_its_move(host):
    steps, pivot = ex_mod.build(entry(action="migrate", migrate=True, options=["size=1M", "ro"]), systemd=True)
    names = [step["step"] for step in steps]
    assert names[names.index("bind"):pivot + 1] == ["bind", "mkdir", "mount", "copy", "release", "root", "remount",
                                                    "move"]
    staged = steps[names.index("mount")]["args"]
    assert staged["options"] == ["size=1M", "rw"]
    assert steps[names.index("remount")]["args"] == {"path": staged["path"], "options": ["ro"]}


def test_the_root_step_changes_only_what_differs(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(os, "chown", lambda *args: calls.append(("chown",) + args[1:]))
    monkeypatch.setattr(os, "chmod", lambda *args: calls.append(("chmod",) + args[1:]))
    info = os.stat(str(tmp_path))
    same = {"path": str(tmp_path), "owner": str(info.st_uid), "group": None, "mode": "%o" % (info.st_mode & 0o7777)}
    _mount_txn.MountSteps(Recorder()).do_root(same)
    assert calls == []
    _mount_txn.MountSteps(Recorder()).do_root(dict(same, mode="1777"))
    assert calls == [("chmod", 0o1777)]


def test_a_mount_that_goes_is_unmounted_first_then_its_files(host, monkeypatch):
    mount = {"mount_point": "/srv/old", "mount_id": 42, "fstype": "tmpfs", "source": "tmpfs"}
    monkeypatch.setattr(steps_mod, "mountinfo", lambda: [mount])
    record = entry(path="/srv/old")["files"]["record"]
    with open(record, "w") as handle:
        handle.write("{}\n")
    steps, pivot = ex_mod.build(entry(path="/srv/old", state="absent", action="unmount"), systemd=True)
    assert [step["step"] for step in steps] == ["unmount", "fstab", "reload", "rmdir", "file"]
    assert pivot == 0 and steps[0]["args"]["mount_id"] == 42
    assert steps[1]["args"]["old"] == ["tmpfs /srv/old tmpfs size=1M 0 0\n"]


def test_apply_writes_fstab_and_record_whole_and_clears_the_journal(host):
    ex = Recorder()
    journal = Journal(str(host / "journal.jsonl"))
    ex_mod.apply([entry()], ex, journal, "run1")
    fstab = open(paths.FSTAB).read()
    assert fstab.startswith(FSTAB) and fstab.endswith("tmpfs /srv/a tmpfs size=1M,mode=755,nosuid 0 0\n")
    record = json.load(open(paths.record_file(entry()["token"])))
    assert record["path"] == "/srv/a"
    assert ex.calls[:3] == ["do mkdir None", "do mount /srv/a", "do root /srv/a"]
    assert "systemctl daemon-reload" in ex.calls
    assert not os.path.exists(journal.path)


def test_a_failed_step_undoes_its_transaction_and_the_new_mounts_before_it(host):
    ex = Recorder()
    journal = Journal(str(host / "journal.jsonl"))
    first = entry()
    second = entry(path="/srv/b", action="migrate", migrate=True,
                   record={"path": "/srv/b", "fstype": "tmpfs", "created_dir": False, "root_kept": {}})
    ex.fail_at = None

    def failing_copy(args):
        raise ex_mod.StepError("the copy of /srv/b differs")
    ex.registry["copy"] = (failing_copy, ex.registry["copy"][1])
    with pytest.raises(ex_mod.ApplyError) as caught:
        ex_mod.apply([first, second], ex, journal, "run1")
    message = str(caught.value)
    assert "Host web1: /srv/b (migrate) failed at its step 'copy'" in message
    assert "Undone, in this order" in message and "/srv/b, /srv/a" in message
    undone = [call for call in ex.calls if call.startswith(("undo mount", "undo bind", "undo root"))]
    assert undone[:3] == ["undo mount %s/%s" % (paths.NEW_ROOT, second["token"]), "undo bind %s/%s"
                          % (paths.STAGE_ROOT, second["token"]), "undo root /srv/a"]
    assert "undo mount /srv/a" in undone
    assert open(paths.FSTAB).read() == FSTAB
    assert not os.path.exists(paths.record_file(first["token"]))
    # Everything was undone: the journal says so and is gone.
    assert not os.path.exists(journal.path)


def _dead_run(host, item, stop_after, forward=False, boot="boot-1"):
    """A journal as a run that died after step STOP_AFTER (begun, not done) leaves it."""
    steps, pivot = ex_mod.build(item, systemd=True)
    journal = Journal(str(host / "journal.jsonl"))
    journal.txn("dead", item["token"], {"path": item["path"], "action": item["action"], "pivot": pivot,
                                        "steps": steps})
    for i in range(stop_after):
        journal.mark("begin", "dead", item["token"], i)
        journal.mark("done", "dead", item["token"], i, {"mount_id": 7} if steps[i]["step"] == "mount" else {})
        if forward and i == pivot:
            journal.mark("forward", "dead", item["token"])
    journal.mark("begin", "dead", item["token"], stop_after)
    journal.close()
    lines = open(journal.path).read()
    if boot != "boot-1":
        lines = lines.replace('"boot":', '"boot":"%s","was":' % boot, 1)
        with open(journal.path, "w") as handle:
            handle.write(lines)
    return journal, steps


def test_recovery_undoes_a_run_that_died_before_its_pivot(host):
    ex = Recorder()
    journal, steps = _dead_run(host, entry(), stop_after=1)  # mkdir done, mount begun
    report = ex_mod.recover(ex, journal)
    assert report[0]["way"] == "back" and report[0]["path"] == "/srv/a"
    assert ex.calls[0] == "undo mount /srv/a"
    assert not os.path.exists(journal.path)


def test_recovery_finishes_a_run_that_died_past_its_pivot(host):
    ex = Recorder()
    journal, steps = _dead_run(host, entry(), stop_after=3, forward=True)  # mkdir, mount, root done; fstab begun
    report = ex_mod.recover(ex, journal)
    assert report[0]["way"] == "forward"
    assert "tmpfs /srv/a tmpfs" in open(paths.FSTAB).read()
    assert os.path.exists(paths.record_file(entry()["token"]))
    assert not any(call.startswith("undo") for call in ex.calls)


def test_check_mode_recovery_only_says(host):
    ex = Recorder()
    ex.check = True
    journal, steps = _dead_run(host, entry(), stop_after=3, forward=True)
    report = ex_mod.recover(ex, journal)
    assert report[0]["way"] == "forward" and ex.calls == []
    assert os.path.exists(journal.path) and open(paths.FSTAB).read() == FSTAB


def test_after_a_reboot_only_the_file_steps_are_finished(host):
    ex = Recorder(boot="boot-2")
    journal, steps = _dead_run(host, entry(), stop_after=3, forward=True)
    report = ex_mod.recover(ex, journal)
    assert report[0]["way"] == "forward" and report[0]["boot"] == "earlier"
    assert not any(call.startswith(("do mount", "do root")) for call in ex.calls)
    assert os.path.exists(paths.record_file(entry()["token"]))


# The kinds journals name: a journal written by an earlier version is recovered by the same names.
KINDS = {"mkdir", "mount", "bind", "copy", "release", "root", "move", "remount", "unmount", "fstab", "file", "systemctl",
         "systemctl_start", "reload", "rmdir", "zram_add", "zram_set", "mkswap", "mkfs", "swapon", "swapoff",
         "zram_remove", "swap_fstab", "brd_load", "brd_unload", "sync", "verify", "writeback", "return", "journald",
         "journal_var", "clear_backing"}
LIVE = {"mount", "move", "unmount", "remount", "root", "bind", "release", "copy", "systemctl_start", "sync", "verify",
        "writeback", "journal_var", "zram_add", "zram_set", "zram_remove", "mkswap", "mkfs", "swapon", "swapoff",
        "brd_load", "brd_unload"}


def test_the_executor_runs_every_kind_of_step_its_families_offer_and_refuses_any_other():
    ex = ex_mod.Executor(lambda argv: (0, "", ""), False, "web1")
    assert set(ex.registry) == KINDS and set(ex.live) == LIVE
    assert set(ex.probes) == {"mount", "move", "unmount", "swapon", "swapoff", "brd_load", "brd_unload"}
    assert set(ex.boot_probes) == {"fstab", "sync"}
    with pytest.raises(ex_mod.StepError, match="the step 'teleport' is not one this version of ramdisk.provision knows"):
        ex.do("teleport", {})
    with pytest.raises(ex_mod.StepError, match="'teleport'"):
        ex.undo("teleport", {}, {}, True)


def test_no_two_families_offer_the_same_kind():
    ex = ex_mod.Executor(lambda argv: (0, "", ""), False, "web1")
    assert sum(len(family.steps()) for family in ex.families) == len(ex.registry)
    assert all(set(family.live) <= set(family.steps()) for family in ex.families)


def test_an_unknown_kind_in_a_dead_runs_journal_stops_its_recovery_with_a_step_error(host):
    journal = Journal(str(host / "journal.jsonl"))
    journal.txn("dead", "t", {"path": "/srv/a", "action": "mount", "pivot": None,
                              "steps": [{"step": "teleport", "args": {}}]})
    journal.mark("begin", "dead", "t", 0)
    journal.close()
    with pytest.raises(ex_mod.StepError, match="'teleport'"):
        ex_mod.recover(Recorder(), Journal(journal.path))
    assert os.path.exists(journal.path)


def test_fstab_undo_puts_the_old_lines_back_where_they_were(host):
    ex = Recorder()
    args = {"path": "/srv/old", "line": ["tmpfs", "/srv/old", "tmpfs", ["size=2M"]],
            "old": ["tmpfs /srv/old tmpfs size=1M 0 0\n"]}
    ex.do("fstab", args)
    assert "size=2M" in open(paths.FSTAB).read()
    ex.undo("fstab", args, {}, True)
    assert open(paths.FSTAB).read() == FSTAB


def test_an_empty_mount_a_boot_made_goes_before_the_fill_from_disk(host, monkeypatch):
    booted = {"mount_point": "/srv/a", "mount_id": 42, "fstype": "tmpfs", "source": "tmpfs"}
    monkeypatch.setattr(steps_mod, "mountinfo", lambda: [booted])
    real_isdir = os.path.isdir
    monkeypatch.setattr(os.path, "isdir", lambda p: p == "/srv/a" or real_isdir(p))
    steps, pivot = ex_mod.build(entry(action="migrate", migrate=True, refill=True), systemd=False)
    names = [step["step"] for step in steps]
    assert names[:8] == ["unmount", "bind", "mkdir", "mount", "copy", "release", "root", "move"]
    assert steps[0]["args"] == {"path": "/srv/a", "mount_id": 42, "empty": True, "unique": None} and steps[pivot]["step"] == "move"
    plain, _pivot = ex_mod.build(entry(action="migrate", migrate=True), systemd=False)
    assert "unmount" not in [step["step"] for step in plain]


def test_an_empty_mount_that_was_written_to_since_the_plan_stays(tmp_path, monkeypatch):
    mounted = tmp_path / "data"
    mounted.mkdir()
    monkeypatch.setattr(steps_mod, "mountinfo", lambda: [{"mount_point": str(mounted), "mount_id": 42,
                                                          "fstype": "tmpfs", "source": "tmpfs"}])
    calls = []
    ex = ex_mod.Executor(lambda argv: calls.append(argv) or (0, "", ""), False, "web1")
    (mounted / "new").write_text("written after the plan\n")
    with pytest.raises(ex_mod.StepError, match="is not empty any more, so it stays as it is"):
        ex.do("unmount", {"path": str(mounted), "mount_id": 42, "empty": True})
    assert calls == []
    (mounted / "new").unlink()
    ex.do("unmount", {"path": str(mounted), "mount_id": 42, "empty": True})
    assert calls == [["umount", str(mounted)]]


def _undo_after_reboot(monkeypatch, line, old, mounted):
    """The fstab step of LINE over OLD lines undone in a later boot, which mounted MOUNTED (source, fstype) at
    LINE's path; returns the umounts run. The file is as before either way."""
    ex = Recorder(boot="boot-2")
    args = {"path": line[1], "line": line, "old": old}
    ex.do("fstab", args)
    monkeypatch.setattr(steps_mod, "mountinfo", lambda: [{"mount_point": line[1], "mount_id": 7, "source": mounted[0],
                                                          "fstype": mounted[1]}])
    ex.undo("fstab", args, {}, False)
    assert open(paths.FSTAB).read() == FSTAB
    return [call for call in ex.calls if call.startswith("umount")]


def test_after_a_reboot_an_fstab_undo_keeps_a_mount_the_old_lines_describe_too(host, monkeypatch):
    # What was written there since the boot is in that mount, which the old line mounts too: it stays.
    assert _undo_after_reboot(monkeypatch, ["tmpfs", "/srv/old", "tmpfs", ["size=2M"]],
                              ["tmpfs /srv/old tmpfs size=1M 0 0\n"], ("tmpfs", "tmpfs")) == []


def test_after_a_reboot_an_fstab_undo_takes_away_a_mount_only_the_new_line_made(host, monkeypatch):
    assert _undo_after_reboot(monkeypatch, ["tmpfs", "/srv/new", "tmpfs", ["size=2M"]], [],
                              ("tmpfs", "tmpfs")) == ["umount /srv/new"]


def test_after_a_reboot_an_fstab_undo_keeps_a_mount_of_another_kind(host, monkeypatch):
    assert _undo_after_reboot(monkeypatch, ["ramfs", "/srv/old", "ramfs", ["mode=755"]],
                              ["tmpfs /srv/old tmpfs size=1M 0 0\n"], ("tmpfs", "tmpfs")) == []


def _persisted_run(host, stop_after, boot):
    """A journal of a migrate with persist (move, fstab line, first copy, its check) cut after step STOP_AFTER."""
    line = ["tmpfs", "/srv/a", "tmpfs", ["size=1M"]]
    steps = [{"step": "move", "args": {"src": "/run/new/a", "path": "/srv/a", "fstype": "tmpfs", "below": None}},
             {"step": "fstab", "args": {"path": "/srv/a", "line": line, "old": []}},
             {"step": "sync", "args": {"path": "/srv/a", "backing": str(host / "backing"), "before": [],
                                       "current": None, "disk": True}},
             {"step": "verify", "args": {"src": "/srv/a", "dest": str(host / "backing" / "current"), "boot_pivot": True,
                                         "src_name": "the RAM mount", "dest_name": "the backing's first copy"}},
             {"step": "file", "args": {"file": paths.record_file("t"), "text": "{}\n", "mode": 0o644, "old": None}}]
    journal = Journal(str(host / "journal.jsonl"))
    journal.txn("dead", "t", {"path": "/srv/a", "action": "migrate", "pivot": 0, "steps": steps})
    for i in range(stop_after + 1):
        journal.mark("begin", "dead", "t", i)
        journal.mark("done", "dead", "t", i, {"mount_id": 7} if i == 0 else {})
        if i == 0:
            journal.mark("forward", "dead", "t")
    journal.close()
    text = open(journal.path).read().replace('"boot":', '"boot":"%s","was":' % boot, 1)
    with open(journal.path, "w") as handle:
        handle.write(text)
    return journal


class PersistRecorder(Recorder):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.registry.update(sync=(self.do_sync, self.undo_sync), verify=(self.do_verify, self.undo_verify))

    def do_sync(self, args):
        self.calls.append("do sync")
        return {}

    def do_verify(self, args):
        self.calls.append("do verify")
        return {}

    def undo_sync(self, args, result, same_boot):
        self.calls.append("undo sync")
        return True

    def undo_verify(self, args, result, same_boot):
        return True


@pytest.mark.parametrize("stop_after,way", [(0, "back"), (1, "back"), (2, "back"), (3, "forward")])
def test_after_a_reboot_a_persisted_migrate_goes_forward_only_from_its_checked_first_copy(host, stop_after, way):
    """The boot mounted an empty tmpfs from the new fstab line: before the first copy was checked the data of record
    is the directory on disk (the line and the copy go), after it the backing (the rest of the files are written)."""
    (host / "backing").mkdir()
    ex = PersistRecorder(boot="boot-2")
    report = ex_mod.recover(ex, _persisted_run(host, stop_after, "boot-1"))
    assert report[0]["way"] == way
    if way == "back":
        assert "tmpfs /srv/a" not in open(paths.FSTAB).read()
        assert ("undo sync" in ex.calls) == (stop_after >= 2)
    else:
        assert os.path.exists(paths.record_file("t")) and "do verify" not in ex.calls


def test_in_the_same_boot_a_persisted_migrate_past_its_pivot_goes_forward(host):
    (host / "backing").mkdir()
    ex = PersistRecorder(boot="boot-1")
    report = ex_mod.recover(ex, _persisted_run(host, 1, "boot-1"))
    assert report[0]["way"] == "forward" and "do verify" in ex.calls


def test_after_a_reboot_the_services_the_dead_run_stopped_are_stopped_again_before_the_boots_mount_goes(
        host, monkeypatch):
    """A run stopped persist.services, wrote the fstab line and died before the first copy; the boot mounted the
    line's empty tmpfs and started the services again, which now hold files in it (a logger in /var/log): the undo
    stops them before it takes that mount away, and starts them again last."""
    line = ["tmpfs", "/srv/a", "tmpfs", ["size=1M"]]
    steps = [{"step": "systemctl", "args": {"argv": ["stop", "app.service"], "undo": ["start", "app.service"],
                                            "services": True}},
             {"step": "move", "args": {"src": "/run/new/a", "path": "/srv/a", "fstype": "tmpfs", "below": None}},
             {"step": "fstab", "args": {"path": "/srv/a", "line": line, "old": []}},
             {"step": "sync", "args": {"path": "/srv/a", "backing": str(host / "backing"), "before": [],
                                       "current": None, "disk": True}},
             {"step": "verify", "args": {"src": "/srv/a", "dest": str(host / "backing" / "current"),
                                         "boot_pivot": True, "src_name": "the RAM mount",
                                         "dest_name": "the backing's first copy"}}]
    journal = Journal(str(host / "journal.jsonl"))
    journal.txn("dead", "t", {"path": "/srv/a", "action": "migrate", "pivot": 1, "steps": steps})
    for i in range(3):
        journal.mark("begin", "dead", "t", i)
        journal.mark("done", "dead", "t", i, {"mount_id": 7} if i == 1 else {})
        if i == 1:
            journal.mark("forward", "dead", "t")
    journal.close()
    text = open(journal.path).read().replace('"boot":', '"boot":"boot-1","was":', 1)
    with open(journal.path, "w") as handle:
        handle.write(text)
    with open(paths.FSTAB, "a") as handle:
        handle.write("tmpfs /srv/a tmpfs size=1M 0 0\n")
    monkeypatch.setattr(steps_mod, "mountinfo", lambda: [{"mount_point": "/srv/a", "mount_id": 42, "source": "tmpfs",
                                                          "fstype": "tmpfs"}])
    ex = PersistRecorder(boot="boot-2")
    report = ex_mod.recover(ex, journal)
    assert report[0]["way"] == "back"
    tools = [call for call in ex.calls if call.startswith(("systemctl stop", "systemctl start", "umount"))]
    assert tools == ["systemctl stop app.service", "umount /srv/a", "systemctl start app.service"]
    assert open(paths.FSTAB).read() == FSTAB


def _line_last_run(host, stop_after, begun_only, boot):
    """A journal of a migrate with persist in the order of a new fstab line (move, first copy, its check, the line as
    boot pivot, the record) cut after step STOP_AFTER, whose `done` is missing when BEGUN_ONLY."""
    line = ["tmpfs", "/srv/a", "tmpfs", ["size=1M"]]
    steps = [{"step": "move", "args": {"src": "/run/new/a", "path": "/srv/a", "fstype": "tmpfs", "below": None}},
             {"step": "sync", "args": {"path": "/srv/a", "backing": str(host / "backing"), "before": [],
                                       "current": None, "disk": True}},
             {"step": "verify", "args": {"src": "/srv/a", "dest": str(host / "backing" / "current"),
                                         "src_name": "the RAM mount", "dest_name": "the backing's first copy"}},
             {"step": "fstab", "args": {"path": "/srv/a", "line": line, "old": [], "boot_pivot": True}},
             {"step": "file", "args": {"file": paths.record_file("t"), "text": "{}\n", "mode": 0o644, "old": None}}]
    journal = Journal(str(host / "journal.jsonl"))
    journal.txn("dead", "t", {"path": "/srv/a", "action": "migrate", "pivot": 0, "steps": steps})
    for i in range(stop_after + 1):
        journal.mark("begin", "dead", "t", i)
        if not (begun_only and i == stop_after):
            journal.mark("done", "dead", "t", i, {"mount_id": 7} if i == 0 else {})
        if i == 0:
            journal.mark("forward", "dead", "t")
    journal.close()
    text = open(journal.path).read().replace('"boot":', '"boot":"%s","was":' % boot, 1)
    with open(journal.path, "w") as handle:
        handle.write(text)
    return journal


@pytest.mark.parametrize("stop_after, begun_only, written, way", [
    (2, False, False, "back"), (3, True, False, "back"), (3, True, True, "forward"), (3, False, True, "forward")],
    ids=["checked, no line", "line begun, not written", "line begun and written", "line done"])
def test_after_a_reboot_a_new_line_is_the_point_of_no_return_and_its_probe_reads_fstab(
        host, stop_after, begun_only, written, way):
    """Before a new fstab line the boot left the path on disk, where the data of record is: undone. From the line
    on the boot mounted and restored it: finished, also when the run died after writing the line and before
    journaling it done (the probe finds the line in /etc/fstab)."""
    (host / "backing").mkdir()
    if written:
        with open(paths.FSTAB, "a") as handle:
            handle.write("tmpfs /srv/a tmpfs size=1M 0 0\n")
    ex = PersistRecorder(boot="boot-2")
    report = ex_mod.recover(ex, _line_last_run(host, stop_after, begun_only, "boot-1"))
    assert report[0]["way"] == way
    if way == "back":
        assert "tmpfs /srv/a" not in open(paths.FSTAB).read() and "undo sync" in ex.calls
        assert not os.path.exists(paths.record_file("t"))
    else:
        assert "tmpfs /srv/a" in open(paths.FSTAB).read() and os.path.exists(paths.record_file("t"))
        assert "undo sync" not in ex.calls


def _live_run(host, stop_after, begun_only, boot):
    """A journal of a live mount gaining persist (its fstab line there already): the unit enabled, the first copy
    as boot pivot, its check, the unit started, the record; cut after step STOP_AFTER (its done missing when
    BEGUN_ONLY)."""
    steps = [{"step": "systemctl", "args": {"argv": ["enable", "p.service"], "undo": ["disable", "p.service"]}},
             {"step": "sync", "args": {"path": "/srv/a", "backing": str(host / "backing"), "before": [],
                                       "current": None, "mount_id": 7, "boot_pivot": True}},
             {"step": "verify", "args": {"src": "/srv/a", "dest": str(host / "backing" / "current"),
                                         "src_name": "the RAM mount", "dest_name": "the backing's first copy"}},
             {"step": "file", "args": {"file": paths.record_file("t"), "text": "{}\n", "mode": 0o644, "old": None}}]
    journal = Journal(str(host / "journal.jsonl"))
    journal.txn("dead", "t", {"path": "/srv/a", "action": "ok", "pivot": None, "steps": steps})
    for i in range(stop_after + 1):
        journal.mark("begin", "dead", "t", i)
        if not (begun_only and i == stop_after):
            journal.mark("done", "dead", "t", i, {})
    journal.close()
    text = open(journal.path).read().replace('"boot":', '"boot":"%s","was":' % boot, 1)
    with open(journal.path, "w") as handle:
        handle.write(text)
    return journal


@pytest.mark.parametrize("stop_after, begun_only, copied, way", [
    (0, False, False, "back"), (1, True, False, "back"), (1, True, True, "forward"), (1, False, True, "forward")],
    ids=["enabled, no copy", "copy begun, not made", "copy begun and made", "copy done"])
def test_after_a_reboot_a_live_mounts_first_copy_made_is_its_point_of_no_return(host, stop_after, begun_only,
                                                                                copied, way):
    """The boot mounted the path from its old line and the enabled unit restored the copy, if one was made (the
    helper switches current only to a whole copy): from then on the transaction is finished; before, undone."""
    (host / "backing").mkdir()
    if copied:
        (host / "backing" / "snap-1").mkdir()
        os.symlink("snap-1", str(host / "backing" / "current"))
    ex = PersistRecorder(boot="boot-2")
    report = ex_mod.recover(ex, _live_run(host, stop_after, begun_only, "boot-1"))
    assert report[0]["way"] == way
    assert os.path.exists(paths.record_file("t")) == (way == "forward")
    assert ("systemctl disable p.service" in ex.calls) == (way == "back")


# The plan's `todo` (_dry_run.mark_todo): the executor's own steps, built in check mode on what the host holds. A
# mount one run carried out has none on the next; each thing changed by hand since turns on the step that puts it back.

def _check_executor():
    return ex_mod.Executor(lambda argv: (0, "", ""), True, "web1", check=True)


def _todo(*entries):
    plan = {"tmpfs": [dict(item) for item in entries if item["fstype"] == "tmpfs"],
            "ramfs": [dict(item) for item in entries if item["fstype"] == "ramfs"]}
    _dry_run.mark_todo(plan, _check_executor(), {}, False)
    return dict((item["path"], item["todo"]) for item in plan["tmpfs"] + plan["ramfs"])


def _carried_out(host, **changes):
    """An entry at a directory that exists (under tmp_path), carried out once (its files for real)."""
    path = str(host / "srv" / changes.pop("name", "cache"))
    os.makedirs(path, exist_ok=True)
    os.chmod(path, 0o755)
    record = {"path": path, "fstype": changes.get("fstype", "tmpfs"), "created_dir": False, "root_kept": {}}
    item = entry(path=path, path_given=path, record=record, **changes)
    ex_mod.apply([item], Recorder(), Journal(str(host / "journal.jsonl")), "run1")
    return dict(item, action="ok")


@pytest.mark.parametrize("change, step", [
    (lambda item: _rewrite(paths.FSTAB, lambda text: text.replace("size=1M,", "size=2M,")), "fstab"),
    (lambda item: _rewrite(paths.FSTAB, lambda text: text + "tmpfs %s tmpfs size=1M 0 0\n" % item["path"]), "fstab"),
    (lambda item: os.chmod(item["path"], 0o700), "root"),
    (lambda item: os.unlink(item["files"]["record"]), "file"),
    (lambda item: _rewrite(item["files"]["seed"], lambda text: "[Unit]\n", create=True), "systemctl"),
])
def test_a_mount_carried_out_has_nothing_to_do_until_something_changes_by_hand(host, change, step):
    item = _carried_out(host)
    assert ex_mod.build(item, systemd=True)[0] == [] and _todo(item) == {item["path"]: False}
    change(item)
    steps, _pivot = ex_mod.build(item, systemd=True)
    assert step in [one["step"] for one in steps] and _todo(item) == {item["path"]: True}


def test_an_fstab_line_written_with_octal_escapes_is_the_same_line(host):
    item = _carried_out(host, name="my cache")
    assert "my\\040cache" in open(paths.FSTAB).read()
    assert _todo(item) == {item["path"]: False}


def test_a_ramfs_gets_its_tmpfiles_line_back(host):
    item = _carried_out(host, fstype="ramfs", src="ramfs", options=["mode=755", "nosuid"])
    assert _todo(item) == {item["path"]: False}
    os.unlink(item["files"]["tmpfiles"])
    assert _todo(item) == {item["path"]: True}


def test_a_mount_that_goes_has_work_only_for_what_is_left(host):
    item = _carried_out(host)
    gone = dict(item, state="absent", action="absent")
    assert _todo(gone) == {item["path"]: True}
    for name in (item["files"]["record"],):
        os.unlink(name)
    _rewrite(paths.FSTAB, lambda text: text.replace("tmpfs %s tmpfs size=1M,mode=755,nosuid 0 0\n" % item["path"], ""))
    assert _todo(gone) == {item["path"]: False}


def test_what_the_dry_run_cannot_build_counts_as_work_and_the_rest_is_decided(host):
    settled = _carried_out(host)
    refused = dict(_carried_out(host, name="other"), owner="no-such-user-here")
    assert _todo(settled, refused) == {settled["path"]: False, refused["path"]: True}


def _rewrite(name, change, create=False):
    text = open(name).read() if not create else ""
    with open(name, "w") as handle:
        handle.write(change(text))
