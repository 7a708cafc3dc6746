# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The planning core the planners share: the checks of a mount entry and the decision of its action.

_plan (tmpfs, ramfs), _zram_plan and _brd_plan check their entries with it (Entry collects each entry's error
sentences, which name the host, the variable, the bad value and the fix; intake, check_path, check_root,
check_extra_options, check_persist, as_bool), make a zram or brd file system's mount entry (block_filesystem),
check the backings between entries (check_backings) and decide each mount's action (decide: mount, migrate,
remount, unmount, ok or refuse, from ramdisk_facts). _policy, _host_plan, _survey, _persist, _persist_steps,
_mount_steps and the filters take its path rules, mount_token, holds_journal, PERSIST_KEEP and plan_summary.
It never touches the host.

Paths: REFUSED_DIRECTORIES are never mounted over (the system runs from them, or a package manager or systemd
keeps its state there), some with everything under them; /run/build, /var/tmp, /var/cache/x and most /var/lib/x
are allowed. A space and other printable characters are fine (fstab and the units escape them); control and
invisible characters are not.

persist (any backend's file-system mount) keeps a copy of the mount in a backing directory on disk:
restored at boot, written back by a timer and at stop. check_persist() and check_backings() check it;
the backing must be on disk, outside every RAM mount, and not shared.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths
from ansible_collections.ramdisk.provision.plugins.module_utils._size import format_size
from ansible_collections.ramdisk.provision.plugins.module_utils import _mount_steps
from ansible_collections.ramdisk.provision.plugins.module_utils import _tmpfs_options
from ansible_collections.ramdisk.provision.plugins.module_utils._tree import DROPPABLE_XATTRS

# Directories a RAM mount must never go over: (path, whether everything under it is refused too, what it holds).
# Hidden, the host loses what it runs from; copied in (migrate), what is written there later is gone at the next
# boot while the rest of the system remembers it (a package database then no longer matches the installed files).
# docs/security.md lists them from here (tests/unit/test_docs.py checks it).
REFUSED_DIRECTORIES = (
    ("/", False, "the whole system"),
    ("/bin", True, "the system's programs"),
    ("/boot", True, "the kernels and the boot loader"),
    ("/dev", True, "device nodes, managed by the kernel and udev"),
    ("/etc", True, "the host's configuration, this collection's records among it"),
    ("/home", False, "the users' home directories"),
    ("/lib", True, "the system's libraries and kernel modules (and Alpine's package database, /lib/apk)"),
    ("/lib32", True, "the system's libraries"),
    ("/lib64", True, "the system's libraries and the dynamic loader"),
    ("/libx32", True, "the system's libraries"),
    ("/proc", True, "the kernel's view of processes"),
    ("/root", False, "root's home directory, with its SSH keys"),
    ("/run", False, "the runtime state of systemd and every service"),
    ("/run/dbus", True, "the system bus socket"),
    (_host_paths.RUN_DIR, True, "this collection's lock and staging mounts"),
    ("/run/systemd", True, "systemd's runtime state and sockets"),
    ("/run/udev", True, "udev's device database"),
    ("/sbin", True, "the system's programs"),
    ("/sys", True, "the kernel's view of devices"),
    ("/usr", True, "the installed programs, libraries and rpm's database (/usr/lib/sysimage)"),
    ("/var", False, "the system's variable data"),
    ("/var/db/pkg", True, "Portage's package database"),
    ("/var/lib", False, "the state of every service"),
    ("/var/lib/apt", True, "apt's package state (which packages were installed automatically)"),
    ("/var/lib/dnf", True, "dnf's package history and state"),
    ("/var/lib/dpkg", True, "dpkg's package database"),
    ("/var/lib/pacman", True, "pacman's package database"),
    (_host_paths.STATE_DIR, True, "this collection's intent journal"),
    ("/var/lib/rpm", True, "rpm's package database"),
    ("/var/lib/snapd", True, "snapd's state"),
    ("/var/lib/systemd", True, "systemd's state (timer stamps, the random seed, lingering users)"),
    ("/var/lib/yum", True, "yum's package history and state"),
    ("/var/lib/zypp", True, "zypper's package state"),
)
# Inside a refused tree, these stay the administrator's own: no package manager writes there.
REFUSED_EXCEPTIONS = ("/usr/local",)
SYSTEM_PATHS = frozenset(path for path, _tree, _why in REFUSED_DIRECTORIES)


def refused_directory(path):
    """(directory, what it holds) when the normalized PATH is, or is inside, a directory no RAM mount may go over."""
    if any(path == allowed or is_under(path, allowed) for allowed in REFUSED_EXCEPTIONS):
        return None
    for directory, tree, why in REFUSED_DIRECTORIES:
        if path == directory or (tree and is_under(path, directory)):
            return directory, why
    return None


FLAG_KEYS = ("noswap", "noatime", "nosuid", "nodev", "noexec")
# File systems the roles make on RAM block devices (zram, brd).
BLOCK_FSTYPES = ("ext4", "xfs")
# A flag set to true contradicts these extra options.
FLAG_OPPOSITES = {
    "noatime": ("atime", "relatime", "strictatime"),
    "nosuid": ("suid",),
    "nodev": ("dev",),
    "noexec": ("exec",),
    "noswap": (),
}
# Options that have their own key in an entry.
KEYED_OPTIONS = {
    "size": "size", "nr_blocks": "size", "nr_inodes": "nr_inodes", "mode": "mode", "uid": "owner",
    "gid": "group", "huge": "huge", "mpol": "mpol", "noswap": "noswap", "noatime": "noatime",
    "nosuid": "nosuid", "nodev": "nodev", "noexec": "noexec", "quota": "usrquota and grpquota",
}
KEYED_OPTIONS.update((name, name) for name in _tmpfs_options.NAMES)
ALLOWED_EXTRA_OPTIONS = frozenset((
    "relatime", "strictatime", "nodiratime", "lazytime",
    "atime", "diratime", "ro", "rw", "sync", "async", "dirsync", "exec", "suid", "dev", "nofail",
    "noauto", "auto", "defaults", "inode32", "inode64", "user", "nouser",
    "users", "_netdev",
))
ALLOWED_OPTION_PREFIXES = ("x-systemd.", "x-mount.", "comment=")
PERSIST_KEYS = ("backing", "interval", "services", "keep", "stop_services")
PERSIST_INTERVAL = "15min"
# Complete copies a backing keeps, current included: the one before it too, should the last sync copy a mistake.
PERSIST_KEEP = 2
# journald writes its persistent journal here. A persisted mount at it or above it (/var/log) is a journal mount:
# systemd-journal-flush.service joins persist.services (its stop moves journald out of /var/log/journal, its start
# back in), so the restore comes before journald writes there and the last sync after it left.
JOURNAL_DIR = "/var/log/journal"
JOURNAL_FLUSH = "systemd-journal-flush.service"
# Where a backing copy would not outlive a reboot, or would be cleaned away.
BACKING_REFUSED_TREES = (
    ("/proc", "a kernel file system"),
    ("/sys", "a kernel file system"),
    ("/dev", "device nodes and /dev/shm, in RAM"),
    ("/run", "in RAM (tmpfs) and empty at every boot"),
    ("/tmp", "emptied at boot or by age (systemd-tmpfiles)"),
    ("/var/tmp", "emptied by age (systemd-tmpfiles)"),
)
# Paths the persist units and the helper's arguments carry as they are: no spaces, quotes, '%' or '\\'.
_UNIT_SAFE_PATH_RE = re.compile(r"^/[A-Za-z0-9._@+/-]*\Z")
# systemd.time(7) time spans: numbers, each with an optional unit (seconds without one).
_TIMESPAN_UNITS = {
    "": 1, "s": 1, "sec": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hr": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
    "w": 604800, "week": 604800, "weeks": 604800,
    "M": 2629800, "month": 2629800, "months": 2629800,
    "y": 31557600, "year": 31557600, "years": 31557600,
    "ms": 0.001, "msec": 0.001, "us": 0.000001, "usec": 0.000001,
}
_TIMESPAN_PART_RE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)")
# A unit name with its type; a template (name@.service) needs an instance to be ordered against.
_UNIT_NAME_RE = re.compile(r"^[A-Za-z0-9:_.\\-]+(?:@[A-Za-z0-9:_.\\-]+)?\.(?:service|socket|target|mount|path|timer)\Z")
# \Z, not $: $ also matches before a final newline, and "0755\n" is no mode.
_MODE_RE = re.compile(r"^[0-7]{3,4}\Z")
# Linux's limits: a name of NAME_MAX bytes, a path of PATH_MAX - 1 bytes; (uid_t)-1 is no id at all.
NAME_MAX = 255
PATH_MAX = 4095
ID_MAX = 4294967294
_ACCOUNT_RE = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.-]*\$?\Z")
_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


