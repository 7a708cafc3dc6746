# SPDX-License-Identifier: GPL-3.0-or-later
"""scripts/bench/fio_vs_role.py without root, fio or a mount: the role's rounds read from a schema 3 manifest, the
direct argv from the registry, and the variables it gives the role."""

from __future__ import annotations

import os
import subprocess

import pytest
import yaml

import bench_schema3
from bench_role_vars import assert_the_role_takes
from conftest import load_script


@pytest.fixture(scope="module")
def fio_vs_role():
    return load_script("scripts/bench/fio_vs_role.py", "bench_fio_vs_role")


def role_run(directory, run_id="turn0", host="localhost"):
    """The role's run of the fio test alone on one tmpfs, as bench_schema3 makes it (with the profile and the cores
    the manifest records), in <dir>/results/<run_id>/<host>/."""
    doc, files = bench_schema3.manifest(targets=(bench_schema3.RAM,), tests=("fio",), host=host)
    doc["profile_spec"] = dict(bench_schema3.PROFILE)
    return doc, bench_schema3.write_run(os.path.join(str(directory), "results", run_id), doc, files)


def test_the_role_rounds_are_the_manifests_measured_probes(fio_vs_role, tmp_path):
    doc, host_dir = role_run(tmp_path)
    rounds = fio_vs_role.role_rounds(fio_vs_role.load_bench(), doc, host_dir, "randrw")
    assert [item["round"] for item, _doc in rounds] == [1, 2, 3, 4, 5]
    assert all(item["probe"] == "randrw" and not item["warmup"] for item, _doc in rounds)
    assert all(fio_doc["jobs"][0]["jobname"] == "randrw" for _item, fio_doc in rounds)


def test_a_role_run_short_of_rounds_is_refused(fio_vs_role, tmp_path):
    doc, host_dir = role_run(tmp_path)
    doc["probes"] = [probe for probe in doc["probes"] if probe["item"]["round"] != 3]
    with pytest.raises(SystemExit, match="in rounds \\[1, 2, 4, 5\\], not 1 to 5"):
        fio_vs_role.role_rounds(fio_vs_role.load_bench(), doc, host_dir, "randrw")


@pytest.mark.parametrize("job", ["seq_write", "seq_read", "randrw", "fsync"])
def test_the_direct_argv_is_the_roles_but_where_it_writes(fio_vs_role, tmp_path, job):
    # The registry plans the same job for the manifest's target, profile and cores: every argument but the output
    # file and the test directory is the role's, round by round, the warm-up first.
    doc, _host_dir = role_run(tmp_path)
    probes = fio_vs_role.load_probes()
    items, directories = fio_vs_role.direct_items(probes, doc, job, "/mnt/scratch", "/tmp/direct-raw")
    role = [probe["item"] for probe in doc["probes"] if probe["item"]["probe"] == job]
    assert [(item["round"], item["warmup"]) for item in items] == [(0, True)] + [(n, False) for n in range(1, 6)]

    def where_it_writes(argv):
        return [part for part in argv if not part.startswith(("--output=", "--directory="))]

    assert [where_it_writes(item["argv"]) for item in items] == [where_it_writes(item["argv"]) for item in role]
    assert items[0]["argv"][2:4] == ["--output=/tmp/direct-raw/%s-ram-%s-0.out" % (job, role[0]["mode"]),
                                     "--directory=/mnt/scratch/fio-vs-role-direct/ram"]
    assert directories == ["/tmp/direct-raw", "/mnt/scratch/fio-vs-role-direct/ram"]
    assert items[0]["sync"] == ["/mnt/scratch", "/tmp/direct-raw"]


