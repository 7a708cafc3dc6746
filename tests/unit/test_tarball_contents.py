# SPDX-License-Identifier: GPL-3.0-or-later
"""The built tarball holds the product only: after `make demo` (or any benchmark or survey run from a clone), the
playbooks' result directories hold reports and data of the lab's hosts, which must not ship (issue 44: the survey's
survey.csv and report.html did). The repository's files are copied, the results of a run planted where the
playbooks write them, and `ansible-galaxy collection build` run on the copy."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Where the playbooks and roles put what a run produces on the controller (benchmark_results_dir and
# survey_results_dir by default, from a clone; `results/` is the top-level directory .gitignore names).
PLANTED = ("playbooks/benchmark-results/20261129T000000Z/report.html",
           "playbooks/benchmark-results/20261129T000000Z/results.json",
           "playbooks/survey-results/20261129T000000Z/survey.csv",
           "playbooks/survey-results/20261129T000000Z/report.html",
           "results/lab-db/results.csv")
RESULT_NAMES = ("report.html", "report.md", "survey.csv", "survey.json", "results.json", "results.csv")


def _galaxy():
    found = shutil.which("ansible-galaxy") or os.path.join(os.path.dirname(sys.executable), "ansible-galaxy")
    return found if os.path.exists(found) else None


@pytest.mark.skipif(_galaxy() is None, reason="needs ansible-galaxy")
def test_the_tarball_holds_no_result_or_report_of_a_run(tmp_path):
    listed = subprocess.run(["git", "-C", REPO, "ls-files", "-z"], capture_output=True, check=False)
    if listed.returncode != 0:
        pytest.skip("needs the repository's git index")
    tree = tmp_path / "collection"
    for name in listed.stdout.decode().split("\0"):
        if name and os.path.isfile(os.path.join(REPO, name)):
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(os.path.join(REPO, name), tree / name)
    for name in PLANTED:
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text("a result of the lab's hosts\n", encoding="utf-8")
    out = tmp_path / "out"
    subprocess.run([_galaxy(), "collection", "build", "--output-path", str(out), str(tree)], check=True,
                   capture_output=True)
    (tarball,) = list(out.iterdir())
    with tarfile.open(tarball) as archive:
        names = archive.getnames()
    leaked = sorted(name for name in names if os.path.basename(name) in RESULT_NAMES or name.split("/")[0] == "results"
                    or any(part.endswith("-results") for part in name.split("/")))
    assert not leaked, "add these to build_ignore in galaxy.yml: %s" % leaked
    assert "playbooks/site.yml" in names
