# SPDX-License-Identifier: GPL-3.0-or-later
"""_trust: which component of a path root cannot trust, and what an existing backing may hold at its top level.

Real directories, owners and modes (chown needs root), read below a private root that stands for /."""

from __future__ import annotations

import os

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