def test_the_role_runs_a_warm_up_and_five_rounds(fio_vs_role, tmp_path, monkeypatch):
    # ansible-playbook faked: the play the script wrote must be one the role takes; the "run" leaves its manifest.
    seen = []

    def run(argv, **kwargs):
        with open(argv[-1], encoding="utf-8") as handle:
            (play,) = yaml.safe_load(handle)
        (role,) = play["roles"]
        variables = dict((key, value) for key, value in role.items() if key != "role")
        assert_the_role_takes(variables)
        seen.append(variables)
        role_run(tmp_path, variables["benchmark_run_id"])
        return subprocess.CompletedProcess(argv, 0, stdout="", stderr="")

    monkeypatch.setattr(fio_vs_role.subprocess, "run", run)
    manifest, rounds = fio_vs_role.run_role(str(tmp_path), "/srv/ram", "seq_write", "quick", "turn1")
    assert manifest["schema"] == 3 and len(rounds) == 5
    (variables,) = seen
    assert (variables["benchmark_runs"], variables["benchmark_max_runs"]) == (5, 5)
    assert variables["benchmark_fio_jobs"] == ["seq_write"] and variables["benchmark_tests"] == ["fio"]


def test_round_n_pairs_with_direct_run_n(fio_vs_role):
    role = [({"round": n}, 10.0 * n) for n in range(1, 6)]
    direct = [({"round": n}, 10.0 * n / 1.1) for n in (5, 4, 3, 2, 1)]
    assert [(n, round(ratio, 6)) for n, ratio in fio_vs_role.paired_ratios(role, direct)] == [
        (n, 1.1) for n in range(1, 6)]


def test_the_whole_check_with_the_machine_faked(fio_vs_role, tmp_path, monkeypatch, capsys):
    # Root, fio, mount and ansible-playbook faked: the role's turns leave schema 3 runs, fio writes the fixture's
    # JSON of the job and mode it was asked for. Both sides then read the same figures: a difference of 0.
    calls = []

    def run(argv, **kwargs):
        if argv[0] == "fio":
            (output,) = [part.split("=", 1)[1] for part in argv if part.startswith("--output=")]
            job, _label, mode, _round = os.path.basename(output)[:-len(".out")].rsplit("-", 3)
            calls.append(("fio", job, mode))
            name = bench_schema3.RAW.get((job, mode)) or bench_schema3.RAW[(job, None)]
            with open(os.path.join(bench_schema3.PROBE_FIXTURES, name), encoding="utf-8") as source:
                with open(output, "w", encoding="utf-8") as handle:
                    handle.write(source.read())
        elif argv[1:3] == ["-i", "localhost,"]:
            with open(argv[-1], encoding="utf-8") as handle:
                (play,) = yaml.safe_load(handle)
            calls.append(("role",))
            role_run(os.path.dirname(argv[-1]), play["roles"][0]["benchmark_run_id"])
        else:
            calls.append(tuple(argv[:2]))
        return subprocess.CompletedProcess(argv, 0, stdout="", stderr="")

    monkeypatch.setattr(fio_vs_role.subprocess, "run", run)
    monkeypatch.setattr(fio_vs_role.os, "geteuid", lambda: 0)
    monkeypatch.setattr(fio_vs_role.shutil, "which", lambda name: "/usr/bin/" + name)
    monkeypatch.setattr(fio_vs_role.tempfile, "mkdtemp", lambda prefix: str(tmp_path / "work"))
    os.mkdir(tmp_path / "work")
    monkeypatch.setattr(fio_vs_role.sys, "argv", ["fio_vs_role.py", "--job", "seq_read", "--turns", "2"])
    assert fio_vs_role.main() == 0
    out = capsys.readouterr().out
    # Turn 1 the role first, turn 2 the direct runs first (planned from turn 1's manifest); each side a warm-up and
    # five rounds, every direct run after a syncfs.
    steps = [call[0] for call in calls if call[0] in ("role", "fio")]
    assert steps == ["role"] + ["fio"] * 6 + ["fio"] * 6 + ["role"]
    assert sum(1 for call in calls if call == ("sync", "--file-system")) == 12
    assert {call[2] for call in calls if call[0] == "fio"} == {"buffered"}
    assert "turn 2 (direct first): role/direct per round 1: 1.000, 2: 1.000" in out
    assert "difference : +0.0% (median of 10 paired ratios" in out
    assert not os.path.exists(tmp_path / "work")
