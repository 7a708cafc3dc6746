# SPDX-License-Identifier: GPL-3.0-or-later
"""plugins/module_utils/_persist_delta.py against a hostile host (issue 41): a local user who swaps directories
for symbolic links while syncs run, a file system mounted inside the mount, a backing others can write and a
commit record planted in it, SIGTERM at any instant, a tree of many files (memory), and records the engine before
it wrote (format 1). Each test here failed on 1ed3741's engine."""

from __future__ import annotations

import json
import os
import random
import resource
import signal
import stat
import subprocess
import sys
import threading
import time

import pytest

from conftest import REPO_ROOT, load_script
from test_persist_delta import SCRIPT, Setup, build_old, change, random_tree, same, snapshot, write

OLD_COMMIT = "1ed3741"


@pytest.fixture(scope="module")
def delta():
    return load_script("plugins/module_utils/_persist_delta.py", "persist_delta_hostile")


@pytest.fixture()
def setup(tmp_path):
    return Setup(tmp_path)


def names_under(root):
    """Every name under ROOT, links not followed."""
    found = set()
    for _dirpath, dirnames, filenames in os.walk(root):
        found.update(dirnames + filenames)
    return found


def test_a_directory_swapped_for_a_symlink_during_syncs_never_brings_what_it_points_to(setup):
    """A local user's race: directories of the mount replaced by symbolic links to a root-only directory and back,
    in a loop, while syncs run. Nothing of that directory may reach the backing, nor a restore of it."""
    secret = os.path.join(str(setup.tmp), "root-only")
    os.mkdir(secret, 0o700)
    for number in range(50):
        write(os.path.join(secret, "secret-%d" % number), b"root's")
    swapped = ["d%d" % number for number in range(12)]
    for name in swapped:
        for number in range(30):
            write(os.path.join(setup.src, name, "own-%d" % number), b"the user's")
    setup.first_copy()
    stop = threading.Event()

    def swap():
        while not stop.is_set():
            for name in swapped:
                path = os.path.join(setup.src, name)
                os.rename(path, path + ".real")
                os.symlink(secret, path)
                os.unlink(path)
                os.rename(path + ".real", path)

    racer = threading.Thread(target=swap)
    racer.start()
    results = []
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(results) < 40:
            done = setup.sync(check=False)
            results.append(done.returncode)
            leaked = sorted(name for name in names_under(setup.backing) if name.startswith("secret-"))
            assert not leaked, (len(results), leaked[:5], done.stdout)
    finally:
        stop.set()
        racer.join()
    assert results.count(0) >= len(results) // 2, results
    setup.sync()
    dest = os.path.join(str(setup.tmp), "restored")
    os.mkdir(dest)
    setup.run("restore", setup.backing, dest)
    assert not [name for name in names_under(dest) if name.startswith("secret-")]
    assert not same(snapshot(setup.src), snapshot(dest))


def test_the_copier_copies_what_it_opened_when_a_directory_becomes_a_symlink(delta, tmp_path, monkeypatch):
    """The same race at its worst instant, made to happen every time: the directory is swapped for a link to a
    root-only directory right after the copier's stat of it (in its _kind(), which both engines call there)."""
    src, secret = tmp_path / "src", tmp_path / "root-only"
    write(str(src / "d" / "own"), b"the user's")
    write(str(secret / "secret-1"), b"root's")
    kind = delta._kind  # pylint: disable=protected-access
    armed = [True]

    def kind_then_swap(mode):
        if armed[0] and stat.S_ISDIR(mode):
            armed[0] = False
            os.rename(str(src / "d"), str(src / "d.real"))
            os.symlink(str(secret), str(src / "d"))
        return kind(mode)

    monkeypatch.setattr(delta, "_kind", kind_then_swap)
    copier = delta.Copier()
    copier.copy_tree(str(src / "d"), str(tmp_path / "copy"), "d", {})
    assert not armed[0]
    copy = str(tmp_path / "copy")
    # Copied as what the copier found when it opened it: the link (1ed3741's copied the root-only files through it).
    assert not os.path.isdir(copy) or os.path.islink(copy) or "secret-1" not in names_under(copy), names_under(copy)
    assert os.path.islink(copy) and os.readlink(copy) == str(secret)


