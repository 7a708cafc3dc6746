# SPDX-License-Identifier: GPL-3.0-or-later
"""The tmpfs option table (_tmpfs_options.TMPFS_OPTIONS): its checks, mount options, live changes, and the roles'
argument specs and the policy keys that must agree with it."""
from __future__ import annotations

import copy
import os
import textwrap

import pytest
import yaml

from ansible_collections.ramdisk.provision.plugins.module_utils import _plan, _plan_core, _policy
from ansible_collections.ramdisk.provision.plugins.module_utils._plan import plan_tmpfs
from ansible_collections.ramdisk.provision.plugins.module_utils._tmpfs_options import (
    BY_NAME,
    NAMES,
    TMPFS_OPTIONS,
    live_differences,
    mount_options,
    remount_options,
)

MIB = 1024 ** 2
GIB = 1024 ** 3
HOST = "web01"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
SUPPORTED = {"tmpfs": True, "tmpfs_noswap": True, "tmpfs_quota": True, "tmpfs_quota_from": "CONFIG_TMPFS_QUOTA=y",
             "kernel": "6.8.0"}


def _facts(support=None, live_options=None):
    facts = {
        "memory": {"total_bytes": 16 * GIB},
        "support": dict(SUPPORTED if support is None else support),
        "paths": {"/srv/empty": {"exists": True, "is_dir": True, "empty": True, "mountpoint": False,
                                 "usage_bytes": 4096, "inodes": 1},
                  "/tmp": {"exists": True, "is_dir": True, "empty": False, "mountpoint": True, "fstype": "tmpfs",
                           "source": "tmpfs"}},
        "mounts": [],
    }
    if live_options is not None:
        facts["mounts"].append({"path": "/tmp", "fstype": "tmpfs", "source": "tmpfs",
                                "options": ["rw", "relatime", "size=1048576k", "mode=1777"]
                                + list(live_options), "size_bytes": GIB, "used_bytes": 0, "inodes_total": 100000,
                                "inodes_used": 1})
    return facts


def plan(entry, facts=None):
    return plan_tmpfs([entry], copy.deepcopy(facts or _facts()), HOST, "tmpfs_mounts")


def entry(**values):
    out = {"path": "/srv/empty", "size": "1G"}
    out.update(values)
    return out


@pytest.mark.parametrize("values, options", [
    ({"usrquota": True}, ["usrquota"]),
    ({"usrquota": "yes", "grpquota": False}, ["usrquota"]),
    ({"usrquota": True, "usrquota_block_hardlimit": "256m", "usrquota_inode_hardlimit": "10k"},
     ["usrquota", "usrquota_block_hardlimit=268435456", "usrquota_inode_hardlimit=10240"]),
    ({"grpquota": True, "grpquota_block_hardlimit": 1048576, "grpquota_inode_hardlimit": 500, "usrquota": True},
     ["usrquota", "grpquota", "grpquota_block_hardlimit=1048576", "grpquota_inode_hardlimit=500"]),
])
def test_quota_options_become_mount_options(values, options):
    result = plan(entry(**values))
    assert result["errors"] == []
    mount = result["mounts"][0]
    assert [o for o in mount["options"] if o.partition("=")[0] in NAMES] == options
    assert mount["action"] == "mount"


@pytest.mark.parametrize("values, key, words", [
    ({"usrquota": "maybe"}, "usrquota", "is 'maybe': not a boolean"),
    ({"usrquota": True, "usrquota_block_hardlimit": -1}, "usrquota_block_hardlimit", "is -1: the number must be above"),
    ({"usrquota": True, "usrquota_block_hardlimit": "-1"}, "usrquota_block_hardlimit", "not a whole number"),
    ({"usrquota": True, "usrquota_block_hardlimit": "lots"}, "usrquota_block_hardlimit", "not a whole number"),
    ({"usrquota": True, "usrquota_block_hardlimit": "1.5m"}, "usrquota_block_hardlimit", "not a whole number"),
    ({"usrquota": True, "usrquota_block_hardlimit": "10%"}, "usrquota_block_hardlimit", "not a whole number"),
    ({"usrquota": True, "usrquota_block_hardlimit": 0}, "usrquota_block_hardlimit", "above zero"),
    ({"usrquota": True, "usrquota_block_hardlimit": True}, "usrquota_block_hardlimit", "a positive whole number"),
    ({"usrquota": True, "usrquota_block_hardlimit": "2g"}, "usrquota_block_hardlimit",
     "2.0 GiB, above the mount's size of 1.0 GiB, so it would never apply. Use at most the size, e.g. 256m"),
    ({"usrquota": True, "usrquota_inode_hardlimit": 2 ** 63}, "usrquota_inode_hardlimit", "the largest limit"),
    ({"usrquota_block_hardlimit": "256m"}, "usrquota_block_hardlimit", "a limit without usrquota: true"),
    ({"usrquota": True, "grpquota_inode_hardlimit": 10}, "grpquota_inode_hardlimit", "a limit without grpquota: true"),
])
def test_bad_quota_values_name_host_key_value_and_fix(values, key, words):
    result = plan(entry(**values))
    assert len(result["errors"]) == 1, result["errors"]
    error = result["errors"][0]
    assert error.startswith("Host web01: tmpfs_mounts[0].%s is " % key)
    assert words in error
    assert result["mounts"] == []


