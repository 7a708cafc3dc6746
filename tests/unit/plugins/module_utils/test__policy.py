# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

import re

import pytest

from ansible_collections.ramdisk.provision.plugins.module_utils._policy import (
    plan_policy,
    policy_sources,
    ram_budget,
    zram_device_name,
)

GIB = 1024 ** 3
MIB = 1024 ** 2
RAM = 16 * GIB
HOST = "db01"

DEFAULTS = {
    "backend": "tmpfs", "purpose": "custom", "state": "mounted", "mode": "0755", "owner": "root", "group": "root",
    "nosuid": True, "nodev": True, "noexec": False, "noatime": False, "options": [], "migrate": True, "persist": None,
}
PURPOSES = {
    "tmp": {"mode": "1777", "owner": "root", "group": "root", "noexec": False, "migrate": True, "gate": "enforce"},
    "build": {"mode": "0755", "owner": "builder", "group": "builder", "noexec": False},
    "cache": {"noexec": True},
    "database": {"mode": "0700", "owner": "postgres", "group": "postgres", "noexec": True, "migrate": True},
    "log": {"noexec": True, "migrate": True},
    "custom": {},
}
BACKING = {"backing": "/var/lib/ramdisk-backing/pg"}


def _path(usage=4096, complete=True):
    return {"exists": True, "is_dir": True, "empty": usage <= 4096, "usage_bytes": usage, "complete": complete}


FACTS = {
    "memory": {"total_bytes": RAM, "available_bytes": 12 * GIB},
    "swap": {"total_bytes": 0, "free_bytes": 0},
    "support": {"tmpfs": True, "ramfs": True, "zram": True, "brd": True},
    "paths": {"/tmp": _path(1 * GIB), "/var/tmp": _path(10 * GIB), "/var/cache/build": _path()},
    "mounts": [
        {"path": "/dev/shm", "kind": "tmpfs", "size_bytes": 8 * GIB, "used_bytes": 1 * MIB},
        {"path": "/run", "kind": "tmpfs", "size_bytes": 2 * GIB, "used_bytes": 2 * MIB},
    ],
    "zram": [],
    "brd": {"loaded": False, "devices": []},
}


def plan(sources, facts=None, **kwargs):
    if isinstance(sources, list):
        sources = [("ramdisk_mounts", sources)]
    else:
        sources = list(sources.items())
    kwargs.setdefault("purposes", PURPOSES)
    kwargs.setdefault("defaults", DEFAULTS)
    return plan_policy(sources, FACTS if facts is None else facts, host=HOST, **kwargs)


def one_error(result):
    assert len(result["errors"]) == 1, result["errors"]
    assert result["errors"][0].startswith("Host %s: " % HOST)
    return result["errors"][0]


def test_sources_take_ramdisk_mounts_first_then_group_policies_by_name():
    variables = {"ramdisk_mounts__databases": [2], "ramdisk_mounts": [0], "ramdisk_mounts__builders": [1],
                 "ramdisk_mounts__": [9], "other": [3]}
    assert policy_sources(variables) == [
        ("ramdisk_mounts", [0]), ("ramdisk_mounts__builders", [1]), ("ramdisk_mounts__databases", [2])]


def test_purpose_defaults_fill_entries_and_the_entry_wins():
    result = plan([
        {"path": "/tmp", "purpose": "tmp", "size": "25%"},
        {"path": "/var/cache/build", "purpose": "build", "size": "2G", "owner": "ci"},
        {"path": "/var/cache/apt-x", "purpose": "cache", "size": "1G", "noexec": False},
    ])
    assert result["errors"] == []
    tmp, build, cache = result["entries"]
    assert (tmp["mode"], tmp["nosuid"], tmp["nodev"], tmp["gate"]) == ("1777", True, True, "enforce")
    assert (build["owner"], build["group"], build["noexec"]) == ("ci", "builder", False)
    assert cache["noexec"] is False and cache["nosuid"] is True
    assert [e["label"] for e in result["entries"]] == ["ramdisk_mounts[%d]" % i for i in range(3)]


