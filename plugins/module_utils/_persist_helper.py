# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The persist helper: keeps a RAM mount's contents in a backing directory on disk (issue 41: one program).

Installed on the host as /usr/local/libexec/ramdisk-provision/persist (ramdisk_apply prepends the line that names
the system's python3 and writes PLACES from _host_paths), beside its copy engine persist-delta.py (this collection's _persist_delta.py). systemd runs it:
ramdisk-persist-TOKEN.service runs restore when it starts (before the services that use the data) and sync when it
stops (after them); ramdisk-persist-sync-TOKEN.timer runs sync every interval. TOKEN names
/etc/ramdisk-provision/persist/TOKEN.conf (KEY=VALUE lines, values quoted as a shell would read them; it is parsed,
never run): MOUNT, BACKING, KEEP (copies the backing keeps, current included; 2 if unset), SERVICES and STOP_SERVICES
(1: a sync stops those of SERVICES that run for its copy, and starts them again).

  persist restore TOKEN          fill an empty MOUNT from BACKING/current; a MOUNT that holds data is newer: kept
  persist sync TOKEN             write MOUNT's changes into BACKING/current (the first time: a whole copy)
  persist resume TOKEN           start the services a killed sync left stopped (the sync service's ExecStopPost)
  persist return TOKEN DIR       the backing's current copy into DIR, an empty directory on disk
  persist list TOKEN             the generations the backing keeps, newest first
  persist restore-back N TOKEN   fill an empty MOUNT with the copy N generations before current

Which mount a sync may write back is the one a restore (or the first copy) filled: its identity, kept in
/run/ramdisk-provision/persist/TOKEN.restored (root's only), is the kernel's unique 64-bit mount ID (statx
STATX_MNT_ID_UNIQUE, Linux 6.8 and later) and a random token set on the mount root as the extended attribute
trusted.ramdisk-provision.mount (only root sets trusted.*; tmpfs keeps it). Either one tells a remount of the path
from the mount restored, which the kernel's reusable mount ID and device number do not. A host with neither (an
older kernel and a file system without trusted xattrs: ramfs) falls back on the mount ID and device, and a remount
by hand there may be taken for the restored mount: the status says IDENTITY=reusable. A sync of a mount that is
not the restored one is refused: exit status 3, RESULT=refused and REASON in the status.

Every state file lives under /run/ramdisk-provision/persist (0700, root): the mark of a restore under way (bound to
the mount's identity: a restore cut short is emptied and done again; a mount of another identity is not touched),
the record of the services a sync holds stopped, the lock. Nothing is read from, or written to, names inside the
mount but the data itself.

A sync copies with the engine (_persist_delta.sync): the changes staged, committed, then moved into current;
file systems mounted inside MOUNT are left out (named in the status as SKIPPED_MOUNTS). journald's files are copied
only when closed: while journald writes into MOUNT, a sync first has it write what it was sent (journalctl --sync)
and close its files (journalctl --rotate), and leaves out the active ones (a .journal name without '@').

With STOP_SERVICES=1 a sync stops those of SERVICES that run just before its copy and starts them again right after
it, also when the copy failed or the sync was stopped (TERM); which it stopped is written to /run first, so that a
sync killed outright leaves them to "persist resume" or to the next sync. A service that was not running stays
stopped; nothing is started while the system shuts down, nor against a stop queued meanwhile (--job-mode=fail).

Each sync attempt is recorded in /var/lib/ramdisk-provision/persist/TOKEN.status (result, exit status, start and
end, how it copied, the figures of the last successful one); then the metrics collector runs when installed.

Exit status: 0 done; 1 failed; 2 bad arguments; 3 refused (the backing holds the newer copy); 4 a sync whose copy
became current, with a service it stopped that did not start again; 130 and 143 stopped by INT and TERM.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import importlib.util
import json
import os
import re
import secrets
import shlex
import signal
import stat
import subprocess
import sys
import time

try:
    from ansible_collections.ramdisk.provision.plugins.module_utils import _persist_delta as engine
except ImportError:
    engine = None
try:
    from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths
except ImportError:  # on the host, where PLACES below was written out on install
    _host_paths = None


def places(paths):
    """The host paths the helper uses, from _host_paths (PATHS)."""
    return {"conf_dir": paths.PERSIST_CONF_DIR, "state_dir": paths.PERSIST_STATE_DIR,
            "status_dir": paths.PERSIST_STATUS_DIR, "metrics_collector": paths.METRICS_COLLECTOR,
            "engine": paths.PERSIST_DELTA}


# Host paths: in the collection read from _host_paths; on the host, persist_helper_text() (_persist_steps) puts
# their values in place of the line that carries PLACES_MARKER. A plain dictionary, so that the tests point them
# at their own directories.
PLACES_MARKER = "# ramdisk-provision: PLACES"
PLACES = places(_host_paths) if _host_paths is not None else {}  # ramdisk-provision: PLACES
XATTR = "trusted.ramdisk-provision.mount"
USAGE = "usage: persist restore|sync|resume|list TOKEN, persist return TOKEN DIR, persist restore-back N TOKEN"
STATX_MNT_ID_UNIQUE = 0x4000
AT_EMPTY_PATH = 0x1000
RAM_FS_MAGIC = {0x01021994: "tmpfs", 0x858458F6: "ramfs"}
JOURNAL_FILTERS = [("+", "*@*.journal"), ("-", "*.journal")]


class PersistError(Exception):
    """A failure the helper reports and exits with (CODE: 1 failed, 2 bad arguments, 3 refused)."""

    def __init__(self, message, code=1):
        Exception.__init__(self, message)
        self.code = code


class Stopped(BaseException):
    """A TERM or INT: the sync ends as failed, its services started again, its partial copy removed."""

    def __init__(self, code):
        BaseException.__init__(self, code)
        self.code = code


def load_engine():
    """The copy engine: the collection's module_utils when importable, else persist-delta.py installed beside."""
    if engine is not None:
        return engine
    spec = importlib.util.spec_from_file_location("persist_delta", PLACES["engine"])
    if spec is None or spec.loader is None:
        raise PersistError("the copy engine %s is missing: run the role again to install it" % PLACES["engine"])
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except OSError as exc:
        raise PersistError("the copy engine %s cannot be read (%s): run the role again to install it"
                           % (PLACES["engine"], exc.strerror)) from exc
    return module


def parse_conf(text):
    """KEY=VALUE lines, values quoted as a shell reads them (shlex, never a shell), into a dict; others skipped."""
    values = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, _sep, value = line.partition("=")
        if not name.replace("_", "").isalnum() or not name.isupper():
            continue
        try:
            words = shlex.split(value, comments=False, posix=True)
        except ValueError:
            continue
        values[name] = " ".join(words)
    return values


def _now():
    return "%.9f" % time.time()


# The mount: is it one, what holds it, and which one it is ------------------------------------------------------

def _unescape(field):
    """A /proc/self/mountinfo field with its octal escapes (\\040 for a space, ...) decoded."""
    return os.fsdecode(re.sub(rb"\\([0-7]{3})", lambda match: bytes([int(match.group(1), 8)]), field))


def mountinfo_id(path):
    """'MOUNT-ID MAJOR:MINOR' of the top mount at PATH from /proc/self/mountinfo, or '' (not a mount point). The
    kernel reuses both: an identity of last resort."""
    found = ""
    with open("/proc/self/mountinfo", "rb") as handle:
        for line in handle:
            fields = line.split(b" ")
            if len(fields) > 4 and _unescape(fields[4]) == path:
                found = "%s %s" % (fields[0].decode(), fields[2].decode())
    return found


def is_mount_point(path):
    return mountinfo_id(path) != ""


def fs_type(path):
    """'tmpfs' or 'ramfs' for a file system in RAM (statfs' magic number), else 'disk'."""
    class StatFs(ctypes.Structure):
        _fields_ = [("f_type", ctypes.c_long), ("rest", ctypes.c_byte * 120)]
    libc = ctypes.CDLL(None, use_errno=True)
    buf = StatFs()
    if libc.statfs(os.fsencode(path), ctypes.byref(buf)) != 0:
        code = ctypes.get_errno()
        raise PersistError("statfs %s: %s" % (path, os.strerror(code)))
    return RAM_FS_MAGIC.get(buf.f_type & 0xFFFFFFFF, "disk")


def unique_mount_id(fd):
    """The kernel's unique 64-bit ID of the mount FD is on (statx STATX_MNT_ID_UNIQUE, Linux 6.8+), or None."""
    libc = ctypes.CDLL(None, use_errno=True)
    statx = getattr(libc, "statx", None)
    if statx is None:
        return None
    buf = ctypes.create_string_buffer(256)
    if statx(fd, b"", AT_EMPTY_PATH, STATX_MNT_ID_UNIQUE, buf) != 0:
        return None
    mask = int.from_bytes(buf.raw[0:4], "little")
    if not mask & STATX_MNT_ID_UNIQUE:
        return None
    return int.from_bytes(buf.raw[0x90:0x98], "little")


def identity(path):
    """What tells the mount at PATH from any other mount there, before or after: {'unique': the unique mount ID or
    None, 'token': our xattr on its root or None, 'mountinfo': the reusable ID and device}."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            token = os.getxattr(fd, XATTR).decode("ascii", "replace")
        except OSError:
            token = None
        return {"unique": unique_mount_id(fd), "token": token, "mountinfo": mountinfo_id(path)}
    finally:
        os.close(fd)


def mark_mount(path):
    """A new random token on the mount root (only root sets trusted.*), then the identity that names it."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            os.setxattr(fd, XATTR, secrets.token_hex(16).encode("ascii"))
        except OSError as exc:
            if exc.errno not in (errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM):
                raise
            try:
                os.removexattr(fd, XATTR)
            except OSError:
                pass
    finally:
        os.close(fd)
    return identity(path)


def same_mount(recorded, now, location_only=False):
    """Whether NOW (identity()) is the mount RECORDED names; LOCATION_ONLY: by the kernel's IDs alone (a restore
    under way may replace the root's xattrs with its copy's)."""
    if not isinstance(recorded, dict):
        return False
    checked = False
    for key in ("unique",) if location_only else ("unique", "token"):
        if recorded.get(key) is not None:
            checked = True
            if recorded.get(key) != now.get(key):
                return False
    if recorded.get("mountinfo") != now.get("mountinfo"):
        return False
    return checked or bool(recorded.get("mountinfo") is not None)


def strength(record):
    return "unique" if record.get("unique") is not None or record.get("token") is not None else "reusable"


# Files and sizes --------------------------------------------------------------------------------------------------

def write_file(path, text, mode=0o600):
    """Temporary file, flush, rename: PATH whole or as it was."""
    tmp = "%s.%d.tmp" % (path, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        os.write(fd, text.encode("utf-8", "surrogateescape"))
        os.fchmod(fd, mode)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.rename(tmp, path)
    except OSError:
        os.unlink(tmp)
        raise


def read_json(path):
    try:
        with open(path, "rb") as handle:
            return json.loads(handle.read().decode("utf-8"))
    except (OSError, ValueError):
        return None


def remove(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def disk_usage(paths, seen=None):
    """Bytes the PATHS take on disk (du -s -B1: blocks, each inode once), by directory descriptors."""
    seen = set() if seen is None else seen
    total = 0
    for path in paths:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
        if not stat.S_ISDIR(st.st_mode):
            continue
        for _dirpath, dirnames, filenames, dir_fd in os.fwalk(path):
            for name in dirnames + filenames:
                try:
                    entry = os.lstat(name, dir_fd=dir_fd)
                except FileNotFoundError:
                    continue
                if (entry.st_dev, entry.st_ino) not in seen:
                    seen.add((entry.st_dev, entry.st_ino))
                    total += entry.st_blocks * 512
    return total


def holds_data(path):
    return any(name != "lost+found" for name in os.listdir(path))


def empty_directory(path, spare="lost+found"):
    """Every entry of PATH but SPARE (the file system's own) removed, by directory descriptors (no link followed)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        for name in os.listdir(fd):
            if name != spare:
                _remove_at(fd, name)
    finally:
        os.close(fd)


def _remove_at(dir_fd, name):
    st = os.lstat(name, dir_fd=dir_fd)
    if stat.S_ISDIR(st.st_mode):
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        try:
            for child in os.listdir(fd):
                _remove_at(fd, child)
        finally:
            os.close(fd)
        os.rmdir(name, dir_fd=dir_fd)
    else:
        os.unlink(name, dir_fd=dir_fd)


def run(argv):
    """(exit status, output) of ARGV, an argument list (never a shell); 127 when the program is missing."""
    try:
        # A standalone program run by systemd on the host, with no AnsibleModule and so no run_command.
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,  # pylint: disable=ansible-bad-function
                              text=True, check=False)
    except OSError as exc:
        return 127, "", str(exc)
    return done.returncode, done.stdout, done.stderr


# One run of the helper -----------------------------------------------------------------------------------------

class Persist(object):
    def __init__(self, token):
        self.token = token
        self.started = _now()
        conf_path = os.path.join(PLACES["conf_dir"], token + ".conf")
        try:
            with open(conf_path, encoding="utf-8", errors="surrogateescape") as handle:
                conf = parse_conf(handle.read())
        except OSError as exc:
            raise PersistError("%s is missing (%s)" % (conf_path, exc.strerror)) from exc
        self.mount = conf.get("MOUNT", "")
        self.backing = conf.get("BACKING", "")
        if not self.mount or not self.backing:
            raise PersistError("%s does not give MOUNT and BACKING" % conf_path)
        keep = conf.get("KEEP", "")
        self.keep = 2
        if keep:
            if keep.isdigit() and not keep.startswith("0"):
                self.keep = int(keep)
            else:
                # A bad KEEP (the role writes a checked one) costs disk space, never a sync.
                self.say("KEEP=%s in %s is not a whole number of 1 or more: keeping 2 copies" % (keep, conf_path))
        self.services = conf.get("SERVICES", "").split()
        self.stop_services_wanted = conf.get("STOP_SERVICES") == "1"
        state = PLACES["state_dir"]
        self.restored = os.path.join(state, token + ".restored")
        self.partial = os.path.join(state, token + ".partial")
        self.stopped = os.path.join(state, token + ".stopped")
        self.status_path = os.path.join(PLACES["status_dir"], token + ".status")
        self.lock_file = None
        # What the status of a sync says.
        self.copy = ""
        self.snapshot = ""
        self.figures = {}
        self.skipped = []
        self.reason = ""
        self.id_strength = ""
        self.services_stopped = []
        self.services_down_since = None
        self.services_down_seconds = ""
        self.services_left_down = []
        self.terminated = False

    def say(self, message):
        sys.stderr.write("persist %s: %s\n" % (self.token, message))
        sys.stderr.flush()

    # State directory and lock --------------------------------------------------------------------------------

    def lock(self):
        """The state directory (root's only) and one restore or sync of a mount at a time."""
        state = PLACES["state_dir"]
        os.makedirs(state, mode=0o700, exist_ok=True)
        st = os.lstat(state)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            raise PersistError("%s is not a directory of this user's: refusing to keep state there" % state)
        os.chmod(state, 0o700)
        fd = os.open(os.path.join(state, self.token + ".lock"),
                     os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        self.lock_file = fd

    def check_places(self):
        if not is_mount_point(self.mount):
            raise PersistError("%s is not a mount point: refusing to touch the directory under it" % self.mount)
        if os.path.islink(self.backing):
            raise PersistError("the backing directory %s is a symbolic link: refusing to follow it" % self.backing)
        if not os.path.isdir(self.backing):
            raise PersistError("the backing directory %s is missing" % self.backing)
        kind = fs_type(self.backing)
        if kind != "disk":
            raise PersistError("the backing directory %s is in RAM, so it would not outlive a reboot (%s)"
                               % (self.backing, kind))

    # Services (STOP_SERVICES) ------------------------------------------------------------------------------

    def shutting_down(self):
        return run(["systemctl", "is-system-running"])[1].strip() == "stopping"

    def stop_services(self):
        """Stops those of SERVICES that run, after writing their names to the record start_services() reads."""
        if not (self.stop_services_wanted and self.services):
            return
        running = []
        for unit in self.services:
            rc, out, _err = run(["systemctl", "show", "-p", "ActiveState", "--value", "--", unit])
            if rc == 0 and out.strip() in ("active", "reloading", "activating"):
                running.append(unit)
        if not running:
            return
        try:
            write_file(self.stopped, " ".join(running) + "\n")
        except OSError as exc:
            raise PersistError("could not write %s, the record of the services this sync stops (%s): %s not stopped"
                               % (self.stopped, exc.strerror, " ".join(running))) from exc
        self.services_stopped = running
        self.services_down_since = time.time()
        rc, _out, err = run(["systemctl", "stop", "--"] + running)
        if rc != 0:
            raise PersistError("could not stop %s for a consistent copy of %s: %s"
                               % (" ".join(running), self.mount, err.strip()))
        self.say("stopped %s for the copy" % " ".join(running))

    def start_services(self):
        """Starts the services of the record (this sync's, or those a killed sync left stopped), unless the system
        is shutting down; then removes the record, which stays when they could not be started after a TERM (the
        sync service's ExecStopPost, persist resume, starts them)."""
        if not os.path.exists(self.stopped):
            return
        try:
            with open(self.stopped, encoding="utf-8") as handle:
                units = handle.read().split()
        except OSError:
            units = []
        if not self.services_stopped:
            self.services_stopped = units
        keep_record = False
        if not units:
            keep_record = self.terminated
            self.services_left_down = list(self.services_stopped)
        elif self.shutting_down():
            self.services_left_down = units
            self.say("the system is shutting down: %s stay stopped" % " ".join(units))
        else:
            rc, _out, _err = run(["systemctl", "start", "--job-mode=fail", "--"] + units)
            if rc == 0:
                self.say("started %s again" % " ".join(units))
            else:
                self.services_left_down = units
                keep_record = self.terminated
                self.say("could not start %s again after the copy: see systemctl status %s"
                         % (" ".join(units), " ".join(units)))
        if self.services_down_since is not None:
            self.services_down_seconds = "%.3f" % (time.time() - self.services_down_since)
        if not keep_record:
            remove(self.stopped)

    def resume_left_stopped(self):
        """A sync killed while it held services stopped: they start first."""
        if not os.path.exists(self.stopped):
            return False
        try:
            with open(self.stopped, encoding="utf-8") as handle:
                names = handle.read().strip()
        except OSError:
            names = "?"
        self.say("a sync was killed while it held %s stopped" % names)
        self.start_services()
        return True

    # Status ------------------------------------------------------------------------------------------------

    def record_sync(self, code):
        """The status of a sync attempt (the figures of the last successful one kept across failed ones), then the
        metrics collector. Never changes the exit status."""
        result = "ok" if code in (0, 4) else "refused" if code == 3 else "failed"
        lines = ["RESULT=%s" % result, "EXIT=%d" % code, "STARTED=%s" % self.started, "FINISHED=%s" % _now()]
        if self.reason:
            lines.append("REASON=%s" % shlex.quote(self.reason))
        if self.id_strength:
            lines.append("IDENTITY=%s" % self.id_strength)
        if self.copy:
            lines += ["COPY=%s" % self.copy, "COPY_TOOL=persist-delta"]
        if self.skipped:
            lines.append("SKIPPED_MOUNTS=%s" % shlex.quote(json.dumps(self.skipped)))
        if self.services_stopped:
            lines += ["SERVICES_STOPPED='%s'" % " ".join(self.services_stopped),
                      "SERVICES_DOWN_SECONDS=%s" % self.services_down_seconds,
                      "SERVICES_LEFT_DOWN='%s'" % " ".join(self.services_left_down)]
        if result == "ok":
            lines += ["LAST_OK_SNAPSHOT=%s" % self.snapshot, "LAST_OK_FINISHED=%s" % _now(),
                      "LAST_OK_BYTES=%s" % self.figures.get("bytes", ""),
                      "LAST_OK_WRITTEN_BYTES=%s" % self.figures.get("written", ""),
                      "LAST_OK_BACKING_BYTES=%s" % self.figures.get("backing", "")]
        else:
            try:
                with open(self.status_path, encoding="utf-8") as handle:
                    lines += [line for line in handle.read().splitlines() if line.startswith("LAST_OK_")]
            except OSError:
                pass
        try:
            os.makedirs(PLACES["status_dir"], exist_ok=True)
            write_file(self.status_path, "\n".join(lines) + "\n", mode=0o644)
        except OSError as exc:
            self.say("could not write %s: %s" % (self.status_path, exc.strerror))
        self.collect_metrics()

    def collect_metrics(self):
        if os.access(PLACES["metrics_collector"], os.R_OK):
            rc, _out, _err = run([sys.executable, PLACES["metrics_collector"], "collect"])
            if rc != 0:
                self.say("the metrics collector failed")

    def note_resumed(self):
        """After resume: the status of the sync that left the record says which services are still stopped."""
        try:
            with open(self.status_path, encoding="utf-8") as handle:
                lines = handle.read().splitlines()
        except OSError:
            return
        if not any(line.startswith("SERVICES_LEFT_DOWN=") for line in lines):
            return
        lines = ["SERVICES_LEFT_DOWN='%s'" % " ".join(self.services_left_down)
                 if line.startswith("SERVICES_LEFT_DOWN=") else line for line in lines]
        try:
            write_file(self.status_path, "\n".join(lines) + "\n", mode=0o644)
        except OSError:
            return
        self.collect_metrics()

    # journald ----------------------------------------------------------------------------------------------

    def journald_writes_here(self):
        rc, out, _err = run(["systemctl", "show", "-p", "MainPID", "--value", "systemd-journald.service"])
        pid = out.strip()
        if rc != 0 or not pid.isdigit() or pid == "0":
            return False
        fds = "/proc/%s/fd" % pid
        try:
            names = os.listdir(fds)
        except OSError:
            return False
        prefix = self.mount.rstrip("/") + "/"
        for name in names:
            try:
                target = os.readlink(os.path.join(fds, name))
            except OSError:
                continue
            if target.startswith(prefix) and target.endswith(".journal"):
                return True
        return False

    def close_journal(self):
        """journald's open files of MOUNT closed; the filters that leave out the ones it opens anew."""
        if not self.journald_writes_here():
            return []
        # --sync first: journald writes what it has been sent so far, so every line logged before is in the copy.
        for argv in (["journalctl", "--sync"], ["journalctl", "--rotate"]):
            if run(argv)[0] != 0:
                raise PersistError("journalctl --rotate failed, so the journal files journald writes in %s cannot be "
                                   "closed for the copy; %s/current is unchanged" % (self.mount, self.backing))
        return list(JOURNAL_FILTERS)

    # Commands ----------------------------------------------------------------------------------------------

    def current_name(self):
        link = os.path.join(self.backing, "current")
        return os.readlink(link) if os.path.islink(link) else None

    def restore(self, back=0):
        delta = load_engine()
        self.check_places()
        here = identity(self.mount)
        marker = read_json(self.partial)
        if marker is not None or os.path.lexists(self.partial):
            if same_mount(marker, here, location_only=True):
                self.say("a restore into %s was cut short: emptying it to restore again" % self.mount)
                empty_directory(self.mount)
            remove(self.partial)
        current = os.path.join(self.backing, "current")
        if holds_data(self.mount):
            if back:
                raise PersistError("%s holds data: empty it first to restore the copy %d back into it"
                                   % (self.mount, back))
            self.say("%s holds data, newer than the backing: kept as it is" % self.mount)
        elif os.path.islink(current) and os.path.isdir(current):
            remove(self.restored)
            write_file(self.partial, json.dumps(here) + "\n")
            # A setgid root passes the bit to every directory made in it; the copy's root mode is set last.
            mode = stat.S_IMODE(os.stat(self.mount).st_mode)
            if mode & stat.S_ISGID:
                os.chmod(self.mount, mode & ~stat.S_ISGID)
            try:
                report = delta.restore(self.backing, self.mount, back)
            except (delta.SyncError, OSError, subprocess.CalledProcessError) as exc:
                raise PersistError("copying %s/current into %s failed: %s" % (self.backing, self.mount, exc)) from exc
            remove(self.partial)
            if report.get("recovered"):
                self.say("%s held a sync cut short after its commit record: %s before the copy, so that the mount "
                         "is its current copy" % (self.backing, report["recovered"]))
            if report.get("warning"):
                self.say(report["warning"])
            self.say("restored %s from %s/%s%s" % (self.mount, self.backing, self.current_name(),
                                                   " (%d generation(s) back)" % back if back else "")
                     + (" (with the sync cut short applied to the copy)" if report.get("pending") else ""))
        elif os.path.lexists(current):
            raise PersistError("%s/current is not a copy this collection made (a link to a directory)" % self.backing)
        else:
            raise PersistError("%s has no current copy to restore %s from; run the role again to make one"
                               % (self.backing, self.mount))
        record = mark_mount(self.mount)
        write_file(self.restored, json.dumps(record) + "\n")
        if strength(record) == "reusable":
            self.say("neither a unique mount ID nor a trusted xattr is available for %s: a remount by hand may be "
                     "taken for this one" % self.mount)

    def sync(self):
        delta = load_engine()
        self.check_places()
        here = identity(self.mount)
        if same_mount(read_json(self.partial), here, location_only=True):
            raise PersistError("%s holds a restore cut short: it is not synced over the backing" % self.mount)
        current = os.path.join(self.backing, "current")
        if os.path.lexists(current):
            recorded = read_json(self.restored)
            if recorded is None and self.legacy_record() == here["mountinfo"] != "":
                # Written by the shell helper before this one (ID and device): taken once, then a strong identity.
                recorded = mark_mount(self.mount)
                write_file(self.restored, json.dumps(recorded) + "\n")
                here = recorded
            if not same_mount(recorded, here):
                self.reason = ("%s was not restored from %s since it was mounted: the backing copy is the newer one "
                               "(%s)" % (self.mount, self.backing, "no restore of this boot is recorded"
                                         if recorded is None else "this is another mount than the one restored"))
                raise PersistError(self.reason, 3)
            self.id_strength = strength(recorded)
            if not holds_data(self.mount) and os.path.isdir(current) and holds_data(current):
                self.reason = ("%s holds nothing while %s/current holds data: not synced over it (restore first)"
                               % (self.mount, self.backing))
                raise PersistError(self.reason, 3)
        filters = self.close_journal()
        self.stop_services()
        try:
            report = delta.sync(self.mount, self.backing, self.keep, filters)
        except getattr(delta, "Stopped", ()) as exc:
            # The engine held the signal to a safe point (current whole): the sync ends as stopped by it.
            self.say(str(exc))
            raise Stopped(128 + int(exc.signum)) from exc
        except delta.SyncError as exc:
            raise PersistError("copying the changes of %s into %s/current failed: %s"
                               % (self.mount, self.backing, exc)) from exc
        except OSError as exc:
            raise PersistError("copying %s into %s failed: %s; %s/current is unchanged"
                               % (self.mount, self.backing, exc, self.backing)) from exc
        self.start_services()
        self.skipped = list(report.get("skipped_mounts") or [])
        if report.get("warning"):
            self.say(report["warning"])
        if self.skipped:
            self.say("left out the file systems mounted inside %s: %s" % (self.mount, ", ".join(self.skipped)))
        first = bool(report.get("first_copy"))
        self.copy = "full" if first else "incremental"
        if first:
            record = mark_mount(self.mount)
            write_file(self.restored, json.dumps(record) + "\n")
            self.id_strength = strength(record)
        self.snapshot = self.current_name() or ""
        self.remove_beyond_keep(int(report.get("reverse_deltas") or 0))
        seen = set()
        snapshot_bytes = disk_usage([os.path.join(self.backing, self.snapshot)], seen)
        backing_bytes = snapshot_bytes + disk_usage([self.backing], seen)
        written = snapshot_bytes if first else report.get("written_bytes", "")
        self.figures = {"bytes": snapshot_bytes, "backing": backing_bytes, "written": written}
        self.say("synced %s to %s/%s (%s, %s bytes written)" % (
            self.mount, self.backing, self.snapshot, "a whole first copy" if first else "in place", written))

    def legacy_record(self):
        try:
            with open(self.restored, encoding="utf-8") as handle:
                return handle.read().strip()
        except (OSError, UnicodeDecodeError):
            return None

    def remove_beyond_keep(self, deltas):
        """The snapshots beyond KEEP (current's reverse deltas count among the copies kept), oldest first by name,
        and what syncs cut short left. current's own stays. A removal that fails leaves it to the next sync."""
        names = sorted(os.listdir(self.backing))
        others = [name for name in names if name.startswith("snap-") and name != self.snapshot]
        excess = len(others) - self.keep + 1 + deltas
        for name in names:
            if name == self.snapshot:
                continue
            if name.startswith("snap-"):
                if excess <= 0:
                    continue
                excess -= 1
            elif not name.startswith((".new-", ".current-")):
                continue
            path = os.path.join(self.backing, name)
            try:
                if os.path.isdir(path) and not os.path.islink(path):
                    empty_directory(path)
                    os.rmdir(path)
                else:
                    os.unlink(path)
            except OSError as exc:
                self.say("could not remove %s (%s); the next sync tries again" % (path, exc.strerror))

    def return_to(self, dest):
        return_copy(self.backing, dest)
        self.say("returned %s/%s into %s" % (self.backing, self.current_name(), dest))

    def list_generations(self):
        for line in generations(self.backing):
            sys.stdout.write(line + "\n")


def generations(backing):
    """Lines 'BACK GENERATION WHEN' of the copies BACKING keeps, current (0) first."""
    delta = load_engine()
    if not os.path.isdir(os.path.join(backing, "current")):
        return []
    state = delta.Backing(backing)
    try:
        head = state.head()
        lines = []
        for back in range(0, head + 1):
            gen = head - back
            if back and not state.exists(state.undo(gen + 1)):
                break
            try:
                if gen:
                    made = os.stat(state.record_name(gen), dir_fd=state.state_fd, follow_symlinks=False).st_mtime
                else:
                    made = os.lstat(os.path.join(backing, "current")).st_mtime
                when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(made))
            except OSError:
                when = "-"
            lines.append("%d %d %s" % (back, gen, when))
        return lines
    finally:
        state.close()


def return_copy(backing, dest):
    """The backing's current copy into DEST, a new or empty directory (a sync cut short after its commit point rolled
    forward first, or, where the backing cannot be written, applied to the copy alone). A DEST that holds anything is
    refused, never emptied: the executor returns into a new directory beside the one on disk and swaps it in once
    checked. Raises PersistError."""
    delta = load_engine()
    if not os.path.isdir(os.path.join(backing, "current")):
        raise PersistError("%s has no current copy to return into %s" % (backing, dest))
    if not os.path.isdir(dest):
        os.makedirs(dest, 0o755)
    if os.listdir(dest):
        raise PersistError("%s is not empty: the backing's copy returns only into a new or empty directory, so that "
                           "nothing there is lost; %s is unchanged" % (dest, dest))
    mode = stat.S_IMODE(os.stat(dest).st_mode)
    if mode & stat.S_ISGID:
        # A setgid directory passes the bit to every directory made in it; the copy's root mode comes back last.
        os.chmod(dest, mode & ~stat.S_ISGID)
    try:
        delta.restore(backing, dest, 0)
    except (delta.SyncError, OSError, subprocess.CalledProcessError) as exc:
        raise PersistError("returning %s/current into %s failed: %s" % (backing, dest, exc)) from exc


def _stop(signum, _frame):
    raise Stopped(128 + signum)


def _token(word):
    if not word or "/" in word or word.startswith(".") or "\0" in word:
        raise PersistError("'%s' is not a token" % word, 2)
    return word


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    helper = None
    code = 0
    back, dest = 0, None
    try:
        if len(argv) == 3 and argv[0] == "restore-back":
            if not argv[1].isdigit() or int(argv[1]) < 1:
                raise PersistError("restore-back takes a number of generations of 1 or more, not '%s'" % argv[1], 2)
            command, back, token = "restore-back", int(argv[1]), argv[2]
        elif len(argv) == 3 and argv[0] == "return":
            command, token, dest = "return", argv[1], argv[2]
        elif len(argv) == 2 and argv[0] in ("restore", "sync", "resume", "list"):
            command, token = argv
        else:
            raise PersistError(USAGE, 2)
        helper = Persist(_token(token))
        if command == "sync":
            signal.signal(signal.SIGTERM, _stop)
            signal.signal(signal.SIGINT, _stop)
            try:
                helper.lock()
                # A sync killed outright while it held services stopped: they start before anything else.
                if helper.resume_left_stopped():
                    helper.services_stopped, helper.services_down_seconds, helper.services_left_down = [], "", []
                helper.sync()
            except Stopped as exc:
                helper.terminated = exc.code == 143
                code = exc.code
            except PersistError as exc:
                helper.say(str(exc))
                code = exc.code
            except (OSError, ValueError) as exc:
                helper.say("the sync failed: %s" % exc)
                code = 1
            # The end of every attempt: the services started again, then the status (a TERM meanwhile waits).
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
            helper.start_services()
            if code == 0 and helper.services_left_down and not helper.shutting_down():
                code = 4
            helper.record_sync(code)
            return code
        helper.lock()
        if command == "resume":
            if helper.resume_left_stopped():
                helper.note_resumed()
                return 1 if helper.services_left_down else 0
            return 0
        if command == "restore":
            helper.restore()
        elif command == "restore-back":
            helper.restore(back)
        elif command == "return":
            helper.return_to(dest)
        else:
            helper.list_generations()
        return 0
    except PersistError as exc:
        sys.stderr.write("persist %s: %s\n" % (helper.token if helper else (argv[1] if len(argv) > 1 else ""), exc))
        return exc.code
    except OSError as exc:
        sys.stderr.write("persist: %s\n" % exc)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
