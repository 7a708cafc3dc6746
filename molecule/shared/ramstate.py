"""Helpers for testinfra verifies: read the real mount state of a molecule instance."""

from __future__ import annotations

import json


def findmnt(host, path):
    """The mount at exactly PATH as findmnt sees it, or None."""
    cmd = host.run("findmnt -J -b -o TARGET,SOURCE,FSTYPE,OPTIONS,SIZE,USED --mountpoint %s", path)
    if cmd.rc != 0:
        return None
    (entry,) = json.loads(cmd.stdout)["filesystems"]
    entry["options"] = entry["options"].split(",")
    return entry


def option(entry, name):
    """Value of NAME=value in a findmnt entry's options, or True for a bare flag, or None."""
    for opt in entry["options"]:
        key, sep, value = opt.partition("=")
        if key == name:
            return value if sep else True
    return None


def restarted(host):
    """True once the instance has been restarted after converge (the marker lives on /run, a tmpfs)."""
    return not host.file("/run/ramdisk-test/converged").exists


def memtotal(host):
    for line in host.file("/proc/meminfo").content_string.splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no MemTotal in /proc/meminfo")
