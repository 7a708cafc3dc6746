# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Directory walkers shared by ramdisk_facts (usage) and tree_verify (digests).

Both walk iteratively (no recursion limit), stay on the file system of the root (like
``du -x``: entries on another file system are neither counted nor entered) and never
follow symbolic links.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import time

_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_S_IFMT = 0o170000
_S_IFDIR = 0o040000
# Check the clock once per this many entries as well as once per directory.
_CLOCK_EVERY = 4096
# What tmpfs charges an extended attribute against nr_inodes (which it counts as 1 KiB an inode): the name, the
# value and the kernel's record of it (simple_xattr_space(): 40 bytes and the name's NUL on Linux 6.18, x86_64).
XATTR_OVERHEAD = 41
# tmpfs keeps POSIX ACLs with the inode, not as extended attributes: they cost it nothing more.
_UNCHARGED_XATTRS = ("system.posix_acl_access", "system.posix_acl_default")


# Extended attributes that a copy into a RAM file system that cannot hold them may leave behind, each with what it is.
# The migrate leaves them out (with a warning) rather than refusing, as any copy to such a file system does.
DROPPABLE_XATTRS = {
    "user.crtime_usec": "journald's record of when it made a journal file, which it does without on file systems "
                        "that cannot hold it",
}


def xattr_space(path, user_names=None, rel=None):
    """What the extended attributes of PATH (not followed) would take of a tmpfs's inode space; None when the
    file system has none. USER_NAMES: a dict that counts each user.* name met, with the first entry (REL) that has
    it: {name: [count, rel]}."""
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError as exc:
        return None if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP) else 0
    total = 0
    for name in names:
        if name in _UNCHARGED_XATTRS:
            continue
        if user_names is not None and name.startswith("user."):
            user_names.setdefault(name, [0, rel])[0] += 1
        try:
            value = os.getxattr(path, name, follow_symlinks=False)
        except OSError:
            continue
        total += XATTR_OVERHEAD + len(name.encode("utf-8", "surrogateescape")) + len(value)
    return total


def tree_usage(root, timeout=None, xattrs=False):
    """Disk usage and inode count of the tree at ``root``.

    usage_bytes is the sum of st_blocks * 512 with hard links counted once (``du -sx``);
    inodes counts every entry including the root (``find -xdev | wc -l``, less entries on
    other file systems). When ``timeout`` seconds pass the walk stops and complete is False,
    so the figures are a lower bound. Unreadable directories are counted in errors.
    XATTRS: also sum in xattr_bytes what the entries' extended attributes would take of a
    tmpfs's inode space (xattr_space(), each inode once), and count in user_xattrs each user.*
    attribute's name with the first entry that has it ({name: [count, relative path]}); None when not asked.
    """
    started = time.monotonic()
    deadline = None if timeout is None else started + max(float(timeout), 0.0)
    result = {"usage_bytes": 0, "inodes": 0, "complete": True, "errors": 0, "seconds": 0.0,
              "xattr_bytes": None, "user_xattrs": None}
    try:
        root_stat = os.lstat(root)
    except OSError:
        result["errors"] = 1
        result["complete"] = False
        return result

    blocks = root_stat.st_blocks
    inodes = 1
    user_xattrs = {} if xattrs else None
    xattr_bytes = (xattr_space(root, user_xattrs, ".") if xattrs else None)
    # A file system without extended attributes answers once for all its entries.
    xattrs = xattrs and xattr_bytes is not None
    errors = 0
    complete = True
    root_dev = root_stat.st_dev
    seen = set()
    if root_stat.st_nlink > 1 and not stat.S_ISDIR(root_stat.st_mode):
        seen.add(root_stat.st_ino)

    pending = [root] if stat.S_ISDIR(root_stat.st_mode) else []
    monotonic = time.monotonic
    scandir = os.scandir
    os_open = os.open
    os_close = os.close
    budget = _CLOCK_EVERY
    while pending:
        if deadline is not None and monotonic() >= deadline:
            complete = False
            break
        path = pending.pop()
        try:
            fd = os_open(path, _DIR_FLAGS)
        except OSError:
            errors += 1
            continue
        try:
            # scandir on a descriptor makes each entry's stat an fstatat() relative to it.
            with scandir(fd) as entries:
                for entry in entries:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError as exc:
                        if exc.errno != errno.ENOENT:
                            errors += 1
                        continue
                    if st.st_dev != root_dev:
                        continue
                    if st.st_mode & _S_IFMT == _S_IFDIR:
                        pending.append(path + "/" + entry.name)
                    elif st.st_nlink > 1:
                        if st.st_ino in seen:
                            inodes += 1
                            continue
                        seen.add(st.st_ino)
                    inodes += 1
                    blocks += st.st_blocks
                    if xattrs:
                        child = path + "/" + entry.name
                        xattr_bytes += xattr_space(child, user_xattrs, child[len(root) + 1:]) or 0
                    budget -= 1
                    if budget <= 0:
                        budget = _CLOCK_EVERY
                        if deadline is not None and monotonic() >= deadline:
                            complete = False
                            break
        except OSError:
            errors += 1
        finally:
            os_close(fd)
        if not complete:
            break

    result.update(
        usage_bytes=blocks * 512,
        inodes=inodes,
        complete=complete,
        errors=errors,
        seconds=round(monotonic() - started, 6),
        xattr_bytes=xattr_bytes,
        user_xattrs=user_xattrs if xattrs else None,
    )
    return result


