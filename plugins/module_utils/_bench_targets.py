# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The benchmark's targets, read on the host (issue 42): which paths to measure, what each is (RAM or disk, its
mount, the room for a test file, whether it takes O_DIRECT), the tools the optional tests need, why a test is
skipped here, and every error of the request. The benchmark role's preflight did this in Jinja; the role now loops
over what bench_targets returns.

Read-only but for the O_DIRECT probe, which creates one file of its own in a disk target and removes it again.
"""

from __future__ import annotations

import errno
import fcntl
import glob
import json
import mmap
import os
import pwd
import re
import shutil
import stat

from ansible_collections.ramdisk.provision.plugins.module_utils import _bench
from ansible_collections.ramdisk.provision.plugins.module_utils import _host_facts
from ansible_collections.ramdisk.provision.plugins.module_utils import _procfs
from ansible_collections.ramdisk.provision.plugins.module_utils._size import format_size

MIB = 1024 * 1024
SYSTEM_MOUNTS = r"^/(dev|run|sys|proc)(/|$)"
PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
SEEDS = ("tmp_dd", "bonnie", "fio_dbtest", "pg_test_fsync", "dd_64k")
# A build tree past this many files is not a build to copy once per round.
MAX_FILES = 100000
# One O_DIRECT write: 4096 bytes, aligned in memory (an mmap is page-aligned), as dd bs=4096 oflag=direct wrote.
DIRECT_BLOCK = 4096
# bonnie++ is in /usr/sbin, outside some PATHs.
EXTRA_PATH = ("/usr/local/sbin", "/usr/sbin", "/sbin")
PG_ROOT = "/usr/lib/postgresql"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


# --- which paths ----------------------------------------------------------------------------------

def default_label(path):
    """The label of a target given without one: the path's runs of other characters than letters and digits made
    '-', trimmed; 'root' for /."""
    return re.sub(r"[^A-Za-z0-9]+", "-", str(path)).strip("-") or "root"


def requested(targets, disk_path, mountinfo, system_mounts=SYSTEM_MOUNTS):
    """[{path, label}]: TARGETS (benchmark_targets) when given, else the RAM-backed mounts of MOUNTINFO outside
    SYSTEM_MOUNTS (a regular expression matched at the start of the mount point), each once; then DISK_PATH with the
    label disk. A label that is not given (or empty) is default_label() of the path."""
    if targets:
        out = [dict(target) for target in targets]
    else:
        pattern = re.compile(system_mounts)
        paths = []
        for mount in _procfs.ram_storage_mounts(mountinfo):
            if mount["mount_point"] not in paths and not pattern.match(mount["mount_point"]):
                paths.append(mount["mount_point"])
        out = [{"path": path} for path in paths]
    if disk_path:
        out.append({"path": disk_path, "label": "disk"})
    for entry in out:
        entry["label"] = entry.get("label") or default_label(entry.get("path"))
    return out


# --- what each path is ----------------------------------------------------------------------------

def _mount_id(path):
    """The (reused) mount ID of the mount PATH is on, as /proc/self/mountinfo numbers it, or None."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        with open("/proc/self/fdinfo/%d" % fd, encoding="ascii") as handle:
            for line in handle:
                key, _sep, value = line.partition(":")
                if key == "mnt_id":
                    return int(value)
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    return None


def mount_of(path, mountinfo):
    """The mount that holds PATH as findmnt --target shows it ({target, source, fstype, options, avail}), or {} when
    PATH does not exist. The mount is the one PATH's open file is on (the top one where mounts are stacked), by the
    path otherwise; its source is the device with the mounted directory in brackets for a bind mount
    (/dev/zram0[/sub]), its options the mount's then the super block's, and avail the bytes free to users."""
    if not os.path.exists(path):
        return {}
    number = _mount_id(path)
    found = [mount for mount in mountinfo if mount["mount_id"] == number] if number is not None else []
    mount = found[-1] if found else _procfs.mount_for_path(mountinfo, os.path.realpath(path))
    if mount is None:
        return {}
    source = mount["source"]
    if mount["root"] != "/":
        source = "%s[%s]" % (source, mount["root"])
    try:
        vfs = os.statvfs(path)
        avail = vfs.f_bavail * vfs.f_frsize
    except OSError:
        avail = None
    return {"target": mount["mount_point"], "source": source, "fstype": mount["fstype"],
            "options": ",".join(_procfs.merged_options(mount)), "avail": avail}


