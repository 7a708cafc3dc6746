# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The persist helper's copy engine: a sync that writes only what changed, staged and rolled forward.

Installed on the host beside the persist helper, which runs it with python3 for every sync after the first and for
every restore; the executor imports it to roll a backing forward before it reads current. It needs only Python's
standard library: no rsync, no cp. One copy engine (Copier) serves the stage, the restore and the helper's first
copy.

Why not a new hard-linked tree per sync (rsync --link-dest, the helper's copy before): at 50,000 files the link()
of every unchanged file dirties its inode, and ext4 writes those inode table blocks twice (journal, then home):
about 33 MB of metadata for 16.7 MB of changed data, over 3% of a 1.09 GiB tree. Here a sync touches only the
changed entries: `current` is updated in place, by rename(2), under a commit record.

Layout of BACKING (current stays the helper's link to the snap-STAMP directory of its first copy):

  current                  a symlink to a plain snap-* name in BACKING: the newest complete copy, once no commit
                           record is pending
  .persist-delta/stage/N   the new or changed entry of operation N (a whole subtree for a new directory), copied
                           for the sync under way, then moved into current; flat, so that a sync makes no
                           directories beyond the ones the mount gained
  .persist-delta/ops.tmp   the operations of the sync under way, written as they are found (they grow with the
                           change, not with the tree)
  .persist-delta/commit.json
                           the commit record: a header line, then one operation a line (format 2; format 1, one
                           JSON object with the operations inside, is still read); while it exists, current may be
                           half-way and only rolling forward gives a snapshot
  .persist-delta/gen-N.json
                           the record of generation N once applied (the commit record renamed): its operations,
                           the old attributes it replaced, the digest of the tree it made and the copy it changed
  .persist-delta/undo-N/   the entries generation N replaced or removed, moved aside by rename (a reverse delta:
                           current less undo N..M is generation M-1); KEEP copies are current and the newest
                           KEEP-1 reverse deltas

Trust: BACKING and .persist-delta must be root's and writable by root alone, else every command refuses (a
SyncError naming the path, its owner and mode). Every path of a record must be relative and plain (no '..', '.',
empty or NUL component); every entry is reached through directory file descriptors opened with O_NOFOLLOW from
current's, so a link planted in current or in a record leads nowhere outside the backing.

A sync: (1) walk MOUNT (less the --exclude patterns) and current side by side, each a sorted stream (the names of
each directory sorted, a directory before what it holds), by directory file descriptors, never by path; merge the
two streams into operations (put: a new or changed entry, a whole subtree for a new directory; del: an entry gone,
a whole subtree in one rename; attrs: an attribute-only change, or a directory whose entries changed), copying
each put entry into the stage as it is found (Copier: what rsync -aHAX --sparse -x keeps) and spilling each
operation to ops.tmp; only hard-linked files (more than one link) are held in memory, to compare their groups at
the end; the digest of both trees is computed on the way; (2) write the record as commit.json.tmp; (3) syncfs;
(4) rename it to commit.json and fsync the directory: the commit point; (5) apply: each put moves the old entry to
undo-N and the staged one in, each del moves the old entry to undo-N, each attrs sets absolute values; every step
can be done again after a kill (a rename whose source is gone is done); (6) syncfs, remove the stage, rename the
record to gen-N.json, remove what is beyond KEEP. A kill before (4) leaves current untouched (the stage is thrown
away by the next sync); a kill after it is rolled forward by the next sync, restore or verify, or by the executor
before it reads current. SIGTERM, SIGINT and SIGHUP are held to a safe point: before (4) the sync removes what it
staged and stops, after it the apply is finished first; either way it exits with a "stopped" error and current is one
whole generation. A file system mounted inside MOUNT is not copied (rsync -x): its mount point is kept, empty, and named
in the report's skipped_mounts. A restore rolls a pending record forward first, so that what it copies is current,
whole; where the backing cannot be written (full, read-only) it only reads it (a full disk must not keep the data
from the mount at boot): it copies current and applies the record to its copy, and the next sync rolls forward.

  persist-delta.py sync MOUNT BACKING [--keep K] [--include PATTERN | --exclude PATTERN]...
                                                 prints a JSON line: generation, counts, bytes written,
                                                 skipped_mounts
  persist-delta.py restore BACKING DEST [--back N]
                                                 copies current (or N generations back) into the empty DEST
  persist-delta.py verify BACKING                rolls forward, then checks current against the last record
  persist-delta.py rollback BACKING              makes the previous generation current again (bench, tests)

--exclude takes rsync's patterns, relative to the mount's root: a leading / anchors it there, a trailing / matches
directories only, * and ? match within one name, ** across names; a pattern with a / is matched against the end of
the path (journal/*/system.journal), one without against the name. An excluded entry is not copied, and a copy of it
that current holds goes, as from an rsync into a new directory. --include PATTERN keeps what a later --exclude would
leave out: the first pattern that matches decides, as in rsync.

PERSIST_DELTA_KILL_AT=STEP kills the process with SIGKILL at STEP (planned, staged, synced, committed, apply:N,
applied, recorded, pruned; rollback:N): the tests' kill points (PERSIST_DELTA_KILL_SIGNAL=SIGSTOP stops it there).
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import stat
import sys
import time

STATE = ".persist-delta"
KILL_ENV = "PERSIST_DELTA_KILL_AT"
# SIGSTOP instead of SIGKILL: the power-cut test stops the sync there, cuts the backing's file system off (ext4's
# shutdown without flushing its journal), then kills it.
KILL_SIGNAL_ENV = "PERSIST_DELTA_KILL_SIGNAL"
COPY_CHUNK = 1024 * 1024
RECORD_FORMAT = 2
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# A file system's own directory in its root (ext4, and xfs after xfs_repair): a restore into a fresh one finds it.
SPARE = "lost+found"
_KINDS = ((stat.S_ISREG, "f"), (stat.S_ISDIR, "d"), (stat.S_ISLNK, "l"), (stat.S_ISCHR, "c"),
          (stat.S_ISBLK, "b"), (stat.S_ISFIFO, "p"), (stat.S_ISSOCK, "s"))
# An entry swapped for another kind between its stat and its open (a local user's race): looked at again.
_RACED = (errno.ELOOP, errno.ENOTDIR, errno.EINVAL, errno.ENXIO)
_SNAPSHOT_NAME = re.compile(r"snap-[^/\x00]+")
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class SyncError(Exception):
    """A sync that failed; current is the last good copy."""


class Stopped(SyncError):
    """A signal asked the run to stop, and it stopped at a safe point; SIGNUM says which."""

    def __init__(self, message):
        super().__init__(message)
        self.signum = HELD.signum or signal.SIGTERM


def kill_point(step):
    if os.environ.get(KILL_ENV) == step:
        os.kill(os.getpid(), getattr(signal, os.environ.get(KILL_SIGNAL_ENV, "SIGKILL")))


class _HeldSignals:
    """SIGTERM, SIGINT and SIGHUP noted, not acted on, while a run changes the backing: it stops at a safe point."""

    def __init__(self):
        self.signum = 0
        self._previous = {}
        self._depth = 0

    def _note(self, signum, _frame):
        self.signum = signum

    def __enter__(self):
        self._depth += 1
        if self._depth == 1:
            self.signum = 0
            for signum in _STOP_SIGNALS:
                try:
                    self._previous[signum] = signal.signal(signum, self._note)
                except ValueError:
                    pass  # not the main thread: signals go to the main thread's handlers anyway
        return self

    def __exit__(self, *_exc):
        self._depth -= 1
        if self._depth == 0:
            for signum, handler in self._previous.items():
                signal.signal(signum, handler)
            self._previous = {}
            self.signum = 0  # told to the caller as a Stopped error; a later copy outside a run is not stopped
        return False

    def name(self):
        return signal.Signals(self.signum).name if self.signum else ""


HELD = _HeldSignals()


def _check_stop(what):
    """Before the commit point: stop here if a signal came (the caller removes what it staged)."""
    if HELD.signum:
        raise Stopped("stopped by %s %s" % (HELD.name(), what))


# Paths and directory file descriptors --------------------------------------------------------------------------

def check_rel(rel, where, root_allowed=False):
    """REL as a record may name it: relative and plain, else a SyncError naming WHERE."""
    if not isinstance(rel, str):
        raise SyncError("%s: path %r is not a string: refused" % (where, rel))
    if rel == "" and root_allowed:
        return rel
    parts = rel.split("/")
    if rel.startswith("/") or "\x00" in rel or any(part in ("", ".", "..") for part in parts):
        raise SyncError("%s names %r, which is not a plain relative path inside the backing (absolute, '..', '.', "
                        "an empty component or NUL): refused, nothing changed for it" % (where, rel))
    return rel


def _key(rel):
    """The order of both walks: a directory, then what it holds, names sorted within each directory."""
    return rel.split("/") if rel else []


def _at(dir_fd, name):
    """A path to NAME in the directory open as DIR_FD that resolves no other component (for the calls with no
    dir_fd: xattrs, chmod)."""
    return "/proc/self/fd/%d/%s" % (dir_fd, name)


def _open_dir_at(dir_fd, name):
    return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)


def open_parent(root_fd, rel, where=""):
    """(a new fd of REL's parent directory, REL's name), each component opened with O_NOFOLLOW from ROOT_FD."""
    parts = rel.split("/")
    fd = os.dup(root_fd)
    try:
        for part in parts[:-1]:
            try:
                child = _open_dir_at(fd, part)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise SyncError("%s: %s in %r is not a directory (a symbolic link?): refused, nothing changed "
                                    "through it" % (where or "a walk", part, rel)) from exc
                raise
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd, parts[-1]


def _lexists_at(dir_fd, name):
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _is_dir_at(dir_fd, name):
    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return False


def remove_at(dir_fd, name):
    """NAME in DIR_FD gone, a directory with all it holds, without following any link."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(name, dir_fd=dir_fd)
    else:
        os.unlink(name, dir_fd=dir_fd)


def _syncfs_fd(fd, what):
    """Every dirty page and inode of FD's file system on the disk (sync -f), not the whole machine's."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syncfs(fd) != 0:
        code = ctypes.get_errno()
        raise OSError(code, "syncfs %s: %s" % (what, os.strerror(code)))


def _syncfs(path):
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        _syncfs_fd(fd, path)
    finally:
        os.close(fd)


def _fsync_dir(path):
    # Not _atomic.fsync_dir: this file runs on the host alone, beside the helper, with the standard library only.
    fd = os.open(path, _DIR_FLAGS)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_durably(path, data):
    """Temporary file, fsync, rename, fsync of the directory: the file is there whole or not at all."""
    tmp = path + ".tmp"
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.rename(tmp, path)
    _fsync_dir(os.path.dirname(path))


def _raise_open_files_limit():
    """Both walks hold one fd per level of depth: the soft limit up to the hard one."""
    try:
        import resource  # pylint: disable=import-outside-toplevel
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ImportError, ValueError, OSError):
        pass


# Walking and comparing -----------------------------------------------------------------------------------------

def _kind(mode):
    for test, letter in _KINDS:
        if test(mode):
            return letter
    return "?"


def _xattrs(path):
    """Sorted (name, hex value) pairs of PATH (not followed) or of an open fd; ACLs are the system.posix_acl_* ones."""
    kwargs = {} if isinstance(path, int) else {"follow_symlinks": False}
    try:
        names = os.listxattr(path, **kwargs)
    except OSError as exc:
        if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            return ()
        raise
    pairs = []
    for name in names:
        try:
            pairs.append((name, os.getxattr(path, name, **kwargs).hex()))
        except OSError as exc:
            if exc.errno != errno.ENODATA:  # removed since the listing
                raise
    return tuple(sorted(pairs))


def _meta(st, xattrs, target):
    kind = _kind(st.st_mode)
    return {
        "kind": kind,
        "mode": stat.S_IMODE(st.st_mode),
        "uid": st.st_uid,
        "gid": st.st_gid,
        # A directory's size is the file system's (4096 on ext4, entry-based on tmpfs); a symlink's mtime is not
        # kept by every copy tool: neither is compared.
        "size": st.st_size if kind in "fl" else 0,
        "mtime_ns": st.st_mtime_ns if kind in "fd" else 0,
        "rdev": st.st_rdev if kind in "cb" else 0,
        "target": target,
        "xattrs": xattrs,
    }


def entry_at(dir_fd, name):
    """(stat, meta, fd of it if a directory) of NAME in DIR_FD, never followed; a directory's from the fd it is
    opened by; None if it is gone. An entry swapped for another kind meanwhile is looked at again."""
    for _attempt in range(8):
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                fd = _open_dir_at(dir_fd, name)
                try:
                    st = os.fstat(fd)
                    return st, _meta(st, _xattrs(fd), ""), fd
                except BaseException:
                    os.close(fd)
                    raise
            target = os.readlink(name, dir_fd=dir_fd) if stat.S_ISLNK(st.st_mode) else ""
            return st, _meta(st, _xattrs(_at(dir_fd, name)), target), None
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno not in _RACED:
                raise
    raise SyncError("%s keeps changing its type while it is read: not copied" % name)


class Walk:
    """The entries of a tree as a sorted stream of (relative path, meta, stat, parent fd, name): a directory before
    what it holds, the names of each directory sorted; by directory fds, never by path. Memory: the names of the
    directories on the way down, not the tree.

    Stays on the root's file system: a directory another file system is mounted on is given (its mount point is
    kept) but not entered, and named in skipped_mounts. EXCLUDED(rel, is_dir) leaves an entry out with all it
    holds. skip() after a directory is given: do not enter it."""

    def __init__(self, root_fd, excluded=None):
        self.excluded = excluded
        self.skipped_mounts = []
        fd = os.dup(root_fd)
        st = os.fstat(fd)
        self.dev = st.st_dev
        self._first = ("", _meta(st, _xattrs(fd), ""), st, fd, ".")
        self._stack = []
        self._enter = (fd, "")

    def __iter__(self):
        return self

    def skip(self):
        if self._enter is not None:
            os.close(self._enter[0])
            self._enter = None

    def close(self):
        self.skip()
        while self._stack:
            os.close(self._stack.pop()[0])

    def __next__(self):
        if self._first is not None:
            first, self._first = self._first, None
            return first
        if self._enter is not None:
            fd, rel = self._enter
            self._enter = None
            self._stack.append((fd, rel, iter(sorted(os.listdir(fd)))))
        while self._stack:
            fd, rel, names = self._stack[-1]
            for name in names:
                child = rel + "/" + name if rel else name
                found = entry_at(fd, name)
                if found is None:
                    continue  # gone since the listing
                st, meta, child_fd = found
                if self.excluded is not None and self.excluded(child, child_fd is not None):
                    if child_fd is not None:
                        os.close(child_fd)
                    continue
                if child_fd is not None:
                    if st.st_dev != self.dev:
                        os.close(child_fd)
                        self.skipped_mounts.append(child)
                    else:
                        self._enter = (child_fd, child)
                return child, meta, st, fd, name
            os.close(fd)
            self._stack.pop()
        raise StopIteration


class TreeDigest:
    """One digest of everything a sync keeps of a tree, fed in the walks' order: a reader compares current's
    against its record's. Format 2: one line an entry, then the hard-link groups (the only part kept in memory)."""

    def __init__(self):
        self._hash = hashlib.sha256()
        self.links = {}  # inode -> paths, of the regular files with more than one link

    def add(self, rel, meta, inode=None, links=1):
        # NUL-separated: no name or link target holds one (json.dumps here took a third of a walk's time).
        line = "%s\0%s\0%d\0%d\0%d\0%d\0%d\0%d\0%s\0%s\n" % (
            rel, meta["kind"], meta["mode"], meta["uid"], meta["gid"], meta["size"], meta["mtime_ns"], meta["rdev"],
            meta["target"], "\0".join("%s=%s" % pair for pair in meta["xattrs"]))
        self._hash.update(line.encode("utf-8", "surrogateescape"))
        if meta["kind"] == "f" and links > 1:
            self.links.setdefault(inode, []).append(rel)

    def groups(self):
        """{path: sorted paths of the tree sharing its inode} for the files that share one."""
        found = {}
        for paths in self.links.values():
            if len(paths) > 1:
                members = tuple(sorted(paths, key=_key))
                for rel in paths:
                    found[rel] = members
        return found

    def hexdigest(self):
        digest = self._hash.copy()
        for members in sorted(set(self.groups().values())):
            digest.update(json.dumps(["links"] + list(members)).encode("utf-8", "surrogateescape"))
            digest.update(b"\n")
        return digest.hexdigest()


def digest_of(root_fd):
    """The format-2 digest of the tree open as ROOT_FD."""
    digest = TreeDigest()
    walk = Walk(root_fd)
    try:
        for rel, meta, st, _parent, _name in walk:
            digest.add(rel, meta, st.st_ino, st.st_nlink)
    finally:
        walk.close()
    return digest.hexdigest()


def _pattern_regex(body):
    """rsync's wildcards: ** across names, * and ? within one, [...] as they are."""
    out, i = [], 0
    while i < len(body):
        char = body[i]
        if body.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = body.find("]", i + 2 if body[i + 1:i + 2] in ("!", "]") else i + 1)
            if end < 0:
                out.append(re.escape(char))
            else:
                inner = body[i + 1:end]
                out.append("[" + ("^" + inner[1:] if inner.startswith("!") else inner).replace("\\", "\\\\") + "]")
                i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def exclude_matcher(rules):
    """A function (relative path, is a directory) -> excluded, of rsync-style RULES (see above): each an --exclude
    pattern, or ('+', pattern) for an --include and ('-', pattern) for an --exclude; the first that matches decides."""
    compiled = []
    for rule in rules or ():
        kind, pattern = rule if isinstance(rule, tuple) else ("-", rule)
        dirs_only = pattern.endswith("/")
        body = pattern.strip("/") if dirs_only else pattern.lstrip("/")
        if not body:
            raise SyncError("--exclude '%s' names nothing" % pattern)
        start = "^" if pattern.startswith("/") else "(?:^|.*/)"
        compiled.append((re.compile(start + _pattern_regex(body) + "$", re.DOTALL), dirs_only, kind == "-"))

    def excluded(rel, is_dir):
        for regex, dirs_only, exclude in compiled:
            if (is_dir or not dirs_only) and regex.match(rel):
                return exclude
        return False
    return excluded


class _Filter(argparse.Action):
    """--include and --exclude into one list, in the order given (rsync's first match decides)."""

    def __call__(self, parser, namespace, values, option_string=None):
        rules = list(getattr(namespace, self.dest) or [])
        rules.append(("+" if option_string == "--include" else "-", values))
        setattr(namespace, self.dest, rules)


_ATTRS = ("mode", "uid", "gid", "xattrs")


# Setting attributes --------------------------------------------------------------------------------------------

def _set_xattrs(path_or_fd, wanted, follow):
    try:
        present = os.listxattr(path_or_fd, follow_symlinks=follow) if not isinstance(path_or_fd, int) \
            else os.listxattr(path_or_fd)
    except OSError as exc:
        if exc.errno not in (errno.ENOTSUP, errno.EOPNOTSUPP) or wanted:
            raise
        present = []
    kwargs = {} if isinstance(path_or_fd, int) else {"follow_symlinks": follow}
    for name in present:
        if name not in wanted:
            os.removexattr(path_or_fd, name, **kwargs)
    for name, value in wanted.items():
        os.setxattr(path_or_fd, name, value, **kwargs)


def set_attrs_fd(fd, meta):
    """Absolute owner, xattrs (ACLs among them), mode and mtime of the file or directory open as FD."""
    # chown first: it clears the set-id bits and security.capability, which the mode and xattrs then set again.
    os.fchown(fd, meta["uid"], meta["gid"])
    _set_xattrs(fd, {name: bytes.fromhex(value) for name, value in meta["xattrs"]}, True)
    # After the ACL: chmod sets the ACL mask from the group bits, which the source's mode and ACL agree on.
    os.fchmod(fd, meta["mode"])
    if meta["kind"] in "fd":
        os.utime(fd, ns=(os.fstat(fd).st_atime_ns, meta["mtime_ns"]))


def set_attrs_at(dir_fd, name, meta):
    """The same for NAME in DIR_FD ('.' for the directory itself), never through a link."""
    path = _at(dir_fd, name)
    os.chown(path, meta["uid"], meta["gid"], follow_symlinks=False)
    _set_xattrs(path, {key: bytes.fromhex(value) for key, value in meta["xattrs"]}, False)
    if meta["kind"] != "l":
        fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        try:
            if stat.S_ISLNK(os.fstat(fd).st_mode):
                raise SyncError("%s became a symbolic link: its mode is not set through it" % name)
            os.chmod("/proc/self/fd/%d" % fd, meta["mode"])
        finally:
            os.close(fd)
    if meta["kind"] in "fd":
        atime = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_atime_ns
        os.utime(path, ns=(atime, meta["mtime_ns"]), follow_symlinks=False)


def set_attrs(path, meta):
    """set_attrs_at() of a path whose parent is trusted."""
    parent, name = os.path.split(os.path.normpath(path))
    fd = os.open(parent or ".", _DIR_FLAGS)
    try:
        set_attrs_at(fd, name, meta)
    finally:
        os.close(fd)


# Copying -------------------------------------------------------------------------------------------------------

def _copy_data(fin, fout, size):
    """The data of the regular file open as FIN into the new file FOUT, its holes left holes (SEEK_DATA/SEEK_HOLE)."""
    offset = 0
    while offset < size:
        try:
            start = os.lseek(fin, offset, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise
            break  # a hole up to the end
        end = os.lseek(fin, start, os.SEEK_HOLE)
        while start < end:
            chunk = os.pread(fin, min(COPY_CHUNK, end - start), start)
            if not chunk:
                break  # shorter than at the walk: its mtime says so, and the next sync copies it again
            view = memoryview(chunk)
            while view:
                written = os.pwrite(fout, view, start)
                view, start = view[written:], start + written
        offset = end
    os.ftruncate(fout, size)


class Copier:
    """What cp -a and rsync -aHAX --numeric-ids --sparse -x keep: type, data with its holes, owner by number, mode,
    mtime to the nanosecond, xattrs and ACLs, and hard links among the copied files (all links of a group are
    copied together: a sync puts a whole group when any of it changes).

    Every source entry is reached from its parent's directory fd with O_NOFOLLOW, and what is copied is what that
    open gave (fstat of the fd): a directory swapped for a symbolic link meanwhile is copied as the link. An entry
    gone since its parent was listed is left out. A directory another file system is mounted on is copied empty
    and named in skipped_mounts (the file system is the one of the first entry copied, or DEV). EXCLUDED(rel,
    is_dir) leaves an entry out. An error (ENOSPC, EIO) is raised as it is."""

    def __init__(self, excluded=None, dev=None):
        self.linked = {}  # (device, inode) of a source file with links -> (anchor fd or None, path of its copy)
        self.inodes = {}  # relative path -> (inode, links) of the copied files with more than one link
        self.blocks = 0
        self.excluded = excluded
        self.dev = dev
        self.skipped_mounts = []

    def copy_tree(self, src, dst, rel, metas):
        """SRC (an entry, a directory with all it holds) to the new DST; METAS gets {relative path from REL: meta}
        (None: nothing is kept, for a copy of a whole tree).
        Both paths' parents are trusted (the caller's); everything below is reached by fds."""
        src_parent, src_name = os.path.split(os.path.normpath(src))
        dst_parent, dst_name = os.path.split(os.path.normpath(dst))
        sfd = os.open(src_parent or ".", _DIR_FLAGS)
        try:
            dfd = os.open(dst_parent or ".", _DIR_FLAGS)
            try:
                if self.dev is None:
                    self.dev = os.stat(src_name, dir_fd=sfd, follow_symlinks=False).st_dev
                return self.copy_at(sfd, src_name, dfd, dst_name, rel, metas, None, os.path.abspath(dst))
            finally:
                os.close(dfd)
        finally:
            os.close(sfd)

    def copy_contents(self, src_fd, dst_fd, metas):
        """What the directory SRC_FD holds into the empty directory DST_FD, and its attributes (cp -a SRC/. DST)."""
        st = os.fstat(src_fd)
        if self.dev is None:
            self.dev = st.st_dev
        for name in sorted(os.listdir(src_fd)):
            if name == SPARE and metas is None and _is_dir_at(dst_fd, name) and _is_dir_at(src_fd, name):
                # DST is a file system made anew (a zram or brd mount at boot) whose root holds its own empty
                # lost+found: the copy's goes into it, with its attributes, rather than beside it.
                # What a restore cut short left in it (the only writer of a fresh one) makes way for the copy.
                spare_src, spare_dst = _open_dir_at(src_fd, name), _open_dir_at(dst_fd, name)
                try:
                    for leftover in os.listdir(spare_dst):
                        remove_at(spare_dst, leftover)
                    self.copy_contents(spare_src, spare_dst, None)
                finally:
                    os.close(spare_src)
                    os.close(spare_dst)
                continue
            self.copy_at(src_fd, name, dst_fd, name, name, metas, dst_fd, name)
        meta = _meta(st, _xattrs(src_fd), "")
        set_attrs_fd(dst_fd, meta)
        if metas is not None:
            metas[""] = meta

    def copy_at(self, sfd, sname, dfd, dname, rel, metas, anchor, anchor_rel):
        """SNAME in SFD to the new DNAME in DFD; ANCHOR (a directory fd, or None for an absolute ANCHOR_REL) and
        ANCHOR_REL name the copy for later links to it. False if the source is gone."""
        for _attempt in range(8):
            _check_stop("during the copy of %s" % rel)
            try:
                return self._copy_once(sfd, sname, dfd, dname, rel, metas, anchor, anchor_rel)
            except OSError as exc:
                if exc.errno not in _RACED:
                    raise
                remove_at(dfd, dname)  # the kind changed under the copy: again, as what it is now
        raise SyncError("%s keeps changing its type while it is copied: not copied" % rel)

    def _copy_once(self, sfd, sname, dfd, dname, rel, metas, anchor, anchor_rel):
        try:
            st = os.stat(sname, dir_fd=sfd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        kind = _kind(st.st_mode)
        if self.excluded is not None and rel and self.excluded(rel, kind == "d"):
            return True
        if kind == "f":
            try:
                fin = os.open(sname, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC,
                              dir_fd=sfd)
            except FileNotFoundError:
                return False
            try:
                st = os.fstat(fin)
                if not stat.S_ISREG(st.st_mode):
                    raise OSError(errno.EINVAL, "%s is no longer a regular file" % rel)
                meta = _meta(st, _xattrs(fin), "")
                key = (st.st_dev, st.st_ino)
                if st.st_nlink > 1:
                    self.inodes[rel] = (st.st_ino, st.st_nlink)
                    if key in self.linked:
                        first_anchor, first = self.linked[key]
                        os.link(first, dname, src_dir_fd=first_anchor, dst_dir_fd=dfd, follow_symlinks=False)
                        if metas is not None:
                            metas[rel] = meta
                        return True
                fout = os.open(dname, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                               dir_fd=dfd)
                try:
                    _copy_data(fin, fout, st.st_size)
                    set_attrs_fd(fout, meta)
                    self.blocks += os.fstat(fout).st_blocks * 512
                finally:
                    os.close(fout)
                if st.st_nlink > 1:
                    self.linked[key] = (anchor, anchor_rel)
            finally:
                os.close(fin)
        elif kind == "d":
            try:
                src_fd = _open_dir_at(sfd, sname)
            except FileNotFoundError:
                return False
            try:
                st = os.fstat(src_fd)
                meta = _meta(st, _xattrs(src_fd), "")
                os.mkdir(dname, 0o700, dir_fd=dfd)
                dst_fd = _open_dir_at(dfd, dname)
                try:
                    if self.dev is not None and st.st_dev != self.dev:
                        self.skipped_mounts.append(rel)
                    else:
                        for name in sorted(os.listdir(src_fd)):
                            self.copy_at(src_fd, name, dst_fd, name, rel + "/" + name if rel else name, metas,
                                         anchor, anchor_rel + "/" + name)
                    # A directory's attributes after its entries (which change its mtime).
                    set_attrs_fd(dst_fd, meta)
                    self.blocks += os.fstat(dst_fd).st_blocks * 512
                finally:
                    os.close(dst_fd)
            finally:
                os.close(src_fd)
        else:
            target = os.readlink(sname, dir_fd=sfd) if kind == "l" else ""
            meta = _meta(st, _xattrs(_at(sfd, sname)), target)
            if kind == "l":
                os.symlink(target, dname, dir_fd=dfd)
            elif kind == "p":
                os.mkfifo(dname, 0o600, dir_fd=dfd)
            else:
                os.mknod(dname, stat.S_IFMT(st.st_mode) | 0o600, st.st_rdev, dir_fd=dfd)
            set_attrs_at(dfd, dname, meta)
            self.blocks += os.stat(dname, dir_fd=dfd, follow_symlinks=False).st_blocks * 512
        if metas is not None:
            metas[rel] = meta
        return True


# Records ------------------------------------------------------------------------------------------------------

_OPS = ("put", "del", "attrs")
_META_KEYS = {"kind": str, "mode": int, "uid": int, "gid": int, "size": int, "mtime_ns": int, "rdev": int,
              "target": str, "xattrs": (list, tuple)}


def _check_meta(meta, where):
    if not isinstance(meta, dict) or any(not isinstance(meta.get(key), kinds) for key, kinds in _META_KEYS.items()):
        raise SyncError("%s: attributes %r are not what a sync writes: refused" % (where, meta))
    return meta


def check_op(op, where):
    """One operation of a record as the engine wrote it, its path confined to the tree, else a SyncError."""
    if not isinstance(op, dict) or op.get("op") not in _OPS:
        raise SyncError("%s: operation %r is not put, del or attrs: refused" % (where, op))
    check_rel(op.get("path"), where, root_allowed=op["op"] == "attrs")
    if op["op"] == "attrs":
        _check_meta(op.get("new"), where)
        _check_meta(op.get("old"), where)
    return op


class Record:
    """A commit, generation or rollback record, checked as it is read: format 2 (a header line, then one operation
    a line, read as a stream) or format 1 (one JSON object, the operations inside)."""

    def __init__(self, state_fd, name, where):
        self.state_fd, self.name, self.where = state_fd, name, where
        with self._open() as handle:
            first = handle.readline()
        try:
            header = json.loads(first.decode("utf-8", "surrogateescape"))
        except ValueError as exc:
            raise SyncError("%s is not a record this engine wrote (%s): refused" % (where, exc)) from exc
        if not isinstance(header, dict):
            raise SyncError("%s is not a record this engine wrote: refused" % where)
        self.format = header.get("format", 1)
        self._inline = header.get("ops") if self.format == 1 else None
        for key, kinds in (("gen", int), ("keep", int)):
            if not isinstance(header.get(key), kinds) or header[key] < (0 if key == "gen" else 1):
                raise SyncError("%s: %s %r is not what a sync writes: refused" % (where, key, header.get(key)))
        if self.format not in (1, RECORD_FORMAT) or (self.format == 1 and not isinstance(self._inline, list)):
            raise SyncError("%s: format %r is not one this engine reads: refused" % (where, self.format))
        self.gen, self.keep = header["gen"], header["keep"]
        self.base, self.digest = header.get("base", ""), header.get("digest", "")
        # Every operation checked before any is applied: a record that names a path outside changes nothing.
        for _number, _op in self.ops():
            pass

    def _open(self):
        fd = os.open(self.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self.state_fd)
        return os.fdopen(fd, "rb")

    def ops(self):
        """(number, operation), in the record's order, each checked."""
        if self._inline is not None:
            for number, op in enumerate(self._inline):
                yield number, check_op(op, "%s, operation %d" % (self.where, number))
            return
        with self._open() as handle:
            handle.readline()
            for number, line in enumerate(handle):
                try:
                    op = json.loads(line.decode("utf-8", "surrogateescape"))
                except ValueError as exc:
                    raise SyncError("%s, operation %d is not JSON: refused" % (self.where, number)) from exc
                yield number, check_op(op, "%s, operation %d" % (self.where, number))


def _header(gen, keep, digest, base, counts):
    return {"format": RECORD_FORMAT, "gen": gen, "keep": keep, "digest": digest, "made": time.time(),
            "base": base, "operations": counts}


# The backing's state -------------------------------------------------------------------------------------------

def _check_trusted(fd, path):
    """PATH (open as FD) root's and writable by root alone, else a SyncError that names what it is."""
    st = os.fstat(fd)
    if st.st_uid != 0 or st.st_mode & 0o022:
        raise SyncError("%s is owned by uid %d, group %d, mode %04o: a backing and its %s must be root's and "
                        "writable by root alone (whoever else can write it can make this helper change any file): "
                        "refused; fix: chown root:root %s && chmod go-w %s, after checking what it holds"
                        % (path, st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode), STATE, path, path))


class Backing:
    """A backing directory, reached by fds from its top: the top and .persist-delta checked (root's, not
    writable by others), current a symlink to a plain snap-* name."""

    def __init__(self, backing):
        self.root = backing
        self.state = os.path.join(backing, STATE)
        self.stage = os.path.join(self.state, "stage")
        self.commit = os.path.join(self.state, "commit.json")
        self.rollback_record = os.path.join(self.state, "rollback.json")
        self._lock = None
        self.root_fd = os.open(backing, _DIR_FLAGS)
        self.state_fd = None
        self._current_fd = None
        self.current_name = ""
        try:
            _check_trusted(self.root_fd, backing)
            try:
                self.state_fd = _open_dir_at(self.root_fd, STATE)
            except FileNotFoundError:
                return
            _check_trusted(self.state_fd, self.state)
        except BaseException:
            self.close()
            raise

    def close(self):
        self.unlock()
        for name in ("_current_fd", "state_fd", "root_fd"):
            if getattr(self, name) is not None:
                os.close(getattr(self, name))
                setattr(self, name, None)

    def make_state(self):
        if self.state_fd is None:
            try:
                os.mkdir(STATE, 0o700, dir_fd=self.root_fd)
            except FileExistsError:
                pass
            self.state_fd = _open_dir_at(self.root_fd, STATE)
            _check_trusted(self.state_fd, self.state)

    def has_current(self):
        return _lexists_at(self.root_fd, "current")

    def current_fd(self):
        """current's directory, opened from the top by its plain snap-* name (opened once, kept open)."""
        if self._current_fd is None:
            where = os.path.join(self.root, "current")
            try:
                name = os.readlink("current", dir_fd=self.root_fd)
            except FileNotFoundError as exc:
                raise SyncError("%s has no current copy: the first copy is the helper's" % self.root) from exc
            except OSError as exc:
                raise SyncError("%s is not a symbolic link (%s): current must name a snap-* directory of the "
                                "backing: refused" % (where, exc.strerror)) from exc
            if not _SNAPSHOT_NAME.fullmatch(name):
                raise SyncError("%s points to %r, not to a plain snap-* name inside the backing: refused"
                                % (where, name))
            try:
                self._current_fd = _open_dir_at(self.root_fd, name)
            except OSError as exc:
                raise SyncError("%s points to %s, which is not a directory of the backing (%s): refused"
                                % (where, name, exc.strerror)) from exc
            self.current_name = name
        return self._current_fd

    def current(self):
        """The path of current's directory (for messages and the tests)."""
        self.current_fd()
        return os.path.join(self.root, self.current_name)

    def lock(self):
        """One sync, roll-forward or verify of a backing at a time."""
        self.make_state()
        fd = os.open("lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=self.state_fd)
        self._lock = os.fdopen(fd, "r+b")
        fcntl.flock(self._lock, fcntl.LOCK_EX)

    def unlock(self):
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def lock_to_read(self):
        """A reader's lock, which writes nothing: shared, on the lock file if a sync ever made one."""
        if self.state_fd is None:
            return
        try:
            fd = os.open("lock", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self.state_fd)
        except FileNotFoundError:
            return
        self._lock = os.fdopen(fd, "rb")
        fcntl.flock(self._lock, fcntl.LOCK_SH)

    def exists(self, name):
        return self.state_fd is not None and _lexists_at(self.state_fd, name)

    def remove(self, name):
        if self.state_fd is not None:
            remove_at(self.state_fd, name)

    def open_dir(self, name, create=False):
        """A directory of the state (stage, undo-N), opened with O_NOFOLLOW; None if it is not there."""
        if create:
            try:
                os.mkdir(name, 0o700, dir_fd=self.state_fd)
            except FileExistsError:
                pass
        try:
            return _open_dir_at(self.state_fd, name)
        except FileNotFoundError:
            return None

    def record(self, name):
        return Record(self.state_fd, name, os.path.join(self.state, name))

    def pending(self):
        """('commit' or 'rollback', its record) of a run that was cut short after its commit point, or None."""
        for kind, name in (("commit", "commit.json"), ("rollback", "rollback.json")):
            if self.exists(name):
                return kind, self.record(name)
        return None

    @staticmethod
    def undo(gen):
        return "undo-%d" % gen

    @staticmethod
    def record_name(gen):
        return "gen-%d.json" % gen

    def generations(self):
        """The numbers of the generation records present, oldest first."""
        found = []
        for name in os.listdir(self.state_fd) if self.state_fd is not None else ():
            if name.startswith("gen-") and name.endswith(".json") and name[4:-5].isdigit():
                found.append(int(name[4:-5]))
        return sorted(found)

    def head(self):
        gens = self.generations()
        return gens[-1] if gens else 0

    # Recovery: what every entry point that writes does first, under the lock.
    def recover(self):
        """Finish what a killed run committed (roll forward, or a rollback), or throw away what it had not."""
        if self.exists("commit.json"):
            record = self.record("commit.json")
            apply_record(self, record)
            self.finalize(record)
            return "rolled forward to generation %d" % record.gen
        if self.exists("rollback.json"):
            record = self.record("rollback.json")
            revert_record(self, record)
            self.finish_rollback(record)
            return "finished the rollback of generation %d" % record.gen
        for name in ("commit.json.tmp", "ops.tmp", "rollback.json.tmp"):
            self.remove(name)
        done = ""
        if self.exists("stage"):
            # Never committed: current was not touched; the stage is all this sync wrote.
            self.remove("stage")
            done = "discarded an uncommitted stage"
        head = self.head()
        if head:
            # A run killed after its record but before its pruning.
            self.prune(self.record(self.record_name(head)).keep)
        return done

    def finalize(self, record):
        """After the apply: on the disk, recorded as done, and what is beyond KEEP removed."""
        # Every rename of the apply on the disk before the commit record goes: without it a file system that
        # reorders metadata could keep the record's end and lose some of the renames.
        _syncfs_fd(self.root_fd, self.root)
        kill_point("applied")
        # The stage is empty now; gone before the record is done, so that a stage without a commit record is
        # always one never committed.
        self.remove("stage")
        # Not flushed here: lost at a power cut, the commit record is there again and its apply is done again (all
        # of it done already), so the flush of the next sync does.
        os.rename("commit.json", self.record_name(record.gen), src_dir_fd=self.state_fd, dst_dir_fd=self.state_fd)
        kill_point("recorded")
        self.prune(record.keep)
        kill_point("pruned")

    def prune(self, keep):
        """Keep the reverse deltas of the newest KEEP-1 generations and the records of the newest KEEP: the oldest
        one kept has its record too, so that after a rollback to it current still has a digest to be checked by."""
        gens = self.generations()
        head = gens[-1] if gens else 0
        for gen in gens:
            if gen <= head - (keep - 1):
                self.remove(self.undo(gen))
            if gen <= head - keep:
                os.unlink(self.record_name(gen), dir_fd=self.state_fd)
        gens = set(self.generations())
        for name in os.listdir(self.state_fd):
            if name.startswith("undo-") and name[5:].isdigit() and int(name[5:]) not in gens:
                self.remove(name)

    def reverse_deltas(self):
        """How many older generations the backing keeps besides current."""
        return len([gen for gen in self.generations() if self.exists(self.undo(gen))])

    def forget(self):
        """The records and reverse deltas go (current is kept): they describe a copy that is not current."""
        for name in os.listdir(self.state_fd):
            if name.startswith("undo-") or (name.startswith("gen-") and name.endswith(".json")):
                self.remove(name)
        os.fsync(self.state_fd)

    def write_rollback_record(self, gen):
        """gen-GEN.json copied as rollback.json, durably: the rollback's commit point."""
        src = os.open(self.record_name(gen), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self.state_fd)
        try:
            dst = os.open("rollback.json.tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                          0o600, dir_fd=self.state_fd)
            try:
                while True:
                    chunk = os.read(src, COPY_CHUNK)
                    if not chunk:
                        break
                    os.write(dst, chunk)
                os.fsync(dst)
            finally:
                os.close(dst)
        finally:
            os.close(src)
        os.rename("rollback.json.tmp", "rollback.json", src_dir_fd=self.state_fd, dst_dir_fd=self.state_fd)
        os.fsync(self.state_fd)

    def finish_rollback(self, record):
        self.remove(self.undo(record.gen))
        self.remove(self.record_name(record.gen))
        os.fsync(self.state_fd)
        os.unlink("rollback.json", dir_fd=self.state_fd)
        os.fsync(self.state_fd)


# Applying and reverting a record -------------------------------------------------------------------------------

def apply_record(backing, record):
    """Make current generation record.gen from current and the stage; any prefix of it may be done already. Every
    entry is reached from current's fd, each parent opened with O_NOFOLLOW."""
    cur = backing.current_fd()
    undo = backing.open_dir(backing.undo(record.gen), create=True)
    stage = backing.open_dir("stage")
    try:
        for number, op in record.ops():
            rel = op["path"]
            where = "%s, operation %d" % (record.where, number)
            if op["op"] == "attrs" and rel == "":
                set_attrs_at(cur, ".", op["new"])
                kill_point("apply:%d" % (number + 1))
                continue
            parent, name = open_parent(cur, rel, where)
            try:
                # Moved aside under the operation's number: the reverse delta needs no directories of its own.
                aside = str(number)
                if op["op"] == "put":
                    if stage is not None and _lexists_at(stage, aside):
                        if _lexists_at(parent, name):
                            os.rename(name, aside, src_dir_fd=parent, dst_dir_fd=undo)
                        os.rename(aside, name, src_dir_fd=stage, dst_dir_fd=parent)
                elif op["op"] == "del":
                    if _lexists_at(parent, name):
                        os.rename(name, aside, src_dir_fd=parent, dst_dir_fd=undo)
                else:
                    set_attrs_at(parent, name, op["new"])
            finally:
                os.close(parent)
            kill_point("apply:%d" % (number + 1))
    finally:
        os.close(undo)
        if stage is not None:
            os.close(stage)


def revert_entries(record, tree_fd, aside_fd, kill_name=""):
    """The entries of the tree TREE_FD as they were before RECORD, from the ones it moved aside (in ASIDE_FD, by
    operation number), newest operation first; each step can be done again after a kill."""
    entries = [(number, op["path"], op["op"] == "put" and not op.get("had_old"))
               for number, op in record.ops() if op["op"] != "attrs"]
    for step, (number, rel, was_new) in enumerate(reversed(entries), 1):
        parent, name = open_parent(tree_fd, rel, record.where)
        try:
            aside = str(number)
            if _lexists_at(aside_fd, aside):
                remove_at(parent, name)
                os.rename(aside, name, src_dir_fd=aside_fd, dst_dir_fd=parent)
            elif was_new:
                remove_at(parent, name)
        finally:
            os.close(parent)
        if kill_name:
            kill_point("%s:%d" % (kill_name, step))


def revert_attrs(record, tree_fd):
    """The old attributes RECORD replaced, directories last as in the apply (after the renames that set mtimes)."""
    for _number, op in record.ops():
        if op["op"] != "attrs":
            continue
        if op["path"] == "":
            set_attrs_at(tree_fd, ".", op["old"])
            continue
        parent, name = open_parent(tree_fd, op["path"], record.where)
        try:
            set_attrs_at(parent, name, op["old"])
        finally:
            os.close(parent)


def revert_record(backing, record):
    """Make current the generation before record.gen again, in place, from its reverse delta."""
    undo = backing.open_dir(backing.undo(record.gen), create=True)
    try:
        revert_entries(record, backing.current_fd(), undo, "rollback")
    finally:
        os.close(undo)
    revert_attrs(record, backing.current_fd())


# The sync: two sorted walks merged ------------------------------------------------------------------------------

def _peak_rss_bytes():
    """This process's own peak resident memory (VmHWM: its image only, not what it inherited at fork)."""
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _own_write_bytes():
    with open("/proc/self/io", encoding="ascii") as handle:
        values = dict(line.split(": ") for line in handle.read().splitlines())
    return int(values["write_bytes"])


class _Merge:
    """The walk of MOUNT and of current merged into the operations that make current equal to the mount; each put
    entry copied into the stage as it is found, each operation written to ops.tmp (see the module's docstring).

    put PATH: the entry is new, changed in content, type, symlink target, device number or hard-link group: the
      staged copy replaces it; a directory that is new (or was not a directory) is staged and put whole.
    del PATH: gone from the mount; a directory goes whole.
    attrs PATH: mode, owner or xattrs changed only, or a directory whose entries changed (its mtime): set in place
      (absolute values, so doing it again is harmless). An inode that has links outside current (the helper's older
      hard-linked copies) is put instead, so that no other copy changes with it.
    Files with more than one link wait for the end, when both trees' link groups are known."""

    def __init__(self, backing, mount_fd, excluded):
        self.backing, self.mount_fd = backing, mount_fd
        self.src = Walk(mount_fd, excluded)
        self.cur = Walk(backing.current_fd())
        self.copier = Copier(excluded, self.src.dev)
        self.new_digest, self.old_digest = TreeDigest(), TreeDigest()
        self.cur_links = {}  # path -> links, of current's files with more than one
        self.waiting = []  # (path, new meta, old meta) of the files whose links decide
        self.open_dirs = []  # [path, new meta, old meta, entries changed, has waiting files]
        self.dir_candidates = []  # [path, new, old, changed]: directories, children first
        self.counts = {}
        self.number = 0
        self.staged_entries = 0
        self.stage_fd = None
        self.ops_file = None

    def close(self):
        self.src.close()
        self.cur.close()
        if self.stage_fd is not None:
            os.close(self.stage_fd)
            self.stage_fd = None
        if self.ops_file is not None:
            self.ops_file.close()
            self.ops_file = None

    def _write(self, op):
        if self.ops_file is None:
            fd = os.open("ops.tmp", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                         dir_fd=self.backing.state_fd)
            self.ops_file = os.fdopen(fd, "wb")
        self.ops_file.write(json.dumps(op).encode("utf-8", "surrogateescape") + b"\n")
        self.counts[op["op"]] = self.counts.get(op["op"], 0) + 1
        self.number += 1

    def _dirty(self):
        if self.open_dirs:
            self.open_dirs[-1][3] = True

    def _close_dirs(self, rel):
        while self.open_dirs and not (self.open_dirs[-1][0] == "" or rel.startswith(self.open_dirs[-1][0] + "/")):
            self._finish_dir(self.open_dirs.pop())

    def _finish_dir(self, entry):
        rel, new, old, changed, waiting = entry
        changed = changed or any(new[key] != old[key] for key in _ATTRS + ("mtime_ns",))
        if changed or waiting:
            self.dir_candidates.append([rel, new, old, changed])

    def _put(self, rel, parent_fd, name, had_old):
        """Copy into stage/N; the put (or a del, if it is gone since the walk) written. The new tree's digest takes
        what was copied."""
        if self.stage_fd is None:
            self.stage_fd = self.backing.open_dir("stage", create=True)
        metas = {}
        copied = self.copier.copy_at(parent_fd, name, self.stage_fd, str(self.number), rel, metas, self.stage_fd,
                                     str(self.number))
        if not copied:
            if had_old:
                self._write({"op": "del", "path": rel})
            return False
        self._write({"op": "put", "path": rel, "had_old": had_old})
        self.staged_entries += len(metas)
        return metas

    def _digest_copied(self, metas):
        for rel in sorted(metas, key=_key):
            inode, links = self.copier.inodes.pop(rel, (None, 1))
            self.new_digest.add(rel, metas[rel], inode, links)

    def _only_in_mount(self, rel, meta, _st, parent_fd, name):
        self._dirty()
        if meta["kind"] == "d":
            self.src.skip()
        metas = self._put(rel, parent_fd, name, False)
        if metas:
            self._digest_copied(metas)

    def _in_both(self, new_entry, old_entry):
        rel, new, st, parent_fd, name = new_entry
        old, old_st = old_entry[1], old_entry[2]
        if new["kind"] != old["kind"] or (new["kind"] != "d" and (
                new["size"], new["mtime_ns"], new["target"], new["rdev"]) != (
                old["size"], old["mtime_ns"], old["target"], old["rdev"])):
            self._dirty()
            if new["kind"] == "d":
                self.src.skip()
            metas = self._put(rel, parent_fd, name, True)
            if metas:
                self._digest_copied(metas)
            return old["kind"] == "d"
        if new["kind"] == "d":
            self.new_digest.add(rel, new)
            self.open_dirs.append([rel, new, old, False, False])
            return False
        self.new_digest.add(rel, new, st.st_ino, st.st_nlink)
        if new["kind"] == "f" and (st.st_nlink > 1 or old_st.st_nlink > 1):
            self.waiting.append((rel, new, old))
            if self.open_dirs:
                self.open_dirs[-1][4] = True
        elif any(new[key] != old[key] for key in _ATTRS):
            self._write({"op": "attrs", "path": rel, "new": new, "old": old})
        return False

    def run(self):
        src_entry, cur_entry = next(self.src), next(self.cur)
        self._see_current(cur_entry)
        self._in_both(src_entry, cur_entry)
        src_entry, cur_entry = next(self.src, None), next(self.cur, None)
        gone_below = None  # a directory of current that goes whole: what it holds goes with it
        while src_entry is not None or cur_entry is not None:
            _check_stop("during the walk, before the commit point")
            if cur_entry is not None and gone_below is not None and cur_entry[0].startswith(gone_below):
                self._see_current(cur_entry)
                cur_entry = next(self.cur, None)
                continue
            gone_below = None
            src_key = _key(src_entry[0]) if src_entry is not None else None
            cur_key = _key(cur_entry[0]) if cur_entry is not None else None
            if cur_entry is None or (src_entry is not None and src_key < cur_key):
                self._close_dirs(src_entry[0])
                self._only_in_mount(*src_entry)
                src_entry = next(self.src, None)
            elif src_entry is None or cur_key < src_key:
                self._close_dirs(cur_entry[0])
                self._see_current(cur_entry)
                self._dirty()
                self._write({"op": "del", "path": cur_entry[0]})
                if cur_entry[1]["kind"] == "d":
                    gone_below = cur_entry[0] + "/"
                cur_entry = next(self.cur, None)
            else:
                self._close_dirs(src_entry[0])
                self._see_current(cur_entry)
                if self._in_both(src_entry, cur_entry):
                    gone_below = cur_entry[0] + "/"
                src_entry, cur_entry = next(self.src, None), next(self.cur, None)
        self._close_dirs("\x00")
        while self.open_dirs:
            self._finish_dir(self.open_dirs.pop())
        self._decide_links()

    def _see_current(self, entry):
        rel, meta, st = entry[0], entry[1], entry[2]
        self.old_digest.add(rel, meta, st.st_ino, st.st_nlink)
        if meta["kind"] == "f" and st.st_nlink > 1:
            self.cur_links[rel] = st.st_nlink

    def _decide_links(self):
        """The files that wait for the link groups: put if their group changed (or their inode has links outside
        current and their attributes changed), attrs if only those did; then the directories' attributes."""
        src_groups, cur_groups = self.new_digest.groups(), self.old_digest.groups()
        dirty_parents = set()
        for rel, new, old in self.waiting:
            attrs_changed = any(new[key] != old[key] for key in _ATTRS)
            outside = self.cur_links.get(rel, 1) != len(cur_groups.get(rel, (rel,)))
            if src_groups.get(rel) != cur_groups.get(rel) or (attrs_changed and outside):
                _check_stop("during the copy, before the commit point")
                parent, name = open_parent(self.mount_fd, rel, "the mount")
                try:
                    self._put(rel, parent, name, True)
                finally:
                    os.close(parent)
                self.copier.inodes.pop(rel, None)  # in the digest already, from the walk
                dirty_parents.add(rel.rpartition("/")[0])
            elif attrs_changed:
                self._write({"op": "attrs", "path": rel, "new": new, "old": old})
        self.waiting = []
        # Directories last, children first: a rename in a directory sets its mtime, so its attributes follow.
        for rel, new, old, changed in self.dir_candidates:
            if changed or rel in dirty_parents:
                self._write({"op": "attrs", "path": rel, "new": new, "old": old})
        if self.ops_file is not None:
            self.ops_file.close()
            self.ops_file = None


def _write_commit(backing, header):
    """commit.json.tmp: the header line, then ops.tmp's lines (not flushed: the syncfs before the commit point
    does, with the stage). Its size."""
    data = json.dumps(header).encode("utf-8") + b"\n"
    out = os.open("commit.json.tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                  dir_fd=backing.state_fd)
    size = 0
    try:
        size += os.write(out, data)
        if backing.exists("ops.tmp"):
            spill = os.open("ops.tmp", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=backing.state_fd)
            try:
                while True:
                    chunk = os.read(spill, COPY_CHUNK)
                    if not chunk:
                        break
                    view = memoryview(chunk)
                    while view:
                        written = os.write(out, view)
                        view, size = view[written:], size + written
            finally:
                os.close(spill)
    finally:
        os.close(out)
    backing.remove("ops.tmp")
    return size


def _discard(backing):
    """Before the commit point: what this sync wrote goes; current was not touched."""
    for name in ("stage", "ops.tmp", "commit.json.tmp"):
        backing.remove(name)


def sync(mount, backing_dir, keep=2, excludes=()):
    """One sync of MOUNT into BACKING; returns its report. A SyncError leaves current a whole generation; a signal
    (TERM, INT, HUP) stops it at a safe point with a Stopped error."""
    with HELD:
        backing = Backing(backing_dir)
        try:
            return _sync(backing, mount, backing_dir, keep, excludes)
        finally:
            backing.close()


def _sync(backing, mount, backing_dir, keep, excludes):
    started, own = time.monotonic(), _own_write_bytes()
    _raise_open_files_limit()
    backing.lock()
    recovered = backing.recover()
    if not os.path.lexists(os.path.join(backing_dir, "current")):
        return first_copy(mount, backing_dir, excludes)
    backing.current_fd()
    marks = [("start", time.monotonic())]
    head = backing.head()
    warning = ""
    base = backing.current_name
    head_record = backing.record(backing.record_name(head)) if head else None
    if head_record is not None and head_record.base != base:
        # current is another copy than the one the records describe (a sync without this helper made it): their
        # reverse deltas do not apply to it.
        backing.forget()
        warning = "current is %s, not the copy generation %d changed: its older generations are dropped" % (base, head)
        head_record = None
    head = backing.head()
    mount_fd = os.open(mount, _DIR_FLAGS)
    merge = _Merge(backing, mount_fd, exclude_matcher(excludes))
    try:
        try:
            merge.run()
            new_digest, old_digest = merge.new_digest.hexdigest(), merge.old_digest.hexdigest()
            merge.close()
            kill_point("planned")
            marks.append(("walk, plan and stage", time.monotonic()))
            # A record of the format before this one has a digest computed otherwise: it cannot say current changed.
            if head_record is not None and head_record.format >= RECORD_FORMAT and head_record.digest != old_digest:
                warning = "current differs from what generation %d recorded: changed outside persist" % head
            skipped = sorted(set(merge.src.skipped_mounts + merge.copier.skipped_mounts), key=_key)
            report = {"result": "ok", "operations": merge.counts, "staged_entries": merge.staged_entries,
                      "staged_bytes": merge.copier.blocks, "recovered": recovered, "warning": warning,
                      "skipped_mounts": skipped}
            if not merge.number and head:
                # Nothing changed: no new generation, so no earlier snapshot is pruned for an identical one.
                _discard(backing)
                report.update(generation=head, record_bytes=0, written_bytes=0,
                              process_write_bytes=_own_write_bytes() - own, peak_rss_bytes=_peak_rss_bytes(),
                              seconds=round(time.monotonic() - started, 3), reverse_deltas=backing.reverse_deltas())
                return report
            gen = head + 1
            record_bytes = _write_commit(backing, _header(gen, keep, new_digest, base, merge.counts))
            marks.append(("record", time.monotonic()))
            kill_point("staged")
            _check_stop("before the commit point")
            _syncfs_fd(backing.root_fd, backing_dir)
            marks.append(("syncfs", time.monotonic()))
            kill_point("synced")
            _check_stop("before the commit point")
            os.rename("commit.json.tmp", "commit.json", src_dir_fd=backing.state_fd, dst_dir_fd=backing.state_fd)
            os.fsync(backing.state_fd)
        except Stopped as exc:
            _discard(backing)
            raise Stopped("%s: what this sync staged is removed; current is generation %d, unchanged"
                          % (exc, head)) from exc
        except OSError as exc:
            _discard(backing)
            raise SyncError("copying %s to %s failed: %s; current is unchanged" % (mount, backing.stage, exc)) from exc
        finally:
            merge.close()
            os.close(mount_fd)
    except BaseException:
        if not backing.exists("commit.json"):
            _discard(backing)
        raise
    kill_point("committed")
    marks.append(("commit", time.monotonic()))
    # Applied from the record as a roll-forward reads it back, so that both take the same path.
    record = backing.record("commit.json")
    try:
        apply_record(backing, record)
        marks.append(("apply", time.monotonic()))
        backing.finalize(record)
    except OSError as exc:
        raise SyncError("applying generation %d failed: %s; it is committed: the next sync or restore "
                        "finishes it" % (gen, exc)) from exc
    marks.append(("syncfs, record, prune", time.monotonic()))
    if HELD.signum:
        raise Stopped("stopped by %s after generation %d was committed: it was applied and recorded first; current "
                      "is generation %d, whole" % (HELD.name(), gen, gen))
    report.update(generation=gen, record_bytes=record_bytes, written_bytes=merge.copier.blocks + record_bytes,
                  process_write_bytes=_own_write_bytes() - own, peak_rss_bytes=_peak_rss_bytes(),
                  seconds=round(time.monotonic() - started, 3),
                  steps=dict((name, round(end - begin, 3)) for (_name, begin), (name, end) in zip(marks, marks[1:])),
                  reverse_deltas=backing.reverse_deltas())
    return report


# Restoring ------------------------------------------------------------------------------------------------------

def _apply_to_copy(backing, record, dest_fd):
    """DEST, a copy of a current that RECORD's apply may have changed in part, made what the apply makes: the
    entries still in the stage copied in, the ones removed removed, the attributes set; the backing is only read."""
    copier = Copier()
    # A hard-link group that the kill split between current and the stage: the staged files are linked to the copies
    # of the ones already moved into current (which have their inode: nothing else in current does).
    walk = Walk(backing.current_fd())
    try:
        for rel, meta, st, _parent, _name in walk:
            if meta["kind"] == "f" and st.st_nlink > 1:
                copier.linked.setdefault((st.st_dev, st.st_ino), (dest_fd, rel))
    finally:
        walk.close()
    stage = backing.open_dir("stage")
    try:
        for number, op in record.ops():
            rel = op["path"]
            if op["op"] == "attrs" and rel == "":
                set_attrs_at(dest_fd, ".", op["new"])
                continue
            parent, name = open_parent(dest_fd, rel, record.where)
            try:
                if op["op"] == "put":
                    if stage is not None and _lexists_at(stage, str(number)):
                        remove_at(parent, name)
                        copier.copy_at(stage, str(number), parent, name, rel, None, dest_fd, rel)
                elif op["op"] == "del":
                    remove_at(parent, name)
                else:
                    set_attrs_at(parent, name, op["new"])
            finally:
                os.close(parent)
    finally:
        if stage is not None:
            os.close(stage)


def _revert_copy(backing, record, dest_fd):
    """DEST, a copy of the generation RECORD made, made the one before it from its reverse delta, which is copied,
    not moved: the backing is only read."""
    # The moved-aside entries come back through one copier (which keeps the links among them) into a scratch
    # directory on DEST's file system, then each is renamed into place, newest operation first.
    scratch = ".persist-delta-restore"
    root_times = os.fstat(dest_fd)
    os.mkdir(scratch, 0o700, dir_fd=dest_fd)
    scratch_fd = _open_dir_at(dest_fd, scratch)
    undo = backing.open_dir(backing.undo(record.gen))
    try:
        copier = Copier()
        for name in sorted(os.listdir(undo)):
            copier.copy_at(undo, name, scratch_fd, name, name, None, scratch_fd, name)
        revert_entries(record, dest_fd, scratch_fd)
    finally:
        os.close(undo)
        os.close(scratch_fd)
    os.rmdir(scratch, dir_fd=dest_fd)
    # The scratch directory came and went in DEST's root: its mtime back (a record's attrs of it follow).
    os.utime(dest_fd, ns=(root_times.st_atime_ns, root_times.st_mtime_ns))
    revert_attrs(record, dest_fd)


def _roll_forward_to_restore(backing_dir):
    """A sync or rollback of BACKING_DIR cut short after its commit point, finished in the backing before a restore
    reads it, so that the copy restored is current: (what it did, '') or, where the backing cannot be written (full,
    read-only, failing), ('', why not), and the restore applies the record to its copy alone. A signal meanwhile
    waits for the roll-forward to end, then stops the restore."""
    state = os.path.join(backing_dir, STATE)
    if not any(os.path.lexists(os.path.join(state, name)) for name in ("commit.json", "rollback.json")):
        return "", ""  # nothing pending: the restore writes nothing
    with HELD:
        try:
            done, why = roll_forward(backing_dir), ""
        except OSError as exc:
            done, why = "", ("could not roll %s forward (%s): what was cut short is applied to the restored copy "
                             "alone, and current has it once the next sync rolls forward" % (backing_dir, exc))
        if HELD.signum:
            raise Stopped("stopped by %s before the restore copied anything: %s"
                          % (HELD.name(), done or "nothing was rolled forward"))
    return done, why


def restore(backing_dir, dest, back=0):
    """Current, or the generation BACK before it, into the empty directory DEST. A sync cut short after its commit
    point is rolled forward first, so that DEST is current; where the backing cannot be written, it is applied to the
    copy alone (a full backing disk must not keep the data from the mount), and the next sync rolls forward."""
    recovered, warning = _roll_forward_to_restore(backing_dir)
    backing = Backing(backing_dir)
    try:
        backing.lock_to_read()
        pending = backing.pending()
        if back and pending:
            raise SyncError("%s holds a %s cut short that could not be finished (%s): run a sync first (persist "
                            "sync TOKEN), then restore %d back" % (backing_dir, pending[0], warning, back))
        head = backing.head()
        cur = backing.current_fd()
        if back and head and backing.record(backing.record_name(head)).base != backing.current_name:
            raise SyncError("%s: current is not the copy its generations changed (a sync without persist-delta.py "
                            "made it): no older generation to restore" % backing_dir)
        wanted = list(range(head, head - back, -1))
        missing = [gen for gen in wanted if not backing.exists(backing.undo(gen))]
        if back and (missing or head - back < 0):
            raise SyncError("%s keeps no reverse delta of generation(s) %s: cannot restore %d back"
                            % (backing_dir, missing or [head - back], back))
        dest_fd = os.open(dest, _DIR_FLAGS)
        report = {"result": "ok", "recovered": recovered, "warning": warning}
        try:
            Copier().copy_contents(cur, dest_fd, None)
            if pending and pending[0] == "commit":
                _apply_to_copy(backing, pending[1], dest_fd)
                report.update(generation=pending[1].gen, pending="commit")
                return report
            if pending:
                # A rollback cut short: the entries it moved back are in current, the others still in its reverse
                # delta.
                _revert_copy(backing, pending[1], dest_fd)
                report.update(generation=pending[1].gen - 1, pending="rollback")
                return report
            for gen in wanted:
                _revert_copy(backing, backing.record(backing.record_name(gen)), dest_fd)
            report.update(generation=head - back)
            return report
        finally:
            os.close(dest_fd)
    finally:
        backing.close()


# The other commands ----------------------------------------------------------------------------------------------

def roll_forward(backing_dir):
    """Finish a sync (or rollback) of BACKING_DIR cut short after its commit point, before current is read as a
    copy; what it did, or '' when nothing was pending."""
    if not os.path.lexists(os.path.join(backing_dir, STATE)):
        return ""  # never synced in place: nothing to roll forward (the plan checks the backing's owner and mode)
    with HELD:
        backing = Backing(backing_dir)
        try:
            if backing.state_fd is None:
                return ""
            backing.lock()
            return backing.recover()
        finally:
            backing.close()


def verify(backing_dir):
    """Roll forward, then walk current: is it exactly the tree the newest record describes?"""
    with HELD:
        backing = Backing(backing_dir)
        try:
            backing.lock()
            recovered = backing.recover()
            head = backing.head()
            if not head:
                return {"result": "unknown", "detail": "no generation recorded yet", "recovered": recovered}
            record = backing.record(backing.record_name(head))
            if record.format < RECORD_FORMAT:
                return {"result": "unknown", "generation": head, "recovered": recovered,
                        "detail": "generation %d was recorded by an older persist-delta.py, whose digest this one "
                                  "does not compute: the next sync records one" % head}
            same = record.digest == digest_of(backing.current_fd())
            return {"result": "ok" if same else "differs", "generation": head, "recovered": recovered}
        finally:
            backing.close()


def rollback(backing_dir):
    """Current becomes the previous generation again (its reverse delta moved back), under a record of its own."""
    with HELD:
        backing = Backing(backing_dir)
        try:
            backing.lock()
            backing.recover()
            head = backing.head()
            if not head or not backing.exists(backing.undo(head)):
                raise SyncError("%s keeps no reverse delta of its newest generation" % backing_dir)
            record = backing.record(backing.record_name(head))
            _check_stop("before the rollback began: current is generation %d, unchanged" % head)
            backing.write_rollback_record(head)
            revert_record(backing, record)
            _syncfs_fd(backing.root_fd, backing_dir)
            backing.finish_rollback(record)
            if HELD.signum:
                raise Stopped("stopped by %s after the rollback's record was written: it was finished first; current "
                              "is generation %d, whole" % (HELD.name(), head - 1))
            return {"result": "ok", "generation": head - 1}
        finally:
            backing.close()


# The first copy --------------------------------------------------------------------------------------------------

def first_copy(mount, backing_dir, excludes=()):
    """The backing's first copy of MOUNT, whole, while it has no current: copied into BACKING/.new-STAMP by the
    Copier (directory descriptors, nested mounts and EXCLUDES left out), flushed, renamed to snap-STAMP, then current,
    a link renamed over it, and the directory flushed. A kill, a signal (held by sync(): a Stopped error before the
    switch) or an error at any instant leaves no current, or a complete one; what the failed copy made is removed
    unless current names it. Called by sync() under the backing's lock."""
    started = time.monotonic()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + ".%09dZ" % (time.time_ns() % 10**9)
    new = os.path.join(backing_dir, ".new-" + stamp)
    snap = os.path.join(backing_dir, "snap-" + stamp)
    link = os.path.join(backing_dir, ".current-" + stamp)
    current = os.path.join(backing_dir, "current")
    copier = Copier(exclude_matcher(excludes))
    root_fd = os.open(mount, _DIR_FLAGS)
    new_fd = None
    try:
        os.mkdir(new, 0o700)
        new_fd = os.open(new, _DIR_FLAGS)
        copier.copy_contents(root_fd, new_fd, None)
        kill_point("first:copied")
        _check_stop("during the first copy: no current was made")
        _syncfs(new)
        os.rename(new, snap)
        os.symlink("snap-" + stamp, link)
        os.rename(link, current)
        _fsync_dir(backing_dir)
    except BaseException:
        named = os.readlink(current) if os.path.islink(current) else None
        backing_fd = os.open(backing_dir, _DIR_FLAGS)
        try:
            for made in (link, new, snap):
                if os.path.basename(made) != named:
                    remove_at(backing_fd, os.path.basename(made))
        finally:
            os.close(backing_fd)
        raise
    finally:
        os.close(root_fd)
        if new_fd is not None:
            os.close(new_fd)
    return {"result": "ok", "first_copy": True, "snapshot": "snap-" + stamp, "generation": 0, "operations": {},
            "staged_entries": 0, "staged_bytes": copier.blocks, "record_bytes": 0, "written_bytes": copier.blocks,
            "seconds": round(time.monotonic() - started, 3), "recovered": "", "warning": "",
            "reverse_deltas": 0, "skipped_mounts": sorted(copier.skipped_mounts)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("sync")
    one.add_argument("mount")
    one.add_argument("backing")
    one.add_argument("--keep", type=int, default=2)
    one.add_argument("--exclude", dest="filters", action=_Filter, default=[], metavar="PATTERN")
    one.add_argument("--include", dest="filters", action=_Filter, default=[], metavar="PATTERN")
    one = sub.add_parser("restore")
    one.add_argument("backing")
    one.add_argument("dest")
    one.add_argument("--back", type=int, default=0)
    sub.add_parser("verify").add_argument("backing")
    sub.add_parser("rollback").add_argument("backing")
    args = parser.parse_args(argv)
    try:
        if args.command == "sync":
            if args.keep < 1:
                raise SyncError("--keep %d: keep at least 1 (current)" % args.keep)
            report = sync(args.mount, args.backing, args.keep, args.filters)
        elif args.command == "restore":
            report = restore(args.backing, args.dest, args.back)
        elif args.command == "verify":
            report = verify(args.backing)
        else:
            report = rollback(args.backing)
    except (SyncError, OSError) as exc:
        sys.stdout.write(json.dumps({"result": "failed", "stopped": isinstance(exc, Stopped), "error": str(exc)})
                         + "\n")
        return 1
    sys.stdout.write(json.dumps(report) + "\n")
    return 0 if report["result"] in ("ok", "unknown") else 1


if __name__ == "__main__":
    raise SystemExit(main())