def test_database_purpose_is_private_owned_and_persisted():
    persist = dict(BACKING, services=["postgresql@15-main.service"])
    result = plan([{"path": "/var/lib/postgresql", "purpose": "database", "size": "2G", "persist": persist}])
    assert result["errors"] == []
    (entry,) = result["backends"]["tmpfs_mounts"]
    assert entry["mode"] == "0700" and entry["owner"] == "postgres" and entry["noexec"] is True
    assert entry["migrate"] is True and entry["persist"] == dict(persist, stop_services=True)
    assert entry["label"] == "ramdisk_mounts[0]"


def test_log_purpose_is_noexec_migrated_and_persisted():
    result = plan([{"path": "/var/log", "purpose": "log", "size": "256M", "persist": {"backing": "/var/lib/rb/log"}}])
    assert result["errors"] == []
    (entry,) = result["backends"]["tmpfs_mounts"]
    assert entry["noexec"] is True and entry["migrate"] is True and entry["persist"] == {"backing": "/var/lib/rb/log"}
    # The directory's own mode and owners stay (ROOTS), as for every purpose that does not set them.
    assert entry["mode"] == "0755" and entry["owner"] == "root"


def test_a_database_stops_its_services_for_each_sync_unless_it_says_otherwise():
    services = {"services": ["postgresql@15-main.service"]}
    for persist, expected in ((dict(BACKING, **services), True), (dict(BACKING, stop_services=False), False),
                              (dict(BACKING, stop_services=False, **services), False)):
        result = plan([{"path": "/var/lib/postgresql", "purpose": "database", "size": "2G", "persist": persist}])
        assert result["errors"] == []
        (entry,) = result["backends"]["tmpfs_mounts"]
        assert entry["persist"]["stop_services"] is expected
    result = plan([{"path": "/var/cache/x", "purpose": "cache", "size": "1G", "persist": dict(BACKING, **services)}])
    (entry,) = result["backends"]["tmpfs_mounts"]
    assert "stop_services" not in entry["persist"]


def test_a_database_without_services_to_stop_is_refused():
    error = one_error(plan([{"path": "/var/lib/postgresql", "purpose": "database", "size": "2G", "persist": BACKING}]))
    assert error.startswith("Host ")
    assert "ramdisk_mounts[0].persist.services is missing: empty for a database-purpose mount" in error
    assert "persist.services: [postgresql@15-main.service], or set persist.stop_services: false" in error


def test_group_policies_merge_and_an_identical_repeat_counts_once():
    result = plan({
        "ramdisk_mounts__builders": [{"path": "/var/cache/build", "purpose": "build", "size": "2G"},
                                     {"path": "/tmp", "purpose": "tmp", "size": "25%"}],
        "ramdisk_mounts__caches": [{"path": "/var/cache/web", "purpose": "cache", "size": "1G"},
                                   {"path": "/tmp/", "purpose": "tmp", "size": "25%"}],
    })
    assert result["errors"] == []
    assert [e["path"] for e in result["entries"]] == ["/var/cache/build", "/tmp", "/var/cache/web"]
    assert [e["label"] for e in result["entries"]] == [
        "ramdisk_mounts__builders[0]", "ramdisk_mounts__builders[1]", "ramdisk_mounts__caches[0]"]


def test_the_same_path_set_differently_names_both_variables():
    error = one_error(plan({
        "ramdisk_mounts__builders": [{"path": "/tmp", "purpose": "tmp", "size": "25%"}],
        "ramdisk_mounts__databases": [{"path": "/tmp", "purpose": "tmp", "size": "10%"}],
    }))
    assert "ramdisk_mounts__builders[0] and ramdisk_mounts__databases[0] both set path '/tmp'" in error
    assert "size: '10%'" in error


