# SPDX-License-Identifier: GPL-3.0-or-later
"""The bench_visits order, as ansible-playbook really runs it on two hosts at once.

Ansible runs a looped include once for all hosts whose loop item is equal, at the place of the first host that had
it. Two hosts whose targets differ but share alike ones then ran their visits out of order (the tarball lab showed
round 2 of two targets before round 1 of the others). The visits' ``order`` keeps each host's turns; the control
run, with every ``order`` made equal, shows the reordering still happens without it."""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "files")
WEB = {"label": "web", "path": "/var/cache/web", "backend": "tmpfs"}
LOCKS = {"label": "locks", "path": "/var/cache/locks", "backend": "ramfs"}
TARGETS = {
    "cache": [WEB, LOCKS, {"label": "tmp", "path": "/tmp", "size": 1}, {"label": "disk", "path": "/var/tmp", "size": 1}],
    "build": [WEB, LOCKS, {"label": "tmp", "path": "/tmp", "size": 2}, {"label": "build", "path": "/srv/build"},
              {"label": "disk", "path": "/var/tmp", "size": 2}],
}


def play(tmp_path, merge_alike):
    inventory = {"all": {"hosts": {name: {"targets": targets, "ansible_connection": "local",
                                          "ansible_python_interpreter": sys.executable}
                                   for name, targets in TARGETS.items()}}}
    path = tmp_path / "inventory.json"
    path.write_text(json.dumps(inventory))
    playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    return subprocess.run([playbook, "-i", str(path), os.path.join(HERE, "visits_play.yml"), "-e",
                           "merge_alike=%s" % merge_alike], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, ANSIBLE_NOCOLOR="1"), check=False)


def test_each_host_takes_its_turns_in_order(tmp_path):
    run = play(tmp_path, False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "ok=" in run.stdout and "failed=0" in run.stdout


def test_without_the_order_alike_visits_merge_out_of_order(tmp_path):
    run = play(tmp_path, True)
    assert run.returncode != 0
    assert re.search(r"(cache|build) ran \[.*\], not \[", run.stdout), run.stdout[-3000:]