def classify(fs):
    """{kind, backend, fstype, source, mount_point, mount_options, zram_device, free_bytes} of a mount_of() result:
    RAM for tmpfs, ramfs and file systems on /dev/zramN and /dev/ramN (brd), the device read before a bind mount's
    bracket; free_bytes None on ramfs (it keeps no count), 0 where nothing was read."""
    device = (fs.get("source") or "").split("[")[0]
    ram = fs.get("fstype") in _procfs.RAM_FSTYPES or bool(re.match(r"^/dev/(zram|ram)[0-9]+$", device))
    backend = None
    if fs:
        backend = "zram" if device.startswith("/dev/zram") else "brd" if device.startswith("/dev/ram") else fs.get("fstype")
    return {
        "kind": "ram" if ram else "disk",
        "backend": backend,
        "fstype": fs.get("fstype"),
        "source": fs.get("source"),
        "mount_point": fs.get("target"),
        "mount_options": (fs.get("options") or "").split(","),
        "free_bytes": None if fs.get("fstype") == "ramfs" else int(fs.get("avail") or 0),
        "zram_device": device[len("/dev/"):] if backend == "zram" else None,
    }


def look_at(path):
    """{exists, is_dir, others_enter, writeable} of PATH itself (a symbolic link is not a directory)."""
    try:
        st = os.lstat(path)
    except OSError:
        return {"exists": False, "is_dir": False, "others_enter": False, "writeable": False}
    return {"exists": True, "is_dir": stat.S_ISDIR(st.st_mode), "others_enter": bool(st.st_mode & stat.S_IXOTH),
            "writeable": os.access(path, os.W_OK)}


def probe_name(dir_name):
    """A new name for the O_DIRECT probe's file: hidden, the run's directory name in it, random."""
    return ".%s.odirect.%s" % (re.sub(r"[^A-Za-z0-9_.-]+", "-", dir_name or "ramdisk-bench"), os.urandom(8).hex())


def probe_direct(path, dir_name):
    """(takes_o_direct, leftover): whether the file system of the directory PATH takes O_DIRECT. A new file of its
    own (O_CREAT|O_EXCL|O_NOFOLLOW, by the directory's descriptor) is switched to O_DIRECT, which a file system
    without it refuses with EINVAL, and takes one aligned 4096-byte block of random data; then it is removed.
    O_DIRECT is set with fcntl rather than at open, as open would create the file before refusing the flag.
    LEFTOVER is the path of the probe file when it could not be removed (an error), else None."""
    directory = os.open(path, _DIR_FLAGS)
    try:
        name = probe_name(dir_name)
        try:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                         dir_fd=directory)
        except OSError:
            return False, None
        try:
            ok = _write_direct(fd)
        finally:
            os.close(fd)
        try:
            os.unlink(name, dir_fd=directory)
        except OSError:
            return ok, os.path.join(path, name)
        return ok, None
    finally:
        os.close(directory)


def _write_direct(fd):
    """Whether the file open at FD takes O_DIRECT and one aligned block written through it."""
    try:
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_DIRECT)
        block = mmap.mmap(-1, DIRECT_BLOCK)
        try:
            block.write(os.urandom(DIRECT_BLOCK))
            return os.write(fd, block) == DIRECT_BLOCK
        finally:
            block.close()
    except OSError:
        return False