def is_empty_dir(path):
    """True if the directory has no entries, False if it has some, None if it cannot be read."""
    try:
        with os.scandir(path) as entries:
            for _entry in entries:
                return False
        return True
    except OSError:
        return None


_TYPE_NAMES = (
    (stat.S_ISREG, "file"),
    (stat.S_ISDIR, "directory"),
    (stat.S_ISLNK, "symlink"),
    (stat.S_ISFIFO, "fifo"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
)


def _type_name(mode):
    for test, name in _TYPE_NAMES:
        if test(mode):
            return name
    return "unknown"


def _sha256(path, chunk_size=1024 * 1024):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while True:
            chunk = handle.read(chunk_size)
            if not chunk:
                break
            digest.update(chunk)
    return digest.hexdigest()


# The persist helper's mark of the mount it restored (on the mount root, set by root only): not data.
MOUNT_MARK_PREFIX = "trusted.ramdisk-provision."


def _xattrs(path):
    if not hasattr(os, "listxattr"):
        return {}
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError as exc:
        if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM):
            return {}
        raise
    values = {}
    for name in sorted(names):
        if name.startswith(MOUNT_MARK_PREFIX):
            continue
        try:
            values[name] = os.getxattr(path, name, follow_symlinks=False).hex()
        except OSError as exc:
            if exc.errno != errno.ENODATA:
                raise
    return values


def entry_digest(path, st, xattrs=True):
    """What tree_verify compares for one entry."""
    kind = _type_name(st.st_mode)
    entry = {
        "type": kind,
        "mode": "%04o" % stat.S_IMODE(st.st_mode),
        "uid": st.st_uid,
        "gid": st.st_gid,
        "mtime_ns": st.st_mtime_ns if kind in ("file", "directory") else None,
        # A directory's size depends on the file system (4096 on ext4, entry-based on tmpfs).
        "size": st.st_size if kind in ("file", "symlink") else None,
        "sha256": _sha256(path) if kind == "file" else None,
        "target": os.readlink(path) if kind == "symlink" else None,
        "rdev": st.st_rdev if kind in ("character device", "block device") else None,
        "xattrs": _xattrs(path) if xattrs else {},
    }
    return entry


