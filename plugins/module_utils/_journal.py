# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The intent journal: what a run is about to change on the host, written durably before the change.

Changes are grouped in transactions, one per planned mount. A `txn` line holds every step of it with its
arguments (which say what undoes it: the old fstab lines, the old file texts, the mount below) and its point of
no return, the pivot. Then, for each step, a `begin` line is flushed to disk before the step acts and a `done`
line (with what it learnt, such as the mount ID of a new mount) after. `forward` says that the transaction
passed its pivot (its mount is in place and verified); `abort` that it is being undone, `undone` for each step
taken back; `close` that it is whole, one way or the other. When every transaction is closed the journal file
is removed.

Every run reads the journal first. A journal that is still there was left by a run that died (kill -9, a power
cut); recovery then rolls each open transaction forward (past its point of no return, in the same boot) or
back, step by step, newest first (see _executor.recover()).

The format is JSON lines appended with O_APPEND and fsync: a line is either whole on disk or, when the writer
died in the middle of it, a torn last line that is ignored (its step had not started: nothing acts before its
line is flushed). No database is needed for a few dozen lines per run, and the file stays readable by a person
(`cat /var/lib/ramdisk-provision/journal.jsonl`).
"""

from __future__ import annotations

import json
import os
import signal

from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths

# Test hook: kill this process at the Nth journal write (counted from 1 in each run), before or after the write.
# Used by the kill tests to stop a run at every journaled instant; unset in normal use.
KILL_ENV = "RAMDISK_PROVISION_TEST_KILL_AT"


def boot_id():
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            return handle.read().strip()
    except (IOError, OSError):
        return None


def _fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class JournalError(Exception):
    pass


class Journal(object):
    """Append-only, flushed before each change. RUN: this run's id (recorded in each line)."""

    def __init__(self, path=_host_paths.JOURNAL, run=None):
        self.path = path
        self.run = run
        self.writes = 0
        self._fd = None
        kill = os.environ.get(KILL_ENV, "")
        self._kill_at = int(kill) if kill.isdigit() else None

    # Reading ---------------------------------------------------------------------------------------------

    def read(self):
        """Every whole line of the journal, in order ([] when there is none). A torn last line is dropped."""
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
            try:
                line = json.loads(raw.decode("utf-8"))
            except ValueError:
                if index == len(lines) - 1 or all(not rest.strip() for rest in lines[index + 1:]):
                    continue  # torn by a death mid-write: that step never started
                raise JournalError("%s: line %d is not JSON, and lines follow it: the journal was changed by "
                                   "hand. Move it aside and run again." % (self.path, index + 1))
            if isinstance(line, dict):
                out.append(line)
        return out

    @staticmethod
    def transactions(lines):
        """The transactions of LINES, in the order they began: [{run, txn, boot, what (path, action, pivot,
        steps: [{step, args}]), begun: {i}, results: {i: result}, undone: {i}, forward, aborted, closed}]."""
        txns = {}
        order = []
        for line in lines:
            key = (line.get("run"), line.get("txn"))
            kind = line.get("t")
            if kind == "txn":
                txns[key] = {"run": line.get("run"), "txn": line.get("txn"), "boot": line.get("boot"),
                             "what": line.get("what") or {}, "begun": set(), "results": {}, "undone": set(),
                             "forward": False, "aborted": False, "closed": False}
                order.append(key)
                continue
            txn = txns.get(key)
            if txn is None:
                continue
            if kind == "begin":
                txn["begun"].add(line.get("i"))
            elif kind == "done":
                txn["results"][line.get("i")] = line.get("result") or {}
            elif kind == "forward":
                txn["forward"] = True
            elif kind == "abort":
                # An abort after the commit reopens it: the run undid a whole transaction after a later failure.
                txn["aborted"] = True
                txn["forward"] = False
                txn["closed"] = False
            elif kind == "undone":
                txn["undone"].add(line.get("i"))
            elif kind == "close":
                txn["closed"] = True
        return [txns[key] for key in order]

    # Writing ---------------------------------------------------------------------------------------------

    def _append(self, line):
        self.writes += 1
        if self._kill_at is not None and self.writes == self._kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if self._fd is None:
            directory = os.path.dirname(self.path)
            if not os.path.isdir(directory):
                os.makedirs(directory, 0o755)
            created = not os.path.exists(self.path)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0),
                               0o600)
            if created:
                _fsync_dir(directory)
        data = (json.dumps(line, sort_keys=True, separators=(",", ":")) + "\n").encode("utf-8")
        written = 0
        while written < len(data):
            written += os.write(self._fd, data[written:])
        os.fsync(self._fd)

    def txn(self, run, txn, what):
        self._append({"t": "txn", "run": run, "txn": txn, "boot": boot_id(), "what": what})

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
        """Remove the journal: every transaction in it is closed."""
        self.close()
        try:
            os.unlink(self.path)
        except OSError:
            return
        _fsync_dir(os.path.dirname(self.path))
