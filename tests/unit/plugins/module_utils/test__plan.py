# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

import copy

import pytest

from ansible_collections.ramdisk.provision.plugins.module_utils._plan import plan_ramfs, plan_tmpfs
from ansible_collections.ramdisk.provision.plugins.module_utils._plan_core import plan_summary
from ansible_collections.ramdisk.provision.plugins.module_utils._size import tmpfs_percent_bytes

GIB = 1024 ** 3
MIB = 1024 ** 2
RAM = 16 * GIB
HOST = "web01"
VAR = "tmpfs_mounts"


def _path(exists=True, empty=True, is_dir=True, mountpoint=False, fstype="ext4", source="/dev/vda1"):
    return {"exists": exists, "is_dir": is_dir if exists else None, "empty": empty if exists else None,
            "mountpoint": mountpoint, "fstype": fstype, "source": source, "usage_bytes": 8192 if not empty else 4096,
            "inodes": 3 if not empty else 1}


def _live(path, size_bytes, used_bytes=0, inodes_total=100000, inodes_used=1, options=(), fstype="tmpfs"):
    return {"path": path, "fstype": fstype, "source": fstype, "options": ["rw", "relatime"] + list(options),
            "size_bytes": size_bytes, "used_bytes": used_bytes, "inodes_total": inodes_total,
            "inodes_used": inodes_used}


FACTS = {
    "memory": {"total_bytes": RAM, "available_bytes": 12 * GIB},
    "support": {"tmpfs": True, "tmpfs_noswap": True, "kernel": "6.8.0"},
    "paths": {
        "/tmp": _path(mountpoint=True, fstype="tmpfs", source="tmpfs"),
        "/var/tmp": _path(empty=False),
        "/srv/empty": _path(),
        "/srv/missing": _path(exists=False),
        "/srv/data": _path(empty=False),
        "/srv/ext4": _path(mountpoint=True, fstype="ext4", source="/dev/sdb1"),
        "/srv/file": _path(is_dir=False, empty=None),
        "/run/build": _path(exists=False),
        "/var/cache/x": _path(),
        "/var/lib/x": _path(),
        "/srv/ramfs": _path(mountpoint=True, fstype="ramfs", source="ramfs"),
        "/srv/noswap": _path(mountpoint=True, fstype="tmpfs", source="tmpfs"),
        "/srv/swapping": _path(mountpoint=True, fstype="tmpfs", source="tmpfs"),
        "/srv/full": _path(mountpoint=True, fstype="tmpfs", source="tmpfs"),
    },
    "mounts": [
        _live("/tmp", tmpfs_percent_bytes(50, RAM), used_bytes=1 * GIB, inodes_used=500,
              options=["size=8388608k", "nr_inodes=100000", "mode=1777"]),
        _live("/srv/ramfs", 0, fstype="ramfs"),
        _live("/srv/noswap", 1 * GIB, options=["size=1048576k", "noswap"]),
        _live("/srv/swapping", 1 * GIB, options=["size=1048576k"]),
        _live("/srv/full", 2 * GIB, used_bytes=1536 * MIB, inodes_used=5000, options=["size=2097152k"]),
    ],
}


def plan(mounts, facts=None, defaults=None):
    return plan_tmpfs(mounts, copy.deepcopy(FACTS if facts is None else facts), HOST, VAR, defaults)


def ok_entry(**values):
    entry = {"path": "/srv/empty", "size": "1G"}
    entry.update(values)
    return entry


