# SPDX-License-Identifier: GPL-3.0-or-later
"""One power cut of a persist_delta sync, run by tests/unit/test_persist_delta.py inside a private mount namespace.

The backing is an ext4 of its own (IMAGE on a loop device). OLD is synced into it (the helper's first copy, then
generation 1); then a sync of NEW is stopped at STEP (the script's kill point, with SIGSTOP), the file system is cut
off as a power cut would cut it (EXT4_IOC_SHUTDOWN without flushing the journal, what xfstests' godown does: what
the journal had not committed is lost, dirty pages too), and the sync is killed. The file system is mounted again
(the journal replayed), and a restore (a pending record applied to its copy) gives the snapshot in RESTORED.
With FLUSH "flush", the file system is flushed (syncfs) while the sync is stopped, before the cut: what the sync did
up to STEP is all on the disk (the journal's own timer might have committed it too), the rest is lost.

Usage: unshare --mount --propagation private python persist_delta_powercut.py SCRIPT IMAGE OLD NEW RESTORED STEP
FLUSH
Prints a JSON line: whether the sync was stopped at STEP, and the reports of the restore and of a verify.
"""

from __future__ import annotations

import fcntl
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


def main(script, image, old, new, restored, step, flush):
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
        env = dict(os.environ, PERSIST_DELTA_KILL_AT=step, PERSIST_DELTA_KILL_SIGNAL="SIGSTOP")
        child = subprocess.Popen([sys.executable, script, "sync", new, backing], env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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
        # The journal is replayed: what is on the disk is what a boot after the power cut would find.
        run(["mount", "-t", "ext4", loop, mount])
        restore = json.loads(run([sys.executable, script, "restore", backing, restored]))
        verify = json.loads(run([sys.executable, script, "verify", backing]))
        print(json.dumps({"stopped": stopped, "restore": restore, "verify": verify}))
    finally:
        subprocess.run(["umount", mount], check=False, capture_output=True)
        subprocess.run(["losetup", "-d", loop], check=False)


if __name__ == "__main__":
    main(*sys.argv[1:])
