# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The registry of probes and the plan: each entry's command and parser, on real fio 3.33, GNU dd and metadata probe
output (tests/unit/fixtures/probes/, made by running the plan's own commands below on a tmpfs and an ext4 disk, the
paths then replaced by /srv/ram and /var/tmp), and the plan's errors."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from ansible_collections.ramdisk.provision.plugins.module_utils import _bench
from ansible_collections.ramdisk.provision.plugins.module_utils import _probes as probes

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(HERE))))
FIXTURES = os.path.join(ROOT, "tests", "unit", "fixtures", "probes")
MIB = 1024 * 1024

# The profile and targets the fixtures were made with.
PROFILE = {"runs": 5, "fio_runtime": 1, "small_files": 50, "meta_dirs": 2, "meta_files_per_dir": 20,
           "meta_file_bytes": 1024, "meta_seconds": 1, "pgbench_scale": 1, "pgbench_seconds": 3}
RAM = {"label": "ram", "path": "/srv/ram", "kind": "ram", "file_size_bytes": 8 * MIB, "direct_ok": False}
DISK = {"label": "disk", "path": "/var/tmp", "kind": "disk", "file_size_bytes": 8 * MIB, "direct_ok": True}
RAW = "/var/tmp/ramdisk-bench.fixture/raw"
RANDOM = "/var/tmp/ramdisk-bench.fixture/random.bin"


def fixture(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read()


def make_plan(targets=(RAM, DISK), profile=None, **kwargs):
    options = {"host": "h", "random_file": RANDOM, "raw_dir": RAW, "cores": 2, "dir_name": "rb"}
    options.update(kwargs)
    return probes.plan(list(targets), dict(PROFILE, **(profile or {})), **options)


def item(plan, label, probe, mode, round_number=0):
    found = [one for one in plan["items"] if (one["label"], one["probe"], one["mode"], one["round"])
             == (label, probe, mode, round_number)]
    assert len(found) == 1, (label, probe, mode, round_number)
    return found[0]


def fio_options(argv):
    """{option: value} of a fio argv, without the output options."""
    out = {}
    for arg in argv[1:]:
        key, _sep, value = arg[2:].partition("=")
        if key not in ("output-format", "output"):
            out[key] = value
    return out


# --- the registry ---------------------------------------------------------------------------------

def test_every_probe_has_a_policy_with_why_a_parser_and_judged_figures():
    assert len(set(probes.PROBE_IDS)) == len(probes.PROBES)
    for entry in probes.PROBES:
        assert entry["policy"] in probes.POLICY_WHY and entry["why"]
        assert callable(entry["command"]) and callable(entry["parse"])
        assert entry["figures"]
        for figure in entry["figures"]:
            assert set(figure) == {"op", "metric", "unit", "higher_is_better"}
        assert entry["group"] in probes.TESTS or entry["group"][5:] in probes.SEEDS


def test_one_comparison_per_job_randrw_is_judged_once():
    assert [figure["op"] for figure in probes.probe("randrw")["figures"]] == ["read"]


def test_fsync_is_judged_by_write_and_sync_pairs_not_by_the_sync_alone():
    assert probes.probe("fsync")["figures"] == [{"op": "write", "metric": "iops", "unit": "writes+fdatasync/s",
                                                 "higher_is_better": True}]


def _role_tasks():
    tasks = {}
    folder = os.path.join(ROOT, "roles", "benchmark", "tasks")
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), encoding="utf-8") as handle:
            tasks[name] = handle.read()
    return tasks


def _walk(tasks):
    for task in tasks or []:
        yield task
        for key in ("block", "rescue", "always"):
            yield from _walk(task.get(key))


def test_what_the_role_runs_is_what_the_registry_builds():
    """The role holds no program and no Jinja block: each command it measures is an item of bench_plan or bench_settle,
    run by bench_probe as it came; its fio jobs are the registry's."""
    tasks = _role_tasks()
    assert [name for name, text in tasks.items() if "{%" in text] == []
    with open(os.path.join(ROOT, "roles", "benchmark", "vars", "main.yml"), encoding="utf-8") as handle:
        role_vars = handle.read()
    assert "import " not in role_vars and "python3" not in role_vars and "{%" not in role_vars
    probes_run = []
    for name, text in tasks.items():
        assert "python3" not in text and "ansible.builtin.shell" not in text, name
        for task in _walk(yaml.safe_load(text)):
            if "ramdisk.provision.bench_probe" in task:
                probes_run.append((task["ramdisk.provision.bench_probe"], task["loop"]))
    # A round of items per call, as bench_plan and bench_settle cut them.
    assert sorted(probes_run, key=str) == [({"items": "{{ item }}"}, "{{ __benchmark_plan.probe_rounds }}"),
                                           ({"items": "{{ item }}"}, "{{ __benchmark_settle.probe_rounds }}")]
    with open(os.path.join(ROOT, "roles", "benchmark", "defaults", "main.yml"), encoding="utf-8") as handle:
        defaults = yaml.safe_load(handle)
    assert defaults["benchmark_fio_jobs"] == list(probes.FIO_JOBS)


