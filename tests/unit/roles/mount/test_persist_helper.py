# SPDX-License-Identifier: GPL-3.0-or-later
"""The persist helper (plugins/module_utils/_persist_helper.py), its host paths pointed at the test's directories,
run against directories as the program the units run.

The mount-point and RAM file system checks are stood in for where the mount is a plain directory (the test's
temporary directory may itself be a tmpfs); systemctl and journalctl are stood in for by scripts on PATH, as the
program runs them by name. The copy errors are real ones where the kernel makes them on demand: a full tmpfs in a
private mount namespace, a file deleted while the sync is held at the engine's kill point, a file the helper may
not read once it lacks the capabilities that let root read anything. The mount tests (a remount, a nested mount)
run in private mount namespaces (unshare).
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import signal
import stat
import struct
import subprocess
import sys
import time

import pytest

from ansible_collections.ramdisk.provision.plugins.module_utils import _persist_helper as program
from ansible_collections.ramdisk.provision.plugins.module_utils._tree import compare_trees, tree_digest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
PROGRAM = os.path.join(REPO_ROOT, "plugins", "module_utils", "_persist_helper.py")
DELTA = os.path.join(REPO_ROOT, "plugins", "module_utils", "_persist_delta.py")
TOKEN = "srv-data-12345678"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the helper runs on Linux")
ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="needs root")
needs_unshare = pytest.mark.skipif(not ROOT or not shutil.which("unshare"), reason="needs root and unshare")

# The program as the host runs it (loaded by path, so that it loads its engine from the path given, as it loads
# persist-delta.py beside it on the host), its places and its two host checks set from the test's files.
WRAPPER = """import importlib.util, json, os, sys
root = %(root)r
spec = importlib.util.spec_from_file_location("persist_helper", %(program)r)
helper = importlib.util.module_from_spec(spec)
spec.loader.exec_module(helper)
helper.PLACES.update(json.load(open(os.path.join(root, "places.json"))))
fakes = json.load(open(os.path.join(root, "fakes.json"))) if os.path.exists(os.path.join(root, "fakes.json")) else {}
if "mount_point" in fakes:
    helper.is_mount_point = lambda path: fakes["mount_point"]
if "fs_type" in fakes:
    helper.fs_type = lambda path: fakes["fs_type"]
