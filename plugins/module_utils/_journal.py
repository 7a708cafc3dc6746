# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The intent journal: what a run is about to change on the host, written durably before the change.

Changes are grouped in transactions, one per planned mount. A `txn` line holds every step of it with its
arguments (which say what undoes it: the old fstab lines, the old file texts, the mount below) and its point of
no return, the pivot. Then, for each step, a `begin` line is flushed to disk before the step acts and a `done`
line (with what it learnt, such as the mount ID of a new mount) after. `forward` says that the transaction
passed its pivot (its mount is in place and verified); `abort` that it is being undone, `undone` for each step
taken back; `close` that it is whole, one way or the other. When every transaction is closed the journal file
is removed, and with it every blob.

Every run reads the journal first. A journal that is still there was left by a run that died (kill -9, a power
cut); recovery then rolls each open transaction forward (past its point of no return, in the same boot) or
back, step by step, newest first (see _executor.recover()).

The format is JSON lines (sorted keys, no spaces) appended with O_APPEND and fsync. A line is either whole on
disk or, when the writer died in the middle of it, a torn last line: its step had not started (nothing acts
before its line is flushed), so reading drops it, and the first append of the next run cuts it off so that it
never runs into the next line (a last record whole but for its newline is read, and given its newline).
Journals written before that cut may hold such a torn start glued to a whole line; reading takes the whole line
at its end. A line that cannot be read at all (a damaged disk, an edit by hand) does not stop recovery:
transactions() assumes the worst it could have said (the next step of a transaction began; a closed transaction
began to be undone) and says so in each transaction's `assumed`, and recovery decides from the host's state what
those steps left. Only when the unreadable line was the plan of a transaction that began steps and never closed
is recovery refused, with the fix.

A string in a step's arguments longer than BLOB_MIN bytes (the persist helper, an old unit's text) is not
written in the line: it goes first, durably, to a blob in JOURNAL_BLOBS named by its sha256, and the line holds
{"$sha256": hex}. read() puts the texts back and checks each hash; a blob missing or damaged stays a reference
marked with its problem, and require() names it for the step that needs it (one that never began does not).
No database is needed for a few dozen lines per run, and the file stays readable by a person
(`cat /var/lib/ramdisk-provision/journal.jsonl`).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import signal

from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths
from ansible_collections.ramdisk.provision.plugins.module_utils._atomic import fsync_dir

# Test hook: kill this process at the Nth journal write (counted from 1 in each run), before or after the write.
# Used by the kill tests to stop a run at every journaled instant; unset in normal use.
KILL_ENV = "RAMDISK_PROVISION_TEST_KILL_AT"
# Step argument strings longer than this (bytes, UTF-8) go to a blob; the line names it by its sha256.
BLOB_MIN = 2048
BLOB_REF = "$sha256"
KINDS = ("txn", "begin", "done", "forward", "abort", "undone", "close")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def boot_id():
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            return handle.read().strip()
    except (IOError, OSError):
        return None


def _encode(line):
    return json.dumps(line, sort_keys=True, separators=(",", ":")).encode("utf-8")


def _record(raw, exact=False):
    """The record line RAW holds, or None; EXACT: only when RAW is the bytes the writer makes of it."""
    try:
        line = json.loads(raw.decode("utf-8"))
    except ValueError:
        return None
    if not isinstance(line, dict) or line.get("t") not in KINDS or (exact and _encode(line) != raw):
        return None
    return line


def _glued(raw):
    """The whole record at the end of RAW, a line that the writer before the torn-tail cut appended to a torn
    one: the last place where a record as the writer makes it begins and runs to the end of the line."""
    at = len(raw)
    while True:
        at = raw.rfind(b'{"', 0, at)
        if at <= 0:
            return None
        line = _record(raw[at:], exact=True)
        if line is not None:
            return line


def _is_ref(value):
    return isinstance(value, dict) and BLOB_REF in value


def _refs(value):
    """The blob references in VALUE (step arguments), depth first."""
    if _is_ref(value):
        return [value]
    if isinstance(value, dict):
        return [ref for item in value.values() for ref in _refs(item)]
    if isinstance(value, list):
        return [ref for item in value for ref in _refs(item)]
    return []


class JournalError(Exception):
    pass