@pytest.mark.parametrize("runtime, expected", [
    (1, [("runtime", 1), ("ramp_time", 1)]),
    (3, [("runtime", 3), ("ramp_time", 1)]),
    (10, [("runtime", 10), ("ramp_time", 3), ("ss", "iops_slope:1%"), ("ss_dur", 5)]),
    (30, [("runtime", 30), ("ramp_time", 5), ("ss", "iops_slope:1%"), ("ss_dur", 15)]),
])
def test_fio_steady_state_options(runtime, expected):
    assert probes.fio_steady_options(runtime) == expected


# --- commands, and the fixtures they made ---------------------------------------------------------

def test_the_fio_commands_are_the_ones_the_fixtures_ran():
    plan = make_plan()
    for label, probe, mode in (("disk", "seq_write", "direct"), ("disk", "seq_read", "direct"),
                               ("ram", "seq_read", "buffered"), ("disk", "randrw", "direct"),
                               ("disk", "fsync", "sync"), ("disk", "small_files", "sync")):
        one = item(plan, label, probe, mode)
        name = "%s-%s-%s-0.out" % (probe, label, mode)
        assert one["raw"] == RAW + "/" + name
        assert one["argv"][:3] == ["fio", "--output-format=json+", "--output=" + one["raw"]]
        doc = json.loads(fixture(name))
        ran = dict(doc["global options"], **doc["jobs"][0]["job options"])
        assert fio_options(one["argv"]) == ran, name


def test_seq_write_command_on_the_disk():
    one = item(make_plan(), "disk", "seq_write", "direct")
    assert one["argv"] == [
        "fio", "--output-format=json+", "--output=%s/seq_write-disk-direct-0.out" % RAW, "--directory=/var/tmp/rb/disk",
        "--runtime=1", "--ramp_time=1", "--time_based=1", "--unlink=1", "--group_reporting=1", "--invalidate=1",
        "--name=seq_write", "--rw=write", "--bs=1M", "--ioengine=psync", "--numjobs=2", "--size=4194304",
        "--direct=1"]
    assert one["policy"] == probes.DIRECT and one["output"] == "file"


def test_dd_commands():
    plan = make_plan()
    dd_file = "/var/tmp/rb/disk/dd.bin"
    write = item(plan, "disk", "write_fdatasync", "sync")
    assert write["argv"] == ["dd", "if=" + RANDOM, "of=" + dd_file, "bs=1M", "count=8", "conv=fdatasync"]
    assert write["warm"] == [RANDOM]
    assert item(plan, "disk", "write_dsync", "sync")["argv"][-1] == "oflag=dsync"
    assert write["remove"] == [dd_file]
    # A read makes its own file out of the clock (a round of the settle step may rerun the read alone) and removes
    # it after: a target holds one test file at a time.
    made = ["dd", "if=" + RANDOM, "of=" + dd_file, "bs=1M", "count=8", "conv=fdatasync", "status=none"]
    direct = item(plan, "disk", "read", "direct")
    assert direct["argv"] == ["dd", "if=" + dd_file, "of=/dev/null", "bs=1M", "iflag=direct"]
    assert direct["before"] == [made] and direct["remove"] == [dd_file]
    buffered = item(plan, "disk", "read", "buffered")
    assert buffered["argv"] == ["dd", "if=" + dd_file, "of=/dev/null", "bs=1M"]
    assert buffered["before"] == [made, ["dd", "if=" + dd_file, "iflag=nocache", "count=0", "status=none"]]


def test_every_item_removes_what_it_leaves_so_a_rerun_item_stands_alone():
    plan = make_plan(tests=("dd", "fio", "metadata", "compile"), compile_command=["make"], compile_user="nobody",
                     compile_source="/usr/src/tree")
    for one in plan["items"]:
        # fio removes its own files (unlink=1), the metadata program its tree; every other file an item makes goes.
        made = [argv[2][3:] for argv in one["before"] if argv[:1] == ["dd"] and argv[2].startswith("of=")]
        made += [part[3:] for part in one.get("argv", []) if part.startswith("of=") and part != "of=/dev/null"]
        assert set(made) <= set(one["remove"]), one["probe"]