class Entry(object):
    """Collects the errors of one list entry with the words that name it."""

    def __init__(self, host, var_name, index, errors, label=None):
        self.host = host
        # An entry may carry the name the user knows it by (the role's tmpfs_tmp, say).
        self.where = label if isinstance(label, str) and label else "%s[%d]" % (var_name, index)
        self.errors = errors
        self.ok = True

    def error(self, key, value, problem, fix):
        name = self.where if key is None else "%s.%s" % (self.where, key)
        self.errors.append("Host %s: %s is %s: %s. %s" % (self.host, name, show(value), problem, fix))
        self.ok = False


def show(value):
    if isinstance(value, str):
        # A control character is shown escaped, so a message never carries a raw newline.
        return "'%s'" % value if value.isprintable() else repr(value)
    if value is None:
        return "missing"
    return repr(value)


def as_bool(entry, key, value):
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    entry.error(key, value, "not a boolean", "Use true or false.")
    return None


def normalize_path(path):
    """'/a//b/./c/' -> '/a/b/c'; returns None for a path with '..'."""
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        return None
    return "/" + "/".join(parts)


def is_under(path, parent):
    return parent == "/" or path.startswith(parent.rstrip("/") + "/")


def path_text_problem(raw):
    """What makes RAW unusable as a mount point, or None.

    A space, '#', '\\', quotes, '%' and '$' are fine: /etc/fstab holds them escaped (\\040, \\134) and the unit and
    tmpfiles.d lines quote them (_mount_steps). Refused: control characters (a newline would end a line of every
    file the path goes into), other characters that do not show as themselves (no-break or zero-width spaces,
    direction marks), text that is not UTF-8, names that begin or end with a space (unit files drop a trailing
    one, and a person cannot see it), a component over NAME_MAX or a path over PATH_MAX (both in bytes).
    """
    bad = [char for char in raw if unicodedata.category(char) == "Cc"]
    if bad:
        return ("a path with a control character (%s)" % ", ".join(sorted(set(repr(char) for char in bad))),
                "Write the path without newlines, tabs or other control characters.")
    if any(unicodedata.category(char) == "Cs" for char in raw):
        return ("a path that is not valid UTF-8", "Give the path as UTF-8 text.")
    hidden = [char for char in raw if char != " " and not char.isprintable()]
    if hidden:
        return ("a path with a character that does not show as itself (%s)" % ", ".join(
            sorted(set("U+%04X" % ord(char) for char in hidden))),
            "Write the path with visible characters; a plain space is fine, but no-break spaces, zero-width and "
            "direction marks are not.")
    if any(part != part.strip(" ") for part in raw.split("/")):
        return ("a path with a name that begins or ends with a space",
                "Remove the space at the start or end of the name; spaces inside a name are fine.")
    encoded = raw.encode("utf-8", "surrogateescape")
    if len(encoded) > PATH_MAX:
        return ("longer than %d bytes (%d)" % (PATH_MAX, len(encoded)), "Choose a shorter path.")
    long_parts = [part for part in encoded.split(b"/") if len(part) > NAME_MAX]
    if long_parts:
        return ("a path with a path component longer than %d bytes (%d)" % (NAME_MAX, len(long_parts[0])),
                "Linux refuses names over %d bytes: shorten that directory name." % NAME_MAX)
    return None


