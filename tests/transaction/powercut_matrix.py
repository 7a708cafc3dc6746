# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The power-cut matrix of ramdisk_apply (make transaction-powercut): every transaction kind, a power cut after
every journaled step, then the boot and the next run: no file lost, none hidden, none only in RAM.

A point is a run killed (RAMDISK_PROVISION_TEST_KILL_AT=N) just before its journal write N, so after its write N-1,
N = 1 up to the first N that no longer kills it (that last point is a cut after the whole run); then a power cut,
a boot and the next run. Kinds:

- mount (a plain tmpfs) and migrate (transaction.py's ~300-entry fixture moved into a tmpfs): each point in a
  private mount namespace on this machine's kernel, as transaction.py's reboot points (its power_cut(): every mount
  under the case's paths and /run/ramdisk-provision gone, a new boot id bound over
  /proc/sys/kernel/random/boot_id; its boot(): the /etc/fstab lines mounted, as a host without systemd does). Right
  after the boot the directory on disk must hold all the data; the next run must succeed and leave what one
  uninterrupted run leaves (the mount holding all of it: nothing hidden).
- zram-fs (transaction.py's zram file system policy, a migrate into an ext4 on a zram device): in a namespace, one
  point at a time (the devices are the kernel's). The cut also takes the devices' content: each device of the case
  is reset (its number kept, so that no device of another user of this kernel is taken for it), and one no record
  names is removed; the boot runs the collection's zram-setup script for each record (what its unit does), makes
  the file system where /etc/fstab says x-systemd.makefs, and mounts the lines. Every device the case made is
  removed at its end.
- migrate-persist (the fixture migrated into a tmpfs kept in a new backing), adopt (persist adopting a backing that
  already holds the data in its current copy, over an empty directory), live (a tmpfs mounted and written by an
  earlier run without persist gains persist) and remove (a persisted mount whose RAM copy changed, state absent:
  the data returns to the directory): persist needs systemd, so each point runs in a systemd container of the
  lab's image (persist.py's, named pcmatrix-TAG-*). The cut: the run SIGKILLed at its journal write, then
  `docker kill` and `docker start` of the container (its mounts, /run and every process gone; systemd boots
  again: fstab's lines mounted, the persist units' restore run), then a new boot id bound over
  /proc/sys/kernel/random/boot_id inside, and the next run.
  Right after the boot, a persist unit with nothing mounted at its path must not have failed (skipped by its
  ConditionPathIsMountPoint=, so the services it comes before start; before, a cut between the unit's enable and
  the path's first fstab line failed them until the next run).
  The data of record: the fixture (migrate-persist, adopt; on disk before the run) or, for live and remove, the
  data changed in RAM once the killed run journaled a step that wrote RAM to disk (its first sync, the writeback,
  the persist unit's stop), and before that the older copy on disk (RAM is lost in a cut: that is what persist
  bounds, not prevents). Right after the boot that data must be whole on disk (the directory, or the backing's
  current copy); never a mix. After the next run: a mount holds it, the backing's current copy equals it (removal:
  the directory on disk holds it, no mount, no backing), and the end state is the reference's (the same kind, a
  cut after the whole run). The root directory's own mtime is not compared (a restore fills the root, which
  changes it); everything in it is, times included.
- log: the log purpose's adoption (/var/log of the container, journald writing into it all along, put on a 64M
  tmpfs kept in /var/lib/ramdisk-backing/log, as tests/log/apply.yml does), in a container as the kinds above.
  journald's files have no fixed content to compare, so before the run /var/log gets a fixture beside them and
  what the image logged: transaction.py's ~300 entries in /var/log/pcmatrix, eight top-level logs (root:adm 0640)
  and pcmatrix-held.log, which a service named in persist.services (pcmatrix-writer, enabled) holds open for
  append; and a marker line logged through journald, synced into its files. Right after the boot the fixture is
  whole in the directory on disk or the backing's current copy (never only in the lost mount) and neither holds a
  mix of it; in each of those that holds it whole the marker is found and `journalctl --verify` passes, or fails
  only on an active file (system.journal, user-N.journal, or a *.journal~ that journald's boot set aside as
  unclean): a torn tail. What journalctl reads on the booted host is shown, not required. (The first copy is
  checked and the persist unit enabled before the fstab line, so a boot either leaves /var/log on disk or mounts
  and restores it before journald moves in: on f7abf03 the line came first, and a boot that mounted the path with
  the unit disabled let journald and the writer write into the empty tmpfs, which the next run took for newer
  data than the backing, point 53.) After the next run the mount, the backing's
  current copy and the directory on disk hold the fixture, journalctl finds the marker (--verify as above), and the
  end state is the reference's: the mount and its options, /etc/fstab, the records, the units and the journald
  drop-in, the backing's names and the fixture in its current copy, journald writing into the mount, the writer
  running with its file in the mount. Not compared, as not fixed: journald's files (written all along, each boot
  adds its own lines), what the image writes at each boot (wtmp) or logs anywhere else in /var/log, and the
  root's mtime. make test-log cuts the power once with journald writing numbered lines between syncs, and make
  test-log-kill runs the adoption killed at 9 points through the role.

Honesty of the cut: the container's disk is this kernel's overlay of the machine's disk, whose page cache survives
`docker kill`, so a cut here never loses a write that was not flushed. It tests what a cut takes from a host that
flushed (mounts, RAM, /run, running processes, the boot) at each journaled step; whether the helpers flush before
they journal is tested by tests/unit/persist_delta_powercut.py (an ext4 image shut down with writes in flight) and
by the VM's power-cut test (make test-powercut). One container per point: a point's host must be the one its run
left, and resetting a host by the code under test would hide exactly the defects sought.

Usage: powercut_matrix.py --work DIR [--keep DIR] [--jobs N] [--image IMAGE] [--tag TAG] [--only KIND,...] [--max N]
(--max: at most N points of a kind, for a quick look, short of the count the suite asks; --stride N: every Nth point
of the container kinds).

