# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""tmpfs options declared once: TMPFS_OPTIONS drives the entry keys, their checks, the mount options, what a
live remount may change, the kernel they need, and (through a unit test) the roles' argument specs and docs.

Adding a tmpfs option is a row here and its description in the argument specs (tests/unit/.../
test__tmpfs_options.py says what to paste where). Options older than this table (size, nr_inodes, huge, mpol,
noswap) are still checked in _plan.py, mode in _plan_core.py.

Quotas (Linux 6.6, CONFIG_TMPFS_QUOTA): the kernel takes none of them on a remount, neither to turn them on or
off nor to change a limit (Documentation/filesystems/tmpfs.rst), so a live tmpfs whose quotas differ from the
request is refused rather than remounted: see live_differences().
"""

from __future__ import annotations

from ansible_collections.ramdisk.provision.plugins.module_utils._size import SizeError, format_size, parse_count

# The kernel keeps quota limits as signed 64-bit numbers and refuses larger ones ("too large").
QUOTA_LIMIT_MAX = 2 ** 63 - 1
QUOTA_KERNEL = (6, 6)


class TmpfsOption(object):
    """One entry key that becomes one tmpfs mount option.

    kind: 'flag' (a boolean: the bare option when true) or 'bytes' / 'count' (a positive number with an optional
    k, m or g suffix, written as a plain number). requires: the flag that must be on for it to mean anything.
    support: the key of ansible_facts['ramdisk'].support that says the kernel takes it. remount: whether a live
    remount can change it.
    """

    def __init__(self, name, kind, description, requires=None, support=None, remount=False, maximum=None):
        self.name = name
        self.kind = kind
        self.description = description
        self.requires = requires
        self.support = support
        self.remount = remount
        self.maximum = maximum

    @property
    def spec_type(self):
        return "bool" if self.kind == "flag" else "raw"


def _quota_limit(who, what):
    unit = "bytes, with an optional k, m or g suffix (e.g. 512m)" if what == "block" else \
        "files and directories, with an optional k suffix (e.g. 10k)"
    return TmpfsOption(
        "%squota_%s_hardlimit" % (who, what), "bytes" if what == "block" else "count",
        "The default %s hard limit of every %s but root, in %s; needs %squota. Each %s's limit can still be set "
        "with setquota. Linux 6.6 and later; cannot be changed on a live mount." % (
            "space" if what == "block" else "inode", "user" if who == "usr" else "group", unit, who,
            "user" if who == "usr" else "group"),
        requires="%squota" % who, support="tmpfs_quota", maximum=QUOTA_LIMIT_MAX)


TMPFS_OPTIONS = (
    TmpfsOption("usrquota", "flag",
                "Account and limit what each user stores (tmpfs user quotas), so one user cannot fill a shared "
                "mount such as /tmp. Linux 6.6 and later, built with CONFIG_TMPFS_QUOTA; cannot be turned on or off "
                "on a live mount.", support="tmpfs_quota"),
    TmpfsOption("grpquota", "flag",
                "Account and limit what each group stores (tmpfs group quotas). Linux 6.6 and later, built with "
                "CONFIG_TMPFS_QUOTA; cannot be turned on or off on a live mount.", support="tmpfs_quota"),
    _quota_limit("usr", "block"),
    _quota_limit("usr", "inode"),
    _quota_limit("grp", "block"),
    _quota_limit("grp", "inode"),
)
NAMES = tuple(option.name for option in TMPFS_OPTIONS)
BY_NAME = {option.name: option for option in TMPFS_OPTIONS}
# What the kernel needs for each support key, for the message of a kernel that lacks it.
SUPPORT_NEEDS = {"tmpfs_quota": "Linux 6.6 or later built with CONFIG_TMPFS_QUOTA"}


def check_options(entry, values, support, size_bytes):
    """The table's options of one entry, checked: {name: value} with only those set (flags only when true).

    ENTRY is a _plan_core.Entry (errors name host, variable, value and fix); VALUES the entry over its defaults;
    SUPPORT ansible_facts['ramdisk'].support; SIZE_BYTES the mount's size (None when unknown).
    """
    checked = {}
    for option in TMPFS_OPTIONS:
        value = values.get(option.name)
        if value is None:
            continue
        if option.kind == "flag":
            if isinstance(value, str) and value.strip().lower() in ("true", "yes", "on", "1", "false", "no", "off",
                                                                    "0"):
                value = value.strip().lower() in ("true", "yes", "on", "1")
            if not isinstance(value, bool):
                entry.error(option.name, value, "not a boolean", "Use true or false.")
                continue
            if value:
                checked[option.name] = True
            continue
        try:
            number = parse_count(value)
        except SizeError as exc:
            example = "512m" if option.kind == "bytes" else "10k"
            entry.error(option.name, value, str(exc), "Use a positive whole number, optionally with k, m or g (e.g. "
                        "%s); leave it out for no default limit." % example)
            continue
        if option.maximum is not None and number > option.maximum:
            entry.error(option.name, value, "above %d, the largest limit the kernel takes" % option.maximum,
                        "Use a real limit, such as %s." % ("512m" if option.kind == "bytes" else "10k"))
            continue
        if option.kind == "bytes" and size_bytes is not None and number > size_bytes:
            entry.error(option.name, value, "%s, above the mount's size of %s, so it would never apply" % (
                format_size(number), format_size(size_bytes)),
                "Use at most the size, e.g. %s for a quarter of it." % _count_text(size_bytes // 4))
            continue
        checked[option.name] = number
    for name in list(checked):
        option = BY_NAME[name]
        if option.requires and option.requires not in checked:
            entry.error(name, values.get(name), "a limit without %s: true, which the kernel refuses" % option.requires,
                        "Set %s: true as well, or leave %s out." % (option.requires, name))
            del checked[name]
    wanted = {BY_NAME[name].support for name in checked if BY_NAME[name].support}
    for key in sorted(wanted):
        if not (support or {}).get(key):
            names = [name for name in checked if BY_NAME[name].support == key]
            entry.error(names[0], checked[names[0]], "not supported by this host's kernel %s (%s needs %s; %s)" % (
                (support or {}).get("kernel", "(unknown)"), ", ".join(names), SUPPORT_NEEDS[key],
                (support or {}).get(key + "_from") or "no fact said so"),
                "Leave %s out for this host, or give it such a kernel." % " and ".join(names))
    return checked


def mount_options(checked):
    """The mount options of CHECKED (check_options()), in the table's order."""
    out = []
    for option in TMPFS_OPTIONS:
        if option.name in checked:
            out.append(option.name if option.kind == "flag" else "%s=%d" % (option.name, checked[option.name]))
    return out


