# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

import os
import struct
import subprocess

import pytest

from ansible_collections.ramdisk.provision.plugins.module_utils._tree import (
    compare_trees,
    is_empty_dir,
    XATTR_OVERHEAD,
    tree_digest,
    tree_usage,
    xattr_space,
)


def _build(root):
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "one.txt").write_text("one\n")
    (root / "a" / "b" / "two.bin").write_bytes(b"\0" * 10000)
    (root / "big").write_bytes(b"x" * 70000)
    os.link(str(root / "big"), str(root / "a" / "big-link"))
    os.symlink("a/one.txt", str(root / "link"))
    return root


def _find_count(path):
    return len(subprocess.run(["find", str(path)], check=True, capture_output=True).stdout.splitlines())


def _du_bytes(path):
    output = subprocess.run(["du", "-sx", "--block-size=1", str(path)], check=True, capture_output=True).stdout
    return int(output.split()[0])


def test_usage_matches_du_and_find(tmp_path):
    root = _build(tmp_path / "tree")
    usage = tree_usage(str(root))
    assert usage["complete"] is True
    assert usage["errors"] == 0
    assert usage["inodes"] == _find_count(root)
    assert usage["usage_bytes"] == _du_bytes(root)


def test_hard_links_counted_once(tmp_path):
    root = _build(tmp_path / "tree")
    with_link = tree_usage(str(root))["usage_bytes"]
    os.unlink(str(root / "a" / "big-link"))
    assert tree_usage(str(root))["usage_bytes"] == with_link


def test_symlink_not_followed(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "huge").write_bytes(b"y" * 200000)
    root = tmp_path / "tree"
    root.mkdir()
    os.symlink(str(outside), str(root / "to-outside"))
    usage = tree_usage(str(root))
    assert usage["inodes"] == 2
    assert usage["usage_bytes"] < 200000


def test_deadline_zero_reports_incomplete(tmp_path):
    root = _build(tmp_path / "tree")
    usage = tree_usage(str(root), timeout=0)
    assert usage["complete"] is False
    assert usage["inodes"] >= 1


def test_missing_root(tmp_path):
    usage = tree_usage(str(tmp_path / "nope"))
    assert usage["complete"] is False and usage["errors"] == 1


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every directory")
def test_permission_error_counted(tmp_path):
    root = _build(tmp_path / "tree")
    (root / "a" / "b").chmod(0)
    try:
        usage = tree_usage(str(root))
    finally:
        (root / "a" / "b").chmod(0o755)
    assert usage["errors"] == 1


def test_deep_tree_no_recursion_limit(tmp_path):
    path = str(tmp_path / "deep")
    os.mkdir(path)
    # Deeper than the interpreter's recursion limit, built with relative mkdirs to keep paths short.
    fd = os.open(path, os.O_RDONLY)
    depth = 1200
    for _level in range(depth):
        os.mkdir("d", dir_fd=fd)
        new_fd = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = new_fd
    os.close(fd)
    try:
        assert tree_usage(path)["inodes"] == depth + 1
    finally:
        # shutil.rmtree recurses; rm does not.
        subprocess.run(["rm", "-rf", path], check=True)


def test_is_empty_dir(tmp_path):
    assert is_empty_dir(str(tmp_path)) is True
    (tmp_path / "f").write_text("")
    assert is_empty_dir(str(tmp_path)) is False
    assert is_empty_dir(str(tmp_path / "missing")) is None


def _copy(src, dest):
    subprocess.run(["cp", "-a", str(src) + "/.", str(dest)], check=True)


def _pair(tmp_path):
    src = _build(tmp_path / "src")
    dest = tmp_path / "dest"
    dest.mkdir()
    _copy(src, dest)
    return src, dest


def _mismatches(src, dest):
    left, left_problems = tree_digest(str(src))
    right, right_problems = tree_digest(str(dest))
    assert left_problems == [] and right_problems == []
    return compare_trees(left, right)


def test_digest_identical_copy(tmp_path):
    src, dest = _pair(tmp_path)
    assert _mismatches(src, dest) == []
    digests, _problems = tree_digest(str(src))
    assert set(digests) == {".", "a", "a/b", "a/one.txt", "a/b/two.bin", "big", "a/big-link", "link"}
    assert digests["link"]["type"] == "symlink" and digests["link"]["target"] == "a/one.txt"
    assert digests["link"]["mtime_ns"] is None
    assert digests["a"]["size"] is None