def tree_digest(root, xattrs=True):
    """Map of relative path ('.' for the root) to entry_digest() for every entry of the tree.

    Returns (digests, problems): problems are sentences about entries that could not be read.
    """
    digests = {}
    problems = []
    root_stat = os.lstat(root)
    root_dev = root_stat.st_dev
    pending = [(root, ".", root_stat)]
    while pending:
        path, rel, st = pending.pop()
        try:
            digests[rel] = entry_digest(path, st, xattrs=xattrs)
        except OSError as exc:
            problems.append("%s could not be read: %s." % (path, exc.strerror or exc))
            continue
        if not stat.S_ISDIR(st.st_mode):
            continue
        if st.st_dev != root_dev:
            problems.append("%s is on another file system and was not entered." % path)
            continue
        try:
            with os.scandir(path) as entries:
                children = [(entry.path, entry.name, entry.stat(follow_symlinks=False)) for entry in entries]
        except OSError as exc:
            problems.append("%s could not be listed: %s." % (path, exc.strerror or exc))
            continue
        for child_path, name, child_stat in children:
            pending.append((child_path, name if rel == "." else rel + "/" + name, child_stat))
    return digests, problems


# The directory mkfs.ext4 makes at the root of every new file system, for fsck.
FS_LOST_FOUND = "lost+found"

_FIELD_WORDS = (
    ("mode", "mode"),
    ("uid", "owner uid"),
    ("gid", "group gid"),
    ("size", "size"),
    ("sha256", "content (sha256)"),
    ("target", "symlink target"),
    ("rdev", "device number"),
    ("mtime_ns", "modification time (ns)"),
)


def compare_trees(a, b, a_name="source", b_name="destination", mtime=True, root_mtime=False, b_fs_root=False,
                  dropped_xattrs=()):
    """Plain sentences for every difference between two tree_digest() maps.

    DROPPED_XATTRS: names of extended attributes that B may lack where A has them (the plan found that B's file
    system cannot hold them, and that each is one of DROPPABLE_XATTRS).
    The root's mtime is skipped unless root_mtime: copying into a directory changes it.
    b_fs_root: B is the root of its own file system, so an empty lost+found directory there that A lacks is
    the file system's own (mkfs.ext4 makes it), not a difference.
    """
    sentences = []
    if b_fs_root and FS_LOST_FOUND not in a and (b.get(FS_LOST_FOUND) or {}).get("type") == "directory" and not any(
            rel.startswith(FS_LOST_FOUND + "/") for rel in b):
        b = dict((rel, digest) for rel, digest in b.items() if rel != FS_LOST_FOUND)
    for rel in sorted(set(a) | set(b)):
        label = "the root" if rel == "." else "'%s'" % rel
        if rel not in b:
            sentences.append(_cap("%s %s is in the %s but missing from the %s." % (
                a[rel]["type"], label, a_name, b_name)))
            continue
        if rel not in a:
            sentences.append(_cap("%s %s is in the %s but not in the %s." % (
                b[rel]["type"], label, b_name, a_name)))
            continue
        left, right = a[rel], b[rel]
        if left["type"] != right["type"]:
            sentences.append(_cap("%s is a %s in the %s but a %s in the %s." % (
                label, left["type"], a_name, right["type"], b_name)))
            continue
        for field, words in _FIELD_WORDS:
            if field == "mtime_ns" and (not mtime or (rel == "." and not root_mtime)):
                continue
            if left.get(field) != right.get(field):
                sentences.append(_cap("%s differs in %s: %s in the %s, %s in the %s." % (
                    label, words, _show(field, left.get(field)), a_name, _show(field, right.get(field)), b_name)))
        left_x, right_x = left.get("xattrs") or {}, right.get("xattrs") or {}
        for name in sorted(set(left_x) | set(right_x)):
            if name not in right_x:
                if name in dropped_xattrs:
                    continue
                sentences.append(_cap("%s has extended attribute %s in the %s but not in the %s." % (
                    label, name, a_name, b_name)))
            elif name not in left_x:
                sentences.append(_cap("%s has extended attribute %s in the %s but not in the %s." % (
                    label, name, b_name, a_name)))
            elif left_x[name] != right_x[name]:
                sentences.append(_cap("%s differs in extended attribute %s between the %s and the %s." % (
                    label, name, a_name, b_name)))
    return sentences


def _cap(sentence):
    return sentence[:1].upper() + sentence[1:]


def _show(field, value):
    if value is None:
        return "none"
    if field == "sha256":
        return value[:12]
    if field == "target":
        return "'%s'" % value
    return str(value)
