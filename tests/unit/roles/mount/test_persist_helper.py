# SPDX-License-Identifier: GPL-3.0-or-later
"""The persist helper (roles/mount/files/persist.sh), its host paths pointed at the test's directories, run against
directories.

mountpoint and stat -f are stood in for (the mount is a plain directory here, and the test's temporary
directory may itself be a tmpfs); every other command is the real one.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys

import re

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
HELPER = os.path.join(REPO_ROOT, "roles", "mount", "files", "persist.sh")
TOKEN = "srv-data-12345678"

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not all(shutil.which(tool) for tool in ("flock", "awk", "sync", "cp")),
    reason="the helper runs on Linux with coreutils and util-linux",
)


class Helper(object):
    def __init__(self, root):
        self.root = root
        self.mount = root / "mount"
        self.backing = root / "backing"
        self.state = root / "state"
        self.bin = root / "bin"
        for directory in (self.mount, self.backing, self.bin, root / "conf"):
            directory.mkdir()
        places = {"conf_dir": root / "conf", "state_dir": self.state, "status_dir": root / "status",
                  "metrics_collector": root / "collector.py"}
        with open(HELPER, encoding="utf-8") as handle:
            script = handle.read()
        for name, place in places.items():
            script, count = re.subn(r"(?m)^%s=.*$" % name, "%s=%s" % (name, place), script)
            assert count == 1, name
        self.script = root / "persist"
        self.script.write_text(script, encoding="utf-8")
        self.script.chmod(0o755)
        conf = root / "conf" / ("%s.conf" % TOKEN)
        conf.write_text("MOUNT=%s\nBACKING=%s\n" % (self.mount, self.backing), encoding="utf-8")
        self.stub("mountpoint", "exit 0")
        self.stub("stat", 'echo ext2/ext3')

    def stub(self, name, body):
        path = self.bin / name
        path.write_text("#!/bin/sh\n%s\n" % body, encoding="utf-8")
        path.chmod(0o755)

    def run(self, command, token=TOKEN):
        env = dict(os.environ, PATH="%s:%s" % (self.bin, os.environ.get("PATH", "/usr/bin:/bin")))
        return subprocess.run([str(self.script), command, token], env=env, capture_output=True, text=True,
                              check=False)

    @property
    def current(self):
        link = self.backing / "current"
        return os.readlink(link) if link.is_symlink() else None

    def entries(self):
        return sorted(os.listdir(self.backing))


def tree(root):
    """Relative path -> (type, mode, content) of every entry under ROOT."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            info = os.lstat(path)
            content = None
            if stat.S_ISREG(info.st_mode):
                with open(path, "rb") as handle:
                    content = handle.read()
            elif stat.S_ISLNK(info.st_mode):
                content = os.readlink(path)
            out[os.path.relpath(path, root)] = (stat.S_IFMT(info.st_mode), stat.S_IMODE(info.st_mode), content)
    return out


def fill(directory, files):
    for rel, content in files.items():
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")


@pytest.fixture()
def helper(tmp_path):
    return Helper(tmp_path)


def test_first_sync_makes_current(helper):
    fill(helper.mount, {"PG_VERSION": "15\n", "base/1/1259": "rows", ".hidden": "dot"})
    (helper.mount / "base" / "link").symlink_to("1/1259")
    (helper.mount / "private").mkdir(mode=0o700)
    result = helper.run("sync")
    assert result.returncode == 0, result.stderr
    assert helper.current.startswith("snap-")
    assert helper.entries() == ["current", helper.current]
    assert tree(helper.backing / "current") == tree(helper.mount)
    assert (helper.state / ("%s.restored" % TOKEN)).exists()


def test_restore_fills_an_empty_mount(helper):
    fill(helper.mount, {"a": "1", "d/b": "2"})
    assert helper.run("sync").returncode == 0
    expected = tree(helper.mount)
    shutil.rmtree(helper.mount)
    helper.mount.mkdir()
    (helper.mount / "lost+found").mkdir()
    result = helper.run("restore")
    assert result.returncode == 0, result.stderr
    assert "restored" in result.stderr
    assert tree(helper.mount) == dict(expected, **{"lost+found": tree(helper.root)["mount/lost+found"]})
    assert not (helper.mount / ".ramdisk-persist-partial").exists()


def test_restore_into_a_setgid_root_keeps_the_modes_of_the_copy(helper):
    # A mount made with mode=2750: every directory cp makes in it would inherit the bit, which the copy lacks.
    fill(helper.mount, {"d/deeper/f": "1"})
    for path, mode in ((helper.mount / "d" / "deeper", 0o750), (helper.mount / "d", 0o750), (helper.mount, 0o2750)):
        path.chmod(mode)
    assert helper.run("sync").returncode == 0
    expected = tree(helper.mount)
    shutil.rmtree(helper.mount / "d")
    result = helper.run("restore")
    assert result.returncode == 0, result.stderr
    assert tree(helper.mount) == expected
    assert stat.S_IMODE(helper.mount.stat().st_mode) == 0o2750


