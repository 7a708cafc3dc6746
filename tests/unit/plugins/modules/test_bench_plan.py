# SPDX-License-Identifier: GPL-3.0-or-later
"""Run bench_plan for real, as Ansible does: it reads this machine's cores and memory and returns the registry's
plan for them, the same items _probes.plan() builds; with errors it fails with every one of them and no item."""

from __future__ import annotations

import json
import os

from conftest import run_module_process

import ansible_collections.ramdisk.provision.plugins.modules.bench_plan as module_under_test
from ansible_collections.ramdisk.provision.plugins.module_utils import _bench_targets
from ansible_collections.ramdisk.provision.plugins.module_utils import _probes
from ansible_collections.ramdisk.provision.plugins.module_utils import _procfs

MODULE_NAME = module_under_test.__name__
MIB = 1024 * 1024
PROFILE = {"runs": 5, "fio_runtime": 1, "small_files": 20, "meta_dirs": 2, "meta_files_per_dir": 5,
           "meta_file_bytes": 1024, "meta_seconds": 1}
RAM = {"label": "ram", "path": "/srv/ram", "kind": "ram", "file_size_bytes": 8 * MIB, "direct_ok": False}
DISK = {"label": "disk", "path": "/var/tmp", "kind": "disk", "file_size_bytes": 8 * MIB, "direct_ok": True}


def run(tmp_path, **args):
    return run_module_process(MODULE_NAME, tmp_path, dict({"host": "testhost"}, **args))


def test_host_facts_are_this_machines():
    facts = module_under_test.host_facts()
    assert facts["cores"] == len(os.sched_getaffinity(0))
    with open("/proc/meminfo", encoding="utf-8") as handle:
        memory = _procfs.parse_meminfo(handle.read())
    assert 0 < facts["mem_total"] <= memory["MemTotal"] and facts["mem_available"] > 0


def test_host_facts_are_capped_by_the_cgroup_as_bench_targets_reads_them(monkeypatch):
    """In a container limited to 1 GiB on a host of 24 GiB, the plan reads the container's memory, as bench_targets
    did when it sized the test files: not /proc/meminfo's, which is the host's."""
    capped = {"total_bytes": 1 << 30, "available_bytes": 600 << 20}
    monkeypatch.setattr(_bench_targets, "read_host", lambda mountinfo=None: ([], dict(capped)))
    facts = module_under_test.host_facts()
    assert (facts["mem_total"], facts["mem_available"]) == (1 << 30, 600 << 20)


def test_the_items_are_the_registrys_plan_for_this_host(tmp_path):
    options = {"tests": ["dd", "fio", "metadata"], "dir_name": "rb", "raw_dir": "/var/tmp/rb/raw",
               "random_file": "/var/tmp/rb/random.bin"}
    result = run(tmp_path, targets=[RAM, DISK], profile=PROFILE, _ansible_check_mode=True, **options)
    assert result.get("failed") is not True, result
    assert result["changed"] is False and result["errors"] == [] and result["size_bytes"] == 8 * MIB
    facts = result["host_facts"]
    assert facts["cores"] == len(os.sched_getaffinity(0)) and facts["mem_total"] > 0
    expected = _probes.plan([RAM, DISK], PROFILE, host="testhost", cores=facts["cores"], mem_total=facts["mem_total"],
                            mem_available=facts["mem_available"], **options)
    assert result["probe_items"] == json.loads(json.dumps(expected["items"]))
    # The same items, a list per round, for bench_probe's items (a round per call).
    assert all(len(set(one["round"] for one in items)) == 1 for items in result["probe_rounds"])
    assert [one for items in result["probe_rounds"] for one in items] == result["probe_items"]
    assert [items[0]["round"] for items in result["probe_rounds"]] == [0, 1, 2, 3, 4, 5]
    # Round 0 (the warm-up) and the five measured rounds, the targets taking turns.
    assert sorted(set(one["round"] for one in result["probe_items"])) == [0, 1, 2, 3, 4, 5]
    assert [one["label"] for one in result["probe_items"][:2]] == ["ram", "ram"]
    # RAM refuses O_DIRECT: seq_read runs buffered on both and direct on the disk.
    modes = set((one["label"], one["mode"]) for one in result["probe_items"] if one["probe"] == "seq_read")
    assert modes == {("ram", "buffered"), ("disk", "buffered"), ("disk", "direct")}
    for one in result["probe_items"]:
        assert one["output"] in (_probes.FILE_OUTPUT, _probes.TEXT_OUTPUT)
        assert one["sync"] == ["/srv/ram", "/var/tmp", "/var/tmp/rb/raw"]


def test_every_error_fails_the_plan_before_anything_runs(tmp_path):
    result = run(tmp_path, targets=[dict(DISK, file_size_bytes=0)], profile=dict(PROFILE, fio_runtime=0),
                 tests=["dd", "fio", "diskspeed"], runs=3)
    assert result["failed"] is True and result["probe_items"] == []
    errors = result["errors"]
    assert len(errors) == 5, errors
    for phrase in ("no RAM-backed path to benchmark", "a test file needs at least 1 MiB",
                   "benchmark_tests holds 'diskspeed', which is no test", "the profile's fio_runtime is 0",
                   "benchmark_runs is 3"):
        assert len([error for error in errors if phrase in error]) == 1, phrase
    assert result["msg"].startswith("The benchmark plan of host testhost has 5 error(s), so nothing ran: Host testhost:")
    assert all(error in result["msg"] for error in errors)