def check_path(entry, raw):
    if not isinstance(raw, str) or not raw.strip():
        entry.error("path", raw, "not a path", "Give the absolute path of the mount point, e.g. /tmp.")
        return None
    problem = path_text_problem(raw)
    if problem is not None:
        entry.error("path", raw, problem[0], problem[1])
        return None
    if not raw.startswith("/"):
        entry.error("path", raw, "a relative path", "Give an absolute path, e.g. /%s." % raw.lstrip("./"))
        return None
    path = normalize_path(raw)
    if path is None:
        entry.error("path", raw, "a path with '..'", "Write the path without '..' components.")
        return None
    refused = refused_directory(path)
    if refused is not None:
        entry.error(
            "path", raw, "a system path that must not be hidden under a RAM-backed mount (%s holds %s)" % refused,
            "A RAM mount there would hide it, or with migrate lose at the next boot what is written there. Choose a "
            "directory of your own such as /tmp, /var/tmp or /var/cache/<name>.",
        )
        return None
    return path


def check_mode(entry, mode):
    if isinstance(mode, int) and not isinstance(mode, bool):
        entry.error("mode", mode, "a number, which YAML may have read as decimal",
                    "Quote the octal mode as a string, e.g. '1777' or '0755'.")
        return None
    if not isinstance(mode, str) or not _MODE_RE.match(mode):
        entry.error("mode", mode, "not an octal mode", "Use a quoted octal string such as '1777' or '0755'.")
        return None
    if int(mode, 8) & 0o4000:
        entry.error("mode", mode, "a mode with the setuid bit, which means nothing on a directory",
                    "Leave it out: use e.g. '1777' (sticky, for shared temporary space), '2775' or '0755'.")
        return None
    # The kernel shows tmpfs modes as %03o: 0755 -> 755, 1777 -> 1777.
    return "%03o" % int(mode.strip(), 8)


def check_account(entry, key, value):
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0 or value > ID_MAX:
            entry.error(key, value, "not a valid id (ids run from 0 to %d)" % ID_MAX,
                        "Use a user or group name, or an id from 0 to %d." % ID_MAX)
            return None
        return value
    if not isinstance(value, str) or not _ACCOUNT_RE.match(value):
        entry.error(key, value, "not a valid user or group name", "Use a name such as root or an id such as 0.")
        return None
    return value


def intake(entry, item, entry_keys, defaults, what):
    """The entry's values over the defaults, or None when it is not a mapping; unknown keys are errors."""
    if not isinstance(item, dict):
        entry.error(None, item, "not a mapping", "Give each %s as a mapping." % what)
        return None
    for key in item:
        if key not in entry_keys:
            entry.error(key, item[key], "an unknown key", "Valid keys are %s." % ", ".join(entry_keys))
    values = dict(defaults)
    values.update({key: value for key, value in item.items() if value is not None})
    return values


def check_root(entry, values):
    """Mode, owner and group of a mount's root, each checked, or None where not given or wrong."""
    mode, owner, group = values.get("mode"), values.get("owner"), values.get("group")
    return (None if mode is None else check_mode(entry, mode),
            None if owner is None else check_account(entry, "owner", owner),
            None if group is None else check_account(entry, "group", group))


def check_extra_options(entry, options, flags):
    if options is None:
        return []
    if isinstance(options, str) or not isinstance(options, (list, tuple)):
        entry.error("options", options, "not a list", "Give extra mount options as a list, e.g. ['nofail'].")
        return None
    extras = []
    for position, option in enumerate(options):
        key = "options[%d]" % position
        if not isinstance(option, str) or not option.strip():
            entry.error(key, option, "not an option string", "Give each option as a string such as 'nofail'.")
            continue
        if not option.strip().isprintable() or any(char.isspace() for char in option.strip()):
            entry.error(key, option, "an option with white space or a control character, which %s cannot "
                        "hold" % _host_paths.FSTAB, "Write the option without spaces, tabs or newlines.")
            continue
        option = option.strip()
        if "," in option:
            entry.error(key, option, "several options in one string",
                        "Give one option per list item, e.g. %s." % [part for part in option.split(",") if part])
            continue
        name = option.partition("=")[0]
        if name in KEYED_OPTIONS:
            entry.error(key, option, "an option with its own key",
                        "Set %s in the entry instead of in options." % KEYED_OPTIONS[name])
            continue
        if name not in ALLOWED_EXTRA_OPTIONS and not option.startswith(ALLOWED_OPTION_PREFIXES):
            entry.error(key, option, "not a tmpfs or mount option this role knows",
                        "Remove it, or use one of the tmpfs/VFS options such as nofail, lazytime or "
                        "x-systemd.requires=<unit>.")
            continue
        for flag, value in flags.items():
            if value and name in FLAG_OPPOSITES[flag]:
                entry.error(key, option, "contradicting %s: true" % flag,
                            "Remove '%s' or set %s: false." % (option, flag))
                break
        else:
            if option not in extras:
                extras.append(option)
    return extras


