# SPDX-License-Identifier: GPL-3.0-or-later
"""How make hostile (tests/hostile/action_plugins/hostile_state.py) tells a case's change from another process's:
a mount that goes from the test's namespace counts against the case unless it went from the host's own
namespace too (CI's 'the root file system' case failed when a lab container stopped beside it)."""

from __future__ import annotations

import importlib.util
import os

import pytest

pytest.importorskip("ansible")
HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = importlib.util.spec_from_file_location(
    "hostile_state", os.path.join(HERE, "..", "hostile", "action_plugins", "hostile_state.py"))
hostile_state = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(hostile_state)

ROOT = "/ /dev/vda1 ext4 rw,relatime"
CONTAINER = "/var/lib/docker/overlay2/abc/merged overlay overlay rw,relatime"
SRV = "/srv/full tmpfs tmpfs rw,nosuid,nodev"


def snap(mounts, host_targets):
    return {"fstab": "same", "mounts": mounts, "swaps": [], "zram": [], "tracked": {}, "scratch": {}, "paths": {},
            "host_targets": host_targets}


def test_a_host_mount_detached_by_another_process_is_a_note():
    host = ["/", "/var/lib/docker/overlay2/abc/merged"]
    changes, notes = hostile_state.differences(snap([ROOT, CONTAINER], host), snap([ROOT], ["/"]), set(), ("/",))
    assert changes == []
    assert "/var/lib/docker/overlay2/abc/merged" in notes[0]


def test_a_host_mount_the_case_took_away_is_a_change():
    host = ["/", "/var/lib/docker/overlay2/abc/merged"]
    changes, _notes = hostile_state.differences(snap([ROOT, CONTAINER], host), snap([ROOT], host), set(), ("/var/lib",))
    assert changes == ["mount went: " + CONTAINER]


def test_a_mount_of_the_namespace_that_went_is_a_change_whatever_the_case_names():
    changes, _notes = hostile_state.differences(snap([ROOT, SRV], ["/"]), snap([ROOT], ["/"]), set(), ("/tmp",))
    assert changes == ["mount went: " + SRV]


def test_without_the_hosts_view_every_watched_mount_that_went_is_a_change():
    changes, _notes = hostile_state.differences(snap([ROOT, CONTAINER], None), snap([ROOT], None), set(), ("/",))
    assert changes == ["mount went: " + CONTAINER]


def test_the_hosts_mount_points_are_read_through_the_pid_that_made_the_namespace(tmp_path):
    (tmp_path / "pid").write_text("%d\n" % os.getpid())
    assert "/" in hostile_state.host_targets(str(tmp_path))
    (tmp_path / "pid").write_text("not a pid\n")
    assert hostile_state.host_targets(str(tmp_path)) is None
