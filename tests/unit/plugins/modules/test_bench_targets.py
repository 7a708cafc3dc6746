# SPDX-License-Identifier: GPL-3.0-or-later
"""bench_targets: which paths the benchmark measures and what each is (from mountinfo fixtures and this machine's
own paths), the O_DIRECT probe on the disk and on a tmpfs of a private mount namespace (its file always removed),
the tools and skip reasons of the optional tests, the compile tree walked by directory descriptors as the build
user (a directory swapped for a link is refused, not followed), every error of the request word for word, and the
module run as Ansible runs it."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import platform
import pwd
import shutil
import subprocess
import sys
import tempfile

import pytest

from conftest import run_module_process

import ansible_collections.ramdisk.provision.plugins.modules.bench_targets as module_under_test
from ansible_collections.ramdisk.provision.plugins.module_utils import _bench_targets as bt
from ansible_collections.ramdisk.provision.plugins.module_utils import _procfs

MODULE_NAME = module_under_test.__name__
MIB = 1024 * 1024
GIB = 1024 * MIB
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="drops to another user, or mounts in a namespace")

MOUNTINFO = """\
22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw
23 22 0:5 / /dev rw,nosuid - devtmpfs udev rw,size=4000k
24 23 0:21 / /dev/shm rw,nosuid,nodev - tmpfs tmpfs rw
25 22 0:22 / /run rw,nosuid,nodev - tmpfs tmpfs rw,size=800k,mode=755
26 25 0:23 / /run/user/0 rw,nosuid,nodev - tmpfs tmpfs rw,size=400k,mode=700
27 22 0:4 / /proc rw - proc proc rw
28 27 0:30 / /proc/acpi ro - tmpfs tmpfs ro
29 22 0:40 / /srv/ram rw,relatime - tmpfs ramdisk rw,size=1048576k
30 22 0:41 / /srv/ram\\040two rw - ramfs ramfs rw
31 22 253:0 / /srv/zram rw,relatime - ext4 /dev/zram0 rw
32 22 1:0 / /srv/brd rw - ext4 /dev/ram0 rw
33 22 0:40 / /srv/ram rw,relatime - tmpfs ramdisk rw,size=2097152k
34 22 253:0 /sub /srv/zram-bind rw,relatime - ext4 /dev/zram0 rw
35 22 8:2 / /srv/data rw - xfs /dev/sda2 rw
"""


def mounts():
    return _procfs.parse_mountinfo(MOUNTINFO)


def target(**fields):
    """A target as describe() gives it, with FIELDS changed."""
    base = {"label": "ram", "path": "/srv/ram", "exists": True, "is_dir": True, "others_enter": True, "writeable": True,
            "kind": "ram", "backend": "tmpfs", "fstype": "tmpfs", "source": "ramdisk", "mount_point": "/srv/ram",
            "mount_options": ["rw"], "free_bytes": GIB, "file_size_bytes": 64 * MIB, "zram_device": None,
            "direct_ok": False}
    base.update(fields)
    return base


DISK = target(label="disk", path="/var/tmp", kind="disk", backend="ext4", fstype="ext4", source="/dev/sda1",
              mount_point="/", direct_ok=True, free_bytes=100 * GIB)


# --- which paths ----------------------------------------------------------------------------------

@pytest.mark.parametrize("path, label", [
    ("/srv/ram", "srv-ram"),
    ("/", "root"),
    ("/mnt/a b//c-", "mnt-a-b-c"),
    ("/srv/ram two", "srv-ram-two"),
])
def test_a_target_without_a_label_is_named_for_its_path(path, label):
    assert bt.default_label(path) == label


def test_the_ram_mounts_found_are_outside_the_system_mounts_each_once_then_the_disk():
    found = bt.requested([], "/var/tmp", mounts())
    assert found == [
        {"path": "/srv/ram", "label": "srv-ram"},
        {"path": "/srv/ram two", "label": "srv-ram-two"},
        {"path": "/srv/zram", "label": "srv-zram"},
        {"path": "/srv/brd", "label": "srv-brd"},
        {"path": "/srv/zram-bind", "label": "srv-zram-bind"},
        {"path": "/var/tmp", "label": "disk"},
    ]
    # Another rule for what belongs to the system; no disk path.
    assert [one["path"] for one in bt.requested([], None, mounts(), r"^/(dev|srv)(/|$)")] == ["/run", "/run/user/0"]
    assert bt.requested([], "", mounts(), "^/") == []


def test_given_targets_are_kept_in_order_with_their_labels():
    given = [{"path": "/srv/ram", "label": "fast"}, {"path": "/mnt/x"}, {"path": "/mnt/y", "label": ""}]
    assert bt.requested(given, "/var/tmp", mounts()) == [
        {"path": "/srv/ram", "label": "fast"}, {"path": "/mnt/x", "label": "mnt-x"}, {"path": "/mnt/y", "label": "mnt-y"},
        {"path": "/var/tmp", "label": "disk"}]
    assert given[1] == {"path": "/mnt/x"}


# --- what each path is ----------------------------------------------------------------------------

@pytest.mark.parametrize("fs, expected", [
    ({"target": "/srv/ram", "source": "ramdisk", "fstype": "tmpfs", "options": "rw,size=1g", "avail": GIB},
     {"kind": "ram", "backend": "tmpfs", "free_bytes": GIB, "zram_device": None, "mount_options": ["rw", "size=1g"]}),
    ({"target": "/srv/rf", "source": "ramfs", "fstype": "ramfs", "options": "rw", "avail": 0},
     {"kind": "ram", "backend": "ramfs", "free_bytes": None, "zram_device": None}),
    ({"target": "/srv/zram-bind", "source": "/dev/zram0[/sub]", "fstype": "ext4", "options": "rw", "avail": MIB},
     {"kind": "ram", "backend": "zram", "free_bytes": MIB, "zram_device": "zram0"}),
    ({"target": "/srv/brd", "source": "/dev/ram1", "fstype": "ext4", "options": "rw", "avail": MIB},
     {"kind": "ram", "backend": "brd", "zram_device": None}),
    ({"target": "/", "source": "/dev/sda1", "fstype": "ext4", "options": "rw", "avail": 5},
     {"kind": "disk", "backend": "ext4", "free_bytes": 5, "mount_point": "/", "source": "/dev/sda1"}),
    ({"target": "/", "source": "/dev/sda1", "fstype": "ext4", "options": "rw", "avail": None},
     {"kind": "disk", "free_bytes": 0}),
    # findmnt found nothing (the path is missing).
    ({}, {"kind": "disk", "backend": None, "fstype": None, "source": None, "mount_point": None, "mount_options": [""],
          "free_bytes": 0, "zram_device": None}),
])
def test_a_mount_is_ram_or_disk_as_the_preflight_said(fs, expected):
    got = bt.classify(fs)
    assert dict((key, got[key]) for key in expected) == expected


def test_the_mount_of_a_path_is_what_findmnt_shows():
    if not shutil.which("findmnt"):
        pytest.skip("no findmnt")
    mountinfo = bt.read_host()[0]
    for path in ("/var/tmp", "/", "/proc/self", "/dev"):
        done = subprocess.run(["findmnt", "--json", "--bytes", "--output", "TARGET,SOURCE,FSTYPE,OPTIONS", "--target",
                               path], capture_output=True, text=True, check=True, env=dict(os.environ, LC_ALL="C"))
        shown = json.loads(done.stdout)["filesystems"]
        got = bt.mount_of(path, mountinfo)
        # findmnt lists every mount stacked there; the one a file lands on is the top one.
        assert dict((key, got[key]) for key in ("target", "source", "fstype", "options")) == shown[-1], path
        assert got["avail"] >= 0
    assert bt.mount_of("/no/such/path/here", mountinfo) == {}


def test_a_link_is_no_directory_and_a_missing_path_does_not_exist(tmp_path):
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "dir")
    assert bt.look_at(str(tmp_path / "dir"))["is_dir"] is True
    assert bt.look_at(str(tmp_path / "file")) == {"exists": True, "is_dir": False, "others_enter": False,
                                                  "writeable": True}
    assert bt.look_at(str(tmp_path / "link"))["is_dir"] is False
    assert bt.look_at(str(tmp_path / "none")) == {"exists": False, "is_dir": False, "others_enter": False,
                                                  "writeable": False}


def test_a_test_file_is_the_smallest_limit_in_whole_mib(tmp_path):
    entry = {"path": str(tmp_path), "label": "t"}
    mountinfo = bt.read_host()[0]
    got = bt.describe(entry, mountinfo, 64 * MIB + 5, 8 * GIB, 0.25, 0.25)
    assert got["file_size_bytes"] == 64 * MIB and got["kind"] == "disk"
    assert bt.describe(entry, mountinfo, 64 * MIB, 10 * MIB, 0.25, 0.25)["file_size_bytes"] == 2 * MIB
    assert bt.describe(entry, mountinfo, MIB - 1, 8 * GIB, 0.25, 0.25)["file_size_bytes"] == 0
    missing = bt.describe({"path": str(tmp_path / "none"), "label": "n"}, mountinfo, 64 * MIB, 8 * GIB, 0.25, 0.25)
    assert missing["exists"] is False and missing["file_size_bytes"] == 0 and missing["mount_point"] is None


# --- the O_DIRECT probe ------------------------------------------------------------------------------

def leftovers(path):
    return [name for name in os.listdir(path) if ".odirect." in name]


def test_the_disk_takes_o_direct_and_the_probe_file_is_gone():
    path = "/var/tmp"
    before = set(os.listdir(path))
    ok, leftover = bt.probe_direct(path, "ramdisk-bench.20250101T120000Z")
    assert leftover is None and set(os.listdir(path)) - before == set()
    # ext4, xfs and btrfs take O_DIRECT; the lab's /var/tmp is on one of them.
    if bt.classify(bt.mount_of(path, bt.read_host()[0]))["fstype"] in ("ext4", "xfs", "btrfs"):
        assert ok is True


def test_a_file_system_that_refuses_o_direct_says_no_and_keeps_no_file(tmp_path, monkeypatch):
    real = fcntl.fcntl

    def refuse(fd, command, *args):
        if command == fcntl.F_SETFL and args and args[0] & os.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real(fd, command, *args)

    monkeypatch.setattr(fcntl, "fcntl", refuse)
    assert bt.probe_direct(str(tmp_path), "rb") == (False, None)
    assert leftovers(str(tmp_path)) == []


def test_a_probe_file_that_cannot_be_removed_is_named(tmp_path, monkeypatch):
    real = os.unlink

    def refuse(*args, **kwargs):
        raise OSError(errno.EBUSY, "Device or resource busy")

    monkeypatch.setattr(os, "unlink", refuse)
    ok, leftover = bt.probe_direct(str(tmp_path), "rb")
    monkeypatch.setattr(os, "unlink", real)
    assert leftover and os.path.dirname(leftover) == str(tmp_path) and os.path.basename(leftover).startswith(".rb.odirect.")
    real(leftover)
    # The module fails naming it.
    result = bt.survey(params(targets=[{"path": "/srv/ram"}], disk_path=str(tmp_path)), fio=(True, "fio-3.33"),
                       mountinfo=bt.read_host()[0], memory=MEMORY, found=FOUND,
                       prober=lambda path, name: (True, path + "/.rb.odirect.x"))
    assert ("Host lab: the O_DIRECT probe file %s/.rb.odirect.x in benchmark target %s (disk) could not be removed."
            " Remove it by hand." % (tmp_path, tmp_path)) in result["errors"]


def test_the_probe_file_name_is_new_hidden_and_plain():
    one, two = bt.probe_name("ramdisk-bench.2025/../x"), bt.probe_name("")
    assert one.startswith(".ramdisk-bench.2025-..-x.odirect.") and "/" not in one
    assert two.startswith(".ramdisk-bench.odirect.") and bt.probe_name("") != two


def in_private_namespace(script, path):
    """The JSON SCRIPT prints, run with PATH in a private mount namespace (its tmpfs mounts stay there)."""
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable, "-c", script, str(path)],
                          capture_output=True, text=True, check=False,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    if done.returncode != 0 and "mount" in done.stderr:
        pytest.skip("no private tmpfs here: %s" % done.stderr.strip())
    return json.loads(done.stdout)


PROBE_IN_NAMESPACE = """
import json, os, subprocess, sys
from ansible_collections.ramdisk.provision.plugins.module_utils import _bench_targets as bt
path = sys.argv[1]
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "bench-targets-test", path], check=True)
ok, leftover = bt.probe_direct(path, "rb")
print(json.dumps({"ok": ok, "leftover": leftover, "left": os.listdir(path)}))
"""


@needs_root
@pytest.mark.skipif(not shutil.which("unshare"), reason="needs unshare")
def test_the_o_direct_probe_on_a_tmpfs_of_a_private_namespace(tmp_path):
    """tmpfs takes O_DIRECT from Linux 6.6 on and refuses it (EINVAL) before; either way its file is gone."""
    got = in_private_namespace(PROBE_IN_NAMESPACE, tmp_path)
    assert got["leftover"] is None and got["left"] == []
    assert got["ok"] is (_procfs.parse_kernel_release(platform.release()) >= (6, 6))
    assert os.listdir(str(tmp_path)) == []


BIND_IN_NAMESPACE = """
import json, os, subprocess, sys
from ansible_collections.ramdisk.provision.plugins.module_utils import _bench_targets as bt
top = sys.argv[1]
for name in ("ram", "bind", "stacked"):
    os.mkdir(os.path.join(top, name))
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "bench-targets-test", os.path.join(top, "ram")], check=True)
os.mkdir(os.path.join(top, "ram", "sub"))
subprocess.run(["mount", "--bind", os.path.join(top, "ram", "sub"), os.path.join(top, "bind")], check=True)
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "lower", os.path.join(top, "stacked")], check=True)
subprocess.run(["mount", "-t", "ramfs", "upper", os.path.join(top, "stacked")], check=True)
mountinfo = bt.read_host()[0]
out = {}
for name in ("bind", "stacked"):
    path = os.path.join(top, name)
    shown = subprocess.run(["findmnt", "--json", "--output", "TARGET,SOURCE,FSTYPE,OPTIONS", "--target", path],
                           capture_output=True, text=True, check=True).stdout
    out[name] = {"classified": bt.classify(bt.mount_of(path, mountinfo)), "findmnt": json.loads(shown)["filesystems"]}