def test_digest_content(tmp_path):
    src, dest = _pair(tmp_path)
    stat = os.stat(str(dest / "a" / "one.txt"))
    (dest / "a" / "one.txt").write_text("ONE\n")
    os.utime(str(dest / "a" / "one.txt"), ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert _mismatches(src, dest) == [
        "'a/one.txt' differs in content (sha256): %s in the source, %s in the destination." % (
            tree_digest(str(src))[0]["a/one.txt"]["sha256"][:12],
            tree_digest(str(dest))[0]["a/one.txt"]["sha256"][:12])]


def test_digest_mode(tmp_path):
    src, dest = _pair(tmp_path)
    os.chmod(str(src / "big"), 0o644)
    os.chmod(str(dest / "big"), 0o600)
    # The hard link shares the inode, so both names differ.
    assert _mismatches(src, dest) == [
        "'a/big-link' differs in mode: 0644 in the source, 0600 in the destination.",
        "'big' differs in mode: 0644 in the source, 0600 in the destination.",
    ]


def test_digest_symlink_target(tmp_path):
    src, dest = _pair(tmp_path)
    os.unlink(str(dest / "link"))
    os.symlink("a/b/two.bin", str(dest / "link"))
    sentences = _mismatches(src, dest)
    assert "'link' differs in symlink target: 'a/one.txt' in the source, 'a/b/two.bin' in the destination." in sentences


def test_digest_missing_and_extra(tmp_path):
    src, dest = _pair(tmp_path)
    os.unlink(str(dest / "a" / "one.txt"))
    (dest / "new").write_text("")
    sentences = _mismatches(src, dest)
    assert "File 'a/one.txt' is in the source but missing from the destination." in sentences
    assert "File 'new' is in the destination but not in the source." in sentences


def test_digest_type_change(tmp_path):
    src, dest = _pair(tmp_path)
    os.unlink(str(dest / "link"))
    (dest / "link").mkdir()
    assert "'link' is a symlink in the source but a directory in the destination." in _mismatches(src, dest)


def _xattrs_supported(path):
    try:
        os.setxattr(str(path), "user.probe", b"1")
    except OSError:
        return False
    os.removexattr(str(path), "user.probe")
    return True


def test_digest_xattr(tmp_path):
    src, dest = _pair(tmp_path)
    if not _xattrs_supported(src / "big"):
        pytest.skip("this file system has no user xattrs")
    stat = os.stat(str(dest / "a"))
    os.setxattr(str(src / "a" / "one.txt"), "user.origin", b"src")
    os.setxattr(str(dest / "a" / "one.txt"), "user.origin", b"dest")
    os.setxattr(str(src / "big"), "user.only", b"1")
    os.utime(str(dest / "a"), ns=(stat.st_atime_ns, stat.st_mtime_ns))
    sentences = _mismatches(src, dest)
    assert "'a/one.txt' differs in extended attribute user.origin between the source and the destination." in sentences
    assert "'big' has extended attribute user.only in the source but not in the destination." in sentences


def test_dropped_xattrs_may_be_missing_from_the_copy_only(tmp_path):
    src, dest = _pair(tmp_path)
    if not _xattrs_supported(src / "big"):
        pytest.skip("this file system has no user xattrs")
    os.setxattr(str(src / "big"), "user.crtime_usec", b"1")
    os.setxattr(str(src / "big"), "user.origin", b"src")
    left, _left_problems = tree_digest(str(src))
    right, _right_problems = tree_digest(str(dest))
    # 'big' and its hard link 'a/big-link': the same inode.
    assert compare_trees(left, right, dropped_xattrs=["user.crtime_usec"]) == [
        "'%s' has extended attribute user.origin in the source but not in the destination." % name
        for name in ("a/big-link", "big")]
    # A dropped name the copy has with another value is still a difference.
    os.setxattr(str(dest / "big"), "user.crtime_usec", b"2")
    right, _right_problems = tree_digest(str(dest))
    assert "'big' differs in extended attribute user.crtime_usec between the source and the destination." in \
        compare_trees(left, right, dropped_xattrs=["user.crtime_usec"])


def test_tree_usage_counts_user_xattrs(tmp_path):
    src, _dest = _pair(tmp_path)
    if not _xattrs_supported(src / "big"):
        pytest.skip("this file system has no user xattrs")
    os.setxattr(str(src / "big"), "user.crtime_usec", b"1")
    os.setxattr(str(src / "a" / "one.txt"), "user.crtime_usec", b"1")
    os.setxattr(str(src / "a"), "user.origin", b"x")
    found = tree_usage(str(src), xattrs=True)["user_xattrs"]
    assert found["user.crtime_usec"][0] == 2 and found["user.crtime_usec"][1] in ("big", "a/one.txt")
    assert found["user.origin"] == [1, "a"]
    assert tree_usage(str(src))["user_xattrs"] is None


def test_root_mtime_ignored_other_mtime_not(tmp_path):
    src, dest = _pair(tmp_path)
    os.utime(str(dest), ns=(1, 1))
    assert _mismatches(src, dest) == []
    os.utime(str(dest / "big"), ns=(1, 1))
    sentences = _mismatches(src, dest)
    assert any(s.startswith("'big' differs in modification time") for s in sentences)
    left, _left_stats = tree_digest(str(src))
    right, _right_stats = tree_digest(str(dest))
    assert not any("modification time" in s for s in compare_trees(left, right, mtime=False))


@pytest.mark.parametrize("fs_root, where, filled, extra", [
    (True, "", False, False),  # a fresh ext4 root: its lost+found is the file system's own
    (False, "", False, True),  # a plain directory: lost+found is an extra entry like any other
    (True, "", True, True),  # fsck put something in it: that is data, and a difference
    (True, "a/", False, True),  # only the one at the root is the file system's
])
def test_lost_found_at_a_file_system_root(tmp_path, fs_root, where, filled, extra):
    src, dest = _pair(tmp_path)
    (dest / where / "lost+found").mkdir()
    if filled:
        (dest / where / "lost+found" / "#12").write_text("recovered\n")
    left, _left_problems = tree_digest(str(src))
    right, _right_problems = tree_digest(str(dest))
    sentences = compare_trees(left, right, b_fs_root=fs_root)
    assert bool(sentences) is extra, sentences
    if extra:
        assert any("lost+found" in sentence for sentence in sentences)


def test_xattr_space_counts_names_values_and_overhead_not_acls(tmp_path):
    target = tmp_path / "f"
    target.write_text("x")
    try:
        os.setxattr(str(target), "user.a", b"12345")
    except OSError:
        pytest.skip("no user extended attributes here")
    assert xattr_space(str(target)) == XATTR_OVERHEAD + len("user.a") + 5
    # A POSIX ACL costs a tmpfs nothing more: it is kept with the inode (measured on Linux 6.18).
    acl = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", tag, perm, ident) for tag, perm, ident in (
        (1, 6, 0xFFFFFFFF), (2, 6, 1000), (4, 4, 0xFFFFFFFF), (0x10, 6, 0xFFFFFFFF), (0x20, 4, 0xFFFFFFFF)))
    try:
        os.setxattr(str(target), "system.posix_acl_access", acl)
    except OSError:
        pass
    assert xattr_space(str(target)) == XATTR_OVERHEAD + len("user.a") + 5


def test_tree_usage_sums_xattrs_once_per_inode_when_asked(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "f").write_text("x")
    try:
        os.setxattr(str(tmp_path / "sub" / "f"), "user.k", b"v" * 100)
        os.setxattr(str(tmp_path / "sub"), "user.d", b"w")
    except OSError:
        pytest.skip("no user extended attributes here")
    os.link(str(tmp_path / "sub" / "f"), str(tmp_path / "link"))
    usage = tree_usage(str(tmp_path), xattrs=True)
    assert usage["inodes"] == 4
    assert usage["xattr_bytes"] == (XATTR_OVERHEAD + 6 + 100) + (XATTR_OVERHEAD + 6 + 1)
    assert tree_usage(str(tmp_path))["xattr_bytes"] is None