def test_the_host_steps_make_the_directories_and_the_random_data_and_run_pgbench_on_a_private_cluster():
    plan = make_plan(tests=("dd", "pgbench"), pg_bin="/usr/lib/postgresql/15/bin")
    assert plan["dirs"][:3] == [{"path": RAW, "mode": "0700"}, {"path": "/srv/ram/rb/ram", "mode": "0700"},
                                {"path": "/var/tmp/rb/disk", "mode": "0700"}]
    assert plan["setup"][0] == ["dd", "if=/dev/urandom", "of=" + RANDOM, "bs=1M", "count=8", "iflag=fullblock",
                                "status=none"]
    assert {"path": "/srv/ram/rb/ram/pgbench", "mode": "0700", "owner": "postgres"} in plan["dirs"]
    initdb, start, fill = plan["setup"][1:4]
    assert initdb[:5] == ["runuser", "-u", "postgres", "--", "/usr/lib/postgresql/15/bin/initdb"]
    assert start[-3:] == ["-o", "-k /srv/ram/rb/ram/pgbench -p 5433 -c listen_addresses=", "start"]
    # 8 MiB of test size holds no 16 MB unit of scale: scale 1.
    assert fill[4:9] == ["/usr/lib/postgresql/15/bin/pgbench", "-i", "-q", "-s", "1"]
    assert plan["teardown"] == [["runuser", "-u", "postgres", "--", "/usr/lib/postgresql/15/bin/pg_ctl", "-D",
                                 path + "/pgbench/data", "-m", "fast", "-w", "stop"]
                                for path in ("/srv/ram/rb/ram", "/var/tmp/rb/disk")]
    # Without dd, 1 MiB of random data.
    assert make_plan(tests=("fio",))["setup"][0][4] == "count=1"


def test_small_files_is_one_process():
    one = item(make_plan(), "ram", "small_files", "sync")
    assert one["argv"][0] == "fio" and "--nrfiles=50" in one["argv"] and "--sync=dsync" in one["argv"]
    assert "--create_on_open=1" in one["argv"]


def test_metadata_command_keeps_the_tree_within_the_size():
    one = item(make_plan(), "disk", "metadata", "cached")
    assert (one["program"], one["argv"]) == ("metadata", ["/var/tmp/rb/disk", "2", "20", "1024", "1"])
    small = item(make_plan(targets=(dict(RAM, file_size_bytes=MIB), DISK)), "disk", "metadata", "cached")
    assert small["argv"][2] == "20"
    tiny = item(make_plan(profile={"meta_dirs": 1000}), "disk", "metadata", "cached")
    # 8 MiB in 4 KiB blocks over 1,000 directories: 2 files each.
    assert tiny["argv"][1:3] == ["1000", "2"]


def test_pgbench_and_compile_commands():
    plan = make_plan(tests=("pgbench", "compile"), pg_bin="/usr/lib/postgresql/15/bin",
                     compile_command=["make", "-j{cores}"], compile_user="nobody", compile_source="/usr/src/tree")
    tpcb = item(plan, "ram", "tpcb_like", "sync")
    assert tpcb["argv"] == ["runuser", "-u", "postgres", "--", "/usr/lib/postgresql/15/bin/pgbench", "-c", "2", "-j",
                            "2", "-T", "3", "-h", "/srv/ram/rb/ram/pgbench", "-p", "5433", "-U", "postgres",
                            "postgres"]
    assert "-S" in item(plan, "ram", "select_only", "cached")["argv"]
    build = item(plan, "disk", "build", "cached", 2)
    assert build["argv"] == ["runuser", "-u", "nobody", "--", "make", "-j2"]
    assert build["chdir"] == "/var/tmp/rb/disk/compile/round-2"
    assert build["before"] == [["runuser", "-u", "nobody", "--", "cp", "-R", "--preserve=mode,timestamps",
                                "/usr/src/tree", "/var/tmp/rb/disk/compile/round-2"]]
    assert build["remove"] == ["/var/tmp/rb/disk/compile/round-2"]
    assert build["mkdir"] == [{"path": "/var/tmp/rb", "mode": "0711"}, {"path": "/var/tmp/rb/disk", "mode": "0711"},
                              {"path": "/var/tmp/rb/disk/compile", "mode": "0700", "owner": "nobody"}]


# --- parsers --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, probe, mode, op, metric", [
    ("seq_write-disk-direct-0.out", "seq_write", "direct", "write", "bw_bytes"),
    ("seq_read-disk-direct-0.out", "seq_read", "direct", "read", "bw_bytes"),
    ("seq_read-ram-buffered-0.out", "seq_read", "buffered", "read", "bw_bytes"),
    ("randrw-disk-direct-0.out", "randrw", "direct", "read", "iops"),
    ("fsync-disk-sync-0.out", "fsync", "sync", "write", "iops"),
    ("small_files-disk-sync-0.out", "small_files", "sync", "write", "iops"),
    ("dd-write_fdatasync-disk-sync.txt", "write_fdatasync", "sync", "write", "bw_bytes"),
    ("dd-write_dsync-disk-sync.txt", "write_dsync", "sync", "write", "bw_bytes"),
    ("dd-read-disk-direct.txt", "read", "direct", "read", "bw_bytes"),
    ("dd-read-disk-buffered.txt", "read", "buffered", "read", "bw_bytes"),
    ("metadata-disk.json", "metadata", "cached", "stat", "iops"),
    ("metadata-ram.json", "metadata", "cached", "create", "iops"),
])
def test_each_parser_gives_its_judged_figure(name, probe, mode, op, metric):
    one = {"probe": probe, "label": "disk", "mode": mode, "round": 0, "warmup": True}
    figures = probes.parse(one, fixture(name))
    judged = [figure for figure in figures if figure["op"] == op]
    assert len(judged) == 1
    assert judged[0][metric] > 0
    assert (judged[0]["label"], judged[0]["mode"], judged[0]["warmup"]) == ("disk", mode, True)
    assert (op, metric) in [(entry["op"], entry["metric"]) for entry in probes.probe(probe)["figures"]]