class Journal(object):
    """Append-only, flushed before each change (each line names its run: the transaction gives it). BLOBS: where
    texts too large for a line go (beside the journal, JOURNAL_BLOBS for the host's journal)."""

    def __init__(self, path=_host_paths.JOURNAL, blobs=None):
        self.path = path
        self.blobs = blobs or os.path.join(os.path.dirname(path), os.path.basename(_host_paths.JOURNAL_BLOBS))
        self.writes = 0
        self._fd = None
        kill = os.environ.get(KILL_ENV, "")
        self._kill_at = int(kill) if kill.isdigit() else None

    # Reading ---------------------------------------------------------------------------------------------

    def read(self):
        """Every record of the journal, in order ([] when there is none). A torn last line is dropped; a torn
        start glued to a whole line gives the whole line; a line that cannot be read in the middle gives
        {"t": "unreadable", "line": N, "journal": path}, which transactions() accounts for."""
        try:
            with open(self.path, "rb") as handle:
                data = handle.read()
        except (IOError, OSError):
            return []
        out = []
        lines = data.split(b"\n")
        for index, raw in enumerate(lines):
            if not raw.strip():
                continue
            line = _record(raw)
            if line is None and index == len(lines) - 1:
                continue  # torn by a death mid-write: that step never started
            if line is None:
                line = _glued(raw)
            if line is None:
                out.append({"t": "unreadable", "line": index + 1, "journal": self.path})
                continue
            if line["t"] == "txn":
                self._resolve(line)
            out.append(line)
        return out

    def blob_path(self, digest):
        return os.path.join(self.blobs, digest)

    def _resolve(self, line):
        """Put back the texts of LINE's blob references; one that cannot be is kept, with its problem."""
        for step in (line.get("what") or {}).get("steps") or []:
            if isinstance(step, dict) and isinstance(step.get("args"), dict):
                step["args"] = self._resolved(step["args"])

    def _resolved(self, value):
        if _is_ref(value):
            digest = str(value[BLOB_REF])
            try:
                fd = os.open(self.blob_path(digest), os.O_RDONLY | _NOFOLLOW)
                with os.fdopen(fd, "rb") as handle:
                    data = handle.read()
            except (IOError, OSError) as exc:
                return dict(value, problem="missing (%s)" % (exc.strerror or exc))
            if hashlib.sha256(data).hexdigest() != digest:
                return dict(value, problem="damaged (its content hashes to %s)" % hashlib.sha256(data).hexdigest())
            try:
                return data.decode("utf-8")
            except UnicodeDecodeError:
                return dict(value, problem="damaged (not UTF-8)")
        if isinstance(value, dict):
            return dict((key, self._resolved(item)) for key, item in value.items())
        if isinstance(value, list):
            return [self._resolved(item) for item in value]
        return value

    def require(self, found, indices, doing):
        """Raise JournalError when a step of FOUND (a transactions() entry) at INDICES, which recovery is about
        to DOING ("finish" or "undo"), needs a blob that is missing or damaged."""
        steps = found["what"].get("steps") or []
        for i in sorted(indices):
            if i >= len(steps):
                continue
            for ref in _refs(steps[i].get("args")):
                args = steps[i].get("args") or {}
                target = args.get("file") or args.get("path") or found["what"].get("path")
                raise JournalError(
                    "the journal %s holds transaction %s of run %s for %s, left open by a run that died; to %s its "
                    "step %d (%s, on %s) recovery needs the text kept in the blob %s, which is %s. Nothing was "
                    "changed. The host holds steps %s of it done and %s begun. Fix: put the blob back from a "
                    "backup if you have one (its name is the sha256 of its content); else make %s what you want "
                    "it to be by hand, then close the transaction with: printf '%%s\\n' '%s' >> %s, and run "
                    "again: recovery of the rest goes on"
                    % (self.path, found["txn"], found["run"], found["what"].get("path"), doing, i, steps[i].get("step"),
                       target, self.blob_path(str(ref[BLOB_REF])), ref.get("problem", "missing"),
                       sorted(found["results"]) or "none", sorted(found["begun"]) or "none", target,
                       _encode({"run": found["run"], "t": "close", "txn": found["txn"]}).decode("utf-8"), self.path))

    @staticmethod
    def transactions(lines):
        """The transactions of LINES, in the order they began: [{run, txn, boot, what (path, action, pivot,
        steps: [{step, args}]), begun: {i}, results: {i: result}, done_lines: {i} (the steps of RESULTS with a
        done line), undone: {i}, forward, aborted, closed, maybe_begun: {i}, assumed: [sentence]}].

        An unreadable line is taken for the worst it could have said: for each transaction open before it and
        with no line after it, the start of its next steps (as many as such lines could hold: MAYBE_BEGUN;
        undone from the host's state when the transaction goes back, done again when it goes forward); for a
        transaction closed as done before it, the start of its undo (a later one of its run failed): it is
        reopened to go forward, its last step done again. A step that a later begun step follows is done (steps
        run in order), its result unknown. Raises JournalError when the unreadable line was the plan of a
        transaction of which later lines show steps begun and no close."""
        txns = {}
        order = []
        orphans = {}
        unreadable = []
        for line in lines:
            key = (line.get("run"), line.get("txn"))
            kind = line.get("t")
            if kind == "unreadable":
                unreadable.append(line)
                for txn in txns.values():
                    txn["lost"].append(line["line"])
                continue
            if kind == "txn":
                txns[key] = {"run": line.get("run"), "txn": line.get("txn"), "boot": line.get("boot"),
                             "what": line.get("what") or {}, "begun": set(), "results": {}, "undone": set(),
                             "forward": False, "aborted": False, "closed": False, "maybe_begun": set(),
                             "assumed": [], "lost": [], "done_lines": set()}
                order.append(key)
                continue
            txn = txns.get(key)
            if txn is None:
                if unreadable:
                    orphans.setdefault(key, []).append(line)
                continue
            txn["lost"] = []  # what lies between two of its lines cannot have begun a step the later does not show
            if kind == "begin":
                txn["begun"].add(line.get("i"))
            elif kind == "done":
                txn["begun"].add(line.get("i"))
                txn["results"][line.get("i")] = line.get("result") or {}
                txn["done_lines"].add(line.get("i"))
            elif kind == "forward":
                txn["forward"] = True
            elif kind in ("abort", "undone"):
                # An abort after the commit reopens it: the run undid a whole transaction after a later failure.
                # An undone line says the same when the abort line before it was lost.
                txn["aborted"] = True
                txn["forward"] = False
                txn["closed"] = False
                if kind == "undone":
                    txn["undone"].add(line.get("i"))
            elif kind == "close":
                txn["closed"] = True
        _refuse_orphans(orphans, unreadable)
        found = [txns[key] for key in order]
        for txn in found:
            _assume(txn)
            del txn["lost"]
        return found

    # Writing ---------------------------------------------------------------------------------------------

    def _open(self):
        """Open the journal for appending; a torn last line a dead writer left is cut off first, so that the
        next line starts on a line of its own (a whole record that lacks only its newline, which read() takes,
        gets it instead)."""
        directory = os.path.dirname(self.path)
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o755)
        created = not os.path.exists(self.path)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | _NOFOLLOW, 0o600)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                end = size
                keep = 0
                while end > 0:
                    start = max(0, end - 65536)
                    newline = os.pread(fd, end - start, start).rfind(b"\n")
                    if newline >= 0:
                        keep = start + newline + 1
                        break
                    end = start
                if _record(os.pread(fd, size - keep, keep)) is not None:
                    os.write(fd, b"\n")
                else:
                    os.ftruncate(fd, keep)
                os.fsync(fd)
        except OSError:
            os.close(fd)
            raise
        if created:
            fsync_dir(directory)
        return fd

    def _append(self, line):
        self.writes += 1
        if self._kill_at is not None and self.writes == self._kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if self._fd is None:
            self._fd = self._open()
        data = _encode(line) + b"\n"
        written = 0
        while written < len(data):
            written += os.write(self._fd, data[written:])
        os.fsync(self._fd)

    def _stored(self, value):
        """VALUE with each string longer than BLOB_MIN bytes written to its blob and replaced by a reference."""
        if isinstance(value, str) and len(value) > BLOB_MIN // 4:
            data = value.encode("utf-8")
            if len(data) > BLOB_MIN:
                return {BLOB_REF: self._write_blob(data)}
            return value
        if isinstance(value, dict):
            return dict((key, self._stored(item)) for key, item in value.items())
        if isinstance(value, (list, tuple)):
            return [self._stored(item) for item in value]
        return value

    def _write_blob(self, data):
        """Write DATA to its blob, durably, before any line names it (temporary file, fsync, rename, fsync of the
        directory); a blob already there whole is kept. Returns its sha256."""
        digest = hashlib.sha256(data).hexdigest()
        target = self.blob_path(digest)
        try:
            fd = os.open(target, os.O_RDONLY | _NOFOLLOW)
            with os.fdopen(fd, "rb") as handle:
                if hashlib.sha256(handle.read()).hexdigest() == digest:
                    return digest
        except (IOError, OSError):
            pass
        if not os.path.isdir(self.blobs):
            os.makedirs(self.blobs, 0o700)
        temporary = os.path.join(self.blobs, ".%s.%d" % (digest, os.getpid()))
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW, 0o600)
        try:
            written = 0
            while written < len(data):
                written += os.write(fd, data[written:])
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(temporary, target)
        fsync_dir(self.blobs)
        return digest

    def txn(self, run, txn, what):
        stored = dict(what)
        stored["steps"] = [dict(step, args=self._stored(step.get("args") or {})) for step in what.get("steps") or []]
        self._append({"t": "txn", "run": run, "txn": txn, "boot": boot_id(), "what": stored})

    def mark(self, kind, run, txn, i=None, result=None):
        """begin, done (with RESULT), forward, abort, undone or close, for step I of transaction TXN of RUN."""
        line = {"t": kind, "run": run, "txn": txn}
        if i is not None:
            line["i"] = i
        if result:
            line["result"] = result
        self._append(line)

    def close(self):
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def clear(self):
        """Remove the journal (every transaction in it is closed), then the blobs: none is referred to now."""
        self.close()
        try:
            os.unlink(self.path)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                return  # the journal stays, and so do the blobs it names
        else:
            fsync_dir(os.path.dirname(self.path))
        try:
            names = os.listdir(self.blobs)
        except OSError:
            return
        for name in names:
            try:
                os.unlink(os.path.join(self.blobs, name))
            except OSError:
                pass
        fsync_dir(self.blobs)


