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
- concurrency: 2 and 5 runs of one policy started at once: never two mounts on one path (a watcher reads the mount
  table all along), the reference end state, and every run succeeded or failed naming the lock's holder or the
  change since its plan.
- full disk: /etc on a full tmpfs: the run fails saying the file is unchanged, /etc/fstab is as it was, nothing
  stays mounted, no record; with room again, the next run leaves the reference end state.

Usage: transaction.py --work DIR [--keep DIR] [--jobs N] [--tries N] [--only kill,cp-kill,concurrency,full-disk].
Prints a table per part and exits 1 when a property failed, 2 when the test could not run; each failed case's
log and result go to --keep (build/transaction).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

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
POLICIES = {"both": [MIGRATE_ENTRY, PLAIN_ENTRY], "data": [MIGRATE_ENTRY]}
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
    for directory in ("/etc", "/var/lib", "/run") if not etc_on_tmpfs else ("/var/lib", "/run"):
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
            "recovered": ["%s: %s %s" % (who, os.path.basename(r.get("path") or "?"), r.get("way"))
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


CASES = {"reference": case_reference, "kill": case_kill, "cp-kill": case_cp_kill, "concurrency": case_concurrency,
         "full-disk": case_full_disk}


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
    """The cases for WORKERS threads: FRONT first, then the kill points one N at a time until a run with N is no
    longer killed (two at a time, so at most one more is run than needed), then BACK."""

    def __init__(self, front, kill, back):
        self.front = list(front)
        self.back = list(back)
        self.kill = kill
        self.next = 1
        self.end = None
        self.lock = threading.Lock()

    def take(self):
        with self.lock:
            if self.front:
                return self.front.pop(0)
            if self.kill and self.end is None and self.next <= MAX_KILL_AT:
                self.next += 1
                return {"name": "kill-%d" % (self.next - 1), "case": "kill", "policy": "both", "n": self.next - 1}
            return self.back.pop(0) if self.back else None

    def finished_at(self, n, _kind=None):
        with self.lock:
            self.end = n if self.end is None else min(self.end, n)


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
            if spec["case"] == "kill" and not result.get("error") and not result["first"]["killed"]:
                queue.finished_at(spec["n"], spec.get("kind"))

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
    parser.add_argument("--only", default="kill,cp-kill,concurrency,full-disk")
    args = parser.parse_args()
    if args.inside:
        inside(json.loads(args.inside))
        return 0
    only = args.only.split(",")
    began = time.monotonic()
    shutil.rmtree(args.keep, ignore_errors=True)
    driver = Driver(args.work, args.keep)
    references = [{"name": "reference-big", "case": "reference", "policy": "data", "fixture": "big"},
                  {"name": "reference-both", "case": "reference", "policy": "both", "fixture": "small"},
                  {"name": "reference-data", "case": "reference", "policy": "data", "fixture": "small"}]
    front = references + [spec for spec in ({"name": "cp-kill", "case": "cp-kill", "policy": "data"},
                                            {"name": "full-disk", "case": "full-disk", "policy": "both"})
                          if spec["name"] in only]
    specs = concurrency_specs(args.tries) if "concurrency" in only else []
    queue = Queue(front, "kill" in only, specs)
    results = run_all(driver, queue, args.jobs)
    problems = []
    for spec in references:
        reference = results[spec["name"]]
        if reference.get("error") or reference.get("problems"):
            print("transaction: the reference run %s failed: %s" % (spec["name"], reference.get("error")
                                                                    or reference["problems"]))
            return 2
        state = reference["state"]
        if state["journal"] or state["staging_mounts"] or any(len(m) != 1 for m in state["mounts"].values()):
            problems.append("%s: a journal, a staging mount, or not one mount per path: %s" % (spec["name"], state))
    if "kill" in only:
        problems += report_kill_points(results, results["reference-both"], queue.end)
    if "cp-kill" in only:
        problems += report_cp_kill(results["cp-kill"], results["reference-big"])
    if specs:
        problems += report_concurrency(specs, results, results["reference-data"], args.tries)
    if "full-disk" in only:
        problems += report_full_disk(results["full-disk"], results["reference-both"])
    print()
    for problem in problems:
        print("FAIL: %s" % problem)
    print("transaction: %d cases, %s kill points; %s; %.0f s of which the cases %s s"
          % (len(results), queue.end - 1 if queue.end else "no", "%d problems" % len(problems) if problems
             else "all properties held", time.monotonic() - began,
             round(sum(result["seconds"] for result in results.values()))))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