def mount_token(path):
    """The name a mount's files and units carry: readable and unique (/srv/a-b and /srv/a/b differ in the hash).

    The mount role computes the same in Jinja for entries that come without one.
    """
    return "%s-%s" % (re.sub(r"[^A-Za-z0-9_.]", "-", path[1:]), hashlib.sha1(path.encode("utf-8")).hexdigest()[:8])


def timespan_seconds(value):
    """Seconds in a systemd time span such as 30s, 5min, 1h30min or 900 (seconds); None if it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    total = 0.0
    position = 0
    while position < len(text):
        match = _TIMESPAN_PART_RE.match(text, position)
        if match is None or match.end() == position or match.group(2) not in _TIMESPAN_UNITS:
            return None
        total += float(match.group(1)) * _TIMESPAN_UNITS[match.group(2)]
        position = match.end()
        while position < len(text) and text[position].isspace():
            position += 1
    return total


def holds_journal(path):
    """Whether a mount at PATH holds journald's persistent journal (PATH is /var/log/journal or a directory above it)."""
    return isinstance(path, str) and (path == JOURNAL_DIR or is_under(JOURNAL_DIR, path))


def check_persist(entry, value, path):
    """An entry's persist, normalized to {'backing', 'interval', 'interval_seconds', 'services', 'keep',
    'stop_services'}, or None when off.

    PATH is the entry's checked mount point (None when it was wrong); errors go to ENTRY.
    """
    if value is None or value is False:
        return None
    example = "{backing: /var/lib/ramdisk-backing/<name>, interval: 15min, services: [<unit>.service]}"
    if value is True:
        entry.error("persist", value, "persist without a backing directory",
                    "Give persist as a mapping that names the directory on disk keeping the copy, e.g. %s." % example)
        return None
    if not isinstance(value, dict):
        entry.error("persist", value, "not a mapping", "Give persist as a mapping such as %s, or null to turn it off."
                    % example)
        return None
    ok = entry.ok
    entry.ok = True
    for key in value:
        if key not in PERSIST_KEYS:
            entry.error("persist.%s" % key, value[key], "an unknown key", "Valid keys are %s." % ", ".join(PERSIST_KEYS))

    backing = _check_backing(entry, value.get("backing"), path)
    interval = value.get("interval")
    if interval is None:
        interval = PERSIST_INTERVAL
    seconds = timespan_seconds(interval)
    if seconds is None:
        entry.error("persist.interval", interval, "not a systemd time span",
                    "Use a span such as 30s, 5min, 1h or 1h30min (a plain number is seconds).")
    elif seconds < 1:
        entry.error("persist.interval", interval, "shorter than a second",
                    "Use a span of at least 1s, such as 30s, 5min or 1h; each sync reads the whole mount.")

    services = value.get("services")
    if services is None:
        services = []
    if isinstance(services, str) or not isinstance(services, (list, tuple)):
        entry.error("persist.services", services, "not a list of unit names",
                    "Give a list such as [postgresql@15-main.service], or [] for none.")
        services = []
    for position, unit in enumerate(services):
        if not isinstance(unit, str) or not _UNIT_NAME_RE.match(unit):
            fix = "Write the full unit name with its type, e.g. postgresql@15-main.service."
            if isinstance(unit, str) and "@." in unit:
                fix = "Name an instance of the template, e.g. %s." % unit.replace("@.", "@<instance>.")
            elif isinstance(unit, str) and re.match(r"^[A-Za-z0-9:_.\\-]+(?:@[A-Za-z0-9:_.\\-]+)?$", unit):
                fix = "Write the unit's type too: '%s.service'." % unit
            entry.error("persist.services[%d]" % position, unit, "not a unit name", fix)
    keep = _check_keep(entry, value.get("keep"))
    stop_services = value.get("stop_services")
    stop_services = False if stop_services is None else as_bool(entry, "persist.stop_services", stop_services)
    if stop_services is True and not services:
        entry.error("persist.stop_services", value.get("stop_services"), "set, and persist.services names no unit "
                    "to stop for each interval sync",
                    "Name the units that write the data in persist.services, e.g. [postgresql@15-main.service], or "
                    "set persist.stop_services: false.")
    if path == "/tmp":
        entry.error("persist", value, "set on /tmp, and /tmp is emptied at boot by design",
                    "Set persist: null for /tmp; persist is for a data directory such as /var/lib/<name>.")
    if path is not None and not _UNIT_SAFE_PATH_RE.match(path):
        entry.error("path", path, "a path the persist units cannot carry (only letters, digits and . _ - + @ /)",
                    "Choose a mount point without spaces or other special characters, or set persist: null.")

    persisted = entry.ok
    entry.ok = ok and persisted
    if not persisted:
        return None
    if holds_journal(path) and JOURNAL_FLUSH not in services:
        services = list(services) + [JOURNAL_FLUSH]
    return {
        "backing": backing,
        "interval": interval.strip() if isinstance(interval, str) else "%gs" % seconds,
        "interval_seconds": seconds,
        "services": list(dict.fromkeys(services)),
        "keep": keep,
        "stop_services": stop_services,
    }