INVALID = [
    # (entry, variable named, value shown, words of the problem)
    (ok_entry(path="tmp"), "tmpfs_mounts[0].path", "'tmp'", "relative path"),
    (ok_entry(path=""), "tmpfs_mounts[0].path", "''", "not a path"),
    (ok_entry(path=None), "tmpfs_mounts[0].path", "missing", "not a path"),
    (ok_entry(path="/"), "tmpfs_mounts[0].path", "'/'", "system path"),
    (ok_entry(path="/proc"), "tmpfs_mounts[0].path", "'/proc'", "system path"),
    (ok_entry(path="/sys/kernel"), "tmpfs_mounts[0].path", "'/sys/kernel'", "system path"),
    (ok_entry(path="/dev/shm"), "tmpfs_mounts[0].path", "'/dev/shm'", "system path"),
    (ok_entry(path="/run"), "tmpfs_mounts[0].path", "'/run'", "system path"),
    (ok_entry(path="/run/"), "tmpfs_mounts[0].path", "'/run/'", "system path"),
    (ok_entry(path="/var//lib/"), "tmpfs_mounts[0].path", "'/var//lib/'", "system path"),
    (ok_entry(path="/etc"), "tmpfs_mounts[0].path", "'/etc'", "system path"),
    (ok_entry(path="/home"), "tmpfs_mounts[0].path", "'/home'", "system path"),
    (ok_entry(path="/srv/../etc"), "tmpfs_mounts[0].path", "'/srv/../etc'", "'..'"),
    # Package databases and system state: hidden, the host breaks; copied in, what is written there is lost.
    (ok_entry(path="/var/lib/dpkg"), "tmpfs_mounts[0].path", "'/var/lib/dpkg'", "(/var/lib/dpkg holds dpkg's package"),
    (ok_entry(path="/var/lib/dpkg/info"), "tmpfs_mounts[0].path", "'/var/lib/dpkg/info'", "(/var/lib/dpkg holds"),
    (ok_entry(path="/var/lib/rpm"), "tmpfs_mounts[0].path", "'/var/lib/rpm'", "rpm's package database"),
    (ok_entry(path="/usr/lib/sysimage/rpm"), "tmpfs_mounts[0].path", "'/usr/lib/sysimage/rpm'", "(/usr holds"),
    (ok_entry(path="/var/lib/apt/lists/"), "tmpfs_mounts[0].path", "'/var/lib/apt/lists/'", "apt's package state"),
    (ok_entry(path="/var/lib/pacman"), "tmpfs_mounts[0].path", "'/var/lib/pacman'", "pacman's package database"),
    (ok_entry(path="/var/lib/systemd/timers"), "tmpfs_mounts[0].path", "'/var/lib/systemd/timers'", "systemd's state"),
    (ok_entry(path="/var/lib/ramdisk-provision"), "tmpfs_mounts[0].path", "'/var/lib/ramdisk-provision'",
     "intent journal"),
    (ok_entry(path="/etc/ssh"), "tmpfs_mounts[0].path", "'/etc/ssh'", "(/etc holds the host's configuration"),
    (ok_entry(path="/boot/efi"), "tmpfs_mounts[0].path", "'/boot/efi'", "the kernels and the boot loader"),
    (ok_entry(path="/lib/modules"), "tmpfs_mounts[0].path", "'/lib/modules'", "kernel modules"),
    (ok_entry(path="/run/systemd/journal"), "tmpfs_mounts[0].path", "'/run/systemd/journal'", "systemd's runtime"),
    (ok_entry(path="/run/ramdisk-provision/x"), "tmpfs_mounts[0].path", "'/run/ramdisk-provision/x'", "lock"),
    # Text nobody sees, or that no line of a file can hold.
    (ok_entry(path="/srv/no\u00a0break"), "tmpfs_mounts[0].path", "'/srv/no\\xa0break'", "U+00A0"),
    (ok_entry(path="/srv/zero\u200bwidth"), "tmpfs_mounts[0].path", "'/srv/zero\\u200bwidth'",
     "a character that does not show as itself (U+200B)"),
    (ok_entry(path="/srv/line\u2028sep"), "tmpfs_mounts[0].path", "'/srv/line\\u2028sep'", "U+2028"),
    (ok_entry(path="/srv/a\x85b"), "tmpfs_mounts[0].path", "'/srv/a\\x85b'", "a control character"),
    (ok_entry(path="/srv/bytes\udcff"), "tmpfs_mounts[0].path", "'/srv/bytes\\udcff'", "not valid UTF-8"),
    (ok_entry(path="/srv/trailing /x"), "tmpfs_mounts[0].path", "'/srv/trailing /x'", "begins or ends with a space"),
    (ok_entry(path="/srv/ leading"), "tmpfs_mounts[0].path", "'/srv/ leading'", "begins or ends with a space"),
    (ok_entry(size=0), "tmpfs_mounts[0].size", "0", "above zero"),
    (ok_entry(size="-1G"), "tmpfs_mounts[0].size", "'-1G'", "above zero"),
    (ok_entry(size="10X"), "tmpfs_mounts[0].size", "'10X'", "unknown unit 'X'"),
    (ok_entry(size="lots"), "tmpfs_mounts[0].size", "'lots'", "unknown name"),
    (ok_entry(size="32G"), "tmpfs_mounts[0].size", "'32G'", "above this host's RAM of 16.0 GiB"),
    (ok_entry(size="101%"), "tmpfs_mounts[0].size", "'101%'", "above this host's RAM"),
    (ok_entry(size=None), "tmpfs_mounts[0].size", "missing", "required"),
    (ok_entry(nr_inodes=0), "tmpfs_mounts[0].nr_inodes", "0", "above zero"),
    (ok_entry(nr_inodes="-5"), "tmpfs_mounts[0].nr_inodes", "'-5'", "not a whole number"),
    (ok_entry(nr_inodes="1.5k"), "tmpfs_mounts[0].nr_inodes", "'1.5k'", "not a whole number"),
    (ok_entry(mode=1777), "tmpfs_mounts[0].mode", "1777", "Quote the octal mode"),
    (ok_entry(mode="u+rwx"), "tmpfs_mounts[0].mode", "'u+rwx'", "not an octal mode"),
    (ok_entry(mode="0999"), "tmpfs_mounts[0].mode", "'0999'", "not an octal mode"),
    (ok_entry(mode="17777"), "tmpfs_mounts[0].mode", "'17777'", "not an octal mode"),
    (ok_entry(huge="sometimes"), "tmpfs_mounts[0].huge", "'sometimes'", "huge page policy"),
    (ok_entry(mpol="bind:"), "tmpfs_mounts[0].mpol", "'bind:'", "NUMA memory policy"),
    (ok_entry(owner="bad name"), "tmpfs_mounts[0].owner", "'bad name'", "user or group name"),
    (ok_entry(group=-1), "tmpfs_mounts[0].group", "-1", "not a valid id"),
    (ok_entry(noswap="maybe"), "tmpfs_mounts[0].noswap", "'maybe'", "not a boolean"),
    (ok_entry(migrate=3), "tmpfs_mounts[0].migrate", "3", "not a boolean"),
    (ok_entry(state="present"), "tmpfs_mounts[0].state", "'present'", "Use mounted or absent"),
    (ok_entry(options="nofail"), "tmpfs_mounts[0].options", "'nofail'", "not a list"),
    (ok_entry(options=["nofail,noauto"]), "tmpfs_mounts[0].options[0]", "'nofail,noauto'", "one string"),
    (ok_entry(options=["bogus"]), "tmpfs_mounts[0].options[0]", "'bogus'", "not a tmpfs or mount option"),
    (ok_entry(options=["size=2G"]), "tmpfs_mounts[0].options[0]", "'size=2G'", "Set size in the entry"),
    (ok_entry(options=["uid=0"]), "tmpfs_mounts[0].options[0]", "'uid=0'", "Set owner in the entry"),
    (ok_entry(options=["exec"], noexec=True), "tmpfs_mounts[0].options[0]", "'exec'", "contradicting noexec"),
    (ok_entry(options=["relatime"], noatime=True), "tmpfs_mounts[0].options[0]", "'relatime'", "contradicting noatime"),
    (ok_entry(options=["suid"], nosuid=True), "tmpfs_mounts[0].options[0]", "'suid'", "contradicting nosuid"),
    (ok_entry(options=["nodev"], nodev=False), "tmpfs_mounts[0].options[0]", "'nodev'", "Set nodev in the entry"),
    (ok_entry(options=[7]), "tmpfs_mounts[0].options[0]", "7", "not an option string"),
    (ok_entry(sise="1G"), "tmpfs_mounts[0].sise", "'1G'", "unknown key"),
    ("/tmp", "tmpfs_mounts[0]", "'/tmp'", "not a mapping"),
    (ok_entry(path="/srv/data"), "tmpfs_mounts[0].path", "'/srv/data'", "not empty"),
    (ok_entry(path="/srv/ext4"), "tmpfs_mounts[0].path", "'/srv/ext4'", "ext4 file system from /dev/sdb1"),
    (ok_entry(path="/srv/ramfs"), "tmpfs_mounts[0].path", "'/srv/ramfs'", "ramfs file system"),
    (ok_entry(path="/srv/file"), "tmpfs_mounts[0].path", "'/srv/file'", "a file, not a directory"),
    (ok_entry(path="/srv/unknown"), "tmpfs_mounts[0].path", "'/srv/unknown'", "did not look at it"),
    (ok_entry(path="/srv/full", size="1G"), "tmpfs_mounts[0].path", "'/srv/full'", "below the 1.5 GiB already used"),
    (ok_entry(path="/srv/full", size="4G", nr_inodes=100), "tmpfs_mounts[0].path", "'/srv/full'",
     "below the 5000 inodes already used"),
]


