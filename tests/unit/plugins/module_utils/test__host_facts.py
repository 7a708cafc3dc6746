# SPDX-License-Identifier: GPL-3.0-or-later
"""mount_facts() on a container's mountinfo and on a ramfs, with statvfs faked where the kernel's figures matter."""

from __future__ import annotations

import os

import pytest

from ansible_collections.ramdisk.provision.plugins.module_utils import _host_facts
from ansible_collections.ramdisk.provision.plugins.module_utils._procfs import parse_mountinfo
from ansible_collections.ramdisk.provision.tests.unit.plugins.module_utils.test__procfs import DOCKER_MOUNTINFO

HALF_RAM = 12638031872


class FakeStatvfs(object):
    def __init__(self, blocks, free, files, ffree, frsize=4096):
        self.f_blocks, self.f_bfree, self.f_files, self.f_ffree, self.f_frsize = blocks, free, files, ffree, frsize


def test_docker_masks_are_not_ram_mounts(monkeypatch):
    # As in the lab: each mask is a tmpfs of half of RAM, the budget counted 11.8 GiB for every one of them.
    monkeypatch.setattr(os, "statvfs", lambda path: FakeStatvfs(HALF_RAM // 4096, HALF_RAM // 4096, 1000, 999))
    mounts = _host_facts.mount_facts(parse_mountinfo(DOCKER_MOUNTINFO), scan_timeout=1)
    assert [mount["path"] for mount in mounts] == ["/dev", "/dev/shm", "/run", "/run/lock"]
    assert all(mount["kind"] == "tmpfs" and mount["usage_from"] == "statvfs" for mount in mounts)


def test_ramfs_usage_comes_from_its_tree(monkeypatch, tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "blob").write_bytes(b"r" * 100000)
    # ramfs keeps no counters: statvfs reports zeros for it.
    monkeypatch.setattr(os, "statvfs", lambda path: FakeStatvfs(0, 0, 0, 0))
    line = "40 27 0:40 / %s rw,nosuid,nodev,relatime - ramfs ramfs rw,mode=755\n" % tmp_path
    (mount,) = _host_facts.mount_facts(parse_mountinfo(line), scan_timeout=5)
    assert mount["kind"] == "ramfs" and mount["usage_from"] == "tree" and mount["complete"] is True
    assert mount["used_bytes"] >= 100000
    assert mount["inodes_used"] == 3
    assert mount["size_bytes"] == 0


def test_unreadable_mount_is_listed_without_figures(monkeypatch):
    def refuse(path):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(os, "statvfs", refuse)
    (mount,) = _host_facts.mount_facts(parse_mountinfo("41 27 0:41 / /srv/cache rw - tmpfs tmpfs rw,size=1024k\n"), 1)
    assert mount["path"] == "/srv/cache"
    assert mount["usage_from"] is None and mount["complete"] is False and mount["size_bytes"] is None


def test_declared_sizes_come_from_the_records_of_mounts(tmp_path):
    (tmp_path / "srv-a-1.json").write_text('{"path": "/srv/a", "fstype": "ramfs", "size_bytes": 67108864}')
    (tmp_path / "srv-b-2.json").write_text('{"path": "/srv/b", "fstype": "tmpfs"}')
    (tmp_path / "broken.json").write_text("{")
    assert _host_facts.declared_sizes(str(tmp_path)) == {"/srv/a": 67108864}
    assert _host_facts.declared_sizes(str(tmp_path / "missing")) == {}


def test_peak_record_of_the_metrics_collector():
    text = ('{"version": 1, "since": 1700000000, "paths": {"/tmp": {"peak_bytes": 4096, "peak_at": 1700000600},'
            ' "/bad": {"peak_bytes": "x"}}}')
    assert _host_facts.peak_facts(text) == {"since": 1700000000,
                                            "paths": {"/tmp": {"peak_bytes": 4096, "peak_at": 1700000600}}}
    # None, broken JSON or another version: no record.
    assert _host_facts.peak_facts("") == {}
    assert _host_facts.peak_facts("{not json") == {}
    assert _host_facts.peak_facts('{"version": 2, "paths": {}}') == {}


def test_zram_records_name_the_entry_of_each_device(tmp_path):
    (tmp_path / "swap.conf").write_text("NAME=swap\nDEVICE=zram2\nSIZE=1073741824\n")
    (tmp_path / "build.conf").write_text("DEVICE=zram0\n")
    (tmp_path / "broken.conf").write_text("DEVICE=../sda\n")
    (tmp_path / "notes.txt").write_text("DEVICE=zram5\n")
    assert _host_facts.zram_records(str(tmp_path)) == {"zram2": "swap", "zram0": "build"}
    assert _host_facts.zram_records(str(tmp_path / "missing")) == {}


@pytest.mark.parametrize("release, config, crypto, offered, source, swap_max", [
    # 6.12 and later: the config names zram's own compressors; /proc/crypto is not asked.
    ("6.18.44", {"CONFIG_ZRAM_BACKEND_LZO": "y", "CONFIG_ZRAM_BACKEND_LZ4": "y", "CONFIG_MIGRATION": "y"},
     "name : deflate\ntype : compression\n", ["lzo-rle", "lzo", "lz4"], "CONFIG_ZRAM_BACKEND_*", 28),
    ("6.1.0", {"CONFIG_CRYPTO_LZ4": "y"}, "name : lzo-rle\ntype : scomp\n", ["lz4"], "CONFIG_CRYPTO_*", 31),
    ("6.1.0", None, "name : lzo-rle\ntype : scomp\n", ["lzo-rle"], "/proc/crypto", 22),
    ("6.18.44", {}, "", [], None, 31),
])
def test_support_tells_what_zram_takes_without_a_device(monkeypatch, release, config, crypto, offered, source,
                                                        swap_max):
    monkeypatch.setattr(_host_facts, "_module_present", lambda release, names: False)
    monkeypatch.setattr(_host_facts, "kernel_config", lambda release: None)  # config=None: no copy to read
    support = _host_facts.support_facts({"tmpfs"}, release, None, (), config=config, crypto_text=crypto)
    assert support["zram_algorithms"] == []
    assert support["zram_algorithms_offered"] == offered
    assert (support["zram_algorithms_from"] is None) if source is None else source in support["zram_algorithms_from"]
    assert support["swap_areas_max"] == swap_max


def test_support_takes_a_device_first():
    device = {"device": "zram0", "algorithms_offered": ["lzo", "zstd"]}
    support = _host_facts.support_facts({"tmpfs"}, "6.18.44", None, (device,), config={}, crypto_text="")
    assert support["zram_algorithms"] == support["zram_algorithms_offered"] == ["lzo", "zstd"]
    assert support["zram_algorithms_from"] == "the comp_algorithm of zram0"


@pytest.mark.parametrize("release, config, answer, supported, basis", [
    ("6.1.0-18-amd64", {"CONFIG_TMPFS_QUOTA": "y"}, True, False, "Linux 6.1.0-18-amd64 is older than 6.6"),
    ("6.18.44", {}, False, False, "the kernel refuses usrquota for tmpfs (fsopen probe)"),
    ("6.8.0", {}, True, True, "the kernel takes usrquota for tmpfs (fsopen probe)"),
    ("6.18.44", {}, None, False, "CONFIG_TMPFS_QUOTA is not set in the kernel's config"),
    ("6.8.0", {"CONFIG_TMPFS_QUOTA": "y"}, None, True, "CONFIG_TMPFS_QUOTA=y in the kernel's config"),
    ("6.8.0", None, None, True, "Linux 6.8.0 is 6.6 or later (its config could not be read)"),
])
def test_tmpfs_quota_support(release, config, answer, supported, basis):
    asked = []

    def probe(name):
        asked.append(name)
        return answer

    assert _host_facts.tmpfs_quota_support(release, config, probe) == (supported, basis)
    assert asked == ([] if release.startswith("6.1.") else ["usrquota"])


def test_tmpfs_quota_probe_changes_nothing():
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        before = handle.read()
    assert _host_facts.probe_tmpfs_flag("not-a-tmpfs-option") in (False, None)
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        assert handle.read() == before


def test_what_lies_on_disk_under_a_mount_is_seen_through_a_clone_of_its_parent(tmp_path):
    data = tmp_path / "srv" / "data"
    (data / "sub").mkdir(parents=True)
    (data / "sub" / "f").write_text("on disk\n")

    def clone(path):
        # The kernel's clone of the parent shows the directory without the mount on it; a plain descriptor of the
        # parent stands in for it here (nothing is mounted in a unit test).
        return os.open(os.path.dirname(path), os.O_RDONLY)

    below = _host_facts.disk_below(str(data), 5, clone=clone)
    assert below["exists"] and below["is_dir"] and below["empty"] is False
    assert below["inodes"] == 3 and below["complete"] is True
    assert _host_facts.disk_below(str(tmp_path / "srv" / "gone"), 5, clone=clone) == {
        "exists": False, "is_dir": None, "empty": None}
    assert _host_facts.disk_below(str(data), 5, clone=lambda path: None) is None


def test_only_an_empty_ram_mount_is_looked_under(monkeypatch, tmp_path):
    looked = []
    monkeypatch.setattr(_host_facts, "disk_below", lambda path, timeout: looked.append(path) or {"empty": False})
    empty, full = tmp_path / "empty", tmp_path / "full"
    empty.mkdir()
    full.mkdir()
    (full / "f").write_text("x")
    mountinfo = parse_mountinfo("".join(
        "%d 1 0:%d / %s rw - %s %s rw\n" % (30 + i, 60 + i, path, fstype, fstype)
        for i, (path, fstype) in enumerate(((empty, "tmpfs"), (full, "tmpfs")))))
    assert _host_facts.path_facts(str(empty), mountinfo, 5)["below"] == {"empty": False}
    assert _host_facts.path_facts(str(full), mountinfo, 5)["below"] is None
    ext4 = parse_mountinfo("40 1 8:1 / %s rw - ext4 /dev/sda1 rw\n" % empty)
    assert _host_facts.path_facts(str(empty), ext4, 5)["below"] is None
    assert looked == [str(empty)]


def test_gather_decides_from_the_mount_table_it_is_given(tmp_path):
    # ramdisk_plan reads the table once, for the facts and for what it says it saw at each path: a mount that came
    # in between two readings was seen and not planned for (two runs then stacked their mounts).
    given = parse_mountinfo("1 0 8:1 / / rw - ext4 /dev/sda1 rw\n30 1 0:60 / %s rw - tmpfs tmpfs rw,size=1024k\n"
                            % tmp_path)
    facts = _host_facts.gather([str(tmp_path)], 5, given)
    assert facts["paths"][str(tmp_path)]["mountpoint"] is True
    assert [mount["path"] for mount in facts["mounts"]] == [str(tmp_path)]