def _refuse_orphans(orphans, unreadable):
    """Raise JournalError for a transaction whose plan line was lost (only lines naming it follow an unreadable
    line) and that began steps and never closed: what they changed cannot be known."""
    for (run, txn), lines in sorted(orphans.items(), key=lambda item: str(item[0])):
        if lines[-1].get("t") == "close" or not any(line.get("t") in ("begin", "done") for line in lines):
            continue
        first = unreadable[0]
        steps = sorted(set(line.get("i") for line in lines if line.get("t") in ("begin", "done")))
        raise JournalError(
            "the journal %s: line %d cannot be read, and the lines after it name transaction %s of run %s, which "
            "began steps %s and never closed; the unreadable line held its plan, so what those steps changed is "
            "unknown. Nothing was changed. The host may hold that transaction half done: its mount (findmnt), its "
            "line in %s, its units and its record %s. Fix: restore line %d from a backup of the journal if you have "
            "one; else make the mount and those files what you want by hand, then close the transaction with: "
            "printf '%%s\\n' '%s' >> %s, and run again: recovery of the rest goes on"
            % (first["journal"], first["line"], txn, run, steps, _host_paths.FSTAB, _host_paths.record_file(txn),
               first["line"], _encode({"run": run, "t": "close", "txn": txn}).decode("utf-8"), first["journal"]))


