"""plan_brd: bad requests are named, the module is reloaded only when no disk is in use."""

from __future__ import annotations

import pytest

from ansible_collections.ramdisk.provision.plugins.module_utils._brd_plan import plan_brd

GIB = 1024 ** 3
MIB = 1024 ** 2
RAM = 8 * GIB
EMPTY = {"exists": True, "is_dir": True, "empty": True, "mountpoint": False, "usage_bytes": 4096, "inodes": 1,
         "complete": True}


def facts(loaded=False, rd_nr=None, rd_size_kib=None, devices=(), brd=True):
    return {
        "memory": {"total_bytes": RAM, "available_bytes": 6 * GIB},
        "support": {"brd": brd, "kernel": "6.1.0-cloud-amd64"},
        "brd": {"loaded": loaded, "rd_nr": rd_nr, "rd_size_kib": rd_size_kib, "devices": list(devices)},
        "paths": {"/srv/a": EMPTY, "/srv/b": EMPTY, "/srv/a/in": dict(EMPTY, exists=False)},
        "mounts": [],
    }


def plan(count=1, size="64M", mounts=None, state="present", host_facts=None):
    request = {"state": state, "count": count, "size": size, "mounts": mounts or []}
    return plan_brd(request, host_facts or facts(), host="h1", defaults={"nosuid": True, "nodev": True})


@pytest.mark.parametrize("kwargs, needle", [
    ({"count": 0}, "brd_count is 0"),
    ({"count": "two"}, "brd_count is 'two'"),
    ({"count": 65}, "brd_count is 65"),
    ({"size": 0}, "brd_size is 0"),
    ({"size": "-1G"}, "brd_size is '-1G'"),
    ({"size": "10X"}, "brd_size is '10X'"),
    ({"size": "1000"}, "not a whole number of KiB"),
    ({"count": 4, "size": "4G"}, "above this host's RAM"),
    ({"state": "gone"}, "brd_state is 'gone'"),
    ({"mounts": [{"disk": 1, "path": "/srv/a"}]}, "brd_mounts[0].disk is 1: above the 1 disk(s)"),
    ({"count": 2, "mounts": [{"disk": 0, "path": "/srv/a"}, {"disk": 0, "path": "/srv/b"}]},
     "brd_mounts[1].disk is 0: the same disk as brd_mounts[0].disk"),
    ({"count": 2, "mounts": [{"disk": 0, "path": "/srv/a"}, {"disk": 1, "path": "/srv/a"}]},
     "brd_mounts[1].path is '/srv/a': the same mount point"),
    ({"count": 2, "mounts": [{"disk": 0, "path": "/srv/a"}, {"disk": 1, "path": "/srv/a/in"}]},
     "it is inside brd_mounts[0].path '/srv/a'"),
    ({"mounts": [{"disk": 0, "path": "/srv/a", "fstype": "vfat"}]}, "brd_mounts[0].fstype is 'vfat'"),
    ({"mounts": [{"disk": 0, "path": "/etc"}]}, "brd_mounts[0].path is '/etc'"),
    ({"mounts": [{"disk": -1, "path": "/srv/a"}]}, "brd_mounts[0].disk is -1"),
])
def test_bad_requests(kwargs, needle):
    errors = plan(**kwargs)["errors"]
    assert any(needle in error and error.startswith("Host h1: ") for error in errors), errors


def test_no_brd_on_this_kernel_is_a_clear_error():
    (error,) = plan(host_facts=facts(brd=False))["errors"]
    assert "brd cannot load on this host" in error and "6.1.0-cloud-amd64" in error


def test_load_and_mount():
    result = plan(count=2, mounts=[{"disk": 1, "path": "/srv/a"}])
    assert result["errors"] == []
    assert result["module"]["action"] == "load" and result["module"]["rd_size_kib"] == 65536
    (mount,) = result["mounts"]
    assert mount["src"] == "/dev/ram1" and mount["action"] == "mount"
    assert "x-systemd.requires=systemd-modules-load.service" in mount["options"]
    assert "nofail" in mount["options"] and "x-systemd.before=local-fs.target" in mount["options"]