NESTED = r'''
import json, os, subprocess, sys
script, src, backing = sys.argv[1:4]
def sync():
    done = subprocess.run([sys.executable, script, "sync", src, backing], capture_output=True, text=True)
    return done.returncode, json.loads(done.stdout)
inner = os.path.join(src, "inner")
# The first copy took in what was under the mount point (a file system mounted after it, or the helper's old copy).
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0750", "nested", inner], check=True)
with open(os.path.join(inner, "in-nested"), "w") as handle:
    handle.write("the nested file system's")
os.mkdir(os.path.join(inner, "deeper"))
with open(os.path.join(src, "beside"), "w") as handle:
    handle.write("new beside it")
first = sync()
with open(os.path.join(src, "beside-2"), "w") as handle:
    handle.write("and the next sync")
second = sync()
print(json.dumps({"first": first, "second": second}))
'''


def test_a_file_system_mounted_inside_the_mount_is_skipped_and_syncs_go_on(setup):
    write(os.path.join(setup.src, "inner", "underneath"), b"under the mount point")
    write(os.path.join(setup.src, "kept"), b"x")
    setup.first_copy()
    setup.sync()
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable, "-c", NESTED, SCRIPT,
                           setup.src, setup.backing], capture_output=True, text=True, check=False)
    if "mount:" in done.stderr and done.returncode:
        pytest.skip("no private tmpfs here: %s" % done.stderr.strip())
    assert done.returncode == 0, done.stderr
    runs = json.loads(done.stdout)
    for code, report in runs.values():
        assert code == 0 and report["result"] == "ok", report
        assert report["skipped_mounts"] == ["inner"], report
    cur = setup.current()
    # The mount point is kept, empty; what was under it in the backing went; the rest is synced.
    assert os.path.isdir(os.path.join(cur, "inner")) and os.listdir(os.path.join(cur, "inner")) == []
    assert sorted(os.listdir(cur)) == ["beside", "beside-2", "inner", "kept"]
    assert setup.run("verify", setup.backing)["result"] == "ok"


def test_a_new_directory_holding_a_mount_point_is_copied_without_it(delta, tmp_path):
    """The Copier (a put of a new directory, and the helper's first copy) skips it as the walk does."""
    src, dst = str(tmp_path / "src"), str(tmp_path / "dst")
    write(os.path.join(src, "a", "b", "file"), b"x")
    copier = delta.Copier(dev=os.lstat(src).st_dev + 1)  # every entry looks like another file system
    metas = {}
    copier.copy_tree(os.path.join(src, "a"), dst, "a", metas)
    assert copier.skipped_mounts == ["a"] and os.listdir(dst) == [] and list(metas) == ["a"]


def plant(backing, ops, name="commit.json"):
    """A commit record in the format 1ed3741's engine writes (one JSON object), with OPS."""
    state = os.path.join(backing, ".persist-delta")
    os.makedirs(state, mode=0o700, exist_ok=True)
    with open(os.path.join(state, name), "w", encoding="utf-8") as handle:
        json.dump({"gen": 1, "keep": 2, "ops": ops, "digest": "", "made": 0, "base": "snap-1"}, handle)


def attrs_op(path):
    meta = {"kind": "f", "mode": 0o4777, "uid": 0, "gid": 0, "size": 0, "mtime_ns": 0, "rdev": 0, "target": "",
            "xattrs": []}
    return {"op": "attrs", "path": path, "new": meta, "old": meta}


@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink parent", "del through a symlink"])
def test_a_planted_commit_record_changes_nothing_outside_the_backing(setup, delta, how):
    outside = os.path.join(str(setup.tmp), "outside")
    os.mkdir(outside)
    victim = os.path.join(outside, "victim")
    write(victim, b"not the backing's")
    os.chmod(victim, 0o600)
    setup.first_copy()
    cur = os.path.join(setup.backing, "snap-1")
    os.symlink(outside, os.path.join(cur, "planted"))
    ops = {"dotdot": [attrs_op("../../outside/victim")], "absolute": [attrs_op(victim)],
           "symlink parent": [attrs_op("planted/victim")],
           "del through a symlink": [{"op": "del", "path": "planted/victim"}]}[how]
    plant(setup.backing, ops)
    before = os.lstat(victim)
    with pytest.raises(delta.SyncError, match="refused"):
        delta.roll_forward(setup.backing)
    after = os.lstat(victim)
    assert (after.st_mode, after.st_uid, after.st_gid) == (before.st_mode, before.st_uid, before.st_gid)
    assert sorted(os.listdir(outside)) == ["victim"]


