# SPDX-License-Identifier: GPL-3.0-or-later
"""review_persist: where a persisted mount's data comes from, and when neither copy may be dropped; the record the
persist helper reads."""

from __future__ import annotations

import pytest

from ansible_collections.ramdisk.provision.plugins.module_utils._metrics import parse_shell_vars
from ansible_collections.ramdisk.provision.plugins.module_utils._persist import (
    conf_text,
    foreign_names,
    journald_dropin_text,
    journald_limits,
    review_persist,
    unit_names,
    unit_texts,
)

HOST = "db01"
BACKING = "/var/lib/ramdisk-backing/pg"
TOKEN = "var-lib-postgresql-1a2b3c4d"


def entry(action="migrate", state="mounted", persist=True, fstype="tmpfs"):
    return {"label": "tmpfs_mounts[0]", "path": "/var/lib/postgresql", "token": TOKEN, "state": state,
            "action": action, "fstype": fstype,
            "persist": {"backing": BACKING, "interval": "5min", "services": ["postgresql@15-main.service"]}
            if persist else None}


def host(unit=False, active=False, conf_backing=None, current="missing", names=(), mount_empty=None,
         backing_exists=True, backing_is_dir=True):
    return {TOKEN: {"unit": unit, "active": active, "conf_backing": conf_backing, "current": current,
                    "names": list(names), "mount_empty": mount_empty, "backing_exists": backing_exists,
                    "backing_is_dir": backing_is_dir}}


def review(item, state):
    return review_persist([item], state, HOST)


DECISIONS = [
    # (entry, host state, decision)
    # First run: the disk data is migrated in, the backing's first copy made from the mount.
    (entry("migrate"), host(), {"source": "ram", "adopt": True, "verify": "sync"}),
    (entry("mount"), host(backing_exists=False, backing_is_dir=False),
     {"source": "ram", "adopt": True, "verify": "sync"}),
    # A live RAM mount (made without persist) becomes persisted: the RAM copy is the data of record.
    (entry("ok"), host(mount_empty=False), {"source": "ram", "adopt": True, "verify": "sync"}),
    # Steady state: nothing to do.
    (entry("ok"), host(unit=True, active=True, conf_backing=BACKING, current="snapshot", names=["current", "snap-1"],
                       mount_empty=False), {"source": "backing", "adopt": False, "verify": None}),
    (entry("remount"), host(unit=True, active=True, current="snapshot"), {"source": "backing", "adopt": False,
                                                                          "verify": None}),
    # Persisted before, mount gone (a failed boot, an unmount by hand): the disk copy under it is older.
    (entry("migrate"), host(unit=True, current="snapshot"), {"source": "backing", "adopt": True,
                                                             "verify": "restore"}),
    (entry("migrate"), host(unit=True, active=True, current="snapshot"), {"source": "backing", "adopt": True,
                                                                          "verify": "restore"}),
    # A backing that survived (a reinstalled host) fills an empty directory or an empty live mount.
    (entry("mount"), host(current="snapshot", names=["current", "snap-1"]),
     {"source": "backing", "adopt": True, "verify": "restore"}),
    (entry("ok"), host(current="snapshot", mount_empty=True), {"source": "backing", "adopt": True,
                                                               "verify": "restore"}),
    # Persist stopped by hand, the mount holds data newer than the backing: kept, not checked against it.
    (entry("ok"), host(unit=True, current="snapshot", mount_empty=False), {"source": "backing", "adopt": True,
                                                                           "verify": None}),
    # Units written, but the first copy never made (a run cut short): made now.
    (entry("migrate"), host(unit=True, names=[".new-20250101T000000Z"]), {"source": "ram", "adopt": True,
                                                                          "verify": "sync"}),
    # Rollback.
    (entry("unmount", "absent"), host(unit=True, active=True, current="snapshot"), {"release": True,
                                                                                    "copy_back": True}),
    (entry("absent-ok", "absent"), host(unit=True, current="snapshot"), {"release": True, "copy_back": True}),
    (entry("absent-ok", "absent"), host(unit=True), {"release": True, "copy_back": False}),
    (entry("unmount", "absent"), host(), {"release": False, "copy_back": False}),
]


@pytest.mark.parametrize("item, state, decision", DECISIONS)
def test_decisions(item, state, decision):
    result = review(item, state)
    assert result["errors"] == []
    assert result["decisions"][TOKEN] == decision


