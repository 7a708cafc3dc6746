# SPDX-License-Identifier: GPL-3.0-or-later
"""plugins/module_utils/_persist_delta.py, the persist helper's copy (issue 35), against real trees.

Every comparison is byte for byte and by metadata (module_utils/_tree's digest: type, mode, owner, mtime to the
nanosecond, size, sha256, symlink target, device number, xattrs and ACLs; the root's mtime too), plus the hard-link
structure (which paths share an inode). A kill is a real SIGKILL of the sync process at a named step (the script's
PERSIST_DELTA_KILL_AT), or at a random moment; a restore after it must give the old tree or the new one, whichever the
kill's step says (never a mix), and leave current that tree: it rolls the backing forward first (a backing it cannot
write, full or read-only, only has the record applied to the restore's copy, and the next sync rolls forward). A
kill leaves the page cache to the kernel, so a power cut is tested apart: at each step the backing's ext4 is shut down
without flushing its journal, then mounted again (persist_delta_powercut.py, in a private mount namespace).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import stat
import struct
import subprocess
import sys
import time

import pytest

from ansible_collections.ramdisk.provision.plugins.module_utils._tree import compare_trees, tree_digest
from conftest import REPO_ROOT, load_script

SCRIPT = os.path.join(REPO_ROOT, "plugins", "module_utils", "_persist_delta.py")
ROOT = os.geteuid() == 0
pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux") or not shutil.which("rsync"),
                       reason="the tests' first copy is rsync's, as the helper's; Linux only"),
    pytest.mark.skipif(not ROOT, reason="owners, devices and a private tmpfs need root"),
]
# A name with a newline and a byte that is not UTF-8: the listing to rsync and the JSON record must carry it.
ODD_NAME = os.fsdecode(b"odd\nname\xff")


@pytest.fixture(scope="module")
def delta():
    return load_script("plugins/module_utils/_persist_delta.py", "persist_delta")


def acl(user_id):
    """A POSIX access ACL (user:USER_ID:r--, mask r--) as setfacl writes it: version 2, then (tag, perm, id)."""
    entries = [(0x01, 6, 0xFFFFFFFF), (0x02, 4, user_id), (0x04, 4, 0xFFFFFFFF), (0x10, 4, 0xFFFFFFFF),
               (0x20, 0, 0xFFFFFFFF)]
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *entry) for entry in entries)


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(data)


def sparse(path, offset):
    """8 MiB with 4 KiB of data at OFFSET and holes elsewhere."""
    with open(path, "wb") as handle:
        handle.truncate(8 << 20)
        handle.seek(offset)
        handle.write(os.urandom(4096))


def build_old(src):
    """The first tree: every kind of entry the changes below turn into something else."""
    for rel in ("same/f1", "same/f2", "same/f3", "same/f4", "same/f5", "same/f6", "same/sub/deep",
                "content/a", "content/b", "del/x/y/z", "del/x/w", "del/file", "types/file_to_dir",
                "types/file_to_link", "types/dir_to_file/in/side", "links/pair_a", "links/lone", "links/split_a",
                "c/" + ODD_NAME):
        write(os.path.join(src, rel), os.urandom(random.randint(1, 3000)))
    os.link(os.path.join(src, "same/f1"), os.path.join(src, "same/f1.link"))
    os.link(os.path.join(src, "links/pair_a"), os.path.join(src, "links/pair_b"))
    os.link(os.path.join(src, "links/split_a"), os.path.join(src, "links/split_b"))
    os.symlink("f2", os.path.join(src, "same/to_f2"))
    os.symlink("old-target", os.path.join(src, "types/link_target"))
    os.symlink("nowhere", os.path.join(src, "types/link_to_dir"))
    sparse(os.path.join(src, "content/sparse"), 1 << 20)
    os.mkfifo(os.path.join(src, "same/fifo"))
    os.setxattr(os.path.join(src, "same/f5"), "user.tag", b"old")
    os.chmod(os.path.join(src, "same/sub"), 0o750)
    os.chown(os.path.join(src, "same/f3"), 4242, 4343)
    os.chmod(src, 0o2750)


def change(src):
    """One sync's worth of every edge case: content, type, links, deletions, attributes only."""
    def path(rel):
        return os.path.join(src, rel)
    write(path("content/a"), os.urandom(5000))
    write(path("content/new"), b"new file")
    write(path("newtree/x/y/z"), b"deep new")
    write(path("newtree/" + ODD_NAME), b"odd")
    os.symlink("z", path("newtree/x/y/link"))
    os.link(path("newtree/x/y/z"), path("newtree/z.link"))
    # Special files in a new directory: a character device, a socket.
    os.mknod(path("newtree/null"), stat.S_IFCHR | 0o666, os.makedev(1, 3))
    os.mknod(path("newtree/socket"), stat.S_IFSOCK | 0o600)
    sparse(path("content/sparse"), 5 << 20)
    write(path("c/" + ODD_NAME), b"odd, changed")
    shutil.rmtree(path("del/x"))
    os.unlink(path("del/file"))
    # A path that changes type: file -> directory, file -> symlink, directory -> file, symlink -> directory.
    os.unlink(path("types/file_to_dir"))
    write(path("types/file_to_dir/child"), b"child")
    os.unlink(path("types/file_to_link"))
    os.symlink("somewhere", path("types/file_to_link"))
    shutil.rmtree(path("types/dir_to_file"))
    write(path("types/dir_to_file"), b"was a directory")
    os.unlink(path("types/link_to_dir"))
    write(path("types/link_to_dir/inside"), b"was a symlink")
    os.unlink(path("types/link_target"))
    os.symlink("new-target", path("types/link_target"))
    # Hard links: one added to an unchanged file, one pair split into two equal files, one pair left alone.
    os.link(path("links/lone"), path("links/lone.link"))
    before = os.lstat(path("links/split_b"))
    os.unlink(path("links/split_b"))
    shutil.copyfile(path("links/split_a"), path("links/split_b"))
    os.utime(path("links/split_b"), ns=(before.st_atime_ns, before.st_mtime_ns))
    # Attributes only: mode, owner (with a set-uid bit that chown would clear), xattr, ACL, a directory's own.
    os.chmod(path("same/f2"), 0o600)
    os.chown(path("same/f4"), 4242, 4343)
    os.chmod(path("same/f4"), 0o4755)
    os.setxattr(path("same/f5"), "user.tag", b"new")
    os.setxattr(path("same/f6"), "system.posix_acl_access", acl(4242))
    os.chmod(path("same/sub"), 0o700)
    os.setxattr(path("same/sub"), "user.dir", b"on a directory")
    os.chown(path("same/fifo"), 4242, 4242)
    os.chmod(src, 0o755)