def _check_keep(entry, raw):
    """persist.keep as an int of 1 or more (PERSIST_KEEP when left out); a number given as text is taken."""
    if raw is None:
        return PERSIST_KEEP
    fix = ("Give how many copies the backing keeps, the current one included: 1 or more, such as %d "
           "(the default: the current copy and the one before it)." % PERSIST_KEEP)
    if isinstance(raw, str) and re.match(r"^\s*-?\d+\s*$", raw):
        number = int(raw)
    elif isinstance(raw, int) and not isinstance(raw, bool):
        number = raw
    else:
        entry.error("persist.keep", raw, "not a whole number of copies", fix)
        return None
    if number < 1:
        entry.error("persist.keep", raw, "fewer than one copy, and the backing always keeps the current one", fix)
        return None
    return number


def _check_backing(entry, raw, path):
    fix = "Give the directory on disk that keeps the copy, e.g. /var/lib/ramdisk-backing/<name>."
    if raw is None:
        entry.error("persist.backing", raw, "persist without a backing directory",
                    "Set persist.backing to the directory on disk that keeps the copy, e.g. "
                    "/var/lib/ramdisk-backing/<name>.")
        return None
    if not isinstance(raw, str) or not raw.strip():
        entry.error("persist.backing", raw, "not a path", fix)
        return None
    if not raw.startswith("/"):
        entry.error("persist.backing", raw, "a relative path", "Give an absolute path, e.g. /%s." % raw.lstrip("./"))
        return None
    backing = normalize_path(raw)
    if backing is None:
        entry.error("persist.backing", raw, "a path with '..'", "Write the path without '..' components.")
        return None
    if not _UNIT_SAFE_PATH_RE.match(backing):
        entry.error("persist.backing", raw, "a path the persist units cannot carry (only letters, digits and "
                    ". _ - + @ /)", "Choose a directory without spaces or other special characters.")
        return None
    if backing in SYSTEM_PATHS or backing in ("/tmp", "/var/tmp", "/srv", "/opt", "/mnt", "/media"):
        entry.error("persist.backing", raw, "a system directory, which the backing would take over",
                    "Use a directory of its own, e.g. /var/lib/ramdisk-backing/<name>.")
        return None
    for tree, why in BACKING_REFUSED_TREES:
        if is_under(backing, tree):
            entry.error("persist.backing", raw, "under %s, which is %s, so the copy would not outlive a reboot"
                        % (tree, why), "Put the backing on disk, e.g. /var/lib/ramdisk-backing/<name>.")
            return None
    if path is not None and (backing == path or is_under(backing, path)):
        entry.error("persist.backing", raw, "inside the RAM mount '%s' itself, so it would be lost with it" % path,
                    "Put the backing on disk outside the mount, e.g. /var/lib/ramdisk-backing/<name>.")
        return None
    if path is not None and is_under(path, backing):
        entry.error("persist.backing", raw, "a directory that holds the RAM mount '%s'" % path,
                    "Give the backing a directory of its own, e.g. /var/lib/ramdisk-backing/<name>.")
        return None
    return backing


def check_backings(planned, facts, host, errors):
    """Rules between entries: a backing is not inside a RAM mount of the request or a live one, nor shared.

    PLANNED are mount entries (each with label, path, state, persist); errors name the host and the entries.
    """
    mounted = [entry for entry in planned if entry["state"] == "mounted"]
    live = [mount for mount in (facts or {}).get("mounts") or () if mount.get("path")]
    seen = {}
    for entry in planned:
        persist = entry.get("persist")
        if not persist or not persist.get("backing"):
            continue
        backing = persist["backing"]
        name = "%s.persist.backing" % entry["label"]
        for other in mounted:
            if other is not entry and (backing == other["path"] or is_under(backing, other["path"])):
                errors.append("Host %s: %s is '%s': it is inside %s.path '%s', a RAM mount of this request, so the "
                              "copy would not outlive a reboot. Put the backing on disk, outside every RAM mount."
                              % (host, name, backing, other["label"], other["path"]))
                break
        else:
            for mount in live:
                if backing == mount["path"] or is_under(backing, mount["path"]):
                    errors.append("Host %s: %s is '%s': it is inside the %s mounted at '%s', which is in RAM, so the "
                                  "copy would not outlive a reboot. Put the backing on disk, outside every RAM mount."
                                  % (host, name, backing, mount.get("fstype"), mount["path"]))
                    break
        for other_backing, other_name in seen.items():
            if backing == other_backing or is_under(backing, other_backing) or is_under(other_backing, backing):
                errors.append("Host %s: %s is '%s': it overlaps %s '%s'. Give every persisted mount a backing "
                              "directory of its own, none inside another." % (host, name, backing, other_name,
                                                                              other_backing))
                break
        seen[backing] = name


def _live_option(options, name, default=None):
    for option in options or ():
        key, sep, value = option.partition("=")
        if key == name:
            return value if sep else True
    return default


def _find_live_mount(facts, path):
    live = None
    for mount in facts.get("mounts") or ():
        if mount.get("path") == path:
            live = mount
    return live


def _path_facts(facts, raw, path):
    paths = facts.get("paths") or {}
    for key in (path, raw, path + "/"):
        if key in paths:
            return paths[key]
    return None