sys.exit(helper.main())
"""


class Helper(object):
    """The helper with its host paths in ROOT."""

    def __init__(self, root):
        self.root = root
        self.mount = root / "mount"
        self.backing = root / "backing"
        self.state = root / "state"
        self.bin = root / "bin"
        for directory in (self.mount, self.backing, self.bin, root / "conf"):
            directory.mkdir()
        places = {"conf_dir": str(root / "conf"), "state_dir": str(self.state), "status_dir": str(root / "status"),
                  "metrics_collector": str(root / "collector.py"), "engine": DELTA}
        (root / "places.json").write_text(json.dumps(places), encoding="utf-8")
        self.fake(mount_point=True, fs_type="disk")
        self.script = root / "persist"
        self.script.write_text("#!%s\n" % sys.executable + WRAPPER % {"root": str(root), "program": PROGRAM},
                               encoding="utf-8")
        self.script.chmod(0o755)
        self.conf = root / "conf" / ("%s.conf" % TOKEN)
        self.configure()
        self.path = [str(self.bin), os.environ.get("PATH", "/usr/bin:/bin")]

    def fake(self, **checks):
        """The host checks stood in for (mount_point, fs_type); None: the real one."""
        path = self.root / "fakes.json"
        fakes = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        for name, value in checks.items():
            if value is None:
                fakes.pop(name, None)
            else:
                fakes[name] = value
        path.write_text(json.dumps(fakes), encoding="utf-8")

    def configure(self, keep=None, services=None, stop=False):
        text = "MOUNT=%s\nBACKING=%s\n" % (self.mount, self.backing)
        if keep is not None:
            text += "KEEP=%s\n" % keep
        if services is not None:
            text += "SERVICES='%s'\nSTOP_SERVICES=%d\n" % (services, 1 if stop else 0)
        self.conf.write_text(text, encoding="utf-8")

    def stub(self, name, body):
        path = self.bin / name
        path.write_text("#!/bin/sh\n%s\n" % body, encoding="utf-8")
        path.chmod(0o755)

    def env(self):
        return dict(os.environ, PATH=os.pathsep.join(self.path))

    def run(self, *args, token=TOKEN, wrap=(), env=None):
        argv = list(args) if len(args) != 1 else [args[0], token]
        return subprocess.run(list(wrap) + [str(self.script)] + argv, env=dict(self.env(), **(env or {})),
                              capture_output=True, text=True, check=False)

    def held(self, step, env=None):
        """A sync stopped (SIGSTOP) at the engine's kill point STEP; returns the process, once it is stopped there."""
        run = subprocess.Popen([str(self.script), "sync", TOKEN], env=dict(self.env(), PERSIST_DELTA_KILL_AT=step,
                                                                           PERSIST_DELTA_KILL_SIGNAL="SIGSTOP",
                                                                           **(env or {})),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        deadline = time.monotonic() + 30
        while _state(run.pid) != "T":
            assert time.monotonic() < deadline and run.poll() is None, "the sync never reached %s: %s" % (
                step, run.communicate()[1] if run.poll() is not None else "")
            time.sleep(0.01)
        return run

    def status(self):
        path = self.root / "status" / ("%s.status" % TOKEN)
        return dict(line.split("=", 1) for line in path.read_text(encoding="utf-8").splitlines())

    def snapshots(self):
        return [name for name in self.entries() if name.startswith("snap-")]

    def reverse_deltas(self):
        state = self.backing / ".persist-delta"
        return sorted(name for name in os.listdir(state) if name.startswith("undo-")) if state.exists() else []

    def mark_partial(self):
        """The mark a restore cut short leaves: in the state directory, bound to this mount's identity."""
        self.state.mkdir(exist_ok=True)
        marker = self.state / ("%s.partial" % TOKEN)
        marker.write_text(json.dumps(program.identity(str(self.mount))), encoding="utf-8")

    @property
    def current(self):
        link = self.backing / "current"
        return os.readlink(link) if link.is_symlink() else None

    def entries(self):
        return sorted(os.listdir(self.backing))


def _state(pid):
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return ""


def resume(run, sig=None):
    """Let a held sync go on (after SIG, delivered as it wakes); returns (exit status, stderr)."""
    if sig is not None:
        os.killpg(run.pid, sig)
    os.killpg(run.pid, signal.SIGCONT)
    _out, err = run.communicate(timeout=60)
    return run.returncode, err


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


def du(*paths):
    """Bytes the paths take on disk together, each file once (du -s -B1)."""
    out = subprocess.run(["du", "-s", "-B1"] + [str(path) for path in paths], capture_output=True, text=True,
                         check=True).stdout
    return sum(int(line.split()[0]) for line in out.splitlines())


def du_new(old, new):
    """Bytes NEW takes on disk that OLD does not share with it."""
    out = subprocess.run(["du", "-s", "-B1", str(old), str(new)], capture_output=True, text=True, check=True).stdout
    return int(out.splitlines()[1].split()[0])


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
    assert helper.entries() == [".persist-delta", "current", helper.current]
    assert tree(helper.backing / "current") == tree(helper.mount)
    assert (helper.state / ("%s.restored" % TOKEN)).exists()
    assert stat.S_IMODE(helper.state.stat().st_mode) == 0o700
    status = helper.status()
    assert status["RESULT"] == "ok" and status["LAST_OK_SNAPSHOT"] == helper.current
    assert (status["COPY"], status["COPY_TOOL"]) == ("full", "persist-delta")
    # Nothing to share with: all of the copy is written.
    assert int(status["LAST_OK_WRITTEN_BYTES"]) == int(status["LAST_OK_BYTES"]) == du(helper.backing / helper.current)
    assert int(status["LAST_OK_BACKING_BYTES"]) == du(helper.backing)


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
    assert not (helper.state / ("%s.partial" % TOKEN)).exists()
    assert os.listdir(helper.state) and not [name for name in os.listdir(helper.mount) if "persist" in name]


def test_restore_into_a_setgid_root_keeps_the_modes_of_the_copy(helper):
    # A mount made with mode=2750: every directory a copy makes in it would inherit the bit, which the copy lacks.
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
    helper.mark_partial()
    result = helper.run("restore")
    assert result.returncode == 0, result.stderr
    assert "cut short" in result.stderr
    assert tree(helper.mount) == expected
    assert not (helper.state / ("%s.partial" % TOKEN)).exists()


def test_sync_refuses_a_mount_cut_short(helper):
    fill(helper.mount, {"a": "1"})
    assert helper.run("sync").returncode == 0
    helper.mark_partial()
    before = tree(helper.backing / "current")
    (helper.mount / "a").write_text("half", encoding="utf-8")
    result = helper.run("sync")
    assert result.returncode == 1 and "restore cut short" in result.stderr
    assert tree(helper.backing / "current") == before


@pytest.mark.parametrize("name", [".ramdisk-persist-partial", "srv-data-12345678.partial", ".persist-delta"])
def test_a_name_a_user_plants_in_the_mount_root_is_data_and_nothing_else(helper, name):
    """Issue 41: the partial-restore marker lived in the mount root, which a user may write (tmp is 1777): a
    planted one made every sync refuse and the next restore empty the mount. Now such a name is only data."""
    fill(helper.mount, {"a": "1"})
    assert helper.run("sync").returncode == 0
    (helper.mount / name).write_text("planted by a user", encoding="utf-8")
    (helper.mount / "a").write_text("2", encoding="utf-8")
    result = helper.run("sync")
    assert result.returncode == 0, result.stderr
    assert (helper.backing / "current" / "a").read_text(encoding="utf-8") == "2"
    assert (helper.backing / "current" / name).read_text(encoding="utf-8") == "planted by a user"
    # The next restore of a mount that holds data keeps it all.
    result = helper.run("restore")
    assert result.returncode == 0, result.stderr
    assert "cut short" not in result.stderr
    assert (helper.mount / "a").read_text(encoding="utf-8") == "2" and (helper.mount / name).exists()


def test_restore_without_a_copy_fails(helper):
    result = helper.run("restore")
    assert result.returncode == 1
    assert "has no current copy" in result.stderr
    assert not (helper.state / ("%s.restored" % TOKEN)).exists()


@pytest.mark.parametrize("marker", [None, "999 0:99", '{"unique": 1, "token": null, "mountinfo": ""}'])
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
    status = helper.status()
    assert status["RESULT"] == "refused" and "was not restored" in status["REASON"]


@needs_root
def test_a_mount_whose_token_changed_is_refused(helper):
    """The token on the mount root, which only root sets: another token (another mount's) is not the restored one."""
    fill(helper.mount, {"a": "1"})
    assert helper.run("sync").returncode == 0
    try:
        os.setxattr(helper.mount, program.XATTR, b"another mount")
    except OSError:
        pytest.skip("no trusted xattrs on this file system")
    result = helper.run("sync")
    assert result.returncode == 3, result.stderr


def test_empty_mount_is_not_synced_over_data(helper):
    fill(helper.mount, {"a": "1"})
    assert helper.run("sync").returncode == 0
    (helper.mount / "a").unlink()
    result = helper.run("sync")
    assert result.returncode == 3 and "holds nothing" in result.stderr
    assert (helper.backing / "current" / "a").read_text(encoding="utf-8") == "1"


def test_sync_writes_in_place_and_cleans_up(helper):
    fill(helper.mount, {"a": "1"})
    assert helper.run("sync").returncode == 0
    first = helper.current
    (helper.backing / ".new-crashed").mkdir()
    (helper.backing / ".new-crashed" / "x").write_text("left", encoding="utf-8")
    (helper.backing / ".current-crashed").symlink_to(first)
    (helper.mount / "a").write_text("2", encoding="utf-8")
    result = helper.run("sync")
    assert result.returncode == 0, result.stderr
    assert helper.current == first
    assert helper.entries() == [".persist-delta", "current", first]
    assert (helper.backing / "current" / "a").read_text(encoding="utf-8") == "2"
    # KEEP unset: the current copy and one reverse delta, which holds the copy before.
    assert helper.reverse_deltas() == ["undo-1"]
    assert (helper.backing / ".persist-delta" / "undo-1" / "0").read_text(encoding="utf-8") == "1"


def test_the_bytes_written_are_the_changes_and_the_record(helper):
    fill(helper.mount, {"d%d/f" % n: "x" * 5000 for n in range(20)})
    assert helper.run("sync").returncode == 0
    fill(helper.mount, {"d3/f": "y" * 7000, "d4/new": "z" * 100})
    os.chmod(helper.mount / "d5" / "f", 0o600)
    result = helper.run("sync")
    assert result.returncode == 0, result.stderr
    status = helper.status()
    assert (status["COPY"], status["COPY_TOOL"]) == ("incremental", "persist-delta")
    assert 0 < int(status["LAST_OK_WRITTEN_BYTES"]) < 40000
    assert int(status["LAST_OK_BYTES"]) == du(helper.backing / helper.current)
    assert int(status["LAST_OK_BACKING_BYTES"]) == du(helper.backing)
    assert "in place, %s bytes written" % status["LAST_OK_WRITTEN_BYTES"] in result.stderr


@pytest.mark.parametrize("keep, left", [(2, ["current"]), (3, ["current", "snap-29991231T000000.000000000Z"])])
def test_the_current_copy_stays_whatever_its_name_says(helper, keep, left):
    """A clock set back makes the copy's name older than others: current's copy stays, the others go oldest name
    first, each reverse delta counted among the copies kept."""
    helper.configure(keep)
    fill(helper.mount, {"a": "1"})
    assert helper.run("sync").returncode == 0
    first = helper.current
    for stray in ("snap-19700101T000000.000000000Z", "snap-29991231T000000.000000000Z"):
        (helper.backing / stray).mkdir()
    (helper.mount / "a").write_text("2", encoding="utf-8")
    assert helper.run("sync").returncode == 0
    assert helper.snapshots() == sorted(first if name == "current" else name for name in left)


@pytest.mark.parametrize("keep, syncs, kept", [(1, 3, 1), (None, 3, 2), (3, 5, 3), (4, 2, 2), ("lots", 3, 2)])
def test_keep_sets_how_many_copies_stay(helper, keep, syncs, kept):
    helper.configure(keep)
    for number in range(syncs):
        (helper.mount / "n").write_text(str(number), encoding="utf-8")
        result = helper.run("sync")
        assert result.returncode == 0, result.stderr
    assert len(helper.snapshots()) == 1
    # current and KEEP-1 reverse deltas: each older copy restores as it was.
    assert len(helper.reverse_deltas()) == kept - 1
    for back in range(kept):
        listed = helper.run("list").stdout.split()
        assert listed[3 * back] == str(back)
    for back in range(1, kept):
        target = helper.root / ("back-%d" % back)
        shutil.rmtree(helper.mount)
        helper.mount.mkdir()
        result = helper.run("restore-back", str(back), TOKEN)
        assert result.returncode == 0, result.stderr
        assert (helper.mount / "n").read_text(encoding="utf-8") == str(syncs - 1 - back), target
    if keep == "lots":
        assert "KEEP=lots" in result.stderr and "keeping 2 copies" in result.stderr


def test_restore_back_refuses_a_mount_that_holds_data_and_a_generation_not_kept(helper):
    fill(helper.mount, {"n": "0"})
    assert helper.run("sync").returncode == 0
    (helper.mount / "n").write_text("1", encoding="utf-8")
    assert helper.run("sync").returncode == 0
    result = helper.run("restore-back", "1", TOKEN)
    assert result.returncode == 1 and "holds data: empty it first" in result.stderr
    shutil.rmtree(helper.mount)
    helper.mount.mkdir()
    result = helper.run("restore-back", "2", TOKEN)
    assert result.returncode == 1 and "keeps no reverse delta" in result.stderr


def test_return_copies_current_into_a_directory_on_disk(helper):
    fill(helper.mount, {"a": "1", "d/b": "2"})
    assert helper.run("sync").returncode == 0
    disk = helper.root / "disk"
    fill(disk, {"stale": "before persist"})
    # A directory that holds anything is refused and left as it is: the data returns only into a new one.
    refused = helper.run("return", TOKEN, str(disk))
    assert refused.returncode != 0 and "is not empty" in refused.stderr, refused.stderr
    assert tree(disk) == {"stale": "before persist"} or (disk / "stale").read_text() == "before persist"
    fresh = helper.root / "fresh"
    result = helper.run("return", TOKEN, str(fresh))
    assert result.returncode == 0, result.stderr
    assert tree(fresh) == tree(helper.backing / "current")


def test_the_copies_keep_what_cp_a_keeps(helper):
    """Owners by number, modes (setgid root, sticky), times to the nanosecond, hard links, ACLs, xattrs, holes,
    devices, fifos and symlinks: in the first copy, and in current after a sync in place."""
    root = helper.mount
    fill(root, {"data/file": "x" * 3000, "data/other": "y", "public/tmpfile": "t"})
    os.link(root / "data" / "file", root / "data" / "hardlink")
    (root / "data" / "symlink").symlink_to("file")
    with open(root / "sparse", "wb") as handle:
        handle.truncate(64 * 1024 * 1024)
        handle.seek(32 * 1024 * 1024)
        handle.write(b"middle")
    (root / "public").chmod(0o1777)
    (root / "data" / "other").chmod(0o640)
    os.mkfifo(root / "fifo")
    if ROOT:
        os.chown(root / "data" / "file", 4321, 8765)
        os.chown(root / "data" / "symlink", 4322, 8766, follow_symlinks=False)
        os.chown(root, 4321, 8765)
        os.mknod(root / "null", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    xattrs = _set_xattrs(root / "data" / "other")
    dir_xattrs = _set_xattrs(root / "public")
    (root / "public").chmod(0o1777)
    root.chmod(0o2750)
    for path in (root / "data" / "other", root / "data", root):
        os.utime(path, ns=(1_700_000_000_123_456_789, 1_700_000_000_987_654_321))

    def same(copy):
        digests = [tree_digest(str(path)) for path in (root, copy)]
        assert digests[0][1] == digests[1][1] == []
        assert compare_trees(digests[0][0], digests[1][0], "mount", "copy", root_mtime=True) == []
        assert (copy / "data" / "file").stat().st_ino == (copy / "data" / "hardlink").stat().st_ino
        assert (copy / "sparse").stat().st_blocks * 512 < 1024 * 1024
        assert sorted(os.listxattr(copy / "data" / "other")) == sorted(xattrs)
        assert sorted(os.listxattr(copy / "public")) == sorted(dir_xattrs)

    result = helper.run("sync")
    assert result.returncode == 0, result.stderr
    same(helper.backing / helper.current)
    (root / "public" / "tmpfile").write_text("t2", encoding="utf-8")
    os.utime(root / "public", ns=(1_700_000_000_000_000_001, 1_700_000_000_000_000_002))
    os.utime(root, ns=(1_700_000_000_123_456_789, 1_700_000_000_987_654_321))
    result = helper.run("sync")
    assert result.returncode == 0, result.stderr
    same(helper.backing / helper.current)
    assert helper.status()["COPY_TOOL"] == "persist-delta"


def _set_xattrs(path):
    """A user xattr and an access ACL on PATH, where its file system takes them; the names it set."""
    names = []
    try:
        os.setxattr(path, "user.origin", b"ramdisk test")
        names.append("user.origin")
    except OSError:
        pass  # a file system without user xattrs: nothing to compare there
    # A POSIX access ACL (user:1000:r--), as setfacl writes it: version 2, then (tag, perm, id) entries.
    entries = [(0x01, 6, 0xFFFFFFFF), (0x02, 4, 1000), (0x04, 4, 0xFFFFFFFF), (0x10, 4, 0xFFFFFFFF),
               (0x20, 0, 0xFFFFFFFF)]
    value = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *entry) for entry in entries)
    try:
        os.setxattr(path, "system.posix_acl_access", value)
        names.append("system.posix_acl_access")
    except OSError:
        pass  # no ACLs here
    os.chmod(path, 0o640)
    return names


