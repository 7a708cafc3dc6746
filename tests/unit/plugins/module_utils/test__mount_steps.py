# SPDX-License-Identifier: GPL-3.0-or-later
"""_mount_steps: each planned mount as ramdisk_apply carries it out (names, texts), and what a run says after.

Whether a mount has anything to do is the executor's dry run (test__executor.py, the tests of mark_todo)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess

import pytest

from ansible_collections.ramdisk.provision.plugins.module_utils import _mount_steps as ms
from ansible_collections.ramdisk.provision.plugins.module_utils._plan_core import mount_token

HEADER = "#\n# Ansible managed\n#\n"


def entry(**over):
    out = {"path": "/srv/cache", "state": "mounted", "fstype": "tmpfs", "src": "tmpfs", "action": "ok",
           "options": ["size=16M", "mode=0755", "nosuid", "nodev"], "mode": "0755", "owner": "root",
           "group": "root", "migrate": True, "persist": None,
           "record": {"path": "/srv/cache", "fstype": "tmpfs", "created_dir": True, "root_kept": {},
                      "size_bytes": 16777216}}
    out.update(over)
    return out


def test_token_is_the_planners_rule():
    for path in ("/srv/cache", "/srv/a-b", "/srv/a/b", "/var/lib/pg data"):
        assert ms.token(path) == mount_token(path)


def test_written_needs_only_comments_above_the_text():
    assert ms.written(HEADER + "a\nb\n", "a\nb\n")
    assert ms.written("a\nb", "a\nb\n")
    assert not ms.written("x\na\nb\n", "a\nb\n")
    assert not ms.written(None, "a\n")


def test_an_entry_the_plan_gave_no_todo_counts_as_work_and_keeps_its_own():
    # A backend's own plan, or the deprecated mount role's: ramdisk_apply finds out for itself.
    assert ms.item(entry(), vendor_tmp=False, systemd=True)["todo"] is True
    assert ms.item(entry(todo=False), vendor_tmp=False, systemd=True)["todo"] is False
    # The looped steps of versions before the executor are not carried along.
    assert "steps" not in ms.item(entry(steps={"fstab": True}), vendor_tmp=False, systemd=True)


def test_tmp_under_the_vendor_unit_takes_the_dropin():
    item = ms.item(entry(path="/tmp", migrate=False), vendor_tmp=True, systemd=True)
    assert item["use_dropin"] and item["texts"]["dropin"].endswith("Options=size=16M,mode=0755,nosuid,nodev\n")
    assert not ms.item(entry(path="/tmp", migrate=False), vendor_tmp=True, systemd=False)["use_dropin"]


ODD = "/srv/it's a \"b\" 100% $HOME\\x #c \u00e9"


@pytest.mark.parametrize("path, escaped", [
    # What systemd-escape --path prints (systemd 252).
    ("/", "-"), ("/srv/a b", "srv-a\\x20b"), ("/srv/.x/.y", "srv-.x-.y"), ("/.hidden", "\\x2ehidden"),
    ("/srv/a-b", "srv-a\\x2db"), ("/srv/caf\u00e9", "srv-caf\\xc3\\xa9"), ("/srv/a\\b", "srv-a\\x5cb"),
    ("/srv/p%q", "srv-p\\x25q"), ("/srv/x:y_z.1", "srv-x:y_z.1"), ("/srv//a/", "srv-a"),
])
def test_mount_unit_names_follow_systemd_escape(path, escaped):
    assert ms.escape_path(path) == escaped and ms.mount_unit(path) == escaped + ".mount"


@pytest.mark.parametrize("text, command, word", [
    ("/srv/cache", False, "/srv/cache"),
    ("/srv/a b", False, '"/srv/a b"'),
    ("/srv/100%", False, '"/srv/100%%"'),
    ("/srv/$x", False, '"/srv/$x"'),
    ("/srv/$x", True, '"/srv/$$x"'),
    ('/srv/a\\"b', True, '"/srv/a\\\\\\"b"'),
])
def test_unit_words_are_quoted_only_when_they_need_it(text, command, word):
    assert ms.unit_word(text, command) == word


def test_a_plain_path_keeps_the_seed_unit_it_had():
    text = ms.seed_unit(entry(), "/run/ramdisk-provision/lower/t")
    assert "RequiresMountsFor=/srv/cache\n" in text and '"' not in text
    assert "ExecStart=/usr/bin/cp -a --no-target-directory /run/ramdisk-provision/lower/t/cache/. /srv/cache\n" in text


def test_an_odd_path_is_quoted_in_the_seed_unit_and_the_tmpfiles_line():
    text = ms.seed_unit(entry(path=ODD, owner="www$"), "/run/ramdisk-provision/lower/t")
    assert 'RequiresMountsFor="/srv/it\'s a \\"b\\" 100%% $HOME\\\\x #c \u00e9"\n' in text
    assert "ConditionPathIsMountPoint=/srv/it's a \"b\" 100%% $HOME\\x #c \u00e9\n" in text
    assert 'ExecStart=/usr/bin/chown "www$$:root" "/srv/it\'s a \\"b\\" 100%% $$HOME\\\\x #c \u00e9"\n' in text
    line = ms.tmpfiles_line(entry(path=ODD, fstype="ramfs")).splitlines()[1]
    assert line == 'z "/srv/it\'s a \\"b\\" 100%% $HOME\\\\\\\\x #c \u00e9" 0755 root root -'


@pytest.mark.skipif(not shutil.which("systemd-tmpfiles"), reason="needs systemd-tmpfiles")
@pytest.mark.parametrize("path", [ODD, "/srv/g*l?o[b]", "/srv/ends\\", "/srv/plain"])
def test_systemd_tmpfiles_reads_the_line_back_as_the_path(tmp_path, path):
    root = str(tmp_path / "root")
    os.makedirs(root + path)
    os.chmod(root + path, 0o700)
    conf = tmp_path / "line.conf"
    conf.write_text(ms.tmpfiles_line(entry(path=path, fstype="ramfs", owner=None, group=None, mode="750")),
                    encoding="utf-8")
    subprocess.run(["systemd-tmpfiles", "--root=" + root, "--create", str(conf)], check=True, capture_output=True)
    assert stat.S_IMODE(os.stat(root + path).st_mode) == 0o750


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="needs systemd-analyze")
def test_systemd_reads_the_seed_unit_of_an_odd_path_without_a_complaint(tmp_path):
    unit = tmp_path / "ramdisk-seed-test.service"
    unit.write_text(ms.seed_unit(entry(path=ODD), "/run/ramdisk-provision/lower/t"), encoding="utf-8")
    result = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit)], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0 and result.stderr.strip() == "", result.stderr
    condition = subprocess.run(["systemd-analyze", "condition", "ConditionPathIsMountPoint=%s" % ms.specifiers(ODD)],
                               capture_output=True, text=True, timeout=60, check=False)
    assert "ConditionPathIsMountPoint=%s failed" % ODD in condition.stdout + condition.stderr


def test_a_run_warns_only_where_a_warning_applies(tmp_path):
    seeded, fresh = tmp_path / "seeded", tmp_path / "fresh"
    seeded.mkdir()
    (seeded / "data").write_text("kept on disk\n")
    (fresh / "lost+found").mkdir(parents=True)
    carried = [
        {"path": str(seeded), "action": "migrate", "seeded": True},
        {"path": str(fresh), "action": "migrate", "seeded": True},
        {"path": "/srv/cache", "action": "mount", "seeded": False},
        {"path": "/srv/gone", "action": "unmount", "use_dropin": False},
        {"path": "/srv/kept", "action": "unmount", "use_dropin": False, "persist": {"backing": "/var/lib/x"}},
        {"path": "/tmp", "action": "unmount", "use_dropin": True},
        {"path": "/srv/old", "action": "unmount", "use_dropin": False},
    ]
    done = [{"path": entry["path"], "changed": entry["path"] != "/srv/old"} for entry in carried]
    recovered = [{"path": "/srv/data", "action": "migrate", "way": "back"}]
    without = ms.notes("web1", carried, done, recovered, systemd=False)
    assert without == [
        "Host web1: a run that died had left /srv/data (migrate) half done; it was undone.",
        "Host web1 does not run systemd, so after a reboot the RAM mount at %s starts empty over the disk "
        "copy. Run this role again after each boot, or set migrate to false and manage the contents yourself." % seeded,
        "Host web1: /srv/gone was unmounted without persist, so what was written there since it was mounted went "
        "with it; the directory on disk is as it was before the mount.",
    ]
    # With systemd the seed unit fills the mount at boot; a migrate that copied nothing (a new cache), a plain
    # mount, a persisted removal, the drop-in of /tmp and a mount this run did not touch say nothing.
    assert ms.notes("web1", carried, done, [], systemd=True) == [without[2]]