def snapshot(root):
    """Everything a copy must keep of ROOT: _tree's digest of every entry, and which paths share an inode."""
    digests, problems = tree_digest(str(root))
    assert not problems
    by_inode = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            if stat.S_ISREG(st.st_mode):
                by_inode.setdefault(st.st_ino, []).append(os.path.relpath(full, root))
    return digests, sorted(sorted(paths) for paths in by_inode.values() if len(paths) > 1)


def files_inodes(root):
    """{path: inode} of the regular files under ROOT."""
    found = {}
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            st = os.lstat(os.path.join(dirpath, name))
            if stat.S_ISREG(st.st_mode):
                found[os.path.relpath(os.path.join(dirpath, name), root)] = st.st_ino
    return found


def same(left, right):
    """The sentences that tell two snapshots apart (none when they are the same tree)."""
    sentences = compare_trees(left[0], right[0], "expected", "restored", root_mtime=True)
    if left[1] != right[1]:
        sentences.append("Hard links differ: %s against %s." % (left[1], right[1]))
    return sentences


class Setup:
    """A mount (a plain directory), a backing holding the helper's layout (current -> snap-1, made by rsync as the
    helper makes it), and the script run as a process, as systemd would run it."""

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.src = str(tmp_path / "mount")
        self.backing = str(tmp_path / "backing")
        os.mkdir(self.src)
        os.mkdir(self.backing)
        self.restores = 0

    def first_copy(self):
        subprocess.run(["rsync", "-aHAX", "--numeric-ids", "--sparse", "--modify-window=-1", self.src + "/",
                        os.path.join(self.backing, "snap-1")], check=True)
        os.symlink("snap-1", os.path.join(self.backing, "current"))

    def run(self, *args, kill_at=None, check=True):
        env = dict(os.environ)
        env.pop("PERSIST_DELTA_KILL_AT", None)
        if kill_at:
            env["PERSIST_DELTA_KILL_AT"] = kill_at
        done = subprocess.run([sys.executable, SCRIPT] + list(args), env=env, capture_output=True, text=True,
                              check=False)
        if check:
            assert done.returncode == 0, (args, done.stdout, done.stderr)
            return json.loads(done.stdout)
        return done

    def sync(self, keep=2, **kwargs):
        return self.run("sync", self.src, self.backing, "--keep", str(keep), **kwargs)

    def restored(self, back=0):
        """What a restore gives (it rolls forward first), as a snapshot."""
        self.restores += 1
        dest = str(self.tmp / ("restored-%d" % self.restores))
        os.mkdir(dest)
        self.run("restore", self.backing, dest, "--back", str(back))
        return snapshot(dest)

    def current(self):
        return os.path.realpath(os.path.join(self.backing, "current"))