def decide(entry, facts, host, var_name, errors):
    path = entry["path"]
    where = entry["label"]
    live = _find_live_mount(facts, path)
    path_facts = _path_facts(facts, entry["path_given"], path)
    entry["current"] = live

    if path_facts is None and live is None and entry["state"] == "mounted":
        errors.append("Host %s: %s.path is '%s': ramdisk_facts did not look at it, so its contents are unknown. "
                      "Run ramdisk.provision.ramdisk_facts with paths that include it." % (host, where, path))
        entry["action"] = "refuse"
        return
    path_facts = path_facts or {}
    backend = entry["fstype"]
    other = None
    if live is None and path_facts.get("mountpoint"):
        other = (path_facts.get("fstype"), path_facts.get("source"))
    elif live is not None and live.get("fstype") != backend:
        other = (live.get("fstype"), live.get("source"))
    if other is not None:
        errors.append("Host %s: %s.path is '%s': a %s file system from %s is mounted there, not %s. Unmount it "
                      "yourself or choose another path; the %s role will not replace it."
                      % (host, where, path, other[0], other[1], backend, backend))
        entry["action"] = "refuse"
        return

    if entry["state"] == "absent":
        entry["action"] = "unmount" if live is not None else "absent-ok"
        return

    if live is None:
        if path_facts.get("exists") and path_facts.get("is_dir") is False:
            errors.append("Host %s: %s.path is '%s': it is a file, not a directory. Remove or move it, or choose "
                          "another path." % (host, where, path))
            entry["action"] = "refuse"
        elif not path_facts.get("exists") or path_facts.get("empty"):
            entry["action"] = "mount"
        elif entry["migrate"]:
            entry["action"] = "migrate"
            _check_migration_fits(entry, path_facts, host, where, errors)
            _check_migration_xattrs(entry, path_facts, facts.get("support") or {}, host, where, errors)
        else:
            errors.append("Host %s: %s.path is '%s': the directory is not empty (%s in %s entries), and mounting "
                          "over it would hide that data. Set %s.migrate: true to copy it into the new tmpfs, or "
                          "empty the directory." % (
                              host, where, path, format_size(path_facts.get("usage_bytes") or 0),
                              path_facts.get("inodes"), where))
            entry["action"] = "refuse"
        return

    below = path_facts.get("below") or {}
    if backend in ("tmpfs", "ramfs") and (_mount_steps.seeded(entry) or _persisted_without_copy(entry, facts)) and \
            path_facts.get("empty") and below.get("empty") is False:
        # Empty over a directory that holds data: a boot mounted it from its /etc/fstab line and nothing filled it
        # (no systemd to run its copy unit, or the run that wrote the line died before it). Taken as it is, it would
        # hide that data for good; it is replaced by a new mount filled from the disk, as the first run did. (zram
        # and brd file systems go through steps of their own, which do not take this.)
        entry["action"] = "migrate"
        entry["refill"] = True
        _check_migration_fits(entry, below, host, where, errors)
        _check_migration_xattrs(entry, below, facts.get("support") or {}, host, where, errors)
        return

    live_options = live.get("options") or []
    live_noswap = bool(_live_option(live_options, "noswap"))
    changes = []
    refuse = []
    remount = []
    if entry["size_bytes"] is not None:
        remount.append("size=%s" % entry["size_option"])
        if entry["size_bytes"] != live.get("size_bytes"):
            changes.append("size %s -> %s" % (format_size(live.get("size_bytes") or 0), format_size(entry["size_bytes"])))
            used = live.get("used_bytes") or 0
            if entry["size_bytes"] < used:
                refuse.append("the new size %s is below the %s already used" % (
                    format_size(entry["size_bytes"]), format_size(used)))
    if entry["nr_inodes"] is not None:
        remount.append("nr_inodes=%d" % entry["nr_inodes"])
        if entry["nr_inodes"] != live.get("inodes_total"):
            changes.append("nr_inodes %s -> %d" % (live.get("inodes_total"), entry["nr_inodes"]))
            used_inodes = live.get("inodes_used") or 0
            if entry["nr_inodes"] < used_inodes:
                refuse.append("the new nr_inodes %d is below the %d inodes already used" % (
                    entry["nr_inodes"], used_inodes))
    if entry["huge"] is not None:
        remount.append("huge=%s" % entry["huge"])
        live_huge = _live_option(live_options, "huge", "never")
        if entry["huge"] != live_huge:
            changes.append("huge %s -> %s" % (live_huge, entry["huge"]))
    if entry["mpol"] is not None:
        remount.append("mpol=%s" % entry["mpol"])
        live_mpol = _live_option(live_options, "mpol", "default")
        if entry["mpol"] != live_mpol:
            changes.append("mpol %s -> %s" % (live_mpol, entry["mpol"]))
    remount.extend(_tmpfs_options.remount_options(entry.get("tmpfs_options") or {}))
    live_changes, not_live = _tmpfs_options.live_differences(entry.get("tmpfs_options") or {}, live_options) \
        if backend == "tmpfs" else ([], [])
    changes.extend(live_changes)
    for flag in ("noatime", "nosuid", "nodev", "noexec"):
        wanted = flag in entry["options"]
        live_has = _live_option(live_options, flag) is not None
        remount.append(flag if wanted else FLAG_OPPOSITES[flag][1 if flag == "noatime" else 0])
        if wanted != live_has:
            changes.append("%s %s -> %s" % (flag, str(live_has).lower(), str(wanted).lower()))
    if live_noswap and entry["noswap"]:
        # Linux 6.4-6.5 refuse a remount that leaves out noswap on a noswap tmpfs.
        remount.append("noswap")
    if live_noswap != entry["noswap"]:
        entry["noswap_change"] = True
        entry["reboot_required"] = True
        changes.append("noswap %s -> %s (the kernel cannot change it on a live tmpfs; applies at the next mount)"
                       % (str(live_noswap).lower(), str(entry["noswap"]).lower()))
    entry["remount_options"] = remount
    entry["changes"] = changes
    if backend == "ramfs" and entry["ram_bytes"] is not None and (live.get("used_bytes") or 0) > entry["ram_bytes"]:
        # ramfs grows until RAM runs out; the kernel will not stop it, so say so loudly.
        entry["warnings"].append("%s holds %s, above its max_size of %s: ramfs has no limit of its own" % (
            path, format_size(live.get("used_bytes")), format_size(entry["ram_bytes"])))

    if not_live:
        # The kernel takes no quota option on a remount; a silent change at the next boot would leave the host
        # without the limits the run reported, so the live mount is left alone and the run refused.
        errors.append("Host %s: %s.path is '%s': the tmpfs mounted there differs in %s, and the kernel cannot change "
                      "%s on a live tmpfs. Unmount it yourself (after saving what it holds) and run again to mount it "
                      "fresh, or set %s to what the live mount has." % (
                          host, where, path, "; ".join(not_live), "these" if len(not_live) > 1 else "this",
                          " and ".join("%s.%s" % (where, text.split(" ")[0]) for text in not_live)))
        entry["action"] = "refuse"
    elif refuse:
        errors.append("Host %s: %s.path is '%s': %s. Shrinking a tmpfs under its data fails, and a failed remount "
                      "would unmount it and lose the data. Free space first or choose a larger %s.size or "
                      "%s.nr_inodes." % (host, where, path, " and ".join(refuse), where, where))
        entry["action"] = "refuse"
    elif any(not change.startswith("noswap") for change in changes):
        entry["action"] = "remount"
    else:
        entry["action"] = "ok"