def test_small_files_figure_is_files_per_second():
    figures = probes.parse({"probe": "small_files", "label": "disk", "mode": "sync", "round": 1, "warmup": False},
                           fixture("small_files-disk-sync-0.out"))
    assert figures[0]["total_ios"] == 50


def test_pgbench_and_compile_parsers():
    base = {"label": "ram", "mode": "sync", "round": 1, "warmup": False}
    with open(os.path.join(ROOT, "tests", "unit", "fixtures", "pgbench", "tpcb_like.txt"), encoding="utf-8") as handle:
        assert probes.parse(dict(base, probe="tpcb_like"), handle.read())[0]["iops"] > 0
    assert probes.parse(dict(base, probe="build"), '{"seconds": 4.0, "rc": 0}')[0]["iops"] == 0.25
    with pytest.raises(ValueError, match="exited"):
        probes.parse(dict(base, probe="build"), '{"seconds": 4.0, "rc": 2}')


def test_a_parser_refuses_output_that_is_not_its_own():
    with pytest.raises(ValueError):
        probes.parse({"probe": "read", "label": "x", "mode": "direct", "round": 1, "warmup": False}, "dd: oops\n")


# --- the plan -------------------------------------------------------------------------------------

def same_job(one):
    """A fio argv without what names the target: its output and directory."""
    return [arg for arg in one["argv"] if not arg.startswith(("--output=", "--directory="))]


def test_like_against_like_when_ram_refuses_o_direct():
    plan = make_plan()
    modes = sorted(set((one["label"], one["probe"], one["mode"]) for one in plan["items"] if one["probe"] == "seq_read"))
    assert modes == [("disk", "seq_read", "buffered"), ("disk", "seq_read", "direct"), ("ram", "seq_read", "buffered")]
    # The buffered pair runs the same options on both sides.
    ram, disk = item(plan, "ram", "seq_read", "buffered"), item(plan, "disk", "seq_read", "buffered")
    assert same_job(ram) == same_job(disk)
    assert ("seq_read", "buffered") in probes.comparisons(plan["items"])
    assert ("seq_read", "direct") not in probes.comparisons(plan["items"])


def test_all_direct_when_every_target_takes_it():
    plan = make_plan(targets=(dict(RAM, direct_ok=True), DISK))
    modes = set((one["probe"], one["mode"]) for one in plan["items"] if one["probe"] in ("seq_write", "read"))
    assert modes == {("seq_write", "direct"), ("read", "direct")}


def test_one_size_for_every_target():
    plan = make_plan(targets=(dict(RAM, file_size_bytes=4 * MIB + 12345), dict(DISK, file_size_bytes=64 * MIB)))
    assert plan["size_bytes"] == 4 * MIB
    assert "--size=2097152" in item(plan, "disk", "seq_write", "direct")["argv"]


def test_rounds_warm_up_first_and_targets_take_turns():
    plan = make_plan(tests=("dd",))
    rounds = sorted(set(one["round"] for one in plan["items"]))
    assert rounds == [0, 1, 2, 3, 4, 5]
    # write_fdatasync, write_dsync, read buffered and small_files on both; read direct on the disk too.
    assert [one["warmup"] for one in plan["items"] if one["round"] == 0] == [True] * 9
    order = [(one["round"], one["label"]) for one in plan["items"]]
    assert order == sorted(order, key=lambda pair: (pair[0], pair[1] != "ram"))


def test_the_profiles_runs_are_raised_to_five_an_explicit_lower_count_is_an_error():
    assert max(one["round"] for one in make_plan(profile={"runs": 3})["items"]) == 5
    assert max(one["round"] for one in make_plan(runs=7)["items"]) == 7
    plan = make_plan(runs=3)
    assert plan["items"] == []
    assert plan["errors"][0].startswith("Host h: benchmark_runs is 3:")
    assert "Set 5 or more, or 0 for the profile's." in plan["errors"][0]


def test_a_disk_row_says_when_the_host_could_cache_its_working_set():
    plan = make_plan(mem_total=1024 * MIB)
    assert "under twice the host's memory" in item(plan, "disk", "seq_read", "buffered")["note"]
    assert item(plan, "disk", "seq_read", "direct")["note"] == ""
    assert item(plan, "ram", "seq_read", "buffered")["note"] == ""
    assert item(make_plan(mem_total=2 * MIB), "disk", "seq_read", "buffered")["note"] == ""