@pytest.fixture()
def setup(tmp_path):
    return Setup(tmp_path)


def two_generations(setup):
    """old -> backing (generation 1, adopted from the helper's copy); changed -> source. Returns (old, new)."""
    random.seed(35)
    build_old(setup.src)
    setup.first_copy()
    setup.sync()
    old = snapshot(setup.src)
    change(setup.src)
    return old, snapshot(setup.src)


def test_every_edge_case_synced_and_the_previous_snapshot_kept(setup):
    old, new = two_generations(setup)
    cur = setup.current()
    inodes = files_inodes(cur)
    report = setup.sync()
    assert report["generation"] == 2 and report["warning"] == ""

    def groups(tree, rel):
        return [group for group in tree[1] if rel in group]

    # Only what changed was copied: every file whose content and links are the same keeps its inode, an attribute-only
    # change included (set in place); every other one is a new copy.
    kept = sorted(rel for rel in inodes if rel in new[0] and new[0][rel]["sha256"] == old[0][rel]["sha256"]
                  and new[0][rel]["mtime_ns"] == old[0][rel]["mtime_ns"] and groups(old, rel) == groups(new, rel))
    assert kept and "same/f5" in kept and "same/f4" in kept
    after = files_inodes(cur)
    assert [rel for rel in kept if after[rel] != inodes[rel]] == []
    assert sorted(rel for rel in after if after[rel] != inodes.get(rel)) == sorted(set(after) - set(kept))
    assert not same(new, snapshot(cur)), same(new, snapshot(cur))
    assert not same(new, setup.restored())
    assert not same(old, setup.restored(back=1))
    assert setup.run("verify", setup.backing)["result"] == "ok"
    # Sparse files stay sparse in current (rsync --sparse in the stage).
    assert os.lstat(os.path.join(cur, "content/sparse")).st_blocks * 512 < 1 << 20
    assert not os.path.exists(os.path.join(setup.backing, ".persist-delta", "stage"))


def test_rollback_gives_the_previous_generation_back_in_place(setup):
    old, new = two_generations(setup)
    setup.sync()
    assert setup.run("rollback", setup.backing)["generation"] == 1
    assert not same(old, snapshot(setup.current()))
    assert setup.run("verify", setup.backing)["result"] == "ok"
    # The next sync makes the new tree again, from the rolled-back current.
    setup.sync()
    assert not same(new, snapshot(setup.current()))