def describe(entry, mountinfo, profile_size_bytes, mem_available, memory_fraction, space_fraction):
    """The target ENTRY ({path, label}) as the plan needs it (the fields of the role's preflight, less direct_ok)."""
    path = entry.get("path")
    seen = look_at(path)
    fs = mount_of(path, mountinfo) if seen["exists"] else {}
    where = classify(fs)
    size = _bench.file_size(profile_size_bytes, mem_available, where["free_bytes"], memory_fraction, space_fraction)
    out = {"label": entry["label"], "path": path}
    out.update(seen)
    out.update(where)
    out["file_size_bytes"] = size
    return out


# --- the tools of the optional tests ----------------------------------------------------------------

def _version(name):
    return [int(part) for part in re.findall(r"[0-9]+", name)]


def _search_path():
    return os.pathsep.join([os.environ.get("PATH", "")] + list(EXTRA_PATH))


def _find(name, pattern):
    hits = sorted(glob.glob(pattern), key=_version, reverse=True)
    return shutil.which(name, path=_search_path()) or (hits[0] if hits else "")


def _account(name):
    try:
        return pwd.getpwnam(name) if name else None
    except (KeyError, TypeError):
        return None


def _new_walk():
    return {"bytes": 0, "files": 0, "unreadable": [], "other_mounts": [], "too_many": False, "error": ""}


class TreeChanged(Exception):
    """A directory of the tree was replaced (by a symbolic link or another directory) while it was walked."""


def _list_dir(fd, where, device, walk):
    """Count the entries of the directory open at FD (shown as WHERE) into WALK; return its subdirectories to enter,
    [(name, path, (st_dev, st_ino))]. Entries are looked at by the directory's descriptor, never followed."""
    subdirs = []
    with os.scandir(fd) as entries:
        for entry in entries:
            path = os.path.join(where, entry.name)
            try:
                st = os.stat(entry.name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            except OSError:
                walk["unreadable"].append(path)
                continue
            if stat.S_ISDIR(st.st_mode):
                if st.st_dev != device:
                    # A mount point inside the tree (such as /proc under /): reported, not entered.
                    walk["other_mounts"].append(path)
                elif not os.access(entry.name, os.R_OK | os.X_OK, dir_fd=fd, follow_symlinks=False):
                    walk["unreadable"].append(path)
                else:
                    subdirs.append((entry.name, path, (st.st_dev, st.st_ino)))
                continue
            walk["bytes"] += st.st_size
            walk["files"] += 1
            if not stat.S_ISLNK(st.st_mode) and not os.access(entry.name, os.R_OK, dir_fd=fd, follow_symlinks=False):
                walk["unreadable"].append(path)
    return subdirs


def _enter(parent, name, path, seen):
    """The directory NAME of the directory open at PARENT, opened by that descriptor and never through a link; it
    must still be the directory seen when it was listed (SEEN: st_dev, st_ino)."""
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise TreeChanged("%s was replaced by a symbolic link or a file while it was walked" % path)
        raise
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) != seen:
        os.close(fd)
        raise TreeChanged("%s was replaced by another directory while it was walked" % path)
    return fd