def test_backend_requests_carry_each_entry_to_its_role():
    result = plan([
        {"path": "/var/cache/a", "backend": "ramfs", "size": "64M"},
        {"path": "/var/cache/b", "backend": "zram", "size": "1G", "algorithm": "lz4"},
        {"path": "/var/cache/c", "backend": "brd", "size": "64M"},
        {"path": "/var/cache/d", "backend": "brd", "size": "64M", "fstype": "xfs"},
    ])
    assert result["errors"] == []
    backends = result["backends"]
    assert backends["tmpfs_mounts"] == []
    (ramfs,) = backends["ramfs_mounts"]
    assert ramfs["max_size"] == "64M" and "size" not in ramfs
    (zram,) = backends["zram_devices"]
    assert "persist" not in zram
    assert zram["use"] == "filesystem" and zram["state"] == "present" and zram["algorithm"] == "lz4"
    assert zram["name"] == zram_device_name("/var/cache/b")
    brd = backends["brd"]
    assert (brd["state"], brd["count"], brd["size"]) == ("present", 2, "64M")
    assert [(m["disk"], m["path"]) for m in brd["mounts"]] == [(0, "/var/cache/c"), (1, "/var/cache/d")]
    assert brd["mounts"][1]["fstype"] == "xfs"


def test_rollback_turns_every_entry_absent_and_needs_no_size():
    result = plan([{"path": "/var/lib/postgresql", "purpose": "database", "persist": BACKING},
                   {"path": "/var/cache/c", "backend": "brd"}], state="absent")
    assert result["errors"] == []
    assert [e["state"] for e in result["entries"]] == ["absent", "absent"]
    assert result["backends"]["brd"]["state"] == "absent"
    assert result["budget"]["total_bytes"] == 1 * MIB + 2 * MIB


def test_zram_names_are_valid_and_distinct():
    names = {zram_device_name(p) for p in ("/var/cache/a-b", "/var/cache/a/b", "/" + "x" * 80)}
    assert len(names) == 3
    assert all(len(n) <= 32 and n == n.lower() for n in names)


@pytest.mark.parametrize("entry, words", [
    ("not a mapping", "ramdisk_mounts[0] is 'not a mapping': not a mapping"),
    ({"path": "/var/cache/x", "size": "1G", "colour": "red"}, "ramdisk_mounts[0].colour is 'red': an unknown key"),
    ({"path": "/var/cache/x", "size": "1G", "backend": "nvme"}, ".backend is 'nvme': not a known backend"),
    ({"path": "/var/cache/x", "size": "1G", "purpose": "scratch"}, ".purpose is 'scratch': not a known purpose"),
    ({"path": "/var/cache/x", "size": "1G", "state": "present"}, ".state is 'present': not a known state"),
    ({"path": "var/cache/x", "size": "1G"}, ".path is 'var/cache/x': a relative path"),
    ({"path": "/usr", "size": "1G"}, "a system path"),
    ({"path": "/var/../etc", "size": "1G"}, "a path with '..'"),
    ({"size": "1G"}, ".path is missing: not a path"),
    ({"path": "/var/cache/x"}, ".size is missing: required for a mounted entry"),
    ({"path": "/var/cache/x", "size": "lots"}, ".size is 'lots'"),
    ({"path": "/var/cache/x", "size": 0}, ".size is 0: the size must be above zero"),
    ({"path": "/var/cache/x", "size": "-1G"}, ".size is '-1G'"),
    ({"path": "/var/cache/x", "size": "32G"}, "above this host's RAM"),
    ({"path": "/var/cache/x", "size": "1G", "algorithm": "lz4"}, "a zram key, and this entry's backend is tmpfs"),
    ({"path": "/var/cache/x", "size": "1G", "backend": "ramfs", "huge": "always"}, "a tmpfs key"),
    ({"path": "/var/cache/x", "size": "1G", "gate": "warn"}, "a key of the tmp purpose"),
    ({"path": "/var/tmp", "size": "1G", "purpose": "tmp", "backend": "ramfs"}, "ramfs for a tmp-purpose mount"),
    ({"path": "/tmp", "size": "1G", "purpose": "cache"}, "not tmp for /tmp"),
    ({"path": "/var/tmp", "size": "1G", "purpose": "tmp", "gate": "sometimes"}, "not a gate setting"),
    ({"path": "/var/lib/postgresql", "size": "1G", "purpose": "database"}, "must never lose its data"),
    ({"path": "/var/log", "size": "64M", "purpose": "log"},
     "persist is missing: off for a log-purpose mount, whose logs would all go at every reboot"),
    ({"path": "/var/log", "size": "64M", "purpose": "log", "backend": "ramfs", "persist": BACKING},
     "backend is 'ramfs': ramfs for a log-purpose mount"),
    ({"path": "/var/cache/x", "size": "1G", "backend": "zram", "mem_limit": "nope"}, ".mem_limit is 'nope'"),
])
def test_bad_entries_are_refused_with_the_reason(entry, words):
    result = plan([entry])
    assert words in one_error(result)
    assert result["entries"] == []


