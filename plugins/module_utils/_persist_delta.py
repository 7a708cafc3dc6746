# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The persist helper's copy (issue 35): a sync that writes only what changed, staged and rolled forward.

Installed on the host beside the persist helper (roles/mount/files/persist.sh runs it with python3 for every sync
after the first, and for a restore while a sync is half-way); the executor imports it to roll a backing forward
before it reads current. It needs only Python's standard library: no rsync.

Why not a new hard-linked tree per sync (rsync --link-dest, the helper's copy before): at 50,000 files the link()
of every unchanged file dirties its inode, and ext4 writes those inode table blocks twice (journal, then home):
about 33 MB of metadata for 16.7 MB of changed data, over 3% of a 1.09 GiB tree. Here a sync touches only the
changed entries: `current` is updated in place, by rename(2), under a commit record.

Layout of BACKING (current stays the helper's link to the snap-STAMP directory of its first copy):

  current                  the newest complete copy, once no commit record is pending
  .persist-delta/stage/N   the new or changed entry of operation N (a whole subtree for a new directory), copied
                           for the sync under way, then moved into current; flat, so that a sync makes no
                           directories beyond the ones the mount gained
  .persist-delta/commit.json
                           the commit record: every operation of the sync with absolute values; while it exists,
                           current may be half-way and only rolling forward gives a snapshot
  .persist-delta/gen-N.json
                           the record of generation N once applied (the commit record renamed): its operations,
                           the old attributes it replaced, the digest of the tree it made and the copy it changed
  .persist-delta/undo-N/   the entries generation N replaced or removed, moved aside by rename (a reverse delta:
                           current less undo N..M is generation M-1); KEEP copies are current and the newest
                           KEEP-1 reverse deltas

A sync: (1) walk MOUNT (less the --exclude patterns) and current, plan (put: a new or changed entry, a whole
subtree for a new directory; del: an entry gone, a whole subtree in one rename; attrs: an attribute-only change, or
a directory whose entries changed); (2) copy the put entries into the stage (Copier: what rsync -aHAX --sparse
keeps) and write the record beside it as commit.json.tmp; (3) syncfs; (4) rename it to commit.json and fsync the
directory: the commit point; (5) apply: each put moves the old entry to undo-N and the staged one in, each del moves
the old entry to undo-N, each attrs sets absolute values; every step can be done again after a kill (a rename whose
source is gone is done); (6) syncfs, remove the stage, rename the record to gen-N.json, remove what is beyond KEEP.
A kill before (4) leaves current untouched (the stage is thrown away by the next sync); a kill after it is rolled
forward by the next sync or by the executor before it reads current. A restore never writes the backing (a full
disk must not keep the data from the mount at boot): it copies current and applies a pending record to its copy.

  persist-delta.py sync MOUNT BACKING [--keep K] [--include PATTERN | --exclude PATTERN]...
                                                 prints a JSON line: generation, counts, bytes written
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
import subprocess
import sys
import time

STATE = ".persist-delta"
KILL_ENV = "PERSIST_DELTA_KILL_AT"
# SIGSTOP instead of SIGKILL: the power-cut test stops the sync there, cuts the backing's file system off (ext4's
# shutdown without flushing its journal), then kills it.
KILL_SIGNAL_ENV = "PERSIST_DELTA_KILL_SIGNAL"
COPY_CHUNK = 1024 * 1024
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_KINDS = ((stat.S_ISREG, "f"), (stat.S_ISDIR, "d"), (stat.S_ISLNK, "l"), (stat.S_ISCHR, "c"),
          (stat.S_ISBLK, "b"), (stat.S_ISFIFO, "p"), (stat.S_ISSOCK, "s"))


class SyncError(Exception):
    """A sync that failed; current is the last good copy."""


def kill_point(step):
    if os.environ.get(KILL_ENV) == step:
        os.kill(os.getpid(), getattr(signal, os.environ.get(KILL_SIGNAL_ENV, "SIGKILL")))


# Walking and comparing -----------------------------------------------------------------------------------------

def _kind(mode):
    for test, letter in _KINDS:
        if test(mode):
            return letter
    return "?"


def _xattrs(path):
    """Sorted (name, hex value) pairs; ACLs are the system.posix_acl_* ones."""
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError as exc:
        if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            return ()
        raise
    return tuple(sorted((name, os.getxattr(path, name, follow_symlinks=False).hex()) for name in names))


def entry_meta(path, st):
    """What a sync compares and a record keeps of one entry, as a dict that JSON takes as it is."""
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
        "target": os.readlink(path) if kind == "l" else "",
        "xattrs": _xattrs(path),
    }


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


def walk(root, excluded=None):
    """{relative path ('' for the root): meta} of a tree, plus {path: (inode, links)} of its regular files.

    Stays on ROOT's file system and never follows symbolic links, like the copy; EXCLUDED(rel, is_dir) leaves an
    entry out (a directory with all it holds)."""
    tree = {}
    inodes = {}
    root_st = os.lstat(root)
    tree[""] = entry_meta(root, root_st)
    pending = [""]
    while pending:
        rel = pending.pop()
        path = os.path.join(root, rel) if rel else root
        fd = os.open(path, _DIR_FLAGS)
        try:
            with os.scandir(fd) as entries:
                children = [(entry.name, entry.stat(follow_symlinks=False)) for entry in entries]
        finally:
            os.close(fd)
        for name, st in children:
            child = rel + "/" + name if rel else name
            if excluded is not None and excluded(child, stat.S_ISDIR(st.st_mode)):
                continue
            if st.st_dev != root_st.st_dev:
                raise SyncError("%s is another file system's mount point: not copied" % os.path.join(root, child))
            tree[child] = entry_meta(os.path.join(root, child), st)
            if stat.S_ISDIR(st.st_mode):
                pending.append(child)
            elif stat.S_ISREG(st.st_mode):
                inodes[child] = (st.st_ino, st.st_nlink)
    return tree, inodes


def link_groups(inodes):
    """{path: sorted paths of the tree sharing its inode} for the files that share one (hard links)."""
    by_inode = {}
    for rel, (ino, _links) in inodes.items():
        by_inode.setdefault(ino, []).append(rel)
    groups = {}
    for paths in by_inode.values():
        if len(paths) > 1:
            members = tuple(sorted(paths))
            for rel in paths:
                groups[rel] = members
    return groups


def tree_digest(tree, groups):
    """One digest of everything a sync keeps of a tree: a reader compares current's against its record's."""
    digest = hashlib.sha256()
    for rel in sorted(tree):
        meta = tree[rel]
        fields = [rel, meta["kind"], meta["mode"], meta["uid"], meta["gid"], meta["size"], meta["mtime_ns"],
                  meta["rdev"], meta["target"], [list(pair) for pair in meta["xattrs"]], groups.get(rel, (rel,))[0]]
        digest.update(json.dumps(fields).encode("utf-8", "surrogateescape"))
        digest.update(b"\n")
    return digest.hexdigest()


def _parent(rel):
    return rel.rpartition("/")[0]


_ATTRS = ("mode", "uid", "gid", "xattrs")


def plan(src, src_inodes, cur, cur_inodes):
    """The operations that make CUR (the backing's tree) equal to SRC (the mount's), and the paths to stage.

    put PATH: the entry is new, changed in content, type, symlink target, device number or hard-link group:
      the staged copy replaces it; a directory that is new (or was not a directory) is staged and put whole.
    del PATH: gone from the mount; a directory goes whole.
    attrs PATH: mode, owner or xattrs changed only, or a directory whose entries changed (its mtime): set in place
      (absolute values, so doing it again is harmless). An inode that has links outside current (the helper's older
      hard-linked copies) is put instead, so that no other copy changes with it.
    """
    src_groups, cur_groups = link_groups(src_inodes), link_groups(cur_inodes)
    ops, stage, dirty_dirs = [], [], set()
    # Entries inside a directory that is put or removed whole go with it.
    src_whole, cur_whole = set(), set()
    for rel in sorted(src):
        if rel == "":
            continue
        if _parent(rel) in src_whole:
            stage.append(rel)
            if src[rel]["kind"] == "d":
                src_whole.add(rel)
            continue
        new, old = src[rel], cur.get(rel)
        if old is None or old["kind"] != new["kind"]:
            put = True
        elif new["kind"] == "d":
            put = False
        elif (new["size"], new["mtime_ns"], new["target"], new["rdev"]) != (
                old["size"], old["mtime_ns"], old["target"], old["rdev"]):
            put = True
        elif src_groups.get(rel) != cur_groups.get(rel):
            put = True
        elif any(new[key] != old[key] for key in _ATTRS):
            # In place only when every link of the inode is in current.
            put = new["kind"] == "f" and cur_inodes[rel][1] != len(cur_groups.get(rel, (rel,)))
            if not put:
                ops.append({"op": "attrs", "path": rel, "new": new, "old": old})
        else:
            continue
        if put:
            ops.append({"op": "put", "path": rel, "had_old": old is not None})
            stage.append(rel)
            dirty_dirs.add(_parent(rel))
            if new["kind"] == "d":
                src_whole.add(rel)
            if old is not None and old["kind"] == "d":
                cur_whole.add(rel)
    for rel in sorted(cur):
        if rel == "":
            continue
        if _parent(rel) in cur_whole:
            if cur[rel]["kind"] == "d":
                cur_whole.add(rel)
            continue
        if rel not in src:
            ops.append({"op": "del", "path": rel})
            dirty_dirs.add(_parent(rel))
            if cur[rel]["kind"] == "d":
                cur_whole.add(rel)
    # Directories last, deepest first: a rename in a directory sets its mtime, so its attributes follow the renames.
    dirs = [rel for rel in src if src[rel]["kind"] == "d" and rel not in src_whole
            and cur.get(rel, {}).get("kind") == "d"
            and (rel in dirty_dirs or any(src[rel][key] != cur[rel][key] for key in _ATTRS + ("mtime_ns",)))]
    for rel in sorted(dirs, key=lambda one: (-one.count("/"), one), reverse=False):
        ops.append({"op": "attrs", "path": rel, "new": src[rel], "old": cur[rel]})
    return ops, stage


# Setting attributes --------------------------------------------------------------------------------------------

def set_attrs(path, meta):
    """Absolute owner, xattrs (ACLs among them), mode and mtime: the same result however often it runs."""
    kind = meta["kind"]
    # chown first: it clears the set-id bits and security.capability, which the mode and xattrs then set again.
    os.chown(path, meta["uid"], meta["gid"], follow_symlinks=False)
    wanted = {name: bytes.fromhex(value) for name, value in meta["xattrs"]}
    try:
        present = os.listxattr(path, follow_symlinks=False)
    except OSError as exc:
        if exc.errno not in (errno.ENOTSUP, errno.EOPNOTSUPP) or wanted:
            raise
        present = []
    for name in present:
        if name not in wanted:
            os.removexattr(path, name, follow_symlinks=False)
    for name, value in wanted.items():
        os.setxattr(path, name, value, follow_symlinks=False)
    if kind != "l":
        # After the ACL: chmod sets the ACL mask from the group bits, which the source's mode and ACL agree on.
        os.chmod(path, meta["mode"])
    if kind in "fd":
        atime = os.lstat(path).st_atime_ns
        os.utime(path, ns=(atime, meta["mtime_ns"]), follow_symlinks=False)


# Copying -------------------------------------------------------------------------------------------------------

def _copy_data(src, dst):
    """The data of the regular file SRC into the new file DST, its holes left holes (SEEK_DATA/SEEK_HOLE)."""
    fin = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        size = os.fstat(fin).st_size
        fout = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
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
        finally:
            os.close(fout)
    finally:
        os.close(fin)


class Copier:
    """What cp -a and rsync -aHAX --numeric-ids --sparse keep, for the few entries a sync copies: type, data with
    its holes, owner by number, mode, mtime to the nanosecond, xattrs and ACLs, and hard links among the copied
    files (all links of a group are copied together: plan() puts a whole group when any of it changes).

    Each entry goes to the path it is given (the stage is flat: one name per operation, no directories of its own).
    An error (ENOSPC, a file gone since the walk, EIO) is raised as it is: the sync fails."""

    def __init__(self):
        self.linked = {}  # (device, inode) of a source file with links -> its first copy
        self.blocks = 0

    def copy_tree(self, src, dst, rel, metas):
        """SRC (an entry, a directory with all it holds) to DST; METAS gets {relative path from REL: meta}."""
        directories = []
        pending = [(src, dst, rel)]
        while pending:
            src, dst, rel = pending.pop()
            st = os.lstat(src)
            meta = entry_meta(src, st)
            kind = meta["kind"]
            key = (st.st_dev, st.st_ino)
            if kind == "f" and st.st_nlink > 1 and key in self.linked:
                os.link(self.linked[key], dst)
                metas[rel] = meta
                continue
            if kind == "f":
                _copy_data(src, dst)
                if st.st_nlink > 1:
                    self.linked[key] = dst
            elif kind == "d":
                os.mkdir(dst, 0o700)
                directories.append((dst, meta))
                for name in os.listdir(src):
                    child = rel + "/" + name if rel else name
                    pending.append((os.path.join(src, name), os.path.join(dst, name), child))
            elif kind == "l":
                os.symlink(meta["target"], dst)
            elif kind == "p":
                os.mkfifo(dst, 0o600)
            else:
                os.mknod(dst, stat.S_IFMT(st.st_mode) | 0o600, st.st_rdev)
            if kind != "d":
                set_attrs(dst, meta)
            self.blocks += os.lstat(dst).st_blocks * 512
            metas[rel] = meta
        # A directory's attributes after its entries (which change its mtime), the deepest first.
        for path, meta in reversed(directories):
            set_attrs(path, meta)


# The backing's state -------------------------------------------------------------------------------------------

def _syncfs(path):
    """Every dirty page and inode of PATH's file system on the disk (sync -f), not the whole machine's."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if libc.syncfs(fd) != 0:
            code = ctypes.get_errno()
            raise OSError(code, "syncfs %s: %s" % (path, os.strerror(code)))
    finally:
        os.close(fd)


def _fsync_dir(path):
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


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


class Backing:
    def __init__(self, backing):
        self.root = backing
        self.state = os.path.join(backing, STATE)
        self.stage = os.path.join(self.state, "stage")
        self.commit = os.path.join(self.state, "commit.json")
        self.rollback_record = os.path.join(self.state, "rollback.json")
        self._lock = None

    def current(self):
        """The directory current names (the helper's link to snap-STAMP, or a directory)."""
        return os.path.realpath(os.path.join(self.root, "current"))

    def lock(self):
        """One sync, roll-forward or verify of a backing at a time."""
        os.makedirs(self.state, mode=0o700, exist_ok=True)
        self._lock = open(os.path.join(self.state, "lock"), "a")  # pylint: disable=consider-using-with
        fcntl.flock(self._lock, fcntl.LOCK_EX)

    def unlock(self):
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def lock_to_read(self):
        """A reader's lock, which writes nothing: shared, on the lock file if a sync ever made one."""
        try:
            self._lock = open(os.path.join(self.state, "lock"), "r")  # pylint: disable=consider-using-with
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise
            return
        fcntl.flock(self._lock, fcntl.LOCK_SH)

    def pending(self):
        """('commit' or 'rollback', its record) of a run that was cut short after its commit point, or None."""
        for kind, path in (("commit", self.commit), ("rollback", self.rollback_record)):
            if os.path.exists(path):
                return kind, self.read(path)
        return None

    def undo(self, gen):
        return os.path.join(self.state, "undo-%d" % gen)

    def record_path(self, gen):
        return os.path.join(self.state, "gen-%d.json" % gen)

    def generations(self):
        """The numbers of the generation records present, oldest first."""
        found = []
        for name in os.listdir(self.state) if os.path.isdir(self.state) else ():
            if name.startswith("gen-") and name.endswith(".json") and name[4:-5].isdigit():
                found.append(int(name[4:-5]))
        return sorted(found)

    def head(self):
        gens = self.generations()
        return gens[-1] if gens else 0

    def read(self, path):
        with open(path, "rb") as handle:
            return json.loads(handle.read().decode("utf-8"))

    # Recovery: what every entry point does first, under the lock.
    def recover(self):
        """Finish what a killed run committed (roll forward, or a rollback), or throw away what it had not."""
        if os.path.exists(self.commit):
            record = self.read(self.commit)
            apply_record(self, record)
            self.finalize(record)
            return "rolled forward to generation %d" % record["gen"]
        if os.path.exists(self.rollback_record):
            record = self.read(self.rollback_record)
            revert_record(self, record)
            self.finish_rollback(record)
            return "finished the rollback of generation %d" % record["gen"]
        if os.path.lexists(self.commit + ".tmp"):
            os.unlink(self.commit + ".tmp")
        done = ""
        if os.path.lexists(self.stage):
            # Never committed: current was not touched; the stage is all this sync wrote.
            _remove(self.stage)
            done = "discarded an uncommitted stage"
        head = self.head()
        if head:
            # A run killed after its record but before its pruning.
            self.prune(self.read(self.record_path(head))["keep"])
        return done

    def finalize(self, record):
        """After the apply: on the disk, recorded as done, and what is beyond KEEP removed."""
        # Every rename of the apply on the disk before the commit record goes: without it a file system that
        # reorders metadata could keep the record's end and lose some of the renames.
        _syncfs(self.root)
        kill_point("applied")
        # The stage is empty now; gone before the record is done, so that a stage without a commit record is
        # always one never committed.
        if os.path.lexists(self.stage):
            _remove(self.stage)
        # Not flushed here: lost at a power cut, the commit record is there again and its apply is done again (all
        # of it done already), so the flush of the next sync does.
        os.rename(self.commit, self.record_path(record["gen"]))
        kill_point("recorded")
        self.prune(record["keep"])
        kill_point("pruned")

    def prune(self, keep):
        """Keep the reverse deltas of the newest KEEP-1 generations and the records of the newest KEEP: the oldest
        one kept has its record too, so that after a rollback to it current still has a digest to be checked by."""
        head = self.head()
        for gen in self.generations():
            if gen <= head - (keep - 1):
                _remove(self.undo(gen))
            if gen <= head - keep:
                os.unlink(self.record_path(gen))
        for name in os.listdir(self.state):
            if name.startswith("undo-") and name[5:].isdigit() and int(name[5:]) not in self.generations():
                _remove(os.path.join(self.state, name))

    def reverse_deltas(self):
        """How many older generations the backing keeps besides current."""
        return len([gen for gen in self.generations() if os.path.isdir(self.undo(gen))])

    def forget(self):
        """The records and reverse deltas go (current is kept): they describe a copy that is not current."""
        for name in os.listdir(self.state):
            if name.startswith("undo-") or (name.startswith("gen-") and name.endswith(".json")):
                _remove(os.path.join(self.state, name))
        _fsync_dir(self.state)

    def finish_rollback(self, record):
        _remove(self.undo(record["gen"]))
        _remove(self.record_path(record["gen"]))
        _fsync_dir(self.state)
        os.unlink(self.rollback_record)
        _fsync_dir(self.state)


# Applying and reverting a record -------------------------------------------------------------------------------

def apply_record(backing, record):
    """Make current generation record['gen'] from current and the stage; any prefix of it may be done already."""
    cur, stage, undo = backing.current(), backing.stage, backing.undo(record["gen"])
    os.makedirs(undo, mode=0o700, exist_ok=True)
    for number, op in enumerate(record["ops"]):
        rel = op["path"]
        target = os.path.join(cur, rel) if rel else cur
        # Moved aside under the operation's number: the reverse delta needs no directories of its own.
        aside = os.path.join(undo, str(number))
        if op["op"] == "put":
            staged = os.path.join(stage, str(number))
            if os.path.lexists(staged):
                if os.path.lexists(target):
                    os.rename(target, aside)
                os.rename(staged, target)
        elif op["op"] == "del":
            if os.path.lexists(target):
                os.rename(target, aside)
        else:
            set_attrs(target, op["new"])
        kill_point("apply:%d" % (number + 1))


def revert_entries(record, tree, aside_dir, kill_name=""):
    """The entries of TREE as they were before RECORD, from the ones it moved aside (in ASIDE_DIR, by operation
    number), newest operation first; each step can be done again after a kill."""
    entries = [(number, op) for number, op in enumerate(record["ops"]) if op["op"] != "attrs"]
    for step, (number, op) in enumerate(reversed(entries), 1):
        target = os.path.join(tree, op["path"])
        aside = os.path.join(aside_dir, str(number))
        if os.path.lexists(aside):
            _remove(target)
            os.rename(aside, target)
        elif op["op"] == "put" and not op["had_old"]:
            _remove(target)
        if kill_name:
            kill_point("%s:%d" % (kill_name, step))


def revert_attrs(record, tree):
    """The old attributes RECORD replaced, directories last as in the apply (after the renames that set mtimes)."""
    for op in record["ops"]:
        if op["op"] == "attrs":
            set_attrs(os.path.join(tree, op["path"]) if op["path"] else tree, op["old"])


def revert_record(backing, record):
    """Make current the generation before record['gen'] again, in place, from its reverse delta."""
    revert_entries(record, backing.current(), backing.undo(record["gen"]), "rollback")
    revert_attrs(record, backing.current())


# The commands --------------------------------------------------------------------------------------------------

def _own_write_bytes():
    with open("/proc/self/io", encoding="ascii") as handle:
        values = dict(line.split(": ") for line in handle.read().splitlines())
    return int(values["write_bytes"])


def stage_and_record(backing, mount, ops, staged, src, src_inodes, gen, keep, base):
    """The put entries copied into the stage, and the record written beside it (not yet flushed, not yet the
    commit record). Returns (the blocks copied, the record's bytes). SRC becomes what current will hold."""
    staged_bytes = 0
    if staged:
        os.makedirs(backing.stage, mode=0o700)
        copier, metas = Copier(), {}
        for number, op in enumerate(ops):
            if op["op"] == "put":
                copier.copy_tree(os.path.join(mount, op["path"]), os.path.join(backing.stage, str(number)),
                                 op["path"], metas)
        staged_bytes = copier.blocks
        # What was copied is what current will hold: it stands for what the walk saw of those entries (a file that
        # changed again since is recorded as copied; the next sync copies it again).
        for rel in staged:
            src.pop(rel, None)
        src.update(metas)
    # Hard links as the walk saw them, of the entries current will hold (one gone since the walk is in no group).
    groups = link_groups(dict((rel, inode) for rel, inode in src_inodes.items() if rel in src))
    record = {"gen": gen, "keep": keep, "ops": ops, "digest": tree_digest(src, groups), "made": time.time(),
              "base": base}
    data = json.dumps(record).encode("utf-8", "surrogateescape")
    # Flushed with the stage by one syncfs (one journal commit, not two); it becomes the commit record by a rename,
    # made durable by fsync of its directory: the commit point.
    with open(backing.commit + ".tmp", "wb") as handle:
        handle.write(data)
    return staged_bytes, data


def sync(mount, backing_dir, keep=2, excludes=()):
    """One sync of MOUNT into BACKING; returns its report. A SyncError leaves current the last good copy."""
    started, own = time.monotonic(), _own_write_bytes()
    backing = Backing(backing_dir)
    backing.lock()
    recovered = backing.recover()
    if not os.path.isdir(os.path.join(backing_dir, "current")):
        return first_copy(mount, backing_dir, excludes)
    cur = backing.current()
    marks = [("start", time.monotonic())]
    src, src_inodes = walk(mount, exclude_matcher(excludes))
    before, cur_inodes = walk(cur)
    # current against the digest its record made: a change by hand (or a broken disk) is said, then synced over.
    head = backing.head()
    warning = ""
    base = os.path.basename(cur)
    if head and backing.read(backing.record_path(head)).get("base") != base:
        # current is another copy than the one the records describe (a sync without this helper made it): their
        # reverse deltas do not apply to it.
        backing.forget()
        warning = "current is %s, not the copy generation %d changed: its older generations are dropped" % (base, head)
    elif head and backing.read(backing.record_path(head))["digest"] != tree_digest(before, link_groups(cur_inodes)):
        warning = "current differs from what generation %d recorded: changed outside persist" % head
    head = backing.head()
    ops, staged = plan(src, src_inodes, before, cur_inodes)
    marks.append(("walk and plan", time.monotonic()))
    kill_point("planned")
    if not ops and head:
        # Nothing changed: no new generation, so no earlier snapshot is pruned for an identical one.
        return {"result": "ok", "generation": head, "operations": {}, "staged_entries": 0, "staged_bytes": 0,
                "record_bytes": 0, "written_bytes": 0, "process_write_bytes": _own_write_bytes() - own,
                "seconds": round(time.monotonic() - started, 3), "recovered": recovered, "warning": warning,
                "reverse_deltas": backing.reverse_deltas()}
    gen = head + 1
    try:
        staged_bytes, data = stage_and_record(backing, mount, ops, staged, src, src_inodes, gen, keep, base)
    except OSError as exc:
        # Before the commit point: current was not touched; what this sync wrote goes.
        _remove(backing.stage)
        _remove(backing.commit + ".tmp")
        raise SyncError("copying %s to %s failed: %s; current is unchanged" % (mount, backing.stage, exc)) from exc
    marks.append(("stage", time.monotonic()))
    kill_point("staged")
    try:
        _syncfs(backing_dir)
        marks.append(("syncfs", time.monotonic()))
        kill_point("synced")
        os.rename(backing.commit + ".tmp", backing.commit)
        _fsync_dir(backing.state)
    except OSError as exc:
        _remove(backing.stage)
        _remove(backing.commit + ".tmp")
        raise SyncError("flushing the copy of %s failed: %s; current is unchanged" % (mount, exc)) from exc
    kill_point("committed")
    marks.append(("commit", time.monotonic()))
    # Applied from the record as a roll-forward reads it back, so that both take the same path.
    record = json.loads(data.decode("utf-8"))
    try:
        apply_record(backing, record)
        marks.append(("apply", time.monotonic()))
        backing.finalize(record)
    except OSError as exc:
        raise SyncError("applying generation %d failed: %s; it is committed: the next sync finishes it, and a "
                        "restore meanwhile applies it to its copy" % (gen, exc)) from exc
    marks.append(("syncfs, record, prune", time.monotonic()))
    counts = {}
    for op in ops:
        counts[op["op"]] = counts.get(op["op"], 0) + 1
    return {"result": "ok", "generation": gen, "operations": counts, "staged_entries": len(staged),
            "staged_bytes": staged_bytes, "record_bytes": len(data), "written_bytes": staged_bytes + len(data),
            "process_write_bytes": _own_write_bytes() - own, "seconds": round(time.monotonic() - started, 3),
            "steps": dict((name, round(end - begin, 3)) for (_name, begin), (name, end) in zip(marks, marks[1:])),
            "recovered": recovered, "warning": warning, "reverse_deltas": backing.reverse_deltas()}


def _apply_to_copy(backing, record, dest):
    """DEST, a copy of a current that RECORD's apply may have changed in part, made what the apply makes: the
    entries still in the stage copied in, the ones removed removed, the attributes set; the backing is only read."""
    copier = Copier()
    # A hard-link group that the kill split between current and the stage: the staged files are linked to the copies
    # of the ones already moved into current (which have their inode: nothing else in current does).
    for dirpath, _dirnames, filenames in os.walk(backing.current()):
        for name in filenames:
            st = os.lstat(os.path.join(dirpath, name))
            if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                rel = os.path.relpath(os.path.join(dirpath, name), backing.current())
                copier.linked.setdefault((st.st_dev, st.st_ino), os.path.join(dest, rel))
    for number, op in enumerate(record["ops"]):
        rel = op["path"]
        target = os.path.join(dest, rel) if rel else dest
        if op["op"] == "put":
            staged = os.path.join(backing.stage, str(number))
            if os.path.lexists(staged):
                _remove(target)
                copier.copy_tree(staged, target, rel, {})
        elif op["op"] == "del":
            _remove(target)
        else:
            set_attrs(target, op["new"])


def _revert_copy(record, undo, dest):
    """DEST, a copy of the generation RECORD made, made the one before it from UNDO (its reverse delta), which is
    copied, not moved: the backing is only read."""
    # The moved-aside entries come back through one copier (which keeps the links among them) into a scratch
    # directory on DEST's file system, then each is renamed into place, newest operation first.
    scratch = os.path.join(dest, ".persist-delta-restore")
    root_times = os.lstat(dest)
    os.mkdir(scratch, 0o700)
    copier = Copier()
    for name in os.listdir(undo):
        copier.copy_tree(os.path.join(undo, name), os.path.join(scratch, name), name, {})
    revert_entries(record, dest, scratch)
    os.rmdir(scratch)
    # The scratch directory came and went in DEST's root: its mtime back (a record's attrs of it follow).
    os.utime(dest, ns=(root_times.st_atime_ns, root_times.st_mtime_ns))
    revert_attrs(record, dest)


def restore(backing_dir, dest, back=0):
    """Current, or the generation BACK before it, into the empty directory DEST, without writing the backing: a
    sync cut short after its commit point is applied to the copy (the next sync rolls the backing forward)."""
    backing = Backing(backing_dir)
    backing.lock_to_read()
    pending = backing.pending()
    if back and pending:
        raise SyncError("%s holds a %s cut short: run a sync first (persist sync TOKEN), then restore %d back"
                        % (backing_dir, pending[0], back))
    head = backing.head()
    if back and head and backing.read(backing.record_path(head)).get("base") != os.path.basename(backing.current()):
        raise SyncError("%s: current is not the copy its generations changed (a sync without persist-delta.py made "
                        "it): no older generation to restore" % backing_dir)
    wanted = list(range(head, head - back, -1))
    missing = [gen for gen in wanted if not os.path.isdir(backing.undo(gen))]
    if back and (missing or head - back < 0):
        raise SyncError("%s keeps no reverse delta of generation(s) %s: cannot restore %d back"
                        % (backing_dir, missing or [head - back], back))
    # A standalone helper run by systemd on the host (persist.sh), with no AnsibleModule and so no run_command.
    subprocess.run(["cp", "-a", "--no-target-directory", backing.current() + "/.", dest], check=True)  # pylint: disable=ansible-bad-function
    if pending and pending[0] == "commit":
        _apply_to_copy(backing, pending[1], dest)
        return {"result": "ok", "generation": pending[1]["gen"], "pending": "commit"}
    if pending:
        # A rollback cut short: the entries it moved back are in current, the others still in its reverse delta.
        _revert_copy(pending[1], backing.undo(pending[1]["gen"]), dest)
        return {"result": "ok", "generation": pending[1]["gen"] - 1, "pending": "rollback"}
    for gen in wanted:
        _revert_copy(backing.read(backing.record_path(gen)), backing.undo(gen), dest)
    return {"result": "ok", "generation": head - back}


def roll_forward(backing_dir):
    """Finish a sync (or rollback) of BACKING_DIR cut short after its commit point, before current is read as a
    copy; what it did, or '' when nothing was pending."""
    backing = Backing(backing_dir)
    if not os.path.isdir(backing.state):
        return ""
    backing.lock()
    try:
        return backing.recover()
    finally:
        backing.unlock()


def verify(backing_dir):
    """Roll forward, then walk current: is it exactly the tree the newest record describes?"""
    backing = Backing(backing_dir)
    backing.lock()
    recovered = backing.recover()
    head = backing.head()
    if not head:
        return {"result": "unknown", "detail": "no generation recorded yet", "recovered": recovered}
    tree, inodes = walk(backing.current())
    same = backing.read(backing.record_path(head))["digest"] == tree_digest(tree, link_groups(inodes))
    return {"result": "ok" if same else "differs", "generation": head, "recovered": recovered}


def rollback(backing_dir):
    """Current becomes the previous generation again (its reverse delta moved back), under a record of its own."""
    backing = Backing(backing_dir)
    backing.lock()
    backing.recover()
    head = backing.head()
    if not head or not os.path.isdir(backing.undo(head)):
        raise SyncError("%s keeps no reverse delta of its newest generation" % backing_dir)
    record = backing.read(backing.record_path(head))
    write_durably(backing.rollback_record, json.dumps(record).encode("utf-8", "surrogateescape"))
    revert_record(backing, record)
    _syncfs(backing_dir)
    backing.finish_rollback(record)
    return {"result": "ok", "generation": head - 1}


# The first copy --------------------------------------------------------------------------------------------------

def _mount_points_under(mount):
    """The mount points strictly below MOUNT, from the kernel's mount table (a bind of the same file system too)."""
    prefix = mount.rstrip("/") + "/"
    found = set()
    with open("/proc/self/mountinfo", "rb") as handle:
        for line in handle:
            fields = line.split(b" ")
            point = re.sub(rb"\\([0-7]{3})", lambda match: bytes([int(match.group(1), 8)]), fields[4])
            point = os.fsdecode(point)
            if point.startswith(prefix):
                found.add(point)
    return found


def first_copy(mount, backing_dir, excludes=()):
    """The backing's first copy of MOUNT, whole, while it has no current: copied into BACKING/.new-STAMP (by directory
    descriptors, nested mounts and EXCLUDES left out), flushed, renamed to snap-STAMP, then current, a link renamed
    over it, and the directory flushed. A kill or error at any instant leaves no current, or a complete one; what
    the failed copy made is removed unless current names it. Called by sync() under the backing's lock."""
    started = time.monotonic()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + ".%09dZ" % (time.time_ns() % 10**9)
    new = os.path.join(backing_dir, ".new-" + stamp)
    snap = os.path.join(backing_dir, "snap-" + stamp)
    link = os.path.join(backing_dir, ".current-" + stamp)
    current = os.path.join(backing_dir, "current")
    excluded = exclude_matcher(excludes)
    inner = _mount_points_under(os.path.realpath(mount))
    skipped = []
    copier = Copier()
    directories = []
    pending = []
    root_fd = os.open(mount, _DIR_FLAGS)
    root_dev = os.fstat(root_fd).st_dev
    try:
        os.mkdir(new, 0o700)
        directories.append((new, entry_meta(mount, os.fstat(root_fd))))
        # (open directory, its relative path, its copy); the source is read through /proc/self/fd/N, so that a
        # directory swapped for a symlink while the copy runs is never followed.
        pending = [(root_fd, "", new)]
        root_fd = None
        while pending:
            dir_fd, rel, dst = pending.pop()
            try:
                for name in sorted(os.listdir(dir_fd)):
                    child = rel + "/" + name if rel else name
                    st = os.lstat(name, dir_fd=dir_fd)
                    is_dir = stat.S_ISDIR(st.st_mode)
                    if excluded(child, is_dir):
                        continue
                    if is_dir and (st.st_dev != root_dev or os.path.join(mount, child) in inner):
                        skipped.append(child)
                        continue
                    target = os.path.join(dst, name)
                    if is_dir:
                        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
                        os.mkdir(target, 0o700)
                        # Its xattrs read through the parent's descriptor (/proc/self/fd/N itself is a link).
                        meta = entry_meta("/proc/self/fd/%d/%s" % (dir_fd, name), os.fstat(fd))
                        directories.append((target, meta))
                        pending.append((fd, child, target))
                    else:
                        copier.copy_tree("/proc/self/fd/%d/%s" % (dir_fd, name), target, child, {})
            finally:
                os.close(dir_fd)
        # A directory's attributes after its entries (which change its mtime), the deepest first.
        for path, meta in reversed(directories):
            set_attrs(path, meta)
        kill_point("first:copied")
        _syncfs(new)
        os.rename(new, snap)
        os.symlink("snap-" + stamp, link)
        # From the switch on, current names the copy: a TERM waits until the directory is flushed.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
        try:
            os.rename(link, current)
            _fsync_dir(backing_dir)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    except BaseException:
        if root_fd is not None:
            os.close(root_fd)
        while pending:
            os.close(pending.pop()[0])
        named = os.readlink(current) if os.path.islink(current) else None
        for made in (link, new, snap):
            if os.path.basename(made) != named:
                _remove(made)
        raise
    return {"result": "ok", "first_copy": True, "snapshot": "snap-" + stamp, "generation": 0, "operations": {},
            "staged_entries": 0, "staged_bytes": copier.blocks, "record_bytes": 0, "written_bytes": copier.blocks,
            "seconds": round(time.monotonic() - started, 3), "recovered": "", "warning": "",
            "reverse_deltas": 0, "skipped_mounts": sorted(skipped)}


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
    except (SyncError, OSError, subprocess.CalledProcessError) as exc:
        sys.stdout.write(json.dumps({"result": "failed", "error": str(exc)}) + "\n")
        return 1
    sys.stdout.write(json.dumps(report) + "\n")
    return 0 if report["result"] in ("ok", "unknown") else 1


if __name__ == "__main__":
    raise SystemExit(main())
