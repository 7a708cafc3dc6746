# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The transaction properties of ramdisk_apply on this machine's own kernel (run by scripts/test/transaction.sh).

Every case runs in a fresh mount namespace of its own (unshare --mount --propagation private) where /etc,
/var/lib and /run are overlays whose writes go to a tmpfs of the case (the fsyncs of the journal and of the atomic
writes are not what is tested: a SIGKILL loses nothing that was written), and /srv is an empty directory of the
case on this machine's disk, which holds the fixture (/srv/tx/data: ~300 entries with content, a hard link pair, a
symlink, a sparse file, user.x xattrs, a subdirectory, the root 4242:4343 mode 2750). A run is what the entry role
does: ramdisk_plan (which first finishes or undoes what a dead run left), then ramdisk_apply with the plan's tmpfs
and ramfs entries, both as Ansible runs a module (a Python process reading its arguments from a file).

- kill points: a run killed (RAMDISK_PROVISION_TEST_KILL_AT=N) just before each of its journal writes, N = 1 up
  to the first N that no longer kills it. Right after the kill no data may be hidden (a mount over the directory
  is one the journal names, and holds all of it; the disk copy is whole); the next run must succeed and leave
  exactly what one uninterrupted run leaves (mounts and their options, /etc/fstab, records, roots, the trees in
  the mounts and on disk, no journal, no staging mount). Also one run killed from outside while `cp` copies.
