"""plan_zram: every bad entry names the host, the variable and the value; good ones come out whole."""

from __future__ import annotations

import pytest

from ansible_collections.ramdisk.provision.plugins.module_utils._zram_plan import plan_zram

GIB = 1024 ** 3
RAM = 16 * GIB
FACTS = {
    "memory": {"total_bytes": RAM, "available_bytes": 12 * GIB},
    "support": {"zram": True, "zram_algorithms": ["lzo-rle", "lzo", "lz4"], "kernel": "6.18.0"},
    "paths": {
        "/srv/empty": {"exists": True, "is_dir": True, "empty": True, "mountpoint": False, "usage_bytes": 4096,
                       "inodes": 1, "complete": True},
        "/srv/data": {"exists": True, "is_dir": True, "empty": False, "mountpoint": False, "usage_bytes": 8192,
                      "inodes": 3, "complete": True},
        "/srv/empty/sub": {"exists": False, "mountpoint": False},
    },
    "mounts": [],
}
DEFAULTS = {"state": "present", "priority": 100, "fstype": "ext4", "nosuid": True, "nodev": True, "discard": True}


def plan(devices, facts=None):
    return plan_zram(devices, FACTS if facts is None else facts, host="h1", var_name="zram_devices",
                     defaults=DEFAULTS)


def swap(**extra):
    return dict({"name": "swap", "use": "swap", "size": "2G"}, **extra)


def fs(**extra):
    return dict({"name": "build", "use": "filesystem", "size": "1G", "path": "/srv/empty"}, **extra)


INVALID = [
    (swap(size=0), "zram_devices[0].size is 0"),
    (swap(size="-1G"), "zram_devices[0].size is '-1G'"),
    (swap(size="10X"), "zram_devices[0].size is '10X'"),
    (swap(size="32G"), "above this host's RAM"),
    (swap(size=None), "zram_devices[0].size is missing"),
    (swap(algorithm="zstd"), "zram_devices[0].algorithm is 'zstd': not offered by this host's kernel, which offers "
                             "lzo-rle, lzo, lz4"),
    (swap(priority=40000), "zram_devices[0].priority is 40000"),
    (swap(priority=-2), "zram_devices[0].priority is -2"),
    (swap(priority="high"), "zram_devices[0].priority is 'high'"),
    (swap(use="cache"), "zram_devices[0].use is 'cache'"),
    (swap(name="Swap Space"), "zram_devices[0].name is 'Swap Space'"),
    (swap(mem_limit="lots"), "zram_devices[0].mem_limit is 'lots'"),
    (swap(colour="red"), "zram_devices[0].colour is 'red': an unknown key"),
    (fs(fstype="btrfs"), "zram_devices[0].fstype is 'btrfs'"),
    (fs(path="/usr"), "zram_devices[0].path is '/usr'"),
    (fs(path="srv/x"), "zram_devices[0].path is 'srv/x'"),
    (fs(path="/srv/data"), "the directory is not empty"),
    (fs(mode="999"), "zram_devices[0].mode is '999'"),
    (fs(mkfs_options="-m 0"), "zram_devices[0].mkfs_options is '-m 0'"),
]


@pytest.mark.parametrize("entry, needle", INVALID)
def test_invalid_entry_is_refused_with_its_name_and_value(entry, needle):
    errors = plan([entry])["errors"]
    assert any(needle in error and error.startswith("Host h1: ") for error in errors), errors


def test_the_same_device_or_path_twice():
    errors = plan([swap(), swap(size="1G")])["errors"]
    assert any("zram_devices[1].name is 'swap': the same device as zram_devices[0].name" in e for e in errors)
    errors = plan([fs(), fs(name="other")])["errors"]
    assert any("zram_devices[1].path is '/srv/empty': the same mount point as zram_devices[0].path" in e
               for e in errors)