@pytest.mark.parametrize("target", ["../elsewhere", "/tmp", "snap-1/inner", "other"])
def test_current_must_name_a_snapshot_of_the_backing(setup, delta, target):
    os.mkdir(os.path.join(setup.backing, "snap-1"))
    os.mkdir(os.path.join(setup.backing, "snap-1", "inner"))
    os.mkdir(os.path.join(setup.backing, "other"))
    os.symlink(target, os.path.join(setup.backing, "current"))
    with pytest.raises(delta.SyncError, match="refused"):
        delta.sync(setup.src, setup.backing)


@pytest.mark.parametrize("where, mode, owner", [("", 0o777, 0), ("", 0o755, 65534), (".persist-delta", 0o770, 0)])
def test_a_backing_others_can_write_is_refused_naming_it(setup, delta, where, mode, owner):
    setup.first_copy()
    setup.sync()
    path = os.path.join(setup.backing, where) if where else setup.backing
    os.chown(path, owner, 0)
    os.chmod(path, mode)
    with pytest.raises(delta.SyncError) as raised:
        delta.sync(setup.src, setup.backing)
    message = str(raised.value)
    assert path in message and "uid %d" % owner in message and "%04o" % mode in message, message
    with pytest.raises(delta.SyncError):
        delta.roll_forward(setup.backing)