- reboot points: the same kill points, and one more past the last (the whole run), each followed by a power cut in
  the case's namespace (every mount under the case's paths and the staging area taken away, /run/ramdisk-provision
  emptied, a new boot id bound over /proc/sys/kernel/random/boot_id) and a boot without systemd (each /etc/fstab
  line under the case's paths mounted, which leaves an empty tmpfs over a migrated directory). Right after the
  boot the disk copy must be whole; the next run must succeed and leave what one uninterrupted run leaves (the
  empty mount over the directory replaced by one holding all of it).
- concurrency: 2 and 5 runs of one policy started at once: never two mounts on one path (a watcher reads the mount
  table all along), the reference end state, and every run succeeded or failed naming the lock's holder or the
  change since its plan.
- full disk: /etc on a full tmpfs: the run fails saying the file is unchanged, /etc/fstab is as it was, nothing
  stays mounted, no record; with room again, the next run leaves the reference end state.
- limits: a migrate whose extended attributes take tmpfs's inode limit (nr_inodes) is refused by the plan with the
  nr_inodes it needs; a real cp -a into a tmpfs with one less fails, and the apply with the number named succeeds
  and holds the whole tree. tmpfs quotas: where the kernel has them (the plan's facts say), a mount with usrquota
  and a 1 MiB default limit refuses a user's second MiB with EDQUOT; where it has not, the plan refuses the request
  naming the kernel, and nothing is mounted.
- odd paths: mount points with a space, '#', a backslash, quotes, '%', '$' and a letter beyond ASCII are applied
  (findmnt reads the escaped /etc/fstab lines back), a second run changes nothing, state absent removes them.
- zram, one case at a time (the kernel's devices are global): a run as the zram role does it (ramdisk_apply
  finishing or undoing what a dead run left, ramdisk_facts and the zram plan, then ramdisk_apply with the devices)
  of a swap device and of a migrated file system, killed just before each journal write N. Right after the kill
  every new device of ours is one the journal or a record names, and a mount over the directory holds all of it;
  the next run succeeds and leaves what an uninterrupted run leaves (device size and algorithm, swap priority,
  mount, root, tree, fstab, records; device numbers aside). Then a run whose device 3 of 4 the kernel refuses:
  it fails, and no device, swap, mount, fstab line or record of it is left. Each case removes every device it made.
- torn journal: a run killed just after its migrate's pivot was journaled done, that line then torn by 7 bytes
  (a power cut mid-append), the recovery killed before its 2nd journal write and, in a second case, its 3rd; the
  next run must succeed and leave what one uninterrupted run leaves.

Usage: transaction.py --work DIR [--keep DIR] [--jobs N] [--tries N]
       [--only kill,reboot,cp-kill,concurrency,full-disk,odd-paths,limits,zram,torn-journal].
Prints a table per part and exits 1 when a property failed, 2 when the test could not run; each failed case's
log and result go to --keep (build/transaction).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import errno
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTIONS = os.path.join(REPO, ".cache", "collections")
sys.path.insert(0, COLLECTIONS)

# pylint: disable=wrong-import-position
from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths as paths  # noqa: E402
from ansible_collections.ramdisk.provision.plugins.module_utils._journal import KILL_ENV, Journal  # noqa: E402
from ansible_collections.ramdisk.provision.plugins.module_utils._procfs import parse_mountinfo  # noqa: E402
from ansible_collections.ramdisk.provision.plugins.module_utils._tree import compare_trees, tree_digest  # noqa: E402

PYTHON = os.path.join(REPO, ".venv", "bin", "python")
SELF = os.path.abspath(__file__)
MODULES = "ansible_collections.ramdisk.provision.plugins.modules."
TOP = "/srv/tx"
DATA = TOP + "/data"
PLAIN = TOP + "/plain"
OWNER, GROUP = ("txowner", 4242), ("txgroup", 4343)
MIGRATE_ENTRY = {"path": DATA, "size": "64M", "migrate": True, "owner": OWNER[0], "group": GROUP[0], "mode": "2750"}
PLAIN_ENTRY = {"path": PLAIN, "size": "8M"}
# Paths with what fstab escapes (\\040, \\134) and the units quote: a migrated tmpfs and a ramfs.
ODD_PATHS = (TOP + "/my data #1", TOP + "/back\\slash 'q' \"d\" 100% $x caf\u00e9")
ODD_ENTRIES = [{"path": ODD_PATHS[0], "size": "16M", "migrate": True},
               {"path": ODD_PATHS[1], "backend": "ramfs", "size": "8M", "mode": "0750"}]
# A read-only tmpfs (a way to mask a directory): mounted with an owner and mode, and migrated with the directory's.
RO_PLAIN, RO_DATA = TOP + "/ro-plain", TOP + "/ro-data"
RO_ENTRIES = [{"path": RO_PLAIN, "size": "8M", "options": ["ro"], "owner": OWNER[0], "mode": "0750"},
              {"path": RO_DATA, "size": "32M", "migrate": True, "options": ["ro"]}]
POLICIES = {"both": [MIGRATE_ENTRY, PLAIN_ENTRY], "data": [MIGRATE_ENTRY], "odd": ODD_ENTRIES, "read-only": RO_ENTRIES,
            "plain": [PLAIN_ENTRY], "plain-bigger": [dict(PLAIN_ENTRY, size="16M")],
            "plain-nofail": [dict(PLAIN_ENTRY, options=["nofail"])],
            "odd-absent": [dict(entry, state="absent") for entry in ODD_ENTRIES]}
FIXTURES = {"small": 290, "big": 5000}
MODULE_TIMEOUT = 180
# The policy's two transactions journal 34 writes today; far fewer means the hook or the journal broke.
MIN_KILL_POINTS = 20
MAX_KILL_AT = 400
LOCK_HELD = "is held by run"
STALE = "changed after this run planned it"
WAITED = "which held the host lock"


# Helpers ---------------------------------------------------------------------------------------------------

def sh(*argv):
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def mounts():
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        return parse_mountinfo(handle.read())


def mounts_at(path):
    return [mount for mount in mounts() if mount["mount_point"] == path]


def role_vars():
    """The entry role's built-in purposes and mount defaults, as ramdisk/tasks/plan.yml passes them."""
    import yaml
    with open(os.path.join(REPO, "roles", "ramdisk", "defaults", "main.yml"), encoding="utf-8") as handle:
        defaults = yaml.safe_load(handle)
    with open(os.path.join(REPO, "roles", "ramdisk", "vars", "main.yml"), encoding="utf-8") as handle:
        purposes = yaml.safe_load(handle)["__ramdisk_builtin_purposes"]
    for purpose in purposes.values():
        for key, value in list(purpose.items()):
            # The only templates there name a default of the role: "{{ ramdisk_x }}".
            if isinstance(value, str) and value.startswith("{{"):
                purpose[key] = defaults[value.strip("{} ")]
    return purposes, defaults["ramdisk_mount_defaults"]


class Runner(object):
    """Runs the modules as Ansible does, in the case's namespace; argument files go to WORK."""

    # The Python that runs the modules, and where it finds ansible and the collection (persist.py's container).
    python = PYTHON
    pythonpath = COLLECTIONS

    def __init__(self, work):
        self.work = work
        self.purposes, self.defaults = role_vars()
        self.count = 0
        self.lock = threading.Lock()

    def _start(self, name, args, env):
        with self.lock:
            self.count += 1
            args_file = os.path.join(self.work, "args-%d.json" % self.count)
        with open(args_file, "w", encoding="utf-8") as handle:
            json.dump({"ANSIBLE_MODULE_ARGS": args}, handle)
        full_env = dict(os.environ, PYTHONPATH=self.pythonpath, LC_ALL="C")
        full_env.pop(KILL_ENV, None)
        full_env.update(env or {})
        return subprocess.Popen([self.python, "-m", MODULES + name, args_file], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=full_env, start_new_session=True)

    @staticmethod
    def _finish(proc):
        try:
            out, err = proc.communicate(timeout=MODULE_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        try:
            result = json.loads(out)
        except ValueError:
            result = None
        return {"rc": proc.returncode, "killed": proc.returncode == -signal.SIGKILL, "result": result,
                "stderr": (err or "")[-2000:], "stdout": (out or "")[-2000:] if result is None else ""}

    def plan(self, policy):
        done = self._finish(self._start("ramdisk_plan", {
            "host": "transaction-test", "sources": [{"name": "ramdisk_mounts", "value": POLICIES[policy]}],
            "purposes": self.purposes, "defaults": self.defaults}, None))
        result = done["result"] or {}
        if done["rc"] != 0 or result.get("failed") or result.get("errors"):
            raise CaseError("ramdisk_plan failed: %s" % (result.get("msg") or result.get("errors") or done))
        return result["tmpfs"] + result["ramfs"], result.get("recovered") or []

    def apply_start(self, entries, kill_at=None, lock_timeout=None):
        args = {"host": "transaction-test", "mounts": entries}
        if lock_timeout is not None:
            args["lock_timeout"] = lock_timeout
        return self._start("ramdisk_apply", args, {KILL_ENV: str(kill_at)} if kill_at else None)

    def run(self, policy, kill_at=None, lock_timeout=None):
        """One run: plan, then apply. {rc, killed, result, stderr, ok, msg}."""
        entries, recovered = self.plan(policy)
        done = self._finish(self.apply_start(entries, kill_at, lock_timeout))
        result = done["result"] or {}
        done["ok"] = done["rc"] == 0 and bool(done["result"]) and not result.get("failed")
        done["msg"] = result.get("msg") or ""
        done["plan_recovered"] = recovered
        return done


class CaseError(Exception):
    pass


def digest_hash(digests):
    return hashlib.sha256(json.dumps(digests, sort_keys=True).encode()).hexdigest()


def without_root_mtime(digests):
    # A new mount's root has the time it was made; what is in it keeps its times.
    out = dict(digests)
    out["."] = dict(out["."], mtime_ns=None)
    return out


# The fixture ---------------------------------------------------------------------------------------------

def make_fixture(root, files):
    """The same tree every time: FILES files with content (a fifth in sub/, a tenth of those in sub/deeper/ for
    the small one; 100 a directory for the big one), a hard link pair, a symlink, a sparse file, xattr user.x on
    a file and a directory, fixed times; the root 4242:4343, mode 2750."""
    os.makedirs(root)
    dirs = []
    made = []
    for i in range(files):
        if files > 1000:
            directory = os.path.join(root, "d%02d" % (i // 100))
        else:
            directory = root if i % 5 else os.path.join(root, "sub", "deeper" if i % 10 == 0 else "")
        directory = directory.rstrip("/")
        if directory not in dirs and directory != root:
            os.makedirs(directory, exist_ok=True)
            dirs.append(directory)
        name = os.path.join(directory, "f%04d" % i)
        made.append(name)
        with open(name, "wb") as handle:
            handle.write(("line %d of file %d\n" % (i, i)).encode() * (1 + i % 40))
        os.chmod(name, 0o640 if i % 3 else 0o755)
        if i % 7 == 0:
            os.chown(name, OWNER[1], GROUP[1])
    first = made[1]
    os.link(first, os.path.join(root, "hardlink-to-f0001"))
    os.symlink(os.path.relpath(first, root), os.path.join(root, "symlink-to-f0001"))
    sparse = os.path.join(root, "sparse")
    with open(sparse, "wb") as handle:
        handle.truncate(16 << 20)
        handle.seek(8 << 20)
        handle.write(b"in the middle of a hole\n")
    os.setxattr(first, "user.x", b"an extended attribute")
    os.setxattr(dirs[0] if dirs else root, "user.x", b"on a directory")
    stamp = 1700000000
    for number, (here, subdirs, names) in enumerate(sorted(os.walk(root), reverse=True)):
        for offset, name in enumerate(sorted(names)):
            os.utime(os.path.join(here, name), ns=((stamp + offset) * 10 ** 9,) * 2, follow_symlinks=False)
        if here != root:
            os.chmod(here, 0o750)
            os.utime(here, ns=((stamp - number) * 10 ** 9,) * 2)
    os.chown(root, OWNER[1], GROUP[1])
    os.chmod(root, 0o2750)
    os.utime(root, ns=((stamp - 1000) * 10 ** 9,) * 2)
    digests, problems = tree_digest(root)
    if problems:
        raise CaseError("the fixture could not be read: %s" % problems)
    return digests


# What a case looks at --------------------------------------------------------------------------------------

def disk_digest(work, path):
    """The directory on disk under whatever is mounted at PATH, through a non-recursive bind of its parent."""
    peek = os.path.join(work, "peek")
    os.makedirs(peek, exist_ok=True)
    sh("mount", "--bind", os.path.dirname(path), peek)
    try:
        digests, problems = tree_digest(os.path.join(peek, os.path.basename(path)))
    finally:
        sh("umount", peek)
    return digests, problems


def journal_paths():
    """The paths the journal names, and whether the file is there."""
    lines = Journal(paths.JOURNAL).read()
    named = {(line.get("what") or {}).get("path") for line in lines if line.get("t") == "txn"} - {None}
    return os.path.exists(paths.JOURNAL), sorted(named), lines


def describe_line(line, whats):
    """A journal line in a few words: 'data: begin 3 (copy)'."""
    if line is None:
        return "before the first write"
    what = whats.get((line.get("run"), line.get("txn"))) or {}
    where = os.path.basename(what.get("path") or "?")
    kind = line.get("t")
    if kind == "txn":
        return "%s: txn" % where
    if "i" in line:
        steps = what.get("steps") or []
        step = steps[line["i"]]["step"] if line["i"] < len(steps) else "?"
        return "%s: %s %d %s" % (where, kind, line["i"], step)
    return "%s: %s" % (where, kind)


def end_state(paths_of):
    """What a run leaves, to compare between cases (see the module's docstring)."""
    listing = json.loads(subprocess.run(["findmnt", "-J", "-l", "-o", "TARGET,SOURCE,FSTYPE,OPTIONS"],
                                        check=True, capture_output=True, text=True).stdout)["filesystems"]
    state = {"mounts": {}, "roots": {}, "trees": {}, "tree_problems": {}}
    for path in paths_of:
        state["mounts"][path] = [dict(fstype=m["fstype"], source=m["source"], options=m["options"])
                                 for m in listing if m["target"] == path]
        info = os.stat(path) if os.path.isdir(path) else None
        state["roots"][path] = "%o %d:%d" % (info.st_mode & 0o7777, info.st_uid, info.st_gid) if info else None
        if info:
            digests, problems = tree_digest(path)
            state["trees"][path] = digest_hash(without_root_mtime(digests))
            state["tree_problems"][path] = problems
    state["staging_mounts"] = [m["target"] for m in listing if m["target"].startswith(paths.RUN_DIR + "/")]
    with open(paths.FSTAB, encoding="utf-8") as handle:
        state["fstab"] = handle.read()
    state["records"] = {}
    for here, _dirs, names in os.walk(paths.ETC_DIR):
        for name in names:
            with open(os.path.join(here, name), encoding="utf-8") as handle:
                state["records"][os.path.join(here, name)] = handle.read()
    state["etc_temp_files"] = sorted(os.path.join(here, name) for here, _dirs, names in os.walk("/etc")
                                     for name in names if ".ramdisk-" in name)
    state["journal"] = os.path.exists(paths.JOURNAL)
    state["journal_blobs"] = sorted(os.listdir(paths.JOURNAL_BLOBS)) if os.path.isdir(paths.JOURNAL_BLOBS) else []
    state["run_dir"] = sorted(os.listdir(paths.RUN_DIR)) if os.path.isdir(paths.RUN_DIR) else []
    return state


def state_diff(reference, state):
    """One sentence per part of STATE that differs from REFERENCE."""
    out = []
    for key in sorted(set(reference) | set(state)):
        if reference.get(key) != state.get(key):
            out.append("%s: %s, reference %s" % (key, json.dumps(state.get(key))[:400], json.dumps(reference.get(key))[:400]))
    return out


# Cases (in the namespace) ----------------------------------------------------------------------------------

def enter(work, etc_on_tmpfs=False):
    """Make this namespace's private views: /etc, /var/lib and /run overlays whose writes stay in WORK (/etc with
    the fixture's owner and group added), /srv an empty directory of WORK. ETC_ON_TMPFS: /etc a copy on a tmpfs
    just big enough for it instead."""
    # The overlays' writes (journal, lock, /etc's files) go to a tmpfs: their fsyncs are not what is tested.
    mem = os.path.join(work, "mem")
    os.makedirs(mem)
    sh("mount", "-t", "tmpfs", "-o", "size=256m,mode=700", "transaction-case", mem)
    if etc_on_tmpfs:
        etc = os.path.join(mem, "etc")
        sh("cp", "-a", "/etc", etc)
        sh("mount", "-t", "tmpfs", "-o", "size=64m,mode=755", "etc-full", "/etc")
        sh("cp", "-a", "--no-target-directory", etc + "/.", "/etc")
        # Then just big enough for what is in it, and a little room for the fixture's owner and group.
        info = os.statvfs("/etc")
        sh("mount", "-o", "remount,size=%dk" % ((info.f_blocks - info.f_bfree) * info.f_frsize // 1024 + 64), "/etc")
    overlays = ("/etc", "/var/lib", "/run", "/usr/local") if not etc_on_tmpfs else ("/var/lib", "/run", "/usr/local")
    for directory in [name for name in overlays if os.path.isdir(name)]:
        name = directory.strip("/").replace("/", "-")
        upper, scratch = os.path.join(mem, name, "upper"), os.path.join(mem, name, "work")
        os.makedirs(upper)
        os.makedirs(scratch)
        sh("mount", "-t", "overlay", "overlay", "-o", "lowerdir=%s,upperdir=%s,workdir=%s" % (directory, upper, scratch),
           directory)
    with open("/etc/passwd", "a", encoding="utf-8") as handle:
        handle.write("%s:x:%d:%d::/nonexistent:/usr/sbin/nologin\n" % (OWNER[0], OWNER[1], GROUP[1]))
    with open("/etc/group", "a", encoding="utf-8") as handle:
        handle.write("%s:x:%d:\n" % GROUP)
    os.makedirs(os.path.join(work, "srv"))
    sh("mount", "--bind", os.path.join(work, "srv"), "/srv")


def fill(directory):
    """Fill the file system of DIRECTORY until not one more page fits."""
    chunk = b"\0" * 65536
    with open(os.path.join(directory, "zz-filler"), "wb", buffering=0) as handle:
        for size in (65536, 4096, 1):
            while True:
                try:
                    handle.write(chunk[:size])
                except OSError:
                    break
    return os.statvfs(directory).f_bavail


def case_reference(spec, runner):
    fixture = make_fixture(DATA, FIXTURES[spec["fixture"]])
    done = runner.run(spec["policy"])
    if not done["ok"]:
        raise CaseError("the uninterrupted run failed: %s" % (done["msg"] or done))
    return check_after(spec, runner, fixture, {"run": outcome(done)})


def outcome(done):
    result = done["result"] or {}
    return {"ok": done["ok"], "killed": done["killed"], "msg": done["msg"][:600],
            # ramdisk_plan recovers first; ramdisk_apply again, for a run that died after this one's plan.
            # A zram transaction's path is "zram_devices entry 'NAME' (/dev/zramN)": NAME.
            "recovered": ["%s: %s %s" % (who, (r.get("path") or "?").split("'")[1] if "entry '" in (r.get("path") or "")
                                         else os.path.basename(r.get("path") or "?"), r.get("way"))
                          for who, found in (("plan", done.get("plan_recovered")), ("apply", result.get("recovered")))
                          for r in found or []],
            "changed": result.get("changed")}


def check_after(spec, runner, fixture, out):
    """The end state, and the checks every case makes at its end."""
    problems = []
    disk, disk_problems = disk_digest(runner.work, DATA)
    problems += ["the disk copy of %s: %s" % (DATA, s) for s in disk_problems + compare_trees(
        fixture, disk, "fixture", "disk copy", root_mtime=True)]
    if mounts_at(DATA):
        mounted, mounted_problems = tree_digest(DATA)
        problems += ["the mount at %s: %s" % (DATA, s) for s in mounted_problems + compare_trees(
            fixture, mounted, "fixture", "mount", root_mtime=True)]
    out["state"] = end_state(sorted({e["path"] for e in POLICIES[spec["policy"]]}))
    out["fixture"] = digest_hash(fixture)
    out["problems"] = problems
    return out


def hidden_check(fixture, work):
    """Right after a kill: a new mount over the directory is one the journal names, and it holds all the data;
    the disk copy is whole. Returns (facts, problems)."""
    problems = []
    exists, named, lines = journal_paths()
    facts = {"journal_lines": len(lines), "journal_paths": named, "covered": []}
    for path in (DATA, PLAIN):
        if mounts_at(path):
            facts["covered"].append(path)
            if not exists or path not in named:
                problems.append("%s is covered by a mount that no journal names (journal %s, naming %s)"
                                % (path, "there" if exists else "gone", named))
    if DATA in facts["covered"]:
        mounted, mounted_problems = tree_digest(DATA)
        problems += ["what covers %s after the kill: %s" % (DATA, s) for s in mounted_problems + compare_trees(
            fixture, mounted, "fixture", "mount", root_mtime=True)]
    disk, disk_problems = disk_digest(work, DATA)
    problems += ["the disk copy after the kill: %s" % s for s in disk_problems + compare_trees(
        fixture, disk, "fixture", "disk copy", root_mtime=True)]
    whats = {(line.get("run"), line.get("txn")): line.get("what") for line in lines if line.get("t") == "txn"}
    facts["killed_after"] = describe_line(lines[-1] if lines else None, whats)
    return facts, problems


def case_kill(spec, runner):
    fixture = make_fixture(DATA, FIXTURES["small"])
    first = runner.run(spec["policy"], kill_at=spec["n"])
    out = {"first": outcome(first)}
    if not first["killed"]:
        if not first["ok"]:
            raise CaseError("the run with %s=%d neither died nor succeeded: %s" % (KILL_ENV, spec["n"], first["msg"]))
        return check_after(spec, runner, fixture, out)
    out["hidden"], problems = hidden_check(fixture, runner.work)
    second = runner.run(spec["policy"])
    out["second"] = outcome(second)
    out = check_after(spec, runner, fixture, out)
    out["problems"] = problems + out["problems"]
    return out


def power_cut(work):
    """What a power cut takes, in this namespace: every mount under the case's paths and the staging area (newest
    first, lazily when busy), what lives in /run for the collection (the lock, the staging directories), and the
    boot itself (a new boot id, bound over /proc/sys/kernel/random/boot_id here only). /etc and /var/lib keep what
    was written. Returns the mount points taken away."""
    taken = []
    for _round in range(50):
        left = [m["mount_point"] for m in mounts() if m["mount_point"].startswith((TOP + "/", paths.RUN_DIR + "/"))
                or m["mount_point"] == paths.RUN_DIR]
        if not left:
            break
        if subprocess.run(["umount", left[-1]], capture_output=True, check=False).returncode != 0:
            sh("umount", "-l", left[-1])
        taken.append(left[-1])
    else:
        raise CaseError("mounts stayed after the power cut: %s" % left)
    shutil.rmtree(paths.RUN_DIR, ignore_errors=True)
    boot_id = os.path.join(work, "boot_id")
    with open(boot_id, "w", encoding="ascii") as handle:
        handle.write("%s\n" % uuid.uuid4())
    sh("mount", "--bind", boot_id, "/proc/sys/kernel/random/boot_id")
    return taken


def boot():
    """What the boot does on a host without systemd: mount what /etc/fstab lists under the case's paths, in its
    order (nothing fills a migrated mount). Returns [path, exit status, what mount said]."""
    listed = subprocess.run(["findmnt", "--fstab", "-J", "-o", "TARGET"], capture_output=True, text=True, check=False)
    targets = [fs["target"] for fs in (json.loads(listed.stdout)["filesystems"] if listed.stdout.strip() else [])]
    out = []
    for target in targets:
        if target.startswith(TOP + "/"):
            done = subprocess.run(["mount", target], capture_output=True, text=True, check=False)
            out.append([target, done.returncode, done.stderr.strip()])
    return out


def boot_check(fixture, work):
    """Right after the boot: the disk copy is whole, and what covers each path is what /etc/fstab says (the boot's
    own mount, over DATA empty: the next run has to fill it or refuse naming it). Returns (facts, problems)."""
    problems = []
    facts = {"covered": {}}
    for path in (DATA, PLAIN):
        found = mounts_at(path)
        if len(found) > 1:
            problems.append("%d mounts at %s after the boot" % (len(found), path))
        if found:
            entries = len(os.listdir(path))
            facts["covered"][path] = "empty" if not entries else "%d entries" % entries
    disk, disk_problems = disk_digest(work, DATA)
    problems += ["the disk copy after the boot: %s" % s for s in disk_problems + compare_trees(
        fixture, disk, "fixture", "disk copy", root_mtime=True)]
    return facts, problems


def case_reboot(spec, runner):
    """A run killed before its journal write N (or, past the last N, not killed), then a power cut and a boot
    without systemd, then the next run."""
    fixture = make_fixture(DATA, FIXTURES["small"])
    first = runner.run(spec["policy"], kill_at=spec["n"])
    out = {"first": outcome(first)}
    if not first["killed"] and not first["ok"]:
        raise CaseError("the run with %s=%d neither died nor succeeded: %s" % (KILL_ENV, spec["n"], first["msg"]))
    _exists, _named, lines = journal_paths()
    whats = {(line.get("run"), line.get("txn")): line.get("what") for line in lines if line.get("t") == "txn"}
    out["killed_after"] = describe_line(lines[-1] if lines else None, whats) if first["killed"] else "(not killed)"
    out["taken"] = power_cut(runner.work)
    out["booted"] = boot()
    problems = ["the boot could not mount %s: %s" % (path, said) for path, rc, said in out["booted"] if rc]
    out["boot"], found = boot_check(fixture, runner.work)
    problems += found
    try:
        second = runner.run(spec["policy"])
    except CaseError as exc:
        second = {"ok": False, "killed": False, "result": None, "msg": str(exc)}
    out["second"] = outcome(second)
    out["second"]["boots"] = sorted({r.get("boot") for r in (second.get("plan_recovered") or []) if r.get("boot")})
    # What it changed: 'refill' for a migrate that first took away the empty mount the boot made.
    out["second"]["did"] = ["%s %s" % (os.path.basename(m["path"]), "refill" if m["steps"][:1] == ["unmount"] else
                                       m["action"]) for m in (second.get("result") or {}).get("mounts") or []
                            if m.get("changed")]
    if not second["ok"]:
        problems.append("the run after the boot failed: %s" % (second["msg"] or second))
    out = check_after(spec, runner, fixture, out)
    out["problems"] = problems + out["problems"]
    return out


def _children(pid):
    """(pid, comm) of the processes whose parent is PID."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry, encoding="utf-8") as handle:
                raw = handle.read()
        except OSError:
            continue
        comm = raw[raw.index("(") + 1:raw.rindex(")")]
        if int(raw[raw.rindex(")") + 2:].split()[1]) == pid:
            found.append((int(entry), comm))
    return found


def case_cp_kill(spec, runner):
    """The module killed from outside while cp copies the big fixture into the new mount."""
    fixture = make_fixture(DATA, FIXTURES["big"])
    proc = runner.apply_start(runner.plan(spec["policy"])[0])
    copying = None
    deadline = time.monotonic() + 60
    while copying is None and proc.poll() is None and time.monotonic() < deadline:
        copying = next((pid for pid, comm in _children(proc.pid) if comm == "cp"), None)
        time.sleep(0.002)
    if copying is None:
        Runner._finish(proc)
        raise CaseError("cp never ran as a child of ramdisk_apply (pid %d)" % proc.pid)
    time.sleep(0.05)  # well into the copy
    still_copying = proc.poll() is None and os.path.exists("/proc/%d" % copying)
    # The whole run dies at once, as when the controller's connection or the machine goes: module and cp.
    os.killpg(proc.pid, signal.SIGKILL)
    first = Runner._finish(proc)
    first.update(ok=False, msg="")
    out = {"first": outcome(first), "cp_running_at_kill": still_copying}
    out["hidden"], problems = hidden_check(fixture, runner.work)
    second = runner.run(spec["policy"])
    out["second"] = outcome(second)
    out = check_after(spec, runner, fixture, out)
    out["problems"] = problems + out["problems"]
    if not first["killed"]:
        out["problems"].append("the module was not killed by the signal (exit %s)" % first["rc"])
    return out


def case_concurrency(spec, runner):
    """SPEC['runs'] runs at once; a watcher reads the mount table all along for two mounts on one path."""
    fixture = make_fixture(DATA, FIXTURES["small"])
    stop = threading.Event()
    most = {"at_once": 0}

    def watch():
        while not stop.is_set():
            with open("/proc/self/mountinfo", encoding="utf-8") as handle:
                # The mount point is the fifth field; DATA has nothing to escape.
                count = sum(1 for line in handle if line.split(" ", 5)[4] == DATA)
            most["at_once"] = max(most["at_once"], count)
            time.sleep(0.01)

    # Daemon threads: a Ctrl-C ends the case at once.
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    barrier = threading.Barrier(spec["runs"])

    def one(_index):
        barrier.wait()
        try:
            return runner.run(spec["policy"], lock_timeout=spec["lock_timeout"])
        except CaseError as exc:
            return {"ok": False, "killed": False, "rc": None, "result": None, "msg": "the plan failed: %s" % exc}

    with concurrent.futures.ThreadPoolExecutor(spec["runs"]) as pool:
        results = list(pool.map(one, range(spec["runs"])))
    stop.set()
    watcher.join()
    out = {"runs": [], "most_mounts_at_once": most["at_once"]}
    for done in results:
        if done["ok"]:
            kind = "succeeded, changed" if (done["result"] or {}).get("changed") else "succeeded, no change"
        elif LOCK_HELD in done["msg"]:
            kind = "lock held"
        elif STALE in done["msg"]:
            # It names the run it waited for when it waited; one that came after the winner had nobody to wait for.
            kind = "stale plan, after waiting" if WAITED in done["msg"] else "stale plan"
        else:
            kind = "UNEXPECTED"
        out["runs"].append({"kind": kind, "msg": done["msg"][:600]})
    return check_after(spec, runner, fixture, out)


def case_full_disk(spec, runner):
    """A run on a full /etc fails and leaves it as it was; once there is room again, the next run succeeds."""
    fixture = make_fixture(DATA, FIXTURES["small"])
    with open(paths.FSTAB, "rb") as handle:
        fstab = handle.read()
    free = fill("/etc")
    done = runner.run(spec["policy"])
    out = {"full": outcome(done), "free_blocks_after_fill": free}
    problems = []
    if done["ok"] or "is unchanged" not in done["msg"]:
        problems.append("the run did not fail with the atomic write's message ('is unchanged'): %s"
                        % (done["msg"] or "it succeeded"))
    with open(paths.FSTAB, "rb") as handle:
        if handle.read() != fstab:
            problems.append("/etc/fstab changed")
    for path in (DATA, PLAIN):
        if mounts_at(path):
            problems.append("%s is still mounted" % path)
    if os.path.isdir(paths.RECORD_DIR) and os.listdir(paths.RECORD_DIR):
        problems.append("records were written: %s" % os.listdir(paths.RECORD_DIR))
    if os.path.exists(PLAIN):
        problems.append("%s, made by the run, is still there" % PLAIN)
    staging = [m["mount_point"] for m in mounts() if m["mount_point"].startswith(paths.RUN_DIR + "/")]
    if staging:
        problems.append("staging mounts are left: %s" % staging)
    temps = [name for name in os.listdir("/etc") if ".ramdisk-" in name]
    if temps:
        problems.append("temporary files are left in /etc: %s" % temps)
    out["journal_after_failure"] = os.path.exists(paths.JOURNAL)
    os.unlink("/etc/zz-filler")
    out["run"] = outcome(runner.run(spec["policy"]))
    if not out["run"]["ok"]:
        problems.append("with room again, the next run failed: %s" % out["run"]["msg"])
    out = check_after(spec, runner, fixture, out)
    out["problems"] = problems + out["problems"]
    return out


# zram (the kernel's devices and swaps are global: every case removes what it made) ----------------------------

ZDATA = TOP + "/zdata"
ZRAM_POLICIES = {
    "zram-swap": [{"name": "txswap", "use": "swap", "size": "32M", "algorithm": "lz4", "priority": 7}],
    "zram-fs": [{"name": "txfs", "use": "filesystem", "size": "48M", "algorithm": "lzo", "path": ZDATA,
                 "owner": OWNER[0], "group": GROUP[0], "mode": "0750", "migrate": True, "options": ["nofail"]}],
    # No owner, group or mode: the migrated directory's own (the fixture's 4242:4343 2750) stay.
    "zram-keep": [{"name": "txkeep", "use": "filesystem", "size": "40M", "algorithm": "lzo", "path": TOP + "/zkeep",
                   "migrate": True, "options": ["nofail"]}],
    # Device 3 of 4 asks for a size the kernel refuses (0 bytes, past the plan): the run fails at its zram_set.
    "zram-fail": [{"name": "txa", "use": "swap", "size": "16M", "priority": 5},
                  {"name": "txb", "use": "filesystem", "size": "32M", "path": TOP + "/zb"},
                  {"name": "txc", "use": "swap", "size": "16M", "priority": 5, "size_bytes": 0},
                  {"name": "txd", "use": "swap", "size": "16M", "priority": 5}],
}
ZRAM_FIXTURE = 120


def zram_names():
    return sorted((name for name in os.listdir("/sys/block") if name.startswith("zram")), key=lambda n: int(n[4:]))


def _sysfs_ino(name):
    try:
        return os.stat("/sys/block/" + name).st_ino
    except OSError:
        return None


def zram_ids():
    """{zramN: the inode number of its sysfs directory}: what a case takes before it begins. Other users of this
    kernel (the other lane of make test, a lab container) remove devices and make new ones, and the kernel gives a new
    device the lowest free number: a number seen before the case may be a device the case made since. sysfs gives
    each new device's directory a new inode number, so the pair tells them apart."""
    return dict((name, _sysfs_ino(name)) for name in zram_names())


def new_since(before, names):
    """Those of NAMES (devices) that are not the very devices BEFORE (zram_ids()) listed: made since, even where a
    number was reused."""
    return [name for name in names if name not in before or before[name] != _sysfs_ino(name)]


def zram_swaps():
    """{zramN: priority} of the swaps on zram devices (a swap turned on from another root shows as /zramN)."""
    out = {}
    with open("/proc/swaps", encoding="utf-8") as handle:
        for line in handle.read().splitlines()[1:]:
            fields = line.split()
            name = fields[0].rsplit("/", 1)[-1]
            if name.startswith("zram"):
                out[name] = int(fields[4])
    return out


def zram_records():
    out = {}
    directory = paths.ZRAM_RECORD_DIR
    for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
        with open(os.path.join(directory, name), encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("DEVICE="):
                    out[name[:-5]] = line[7:].strip()
    return out


def journal_devices():
    """The zram devices the journal's transactions name (planned before hot_add, so named even when killed)."""
    out = set()
    for line in Journal(paths.JOURNAL).read():
        for step in (line.get("what") or {}).get("steps") or []:
            device = (step.get("args") or {}).get("device")
            if device:
                out.add(device)
    return out


def zram_plan(runner, policy):
    """What the zram role's preflight decides: ramdisk_facts, then the zram_plan filter's function, and the records."""
    from ansible_collections.ramdisk.provision.plugins.module_utils._zram_plan import plan_zram
    devices = [dict(entry) for entry in ZRAM_POLICIES[policy]]
    done = runner._finish(runner._start("ramdisk_facts", {"paths": [e["path"] for e in devices if "path" in e],
                                                          "scan_timeout": 5}, None))
    facts = ((done["result"] or {}).get("ansible_facts") or {}).get("ramdisk")
    if not facts:
        raise CaseError("ramdisk_facts failed: %s" % done)
    forced = {e["name"]: e.pop("size_bytes") for e in devices if "size_bytes" in e}
    plan = plan_zram(devices, facts, host="transaction-test")
    if plan["errors"]:
        raise CaseError("the zram plan refused the policy: %s" % plan["errors"])
    for device in plan["devices"]:
        if device["name"] in forced:
            device["size_bytes"] = forced[device["name"]]
    return plan["devices"]


def zram_run(runner, policy, kill_at=None):
    """One run as the zram role does it: finish or undo what a dead run left, plan, then apply."""
    first = runner._finish(runner._start("ramdisk_apply", {"host": "transaction-test"}, None))
    if first["rc"] != 0:
        raise CaseError("the recovering run failed: %s" % ((first["result"] or {}).get("msg") or first))
    devices = zram_plan(runner, policy)
    done = runner._finish(runner._start("ramdisk_apply", {
        "host": "transaction-test", "zram_devices": devices, "zram_known": zram_records()},
        {KILL_ENV: str(kill_at)} if kill_at else None))
    result = done["result"] or {}
    done["ok"] = done["rc"] == 0 and bool(done["result"]) and not result.get("failed")
    done["msg"] = result.get("msg") or ""
    done["plan_recovered"] = (first["result"] or {}).get("recovered") or []
    return done


def zram_ours(before):
    """The devices of this case (named by a record or the journal, new since it began), and the new ones nothing
    names that could be ours: empty (a hot_add) or of a size the policies ask. Others on this shared kernel make
    devices of their own now and then; those are left alone and not counted."""
    named = set(zram_records().values()) | journal_devices()
    sizes = {0} | {int(entry["size"][:-1]) << 20 for entries in ZRAM_POLICIES.values() for entry in entries}
    ours, unaccounted = [], []
    for name in new_since(before, zram_names()):
        if name in named:
            ours.append(name)
            continue
        try:
            with open("/sys/block/%s/disksize" % name, encoding="ascii") as handle:
                size = int(handle.read())
        except (OSError, ValueError):
            continue  # gone already: not ours
        if size in sizes:
            unaccounted.append(name)
    return ours, unaccounted


def zram_clean(before):
    """Take away what the case made: unmount, swapoff, reset and remove each device a record or the journal names
    and that was not there before the case. Returns the devices removed and the problems."""
    named = set(new_since(before, set(zram_records().values()) | journal_devices()))
    removed, problems = [], []
    for name in sorted(named, key=lambda n: int(n[4:])):
        if not os.path.exists("/sys/block/" + name):
            continue
        for mount in reversed(mounts()):
            if mount["source"] == "/dev/" + name:
                subprocess.run(["umount", "-l", mount["mount_point"]], check=False)
        if name in zram_swaps():
            subprocess.run(["swapoff", "/dev/" + name], check=False)
        try:
            for attr, value in (("/sys/block/%s/reset" % name, "1"), ("/sys/class/zram-control/hot_remove", name[4:])):
                for _try in range(20):
                    try:
                        with open(attr, "w", encoding="ascii") as handle:
                            handle.write(value)
                        break
                    except OSError:
                        time.sleep(0.1)
                else:
                    raise OSError("%s refused %s" % (attr, value))
            removed.append(name)
        except OSError as exc:
            problems.append("could not remove %s, which this case made: %s" % (name, exc))
    return removed, problems


def zram_state(policy):
    """What a zram run leaves, with device numbers as X (a case's devices get whatever numbers are free)."""
    import re
    records = zram_records()
    state = {"devices": {}, "swaps": {}, "mounts": {}, "roots": {}, "trees": {}}
    for entry, device in sorted(records.items()):
        base = "/sys/block/%s/" % device
        if not os.path.exists(base):
            state["devices"][entry] = None
            continue
        with open(base + "disksize", encoding="ascii") as handle:
            size = int(handle.read())
        with open(base + "comp_algorithm", encoding="ascii") as handle:
            algorithm = [word[1:-1] for word in handle.read().split() if word.startswith("[")]
        state["devices"][entry] = {"disksize": size, "algorithm": algorithm}
        state["swaps"][entry] = zram_swaps().get(device)
    for entry in ZRAM_POLICIES[policy]:
        path = entry.get("path")
        if not path:
            continue
        state["mounts"][path] = [dict(fstype=m["fstype"], source=re.sub(r"zram\d+", "zramX", m["source"]))
                                 for m in mounts() if m["mount_point"] == path]
        info = os.stat(path) if os.path.isdir(path) else None
        state["roots"][path] = "%o %d:%d" % (info.st_mode & 0o7777, info.st_uid, info.st_gid) if info else None
        if info and state["mounts"][path]:
            digests, problems = tree_digest(path)
            digests.pop("lost+found", None)
            state["trees"][path] = [digest_hash(without_root_mtime(digests)), problems]
    with open(paths.FSTAB, encoding="utf-8") as handle:
        state["fstab"] = re.sub(r"zram\d+", "zramX", handle.read())
    state["records"] = {}
    for here, _dirs, names in os.walk(paths.ETC_DIR):
        for name in names:
            with open(os.path.join(here, name), encoding="utf-8") as handle:
                state["records"][os.path.join(here, name)] = re.sub(r"zram\d+", "zramX", handle.read())
    state["journal"] = os.path.exists(paths.JOURNAL)
    state["staging_mounts"] = [m["mount_point"] for m in mounts() if m["mount_point"].startswith(paths.RUN_DIR + "/")]
    return state


def zram_case(spec, runner):
    """The zram cases: reference (one whole run), kill (killed before journal write N, then the next run) and fail
    (device 3 of 4 refused by the kernel: everything the run made undone). Every device made is removed at the end."""
    before = zram_ids()
    out = {"problems": []}
    fixture = make_fixture(ZDATA, ZRAM_FIXTURE) if spec["policy"] == "zram-fs" else None
    fstab_before = open(paths.FSTAB, encoding="utf-8").read()
    try:
        if spec["case"] == "zram-fail":
            done = zram_run(runner, spec["policy"])
            out["run"] = outcome(done)
            new, unaccounted = zram_ours(before)
            if done["ok"]:
                out["problems"].append("the run with device 3 refused succeeded")
            if new or unaccounted:
                out["problems"].append("devices left after the failed run: %s" % (new + unaccounted))
            if new_since(before, zram_swaps()):
                out["problems"].append("swaps left on: %s" % sorted(new_since(before, zram_swaps())))
            if open(paths.FSTAB, encoding="utf-8").read() != fstab_before:
                out["problems"].append("/etc/fstab changed")
            if zram_records():
                out["problems"].append("records left: %s" % zram_records())
            if any(m["mount_point"] == TOP + "/zb" for m in mounts()):
                out["problems"].append("%s is still mounted" % (TOP + "/zb"))
            out["state"] = zram_state(spec["policy"])
            return out
        first = zram_run(runner, spec["policy"], kill_at=spec.get("n"))
        out["first"] = outcome(first)
        if spec.get("n") and first["killed"]:
            new, unaccounted = zram_ours(before)
            lines = Journal(paths.JOURNAL).read()
            # A zram transaction's path names its entry and device: "zram_devices entry 'x' (/dev/zramN)".
            whats = {(line.get("run"), line.get("txn")): dict(line.get("what") or {}, path=(line.get("what") or {}).get(
                "zram")) for line in lines if line.get("t") == "txn"}
            out["hidden"] = {"new_devices": len(new), "killed_after": describe_line(lines[-1] if lines else None, whats)}
            if unaccounted:
                out["problems"].append("right after the kill, zram devices no record or journal names: %s" % unaccounted)
            if fixture is not None and mounts_at(ZDATA):
                # A mount over the directory right after the kill is the dead run's, past its move, holding it all.
                if not any((line.get("what") or {}).get("zram") == "txfs" for line in lines if line.get("t") == "txn"):
                    out["problems"].append("%s is covered by a mount that no journal names" % ZDATA)
                # Its root has the entry's owner and mode, not the directory's: only what is in it is compared.
                mounted, mounted_problems = tree_digest(ZDATA)
                inside = dict((rel, digest) for rel, digest in fixture.items() if rel != ".")
                mounted = dict((rel, digest) for rel, digest in mounted.items() if rel != ".")
                out["problems"] += ["what covers %s after the kill: %s" % (ZDATA, p) for p in mounted_problems
                                    + compare_trees(inside, mounted, "fixture", "mount", b_fs_root=True)]
            second = zram_run(runner, spec["policy"])
            out["second"] = outcome(second)
            if not second["ok"]:
                out["problems"].append("the next run failed: %s" % second["msg"])
        elif not first["ok"]:
            raise CaseError("the run%s failed: %s" % (" with %s=%s" % (KILL_ENV, spec["n"]) if spec.get("n") else "",
                                                      first["msg"] or first))
        new, unaccounted = zram_ours(before)
        if unaccounted:
            out["problems"].append("zram devices made and not recorded: %s" % unaccounted)
        if len(new) != len(ZRAM_POLICIES[spec["policy"]]):
            out["problems"].append("%d new zram devices, not %d: %s" % (len(new), len(ZRAM_POLICIES[spec["policy"]]), new))
        if fixture is not None:
            disk, disk_problems = disk_digest(runner.work, ZDATA)
            out["problems"] += ["the disk copy of %s: %s" % (ZDATA, s) for s in disk_problems + compare_trees(
                fixture, disk, "fixture", "disk copy", root_mtime=True)]
        out["state"] = zram_state(spec["policy"])
        return out
    finally:
        out["removed"], problems = zram_clean(before)
        out["problems"] += problems


def case_odd_paths(spec, runner):
    """Paths with a space, '#', a backslash, quotes, '%', '$' and a letter beyond ASCII: applied (the migrate's data
    copied in), read back from /etc/fstab by findmnt, a second run changes nothing, state absent takes them away."""
    os.makedirs(ODD_PATHS[0])
    with open(os.path.join(ODD_PATHS[0], "kept.txt"), "w", encoding="utf-8") as handle:
        handle.write("on disk before the mount\n")
    fixture, _problems = tree_digest(ODD_PATHS[0])
    out = {"problems": []}
    first = runner.run(spec["policy"])
    out["first"] = outcome(first)
    if not first["ok"] or not first["result"].get("changed"):
        out["problems"].append("the first run did not apply the paths: %s" % (first["msg"] or first["result"]))
        return out
    for path, fstype in zip(ODD_PATHS, ("tmpfs", "ramfs")):
        found = [mount["fstype"] for mount in mounts_at(path)]
        if found != [fstype]:
            out["problems"].append("%r: mounted %s, not one %s" % (path, found, fstype))
    copied, copy_problems = tree_digest(ODD_PATHS[0])
    out["problems"] += copy_problems + compare_trees(fixture, copied, "disk directory", "RAM copy", root_mtime=True)
    listed = json.loads(subprocess.run(["findmnt", "--fstab", "-J", "-o", "TARGET,FSTYPE"], check=True,
                                       capture_output=True, text=True).stdout)["filesystems"]
    for path, fstype in zip(ODD_PATHS, ("tmpfs", "ramfs")):
        if {"target": path, "fstype": fstype} not in listed:
            out["problems"].append("findmnt --fstab does not read back %r as %s: %s" % (path, fstype, listed))
    entries, _recovered = runner.plan(spec["policy"])
    if any(entry["action"] != "ok" or entry["todo"] for entry in entries):
        work = [(entry["path"], entry["action"], entry["steps"]) for entry in entries]
        out["problems"].append("the second plan still has work: %s" % work)
    second = runner.run(spec["policy"])
    out["second"] = outcome(second)
    if not second["ok"] or second["result"].get("changed"):
        out["problems"].append("the second run %s" % ("changed the host" if second["ok"] else "failed: %s"
                                                      % second["msg"]))
    gone = runner.run(spec["policy"] + "-absent")
    out["absent"] = outcome(gone)
    with open(paths.FSTAB, encoding="utf-8") as handle:
        fstab = handle.read()
    left = [path for path in ODD_PATHS if mounts_at(path)]
    if not gone["ok"] or left or "/srv/tx" in fstab:
        out["problems"].append("state absent left mounts %s or fstab lines (%s): %s" % (left, fstab[-300:], gone["msg"]))
    return out


def root_of(path):
    info = os.stat(path)
    return "%o %d:%d" % (info.st_mode & 0o7777, info.st_uid, info.st_gid)


def second_run_problems(done, again):
    """A run DONE that applied a policy, and AGAIN, the same policy once more, which must change nothing."""
    if not done["ok"]:
        return ["the run failed: %s" % done["msg"]]
    if not again["ok"] or again["result"].get("changed"):
        return ["the second run %s" % ("changed the host" if again["ok"] else "failed: %s" % again["msg"])]
    return []


def case_read_only(spec, runner):
    """A read-only tmpfs, mounted (its owner and mode set at mount) and migrated (the directory's owner, mode and
    data): both read-only, each root as it should be, the data there, a second run changes nothing."""
    fixture = make_fixture(RO_DATA, 60)
    out = {"problems": []}
    first = runner.run(spec["policy"])
    out["first"] = outcome(first)
    if not first["ok"]:
        out["problems"].append("the run failed: %s" % first["msg"])
        return out
    for path, root in ((RO_PLAIN, "750 %d:0" % OWNER[1]), (RO_DATA, "2750 %d:%d" % (OWNER[1], GROUP[1]))):
        found = mounts_at(path)
        if [mount["fstype"] for mount in found] != ["tmpfs"] or "ro" not in found[-1]["mount_options"]:
            out["problems"].append("%s: not one read-only tmpfs: %s" % (path, found))
        if root_of(path) != root:
            out["problems"].append("%s: its root is %s, not %s" % (path, root_of(path), root))
    copied, copy_problems = tree_digest(RO_DATA)
    out["problems"] += copy_problems + compare_trees(fixture, copied, "disk directory", "RAM copy", root_mtime=True)
    second = runner.run(spec["policy"])
    out["second"] = outcome(second)
    out["problems"] += second_run_problems(first, second)
    return out


def case_remounted(spec, runner):
    """A mount replaced by hand (umount, then mount of a tmpfs at the path) between the plan and the apply: the
    kernel gives the new one the old mount ID, and the apply must still refuse (the path changed) and leave it."""
    out = {"problems": []}
    first = runner.run("plain")
    if not first["ok"]:
        raise CaseError("the first run failed: %s" % first["msg"])
    entries, _recovered = runner.plan("plain-bigger")
    before = mounts_at(PLAIN)[-1]
    sh("umount", PLAIN)
    sh("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", PLAIN)
    with open(os.path.join(PLAIN, "written-by-hand"), "w", encoding="utf-8") as handle:
        handle.write("the admin's\n")
    after = mounts_at(PLAIN)[-1]
    out["mount_id_reused"] = before["mount_id"] == after["mount_id"]
    done = runner._finish(runner.apply_start(entries))
    result = done["result"] or {}
    out["first"] = {"ok": done["rc"] == 0 and not result.get("failed"), "msg": (result.get("msg") or "")[:600]}
    if out["first"]["ok"] or STALE not in out["first"]["msg"]:
        out["problems"].append("the apply did not refuse a path remounted since its plan (mount ID %s): %s"
                               % ("reused" if out["mount_id_reused"] else "new", out["first"]["msg"] or "it ran"))
    now = mounts_at(PLAIN)
    if not now or now[-1]["super_options"] != after["super_options"] or \
            not os.path.exists(os.path.join(PLAIN, "written-by-hand")):
        out["problems"].append("the mount made by hand was changed: %s, then %s" % (after, now))
    out["first"]["ok"] = not out["problems"]
    return out


def case_reboot_undo(spec, runner):
    """A run killed right after it rewrote the fstab line of a live mount (a change of the file alone, undone when
    cut short), a power cut, a boot that mounts the new line, files written there, then the next run: it puts the
    old line back and keeps the mount, which the old line describes too, with what was written since the boot."""
    out = {"problems": []}
    first = runner.run("plain")
    if not first["ok"]:
        raise CaseError("the first run failed: %s" % first["msg"])
    for n in range(2, 30):
        killed = runner.run("plain-nofail", kill_at=n)
        lines = Journal(paths.JOURNAL).read()
        steps = dict(((line.get("run"), line.get("txn")), (line.get("what") or {}).get("steps") or [])
                     for line in lines if line.get("t") == "txn")
        last = lines[-1] if lines else {}
        if not killed["killed"]:
            raise CaseError("no run of plain-nofail was killed right after its fstab step: %s" % killed["msg"])
        if last.get("t") == "done" and steps[(last["run"], last["txn"])][last["i"]]["step"] == "fstab":
            out["killed_at"] = n
            break
    else:
        raise CaseError("no kill point after the fstab step")
    power_cut(runner.work)
    out["booted"] = boot()
    with open(os.path.join(PLAIN, "written-since-boot"), "w", encoding="utf-8") as handle:
        handle.write("kept\n")
    second = runner.run("plain")
    out["first"] = outcome(second)
    if not second["ok"]:
        out["problems"].append("the run after the boot failed: %s" % second["msg"])
    if not mounts_at(PLAIN) or not os.path.exists(os.path.join(PLAIN, "written-since-boot")):
        out["problems"].append("what was written in %s since the boot is gone (mounted there now: %s)"
                               % (PLAIN, mounts_at(PLAIN)))
    with open(paths.FSTAB, encoding="utf-8") as handle:
        if "nofail" in handle.read():
            out["problems"].append("the new fstab line stayed")
    return out


def case_zram_root(spec, runner):
    """A zram file system that migrates a directory owned 4242:4343, mode 2750, with no owner or mode of its own:
    the root keeps them, the data is there, a second run changes nothing. Every device made is removed."""
    before = zram_ids()
    path = ZRAM_POLICIES[spec["policy"]][0]["path"]
    fixture = make_fixture(path, 60)
    out = {"problems": []}
    try:
        first = zram_run(runner, spec["policy"])
        out["first"] = outcome(first)
        if first["ok"]:
            if root_of(path) != "2750 %d:%d" % (OWNER[1], GROUP[1]):
                out["problems"].append("%s: its root is %s, not 2750 %d:%d" % (path, root_of(path), OWNER[1], GROUP[1]))
            copied, copy_problems = tree_digest(path)
            copied.pop("lost+found", None)
            out["problems"] += copy_problems + compare_trees(fixture, copied, "disk directory", "zram copy",
                                                             root_mtime=True, b_fs_root=True)
        out["problems"] += second_run_problems(first, zram_run(runner, spec["policy"]) if first["ok"] else first)
    finally:
        out["removed"], problems = zram_clean(before)
        out["problems"] += problems
    return out


def report_case(name, result):
    """One line for the case NAME; its problems, as FAIL lines."""
    if result.get("error"):
        return ["%s: %s" % (name, result["error"])]
    print("\n%s: first run %s%s, %s" % (name, "ok" if result["first"]["ok"] else "FAILED: %s" % result["first"]["msg"],
                                        "" if "mount_id_reused" not in result else " (the kernel %s the mount ID)"
                                        % ("reused" if result["mount_id_reused"] else "did not reuse"),
                                        "pass" if not result["problems"] else "FAIL"))
    return ["%s: %s" % (name, problem) for problem in result["problems"]]


XATTRS = TOP + "/xattrs"
QUOTA = TOP + "/quota"
# 20 files, each with one 983-byte extended attribute: tmpfs charges 40 bytes + name + value (1,031) of its
# 1 KiB-an-inode limit for each, so the 21 entries need 21 + ceil(20,620 / 1024) = 42 inodes (the plan counts 41
# bytes of overhead: 20,640, the same 42).
XATTR_FILES, XATTR_VALUE = 20, 983


def plan_entries(runner, entries):
    """ramdisk_plan's result for ENTRIES (a policy), errors included."""
    done = runner._finish(runner._start("ramdisk_plan", {
        "host": "transaction-test", "sources": [{"name": "ramdisk_mounts", "value": entries}],
        "purposes": runner.purposes, "defaults": runner.defaults}, None))
    if done["result"] is None:
        raise CaseError("ramdisk_plan gave no result: %s" % done)
    return done["result"]


def apply_entries(runner, result):
    done = runner._finish(runner.apply_start(result["tmpfs"] + result["ramfs"]))
    out = done["result"] or {}
    if done["rc"] != 0 or out.get("failed"):
        raise CaseError("ramdisk_apply failed: %s" % (out.get("msg") or done))
    return out


def case_limits(spec, runner):
    out = {"problems": []}
    problems = out["problems"]
    os.makedirs(XATTRS)
    for number in range(XATTR_FILES):
        name = os.path.join(XATTRS, "f%02d" % number)
        with open(name, "w", encoding="utf-8") as handle:
            handle.write("file %d\n" % number)
        os.setxattr(name, "user.pad", b"x" * XATTR_VALUE)
    fixture, _problems = tree_digest(XATTRS)
    entry = {"path": XATTRS, "size": "8M", "migrate": True}
    refused = plan_entries(runner, [dict(entry, nr_inodes=30)])
    out["refused"] = " ".join(refused.get("errors") or [])
    needed = None
    for word in out["refused"].split("nr_inodes to at least ")[1:2]:
        needed = int(word.split(".")[0])
    out["needed"] = needed
    if needed is None or "extended attributes" not in out["refused"]:
        problems.append("nr_inodes 30 for %d entries and their xattrs was not refused for the xattrs: %s"
                        % (XATTR_FILES + 1, out["refused"] or "no error"))
        return out
    # What the kernel says of one less: a tmpfs with needed - 1 inodes, and cp -a as the migrate copies.
    probe = os.path.join(runner.work, "one-less")
    os.makedirs(probe)
    sh("mount", "-t", "tmpfs", "-o", "size=8m,nr_inodes=%d" % (needed - 1), "one-less", probe)
    try:
        copy = subprocess.run(["cp", "-a", "--no-target-directory", XATTRS + "/.", probe], capture_output=True,
                              text=True, check=False)
        # cp -a leaves out an xattr it cannot set and may still exit 0: what landed tells.
        copied, _problems = tree_digest(probe)
    finally:
        sh("umount", probe)
    # The probe's root is the new tmpfs's own (mode 1777 before cp): only what is in it counts.
    differences = [d for d in compare_trees(fixture, copied, "fixture", "copy", root_mtime=False)
                   if not d.startswith("The root")]
    out["one_less"] = {"rc": copy.returncode, "stderr": copy.stderr.strip()[-200:], "differences": len(differences),
                       "first": differences[:1]}
    if copy.returncode == 0 and not differences:
        problems.append("cp -a into a tmpfs with nr_inodes=%d (one less than the plan asks) copied everything: the "
                        "plan asks for more than the kernel needs" % (needed - 1))
    accepted = plan_entries(runner, [dict(entry, nr_inodes=needed)])
    if accepted.get("errors"):
        problems.append("nr_inodes %d, the number the plan named, was refused: %s" % (needed, accepted["errors"]))
        return out
    apply_entries(runner, accepted)
    mounted, mounted_problems = tree_digest(XATTRS)
    problems += ["the migrated tree: %s" % p for p in mounted_problems + compare_trees(
        fixture, mounted, "fixture", "mount", root_mtime=True)]
    info = os.statvfs(XATTRS)
    out["inodes_after"] = {"total": info.f_files, "used": info.f_files - info.f_ffree}

    quota_entry = {"path": QUOTA, "size": "8M", "mode": "1777", "usrquota": True, "usrquota_block_hardlimit": "1m"}
    planned = plan_entries(runner, [quota_entry])
    support = ((planned.get("ansible_facts") or {}).get("ramdisk") or {}).get("support") or {}
    errors = " ".join(planned.get("errors") or [])
    out["quota_errors"] = errors
    if "not supported by this host's kernel" in errors:
        out["quota"] = "refused by the plan: %s" % errors[:400]
        if mounts_at(QUOTA):
            problems.append("the refused quota request left a mount at %s" % QUOTA)
        return out
    if errors:
        problems.append("the quota request was refused: %s" % errors)
        return out
    apply_entries(runner, planned)
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            os.setgid(GROUP[1])
            os.setuid(OWNER[1])
            with open(os.path.join(QUOTA, "big"), "wb", buffering=0) as handle:
                for _chunk in range(8):
                    handle.write(b"q" * (256 << 10))
            code = 0
        except OSError as exc:
            code = 1 if exc.errno == errno.EDQUOT else 2
        os._exit(code)
    _pid, status = os.waitpid(pid, 0)
    written = os.path.getsize(os.path.join(QUOTA, "big")) if os.path.exists(os.path.join(QUOTA, "big")) else 0
    out["quota"] = "a user wrote %d bytes, then %s (support: %s)" % (
        written, {0: "no error", 1: "EDQUOT", 2: "another error"}.get(os.WEXITSTATUS(status), "died"),
        support.get("tmpfs_quota_from"))
    if os.WEXITSTATUS(status) != 1 or written > (1 << 20):
        problems.append("the user's write past 1 MiB on a usrquota tmpfs: %s" % out["quota"])
    return out


def case_torn_journal(spec, runner):
    """A power cut while the migrate's run appended the line after its pivot's done: that line torn by 7 bytes;
    then the recovery (ramdisk_plan's) killed just before its journal write K; then a run that must leave what
    one uninterrupted run leaves. Before the torn-tail cut, the recovery's first line was glued to the torn one,
    and once a line followed it every later run refused the journal."""
    fixture = make_fixture(DATA, FIXTURES["small"])
    entries, _recovered = runner.plan(spec["policy"])
    said = runner._finish(runner._start("ramdisk_apply", {"host": "transaction-test", "mounts": entries,
                                                          "_ansible_check_mode": True}, None))
    planned = [item for item in (said["result"] or {}).get("mounts") or [] if item.get("steps")]
    if not planned or planned[0]["path"] != DATA or "move" not in planned[0]["steps"]:
        raise CaseError("the check-mode run does not plan the migrate of %s first: %s" % (DATA, said))
    pivot = planned[0]["steps"].index("move")
    # txn, begin and done of each step up to the pivot: the next write is the pivot's forward line.
    n = 1 + 2 * (pivot + 1) + 1
    first = runner.run(spec["policy"], kill_at=n)
    out = {"first": outcome(first)}
    lines = Journal(paths.JOURNAL).read()
    whats = {(line.get("run"), line.get("txn")): line.get("what") for line in lines if line.get("t") == "txn"}
    out["killed_after"] = describe_line(lines[-1] if lines else None, whats)
    if not first["killed"] or lines[-1].get("t") != "done" or lines[-1].get("i") != pivot:
        raise CaseError("the run killed at write %d did not stop after its pivot's done line: %s"
                        % (n, out["killed_after"]))
    with open(paths.JOURNAL, "r+b") as handle:
        handle.truncate(os.fstat(handle.fileno()).st_size - 7)
    recovery = runner._finish(runner._start("ramdisk_plan", {
        "host": "transaction-test", "sources": [{"name": "ramdisk_mounts", "value": POLICIES[spec["policy"]]}],
        "purposes": runner.purposes, "defaults": runner.defaults}, {KILL_ENV: str(spec["k"])}))
    out["recovery"] = {"killed": recovery["killed"], "rc": recovery["rc"]}
    if not recovery["killed"]:
        raise CaseError("the recovery killed at its journal write %d was not killed: %s"
                        % (spec["k"], (recovery["result"] or {}).get("msg") or recovery["stderr"]))
    last = runner.run(spec["policy"])
    out["last"] = outcome(last)
    out = check_after(spec, runner, fixture, out)
    if not last["ok"]:
        out["problems"].append("the run after the torn journal failed: %s" % last["msg"][:600])
    return out


CASES = {"reference": case_reference, "kill": case_kill, "cp-kill": case_cp_kill, "concurrency": case_concurrency,
         "reboot": case_reboot, "full-disk": case_full_disk, "odd-paths": case_odd_paths, "limits": case_limits,
         "zram-reference": zram_case, "zram-kill": zram_case, "zram-fail": zram_case, "read-only": case_read_only,
         "zram-root": case_zram_root, "remounted": case_remounted,
         "reboot-undo": case_reboot_undo, "torn-journal": case_torn_journal}


def inside(spec):
    work = spec["work"]
    try:
        enter(work, etc_on_tmpfs=spec["case"] == "full-disk")
        result = CASES[spec["case"]](spec, Runner(work))
    except (CaseError, OSError, subprocess.CalledProcessError) as exc:
        detail = exc.stderr.decode(errors="replace") if isinstance(exc, subprocess.CalledProcessError) else ""
        result = {"error": "%s %s" % (exc, detail)}
    with open(os.path.join(work, "result.json"), "w", encoding="utf-8") as handle:
        json.dump(result, handle)


# The driver (outside the namespaces) -----------------------------------------------------------------------

class Driver(object):

    def __init__(self, work, keep):
        self.work = work
        self.keep = keep
        self.number = 0
        self.lock = threading.Lock()

    def case(self, spec):
        """Run SPEC in a fresh namespace; its result (with 'error' when the case could not run)."""
        with self.lock:
            self.number += 1
            name = "%03d-%s" % (self.number, spec["name"])
        work = os.path.join(self.work, name)
        os.makedirs(work)
        spec = dict(spec, work=work)
        began = time.monotonic()
        with open(os.path.join(work, "log"), "w", encoding="utf-8") as log:
            proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "--", PYTHON,
                                   SELF, "--inside", json.dumps(spec)],
                                  stdout=log, stderr=subprocess.STDOUT, check=False, timeout=900)
        try:
            with open(os.path.join(work, "result.json"), encoding="utf-8") as handle:
                result = json.load(handle)
        except (OSError, ValueError):
            with open(os.path.join(work, "log"), encoding="utf-8", errors="replace") as handle:
                result = {"error": "the case ended (exit %s) without a result: %s" % (proc.returncode,
                                                                                      handle.read()[-1500:])}
        if not isinstance(result, dict):
            result = {"error": "the case gave no result (%r): a bug of the test" % (result,)}
        result["seconds"] = round(time.monotonic() - began, 1)
        if result.get("error") or result.get("problems"):
            kept = os.path.join(self.keep, name)
            os.makedirs(kept, exist_ok=True)
            shutil.copy(os.path.join(work, "log"), kept)
            with open(os.path.join(kept, "result.json"), "w", encoding="utf-8") as handle:
                json.dump(result, handle, indent=1)
        shutil.rmtree(work, ignore_errors=True)
        return result


def compare(reference, result, name):
    """Problems of RESULT against the reference end state."""
    if result.get("error"):
        return ["%s: %s" % (name, result["error"])]
    problems = ["%s: %s" % (name, p) for p in result.get("problems") or []]
    problems += ["%s: end state differs: %s" % (name, d) for d in state_diff(reference["state"], result["state"])]
    if result["fixture"] != reference["fixture"]:
        problems.append("%s: the fixture differs from the reference's" % name)
    return problems


class Queue(object):
    """The cases for WORKERS threads: FRONT first, then for each of SERIES (kill, reboot) its points one N at a time
    until a run with N is no longer killed (two at a time, so at most one more is run than needed), then BACK."""

    def __init__(self, front, series, back):
        self.front = list(front)
        self.back = list(back)
        self.series = list(series)
        self.next = dict((kind, 1) for kind in self.series)
        self.ends = dict((kind, None) for kind in self.series)
        self.lock = threading.Lock()

    @property
    def end(self):
        return self.ends.get("kill")

    def take(self):
        with self.lock:
            if self.front:
                return self.front.pop(0)
            for kind in self.series:
                if self.ends[kind] is None and self.next[kind] <= MAX_KILL_AT:
                    n = self.next[kind]
                    self.next[kind] += 1
                    return {"name": "%s-%d" % (kind, n), "case": kind, "policy": "both", "n": n}
            return self.back.pop(0) if self.back else None

    def finished_at(self, n, kind="kill"):
        with self.lock:
            self.ends[kind] = n if self.ends[kind] is None else min(self.ends[kind], n)


def run_all(driver, queue, jobs):
    """Every case of QUEUE on JOBS workers; {name: result}."""
    results = {}

    def worker():
        while True:
            spec = queue.take()
            if spec is None:
                return
            result = driver.case(spec)
            results[spec["name"]] = result
            if spec["case"] in ("kill", "reboot") and not result.get("error") and not result["first"]["killed"]:
                # persist.py's cases name their kind (adopt, remove); these name the series by their case.
                queue.finished_at(spec["n"], spec.get("kind") or spec["case"])

    threads = [threading.Thread(target=worker, daemon=True) for _number in range(jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def report_kill_points(results, reference, end):
    """The kill points' table. Returns problems."""
    problems = []
    if end is None:
        return ["kill points: no run with %s=N (N up to %d) finished" % (KILL_ENV, MAX_KILL_AT)]
    if end - 1 < MIN_KILL_POINTS:
        problems.append("kill points: only %d journal writes, so only %d kill points (at least %d expected)"
                        % (end - 1, end - 1, MIN_KILL_POINTS))
    print("\nKill points: a run of the policy (%s, ~300 entries, migrate; %s, mount) killed just before its "
          "journal write N,\nthen the next run. %d journal writes in an uninterrupted run (N=%d was not killed)."
          % (DATA, PLAIN, end - 1, end))
    print("%4s  %-28s %-13s %-34s %-7s %s" % ("N", "killed after (journal)", "mounted then", "the next run recovered",
                                              "2nd run", "verdict"))
    for n in range(1, end + 1):
        result = results["kill-%d" % n]
        found = compare(reference, result, "kill point %d" % n)
        problems += found
        verdict = "pass" if not found else "FAIL"
        if result.get("error"):
            print("%4d  ERROR %s" % (n, result["error"][:200]))
        elif n == end:
            print("%4d  %-28s %-13s %-34s %-7s %s" % (n, "(not killed: the whole run)", "-", "-", "-", verdict))
        else:
            hidden, second = result["hidden"], result["second"]
            print("%4d  %-28s %-13s %-34s %-7s %s" % (
                n, hidden["killed_after"], ",".join(os.path.basename(p) for p in hidden["covered"]) or "nothing",
                ", ".join(second["recovered"]) or "nothing", "ok" if second["ok"] else "FAILED", verdict))
            if not second["ok"]:
                problems.append("kill point %d: the next run failed: %s" % (n, second["msg"] or second))
    return problems


def report_reboot_points(results, reference, end):
    """The reboot points' table. Returns (problems, the number of points run)."""
    if end is None:
        return ["reboot points: no run with %s=N (N up to %d) finished" % (KILL_ENV, MAX_KILL_AT)], 0
    problems = []
    if end - 1 < MIN_KILL_POINTS:
        problems.append("reboot points: only %d journal writes, so only %d points (at least %d expected)"
                        % (end - 1, end - 1, MIN_KILL_POINTS))
    print("\nReboot points: a run of the policy (%s, migrate; %s, mount) killed just before its journal write N (at "
          "N=%d not killed),\nthen a power cut (its mounts and /run gone, a new boot id), a boot without systemd "
          "(mount what /etc/fstab lists), and the next run." % (DATA, PLAIN, end))
    print("%4s  %-24s %-5s %-26s %-34s %-20s %s" % ("N", "killed after (journal)", "taken", "mounted by the boot",
                                                    "the next run recovered", "then did", "verdict"))
    for n in range(1, end + 1):
        result = results["reboot-%d" % n]
        found = compare(reference, result, "reboot point %d" % n)
        # A point that hides data finds every file missing: the first few say enough.
        problems += found[:8] + (["reboot point %d: and %d more" % (n, len(found) - 8)] if len(found) > 8 else [])
        if result.get("error"):
            print("%4d  ERROR %s" % (n, result["error"][:200]))
            continue
        booted = ",".join("%s (%s)" % (os.path.basename(path), what) for path, what in
                          sorted(result["boot"]["covered"].items())) or "nothing"
        second = result["second"]
        recovered = ", ".join(r.replace("plan: ", "") for r in second["recovered"]) or "nothing"
        if second["boots"]:
            recovered += " (%s boot)" % "/".join(second["boots"])
        print("%4d  %-24s %-5d %-26s %-34s %-20s %s" % (
            n, result["killed_after"][:24], len(result["taken"]), booted[:26], recovered[:34],
            (", ".join(second["did"]) or "nothing") if second["ok"] else "FAILED", "pass" if not found else "FAIL"))
    print("Reboot points run: %d." % end)
    return problems, end


def report_cp_kill(result, reference):
    found = compare(reference, result, "kill during cp")
    if not result.get("error"):
        print("\nKill during the copy (%d files): module and cp killed (cp still running: %s), journal %d lines, "
              "mounted then: %s; the next run %s, recovered: %s; %s"
              % (FIXTURES["big"], result["cp_running_at_kill"], result["hidden"]["journal_lines"],
                 ",".join(result["hidden"]["covered"]) or "nothing", "succeeded" if result["second"]["ok"] else
                 "FAILED: %s" % result["second"]["msg"], ", ".join(result["second"]["recovered"]) or "nothing",
                 "pass" if not found else "FAIL"))
        if not result["second"]["ok"]:
            found.append("kill during cp: the next run failed: %s" % result["second"]["msg"])
    return found


def run_zram(driver):
    """The zram cases, one at a time (the devices are the kernel's: a case counts the ones it made by what is new):
    per policy a reference run, then a run killed before each journal write N until one is not killed; then the
    failing run. {name: result}, and {policy: the first N that was not killed}."""
    results, ends = {}, {}
    for policy in ("zram-swap", "zram-fs"):
        results["zram-reference-" + policy] = driver.case({"name": "zram-reference-" + policy, "case": "zram-reference",
                                                           "policy": policy})
        for n in range(1, MAX_KILL_AT + 1):
            name = "zram-kill-%s-%d" % (policy, n)
            result = results[name] = driver.case({"name": name, "case": "zram-kill", "policy": policy, "n": n})
            if result.get("error") or not result["first"]["killed"]:
                ends[policy] = n
                break
    results["zram-fail"] = driver.case({"name": "zram-fail", "case": "zram-fail", "policy": "zram-fail"})
    return results, ends


def report_zram(results, ends):
    problems = []
    total = 0
    for policy in ("zram-swap", "zram-fs"):
        reference = results["zram-reference-" + policy]
        if reference.get("error") or reference.get("problems"):
            problems.append("%s: the reference run failed: %s" % (policy, reference.get("error") or reference["problems"]))
            continue
        end = ends.get(policy)
        if end is None:
            problems.append("%s: no run with %s=N (N up to %d) finished" % (policy, KILL_ENV, MAX_KILL_AT))
            continue
        total += end - 1
        entries = ", ".join("%s %s" % (entry["name"], entry["use"]) for entry in ZRAM_POLICIES[policy])
        print("\nzram kill points, %s (%s): a run killed just before its journal write N, then the next run. %d "
              "journal writes in an uninterrupted run." % (policy, entries, end - 1))
        print("%4s  %-34s %-8s %-40s %-7s %s" % ("N", "killed after (journal)", "devices", "the next run recovered",
                                                 "2nd run", "verdict"))
        for n in range(1, end + 1):
            result = results["zram-kill-%s-%d" % (policy, n)]
            found = ["zram kill point %s %d: %s" % (policy, n, p) for p in (
                [result["error"]] if result.get("error") else (result.get("problems") or []) + [
                    "end state differs: %s" % d for d in state_diff(reference["state"], result["state"])])]
            problems += found
            if result.get("error"):
                print("%4d  ERROR %s" % (n, result["error"][:200]))
            elif n == end:
                print("%4d  %-34s %-8s %-40s %-7s %s" % (n, "(not killed: the whole run)", "-", "-", "-",
                                                         "pass" if not found else "FAIL"))
            else:
                print("%4d  %-34s %-8s %-40s %-7s %s" % (
                    n, result["hidden"]["killed_after"][:34], result["hidden"]["new_devices"],
                    (", ".join(result["second"]["recovered"]) or "nothing")[:40],
                    "ok" if result["second"]["ok"] else "FAILED", "pass" if not found else "FAIL"))
    fail = results["zram-fail"]
    if fail.get("error"):
        problems.append("zram device 3 of 4 refused: %s" % fail["error"])
    else:
        print("\nzram, device 3 of 4 refused by the kernel: the run %s: %s\nDevices it made, all removed again: %s; "
              "problems: %s" % ("failed" if not fail["run"]["ok"] else "SUCCEEDED", fail["run"]["msg"][:900],
                                "yes" if not fail["problems"] else "no", fail["problems"] or "none"))
        problems += ["zram device 3 of 4 refused: %s" % p for p in fail["problems"]]
    removed = sum(len(result.get("removed") or []) for result in results.values())
    print("\nzram: %d kill points; %d zram devices made by the cases, every one removed again." % (total, removed))
    return problems, total


def concurrency_specs(tries):
    # The 5-run tries first: they take longest. Half the tries give up at once when the lock is taken, half wait.
    return [{"name": "concurrent-%dx-%d" % (runs, attempt), "case": "concurrency", "policy": "data", "runs": runs,
             "lock_timeout": 0 if attempt % 2 else 30} for runs in (5, 2) for attempt in range(tries)]


def report_concurrency(specs, results, reference, tries):
    problems = []
    print("\nConcurrency: N runs of one policy (a migrate of %s) started at once, %d tries each, each try in a fresh "
          "namespace\n(lock_timeout 0 in odd tries, 30 in even ones); the most mounts ever seen at once on the path: "
          "%d." % (DATA, tries, max([results[spec["name"]].get("most_mounts_at_once") or 0 for spec in specs] or [0])))
    print("%-5s %-13s %s" % ("runs", "lock_timeout", "outcomes of the runs, over all tries"))
    kinds = {}
    for runs in (2, 5):
        for timeout in (0, 30):
            counts = {}
            for spec in specs:
                result = results[spec["name"]]
                if spec["runs"] != runs or spec["lock_timeout"] != timeout or result.get("error"):
                    continue
                for run in result["runs"]:
                    counts[run["kind"]] = counts.get(run["kind"], 0) + 1
                    kinds[run["kind"]] = kinds.get(run["kind"], 0) + 1
            print("%-5d %-13d %s" % (runs, timeout, ", ".join("%s %d" % item for item in sorted(counts.items()))))
    for spec in specs:
        name, result = spec["name"], results[spec["name"]]
        problems += compare(reference, result, name)
        if result.get("error"):
            continue
        if result["most_mounts_at_once"] > 1:
            problems.append("%s: %d mounts at %s at once" % (name, result["most_mounts_at_once"], DATA))
        winners = [run for run in result["runs"] if run["kind"] == "succeeded, changed"]
        if len(winners) != 1:
            problems.append("%s: %d runs made the mount, not 1" % (name, len(winners)))
        for run in result["runs"]:
            if run["kind"] == "UNEXPECTED":
                problems.append("%s: a run failed without naming the lock's holder or the change: %s"
                                % (name, run["msg"]))
    if not kinds.get("lock held") or not (kinds.get("stale plan") or kinds.get("stale plan, after waiting")):
        problems.append("concurrency: the tries did not show both refusals (lock held and stale plan): %s" % kinds)
    return problems


def report_odd_paths(result):
    if result.get("error"):
        return ["odd paths: %s" % result["error"]]
    print("\nOdd paths (%s): first run %s, second run %s, state absent %s; %s"
          % (", ".join(repr(path) for path in ODD_PATHS), "changed" if result["first"]["changed"] else "unchanged",
             ("changed" if result["second"]["changed"] else "unchanged") if "second" in result else "-",
             ("ok" if result["absent"]["ok"] else "FAILED") if "absent" in result else "-",
             "pass" if not result["problems"] else "FAIL"))
    return ["odd paths: %s" % problem for problem in result["problems"]]


def report_limits(result):
    if result.get("error"):
        return ["limits: %s" % result["error"]]
    one_less = result.get("one_less") or {}
    print("\nLimits: %d files with a %d-byte xattr each; the plan asked for nr_inodes %s (refusing 30); a cp -a into "
          "one less: exit %s, %s differences (%s); with %s: migrated, %s inodes used of %s.\ntmpfs quotas: %s"
          % (XATTR_FILES, XATTR_VALUE, result.get("needed"), one_less.get("rc"), one_less.get("differences"),
             "; ".join(one_less.get("first") or []) or one_less.get("stderr"),
             result.get("needed"), (result.get("inodes_after") or {}).get("used"),
             (result.get("inodes_after") or {}).get("total"), result.get("quota")))
    return ["limits: %s" % p for p in result.get("problems") or []]


def report_full_disk(result, reference):
    if result.get("error"):
        return ["full disk: %s" % result["error"]]
    print("\nFull /etc (%d blocks free after the fill): the run %s: %s\nJournal left by the failed run: %s. With "
          "room again, the next run %s (recovered: %s)."
          % (result["free_blocks_after_fill"], "succeeded" if result["full"]["ok"] else "failed",
             result["full"]["msg"], result["journal_after_failure"], "succeeded" if result["run"]["ok"] else "failed",
             ", ".join(result["run"]["recovered"]) or "nothing"))
    return compare(reference, result, "full disk")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--inside")
    parser.add_argument("--work")
    parser.add_argument("--keep", default=os.path.join(REPO, "build", "transaction"))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--tries", type=int, default=20)
    parser.add_argument("--only", default="kill,reboot,cp-kill,concurrency,full-disk,odd-paths,limits,read-only,"
                                          "remounted,reboot-undo,zram,zram-root,torn-journal")
    args = parser.parse_args()
    if args.inside:
        inside(json.loads(args.inside))
        return 0
    only = args.only.split(",")
    began = time.monotonic()
    shutil.rmtree(args.keep, ignore_errors=True)
    driver = Driver(args.work, args.keep)
    # Each reference run with the parts compared with it.
    references = [spec for spec, parts in (
        ({"name": "reference-big", "case": "reference", "policy": "data", "fixture": "big"}, {"cp-kill"}),
        ({"name": "reference-both", "case": "reference", "policy": "both", "fixture": "small"},
         {"kill", "reboot", "full-disk", "torn-journal"}),
        ({"name": "reference-data", "case": "reference", "policy": "data", "fixture": "small"}, {"concurrency"}))
        if parts & set(only)]
    front = references + [spec for spec in ({"name": "cp-kill", "case": "cp-kill", "policy": "data"},
                                            {"name": "full-disk", "case": "full-disk", "policy": "both"},
                                            {"name": "odd-paths", "case": "odd-paths", "policy": "odd"},
                                            {"name": "limits", "case": "limits", "policy": "data"},
                                            {"name": "read-only", "case": "read-only", "policy": "read-only"},
                                            {"name": "remounted", "case": "remounted", "policy": "plain"},
                                            {"name": "reboot-undo", "case": "reboot-undo", "policy": "plain"})
                          if spec["name"] in only]
    # The recovery after a torn line killed at its 2nd write (nothing after its first line) and at its 3rd.
    torn = [{"name": "torn-journal-%d" % k, "case": "torn-journal", "policy": "both", "k": k} for k in (2, 3)
            if "torn-journal" in only]
    front += torn
    specs = concurrency_specs(args.tries) if "concurrency" in only else []
    queue = Queue(front, [kind for kind in ("kill", "reboot") if kind in only], specs)
    results = run_all(driver, queue, args.jobs)
    problems = []
    for spec in references:
        reference = results[spec["name"]]
        if reference.get("error") or reference.get("problems"):
            print("transaction: the reference run %s failed: %s" % (spec["name"], reference.get("error")
                                                                    or reference["problems"]))
            return 2
        state = reference["state"]
        if state["journal"] or state["journal_blobs"] or state["staging_mounts"] or \
                any(len(m) != 1 for m in state["mounts"].values()):
            problems.append("%s: a journal or its blobs, a staging mount, or not one mount per path: %s"
                            % (spec["name"], state))
    if "kill" in only:
        problems += report_kill_points(results, results["reference-both"], queue.end)
    reboot_points = 0
    if "reboot" in only:
        found, reboot_points = report_reboot_points(results, results["reference-both"], queue.ends["reboot"])
        problems += found
    if "cp-kill" in only:
        problems += report_cp_kill(results["cp-kill"], results["reference-big"])
    if specs:
        problems += report_concurrency(specs, results, results["reference-data"], args.tries)
    if "full-disk" in only:
        problems += report_full_disk(results["full-disk"], results["reference-both"])
    if "odd-paths" in only:
        problems += report_odd_paths(results["odd-paths"])
    for spec in torn:
        found = compare(results["reference-both"], results[spec["name"]], spec["name"])
        problems += found
        result = results[spec["name"]]
        print("%s: killed after %s, torn by 7 bytes; recovery %s; the next run %s: %s"
              % (spec["name"], result.get("killed_after"), result.get("recovery"), result.get("last", {}).get("ok"),
                 "pass" if not found else "FAIL"))
    if "limits" in only:
        problems += report_limits(results["limits"])
    for name in ("read-only", "remounted", "reboot-undo"):
        if name in only:
            problems += report_case(name, results[name])
    if "zram-root" in only:
        # Alone: the zram devices are the kernel's, and each case counts the ones it made.
        results["zram-root"] = driver.case({"name": "zram-root", "case": "zram-root", "policy": "zram-keep"})
        problems += report_case("zram-root", results["zram-root"])
    zram_points = 0
    if "zram" in only:
        zram_results, ends = run_zram(driver)
        found, zram_points = report_zram(zram_results, ends)
        problems += found
        results.update(zram_results)
    print()
    for problem in problems:
        print("FAIL: %s" % problem)
    print("transaction: %d cases, %s kill points, %d reboot points and %d of zram; %s; %.0f s of which the cases "
          "%s s" % (len(results), queue.end - 1 if queue.end else "no", reboot_points, zram_points,
                    "%d problems" % len(problems) if problems else "all properties held", time.monotonic() - began,
                    round(sum(result["seconds"] for result in results.values()))))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