ERRORS = [
    # (entry, host state, words naming the value, words of the problem, words of the fix)
    (entry("migrate"), host(current="snapshot"), "tmpfs_mounts[0].persist.backing is '%s'" % BACKING,
     "already holds a copy ('current'), and the directory on disk holds data too", "Neither is dropped"),
    (entry("ok"), host(current="snapshot", mount_empty=False), "tmpfs_mounts[0].persist.backing is '%s'" % BACKING,
     "the live tmpfs mount holds data too", "empty '/var/lib/postgresql'"),
    (entry("remount"), host(current="snapshot"), "persist.backing is", "the live tmpfs mount holds data too",
     "move the backing's copy away"),
    (entry("mount"), host(names=["lost+found", "PG_VERSION", "base"]), "tmpfs_mounts[0].persist.backing is '%s'"
     % BACKING, "holds files of its own (PG_VERSION, base, lost+found)", "Choose an empty or new directory"),
    (entry("mount"), host(names=["a", "b", "c", "d", "e", "f"]), "persist.backing is", "(a, b, c, d, e, ...)",
     "empty or new"),
    (entry("mount"), host(backing_is_dir=False), "persist.backing is", "exists and is not a directory",
     "choose another backing"),
    (entry("ok"), host(unit=True, active=True, current="other"), "persist.backing is",
     "'current' is not a link to a copy this collection made", "Move it away"),
    (entry("ok"), host(unit=True, active=True, current="snapshot", conf_backing="/var/lib/old"),
     "tmpfs_mounts[0].persist.backing is '%s', but '/var/lib/postgresql' is kept in '/var/lib/old'" % BACKING,
     "Moving the backing is not done for you", "set tmpfs_mounts[0].persist.backing back to '/var/lib/old'"),
    (entry("ok", persist=False), host(unit=True, conf_backing="/var/lib/old"), "tmpfs_mounts[0].persist is missing",
     "kept in a backing directory by ramdisk-persist-%s.service" % TOKEN, "state: absent with the persist it had"),
    (entry("unmount", "absent", persist=False), host(unit=True), "tmpfs_mounts[0].persist is missing",
     "that copy would be left behind", "(its backing as before)"),
    (entry("unmount", "absent"), host(unit=True, current="snapshot", conf_backing="/var/lib/old"),
     "persist.backing is", "Moving the backing", "set state: absent with it"),
]


@pytest.mark.parametrize("item, state, named, problem, fix", ERRORS)
def test_errors(item, state, named, problem, fix):
    result = review(item, state)
    (error,) = result["errors"]
    assert error.startswith("Host db01: ")
    assert named in error and problem in error and fix in error, error
    assert TOKEN not in result["decisions"]


def test_leaves_a_foreign_copy_alone_with_a_warning():
    result = review(entry("absent-ok", "absent"), host(current="snapshot", names=["current", "snap-1"]))
    assert result["errors"] == []
    assert result["decisions"][TOKEN] == {"release": False, "copy_back": False}
    (warning,) = result["warnings"]
    assert "did not persist '/var/lib/postgresql' here; it is left as it is" in warning


def test_entries_without_persist_or_state_are_quiet():
    assert review(entry("mount", persist=False), {}) == {"errors": [], "warnings": [], "decisions": {}}
    assert review_persist([], None) == {"errors": [], "warnings": [], "decisions": {}}


def test_foreign_names_and_units():
    assert foreign_names(["current", "snap-20250101", ".new-x", ".current-x", "lost+found", "snapshot"]) == [
        "lost+found", "snapshot"]
    assert unit_names("t") == {"persist": "ramdisk-persist-t.service", "sync": "ramdisk-persist-sync-t.service",
                               "timer": "ramdisk-persist-sync-t.timer"}


@pytest.mark.parametrize("keep, written", [(3, "3"), (1, "1"), (None, "2")])
def test_the_helpers_record_gives_the_copies_to_keep(keep, written):
    item = entry()
    item["persist"].update(interval_seconds=300, keep=keep)
    if keep is None:
        del item["persist"]["keep"]  # a plan of an older version: the helper's own default
    values = parse_shell_vars(conf_text(item))
    assert values == {"MOUNT": "/var/lib/postgresql", "BACKING": BACKING, "INTERVAL_SECONDS": "300", "KEEP": written,
                      "SERVICES": "postgresql@15-main.service", "STOP_SERVICES": "0"}


KIB = 1024
MIB = 1024 * KIB