def test_an_unchanged_mount_makes_no_generation(setup):
    two_generations(setup)
    assert setup.sync()["generation"] == 2
    report = setup.sync()
    assert (report["generation"], report["operations"], report["written_bytes"]) == (2, {}, 0)


@pytest.mark.parametrize("keep", [1, 2, 3])
def test_keep_sets_how_many_snapshots_can_be_restored(setup, keep):
    random.seed(7)
    build_old(setup.src)
    setup.first_copy()
    trees = []
    for number in range(4):
        write(os.path.join(setup.src, "content/a"), b"version %d" % number)
        os.chmod(os.path.join(setup.src, "same/f2"), 0o600 + number)
        setup.sync(keep=keep)
        trees.append(snapshot(setup.src))
    state = os.path.join(setup.backing, ".persist-delta")
    assert sorted(name for name in os.listdir(state) if name.startswith("undo-")) == [
        "undo-%d" % gen for gen in range(5 - keep + 1, 5)]
    for back in range(keep):
        assert not same(trees[-1 - back], setup.restored(back=back)), back
    refused = setup.run("restore", setup.backing, str(setup.tmp / "refused"), "--back", str(keep), check=False)
    assert refused.returncode == 1 and "keeps no reverse delta" in refused.stdout


def test_a_full_backing_fails_the_sync_and_leaves_current(setup):
    """ENOSPC for real: the backing is a 1 MiB tmpfs, mounted in a private mount namespace only."""
    write(os.path.join(setup.src, "small"), b"s" * 1000)
    script = ('set -u; mount -t tmpfs -o size=1m,mode=0755 ramdisk-test "$1" || exit 99\n'
              'rsync -a "$2/" "$1/snap-1" && ln -s snap-1 "$1/current" || exit 98\n'
              '"$3" "$4" sync "$2" "$1" >/dev/null || exit 98\n'
              'head -c 2097152 /dev/urandom > "$2/big"\n'
              '"$3" "$4" sync "$2" "$1"; echo "second=$?"\n'
              '"$3" "$4" verify "$1"; ls -A "$1/current" "$1/.persist-delta"\n')
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
                           setup.backing, setup.src, sys.executable, SCRIPT], capture_output=True, text=True,
                          check=False)
    if done.returncode == 99:
        pytest.skip("no private tmpfs here: %s" % done.stderr.strip())
    out = done.stdout
    assert "second=1" in out and "No space left on device" in out and "current is unchanged" in out, out
    assert '"result": "ok", "generation": 1' in out, out
    listing = out.split("\n", 3)[3]
    assert "big" not in listing and "stage" not in listing, listing


def test_a_file_that_vanishes_between_the_walk_and_its_copy_is_left_out(setup, delta, monkeypatch):
    """Gone before the copy opens it (a user's rm during the sync): as if the walk had not seen it, the sync goes on,
    and current holds what the mount holds."""
    two_generations(setup)
    copy_at = delta.Copier.copy_at

    def delete_then_copy(self, sfd, sname, *args):
        if sname == "a" and os.path.lexists(os.path.join(setup.src, "content/a")):
            os.unlink(os.path.join(setup.src, "content/a"))
        return copy_at(self, sfd, sname, *args)

    monkeypatch.setattr(delta.Copier, "copy_at", delete_then_copy)
    report = delta.sync(setup.src, setup.backing)
    assert report["result"] == "ok" and report["generation"] == 2
    assert not os.path.lexists(os.path.join(setup.current(), "content/a"))
    assert setup.run("verify", setup.backing)["result"] == "ok"
    assert not os.path.lexists(os.path.join(setup.backing, ".persist-delta", "stage"))
    # The unlink changed its directory's mtime after the walk: the next sync takes that.
    setup.sync()
    assert not same(snapshot(setup.src), snapshot(setup.current()))