def test_every_error_at_once_and_no_items():
    targets = [dict(DISK, label="disk"), dict(DISK, label="disk", path="/srv/other"),
               {"label": "bad label", "path": "/x", "kind": "ram", "file_size_bytes": 1000}]
    plan = probes.plan(targets, dict(PROFILE, fio_runtime=0), host="h", tests=("fio", "dd", "pgbench", "ffio"),
                       fio_jobs=("seq_write", "seqwrite"), mem_available="2 GiB")
    assert plan["items"] == []
    errors = plan["errors"]
    expected = [
        "Host h: benchmark_targets label 'bad label' of /x is not a plain name",
        "Host h: no room to benchmark benchmark target /x (bad label): a test file needs at least 1 MiB",
        "Host h: benchmark target /x (bad label) was not asked whether it takes O_DIRECT",
        "Host h: benchmark target label 'disk' is used more than once.",
        "Host h: the profile's fio_runtime is 0; test fio needs a whole number of at least 1.",
        "Host h: benchmark_tests holds 'ffio', which is no test. Use dd, fio, metadata, pgbench, compile.",
        "Host h: benchmark_fio_jobs holds 'seqwrite', which is no fio job.",
        "Host h: benchmark_tests asks for pgbench, but no PostgreSQL",
    ]
    for start in expected:
        assert any(error.startswith(start) for error in errors), (start, errors)
    assert len(errors) == len(expected)


def test_no_ram_target_is_an_error():
    errors = make_plan(targets=(DISK,))["errors"]
    assert errors == ["Host h: no RAM-backed path to benchmark: benchmark_targets names none and none was found."
                      " Mount one first (role ramdisk.provision.tmpfs) or list it in benchmark_targets."]


def test_compile_needs_a_command_list_and_a_user():
    errors = make_plan(tests=("compile",), compile_command="make -j4", compile_user="nobody")["errors"]
    assert errors and errors[0].startswith('Host h: benchmark_compile_command is "make -j4"')


# --- the settle step ------------------------------------------------------------------------------

def figures_of(plan, values):
    """Figures for every dd write_fdatasync item of PLAN: VALUES[label] is the list of bw_bytes by round (1 on)."""
    out = []
    for one in plan["items"]:
        if one["probe"] != "write_fdatasync":
            continue
        value = 1.0 if one["warmup"] else values[one["label"]][one["round"] - 1]
        out.append({"probe": one["probe"], "mode": one["mode"], "label": one["label"], "op": "write",
                    "bw_bytes": value, "warmup": one["warmup"]})
    return out


def test_settle_adds_a_round_to_both_sides_where_one_is_unsteady_and_stops_at_the_cap():
    options = {"host": "h", "random_file": RANDOM, "raw_dir": RAW, "cores": 2, "dir_name": "rb", "tests": ("dd",)}
    plan = probes.plan([RAM, DISK], PROFILE, **options)
    items = [one for one in plan["items"] if one["probe"] == "write_fdatasync"]
    steady = [100.0, 101.0, 99.0, 100.0, 100.0]
    noisy = [100.0, 130.0, 70.0, 120.0, 80.0]
    out = probes.settle(items, figures_of({"items": items}, {"ram": steady, "disk": noisy}), [RAM, DISK], PROFILE,
                        **options)
    assert [(one["label"], one["probe"], one["round"]) for one in out["items"]] == [
        ("ram", "write_fdatasync", 6), ("disk", "write_fdatasync", 6)]
    assert out["items"][0]["raw"] == RAW + "/write_fdatasync-ram-sync-6.out"
    by_label = dict((rule["label"], rule) for rule in out["status"])
    assert by_label["ram"]["reason"] == "steady" and by_label["disk"]["reason"] == "needs-runs"
    # Both steady: nothing more.
    done = probes.settle(items, figures_of({"items": items}, {"ram": steady, "disk": steady}), [RAM, DISK], PROFILE,
                         **options)
    assert done["items"] == [] and {rule["reason"] for rule in done["status"]} == {"steady"}
    # At 15 runs the cap ends it, and the status says so.
    plan = probes.plan([RAM, DISK], PROFILE, runs=15, **options)
    items = [one for one in plan["items"] if one["probe"] == "write_fdatasync"]
    capped = probes.settle(items, figures_of({"items": items}, {"ram": steady * 3, "disk": noisy * 3}), [RAM, DISK],
                           PROFILE, runs=15, **options)
    assert capped["items"] == []
    assert [rule["reason"] for rule in capped["status"] if rule["label"] == "disk"] == ["cap"]