def test_a_list_that_is_not_a_list_is_refused():
    assert "ramdisk_mounts__web is '/tmp': not a list" in one_error(plan({"ramdisk_mounts__web": "/tmp"}))


def test_nested_paths_across_backends_are_refused():
    error = one_error(plan([{"path": "/var/cache/x", "size": "1G"},
                            {"path": "/var/cache/x/y", "size": "64M", "backend": "ramfs"}]))
    assert "ramdisk_mounts[1].path is '/var/cache/x/y': it is inside ramdisk_mounts[0].path" in error


def test_brd_disks_of_different_sizes_are_refused():
    error = one_error(plan([{"path": "/var/cache/a", "backend": "brd", "size": "64M"},
                            {"path": "/var/cache/b", "backend": "brd", "size": "128M"}]))
    assert "brd makes every disk the same size" in error


@pytest.mark.parametrize("kwargs, words", [
    ({"budget": "lots"}, "ramdisk_ram_budget is 'lots'"),
    ({"zram_ratio": 0.5}, "ramdisk_zram_assumed_ratio is 0.5"),
    ({"zram_ratio": "x"}, "ramdisk_zram_assumed_ratio is 'x'"),
    ({"state": "gone"}, "ramdisk_state is 'gone'"),
])
def test_bad_role_settings_are_refused(kwargs, words):
    assert words in one_error(plan([{"path": "/var/cache/x", "size": "1G"}], **kwargs))


def test_missing_memory_facts_are_refused():
    assert "memory.total_bytes is missing" in one_error(plan([], facts={}))


def test_tmp_gate_enforce_refuses_what_does_not_fit_and_warn_only_warns():
    entry = {"path": "/var/tmp", "purpose": "tmp", "size": "75%"}
    error = one_error(plan([entry]))
    assert "puts '/var/tmp' in RAM, but it does not fit: /var/tmp uses 10.0 GiB, more than half of RAM" in error
    assert "set ramdisk_mounts[0].gate to warn or off" in error
    warned = plan([dict(entry, gate="warn")])
    assert warned["errors"] == [] and len(warned["warnings"]) == 1
    assert warned["gates"][0]["recommended"] is False
    off = plan([dict(entry, gate=False)])
    assert off["errors"] == [] and off["gates"] == []


