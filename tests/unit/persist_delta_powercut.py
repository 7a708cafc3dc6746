# SPDX-License-Identifier: GPL-3.0-or-later
"""One power cut of a persist_delta sync, run by tests/unit/test_persist_delta.py inside a private mount namespace.

The backing is an ext4 of its own (IMAGE on a loop device). OLD is synced into it (the helper's first copy, then
generation 1); then a sync of NEW is stopped at STEP (the script's kill point, with SIGSTOP), the file system is cut
off as a power cut would cut it (EXT4_IOC_SHUTDOWN without flushing the journal, what xfstests' godown does: what
the journal had not committed is lost, dirty pages too), and the sync is killed. The file system is mounted again
(the journal replayed), and a restore (which rolls a pending record forward first) gives the snapshot in RESTORED,
compared with the backing's current copy.
With FLUSH "flush", the file system is flushed (syncfs) while the sync is stopped, before the cut: what the sync did
up to STEP is all on the disk (the journal's own timer might have committed it too), the rest is lost.

With RESTORE_STEP, the first restore after the cut is cut too, at that kill point of its roll-forward, the same
way; then a restore gives RESTORED.

Usage: unshare --mount --propagation private python persist_delta_powercut.py SCRIPT IMAGE OLD NEW RESTORED STEP
FLUSH [RESTORE_STEP]
Prints a JSON line: whether the sync was stopped at STEP, and the reports of the restore and of a verify.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import signal
import struct
import subprocess
import sys

# _IOR('X', 125, __u32) and EXT4_GOING_FLAGS_NOLOGFLUSH from linux/ext4.h.
EXT4_IOC_SHUTDOWN = 0x8004587D
EXT4_GOING_FLAGS_NOLOGFLUSH = 2


def run(argv, **kwargs):
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kwargs).stdout


def power_cut(mount):
    fd = os.open(mount, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.ioctl(fd, EXT4_IOC_SHUTDOWN, struct.pack("I", EXT4_GOING_FLAGS_NOLOGFLUSH))
    finally:
        os.close(fd)


def digest(script, root):
    """The engine's digest of the tree at ROOT."""
    spec = importlib.util.spec_from_file_location("persist_delta", script)
    engine = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(engine)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return engine.digest_of(fd)
    finally:
        os.close(fd)


def cut_at(argv, step, flush, mount, loop):
    """ARGV run until the engine's kill point STEP, the power cut there (after a flush with FLUSH), the process
    killed, the file system mounted again (its journal replayed: what a boot after the cut would find). Whether the
    process reached STEP."""
    env = dict(os.environ, PERSIST_DELTA_KILL_AT=step, PERSIST_DELTA_KILL_SIGNAL="SIGSTOP")
    child = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, status = os.waitpid(child.pid, os.WUNTRACED)
    stopped = os.WIFSTOPPED(status)
    if stopped:
        if flush == "flush":
            run(["sync", "-f", mount])
        power_cut(mount)
        os.kill(child.pid, signal.SIGKILL)
        os.waitpid(child.pid, 0)
    child.returncode = -1  # reaped here, not by Popen
    run(["umount", mount])
    run(["mount", "-t", "ext4", loop, mount])
    return stopped


def main(script, image, old, new, restored, step, flush, restore_step=""):
    mount = image + ".mnt"
    os.mkdir(mount)
    loop = run(["losetup", "--find", "--show", image]).strip()
    try:
        run(["mount", "-t", "ext4", loop, mount])
        backing = os.path.join(mount, "backing")
        os.mkdir(backing)
        run(["rsync", "-aHAX", "--numeric-ids", "--sparse", "--modify-window=-1", old + "/",
             os.path.join(backing, "snap-1")])
        os.symlink("snap-1", os.path.join(backing, "current"))
        run([sys.executable, script, "sync", old, backing])
        run(["sync", "-f", mount])
        stopped = cut_at([sys.executable, script, "sync", new, backing], step, flush, mount, loop)
        restore_stopped = None
        if restore_step:
            # The boot after the cut is cut too, while its restore rolls the backing forward.
            scratch = restored + ".cut"
            os.mkdir(scratch)
            restore_stopped = cut_at([sys.executable, script, "restore", backing, scratch], restore_step, flush,
                                     mount, loop)
        restore = json.loads(run([sys.executable, script, "restore", backing, restored]))
        # What the lab's power-cut check compares: the restored copy against the backing's current one (the
        # engine's digest of each: every entry's attributes and the hard-link groups).
        same_as_current = digest(script, restored) == digest(script, os.path.join(backing, "current"))
        verify = json.loads(run([sys.executable, script, "verify", backing]))
        print(json.dumps({"stopped": stopped, "restore_stopped": restore_stopped, "restore": restore,
                          "verify": verify, "same_as_current": same_as_current}))
    finally:
        subprocess.run(["umount", mount], check=False, capture_output=True)
        subprocess.run(["losetup", "-d", loop], check=False)


if __name__ == "__main__":
    main(*sys.argv[1:])
