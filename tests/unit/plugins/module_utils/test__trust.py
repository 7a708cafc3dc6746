# SPDX-License-Identifier: GPL-3.0-or-later
"""_trust: which component of a path root cannot trust, and what an existing backing may hold at its top level.

Real directories, owners and modes (chown needs root), read below a private root that stands for /."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.ramdisk.provision.plugins.module_utils import _trust

NOBODY = 65534
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the fixtures chown to other users: run as root")


def make(root, fixtures):
    """Each fixture: (relative path, kind, mode, uid); kind dir, file or 'link:TARGET'; parents made root 0755."""
    for rel, what, mode, uid in fixtures:
        path = os.path.join(root, rel)
        parent = os.path.dirname(path)
        if not os.path.isdir(parent):
            os.makedirs(parent, 0o755)
        if what == "dir":
            os.mkdir(path)
        elif what == "file":
            with open(path, "w", encoding="utf-8") as handle:
                handle.write("x\n")
        else:
            os.symlink(what.split(":", 1)[1], path)
        if not what.startswith("link:"):
            os.chmod(path, mode)
        os.lchown(path, uid, uid)


def snapshot(backing="srv/b", current="snap-1"):
    return [(backing, "dir", 0o700, 0), (backing + "/snap-1", "dir", 0o700, 0),
            (backing + "/current", "link:" + current, None, 0)]


PATH_CASES = [
    # (id, fixtures, path, expected (path, why) or None)
    ("all root 0755, tail missing", [("var", "dir", 0o755, 0), ("var/lib", "dir", 0o755, 0)],
     "/var/lib/ramdisk-backing/db", None),
    ("all root, backing 0700", [("var", "dir", 0o755, 0), ("var/lib", "dir", 0o755, 0), ("var/lib/b", "dir", 0o700, 0)],
     "/var/lib/b", None),
    ("backing owned by nobody 0755", [("srv", "dir", 0o755, 0), ("srv/b", "dir", 0o755, NOBODY)],
     "/srv/b", ("/srv/b", "owner")),
    ("parent group-writable", [("srv", "dir", 0o775, 0), ("srv/b", "dir", 0o700, 0)], "/srv/b", ("/srv", "writable")),
    ("parent setgid group-writable (staff's /usr/local)", [("usr", "dir", 0o755, 0), ("usr/local", "dir", 0o2775, 0)],
     "/usr/local/libexec/ramdisk-provision", ("/usr/local", "writable")),
    ("sticky world-writable parent like /tmp", [("tmp", "dir", 0o1777, 0)], "/tmp/backing", ("/tmp", "writable")),
    ("world-writable backing itself", [("srv", "dir", 0o755, 0), ("srv/b", "dir", 0o777, 0)], "/srv/b",
     ("/srv/b", "writable")),
    ("parent owned by a user, child root", [("home", "dir", 0o755, 0), ("home/u", "dir", 0o755, NOBODY),
                                            ("home/u/b", "dir", 0o700, 0)], "/home/u/b", ("/home/u", "owner")),
    ("symlink parent", [("srv", "dir", 0o755, 0), ("srv/real", "dir", 0o755, 0), ("srv/alias", "link:real", None, 0)],
     "/srv/alias/b", ("/srv/alias", "symlink")),
    ("symlink backing to /etc", [("srv", "dir", 0o755, 0), ("srv/b", "link:/etc", None, 0)], "/srv/b",
     ("/srv/b", "symlink")),
    ("file in the way", [("srv", "dir", 0o755, 0), ("srv/f", "file", 0o644, 0)], "/srv/f/b",
     ("/srv/f", "not a directory")),
    ("missing tail below a bad parent is still refused", [("srv", "dir", 0o757, 0)], "/srv/new/deeper",
     ("/srv", "writable")),
    ("first bad component is named, not a later one", [("srv", "dir", 0o775, 0), ("srv/b", "dir", 0o777, NOBODY)],
     "/srv/b", ("/srv", "writable")),
]


@pytest.mark.parametrize("fixtures, path, expected", [case[1:] for case in PATH_CASES],
                         ids=[case[0] for case in PATH_CASES])
def test_check_path(tmp_path, fixtures, path, expected):
    root = str(tmp_path / "root")
    os.mkdir(root, 0o755)
    make(root, fixtures)
    found = _trust.check_path(path, root)
    assert (found and (found["path"], found["why"])) == (expected or None)


def test_root_itself_is_checked(tmp_path):
    root = str(tmp_path / "root")
    os.mkdir(root, 0o775)
    os.chmod(root, 0o775)
    found = _trust.check_path("/var/lib/b", root)
    assert (found["path"], found["why"], found["mode"]) == ("/", "writable", "0775")


BACKING_CASES = [
    ("empty backing", [("srv", "dir", 0o755, 0), ("srv/b", "dir", 0o700, 0)], None),
    ("current to a snapshot of root", snapshot(), None),
    ("a snapshot keeps the mount root's owner (postgres 0700)",
     [("srv/b", "dir", 0o700, 0), ("srv/b/snap-1", "dir", 0o700, NOBODY), ("srv/b/current", "link:snap-1", None, 0)],
     None),
    ("a snapshot of a 1777 mount root", [("srv/b", "dir", 0o700, 0), ("srv/b/snap-1", "dir", 0o1777, 0),
                                         ("srv/b/current", "link:snap-1", None, 0)], None),
    ("current points outside", [("srv/b", "dir", 0o700, 0), ("srv/b/current", "link:/etc", None, 0)],
     ("/srv/b/current", "current")),
    ("current climbs out", snapshot(current="../../etc"), ("/srv/b/current", "current")),
    ("current through a subdirectory", snapshot(current="snap-1/.."), ("/srv/b/current", "current")),
    ("current to a missing snapshot", snapshot(current="snap-2"), ("/srv/b/current", "current")),
    ("current to a snapshot that is a link",
     [("srv/b", "dir", 0o700, 0), ("srv/b/snap-1", "link:/etc", None, 0), ("srv/b/current", "link:snap-1", None, 0)],
     ("/srv/b/current", "current")),
    ("current to a file", [("srv/b", "dir", 0o700, 0), ("srv/b/snap-1", "file", 0o644, 0),
                           ("srv/b/current", "link:snap-1", None, 0)], ("/srv/b/current", "current")),
    ("current a directory, not a link", [("srv/b", "dir", 0o700, 0), ("srv/b/current", "dir", 0o700, 0)],
     ("/srv/b/current", "current")),
    ("current a link made by a user", [("srv/b", "dir", 0o700, 0), ("srv/b/snap-1", "dir", 0o700, 0),
                                       ("srv/b/current", "link:snap-1", None, NOBODY)], ("/srv/b/current", "current")),
    ("root's .persist-delta", snapshot() + [("srv/b/.persist-delta", "dir", 0o700, 0),
                                            ("srv/b/.persist-delta/gen-1.json", "file", 0o644, 0),
                                            ("srv/b/.persist-delta/stage", "dir", 0o700, 0),
                                            ("srv/b/.persist-delta/stage/0", "file", 0o666, NOBODY)], None),
    (".persist-delta owned by a user", snapshot() + [("srv/b/.persist-delta", "dir", 0o755, NOBODY)],
     ("/srv/b/.persist-delta", "owner")),
    (".persist-delta writable by others", snapshot() + [("srv/b/.persist-delta", "dir", 0o777, 0)],
     ("/srv/b/.persist-delta", "writable")),
    (".persist-delta a link", snapshot() + [("srv/b/.persist-delta", "link:/etc", None, 0)],
     ("/srv/b/.persist-delta", "entry")),
    ("a planted commit record", snapshot() + [("srv/b/.persist-delta", "dir", 0o700, 0),
                                              ("srv/b/.persist-delta/commit.json", "file", 0o644, NOBODY)],
     ("/srv/b/.persist-delta/commit.json", "owner")),
    ("a commit record every user may write", snapshot() + [("srv/b/.persist-delta", "dir", 0o700, 0),
                                                           ("srv/b/.persist-delta/commit.json", "file", 0o666, 0)],
     ("/srv/b/.persist-delta/commit.json", "writable")),
    ("a commit record that is a link", snapshot() + [("srv/b/.persist-delta", "dir", 0o700, 0),
                                                     ("srv/b/.persist-delta/commit.json", "link:/etc/shadow", None, 0)],
     ("/srv/b/.persist-delta/commit.json", "entry")),
    ("a snapshot that is a link", snapshot() + [("srv/b/snap-2", "link:/etc", None, 0)], ("/srv/b/snap-2", "entry")),
    ("a .new- copy that is a file", snapshot() + [("srv/b/.new-2", "file", 0o644, 0)], ("/srv/b/.new-2", "entry")),
    ("a .current- link made by a user", snapshot() + [("srv/b/.current-2", "link:snap-1", None, NOBODY)],
     ("/srv/b/.current-2", "entry")),
    ("the backing itself owned by a user, current fine", [("srv/b", "dir", 0o755, NOBODY)] + snapshot()[1:],
     ("/srv/b", "owner")),
]


@pytest.mark.parametrize("fixtures, expected", [case[1:] for case in BACKING_CASES],
                         ids=[case[0] for case in BACKING_CASES])
def test_check_backing(tmp_path, fixtures, expected):
    root = str(tmp_path / "root")
    os.mkdir(root, 0o755)
    make(root, fixtures)
    found = _trust.check_backing("/srv/b", root)
    assert (found and (found["path"], found["why"])) == (expected or None)


def test_missing_backing_is_fine(tmp_path):
    root = str(tmp_path / "root")
    os.mkdir(root, 0o755)
    assert _trust.check_backing("/var/lib/ramdisk-backing/new", root) is None


WORDS_CASES = [
    ("srv/b", "dir", 0o755, NOBODY, "owner",
     ["'/srv/b' is owned by", "(uid 65534, gid 65534), mode 0755", "a user other than root"],
     "chown root:root /srv/b"),
    ("srv/b", "dir", 0o2775, 0, "writable", ["mode 2775, writable by the group"], "chmod go-w /srv/b"),
    ("srv/b", "dir", 0o777, NOBODY, "owner", ["mode 0777"], "chown root:root /srv/b; chmod go-w /srv/b"),
    ("srv/b", "dir", 0o1777, 0, "writable", ["writable by every user (sticky or not"], None),
]


@pytest.mark.parametrize("rel, what, mode, uid, why, words, fix", WORDS_CASES,
                         ids=["owner", "group", "owner and mode", "sticky"])
def test_describe_and_fix(tmp_path, rel, what, mode, uid, why, words, fix):
    root = str(tmp_path / "root")
    os.mkdir(root, 0o755)
    make(root, [("srv", "dir", 0o755, 0), (rel, what, mode, uid)])
    found = _trust.check_path("/srv/b", root)
    assert found["why"] == why
    text = _trust.describe(found)
    assert all(word in text for word in words), text
    assert _trust.fix(found) == fix


def test_relative_or_dotdot_path_is_an_error(tmp_path):
    for path in ("srv/b", "/srv/../etc"):
        with pytest.raises(_trust.TrustError):
            _trust.check_path(path, str(tmp_path))


# The plan's side: review_persist refuses a backing that fails the model, naming host, variable, value, component,
# owner, mode and fix; read_state reads it from the host.
HOST = "db01"
TOKEN = "srv-data-1a2b3c4d"


def planned(backing, state="mounted"):
    return {"label": "ramdisk_mounts__db[0]", "path": "/srv/data", "token": TOKEN, "state": state, "action": "mount",
            "fstype": "tmpfs", "persist": {"backing": backing, "interval": "5min", "services": []}}


REVIEW_CASES = [
    ("backing owned by nobody", [("srv", "dir", 0o755, 0), ("srv/b", "dir", 0o755, NOBODY)],
     ["Host db01: ramdisk_mounts__db[0].persist.backing is '/srv/b': '/srv/b' is owned by", "uid 65534",
      "mode 0755", "run `chown root:root /srv/b`", "/var/lib/ramdisk-backing/<name>"]),
    ("group-writable parent", [("srv", "dir", 0o775, 0), ("srv/b", "dir", 0o700, 0)],
     ["persist.backing is '/srv/b': '/srv' is owned by root:", "mode 0775, writable by the group",
      "run `chmod go-w /srv`"]),
    ("sticky world-writable parent", [("srv", "dir", 0o1777, 0)],
     ["persist.backing is '/srv/b': '/srv' is", "mode 1777, writable by every user (sticky or not",
      "Fix: choose a backing under /var/lib", "a directory every user may write cannot hold one"]),
    ("current points outside", [("srv/b", "dir", 0o700, 0), ("srv/b/current", "link:/etc", None, 0)],
     ["persist.backing is '/srv/b': '/srv/b/current' is a link made by root that leads to '/etc'",
      "only the persist helper, as root, writes the top of a backing", "move it out of the backing"]),
    ("planted .persist-delta", [("srv/b", "dir", 0o700, 0), ("srv/b/.persist-delta", "dir", 0o755, NOBODY),
                                ("srv/b/.persist-delta/commit.json", "file", 0o644, NOBODY)],
     ["'/srv/b/.persist-delta' is owned by nobody", "uid 65534", "look at what '/srv/b/.persist-delta' holds"]),
]


@pytest.mark.parametrize("fixtures, words", [case[1:] for case in REVIEW_CASES], ids=[case[0] for case in REVIEW_CASES])
@pytest.mark.parametrize("state", ["mounted", "absent"])
def test_review_refuses_an_untrusted_backing(tmp_path, fixtures, words, state):
    from ansible_collections.ramdisk.provision.plugins.module_utils._persist import review_persist
    root = str(tmp_path / "root")
    os.mkdir(root, 0o755)
    make(root, fixtures)
    host_state = {"unit": state == "absent", "active": False, "conf_backing": None, "backing_exists": True,
                  "backing_is_dir": True, "current": "missing", "names": [], "mount_empty": None,
                  "trust": _trust.check_backing("/srv/b", root)}
    review = review_persist([planned("/srv/b", state)], {TOKEN: host_state}, HOST)
    assert len(review["errors"]) == 1 and TOKEN not in review["decisions"], review
    assert all(word in review["errors"][0] for word in words), review["errors"][0]


def test_read_state_reads_the_trust_of_a_backing_under_tmp(tmp_path):
    """A real read: pytest's directory is under /tmp (1777), which any user could have made the backing's parent in."""
    from ansible_collections.ramdisk.provision.plugins.module_utils._persist import read_state, review_persist
    backing = str(tmp_path / "backing")
    os.mkdir(backing, 0o700)
    state = read_state(TOKEN, backing, None, False, None)
    assert state["trust"]["path"] == "/tmp" and state["trust"]["why"] == "writable", state
    review = review_persist([planned(backing)], {TOKEN: state}, HOST)
    assert review["errors"] and "'/tmp' is owned by root:root (uid 0, gid 0), mode 1777" in review["errors"][0]


def test_review_of_a_trusted_backing_is_unchanged():
    from ansible_collections.ramdisk.provision.plugins.module_utils._persist import review_persist
    host_state = {"unit": False, "active": False, "conf_backing": None, "backing_exists": False,
                  "backing_is_dir": False, "current": "missing", "names": [], "mount_empty": None, "trust": None}
    review = review_persist([planned("/var/lib/ramdisk-backing/db")], {TOKEN: host_state}, HOST)
    assert review["errors"] == [] and review["decisions"][TOKEN]["source"] == "ram"


# The collection's own state directories: a host where one of them, or a directory above, is not root's alone.
STATE_CASES = [
    ("all root's", [("etc", "dir", 0o755, 0), ("usr/local", "dir", 0o755, 0)], None),
    ("Debian's /usr/local with the staff group (2775)", [("usr", "dir", 0o755, 0), ("usr/local", "dir", 0o2775, 0)],
     ["Host db01: '/usr/local' is owned by root:", "mode 2775, writable by the group",
      "keeps /usr/local/libexec/ramdisk-provision below it", "Nothing was changed. Fix: run `chmod go-w /usr/local`"]),
    ("a journal directory owned by a user", [("var/lib/ramdisk-provision", "dir", 0o755, NOBODY)],
     ["'/var/lib/ramdisk-provision' is owned by", "uid 65534", "keeps /var/lib/ramdisk-provision below it",
      "run `chown root:root /var/lib/ramdisk-provision`"]),
    ("/run every user may write", [("run", "dir", 0o1777, 0)],
     ["'/run' is owned by root:root", "mode 1777", "make '/run' a directory of root's that only root can write"]),
    ("a records directory that is a link", [("srv", "dir", 0o755, 0), ("etc/ramdisk-provision", "link:/srv", None, 0)],
     ["'/etc/ramdisk-provision' is a symlink (to '/srv')"]),
]


@pytest.mark.parametrize("fixtures, words", [case[1:] for case in STATE_CASES], ids=[case[0] for case in STATE_CASES])
def test_state_dirs(tmp_path, fixtures, words):
    from ansible_collections.ramdisk.provision.plugins.module_utils._host_paths import STATE_DIRS
    root = str(tmp_path / "root")
    os.mkdir(root, 0o755)
    make(root, fixtures)
    text = _trust.state_dirs_error(HOST, STATE_DIRS, root)
    if words is None:
        assert text is None
    else:
        assert text and all(word in text for word in words), text


@pytest.mark.skipif(not shutil.which("unshare"), reason="needs unshare (util-linux)")
@pytest.mark.parametrize("module", ["ramdisk_plan", "ramdisk_apply"])
def test_the_modules_refuse_a_staff_writable_usr_local_before_reading_the_journal(tmp_path, module):
    """For real: the module runs in a private mount namespace whose /usr/local is root:root 2775."""
    args = tmp_path / "args.json"
    args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {"host": HOST}}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    script = 'mount -t tmpfs -o mode=2775,size=1m ramdisk-trust-test /usr/local && exec "$@"'
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", sys.executable,
                           "-m", "ansible_collections.ramdisk.provision.plugins.modules." + module, str(args)],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    result = json.loads(proc.stdout)
    assert result.get("failed"), result
    assert result["msg"].startswith("Host db01: '/usr/local' is owned by root:root (uid 0, gid 0), mode 2775"), result
    assert "Fix: run `chmod go-w /usr/local`" in result["msg"]
