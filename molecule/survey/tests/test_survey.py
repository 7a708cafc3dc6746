"""The survey's files on the controller, held against each host's real state; the hosts are unchanged.

testinfra runs on the controller: the survey is read as plain files from molecule's ephemeral directory,
where converge wrote it (run id "molecule")."""

from __future__ import annotations

import csv
import json
import os

import pytest

from ramstate import findmnt, memtotal, restarted

RESULTS = os.path.join(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", ""), "survey-results", "molecule")
COLUMNS = ["host", "tmp_bytes", "tmp_inodes", "mem_total", "mem_used", "mem_free", "mem_shared", "mem_buff_cache",
           "mem_available", "swap_total", "swap_used", "swap_free"]


@pytest.fixture(scope="module")
def survey():
    with open(os.path.join(RESULTS, "survey.json"), encoding="utf-8") as handle:
        return json.load(handle)


@pytest.fixture()
def name(host):
    return host.backend.get_hostname()


def meminfo(host):
    return dict((line.split(":")[0], int(line.split()[1]) * 1024)
                for line in host.file("/proc/meminfo").content_string.splitlines())


def test_csv_has_the_survey_columns_and_each_host_once(survey):
    with open(os.path.join(RESULTS, "survey.csv"), newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == COLUMNS
    assert sorted(row["host"] for row in rows) == ["debian12-survey", "debian13-survey"]
    assert survey["unanswered"] == []


def test_row_matches_the_host(host, name, survey):
    row = [row for row in survey["rows"] if row["host"] == name][0]
    info = meminfo(host)
    assert row["mem_total"] == memtotal(host) == info["MemTotal"]
    assert row["swap_total"] == info["SwapTotal"]
    if not restarted(host):
        # /tmp as du -s counts it (allocated blocks, in bytes), read on the host now; a restart empties /tmp.
        du = int(host.check_output("du -s -B1 -x /tmp").split()[0])
        assert abs(row["tmp_bytes"] - du) <= 1024 ** 2, (row["tmp_bytes"], du)
    if "debian12" in name:
        assert row["tmp_bytes"] >= 6 * 1024 ** 2
    assert row["complete"] is True and row["support"]["tmpfs"] is True
    assert "all" in row["groups"] and "lab" in row["groups"]
    assert any(entry["path"] == "/tmp" for entry in row["policy_paths"])


def test_verdicts_and_what_if(name, survey):
    row = [row for row in survey["rows"] if row["host"] == name][0]
    # Both hosts' /tmp is a few MiB: it fits in half of RAM and in available memory plus swap.
    assert row["fits_half_ram"] and row["fits_free"]
    found = row["what_if"]
    if "debian13" in name:
        assert found["refused"] is True
        errors = found["errors"]
        assert any("over ramdisk_ram_budget" in error and "/srv/greedy" in error for error in errors), errors
    else:
        assert found["refused"] is False and found["errors"] == []
        assert any(line.startswith("/tmp: migrate tmpfs") for line in found["lines"]), found["lines"]
    fleet = dict(survey["groups"])["all"]["verdicts"]
    assert (fleet["hosts"], fleet["fits_half_ram"], fleet["fits_free_memory_and_swap"]) == (2, 2, 2)
    assert fleet["outliers"] == [] and dict(survey["groups"])["greedy"]["verdicts"]["hosts"] == 1


def test_report_and_charts():
    report = open(os.path.join(RESULTS, "report.md"), encoding="utf-8").read()
    assert "/tmp fits in half of RAM on 2 of 2 hosts (100.0%)" in report
    assert "What-if of the policy: site.yml would be refused on 1 host(s): debian13-survey." in report
    html = open(os.path.join(RESULTS, "report.html"), encoding="utf-8").read()
    assert html.count('src="data:image/png;base64,') == 3


def test_the_survey_changed_nothing_on_the_host(host):
    # The plan's trial mounts happen in a namespace of their own and are gone: no mount of the policy, no
    # directory it names, no fstab line, no record of this collection.
    for path in ("/srv/greedy", "/var/cache/lab-web", "/var/cache/lab-locks"):
        assert findmnt(host, path) is None, path
    assert not host.file("/srv/greedy").exists
    assert not host.file("/etc/ramdisk-provision").exists
    assert "size=" not in host.file("/etc/fstab").content_string