def test_verify_finds_a_change_made_outside_persist(setup):
    two_generations(setup)
    setup.sync()
    write(os.path.join(setup.current(), "content/a"), b"by hand")
    assert setup.run("verify", setup.backing, check=False).returncode == 1
    # The next sync says so, and syncs over it.
    assert "changed outside persist" in setup.sync()["warning"]


# How many operations the edge-case sync has (checked by the test below, so that a change to the cases that alters
# it is seen): each of its apply steps is a kill point.
EDGE_OPERATIONS = 28
STEPS = (["planned", "staged", "synced", "committed"]
         + ["apply:%d" % number for number in range(1, EDGE_OPERATIONS + 1)] + ["applied", "recorded", "pruned"])
# The unit suite stays quick: every kind of step, and of the apply's operations (put, put of a hard-link group split
# by the kill, del, attrs, the last one); RAMDISK_TEST_ALL_STEPS=1 runs every step, and every power cut.
ALL_STEPS = os.environ.get("RAMDISK_TEST_ALL_STEPS") == "1"
KILL_STEPS = STEPS if ALL_STEPS else ["planned", "staged", "synced", "committed", "apply:1", "apply:5", "apply:17",
                                      "apply:22", "apply:%d" % EDGE_OPERATIONS, "applied", "recorded", "pruned"]
POWERCUT_STEPS = STEPS if ALL_STEPS else ["synced", "committed", "apply:17", "recorded"]
# A power cut of the sync, then one of the restore at the next boot while it rolls the backing forward (the lab's
# power-cut test's "sync" and "restore" cuts), at these steps of each.
POWERCUT_RESTORE_STEPS = [("committed", "apply:5"), ("apply:17", "apply:22"), ("apply:17", "applied"),
                          ("apply:%d" % EDGE_OPERATIONS, "recorded")]


@pytest.mark.parametrize("step", KILL_STEPS)
def test_a_kill_at_any_step_leaves_the_old_tree_or_the_new_one(setup, step):
    old, new = two_generations(setup)
    killed = setup.sync(kill_at=step, check=False)
    assert killed.returncode == -signal.SIGKILL, (killed.stdout, killed.stderr)
    committed = step not in ("planned", "staged", "synced")
    expected, previous = (new, old) if committed else (old, None)
    if step == "apply:17":
        # Half-way through the apply current is neither tree: only rolling forward makes it one.
        assert same(old, snapshot(setup.current())) and same(new, snapshot(setup.current()))
    assert not same(expected, setup.restored())
    # The restore finished the sync in the backing first: what it restored is current, whole (the power-cut test's
    # check), with nothing left pending.
    assert not same(expected, snapshot(setup.current()))
    assert not os.path.exists(os.path.join(setup.backing, ".persist-delta", "commit.json"))
    assert setup.run("verify", setup.backing)["result"] == "ok"
    if previous:
        assert not same(previous, setup.restored(back=1))
    state = os.path.join(setup.backing, ".persist-delta")
    # Committed: generation 2 and its reverse delta (generation 1's, empty, pruned); else generation 1 alone.
    assert sorted(os.listdir(state)) == (["gen-1.json", "gen-2.json", "lock", "undo-2"] if committed
                                         else ["gen-1.json", "lock", "undo-1"])
    # And the next sync brings the backing to the new tree whichever it was.
    setup.sync()
    assert not same(new, setup.restored())


@pytest.mark.parametrize("sync_step,restore_step", [("committed", "apply:5"), ("apply:17", "apply:22"),
                                                    ("apply:17", "applied"), ("apply:22", "recorded")])
def test_a_restore_killed_while_it_rolls_forward_is_finished_by_the_next_one(setup, sync_step, restore_step):
    """The power-cut test's cut 1 and 2: a sync killed after its commit point, then the restore that rolls it forward
    killed (its kill points are the roll-forward's), then a restore: the new tree, and current is that tree."""
    _old, new = two_generations(setup)
    assert setup.sync(kill_at=sync_step, check=False).returncode == -signal.SIGKILL
    dest = str(setup.tmp / "killed-restore")
    os.mkdir(dest)
    killed = setup.run("restore", setup.backing, dest, kill_at=restore_step, check=False)
    assert killed.returncode == -signal.SIGKILL, (killed.stdout, killed.stderr)
    assert not same(new, setup.restored())
    assert not same(new, snapshot(setup.current()))
    assert setup.run("verify", setup.backing)["result"] == "ok"