def test_tmp_gate_action_skip_leaves_that_path_out_and_plans_the_rest():
    """A fleet rollout: on a host where the tmp-purpose path does not fit, skip leaves it as it is (not planned,
    not counted in the budget) and the rest of the host's policy goes ahead, named in skipped and a warning."""
    entries = [{"path": "/var/tmp", "purpose": "tmp", "size": "50%"}, {"path": "/var/cache/build", "size": "1G"}]
    failed = plan(entries)
    assert len(failed["errors"]) == 1 and "does not fit" in failed["errors"][0]
    skipped = plan(entries, gate_action="skip")
    assert skipped["errors"] == []
    assert [entry["path"] for entry in skipped["entries"]] == ["/var/cache/build"]
    assert [item["path"] for item in skipped["backends"]["tmpfs_mounts"]] == ["/var/cache/build"]
    assert skipped["skipped"] == [{"path": "/var/tmp", "label": "ramdisk_mounts[0]",
                                   "reasons": skipped["gates"][0]["reasons"]}]
    assert skipped["gates"][0]["skipped"] is True and skipped["gates"][0]["recommended"] is False
    assert [item["what"] for item in skipped["budget"]["counted"] if "/var/tmp" in item["what"]] == []
    (warning,) = skipped["warnings"]
    assert warning.startswith("Host %s: ramdisk_mounts[0] would put '/var/tmp' in RAM, but it does not fit, so it "
                              "is skipped (ramdisk_tmp_gate_action: skip)" % HOST)
    # What fits is planned as ever; warn and off never skip.
    assert plan([{"path": "/tmp", "purpose": "tmp", "size": "50%"}], gate_action="skip")["skipped"] == []
    assert plan([dict(entries[0], gate="warn")], gate_action="skip")["entries"][0]["path"] == "/var/tmp"


def test_tmp_gate_action_is_fail_or_skip():
    error = one_error(plan([{"path": "/tmp", "purpose": "tmp", "size": "50%"}], gate_action="ignore"))
    assert "ramdisk_tmp_gate_action is 'ignore': not a gate action. Use fail" in error


def test_tmp_gate_passes_what_fits():
    result = plan([{"path": "/tmp", "purpose": "tmp", "size": "50%"}])
    assert result["errors"] == []
    (gate,) = result["gates"]
    assert gate["recommended"] and gate["path"] == "/tmp" and gate["label"] == "ramdisk_mounts[0]"


def test_budget_counts_policy_limits_and_host_usage_of_system_mounts():
    result = plan([{"path": "/var/cache/x", "size": "4G"},
                   {"path": "/var/cache/z", "backend": "zram", "size": "4G"},
                   {"path": "/var/cache/m", "backend": "zram", "size": "4G", "mem_limit": "1G"}])
    budget = result["budget"]
    assert budget["within"] and budget["limit_bytes"] == int(RAM * 0.8)
    assert [(c["what"], c["bytes"]) for c in budget["counted"]] == [
        ("ramdisk_mounts[0] /var/cache/x (tmpfs)", 4 * GIB),
        ("ramdisk_mounts[1] /var/cache/z (zram)", 2 * GIB),
        ("ramdisk_mounts[2] /var/cache/m (zram)", 1 * GIB),
        ("/dev/shm (tmpfs, on the host)", 1 * MIB),
        ("/run (tmpfs, on the host)", 2 * MIB),
    ]
    assert budget["total_bytes"] == 7 * GIB + 3 * MIB


def test_over_budget_is_refused_with_the_excess_and_what_counts():
    error = one_error(plan([{"path": "/var/cache/a", "size": "8G"}, {"path": "/var/cache/b", "size": "6G"}]))
    assert "the policy needs up to 14.0 GiB of RAM-backed storage, 1.2 GiB over ramdisk_ram_budget (80%" in error
    assert "ramdisk_mounts[0] /var/cache/a (tmpfs) 8.0 GiB; ramdisk_mounts[1] /var/cache/b (tmpfs) 6.0 GiB" in error
    assert plan([{"path": "/var/cache/a", "size": "8G"}, {"path": "/var/cache/b", "size": "6G"}],
                budget="90%")["errors"] == []


