# SPDX-License-Identifier: GPL-3.0-or-later
"""The metrics collector (plugins/module_utils/_metrics.py): parsers, samples, text, table and the files it writes,
against figures worked out by hand."""
from __future__ import annotations

import ast
import json
import os
import shutil
import stat
import subprocess
import sys

import pytest
import yaml

from ansible_collections.ramdisk.provision.plugins.module_utils import _metrics as m
from ansible_collections.ramdisk.provision.plugins.module_utils._gate import tmp_gate
from ansible_collections.ramdisk.provision.plugins.module_utils._zram import parse_mm_stat as zram_mm_stat

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
MIB = 1024 ** 2
GIB = 1024 ** 3
MM_STAT = "    65536    16384    40960        0    40960        3        0        1        1\n"


def test_mm_stat_fields():
    stat_ = m.parse_mm_stat(MM_STAT)
    assert stat_ == {"orig_data_size": 65536, "compr_data_size": 16384, "mem_used_total": 40960, "mem_limit": 0,
                     "mem_used_max": 40960, "same_pages": 3, "pages_compacted": 0, "huge_pages": 1,
                     "huge_pages_since": 1}
    # The same columns as the zram role's own parser reads.
    assert m.MM_STAT_FIELDS == tuple(key for key in zram_mm_stat(MM_STAT) if key != "compression_ratio")


def test_mm_stat_of_an_older_kernel_lacks_the_last_columns():
    expected = {"orig_data_size": 10, "compr_data_size": 5, "mem_used_total": 8, "mem_limit": 0, "mem_used_max": 8,
                "same_pages": 0, "pages_compacted": 0}
    assert m.parse_mm_stat("10 5 8 0 8 0 0") == expected


def test_shell_vars_as_the_role_quotes_them():
    text = "# Ansible managed\nMOUNT='/srv/a b'\nBACKING=/var/lib/b\nNAME='it'\"'\"'s'\nlower=no\nINTERVAL_SECONDS=300\n"
    assert m.parse_shell_vars(text) == {"MOUNT": "/srv/a b", "BACKING": "/var/lib/b", "NAME": "it's",
                                        "INTERVAL_SECONDS": "300"}


@pytest.mark.parametrize("name, expected", [
    ("snap-20261124T054848.500000000Z", 1795499328.5),  # 2026-01-01 is 1767225600; + 327 days + 05:48:48
    ("snap-20261124T054848Z", 1795499328),
    ("snap-1970010 1T000000Z", None),
    ("current", None),
    (None, None),
])
def test_snapshot_time(name, expected):
    assert m.snapshot_time(name) == expected


@pytest.mark.parametrize("usage, total, available, swap, ram_backed", [
    (100 * MIB, 16 * GIB, 12 * GIB, 0, False),
    (8 * GIB, 16 * GIB, 12 * GIB, 0, True),
    (8 * GIB + 1, 16 * GIB, 12 * GIB, 0, True),
    (3 * GIB, 16 * GIB, 1 * GIB, 1 * GIB, False),
    (3 * GIB, 16 * GIB, 1 * GIB, 0, True),
    (0, GIB, 0, 0, False),
])
def test_gate_verdict_is_the_gate_of_the_role(usage, total, available, swap, ram_backed):
    mine = m.gate_verdict(usage, total, available, swap, ram_backed)
    role = tmp_gate(usage, True, total, available, swap, ram_backed, True)
    assert (mine["fits_half_ram"], mine["fits_free_memory"], mine["recommended"]) == (
        role["fits_half_ram"], role["fits_free_memory_and_swap"], role["recommended"])