@pytest.mark.skipif(not shutil.which("unshare"), reason="needs unshare")
@pytest.mark.parametrize("step", ["committed", "apply:1", "apply:17", "apply:%d" % EDGE_OPERATIONS])
def test_a_backing_the_restore_cannot_write_has_the_record_applied_to_the_copy(setup, step):
    """Read-only (a full disk alike): the roll-forward fails, and the restore still gives the new tree, from current
    and the stage, without writing the backing; the next sync rolls forward."""
    _old, new = two_generations(setup)
    assert setup.sync(kill_at=step, check=False).returncode == -signal.SIGKILL
    backing = snapshot(setup.backing)
    dest = str(setup.tmp / "restored-ro")
    os.mkdir(dest)
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                           'b="$1"; shift; mount --bind "$b" "$b" && mount -o remount,bind,ro "$b" || exit 99; '
                           'exec "$@"', "sh", setup.backing, sys.executable, SCRIPT, "restore", setup.backing, dest],
                          capture_output=True, text=True, check=False)
    if done.returncode == 99:
        pytest.skip("no read-only bind mount here: %s" % done.stderr.strip())
    assert done.returncode == 0, (done.stdout, done.stderr)
    report = json.loads(done.stdout)
    assert report["pending"] == "commit" and "could not roll" in report["warning"], report
    assert not same(new, snapshot(dest))
    assert not same(backing, snapshot(setup.backing))
    setup.sync()
    assert not same(new, snapshot(setup.current()))


POWERCUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "persist_delta_powercut.py")


@pytest.mark.skipif(not all(shutil.which(tool) for tool in ("unshare", "losetup", "mkfs.ext4")),
                    reason="needs unshare, losetup and mkfs.ext4")
@pytest.mark.parametrize("flush", ["", "flush"])
@pytest.mark.parametrize("step,restore_step", [(step, "") for step in POWERCUT_STEPS] + POWERCUT_RESTORE_STEPS)
def test_a_power_cut_at_any_step_leaves_the_old_tree_or_the_new_one(tmp_path, step, restore_step, flush):
    """Not a kill (which leaves the page cache to the kernel) but what reached the disk: the backing's ext4 is shut
    down without flushing its journal at STEP, then mounted again (persist_delta_powercut.py). With FLUSH, all the
    sync did up to STEP is on the disk first: a half-done apply that a roll-forward must finish from the disk alone.
    Without the syncfs before the commit record, the cuts from 'committed' to the last apply step fail here (the
    staged files come back empty), while the kills above still pass. With RESTORE_STEP the restore after the cut is
    cut too, as it rolls forward; the one after it gives the new tree, and current is that tree (the lab's check)."""
    random.seed(35)
    old, new = str(tmp_path / "old"), str(tmp_path / "new")
    os.mkdir(old)
    build_old(old)
    subprocess.run(["cp", "-a", old, new], check=True)
    change(new)
    image = str(tmp_path / "backing.img")
    with open(image, "wb") as handle:
        handle.truncate(64 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", image], check=True)
    restored = tmp_path / "restored"
    restored.mkdir()
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable, POWERCUT, SCRIPT, image,
                           old, new, str(restored), step, flush, restore_step], capture_output=True, text=True,
                          check=False)
    if "losetup" in done.stderr and done.returncode:
        pytest.skip("no loop device here: %s" % done.stderr.strip())
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["stopped"], "the sync never reached %s" % step
    assert result["restore_stopped"] or not restore_step, "the restore never reached %s" % restore_step
    expected = snapshot(new if step not in ("planned", "staged", "synced") else old)
    assert not same(expected, snapshot(restored)), same(expected, snapshot(restored))
    assert result["same_as_current"], result
    assert result["verify"]["result"] == "ok"