@pytest.mark.parametrize("size, limits", [
    # SystemMaxUse, SystemKeepFree, SystemMaxFileSize, SystemMaxFiles
    (64 * MIB, (32 * MIB, 16 * MIB, 4 * MIB, 256)),
    (8 * MIB, (4 * MIB, 2 * MIB, 512 * KIB, 100)),  # journald's smallest file, and its default count
    (16 * 1024 * MIB, (8192 * MIB, 4096 * MIB, 128 * MIB, 65536)),  # journald's largest file
    (64 * MIB + 100, (32 * MIB, 16 * MIB, 4 * MIB, 256)),  # whole pages
    (None, None), (0, None), (True, None), ("64M", None),
])
def test_journald_limits_take_half_of_the_mount_and_keep_a_quarter_free(size, limits):
    got = journald_limits(size)
    assert (got if got is None else tuple(got[key] for key in (
        "SystemMaxUse", "SystemKeepFree", "SystemMaxFileSize", "SystemMaxFiles"))) == limits


def journal_entry(path="/var/log", size_bytes=64 * MIB, **changes):
    item = {"label": "ramdisk_mounts[0]", "path": path, "token": "var-log-09e81837", "size_bytes": size_bytes,
            "persist": {"backing": "/var/lib/ramdisk-backing/log", "interval": "15min",
                        "services": ["systemd-journal-flush.service"]}}
    item.update(changes)
    return item


def test_a_journal_mount_gives_journald_a_drop_in_from_its_size():
    text = journald_dropin_text(journal_entry())
    assert text.splitlines()[-5:] == ["[Journal]", "SystemMaxUse=33554432", "SystemKeepFree=16777216",
                                      "SystemMaxFileSize=4194304", "SystemMaxFiles=256"]
    # brd and ramfs give ram_bytes; no size at all leaves journald's own defaults.
    assert "SystemMaxUse=33554432" in journald_dropin_text(journal_entry(size_bytes=None, ram_bytes=64 * MIB))
    assert journald_dropin_text(journal_entry(size_bytes=None)) is None
    assert journald_dropin_text(journal_entry(path="/var/log/nginx")) is None


def test_a_journal_mounts_unit_is_restored_before_journald_moves_in_and_synced_after_it_left():
    unit = unit_texts(journal_entry())["persist"]
    lines = unit.splitlines()
    for line in ("DefaultDependencies=no", "After=systemd-remount-fs.service", "Before=systemd-journal-flush.service",
                 "Before=systemd-tmpfiles-setup.service sysinit.target shutdown.target", "Conflicts=shutdown.target",
                 "RequiredBy=systemd-journal-flush.service", "RequiresMountsFor=/var/log /var/lib/ramdisk-backing/log"):
        assert line in lines
    other = unit_texts(journal_entry(path="/var/log/nginx", token="var-log-nginx-1"))["persist"]
    assert "DefaultDependencies=no" not in other and "Conflicts=shutdown.target" not in other


def test_the_persist_unit_is_skipped_not_failed_when_nothing_is_mounted_at_its_path():
    """A boot between the unit's enable and the path's first fstab line (or a removal's line gone before its
    unit) must not fail the unit and the services it comes before: the directory on disk holds the data."""
    lines = unit_texts(journal_entry(path="/srv/data 100%", token="srv-data-1"))["persist"].splitlines()
    assert "ConditionPathIsMountPoint=/srv/data 100%%" in lines
    assert lines.index("ConditionPathIsMountPoint=/srv/data 100%%") < lines.index("[Service]")


@pytest.mark.parametrize("stop, services, written", [
    (True, ["postgresql@15-main.service", "app.socket"], "1"), (False, ["postgresql@15-main.service"], "0"),
    (True, [], "0"), (None, ["a.service"], "0"),
])
def test_the_helpers_record_says_which_services_a_sync_stops(stop, services, written):
    item = entry()
    item["persist"].update(services=services, stop_services=stop)
    values = parse_shell_vars(conf_text(item))
    assert (values["SERVICES"], values["STOP_SERVICES"]) == (" ".join(services), written)


def test_a_sync_that_stops_the_services_runs_at_full_speed_and_starts_them_again_when_killed():
    item = entry()
    quiet = unit_texts(item)["sync"]
    assert "Nice=10" in quiet and "ExecStopPost" not in quiet
    item["persist"]["stop_services"] = True
    sync = unit_texts(item)["sync"]
    assert "Nice=" not in sync and "IOScheduling" not in sync
    assert "\nExecStopPost=/usr/local/libexec/ramdisk-provision/persist resume %s\n" % TOKEN in sync
    assert "holds postgresql@15-main.service stopped" in sync