def change_a_tenth(root, rng, turn):
    """A tenth of the files of ROOT rewritten, removed, chmodded or given a new sibling; a new directory."""
    files = sorted(os.path.join(dirpath, name) for dirpath, _dirnames, names in os.walk(root) for name in names)
    for path in rng.sample(files, len(files) // 10):
        choice = rng.random()
        if choice < 0.4:
            write(path, os.urandom(rng.randint(0, 20000)))
        elif choice < 0.7:
            os.unlink(path)
        elif choice < 0.85:
            os.chmod(path, 0o600 if os.lstat(path).st_mode & 0o044 else 0o644)
        else:
            write("%s.new%d" % (path, turn), os.urandom(100))
    write(os.path.join(root, "turn-%d" % turn, "new", "tree"), b"x")


def holds_sigterm(pid, seconds):
    """Whether process PID catches SIGTERM (its SigCgt mask in /proc) within SECONDS."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with open("/proc/%d/status" % pid, encoding="ascii") as handle:
                caught = [line.split()[1] for line in handle if line.startswith("SigCgt:")]
        except FileNotFoundError:
            return False
        if caught and int(caught[0], 16) & (1 << (signal.SIGTERM - 1)):
            return True
        time.sleep(0.005)
    return False


def test_sigterm_at_any_instant_leaves_current_one_whole_generation(setup):
    """Syncs of 2,000 files, a tenth changed each time, each sent SIGTERM after a random delay (before, during and
    after its commit point): each exits with a clear 'stopped' error (or had finished), nothing half-done is left
    in the backing, and current, as it is, without a roll-forward, is the old tree or the new one."""
    rng = random.Random(41)
    random_tree(setup.src, rng, 2000)
    setup.first_copy()
    setup.sync()
    state = os.path.join(setup.backing, ".persist-delta")
    stopped = 0
    for turn in range(8):
        old = snapshot(setup.current())
        change_a_tenth(setup.src, rng, turn)
        new = snapshot(setup.src)
        run = subprocess.Popen([sys.executable, SCRIPT, "sync", setup.src, setup.backing], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        # From the moment the sync holds SIGTERM (before it Python is still starting and has touched nothing); on a
        # loaded machine that takes a while.
        assert holds_sigterm(run.pid, 60), "the sync never held SIGTERM (turn %d)" % turn
        time.sleep(rng.uniform(0.0, 0.8))
        run.send_signal(signal.SIGTERM)
        out, err = run.communicate()
        assert run.returncode in (0, 1), (turn, run.returncode, out, err)
        if run.returncode:
            report = json.loads(out)
            assert report["stopped"] and "stopped by SIGTERM" in report["error"], report
            stopped += 1
        leftovers = [name for name in os.listdir(state)
                     if name in ("commit.json", "commit.json.tmp", "ops.tmp", "stage")]
        assert leftovers == [], (turn, leftovers, out)
        got = snapshot(setup.current())
        assert not same(old, got) or not same(new, got), (turn, same(new, got))
        assert setup.run("verify", setup.backing)["result"] == "ok"
    assert stopped, "no sync was still running when its SIGTERM came"


def test_sigterm_during_a_rollback_finishes_it(setup, delta):
    """In process: the signal comes while the rollback runs (from its kill point's hook), it finishes, then stops."""
    build_old(setup.src)
    setup.first_copy()
    setup.sync()
    old = snapshot(setup.src)
    change(setup.src)
    setup.sync()
    reverts = delta.revert_entries

    def revert_then_term(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        return reverts(*args, **kwargs)

    delta.revert_entries = revert_then_term
    try:
        with pytest.raises(delta.Stopped, match="stopped by SIGTERM after the rollback's record"):
            delta.rollback(setup.backing)
    finally:
        delta.revert_entries = reverts
    assert not same(old, snapshot(setup.current()))
    assert setup.run("verify", setup.backing)["result"] == "ok"


def peak_rss_of_sync(setup):
    """The sync as its own process: its peak RSS in bytes (wait4 gives that child's own rusage; a child's ru_maxrss
    starts from its parent's high-water mark, so the caller compares against that)."""
    run = subprocess.Popen([sys.executable, SCRIPT, "sync", setup.src, setup.backing], stdout=subprocess.PIPE)
    out = run.stdout.read()
    run.stdout.close()
    _pid, status, usage = os.wait4(run.pid, 0)
    run.returncode = os.waitstatus_to_exitcode(status)
    assert run.returncode == 0, out
    return usage.ru_maxrss * 1024, json.loads(out)


def test_a_sync_holds_memory_bounded_by_the_change_not_the_tree(setup):
    """30,000 entries, 1% changed: 1ed3741's walk held about 620 bytes an entry for each of two trees (37 MB here;
    its peak was 157 MiB at 100,000); the streams hold the names of the directories on the way down."""
    for top in range(30):
        for sub in range(10):
            directory = os.path.join(setup.src, "t%03d" % top, "s%d" % sub)
            os.makedirs(directory)
            for number in range(100):
                os.close(os.open(os.path.join(directory, "f%03d" % number), os.O_CREAT | os.O_WRONLY, 0o644))
    subprocess.run(["cp", "-a", setup.src, os.path.join(setup.backing, "snap-1")], check=True)
    os.symlink("snap-1", os.path.join(setup.backing, "current"))
    setup.sync()
    for top in range(30):
        for number in range(10):
            write(os.path.join(setup.src, "t%03d" % top, "s%d" % number, "f%03d" % number), b"changed")
    parent = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    peak, report = peak_rss_of_sync(setup)
    assert report["operations"]["put"] == 300, report
    assert peak < parent + (10 << 20), "peak RSS %d MiB, this test process's %d MiB" % (peak >> 20, parent >> 20)


@pytest.fixture()
def old_engine(tmp_path):
    done = subprocess.run(["git", "-C", REPO_ROOT, "show", "%s:plugins/module_utils/_persist_delta.py" % OLD_COMMIT],
                          capture_output=True, text=True, check=False)
    if done.returncode:
        pytest.skip("no git history of %s here: %s" % (OLD_COMMIT, done.stderr.strip()))
    path = tmp_path / "old_persist_delta.py"
    path.write_text(done.stdout)
    return str(path)


def test_records_of_the_engine_before_are_read(setup, old_engine):
    """Generations made by 1ed3741's engine (format 1): restored back, synced over without 'changed outside
    persist' (their digest is computed otherwise), and verified once a new one is recorded."""
    build_old(setup.src)
    setup.first_copy()

    def old_sync():
        done = subprocess.run([sys.executable, old_engine, "sync", setup.src, setup.backing], capture_output=True,
                              text=True, check=True)
        return json.loads(done.stdout)

    old_sync()
    old = snapshot(setup.src)
    change(setup.src)
    assert old_sync()["generation"] == 2
    assert not same(old, setup.restored(back=1))
    assert setup.run("verify", setup.backing)["result"] == "unknown"
    write(os.path.join(setup.src, "after"), b"the new engine's")
    report = setup.sync()
    assert report["generation"] == 3 and report["warning"] == "", report
    assert setup.run("verify", setup.backing)["result"] == "ok"
    assert not same(snapshot(setup.src), setup.restored())
