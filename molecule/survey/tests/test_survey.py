"""The survey's files on the controller, held against each host's real state; the hosts are unchanged.

testinfra runs on the controller: the survey is read as plain files from molecule's ephemeral directory,
where converge wrote it (run id "molecule")."""

from __future__ import annotations

import csv
import json
import os

import pytest

from ramstate import findmnt, memtotal

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


LIMITED = "debian12-small-survey"
# The platform's `memory: 192m`.
LIMIT = 192 * 1024 ** 2


def format_size(num_bytes):
    """As the report prints sizes: binary units, one decimal."""
    value, unit = float(num_bytes), "B"
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024.0
        if value < 1024.0:
            break
    return "%.1f %s" % (value, unit)


def cgroup_limit(host):
    """The tightest memory limit above the container's init, read here on the host's /sys/fs/cgroup (the host's
    tree, cgroupns host): memory.limit_in_bytes of the v1 memory hierarchy, or memory.max of cgroup v2.
    Returns (limit, cgroup)."""
    found = []
    for line in host.file("/proc/1/cgroup").content_string.splitlines():
        number, controllers, path = line.split(":", 2)
        if number == "0" and controllers == "":
            base, name = "/sys/fs/cgroup", "memory.max"
        elif "memory" in controllers.split(","):
            base, name = "/sys/fs/cgroup/memory", "memory.limit_in_bytes"
        else:
            continue
        parts = [part for part in path.split("/") if part]
        for depth in range(len(parts), -1, -1):
            limit_file = host.file("/".join([base] + parts[:depth] + [name]))
            text = limit_file.content_string.strip() if limit_file.exists else ""
            if text.isdigit() and int(text) < 1 << 62:
                found.append((int(text), "/" + "/".join(parts[:depth])))
    return min(found) if found else (None, None)


def meminfo(host):
    return dict((line.split(":")[0], int(line.split()[1]) * 1024)
                for line in host.file("/proc/meminfo").content_string.splitlines())


