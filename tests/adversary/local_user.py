# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A local user against a persisted RAM mount (issue 41; run by scripts/test/local_user.sh, make test-local-user).

Each attack runs in a fresh systemd container of the lab's Debian 12 image (advuser-TAG-ATTACK). The collection is
applied as the entry role does it (ramdisk_plan, then ramdisk_apply with the persist helper; tests/transaction/
persist.py's Runner): /srv/adv/public, a 64M tmpfs of mode 1777 (what the tmp purpose gives), kept in
/var/lib/ramdisk-backing/advuser with a 10 s timer, while root starts the sync service back to back as the timer
does (systemctl start). Root-only canaries with random content: /root/adv-secret, /etc/adv-secret,
/var/lib/adv-secret/key (0700 directory), /etc/adv-target; /etc/shadow and /etc/gshadow count too. The user
mallory (uid 2000) then attacks for --seconds (30) while writing numbered witness files into the mount:

- backing:      write the backing, its copies, its parents and the collection's state directories (create, mkdir,
                symlink, rename, unlink, chmod, open for writing): every attempt must fail.
- backing-user: a backing directory owned by mallory: the plan must refuse it before any change. Where it is
                accepted, mallory plants a commit record that sets /etc/adv-target's owner and mode, and swaps the
                copy current names for a link to /root.
- parent-user:  the backing's parent owned by mallory (the backing root's): refused, or the same attack after
                mallory swaps the backing for one of hers.
- plant:        the helper's names in the mount root: .ramdisk-persist-partial, .persist-delta (with a commit
                record), current, snap-*, .new-*, lost+found as files, directories and links to root-only
                places; 255-byte names, a deep path, names with a newline, '-rf', '*', non-UTF-8 bytes.
- swap:         directories of hers swapped for links to /root, /etc and /var/lib/adv-secret (and a file for a
                link to /etc/shadow) in a tight loop while the syncs run.
- fill:         the mount filled to ENOSPC and kept full.
- inodes:       --inodes empty files (1,000,000), as many as the mount's nr_inodes (--nr-inodes: 20,000, which keeps
                the suite within minutes on a busy machine; 1010000 for the whole million) and the time allow.
                The whole million, `--only inodes --nr-inodes 1010000` on c038feb here beside other work: every
                check held, 1,001,305 entries synced, restored after the power cut and synced again (352 s).