@pytest.mark.parametrize("entry, variable, value, words", INVALID)
def test_invalid_entry(entry, variable, value, words):
    result = plan([entry])
    assert result["errors"], "expected an error"
    matching = [error for error in result["errors"] if variable + " is " + value in error]
    assert matching, result["errors"]
    assert any(words in error for error in matching), result["errors"]
    assert all(error.startswith("Host web01: ") for error in result["errors"])


ACCEPTED_PATHS = [
    # Printable text fstab escapes (\\040, \\134) and the units quote; directories of one's own beside refused ones.
    "/srv/with space", "/srv/a#b", "/srv/back\\slash", "/srv/it's \"quoted\"", "/srv/100%", "/srv/$HOME",
    "/srv/caf\u00e9", "/usr/local/cache", "/var/cache/apt", "/var/lib/postgresql", "/var/log", "/run/build",
    "/var/lib/dpkg-old", "/etcetera",
]


@pytest.mark.parametrize("path", ACCEPTED_PATHS)
def test_accepted_paths(path):
    facts = copy.deepcopy(FACTS)
    facts["paths"][path] = _path(exists=False)
    result = plan_tmpfs([ok_entry(path=path)], facts, HOST, VAR)
    assert result["errors"] == []
    assert result["mounts"][0]["path"] == path and result["mounts"][0]["action"] == "mount"


def test_at_least_25_invalid_cases():
    assert len(INVALID) >= 25


def test_noswap_unsupported_kernel():
    facts = copy.deepcopy(FACTS)
    facts["support"] = {"tmpfs": True, "tmpfs_noswap": False, "kernel": "5.15.0"}
    errors = plan([ok_entry(noswap=True)], facts)["errors"]
    assert errors == ["Host web01: tmpfs_mounts[0].noswap is True: not supported by this host's kernel 5.15.0 "
                      "(noswap needs Linux 6.4 or later). Set noswap: false or upgrade the kernel."]


def test_duplicate_after_normalization():
    errors = plan([ok_entry(path="/srv/empty"), ok_entry(path="/srv//empty/")])["errors"]
    assert len(errors) == 1
    assert "tmpfs_mounts[1].path is '/srv//empty/': the same mount point as tmpfs_mounts[0].path" in errors[0]


def test_nested_mounts_rejected():
    errors = plan([ok_entry(path="/var/cache/x"), ok_entry(path="/var/cache/x/sub")])["errors"]
    assert len(errors) == 1
    assert "tmpfs_mounts[1].path is '/var/cache/x/sub': it is inside tmpfs_mounts[0].path '/var/cache/x'" in errors[0]


def test_not_a_list():
    assert "tmpfs_mounts is '/tmp': not a list" in plan("/tmp")["errors"][0]


def test_missing_memory_facts():
    assert "memory.total_bytes is missing" in plan([ok_entry()], {"paths": FACTS["paths"]})["errors"][0]


