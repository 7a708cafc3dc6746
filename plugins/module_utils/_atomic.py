# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Replace a system file whole or not at all: a temporary file beside it, fsync, rename, fsync the directory.

A file rewritten in place (open(path, 'w'), as ansible.posix.mount does with /etc/fstab) is empty from the
open until the write ends, and stays empty when the disk is full or the process dies. Here the old file is
untouched until one rename swaps in a complete copy that already carries its mode, owner and SELinux label.
"""

from __future__ import annotations

import errno
import grp
import os
import pwd
import stat

SELINUX_XATTR = "security.selinux"
TEMP_INFIX = ".ramdisk-"
# Errors that mean the file system cannot take the new copy, not that something is wrong with the file.
_NO_ROOM = {
    errno.ENOSPC: "the file system holding %s is full; free space there and run again",
    errno.EDQUOT: "the disk quota on the file system holding %s is used up; free space there and run again",
    errno.EROFS: "the file system holding %s is read-only; remount it read-write and run again",
}
_NO_XATTR = {errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENODATA}


class AtomicWriteError(OSError):
    """A file could not be replaced; the message says which, what failed, and whether the old one is intact."""

    def __init__(self, message, path, err=None, step=None):
        super().__init__(message)
        self.errno = err
        self.path = path
        self.step = step


def fsync_dir(path):
    """Make a rename or unlink in the directory PATH durable. The one the collection's modules use; the persist helper
    and its engine (_persist_helper.py, _persist_delta.py) keep their own, as they run on the host on their own, with
    Python's standard library alone."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _uid(owner):
    if owner is None or isinstance(owner, int):
        return owner
    return int(owner) if owner.isdigit() else pwd.getpwnam(owner).pw_uid


def _gid(group):
    if group is None or isinstance(group, int):
        return group
    return int(group) if group.isdigit() else grp.getgrnam(group).gr_gid


def _default_mode():
    # What open() would give a new file: 0666 less the umask, which can only be read by setting it.
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def _failure(path, step, exc, replaced=False, verb="write"):
    err = exc.errno
    reason = exc.strerror or str(exc)
    text = "cannot %s %s: %s failed: %s." % (verb, path, step, reason)
    if err in _NO_ROOM:
        advice = _NO_ROOM[err] % (os.path.dirname(path) or ".")
        text += " %s%s." % (advice[0].upper(), advice[1:])
    if err == errno.EBUSY and step == "rename":
        text = ("cannot write %s: it is a mount point (a file or directory is mounted over it), so it cannot be "
                "replaced atomically; unmount it (umount %s) or change the file mounted there." % (path, path))
    if replaced:
        text = ("%s was replaced, but syncing its directory failed: %s; the change may not survive a power cut."
                % (path, reason))
    else:
        text += " %s is unchanged." % path
    return AtomicWriteError(text, path, err, step)


def _read_selinux(path):
    try:
        return os.getxattr(path, SELINUX_XATTR, follow_symlinks=True)
    except OSError as exc:
        if exc.errno in _NO_XATTR:
            return None
        raise


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def write_file(path, data, mode=None, owner=None, group=None):
    """Make PATH hold DATA (str, written as UTF-8, or bytes); return whether anything changed.

    MODE, OWNER and GROUP (a name or a number) default to those of the existing file, else 0666 less the umask
    and the caller. A symlink is followed: the file it names is replaced, the link stays. Raises AtomicWriteError;
    up to the rename the old file is untouched, and the message ends "<path> is unchanged."
    """
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    path = os.path.realpath(path) if os.path.islink(path) else path
    directory = os.path.dirname(path) or "."
    step = "reading the current file"
    try:
        uid, gid = _uid(owner), _gid(group)
        try:
            current = os.stat(path)
        except FileNotFoundError:
            current = None
        if current is not None and not stat.S_ISREG(current.st_mode):
            raise AtomicWriteError("cannot write %s: it is not a regular file. %s is unchanged." % (path, path),
                                   path, errno.EISDIR if stat.S_ISDIR(current.st_mode) else errno.EINVAL, step)
        if current is not None:
            want_mode = stat.S_IMODE(current.st_mode) if mode is None else mode
            want_uid = current.st_uid if uid is None else uid
            want_gid = current.st_gid if gid is None else gid
            with open(path, "rb") as old:
                same_content = old.read() == data
            if same_content:
                now = (stat.S_IMODE(current.st_mode), current.st_uid, current.st_gid)
                if (want_mode, want_uid, want_gid) == now:
                    return False
                # Only the metadata differs: changing it in place is already atomic.
                step = "setting owner and mode"
                os.chown(path, want_uid, want_gid)
                os.chmod(path, want_mode)
                return True
            label = _read_selinux(path)
        else:
            want_mode = _default_mode() if mode is None else mode
            want_uid, want_gid, label = uid, gid, None
    except KeyError as exc:
        raise AtomicWriteError("cannot write %s: no such user or group %s. %s is unchanged." % (path, exc, path),
                               path, errno.EINVAL, "looking up owner") from None
    except AtomicWriteError:
        raise
    except OSError as exc:
        raise _failure(path, step, exc) from exc

    temp = None
    fd = None
    try:
        step = "creating a temporary file in %s" % directory
        for attempt in range(100):
            temp = os.path.join(directory, ".%s%s%d.%d" % (os.path.basename(path), TEMP_INFIX, os.getpid(),
                                                           attempt))
            try:
                fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
                break
            except FileExistsError:
                temp = None
        if fd is None:
            raise OSError(errno.EEXIST, "100 temporary files named .%s%s* are in the way"
                          % (os.path.basename(path), TEMP_INFIX))
        step = "writing the temporary file %s" % temp
        _write_all(fd, data)
        step = "syncing the temporary file %s" % temp
        os.fsync(fd)
        step = "setting owner and mode of the temporary file %s" % temp
        here = os.fstat(fd)
        if (want_uid is not None and want_uid != here.st_uid) or (want_gid is not None and want_gid != here.st_gid):
            os.fchown(fd, -1 if want_uid is None else want_uid, -1 if want_gid is None else want_gid)
        # After the chown, which may clear set-id bits.
        os.fchmod(fd, want_mode)
        if label is not None:
            step = "copying the SELinux label to the temporary file %s" % temp
            try:
                os.setxattr(fd, SELINUX_XATTR, label)
            except OSError as exc:
                if exc.errno not in _NO_XATTR:
                    raise
        os.close(fd)
        fd = None
        step = "rename"
        os.rename(temp, path)
        temp = None
    except OSError as exc:
        if fd is not None:
            os.close(fd)
        if temp is not None:
            try:
                os.unlink(temp)
            except OSError:
                pass
        raise _failure(path, step, exc) from exc
    try:
        fsync_dir(directory)
    except OSError as exc:
        raise _failure(path, "syncing the directory %s" % directory, exc, replaced=True) from exc
    return True


def remove_file(path):
    """Remove PATH if it is there and make that durable; return whether it was there."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        if exc.errno == errno.EBUSY:
            raise AtomicWriteError("cannot remove %s: it is a mount point; unmount it first (umount %s). %s is "
                                   "unchanged." % (path, path, path), path, exc.errno, "unlink") from exc
        raise _failure(path, "unlink", exc, verb="remove") from exc
    try:
        fsync_dir(os.path.dirname(path) or ".")
    except OSError as exc:
        raise AtomicWriteError("%s was removed, but syncing its directory failed: %s; the removal may not survive "
                               "a power cut." % (path, exc.strerror), path, exc.errno, "fsync") from exc
    return True
