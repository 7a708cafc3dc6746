"""ramdisk_metrics: false after it was on: the timer, the collector and every file of it are gone; the mounts stay."""

from __future__ import annotations

import pytest

GONE = [
    "/etc/systemd/system/ramdisk-metrics.timer",
    "/etc/systemd/system/ramdisk-metrics.service",
    "/usr/local/libexec/ramdisk-provision/metrics",
    "/usr/local/sbin/ramdisk-status",
    "/var/lib/prometheus/node-exporter/ramdisk.prom",
    "/var/lib/ramdisk-provision/metrics-peak.json",
    "/etc/ramdisk-provision/metrics.json",
]


@pytest.mark.parametrize("path", GONE)
def test_file_is_gone(host, path):
    assert not host.file(path).exists


def test_timer_is_unknown_to_systemd(host):
    assert host.check_output("systemctl show -p LoadState ramdisk-metrics.timer") == "LoadState=not-found"


def test_mounts_stay(host):
    for path in ("/srv/metrics-cache", "/srv/metrics-data"):
        assert host.run("findmnt -n %s", path).rc == 0


def test_node_exporter_serves_no_ramdisk_metrics(host):
    text = host.check_output("python3 -c %s", "import sys, urllib.request; sys.stdout.write("
                             "urllib.request.urlopen('http://127.0.0.1:9100/metrics', timeout=20).read().decode())")
    assert "ramdisk_" not in text


def test_the_persist_helper_still_syncs_without_the_collector(host):
    token = host.check_output("basename -s .conf /etc/ramdisk-provision/persist/*.conf")
    assert host.run("/usr/local/libexec/ramdisk-provision/persist sync %s", token).rc == 0