def _persisted_without_copy(entry, facts):
    """A migrate with persist whose backing holds no copy yet (FACTS' backings, read on the host): found empty over
    the directory, it was never filled (a power cut before its first copy); taken as it is, the empty RAM would
    become the backing's first copy. Unknown (no such fact, as on the controller): not taken for one."""
    persist = entry.get("persist") or {}
    known = (facts.get("backings") or {}).get(persist.get("backing")) or {}
    return bool(entry.get("migrate") and persist.get("backing") and known.get("current") is False)


def _check_migration_fits(entry, path_facts, host, where, errors):
    """The copy must fit in the new tmpfs, or it would stop half-way (ENOSPC) over the disk data."""
    usage = path_facts.get("usage_bytes") or 0
    inodes = path_facts.get("inodes") or 0
    if not path_facts.get("complete", True):
        errors.append("Host %s: %s.path is '%s': its usage could not be measured in time (at least %s in %s "
                      "entries), so it is unknown whether the copy fits. Raise the scan timeout or empty the "
                      "directory." % (host, where, entry["path"], format_size(usage), inodes))
        entry["action"] = "refuse"
    elif entry["ram_bytes"] is not None and usage > entry["ram_bytes"]:
        key = "max_size" if entry["fstype"] == "ramfs" else "size"
        errors.append("Host %s: %s.%s is %s: the %s already in '%s' would not fit in it. Set %s.%s to at "
                      "least %s, or free space in the directory first." % (
                          host, where, key, show(entry["size"]), format_size(usage), entry["path"], where, key,
                          format_size(usage)))
        entry["action"] = "refuse"
    elif entry["nr_inodes"] is not None and inodes_needed(path_facts) > entry["nr_inodes"]:
        needed = inodes_needed(path_facts)
        xattr_bytes = path_facts.get("xattr_bytes") or 0
        errors.append("Host %s: %s.nr_inodes is %d: the %d entries already in '%s'%s would not fit. Set %s.nr_inodes "
                      "to at least %d." % (
                          host, where, entry["nr_inodes"], inodes, entry["path"],
                          " and their extended attributes (%s, which tmpfs charges to nr_inodes at 1 KiB an inode: "
                          "%d more)" % (format_size(xattr_bytes), needed - inodes) if needed > inodes else "",
                          where, needed))
        entry["action"] = "refuse"


def _check_migration_xattrs(entry, path_facts, support, host, where, errors):
    """The copy must keep every extended attribute, or verifying it fails after the mount was made: user.* ones need
    tmpfs of Linux 6.6 or later, and ramfs keeps none. Those of DROPPABLE_XATTRS are left out with a warning (the
    copy step is told), any other refuses the entry before anything changes."""
    found = path_facts.get("user_xattrs") or {}
    fstype = entry["fstype"]
    # zram and brd file systems (ext4, xfs, btrfs) keep them.
    if not found or fstype not in ("tmpfs", "ramfs") or (fstype == "tmpfs" and support.get("tmpfs_user_xattrs", True)):
        return
    why = ("ramfs holds no extended attributes" if entry["fstype"] == "ramfs" else
           "tmpfs on Linux %s holds no user.* extended attributes (they need Linux 6.6 or later)"
           % support.get("kernel", "(unknown)"))
    kept = dict((name, found[name]) for name in found if name not in DROPPABLE_XATTRS)
    if kept:
        errors.append("Host %s: %s.path is '%s': %s, and the data there has %s: the copy into RAM would lose %s. "
                      "Remove %s (setfattr -x NAME FILE), set %s.migrate: false and empty the directory, or use a "
                      "kernel of 6.6 or later." % (
                          host, where, entry["path"], why,
                          ", ".join("%s (on %d %s, '%s' first)" % (name, count, "entry" if count == 1 else "entries", rel)
                                    for name, (count, rel) in sorted(kept.items())[:5]),
                          "them" if len(kept) > 1 else "it", "them" if len(kept) > 1 else "it", where))
        entry["action"] = "refuse"
        return
    entry["dropped_xattrs"] = sorted(found)
    entry["warnings"].append("%s: the copy into RAM leaves out %s, as %s" % (
        entry["path"], "; ".join("%s on %d %s (%s)" % (name, count, "entry" if count == 1 else "entries",
                                                       DROPPABLE_XATTRS[name])
                                 for name, (count, _rel) in sorted(found.items())), why))