def failed_sync_left_current(helper, result, before, last_ok):
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert "is unchanged" in result.stderr, result.stderr
    assert (helper.current, tree(helper.backing / "current")) == before
    assert not [name for name in helper.entries() if name.startswith((".new-", ".current-"))]
    status = helper.status()
    assert (status["RESULT"], status["EXIT"]) == ("failed", "1")
    assert status["LAST_OK_SNAPSHOT"] == last_ok == before[0]


def first_sync(helper, files):
    fill(helper.mount, files)
    assert helper.run("sync").returncode == 0
    return (helper.current, tree(helper.backing / "current")), helper.status()["LAST_OK_SNAPSHOT"]


@needs_root
@pytest.mark.skipif(not shutil.which("unshare"), reason="needs unshare")
def test_a_full_backing_fails_the_sync(helper):
    """ENOSPC for real: the backing is a 1 MiB tmpfs, mounted in a private mount namespace only."""
    fill(helper.mount, {"small": "s" * 1000})
    script = (
        'set -u; mount -t tmpfs -o size=1m,mode=0755 ramdisk-test "$1" || exit 99; shift\n'
        '"$@" sync %s; echo "first=$?"\n'
        'head -c 2097152 /dev/urandom > "%s/big"\n'
        '"$@" sync %s 2>&1; echo "second=$?"\n'
        'echo "current=$(readlink "%s/current")"; ls -A "%s"; echo "files=$(ls -A "%s/current")"\n'
        % (TOKEN, helper.mount, TOKEN, helper.backing, helper.backing, helper.backing))
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
                           str(helper.backing), str(helper.script)], env=helper.env(), capture_output=True,
                          text=True, check=False)
    out = done.stdout
    if "first=" not in out:
        pytest.skip("no private tmpfs here: %s" % done.stderr.strip())
    assert "first=0" in out and "second=1" in out, out + done.stderr
    assert "No space left on device" in out and "is unchanged" in out
    first = re.search(r"^current=(snap-\S+)$", out, re.M).group(1)
    listing = out.split("current=", 1)[1].splitlines()[1:-1]
    assert sorted(listing) == [".persist-delta", "current", first]
    assert "files=small" in out
    assert not os.path.ismount(helper.backing) and helper.entries() == []
    status = helper.status()
    assert (status["RESULT"], status["LAST_OK_SNAPSHOT"]) == ("failed", first)


