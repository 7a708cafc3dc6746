"""The metrics node_exporter serves, against the real state of the instance, after converge and after a restart.

Every figure is read back from the host itself: df for the mounts, /sys/block/zramN for the zram device, the
backing's current copy for persist. promtool (on the controller) checks the served text and runs the rules'
unit tests; a sync made to fail on a read-only backing shows as a failed result with a growing age, and the
alert for it fires on those very figures.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from metrics import COLLECTOR, collect, families, labels_of, samples, scrape, shell_vars, value
from ramstate import restarted

RULES = Path(__file__).resolve().parents[3] / "files" / "prometheus"
MOUNTS = {"/srv/metrics-cache": "cache", "/srv/metrics-data": "custom"}
BACKING = "/var/lib/ramdisk-backing/metrics-data"
PROM = "/var/lib/prometheus/node-exporter/ramdisk.prom"


def df(host, path):
    out = host.check_output("df -B1 --output=size,used,avail,itotal,iused %s", path).splitlines()[1].split()
    return dict(zip(("size", "used", "avail", "itotal", "iused"), (int(word) for word in out)))


def test_collector_is_installed_and_timed(host):
    assert host.file(COLLECTOR).exists
    assert host.file("/usr/local/sbin/ramdisk-status").mode == 0o755
    timer = host.service("ramdisk-metrics.timer")
    assert timer.is_enabled and timer.is_running
    assert host.file(PROM).exists and host.file(PROM).mode == 0o644


def test_mounts_match_df(host):
    found = samples(collect(host))
    for path, purpose in MOUNTS.items():
        real = df(host, path)
        labels = dict(path=path, backend="tmpfs", purpose=purpose)
        assert value(found, "ramdisk_mount_mounted", **labels) == 1
        assert value(found, "ramdisk_mount_size_bytes", **labels) == real["size"]
        assert value(found, "ramdisk_mount_used_bytes", **labels) == real["used"]
        assert value(found, "ramdisk_mount_free_bytes", **labels) == real["avail"]
        assert value(found, "ramdisk_mount_inodes", **labels) == real["itotal"]
        assert value(found, "ramdisk_mount_inodes_used", **labels) == real["iused"]
        assert labels_of(found, "ramdisk_mount_size_bytes", **labels)["device"] == "tmpfs"


def test_zram_matches_sysfs(host):
    device = shell_vars(host.file("/etc/ramdisk-provision/zram/metrics.conf").content_string)["DEVICE"]
    # ext4 goes on writing to a fresh file system for a while (its journal, lazy inode table init), so
    # mm_stat can move between the collector's read and ours: compare a collection that mm_stat did not
    # move around, read before and after it.
    for _attempt in range(10):
        before = host.file("/sys/block/%s/mm_stat" % device).content_string
        found = samples(collect(host))
        if host.file("/sys/block/%s/mm_stat" % device).content_string == before:
            break
        time.sleep(1)
    else:
        pytest.fail("mm_stat of %s kept changing over 10 collections" % device)
    mm = [int(word) for word in before.split()]
    disksize = int(host.file("/sys/block/%s/disksize" % device).content_string)
    algorithm = [w[1:-1] for w in host.file("/sys/block/%s/comp_algorithm" % device).content_string.split() if w[0] == "["][0]
    labels = labels_of(found, "ramdisk_zram_disksize_bytes", device=device)
    assert labels["algorithm"] == algorithm == "lzo"
    # The file system is mounted after converge; a container restart brings the device back, not the mount.
    assert labels["use"] == ("none" if restarted(host) else "fs")
    assert value(found, "ramdisk_zram_disksize_bytes", device=device) == disksize == 48 * 1024 * 1024
    for name, index in (("original", 0), ("compressed", 1), ("memory_used", 2), ("memory_limit", 3)):
        assert value(found, "ramdisk_zram_%s_bytes" % name, device=device) == mm[index], name
    assert value(found, "ramdisk_zram_same_pages", device=device) == mm[5]
    assert value(found, "ramdisk_zram_huge_pages", device=device) == mm[7]
    if mm[1]:
        assert value(found, "ramdisk_zram_compression_ratio", device=device) == pytest.approx(mm[0] / mm[1], rel=1e-3)


def test_persist_matches_the_backing(host):
    found = samples(collect(host))
    current = host.check_output("readlink %s/current", BACKING)
    stamp = time.mktime(time.strptime(current.split(".")[0], "snap-%Y%m%dT%H%M%S")) - time.timezone
    labels = dict(path="/srv/metrics-data", backing=BACKING)
    last = value(found, "ramdisk_persist_last_success_timestamp_seconds", **labels)
    # The copy's name is when its first sync began; later syncs (the stop at a restart makes one) change it in
    # place, so the figure is the helper's end time of the last one, from its status.
    finished = host.check_output("sed -n 's/^LAST_OK_FINISHED=//p' /var/lib/ramdisk-provision/persist/*.status")
    assert stamp <= last == pytest.approx(float(finished), abs=1e-3)
    assert value(found, "ramdisk_persist_last_success", **labels) == 1
    assert value(found, "ramdisk_persist_interval_seconds", **labels) == 3600
    # persist.keep is left at its default, 2: the current copy and, after a second sync, the one before it: a
    # snapshot (snap-*) or, for a sync in place, its reverse delta (.persist-delta/undo-N beside gen-N.json).
    snapshots = host.check_output("find %s -mindepth 1 -maxdepth 1 -name 'snap-*' -printf x", BACKING)
    deltas = host.check_output(
        "cd %s/.persist-delta 2>/dev/null && for u in undo-*; do [ -e \"gen-${u#undo-}.json\" ] && printf x; done; true",
        BACKING)
    assert len(snapshots) + len(deltas) in (1, 2)
    assert value(found, "ramdisk_persist_copies", **labels) == len(snapshots) + len(deltas)
    real_bytes = int(host.check_output("du -s -B1 %s", BACKING).split()[0])
    assert value(found, "ramdisk_persist_backing_bytes", **labels) == real_bytes
    copy_bytes = int(host.check_output("du -s -B1 %s/%s", BACKING, current).split()[0])
    assert value(found, "ramdisk_persist_last_sync_bytes", **labels) == copy_bytes
    assert 0 <= value(found, "ramdisk_persist_last_sync_written_bytes", **labels) <= copy_bytes
    assert value(found, "ramdisk_persist_last_duration_seconds", **labels) >= 0


def test_host_figures(host):
    found = samples(collect(host))
    assert value(found, "ramdisk_budget_limit_bytes") > 0
    # 32M + 16M of tmpfs, and the zram device counted at its size over the assumed ratio, or more.
    assert value(found, "ramdisk_budget_planned_bytes") >= 48 * 1024 * 1024
    used = sum(df(host, path)["used"] for path in MOUNTS)
    device = shell_vars(host.file("/etc/ramdisk-provision/zram/metrics.conf").content_string)["DEVICE"]
    used += int(host.file("/sys/block/%s/mm_stat" % device).content_string.split()[2])
    assert value(found, "ramdisk_ram_storage_used_bytes") == used
    peaks = json.loads(host.file("/var/lib/ramdisk-provision/metrics-peak.json").content_string)
    for path in MOUNTS:
        assert peaks["paths"][path]["peak_bytes"] >= df(host, path)["used"]
        assert value(found, "ramdisk_path_peak_used_bytes", path=path) == peaks["paths"][path]["peak_bytes"]
    assert value(found, "ramdisk_peak_record_start_timestamp_seconds") == peaks["since"]


def test_peak_grows_and_stays(host):
    before = json.loads(host.file("/var/lib/ramdisk-provision/metrics-peak.json").content_string)["paths"]["/srv/metrics-cache"]
    host.check_output("dd if=/dev/zero of=/srv/metrics-cache/peak.bin bs=1M count=4 status=none")
    try:
        grown = value(samples(collect(host)), "ramdisk_path_peak_used_bytes", path="/srv/metrics-cache")
        assert grown >= before["peak_bytes"] + 4 * 1024 * 1024 - 4096 or grown >= 4 * 1024 * 1024
    finally:
        host.check_output("rm -f /srv/metrics-cache/peak.bin")
    kept = value(samples(collect(host)), "ramdisk_path_peak_used_bytes", path="/srv/metrics-cache")
    assert kept == grown


@pytest.mark.skipif(not shutil.which("promtool"), reason="promtool (Debian package prometheus) is not installed")
def test_promtool_checks_the_served_text(host):
    text = families(collect(host))
    run = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.skipif(not shutil.which("promtool"), reason="promtool (Debian package prometheus) is not installed")
def test_promtool_runs_the_rules_tests(host):
    if restarted(host):
        pytest.skip("the rules' own unit tests read no host: once, before the restart")
    run = subprocess.run(["promtool", "test", "rules", "ramdisk-rules.test.yml"], cwd=str(RULES), capture_output=True,
                         text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr


def test_failed_sync_shows_and_alerts(host):
    if restarted(host):
        pytest.skip("a failure this test makes itself, the same after a restart: once, before it")
    token = host.check_output("basename -s .conf /etc/ramdisk-provision/persist/*.conf")
    labels = dict(path="/srv/metrics-data", backing=BACKING)
    good = value(samples(collect(host)), "ramdisk_persist_last_success_timestamp_seconds", **labels)
    # A read-only backing: the copy cannot even begin.
    host.check_output("mount --bind %s %s && mount -o remount,ro,bind %s", BACKING, BACKING, BACKING)
    try:
        sync = host.run("/usr/local/libexec/ramdisk-provision/persist sync %s", token)
        assert sync.rc == 1, sync.stderr
        # The helper ran the collector itself: the file already says so.
        after = samples(host.file(PROM).content_string)
        assert value(after, "ramdisk_persist_last_success", **labels) == 0
        assert value(after, "ramdisk_persist_last_exit_code", **labels) == 1
        assert value(after, "ramdisk_persist_last_success_timestamp_seconds", **labels) == good
        assert value(after, "ramdisk_persist_last_attempt_timestamp_seconds", **labels) > good
        status = shell_vars(host.check_output("cat /var/lib/ramdisk-provision/persist/%s.status", token))
        assert status["RESULT"] == "failed"
        first_age = value(after, "ramdisk_metrics_last_run_timestamp_seconds") - good
        time.sleep(2)
        later = samples(collect(host))
        assert value(later, "ramdisk_persist_last_success", **labels) == 0
        assert value(later, "ramdisk_metrics_last_run_timestamp_seconds") - good >= first_age + 1
        assert "LAST SYNC FAILED" in host.check_output("ramdisk-status")
        if shutil.which("promtool"):
            _alert_fires_on(dict(labels_of(later, "ramdisk_persist_last_success", **labels), instance="debian12-metrics"))
    finally:
        host.run("umount %s", BACKING)
    sync = host.run("/usr/local/libexec/ramdisk-provision/persist sync %s", token)
    assert sync.rc == 0, sync.stderr
    healed = samples(host.file(PROM).content_string)
    assert value(healed, "ramdisk_persist_last_success", **labels) == 1
    assert value(healed, "ramdisk_persist_last_success_timestamp_seconds", **labels) > good


def _alert_fires_on(labels):
    """RamdiskPersistSyncFailed, in promtool, on the series this host served while its sync failed."""
    series = "ramdisk_persist_last_success{%s}" % ",".join('%s="%s"' % item for item in sorted(labels.items()))
    test = {"rule_files": [str(RULES / "ramdisk-rules.yml")], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": [{"series": series, "values": "0x5"}],
        "alert_rule_test": [{"eval_time": "2m", "alertname": "RamdiskPersistSyncFailed", "exp_alerts": [{
            "exp_labels": dict(labels, severity="critical"),
            "exp_annotations": {
                "summary": "The last sync of %s to %s on %s failed" % (labels["path"], labels["backing"], labels["instance"]),
                "description": ("The persist helper's last attempt to copy %s to disk failed or was refused (a full or "
                                "read-only backing, or a mount that was not restored). The backing keeps its last "
                                "complete copy.") % labels["path"]}}]}]}]}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "failed-sync.test.yml")
        with open(path, "w") as handle:
            yaml.safe_dump(test, handle)
        run = subprocess.run(["promtool", "test", "rules", path], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr


def test_status_command(host):
    out = host.check_output("ramdisk-status")
    for path in MOUNTS:
        assert path in out
    assert BACKING in out and "ok, last copy" in out
    device = shell_vars(host.file("/etc/ramdisk-provision/zram/metrics.conf").content_string)["DEVICE"]
    assert device in out and "lzo" in out


def test_served_metrics_come_from_the_textfile(host):
    text = scrape(host)
    assert 'node_textfile_scrape_error 0' in text
    assert "ramdisk_metrics_last_run_timestamp_seconds" in text