@pytest.mark.parametrize("loaded_as, devices, action", [
    ((1, 65536), [], "ok"),
    ((1, 32768), [], "reload"),
    ((1, 32768), [{"path": "/dev/ram0", "used_as": "filesystem", "mountpoint": "/srv/a"}], "blocked"),
    ((2, 65536), [{"path": "/dev/ram1", "used_as": "unused"}], "reload"),
])
def test_module_reload_only_when_nothing_is_in_use(loaded_as, devices, action):
    host_facts = facts(loaded=True, rd_nr=loaded_as[0], rd_size_kib=loaded_as[1], devices=devices)
    module = plan(host_facts=host_facts)["module"]
    assert module["action"] == action
    assert module["reboot_required"] is (action == "blocked")
    if action == "blocked":
        assert "/dev/ram0 (filesystem at /srv/a)" in module["reason"]


def test_absent_unloads_only_unused():
    used = facts(loaded=True, rd_nr=1, rd_size_kib=65536,
                 devices=[{"path": "/dev/ram0", "used_as": "filesystem", "mountpoint": "/srv/a"}])
    assert plan(state="absent", host_facts=used)["module"]["action"] == "blocked"
    free = facts(loaded=True, rd_nr=1, rd_size_kib=65536, devices=[{"path": "/dev/ram0", "used_as": "unused"}])
    assert plan(state="absent", host_facts=free)["module"]["action"] == "unload"
    assert plan(state="absent")["module"]["action"] == "absent-ok"


def test_absent_unloads_when_the_only_user_is_our_own_mount():
    host_facts = facts(loaded=True, rd_nr=1, rd_size_kib=65536,
                       devices=[{"path": "/dev/ram0", "used_as": "filesystem", "mountpoint": "/srv/a"}])
    host_facts["mounts"] = [{"path": "/srv/a", "fstype": "ext4", "source": "/dev/ram0", "options": ["rw"],
                             "size_bytes": 64 * MIB, "used_bytes": 0}]
    host_facts["paths"]["/srv/a"] = dict(EMPTY, mountpoint=True, fstype="ext4")
    result = plan(state="absent", mounts=[{"disk": 0, "path": "/srv/a"}], host_facts=host_facts)
    assert result["errors"] == []
    assert result["mounts"][0]["action"] == "unmount"
    assert result["module"]["action"] == "unload"


def test_mount_persist():
    good = plan(mounts=[{"disk": 0, "path": "/srv/a", "persist": {"backing": "/var/lib/ramdisk-backing/a"}}])
    assert good["errors"] == []
    assert good["mounts"][0]["persist"]["interval"] == "15min"
    bad = plan(count=2, mounts=[{"disk": 0, "path": "/srv/a", "persist": {"backing": "/var/lib/ramdisk-backing/a"}},
                                {"disk": 1, "path": "/srv/b", "persist": {"backing": "/var/lib/ramdisk-backing/a"}}])
    assert any("brd_mounts[1].persist.backing is '/var/lib/ramdisk-backing/a': it overlaps" in error
               for error in bad["errors"]), bad["errors"]


def test_an_empty_brd_file_system_over_data_on_disk_is_not_a_refill():
    # Only tmpfs and ramfs are filled again from the disk when a boot left them empty; brd's disks have steps of
    # their own (mkfs, the module), which do not take it.
    host = facts(loaded=True, rd_nr=1, rd_size_kib=65536)
    host["paths"]["/srv/a"] = dict(EMPTY, mountpoint=True, below=dict(EMPTY, empty=False, inodes=3))
    host["mounts"] = [{"path": "/srv/a", "fstype": "xfs", "source": "/dev/ram0", "options": ["rw"],
                       "size_bytes": 64 * MIB, "used_bytes": 0, "inodes_total": 100, "inodes_used": 1}]
    result = plan(mounts=[{"disk": 0, "path": "/srv/a", "fstype": "xfs", "migrate": True}], host_facts=host)
    (mount,) = result["mounts"]
    assert mount["action"] != "migrate" and not mount.get("refill")