print(json.dumps(out))
"""


@needs_root
@pytest.mark.skipif(not (shutil.which("unshare") and shutil.which("findmnt")), reason="needs unshare and findmnt")
def test_a_bind_mount_names_its_directory_and_the_top_of_stacked_mounts_counts(tmp_path):
    got = in_private_namespace(BIND_IN_NAMESPACE, tmp_path)
    bind, stacked = got["bind"], got["stacked"]
    assert bind["classified"]["source"] == "bench-targets-test[/sub]" == bind["findmnt"][-1]["source"]
    assert (bind["classified"]["kind"], bind["classified"]["backend"]) == ("ram", "tmpfs")
    # findmnt lists both stacked mounts (the role's preflight took the first); a file lands on the top one, ramfs.
    assert [one["fstype"] for one in stacked["findmnt"]] == ["tmpfs", "ramfs"]
    assert (stacked["classified"]["fstype"], stacked["classified"]["free_bytes"]) == ("ramfs", None)


# --- the compile tree, walked by descriptors ----------------------------------------------------------

def make_tree(root):
    os.makedirs(os.path.join(root, "src", "deep"))
    with open(os.path.join(root, "Makefile"), "w") as handle:
        handle.write("all:\n")
    with open(os.path.join(root, "src", "a.c"), "w") as handle:
        handle.write("int a;\n" * 10)
    with open(os.path.join(root, "src", "deep", "b.c"), "w") as handle:
        handle.write("b")
    os.symlink("src/a.c", os.path.join(root, "link"))


def test_the_walk_counts_every_file_and_link_and_follows_none(tmp_path):
    make_tree(str(tmp_path))
    os.symlink("/usr", str(tmp_path / "usr-link"))
    walk = bt.walk_tree(str(tmp_path))
    assert walk["error"] == "" and walk["unreadable"] == [] and walk["other_mounts"] == []
    assert walk["files"] == 5
    assert walk["bytes"] == len("all:\n") + 70 + 1 + len("src/a.c") + len("/usr")
    assert bt.walk_tree(str(tmp_path), limit=2)["too_many"] is True
    assert bt.walk_tree(str(tmp_path), limit=5)["too_many"] is False


def swap_after_listing(monkeypatch, swap, listings=1):
    """os.scandir that runs SWAP once, right after the walk has listed LISTINGS directories."""
    real = os.scandir
    done = []

    class Listing:
        def __init__(self, fd):
            self.inner = real(fd)

        def __enter__(self):
            return list(self.inner)

        def __exit__(self, *exc):
            self.inner.close()
            done.append(True)
            if len(done) == listings:
                swap()

    monkeypatch.setattr(os, "scandir", Listing)


def test_a_directory_swapped_for_a_link_during_the_walk_is_refused_not_followed(tmp_path, monkeypatch):
    tree, secret = tmp_path / "tree", tmp_path / "secret"
    make_tree(str(tree))
    secret.mkdir()
    (secret / "key").write_bytes(b"k" * 1000)

    def swap():
        os.rename(str(tree / "src"), str(tmp_path / "src.old"))
        os.symlink(str(secret), str(tree / "src"))

    swap_after_listing(monkeypatch, swap)
    walk = bt.walk_tree(str(tree))
    assert walk["error"] == "%s/src was replaced by a symbolic link or a file while it was walked" % tree
    assert walk["bytes"] < 1000


def test_a_parent_swapped_for_a_link_below_the_walk_does_not_lead_it_out(tmp_path, monkeypatch):
    """A path walk (os.walk, the role's old probe) entered tree/src/deep by its path after tree/src became a link
    to another tree, and counted that tree's files; by descriptors the walk stays in the directory it listed."""
    tree, secret = tmp_path / "tree", tmp_path / "secret"
    make_tree(str(tree))
    (secret / "deep").mkdir(parents=True)
    (secret / "deep" / "key").write_bytes(b"k" * 1000)

    def swap():
        os.rename(str(tree / "src"), str(tmp_path / "src.old"))
        os.symlink(str(secret), str(tree / "src"))

    # Listed first: tree, then src (the walk goes depth first, last listed first).
    swap_after_listing(monkeypatch, swap, listings=2)
    walk = bt.walk_tree(str(tree))
    assert walk["error"] == "" and walk["files"] == 4
    assert walk["bytes"] == len("all:\n") + 70 + 1 + len("src/a.c")


def test_a_directory_swapped_for_another_directory_is_refused(tmp_path, monkeypatch):
    tree, other = tmp_path / "tree", tmp_path / "other"
    make_tree(str(tree))
    other.mkdir()

    def swap():
        os.rename(str(tree / "src"), str(tmp_path / "src.old"))
        os.rename(str(other), str(tree / "src"))

    swap_after_listing(monkeypatch, swap)
    assert bt.walk_tree(str(tree))["error"] == "%s/src was replaced by another directory while it was walked" % tree


def test_a_walk_that_fails_says_why(tmp_path):
    walk = bt.walk_tree(str(tmp_path / "none"))
    assert walk["error"].startswith("FileNotFoundError:") and walk["files"] == 0


WALK_IN_NAMESPACE = """
import json, os, subprocess, sys
from ansible_collections.ramdisk.provision.plugins.module_utils import _bench_targets as bt
top = sys.argv[1]
os.makedirs(os.path.join(top, "mnt"))
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "bench-targets-test", os.path.join(top, "mnt")], check=True)
open(os.path.join(top, "mnt", "inside"), "w").write("x" * 100)
print(json.dumps(bt.walk_tree(top)))
"""


@needs_root
@pytest.mark.skipif(not shutil.which("unshare"), reason="needs unshare")
def test_a_mount_inside_the_tree_is_named_not_entered(tmp_path):
    make_tree(str(tmp_path))
    walk = in_private_namespace(WALK_IN_NAMESPACE, tmp_path)
    assert walk["other_mounts"] == [str(tmp_path / "mnt")] and walk["files"] == 4


@pytest.fixture
def open_tree():
    """A tree under /var/tmp that every user may reach (pytest's tmp_path is closed to others), removed after."""
    root = tempfile.mkdtemp(prefix="bench-targets-test.", dir="/var/tmp")
    os.chmod(root, 0o755)
    make_tree(root)
    for top, dirs, names in os.walk(root):
        for name in dirs:
            os.chmod(os.path.join(top, name), 0o755)
        for name in names:
            if not os.path.islink(os.path.join(top, name)):
                os.chmod(os.path.join(top, name), 0o644)
    yield root
    shutil.rmtree(root)


@needs_root
def test_the_walk_runs_as_the_build_user_and_names_what_it_cannot_read(open_tree):
    nobody = pwd.getpwnam("nobody")
    os.chmod(os.path.join(open_tree, "src", "a.c"), 0o600)
    os.chmod(os.path.join(open_tree, "src", "deep"), 0o700)
    walk = bt.walk_as(open_tree, nobody)
    assert walk["error"] == ""
    assert walk["unreadable"] == [os.path.join(open_tree, "src", "a.c"), os.path.join(open_tree, "src", "deep")]
    # deep is not entered: b.c is not counted.
    assert walk["files"] == 3
    # As root the same tree reads whole.
    assert bt.walk_tree(open_tree)["unreadable"] == []


@needs_root
def test_the_compile_facts_of_a_tree(open_tree):
    facts = bt.compile_facts(open_tree, "sh", "nobody")
    assert facts["source"] == open_tree and facts["program"] == shutil.which("sh") and facts["user"] is True
    assert facts["given_absolute"] is True and facts["files"] == 4 and facts["error"] == ""
    missing = bt.compile_facts(open_tree + "/none", "no-such-program-here", "no-such-user-here")
    assert (missing["source"], missing["program"], missing["user"], missing["files"]) == ("", "", False, 0)
    assert bt.compile_facts("relative/tree", "sh", "nobody")["given_absolute"] is False
    assert bt.compile_facts("", "sh", "nobody") == {}


def test_the_tools_of_the_seeds_and_pgbench(tmp_path):
    for version in ("9.6", "15", "16"):
        (tmp_path / version / "bin").mkdir(parents=True)
    for tool in ("initdb", "pg_ctl", "pgbench", "postgres"):
        for version in ("9.6", "15"):
            path = tmp_path / version / "bin" / tool
            path.write_text("#!/bin/sh\n")
            path.chmod(0o755)
    # 16 lacks the server's programs; 15 is the newest whole one.
    found = bt.tools("no-such-user-here", pg_root=str(tmp_path))
    assert found["pg_bin"] == str(tmp_path / "15" / "bin")
    assert found["user"] is False and found["compile"] == {}
    assert set(found) == {"bonnie", "pg_test_fsync", "user", "pg_bin", "postgres", "compile"}
    assert bt.tools("root", pg_root=str(tmp_path))["user"] is True


# --- why a test does not run here ----------------------------------------------------------------------

PG_MISSING = ("PostgreSQL is not installed on this host (initdb, pg_ctl and pgbench come with the server package,"
              " postgresql-15 on Debian 12), so pgbench could not run here.")


@pytest.mark.parametrize("tests, profile, found, why", [
    (["dd"], "quick", {}, ""),
    (["pgbench"], "seeds", {}, ""),
    (["pgbench"], "quick", {"pg_bin": "/usr/lib/postgresql/15/bin", "postgres": True}, ""),
    (["pgbench"], "quick", {"pg_bin": "", "postgres": True}, PG_MISSING),
    (["pgbench"], "quick", {"pg_bin": "/usr/lib/postgresql/15/bin", "postgres": False},
     "there is no postgres user on this host to run the private cluster as, so pgbench could not run here."),
])
def test_why_pgbench_does_not_run(tests, profile, found, why):
    assert bt.pgbench_skip(tests, profile, found) == why


WHOLE = {"source": "/src", "program": "/usr/bin/make", "user": True}


@pytest.mark.parametrize("asked, source, command, found, why", [
    (False, "", ["make"], {}, ""),
    (True, "", ["make"], {}, "benchmark_compile_source is empty: name a clean source tree on the host to build."),
    (True, "/src", ["make"], {"compile": dict(WHOLE, source="")},
     "benchmark_compile_source /src is not a directory on this host, so there is nothing to build."),
    (True, "/src", ["make", "-j2"], {"compile": dict(WHOLE, program="")},
     "the build command make is not installed on this host (a C build needs make and a compiler: Debian packages"
     " make, gcc and libc6-dev)."),
    (True, "/src", ["make"], {"compile": dict(WHOLE, user=False)},
     "benchmark_compile_user builder does not exist on this host. Give an existing unprivileged user."),
    (True, "/src", ["make"], {"compile": WHOLE}, ""),
])
def test_why_compile_does_not_run(asked, source, command, found, why):
    assert bt.compile_skip(asked, source, command, "builder", found) == why


def test_why_a_seed_does_not_run():
    assert bt.seed_skips("quick", bt.SEEDS, "nobody", {}) == {}
    skips = bt.seed_skips("seeds", ["bonnie", "pg_test_fsync", "fio_dbtest"], "ghost", {"bonnie": "/usr/sbin/bonnie++"})
    assert skips == {
        "tmp_dd": "not asked for: benchmark_seeds leaves it out.",
        "bonnie": "benchmark_seed_user ghost does not exist on this host; bonnie++ runs as root only with -u and a"
                  " user. Give an existing unprivileged user.",
        "fio_dbtest": "",
        "pg_test_fsync": "PostgreSQL is not installed on this host (pg_test_fsync comes with the server package,"
                         " postgresql-15 on Debian 12), so the PostgreSQL write-up could not be rerun here.",
        "dd_64k": "not asked for: benchmark_seeds leaves it out.",
    }
    assert bt.seed_skips("seeds", ["bonnie"], "nobody", {})["bonnie"] == (
        "bonnie++ is not installed on this host (Debian package bonnie++), so the tmpfs vs ext3 write-up could not be"
        " rerun here.")
    assert bt.needs_fio(["fio"], "quick", {}) is True
    assert bt.needs_fio(["fio"], "seeds", {"fio_dbtest": "not asked for: benchmark_seeds leaves it out."}) is False
    assert bt.needs_fio(["dd"], "seeds", skips) is True
    assert bt.needs_fio(["dd"], "quick", {}) is False


# --- every error, word for word ------------------------------------------------------------------------

def errors(targets, disk_path="/var/tmp", mem_available=8 * GIB, system_mounts=bt.SYSTEM_MOUNTS):
    return bt.target_errors("lab", targets, disk_path, mem_available, 0.25, 0.5, system_mounts)


def test_a_good_request_has_no_error():
    assert errors([target(), DISK]) == []


def test_no_ram_target():
    assert errors([DISK]) == [
        "Host lab: no RAM-backed path to benchmark: found no tmpfs, ramfs, zram or brd mount outside /dev, /run, /sys"
        " and /proc, and benchmark_targets names none. Mount one first (role ramdisk.provision.tmpfs) or list it in"
        " benchmark_targets."]
    assert "mount outside the system mounts (^/srv), and" in errors([DISK], system_mounts="^/srv")[0]


@pytest.mark.parametrize("fields, message", [
    ({"exists": False, "is_dir": False, "writeable": False},
     "Host lab: benchmark target /srv/ram (ram) does not exist. Create it or remove it from benchmark_targets or"
     " benchmark_disk_path."),
    ({"is_dir": False},
     "Host lab: benchmark target /srv/ram (ram) is not a directory. Give the directory to write test files in."),
    ({"writeable": False},
     "Host lab: benchmark target /srv/ram (ram) is not writable (read-only mount or permissions). Give a writable"
     " directory."),
    ({"file_size_bytes": 0, "free_bytes": MIB},
     "Host lab: no room to benchmark benchmark target /srv/ram (ram): 1.0 MiB free on the mount, 8.0 GiB MemAvailable;"
     " a test file needs at least 1 MiB within benchmark_space_fraction (0.5) and benchmark_memory_fraction (0.25)."
     " Free space or raise the fractions."),
    ({"file_size_bytes": 0, "free_bytes": None, "fstype": "ramfs"},
     "Host lab: no room to benchmark benchmark target /srv/ram (ram): unlimited free on the mount, 8.0 GiB"
     " MemAvailable; a test file needs at least 1 MiB within benchmark_space_fraction (0.5) and"
     " benchmark_memory_fraction (0.25). Free space or raise the fractions."),
    ({"label": "my ram"},
     "Host lab: benchmark_targets label 'my ram' of /srv/ram is not a plain name: use letters, digits, ., _ and -"
     " (it names the raw files)."),
])
def test_each_target_error(fields, message):
    assert errors([target(**fields), DISK]) == [message]


def test_the_disk_path_on_ram():
    on_ram = target(label="disk", path="/var/tmp", backend="zram", source="/dev/zram0", mount_point="/var/tmp")
    assert errors([target(), on_ram]) == [
        "Host lab: benchmark_disk_path is /var/tmp: it is on zram mounted at /var/tmp, which is RAM, so the RAM targets"
        " would have no disk to be compared with. Give a directory on the disk to compare against, such as /var/tmp,"
        " or set benchmark_disk_path to null to measure the RAM targets only."]
    assert errors([target(), on_ram], disk_path=None) == []


def test_a_disk_on_the_same_mount_as_a_ram_target():
    disk = dict(DISK, mount_point="/srv/ram", source="ramdisk")
    assert errors([target(), disk]) == [
        "Host lab: disk target /var/tmp (disk) and RAM target /srv/ram (ram) are on the same mount, ramdisk at /srv/ram,"
        " so comparing them would measure that mount against itself. Give a disk directory on another mount in"
        " benchmark_disk_path or benchmark_targets."]


def test_a_label_used_twice():
    assert errors([target(), target(path="/srv/ram2", mount_point="/srv/ram2"), DISK]) == [
        "Host lab: benchmark target label 'ram' is used more than once. Give each entry of benchmark_targets its own"
        " label."]


def test_an_entry_without_a_path_and_a_bad_system_mounts():
    result = bt.survey(params(targets=[{"label": "x"}], system_mounts="(("), fio=(True, ""), mountinfo=[],
                       memory=MEMORY, found=FOUND)
    assert result["targets"] == []
    assert result["errors"][0] == (
        'Host lab: benchmark_targets entry 0 is {"label": "x"}: each entry needs a path, the directory to measure, and'
        " may have a label. Give it as {path: /srv/ram, label: ram}.")
    assert result["errors"][1].startswith('Host lab: system_mounts is "((": it is no regular expression (')


COMPILE_FOUND = {"compile": {"source": "/src", "program": "/usr/bin/make", "user": True, "given_absolute": True,
                             "bytes": 10 * MIB, "files": 10, "unreadable": [], "other_mounts": [], "too_many": False,
                             "error": ""}}


def compile_errors(found=None, source="/src", command=("make",), builder="nobody", skip="",
                   targets=None, mem_available=8 * GIB):
    found = COMPILE_FOUND if found is None else found
    return bt.compile_errors("lab", targets or [target(), DISK], source, list(command) if command is not None else None,
                             builder, found, skip, mem_available, 0.25)


def walked(**fields):
    return {"compile": dict(COMPILE_FOUND["compile"], **fields)}


def test_a_compile_that_can_run_has_no_error():
    assert compile_errors() == []


@pytest.mark.parametrize("kwargs, message", [
    ({"builder": "root"},
     "Host lab: benchmark_compile_user is root: the compile test never builds as root. Give an unprivileged user, such"
     " as nobody."),
    ({"builder": "0"},
     "Host lab: benchmark_compile_user is 0: the compile test never builds as root. Give an unprivileged user, such"
     " as nobody."),
    ({"command": ()},
     "Host lab: benchmark_compile_command is []: the build command must be a list of arguments, the program first,"
     ' run without a shell. Give it as a list, such as [make, "-j{cores}"].'),
    ({"source": "src", "found": walked(given_absolute=False, source="")},
     'Host lab: benchmark_compile_source is "src": it must be an absolute path. Give the source tree as'
     " /path/to/tree."),
    ({"found": walked(error="/src/x was replaced by a symbolic link or a file while it was walked")},
     "Host lab: benchmark_compile_source /src could not be walked as nobody to size it before copying (/src/x was"
     " replaced by a symbolic link or a file while it was walked). Give a plain directory tree that the build user"
     " can read."),
    ({"found": walked(other_mounts=["/proc", "/sys", "/dev", "/run"])},
     "Host lab: benchmark_compile_source /src spans other file systems, such as /proc, /sys, /dev: a build tree lies"
     " on one file system. Give the tree itself."),
    ({"found": walked(too_many=True)},
     "Host lab: benchmark_compile_source /src holds more than 100,000 files: the compile test copies it into every"
     " target once per round. Give a smaller tree to build."),
    ({"found": walked(unreadable=["/src/a", "/src/b", "/src/c", "/src/d"])},
     "Host lab: benchmark_compile_source /src has 4 entries that nobody cannot read, such as /src/a, /src/b, /src/c:"
     " the build runs as that user, so the copy would fail. Make the tree readable to it, or give another"
     " benchmark_compile_user."),
    ({"found": walked(bytes=400 * MIB)},
     "Host lab: no room for the compile test on benchmark target /srv/ram (ram): 1.0 GiB free, and a copy of /src"
     " (400.0 MiB) and its build, three times the tree, need 1.2 GiB. Build a smaller tree, or leave compile out of"
     " benchmark_tests."),
])
def test_each_compile_error(kwargs, message):
    assert compile_errors(**kwargs) == [message]


def test_the_compile_command_given_as_a_string():
    got = bt.compile_errors("lab", [target(), DISK], "/src", "make -j2", "nobody", COMPILE_FOUND, "", 8 * GIB, 0.25)
    assert got == ['Host lab: benchmark_compile_command is "make -j2": the build command must be a list of arguments,'
                   ' the program first, run without a shell. Give it as a list, such as [make, "-j{cores}"].']


def test_compile_room_on_ram_is_memory_too_and_a_skipped_compile_needs_none():
    # 1 GiB MemAvailable: a quarter is 256 MiB, less than three times a 100-MiB tree.
    got = compile_errors(found=walked(bytes=100 * MIB), mem_available=GIB)
    assert len(got) == 1 and "benchmark target /srv/ram (ram): 256.0 MiB free, and a copy" in got[0]
    assert compile_errors(found=walked(bytes=400 * MIB), skip="benchmark_compile_source is empty: ...") == []


def test_fio_missing():
    assert bt.fio_error("lab", True, False, False) == [
        "Host lab: fio is not installed and benchmark_install_fio is false. Install fio, set benchmark_install_fio to"
        " true, or leave fio out of benchmark_tests."]
    assert bt.fio_error("lab", True, False, True) == [] == bt.fio_error("lab", False, False, False)


# --- all of it ---------------------------------------------------------------------------------------

MEMORY = {"total_bytes": 16 * GIB, "available_bytes": 8 * GIB}
FOUND = {"bonnie": "", "pg_test_fsync": "", "user": True, "pg_bin": "", "postgres": False, "compile": {}}


def params(**changes):
    base = {"host": "lab", "targets": [], "disk_path": "/var/tmp", "system_mounts": bt.SYSTEM_MOUNTS,
            "profile_size_bytes": 64 * MIB, "memory_fraction": 0.25, "space_fraction": 0.25, "dir_name": "rb",
            "tests": ["dd", "fio", "metadata"], "profile": "quick", "seeds": [], "seed_user": "nobody",
            "compile_source": "", "compile_command": ["make"], "compile_user": "nobody", "needs_fio": None,
            "install_fio": True}
    base.update(changes)
    return base


def test_the_survey_gathers_every_error_and_asks_every_target_about_o_direct(tmp_path):
    asked = []

    def prober(path, name):
        asked.append((path, name))
        return True, None

    result = bt.survey(params(targets=[{"path": "/dev/shm", "label": "shm"}, {"path": str(tmp_path / "none")}],
                              disk_path=str(tmp_path), tests=["fio", "compile"], install_fio=False),
                       fio=(False, ""), memory=MEMORY, found=FOUND, prober=prober)
    # RAM targets too (like against like); a path that is not there is not asked.
    assert asked == [("/dev/shm", "rb"), (str(tmp_path), "rb")]
    shm, missing, disk = result["targets"]
    assert shm["kind"] == "ram" and shm["direct_ok"] is True and disk["direct_ok"] is True
    assert missing["direct_ok"] is False and missing["label"] == bt.default_label(str(tmp_path / "none"))
    assert set(shm) == {"label", "path", "exists", "is_dir", "others_enter", "writeable", "kind", "backend", "fstype",
                        "source", "mount_point", "mount_options", "free_bytes", "file_size_bytes", "zram_device",
                        "direct_ok"}
    assert result["compile_skip"] == "benchmark_compile_source is empty: name a clean source tree on the host to build."
    assert [one.split(" ")[2] for one in result["errors"]] == ["benchmark", "fio"]
    assert result["errors"][0].startswith("Host lab: benchmark target %s (%s) does not exist."
                                          % (tmp_path / "none", missing["label"]))
    assert result["needs_fio"] is True and result["has_fio"] is False
    assert result["cores"] == len(os.sched_getaffinity(0)) and result["mem_available"] == 8 * GIB


def test_needs_fio_given_overrides_the_tests():
    base = dict(fio=(False, ""), mountinfo=bt.read_host()[0], memory=MEMORY, found=FOUND, prober=lambda *args: (False, None))
    asked = bt.survey(params(targets=[{"path": "/dev/shm"}], install_fio=False), **base)
    assert asked["needs_fio"] is True and any("fio is not installed" in one for one in asked["errors"])
    told = bt.survey(params(targets=[{"path": "/dev/shm"}], install_fio=False, needs_fio=False), **base)
    assert told["needs_fio"] is False and told["errors"] == []


def run(tmp_path, **args):
    return run_module_process(MODULE_NAME, tmp_path, dict({"host": "testhost", "profile_size_bytes": 8 * MIB}, **args))


@needs_root
def test_the_module_finds_the_targets_and_changes_nothing(tmp_path):
    disk = tempfile.mkdtemp(prefix="bench-targets-test.", dir="/var/tmp")
    try:
        result = run(tmp_path, targets=[{"path": "/dev/shm", "label": "shm"}], disk_path=disk, dir_name="rb.1",
                     _ansible_check_mode=True)
        assert result.get("failed") is not True, result
        assert result["changed"] is False and result["errors"] == []
        shm, found = result["targets"]
        # tmpfs takes O_DIRECT from Linux 6.6 on.
        release = tuple(int(part) for part in re.findall(r"[0-9]+", os.uname().release)[:2])
        assert (shm["kind"], shm["backend"], shm["direct_ok"]) == ("ram", "tmpfs", release >= (6, 6))
        assert found["kind"] == "disk" and found["label"] == "disk" and found["file_size_bytes"] == 8 * MIB
        assert os.listdir(disk) == []
        assert set(result["tools"]) == {"bonnie", "pg_test_fsync", "user", "pg_bin", "postgres", "compile"}
        if shutil.which("fio"):
            assert result["has_fio"] is True and result["fio_version"].startswith("fio-")
        assert result["seed_skips"] == {} and result["pgbench_skip"] == "" and result["compile_skip"] == ""
    finally:
        shutil.rmtree(disk)


def test_the_module_fails_with_every_error(tmp_path):
    result = run(tmp_path, targets=[{"path": str(tmp_path / "none"), "label": "gone"}], disk_path=None,
                 tests=["compile"], compile_user="root", compile_command="make")
    assert result["failed"] is True
    assert result["msg"].startswith("Host testhost: the benchmark request has 4 error(s), so nothing ran: ")
    starts = ["no RAM-backed path to benchmark", "benchmark target %s (gone) does not exist" % (tmp_path / "none"),
              "benchmark_compile_user is root", 'benchmark_compile_command is "make"']
    assert len(result["errors"]) == len(starts)
    for one, start in zip(result["errors"], starts):
        assert one.startswith("Host testhost: " + start), one
    assert result["targets"][0]["exists"] is False
