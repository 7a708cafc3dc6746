# SPDX-License-Identifier: GPL-3.0-or-later
"""Run bench_probe for real, as Ansible does, on items the registry planned for two directories of this machine
(tiny sizes: 1 MiB files, 20 small files, a metadata tree of 2 x 5 files for 1 s): dd, fio and the metadata
program run, the raw file is written whole, the figures are the parser's, the counters are those of the block
devices under the directory; a failing command leaves no raw file and says what failed where."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from conftest import run_module_process

import ansible_collections.ramdisk.provision.plugins.modules.bench_probe as module_under_test
from ansible_collections.ramdisk.provision.plugins.module_utils import _bench_counters
from ansible_collections.ramdisk.provision.plugins.module_utils import _probes

MODULE_NAME = module_under_test.__name__
MIB = 1024 * 1024
PROFILE = {"runs": 5, "fio_runtime": 1, "small_files": 20, "meta_dirs": 2, "meta_files_per_dir": 5,
           "meta_file_bytes": 1024, "meta_seconds": 1}

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="syncfs of the targets and the device counters as root")


@pytest.fixture
def bench(tmp_path):
    """A plan for two targets under tmp_path (both on this machine's disk; one called ram for the plan's sake)."""
    host_dir = tmp_path / "host"
    (host_dir / "raw").mkdir(parents=True)
    random_file = host_dir / "random.bin"
    random_file.write_bytes(os.urandom(MIB))
    targets = []
    for label, kind in (("ram", "ram"), ("disk", "disk")):
        path = tmp_path / label
        (path / "rb" / label).mkdir(parents=True)
        targets.append({"label": label, "path": str(path), "kind": kind, "file_size_bytes": MIB, "direct_ok": True})
    plan = _probes.plan(targets, PROFILE, host="testhost", tests=("dd", "fio", "metadata"), fio_jobs=(), cores=1,
                        dir_name="rb", random_file=str(random_file), raw_dir=str(host_dir / "raw"))
    assert plan["errors"] == []
    return {"tmp": tmp_path, "plan": plan, "raw_dir": host_dir / "raw", "targets": targets}


def item(bench, label, probe, round_number=0):
    found = [one for one in bench["plan"]["items"]
             if (one["label"], one["probe"], one["round"]) == (label, probe, round_number)]
    assert len(found) == 1
    return found[0]


def run(bench, one, **extra):
    args = dict({"item": one}, **extra)
    return run_module_process(MODULE_NAME, bench["tmp"], args, timeout=120)


def leftovers(raw_dir):
    return [name for name in os.listdir(raw_dir) if ".ramdisk-" in name]


@needs_root
def test_a_dd_write_and_its_read_on_the_disk_with_their_counters(bench):
    write = item(bench, "disk", "write_fdatasync")
    result = run(bench, write)
    assert result.get("failed") is not True, result
    assert result["changed"] is True and result["raw"] == write["raw"]
    with open(write["raw"], encoding="utf-8") as handle:
        text = handle.read()
    assert "1048576 bytes" in text and " copied, " in text
    # The figures are the registry parser's reading of the raw file, with the item's labels.
    assert result["figures"] == json.loads(json.dumps(_probes.parse(write, text, {"seconds": result["seconds"]})))
    figure = result["figures"][0]
    assert (figure["op"], figure["io_bytes"], figure["label"], figure["warmup"]) == ("write", MIB, "disk", True)
    assert figure["bw_bytes"] > 0 and result["seconds"] > 0
    assert result["run"]["argv"] == write["argv"] and result["run"]["warm"] == write["warm"]
    assert result["run"]["sync"] == [target["path"] for target in bench["targets"]] + [str(bench["raw_dir"])]
    # The devices under the directory, as _bench_counters reads them; conv=fdatasync made the MiB reach them.
    levels = _bench_counters.stack(write["path"])
    assert result["stack"] == levels
    assert result["issued"] == {"what": "write", "bytes": MIB}
    if levels:
        assert [level["devices"] for level in result["counters"]] == levels
        assert min(level["write_bytes"] for level in result["counters"]) >= MIB
        assert result["row_label"] == "sync"
    else:
        assert result["counters"] == [] and result["row_label"] == "ram"

    read = item(bench, "disk", "read")
    assert read["mode"] == _probes.DIRECT
    result = run(bench, read)
    assert result.get("failed") is not True, result
    assert result["figures"][0]["op"] == "read" and result["figures"][0]["io_bytes"] == MIB
    if levels:
        # O_DIRECT: every byte read came from the device.
        assert min(level["read_bytes"] for level in result["counters"]) >= MIB
        assert result["row_label"] == _probes.DIRECT
    assert leftovers(bench["raw_dir"]) == []


@needs_root
def test_fio_writes_its_raw_file_through_a_temporary_name(bench):
    small = item(bench, "ram", "small_files")
    assert small["output"] == _probes.FILE_OUTPUT
    result = run(bench, small)
    assert result.get("failed") is not True, result
    # fio was pointed at a temporary file beside the raw file, renamed once it succeeded.
    temp = [arg for arg in result["run"]["argv"] if arg.startswith("--output=")][0][len("--output="):]
    assert temp != small["raw"] and os.path.dirname(temp) == os.path.dirname(small["raw"])
    assert not os.path.exists(temp) and leftovers(bench["raw_dir"]) == []
    with open(small["raw"], encoding="utf-8") as handle:
        doc = json.load(handle)
    assert doc["jobs"][0]["jobname"] == "small_files"
    assert result["figures"][0]["total_ios"] == PROFILE["small_files"] and result["figures"][0]["iops"] > 0


@needs_root
def test_the_metadata_program_runs_in_the_module(bench):
    meta = item(bench, "disk", "metadata")
    result = run(bench, meta)
    assert result.get("failed") is not True, result
    assert result["run"]["program"] == "metadata"
    assert [figure["op"] for figure in result["figures"]] == ["create", "stat", "read", "delete"]
    with open(meta["raw"], encoding="utf-8") as handle:
        doc = json.load(handle)
    assert doc["dirs"] == 2 and doc["files"] == 10 * doc["passes"] and doc["passes"] >= 1
    # The tree is gone again.
    assert os.listdir(meta["argv"][0]) == []


def test_metadata_program_times_each_phase_and_cleans_up(tmp_path):
    doc = module_under_test.metadata_program(str(tmp_path), 2, 3, 100, 0)
    assert doc["passes"] == 1 and doc["files"] == 6 and doc["file_bytes"] == 100
    assert set(doc["seconds"]) == {"create", "stat", "read", "delete"}
    assert os.listdir(tmp_path) == []
    # A tree that cannot be made (a file in the way) is an error, and what was made is removed.
    (tmp_path / "d00001").write_text("in the way")
    with pytest.raises(OSError):
        module_under_test.metadata_program(str(tmp_path), 2, 3, 100, 0)
    assert os.listdir(tmp_path) == ["d00001"]


@needs_root
def test_a_failing_command_fails_with_host_probe_target_and_stderr_and_leaves_no_raw_file(bench):
    # A read without the write its plan runs first: dd finds no file.
    read = dict(item(bench, "disk", "read"), before=[])
    result = run(bench, read)
    assert result["failed"] is True
    assert result["msg"].startswith("Host testhost: the benchmark command of probe read on benchmark target %s (disk),"
                                    " round 0 exited with 1: " % read["path"])
    assert "No such file or directory" in result["msg"] and "Run the same command by hand" in result["msg"]
    assert not os.path.exists(read["raw"])
    # fio in a directory that is not there: its temporary output goes too.
    small = item(bench, "disk", "small_files")
    shutil.rmtree(os.path.join(small["path"], "rb"))
    result = run(bench, small)
    assert result["failed"] is True and "the benchmark command of probe small_files" in result["msg"]
    assert not os.path.exists(small["raw"]) and leftovers(bench["raw_dir"]) == []


@needs_root
def test_output_its_parser_cannot_read_fails_and_keeps_the_raw_file(bench):
    one = dict(item(bench, "disk", "read"), argv=["echo", "not dd"])
    result = run(bench, one)
    assert result["failed"] is True
    assert "the output of probe read on benchmark target" in result["msg"] and "is not what its parser reads" in result["msg"]
    with open(one["raw"], encoding="utf-8") as handle:
        assert handle.read() == "not dd\n"


def test_the_cpu_around_the_command_steal_share_and_load(bench):
    # No syncfs, so it runs without root; dd takes a moment, so CPU ticks pass.
    write = dict(item(bench, "disk", "write_fdatasync"), sync=[])
    result = run(bench, write)
    assert result.get("failed") is not True, result
    cpu = result["cpu"]
    assert set(cpu) == {"steal_share", "load1", "load1_after"}
    assert cpu["load1"] >= 0 and cpu["load1_after"] >= 0
    # Null only where no tick passed between the two readings.
    assert cpu["steal_share"] is None or 0 <= cpu["steal_share"] <= 1


def test_a_command_that_cannot_start(bench):
    one = dict(item(bench, "disk", "read"), argv=["/nonexistent/dd"], sync=[])
    result = run(bench, one)
    assert result["failed"] is True and "could not start its command /nonexistent/dd" in result["msg"]
    assert not os.path.exists(one["raw"])


def test_check_mode_says_what_it_would_run_and_runs_nothing(bench):
    write = item(bench, "disk", "write_fdatasync")
    result = run(bench, write, _ansible_check_mode=True)
    assert result.get("failed") is not True, result
    assert result["run"] == {"mkdir": [], "sync": write["sync"], "before": [], "warm": write["warm"], "program": None,
                             "argv": write["argv"], "chdir": None, "output": "text", "raw": write["raw"],
                             "remove": write["remove"]}
    assert result["figures"] == [] and result["counters"] == [] and result["seconds"] == 0
    assert result["cpu"] == {"steal_share": None, "load1": None, "load1_after": None}
    assert not os.path.exists(write["raw"])
    assert not os.path.exists(os.path.join(write["path"], "rb", "disk", "dd.bin"))


def test_an_item_not_from_the_plan_is_refused(bench):
    write = item(bench, "disk", "write_fdatasync")
    result = run(bench, dict((key, value) for key, value in write.items() if key not in ("raw", "argv")))
    assert result["failed"] is True
    assert result["msg"] == ("Host testhost: the benchmark item given to bench_probe has no raw, argv. Pass an item"
                             " exactly as bench_plan returned it.")
    result = run(bench, dict(write, probe="nosuch"))
    assert result["failed"] is True and "names probe 'nosuch', which the registry does not hold" in result["msg"]
    result = run(bench, dict(write, program="nosuch"))
    assert result["failed"] is True and "names the program 'nosuch', which bench_probe does not hold" in result["msg"]
    small = item(bench, "disk", "small_files")
    result = run(bench, dict(small, argv=[arg for arg in small["argv"] if not arg.startswith("--output=")]))
    assert result["failed"] is True and "does not write the item's raw file" in result["msg"]


def test_what_runs_before_the_clock_makes_its_directories_and_fails_naming_what(bench):
    write = item(bench, "disk", "write_fdatasync")
    folder = os.path.join(write["path"], "rb", "disk", "files-0")
    result = run(bench, dict(write, mkdir=[{"path": folder, "mode": "0711"}], before=[["false"]]))
    assert result["failed"] is True
    assert result["msg"].startswith("Host testhost: the command run before probe write_fdatasync on benchmark target"
                                    " %s (disk), round 0 exited with 1: no output." % write["path"])
    assert os.stat(folder).st_mode & 0o777 == 0o711 and not os.path.exists(write["raw"])
    result = run(bench, dict(write, warm=[str(bench["tmp"] / "missing.bin")]))
    assert result["failed"] is True and "could not read the file %s into the page cache before probe write_fdatasync" % (
        bench["tmp"] / "missing.bin") in result["msg"]
    # A link in the directory's place is refused, not followed: the directory it names keeps its mode.
    elsewhere = bench["tmp"] / "elsewhere"
    elsewhere.mkdir()
    os.chmod(elsewhere, 0o755)
    os.symlink(str(elsewhere), folder + "-link")
    result = run(bench, dict(write, mkdir=[{"path": folder + "-link", "mode": "0700"}]))
    assert result["failed"] is True and "could not make the directory %s-link" % folder in result["msg"]
    assert os.stat(elsewhere).st_mode & 0o777 == 0o755


@needs_root
def test_the_read_makes_its_file_first_and_every_item_removes_what_it_made(bench):
    read = item(bench, "disk", "read", 1)
    dd_file = read["remove"][0]
    result = run(bench, read)
    assert result.get("failed") is not True, result
    assert result["figures"][0]["io_bytes"] == MIB
    assert result["removed"] == [dd_file] and not os.path.exists(dd_file)
    # A path outside the item's target is never removed.
    outside = bench["tmp"] / "outside.txt"
    outside.write_text("keep")
    result = run(bench, dict(read, remove=[str(outside)]))
    assert result["failed"] is True and "outside its target" in result["msg"] and outside.read_text() == "keep"


@needs_root
def test_a_round_of_items_in_one_call_runs_them_in_order_as_one_by_one(bench):
    """items: the plan's dd items of round 1, both targets, in one call: each record is what a call per item returns
    (the parser's figures of its raw file, its counters' levels, what it removed), in the plan's order."""
    round_one = [one for one in _probes.rounds(bench["plan"]["items"])[1] if one["tool"] == "dd"]
    assert len(set(one["label"] for one in round_one)) == 2 and len(round_one) >= 4
    result = run_module_process(MODULE_NAME, bench["tmp"], {"items": round_one}, timeout=120)
    assert result.get("failed") is not True, result
    assert [record["item"] for record in result["records"]] == json.loads(json.dumps(round_one))
    for one, record in zip(round_one, result["records"]):
        with open(one["raw"], encoding="utf-8") as handle:
            text = handle.read()
        assert record["result"]["figures"] == json.loads(json.dumps(
            _probes.parse(one, text, {"seconds": record["result"]["seconds"]})))
        assert record["result"]["stack"] == _bench_counters.stack(one["path"])
        assert record["removed"] == [path for path in one.get("remove") or [] if path in record["removed"]]
        assert not any(os.path.exists(path) for path in one.get("remove") or [])
    assert leftovers(bench["raw_dir"]) == []


