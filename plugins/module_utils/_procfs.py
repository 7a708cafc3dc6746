# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Parsers for /proc and /sys text. Each takes the text, so tests feed fixtures."""

from __future__ import annotations

import re

_OCTAL_ESCAPE_RE = re.compile(r"\\([0-7]{3})")
_RELEASE_RE = re.compile(r"^(\d+)(?:\.(\d+))?(?:\.(\d+))?")

RAM_FSTYPES = ("tmpfs", "ramfs")
_RAM_BLOCK_SOURCE_RE = re.compile(r"^/dev/(zram|ram)\d+$")
# Kernel interfaces, never storage: container runtimes mask files there with tmpfs, cgroup v1 mounts one.
KERNEL_TREES = ("/proc", "/sys")


def unescape_octal(text):
    """Decode the kernel's octal escapes in mount paths: ``\\040`` is a space."""
    return _OCTAL_ESCAPE_RE.sub(lambda match: chr(int(match.group(1), 8)), text)


def parse_meminfo(text):
    """/proc/meminfo as {key: bytes}; values given in kB are converted to bytes."""
    result = {}
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        if not sep:
            continue
        fields = rest.split()
        if not fields or not fields[0].isdigit():
            continue
        value = int(fields[0])
        if len(fields) > 1 and fields[1].lower() == "kb":
            value *= 1024
        result[key.strip()] = value
    return result


def mem_available(path="/proc/meminfo"):
    """MemAvailable in bytes (MemFree where the kernel lacks it), 0 when PATH cannot be read."""
    try:
        with open(path) as handle:
            meminfo = parse_meminfo(handle.read())
    except (IOError, OSError):
        return 0
    return meminfo.get("MemAvailable", meminfo.get("MemFree", 0))


def parse_mountinfo(text):
    """/proc/self/mountinfo as a list of dicts, in the kernel's order (a later entry on the
    same mount point is stacked on top of an earlier one)."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 10 or "-" not in fields[6:]:
            continue
        separator = fields.index("-", 6)
        major, _sep, minor = fields[2].partition(":")
        super_fields = fields[separator + 1:]
        mounts.append({
            "mount_id": int(fields[0]),
            "parent_id": int(fields[1]),
            "major": int(major),
            "minor": int(minor),
            "root": unescape_octal(fields[3]),
            "mount_point": unescape_octal(fields[4]),
            "mount_options": fields[5].split(","),
            "optional_fields": fields[6:separator],
            "fstype": unescape_octal(super_fields[0]),
            "source": unescape_octal(super_fields[1]) if len(super_fields) > 1 else "",
            "super_options": super_fields[2].split(",") if len(super_fields) > 2 else [],
        })
    return mounts


def merged_options(mount):
    """Per-mount options then super-block options, each once, in that order."""
    result = []
    for option in list(mount["mount_options"]) + list(mount["super_options"]):
        if option and option not in result:
            result.append(option)
    return result


def option_value(options, name):
    """Value of ``name=value`` in an option list, True for a bare ``name``, else None."""
    for option in options:
        key, sep, value = option.partition("=")
        if key == name:
            return value if sep else True
    return None


def is_ram_backed(fstype, source):
    """tmpfs and ramfs, and file systems on /dev/zramN or /dev/ramN (brd)."""
    return fstype in RAM_FSTYPES or bool(_RAM_BLOCK_SOURCE_RE.match(source or ""))


def in_kernel_tree(path):
    """True for /proc, /sys and any path below them."""
    return any(path == tree or path.startswith(tree + "/") for tree in KERNEL_TREES)


def ram_storage_mounts(mountinfo):
    """The RAM-backed mounts of ``mountinfo`` that can hold data, in its order: is_ram_backed(), less
    those at or under /proc and /sys (docker's /proc/acpi, /sys/firmware, /proc/keys...)."""
    return [mount for mount in mountinfo
            if is_ram_backed(mount["fstype"], mount["source"]) and not in_kernel_tree(mount["mount_point"])]


def ram_block_kind(source):
    """'zram' or 'brd' for /dev/zramN and /dev/ramN, else None."""
    match = _RAM_BLOCK_SOURCE_RE.match(source or "")
    if match is None:
        return None
    return "zram" if match.group(1) == "zram" else "brd"


def mount_for_path(mounts, path):
    """The mount that holds ``path`` (an absolute, resolved path): the longest mount point that
    is ``path`` or one of its parents; of stacked mounts, the last one."""
    best = None
    for mount in mounts:
        point = mount["mount_point"]
        if point == path or point == "/" or path.startswith(point.rstrip("/") + "/"):
            if best is None or len(point) >= len(best["mount_point"]):
                best = mount
    return best


def parse_swaps(text):
    """/proc/swaps rows as dicts with sizes in bytes."""
    devices = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 5:
            continue
        devices.append({
            "path": unescape_octal(fields[0]),
            "type": fields[1],
            "size_bytes": int(fields[2]) * 1024,
            "used_bytes": int(fields[3]) * 1024,
            "priority": int(fields[4]),
        })
    return devices


def parse_filesystems(text):
    """/proc/filesystems as a set of file system names."""
    names = set()
    for line in text.splitlines():
        fields = line.split()
        if fields:
            names.add(fields[-1])
    return names


def parse_zram_algorithms(text):
    """zram comp_algorithm (``lzo [lzo-rle] lz4``) as {'algorithms': [...], 'selected': name}."""
    algorithms = []
    selected = None
    for word in text.split():
        if word.startswith("[") and word.endswith("]"):
            word = word[1:-1]
            selected = word
        algorithms.append(word)
    return {"algorithms": algorithms, "selected": selected}


def detect_container(pid1_environ=None, present_paths=(), systemd_container=None):
    """The container manager this runs under, or None.

    pid1_environ: text of /proc/1/environ (NUL-separated), or None when unreadable.
    present_paths: the marker files that exist (/.dockerenv, /run/.containerenv).
    systemd_container: text of /run/systemd/container, or None.
    """
    if systemd_container and systemd_container.strip():
        return systemd_container.strip()
    if pid1_environ:
        for item in pid1_environ.replace("\n", "\0").split("\0"):
            key, sep, value = item.partition("=")
            if sep and key == "container" and value.strip():
                return value.strip()
    present = set(present_paths)
    if "/run/.containerenv" in present:
        return "podman"
    if "/.dockerenv" in present:
        return "docker"
    return None


def parse_kernel_release(release):
    """Leading numbers of a kernel release: '6.8.0-45-generic' -> (6, 8, 0)."""
    match = _RELEASE_RE.match(release.strip())
    if match is None:
        return ()
    return tuple(int(part) for part in match.groups() if part is not None)


def kernel_at_least(release, minimum):
    """True if the kernel release is at least ``minimum``, e.g. (6, 4)."""
    version = parse_kernel_release(release)
    if not version:
        return False
    version = version + (0,) * (len(minimum) - len(version))
    return version[:len(minimum)] >= tuple(minimum)


def parse_proc_cgroup(text):
    """/proc/PID/cgroup as (the cgroup v2 path or None, {v1 controller: path}).

    A v2 line is ``0::/path``; a v1 line is ``N:controller[,controller]:/path`` (``name=systemd`` too).
    """
    unified = None
    controllers = {}
    for line in text.splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) != 3 or not parts[2].startswith("/"):
            continue
        if parts[0] == "0" and parts[1] == "":
            unified = parts[2]
            continue
        for name in parts[1].split(","):
            if name:
                controllers[name] = parts[2]
    return unified, controllers