def test_restore_keeps_a_mount_that_holds_data(helper):
    fill(helper.mount, {"a": "old"})
    assert helper.run("sync").returncode == 0
    (helper.mount / "a").write_text("newer", encoding="utf-8")
    result = helper.run("restore")
    assert result.returncode == 0
    assert "kept as it is" in result.stderr
    assert (helper.mount / "a").read_text(encoding="utf-8") == "newer"


def test_restore_cut_short_is_done_again(helper):
    fill(helper.mount, {"a": "1", "b": "2"})
    assert helper.run("sync").returncode == 0
    expected = tree(helper.mount)
    (helper.mount / "b").unlink()
    (helper.mount / "half-copied").write_text("x", encoding="utf-8")
    (helper.mount / ".ramdisk-persist-partial").write_text("", encoding="utf-8")
    result = helper.run("restore")
    assert result.returncode == 0, result.stderr
    assert "cut short" in result.stderr
    assert tree(helper.mount) == expected


def test_sync_refuses_a_mount_cut_short(helper):
    fill(helper.mount, {"a": "1"})
    assert helper.run("sync").returncode == 0
    (helper.mount / ".ramdisk-persist-partial").write_text("", encoding="utf-8")
    before = helper.current
    result = helper.run("sync")
    assert result.returncode == 1 and "restore cut short" in result.stderr
    assert helper.current == before


def test_restore_without_a_copy_fails(helper):
    result = helper.run("restore")
    assert result.returncode == 1
    assert "has no current copy" in result.stderr
    assert not (helper.state / ("%s.restored" % TOKEN)).exists()


@pytest.mark.parametrize("marker", [None, "999 0:99"])
def test_sync_of_a_mount_not_restored_is_refused(helper, marker):
    fill(helper.mount, {"a": "backed up"})
    assert helper.run("sync").returncode == 0
    before = (helper.current, tree(helper.backing / "current"))
    marker_path = helper.state / ("%s.restored" % TOKEN)
    if marker is None:
        marker_path.unlink()
    else:
        marker_path.write_text(marker + "\n", encoding="utf-8")
    (helper.mount / "a").write_text("not restored", encoding="utf-8")
    result = helper.run("sync")
    assert result.returncode == 3
    assert "the backing copy is the newer one" in result.stderr
    assert (helper.current, tree(helper.backing / "current")) == before


def test_empty_mount_is_not_synced_over_data(helper):
    fill(helper.mount, {"a": "1"})
    assert helper.run("sync").returncode == 0
    (helper.mount / "a").unlink()
    result = helper.run("sync")
    assert result.returncode == 3 and "holds nothing" in result.stderr
    assert (helper.backing / "current" / "a").read_text(encoding="utf-8") == "1"


def test_sync_switches_current_and_cleans_up(helper):
    fill(helper.mount, {"a": "1"})
    assert helper.run("sync").returncode == 0
    first = helper.current
    (helper.backing / ".new-crashed").mkdir()
    (helper.backing / ".current-crashed").symlink_to(first)
    (helper.mount / "a").write_text("2", encoding="utf-8")
    result = helper.run("sync")
    assert result.returncode == 0, result.stderr
    assert helper.current != first
    assert helper.entries() == ["current", helper.current]
    assert (helper.backing / "current" / "a").read_text(encoding="utf-8") == "2"


def test_a_sync_that_fails_half_way_leaves_current_whole(helper):
    fill(helper.mount, {"a": "1", "b": "2"})
    assert helper.run("sync").returncode == 0
    before = (helper.current, tree(helper.backing / "current"))
    (helper.mount / "a").write_text("changed", encoding="utf-8")
    # cp dies half-way through the new copy, as on a full disk or a crash.
    helper.stub("cp", 'for last; do :; done; mkdir -p "$last"; echo partial > "$last/a"; exit 1')
    result = helper.run("sync")
    assert result.returncode == 1 and "is unchanged" in result.stderr
    assert (helper.current, tree(helper.backing / "current")) == before
    assert any(name.startswith(".new-") for name in helper.entries())
    (helper.bin / "cp").unlink()
    assert helper.run("sync").returncode == 0
    assert helper.entries() == ["current", helper.current]
    assert (helper.backing / "current" / "a").read_text(encoding="utf-8") == "changed"


@pytest.mark.parametrize("setup, words", [
    (lambda h: h.stub("mountpoint", "exit 1"), "is not a mount point"),
    (lambda h: h.stub("stat", "echo tmpfs"), "is in RAM"),
    (lambda h: shutil.rmtree(h.backing), "is missing"),
])
def test_refuses_where_it_would_do_harm(helper, setup, words):
    fill(helper.mount, {"a": "1"})
    setup(helper)
    for command in ("sync", "restore"):
        result = helper.run(command)
        assert result.returncode == 1 and words in result.stderr, result.stderr
    assert not helper.backing.exists() or helper.entries() == []


@pytest.mark.parametrize("args, words", [(["sync", "../x"], "is not a token"), (["sync", "nope"], "is missing"),
                                         (["dump", TOKEN], "usage")])
def test_bad_arguments(helper, args, words):
    result = helper.run(*args)
    assert result.returncode in (1, 2) and words in result.stderr
