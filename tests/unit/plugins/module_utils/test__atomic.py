# SPDX-License-Identifier: GPL-3.0-or-later
"""write_file: a system file is replaced whole or left as it was, on real files, a real full tmpfs and a real
file mounted over the target."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap

import pytest

from ansible_collections.ramdisk.provision.plugins.module_utils import _atomic
from ansible_collections.ramdisk.provision.plugins.module_utils._atomic import (
    AtomicWriteError,
    fsync_dir,
    remove_file,
    write_file,
)

OLD = "# /etc/fstab\nUUID=1234 / ext4 defaults 0 1\n"
NEW = OLD + "tmpfs /var/cache/app tmpfs size=1G,mode=0755 0 0\n"
ROOT = os.geteuid() == 0


def leftovers(directory):
    return sorted(name for name in os.listdir(directory) if _atomic.TEMP_INFIX in name)


@pytest.fixture
def fstab(tmp_path):
    path = tmp_path / "fstab"
    path.write_text(OLD)
    os.chmod(path, 0o640)
    return path


REPLACE = [
    # (data written, bytes expected)
    (NEW, NEW.encode()),
    (NEW.encode(), NEW.encode()),
    ("", b""),
    ("caf\u00e9 \\040\n", "caf\u00e9 \\040\n".encode()),
    (b"\x00\xff binary\n", b"\x00\xff binary\n"),
]


@pytest.mark.parametrize("data, expected", REPLACE)
def test_content_replaced_mode_kept(fstab, data, expected):
    before = os.stat(fstab)
    assert write_file(str(fstab), data) is True
    after = os.stat(fstab)
    assert fstab.read_bytes() == expected
    assert stat.S_IMODE(after.st_mode) == 0o640
    assert (after.st_uid, after.st_gid) == (before.st_uid, before.st_gid)
    # A new inode: the old file was renamed over, not rewritten.
    assert after.st_ino != before.st_ino
    assert leftovers(fstab.parent) == []


@pytest.mark.skipif(not ROOT, reason="chown to another user needs root")
def test_owner_and_group_kept(fstab):
    os.chown(fstab, 4321, 4322)
    assert write_file(str(fstab), NEW) is True
    after = os.stat(fstab)
    assert (after.st_uid, after.st_gid, stat.S_IMODE(after.st_mode)) == (4321, 4322, 0o640)


@pytest.mark.skipif(not ROOT, reason="chown to another user needs root")
def test_owner_given_wins(fstab):
    assert write_file(str(fstab), NEW, owner=4321, group="0") is True
    after = os.stat(fstab)
    assert (after.st_uid, after.st_gid) == (4321, 0)


MODES = [
    # (mode given, mode expected)
    (0o644, 0o644),
    (0o600, 0o600),
    (0o4755, 0o4755),
    (None, 0o640),
]


@pytest.mark.parametrize("mode, expected", MODES)
def test_mode_given_wins(fstab, mode, expected):
    assert write_file(str(fstab), NEW, mode=mode) is True
    assert stat.S_IMODE(os.stat(fstab).st_mode) == expected


def test_new_file_gets_umask_mode(tmp_path):
    path = tmp_path / "new.conf"
    old_umask = os.umask(0o027)
    try:
        assert write_file(str(path), "x\n") is True
    finally:
        os.umask(old_umask)
    assert path.read_text() == "x\n"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640


def test_unchanged_writes_nothing(fstab):
    before = os.stat(fstab)
    assert write_file(str(fstab), OLD) is False
    assert write_file(str(fstab), OLD.encode(), mode=0o640) is False
    after = os.stat(fstab)
    assert (after.st_ino, after.st_mtime_ns, after.st_ctime_ns) == (before.st_ino, before.st_mtime_ns,
                                                                    before.st_ctime_ns)


def test_same_content_other_mode_changes_in_place(fstab):
    before = os.stat(fstab)
    assert write_file(str(fstab), OLD, mode=0o644) is True
    after = os.stat(fstab)
    assert after.st_ino == before.st_ino
    assert stat.S_IMODE(after.st_mode) == 0o644
    assert fstab.read_text() == OLD


def test_symlink_is_followed(tmp_path, fstab):
    link = tmp_path / "link"
    link.symlink_to(fstab.name)
    assert write_file(str(link), NEW) is True
    assert link.is_symlink()
    assert fstab.read_text() == NEW


def test_directory_refused(tmp_path):
    with pytest.raises(AtomicWriteError, match=r"not a regular file\. .* is unchanged\.$"):
        write_file(str(tmp_path), NEW)


def fail_with(err, name):
    def failing(*args, **kwargs):
        raise OSError(err, os.strerror(err))
    failing.__name__ = name
    return failing


FAILURES = [
    # (os function that fails, errno, words the message must hold)
    ("write", errno.ENOSPC, "writing the temporary file .* is full; free space there and run again"),
    ("fsync", errno.ENOSPC, "syncing the temporary file .* is full"),
    ("write", errno.EDQUOT, "disk quota"),
    ("fsync", errno.EIO, "syncing the temporary file .*Input/output error"),
    ("rename", errno.ENOSPC, "rename failed.* is full"),
    ("fchmod", errno.EPERM, "setting owner and mode of the temporary file"),
]


@pytest.mark.parametrize("function, err, words", FAILURES)
def test_failure_before_rename_keeps_old_file(monkeypatch, fstab, function, err, words):
    monkeypatch.setattr(_atomic.os, function, fail_with(err, function))
    with pytest.raises(AtomicWriteError) as caught:
        write_file(str(fstab), NEW)
    monkeypatch.undo()
    message = str(caught.value)
    assert caught.value.errno == err
    assert str(fstab) in message
    assert re.search(words, message), message
    assert message.endswith("%s is unchanged." % fstab)
    assert fstab.read_text() == OLD
    assert leftovers(fstab.parent) == []


def test_read_only_directory_message(monkeypatch, fstab):
    real_open = os.open

    def read_only(path, flags, *args):
        if flags & os.O_EXCL:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        return real_open(path, flags, *args)

    monkeypatch.setattr(_atomic.os, "open", read_only)
    with pytest.raises(AtomicWriteError, match=r"holding %s is read-only; remount it read-write.* %s is unchanged\.$"
                       % (fstab.parent, fstab)):
        write_file(str(fstab), NEW)


def test_selinux_label_copied(monkeypatch, fstab):
    label = b"system_u:object_r:etc_t:s0\x00"
    copied = []
    monkeypatch.setattr(_atomic.os, "getxattr", lambda path, name, follow_symlinks=True: label)
    monkeypatch.setattr(_atomic.os, "setxattr", lambda fd, name, value: copied.append((name, value)))
    assert write_file(str(fstab), NEW) is True
    assert copied == [("security.selinux", label)]


@pytest.mark.parametrize("err", [errno.ENODATA, errno.ENOTSUP])
def test_no_selinux_label_is_fine(monkeypatch, fstab, err):
    monkeypatch.setattr(_atomic.os, "getxattr", fail_with(err, "getxattr"))
    assert write_file(str(fstab), NEW) is True
    assert fstab.read_text() == NEW


def test_remove_file(fstab):
    assert remove_file(str(fstab)) is True
    assert not fstab.exists()
    assert remove_file(str(fstab)) is False


def test_fsync_dir(tmp_path, fstab):
    fsync_dir(str(tmp_path))
    with pytest.raises(NotADirectoryError):
        fsync_dir(str(fstab))


def can_unshare():
    if not ROOT or not shutil.which("unshare") or not shutil.which("mount"):
        return False
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True,
                           check=False)
    return probe.returncode == 0


needs_namespace = pytest.mark.skipif(not can_unshare(), reason="needs root and a private mount namespace")


def run_in_namespace(script, *args):
    """Run SCRIPT with python in a private mount namespace, which takes its mounts with it when it ends."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable, "-c",
                           textwrap.dedent(script), *args], capture_output=True, text=True, env=env, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


