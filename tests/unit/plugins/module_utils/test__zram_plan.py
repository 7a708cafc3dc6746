"""plan_zram: every bad entry names the host, the variable and the value; good ones come out whole."""

from __future__ import annotations

import copy
import os

import pytest
import yaml

from ansible_collections.ramdisk.provision.plugins.module_utils._zram_plan import DEVICE_DEFAULTS, plan_zram

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

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


# --- one set of defaults, whichever door -----------------------------------------------------------------


def _role_defaults():
    with open(os.path.join(REPO, "roles", "zram", "defaults", "main.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)["zram_device_defaults"]


def test_the_role_ships_no_defaults_of_its_own():
    # One declaration: DEVICE_DEFAULTS. The role's variable is only for the user's changes.
    assert _role_defaults() == {}
    with open(os.path.join(REPO, "roles", "zram", "meta", "argument_specs.yml"), encoding="utf-8") as handle:
        spec = yaml.safe_load(handle)["argument_specs"]["main"]["options"]["zram_device_defaults"]
    assert spec["default"] == {}
    assert "priority %d" % DEVICE_DEFAULTS["priority"] in " ".join(spec["description"])


# What each door hands plan_zram as defaults: the zram role's preflight (its defaults and the fallback switch),
# ramdisk_plan from site.yml or the ramdisk role (zram_device_defaults is not defined there), and a caller with none.
DOORS = [
    ("zram role", dict(_role_defaults(), allow_algorithm_fallback=False)),
    ("site.yml / ramdisk role", dict({}, allow_algorithm_fallback=False)),
    ("no defaults", None),
    ("nulls", {"priority": None, "fstype": None, "nosuid": None}),
]


@pytest.mark.parametrize("door, defaults", DOORS, ids=[door for door, _defaults in DOORS])
@pytest.mark.parametrize("entry", [swap(), fs()], ids=["swap", "filesystem"])
def test_every_door_fills_an_entry_the_same_way(door, defaults, entry):
    result = plan_zram([entry], FACTS, host="h1", var_name="zram_devices", defaults=defaults)
    assert result["errors"] == []
    expected = plan_zram([entry], FACTS, host="h1", var_name="zram_devices", defaults={})["devices"]
    assert result["devices"] == expected
    device = result["devices"][0]
    if entry["use"] == "swap":
        assert device["priority"] == 100  # optional everywhere
    else:
        assert device["fstype"] == "ext4" and device["mount"]["mode"] == "755"
        assert "nosuid" in device["mount"]["options"] and "nodev" in device["mount"]["options"]


def test_a_partial_zram_device_defaults_keeps_the_rest():
    result = plan_zram([swap(), fs()], FACTS, host="h1", var_name="zram_devices", defaults={"priority": 5})
    swap_dev, fs_dev = result["devices"]
    assert swap_dev["priority"] == 5
    # Before, a partial zram_device_defaults replaced the role's whole mapping: nosuid and nodev were lost.
    assert "nosuid" in fs_dev["mount"]["options"] and "nodev" in fs_dev["mount"]["options"]


def test_device_defaults_are_not_changed_by_planning():
    before = copy.deepcopy(DEVICE_DEFAULTS)
    plan_zram([swap(), fs(mkfs_options=["-m", "0"])], FACTS, host="h1", var_name="zram_devices")
    assert DEVICE_DEFAULTS == before


# --- what only the kernel knows, read from the host before any change --------------------------------------

NO_DEVICE = dict(FACTS, support={"zram": True, "zram_algorithms": [], "kernel": "6.18.0",
                                 "zram_algorithms_offered": ["lzo-rle", "lzo", "lz4"],
                                 "zram_algorithms_from": "the kernel's config (CONFIG_ZRAM_BACKEND_*)"})


@pytest.mark.parametrize("facts, entry, needle", [
    # No zram device to ask: the kernel's config tells, and the message says so.
    (NO_DEVICE, swap(algorithm="zstd"), "Host h1: zram_devices[0].algorithm is 'zstd': not offered by this host's "
                                        "kernel, which offers lzo-rle, lzo, lz4 (from the kernel's config "
                                        "(CONFIG_ZRAM_BACKEND_*)). Choose one of those, or allow the fallback "
                                        "(zram_allow_algorithm_fallback: true)"),
    (NO_DEVICE, fs(algorithm="deflate"), "zram_devices[0].algorithm is 'deflate': not offered"),
    (FACTS, swap(algorithm="zstd"), "which offers lzo-rle, lzo, lz4 (from comp_algorithm)"),
])
def test_an_algorithm_the_kernel_lacks_is_refused_without_a_device(facts, entry, needle):
    errors = plan(([entry]), facts)["errors"]
    assert any(needle in error for error in errors), errors


@pytest.mark.parametrize("support", [
    {"zram_algorithms": [], "zram_algorithms_offered": [], "zram_algorithms_from": None},  # nothing tells
    {"zram_algorithms": [], "zram_algorithms_offered": ["lz4", "zstd"]},
])
def test_an_algorithm_is_taken_where_offered_or_where_nothing_tells(support):
    assert plan([swap(algorithm="zstd")], dict(FACTS, support=dict(FACTS["support"], **support)))["errors"] == []
    fallback = dict(DEFAULTS, allow_algorithm_fallback=True)
    assert plan_zram([swap(algorithm="zstd")], NO_DEVICE, host="h1", var_name="zram_devices",
                     defaults=fallback)["errors"] == []


def _swap_host(limit=28, swaps=0, zram=()):
    """FACTS of a host with LIMIT swap areas, SWAPS in /proc/swaps and the zram devices ZRAM (entry, used_as)."""
    return dict(FACTS, support=dict(FACTS["support"], swap_areas_max=limit,
                                    swap_areas_basis="32 swap types less 3 for page migration, 1 for PTE markers"),
                swap={"devices": [{"path": "/dev/x%d" % index} for index in range(swaps)]},
                zram=[{"device": "zram%d" % index, "entry": entry, "used_as": used_as}
                      for index, (entry, used_as) in enumerate(zram)])


def _swaps(count, **extra):
    return [swap(name="swap%d" % index, size="64M", **extra) for index in range(count)]


@pytest.mark.parametrize("host, devices, over", [
    (_swap_host(), _swaps(28), None),
    # Measured on the lab's 6.18: 40 passed the plan, 28 swapons worked, then EPERM, nothing undone.
    (_swap_host(), _swaps(40), (28, 29, 40)),
    (_swap_host(swaps=2), _swaps(27), (26, 29, 27)),
    # A second run of the same 28: they are swap already (the zram role's records say whose), so none is new.
    (_swap_host(swaps=28, zram=[("swap%d" % index, "swap") for index in range(28)]), _swaps(28), None),
    # A device of the entry exists but is not swap (swapped off): it becomes a swap area again.
    (_swap_host(swaps=27, zram=[("swap0", "unused")]), _swaps(1) + [swap(name="more", size="64M")], (1, 29, 2)),
    # A device that goes first frees its area for one that comes after, in list order, as the role works.
    (_swap_host(swaps=28, zram=[("old", "swap")]), [swap(name="old", state="absent", size=None)] + _swaps(1), None),
    (_swap_host(swaps=28, zram=[("old", "swap")]), _swaps(1) + [swap(name="old", state="absent", size=None)],
     (0, 29, 1)),
    # Someone else's zram swap counts like any swap; file systems take no swap area.
    (_swap_host(swaps=28, zram=[(None, "swap")]), [fs()], None),
    (_swap_host(limit=22, swaps=1), _swaps(22), (21, 23, 22)),
])
def test_swap_areas_past_the_kernel_limit_are_refused(host, devices, over):
    errors = plan(devices, host)["errors"]
    if over is None:
        assert errors == []
        return
    index, area, more = over
    limit = host["support"]["swap_areas_max"]
    now = len(host["swap"]["devices"])
    assert errors == [
        "Host h1: zram_devices[%d].use is 'swap': it would be swap area %d on this host, and this kernel takes at most "
        "%d (MAX_SWAPFILES: 32 swap types less 3 for page migration, 1 for PTE markers); %d in /proc/swaps now, and "
        "zram_devices asks for %d more. Ask for at most %d new zram swap devices here (one device of their combined "
        "size swaps as well as several), or turn other swap off first."
        % (index, area, limit, now, more, max(limit - now, 0))]


def test_no_swap_limit_without_the_fact():
    # Facts of an older ramdisk_facts, or a caller's own: nothing to count against.
    assert plan(_swaps(40))["errors"] == []


def test_the_root_keys_an_entry_leaves_unset_are_kept_from_the_directory():
    kept = plan([fs(migrate=True)])["devices"][0]["mount"]
    assert kept["root_keep"] == ["mode", "owner", "group"]
    given = plan([fs(migrate=True, mode="0700", owner="root")])["devices"][0]["mount"]
    assert given["root_keep"] == ["group"]
    by_defaults = plan_zram([fs(migrate=True)], FACTS, host="h1", defaults=dict(DEFAULTS, group="root"))
    assert by_defaults["devices"][0]["mount"]["root_keep"] == ["mode", "owner"]