def test_a_file_that_vanishes_while_the_sync_copies_is_left_out_and_the_sync_goes_on(helper):
    """A file a user deletes between the walk and its copy is not in the mount any more: the copy leaves it out
    (as rsync leaves out a vanished file), the sync succeeds, and current is the mount as it is now."""
    first_sync(helper, {"a": "1", "zz-vanishes": "soon gone"})
    (helper.mount / "a").write_bytes(os.urandom(256 * 1024))
    (helper.mount / "zz-vanishes").write_text("changed, then gone", encoding="utf-8")
    # Held after its plan: the changed file, in the plan already, is deleted before it is copied.
    run = helper.held("planned")
    (helper.mount / "zz-vanishes").unlink()
    code, err = resume(run)
    assert code == 0, err
    assert helper.status()["RESULT"] == "ok"
    # current holds the file as the walk saw it; the next sync, which finds it gone, removes it.
    assert tree(helper.backing / "current")["a"] == tree(helper.mount)["a"]
    assert helper.run("sync").returncode == 0
    assert tree(helper.backing / "current") == tree(helper.mount)


@needs_root
@pytest.mark.skipif(not shutil.which("setpriv"), reason="needs setpriv")
@pytest.mark.parametrize("first", [True, False])
def test_a_file_the_helper_cannot_read_fails_the_sync(helper, first):
    if first:
        before, last_ok = (None, {}), None
    else:
        before, last_ok = first_sync(helper, {"a": "1"})
    secret = helper.mount / "secret"
    secret.write_text("not for the helper", encoding="utf-8")
    os.chown(secret, 4321, 4321)
    secret.chmod(0)
    # Root without the capabilities that bypass file modes: what an unreadable file does to any reader.
    wrap = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-dac_override,-dac_read_search"]
    result = helper.run("sync", wrap=wrap)
    assert "Permission denied" in result.stderr
    if first:
        assert result.returncode == 1 and "is unchanged" in result.stderr
        assert helper.entries() == [".persist-delta"] and helper.status()["RESULT"] == "failed"
    else:
        failed_sync_left_current(helper, result, before, last_ok)


@pytest.mark.parametrize("step", ["first:copied", "planned", "staged"])
def test_a_sync_stopped_by_systemd_is_failed_and_leaves_current_whole(helper, step):
    if step == "first:copied":
        fill(helper.mount, {"a": "1"})
    else:
        before, last_ok = first_sync(helper, {"a": "1"})
        (helper.mount / "a").write_bytes(os.urandom(512 * 1024))
    run = helper.held(step)
    # As systemd stops a unit: TERM to every process of it.
    code, err = resume(run, signal.SIGTERM)
    assert code == 143, err
    if step == "first:copied":
        assert helper.entries() == [".persist-delta"] and helper.status()["RESULT"] == "failed"
        return
    assert (helper.current, tree(helper.backing / "current")) == before
    assert helper.entries() == [".persist-delta", "current", before[0]]
    assert (helper.status()["RESULT"], helper.status()["LAST_OK_SNAPSHOT"]) == ("failed", last_ok)
    # The next sync throws away what the stopped one staged, and copies.
    assert helper.run("sync").returncode == 0
    assert tree(helper.backing / "current") == tree(helper.mount)


@needs_root
@pytest.mark.skipif(not shutil.which("chattr"), reason="needs chattr")
def test_a_copy_that_cannot_be_removed_does_not_fail_the_sync(helper):
    helper.configure(1)
    fill(helper.mount, {"a": "1"})
    assert helper.run("sync").returncode == 0
    stray = helper.backing / "snap-19700101T000000.000000000Z"
    stray.mkdir()
    (stray / "a").write_text("old", encoding="utf-8")
    stuck = stray / "a"
    if subprocess.run(["chattr", "+i", str(stuck)], capture_output=True, check=False).returncode != 0:
        pytest.skip("this file system has no immutable flag")
    try:
        (helper.mount / "a").write_text("2", encoding="utf-8")
        result = helper.run("sync")
        assert result.returncode == 0, result.stderr
        assert "the next sync tries again" in result.stderr
        assert (helper.backing / "current" / "a").read_text(encoding="utf-8") == "2"
        assert helper.status()["RESULT"] == "ok"
    finally:
        subprocess.run(["chattr", "-i", str(stuck)], check=False)
    (helper.mount / "a").write_text("3", encoding="utf-8")
    assert helper.run("sync").returncode == 0
    assert helper.snapshots() == [helper.current]


@pytest.mark.parametrize("setup, words", [
    (lambda h: h.fake(mount_point=False), "is not a mount point"),
    (lambda h: h.fake(fs_type="tmpfs"), "is in RAM"),
    (lambda h: shutil.rmtree(h.backing), "is missing"),
    (lambda h: (h.backing.rmdir(), (h.root / "elsewhere").mkdir(), h.backing.symlink_to(h.root / "elsewhere")),
     "is a symbolic link"),
])
def test_refuses_where_it_would_do_harm(helper, setup, words):
    fill(helper.mount, {"a": "1"})
    setup(helper)
    for command in ("sync", "restore"):
        result = helper.run(command)
        assert result.returncode == 1 and words in result.stderr, result.stderr
    assert not helper.backing.exists() or helper.entries() == []
    assert not (helper.root / "elsewhere").exists() or os.listdir(helper.root / "elsewhere") == []


@pytest.mark.parametrize("args, words", [(["sync", "../x"], "is not a token"), (["sync", "nope"], "is missing"),
                                         (["dump", TOKEN], "usage"), (["restore-back", "0", TOKEN], "1 or more"),
                                         (["return", TOKEN], "usage")])
def test_bad_arguments(helper, args, words):
    result = helper.run(*args) if len(args) != 2 else helper.run(args[0], token=args[1])
    assert result.returncode == (1 if words == "is missing" else 2) and words in result.stderr, result.stderr


def test_the_conf_is_read_never_run(helper):
    """The conf was sourced by a shell: a command in it ran as root. Now its values are parsed, and only read."""
    proof = helper.root / "ran"
    fill(helper.mount, {"a": "1"})
    helper.conf.write_text("MOUNT=%s\nBACKING=%s\ntouch %s\nKEEP=$(touch %s)\n"
                           % (helper.mount, helper.backing, proof, proof), encoding="utf-8")
    result = helper.run("sync")
    assert result.returncode == 0 and "is not a whole number" in result.stderr, result.stderr
    assert not proof.exists()


JOURNAL_FILES = {"journal/m1/system@s-1.journal": "closed", "journal/m1/system.journal": "open",
                 "journal/m1/user-1000.journal": "open", "journal/m1/system@s-0.journal~": "renamed by journald",
                 "syslog": "text", "apt/history.log": "text"}


def sync_while_held(helper, rel):
    """A sync while a process that stands in for journald (systemctl shows it as journald's MainPID) holds REL of
    the mount open."""
    with open(helper.mount / rel, encoding="utf-8") as held:
        with subprocess.Popen(["sleep", "60"], stdin=held) as holder:
            helper.stub("systemctl", "echo %d" % holder.pid)
            try:
                return helper.run("sync")
            finally:
                holder.kill()


