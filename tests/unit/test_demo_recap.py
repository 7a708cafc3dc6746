# SPDX-License-Identifier: GPL-3.0-or-later
"""The recap that ends `make demo` (scripts/lab/recap.py), on the files a demo leaves: at most 25 lines, each host's
RAM mounts without the system's own and whether site.yml changed it, the benchmark's headline, the reports."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = importlib.util.spec_from_file_location("recap", os.path.join(HERE, "..", "..", "scripts", "lab", "recap.py"))
recap = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(recap)

GIB = 1024 ** 3
SITE_LOG = """PLAY [Put RAM-backed storage where each group's policy says] ***

PLAY RECAP *********************************************************************
lab-build                  : ok=40   changed=3    unreachable=0    failed=0    skipped=20   rescued=0    ignored=0
lab-cache                  : ok=21   changed=0    unreachable=0    failed=0    skipped=9    rescued=0    ignored=0
lab-db                     : ok=33   changed=%d    unreachable=0    failed=%d    skipped=12   rescued=0    ignored=0
"""


def ratio(test, clear, value, low, high, backend="tmpfs", verdict=None, counted=True):
    verdict = verdict or ("ahead" if clear else "no clear difference")
    return {"host": "lab-build", "test": test, "title": test.replace("_", " ") + " (fio)", "ram_backend": backend,
            "clear": clear, "verdict": verdict, "counted": counted, "ratio": value, "ratio_low": low,
            "ratio_high": high, "words": ("x%s faster" % value) if verdict == "ahead" else
            ("x%s slower" % value) if verdict == "behind" else "no clear difference"}


@pytest.fixture
def demo(tmp_path):
    logs = tmp_path / "demo"
    (logs / "hosts").mkdir(parents=True)
    system = [{"path": "/dev/shm", "kind": "tmpfs", "fstype": "tmpfs", "size_bytes": GIB},
              {"path": "/run", "kind": "tmpfs", "fstype": "tmpfs", "size_bytes": GIB},
              {"path": "/run/user/0", "kind": "tmpfs", "fstype": "tmpfs", "size_bytes": GIB}]
    mounts = {"lab-build": [{"path": "/var/cache/lab-build", "kind": "tmpfs", "fstype": "tmpfs", "size_bytes": GIB},
                            {"path": "/var/cache/lab-locks", "kind": "ramfs", "fstype": "ramfs", "size_bytes": 0,
                             "declared_size_bytes": 16 * 1024 ** 2}],
              "lab-cache": [{"path": "/tmp", "kind": "tmpfs", "fstype": "tmpfs", "size_bytes": 12 * GIB}],
              "lab-db": [{"path": "/srv/zram", "kind": "zram", "fstype": "ext4", "size_bytes": 64 * 1024 ** 2}]}
    for host, listed in mounts.items():
        (logs / "hosts" / (host + ".json")).write_text(json.dumps({"host": host, "mounts": system + listed}))
    reports = tmp_path / "playbooks"
    run = reports / "benchmark-results" / "20261127T000000Z"
    run.mkdir(parents=True)
    ratios = [ratio("random_read_%d" % n, True, 40 + n, 4.0, 400) for n in range(6)]
    ratios += [ratio("seq_write_%d" % n, False, 0.8, 0.1, 6.1, "ramfs") for n in range(20)]
    # Clear, but RAM behind: not "ahead". A disk row that measured a cache: shown in the report, not counted here.
    ratios += [ratio("stat", True, 0.5, 0.4, 0.6, verdict="behind"),
               ratio("create", True, 90, 80, 100, counted=False)]
    (run / "results.json").write_text(json.dumps({"hosts": ["lab-build"], "ratios": ratios}))
    (run / "report.html").write_text("<html></html>")
    survey = reports / "survey-results" / "20261127T000000Z"
    survey.mkdir(parents=True)
    rows = [{"host": "lab-build", "fits_half_ram": True, "fits_free": True},
            {"host": "lab-cache", "fits_half_ram": True, "fits_free": True},
            {"host": "lab-db", "fits_half_ram": False, "fits_free": True}]
    (survey / "survey.json").write_text(json.dumps({"rows": rows}))
    return logs, reports


def run(demo, capsys, changed=0, failed=0):
    logs, reports = demo
    (logs / "site.log").write_text(SITE_LOG % (changed, failed))
    code = recap.main(["--logs", str(logs), "--reports", str(reports), "--seconds", "545"])
    return code, capsys.readouterr().out.splitlines()


def test_the_recap_says_per_host_what_it_has_and_whether_site_changed_it(demo, capsys):
    code, lines = run(demo, capsys)
    assert code == 0 and len(lines) <= 26 and lines[1] == "== make demo: what happened (9 min 5 s) =="
    build = [line for line in lines if line.strip().startswith("lab-build ")][0]
    assert "changed 3" in build and "/var/cache/lab-build tmpfs 1 GiB" in build and "lab-locks ramfs 16 MiB" in build
    assert "no change" in [line for line in lines if line.strip().startswith("lab-cache")][0]
    text = "\n".join(lines)
    assert "/dev/shm" not in text and "/run" not in text
    assert "/srv/zram zram 64 MiB" in text


def test_the_recap_gives_the_benchmark_headline_the_survey_verdict_and_the_reports(demo, capsys):
    _code, lines = run(demo, capsys)
    text = "\n".join(lines)
    assert "lab-build: RAM clearly ahead of disk in 6 of 27 comparisons, behind in 1, no clear difference in 20" in text
    assert "x45 faster (\u00d74.0-400)" in text and "... 2 more in the report" in text
    assert "create" not in text
    assert "on 2 of 3 hosts (not on lab-db)" in text
    assert "benchmark-results/20261127T000000Z/report.html" in text and "survey-results/20261127T000000Z/report.html" in text


def test_a_host_that_failed_is_said_and_fails_the_recap(demo, capsys):
    code, lines = run(demo, capsys, changed=1, failed=1)
    assert code == 1 and "FAILED" in [line for line in lines if line.strip().startswith("lab-db")][0]