def test_csv_has_the_survey_columns_and_each_host_once(survey):
    with open(os.path.join(RESULTS, "survey.csv"), newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == COLUMNS
    assert sorted(row["host"] for row in rows) == ["debian12-small-survey", "debian12-survey", "debian13-survey"]
    assert survey["unanswered"] == []


def test_row_matches_the_host(host, name, survey):
    row = [row for row in survey["rows"] if row["host"] == name][0]
    info = meminfo(host)
    assert memtotal(host) == info["MemTotal"]
    limit, cgroup = cgroup_limit(host)
    if name == LIMITED:
        # /proc/meminfo shows the whole machine; the survey the container's limit, and the cgroup that set it.
        assert (limit, row["mem_total"], row["mem_limited_by"]) == (LIMIT, LIMIT, cgroup), (limit, row, cgroup)
        assert row["mem_meminfo_total"] == info["MemTotal"] > 4 * LIMIT
        assert 0 < row["mem_available"] <= LIMIT and row["mem_used"] == LIMIT - row["mem_available"]
    else:
        # No limit below the machine's RAM: the figures are /proc/meminfo's, as before.
        assert limit is None or limit >= info["MemTotal"]
        assert row["mem_total"] == info["MemTotal"] and row["mem_limited_by"] is None
    if name == LIMITED:
        # docker --memory-swap equal to --memory: no swap for this cgroup (v2 memory.swap.max 0, or v1's
        # memory.memsw.limit_in_bytes equal to the memory limit), whatever swap the machine has.
        v2 = host.file("/sys/fs/cgroup%s/memory.swap.max" % cgroup)
        v1 = host.file("/sys/fs/cgroup/memory%s/memory.memsw.limit_in_bytes" % cgroup)
        assert (v2.exists and v2.content_string.strip() == "0") or int(v1.content_string) == LIMIT
        assert row["swap_total"] == row["swap_free"] == 0, row
    else:
        assert row["swap_total"] == info["SwapTotal"]
    # /tmp as du -s counts it (allocated blocks, in bytes), read on the host now.
    du = int(host.check_output("du -s -B1 -x /tmp").split()[0])
    assert abs(row["tmp_bytes"] - du) <= 1024 ** 2, (row["tmp_bytes"], du)
    if name == "debian12-survey":
        assert row["tmp_bytes"] >= 6 * 1024 ** 2
    if name == LIMITED:
        assert row["tmp_bytes"] >= 256 * 1024 ** 2
    assert row["complete"] is True and row["support"]["tmpfs"] is True
    assert "all" in row["groups"] and "lab" in row["groups"]
    assert any(entry["path"] == "/tmp" for entry in row["policy_paths"])


def test_verdicts_and_what_if(name, survey):
    row = [row for row in survey["rows"] if row["host"] == name][0]
    found = row["what_if"]
    if name == LIMITED:
        # 256 MiB of /tmp against the 192 MiB limit: beyond half of it, and beyond what is left under it.
        assert not row["fits_half_ram"] and not row["fits_free"]
        assert row["verdict"]["reasons"][0].startswith("RAM here is the memory limit of cgroup %s (192.0 MiB)"
                                                       % row["mem_limited_by"]), row["verdict"]["reasons"]
        assert any(reason.startswith("/tmp uses 256.") and reason.endswith("MiB, more than half of RAM (96.0 MiB).")
                   for reason in row["verdict"]["reasons"]), row["verdict"]["reasons"]
        # site.yml would be refused by the /tmp gate, and says why.
        assert found["refused"] is True
        assert any("puts '/tmp' in RAM, but it does not fit" in error and "more than half of RAM (96.0 MiB)" in error
                   and "does not fit in free memory and swap" in error for error in found["errors"]), found["errors"]
    else:
        # The other hosts' /tmp is a few MiB: it fits in half of RAM and in available memory plus swap.
        assert row["fits_half_ram"] and row["fits_free"]
    if "debian13" in name:
        assert found["refused"] is True
        errors = found["errors"]
        assert any("over ramdisk_ram_budget" in error and "/srv/greedy" in error for error in errors), errors
    elif name == "debian12-survey":
        assert found["refused"] is False and found["errors"] == []
        assert any(line.startswith("/tmp: migrate tmpfs") for line in found["lines"]), found["lines"]
    groups = dict(survey["groups"])
    fleet = groups["all"]["verdicts"]
    # The limited host is counted in neither verdict, and it is the one outlier, with its figures.
    assert (fleet["hosts"], fleet["fits_half_ram"], fleet["fits_free_memory_and_swap"]) == (3, 2, 2)
    (outlier,) = fleet["outliers"]
    limited = [row for row in survey["rows"] if row["host"] == LIMITED][0]
    assert outlier == {"host": LIMITED, "tmp_bytes": limited["tmp_bytes"], "mem_total": LIMIT,
                       "mem_available": limited["mem_available"], "swap_free": limited["swap_free"],
                       "fits_half_ram": False, "mem_limited_by": limited["mem_limited_by"]}
    assert groups["limited"]["verdicts"]["outliers"][0]["host"] == LIMITED
    assert groups["greedy"]["verdicts"]["hosts"] == 1 and groups["greedy"]["verdicts"]["outliers"] == []


def test_report_and_charts(survey):
    report = open(os.path.join(RESULTS, "report.md"), encoding="utf-8").read()
    assert "/tmp fits in half of RAM on 2 of 3 hosts (66.7%), in available memory plus free swap on 2 (66.7%)" in report
    limited = [row for row in survey["rows"] if row["host"] == LIMITED][0]
    tmp = format_size(limited["tmp_bytes"])
    assert ("Outliers (/tmp beyond available memory plus free swap): %s (%s of /tmp, 192.0 MiB RAM, its "
            "cgroup's memory limit)." % (LIMITED, tmp)) in report
    # The outliers' table: the host by name with its figures.
    assert "| %s | %s | 192.0 MiB (cgroup limit) | %s | " % (LIMITED, tmp, format_size(limited["mem_available"])) in report
    whatif = report.split("## What site.yml would do")[1].split("##")[0]
    assert any(line.startswith("| %s | refused | " % LIMITED) and "more than half of RAM (96.0 MiB)" in line
               for line in whatif.splitlines()), whatif
    assert ("What-if of the policy: site.yml would be refused on 2 host(s): %s, debian13-survey." % LIMITED) in report
    html = open(os.path.join(RESULTS, "report.html"), encoding="utf-8").read()
    assert html.count('src="data:image/png;base64,') == 3


def test_the_peak_record_is_judged(survey):
    # prepare.yml left a peak record on debian13-survey only: /tmp once held 32 TiB.
    fleet = survey["groups"][0][1]["verdicts"]
    assert fleet["with_peak"] == 1 and fleet["peak_outliers"] == ["debian13-survey"]
    row = [row for row in survey["rows"] if row["host"] == "debian13-survey"][0]
    assert row["tmp_peak_bytes"] == 32 * 1024 ** 4
    report = open(os.path.join(RESULTS, "report.md"), encoding="utf-8").read()
    assert ("fits in half of RAM on 0 of 1 hosts (0.0%), in available memory plus free swap on 0 (0.0%); beyond "
            "half of RAM at its peak: debian13-survey.") in report


def test_the_survey_changed_nothing_on_the_host(host, name):
    # The plan's trial mounts happen in a namespace of their own and are gone: no mount of the policy, no
    # directory it names, no fstab line, no record of this collection.
    if name == LIMITED:
        pytest.skip("converge's second play applies a policy there (its /tmp skipped)")
    for path in ("/srv/greedy", "/var/cache/lab-web", "/var/cache/lab-locks"):
        assert findmnt(host, path) is None, path
    assert not host.file("/srv/greedy").exists
    assert not host.file("/etc/ramdisk-provision").exists
    assert "size=" not in host.file("/etc/fstab").content_string


def test_the_limited_hosts_tmp_was_skipped_and_the_rest_of_its_policy_applied(host, name):
    """converge's second play: ramdisk_tmp_gate_action: skip on the host whose /tmp does not fit."""
    if name != LIMITED:
        pytest.skip("only the limited host gets the policy applied")
    tmp = findmnt(host, "/tmp")
    assert tmp is None or tmp["fstype"] != "tmpfs", tmp
    assert host.file("/tmp/survey-large.bin").exists
    cache = findmnt(host, "/srv/skip-cache")
    assert cache is not None and cache["fstype"] == "tmpfs" and "noexec" in cache["options"], cache
    # Nothing of the skipped /tmp was written for the boot either.
    assert " /tmp " not in host.file("/etc/fstab").content_string
    assert "/srv/skip-cache" in host.file("/etc/fstab").content_string