def test_settle_runs_the_first_five_when_fewer_were_measured():
    options = {"host": "h", "random_file": RANDOM, "raw_dir": RAW, "cores": 2, "dir_name": "rb", "tests": ("dd",)}
    items = [one for one in probes.plan([RAM, DISK], PROFILE, **options)["items"]
             if one["probe"] == "write_fdatasync" and one["round"] <= 2]
    out = probes.settle(items, figures_of({"items": items}, {"ram": [1.0, 1.0], "disk": [1.0, 1.0]}), [RAM, DISK],
                        PROFILE, **options)
    assert [(one["label"], one["round"]) for one in out["items"]] == [
        ("ram", 3), ("disk", 3), ("ram", 4), ("disk", 4), ("ram", 5), ("disk", 5)]


def test_judge_one_comparison_per_job_and_a_cache_row_is_not_counted():
    options = {"host": "h", "random_file": RANDOM, "raw_dir": RAW, "cores": 2, "dir_name": "rb", "tests": ("fio",)}
    items = probes.plan([RAM, DISK], PROFILE, **options)["items"]
    figures = []
    for one in items:
        if one["probe"] != "randrw":
            continue
        value = 50000.0 if one["kind"] == "ram" else 5000.0
        for op in ("read", "write"):
            figures.append({"probe": "randrw", "mode": one["mode"], "label": one["label"], "op": op,
                            "iops": value + one["round"], "warmup": one["warmup"]})
    rows = probes.judge(items, figures)
    # randrw's reads only, and only the buffered pair: the direct disk item has no RAM side.
    assert [(row["probe"], row["mode"], row["op"]) for row in rows] == [("randrw", "buffered", "read")]
    row = rows[0]
    assert row["comparison"]["verdict"] == "ahead" and row["counted"]
    assert row["ram_figure"]["n"] == 5 and row["ram_figure"]["coverage"] == pytest.approx(0.9375)
    cached = probes.judge(items, figures, {("disk", "randrw", "buffered"): "cache"})[0]
    assert not cached["counted"] and "cache" in cached["why"]


# --- the seeds ------------------------------------------------------------------------------------

SEED_PROFILE = dict(PROFILE, small_files=2000, fio_runtime=30, bonnie_files=50, bonnie_max_bytes=250000,
                    bonnie_dirs=1000, pg_seconds=5, dd_repeats=100)
SEED_TOOLS = {"bonnie": "/usr/sbin/bonnie++", "pg_test_fsync": "/usr/lib/postgresql/15/bin/pg_test_fsync",
              "user": "nobody"}


def seed_plan(**kwargs):
    options = {"tests": (), "seeds": probes.SEEDS, "seed_tools": SEED_TOOLS}
    options.update(kwargs)
    return make_plan(profile=SEED_PROFILE, **options)


def test_seed_scale_fits_bonnie_and_the_small_files_into_the_size():
    # 8 GiB in files of 125,000 bytes on average: 67 thousand-files would fit, so the write-up's 50.
    large = probes.seed_scale(8 * 1024 * MIB, SEED_PROFILE, 5)
    assert (large["bonnie_files"], large["bonnie_max_bytes"]) == (50, 250000)
    assert large["files"] == 2000 and large["dd_count"] == 1024
    # 8 MiB: not even a thousand such files; one thousand files of at most 16 KiB.
    scale = probes.seed_scale(8 * MIB, SEED_PROFILE, 5)
    assert (scale["bonnie_files"], scale["bonnie_max_bytes"]) == (1, 16384)
    assert scale["files"] == 8 * MIB // 4096 // 5
    assert scale["fio_job_bytes"] == 2 * MIB and scale["dd_count"] == 128