VALID = [
    # (entry, action, options, remount_options)
    (ok_entry(), "mount", ["size=1073741824"], []),
    (ok_entry(path="/srv/missing/", size="50%", mode="1777", nosuid=True, nodev=True),
     "mount", ["size=50%", "mode=1777", "nosuid", "nodev"], []),
    (ok_entry(path="/run/build", size="min(ram / 2, 8G)", nr_inodes="1m", mode="0755", huge="within_size",
              mpol="interleave:0-1", noswap=True, noatime=True, nosuid=True, nodev=True, noexec=True,
              options=["nofail", "x-systemd.requires=foo.service", "comment=ramdisk", "nofail"]),
     "mount",
     ["size=%d" % (8 * GIB), "nr_inodes=1048576", "mode=755", "huge=within_size", "mpol=interleave:0-1", "noswap",
      "noatime", "nosuid", "nodev", "noexec", "nofail", "x-systemd.requires=foo.service", "comment=ramdisk"], []),
    (ok_entry(path="/var/tmp", migrate=True), "migrate", ["size=1073741824"], []),
    (ok_entry(path="/var/cache/x", size="1000"), "mount", ["size=4096"], []),
    (ok_entry(path="/var/lib/x", state="absent"), "absent-ok", ["size=1073741824"], []),
    (ok_entry(path="/tmp", size="50%", nr_inodes=100000, mode="1777"), "ok",
     ["size=50%", "nr_inodes=100000", "mode=1777"], ["size=50%", "nr_inodes=100000", "relatime", "suid", "dev", "exec"]),
    (ok_entry(path="/tmp", size="50%", huge="never", mpol="default"), "ok",
     ["size=50%", "huge=never", "mpol=default"], ["size=50%", "huge=never", "mpol=default", "relatime", "suid", "dev", "exec"]),
    (ok_entry(path="/tmp", size="60%"), "remount", ["size=60%"], ["size=60%", "relatime", "suid", "dev", "exec"]),
    (ok_entry(path="/tmp", size="50%", nr_inodes="200k"), "remount", ["size=50%", "nr_inodes=204800"],
     ["size=50%", "nr_inodes=204800", "relatime", "suid", "dev", "exec"]),
    (ok_entry(path="/tmp", size="50%", huge="always"), "remount", ["size=50%", "huge=always"],
     ["size=50%", "huge=always", "relatime", "suid", "dev", "exec"]),
    (ok_entry(path="/tmp", state="absent"), "unmount", ["size=1073741824"], []),
    (ok_entry(path="/tmp", state="absent", size=None), "unmount", [], []),
    (ok_entry(path="/srv/noswap", noswap=True), "ok", ["size=1073741824", "noswap"],
     ["size=1073741824", "relatime", "suid", "dev", "exec", "noswap"]),
    (ok_entry(path="/srv/full", size="4G"), "remount", ["size=4294967296"], ["size=4294967296", "relatime", "suid", "dev", "exec"]),
    (ok_entry(path="/srv/empty", noatime="yes", nodev="false"), "mount", ["size=1073741824", "noatime"], []),
    # VFS flags change on a live tmpfs with a remount: no reboot, no unmount.
    (ok_entry(path="/tmp", size="50%", nosuid=True, noexec=True), "remount", ["size=50%", "nosuid", "noexec"],
     ["size=50%", "relatime", "nosuid", "dev", "noexec"]),
]


@pytest.mark.parametrize("entry, action, options, remount_options", VALID)
def test_valid_entry(entry, action, options, remount_options):
    result = plan([entry])
    assert result["errors"] == []
    (planned,) = result["mounts"]
    assert planned["action"] == action
    assert planned["options"] == options
    assert planned["remount_options"] == remount_options
    assert planned["fstype"] == "tmpfs"


def test_noswap_change_needs_reboot_not_failure():
    result = plan([ok_entry(path="/srv/swapping", noswap=True), ok_entry(path="/srv/noswap", noswap=False)])
    assert result["errors"] == []
    for planned in result["mounts"]:
        assert planned["noswap_change"] is True
        assert planned["reboot_required"] is True
        assert planned["action"] == "ok"


def test_current_and_sizes():
    (planned,) = plan([ok_entry(path="/tmp", size="50%")])["mounts"]
    assert planned["current"]["path"] == "/tmp"
    assert planned["size_bytes"] == tmpfs_percent_bytes(50, RAM)
    assert planned["size_option"] == "50%"
    (fresh,) = plan([ok_entry()])["mounts"]
    assert fresh["current"] is None


def test_percent_of_a_cgroup_limit_is_given_to_the_kernel_in_bytes():
    # RAM here is a 1 GiB cgroup limit; the kernel would take 50% of the machine's 16 GiB.
    facts = copy.deepcopy(FACTS)
    facts["memory"] = {"total_bytes": GIB, "available_bytes": GIB // 2, "capped_by_cgroup": True,
                       "meminfo_total_bytes": RAM}
    (planned,) = plan([ok_entry(path="/srv/missing", size="50%")], facts)["mounts"]
    assert planned["size_bytes"] == tmpfs_percent_bytes(50, GIB)
    assert planned["size_option"] == str(tmpfs_percent_bytes(50, GIB))
    assert "size=%d" % tmpfs_percent_bytes(50, GIB) in planned["options"]


def test_defaults_fill_missing_keys_and_entries_win():
    defaults = {"size": "25%", "nosuid": True, "nodev": True, "mode": "1777", "state": "mounted"}
    result = plan([{"path": "/srv/empty"}, {"path": "/var/cache/x", "nosuid": False, "mode": "0700"}],
                  defaults=defaults)
    assert result["errors"] == []
    assert result["mounts"][0]["options"] == ["size=25%", "mode=1777", "nosuid", "nodev"]
    assert result["mounts"][1]["options"] == ["size=25%", "mode=700", "nodev"]


def test_owner_group_kept_unresolved():
    (planned,) = plan([ok_entry(owner="postgres", group=0)])["mounts"]
    assert (planned["owner"], planned["group"]) == ("postgres", 0)
    assert not any(option.startswith(("uid=", "gid=")) for option in planned["options"])


def test_absent_entry_nested_in_mounted_is_allowed():
    result = plan([ok_entry(path="/var/cache/x"), ok_entry(path="/var/cache/x/old", state="absent")])
    assert result["errors"] == []