After each attack (the user stopped, her files left as they are), the checks, each printed with ok or FAIL: syncs
went on during the attack (at least half of those begun after its first third succeeded, each with every witness
written before it in current; the helper's words for each failure are printed); a sync after it succeeds (the status
file's RESULT=ok) and current equals the mount (tree_digest); no file outside the mount and the backing changed
owner, mode or content (/etc, /root, /usr/local, /var/lib/ramdisk-provision and the collection's state directories,
hashed; every file of the container's root file system for owner and mode); no file of mallory's outside the places
she may write; no root-only content (the canaries, shadow) anywhere in the mount or the backing. Then a power cut
(docker kill, docker start): the boot's restore gives the mount back equal to the last synced current, every witness
of the last successful sync in it, the same checks again, and a sync.

Usage: local_user.py [--only backing,plant,...] [--jobs N] [--seconds S] [--inodes N] [--image IMAGE]
       [--tag TAG]. Prints a verdict per attack; exits 1 when an attack's check failed, 2 when the test could not run.
"""

from __future__ import annotations

import argparse
import errno
import hashlib
import json
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "transaction"))

# pylint: disable=wrong-import-position
import persist  # noqa: E402
import transaction as tx  # noqa: E402
from transaction import paths  # noqa: E402
from ansible_collections.ramdisk.provision.plugins.module_utils._persist import unit_names  # noqa: E402
from ansible_collections.ramdisk.provision.plugins.module_utils._tree import compare_trees, tree_digest  # noqa: E402
from ansible_collections.ramdisk.provision.plugins.module_utils._mount_steps import token  # noqa: E402

MOUNT = "/srv/adv/public"
BACKING = "/var/lib/ramdisk-backing/advuser"
USER_BACKING = "/srv/userback/advuser"
USER, UID, VICTIM_UID = "mallory", 2000, 2001
TOKEN = token(MOUNT)
UNITS = unit_names(TOKEN)
STATUS = os.path.join(paths.PERSIST_STATUS_DIR, TOKEN + ".status")
SAVED = "/var/lib/advuser-test"
CONTAINER_PREFIX = "advuser-"
ATTACKS = ("backing", "backing-user", "parent-user", "plant", "swap", "fill", "inodes")
SECRETS = ("/root/adv-secret", "/etc/adv-secret", "/var/lib/adv-secret/key", "/etc/adv-target")
ROOT_ONLY = SECRETS + ("/etc/shadow", "/etc/gshadow")
# Hashed whole before and after: a change of owner, mode or content there is a failure.
WATCHED = ("/etc", "/root", "/usr/local", paths.STATE_DIR, paths.RUN_DIR, "/var/lib/adv-secret")
# Rewritten by every sync (content only; owner and mode still checked).
REWRITTEN = (STATUS, os.path.join(paths.PERSIST_STATE_DIR, TOKEN + ".restored"))
# Where mallory may own files.
HERS = (MOUNT, "/home/" + USER, "/tmp", "/var/tmp", "/dev/shm", "/run/user", "/srv/userback", "/proc")
SYNC_TIMEOUT = 600


# As mallory (run with setpriv as uid 2000) ---------------------------------------------------------------------

def attempt(done, what, call, *args):
    """CALL(*ARGS), recording WHAT in DONE when it succeeded (it must not)."""
    try:
        call(*args)
    except OSError:
        return False
    done.add(what)
    return True


def write_file(path, data, mode=0o644):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def remove(path):
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    except FileNotFoundError:
        pass


def evil_record(gen=1):
    """A commit record whose one operation sets /etc/adv-target's owner to mallory and its mode to 04777."""
    meta = {"kind": "f", "uid": UID, "gid": UID, "xattrs": [], "mode": 0o104777, "mtime_ns": 0, "size": 0}
    return json.dumps({"gen": gen, "keep": 2, "base": "x", "made": 0, "digest": "",
                       "ops": [{"op": "attrs", "path": "/etc/adv-target", "new": meta, "old": meta}]}).encode()


def witness_loop(stop, folder):
    """Numbered witness files, each complete before it has its name (written aside, then renamed)."""
    os.makedirs(folder, exist_ok=True)
    number = 0
    while not stop.is_set():
        number += 1
        name = "w%06d" % number
        try:
            write_file(os.path.join(folder, ".tmp"), witness_text(name))
            os.rename(os.path.join(folder, ".tmp"), os.path.join(folder, name))
        except OSError:
            number -= 1
        stop.wait(0.1)


def witness_text(name):
    return ("%s of %s\n" % (name, USER) * 20).encode()


def attack_backing(stop, report, backing):
    """Every way of writing the backing, its parents and the state directories, for as long as the attack runs."""
    done = set()
    dirs = [backing, os.path.join(backing, "current"), os.path.join(backing, ".persist-delta"),
            os.path.dirname(backing), "/var/lib", paths.STATE_DIR, paths.PERSIST_STATUS_DIR, paths.PERSIST_CONF_DIR,
            paths.PERSIST_STATE_DIR, paths.LIBEXEC_DIR, paths.UNIT_DIR]
    files = [os.path.join(backing, "current"), STATUS, paths.persist_conf_file(TOKEN), paths.PERSIST_HELPER,
             paths.PERSIST_DELTA, os.path.join(paths.UNIT_DIR, UNITS["sync"])]
    rounds = 0
    while not stop.is_set():
        rounds += 1
        for folder in dirs:
            attempt(done, "create a file in %s" % folder, write_file, os.path.join(folder, "adv-file"), b"x")
            attempt(done, "mkdir in %s" % folder, os.mkdir, os.path.join(folder, "adv-dir"))
            attempt(done, "symlink in %s" % folder, os.symlink, "/root", os.path.join(folder, "adv-link"))
            attempt(done, "chmod %s" % folder, os.chmod, folder, 0o777)
            attempt(done, "rename %s" % folder, os.rename, folder, folder + ".adv")
        for path in files:
            attempt(done, "open %s for writing" % path, lambda p: os.close(os.open(p, os.O_WRONLY | os.O_APPEND)),
                    path)
            attempt(done, "chmod %s" % path, os.chmod, path, 0o777)
            attempt(done, "unlink %s" % path, os.unlink, path)
            attempt(done, "hard link %s into the mount" % path, os.link, path, os.path.join(MOUNT, "adv-hardlink"))
        try:
            for name in os.listdir(backing):
                attempt(done, "unlink %s/%s" % (backing, name), os.unlink, os.path.join(backing, name))
        except OSError:
            pass
        stop.wait(0.05)
    report["succeeded"] = sorted(done)
    report["rounds"] = rounds


def attack_backing_owned(stop, report, backing):
    """Mallory owns the backing (or its parent): a commit record against /etc/adv-target, then the copy current
    names swapped for a link to /root."""
    done = set()
    if not os.access(backing, os.W_OK):
        # Her parent, root's backing: a backing of hers instead, its current on a copy of hers.
        if attempt(done, "rename root's backing aside", os.rename, backing, backing + ".root"):
            os.mkdir(backing)
            os.mkdir(os.path.join(backing, "snap-20000101T000000.000000000Z"))
            os.symlink("snap-20000101T000000.000000000Z", os.path.join(backing, "current"))
    began = time.monotonic()
    while not stop.is_set():
        state = os.path.join(backing, ".persist-delta")
        attempt(done, "plant a commit record", plant_record, state)
        if time.monotonic() - began > 10:
            attempt(done, "swap current's copy for a link to /root", swap_copy, backing)
        stop.wait(0.2)
    report["succeeded"] = sorted(done)


def plant_record(state):
    os.makedirs(state, exist_ok=True)
    if not os.path.exists(os.path.join(state, "commit.json")):
        write_file(os.path.join(state, "commit.json.new"), evil_record(900))
        os.rename(os.path.join(state, "commit.json.new"), os.path.join(state, "commit.json"))


def swap_copy(backing):
    target = os.readlink(os.path.join(backing, "current"))
    copy = os.path.join(backing, target)
    if os.path.islink(copy):
        return
    os.rename(copy, copy + ".away")
    os.symlink("/root", copy)


ODD_NAMES = [b"x" * 255, b"line\nbreak", b"-rf", b"*", b" ", b"back\\slash", b"$(touch /tmp/pwned)", b"\xff\xfe bytes",
             b".", b"lost+found"]


def attack_plant(stop, report, _backing):
    """The helper's own names in the mount root, as files, directories and links, changed over and over."""
    root = os.fsencode(MOUNT)
    rounds = 0
    while not stop.is_set():
        rounds += 1
        for kind in ("file", "dir", "link"):
            for name, target in ((".ramdisk-persist-partial", "/etc/shadow"), ("current", "/root"),
                                 ("snap-20000101T000000.000000000Z", "/etc"), (".new-20000101T000000.000000000Z",
                                                                               "/root"),
                                 (".current-20000101T000000.000000000Z", "/root"), ("lost+found", "/root"),
                                 (".persist-delta", "/var/lib/adv-secret")):
                path = os.path.join(MOUNT, name)
                remove(path)
                try:
                    if kind == "file":
                        write_file(path, b"planted\n")
                    elif kind == "dir":
                        os.mkdir(path)
                        write_file(os.path.join(path, "commit.json"), evil_record())
                    else:
                        os.symlink(target, path)
                except OSError:
                    pass
            stop.wait(0.3)
        for name in ODD_NAMES:
            try:
                write_file(os.path.join(root, b"odd-" + name[:250].replace(b"/", b"_")), name)
            except OSError:
                pass
        deep = os.path.join(MOUNT, "deep")
        try:
            os.makedirs(os.path.join(deep, *["d%03d" % n for n in range(100)]), exist_ok=True)
        except OSError:
            pass
    # What she leaves: the marker as a file, a commit record where the helper keeps its own, links out.
    for name in (".ramdisk-persist-partial", ".persist-delta", "current", "lost+found"):
        remove(os.path.join(MOUNT, name))
    write_file(os.path.join(MOUNT, ".ramdisk-persist-partial"), b"planted\n")
    os.mkdir(os.path.join(MOUNT, ".persist-delta"))
    write_file(os.path.join(MOUNT, ".persist-delta", "commit.json"), evil_record())
    os.symlink("/root", os.path.join(MOUNT, "current"))
    os.symlink("/root", os.path.join(MOUNT, "lost+found"))
    report["rounds"] = rounds


SWAP_TARGETS = ("/root", "/etc", "/var/lib/adv-secret")


def attack_swap(stop, report, _backing):
    """Her directories swapped for links to root-only places and back, in a tight loop."""
    top = os.path.join(MOUNT, "swap")
    os.makedirs(top, exist_ok=True)
    for number in range(len(SWAP_TARGETS)):
        os.makedirs(os.path.join(top, "d%d" % number, "sub"), exist_ok=True)
        write_file(os.path.join(top, "d%d" % number, "sub", "mine"), b"hers\n")
        write_file(os.path.join(top, "f%d" % number), b"hers\n")
    swaps = 0
    while not stop.is_set():
        for number, target in enumerate(SWAP_TARGETS):
            folder, aside = os.path.join(top, "d%d" % number), os.path.join(top, ".d%d" % number)
            plain, plain_aside = os.path.join(top, "f%d" % number), os.path.join(top, ".f%d" % number)
            try:
                os.rename(folder, aside)
                os.symlink(target, folder)
                os.rename(plain, plain_aside)
                os.symlink("/etc/shadow", plain)
                swaps += 1
                # A walk that saw a directory must then find the link for the whole of its subtree: the link held
                # from nothing up to 20 ms, the directory back only briefly.
                time.sleep(random.choice((0, 0, 0.001, 0.005, 0.02)))
                os.unlink(folder)
                os.rename(aside, folder)
                os.unlink(plain)
                os.rename(plain_aside, plain)
            except OSError:
                # ENOSPC or a race with herself: start the pair again next round.
                for path, back in ((folder, aside), (plain, plain_aside)):
                    if os.path.lexists(back):
                        remove(path)
                        os.rename(back, path)
    report["swaps"] = swaps


def attack_fill(stop, report, _backing):
    """The mount filled to ENOSPC, then kept full (a file removed, another written until full again)."""
    top = os.path.join(MOUNT, "fill")
    os.makedirs(top, exist_ok=True)
    written, number = 0, 0
    chunk = b"f" * (1 << 20)
    try:
        fd = os.open(os.path.join(top, "big"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            while not stop.is_set():
                written += os.write(fd, chunk)
        finally:
            os.close(fd)
    except OSError as exc:
        report["big"] = "%d bytes, then %s" % (written, errno.errorcode.get(exc.errno))
    full = 0
    while not stop.is_set():
        number += 1
        path = os.path.join(top, "small-%06d" % number)
        try:
            write_file(path, b"s" * 65536)
        except OSError:
            full += 1
            remove(path)
            remove(os.path.join(top, "small-%06d" % max(1, number - 50)))
            stop.wait(0.05)
    report["times_full"] = full


def attack_inodes(stop, report, _backing, count):
    """COUNT empty files (1000 a directory), as many as she makes in time."""
    top = os.path.join(MOUNT, "inodes")
    made = 0
    failure = ""
    while made < count and not stop.is_set():
        folder = os.path.join(top, "d%04d" % (made // 1000))
        try:
            os.makedirs(folder, exist_ok=True)
            for number in range(1000):
                os.close(os.open(os.path.join(folder, "f%03d" % number), os.O_WRONLY | os.O_CREAT, 0o644))
            made += 1000
        except OSError as exc:
            failure = errno.errorcode.get(exc.errno, str(exc.errno))
            break
    report["made"] = made
    report["stopped_by"] = failure or ("time" if made < count else "count")


def attacker(spec):
    """As mallory: the witnesses and the attack for spec['seconds']; a JSON report on stdout."""
    stop = threading.Event()
    report = {"attack": spec["attack"]}
    witnesses = threading.Thread(target=witness_loop, args=(stop, os.path.join(MOUNT, "witness-" + USER)))
    witnesses.start()
    timer = threading.Timer(spec["seconds"], stop.set)
    timer.start()
    try:
        name = spec["attack"]
        if name == "backing":
            attack_backing(stop, report, spec["backing"])
        elif name in ("backing-user", "parent-user"):
            attack_backing_owned(stop, report, spec["backing"])
        elif name == "inodes":
            attack_inodes(stop, report, spec["backing"], spec["inodes"])
        else:
            {"plant": attack_plant, "swap": attack_swap, "fill": attack_fill}[name](stop, report, spec["backing"])
    except OSError as exc:
        report["error"] = str(exc)
    stop.wait()
    timer.cancel()
    witnesses.join()
    print(json.dumps(report))


# As root, in the container ---------------------------------------------------------------------------------------

def run(*argv, check=True, timeout=SYNC_TIMEOUT):
    done = subprocess.run(list(argv), capture_output=True, text=True, check=False, timeout=timeout)
    if check and done.returncode != 0:
        raise tx.CaseError("%s: exit %d: %s %s" % (" ".join(argv), done.returncode, done.stdout[-800:],
                                                   done.stderr[-800:]))
    return done


def sha(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def watched_snapshot():
    """Owner, mode and content (or link target) of every entry under WATCHED."""
    found = {}
    for top in WATCHED:
        if not os.path.lexists(top):
            continue
        for folder, dirs, files in os.walk(top):
            for name in [""] + dirs + files:
                path = os.path.join(folder, name) if name else folder
                # The status's temporary file, there while a sync (the timer's too) writes the status.
                if (name == "" and folder != top) or path.startswith(STATUS + "."):
                    continue
                st = os.lstat(path)
                if stat.S_ISREG(st.st_mode):
                    content = "rewritten" if path in REWRITTEN or path.startswith(paths.PERSIST_STATE_DIR) \
                        else sha(path)
                elif stat.S_ISLNK(st.st_mode):
                    content = "-> " + os.readlink(path)
                else:
                    content = ""
                found[path] = [st.st_uid, st.st_gid, "%o" % st.st_mode, content]
    return found


def root_fs_modes():
    """Owner and mode of every entry of the container's root file system outside the mount, the backings and the
    test's own state."""
    skip = (MOUNT, BACKING, USER_BACKING, os.path.dirname(USER_BACKING), SAVED, "/var/log/journal", "/proc", "/run/")
    root_dev = os.lstat("/").st_dev
    return dict((path, [st.st_uid, st.st_gid, "%o" % st.st_mode]) for path, st in entries(
        "/", lambda path, st: st.st_dev == root_dev and not (path + "/").startswith(skip)))


def entries(top, descend=None):
    """(path, lstat) of every entry below TOP, never through a link; DESCEND(path, lstat) says which directories
    to enter."""
    for folder, dirs, files in os.walk(top):
        kept = []
        for name in dirs + files:
            path = os.path.join(folder, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if name in dirs and (descend is None or descend(path, st)):
                kept.append(name)
            yield path, st
        dirs[:] = [name for name in dirs if name in kept]


def differences(before, after, what, both_only=False):
    out = []
    for path in sorted(set(before) & set(after) if both_only else set(before) | set(after)):
        if before.get(path) != after.get(path):
            out.append("%s %s: %s -> %s" % (what, path, before.get(path, "absent"), after.get(path, "absent")))
    return out


def hers_outside():
    """Files of mallory's where she may not write (the whole root file system)."""
    root_dev = os.lstat("/").st_dev
    allowed = tuple(place + "/" for place in HERS + (BACKING,))
    return [path for path, st in entries("/", lambda path, st: st.st_dev == root_dev and not
                                         (path + "/").startswith(allowed))
            if st.st_uid == UID and not (path + "/").startswith(allowed)]


def secret_digests():
    digests = {}
    for path in ROOT_ONLY:
        st = os.stat(path)
        if st.st_size:
            digests.setdefault(st.st_size, {})[sha(path)] = path
    return digests


def leaks(secrets, *tops):
    """Entries of TOPS with the content of a root-only file, or one's name, that are not links."""
    found = []
    names = set(os.path.basename(path) for path in ROOT_ONLY)
    for top in tops:
        for path, st in entries(top):
            if os.path.basename(path) in names and not stat.S_ISLNK(st.st_mode):
                found.append("%s (named as a root-only file)" % path)
            if stat.S_ISREG(st.st_mode) and st.st_size in secrets:
                same = secrets[st.st_size].get(sha(path))
                if same:
                    found.append("%s holds %s" % (path, same))
    return found


def witnesses_in(folder):
    """{name: content} of the complete witness files in FOLDER."""
    out = {}
    try:
        names = os.listdir(folder)
    except OSError:
        return out
    for name in names:
        if name.startswith("w"):
            try:
                with open(os.path.join(folder, name), "rb") as handle:
                    out[name] = hashlib.sha256(handle.read()).hexdigest()
            except OSError:
                out[name] = None
    return out


def missing(expected, folder):
    there = witnesses_in(folder)
    return sorted(name for name, digest in expected.items() if there.get(name) != digest)


def status():
    try:
        with open(STATUS, encoding="utf-8") as handle:
            return dict(line.split("=", 1) for line in handle.read().splitlines() if "=" in line)
    except OSError:
        return {}


def sync_once(backing):
    """One sync as the timer starts it; (result, the witnesses that are not in current after an ok one)."""
    folder = os.path.join(MOUNT, "witness-" + USER)
    expected = witnesses_in(folder)
    # systemd refuses a unit started more than 5 times in 10 s: the loop starts it far more often than a timer.
    run("systemctl", "reset-failed", UNITS["sync"], check=False)
    began = time.time()
    done = run("systemctl", "start", UNITS["sync"], check=False)
    found = status()
    result = found.get("RESULT", "none")
    if not os.path.exists(STATUS) or os.stat(STATUS).st_mtime < began - 0.01:
        said = run("journalctl", "-q", "--no-pager", "-o", "cat", "-n", "3", "-u", UNITS["sync"], check=False).stdout
        result = "no status (exit %d; the unit's journal: %s)" % (done.returncode, " / ".join(said.splitlines())[-300:])
    lost = missing(expected, os.path.join(backing, "current", "witness-" + USER)) if result == "ok" else []
    if result != "ok":
        # Why, in the helper's words: its last line in the unit's journal.
        said = run("journalctl", "-q", "--no-pager", "-o", "cat", "-n", "20", "-u", UNITS["sync"],
                   check=False).stdout.splitlines()
        said = [line for line in said if line.startswith("persist")] or said or [""]
        result = "%s (%s)" % (result, said[-1][:240])
    return result, lost, expected, began


def sync_loop(stop, backing, log):
    while not stop.is_set():
        log.append(sync_once(backing))
        stop.wait(0.2)


def tree(path):
    """tree_digest(), or nothing and why when PATH cannot be read at all (current gone or dangling)."""
    try:
        return tree_digest(path)
    except OSError as exc:
        return {}, ["%s cannot be read: %s" % (path, exc)]


def attack_checks(spec, check, saved):
    """The checks after an attack; what the boot must give back goes to SAVED."""
    backing = spec["backing"]
    secrets = secret_digests()
    before, modes = watched_snapshot(), root_fs_modes()
    log = []
    stop = threading.Event()
    syncer = threading.Thread(target=sync_loop, args=(stop, backing, log))
    syncer.start()
    began = time.time()
    user = run("setpriv", "--reuid=%d" % UID, "--regid=%d" % UID, "--clear-groups", "python3",
               os.path.abspath(__file__),
               "--attacker", json.dumps(spec), check=False, timeout=spec["seconds"] * 4 + 120)
    stop.set()
    syncer.join()
    try:
        said = json.loads(user.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        said = {"error": "no report: %s %s" % (user.stdout[-300:], user.stderr[-500:])}
    print("  %s: mallory's report: %s" % (spec["attack"], json.dumps(said)[:600]), flush=True)
    results = [entry[0].split(" (")[0] for entry in log]
    oks = [entry for entry in log if entry[0] == "ok"]
    # Those begun after her first third: the first syncs may come before she did anything. A user who makes most
    # syncs fail keeps everyone's data from the disk as surely as one who makes all fail.
    late = [entry[0] for entry in log if entry[3] > began + spec["seconds"] / 3.0]
    why = sorted(set(entry[0] for entry in log if entry[0] != "ok"))
    check("syncs went on during the attack: %d ok of %d, %d ok of the %d begun after its first third (%s)%s" % (
        len(oks), len(log), late.count("ok"), len(late),
        ", ".join("%s %d" % (r, results.count(r)) for r in sorted(set(results))),
        "; failures: " + " | ".join(why[:3]) if why else ""),
        # Syncs slower than a third of the attack (a million inodes on a busy machine): all of them count.
        (late or results).count("ok") * 2 >= len(late or results) > 0)
    lost = sorted(set(name for entry in oks for name in entry[1]))
    check("every witness written before an ok sync was in its current (%d missing%s)" % (
        len(lost), ": " + " ".join(lost[:5]) if lost else ""), not lost)
    if said.get("succeeded"):
        check("mallory could not write the backing, its parents or the state (she did: %s)"
              % "; ".join(said["succeeded"][:8]), False)
    elif spec["attack"] == "backing":
        check("mallory could not write the backing, its parents or the state (%s rounds)" % said.get("rounds"), True)
    result, lost, count, _began = sync_once(backing)
    check("a sync after the attack: RESULT=%s" % result, result == "ok")
    check("its current holds the %d witnesses written before it (%s)" % (
        len(count), "%d missing" % len(lost) if result == "ok" else "the sync failed"), result == "ok" and not lost)
    mount, problems = tree(MOUNT)
    current, more = tree(os.path.join(backing, "current") + "/.")
    differ = compare_trees(mount, current, "mount", "current", root_mtime=False)
    check("current equals the mount (%d entries; %s)" % (len(mount), "; ".join((problems + more + differ)[:4])
                                                         or "same"), not differ and not problems + more)
    common_checks(check, before, modes, secrets, backing)
    # What the boot must give back: the witnesses of the last ok sync (this one, or the attack's last).
    saved["expected"] = ([count] + [entry[2] for entry in reversed(oks)])[0 if result == "ok" else 1] \
        if result == "ok" or oks else {}
    # The whole map where it is small enough to say what differs after the boot, else its hash.
    saved["current"] = current if len(current) < 100000 else tx.digest_hash(tx.without_root_mtime(current))
    saved["before"], saved["modes"], saved["secrets"] = before, modes, secrets


def common_checks(check, before, modes, secrets, backing):
    """BEFORE: watched_snapshot() (its /run part left out after a boot); MODES: root_fs_modes()."""
    after = watched_snapshot()
    if not any(path.startswith(paths.RUN_DIR) for path in before):
        after = dict((path, value) for path, value in after.items() if not path.startswith(paths.RUN_DIR))
    changed = differences(before, after, "")
    check("nothing under %s changed owner, mode or content (%d changed%s)" % (
        ", ".join(WATCHED), len(changed), ": " + "; ".join(changed[:6]) if changed else ""), not changed)
    moved = differences(modes, root_fs_modes(), "", both_only=True)
    check("no entry of the root file system changed owner or mode (%d%s)" % (
        len(moved), ": " + "; ".join(moved[:6]) if moved else ""), not moved)
    outside = hers_outside()
    check("no file of mallory's outside the places she may write (%d%s)" % (
        len(outside), ": " + " ".join(outside[:6]) if outside else ""), not outside)
    found = leaks(secrets, MOUNT, backing)
    check("nothing of a root-only place in the mount or the backing (%d%s)" % (
        len(found), ": " + "; ".join(found[:6]) if found else ""), not found)


def boot_checks(spec, check, saved):
    backing = spec["backing"]
    unit = run("systemctl", "show", "-p", "ActiveState", "--value", UNITS["persist"], check=False).stdout.strip()
    check("the persist unit after the boot: %s" % unit, unit == "active")
    if unit != "active":
        print(run("journalctl", "-q", "-b", "--no-pager", "-u", UNITS["persist"], check=False).stdout[-1500:])
    lost = missing(saved["expected"], os.path.join(MOUNT, "witness-" + USER))
    check("the restore gave back the %d witnesses of the last ok sync (%d missing%s)" % (
        len(saved["expected"]), len(lost), ": " + " ".join(lost[:5]) if lost else ""), not lost)
    mount, problems = tree(MOUNT)
    if isinstance(saved["current"], dict):
        problems += compare_trees(saved["current"], mount, "last synced current", "mount")
    elif tx.digest_hash(tx.without_root_mtime(mount)) != saved["current"]:
        problems.append("their digests differ")
    check("the mount equals the last synced current (%d entries%s)" % (len(mount), "; " + "; ".join(problems[:4])
                                                                       if problems else ""), not problems)
    watched = dict((path, value) for path, value in saved["before"].items()
                   if not path.startswith(paths.RUN_DIR))
    common_checks(check, watched, saved["modes"], dict((int(k), v) for k, v in saved["secrets"].items()), backing)
    result, lost, count, _began = sync_once(backing)
    check("a sync after the boot: RESULT=%s, %d of %d witnesses missing" % (result, len(lost), len(count)),
          result == "ok" and not lost)


def prepare(spec, runner):
    """Users, canaries, the backing (given to mallory for backing-user and parent-user), plan and apply. Returns
    the plan's refusal, or ''."""
    run("useradd", "-u", str(UID), "-m", USER)
    run("useradd", "-u", str(VICTIM_UID), "-M", "victim")
    os.makedirs("/var/lib/adv-secret", mode=0o700)
    for number, path in enumerate(SECRETS):
        # Distinct sizes and random bytes: the leak scan matches size, then hash.
        write_file(path, os.urandom(4000 + number * 111), 0o600)
    if spec["attack"] == "backing-user":
        os.makedirs(USER_BACKING)
        os.chown(USER_BACKING, UID, UID)
    elif spec["attack"] == "parent-user":
        os.makedirs(USER_BACKING, mode=0o700)
        os.chown(os.path.dirname(USER_BACKING), UID, UID)
    entry = {"path": MOUNT, "size": "64M", "mode": "1777", "persist": {"backing": spec["backing"], "interval": "10s"}}
    if spec["attack"] == "inodes":
        # She makes as many as the mount allows: --nr-inodes (20,000) keeps the suite's time; 1000000 for the whole.
        entry["nr_inodes"] = str(spec["nr_inodes"])
        entry["size"] = "512M"
    runner.entry = entry
    try:
        entries, _recovered = runner.plan("present")
    except tx.CaseError as exc:
        return str(exc)
    done = runner._finish(runner.apply_start(entries))  # pylint: disable=protected-access
    result = done["result"] or {}
    if done["rc"] != 0 or not done["result"] or result.get("failed"):
        return "ramdisk_apply: %s" % (result.get("msg") or done)
    # The victim's data and a sync of it before mallory starts.
    victim = os.path.join(MOUNT, "victim")
    os.mkdir(victim, 0o700)
    write_file(os.path.join(victim, "data"), b"the victim's\n" * 100, 0o600)
    os.chown(os.path.join(victim, "data"), VICTIM_UID, VICTIM_UID)
    os.chown(victim, VICTIM_UID, VICTIM_UID)
    return ""


def inside(spec):
    failures = []

    def check(what, ok):
        print("  %s: %s  %s" % (spec["attack"], "ok  " if ok else "FAIL", what), flush=True)
        if not ok:
            failures.append(what)

    os.makedirs(SAVED, exist_ok=True)
    saved_file = os.path.join(SAVED, "saved.json")
    try:
        if spec["phase"] == "attack":
            # Before issue 41's rewrite ramdisk_apply took the shell helper's text; after it, it installs its own.
            helper = []
            if hasattr(persist, "HELPER"):
                with open(persist.HELPER, encoding="utf-8") as handle:
                    helper.append(handle.read())
            runner = persist.Runner(persist.WORK, spec["purposes"], spec["defaults"], *helper)
            os.makedirs(persist.WORK, exist_ok=True)
            refused = prepare(spec, runner)
            if spec["attack"] in ("backing-user", "parent-user"):
                check("the plan refuses a backing mallory can write, naming it, before any change%s" % (
                    " (it said: %s)" % refused[:300] if refused else ": ACCEPTED, mounted"),
                    os.path.dirname(USER_BACKING) in refused)
                if refused:
                    with open("/etc/fstab", encoding="utf-8") as handle:
                        left = [what for what, there in (
                            ("a mount", tx.mounts_at(MOUNT)), ("an fstab line", MOUNT in handle.read()),
                            ("units", [unit for unit in UNITS.values()
                                       if os.path.lexists(os.path.join(paths.UNIT_DIR, unit))]),
                            ("its conf", os.path.lexists(paths.persist_conf_file(TOKEN)))) if there]
                    check("nothing of it made after the refusal (%s)" % (", ".join(left) or "none"), not left)
                    print("RESULT " + json.dumps({"failures": failures, "refused": True}))
                    return
            elif refused:
                raise tx.CaseError(refused)
            saved = {}
            attack_checks(spec, check, saved)
            saved["secrets"] = dict((str(k), v) for k, v in saved["secrets"].items())
            with open(saved_file, "w", encoding="utf-8") as handle:
                json.dump(saved, handle)
            os.sync()
        else:
            with open(saved_file, encoding="utf-8") as handle:
                boot_checks(spec, check, json.load(handle))
    except (tx.CaseError, OSError, subprocess.SubprocessError) as exc:
        print("RESULT " + json.dumps({"failures": failures, "error": str(exc)}))
        return
    print("RESULT " + json.dumps({"failures": failures}))


# The driver (on this machine) ----------------------------------------------------------------------------------

class Driver(object):

    def __init__(self, args, stage, role):
        self.args, self.stage, self.role = args, stage, role

    def docker(self, *argv, timeout=1800):
        return subprocess.run(["docker"] + list(argv), capture_output=True, text=True, check=False, timeout=timeout)

    def booted(self, name):
        deadline = time.monotonic() + 120
        while self.docker("exec", name, "systemctl", "is-system-running", "--wait", timeout=130).stdout.strip() \
                not in ("running", "degraded"):
            if time.monotonic() > deadline:
                raise tx.CaseError("systemd in %s did not come up" % name)
            time.sleep(0.2)

    def phase(self, name, spec, phase):
        # Names she made need not be UTF-8: printed escaped.
        done = self.docker("exec", "-e", "PYTHONIOENCODING=utf-8:backslashreplace", name, "python3",
                           "%s/tests/adversary/local_user.py" % persist.STAGE, "--inside",
                           json.dumps(dict(spec, phase=phase, **self.role)))
        text = done.stdout + done.stderr
        sys.stdout.write("".join(line + "\n" for line in done.stdout.splitlines() if not line.startswith("RESULT ")))
        lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        if not lines:
            raise tx.CaseError("the %s phase ended (exit %d) without a result: %s" % (phase, done.returncode,
                                                                                      text[-1500:]))
        return json.loads(lines[-1][len("RESULT "):])

    def attack(self, attack):
        name = "%s%s-%s" % (CONTAINER_PREFIX, self.args.tag, attack)
        spec = {"attack": attack, "seconds": self.args.seconds, "inodes": self.args.inodes,
                "nr_inodes": self.args.nr_inodes,
                "backing": USER_BACKING if attack.endswith("-user") else BACKING}
        began = time.monotonic()
        failures = []
        try:
            made = self.docker("run", "-d", "--name", name, "--cap-add", "SYS_ADMIN", "--security-opt",
                               "apparmor=unconfined", "--security-opt", "seccomp=unconfined", "--cgroupns", "host",
                               "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw", "--tmpfs", "/run", "--tmpfs", "/run/lock",
                               "--network", "none", "-v", "%s:%s:ro" % (self.stage, persist.STAGE), self.args.image,
                               "/lib/systemd/systemd")
            if made.returncode != 0:
                raise tx.CaseError("docker run: %s" % made.stderr.strip())
            self.booted(name)
            result = self.phase(name, spec, "attack")
            failures += result["failures"]
            if result.get("error"):
                failures.append("could not go on: %s" % result["error"])
            elif not result.get("refused"):
                # A power cut: mounts and /run gone, then the boot's restore.
                self.docker("kill", name)
                self.docker("start", name)
                self.booted(name)
                result = self.phase(name, spec, "boot")
                failures += ["after the power cut: %s" % f for f in result["failures"]]
                if result.get("error"):
                    failures.append("after the power cut, could not go on: %s" % result["error"])
        except (tx.CaseError, subprocess.TimeoutExpired) as exc:
            failures.append("could not run: %s" % exc)
        finally:
            self.docker("rm", "-f", name)
        return attack, failures, time.monotonic() - began


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--inside")
    parser.add_argument("--attacker")
    parser.add_argument("--only", default=",".join(ATTACKS))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--inodes", type=int, default=1000000)
    parser.add_argument("--nr-inodes", type=int, default=20000)
    parser.add_argument("--image", default=persist.IMAGE)
    parser.add_argument("--tag", default=str(os.getpid()))
    args = parser.parse_args()
    if args.attacker:
        attacker(json.loads(args.attacker))
        return 0
    if args.inside:
        inside(json.loads(args.inside))
        return 0
    attacks = [name for name in args.only.split(",") if name]
    unknown = [name for name in attacks if name not in ATTACKS]
    if unknown:
        print("local-user: no attack %s (there are %s)" % (", ".join(unknown), ", ".join(ATTACKS)))
        return 2
    began = time.monotonic()
    work = tempfile.mkdtemp(prefix="ramdisk-local-user.", dir="/var/tmp")
    # A TERM (make interrupted, a CI timeout) unwinds through the finally blocks: containers and work removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        return drive(args, attacks, work, began)
    finally:
        prefix = "%s%s-" % (CONTAINER_PREFIX, args.tag)
        names = subprocess.run(["docker", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True,
                               check=False).stdout.split()
        for name in names:
            if name.startswith(prefix):
                subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)
        shutil.rmtree(work, ignore_errors=True)


def drive(args, attacks, work, began):
    stage = persist.make_stage(work)
    # Mallory runs this file too (--attacker): the stage readable by all, as a checkout is.
    os.chmod(stage, 0o755)
    os.makedirs(os.path.join(stage, "tests", "adversary"))
    shutil.copy(os.path.abspath(__file__), os.path.join(stage, "tests", "adversary"))
    purposes, defaults = tx.role_vars()
    driver = Driver(args, stage, {"purposes": purposes, "defaults": defaults})
    results = []
    queue = list(attacks)
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                if not queue:
                    return
                attack = queue.pop(0)
            outcome = driver.attack(attack)
            with lock:
                results.append(outcome)

    # Daemons: a TERM ends the run without waiting for them (main's clean-up removes their containers).
    workers = [threading.Thread(target=worker, daemon=True) for _number in range(max(1, args.jobs))]
    for one in workers:
        one.start()
    for one in workers:
        one.join()
    print("\nlocal-user: verdicts (mallory, uid %d, %d s an attack, against %s on tmpfs mode 1777):"
          % (UID, args.seconds, MOUNT))
    failed = 0
    for attack, failures, seconds in sorted(results, key=lambda one: attacks.index(one[0])):
        failed += bool(failures)
        print("  %-13s %s (%.0f s)%s" % (attack, "FAIL" if failures else "pass", seconds,
                                         "".join("\n      - %s" % f[:400] for f in failures)))
    print("local-user: %d of %d attacks failed; %.0f s" % (failed, len(results), time.monotonic() - began))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