def test_seed_commands_are_the_write_ups():
    plan = seed_plan()
    assert plan["errors"] == [] and plan["skipped"] == {}
    dd_file = "/var/tmp/rb/disk/block.bin"
    block = "bs=%d" % (8 * MIB)
    got = dict((one["probe"], one) for one in plan["items"] if one["label"] == "disk" and one["round"] == 1)
    assert got["seed_block_write"]["argv"] == ["dd", "if=" + RANDOM, "of=" + dd_file, block, "count=1",
                                               "iflag=fullblock"]
    assert got["seed_block_write_dsync"]["argv"][-1] == "oflag=dsync"
    assert got["seed_block_read"]["argv"] == ["dd", "if=" + dd_file, "of=/dev/null", block]
    assert got["seed_block_read"]["before"] == [got["seed_block_write"]["argv"] + ["status=none"]]
    assert got["seed_64k_read"]["before"][0][:3] == ["dd", "if=" + RANDOM, "of=/var/tmp/rb/disk/dd64k.bin"]
    assert all(one["remove"] for one in got.values() if one["probe"] != "dbtest")
    files = got["seed_files_dsync"]
    assert files["argv"][:4] == ["xargs", "-I", "{}", "dd"] and "of=/var/tmp/rb/disk/files-1/f{}" in files["argv"]
    assert files["stdin"].split("\n")[-1] == str(8 * MIB // 4096 // 5 - 1)
    assert files["mkdir"] == [{"path": "/var/tmp/rb/disk/files-1", "mode": "0700"}]
    assert got["bonnie"]["argv"] == ["/usr/sbin/bonnie++", "-f", "-s", "0", "-n", "1:16384:0:1000", "-d",
                                     "/var/tmp/rb/disk/bonnie", "-u", "nobody"]
    assert got["dbtest"]["argv"][-10:] == ["--ioengine=libaio", "--rw=randrw", "--bs=4k", "--iodepth=64",
                                           "--numjobs=4", "--time_based=1", "--group_reporting=1", "--runtime=30",
                                           "--size=2097152", "--unlink=1"]
    assert got["pg_test_fsync"]["argv"] == ["/usr/lib/postgresql/15/bin/pg_test_fsync", "-f",
                                            "/var/tmp/rb/disk/pg_test_fsync.out", "-s", "5"]
    assert got["seed_64k_write"]["argv"][-3:] == ["bs=64k", "count=128", "conv=fdatasync"]
    assert got["seed_64k_read"]["stdin"].count("\n") == 99
    assert {one["policy"] for one in plan["items"]} == {probes.PUBLISHED}


def test_a_seed_without_its_tool_is_skipped_with_why_and_an_unknown_seed_is_an_error():
    plan = seed_plan(seed_tools={"user": ""})
    assert sorted(plan["skipped"]) == ["bonnie", "pg_test_fsync"]
    assert plan["skipped"]["bonnie"].startswith("bonnie++ is not installed on this host")
    assert {one["probe"] for one in plan["items"]} & {"bonnie", "pg_test_fsync"} == set()
    assert seed_plan(seed_tools={"bonnie": "/usr/sbin/bonnie++"})["skipped"]["bonnie"].startswith(
        "benchmark_seed_user does not exist")
    errors = seed_plan(seeds=("tmp_dd", "bonnnie"))["errors"]
    assert errors == ["Host h: benchmark_seeds holds 'bonnnie', which is no seed. Use tmp_dd, bonnie, fio_dbtest,"
                      " pg_test_fsync, dd_64k."]


@pytest.mark.parametrize("section, probe, op, metric", [
    ("ram files 1", "bonnie", "create_seq", "lat_ns_max"),
    ("disk files 1", "bonnie", "delete_seq", "iops"),
    ("ram pg_test_fsync 1", "pg_test_fsync", "fdatasync", "iops"),
    ("ram seed_64k_write 1", "seed_64k_write", "write", "bw_bytes"),
    ("ram seed_64k_read 1", "seed_64k_read", "read", "bw_bytes"),
    ("ram seed_block_write 1", "seed_block_write", "write", "bw_bytes"),
    ("ram seed_block_read 1", "seed_block_read", "read", "bw_bytes"),
])
def test_seed_parsers_on_the_lab_run(section, probe, op, metric):
    with open(os.path.join(ROOT, "tests", "unit", "fixtures", "run-seeds", "lab-debian12", "seeds.txt"),
              encoding="utf-8") as handle:
        text = _bench.dd_sections(handle.read())[section]
    one = dict(item(seed_plan(), section.split()[0], probe, probes.PUBLISHED, 1), warmup=False)
    figures = [figure for figure in probes.parse(one, text) if figure["op"] == op]
    assert figures and figures[0][metric] > 0


def test_seed_files_are_counted_per_second_of_the_whole_loop():
    one = item(seed_plan(), "ram", "seed_files_dsync", probes.PUBLISHED, 1)
    figure = probes.parse(one, "", {"seconds": 2.0})[0]
    assert figure["iops"] == pytest.approx((8 * MIB // 4096 // 5) / 2.0)


def test_dbtest_parser_adds_the_read_and_write_total():
    with open(os.path.join(ROOT, "tests", "unit", "fixtures", "run-seeds", "lab-debian12", "seed-fio-dbtest-ram-1.json"),
              encoding="utf-8") as handle:
        text = handle.read()
    one = item(seed_plan(), "ram", "dbtest", probes.PUBLISHED, 1)
    ops = [figure["op"] for figure in probes.parse(one, text)]
    assert ops == ["read", "write", "readwrite"]


def test_fio_steady_state_is_carried_when_fio_checked_it():
    base = {"probe": "seq_read", "label": "disk", "mode": "direct", "round": 1, "warmup": False}
    text = fixture("seq_read-disk-direct-0.out")
    assert probes.parse(base, text)[0]["steady_attained"] is None
    doc = json.loads(text)
    doc["jobs"][0]["steadystate"] = {"ss": "iops_slope", "attained": 0, "criterion": "-4.68%"}
    assert probes.parse(base, json.dumps(doc))[0]["steady_attained"] is False
    doc["jobs"][0]["steadystate"]["attained"] = 1
    assert probes.parse(base, json.dumps(doc))[0]["steady_attained"] is True


def test_each_item_says_what_its_raw_file_holds_and_what_to_write_out_first():
    plan = make_plan(tests=("dd", "fio", "metadata", "compile"), compile_command=["make"], compile_user="nobody",
                     compile_source="/usr/src/tree")
    outputs = dict((one["probe"], one["output"]) for one in plan["items"])
    assert outputs["seq_write"] == outputs["small_files"] == probes.FILE_OUTPUT
    assert outputs["read"] == outputs["metadata"] == probes.TEXT_OUTPUT
    assert outputs["build"] == probes.RUN_RECORD
    assert all(one["sync"] == ["/srv/ram", "/var/tmp", RAW] for one in plan["items"])
    assert all(one["sync"] == ["/srv/ram", "/var/tmp"] for one in make_plan(raw_dir="")["items"])


def test_issued_is_the_judged_figures_bytes_read_or_written():
    base = {"label": "disk", "mode": "sync", "round": 1, "warmup": False}
    write = dict(base, probe="write_fdatasync")
    assert probes.issued(write, probes.parse(write, fixture("dd-write_fdatasync-disk-sync.txt"))) == ("write", 8 * MIB)
    read = dict(base, probe="read", mode="direct")
    assert probes.issued(read, probes.parse(read, fixture("dd-read-disk-direct.txt")))[0] == "read"
    meta = dict(base, probe="metadata", mode="cached")
    doc = json.loads(fixture("metadata-disk.json"))
    assert probes.issued(meta, probes.parse(meta, fixture("metadata-disk.json"))) == ("write", doc["files"] * 1024)
    tpcb = dict(base, probe="tpcb_like")
    assert probes.issued(tpcb, [{"op": "transaction", "io_bytes": None}]) == ("write", None)


def test_the_build_leaves_out_a_target_that_lets_no_other_user_in_and_says_why():
    closed = dict(RAM, others_enter=False)
    plan = make_plan(targets=(closed, DISK), tests=("compile",), compile_command=["make"], compile_user="nobody",
                     compile_source="/usr/src/tree")
    assert {one["label"] for one in plan["items"]} == {"disk"}
    assert plan["target_skips"] == [{"label": "ram", "test": "compile", "why": "the target directory /srv/ram lets no"
                                     " other user in, and the build runs as nobody."}]
    assert make_plan(targets=(closed, DISK))["target_skips"] == []


def test_settle_counts_rounds_not_figures_a_test_too_quick_to_time_runs_no_more():
    """bonnie++ on tmpfs may print no figure for a test (+++++): five rounds with two figures are not a reason to run
    more, and the cap is on rounds run (the settle step looped on such a figure before)."""
    options = {"host": "h", "random_file": RANDOM, "raw_dir": RAW, "cores": 2, "dir_name": "rb", "tests": ("dd",)}
    plan = probes.plan([RAM, DISK], PROFILE, **options)
    items = [one for one in plan["items"] if one["probe"] == "write_fdatasync"]
    figures = figures_of({"items": items}, {"ram": [1.0] * 5, "disk": [1.0, 1.0, None, None, None]})
    out = probes.settle(items, figures, [RAM, DISK], PROFILE, **options)
    assert out["items"] == []
    disk = [rule for rule in out["status"] if rule["label"] == "disk"][0]
    assert (disk["reason"], disk["rounds"], disk["n"]) == ("few-figures", 5, 2)
    # Noisy, and already at the cap in rounds: no more, whatever the figures say.
    noisy = figures_of({"items": items}, {"ram": [1.0] * 5, "disk": [1.0, 2.0, 1.0, 2.0, 1.0]})
    capped = probes.settle(items, noisy, [RAM, DISK], PROFILE, max_runs=5, **options)
    assert capped["items"] == [] and [rule["reason"] for rule in capped["status"] if rule["label"] == "disk"] == ["cap"]


def test_a_seed_figure_keeps_its_own_test_one_figure_per_test_and_op_a_round():
    """pg_test_fsync prints the same methods for one 8 KiB write and for two: each figure keeps the test its parser
    named, so a round gives one figure per test and operation (the lab's seeds run counted 10 runs of 5 before)."""
    with open(os.path.join(ROOT, "tests", "unit", "fixtures", "run-seeds", "lab-debian12", "seeds.txt"),
              encoding="utf-8") as handle:
        section = _bench.dd_sections(handle.read())["ram pg_test_fsync 1"]
    item = {"probe": "pg_test_fsync", "label": "ram", "mode": "published", "round": 1, "warmup": False,
            "seed_entry": {"kind": "pg_test_fsync"}}
    figures = probes.parse(item, section, {"seconds": 1})
    keys = [(figure["test"], figure["op"]) for figure in figures]
    assert len(keys) == len(set(keys)) and ("one_8k_write", "fdatasync") in keys
    assert {figure["probe"] for figure in figures} == {"pg_test_fsync"}