def inodes_needed(path_facts):
    """The nr_inodes a tmpfs needs to take a copy of the directory PATH_FACTS describes: one an entry (a hard link's
    every name: tmpfs charges each), plus what the extended attributes take of the same limit, which tmpfs counts
    as 1 KiB an inode (the scan's xattr_bytes, ACLs excluded: tmpfs keeps those with the inode)."""
    inodes = path_facts.get("inodes") or 0
    return inodes + -(-(path_facts.get("xattr_bytes") or 0) // 1024)


def plan_summary(plan):
    """One line per planned mount, for a person."""
    lines = []
    for entry in plan.get("mounts", []):
        line = "%s: %s" % (entry["path"], entry["action"])
        if entry["state"] == "mounted":
            line += " %s" % entry.get("fstype", "tmpfs")
            if entry.get("ram_bytes") is not None:
                line += " of %s" % format_size(entry["ram_bytes"])
            line += " with %s" % ",".join(entry["options"])
        if entry.get("persist") and entry["state"] == "mounted":
            line += ", kept in %s (synced every %s)" % (entry["persist"]["backing"], entry["persist"]["interval"])
        if entry.get("changes"):
            line += " (%s)" % "; ".join(entry["changes"])
        if entry.get("reboot_required"):
            line += "; reboot required for noswap"
        for warning in entry.get("warnings", []):
            line += "; WARNING: %s" % warning
        lines.append(line)
    for error in plan.get("errors", []):
        lines.append("error: %s" % error)
    return lines


def block_filesystem(entry, values, size_bytes, state, requires):
    """The mount entry of a file system on a RAM block device (zram, brd) for the shared pipeline.

    src is filled in once the device is known; REQUIRES is the unit that makes the device at boot.
    """
    path = check_path(entry, values.get("path"))
    fstype = values.get("fstype", "ext4")
    if fstype not in BLOCK_FSTYPES:
        entry.error("fstype", fstype, "not a file system this role makes on zram", "Use ext4 or xfs.")
    mkfs_options = values.get("mkfs_options") or []
    if isinstance(mkfs_options, str) or not isinstance(mkfs_options, (list, tuple)) or not all(
            isinstance(option, str) for option in mkfs_options):
        entry.error("mkfs_options", mkfs_options, "not a list of strings", "Give them as a list, e.g. ['-m', '0'].")
        mkfs_options = []
    mode, owner, group = check_root(entry, values)
    flags = {flag: as_bool(entry, flag, values.get(flag, False)) for flag in FLAG_KEYS if flag != "noswap"}
    flags["noswap"] = False
    discard = as_bool(entry, "discard", values.get("discard", True))
    extras = check_extra_options(entry, values.get("options"), flags)
    migrate = as_bool(entry, "migrate", values.get("migrate", False))
    persist = check_persist(entry, values.get("persist"), path)
    if persist is not None:
        migrate = True
    if path is None or not entry.ok:
        return None
    # discard hands freed blocks back, so deleted files stop holding RAM; makefs lets systemd make the file
    # system again at boot, on the empty device the REQUIRES unit made. nofail: a device that cannot be made
    # at boot (module gone after a kernel update, no systemd to make it) must not stop the boot in
    # emergency mode. nofail also drops the mount's Before=local-fs.target, which x-systemd.before puts
    # back: without it, systemd-tmpfiles could set owner and mode on the directory under the mount, and
    # services start, before the file system is there.
    options = (["discard"] if discard else []) + [flag for flag in ("noatime", "nosuid", "nodev", "noexec")
                                                  if flags[flag]]
    options += ([] if "nofail" in extras else ["nofail"]) + extras
    if "x-systemd.before=local-fs.target" not in extras:
        options.append("x-systemd.before=local-fs.target")
    options += ["x-systemd.requires=%s" % requires, "x-systemd.makefs"]
    return {
        "index": entry.where,
        "label": entry.where,
        "path": path,
        "path_given": values.get("path"),
        "state": "mounted" if state == "present" else "absent",
        "fstype": fstype,
        "src": None,
        "size": values.get("size"),
        "size_bytes": None,
        "ram_bytes": size_bytes,
        "nr_inodes": None,
        "huge": None,
        "mpol": None,
        "noswap": False,
        "mode": mode,
        "owner": owner,
        "group": group,
        "migrate": migrate,
        "persist": persist,
        "token": mount_token(path),
        "mkfs_options": list(mkfs_options),
        "options": options,
        "remount_options": [],
        "current": None,
        "action": None,
        "changes": [],
        "warnings": [],
        "noswap_change": False,
        "reboot_required": False,
    }
