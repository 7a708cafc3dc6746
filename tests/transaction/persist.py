# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Kill points of a persisted mount (run by scripts/test/transaction_persist.sh): its adoption, and its removal.

persist keeps a RAM mount in a backing directory on disk through systemd units, so these cases need systemd as
PID 1 and mounts that systemd sees: each case runs in a fresh systemd container of the lab's Debian 12 image
(a container starts in about a second, which is less than undoing a case). The container sees, read-only, a stage
of this checkout: the collection's plugins and persist helper, ansible-core's `ansible` package, and these test
files. A case sets up the fixture (transaction.py's ~300 entries with content, a hard link pair, a symlink, a sparse
file, user.x xattrs, the root 4242:4343 mode 2750, at /srv/tx/data on the container's disk) and a small service of
its own (txdata.service, its working directory in the data) that persist.services names. A run is what the entry
role does: ramdisk_plan (which first finishes or undoes what a dead run left), then ramdisk_apply with the plan's
tmpfs entries (ramdisk_apply installs the persist helper from its module_utils), each a module process as Ansible
runs it.

- adoption: the fixture migrated into a tmpfs kept in /var/lib/ramdisk-backing/txdata (the services stopped, the
  mount, the helper, conf and units, the backing's first copy and its check, persist enabled and started, the timer,
  the record, the services started). Killed (RAMDISK_PROVISION_TEST_KILL_AT=N) just before each of its journal
  writes, N = 1 up to the first N that no longer kills it. Right after the kill: a mount over the directory is one
  the journal names and holds all the data, the disk copy is whole, the backing holds nothing of ours or one
  complete copy equal to the data. The next run must succeed and leave what one uninterrupted run leaves (the mount
  and its options, /etc/fstab, the record, the units enabled and active, the timer active, the backing's current copy
  equal to the mount, the disk copy untouched, the service running, no journal).
- removal: the same persisted mount, then files changed in the RAM mount only (a file added, one rewritten, one
  removed), then state absent (timer and persist stopped, which writes the mount back, the unmount, the backing's
  copy returned into the directory on disk, the backing cleared, the units and helper gone), killed at each of
  its journal writes. Right after the kill: the changed data is whole in the mount, the backing's current copy or
  the directory on disk; the disk holds the old data or the changed data, never a mix; a mount there holds the
  changed data. The next run must leave what one uninterrupted removal leaves (the changed data in the directory on
  disk, no mount, no backing, no units, conf, helper, record or fstab line, the service running).
- power cuts (adopt-cut, live-cut, remove-cut; not in the default --only): the adoption above, a live tmpfs at
  /srv/tx/live holding the fixture that gains persist, and the removal above, each killed just before its journal
  write N (past the last: the whole run), then a power cut (`docker kill` of the container's PID 1: no shutdown, no
  stop-time sync, its mounts and /run gone), its boot (fstab mounted, enabled persist units restoring) and a new boot
  id bound over /proc/sys/kernel/random/boot_id. At the cut a complete copy was on disk (the directory, or the
  backing's current; a live mount before its first copy has none, as before the run); after the boot the next run
  succeeds and the mount, the backing's current copy (adopt, live) or the directory on disk (remove) hold that data:
  no empty RAM mount taken for the first copy, no only copy undone. --points N,M runs only those N.

- handover: the persisted mount made, then one run that releases it and sets up another persisted mount: it
  succeeds, the helper stays, and the new mount's sync writes its backing.

Usage: persist.py --work DIR [--keep DIR] [--jobs N] [--image IMAGE] [--tag TAG]
       [--only adopt,remove,handover,adopt-cut,live-cut,remove-cut] [--points N,...]
(containers are named txpersist-TAG-*). Prints a table per kind and exits 1 when a property failed, 2 when the test
could not run; each failed case's log and result go to --keep (build/transaction-persist).
"""

from __future__ import annotations

import argparse
import compileall
import hashlib
import json
import os
import pickle
import resource
import shutil
import subprocess
import sys
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# pylint: disable=wrong-import-position
import transaction as tx  # noqa: E402
from transaction import CaseError, KILL_ENV, paths  # noqa: E402
from ansible_collections.ramdisk.provision.plugins.module_utils._persist import BACKING_NAMES_RE, unit_names  # noqa: E402
from ansible_collections.ramdisk.provision.plugins.module_utils._tree import compare_trees, tree_digest  # noqa: E402
from ansible_collections.ramdisk.provision.plugins.module_utils._mount_steps import token  # noqa: E402
from ansible_collections.ramdisk.provision.plugins.module_utils._plan_core import PERSIST_KEEP  # noqa: E402

DATA = tx.DATA
BACKING = "/var/lib/ramdisk-backing/txdata"
SERVICE = "txdata.service"
# A timer that never fires during a case: the syncs are the run's own.
ENTRY = dict(tx.MIGRATE_ENTRY, persist={"backing": BACKING, "interval": "1h", "services": [SERVICE]})
TOKEN = token(DATA)
IMAGE = "ramdisk-lab/debian:12"
# Where the container sees the stage (read-only), and where the case works inside it.
STAGE = "/opt/ramdisk-transaction"
WORK = "/var/tmp/ramdisk-transaction-persist"
CONTAINER_PREFIX = "txpersist-"
MIN_KILL_POINTS = 20
MAX_KILL_AT = 200
KINDS = ("adopt", "remove")
# One run that releases the persisted mount at DATA and sets up another at OTHER: the helper both need stays.
OTHER = tx.TOP + "/other"
OTHER_ENTRY = {"path": OTHER, "size": "8M", "persist": {"backing": "/var/lib/ramdisk-backing/txother",
                                                        "interval": "1h"}}
# Power cuts (a kill of the container's PID 1, then its boot with a new boot id) after each journal write of: the
# migrate with persist (adopt), a live tmpfs that gains persist (live), the removal with return (remove).
CUT_KINDS = ("adopt-cut", "live-cut", "remove-cut")
LIVE = tx.TOP + "/live"
LIVE_BACKING = "/var/lib/ramdisk-backing/txlive"
LIVE_ENTRY = {"path": LIVE, "size": "64M", "owner": tx.OWNER[0], "group": tx.GROUP[0], "mode": "2750"}
LIVE_PERSISTED = dict(LIVE_ENTRY, persist={"backing": LIVE_BACKING, "interval": "1h"})
# What the first part of a power-cut case leaves for the part after the boot, on the container's disk.
CUT_STATE = "/var/lib/ramdisk-transaction-cut.pickle"


# In the container ------------------------------------------------------------------------------------------

class Runner(tx.Runner):
    """transaction.py's runner with the container's python3 and the stage, and a persisted entry."""

    python = "/usr/bin/python3"
    pythonpath = "%s/.cache/collections:%s/lib" % (STAGE, STAGE)
    # The entry planned (tests/adversary/local_user.py and powercut_matrix.py plan others in this container).
    entry = ENTRY

    def __init__(self, work, purposes, defaults):  # pylint: disable=super-init-not-called
        self.work = work
        self.purposes, self.defaults = purposes, defaults
        self.count = 0
        self.lock = threading.Lock()
        self.times = []

    def plan(self, policy, entry=None):
        """The plan of ENTRY (the module's, unless given) with state POLICY (present or absent)."""
        done = self._finish(self._start("ramdisk_plan", {
            "host": "transaction-test", "sources": [{"name": "ramdisk_mounts", "value": [entry or self.entry]}],
            "purposes": self.purposes, "defaults": self.defaults, "state": policy}, None))
        result = done["result"] or {}
        if done["rc"] != 0 or result.get("failed") or result.get("errors"):
            raise CaseError("ramdisk_plan (state %s) failed: %s" % (policy, result.get("msg") or result.get("errors")
                                                                    or done))
        return result["tmpfs"] + result["ramfs"], result.get("recovered") or []

    def apply_start(self, entries, kill_at=None, lock_timeout=None):
        args = {"host": "transaction-test", "mounts": entries}
        return self._start("ramdisk_apply", args, {KILL_ENV: str(kill_at)} if kill_at else None)

    def run(self, policy, kill_at=None, lock_timeout=None, entry=None):
        """One run with state POLICY (present or absent): plan, then apply."""
        began = time.monotonic()
        entries, recovered = self.plan(policy, entry)
        planned = time.monotonic()
        done = self._finish(self.apply_start(entries, kill_at))
        killed = "@%s" % kill_at if kill_at else ""
        self.times.append("%s%s %.1f+%.1f" % (policy, killed, planned - began, time.monotonic() - planned))
        result = done["result"] or {}
        done["ok"] = done["rc"] == 0 and bool(done["result"]) and not result.get("failed")
        done["msg"] = result.get("msg") or ""
        done["plan_recovered"] = recovered
        return done


def systemctl_show(unit, *props):
    out = subprocess.run(["systemctl", "show", unit] + ["-p%s" % p for p in props], check=False,
                         capture_output=True, text=True).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def file_hash(path):
    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()[:16]
    except OSError:
        return None


def listing(directory):
    return sorted(os.listdir(directory)) if os.path.isdir(directory) else None


def setup():
    """The fixture, its owner and group, and the service that uses the data, running. Returns the fixture's digests."""
    with open("/etc/passwd", "a", encoding="utf-8") as handle:
        handle.write("%s:x:%d:%d::/nonexistent:/usr/sbin/nologin\n" % (tx.OWNER[0], tx.OWNER[1], tx.GROUP[1]))
    with open("/etc/group", "a", encoding="utf-8") as handle:
        handle.write("%s:x:%d:\n" % tx.GROUP)
    fixture = tx.make_fixture(DATA, tx.FIXTURES["small"])
    with open("/etc/systemd/system/" + SERVICE, "w", encoding="utf-8") as handle:
        handle.write("[Unit]\nDescription=Uses the data at %s (the persist kill-point test)\n\n[Service]\n"
                     "WorkingDirectory=%s\nExecStart=/bin/sleep infinity\n" % (DATA, DATA))
    tx.sh("systemctl", "daemon-reload")
    tx.sh("systemctl", "start", SERVICE)
    return fixture


def change_in_ram():
    """What a user writes into the persisted mount after it was made (fixed times, so every case has the same)."""
    stamp = 1710000000 * 10 ** 9
    with open(os.path.join(DATA, "written-in-ram"), "wb") as handle:
        handle.write(b"written into the RAM mount after it was persisted\n" * 50)
    with open(os.path.join(DATA, "f0002"), "wb") as handle:
        handle.write(b"rewritten in RAM\n")
    os.unlink(os.path.join(DATA, "f0003"))
    for name in ("written-in-ram", "f0002", "."):
        os.utime(os.path.join(DATA, name), ns=(stamp, stamp))
    digests, problems = tree_digest(DATA)
    if problems:
        raise CaseError("the changed data could not be read: %s" % problems)
    return digests


def backing_copy():
    """(names of the backing with each snapshot's stamp as *, the current copy's digests or None)."""
    if not os.path.isdir(BACKING):
        return None, None
    # .persist-delta: the state of the helper's syncs in place, there once a second sync ran (a rerun may sync again).
    names = sorted(name for name in os.listdir(BACKING) if name != ".persist-delta")
    shown = sorted(name.split("-", 1)[0] + "-*" if "-" in name and BACKING_NAMES_RE.match(name) else name
                   for name in names)
    current = os.path.join(BACKING, "current")
    if not os.path.isdir(current):
        return shown, None
    digests, problems = tree_digest(current + "/.")
    if problems:
        raise CaseError("the backing's current copy could not be read: %s" % problems)
    return shown, digests


def persist_state():
    """What persist leaves on the host, to compare between cases."""
    names = unit_names(TOKEN)
    state = {"units": {}, "unit_files": {}}
    for kind, unit in sorted(names.items()):
        shown = systemctl_show(unit, "ActiveState", "UnitFileState")
        state["units"][kind] = "%s %s" % (shown.get("ActiveState"), shown.get("UnitFileState") or "-")
        state["unit_files"][kind] = file_hash(os.path.join(paths.UNIT_DIR, unit))
    state["service"] = systemctl_show(SERVICE, "ActiveState", "SubState")
    state["service_requires"] = listing("/etc/systemd/system/%s.requires" % SERVICE)
    state["wants"] = sorted(name for name in listing("/etc/systemd/system/multi-user.target.wants") or []
                            if name.startswith("ramdisk-"))
    state["conf"] = file_hash(paths.persist_conf_file(TOKEN))
    state["helper"] = file_hash(paths.PERSIST_HELPER)
    state["persist_run"] = listing(paths.PERSIST_STATE_DIR)
    state["persist_status"] = listing(paths.PERSIST_STATUS_DIR)
    names, current = backing_copy()
    # With persist.keep (2 by default) a run that syncs again after a kill keeps the copy before: how many copies
    # there are may differ from an uninterrupted run's, within keep; which names there are may not.
    state["backing_names"] = sorted(set(names)) if names is not None else None
    state["backing_copies_within_keep"] = (names or []).count("snap-*") <= PERSIST_KEEP
    state["backing_current"] = tx.digest_hash(tx.without_root_mtime(current)) if current else None
    return state


def state_now():
    state = tx.end_state([DATA])
    state["persist"] = persist_state()
    return state


def whole(expected, path, what, name):
    """Problems of the tree at PATH against EXPECTED (digests)."""
    found, problems = tree_digest(path)
    return ["%s: %s" % (what, s) for s in problems + compare_trees(expected, found, name, what, root_mtime=True)]


def same_tree(expected, digests, root_mtime=True):
    return digests is not None and not compare_trees(expected, digests, "a", "b", root_mtime=root_mtime)


def disk_now(work):
    digests, problems = tx.disk_digest(work, DATA)
    if problems:
        raise CaseError("the disk copy could not be read: %s" % problems)
    return digests


def after_kill(kind, fixture, changed, work):
    """Right after a kill: what is where, and the problems (data hidden, lost, or a copy half made)."""
    problems = []
    exists, named, lines = tx.journal_paths()
    whats = {(line.get("run"), line.get("txn")): line.get("what") for line in lines if line.get("t") == "txn"}
    mounted = tx.mounts_at(DATA)
    facts = {"journal_lines": len(lines), "killed_after": tx.describe_line(lines[-1] if lines else None, whats),
             "mounts": len(mounted)}
    data = fixture if kind == "adopt" else changed
    if len(mounted) > 1:
        problems.append("%d mounts at %s" % (len(mounted), DATA))
    in_mount = None
    if mounted:
        if kind == "adopt" and (not exists or DATA not in named):
            problems.append("%s is covered by a mount that no journal names (journal %s, naming %s)"
                            % (DATA, "there" if exists else "gone", named))
        in_mount, found = tree_digest(DATA)
        problems += ["what covers %s after the kill: %s" % (DATA, s) for s in found + compare_trees(
            data, in_mount, "the data", "mount", root_mtime=True)]
    disk = disk_now(work)
    if kind == "adopt":
        problems += ["the disk copy after the kill: %s" % s for s in compare_trees(fixture, disk, "fixture",
                                                                                   "disk copy", root_mtime=True)]
        facts["disk"] = "untouched"
    else:
        facts["disk"] = "old" if same_tree(fixture, disk) else "changed" if same_tree(changed, disk) else "MIXED"
        if facts["disk"] == "MIXED":
            problems.append("the directory on disk holds neither the old data nor the changed data: %s"
                            % " ".join(compare_trees(changed, disk, "the changed data", "disk")[:5]))
    names, current = backing_copy()
    ours = [name for name in names or [] if BACKING_NAMES_RE.match(name)]
    if not ours:
        facts["backing"] = "nothing"
    elif (sorted(set(ours)) == ["current", "snap-*"] and ours.count("current") == 1
          and ours.count("snap-*") <= PERSIST_KEEP and current is not None):
        facts["backing"] = "old copy" if same_tree(fixture, current) else "changed copy" \
            if same_tree(changed, current) else "BAD COPY"
        if facts["backing"] == "BAD COPY" or (kind == "adopt" and facts["backing"] != "old copy"):
            problems.append("the backing's current copy is not the data: %s"
                            % " ".join(compare_trees(data, current, "the data", "backing's copy")[:5]))
    else:
        facts["backing"] = "BAD: %s" % ",".join(names)
        problems.append("the backing holds %s, not nothing or complete copies (at most %d) with current on one"
                        % (names, PERSIST_KEEP))
    if kind == "remove" and not (same_tree(changed, in_mount) or same_tree(changed, current)
                                 or same_tree(changed, disk)):
        problems.append("the data changed in RAM is whole nowhere: not in a mount, the backing or the disk")
    facts["service"] = systemctl_show(SERVICE, "ActiveState")["ActiveState"]
    return facts, problems


def check_end(kind, fixture, changed, work, out):
    """The checks of every case's end, and its end state."""
    problems = []
    disk = disk_now(work)
    names, current = backing_copy()
    if kind == "adopt":
        problems += ["the disk copy: %s" % s
                     for s in compare_trees(fixture, disk, "fixture", "disk copy", root_mtime=True)]
        if tx.mounts_at(DATA):
            problems += whole(fixture, DATA, "the mount", "fixture")
            in_mount, _problems = tree_digest(DATA)
            problems += ["the backing's copy: %s" % s for s in compare_trees(
                in_mount, current or {}, "the mount", "the backing's copy")][:10]
        else:
            problems.append("%s is not mounted" % DATA)
    else:
        problems += ["the directory on disk: %s" % s
                     for s in compare_trees(changed, disk, "the data changed in RAM", "the disk", root_mtime=True)]
        if tx.mounts_at(DATA):
            problems.append("%s is still mounted" % DATA)
        if names is not None:
            problems.append("the backing %s is still there: %s" % (BACKING, names))
    out["state"] = state_now()
    out["problems"] = problems + out.get("problems", [])
    return out


def handover(runner):
    """DATA persisted by one run; the next run releases it and sets up OTHER persisted, in one apply: it succeeds, and
    OTHER's sync runs (the helper it needs is there), its backing taking the file written in it."""
    made = runner.run("present")
    if not made["ok"]:
        raise CaseError("the persisted mount could not be made: %s" % (made["msg"] or made))
    os.makedirs(OTHER)
    done = runner._finish(runner._start("ramdisk_plan", {
        "host": "transaction-test", "sources": [{"name": "ramdisk_mounts", "value": [dict(ENTRY, state="absent"),
                                                                                     OTHER_ENTRY]}],
        "purposes": runner.purposes, "defaults": runner.defaults}, None))
    plan = done["result"] or {}
    if done["rc"] != 0 or plan.get("failed") or plan.get("errors"):
        raise CaseError("ramdisk_plan failed: %s" % (plan.get("msg") or plan.get("errors") or done))
    applied = runner._finish(runner.apply_start(plan["tmpfs"] + plan["ramfs"]))
    result = applied["result"] or {}
    out = {"first": {"ok": applied["rc"] == 0 and not result.get("failed"), "msg": (result.get("msg") or "")[:800]},
           "problems": []}
    if not out["first"]["ok"]:
        out["problems"].append("the run that releases %s and adds %s failed: %s" % (DATA, OTHER, out["first"]["msg"]))
        return out
    if not os.path.exists(paths.PERSIST_HELPER):
        out["problems"].append("the helper %s is gone, which %s's units run" % (paths.PERSIST_HELPER, OTHER))
    with open(os.path.join(OTHER, "written-after"), "w", encoding="utf-8") as handle:
        handle.write("to be synced\n")
    sync = subprocess.run(["systemctl", "start", unit_names(token(OTHER))["sync"]], capture_output=True, text=True,
                          check=False)
    if sync.returncode != 0:
        out["problems"].append("the sync of %s failed: %s" % (OTHER, (sync.stderr or sync.stdout).strip()))
    elif not os.path.exists(os.path.join(OTHER_ENTRY["persist"]["backing"], "current", "written-after")):
        out["problems"].append("the backing of %s lacks the file written after the run" % OTHER)
    if os.path.ismount(DATA):
        out["problems"].append("%s is still mounted" % DATA)
    return out


# Power cuts -------------------------------------------------------------------------------------------------

def current_of(backing):
    """The digests of BACKING's current copy, or None."""
    current = os.path.join(backing, "current")
    if not os.path.isdir(current):
        return None
    digests, problems = tree_digest(current + "/.")
    return None if problems else digests


def cut_before(spec, runner):
    """The first part of a power-cut case: the mount as the kind needs it, then its run killed just before journal
    write N (or whole). Saves what is where at the cut for cut_after(), after the boot."""
    kind = spec["kind"]
    fixture = setup()
    saved = {"kind": kind, "fixture": fixture, "changed": None}
    if kind == "live-cut":
        if not runner.run("present", entry=LIVE_ENTRY)["ok"]:
            raise CaseError("the live tmpfs at %s could not be mounted" % LIVE)
        scratch = os.path.join(WORK, "live-fixture")
        shutil.rmtree(scratch, ignore_errors=True)
        tx.make_fixture(scratch, tx.FIXTURES["small"])
        tx.sh("cp", "-a", "--no-target-directory", scratch + "/.", LIVE)
        shutil.rmtree(scratch)
        saved["fixture"], problems = tree_digest(LIVE)
        if problems:
            raise CaseError("the live mount's data could not be read: %s" % problems)
        first = runner.run("present", kill_at=spec["n"], entry=LIVE_PERSISTED)
    elif kind == "remove-cut":
        if not runner.run("present")["ok"]:
            raise CaseError("the persisted mount could not be made")
        saved["changed"] = change_in_ram()
        first = runner.run("absent", kill_at=spec["n"])
    else:
        first = runner.run("present", kill_at=spec["n"])
    if not first["killed"] and not first["ok"]:
        raise CaseError("the run with %s=%s neither died nor succeeded: %s" % (KILL_ENV, spec["n"], first["msg"]))
    exists, named, lines = tx.journal_paths()
    whats = {(line.get("run"), line.get("txn")): line.get("what") for line in lines if line.get("t") == "txn"}
    saved["killed_after"] = tx.describe_line(lines[-1] if lines else None, whats) if first["killed"] else "-"
    saved["backing_at_cut"] = current_of(LIVE_BACKING if kind == "live-cut" else BACKING)
    saved["disk_at_cut"] = disk_now(WORK) if kind != "live-cut" else None
    with open(CUT_STATE, "wb") as handle:
        pickle.dump(saved, handle)
        handle.flush()
        os.fsync(handle.fileno())
    return {"first": tx.outcome(first)}


def named_as(digests, saved):
    if digests is None:
        return "none"
    for name in ("fixture", "changed"):
        # The root's time aside: a restore writes its mark of a partial copy into the mount's root.
        if saved.get(name) is not None and not compare_trees(saved[name], digests, "a", "b", root_mtime=False):
            return name
    return "OTHER"


def cut_after(spec, runner):
    """After the boot: a new boot id, what the boot left, the next run, and where the data is."""
    with open(CUT_STATE, "rb") as handle:
        saved = pickle.load(handle)
    boot_id = os.path.join(WORK, "boot_id")
    with open(boot_id, "w", encoding="ascii") as handle:
        handle.write("%s\n" % uuid.uuid4())
    tx.sh("mount", "--bind", boot_id, "/proc/sys/kernel/random/boot_id")
    kind = saved["kind"]
    path, backing = (LIVE, LIVE_BACKING) if kind == "live-cut" else (DATA, BACKING)
    entry = LIVE_PERSISTED if kind == "live-cut" else ENTRY
    problems = []
    at_cut = {"backing": named_as(saved["backing_at_cut"], saved), "disk": named_as(saved["disk_at_cut"], saved)}
    booted = tree_digest(path)[0] if tx.mounts_at(path) else None
    facts = {"killed_after": saved["killed_after"], "at_cut": at_cut,
             "boot_mounted": "empty" if booted is not None and not os.listdir(path) else named_as(booted, saved)}
    # Where a complete copy was on disk at the cut: the data the next run must keep.
    if kind == "remove-cut":
        want = saved["backing_at_cut"] if saved["backing_at_cut"] is not None else saved["disk_at_cut"]
        if named_as(want, saved) not in ("fixture", "changed"):
            problems.append("at the cut neither the backing nor the directory on disk held the data whole (backing "
                            "%s, disk %s)" % (at_cut["backing"], at_cut["disk"]))
    elif kind == "live-cut":
        # Before its first copy a live tmpfs has no copy on disk, as it had none before the run: that data is the
        # RAM's, gone with the power.
        want = saved["fixture"] if at_cut["backing"] == "fixture" else None
        if at_cut["backing"] not in ("none", "fixture"):
            problems.append("at the cut the backing held a copy that is not the data")
    else:
        want = saved["fixture"]
        if at_cut["disk"] != "fixture":
            problems.append("at the cut the directory on disk did not hold the data (%s)" % at_cut["disk"])
    second = runner.run("absent" if kind == "remove-cut" else "present", entry=entry)
    facts["second"] = tx.outcome(second)
    if not second["ok"]:
        problems.append("the next run failed: %s" % (second["msg"] or second)[:1500])
    mounted = tree_digest(path)[0] if tx.mounts_at(path) else None
    current = current_of(backing)
    facts["after"] = {"mount": named_as(mounted, saved), "backing": named_as(current, saved)}
    if kind == "remove-cut":
        disk = disk_now(WORK)
        facts["after"]["disk"] = named_as(disk, saved)
        if mounted is not None:
            problems.append("%s is still mounted after the next run" % path)
        if os.path.isdir(backing):
            problems.append("the backing %s is still there after the next run" % backing)
        problems += ["the directory on disk: %s" % s for s in compare_trees(want, disk, "the data at the cut",
                                                                            "disk", root_mtime=False)][:10]
    else:
        if mounted is None:
            problems.append("%s is not mounted after the next run" % path)
        elif want is not None:
            problems += ["the mount: %s" % s for s in compare_trees(want, mounted, "the data", "mount",
                                                                    root_mtime=False)][:10]
        if want is not None:
            problems += ["the backing's current copy: %s" % s for s in compare_trees(
                want, current or {}, "the data", "backing's copy", root_mtime=False)][:10]
        elif mounted is not None and (current is None or compare_trees(mounted, current, "a", "b", root_mtime=False)):
            problems.append("the backing's current copy is not the mount's data after the next run")
        if kind == "adopt-cut":
            problems += ["the disk copy: %s" % s for s in compare_trees(want, disk_now(WORK), "fixture", "disk",
                                                                        root_mtime=False)][:10]
    return {"hidden": facts, "second": facts["second"], "problems": problems}


def case(spec):
    out = run_case(spec)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = resource.getrusage(resource.RUSAGE_SELF)
    out["cpu_seconds"] = round(usage.ru_utime + usage.ru_stime + own.ru_utime + own.ru_stime, 1)
    return out


def run_case(spec):
    work = WORK
    os.makedirs(work, exist_ok=True)
    runner = Runner(work, spec["purposes"], spec["defaults"])
    if spec["kind"] in CUT_KINDS:
        return cut_after(spec, runner) if spec.get("phase") == "after" else cut_before(spec, runner)
    fixture = setup()
    if spec["case"] == "handover":
        return handover(runner)
    out = {"fixture": tx.digest_hash(fixture), "runs": runner.times}
    kind = spec["kind"]
    changed = None
    if kind == "remove":
        made = runner.run("present")
        if not made["ok"]:
            raise CaseError("the persisted mount could not be made: %s" % (made["msg"] or made))
        changed = change_in_ram()
        out["changed"] = tx.digest_hash(changed)
    state = "present" if kind == "adopt" else "absent"
    first = runner.run(state, kill_at=spec.get("n"))
    out["first"] = tx.outcome(first)
    if spec.get("n") is None or not first["killed"]:
        if not first["ok"]:
            raise CaseError("the run%s neither died nor succeeded: %s" % (
                " with %s=%s" % (KILL_ENV, spec["n"]) if spec.get("n") else "", first["msg"] or first))
        out = check_end(kind, fixture, changed, work, out)
        if spec.get("n") is None:
            # The reference: a second run changes nothing of that end state.
            out["again"] = tx.outcome(runner.run(state))
            again = {"fixture": out["fixture"], "changed": out.get("changed")}
            out["again_state"] = check_end(kind, fixture, changed, work, again)
        return out
    out["hidden"], problems = after_kill(kind, fixture, changed, work)
    second = runner.run(state)
    out["second"] = tx.outcome(second)
    out["problems"] = problems
    if not second["ok"]:
        out["problems"].append("the next run failed: %s" % (second["msg"] or second)[:1500])
    return check_end(kind, fixture, changed, work, out)


def inside(spec):
    try:
        result = case(spec)
    except (CaseError, OSError, subprocess.CalledProcessError) as exc:
        detail = exc.stderr.decode(errors="replace") if isinstance(exc, subprocess.CalledProcessError) else ""
        result = {"error": "%s %s" % (exc, detail)}
    print("RESULT " + json.dumps(result))


# The driver (on this machine) ------------------------------------------------------------------------------

def make_stage(work):
    """A copy of what the containers need, laid out as this checkout is (so transaction.py finds the collection)."""
    import ansible
    stage = os.path.join(work, "stage")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(os.path.join(tx.REPO, "plugins"), os.path.join(stage, "plugins"), ignore=ignore)
    os.makedirs(os.path.join(stage, "tests", "transaction"))
    for name in ("transaction.py", "persist.py"):
        shutil.copy(os.path.join(HERE, name), os.path.join(stage, "tests", "transaction"))
    link = os.path.join(stage, ".cache", "collections", "ansible_collections", "ramdisk", "provision")
    os.makedirs(os.path.dirname(link))
    os.symlink("../../../..", link)
    # ansible-core's own package: the modules import ansible.module_utils.basic.
    shutil.copytree(os.path.dirname(ansible.__file__), os.path.join(stage, "lib", "ansible"), ignore=ignore)
    # The stage is read-only in the containers: compiled once here, not by every module process there (the lab's
    # Debian 12 has Python 3.11, as .venv).
    compileall.compile_dir(stage, quiet=1, workers=1)
    return stage


def container_cpu(container):
    """CPU seconds of everything that ran in CONTAINER (systemd, the units, the modules), from its cgroup; None where
    the engine keeps it elsewhere (cgroup v2, the systemd driver)."""
    for path in ("/sys/fs/cgroup/cpuacct/docker/%s/cpuacct.usage" % container,
                 "/sys/fs/cgroup/docker/%s/cpu.stat" % container):
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except (OSError, TypeError):
            continue
        if path.endswith("cpuacct.usage"):
            return round(int(text) / 1e9, 2)
        return round(int(dict(line.split() for line in text.splitlines())["usage_usec"]) / 1e6, 2)
    return None


class Driver(object):

    def __init__(self, work, keep, image, tag, stage, role):
        self.work = work
        self.keep = keep
        self.image = image
        self.tag = tag
        self.stage = stage
        self.role = role
        self.number = 0
        self.lock = threading.Lock()

    def docker(self, *argv, **kwargs):
        return subprocess.run(["docker"] + list(argv), capture_output=True, text=True, check=False, **kwargs)

    def start(self, name):
        """A systemd container NAME of the image that sees the stage, up and running. Returns its id."""
        run = self.docker(
            "run", "-d", "--name", name, "--cap-add", "SYS_ADMIN", "--security-opt", "apparmor=unconfined",
            "--security-opt", "seccomp=unconfined", "--cgroupns", "host", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
            "--tmpfs", "/run", "--tmpfs", "/run/lock", "--network", "none",
            "-v", "%s:%s:ro" % (self.stage, STAGE), self.image, "/lib/systemd/systemd")
        if run.returncode != 0:
            raise CaseError("docker run failed: %s" % run.stderr.strip())
        self.wait_running(name)
        return run.stdout.strip()

    def wait_running(self, name):
        deadline = time.monotonic() + 120
        while True:
            # No answer at all until systemd's bus is up; then --wait waits for the boot to finish.
            ready = self.docker("exec", name, "systemctl", "is-system-running", "--wait", timeout=120)
            if ready.stdout.strip() in ("running", "degraded"):
                return
            if ready.stdout.strip() not in ("", "offline", "initializing", "starting") or time.monotonic() > deadline:
                raise CaseError("systemd in %s did not come up: %s %s" % (name, ready.stdout, ready.stderr))
            time.sleep(0.1)

    def inside(self, name, spec):
        """(the RESULT of SPEC run in container NAME, its log)."""
        done = self.docker("exec", name, "python3", "%s/tests/transaction/persist.py" % STAGE, "--inside",
                           json.dumps(dict(spec, **self.role)), timeout=900)
        log = done.stderr + done.stdout
        line = [text for text in done.stdout.splitlines() if text.startswith("RESULT ")]
        if not line:
            raise CaseError("the case ended (exit %s) without a result: %s" % (done.returncode, log[-1500:]))
        return json.loads(line[-1][len("RESULT "):]), log

    def case(self, spec):
        """SPEC in a fresh container; its result (with 'error' when the case could not run) and its times."""
        with self.lock:
            self.number += 1
            name = "%s%s-%03d-%s" % (CONTAINER_PREFIX, self.tag, self.number, spec["name"])
        began = time.monotonic()
        result = None
        container = None
        log = ""
        try:
            container = self.start(name)
            booted = time.monotonic() - began
            result, log = self.inside(name, spec)
            if spec["kind"] in CUT_KINDS and not result.get("error"):
                # The power cut: PID 1 killed (no shutdown, no stop-time sync; mounts and /run go), then the boot.
                for argv in (("kill", "-s", "KILL", name), ("start", name)):
                    done = self.docker(*argv, timeout=120)
                    if done.returncode != 0:
                        raise CaseError("docker %s failed: %s" % (argv[0], done.stderr.strip()))
                self.wait_running(name)
                after, more = self.inside(name, dict(spec, phase="after"))
                log += more
                result = dict(result, **{key: value for key, value in after.items() if key != "problems"})
                result["problems"] = result.get("problems", []) + after.get("problems", [])
                result["error"] = after.get("error")
                if result["error"] is None:
                    del result["error"]
            result["boot_seconds"] = round(booted, 1)
        except (CaseError, subprocess.TimeoutExpired) as exc:
            result = {"error": str(exc)}
        finally:
            cpu = container_cpu(container)
            self.docker("rm", "-f", name)
        result["container_cpu_seconds"] = cpu
        result["seconds"] = round(time.monotonic() - began, 1)
        if result.get("error") or result.get("problems"):
            kept = os.path.join(self.keep, "%03d-%s" % (self.number, spec["name"]))
            os.makedirs(kept, exist_ok=True)
            with open(os.path.join(kept, "log"), "w", encoding="utf-8") as handle:
                handle.write(log)
            with open(os.path.join(kept, "result.json"), "w", encoding="utf-8") as handle:
                json.dump(result, handle, indent=1)
        return result


class Queue(object):
    """The references first, then the kill points of each kind, one N at a time until a run with N is no longer
    killed (taken in turn from the kinds still going, so with 2 workers at most one more per kind than needed)."""

    def __init__(self, front, kinds, points=None):
        self.points = list(points or [])
        self.front = list(front) + [{"name": "%s-kill-%d" % (kind, n), "case": "kill", "kind": kind, "n": n}
                                    for kind in kinds for n in self.points]
        self.kinds = list(kinds)
        self.next = dict((kind, 1) for kind in kinds)
        self.end = dict((kind, None) for kind in kinds)
        self.turn = 0
        # Points taken of each kind: every STRIDE[kind]th (powercut_matrix.py's quick look), by default all.
        self.stride = {}
        self.lock = threading.Lock()

    def take(self):
        with self.lock:
            if self.front or self.points:
                return self.front.pop(0) if self.front else None
            going = [kind for kind in self.kinds if self.end[kind] is None and self.next[kind] <= MAX_KILL_AT]
            if not going:
                return None
            kind = going[self.turn % len(going)]
            self.turn += 1
            n = self.next[kind]
            self.next[kind] += self.stride.get(kind, 1)
            return {"name": "%s-kill-%d" % (kind, n), "case": "kill", "kind": kind, "n": n}

    def finished_at(self, n, kind):
        with self.lock:
            self.end[kind] = n if self.end[kind] is None else min(self.end[kind], n)


def compare(reference, result, name):
    if result.get("error"):
        return ["%s: %s" % (name, result["error"][:1500])]
    problems = ["%s: %s" % (name, p) for p in result.get("problems") or []]
    problems += ["%s: end state differs: %s" % (name, d) for d in tx.state_diff(reference["state"], result["state"])]
    for key in ("fixture", "changed"):
        if result.get(key) != reference.get(key):
            problems.append("%s: the %s data differs from the reference's" % (name, key))
    return problems


def report(kind, results, reference, end):
    """The kill points' table of KIND. Returns problems."""
    if end is None:
        return ["%s: no run with %s=N (N up to %d) finished" % (kind, KILL_ENV, MAX_KILL_AT)]
    problems = []
    if end - 1 < MIN_KILL_POINTS:
        problems.append("%s: only %d journal writes, so only %d kill points (at least %d expected)"
                        % (kind, end - 1, end - 1, MIN_KILL_POINTS))
    what = ("the adoption of %s (migrate into a tmpfs kept in %s, %s stopped and started)" % (DATA, BACKING, SERVICE)
            if kind == "adopt" else "the removal (state absent) of that persisted mount, after files changed in RAM")
    print("\nKill points of %s:\na run killed just before its journal write N, then the next run. %d journal writes "
          "in an uninterrupted run (N=%d was not killed)." % (what, end - 1, end))
    print("%4s  %-30s %-6s %-7s %-13s %-9s %-28s %-4s %s" % (
        "N", "killed after (journal)", "mounts", "disk", "backing", "service", "the next run recovered", "2nd",
        "verdict"))
    for n in range(1, end + 1):
        result = results.get("%s-kill-%d" % (kind, n)) or {"error": "not run"}
        found = compare(reference, result, "%s kill point %d" % (kind, n))
        problems += found
        verdict = "pass" if not found else "FAIL"
        if result.get("error"):
            print("%4d  ERROR %s" % (n, result["error"][:200]))
        elif n == end:
            print("%4d  %-30s %s" % (n, "(not killed: the whole run)", verdict))
        else:
            hidden, second = result["hidden"], result["second"]
            print("%4d  %-30s %-6d %-7s %-13s %-9s %-28s %-4s %s" % (
                n, hidden["killed_after"][:30], hidden["mounts"], hidden["disk"], hidden["backing"][:13],
                hidden["service"], (", ".join(second["recovered"]) or "nothing")[:28],
                "ok" if second["ok"] else "FAIL", verdict))
    return problems


def report_cuts(kind, results, end, points=None):
    """The power cuts' table of KIND. Returns problems."""
    if end is None and not points:
        return ["%s: no run with %s=N (N up to %d) finished" % (kind, KILL_ENV, MAX_KILL_AT)]
    what = {"adopt-cut": "the migrate of %s into a tmpfs kept in %s" % (DATA, BACKING),
            "live-cut": "the live tmpfs at %s gaining persist (%s)" % (LIVE, LIVE_BACKING),
            "remove-cut": "the removal (state absent) of the persisted %s, after files changed in RAM" % DATA}[kind]
    print("\nPower cuts of %s:\na run killed just before its journal write N (N=%d: the whole run), then a power cut "
          "(the container's PID 1 killed), its boot, a new boot id and the next run." % (what, end or 0))
    print("%4s  %-30s %-22s %-9s %-28s %-4s %-32s %s" % ("N", "killed after (journal)", "at the cut", "boot",
                                                         "the next run recovered", "2nd", "after", "verdict"))
    problems = []
    for n in points or range(1, end + 1):
        result = results.get("%s-kill-%d" % (kind, n)) or {"error": "not run"}
        found = ["%s %d: %s" % (kind, n, p) for p in ([result["error"][:1500]] if result.get("error") else [])
                 + (result.get("problems") or [])]
        problems += found
        if result.get("error"):
            print("%4d  ERROR %s" % (n, result["error"][:200]))
            continue
        hidden, second = result["hidden"], result["second"]
        print("%4d  %-30s %-22s %-9s %-28s %-4s %-32s %s" % (
            n, hidden["killed_after"][:30], "backing %s, disk %s" % (hidden["at_cut"]["backing"],
                                                                     hidden["at_cut"]["disk"]),
            hidden["boot_mounted"], (", ".join(second["recovered"]) or "nothing")[:28],
            "ok" if second["ok"] else "FAIL",
            " ".join("%s %s" % item for item in sorted(hidden["after"].items()))[:32], "pass" if not found else "FAIL"))
    return problems


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--inside")
    parser.add_argument("--work")
    parser.add_argument("--keep", default=os.path.join(tx.REPO, "build", "transaction-persist"))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--image", default=IMAGE)
    parser.add_argument("--tag", default=str(os.getpid()))
    parser.add_argument("--only", default=",".join(KINDS + ("handover",)))
    parser.add_argument("--points", default="", help="only these N (comma separated), for a quick look")
    args = parser.parse_args()
    if args.inside:
        inside(json.loads(args.inside))
        return 0
    kinds = [kind for kind in KINDS + CUT_KINDS if kind in args.only.split(",")]
    began = time.monotonic()
    shutil.rmtree(args.keep, ignore_errors=True)
    purposes, defaults = tx.role_vars()
    driver = Driver(args.work, args.keep, args.image, args.tag, make_stage(args.work),
                    {"purposes": purposes, "defaults": defaults})
    references = [{"name": "reference-%s" % kind, "case": "reference", "kind": kind} for kind in kinds
                  if kind in KINDS]
    alone = [{"name": "handover", "case": "handover", "kind": "handover"}] if "handover" in args.only.split(",") else []
    points = [int(n) for n in args.points.split(",") if n]
    queue = Queue(references + alone, kinds, points)
    results = tx.run_all(driver, queue, args.jobs)
    problems = []
    for kind in [kind for kind in kinds if kind in CUT_KINDS]:
        problems += report_cuts(kind, results, queue.end[kind], points)
    for kind in [kind for kind in kinds if kind in KINDS]:
        reference = results["reference-%s" % kind]
        if reference.get("error") or reference.get("problems"):
            print("transaction-persist: the reference run of %s failed: %s"
                  % (kind, reference.get("error") or reference["problems"]))
            return 2
        state = reference["state"]
        print("reference %s: %s; a second run: %s, changed %s" % (
            kind, json.dumps(state["persist"]["units"]), "succeeded" if reference["again"]["ok"] else "FAILED",
            reference["again"]["changed"]))
        if state["journal"] or state["staging_mounts"]:
            problems.append("reference %s: a journal or a staging mount is left: %s" % (kind, state))
        if not reference["again"]["ok"]:
            problems.append("reference %s: the second run failed: %s" % (kind, reference["again"]["msg"]))
        problems += compare(reference, reference["again_state"], "reference %s, second run" % kind) \
            if reference.get("again_state") else []
    for kind in [kind for kind in kinds if kind in KINDS]:
        problems += report(kind, results, results["reference-%s" % kind], queue.end[kind])
    if alone:
        problems += tx.report_case("handover (%s released, %s persisted, one run)" % (DATA, OTHER),
                                   results["handover"])
    print()
    for problem in problems:
        print("FAIL: %s" % problem)
    cases = list(results.values())
    cpu = [r["container_cpu_seconds"] for r in cases if r.get("container_cpu_seconds") is not None]
    print("transaction-persist: %d cases, kill points: %s; %s; %.0f s on %d workers (a case %.1f s on average, of "
          "which the container's boot %.1f s; CPU in the containers %s)" % (
              len(results), ", ".join("%s %s" % (kind, queue.end[kind] - 1 if queue.end[kind] else points or "none")
                                      for kind in kinds),
              "%d problems" % len(problems) if problems else "all properties held", time.monotonic() - began,
              args.jobs, sum(r["seconds"] for r in cases) / max(len(cases), 1),
              sum(r.get("boot_seconds") or 0 for r in cases) / max(len(cases), 1),
              "%.0f s, %.1f s a case" % (sum(cpu), sum(cpu) / len(cpu)) if cpu else "not known"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