`make test` runs it with --stride 2: points 1, 3, 5, ... of the container kinds (every point of the namespace
kinds).
A journal alternates begin and done lines, so before the transaction's `forward` line the odd points are the cuts
after each `begin` (step k not yet run, steps 0 to k-1 to undo), after it the cuts after each `done` (steps up to k
run, the rest to redo). An even point leaves the host as the odd point after it does, with one journal line less;
reading a journal that ends either way is proven by the namespace kinds, which take every point. `make
transaction-powercut` takes every point of every kind (about 322 with the log kind's 66; about 40 minutes here).
Kinds: mount, migrate, zram-fs, migrate-persist, adopt, live, remove, log. Prints the number of points and a table
per kind; exits 1 when a property failed, 2 when the test could not run; each failed point's log and result go to
--keep (build/transaction-powercut).
"""

from __future__ import annotations

import argparse
import contextlib
import grp
import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# pylint: disable=wrong-import-position
import transaction as tx  # noqa: E402
import persist as ps  # noqa: E402
from transaction import CaseError, paths  # noqa: E402
from ansible_collections.ramdisk.provision.plugins.module_utils._journal import Journal  # noqa: E402
from ansible_collections.ramdisk.provision.plugins.module_utils._mount_steps import token  # noqa: E402
from ansible_collections.ramdisk.provision.plugins.module_utils._persist import (  # noqa: E402
    BACKING_NAMES_RE, unit_names)
from ansible_collections.ramdisk.provision.plugins.module_utils._tree import (  # noqa: E402
    compare_trees, entry_digest, tree_digest)
from ansible_collections.ramdisk.provision.plugins.module_utils._zram_steps import MKFS  # noqa: E402

NAMESPACE_KINDS = {"mount": "mount", "migrate": "data", "zram-fs": "zram-fs"}
CONTAINER_KINDS = ("migrate-persist", "adopt", "live", "remove", "log")
SERIAL_KINDS = ("zram-fs",)
KINDS = tuple(NAMESPACE_KINDS) + CONTAINER_KINDS
tx.POLICIES["mount"] = [tx.PLAIN_ENTRY]
MIN_POINTS = 150
CONTAINER_PREFIX = "pcmatrix-"
PHASE_FILE = os.path.join(ps.WORK, "powercut-phase.json")
# A persisted entry without persist: the live kind's first run.
LIVE_ENTRY = dict(tx.MIGRATE_ENTRY)
SNAPSHOT = "snap-20260101T000000.000000000"
STATE_OF = {"remove": "absent"}


# In a container ---------------------------------------------------------------------------------------------

def saved_steps(lines, mount_token=ps.TOKEN):
    """The steps of LINES (the journal) that wrote the RAM mount to disk and were journaled done."""
    whats = {(line.get("run"), line.get("txn")): line.get("what") or {} for line in lines if line.get("t") == "txn"}
    persist_unit = unit_names(mount_token)["persist"]
    saved = []
    for line in lines:
        if line.get("t") != "done" or "i" not in line:
            continue
        steps = whats.get((line.get("run"), line.get("txn")), {}).get("steps") or []
        step = steps[line["i"]] if line["i"] < len(steps) else {}
        argv = (step.get("args") or {}).get("argv") or []
        if step.get("step") in ("sync", "writeback") or (step.get("step") == "systemctl" and argv == ["stop",
                                                                                                      persist_unit]):
            saved.append("%d %s" % (line["i"], step["step"]))
    return saved


def adopt_setup(fixture):
    """The backing holds the data in its current copy (as a host re-provisioned keeps it); the directory is empty."""
    snapshot = os.path.join(ps.BACKING, SNAPSHOT)
    os.makedirs(ps.BACKING, mode=0o700)
    tx.sh("cp", "-a", "--no-target-directory", ps.DATA, snapshot)
    os.symlink(SNAPSHOT, os.path.join(ps.BACKING, "current"))
    for name in os.listdir(ps.DATA):
        target = os.path.join(ps.DATA, name)
        if os.path.isdir(target) and not os.path.islink(target):
            shutil.rmtree(target)
        else:
            os.unlink(target)
    problems = ps.whole(fixture, snapshot, "the backing's copy made for adoption", "fixture")
    if problems:
        raise CaseError("the adopted backing could not be made: %s" % problems)


def phase_first(spec):
    """Set the kind's host up, then the run killed before its journal write N (N None: not killed)."""
    kind = spec["kind"]
    os.makedirs(ps.WORK, exist_ok=True)
    runner = ps.Runner(ps.WORK, spec["purposes"], spec["defaults"])
    fixture = ps.setup()
    changed = None
    if kind == "adopt":
        adopt_setup(fixture)
    elif kind in ("live", "remove"):
        runner.entry = LIVE_ENTRY if kind == "live" else ps.ENTRY
        made = runner.run("present")
        if not made["ok"]:
            raise CaseError("the %s mount could not be made: %s" % (kind, made["msg"] or made))
        runner.entry = ps.ENTRY
        changed = ps.change_in_ram()
    out = killed_run(runner, STATE_OF.get(kind, "present"), spec)
    with open(PHASE_FILE, "w", encoding="utf-8") as handle:
        json.dump({"fixture": fixture, "changed": changed, "saved": out["saved"]}, handle)
    return out


def killed_run(runner, state, spec, entry=None, mount_token=ps.TOKEN):
    """The run with STATE killed before its journal write N (SPEC's n; None: the whole run), and what its journal
    says: {first, runs, killed_after, saved}."""
    first = runner.run(state, kill_at=spec.get("n"), entry=entry)
    if not first["killed"] and not first["ok"]:
        raise CaseError("the run%s neither died nor succeeded: %s" % (
            " with %s=%s" % (tx.KILL_ENV, spec["n"]) if spec.get("n") else "", first["msg"] or first))
    lines = Journal(paths.JOURNAL).read()
    whats = {(line.get("run"), line.get("txn")): line.get("what") for line in lines if line.get("t") == "txn"}
    return {"first": tx.outcome(first), "runs": runner.times,
            "killed_after": tx.describe_line(lines[-1] if lines else None, whats) if first["killed"] else
            "(the whole run)", "saved": saved_steps(lines, mount_token) if first["killed"] else ["(the whole run)"]}


def next_run(runner, state, out, entry=None):
    """The run after the boot, into OUT (second, runs). Returns the problems."""
    try:
        second = runner.run(state, entry=entry)
    except CaseError as exc:
        # The plan failed (its recovery first): a point that fails, not a test that could not run.
        second = {"ok": False, "killed": False, "result": None, "msg": str(exc)}
    out["second"] = tx.outcome(second)
    out["runs"] = runner.times
    return [] if second["ok"] else ["the next run failed: %s" % (second["msg"] or second)[:1500]]


def classify(digests, fixture, changed):
    if digests is None:
        return "nothing"
    if changed is not None and ps.same_tree(changed, digests, root_mtime=False):
        return "changed"
    if ps.same_tree(fixture, digests, root_mtime=False):
        return "old" if changed is not None else "data"
    if not [rel for rel in digests if rel != "."]:
        return "empty"
    return "OTHER:%d" % (len(digests) - 1)


def boot_unit_problems(path, mount_token):
    """Right after the boot: a persist unit with nothing mounted at its path must not have failed (it is skipped,
    ConditionPathIsMountPoint=), or the services it comes before were kept down until the next run. Where the
    path is mounted, failing is right when the backing has no copy yet (the live kind before its first copy)."""
    if tx.mounts_at(path):
        return []
    unit = unit_names(mount_token)["persist"]
    state = ps.systemctl_show(unit, "ActiveState").get("ActiveState")
    if state == "failed":
        return ["after the boot %s failed with nothing mounted at %s: the services it comes before did not start"
                % (unit, path)]
    return []


def phase_after(spec):
    """After the cut and the boot: where the data is, then the next run and the end state."""
    kind = spec["kind"]
    with open(PHASE_FILE, encoding="utf-8") as handle:
        phase = json.load(handle)
    fixture, changed, saved = phase["fixture"], phase["changed"], phase["saved"]
    runner = ps.Runner(ps.WORK, spec["purposes"], spec["defaults"])
    problems = boot_unit_problems(ps.DATA, ps.TOKEN)
    mounted = tx.mounts_at(ps.DATA)
    in_mount = tree_digest(ps.DATA)[0] if mounted else None
    disk = ps.disk_now(ps.WORK)
    _names, current = ps.backing_copy()
    boot = {"mount": classify(in_mount, fixture, changed) if mounted else "-", "disk": classify(disk, fixture, changed),
            "backing": classify(current, fixture, changed)}
    # The data of record: what the dead run had written to disk, or (live, remove) the older copy if it had not;
    # SAVED (the journal's done steps that write RAM to disk) only says when the older copy no longer does.
    wanted = ("changed",) if changed is not None and saved else ("changed", "old") if changed is not None else ("data",)
    on_disk = [where for where in ("disk", "backing") if boot[where] in wanted]
    if not on_disk:
        problems.append("after the boot no complete copy of the data (%s) is on disk: the directory holds %s, the "
                        "backing's current %s, the mount %s" % (" or ".join(wanted), boot["disk"], boot["backing"],
                                                                boot["mount"]))
        survivor = wanted[0]
    else:
        # The newest whole copy on disk is the one that must not be lost.
        survivor = "changed" if "changed" in [boot[where] for where in on_disk] else boot[on_disk[0]]
    expected = changed if survivor == "changed" else fixture
    out = {"boot": boot, "survivor": survivor}
    problems += next_run(runner, STATE_OF.get(kind, "present"), out)
    disk = ps.disk_now(ps.WORK)
    names, current = ps.backing_copy()
    if kind == "remove":
        problems += ["the directory on disk: %s" % s for s in tx.compare_trees(
            expected, disk, "the %s data" % survivor, "the disk")][:10]
        if tx.mounts_at(ps.DATA):
            problems.append("%s is still mounted" % ps.DATA)
        if names is not None:
            problems.append("the backing %s is still there: %s" % (ps.BACKING, names))
    else:
        if tx.mounts_at(ps.DATA):
            problems += ["the mount: %s" % s for s in tx.compare_trees(
                expected, tree_digest(ps.DATA)[0], "the %s data" % survivor, "the mount")][:10]
        else:
            problems.append("%s is not mounted: the data is hidden nowhere but served nowhere" % ps.DATA)
        problems += ["the backing's current copy: %s" % s for s in tx.compare_trees(
            expected, current or {}, "the %s data" % survivor, "the backing's copy")][:10]
    out["state"] = ps.state_now()
    out["problems"] = problems
    return out


# The log kind (in a container) ------------------------------------------------------------------------------

LOG = "/var/log"
LOG_BACKING = "/var/lib/ramdisk-backing/log"
LOG_TOKEN = token(LOG)
# transaction.py's ~300 entries in a directory of /var/log, beside top-level files as logs are (root:adm 0640) and
# one that LOG_WRITER holds open for append (it writes nothing once the run began, so its content is fixed).
LOG_FIXTURE = "pcmatrix"
LOG_TOP = tuple("pcmatrix-%02d.log" % number for number in range(8))
LOG_HELD = "pcmatrix-held.log"
LOG_WRITER = "pcmatrix-writer.service"
LOG_MARKER_TAG = "pcmatrix"
LOG_MARKER = "pcmatrix: a marker logged before the run"
# The timer never fires during a point: the syncs are the run's own. The writer is a service that uses the logs.
LOG_ENTRY = {"path": LOG, "purpose": "log", "size": "64M",
             "persist": {"backing": LOG_BACKING, "interval": "1h", "services": [LOG_WRITER]}}
# journald's active files (it writes them; a cut leaves their tail torn) and those its boot renamed as unclean.
ACTIVE_JOURNAL_RE = re.compile(r"^(system|user-\d+)\.journal$|\.journal~$")


def log_fixed(root):
    """The digests of the fixture under ROOT (/var/log, its directory on disk, a backing's copy), the root's
    mtime aside; None when ROOT is no directory. Nothing else of /var/log: journald's files and what the system
    logs at each boot (wtmp) are not fixed."""
    here = os.path.join(root, ".")
    if not os.path.isdir(here):
        return None
    digests = {".": dict(entry_digest(here, os.lstat(here)), mtime_ns=None)}
    below = os.path.join(root, LOG_FIXTURE)
    if os.path.isdir(below) and not os.path.islink(below):
        found, problems = tree_digest(below)
        if problems:
            raise CaseError("the fixture under %s could not be read: %s" % (root, problems))
        digests.update((LOG_FIXTURE if rel == "." else "%s/%s" % (LOG_FIXTURE, rel), digest)
                       for rel, digest in found.items())
    for name in LOG_TOP + (LOG_HELD,):
        path = os.path.join(root, name)
        if os.path.lexists(path):
            digests[name] = entry_digest(path, os.lstat(path))
    return digests


def log_classify(digests, fixture):
    """data (the fixture whole), nothing (no directory), empty (none of it), or MIX:k/n (k of its n entries whole)."""
    if digests is None:
        return "nothing"
    if not compare_trees(fixture, digests, "a", "b"):
        return "data"
    entries = [rel for rel in fixture if rel != "."]
    whole = len([rel for rel in entries if rel in digests and not compare_trees(
        {rel: fixture[rel]}, {rel: digests[rel]}, "a", "b")])
    if not [rel for rel in digests if rel != "."]:
        return "empty"
    return "MIX:%d/%d" % (whole, len(entries))


@contextlib.contextmanager
def log_on_disk():
    """The directory /var/log on disk, under whatever is mounted there, through a non-recursive bind of /var."""
    peek = os.path.join(ps.WORK, "peek")
    os.makedirs(peek, exist_ok=True)
    tx.sh("mount", "--bind", os.path.dirname(LOG), peek)
    try:
        yield os.path.join(peek, os.path.basename(LOG))
    finally:
        tx.sh("umount", peek)


def journal_check(journal=None):
    """What journald's files give under JOURNAL (the journal directory of /var/log or of a copy of it, one directory
    per machine id in it; None: what journalctl reads on this host): whether the marker is there, the files
    journalctl --verify fails, and of those the active ones (a torn tail)."""
    if journal is None:
        asked = [[]]
    else:
        names = sorted(os.listdir(journal)) if os.path.isdir(journal) else []
        asked = [["--directory", os.path.join(journal, name)] for name in names
                 if os.path.isdir(os.path.join(journal, name))]
    marker, failed = False, set()
    for args in asked:
        shown = subprocess.run(["journalctl"] + args + ["-t", LOG_MARKER_TAG, "-o", "cat", "--no-pager"],
                               capture_output=True, text=True, check=False)
        marker = marker or LOG_MARKER in shown.stdout.splitlines()
        verify = subprocess.run(["journalctl"] + args + ["--verify"], capture_output=True, text=True, check=False)
        failed.update(re.findall(r"^FAIL: (\S+)", verify.stdout + verify.stderr, re.M))
    torn = set(name for name in failed if ACTIVE_JOURNAL_RE.search(os.path.basename(name)))
    return {"marker": marker, "failed": sorted(failed - torn), "torn": sorted(torn), "dirs": len(asked)}


def journal_words(found):
    """A journal_check() result in a word or two."""
    if not found["marker"]:
        return "LOST" if found.get("dirs") != 0 else "none"
    return "BAD" if found["failed"] else "torn" if found["torn"] else "ok"


def journal_problems(found, what):
    problems = []
    if not found["marker"]:
        problems.append("%s: the marker logged before the run is not in journald's files (%d journal directories)"
                        % (what, found.get("dirs", 0)))
    if found["failed"]:
        problems.append("%s: journalctl --verify fails on %s, not only an active file's tail" % (
            what, ", ".join(found["failed"][:5])))
    return problems


def log_setup():
    """The fixture in /var/log beside journald's files, the writer holding its file open, and the marker in journald's
    files. Returns the fixture's digests."""
    with open("/etc/passwd", "a", encoding="utf-8") as handle:
        handle.write("%s:x:%d:%d::/nonexistent:/usr/sbin/nologin\n" % (tx.OWNER[0], tx.OWNER[1], tx.GROUP[1]))
    with open("/etc/group", "a", encoding="utf-8") as handle:
        handle.write("%s:x:%d:\n" % tx.GROUP)
    tx.make_fixture(os.path.join(LOG, LOG_FIXTURE), tx.FIXTURES["small"])
    adm = grp.getgrnam("adm").gr_gid
    stamp = 1705000000
    for number, name in enumerate(LOG_TOP + (LOG_HELD,)):
        path = os.path.join(LOG, name)
        with open(path, "wb") as handle:
            handle.write(("%s: line of a log %d\n" % (name, number)).encode() * (10 + 70 * number))
        os.chown(path, tx.OWNER[1] if name == LOG_HELD else 0, adm)
        os.chmod(path, 0o640)
        os.utime(path, ns=((stamp + number) * 10 ** 9,) * 2)
    with open("/etc/systemd/system/" + LOG_WRITER, "w", encoding="utf-8") as handle:
        handle.write("[Unit]\nDescription=Holds %s/%s open for append (the power-cut matrix's log kind)\n\n"
                     "[Service]\nExecStart=/bin/sh -c 'exec 3>>%s/%s; exec sleep infinity'\n\n"
                     "[Install]\nWantedBy=multi-user.target\n" % (LOG, LOG_HELD, LOG, LOG_HELD))
    tx.sh("systemctl", "daemon-reload")
    tx.sh("systemctl", "enable", "--now", LOG_WRITER)
    tx.sh("logger", "-t", LOG_MARKER_TAG, LOG_MARKER)
    tx.sh("journalctl", "--sync")
    found = journal_check()
    if not found["marker"] or found["failed"] or found["torn"]:
        raise CaseError("before the run journald's files do not hold the marker, or fail --verify: %s" % found)
    if writer_holds() != "disk":
        raise CaseError("%s does not hold %s open before the run" % (LOG_WRITER, LOG_HELD))
    return log_fixed(LOG)


def writer_holds():
    """Where LOG_WRITER's open file is: in the mount at /var/log, on disk, or - (not running, or not open)."""
    pid = ps.systemctl_show(LOG_WRITER, "MainPID").get("MainPID") or "0"
    for _try in range(50):
        try:
            held = os.stat("/proc/%s/fd/3" % pid)
            break
        except OSError:
            if pid == "0":
                return "-"
            time.sleep(0.1)
    else:
        return "-"
    mounted = tx.mounts_at(LOG)
    return "mount" if mounted and held.st_dev == os.stat(LOG).st_dev else "disk"


def journald_in_mount():
    """Whether journald writes its journal files into the mount at /var/log."""
    pid = ps.systemctl_show("systemd-journald.service", "MainPID").get("MainPID") or "0"
    if not tx.mounts_at(LOG):
        return False
    device = os.stat(LOG).st_dev
    fds = "/proc/%s/fd" % pid
    for name in os.listdir(fds) if os.path.isdir(fds) else []:
        try:
            target = os.readlink(os.path.join(fds, name))
            if target.startswith(LOG + "/journal/") and target.endswith(".journal") and \
                    os.stat(os.path.join(fds, name)).st_dev == device:
                return True
        except OSError:
            continue
    return False


def log_state():
    """What a run leaves of the log mount, to compare with the reference: only what is fixed."""
    state = tx.end_state([])
    listing = json.loads(subprocess.run(["findmnt", "-J", "-l", "-o", "TARGET,SOURCE,FSTYPE,OPTIONS"], check=True,
                                        capture_output=True, text=True).stdout)["filesystems"]
    state["mounts"][LOG] = [dict(fstype=m["fstype"], source=m["source"], options=m["options"]) for m in listing
                            if m["target"] == LOG]
    info = os.stat(LOG)
    state["roots"][LOG] = "%o %d:%d" % (info.st_mode & 0o7777, info.st_uid, info.st_gid)
    state["trees"][LOG] = tx.digest_hash(log_fixed(LOG))
    names = unit_names(LOG_TOKEN)
    persist = {"units": {}, "unit_files": {}}
    for kind, unit in sorted(names.items()):
        shown = ps.systemctl_show(unit, "ActiveState", "UnitFileState")
        persist["units"][kind] = "%s %s" % (shown.get("ActiveState"), shown.get("UnitFileState") or "-")
        persist["unit_files"][kind] = ps.file_hash(os.path.join(paths.UNIT_DIR, unit))
    persist["service_requires"] = dict((unit, ps.listing("/etc/systemd/system/%s.requires" % unit))
                                       for unit in (LOG_WRITER, "systemd-journal-flush.service"))
    persist["wants"] = sorted(name for name in ps.listing("/etc/systemd/system/multi-user.target.wants") or []
                              if name.startswith("ramdisk-"))
    persist["conf"] = ps.file_hash(paths.persist_conf_file(LOG_TOKEN))
    persist["journald_dropin"] = ps.file_hash(paths.journald_dropin_file(LOG_TOKEN))
    persist["helper"] = ps.file_hash(paths.PERSIST_HELPER)
    persist["persist_run"] = ps.listing(paths.PERSIST_STATE_DIR)
    persist["persist_status"] = ps.listing(paths.PERSIST_STATUS_DIR)
    found = sorted(name for name in os.listdir(LOG_BACKING) if name != ".persist-delta") \
        if os.path.isdir(LOG_BACKING) else None
    shown = sorted(name.split("-", 1)[0] + "-*" if "-" in name and BACKING_NAMES_RE.match(name) else name
                   for name in found or [])
    persist["backing_names"] = sorted(set(shown)) if found is not None else None
    persist["backing_copies_within_keep"] = shown.count("snap-*") <= ps.PERSIST_KEEP
    current = log_fixed(os.path.join(LOG_BACKING, "current"))
    persist["backing_current"] = tx.digest_hash(current) if current else None
    persist["journald_in_mount"] = journald_in_mount()
    persist["writer"] = "%s, its file %s" % (ps.systemctl_show(LOG_WRITER, "ActiveState").get("ActiveState"),
                                             writer_holds())
    state["persist"] = persist
    return state


def log_first(spec):
    """The fixture and the marker, then the log mount's adoption killed before its journal write N (None: whole)."""
    os.makedirs(ps.WORK, exist_ok=True)
    runner = ps.Runner(ps.WORK, spec["purposes"], spec["defaults"])
    fixture = log_setup()
    out = killed_run(runner, "present", spec, LOG_ENTRY, LOG_TOKEN)
    with open(PHASE_FILE, "w", encoding="utf-8") as handle:
        json.dump({"fixture": fixture, "saved": out["saved"]}, handle)
    return out


def log_after(spec):
    """After the cut and the boot: where the fixture is, journald's files, then the next run and the end state."""
    with open(PHASE_FILE, encoding="utf-8") as handle:
        fixture = json.load(handle)["fixture"]
    runner = ps.Runner(ps.WORK, spec["purposes"], spec["defaults"])
    problems = boot_unit_problems(LOG, LOG_TOKEN)
    mounted = tx.mounts_at(LOG)
    with log_on_disk() as disk_root:
        disk = log_fixed(disk_root)
        journals = {"disk": journal_check(os.path.join(disk_root, "journal"))}
    current_root = os.path.join(LOG_BACKING, "current")
    journals["backing"] = journal_check(os.path.join(current_root, "journal"))
    boot = {"mount": log_classify(log_fixed(LOG), fixture) if mounted else "-", "disk": log_classify(disk, fixture),
            "backing": log_classify(log_fixed(current_root), fixture)}
    whole = [where for where in ("disk", "backing") if boot[where] == "data"]
    if not whole:
        problems.append("after the boot no complete copy of the fixture is on disk: the directory holds %s, the "
                        "backing's current %s, the mount %s" % (boot["disk"], boot["backing"], boot["mount"]))
    problems += ["after the boot the %s holds a mix of the fixture (%s)" % (
        "directory on disk" if where == "disk" else "backing's current copy", boot[where])
        for where in ("disk", "backing") if boot[where].startswith("MIX")]
    for where in whole:
        problems += journal_problems(journals[where], "after the boot, the journal of the %s" % (
            "directory on disk" if where == "disk" else "backing's current copy"))
    # What journalctl reads on the booted host: shown, not a property. A boot after a cut between the fstab line and
    # the persist unit's enable mounts an empty tmpfs over /var/log, which hides the journal on disk as the other
    # kinds' data is hidden, until the next run (checked after it).
    seen = journal_check()
    out = {"boot": boot, "survivor": "data",
           "journal": {"copies": "/".join(journal_words(journals[where]) if where in whole else "-"
                                          for where in ("disk", "backing")),
                       "boot_view": journal_words(seen)}}
    problems += next_run(runner, "present", out, LOG_ENTRY)
    if tx.mounts_at(LOG):
        problems += ["the mount: %s" % s for s in compare_trees(fixture, log_fixed(LOG), "fixture", "mount")][:10]
    else:
        problems.append("%s is not mounted after the next run" % LOG)
    problems += ["the backing's current copy: %s" % s for s in compare_trees(
        fixture, log_fixed(current_root) or {}, "fixture", "backing's copy")][:10]
    with log_on_disk() as disk_root:
        problems += ["the directory on disk: %s" % s for s in compare_trees(
            fixture, log_fixed(disk_root) or {}, "fixture", "disk")][:10]
    tx.sh("journalctl", "--sync")
    seen = journal_check()
    out["journal"]["end_view"] = journal_words(seen)
    problems += journal_problems(seen, "after the next run, the journal journalctl reads")
    out["state"] = log_state()
    out["problems"] = problems
    return out


def inside_container(spec):
    try:
        result = {"first": log_first if spec["kind"] == "log" else phase_first,
                  "after": log_after if spec["kind"] == "log" else phase_after}[spec["phase"]](spec)
    except (CaseError, OSError, subprocess.CalledProcessError) as exc:
        detail = exc.stderr.decode(errors="replace") if isinstance(exc, subprocess.CalledProcessError) else ""
        result = {"error": "%s %s" % (exc, detail)}
    print("RESULT " + json.dumps(result))


# In a namespace ---------------------------------------------------------------------------------------------

def case_namespace(spec, runner):
    """A point (or the reference) of a namespace kind, run by transaction.py's inside()."""
    spec = dict(spec, policy=NAMESPACE_KINDS[spec["kind"]], fixture="small")
    if spec["kind"] == "zram-fs":
        return tx.zram_case(dict(spec, case="zram-reference"), runner) if spec["point"] == "reference" else \
            case_zram(spec, runner)
    return tx.case_reference(spec, runner) if spec["point"] == "reference" else tx.case_reboot(spec, runner)


def inside_namespace(spec):
    tx.CASES["powercut-matrix"] = case_namespace
    tx.inside(dict(spec, case="powercut-matrix", point=spec["case"]))


def zram_cut(before):
    """What a power cut takes of the case's zram devices: their content (each reset; the number stays the case's, so
    that no device of another user of this kernel is taken for it at the boot) and those no record names (hot
    added by the dead run: a boot does not make them again). Returns the problems."""
    recorded = set(tx.zram_records().values())
    problems = []
    for name in tx.new_since(before, tx.zram_names()):
        if name not in recorded | tx.journal_devices():
            continue
        if name in tx.zram_swaps():
            subprocess.run(["swapoff", "/dev/" + name], check=False)
        actions = [("/sys/block/%s/reset" % name, "1")]
        if name not in recorded:
            actions.append(("/sys/class/zram-control/hot_remove", name[4:]))
        for attr, value in actions:
            try:
                with open(attr, "w", encoding="ascii") as handle:
                    handle.write(value)
            except OSError as exc:
                problems.append("the power cut could not write %s to %s: %s" % (value, attr, exc))
    return problems


def zram_boot():
    """The boot of a host without systemd, for zram: each recorded device made by the collection's setup script
    (what its unit runs), the file system made where /etc/fstab says x-systemd.makefs, then tx.boot()."""
    out = []
    for name in sorted(tx.zram_records()):
        done = subprocess.run(["sh", paths.ZRAM_SETUP, name], capture_output=True, text=True, check=False)
        out.append(["zram-setup " + name, done.returncode, (done.stderr or done.stdout).strip()[-300:]])
    listed = subprocess.run(["findmnt", "--fstab", "-J", "-o", "TARGET,SOURCE,FSTYPE,OPTIONS"], capture_output=True,
                            text=True, check=False)
    for line in json.loads(listed.stdout)["filesystems"] if listed.stdout.strip() else []:
        if line["target"].startswith(tx.TOP + "/") and "x-systemd.makefs" in (line["options"] or ""):
            argv = MKFS.get(line["fstype"], ["mkfs", "-t", line["fstype"]]) + [line["source"]]
            done = subprocess.run(argv, capture_output=True, text=True, check=False)
            out.append([" ".join(argv), done.returncode, done.stderr.strip()[-300:]])
    return out + tx.boot()


def case_zram(spec, runner):
    """The zram file system: the run killed before journal write N (None: whole), a power cut (mounts, /run and the
    devices' content gone, a new boot id), the boot, the next run."""
    before = tx.zram_ids()
    fixture = tx.make_fixture(tx.ZDATA, tx.ZRAM_FIXTURE)
    inside = dict((rel, digest) for rel, digest in fixture.items() if rel != ".")
    out = {"problems": []}
    problems = out["problems"]
    try:
        first = tx.zram_run(runner, "zram-fs", kill_at=spec.get("n"))
        out["first"] = tx.outcome(first)
        if not first["killed"] and not first["ok"]:
            raise CaseError("the run neither died nor succeeded: %s" % (first["msg"] or first))
        lines = Journal(paths.JOURNAL).read()
        whats = {(line.get("run"), line.get("txn")): dict(line.get("what") or {}, path=(line.get("what") or {}).get(
            "zram")) for line in lines if line.get("t") == "txn"}
        out["killed_after"] = tx.describe_line(lines[-1] if lines else None, whats) if first["killed"] else \
            "(not killed)"
        out["taken"] = tx.power_cut(runner.work)
        problems += zram_cut(before)
        out["booted"] = zram_boot()
        found = tx.mounts_at(tx.ZDATA)
        out["boot"] = {"covered": {tx.ZDATA: ("%d entries" % len(os.listdir(tx.ZDATA))) if found else "nothing"}}
        if not found:
            out["boot"]["covered"] = {}
        disk, disk_problems = tx.disk_digest(runner.work, tx.ZDATA)
        problems += ["the disk copy after the boot: %s" % p for p in disk_problems + tx.compare_trees(
            fixture, disk, "fixture", "disk copy", root_mtime=True)]
        second = tx.zram_run(runner, "zram-fs")
        out["second"] = tx.outcome(second)
        if not second["ok"]:
            problems.append("the next run failed: %s" % second["msg"])
        if tx.mounts_at(tx.ZDATA):
            mounted, mounted_problems = tree_digest(tx.ZDATA)
            mounted = dict((rel, digest) for rel, digest in mounted.items() if rel != ".")
            problems += ["the mount at %s: %s" % (tx.ZDATA, p) for p in mounted_problems + tx.compare_trees(
                inside, mounted, "fixture", "mount", b_fs_root=True)][:10]
        else:
            problems.append("%s is not mounted after the next run" % tx.ZDATA)
        disk, disk_problems = tx.disk_digest(runner.work, tx.ZDATA)
        problems += ["the disk copy at the end: %s" % p for p in disk_problems + tx.compare_trees(
            fixture, disk, "fixture", "disk copy", root_mtime=True)]
        out["state"] = tx.zram_state("zram-fs")
        out["fixture"] = tx.digest_hash(fixture)
        return out
    finally:
        out["removed"], cleaned = tx.zram_clean(before)
        problems += cleaned


# The drivers (on this machine) ------------------------------------------------------------------------------

class ContainerDriver(ps.Driver):
    """A point in a container of its own: the first phase, the power cut (docker kill, docker start, a new boot id),
    the phase after."""

    def exec_phase(self, name, spec, phase):
        done = self.docker("exec", name, "python3", "%s/tests/transaction/powercut_matrix.py" % ps.STAGE, "--inside",
                           json.dumps(dict(spec, phase=phase, **self.role)), timeout=900)
        line = [text for text in done.stdout.splitlines() if text.startswith("RESULT ")]
        if not line:
            raise CaseError("the %s phase ended (exit %s) without a result: %s" % (
                phase, done.returncode, (done.stderr + done.stdout)[-1500:]))
        result = json.loads(line[-1][len("RESULT "):])
        if result.get("error"):
            raise CaseError("the %s phase: %s" % (phase, result["error"]))
        return result, done.stderr + done.stdout

    def power_cut(self, name):
        for argv in (("kill", name), ("start", name)):
            done = self.docker(*argv)
            if done.returncode != 0:
                raise CaseError("docker %s failed: %s" % (" ".join(argv), done.stderr.strip()))
        self.wait_running(name)
        boot_id = "/run/powercut-boot-id"
        bound = self.docker("exec", name, "sh", "-c", 'echo %s > %s && mount --bind %s /proc/sys/kernel/random/boot_id'
                            % (uuid.uuid4(), boot_id, boot_id))
        if bound.returncode != 0:
            raise CaseError("the new boot id could not be bound: %s" % bound.stderr.strip())

    def case(self, spec):
        with self.lock:
            self.number += 1
            name = "%s%s-%03d-%s" % (CONTAINER_PREFIX, self.tag, self.number, spec["name"])
        began = time.monotonic()
        log = []
        result = {}
        try:
            self.start(name)
            result["boot_seconds"] = round(time.monotonic() - began, 1)
            first, text = self.exec_phase(name, spec, "first")
            log.append(text)
            cut = time.monotonic()
            self.power_cut(name)
            result["cut_seconds"] = round(time.monotonic() - cut, 1)
            after, text = self.exec_phase(name, spec, "after")
            log.append(text)
            result.update(after, killed_after=first["killed_after"], saved=first["saved"], first=first["first"],
                          runs=first["runs"] + after["runs"])
        except (CaseError, subprocess.TimeoutExpired) as exc:
            result["error"] = str(exc)
        finally:
            self.docker("rm", "-f", name)
        result["seconds"] = round(time.monotonic() - began, 1)
        keep(self.keep, self.number, spec, result, "".join(log))
        return result


def keep(directory, number, spec, result, log):
    if result.get("error") or result.get("problems"):
        kept = os.path.join(directory, "%03d-%s" % (number, spec["name"]))
        os.makedirs(kept, exist_ok=True)
        with open(os.path.join(kept, "log"), "w", encoding="utf-8") as handle:
            handle.write(log)
        with open(os.path.join(kept, "result.json"), "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=1)


class Drivers(object):
    """The namespace kinds to transaction.py's driver (which runs this file inside), the others to containers."""

    def __init__(self, namespace, container, queue):
        self.namespace = namespace
        self.container = container
        self.queue = queue

    def case(self, spec):
        result = (self.namespace if spec["kind"] in NAMESPACE_KINDS else self.container).case(spec)
        # A line as each point ends: a run stopped early still shows what it found.
        print("transaction-powercut: %s: %s, %.0f s" % (spec["name"], "ERROR %s" % result["error"][:200] if result.get(
            "error") else "%d problems" % len(result.get("problems") or []), result.get("seconds") or 0), flush=True)
        if result.get("error") and spec["case"] == "kill":
            # A point that could not run ends its kind's series: the table shows the error, the count is short.
            self.queue.finished_at(spec["n"], spec["kind"])
        return result


# The report -------------------------------------------------------------------------------------------------

def normal(state):
    """STATE without what a boot decides and no run keeps: the helper's state directory in /run (the boot's restore
    makes it), and a tmpfs's mode option (a run mounts with the mode's permission bits and sets the rest on the root;
    the boot mounts /etc/fstab's line, which has them all), and whether the test's service runs."""
    state = json.loads(json.dumps(state))
    state["run_dir"] = [name for name in state.get("run_dir") or [] if name != "persist"]
    state["persist"]["persist_run"] = state["persist"]["persist_run"] or None
    # The test's service is started, not enabled: the boot leaves it stopped, and the next run starts it when its
    # transaction stopped it (services stopped and started around persist), which says nothing of the data.
    state["persist"].pop("service", None)
    for found in state["mounts"].values():
        for mount in found:
            mount["options"] = ",".join(o for o in mount["options"].split(",") if not o.startswith("mode="))
    return state


def compare(reference, result, name):
    """Problems of RESULT against REFERENCE's end state. Live and remove keep the older data when the cut came
    before it was saved: their trees and backing copy are checked against that data instead."""
    if result.get("error"):
        return ["%s: %s" % (name, result["error"][:1500])]
    problems = ["%s: %s" % (name, p) for p in result.get("problems") or []]
    if reference.get("error") or "state" not in reference:
        return problems + ["%s: no reference end state to compare with" % name]
    ref, state = normal(reference["state"]), normal(result["state"])
    if result.get("survivor") not in (None, reference.get("survivor")):
        for part in (ref, state):
            part.pop("trees", None)
            part["persist"]["backing_current"] = None
    problems += ["%s: end state differs: %s" % (name, d) for d in tx.state_diff(ref, state)][:8]
    return problems


def compare_zram(reference, result, name):
    """Problems of RESULT against the zram reference's end state (device numbers aside)."""
    if result.get("error"):
        return ["%s: %s" % (name, result["error"][:1500])]
    problems = ["%s: %s" % (name, p) for p in result.get("problems") or []]
    if reference.get("error") or "state" not in reference:
        return problems + ["%s: no reference end state to compare with" % name]
    return problems + ["%s: end state differs: %s" % (name, d) for d in tx.state_diff(reference["state"],
                                                                                      result["state"])][:8]


def report(kind, results, reference, end, stride=1, start=1):
    """The table of KIND. Returns (problems, points, failed points)."""
    problems, failed = [], []
    if end is None:
        problems.append("%s: no run with %s=N (N up to %d) finished" % (kind, tx.KILL_ENV, ps.MAX_KILL_AT))
        end = max([int(name.rsplit("-", 1)[1]) for name in results if name.startswith("%s-kill-" % kind)] or [0])
        print("\n%s: cut short: %d points run, the run not yet whole." % (kind, end))
    elif stride > 1:
        print("\n%s: a power cut at points %d, %d, %d, ... (N-1 journal writes done) up to the whole run (N=%d)."
              % (kind, start, start + stride, start + 2 * stride, end))
    else:
        print("\n%s: %d journal writes in an uninterrupted run; a power cut after each (N-1 writes done), and after "
              "the whole run (N=%d)." % (kind, end - 1, end))
    container = kind in CONTAINER_KINDS
    wide = 13 if kind == "log" else 8
    if container:
        # The log kind's fixed data is always the fixture: its column says what journald's files gave instead (the
        # copies on disk that hold the fixture whole, directory/backing; then what journalctl read after the boot).
        print("%4s  %-30s %-14s %-23s %-*s %-26s %-4s %s" % (
            "N", "cut after (journal)", "saved", "after boot m/d/b", wide, "jrnl d/b,boot" if kind == "log" else "data",
            "the next run recovered", "2nd", "verdict"))
    else:
        print("%4s  %-30s %-26s %-34s %-4s %s" % ("N", "cut after (journal)", "mounted by the boot",
                                                  "the next run recovered", "2nd", "verdict"))
    for n in range(1, end + 1):
        if "%s-kill-%d" % (kind, n) not in results and (stride > 1 or n < start):
            continue
        result = results.get("%s-kill-%d" % (kind, n)) or {"error": "not run"}
        found = compare(reference, result, "%s point %d" % (kind, n)) if container else \
            compare_zram(reference, result, "%s point %d" % (kind, n)) if kind == "zram-fs" else \
            tx.compare(reference, result, "%s point %d" % (kind, n))[:8]
        problems += found
        if found:
            failed.append(n)
        verdict = "pass" if not found else "FAIL"
        if result.get("error"):
            print("%4d  ERROR %s" % (n, result["error"][:200]))
            continue
        second = result["second"]
        recovered = (", ".join(r.replace("plan: ", "") for r in second["recovered"]) or "nothing")[:26]
        if container:
            boot = result["boot"]
            print("%4d  %-30s %-14s %-23s %-*s %-26s %-4s %s" % (
                n, result["killed_after"][:30], (",".join(s.split()[1] for s in result["saved"]) or "nothing")[:14]
                if result["first"]["killed"] else "all",
                "%s/%s/%s" % (boot["mount"], boot["disk"], boot["backing"]), wide, "%s,%s" % (
                    result["journal"]["copies"], result["journal"]["boot_view"]) if kind == "log" else
                result["survivor"], recovered,
                "ok" if second["ok"] else "FAIL", verdict))
        else:
            booted = ",".join("%s (%s)" % (os.path.basename(path), what) for path, what in
                              sorted(result["boot"]["covered"].items())) or "nothing"
            print("%4d  %-30s %-26s %-34s %-4s %s" % (n, result["killed_after"][:30], booted[:26], recovered[:34],
                                                      "ok" if second["ok"] else "FAIL", verdict))
    return problems, len([n for n in range(1, end + 1) if "%s-kill-%d" % (kind, n) in results]), failed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--inside")
    parser.add_argument("--work")
    parser.add_argument("--keep", default=os.path.join(tx.REPO, "build", "transaction-powercut"))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--image", default=ps.IMAGE)
    parser.add_argument("--tag", default=str(os.getpid()))
    parser.add_argument("--only", default=",".join(KINDS))
    parser.add_argument("--except", dest="skip", default="", help="every kind but these")
    parser.add_argument("--max", type=int, default=ps.MAX_KILL_AT, help="at most this many points of a kind")
    parser.add_argument("--stride", type=int, default=1, help="of the container kinds, every Nth point only")
    parser.add_argument("--start", type=int, default=1, help="the first point of each kind")
    args = parser.parse_args()
    if args.inside:
        spec = json.loads(args.inside)
        if spec["kind"] in NAMESPACE_KINDS:
            inside_namespace(spec)
        else:
            inside_container(spec)
        return 0
    skip = [kind for kind in args.skip.split(",") if kind]
    kinds = [kind for kind in KINDS if kind in args.only.split(",") and kind not in skip]
    unknown = (set(args.only.split(",")) | set(skip)) - set(KINDS)
    if unknown:
        print("transaction-powercut: unknown kinds %s (known: %s)" % (sorted(unknown), ", ".join(KINDS)))
        return 2
    began = time.monotonic()
    shutil.rmtree(args.keep, ignore_errors=True)
    # transaction.py's driver runs a namespace case as `SELF --inside SPEC`: this file.
    tx.SELF = os.path.abspath(__file__)
    namespace = tx.Driver(os.path.join(args.work, "namespaces"), args.keep)
    container = None
    if set(kinds) & set(CONTAINER_KINDS):
        purposes, defaults = tx.role_vars()
        stage = ps.make_stage(args.work)
        shutil.copy(os.path.abspath(__file__), os.path.join(stage, "tests", "transaction"))
        container = ContainerDriver(args.work, args.keep, args.image, args.tag, stage,
                                    {"purposes": purposes, "defaults": defaults})
    # The references: namespace kinds an uninterrupted run; container kinds a cut after the whole run (so each
    # point is compared with a host that went through a boot too).
    ps.MAX_KILL_AT = args.max
    # zram devices are the kernel's: a case counts its own by what is new, so those points run one at a time.
    serial = [kind for kind in kinds if kind in SERIAL_KINDS]
    queue = ps.Queue([{"name": "reference-%s" % kind, "case": "reference", "kind": kind} for kind in kinds
                      if kind not in serial], [kind for kind in kinds if kind not in serial])
    queue.stride = dict((kind, args.stride) for kind in CONTAINER_KINDS)
    queue.next = dict((kind, args.start) for kind in queue.next)
    try:
        results = tx.run_all(Drivers(namespace, container, queue), queue, args.jobs)
        if serial:
            alone = ps.Queue([{"name": "reference-%s" % kind, "case": "reference", "kind": kind} for kind in serial],
                             serial)
            results.update(tx.run_all(Drivers(namespace, container, alone), alone, 1))
            queue.end.update(alone.end)
    finally:
        # Each point removes its container; these are the ones a stopped run left.
        listed = subprocess.run(["docker", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True,
                                check=False).stdout.split()
        for name in [name for name in listed if name.startswith("%s%s-" % (CONTAINER_PREFIX, args.tag))]:
            subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)
    problems, points, failed = [], 0, {}
    for kind in kinds:
        reference = results["reference-%s" % kind]
        if reference.get("error") or reference.get("problems"):
            problems.append("reference %s: %s" % (kind, reference.get("error") or reference["problems"]))
        found, count, failed[kind] = report(kind, results, reference, queue.end[kind],
                                            queue.stride.get(kind, 1), args.start)
        problems += found
        points += count
    print("\nPoints by kind: %s; failed points: %s" % (
        ", ".join("%s %d" % (kind, (queue.end[kind] or 0)) for kind in kinds),
        "; ".join("%s %s" % (kind, ",".join(map(str, failed[kind]))) for kind in kinds if failed[kind]) or "none"))
    for problem in problems:
        print("FAIL: %s" % problem)
    if points < MIN_POINTS and set(kinds) | set(skip) == set(KINDS):
        problems.append("only %d points (at least %d expected)" % (points, MIN_POINTS))
        print("FAIL: %s" % problems[-1])
    cases = list(results.values())
    print("transaction-powercut: %d points (%d cases with the references); %s; %.0f s on %d workers (a case %.1f s "
          "on average, %.0f s of cases in all)" % (
              points, len(cases), "%d problems" % len(problems) if problems else "all properties held",
              time.monotonic() - began, args.jobs, sum(r.get("seconds") or 0 for r in cases) / max(len(cases), 1),
              sum(r.get("seconds") or 0 for r in cases)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