def test_plan_summary_lines():
    result = plan([ok_entry(path="/tmp", size="60%"), ok_entry(path="/srv/swapping", noswap=True),
                   ok_entry(path="/srv/data")])
    lines = plan_summary(result)
    assert lines[0].startswith("/tmp: remount tmpfs of 9.6 GiB with size=60% (size 8.0 GiB -> 9.6 GiB)")
    assert lines[1].endswith("reboot required for noswap")
    assert lines[2].startswith("/srv/data: refuse")
    assert lines[3].startswith("error: Host web01: tmpfs_mounts[2].path is '/srv/data'")


def test_label_names_the_entry_in_errors_and_output():
    result = plan([ok_entry(path="/tmp", size="10X", label="tmpfs_tmp"), ok_entry(path="/tmp", label="x")])
    assert any("tmpfs_tmp.size is '10X'" in error for error in result["errors"])
    assert any("x.path is '/tmp': the same mount point as tmpfs_tmp.path" in error for error in result["errors"])
    good = plan([ok_entry(path="/srv/empty", label="tmpfs_tmp")])
    assert good["mounts"][0]["label"] == "tmpfs_tmp"


@pytest.mark.parametrize("entry, where, fact_change, needle", [
    (ok_entry(path="/var/tmp", size="4096", migrate=True), "tmpfs_mounts[0].size", {},
     "the 8.0 KiB already in '/var/tmp' would not fit"),
    (ok_entry(path="/var/tmp", nr_inodes=2, migrate=True), "tmpfs_mounts[0].nr_inodes", {},
     "the 3 entries already in '/var/tmp' would not fit"),
    (ok_entry(path="/var/tmp", migrate=True), "tmpfs_mounts[0].path", {"complete": False},
     "could not be measured in time"),
    # 3 entries and 2,100 bytes of extended attributes: 3 + ceil(2100 / 1024) = 6 of tmpfs's 1 KiB inode units.
    (ok_entry(path="/var/tmp", nr_inodes=5, migrate=True), "tmpfs_mounts[0].nr_inodes is 5", {"xattr_bytes": 2100},
     "the 3 entries already in '/var/tmp' and their extended attributes (2.1 KiB, which tmpfs charges to nr_inodes "
     "at 1 KiB an inode: 3 more) would not fit. Set tmpfs_mounts[0].nr_inodes to at least 6."),
])
def test_migration_must_fit(entry, where, fact_change, needle):
    facts = dict(FACTS, paths=dict(FACTS["paths"], **{"/var/tmp": dict(FACTS["paths"]["/var/tmp"], **fact_change)}))
    result = plan([entry], facts)
    assert result["mounts"][0]["action"] == "refuse"
    (error,) = result["errors"]
    assert where in error and needle in error


def test_migration_fits_with_its_extended_attributes():
    facts = dict(FACTS, paths=dict(FACTS["paths"], **{"/var/tmp": dict(FACTS["paths"]["/var/tmp"], xattr_bytes=2048)}))
    result = plan([ok_entry(path="/var/tmp", nr_inodes=5, migrate=True)], facts)
    assert result["errors"] == [] and result["mounts"][0]["action"] == "migrate"


def _xattr_facts(user_xattrs, tmpfs_user_xattrs):
    return dict(FACTS, support=dict(FACTS["support"], tmpfs_user_xattrs=tmpfs_user_xattrs, kernel="6.1.0"),
                paths=dict(FACTS["paths"], **{"/var/tmp": dict(FACTS["paths"]["/var/tmp"], user_xattrs=user_xattrs)}))


def test_migration_refused_when_tmpfs_cannot_hold_user_xattrs():
    # Linux 6.1's tmpfs keeps no user.* attribute: a copy would drop it, so the entry is refused before any change.
    facts = _xattr_facts({"user.mime_type": [2, "a.txt"], "user.crtime_usec": [1, "j.journal"]}, False)
    result = plan([ok_entry(path="/var/tmp", migrate=True)], facts)
    assert result["mounts"][0]["action"] == "refuse"
    (error,) = result["errors"]
    assert error.startswith("Host web01: tmpfs_mounts[0].path is '/var/tmp': tmpfs on Linux 6.1.0 holds no user.* "
                            "extended attributes (they need Linux 6.6 or later), and the data there has user.mime_type "
                            "(on 2 entries, 'a.txt' first): the copy into RAM would lose it.")


def test_migration_leaves_out_journald_crtime_with_a_warning():
    facts = _xattr_facts({"user.crtime_usec": [3, "journal/m/system.journal"]}, False)
    result = plan([ok_entry(path="/var/tmp", migrate=True)], facts)
    (entry,) = result["mounts"]
    assert result["errors"] == [] and entry["action"] == "migrate"
    assert entry["dropped_xattrs"] == ["user.crtime_usec"]
    assert any("the copy into RAM leaves out user.crtime_usec on 3 entries" in warning for warning in entry["warnings"])


def test_migration_keeps_user_xattrs_where_tmpfs_holds_them():
    result = plan([ok_entry(path="/var/tmp", migrate=True)], _xattr_facts({"user.mime_type": [2, "a.txt"]}, True))
    assert result["errors"] == [] and "dropped_xattrs" not in result["mounts"][0]


RAMFS_FACTS = dict(FACTS, mounts=FACTS["mounts"] + [
    _live("/srv/ramfs", 0, used_bytes=3 * GIB, fstype="ramfs", options=["nosuid"]),
])


def ramfs_plan(mounts, facts=None):
    return plan_ramfs(mounts, RAMFS_FACTS if facts is None else facts, host="h1", var_name="ramfs_mounts")