def test_nested_mount_paths():
    errors = plan([fs(), fs(name="inner", path="/srv/empty/sub")])["errors"]
    assert any("zram_devices[1].path is '/srv/empty/sub': it is inside zram_devices[0].path" in e for e in errors)


def test_unknown_algorithm_allowed_with_fallback():
    defaults = dict(DEFAULTS, allow_algorithm_fallback=True)
    result = plan_zram([swap(algorithm="zstd")], FACTS, host="h1", var_name="zram_devices", defaults=defaults)
    assert result["errors"] == []


def test_valid_swap_and_filesystem():
    result = plan([swap(algorithm="lz4", mem_limit="1G"), fs(migrate=False, noexec=True)])
    assert result["errors"] == []
    swap_dev, fs_dev = result["devices"]
    assert swap_dev["unit"] == "ramdisk-zram@swap.service"
    assert (swap_dev["size_bytes"], swap_dev["mem_limit_bytes"], swap_dev["priority"]) == (2 * GIB, GIB, 100)
    assert swap_dev["mount"] is None
    mount = fs_dev["mount"]
    assert mount["action"] == "mount" and mount["fstype"] == "ext4" and mount["src"] is None
    assert mount["options"] == ["discard", "nosuid", "nodev", "noexec", "nofail", "x-systemd.before=local-fs.target",
                                "x-systemd.requires=ramdisk-zram@build.service", "x-systemd.makefs"]
    assert fs_dev["priority"] is None


def test_file_system_is_nofail_once_even_when_asked_for():
    # nofail by default, so a device that cannot be made at boot does not stop the boot, still ordered before
    # local-fs.target.
    result = plan([fs(options=["nofail", "x-systemd.device-timeout=10s"])])
    assert result["errors"] == []
    assert result["devices"][0]["mount"]["options"] == [
        "discard", "nosuid", "nodev", "nofail", "x-systemd.device-timeout=10s", "x-systemd.before=local-fs.target",
        "x-systemd.requires=ramdisk-zram@build.service", "x-systemd.makefs"]


def test_absent_needs_no_size():
    result = plan([swap(state="absent", size=None)])
    assert result["errors"] == [] and result["devices"][0]["state"] == "absent"


def test_filesystem_persist_is_planned():
    result = plan([fs(persist={"backing": "/var/lib/ramdisk-backing/build", "interval": "1h"})])
    assert result["errors"] == []
    mount = result["devices"][0]["mount"]
    assert mount["persist"]["backing"] == "/var/lib/ramdisk-backing/build"
    assert mount["persist"]["interval_seconds"] == 3600
    assert mount["migrate"] is True and mount["token"].startswith("srv-empty-")


@pytest.mark.parametrize("device, needle", [
    (swap(persist={"backing": "/var/lib/b"}), "zram_devices[0].persist is {'backing': '/var/lib/b'}: only for a file "
                                              "system"),
    (fs(persist={"backing": "/run/b"}), "zram_devices[0].persist.backing is '/run/b': under /run"),
    (fs(persist={"backing": "/srv/empty/b"}), "inside the RAM mount '/srv/empty' itself"),
])
def test_persist_refused(device, needle):
    errors = plan([device])["errors"]
    assert any(needle in error for error in errors), errors


@pytest.mark.parametrize("priority, ok", [(-1, True), (0, True), (32767, True), (32768, False), (-2, False),
                                          (True, False), (1.5, False)])
def test_swap_priority_bounds(priority, ok):
    errors = plan([swap(priority=priority)])["errors"]
    assert (errors == []) is ok, errors


@pytest.mark.parametrize("size, needle", [
    ("150%", "above this host's RAM"),
    ("min(ram * 2, 64G)", "above this host's RAM"),
    ("0%", "zram_devices[0].size is '0%'"),
    ("ram - ram", "zram_devices[0].size is 'ram - ram'"),
])
def test_size_expressions_that_come_to_nothing_or_too_much(size, needle):
    errors = plan([swap(size=size)])["errors"]
    assert any(needle in error for error in errors), errors