def test_budget_counts_the_hosts_other_ram_storage():
    facts = dict(FACTS, mounts=FACTS["mounts"] + [
        {"path": "/srv/old", "kind": "tmpfs", "size_bytes": 3 * GIB, "used_bytes": 0},
        {"path": "/srv/locks", "kind": "ramfs", "size_bytes": 0, "used_bytes": 5 * MIB},
        {"path": "/var/cache/x", "kind": "tmpfs", "size_bytes": 9 * GIB, "used_bytes": 0},
        {"path": "/srv/zfs", "kind": "zram", "size_bytes": 1 * GIB, "used_bytes": 0},
    ], zram=[{"path": "/dev/zram0", "disksize_bytes": 8 * GIB, "mem_limit_bytes": 0, "used_as": "swap"},
             {"path": "/dev/zram1", "disksize_bytes": 0, "mem_limit_bytes": 0, "used_as": "unused"}],
        brd={"loaded": True, "rd_size_kib": 65536, "devices": [{"path": "/dev/ram0"}]})
    budget = plan([{"path": "/var/cache/x", "size": "1G"}], facts=facts)["budget"]
    got = dict((c["what"], c["bytes"]) for c in budget["counted"])
    assert got == {
        "ramdisk_mounts[0] /var/cache/x (tmpfs)": 1 * GIB,
        "/dev/shm (tmpfs, on the host)": 1 * MIB,
        "/run (tmpfs, on the host)": 2 * MIB,
        "/srv/old (tmpfs, on the host)": 3 * GIB,
        "/srv/locks (ramfs, on the host)": 5 * MIB,
        "/dev/zram0 (zram swap, on the host)": 4 * GIB,
        "/dev/ram0 (brd, on the host)": 64 * MIB,
    }


def test_budget_counts_the_zram_swap_of_zram_devices():
    # site.yml sets up zram_devices beside the policy: their swap counts before anything is made, and a
    # live one at the larger of its planned and present size (the zram role may resize it in the run).
    live = {"device": "zram0", "path": "/dev/zram0", "mem_limit_bytes": 0, "used_as": "swap"}
    facts = dict(FACTS, zram=[dict(live, disksize_bytes=2 * GIB),
                              dict(live, device="zram1", path="/dev/zram1", disksize_bytes=8 * GIB),
                              dict(live, device="zram2", path="/dev/zram2", disksize_bytes=1 * GIB,
                                   used_as="filesystem", mountpoint="/srv/other")])
    swaps = [{"name": "grown", "use": "swap", "size": "6G"},                  # live as zram0 at 2G
             {"name": "shrunk", "use": "swap", "size": "1G"},                 # live as zram1 at 8G
             {"name": "new", "use": "swap", "size": "25%"},                   # 4G at 2:1
             {"name": "capped", "use": "swap", "size": "8G", "mem_limit": "512M"},
             {"name": "stale", "use": "swap", "size": "1G"},                  # its record names a file system
             {"name": "gone", "use": "swap", "size": "1G", "state": "absent"},
             {"name": "fs", "use": "filesystem", "size": "1G", "path": "/srv/fs"},
             {"name": "bad", "use": "swap", "size": "lots"},                  # the zram role refuses it
             "not a mapping"]
    budget = plan([{"path": "/var/cache/x", "size": "1G"}], facts=facts, swap_devices=swaps,
                  swap_known={"grown": "zram0", "shrunk": "zram1", "new": "zram5", "stale": "zram2"})["budget"]
    got = dict((c["what"], (c["bytes"], c["source"])) for c in budget["counted"])
    assert got == {
        "ramdisk_mounts[0] /var/cache/x (tmpfs)": (1 * GIB, "policy"),
        "/dev/shm (tmpfs, on the host)": (1 * MIB, "host"),
        "/run (tmpfs, on the host)": (2 * MIB, "host"),
        "/dev/zram2 (zram filesystem, on the host)": (512 * MIB, "host"),
        "zram_devices[0] grown (zram swap, /dev/zram0)": (3 * GIB, "zram_devices"),
        "zram_devices[1] shrunk (zram swap, /dev/zram1)": (4 * GIB, "zram_devices"),
        "zram_devices[2] new (zram swap, to be made)": (2 * GIB, "zram_devices"),
        "zram_devices[3] capped (zram swap, to be made)": (512 * MIB, "zram_devices"),
        "zram_devices[4] stale (zram swap, to be made)": (512 * MIB, "zram_devices"),
    }


