# SPDX-License-Identifier: GPL-3.0-or-later
"""The roles' YAML names a few host paths that module_utils/_host_paths.py holds: they must agree."""

from __future__ import annotations

import os

import yaml

from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths as paths

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def _vars(role):
    with open(os.path.join(REPO, "roles", role, "vars", "main.yml")) as handle:
        return yaml.safe_load(handle)


def test_the_mount_role_names_the_same_paths():
    names = _vars("mount")
    assert tuple(names["__mount_vendor_tmp_units"]) == paths.VENDOR_TMP_UNITS
    # Modules unpack under /run while the role mounts over /tmp: root's own, and refused as a mount point.
    assert names["__mount_module_tmp"] == "/run"


def test_the_ramdisk_role_names_the_same_zram_records():
    assert _vars("ramdisk")["__ramdisk_zram_conf_dir"] == paths.ZRAM_RECORD_DIR


def test_the_zram_role_names_the_same_paths():
    names = _vars("zram")
    assert names["__zram_conf_dir"] == paths.ZRAM_RECORD_DIR
    assert names["__zram_journal"] == paths.JOURNAL


def test_the_journal_and_records_live_where_a_reboot_keeps_them_and_the_lock_where_it_does_not():
    assert paths.JOURNAL.startswith("/var/lib/") and paths.RECORD_DIR.startswith("/etc/")
    assert paths.LOCK.startswith("/run/") and paths.NEW_ROOT.startswith("/run/")


def test_the_persist_helper_names_the_same_places():
    from ansible_collections.ramdisk.provision.plugins.module_utils._persist_helper import PLACES
    assert PLACES == {"conf_dir": paths.PERSIST_CONF_DIR, "state_dir": paths.PERSIST_STATE_DIR,
                      "status_dir": paths.PERSIST_STATUS_DIR, "metrics_collector": paths.METRICS_COLLECTOR,
                      "engine": paths.PERSIST_DELTA}