@pytest.mark.parametrize("first", [True, False])
def test_the_files_journald_writes_are_closed_first_and_left_out(helper, first):
    """journald's part is stood in for: a process that holds the active files open (its MainPID, as systemctl
    shows it), and a journalctl that records its calls. The rest is the helper's own doing."""
    if not first:
        # journald's directory is there from the start (its files are made in it later).
        first_sync(helper, {"syslog": "text", "journal/m1/system@s-0.journal": "closed"})
    fill(helper.mount, JOURNAL_FILES)
    calls = helper.root / "journalctl.calls"
    helper.stub("journalctl", 'echo "$*" >>%s' % calls)
    result = sync_while_held(helper, "journal/m1/system.journal")
    assert result.returncode == 0, result.stderr
    assert calls.read_text(encoding="utf-8").splitlines() == ["--sync", "--rotate"]
    copied = set(tree(helper.backing / "current"))
    assert {"journal/m1/system@s-1.journal", "journal/m1/system@s-0.journal~", "syslog", "apt/history.log"} <= copied
    assert not {"journal/m1/system.journal", "journal/m1/user-1000.journal"} & copied


@pytest.mark.parametrize("pid", ["0", ""])
def test_once_journald_left_the_mount_every_journal_file_is_copied(helper, pid):
    """At shutdown journald has left the mount (journalctl --smart-relinquish-var): nothing is open there."""
    fill(helper.mount, JOURNAL_FILES)
    calls = helper.root / "journalctl.calls"
    helper.stub("journalctl", 'echo "$*" >>%s' % calls)
    helper.stub("systemctl", "echo %s" % pid)
    result = helper.run("sync")
    assert result.returncode == 0, result.stderr
    assert not calls.exists()
    assert tree(helper.backing / "current") == tree(helper.mount)


def test_a_journald_that_does_not_rotate_fails_the_sync(helper):
    fill(helper.mount, JOURNAL_FILES)
    helper.stub("journalctl", "exit 1")
    result = sync_while_held(helper, "journal/m1/system.journal")
    assert result.returncode == 1
    assert "journalctl --rotate failed, so the journal files journald writes in" in result.stderr
    assert helper.current is None and helper.status()["RESULT"] == "failed"


# STOP_SERVICES: systemctl is stood in for by a script that keeps each unit's state in a file, logs each call, and
# says the system is running or stopping as the test sets. The sync is held at the engine's kill point after its
# plan (SIGSTOP), where the test reads the units' states and lets it go on, stops it or kills it.

SYSTEMCTL = r"""#!/bin/sh
units=%(units)s
echo "$*" >>%(units)s/log
case $1 in
  is-system-running) cat %(units)s/system; exit 0 ;;
  show) shift 5; cat "$units/$1" 2>/dev/null || echo inactive; exit 0 ;;
  stop|start) verb=$1; shift; while [ "$1" != -- ]; do shift; done; shift
    for unit; do
      if [ "$verb" = start ] && [ -e "$units/$unit.broken" ]; then echo "Job for $unit failed" >&2; exit 1; fi
      if [ "$verb" = start ]; then echo active >"$units/$unit"; else echo inactive >"$units/$unit"; fi
    done ;;
esac
"""


class Services(object):
    """The stood-in systemctl of HELPER, with UNITS in their states (active or inactive)."""

    def __init__(self, helper, **units):
        self.helper = helper
        self.dir = helper.root / "units"
        self.dir.mkdir()
        (self.dir / "system").write_text("running\n", encoding="utf-8")
        (self.dir / "log").write_text("", encoding="utf-8")
        for unit, state in units.items():
            self.set(unit, state)
        (helper.bin / "systemctl").write_text(SYSTEMCTL % {"units": self.dir}, encoding="utf-8")
        (helper.bin / "systemctl").chmod(0o755)
        helper.configure(services=" ".join(units), stop=True)

    def set(self, unit, state):
        (self.dir / unit).write_text(state + "\n", encoding="utf-8")

    def state(self, unit):
        return (self.dir / unit).read_text(encoding="utf-8").strip()

    def states(self):
        return [self.state(name) for name in sorted(os.listdir(self.dir)) if name.endswith(".service")]

    def calls(self, verb):
        return [line.split(" -- ", 1)[1] for line in (self.dir / "log").read_text(encoding="utf-8").splitlines()
                if line.startswith(verb + " ")]


def full_status(helper):
    from ansible_collections.ramdisk.provision.plugins.module_utils._metrics import parse_shell_vars
    return parse_shell_vars((helper.root / "status" / ("%s.status" % TOKEN)).read_text(encoding="utf-8"))


def test_a_sync_copies_with_the_services_stopped_and_starts_them_again(helper):
    services = Services(helper, **{"db.service": "active", "stopped-by-admin.service": "inactive"})
    before = first_sync(helper, {"PG_VERSION": "15\n"})[0]
    assert services.calls("stop") == services.calls("start") == ["db.service"]
    (helper.mount / "base").write_text("rows", encoding="utf-8")
    run = helper.held("planned")
    # The copy runs with the database stopped; the unit an admin stopped was not touched.
    assert services.states() == ["inactive", "inactive"]
    code, err = resume(run)
    assert code == 0, err
    assert services.calls("stop")[-1] == "db.service" and services.calls("start")[-1] == "db.service"
    assert "stopped-by-admin.service" not in " ".join(services.calls("stop") + services.calls("start"))
    # A stop queued meanwhile (an admin's, a shutdown's) is never reversed into a start.
    assert "start --job-mode=fail -- db.service" in (services.dir / "log").read_text(encoding="utf-8").splitlines()
    assert services.state("db.service") == "active" and services.state("stopped-by-admin.service") == "inactive"
    assert (helper.backing / "current" / "base").read_text(encoding="utf-8") == "rows" and helper.current == before[0]
    status = full_status(helper)
    assert (status["RESULT"], status["SERVICES_STOPPED"], status["SERVICES_LEFT_DOWN"]) == ("ok", "db.service", "")
    assert 0 < float(status["SERVICES_DOWN_SECONDS"]) < float(status["FINISHED"]) - float(status["STARTED"])
    assert not (helper.state / ("%s.stopped" % TOKEN)).exists()


def test_without_stop_services_nothing_is_stopped(helper):
    services = Services(helper, **{"db.service": "active"})
    helper.configure(services="db.service", stop=False)
    fill(helper.mount, {"a": "1"})
    assert helper.run("sync").returncode == 0
    assert services.calls("stop") == services.calls("start") == []
    assert "SERVICES_STOPPED" not in full_status(helper)


def test_with_every_service_stopped_already_nothing_is_started(helper):
    """The stop-time sync: the persist unit stops after the services, so the sync finds them stopped."""
    services = Services(helper, **{"db.service": "inactive"})
    fill(helper.mount, {"a": "1"})
    assert helper.run("sync").returncode == 0
    assert services.calls("stop") == services.calls("start") == [] and services.state("db.service") == "inactive"


@pytest.mark.parametrize("how", ["copy fails", "TERM"])
def test_a_sync_that_fails_or_is_stopped_starts_the_services_again(helper, how):
    services = Services(helper, **{"db.service": "active"})
    before, last_ok = first_sync(helper, {"a": "1"})
    (helper.mount / "a").write_text("2", encoding="utf-8")
    run = helper.held("staged")
    if how == "copy fails":
        # The sync's record is taken from under it before its commit point: the sync fails, current unchanged.
        (helper.backing / ".persist-delta" / "commit.json.tmp").unlink()
    code, err = resume(run, signal.SIGTERM if how == "TERM" else None)
    assert code == (143 if how == "TERM" else 1), err
    assert (helper.current, tree(helper.backing / "current")) == before
    assert services.state("db.service") == "active" and services.calls("start")[-1] == "db.service"
    status = full_status(helper)
    expected = ("failed", last_ok, "db.service")
    assert (status["RESULT"], status["LAST_OK_SNAPSHOT"], status["SERVICES_STOPPED"]) == expected
    assert float(status["SERVICES_DOWN_SECONDS"]) > 0 and status["SERVICES_LEFT_DOWN"] == ""
    assert not (helper.state / ("%s.stopped" % TOKEN)).exists()