@pytest.mark.parametrize("support, basis", [
    ({"tmpfs": True, "tmpfs_quota": False, "tmpfs_quota_from": "Linux 6.1.0 is older than 6.6", "kernel": "6.1.0"},
     "Linux 6.1.0 is older than 6.6"),
    ({"tmpfs": True, "tmpfs_quota": False, "tmpfs_quota_from": "CONFIG_TMPFS_QUOTA is not set in the kernel's config",
      "kernel": "6.18.4"}, "CONFIG_TMPFS_QUOTA is not set"),
    ({"tmpfs": True, "kernel": "6.8.0"}, "no fact said so"),
])
def test_a_kernel_without_tmpfs_quotas_is_refused_in_the_plan(support, basis):
    result = plan(entry(usrquota=True, usrquota_block_hardlimit="64m"), _facts(support))
    assert len(result["errors"]) == 1
    error = result["errors"][0]
    assert error.startswith("Host web01: tmpfs_mounts[0].usrquota is True: not supported by this host's kernel %s"
                            % support["kernel"])
    assert "usrquota, usrquota_block_hardlimit needs Linux 6.6 or later built with CONFIG_TMPFS_QUOTA" in error
    assert basis in error
    assert "Leave usrquota and usrquota_block_hardlimit out for this host" in error


def test_quota_off_needs_no_support():
    assert plan(entry(usrquota=False), _facts({"tmpfs": True, "kernel": "5.15.0"}))["errors"] == []


@pytest.mark.parametrize("option", ["usrquota", "grpquota", "quota", "usrquota_block_hardlimit=1m"])
def test_quota_in_options_points_to_the_key(option):
    result = plan(entry(options=[option]))
    assert len(result["errors"]) == 1
    assert "an option with its own key" in result["errors"][0]


@pytest.mark.parametrize("live, wanted, action, words", [
    (["usrquota", "usrquota_block_hardlimit=268435456"], {"usrquota": True, "usrquota_block_hardlimit": "256m"},
     "ok", None),
    ([], {"usrquota": True}, "refuse", "differs in usrquota false -> true, and the kernel cannot change this"),
    (["usrquota"], {}, "refuse", "usrquota true -> false"),
    (["usrquota", "usrquota_block_hardlimit=268435456"], {"usrquota": True, "usrquota_block_hardlimit": "512m"},
     "refuse", "usrquota_block_hardlimit 268435456 -> 536870912"),
    (["usrquota", "grpquota"], {"usrquota": True}, "refuse", "grpquota true -> false"),
])
def test_a_live_tmpfs_whose_quotas_differ_is_refused(live, wanted, action, words):
    result = plan(dict(path="/tmp", size="1G", mode="1777", **wanted), _facts(live_options=live))
    mount = result["mounts"][0]
    assert mount["action"] == action
    if words is None:
        assert result["errors"] == []
        # The kernel takes quota options on no remount: they stay out of it.
        assert not [o for o in mount["remount_options"] if o.partition("=")[0] in NAMES]
    else:
        assert len(result["errors"]) == 1
        assert result["errors"][0].startswith("Host web01: tmpfs_mounts[0].path is '/tmp': the tmpfs mounted there")
        assert words in result["errors"][0]
        assert "Unmount it yourself" in result["errors"][0]


def test_helpers():
    checked = {"usrquota": True, "usrquota_block_hardlimit": 1024}
    assert mount_options(checked) == ["usrquota", "usrquota_block_hardlimit=1024"]
    assert remount_options(checked) == []
    assert live_differences(checked, ["quota", "usrquota_block_hardlimit=1k"]) == ([], ["grpquota true -> false"])


def test_policy_and_plan_keys_come_from_the_table():
    for name in NAMES:
        assert name in _plan.ENTRY_KEYS
        assert _plan_core.KEYED_OPTIONS[name] == name
        assert name not in _plan_core.ALLOWED_EXTRA_OPTIONS
        assert name in _policy.BACKEND_KEYS["tmpfs"]
        assert name not in _plan.RAMFS_ENTRY_KEYS


def test_a_policy_entry_carries_quota_to_the_tmpfs_request():
    requests = _policy._backend_requests([{"backend": "tmpfs", "path": "/tmp", "size": "1G", "usrquota": True,
                                           "usrquota_block_hardlimit": "64m"}])
    assert requests["tmpfs_mounts"][0]["usrquota"] is True
    assert requests["tmpfs_mounts"][0]["usrquota_block_hardlimit"] == "64m"


# The argument specs are static YAML that Ansible reads: each must carry every option of the table as declared.
SPEC_PLACES = (
    ("roles/tmpfs/meta/argument_specs.yml", "tmpfs_mounts", ""),
    ("roles/tmpfs/meta/argument_specs.yml", "tmpfs_tmp", ""),
    ("roles/ramdisk/meta/argument_specs.yml", "ramdisk_mounts", "tmpfs only. "),
)


def spec_yaml(prefix):
    """What to paste into an argument spec's options for the table's options."""
    lines = []
    for option in TMPFS_OPTIONS:
        wrapped = textwrap.wrap(prefix + option.description, 100)
        lines += ["          %s:" % option.name, "            type: %s" % option.spec_type, "            description:",
                  "              - " + wrapped[0]] + ["                " + line for line in wrapped[1:]]
    return "\n".join(lines)


@pytest.mark.parametrize("path, variable, prefix", SPEC_PLACES)
def test_argument_specs_agree_with_the_table(path, variable, prefix):
    with open(os.path.join(REPO, path), encoding="utf-8") as handle:
        options = yaml.safe_load(handle)["argument_specs"]["main"]["options"][variable]["options"]
    wrong = [name for name in NAMES if options.get(name) != {
        "type": BY_NAME[name].spec_type, "description": [prefix + BY_NAME[name].description]}]
    assert not wrong, "%s: %s.options disagree with _tmpfs_options.TMPFS_OPTIONS on %s; paste:\n%s" % (
        path, variable, ", ".join(wrong), spec_yaml(prefix))
