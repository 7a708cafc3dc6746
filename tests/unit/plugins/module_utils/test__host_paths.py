# SPDX-License-Identifier: GPL-3.0-or-later
"""The roles' YAML names a few host paths that module_utils/_host_paths.py holds: they must agree."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import yaml

from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths as paths

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def _vars(role):
    with open(os.path.join(REPO, "roles", role, "vars", "main.yml")) as handle:
        return yaml.safe_load(handle)


def test_the_ramdisk_role_reads_only_the_host_paths_the_plan_returns():
    """The ramdisk role's tasks and templates name host paths as __ramdisk_plan.host_paths.KEY (_host_paths.for_roles)."""
    used = set()
    for directory in ("tasks", "templates"):
        top = os.path.join(REPO, "roles", "ramdisk", directory)
        for name in os.listdir(top):
            with open(os.path.join(top, name), encoding="utf-8") as handle:
                used.update(re.findall(r"__ramdisk_plan\.host_paths\.(\w+)", handle.read()))
    assert used and used <= set(paths.for_roles())
    assert all(value.startswith("/") for value in paths.for_roles().values())


def test_the_journal_and_records_live_where_a_reboot_keeps_them_and_the_lock_where_it_does_not():
    assert paths.JOURNAL.startswith("/var/lib/") and paths.RECORD_DIR.startswith("/etc/")
    assert paths.LOCK.startswith("/run/") and paths.NEW_ROOT.startswith("/run/")


EXPECTED_PLACES = {"conf_dir": paths.PERSIST_CONF_DIR, "state_dir": paths.PERSIST_STATE_DIR,
                   "status_dir": paths.PERSIST_STATUS_DIR, "metrics_collector": paths.METRICS_COLLECTOR,
                   "engine": paths.PERSIST_DELTA}


def test_the_persist_helper_names_the_same_places():
    from ansible_collections.ramdisk.provision.plugins.module_utils._persist_helper import PLACES
    assert PLACES == EXPECTED_PLACES


def test_the_installed_persist_helper_names_the_same_places_without_the_collection(tmp_path):
    """On the host the helper runs alone: the places are written into its text, the interpreter line stays first."""
    from ansible_collections.ramdisk.provision.plugins.module_utils._persist_steps import persist_helper_text
    text = persist_helper_text()
    assert text.startswith("#!") and text.count("PLACES = {") == 1
    program = tmp_path / "persist.py"
    program.write_text(text, encoding="utf-8")
    # -I: no PYTHONPATH, no script directory, so the collection cannot be imported.
    shown = subprocess.run(
        [sys.executable, "-I", "-c", "import importlib.util, json, sys\n"
         "spec = importlib.util.spec_from_file_location('persist_helper', sys.argv[1])\n"
         "helper = importlib.util.module_from_spec(spec)\n"
         "spec.loader.exec_module(helper)\n"
         "print(json.dumps([helper._host_paths is None, helper.PLACES]))", str(program)],
        capture_output=True, text=True, check=True, cwd=str(tmp_path))
    assert json.loads(shown.stdout) == [True, EXPECTED_PLACES]


def test_the_metrics_collector_finds_its_paths_beside_it_without_the_collection(tmp_path):
    """The role copies _metrics.py with the files it imports (ramdisk/vars __ramdisk_metrics_sources)."""
    here = os.path.join(REPO, "plugins", "module_utils")
    for name in _vars("ramdisk")["__ramdisk_metrics_sources"]:
        shutil.copy(os.path.join(here, name), str(tmp_path / name))
    shown = subprocess.run(
        [sys.executable, "-I", "-c", "import sys; sys.path.insert(0, sys.argv[1]); import _metrics, json; "
         "print(json.dumps([_metrics.paths.__name__, _metrics.CONFIG, _metrics.PEAK_RECORD]))", str(tmp_path)],
        capture_output=True, text=True, check=True, cwd=str(tmp_path))
    assert json.loads(shown.stdout) == ["_host_paths", paths.METRICS_CONFIG, paths.METRICS_PEAK]


def test_derived_paths_are_built_from_their_directories():
    assert paths.ZRAM_SETUP.startswith(paths.LIBEXEC_DIR + "/")
    assert paths.METRICS_COLLECTOR == paths.METRICS_DIR + "/_metrics.py"
    assert paths.SYSTEMD_RUN_DIR in paths.MOUNT_UNIT_DIRS