def test_a_sync_stopped_by_a_shutdown_leaves_the_services_stopped(helper):
    services = Services(helper, **{"db.service": "active"})
    before, last_ok = first_sync(helper, {"a": "1"})
    (helper.mount / "a").write_text("2", encoding="utf-8")
    starts = services.calls("start")
    run = helper.held("planned")
    (services.dir / "system").write_text("stopping\n", encoding="utf-8")
    code, err = resume(run, signal.SIGTERM)
    assert code == 143 and "shutting down: db.service stay stopped" in err, err
    assert services.state("db.service") == "inactive" and services.calls("start") == starts
    assert (helper.current, full_status(helper)["SERVICES_LEFT_DOWN"]) == (before[0], "db.service")
    assert full_status(helper)["LAST_OK_SNAPSHOT"] == last_ok


@pytest.mark.parametrize("then", ["resume", "sync"])
def test_a_sync_killed_outright_leaves_a_record_that_starts_the_services_again(helper, then):
    services = Services(helper, **{"db.service": "active", "app.service": "active"})
    first_sync(helper, {"a": "1"})
    starts = len(services.calls("start"))
    (helper.mount / "a").write_text("2", encoding="utf-8")
    run = helper.held("planned")
    os.killpg(run.pid, signal.SIGKILL)
    run.communicate(timeout=60)
    assert (services.state("db.service"), services.state("app.service")) == ("inactive", "inactive")
    record = helper.state / ("%s.stopped" % TOKEN)
    assert record.read_text(encoding="utf-8").split() == ["db.service", "app.service"]
    # What ExecStopPost runs after a KILL, or the next sync (which then stops them for its own copy again).
    result = helper.run(then)
    assert result.returncode == 0, result.stderr
    assert "a sync was killed while it held db.service app.service stopped" in result.stderr
    assert services.calls("start")[starts] == "db.service app.service"
    assert (services.state("db.service"), services.state("app.service")) == ("active", "active")
    assert not (helper.state / ("%s.stopped" % TOKEN)).exists()
    # Nothing left to start: a second resume does nothing.
    assert helper.run("resume").returncode == 0
    assert len(services.calls("start")) == starts + (1 if then == "resume" else 2)


def test_a_service_that_does_not_start_again_fails_the_unit_but_not_the_copy(helper):
    services = Services(helper, **{"db.service": "active"})
    first_sync(helper, {"a": "1"})
    (helper.mount / "a").write_text("2", encoding="utf-8")
    (services.dir / "db.service.broken").touch()
    result = helper.run("sync")
    assert result.returncode == 4, result.stderr
    assert "could not start db.service again after the copy" in result.stderr
    assert (helper.backing / "current" / "a").read_text(encoding="utf-8") == "2"
    status = full_status(helper)
    assert (status["RESULT"], status["EXIT"], status["SERVICES_LEFT_DOWN"]) == ("ok", "4", "db.service")
    assert status["LAST_OK_SNAPSHOT"] == helper.current


# A failed sync seen everywhere: the helper's status, the metrics collector it runs (the real one, _metrics.py), the
# ramdisk-status table and the alert rule fed the collector's own series; current stays on the last good copy.

METRICS = os.path.join(REPO_ROOT, "plugins", "module_utils", "_metrics.py")
RULES = os.path.join(REPO_ROOT, "files", "prometheus", "ramdisk-rules.yml")


def with_collector(helper):
    """The helper runs the real collector, its config pointed at the test's directories. Returns the config path."""
    config = helper.root / "metrics.json"
    config.write_text(json.dumps({
        "textfile_dir": str(helper.root / "textfile"), "state_file": str(helper.root / "peak.json"),
        "persist_conf_dir": str(helper.root / "conf"), "persist_status_dir": str(helper.root / "status"),
        "zram_conf_dir": str(helper.root / "none"), "policy_paths": [],
        "mounts": [{"path": str(helper.mount), "backend": "tmpfs", "purpose": "database"}]}), encoding="utf-8")
    (helper.root / "textfile").mkdir()
    (helper.root / "collector.py").write_text(
        "import runpy, sys\nsys.path.insert(0, %r)\nsys.argv = [%r, 'collect', '--config', %r]\n"
        "runpy.run_path(%r, run_name='__main__')\n" % (os.path.dirname(METRICS), METRICS, str(config), METRICS),
        encoding="utf-8")
    return config


def persist_samples(helper):
    """name -> value of the collector's ramdisk_persist_* samples of this mount."""
    found = {}
    for line in (helper.root / "textfile" / "ramdisk.prom").read_text(encoding="utf-8").splitlines():
        match = re.match(r'^(ramdisk_persist_\w+)\{backing="([^"]*)",path="([^"]*)"\} (\S+)$', line)
        if match and match.group(2) == str(helper.backing) and match.group(3) == str(helper.mount):
            found[match.group(1)] = float(match.group(4))
    return found


ALERTS = {
    "RamdiskPersistSyncFailed": (
        "The last sync of {path} to {backing} on h1 failed",
        "The persist helper's last attempt to copy {path} to disk failed or was refused (a full or read-only "
        "backing, or a mount that was not restored). The backing keeps its last complete copy."),
    "RamdiskPersistSyncRefused": (
        "The persist helper refused to sync {path} to {backing} on h1",
        "{path} is not the mount the persist helper restored (it was mounted again by hand, or never restored), or "
        "it holds nothing while the backing holds data: its contents are not written over the backing, and nothing "
        "written there since is kept on disk. See REASON in the helper's status and ramdisk-status; restart the "
        "persist unit to restore the mount from the backing."),
}


def alerts_on(helper, tmp_path, alert="RamdiskPersistSyncFailed"):
    """promtool's verdict on the rules with the collector's persist series held for 10 minutes: ALERT expected at
    5m (after its 1m of pending)."""
    labels = 'instance="h1",path="%s",backing="%s"' % (helper.mount, helper.backing)
    series = [{"series": "%s{%s}" % (name, labels), "values": "%gx10" % value}
              for name, value in sorted(persist_samples(helper).items())]
    summary, description = (text.format(path=helper.mount, backing=helper.backing) for text in ALERTS[alert])
    test = {"rule_files": [RULES], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series,
        "alert_rule_test": [{"eval_time": "5m", "alertname": alert, "exp_alerts": [{
            "exp_labels": {"severity": "critical", "instance": "h1", "path": str(helper.mount),
                           "backing": str(helper.backing)},
            "exp_annotations": {"summary": summary, "description": description}}]}]}]}
    path = tmp_path / ("%s.test.yml" % alert)
    path.write_text(json.dumps(test), encoding="utf-8")
    return subprocess.run(["promtool", "test", "rules", str(path)], capture_output=True, text=True, check=False)


