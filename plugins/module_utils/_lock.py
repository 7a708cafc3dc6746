# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""One run at a time per host: an flock on a file under /run that also names who holds it.

As dpkg's lock-frontend: the kernel drops an flock when the last descriptor of its holder closes, so a killed
run never leaves the host locked; the holder's JSON stays in the file until the next holder overwrites it,
which is how the next run learns that the last one ended without releasing. A release empties the file.
"""

from __future__ import annotations

import datetime
import errno
import fcntl
import json
import os
import time

from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths


# Seconds a run that found the lock taken by a holder without a name yet looks again before it gives up.
NAMELESS_GRACE = 1.0


class LockHeld(Exception):
    """The lock stayed taken for the whole wait; the message names the holder and what to do."""

    def __init__(self, message, path, holder, waited):
        super().__init__(message)
        self.path = path
        self.holder = holder
        self.waited = waited


def pid_alive(pid):
    """Whether a process with PID runs (in this pid namespace); a zombie counts as running."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _read_holder(fd):
    raw = os.pread(fd, 65536, 0).decode("utf-8", "replace").strip()
    if not raw:
        return None
    try:
        holder = json.loads(raw)
    except ValueError:
        holder = None
    return holder if isinstance(holder, dict) else {"unreadable": raw[:200]}


def stale_holder(previous, holder):
    """PREVIOUS, the holder text found on taking the lock, as left behind by a run that did not release it.

    None when there was none, or when it is our own run's still running process (a re-acquire in one run).
    """
    if not previous:
        return None
    alive = pid_alive(previous.get("pid"))
    if alive and previous.get("run") == holder.get("run"):
        return None
    return dict(previous, pid_alive=alive)


def describe(holder):
    """The holder in words: run R (pid N, running, started S, controller C, user U)."""
    if not holder:
        return "a run that has not written its name yet"
    if "unreadable" in holder:
        return "a holder whose record is unreadable (%r)" % holder["unreadable"]
    pid = holder.get("pid")
    facts = ["pid %s, %s" % (pid, "running" if pid_alive(pid) else "not running")]
    for key, label in (("start", "started"), ("controller", "controller"), ("user", "user")):
        if holder.get(key):
            facts.append("%s %s" % (label, holder[key]))
    return "run %s (%s)" % (holder.get("run") or "(no id)", ", ".join(facts))


class HostLock:
    """The host lock at PATH, held for HOLDER (run, pid, start, controller, user; pid and start filled in).

    TIMEOUT is what `with lock:` waits when the lock was not acquired before.
    """

    def __init__(self, path=_host_paths.LOCK, holder=None, timeout=0.0):
        self.path = path
        self.holder = dict(holder or {})
        self.holder.setdefault("pid", os.getpid())
        self.holder.setdefault("start", _now())
        self.timeout = timeout
        self.stale = None
        self._fd = None

    @property
    def held(self):
        return self._fd is not None

    def acquire(self, timeout, poll=0.2):
        """Take the lock, waiting up to TIMEOUT seconds; return {"stale": holder left behind or None, "waited",
        "waited_for": the holder this run saw when it began to wait, or None}.

        Raises LockHeld when another holder keeps it for the whole wait.
        """
        if self._fd is not None:
            return {"stale": self.stale, "waited": 0.0, "waited_for": None}
        directory = os.path.dirname(self.path)
        if directory:
            os.makedirs(directory, mode=0o700, exist_ok=True)
        # O_CLOEXEC: a command run under the lock must not keep it after we are gone.
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        started = time.monotonic()
        waited_for = None
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                        raise
                holder = _read_holder(fd)
                if not waited_for:
                    waited_for = holder or {}
                waited = time.monotonic() - started
                if waited >= timeout:
                    # No name: the holder took the lock an instant ago (it writes its name next) or is releasing
                    # it (the name goes first). Look again shortly rather than blame a nameless run.
                    if holder is None and waited < timeout + NAMELESS_GRACE:
                        time.sleep(0.01)
                        continue
                    raise self._held(holder, waited)
                time.sleep(max(0.0, min(poll, timeout - waited)))
            waited = time.monotonic() - started
            self.stale = stale_holder(_read_holder(fd), self.holder)
            record = (json.dumps(self.holder, sort_keys=True) + "\n").encode("utf-8")
            os.ftruncate(fd, 0)
            os.pwrite(fd, record, 0)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return {"stale": self.stale, "waited": waited, "waited_for": waited_for or None}

    def _held(self, holder, waited):
        pid = (holder or {}).get("pid", "N")
        message = ("the host lock %s is held by %s; waited %.1f s for it. Wait for it to finish, or if pid %s is not "
                   "running, run again: a lock of a dead process is taken over."
                   % (self.path, describe(holder), waited, pid))
        return LockHeld(message, self.path, holder, waited)

    def release(self):
        """Empty the holder text, then unlock and close; a no-op when not held."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def __enter__(self):
        self.acquire(self.timeout)
        return self

    def __exit__(self, *exc_info):
        self.release()
        return False