def walk_tree(top, limit=MAX_FILES):
    """{bytes, files, unreadable, other_mounts, too_many, error} of the tree at TOP (a real path), walked by
    directory descriptors (openat with O_NOFOLLOW, one descriptor per level): bytes and files count every entry
    that is not a directory (a symbolic link as itself); unreadable lists what the caller may not read (a directory
    it may not list or enter is not entered); a directory of another file system is listed in other_mounts, not
    entered; the walk stops past LIMIT files (too_many). A directory replaced while it was walked, or any other
    failure, is an error: the walk never reads as an empty tree."""
    walk = _new_walk()
    stack = []
    try:
        if not os.access(top, os.R_OK | os.X_OK):
            walk["unreadable"].append(top)
        try:
            fd = os.open(top, _DIR_FLAGS)
        except PermissionError:
            if top not in walk["unreadable"]:
                walk["unreadable"].append(top)
            return walk
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise TreeChanged("%s was replaced by a symbolic link while it was walked" % top)
            raise
        stack.append([fd, top, []])
        device = os.fstat(fd).st_dev
        stack[-1][2] = _list_dir_safe(fd, top, device, walk)
        walk["too_many"] = walk["files"] > limit
        while stack and not walk["too_many"]:
            frame = stack[-1]
            if not frame[2]:
                os.close(frame[0])
                stack.pop()
                continue
            name, path, seen = frame[2].pop(0)
            try:
                child = _enter(frame[0], name, path, seen)
            except FileNotFoundError:
                continue
            except PermissionError:
                walk["unreadable"].append(path)
                continue
            stack.append([child, path, []])
            stack[-1][2] = _list_dir_safe(child, path, device, walk)
            walk["too_many"] = walk["files"] > limit
    except TreeChanged as exc:
        walk["error"] = str(exc)
    except Exception as exc:  # the walk reports any failure rather than read as an empty tree
        walk["error"] = "%s: %s" % (type(exc).__name__, exc)
    finally:
        for frame in stack:
            os.close(frame[0])
    walk["unreadable"] = sorted(set(walk["unreadable"]))
    return walk


def _list_dir_safe(fd, where, device, walk):
    try:
        return _list_dir(fd, where, device, walk)
    except PermissionError:
        walk["unreadable"].append(where)
        return []