def shows_failed_everywhere(helper, config, before, last_ok, tmp_path):
    # current: still the copy of the last good sync, whole, and nothing half-made beside it.
    assert (helper.current, tree(helper.backing / "current")) == before
    assert not [name for name in helper.entries() if name.startswith((".new-", ".current-"))]
    status = full_status(helper)
    assert (status["RESULT"], status["EXIT"], status["LAST_OK_SNAPSHOT"]) == ("failed", "1", last_ok)
    found = persist_samples(helper)
    assert found["ramdisk_persist_last_success"] == 0 and found["ramdisk_persist_last_exit_code"] == 1
    assert found["ramdisk_persist_copies"] == 1
    table = subprocess.run([sys.executable, METRICS, "status", "--config", str(config)], capture_output=True,
                           text=True, check=True).stdout
    assert re.search(r"^%s .*NOT MOUNTED; LAST SYNC FAILED, last copy \d+s ago \(wrote [^)]+\), 1 copy, to %s$"
                     % (re.escape(str(helper.mount)), re.escape(str(helper.backing))), table, re.M), table
    if shutil.which("promtool"):
        verdict = alerts_on(helper, tmp_path)
        assert verdict.returncode == 0, verdict.stdout + verdict.stderr


@needs_root
@pytest.mark.skipif(not all(shutil.which(tool) for tool in ("unshare", "mkfs.ext4")), reason="needs unshare, mkfs.ext4")
def test_a_sync_to_a_full_backing_shows_as_failed_everywhere(helper, tmp_path):
    """ENOSPC on a real disk file system: the backing is an ext4 of 4 MiB in a file, loop-mounted in a private mount
    namespace; the helper's own checks run on it (stat -f is not stood in for)."""
    config = with_collector(helper)
    helper.fake(fs_type=None)
    image = helper.root / "backing.ext4"
    subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", "-N", "256", str(image), "4M"], check=True,
                   capture_output=True)
    fill(helper.mount, {"PG_VERSION": "15\n", "base/1/1259": "r" * 4096})
    script = (
        'set -u; mount -o loop "$1" "$2" || exit 99; shift 2\n'
        '"$@" sync %(token)s; echo "first=$?"; readlink %(backing)s/current\n'
        'head -c 6291456 /dev/urandom > %(mount)s/big\n'
        '"$@" sync %(token)s 2>&1; echo "second=$?"\n'
        'tar -C %(backing)s -cf %(root)s/backing.tar .; umount %(backing)s\n'
        % {"token": TOKEN, "backing": helper.backing, "mount": helper.mount, "root": helper.root})
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", str(image),
                           str(helper.backing), str(helper.script)], env=helper.env(), capture_output=True, text=True,
                          check=False)
    if "first=" not in done.stdout:
        pytest.skip("no loop device here: %s" % done.stderr.strip())
    assert "first=0" in done.stdout and "second=1" in done.stdout, done.stdout + done.stderr
    assert "No space left on device" in done.stdout and "is unchanged" in done.stdout
    # The backing's state as the namespace left it, unpacked where the test's checks look.
    assert helper.entries() == []
    subprocess.run(["tar", "-C", str(helper.backing), "-xf", str(helper.root / "backing.tar")], check=True)
    first = done.stdout.split("first=0\n", 1)[1].split("\n", 1)[0]
    (helper.mount / "big").unlink()
    before = (first, tree(helper.backing / first))
    shows_failed_everywhere(helper, config, before, first, tmp_path)


def test_services_a_stopped_sync_could_not_start_are_left_to_resume(helper):
    """systemd's TERM reaches what the stopped sync starts too; then ExecStopPost (persist resume) starts them."""
    services = Services(helper, **{"db.service": "active"})
    first_sync(helper, {"a": "1"})
    (helper.mount / "a").write_text("2", encoding="utf-8")
    run = helper.held("planned")
    (services.dir / "db.service.broken").touch()
    code, _err = resume(run, signal.SIGTERM)
    assert code == 143 and services.state("db.service") == "inactive"
    assert (helper.state / ("%s.stopped" % TOKEN)).exists()
    assert full_status(helper)["SERVICES_LEFT_DOWN"] == "db.service"
    (services.dir / "db.service.broken").unlink()
    result = helper.run("resume")
    assert result.returncode == 0 and "a sync was killed while it held db.service stopped" in result.stderr
    assert services.state("db.service") == "active" and not (helper.state / ("%s.stopped" % TOKEN)).exists()
    status = full_status(helper)
    assert (status["RESULT"], status["SERVICES_LEFT_DOWN"]) == ("failed", "")
    # Nothing recorded: resume does nothing, and leaves the status as it is.
    assert helper.run("resume").returncode == 0 and full_status(helper) == status


def next_boot(helper):
    """A power cut and a boot: the RAM mount empty again, /run's state gone."""
    shutil.rmtree(helper.mount)
    helper.mount.mkdir()
    shutil.rmtree(helper.state, ignore_errors=True)


def a_boot_then_a_sync_cut_short(helper, step):
    """A first copy of the mount, then a boot that adds its own directory and changes a file, and whose sync is
    killed at the engine's STEP. Returns (the tree before that boot, the tree of its sync)."""
    fill(helper.mount, {"a": "1", "b": "2", "d/c": "3"})
    assert helper.run("sync").returncode == 0
    before = tree(helper.mount)
    (helper.mount / "a").write_text("one", encoding="utf-8")
    (helper.mount / "b").unlink()
    fill(helper.mount, {"64a55898/%06d" % seq: "marker %d" % seq for seq in range(1, 33)})
    after = tree(helper.mount)
    killed = helper.run("sync", env={"PERSIST_DELTA_KILL_AT": step})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    return before, after


# The CI power cut (tests/powercut): a sync cut after its commit point, the next boot's restore cut, then a boot
# whose restore filled the mount with the cut sync's directory while current, still waiting for its roll-forward,
# had none ("Only in /srv/markers/: 64a55898"). The restore's own kill points are those of its roll-forward.
@needs_root
@pytest.mark.parametrize("sync_step", ["staged", "committed", "apply:2", "applied", "recorded"])
@pytest.mark.parametrize("restore_step", ["", "apply:1", "applied"])
def test_after_a_sync_and_a_restore_cut_short_the_restored_mount_is_current(helper, sync_step, restore_step):
    before, after = a_boot_then_a_sync_cut_short(helper, sync_step)
    expected = before if sync_step == "staged" else after
    next_boot(helper)
    result = helper.run("restore", env={"PERSIST_DELTA_KILL_AT": restore_step})
    if restore_step and sync_step not in ("staged", "recorded"):
        assert result.returncode == -signal.SIGKILL, result.stderr
    next_boot(helper)
    result = helper.run("restore")
    assert result.returncode == 0, result.stderr
    assert tree(helper.mount) == expected
    # What the power-cut test's check compares: the restored mount is the backing's current copy, whole.
    assert tree(helper.backing / "current") == expected
    assert not (helper.backing / ".persist-delta" / "commit.json").exists()
    # The next sync finds nothing to write but the new boot's own changes.
    fill(helper.mount, {"63c9f3ad/000001": "marker 1"})
    result = helper.run("sync")
    assert result.returncode == 0, result.stderr
    assert tree(helper.backing / "current") == tree(helper.mount)