FULL_DISK = """
    import errno, json, os, subprocess, sys
    from ansible_collections.ramdisk.provision.plugins.module_utils._atomic import AtomicWriteError, write_file

    top = sys.argv[1]
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", top], check=True)
    fstab = os.path.join(top, "fstab")
    old = ("# 1000 bytes\\n" + "tmpfs /mnt/x tmpfs defaults 0 0\\n" * 40)[:999] + "\\n"
    with open(fstab, "w") as handle:
        handle.write(old)
    fd = os.open(os.path.join(top, "filler"), os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"x" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc
    os.close(fd)
    result = {"old_size": len(old)}
    try:
        write_file(fstab, old * 4)
        result["error"] = None
    except AtomicWriteError as exc:
        result["error"], result["errno"] = str(exc), exc.errno
    with open(fstab) as handle:
        result["intact"] = handle.read() == old
    result["names"] = sorted(os.listdir(top))
    os.unlink(os.path.join(top, "filler"))
    result["after_free"] = write_file(fstab, old * 4)
    with open(fstab) as handle:
        result["new_size"] = len(handle.read())
    print(json.dumps(result))
"""


@needs_namespace
def test_real_full_tmpfs_keeps_old_file(tmp_path):
    top = tmp_path / "small"
    top.mkdir()
    result = run_in_namespace(FULL_DISK, str(top))
    fstab = str(top / "fstab")
    assert result["old_size"] == 1000
    assert result["errno"] == errno.ENOSPC
    assert "The file system holding %s is full" % top in result["error"], result["error"]
    assert result["error"].endswith("%s is unchanged." % fstab)
    assert result["intact"] is True
    assert result["names"] == ["filler", "fstab"]
    # With room again the same write goes through: the failure was the full disk.
    assert (result["after_free"], result["new_size"]) == (True, 4000)


BOUND = """
    import json, os, subprocess, sys
    from ansible_collections.ramdisk.provision.plugins.module_utils._atomic import AtomicWriteError, write_file

    fstab, other = sys.argv[1], sys.argv[2]
    subprocess.run(["mount", "--bind", other, fstab], check=True)
    result = {}
    try:
        write_file(fstab, "new text\\n")
        result["error"] = None
    except AtomicWriteError as exc:
        result["error"], result["errno"] = str(exc), exc.errno
    with open(fstab) as handle:
        result["seen"] = handle.read()
    result["names"] = sorted(os.listdir(os.path.dirname(fstab)))
    print(json.dumps(result))
"""


@needs_namespace
def test_mount_point_refused(tmp_path, fstab):
    other = tmp_path / "other"
    other.write_text("bound text\n")
    result = run_in_namespace(BOUND, str(fstab), str(other))
    assert result["errno"] == errno.EBUSY
    assert "it is a mount point" in result["error"]
    assert "cannot be replaced atomically" in result["error"]
    assert result["error"].endswith("%s is unchanged." % fstab)
    assert result["seen"] == "bound text\n"
    assert result["names"] == ["fstab", "other"]
    assert fstab.read_text() == OLD
    assert other.read_text() == "bound text\n"