def test_a_round_is_checked_whole_before_its_first_item_runs_and_a_failure_names_its_place(bench):
    round_one = [one for one in _probes.rounds(bench["plan"]["items"])[1] if one["tool"] == "dd"]
    outside = bench["tmp"] / "outside.txt"
    outside.write_text("keep")
    bad = round_one[:2] + [dict(round_one[2], remove=[str(outside)])]
    result = run_module_process(MODULE_NAME, bench["tmp"], {"items": bad}, timeout=120)
    assert result["failed"] is True and "outside its target" in result["msg"] and outside.read_text() == "keep"
    assert not any(os.path.exists(one["raw"]) for one in bad), "nothing ran"
    failing = round_one[:2] + [dict(round_one[2], before=[["false"]])] + round_one[3:]
    result = run_module_process(MODULE_NAME, bench["tmp"], {"items": failing}, timeout=120)
    assert result["failed"] is True
    assert result["msg"].endswith("It was item 3 of the %d of this call: the 2 before it ran and kept their raw files,"
                                  " the rest did not run." % len(failing)), result["msg"]
    assert [os.path.exists(one["raw"]) for one in failing] == [True, True] + [False] * (len(failing) - 2)
    result = run_module_process(MODULE_NAME, bench["tmp"], {"items": round_one, "item": round_one[0]}, timeout=120)
    assert result["failed"] is True and "mutually exclusive" in result["msg"]


def test_rounds_cut_the_plan_in_its_order():
    items = [{"round": r, "n": n} for n, r in enumerate([0, 0, 1, 1, 1, 2, 3, 3])]
    assert _probes.rounds(items) == [items[0:2], items[2:5], items[5:6], items[6:8]]
    assert _probes.rounds([]) == []