@pytest.mark.parametrize("entry, where, needle", [
    ({"path": "/srv/empty"}, "ramfs_mounts[0].max_size is missing", "ramfs itself has no limit"),
    ({"path": "/srv/empty", "max_size": "64T"}, "ramfs_mounts[0].max_size is '64T'", "above this host's RAM"),
    ({"path": "/srv/empty", "max_size": "1G", "size": "1G"}, "ramfs_mounts[0].size is '1G'", "an unknown key"),
    ({"path": "/srv/empty", "max_size": "1G", "nr_inodes": 10}, "ramfs_mounts[0].nr_inodes is 10", "an unknown key"),
    ({"path": "/srv/empty", "max_size": "1G", "noswap": True}, "ramfs_mounts[0].noswap is True", "an unknown key"),
    ({"path": "/proc/x", "max_size": "1G"}, "ramfs_mounts[0].path is '/proc/x'", "system path"),
    ({"path": "/var/tmp", "max_size": "4096", "migrate": True}, "ramfs_mounts[0].max_size is '4096'",
     "would not fit"),
    ({"path": "/tmp", "max_size": "1G"}, "ramfs_mounts[0].path is '/tmp'", "not ramfs"),
])
def test_ramfs_invalid(entry, where, needle):
    errors = ramfs_plan([entry])["errors"]
    assert any(where in error and needle in error for error in errors), errors


def test_ramfs_valid_entries():
    result = ramfs_plan([
        {"path": "/srv/empty", "max_size": "10%", "mode": "0750", "nosuid": True, "nodev": True},
        {"path": "/var/tmp", "max_size": "1G", "migrate": True},
        {"path": "/srv/ramfs", "max_size": "1G", "nosuid": True, "noexec": True},
    ])
    assert result["errors"] == []
    fresh, migrated, live = result["mounts"]
    assert (fresh["action"], fresh["fstype"], fresh["src"]) == ("mount", "ramfs", "ramfs")
    assert fresh["options"] == ["mode=750", "nosuid", "nodev"]
    assert fresh["size_bytes"] is None and fresh["ram_bytes"] == tmpfs_percent_bytes(10, RAM)
    assert migrated["action"] == "migrate"
    assert live["action"] == "remount"
    assert live["remount_options"] == ["relatime", "nosuid", "dev", "noexec"]
    assert any("above its max_size" in warning for warning in live["warnings"])
    assert not any(option.startswith("size=") for entry in result["mounts"] for option in entry["options"])


def persisted(backing="/var/lib/ramdisk-backing/db", **persist):
    value = {"backing": backing}
    value.update(persist)
    return ok_entry(path="/var/lib/x", persist=value)