def test_zram_device_defaults_apply_to_the_swap_of_zram_devices():
    budget = plan([], swap_devices=[{"name": "swap", "size": "8G"}],
                  swap_defaults={"use": "swap", "mem_limit": "1G"})["budget"]
    assert [(c["what"], c["bytes"], c["basis"]) for c in budget["counted"] if c["source"] == "zram_devices"] == [
        ("zram_devices[0] swap (zram swap, to be made)", 1 * GIB, "mem_limit")]


def test_zram_swap_of_zram_devices_can_put_the_policy_over_budget():
    error = one_error(plan([{"path": "/var/cache/a", "size": "10G"}],
                           swap_devices=[{"name": "swap", "use": "swap", "size": "100%", "mem_limit": "4G"}]))
    assert "zram_devices[0] swap (zram swap, to be made) 4.0 GiB" in error
    assert "over ramdisk_ram_budget" in error


def test_ram_budget_alone():
    budget = ram_budget([], {}, 10, 2.0)
    assert budget == {"limit": "80%", "limit_bytes": 10, "total_bytes": 0, "within": True,
                      "zram_assumed_ratio": 2.0, "counted": []}


def test_a_key_two_backends_take_names_both():
    error = one_error(plan([{"path": "/var/cache/x", "size": "1G", "fstype": "ext4"}]))
    assert "a zram and brd key, and this entry's backend is tmpfs" in error
    assert "set backend: zram or brd" in error


def test_a_backing_inside_a_ram_mount_of_another_backend_is_refused():
    error = one_error(plan({
        "ramdisk_mounts__caches": [{"path": "/srv/ramcache", "backend": "ramfs", "size": "1G"}],
        "ramdisk_mounts__databases": [{"path": "/srv/pgdata", "size": "1G", "persist": {
            "backing": "/srv/ramcache/pgdata"}}],
    }))
    assert "ramdisk_mounts__databases[0].persist.backing is '/srv/ramcache/pgdata': it is inside " \
           "ramdisk_mounts__caches[0].path '/srv/ramcache'" in error


def test_a_ramfs_on_the_host_counts_with_its_declared_size():
    facts = {"mounts": [{"path": "/srv/r", "kind": "ramfs", "fstype": "ramfs", "used_bytes": 10,
                         "declared_size_bytes": 1 << 26}]}
    budget = ram_budget([], facts, 1 << 30, 2.0)
    assert [(item["bytes"], item["basis"]) for item in budget["counted"]] == [
        (1 << 26, "declared max_size (ramfs has no limit)")]


@pytest.mark.parametrize("entries, index", [
    ([{"path": "/var/cache/x", "size": "64T"}], 0),
    ([{"path": "/var/cache/x", "size": "32G", "backend": "ramfs"}], 0),
    ([{"path": "/var/cache/a", "size": "2G"}, {"path": "/var/cache/x", "size": "17G"}], 1),
    ([{"path": "/var/cache/x", "size": "200%"}, {"path": "/var/cache/b", "size": "1G", "backend": "ramfs"}], 0),
])
def test_the_size_a_refusal_advises_is_accepted_when_followed(entries, index):
    error = one_error(plan(entries))
    most = re.search(r"Use at most (\d+M) \(", error).group(1)
    followed = [dict(entry, size=most) if n == index else entry for n, entry in enumerate(entries)]
    result = plan(followed)
    assert result["errors"] == [] and result["budget"]["within"]
    # And it is the most: one MiB more is over the budget.
    over = [dict(entry, size="%dM" % (int(most[:-1]) + 1)) if n == index else entry for n, entry in enumerate(entries)]
    assert "over ramdisk_ram_budget" in one_error(plan(over))


def test_the_budget_a_refusal_advises_is_accepted_when_followed():
    error = one_error(plan([{"path": "/var/cache/x", "size": "1G"}], budget="150%"))
    assert "Use at most 100%" in error
    assert plan([{"path": "/var/cache/x", "size": "1G"}], budget="100%")["errors"] == []