def walk_as(top, account, walker=walk_tree):
    """walk_tree(TOP) in a child process that first becomes ACCOUNT (a pwd entry: its user and group, no
    supplementary groups), so what that user cannot read is found before anything is copied."""
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:
        status = 0
        try:
            os.close(reader)
            try:
                os.setgroups([])
                os.setgid(account.pw_gid)
                os.setuid(account.pw_uid)
                walk = walker(top)
            except Exception as exc:
                walk = dict(_new_walk(), error="%s: %s" % (type(exc).__name__, exc))
            data = json.dumps(walk).encode()
            while data:
                data = data[os.write(writer, data):]
        except BaseException:
            status = 1
        finally:
            os._exit(status)
    os.close(writer)
    chunks = []
    try:
        while True:
            chunk = os.read(reader, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(reader)
        os.waitpid(child, 0)
    try:
        return json.loads(b"".join(chunks).decode())
    except ValueError:
        return dict(_new_walk(), error="the walk as %s ended without a result" % account.pw_name)


def compile_facts(source, program, builder, walker=walk_as):
    """The compile test's source tree (its real path, bytes and files, walked as BUILDER), the build command's
    PROGRAM found on the PATH (and the sbin directories) and whether BUILDER exists. {} without SOURCE. A relative
    SOURCE is not resolved (given_absolute false): it names no tree."""
    if not source:
        return {}
    absolute = os.path.isabs(source)
    real = os.path.realpath(source) if absolute else ""
    is_dir = bool(real) and os.path.isdir(real)
    account = _account(builder)
    walk = _new_walk()
    if is_dir and account:
        walk = walker(real, account)
    return dict(walk, source=real if is_dir else "", program=shutil.which(program or "", path=_search_path()) or "",
                user=bool(account), given_absolute=absolute)


def tools(seed_user, compile_asked=False, source="", program="", builder="", pg_root=PG_ROOT, walker=walk_as):
    """{bonnie, pg_test_fsync, user, pg_bin, postgres, compile}: the seeds' tools (paths, '' when missing; the
    newest PostgreSQL version's first), whether SEED_USER exists, the directory of one PostgreSQL version with
    initdb, pg_ctl, pgbench and postgres, whether the postgres user exists, and compile_facts() when the compile
    test is asked for ({} otherwise)."""
    pg_bin = ""
    for directory in sorted(glob.glob(os.path.join(pg_root, "*", "bin")), key=_version, reverse=True):
        if all(os.access(os.path.join(directory, tool), os.X_OK) for tool in ("initdb", "pg_ctl", "pgbench", "postgres")):
            pg_bin = directory
            break
    return {"bonnie": _find("bonnie++", "/usr/sbin/bonnie++"),
            "pg_test_fsync": _find("pg_test_fsync", os.path.join(pg_root, "*", "bin", "pg_test_fsync")),
            "user": _account(seed_user) is not None, "pg_bin": pg_bin, "postgres": _account("postgres") is not None,
            "compile": compile_facts(source, program, builder, walker) if compile_asked else {}}


# --- why a test does not run here -------------------------------------------------------------------

def compile_asked(tests, profile):
    """Whether the compile test runs (the seeds profile runs its own experiments instead)."""
    return "compile" in tests and profile != "seeds"


def pgbench_skip(tests, profile, found):
    """Why the opt-in pgbench test does not run on this host; '' when it runs (or was not asked for)."""
    if "pgbench" not in tests or profile == "seeds" or (found.get("pg_bin") and found.get("postgres")):
        return ""
    if not found.get("pg_bin"):
        return ("PostgreSQL is not installed on this host (initdb, pg_ctl and pgbench come with the server package,"
                " postgresql-15 on Debian 12), so pgbench could not run here.")
    return "there is no postgres user on this host to run the private cluster as, so pgbench could not run here."


def compile_skip(asked, source, command, builder, found):
    """Why the opt-in compile test does not run on this host; '' when it runs (or was not asked for)."""
    facts = found.get("compile") or {}
    if not asked:
        return ""
    if not source:
        return "benchmark_compile_source is empty: name a clean source tree on the host to build."
    if not facts.get("source"):
        return "benchmark_compile_source %s is not a directory on this host, so there is nothing to build." % source
    if not facts.get("program"):
        return ("the build command %s is not installed on this host (a C build needs make and a compiler: Debian"
                " packages make, gcc and libc6-dev)." % _program(command))
    if not facts.get("user"):
        return "benchmark_compile_user %s does not exist on this host. Give an existing unprivileged user." % builder
    return ""


def seed_skips(profile, seeds, seed_user, found):
    """{seed: why it does not run here, '' for the ones that do}; {} but for the seeds profile."""
    out = {}
    if profile != "seeds":
        return out
    for seed in SEEDS:
        if seed not in seeds:
            out[seed] = "not asked for: benchmark_seeds leaves it out."
        elif seed == "bonnie" and not found.get("bonnie"):
            out[seed] = ("bonnie++ is not installed on this host (Debian package bonnie++), so the tmpfs vs ext3"
                         " write-up could not be rerun here.")
        elif seed == "bonnie" and not found.get("user"):
            out[seed] = ("benchmark_seed_user %s does not exist on this host; bonnie++ runs as root only with -u and a"
                         " user. Give an existing unprivileged user." % seed_user)
        elif seed == "pg_test_fsync" and not found.get("pg_test_fsync"):
            out[seed] = ("PostgreSQL is not installed on this host (pg_test_fsync comes with the server package,"
                         " postgresql-15 on Debian 12), so the PostgreSQL write-up could not be rerun here.")
        else:
            out[seed] = ""
    return out


def needs_fio(tests, profile, skips):
    """Whether fio runs: the fio test, or the seeds profile's fio dbtest when it is not skipped."""
    return ("fio" in tests and profile != "seeds") or skips.get("fio_dbtest", "no") == ""


def _program(command):
    return command[0] if isinstance(command, (list, tuple)) and command else ""


# --- what is wrong with the request ------------------------------------------------------------------

def _where_system(system_mounts):
    if system_mounts == SYSTEM_MOUNTS:
        return "outside /dev, /run, /sys and /proc"
    return "outside the system mounts (%s)" % system_mounts


def target_errors(host, targets, disk_path, mem_available, memory_fraction, space_fraction, system_mounts=SYSTEM_MOUNTS):
    """The errors of the targets (describe() results), each naming the host, the variable, the value and the fix."""
    prefix = "Host %s:" % host
    errors = []
    rams = [target for target in targets if target["kind"] == "ram"]
    disks = [target for target in targets if target["kind"] == "disk"]
    if not rams:
        errors.append(prefix + " no RAM-backed path to benchmark: found no tmpfs, ramfs, zram or brd mount %s, and"
                      " benchmark_targets names none. Mount one first (role ramdisk.provision.tmpfs) or list it in"
                      " benchmark_targets." % _where_system(system_mounts))
    for target in targets:
        what = " benchmark target %s (%s)" % (target["path"], target["label"])
        if not target["exists"]:
            errors.append(prefix + what + " does not exist. Create it or remove it from benchmark_targets or"
                          " benchmark_disk_path.")
        elif not target["is_dir"]:
            errors.append(prefix + what + " is not a directory. Give the directory to write test files in.")
        elif not target["writeable"]:
            errors.append(prefix + what + " is not writable (read-only mount or permissions). Give a writable directory.")
        elif target["file_size_bytes"] < MIB:
            free = format_size(target["free_bytes"]) if target["free_bytes"] is not None else "unlimited"
            errors.append(prefix + " no room to benchmark" + what + ": " + free + " free on the mount, "
                          + format_size(mem_available) + " MemAvailable; a test file needs at least 1 MiB within"
                          " benchmark_space_fraction (%s) and benchmark_memory_fraction (%s)." % (space_fraction, memory_fraction)
                          + " Free space or raise the fractions.")
        if not PLAIN_NAME.match(str(target["label"])):
            errors.append(prefix + " benchmark_targets label %r of %s is not a plain name:" % (target["label"], target["path"])
                          + " use letters, digits, ., _ and - (it names the raw files).")
    # On RAM, the disk path would be one more RAM target, and no RAM target would have a disk to be compared with.
    on_ram = [target for target in rams if disk_path and target["path"] == disk_path]
    if on_ram:
        target = on_ram[0]
        errors.append(prefix + " benchmark_disk_path is %s: it is on %s mounted at %s, which is RAM, so the RAM targets"
                      " would have no disk to be compared with. Give a directory on the disk to compare against, such as"
                      " /var/tmp, or set benchmark_disk_path to null to measure the RAM targets only."
                      % (target["path"], target["backend"], target["mount_point"]))
    for ram in rams:
        for disk in disks:
            if disk["mount_point"] and disk["mount_point"] == ram["mount_point"] and disk["source"] == ram["source"]:
                errors.append(prefix + " disk target %s (%s) and RAM target %s (%s) are on the same mount, %s at %s,"
                              % (disk["path"], disk["label"], ram["path"], ram["label"], ram["source"], ram["mount_point"])
                              + " so comparing them would measure that mount against itself. Give a disk directory on"
                              " another mount in benchmark_disk_path or benchmark_targets.")
    labels = [target["label"] for target in targets]
    seen = []
    for label in labels:
        if label not in seen:
            seen.append(label)
            if labels.count(label) > 1:
                errors.append(prefix + " benchmark target label %r is used more than once." % label
                              + " Give each entry of benchmark_targets its own label.")
    return errors


def compile_errors(host, targets, source, command, builder, found, skip, mem_available, memory_fraction):
    """The compile test's errors: never as root, a command to run, a tree the build user can walk, and room for
    a copy and its build on every target (each build's copy is removed after it)."""
    prefix = "Host %s:" % host
    errors = []
    if builder in ("root", "0"):
        errors.append(prefix + " benchmark_compile_user is %s: the compile test never builds as root. Give an"
                      " unprivileged user, such as nobody." % builder)
    if isinstance(command, str) or not command:
        errors.append(prefix + " benchmark_compile_command is %s: the build command must be a list of arguments, the"
                      " program first, run without a shell. Give it as a list, such as [make, \"-j{cores}\"]."
                      % json.dumps(command))
    facts = found.get("compile") or {}
    walked = facts.get("source") and facts.get("user")
    # The tree is checked wherever it was walked, even on a host that lacks the build command: bad input is refused.
    if source and not facts.get("given_absolute", True):
        errors.append(prefix + " benchmark_compile_source is %s: it must be an absolute path. Give the source tree as"
                      " /path/to/tree." % json.dumps(source))
    elif walked and facts.get("error"):
        errors.append(prefix + " benchmark_compile_source %s could not be walked as %s to size it before copying (%s)."
                      " Give a plain directory tree that the build user can read." % (facts["source"], builder, facts["error"]))
    elif walked and facts.get("other_mounts"):
        errors.append(prefix + " benchmark_compile_source %s spans other file systems, such as %s: a build tree lies on"
                      " one file system. Give the tree itself." % (facts["source"], ", ".join(facts["other_mounts"][:3])))
    elif walked and facts.get("too_many"):
        errors.append(prefix + " benchmark_compile_source %s holds more than 100,000 files: the compile test copies it"
                      " into every target once per round. Give a smaller tree to build." % facts["source"])
    elif walked and facts.get("unreadable"):
        errors.append(prefix + " benchmark_compile_source %s has %d entries that %s cannot read, such as %s:"
                      % (facts["source"], len(facts["unreadable"]), builder, ", ".join(facts["unreadable"][:3]))
                      + " the build runs as that user, so the copy would fail. Make the tree readable to it, or give"
                      " another benchmark_compile_user.")
    if skip == "":
        # Each build runs in a fresh copy, removed after it: the copy and its build, three times the tree, at a time.
        need = int(facts.get("bytes") or 0) * 3 + MIB
        # On RAM the copies are memory as well: within benchmark_memory_fraction of MemAvailable, as a test file is.
        memory = int(mem_available * memory_fraction)
        for target in targets:
            room = ([int(target["free_bytes"])] if target["free_bytes"] is not None else []) \
                + ([memory] if target["kind"] == "ram" else [])
            if room and min(room) < need:
                errors.append(prefix + " no room for the compile test on benchmark target %s (%s): %s free, and a copy of"
                              % (target["path"], target["label"], format_size(min(room)))
                              + " %s (%s) and its build, three times the tree, need %s."
                              % (source, format_size(facts.get("bytes") or 0), format_size(need))
                              + " Build a smaller tree, or leave compile out of benchmark_tests.")
    return errors


def fio_error(host, needed, has_fio, install_fio):
    if needed and not has_fio and not install_fio:
        return ["Host %s: fio is not installed and benchmark_install_fio is false. Install fio, set"
                " benchmark_install_fio to true, or leave fio out of benchmark_tests." % host]
    return []


def entry_errors(host, targets):
    """benchmark_targets entries without a path: named before anything is looked at."""
    errors = []
    for index, entry in enumerate(targets or []):
        path = entry.get("path") if isinstance(entry, dict) else None
        if not isinstance(path, str) or not path:
            errors.append("Host %s: benchmark_targets entry %d is %s: each entry needs a path, the directory to measure,"
                          " and may have a label. Give it as {path: /srv/ram, label: ram}." % (host, index, json.dumps(entry)))
    return errors


# --- all of it -------------------------------------------------------------------------------------

def read_host(mountinfo=None):
    """(mountinfo, memory): this host's mount table and memory_facts() (MemAvailable and MemTotal capped by the
    cgroup's limit, as ramdisk_facts gives them)."""
    if mountinfo is None:
        with open("/proc/self/mountinfo", encoding="utf-8") as handle:
            mountinfo = _procfs.parse_mountinfo(handle.read())
    with open("/proc/meminfo", encoding="utf-8") as handle:
        meminfo = _procfs.parse_meminfo(handle.read())
    return mountinfo, _host_facts.memory_facts(meminfo, _host_facts.read_cgroup_memory(mountinfo, meminfo))


def cores():
    """The cores this process may run on, as nproc counts them (at least 1)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def survey(params, fio=None, mountinfo=None, memory=None, found=None, prober=probe_direct):
    """Everything bench_targets returns, from the module's PARAMS. FIO: (has_fio, version) as `fio --version` ran;
    MOUNTINFO and MEMORY: read here when None; FOUND: tools() when None. Never raises for a bad request: every
    error is in 'errors'."""
    host = params["host"]
    tests = list(params.get("tests") or [])
    profile = params.get("profile") or "quick"
    memory_fraction = float(params.get("memory_fraction"))
    space_fraction = float(params.get("space_fraction"))
    system_mounts = params.get("system_mounts") or SYSTEM_MOUNTS
    errors = entry_errors(host, params.get("targets"))
    try:
        re.compile(system_mounts)
    except re.error as exc:
        errors.append("Host %s: system_mounts is %s: it is no regular expression (%s). Give one such as %s."
                      % (host, json.dumps(system_mounts), exc, SYSTEM_MOUNTS))
    if errors:
        return {"errors": errors, "targets": []}
    if mountinfo is None or memory is None:
        read_mountinfo, read_memory = read_host(mountinfo)
        mountinfo = read_mountinfo if mountinfo is None else mountinfo
        memory = read_memory if memory is None else memory
    mem_available = int(memory["available_bytes"])
    asked = compile_asked(tests, profile)
    source = params.get("compile_source") or ""
    command = params.get("compile_command")
    builder = params.get("compile_user") or ""
    if found is None:
        found = tools(params.get("seed_user") or "", asked, source, _program(command), builder)

    targets = []
    for entry in requested(params.get("targets"), params.get("disk_path"), mountinfo, system_mounts):
        target = describe(entry, mountinfo, params["profile_size_bytes"], mem_available, memory_fraction, space_fraction)
        target["direct_ok"] = False
        # Every target, RAM ones too: like against like, the plan runs a test O_DIRECT everywhere when every target
        # takes it (tmpfs since Linux 6.6), else buffered everywhere plus the direct figure where it is taken.
        if target["is_dir"] and target["writeable"]:
            try:
                target["direct_ok"], leftover = prober(target["path"], params.get("dir_name") or "")
            except OSError as exc:
                leftover = None
                errors.append("Host %s: benchmark target %s (%s) could not be asked whether it takes O_DIRECT: %s."
                              " Check that the directory is there and root may write to it."
                              % (host, target["path"], target["label"], exc.strerror or exc))
            if leftover:
                errors.append("Host %s: the O_DIRECT probe file %s in benchmark target %s (%s) could not be removed."
                              " Remove it by hand." % (host, leftover, target["path"], target["label"]))
        targets.append(target)

    skip_pgbench = pgbench_skip(tests, profile, found)
    skip_compile = compile_skip(asked, source, command, builder, found)
    skips = seed_skips(profile, params.get("seeds") or [], params.get("seed_user"), found)
    needed = params.get("needs_fio")
    if needed is None:
        needed = needs_fio(tests, profile, skips)
    has_fio, fio_version = fio if fio is not None else (False, "")

    errors.extend(target_errors(host, targets, params.get("disk_path"), mem_available, memory_fraction, space_fraction,
                                system_mounts))
    if asked:
        errors.extend(compile_errors(host, targets, source, command, builder, found, skip_compile,
                                     mem_available, memory_fraction))
    errors.extend(fio_error(host, needed, has_fio, params.get("install_fio")))
    return {"errors": errors, "targets": targets, "tools": found, "has_fio": has_fio, "fio_version": fio_version,
            "needs_fio": bool(needed), "pgbench_skip": skip_pgbench, "compile_skip": skip_compile, "seed_skips": skips,
            "cores": cores(), "mem_total": int(memory["total_bytes"]), "mem_available": mem_available}
