# SPDX-License-Identifier: GPL-3.0-or-later
"""HostLock: one run at a time, between real processes holding a real flock, killed ones included."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap

import pytest

from ansible_collections.ramdisk.provision.plugins.module_utils._lock import (
    HostLock,
    LockHeld,
    describe,
    stale_holder,
)

HOLDER = """
    import os, sys, time
    from ansible_collections.ramdisk.provision.plugins.module_utils._lock import HostLock

    path, run, mode, seconds = sys.argv[1:5]
    lock = HostLock(path, {"run": run, "controller": "ctl01", "user": "alice"})
    lock.acquire(30)
    print("held", flush=True)
    if mode == "release":
        time.sleep(float(seconds))
        lock.release()
    elif mode == "exit":
        os._exit(0)
    else:
        time.sleep(3600)
"""


@pytest.fixture
def lock_path(tmp_path):
    return str(tmp_path / "run" / "ramdisk-provision" / "lock")


@pytest.fixture
def holder_process(lock_path):
    """Start a process that takes the lock for run RUN and behaves as MODE; wait until it holds it."""
    started = []

    def start(run, mode, seconds=0.0):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(HOLDER), lock_path, run, mode, str(seconds)],
                                stdout=subprocess.PIPE, text=True, env=env)
        started.append(proc)
        assert proc.stdout.readline() == "held\n"
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()


def ours(run="run-b"):
    return {"run": run, "controller": "ctl02", "user": "bob"}


def test_second_acquirer_gets_lock_held(lock_path, holder_process):
    first = holder_process("run-a", "forever")
    with pytest.raises(LockHeld) as caught:
        HostLock(lock_path, ours()).acquire(0.6, poll=0.1)
    message = str(caught.value)
    assert caught.value.waited >= 0.6
    assert caught.value.holder["run"] == "run-a"
    assert caught.value.holder["pid"] == first.pid
    assert "held by run run-a (pid %d, running, started " % first.pid in message
    assert "controller ctl01, user alice)" in message
    assert "waited 0.6 s" in message
    assert message.endswith("Wait for it to finish, or if pid %d is not running, run again: a lock of a dead "
                            "process is taken over." % first.pid)


def test_waiting_longer_than_the_holder_gets_the_lock(lock_path, holder_process):
    holder_process("run-a", "release", 1.0)
    lock = HostLock(lock_path, ours())
    got = lock.acquire(60, poll=0.05)
    try:
        assert got["waited"] > 0
        # It released: nothing was left behind.
        assert got["stale"] is None
        assert json.loads(open(lock_path).read())["run"] == "run-b"
    finally:
        lock.release()


@pytest.mark.parametrize("how", ["sigkill", "exit"])
def test_dead_holder_is_taken_over_at_once(lock_path, holder_process, how):
    first = holder_process("run-a", "forever" if how == "sigkill" else "exit")
    if how == "sigkill":
        os.kill(first.pid, signal.SIGKILL)
    first.wait()
    lock = HostLock(lock_path, ours())
    got = lock.acquire(0)
    try:
        assert got["stale"]["run"] == "run-a"
        assert got["stale"]["pid"] == first.pid
        assert got["stale"]["pid_alive"] is False
        assert got["stale"]["controller"] == "ctl01"
        assert lock.stale == got["stale"]
    finally:
        lock.release()


def test_release_empties_the_holder(lock_path):
    lock = HostLock(lock_path, ours())
    assert lock.acquire(0)["stale"] is None
    # Held already: a second acquire is a no-op.
    assert lock.acquire(0) == {"stale": None, "waited": 0.0, "waited_for": None}
    written = json.loads(open(lock_path).read())
    assert written == dict(ours(), pid=os.getpid(), start=lock.holder["start"])
    assert stat.S_IMODE(os.stat(lock_path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(lock_path)).st_mode) == 0o700
    lock.release()
    assert open(lock_path).read() == ""
    assert not lock.held
    lock.release()
    # Released: the next one finds nothing stale.
    again = HostLock(lock_path, ours("run-c"))
    assert again.acquire(0)["stale"] is None
    again.release()


def test_one_process_two_locks_exclude_each_other(lock_path):
    with HostLock(lock_path, ours("run-a")) as first:
        assert first.held
        with pytest.raises(LockHeld, match="held by run run-a"):
            HostLock(lock_path, ours("run-b")).acquire(0)
    assert not first.held
    assert open(lock_path).read() == ""


STALE = [
    # (previous holder text, our holder, stale)
    (None, ours(), None),
    ({}, ours(), None),
    # Our own run, its process still there: a re-acquire, not a take-over.
    ({"run": "run-b", "pid": os.getpid()}, ours(), None),
    ({"run": "run-a", "pid": os.getpid()}, ours(), {"run": "run-a", "pid": os.getpid(), "pid_alive": True}),
    ({"run": "run-b", "pid": 2 ** 22 + 7}, ours(), {"run": "run-b", "pid": 2 ** 22 + 7, "pid_alive": False}),
    ({"unreadable": "garbage"}, ours(), {"unreadable": "garbage", "pid_alive": False}),
]


@pytest.mark.parametrize("previous, holder, expected", STALE)
def test_stale_holder(previous, holder, expected):
    assert stale_holder(previous, holder) == expected


DESCRIBE = [
    # (holder, words)
    (None, "a run that has not written its name yet"),
    ({"unreadable": "x"}, "a holder whose record is unreadable ('x')"),
    ({"run": "r1", "pid": 2 ** 22 + 7}, "run r1 (pid 4194311, not running)"),
    ({"pid": os.getpid(), "start": "2024-05-01T10:00:00+00:00"},
     "run (no id) (pid %d, running, started 2024-05-01T10:00:00+00:00)" % os.getpid()),
]


@pytest.mark.parametrize("holder, words", DESCRIBE)
def test_describe(holder, words):
    assert describe(holder) == words