PERSIST_INVALID = [
    # (entry, variable named, value shown, words of the problem, words of the fix)
    (ok_entry(persist="yes"), "tmpfs_mounts[0].persist", "'yes'", "not a mapping", "or null to turn it off"),
    (ok_entry(persist=["/var/lib/b"]), "tmpfs_mounts[0].persist", "['/var/lib/b']", "not a mapping", "backing:"),
    (ok_entry(persist=True), "tmpfs_mounts[0].persist", "True", "persist without a backing directory", "backing:"),
    (ok_entry(persist={}), "tmpfs_mounts[0].persist.backing", "missing", "persist without a backing directory",
     "Set persist.backing"),
    (ok_entry(persist={"interval": "5min"}), "tmpfs_mounts[0].persist.backing", "missing",
     "persist without a backing directory", "/var/lib/ramdisk-backing/<name>"),
    (persisted(backing=""), "tmpfs_mounts[0].persist.backing", "''", "not a path", "directory on disk"),
    (persisted(backing=7), "tmpfs_mounts[0].persist.backing", "7", "not a path", "directory on disk"),
    (persisted(backing="var/lib/b"), "tmpfs_mounts[0].persist.backing", "'var/lib/b'", "a relative path",
     "/var/lib/b"),
    (persisted(backing="/var/lib/../b"), "tmpfs_mounts[0].persist.backing", "'/var/lib/../b'", "'..'", "without"),
    (persisted(backing="/var/lib/my backing"), "tmpfs_mounts[0].persist.backing", "'/var/lib/my backing'",
     "cannot carry", "without spaces"),
    (persisted(backing="/var/lib/b%i"), "tmpfs_mounts[0].persist.backing", "'/var/lib/b%i'", "cannot carry",
     "without spaces"),
    (persisted(backing="/var/lib"), "tmpfs_mounts[0].persist.backing", "'/var/lib'", "system directory",
     "a directory of its own"),
    (persisted(backing="/"), "tmpfs_mounts[0].persist.backing", "'/'", "system directory", "of its own"),
    (persisted(backing="/srv"), "tmpfs_mounts[0].persist.backing", "'/srv'", "system directory", "of its own"),
    (persisted(backing="/run/db"), "tmpfs_mounts[0].persist.backing", "'/run/db'", "under /run, which is in RAM",
     "on disk"),
    (persisted(backing="/dev/shm/db"), "tmpfs_mounts[0].persist.backing", "'/dev/shm/db'", "under /dev",
     "on disk"),
    (persisted(backing="/tmp/db"), "tmpfs_mounts[0].persist.backing", "'/tmp/db'", "emptied at boot", "on disk"),
    (persisted(backing="/var/tmp/db"), "tmpfs_mounts[0].persist.backing", "'/var/tmp/db'", "emptied by age",
     "on disk"),
    (persisted(backing="/proc/db"), "tmpfs_mounts[0].persist.backing", "'/proc/db'", "kernel file system", "on disk"),
    (persisted(backing="/var/lib/x"), "tmpfs_mounts[0].persist.backing", "'/var/lib/x'",
     "inside the RAM mount '/var/lib/x' itself", "outside the mount"),
    (persisted(backing="/var/lib/x/.backing"), "tmpfs_mounts[0].persist.backing", "'/var/lib/x/.backing'",
     "inside the RAM mount '/var/lib/x' itself", "outside the mount"),
    (dict(persisted(backing="/srv/data"), path="/srv/data/cache"), "tmpfs_mounts[0].persist.backing",
     "'/srv/data'", "holds the RAM mount '/srv/data/cache'", "a directory of its own"),
    (persisted(interval="soon"), "tmpfs_mounts[0].persist.interval", "'soon'", "not a systemd time span",
     "30s, 5min, 1h or 1h30min"),
    (persisted(interval="5 parsecs"), "tmpfs_mounts[0].persist.interval", "'5 parsecs'", "not a systemd time span",
     "5min"),
    (persisted(interval="-5min"), "tmpfs_mounts[0].persist.interval", "'-5min'", "not a systemd time span", "5min"),
    (persisted(interval="0"), "tmpfs_mounts[0].persist.interval", "'0'", "shorter than a second", "at least 1s"),
    (persisted(interval=True), "tmpfs_mounts[0].persist.interval", "True", "not a systemd time span", "5min"),
    (persisted(services="postgresql.service"), "tmpfs_mounts[0].persist.services", "'postgresql.service'",
     "not a list of unit names", "[postgresql@15-main.service]"),
    (persisted(services=["postgresql@15-main"]), "tmpfs_mounts[0].persist.services[0]", "'postgresql@15-main'",
     "not a unit name", "'postgresql@15-main.service'"),
    (persisted(services=["postgresql@.service"]), "tmpfs_mounts[0].persist.services[0]", "'postgresql@.service'",
     "not a unit name", "postgresql@<instance>.service"),
    (persisted(services=["a b.service"]), "tmpfs_mounts[0].persist.services[0]", "'a b.service'", "not a unit name",
     "full unit name"),
    (persisted(services=[5]), "tmpfs_mounts[0].persist.services[0]", "5", "not a unit name", "full unit name"),
    (persisted(sevices=[]), "tmpfs_mounts[0].persist.sevices", "[]", "an unknown key",
     "backing, interval, services, keep, stop_services"),
    (persisted(keep=0), "tmpfs_mounts[0].persist.keep", "0", "fewer than one copy", "1 or more"),
    (persisted(keep="-3"), "tmpfs_mounts[0].persist.keep", "'-3'", "fewer than one copy", "1 or more"),
    (persisted(keep="two"), "tmpfs_mounts[0].persist.keep", "'two'", "not a whole number of copies",
     "the current one included"),
    (persisted(keep=1.5), "tmpfs_mounts[0].persist.keep", "1.5", "not a whole number of copies", "such as 2"),
    (persisted(keep=True), "tmpfs_mounts[0].persist.keep", "True", "not a whole number of copies", "1 or more"),
    (persisted(stop_services=True), "tmpfs_mounts[0].persist.stop_services", "True",
     "persist.services names no unit to stop", "Name the units that write the data in persist.services"),
    (persisted(stop_services="yes", services=[]), "tmpfs_mounts[0].persist.stop_services", "'yes'",
     "persist.services names no unit to stop", "or set persist.stop_services: false"),
    (persisted(stop_services="sometimes", services=["db.service"]), "tmpfs_mounts[0].persist.stop_services",
     "'sometimes'", "not a boolean", "true or false"),
    (dict(persisted(), path="/srv/my%data"), "tmpfs_mounts[0].path", "'/srv/my%data'", "persist units cannot carry",
     "persist: null"),
    (dict(persisted(), path="/tmp"), "tmpfs_mounts[0].persist", "", "/tmp is emptied at boot", "data directory"),
]


@pytest.mark.parametrize("entry, variable, value, problem, fix", PERSIST_INVALID)
def test_persist_invalid(entry, variable, value, problem, fix):
    errors = plan([entry])["errors"]
    matching = [error for error in errors if (variable + " is " + value) in error]
    assert matching, errors
    assert any(problem in error and fix in error for error in matching), errors
    assert all(error.startswith("Host web01: ") for error in errors)


def test_persist_off_and_defaults():
    for off in (None, False):
        (planned,) = plan([ok_entry(persist=off)])["mounts"]
        assert planned["persist"] is None and planned["migrate"] is False
    (planned,) = plan([persisted()])["mounts"]
    assert planned["persist"] == {"backing": "/var/lib/ramdisk-backing/db", "interval": "15min",
                                  "interval_seconds": 900.0, "services": [], "keep": 2, "stop_services": False}


@pytest.mark.parametrize("given, expected", [(True, True), ("true", True), (False, False), (None, False)])
def test_persist_stop_services(given, expected):
    (planned,) = plan([persisted(stop_services=given, services=["postgresql@15-main.service"])])["mounts"]
    assert planned["persist"]["stop_services"] is expected


@pytest.mark.parametrize("keep, expected", [(1, 1), (3, 3), ("4", 4), (" 5 ", 5), (None, 2)])
def test_persist_keep(keep, expected):
    (planned,) = plan([persisted(keep=keep)])["mounts"]
    assert planned["persist"]["keep"] == expected


@pytest.mark.parametrize("interval, seconds", [
    ("30s", 30), ("5min", 300), ("1h", 3600), ("1h30min", 5400), ("1h 30min", 5400), (" 2 hours ", 7200),
    ("90", 90), (900, 900), ("1.5h", 5400), ("1d", 86400), ("500ms 1s", 1.5), ("1w", 604800),
])
def test_persist_interval_time_spans(interval, seconds):
    (planned,) = plan([persisted(interval=interval)])["mounts"]
    assert planned["persist"]["interval_seconds"] == pytest.approx(seconds)
    assert planned["persist"]["interval"] == (interval.strip() if isinstance(interval, str) else "%ds" % interval)