def test_peaks_begin_grow_and_never_shrink():
    first = m.update_peaks(None, {"/tmp": 100, "/srv/a": None}, 1000.0)
    assert first == {"version": 1, "since": 1000.0, "paths": {"/tmp": {"peak_bytes": 100, "peak_at": 1000.0}}}
    second = m.update_peaks(first, {"/tmp": 40, "/srv/a": 7}, 1060.0)
    assert second["paths"] == {"/tmp": {"peak_bytes": 100, "peak_at": 1000.0},
                               "/srv/a": {"peak_bytes": 7, "peak_at": 1060.0}}
    third = m.update_peaks(second, {"/tmp": 101}, 1120.0)
    assert third["since"] == 1000.0 and third["paths"]["/tmp"] == {"peak_bytes": 101, "peak_at": 1120.0}
    # A record of another format starts again.
    assert m.update_peaks({"version": 0, "since": 1, "paths": {"/tmp": {"peak_bytes": 9}}}, {}, 5.0) == {
        "version": 1, "since": 5.0, "paths": {}}


SNAPSHOT = {
    "time": 2000.0,
    "duration": 0.0125,
    "mounts": [
        {"path": "/tmp", "backend": "tmpfs", "purpose": "tmp", "mounted": True, "device": "tmpfs", "size_bytes": 64 * MIB,
         "used_bytes": 16 * MIB, "free_bytes": 48 * MIB, "inodes_total": 1000, "inodes_used": 10},
        {"path": "/srv/z", "backend": "zram", "purpose": "cache", "mounted": True, "device": "/dev/zram1",
         "size_bytes": 90 * MIB, "used_bytes": 9 * MIB, "free_bytes": 81 * MIB, "inodes_total": 100, "inodes_used": 11},
        {"path": "/srv/gone", "backend": "tmpfs", "purpose": "custom", "mounted": False},
    ],
    "zram": [{"device": "zram1", "use": "fs", "algorithm": "lz4", "disksize_bytes": 96 * MIB,
              "mm_stat": m.parse_mm_stat(MM_STAT)}],
    "persist": [{"path": "/srv/db", "backing": "/var/lib/b/db", "interval_seconds": 300, "copies": 1,
                 "last_success": 1900.5, "result": "failed", "exit_code": 1, "last_attempt": 1990.0, "duration": 0.5,
                 "sync_bytes": 4096, "written_bytes": 1024, "backing_bytes": 8192, "backing_free_bytes": GIB,
                 "copy_tool": "rsync"}],
    "gates": [{"path": "/tmp", "fits_half_ram": True, "fits_free_memory": True, "recommended": True}],
    "host": {"budget_limit_bytes": 8 * GIB, "budget_planned_bytes": 200 * MIB},
    "policy_paths": [{"path": "/tmp", "purpose": "tmp"}],
    "peaks": {"version": 1, "since": 1000.0, "paths": {"/tmp": {"peak_bytes": 20 * MIB, "peak_at": 1500.0}}},
}


def test_ram_storage_used_counts_a_zram_file_system_once():
    # /tmp 16 MiB used, plus zram1's 40960 bytes of memory; /srv/z is on zram1, so its 9 MiB are not added.
    assert m.ram_storage_used(SNAPSHOT) == 16 * MIB + 40960


def test_render_exact_lines():
    text = m.render(m.samples(SNAPSHOT))
    lines = text.splitlines()
    for line in (
        'ramdisk_mount_mounted{backend="tmpfs",device="",path="/srv/gone",purpose="custom"} 0',
        'ramdisk_mount_used_bytes{backend="tmpfs",device="tmpfs",path="/tmp",purpose="tmp"} 16777216',
        'ramdisk_mount_inodes_used{backend="zram",device="/dev/zram1",path="/srv/z",purpose="cache"} 11',
        'ramdisk_zram_compression_ratio{algorithm="lz4",device="zram1",use="fs"} 4.0',
        'ramdisk_zram_original_bytes{algorithm="lz4",device="zram1",use="fs"} 65536',
        'ramdisk_zram_huge_pages{algorithm="lz4",device="zram1",use="fs"} 1',
        'ramdisk_persist_last_success{backing="/var/lib/b/db",path="/srv/db"} 0',
        'ramdisk_persist_last_success_timestamp_seconds{backing="/var/lib/b/db",path="/srv/db"} 1900.5',
        'ramdisk_persist_last_duration_seconds{backing="/var/lib/b/db",path="/srv/db"} 0.5',
        'ramdisk_persist_last_sync_written_bytes{backing="/var/lib/b/db",path="/srv/db"} 1024',
        'ramdisk_persist_full_copy{backing="/var/lib/b/db",path="/srv/db"} 0',
        'ramdisk_ram_storage_used_bytes 16818176',
        'ramdisk_tmp_gate_recommended{path="/tmp"} 1',
        'ramdisk_path_peak_used_bytes{path="/tmp",purpose="tmp"} 20971520',
        'ramdisk_peak_record_start_timestamp_seconds 1000.0',
        "# TYPE ramdisk_mount_size_bytes gauge",
    ):
        assert line in lines, line
    # One HELP and one TYPE per family, each right before its samples; none for the unmounted path's sizes.
    helps = [line.split()[2] for line in lines if line.startswith("# HELP ")]
    assert len(helps) == len(set(helps))
    assert not any(line.startswith("ramdisk_mount_size_bytes") and "/srv/gone" in line for line in lines)
    assert text.endswith("\n")


