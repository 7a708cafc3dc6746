# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Who could have written a path: the trust model of docs/security.md, read by directory file descriptors.

Root acts on a path it trusts (a persist backing, the collection's state directories) only when every component
from / down is a directory, not a symlink, owned by root and writable by root alone: no group or other write bit,
sticky or not (in a sticky /tmp any user could have made the child first). A missing tail is fine: root makes it,
mode 0700. Each component is opened with O_PATH|O_NOFOLLOW relative to the one above and checked by fstat, so what
is checked is what the walk goes through, not a path looked up again later.

Standard library only: the plan runs it on the host, and a helper can run it there on its own.
"""

from __future__ import annotations

import os
import re
import stat

try:
    import grp
    import pwd
except ImportError:  # pragma: no cover - not on Linux
    grp = pwd = None

O_PATH = getattr(os, "O_PATH", 0o10000000)
O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
# What the persist helper names a copy: current must lead to one of these, by a name in the backing itself.
SNAPSHOT_RE = re.compile(r"^snap-[^/]+\Z")
STATE_NAME = ".persist-delta"
# The top level of a backing that only the helper, as root, writes; the copies inside keep their own owners.
_COPY_RE = re.compile(r"^(?:snap|\.new)-.+\Z")
_LINK_RE = re.compile(r"^\.current-.+\Z")


class TrustError(Exception):
    """A path could not be read far enough to decide (not a refusal: the reason is in the message)."""


def _user(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except (KeyError, AttributeError):
        return str(uid)


def _group(gid):
    try:
        return grp.getgrgid(gid).gr_name
    except (KeyError, AttributeError):
        return str(gid)


def problem(path, info, why, target=None):
    """A finding: PATH, what is wrong (WHY: symlink, not a directory, owner, writable, current, entry), its owner,
    group and mode from INFO (an os.stat_result), and a link's TARGET."""
    found = {"path": path, "why": why, "uid": info.st_uid, "gid": info.st_gid,
             "owner": _user(info.st_uid), "group": _group(info.st_gid),
             "mode": "%04o" % stat.S_IMODE(info.st_mode), "kind": kind(info.st_mode)}
    if target is not None:
        found["target"] = target
    return found


def kind(mode):
    """What a file of MODE (st_mode) is, in words."""
    for test, words in ((stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symlink"), (stat.S_ISREG, "a regular file"),
                        (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                        (stat.S_ISBLK, "a block device")):
        if test(mode):
            return words
    return "an unknown kind of file"


def owned_by_root_alone(info):
    """None when INFO (a directory's or file's stat) is root's alone, else owner or writable."""
    if info.st_uid != 0:
        return "owner"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "writable"
    return None


def _open_below(parent_fd, name):
    return os.open(name, O_PATH | os.O_NOFOLLOW | O_CLOEXEC, dir_fd=parent_fd)


def walk(path, root="/"):
    """(problem, fd): the first component of PATH (absolute, normalised) that root cannot trust, or None and an O_PATH
    descriptor of PATH itself (None when its tail is missing). The caller closes the descriptor. ROOT: the directory
    PATH is read below, as a chroot would (tests); its own owner and mode are checked as /'s are."""
    if not path.startswith("/") or ".." in path.split("/"):
        raise TrustError("'%s' is not an absolute path without '..'" % path)
    where = "/"
    fd = None
    try:
        fd = os.open(root, O_PATH | os.O_DIRECTORY | O_CLOEXEC)
        info = os.fstat(fd)
        why = owned_by_root_alone(info)
        if why:
            return problem(where, info, why), None
        for name in [part for part in path.split("/") if part not in ("", ".")]:
            where = where.rstrip("/") + "/" + name
            try:
                below = os.open(name, O_PATH | os.O_NOFOLLOW | O_CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                return None, None
            parent, fd = fd, below
            try:
                info = os.fstat(fd)
                if stat.S_ISLNK(info.st_mode):
                    return problem(where, info, "symlink", os.readlink(name, dir_fd=parent)), None
            finally:
                os.close(parent)
            if not stat.S_ISDIR(info.st_mode):
                return problem(where, info, "not a directory"), None
            why = owned_by_root_alone(info)
            if why:
                return problem(where, info, why), None
        return None, os.dup(fd)
    except OSError as exc:
        raise TrustError("'%s' could not be read: %s" % (where, exc.strerror or exc))
    finally:
        if fd is not None:
            os.close(fd)


def check_path(path, root="/"):
    """The first component of PATH that root cannot trust (see the module's text), or None. ROOT: as walk() takes it."""
    found, fd = walk(path, root)
    if fd is not None:
        os.close(fd)
    return found


def check_backing(path, root="/"):
    """check_path(PATH), then the top level of an existing backing: current absent or a link made by root to a
    snap-* directory beside it; .persist-delta and what it holds at its top root's alone; the copies (snap-*,
    .new-*) directories, the helper's .current-* links root's. ROOT: as walk() takes it."""
    found, fd = walk(path, root)
    if found or fd is None:
        return found
    try:
        listing = os.open(".", os.O_RDONLY | os.O_DIRECTORY | O_CLOEXEC, dir_fd=fd)
        try:
            names = sorted(os.listdir(listing))
            for name in names:
                found = _top_entry(listing, path, name, names)
                if found:
                    return found
        finally:
            os.close(listing)
    except OSError as exc:
        raise TrustError("'%s' could not be read: %s" % (path, exc.strerror or exc))
    finally:
        os.close(fd)
    return None


def _lstat(dir_fd, name):
    return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)


def _top_entry(fd, backing, name, names):
    where = backing.rstrip("/") + "/" + name
    info = _lstat(fd, name)
    if name == "current":
        if not stat.S_ISLNK(info.st_mode):
            return problem(where, info, "current")
        target = os.readlink(name, dir_fd=fd)
        if info.st_uid != 0 or not SNAPSHOT_RE.match(target) or target not in names:
            return problem(where, info, "current", target)
        if not stat.S_ISDIR(_lstat(fd, target).st_mode):
            return problem(where, info, "current", target)
        return None
    if name == STATE_NAME:
        if not stat.S_ISDIR(info.st_mode):
            return problem(where, info, "entry")
        why = owned_by_root_alone(info)
        if why:
            return problem(where, info, why)
        state = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | O_CLOEXEC, dir_fd=fd)
        try:
            for inner in sorted(os.listdir(state)):
                inner_info = _lstat(state, inner)
                why = "entry" if stat.S_ISLNK(inner_info.st_mode) else owned_by_root_alone(inner_info)
                if why:
                    return problem(where + "/" + inner, inner_info, why)
        finally:
            os.close(state)
        return None
    if _COPY_RE.match(name) and not stat.S_ISDIR(info.st_mode):
        return problem(where, info, "entry")
    if _LINK_RE.match(name) and (not stat.S_ISLNK(info.st_mode) or info.st_uid != 0):
        return problem(where, info, "entry")
    return None


def describe(found):
    """FOUND (a problem) in words: what the component is, its owner, group and mode, and why that is refused."""
    path, mode = found["path"], found["mode"]
    held = "owned by %s:%s (uid %d, gid %d), mode %s" % (found["owner"], found["group"], found["uid"], found["gid"],
                                                         mode)
    why = found["why"]
    if why == "symlink":
        return "'%s' is a symlink (to '%s'), and a walk that trusts it lands wherever it leads" % (
            path, found.get("target", "?"))
    if why == "not a directory":
        return "'%s' is %s, not a directory" % (path, found["kind"])
    if why == "owner":
        return "'%s' is %s: a user other than root can change what is in it" % (path, held)
    if why == "writable":
        mode_bits = int(mode, 8)
        who = "every user" if mode_bits & stat.S_IWOTH else "the group %s" % found["group"]
        sticky = " (sticky or not: any user could have made a name in it first)" if mode_bits & stat.S_ISVTX else ""
        return "'%s' is %s, writable by %s%s" % (path, held, who, sticky)
    if why == "current":
        if found["kind"] != "a symlink":
            return "'%s' is %s (%s), not the helper's link to a copy" % (path, found["kind"], held)
        return ("'%s' is a link made by %s that leads to '%s', and current must be a link made by root to a "
                "snap-* directory beside it" % (path, found["owner"], found.get("target", "?")))
    return "'%s' is %s, %s, and only the persist helper, as root, writes there" % (path, found["kind"], held)


def fix(found):
    """The commands that make FOUND's component root's alone, or None where the way out is another path (a link, a
    file, a directory every user shares by design such as /tmp, or something planted in a backing)."""
    path, why = found["path"], found["why"]
    mode_bits = int(found["mode"], 8)
    if why not in ("owner", "writable"):
        return None
    if why == "writable" and mode_bits & stat.S_IWOTH and mode_bits & stat.S_ISVTX:
        return None
    commands = []
    if found["uid"] != 0:
        commands.append("chown root:root %s" % path)
    if mode_bits & (stat.S_IWGRP | stat.S_IWOTH):
        commands.append("chmod go-w %s" % path)
    return "; ".join(commands)


def state_dirs_error(host, directories, root="/"):
    """The refusal of a host where one of DIRECTORIES (the collection's own, which root reads and runs from), or a
    directory above it, is not root's alone; None when all are. ROOT: as walk() takes it."""
    for directory in directories:
        try:
            found = check_path(directory, root)
        except TrustError as exc:
            return ("Host %s: whether only root can write %s could not be read (%s). Nothing was changed; fix that "
                    "and run again." % (host, directory, exc))
        if found is None:
            continue
        commands = fix(found)
        how = ("run `%s`" % commands if commands else "make '%s' a directory of root's that only root can write"
               % found["path"])
        return ("Host %s: %s, and this collection keeps %s below it: root reads its records, journal and lock there "
                "and runs its helpers from there, so whoever can write it acts as root. Nothing was changed. Fix: %s, "
                "then run again." % (host, describe(found), directory, how))
    return None