def parse_cgroup_bytes(text):
    """A cgroup memory file's single value: bytes as an int, None for ``max``, empty or unreadable text."""
    value = (text or "").strip()
    return int(value) if value.isdigit() else None


def parse_flat_keyed(text):
    """A ``key value`` per line file such as memory.stat, as {key: int}; other lines are skipped."""
    result = {}
    for line in (text or "").splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[1].isdigit():
            result[fields[0]] = int(fields[1])
    return result


def cgroup_mount(mountinfo, version):
    """The mount of the cgroup v2 tree (VERSION 2) or of the v1 hierarchy holding the memory controller
    (VERSION 1), or None. Of several mounts of it, the first whose root is the tree's own root, else the first."""
    found = []
    for mount in mountinfo:
        if version == 2 and mount["fstype"] == "cgroup2":
            found.append(mount)
        elif version == 1 and mount["fstype"] == "cgroup" and "memory" in mount["super_options"]:
            found.append(mount)
    for mount in found:
        if mount["root"] == "/":
            return mount
    return found[0] if found else None


def cgroup_directories(mount, path):
    """(cgroup, directory) of cgroup PATH and of each of its ancestors visible under MOUNT, deepest first.

    PATH is as /proc/PID/cgroup gives it; MOUNT's root is where the mount starts in the same namespace (a
    container without its own cgroup namespace can have its own cgroup bound at /sys/fs/cgroup/memory, with
    that cgroup as root). Empty when PATH is outside what the mount shows (``/..`` from another namespace).
    """
    root = mount["root"].rstrip("/")
    if root and (path == root or path.startswith(root + "/")):
        path = path[len(root):]
    elif root:
        return []
    parts = [part for part in path.split("/") if part]
    if ".." in parts or "." in parts:
        return []
    base = mount["mount_point"]
    out = []
    for depth in range(len(parts), -1, -1):
        name = "/".join([root] + parts[:depth]) or "/"
        out.append((name, "/".join([base.rstrip("/")] + parts[:depth]) or "/"))
    return out