def test_the_edge_case_sync_has_the_operations_the_kill_points_cover(setup):
    two_generations(setup)
    report = setup.sync()
    assert sum(report["operations"].values()) == EDGE_OPERATIONS, report


@pytest.mark.parametrize("step", [1, 8, 16] if ALL_STEPS else [8])
def test_a_kill_during_a_rollback_is_finished_by_the_next_run(setup, step):
    old, _new = two_generations(setup)
    setup.sync()
    killed = setup.run("rollback", setup.backing, kill_at="rollback:%d" % step, check=False)
    assert killed.returncode == -signal.SIGKILL
    assert not same(old, setup.restored())
    # The restore finished the rollback in the backing first: current is what it restored.
    assert not same(old, snapshot(setup.current()))
    assert not os.path.exists(os.path.join(setup.backing, ".persist-delta", "rollback.json"))
    assert setup.run("verify", setup.backing)["result"] == "ok"
    assert not same(old, setup.restored())


def random_tree(root, rng, files):
    for number in range(files):
        write(os.path.join(root, "d%02d" % (number % 40), "s%d" % (number % 3), "f%04d" % number),
              os.urandom(rng.randint(0, 20000)))


def random_change(root, rng, files):
    for number in rng.sample(range(files), files // 10):
        path = os.path.join(root, "d%02d" % (number % 40), "s%d" % (number % 3), "f%04d" % number)
        choice = rng.random()
        if choice < 0.4:
            write(path, os.urandom(rng.randint(0, 20000)))
        elif choice < 0.7:
            os.unlink(path)
        elif choice < 0.85:
            os.chmod(path, 0o600)
        else:
            write(path + ".new", os.urandom(100))
    shutil.rmtree(os.path.join(root, "d07"))
    write(os.path.join(root, "brand", "new", "tree"), b"x")


@pytest.mark.parametrize("delay", [0.05, 0.15, 0.25, 0.35, 0.45, 0.55, 0.7, 0.9, 1.2, 1.6] if ALL_STEPS
                         else [0.25, 0.7])
def test_a_kill_at_a_random_moment_leaves_the_old_tree_or_the_new_one(setup, delay):
    """SIGKILL after DELAY seconds of a sync of 2,000 files with a tenth of them changed (a sync here takes about
    half a second to two seconds, so the delays fall before, during and after its commit)."""
    rng = random.Random(delay)
    random_tree(setup.src, rng, 2000)
    setup.first_copy()
    setup.sync()
    old = snapshot(setup.src)
    random_change(setup.src, rng, 2000)
    new = snapshot(setup.src)
    run = subprocess.Popen([sys.executable, SCRIPT, "sync", setup.src, setup.backing], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
    time.sleep(delay)
    run.send_signal(signal.SIGKILL)
    run.communicate()
    got = setup.restored()
    assert not same(old, got) or not same(new, got), same(new, got)
    setup.sync()
    assert not same(new, setup.restored())


@pytest.mark.parametrize("pattern, rel, is_dir, excluded", [
    ("journal/*/system.journal", "journal/abc/system.journal", False, True),
    ("journal/*/system.journal", "log/journal/abc/system.journal", False, True),
    ("journal/*/system.journal", "journal/abc/system@1.journal", False, False),
    ("journal/*/system.journal", "journal/a/b/system.journal", False, False),
    ("journal/*/user-*.journal", "journal/abc/user-1000.journal", False, True),
    ("/cache", "cache", True, True),
    ("/cache", "sub/cache", True, False),
    ("cache/", "sub/cache", True, True),
    ("cache/", "sub/cache", False, False),
    ("*.tmp", "a/b/c.tmp", False, True),
    ("a/**/z", "a/b/c/z", False, True),
    ("f?[0-9]", "x/fa1", False, True),
    ("f[!0-9]", "x/f1", False, False),
])
def test_exclude_takes_rsync_patterns_relative_to_the_mount(delta, pattern, rel, is_dir, excluded):
    assert delta.exclude_matcher([pattern])(rel, is_dir) is excluded


def test_the_first_matching_include_or_exclude_decides(delta):
    excluded = delta.exclude_matcher([("+", "*@*.journal"), ("-", "*.journal")])
    assert [excluded(rel, False) for rel in ("j/a/system.journal", "j/a/system@0001-02.journal", "j/a/other")] == [
        True, False, False]


def test_an_excluded_entry_is_not_copied_and_its_old_copy_goes(setup):
    journal = os.path.join(setup.src, "journal", "abc")
    write(os.path.join(journal, "system.journal"), b"active")
    write(os.path.join(journal, "system@1.journal"), b"archived")
    write(os.path.join(journal, "user-1000.journal"), b"active too")
    setup.first_copy()
    write(os.path.join(journal, "system@2.journal"), b"archived later")
    report = setup.run("sync", setup.src, setup.backing, "--include", "journal/*/system@*", "--exclude",
                       "journal/*/system*.journal", "--exclude", "journal/*/user-*.journal")
    assert report["result"] == "ok"
    assert sorted(os.listdir(os.path.join(setup.current(), "journal", "abc"))) == [
        "system@1.journal", "system@2.journal"]
    assert setup.run("verify", setup.backing)["result"] == "ok"


def test_a_current_made_by_another_sync_drops_the_older_generations(setup):
    """A sync without the copy (no python3 for a while) makes a new snapshot: the reverse deltas of the old one do
    not apply to it, so they go, and restoring back is refused rather than wrong."""
    old, new = two_generations(setup)
    setup.sync()
    subprocess.run(["cp", "-a", setup.current(), os.path.join(setup.backing, "snap-2")], check=True)
    os.symlink("snap-2", os.path.join(setup.backing, "current.new"))
    os.rename(os.path.join(setup.backing, "current.new"), os.path.join(setup.backing, "current"))
    refused = setup.run("restore", setup.backing, str(setup.tmp), "--back", "1", check=False)
    assert refused.returncode == 1 and "not the copy its generations changed" in refused.stdout
    write(os.path.join(setup.src, "content", "a"), b"later")
    report = setup.sync()
    assert "older generations are dropped" in report["warning"] and report["reverse_deltas"] == 1
    assert not same(snapshot(setup.src), setup.restored())
    assert not same(new, setup.restored(back=1))


@pytest.mark.parametrize("synced, cut_short", [(False, False), (True, False), (False, True)])
def test_a_restore_into_a_fresh_file_system_merges_its_own_lost_and_found(setup, synced, cut_short):
    """A persisted zram or brd mount is an ext4 or xfs made anew at boot, whose root holds its own empty
    lost+found; the backing's copy holds the one of the file system it was synced from. The restore takes the
    copy's lost+found into the new one (found in the VM: every boot's restore failed with EEXIST)."""
    os.mkdir(os.path.join(setup.src, "lost+found"), 0o700)
    write(os.path.join(setup.src, "lost+found", "#1234"), b"an orphan fsck found\n")
    write(os.path.join(setup.src, "kept.txt"), b"kept on disk by persist\n")
    setup.first_copy()
    if synced:
        write(os.path.join(setup.src, "later.txt"), b"written after the first copy\n")
        setup.sync()
    dest = str(setup.tmp / "fresh-ext4")
    os.mkdir(dest)
    os.mkdir(os.path.join(dest, "lost+found"), 0o700)
    if cut_short:  # a restore cut short had copied part of it; the helper empties all but lost+found before again
        write(os.path.join(dest, "lost+found", "#1234"), b"an orph")
    setup.run("restore", setup.backing, dest)
    assert not same(snapshot(setup.src), snapshot(dest)), same(snapshot(setup.src), snapshot(dest))
    with open(os.path.join(dest, "lost+found", "#1234"), "rb") as handle:
        assert handle.read() == b"an orphan fsck found\n"