def live_value(option, live_options):
    """What a live tmpfs shows for OPTION in its options (/proc/self/mountinfo): True/None or a number/None."""
    for text in live_options or ():
        key, sep, value = text.partition("=")
        if key != option.name:
            continue
        if option.kind == "flag":
            return True
        try:
            return parse_count(value) if sep else None
        except SizeError:
            return None
    if option.kind == "flag" and option.name in ("usrquota", "grpquota") and "quota" in (live_options or ()):
        return True
    return None


def live_differences(checked, live_options):
    """(remount changes, changes the kernel cannot make live) between CHECKED and a live tmpfs's options:
    each a list of 'name live -> wanted'."""
    live_only, cannot = [], []
    for option in TMPFS_OPTIONS:
        wanted = checked.get(option.name)
        have = live_value(option, live_options)
        if wanted == have:
            continue
        text = "%s %s -> %s" % (option.name, _word(option, have), _word(option, wanted))
        (live_only if option.remount else cannot).append(text)
    return live_only, cannot


def remount_options(checked):
    """The table's options a remount passes: only the ones the kernel changes live."""
    return mount_options({name: value for name, value in checked.items() if BY_NAME[name].remount})


def _count_text(number):
    """NUMBER as the keys take it: 268435456 -> '256m'."""
    for suffix, unit in (("g", 1024 ** 3), ("m", 1024 ** 2), ("k", 1024)):
        if number >= unit and number % unit == 0:
            return "%d%s" % (number // unit, suffix)
    return str(number)


def _word(option, value):
    if option.kind == "flag":
        return "true" if value else "false"
    return "unset" if value is None else str(value)