def test_label_values_are_escaped():
    text = m.render([("ramdisk_mount_mounted", {"path": '/srv/a "b"\\c\nd'}, 1)])
    assert 'ramdisk_mount_mounted{path="/srv/a \\"b\\"\\\\c\\nd"} 1' in text.splitlines()


def test_nothing_stored_gives_no_ratio():
    snap = {"zram": [{"device": "zram0", "use": "swap", "algorithm": "lz4", "disksize_bytes": MIB,
                      "mm_stat": m.parse_mm_stat("0 0 0 0 0 0 0 0 0")}]}
    assert "ramdisk_zram_compression_ratio" not in m.render(m.samples(snap))


@pytest.mark.skipif(not shutil.which("promtool"), reason="promtool (Debian package prometheus) is not installed")
def test_promtool_accepts_the_text():
    run = subprocess.run(["promtool", "check", "metrics"], input=m.render(m.samples(SNAPSHOT)), capture_output=True,
                         text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr


def test_table():
    out = m.table(SNAPSHOT)
    assert "/tmp" in out and "64.0M" in out and "16.0M" in out and "25%" in out and "10/1000" in out
    assert "/srv/gone" in out and "NOT MOUNTED" in out
    assert "zram1" in out and "4.00" in out and "lz4" in out
    assert "RAM storage uses 16.0M now; the last run planned up to 200.0M of a budget of 8.0G." in out
    assert "/tmp gate for /tmp: passes" in out


def test_table_shows_a_failed_sync_with_its_age():
    snap = dict(SNAPSHOT, mounts=[{"path": "/srv/db", "backend": "tmpfs", "purpose": "database", "mounted": True,
                                   "size_bytes": MIB, "used_bytes": 0, "inodes_total": 10, "inodes_used": 1}])
    assert "LAST SYNC FAILED, last copy 1m ago (wrote 1.0K), 1 copy, to /var/lib/b/db" in m.table(snap)


def test_table_says_when_syncs_copy_everything():
    snap = dict(SNAPSHOT, mounts=[{"path": "/srv/db", "backend": "tmpfs", "purpose": "database", "mounted": True,
                                   "size_bytes": MIB, "used_bytes": 0, "inodes_total": 10, "inodes_used": 1}],
                persist=[dict(SNAPSHOT["persist"][0], copy_tool="cp", written_bytes=None, result="ok", copies=2)])
    assert "ok, last copy 1m ago, 2 copies, to /var/lib/b/db; copies all, no rsync" in m.table(snap)
    found = m.render(m.samples(snap)).splitlines()
    assert 'ramdisk_persist_full_copy{backing="/var/lib/b/db",path="/srv/db"} 1' in found
    assert not any(line.startswith("ramdisk_persist_last_sync_written_bytes{") for line in found)


@pytest.mark.parametrize("stopped, down, left, text, samples", [
    (None, None, None, "/backing", {}),
    ("db.service", 3.25, "", "/backing; services down 3.2s", {"down_seconds": "3.25", "left_down": "0"}),
    ("db.service app.service", 9.0, "db.service", "/backing; db.service LEFT STOPPED",
     {"down_seconds": "9.0", "left_down": "1"}),
])
def test_the_services_a_sync_stopped_show(tmp_path, stopped, down, left, text, samples):
    backing = tmp_path / "backing"
    (backing / "snap-20261124T054848.000000000Z").mkdir(parents=True)
    (backing / "current").symlink_to("snap-20261124T054848.000000000Z")
    (tmp_path / "conf").mkdir()
    (tmp_path / "status").mkdir()
    (tmp_path / "conf" / "t.conf").write_text("MOUNT=/srv/db\nBACKING=%s\n" % backing)
    status = "RESULT=ok\nEXIT=0\nSTARTED=1.0\nFINISHED=2.0\n"
    if stopped:
        status += "SERVICES_STOPPED='%s'\nSERVICES_DOWN_SECONDS=%s\nSERVICES_LEFT_DOWN='%s'\n" % (stopped, down, left)
    (tmp_path / "status" / "t.status").write_text(status)
    (item,) = m._persisted(str(tmp_path / "conf"), str(tmp_path / "status"))
    snap = dict(SNAPSHOT, mounts=[{"path": "/srv/db", "backend": "tmpfs", "purpose": "database", "mounted": True,
                                   "size_bytes": MIB, "used_bytes": 0}], persist=[item])
    assert [line for line in m.table(snap).splitlines() if line.startswith("/srv/db")][0].endswith(text)
    found = dict((line.split("{")[0][len("ramdisk_persist_"):], line.rsplit(" ", 1)[1])
                 for line in m.render(m.samples(snap)).splitlines()
                 if line.startswith(("ramdisk_persist_last_services_down_seconds{", "ramdisk_persist_services_left_down{")))
    assert found == dict(("last_services_" + k if k == "down_seconds" else "services_" + k, v) for k, v in samples.items())


@pytest.mark.parametrize("seconds, text", [(None, "-"), (5, "5s"), (59, "59s"), (60, "1m"), (7200, "2h"), (90000, "1d")])
def test_age(seconds, text):
    assert m.age(seconds) == text


def test_write_atomic_leaves_only_the_file(tmp_path):
    target = tmp_path / "ramdisk.prom"
    target.write_text("old\n")
    m.write_atomic(str(target), "new\n")
    assert target.read_text() == "new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert sorted(os.listdir(tmp_path)) == ["ramdisk.prom"]


def test_collect_on_this_machine(tmp_path):
    """main() end to end with a record of a persisted mount whose backing holds a copy: the persist figures come
    from the backing and the helper's status; files are written where the config says."""
    backing = tmp_path / "backing"
    (backing / "snap-20261124T054848.000000000Z").mkdir(parents=True)
    (backing / "current").symlink_to("snap-20261124T054848.000000000Z")
    conf_dir, status_dir, textfile = tmp_path / "persist", tmp_path / "status", tmp_path / "textfile"
    for directory in (conf_dir, status_dir, textfile):
        directory.mkdir()
    (conf_dir / "srv-db-1.conf").write_text("MOUNT=/srv/db\nBACKING=%s\nINTERVAL_SECONDS=300\n" % backing)
    (status_dir / "srv-db-1.status").write_text(
        "RESULT=ok\nEXIT=0\nSTARTED=1795499328.0\nFINISHED=1795499329.25\nLAST_OK_SNAPSHOT=snap-20261124T054848.000000000Z\n"
        "COPY=incremental\nCOPY_TOOL=rsync\nLAST_OK_FINISHED=1795499329.25\nLAST_OK_BYTES=4096\n"
        "LAST_OK_WRITTEN_BYTES=512\nLAST_OK_BACKING_BYTES=8192\n")
    config = tmp_path / "metrics.json"
    config.write_text(json.dumps({
        "textfile_dir": str(textfile), "state_file": str(tmp_path / "state" / "peak.json"),
        "persist_conf_dir": str(conf_dir), "persist_status_dir": str(status_dir), "zram_conf_dir": str(tmp_path / "none"),
        "mounts": [{"path": str(tmp_path / "not-a-mount"), "backend": "tmpfs", "purpose": "cache"}],
        "policy_paths": [{"path": str(backing), "purpose": "custom"}],
        "budget": {"limit_bytes": "1073741824", "planned_bytes": 1048576}}))
    assert m.main(["collect", "--config", str(config)]) == 0
    found = (textfile / "ramdisk.prom").read_text().splitlines()
    labels = 'backing="%s",path="/srv/db"' % backing
    assert "ramdisk_persist_last_success_timestamp_seconds{%s} 1795499329.25" % labels in found
    assert "ramdisk_persist_last_duration_seconds{%s} 1.25" % labels in found
    assert "ramdisk_persist_copies{%s} 1" % labels in found
    assert "ramdisk_persist_interval_seconds{%s} 300" % labels in found
    assert "ramdisk_persist_backing_bytes{%s} 8192" % labels in found
    assert "ramdisk_persist_last_sync_written_bytes{%s} 512" % labels in found
    assert "ramdisk_persist_full_copy{%s} 0" % labels in found
    assert "ramdisk_budget_limit_bytes 1073741824" in found
    assert 'ramdisk_mount_mounted{backend="tmpfs",device="",path="%s",purpose="cache"} 0' % (tmp_path / "not-a-mount") in found
    peaks = json.loads((tmp_path / "state" / "peak.json").read_text())
    assert peaks["version"] == 1 and str(backing) in peaks["paths"]


def test_status_without_config_says_what_to_do(tmp_path, capsys):
    assert m.main(["status", "--config", str(tmp_path / "missing.json")]) == 1
    assert "run the ramdisk role with ramdisk_metrics: true" in capsys.readouterr().err


def test_the_copied_modules_need_only_the_standard_library():
    """The role copies _metrics.py, _procfs.py, _size.py and _host_paths.py to hosts, where no collection is installed."""
    for name in ("_metrics.py", "_procfs.py", "_size.py", "_host_paths.py"):
        with open(os.path.join(REPO, "plugins", "module_utils", name)) as handle:
            tree = ast.parse(handle.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ansible_collections"):
                assert name == "_metrics.py" and (node.module.endswith(("._procfs", "._size")) or (
                    node.module.endswith(".module_utils") and [alias.name for alias in node.names] == ["_host_paths"])), (
                        name, node.module)
            elif isinstance(node, ast.ImportFrom) and node.module not in ("__future__", "_procfs", "_size"):
                assert node.module in sys.stdlib_module_names, (name, node.module)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    assert alias.name.split(".")[0] in sys.stdlib_module_names or (
                        name == "_metrics.py" and alias.name == "_host_paths"), (name, alias.name)


def test_what_the_role_copies_runs_on_its_own(tmp_path):
    """ramdisk-status runs python3 _metrics.py status beside the copies of __ramdisk_metrics_sources: no collection
    (-E -s: no PYTHONPATH, no user site; the script's own directory stays on the path, as on the host)."""
    with open(os.path.join(REPO, "roles", "ramdisk", "vars", "main.yml")) as handle:
        sources = yaml.safe_load(handle)["__ramdisk_metrics_sources"]
    lib = tmp_path / "lib"
    lib.mkdir()
    for name in sources:
        shutil.copy(os.path.join(REPO, "plugins", "module_utils", name), str(lib))
    config = {"state_file": str(tmp_path / "peak.json"), "persist_conf_dir": str(tmp_path / "none"),
              "persist_status_dir": str(tmp_path / "none"), "zram_conf_dir": str(tmp_path / "none"),
              "mounts": [], "policy_paths": [], "budget": {"limit_bytes": 8 * GIB, "planned_bytes": 200 * MIB}}
    (tmp_path / "metrics.json").write_text(json.dumps(config))
    run = subprocess.run([sys.executable, "-E", "-s", str(lib / "_metrics.py"), "status", "--config", str(tmp_path / "metrics.json")],
                         capture_output=True, text=True, check=False, cwd=str(tmp_path))
    assert (run.returncode, run.stderr) == (0, "")
    assert "the last run planned up to 200.0M of a budget of 8.0G." in run.stdout


def test_role_paths_agree():
    with open(os.path.join(REPO, "roles", "ramdisk", "vars", "main.yml")) as handle:
        ramdisk = yaml.safe_load(handle)
    from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths as paths
    # The role copies the sources into host_paths.metrics_dir; the collector is the first of them.
    assert paths.for_roles()["metrics_collector"] == paths.for_roles()["metrics_dir"] + "/" + "_metrics.py"
    assert set(ramdisk["__ramdisk_metrics_sources"]) == {"_metrics.py", "_procfs.py", "_size.py", "_host_paths.py"}


def test_every_metric_follows_the_conventions():
    for name, (kind, text) in m.METRICS.items():
        assert name.startswith("ramdisk_") and kind == "gauge" and text.endswith(".")
        assert not name.endswith("_total")


def test_docs_list_every_metric_and_alert():
    with open(os.path.join(REPO, "docs", "metrics.md")) as handle:
        page = handle.read()
    for name in m.METRICS:
        assert "`%s`" % name in page, name
    with open(os.path.join(REPO, "files", "prometheus", "ramdisk-rules.yml")) as handle:
        rules = yaml.safe_load(handle)
    alerts = [rule["alert"] for group in rules["groups"] for rule in group["rules"]]
    assert len(alerts) == 9
    for name in alerts:
        assert "`%s`" % name in page, name
    with open(os.path.join(REPO, "files", "prometheus", "ramdisk-rules.test.yml")) as handle:
        tests = yaml.safe_load(handle)
    tested = set(case["alertname"] for test in tests["tests"] for case in test["alert_rule_test"])
    assert tested == set(alerts)


@pytest.mark.skipif(not shutil.which("promtool"), reason="promtool (Debian package prometheus) is not installed")
def test_promtool_rules_tests_pass():
    run = subprocess.run(["promtool", "test", "rules", "ramdisk-rules.test.yml"], capture_output=True, text=True,
                         check=False, cwd=os.path.join(REPO, "files", "prometheus"))
    assert run.returncode == 0, run.stdout + run.stderr


def test_a_tmp_path_the_last_run_skipped_is_exported_with_whether_it_fits_now(tmp_path):
    """ramdisk_tmp_gate_action: skip left the path on disk: the collector says so, with the gate's verdict from
    the usage it scans there, and says only that when it did not scan."""
    skipped = tmp_path / "tmp"
    skipped.mkdir()
    (skipped / "big").write_bytes(b"x" * 65536)
    config = {"state_file": str(tmp_path / "peak.json"), "zram_conf_dir": str(tmp_path / "none"),
              "persist_conf_dir": str(tmp_path / "none"), "persist_status_dir": str(tmp_path / "none"),
              "mounts": [], "policy_paths": [{"path": str(skipped), "purpose": "tmp"}], "gate_skipped": [str(skipped)]}
    scanned = m.collect(config, {}, scan=True)
    (gate,) = scanned["gates"]
    assert gate["skipped"] and gate["path"] == str(skipped) and gate["recommended"] is True
    lines = m.render(m.samples(scanned)).splitlines()
    assert 'ramdisk_tmp_gate_skipped{path="%s"} 1' % skipped in lines
    assert 'ramdisk_tmp_gate_recommended{path="%s"} 1' % skipped in lines
    assert "/tmp gate for %s: passes" % skipped in m.table(scanned)
    quick = m.collect(config, {}, scan=False)
    lines = m.render(m.samples(quick)).splitlines()
    assert 'ramdisk_tmp_gate_skipped{path="%s"} 1' % skipped in lines
    assert not [line for line in lines if line.startswith("ramdisk_tmp_gate_recommended")]
    assert "/tmp gate for %s: skipped by the last run, so it is on disk." % skipped in m.table(quick)