def test_persist_implies_migrate_and_normalizes():
    facts = copy.deepcopy(FACTS)
    facts["paths"]["/var/lib/x"] = _path(empty=False)
    entry = persisted(backing="/var/lib//ramdisk-backing/db/", interval="5min",
                      services=["postgresql@15-main.service", "postgresql@15-main.service", "app.socket"])
    (planned,) = plan([entry], facts)["mounts"]
    assert planned["migrate"] is True
    assert planned["action"] == "migrate"
    assert planned["persist"] == {"backing": "/var/lib/ramdisk-backing/db", "interval": "5min",
                                  "interval_seconds": 300.0, "services": ["postgresql@15-main.service", "app.socket"],
                                  "keep": 2, "stop_services": False}
    assert planned["token"].startswith("var-lib-x-") and len(planned["token"]) == len("var-lib-x-") + 8


@pytest.mark.parametrize("path, services", [
    ("/var/log", ["app.service", "systemd-journal-flush.service"]),
    ("/var/log/journal", ["app.service", "systemd-journal-flush.service"]),
    ("/var/log/nginx", ["app.service"]),
    ("/var/lib/x", ["app.service"]),
])
def test_a_persisted_mount_that_holds_the_journal_names_journalds_flush_service(path, services):
    facts = copy.deepcopy(FACTS)
    facts["paths"][path] = _path(empty=False)
    entry = dict(persisted(services=["app.service"]), path=path)
    (planned,) = plan([entry], facts)["mounts"]
    assert planned["persist"]["services"] == services


def test_persist_summary_names_the_backing():
    (line,) = plan_summary(plan([persisted(interval="5min")]))
    assert line.endswith("kept in /var/lib/ramdisk-backing/db (synced every 5min)")


@pytest.mark.parametrize("entries, live, needle", [
    ([persisted(backing="/var/cache/x/backing"), ok_entry(path="/var/cache/x")], [],
     "tmpfs_mounts[0].persist.backing is '/var/cache/x/backing': it is inside tmpfs_mounts[1].path '/var/cache/x', "
     "a RAM mount of this request"),
    ([persisted(backing="/srv/ram/backing")], [_live("/srv/ram", GIB)],
     "tmpfs_mounts[0].persist.backing is '/srv/ram/backing': it is inside the tmpfs mounted at '/srv/ram', which is "
     "in RAM"),
    ([persisted(backing="/srv/zram/b")], [_live("/srv/zram", GIB, fstype="ext4")],
     "it is inside the ext4 mounted at '/srv/zram'"),
    ([persisted(backing="/var/lib/b"), dict(persisted(backing="/var/lib/b/inner"), path="/var/cache/x")], [],
     "tmpfs_mounts[1].persist.backing is '/var/lib/b/inner': it overlaps tmpfs_mounts[0].persist.backing '/var/lib/b'"),
    ([persisted(backing="/var/lib/b"), dict(persisted(backing="/var/lib/b"), path="/var/cache/x")], [],
     "Give every persisted mount a backing directory of its own"),
])
def test_persist_backing_between_entries(entries, live, needle):
    facts = copy.deepcopy(FACTS)
    facts["mounts"] = facts["mounts"] + live
    errors = plan(entries, facts)["errors"]
    assert any(needle in error for error in errors), errors
    assert all(error.startswith("Host web01: ") for error in errors)


def test_persist_backing_beside_a_live_mount_is_fine():
    facts = copy.deepcopy(FACTS)
    facts["mounts"] = facts["mounts"] + [_live("/var/lib/ramdisk", GIB)]
    assert plan([persisted(backing="/var/lib/ramdisk-backing/db")], facts)["errors"] == []


def test_persist_on_absent_entry_is_checked_too():
    result = plan([dict(persisted(backing="/run/b"), state="absent")])
    assert any("tmpfs_mounts[0].persist.backing is '/run/b'" in error for error in result["errors"])
    (planned,) = plan([dict(persisted(), state="absent")])["mounts"]
    assert planned["persist"]["backing"] == "/var/lib/ramdisk-backing/db"


def test_ramfs_persist():
    result = ramfs_plan([{"path": "/var/lib/x", "max_size": "1G",
                          "persist": {"backing": "/var/lib/ramdisk-backing/x", "services": ["app.service"]}}])
    assert result["errors"] == []
    assert result["mounts"][0]["persist"]["services"] == ["app.service"]
    assert result["mounts"][0]["migrate"] is True


# Issue 3's bad input for ramfs: max_size 0, negative or unparseable, the same path twice, a path inside another.
@pytest.mark.parametrize("mounts, needle", [
    ([{"path": "/srv/empty", "max_size": 0}], "ramfs_mounts[0].max_size is 0: the size must be above zero"),
    ([{"path": "/srv/empty", "max_size": "-1G"}], "ramfs_mounts[0].max_size is '-1G': the size must be above zero"),
    ([{"path": "/srv/empty", "max_size": "lots"}], "ramfs_mounts[0].max_size is 'lots': unknown name 'lots'"),
    ([{"path": "/srv/empty", "max_size": "1G"}, {"path": "/srv/empty", "max_size": "1G"}],
     "ramfs_mounts[1].path is '/srv/empty': the same mount point as ramfs_mounts[0].path"),
    ([{"path": "/srv/empty", "max_size": "1G"}, {"path": "/srv/empty/sub", "max_size": "1G"}],
     "ramfs_mounts[1].path is '/srv/empty/sub': it is inside ramfs_mounts[0].path '/srv/empty'"),
])
def test_ramfs_bad_sizes_and_paths(mounts, needle):
    errors = ramfs_plan(mounts)["errors"]
    assert any(error.startswith("Host h1: ") and needle in error for error in errors), errors