def _assume(txn):
    """Account, in TXN, for the unreadable lines after its last line (TXN["lost"]), and for lost done lines."""
    steps = txn["what"].get("steps") or []
    if txn["begun"]:
        for i in range(max(txn["begun"])):
            if i in txn["begun"] and i not in txn["results"]:
                txn["results"][i] = {}
                txn["assumed"].append("step %d (%s) was done, as a later step began; what it learnt is unknown"
                                      % (i, steps[i]["step"] if i < len(steps) else "?"))
    lost = txn["lost"]
    if not lost:
        return
    said = "line%s %s of the journal cannot be read" % ("s" if len(lost) > 1 else "", ", ".join(map(str, lost)))
    if txn["closed"]:
        last = max(txn["results"]) if txn["results"] else None
        if txn["forward"] and not txn["aborted"] and last not in (None, txn["what"].get("pivot")):
            # Lost: the abort of a later failure, its last step maybe half undone; doing that step again settles it.
            del txn["results"][last]
            txn["closed"] = False
            txn["assumed"].append("%s: assumed its undo began after it had closed, so it goes forward again from "
                                  "its step %d (%s)" % (said, last, steps[last]["step"] if last < len(steps) else "?"))
        return
    if txn["aborted"]:
        return  # going back already, and undo is decided from the host whatever began
    newest = max(txn["begun"]) if txn["begun"] else -1
    room = len(lost) if newest < 0 or newest in txn["results"] else len(lost) - 1
    maybe = set(range(newest + 1, min(len(steps), newest + 1 + (room + 1) // 2)))
    txn["maybe_begun"] = maybe
    if maybe:
        txn["assumed"].append("%s: assumed step%s %s (%s) may have begun, decided from what the host holds"
                              % (said, "s" if len(maybe) > 1 else "", ", ".join(map(str, sorted(maybe))),
                                 ", ".join(steps[i]["step"] for i in sorted(maybe))))
    elif newest >= 0 and newest not in txn["results"]:
        txn["assumed"].append("%s: assumed step %d (%s) may have finished, decided from what the host holds"
                              % (said, newest, steps[newest]["step"] if newest < len(steps) else "?"))