@needs_unshare
def test_a_restore_rolls_forward_or_when_it_cannot_write_the_backing_applies_the_record_to_its_copy(helper):
    """A sync killed after its commit point leaves current half-way. The restore at the next boot finishes it in the
    backing first, so that the mount is current; a backing it cannot write (read-only here; full alike) does not
    keep the data from the mount: the record is applied to the RAM copy alone, and the next sync rolls forward."""
    _before, after = a_boot_then_a_sync_cut_short(helper, "apply:2")
    assert (helper.backing / ".persist-delta" / "commit.json").exists()
    assert tree(helper.backing / "current") != after
    next_boot(helper)
    backing, _problems = tree_digest(str(helper.backing))
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                           'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" || exit 99; "$2" restore "$3"',
                           "sh", str(helper.backing), str(helper.script), TOKEN],
                          env=helper.env(), capture_output=True, text=True, check=False)
    if done.returncode == 99:
        pytest.skip("no read-only bind mount here: %s" % done.stderr.strip())
    assert done.returncode == 0, done.stderr
    assert "could not roll" in done.stderr and "applied to the copy" in done.stderr, done.stderr
    assert tree(helper.mount) == after
    assert tree_digest(str(helper.backing))[0] == backing
    # Writable again: the next restore (another boot) rolls forward, and then the mount is current.
    next_boot(helper)
    result = helper.run("restore")
    assert result.returncode == 0, result.stderr
    assert "rolled" in result.stderr and "forward" in result.stderr, result.stderr
    assert not (helper.backing / ".persist-delta" / "commit.json").exists()
    assert tree(helper.mount) == tree(helper.backing / "current") == after


def test_a_sync_holds_the_services_stopped_until_the_changes_are_on_disk(helper):
    services = Services(helper, **{"db.service": "active"})
    fill(helper.mount, {"PG_VERSION": "15\n"})
    assert helper.run("sync").returncode == 0
    first = helper.current
    (helper.mount / "base").write_text("rows", encoding="utf-8")
    run = helper.held("committed")
    assert services.state("db.service") == "inactive"
    code, err = resume(run)
    assert code == 0, err
    assert services.calls("stop")[-1] == services.calls("start")[-1] == "db.service"
    assert services.state("db.service") == "active"
    assert helper.current == first and (helper.backing / "current" / "base").read_text(encoding="utf-8") == "rows"
    status = full_status(helper)
    assert (status["RESULT"], status["COPY_TOOL"], status["SERVICES_STOPPED"]) == ("ok", "persist-delta", "db.service")


def test_the_program_is_standalone_and_names_its_places():
    """On the host it runs alone: the standard library and persist-delta.py beside it, whose path PLACES gives."""
    with open(PROGRAM, encoding="utf-8") as handle:
        text = handle.read()
    imports = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            imports.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imports.add(node.module)
    standard = {"ctypes", "errno", "fcntl", "importlib.util", "json", "os", "re", "secrets", "shlex", "signal", "stat",
                "subprocess", "sys", "time"}
    assert imports - {"__future__"} <= standard | {"ansible_collections.ramdisk.provision.plugins.module_utils"}
    assert program.PLACES["engine"].endswith("/persist-delta.py")


# A real mount in a private mount namespace: what the kernel says of the mount, not a stand-in.

NAMESPACE = """set -u
mount -t tmpfs ramdisk-test "$MOUNT" || exit 99
"""


def in_namespace(helper, script):
    """SCRIPT run by sh in a private mount namespace, with a tmpfs at the mount; the helper as "$P", the real
    mount-point check. Returns its output (stdout and stderr)."""
    helper.fake(mount_point=None)
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", NAMESPACE + script],
                          env=dict(helper.env(), P=str(helper.script), MOUNT=str(helper.mount),
                                   BACKING=str(helper.backing), T=TOKEN),
                          capture_output=True, text=True, check=False)
    if done.returncode == 99:
        pytest.skip("no private tmpfs here: %s" % done.stderr.strip())
    return done.stdout + done.stderr


@needs_unshare
def test_a_remount_at_the_path_is_refused_not_synced(helper):
    """Issue 41: the kernel reuses mount IDs and device numbers, so a tmpfs mounted again at the path was taken for
    the restored one and its (nearly empty) contents synced over the backing."""
    out = in_namespace(helper, """
for n in $(seq 200); do echo "$n" > "$MOUNT/f$n"; done
"$P" sync "$T"; echo "first=$?"
umount "$MOUNT"; mount -t tmpfs ramdisk-test "$MOUNT"; echo one > "$MOUNT/only"
"$P" sync "$T"; echo "after-remount=$?"
ls "$BACKING/current" | wc -l | sed 's/^/files=/'
rm "$MOUNT/only"; "$P" restore "$T"; echo "restore=$?"
echo 201 > "$MOUNT/f201"; "$P" sync "$T"; echo "after-restore=$?"
ls "$BACKING/current" | wc -l | sed 's/^/files=/'
""")
    assert "first=0" in out and "after-remount=3" in out, out
    assert "files=200" in out and "restore=0" in out and "after-restore=0" in out and "files=201" in out, out
    status = helper.status()
    assert status["RESULT"] == "ok" and status["IDENTITY"] == "unique"


@needs_unshare
def test_a_remount_is_refused_in_the_status_and_the_metrics(helper, tmp_path):
    config = with_collector(helper)
    out = in_namespace(helper, """
echo data > "$MOUNT/a"; "$P" sync "$T"; echo "first=$?"
umount "$MOUNT"; mount -t tmpfs ramdisk-test "$MOUNT"; echo x > "$MOUNT/b"
"$P" sync "$T"; echo "second=$?"
""")
    assert "first=0" in out and "second=3" in out, out
    status = full_status(helper)
    assert status["RESULT"] == "refused" and "was not restored" in status["REASON"]
    found = persist_samples(helper)
    assert found["ramdisk_persist_last_success"] == 0 and found["ramdisk_persist_last_refused"] == 1
    table = subprocess.run([sys.executable, METRICS, "status", "--config", str(config)], capture_output=True,
                           text=True, check=True).stdout
    assert "LAST SYNC REFUSED" in table, table
    if shutil.which("promtool"):
        verdict = alerts_on(helper, tmp_path, "RamdiskPersistSyncRefused")
        assert verdict.returncode == 0, verdict.stdout + verdict.stderr


@needs_unshare
def test_a_file_system_mounted_inside_is_skipped_and_named(helper):
    """Issue 41: a tmpfs mounted inside a persisted mount made every later sync fail for good."""
    out = in_namespace(helper, """
echo 1 > "$MOUNT/a"; mkdir "$MOUNT/inner"; "$P" sync "$T"; echo "first=$?"
mount -t tmpfs inner "$MOUNT/inner"; echo secret > "$MOUNT/inner/f"; echo 2 > "$MOUNT/b"
"$P" sync "$T"; echo "second=$?"
ls -A "$BACKING/current" "$BACKING/current/inner"
""")
    assert "first=0" in out and "second=0" in out, out
    assert "left out the file systems mounted inside" in out
    status = full_status(helper)
    assert status["RESULT"] == "ok" and json.loads(status["SKIPPED_MOUNTS"]) == ["inner"]
    assert (helper.backing / "current" / "b").exists() and not (helper.backing / "current" / "inner" / "f").exists()


@needs_unshare
def test_a_first_copy_skips_a_file_system_mounted_inside(helper):
    out = in_namespace(helper, """
echo 1 > "$MOUNT/a"; mkdir "$MOUNT/inner"; mount -t tmpfs inner "$MOUNT/inner"; echo secret > "$MOUNT/inner/f"
"$P" sync "$T"; echo "first=$?"
""")
    assert "first=0" in out, out
    assert json.loads(full_status(helper)["SKIPPED_MOUNTS"]) == ["inner"]
    inner = helper.backing / "current" / "inner"
    assert not inner.is_dir() or not os.listdir(inner)
