# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""What persist (a RAM mount kept in a backing directory on disk) needs on a host, decided from what it holds.

The mount role reads, for each planned entry, whether its persist units exist and run, what its backing
directory holds and whether a live RAM mount is empty; review_persist() turns that into one decision per
entry, plus error sentences that name the host, the variable, the bad value and the fix. It never touches
the host. The rule it keeps: no copy of the data is ever silently dropped. Once the units of an entry exist,
the backing is the copy of record; before that, a backing that already holds a copy is only taken when the
RAM side would start empty.

The backing's layout, made by the persist helper: current -> snap-<stamp> (a symlink swapped with rename),
snap-<stamp> (complete copies), .new-<stamp> and .current-<stamp> (a sync under way, or cut short), and
.persist-delta (the state of the syncs that update current in place: _persist_delta.py).
"""

from __future__ import annotations

import os
import re
import shlex

from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths as paths
from ansible_collections.ramdisk.provision.plugins.module_utils import _trust
from ansible_collections.ramdisk.provision.plugins.module_utils._plan_core import PERSIST_KEEP, holds_journal

# What the persist helper keeps in a backing directory; anything else there is not ours.
BACKING_NAMES_RE = re.compile(r"^(?:current|snap-.+|\.new-.+|\.current-.+|\.persist-delta)$")
LIVE_ACTIONS = ("ok", "remount")
KIB = 1024
MIB = 1024 * KIB
# journald's bounds for one journal file (JOURNAL_FILE_SIZE_MIN, and DEFAULT_MAX_SIZE_UPPER of systemd 252).
JOURNAL_FILE_MIN = 512 * KIB
JOURNAL_FILE_MAX = 128 * MIB
# journald's default cap on archived files; each sync of a journal mount archives one per active file (about 72 KiB
# each with few entries, measured on Debian 12), so the cap is raised until the size limit is what decides.
JOURNAL_FILES_DEFAULT = 100
JOURNAL_FILE_FLOOR = 128 * KIB


def unit_names(token):
    """The persist unit, the sync service and its timer of the mount with TOKEN."""
    return {
        "persist": "ramdisk-persist-%s.service" % token,
        "sync": "ramdisk-persist-sync-%s.service" % token,
        "timer": "ramdisk-persist-sync-%s.timer" % token,
    }


def foreign_names(names):
    """Entries of a backing directory that the persist helper did not make, sorted."""
    return sorted(name for name in names or () if not BACKING_NAMES_RE.match(name))


def review_persist(mounts, states, host="localhost"):
    """Decide persist for every planned mount. Returns {'errors', 'warnings', 'decisions'}.

    MOUNTS: planned entries (label, path, token, state, action, persist). STATES: per token what the host
    holds: unit (the persist unit file exists), active (it runs), conf_backing (the backing its earlier run
    recorded, or None), backing_exists, backing_is_dir, current (missing, snapshot or other), names (the
    backing's entries), mount_empty (a live RAM mount holds nothing but lost+found; None when not read) and trust
    (None, or what _trust.check_backing found that root cannot trust: the entry is refused).

    A decision for a mounted entry: source (backing: the RAM mount is filled from the backing's current
    copy; ram: the backing is made from the RAM mount), adopt (persist must be set going: services stopped
    around it, the unit started) and verify (sync: check the backing's new copy against the mount; restore:
    check the mount against the copy it was filled from; None). For an absent entry: release (this
    collection set persist up, so the RAM copy is written back, the units go and the data returns to the
    disk directory) and copy_back (a current copy exists to return).
    """
    errors = []
    warnings = []
    decisions = {}
    for entry in mounts or ():
        token = entry.get("token")
        state = (states or {}).get(token) or {}
        persist = entry.get("persist")
        where = entry.get("label")
        path = entry.get("path")
        unit = bool(state.get("unit"))
        if not persist:
            if unit:
                fix = ("Set %s.state: absent with the persist it had (its backing %s) to write the data back first, "
                       "or keep persist in the entry." % (where, state.get("conf_backing") or "as before"))
                errors.append("Host %s: %s.persist is missing: '%s' is kept in a backing directory by %s from an "
                              "earlier run, and without persist that copy would be left behind. %s"
                              % (host, where, path, unit_names(token)["persist"], fix))
            continue
        backing = persist["backing"]
        name = "%s.persist.backing" % where
        current = state.get("current", "missing")
        if state.get("trust"):
            errors.append(trust_error(host, name, backing, state["trust"]))
            continue
        if unit and state.get("conf_backing") and state["conf_backing"] != backing:
            errors.append("Host %s: %s is '%s', but '%s' is kept in '%s' since an earlier run. Moving the backing is "
                          "not done for you: set %s back to '%s', or set state: absent with it (the data returns "
                          "to disk) and apply again with the new backing."
                          % (host, name, backing, path, state["conf_backing"], name, state["conf_backing"]))
            continue
        if state.get("backing_exists") and not state.get("backing_is_dir"):
            errors.append("Host %s: %s is '%s': it exists and is not a directory. Remove it, or choose another "
                          "backing directory." % (host, name, backing))
            continue
        if current == "other":
            errors.append("Host %s: %s is '%s': its 'current' is not a link to a copy this collection made. Move it "
                          "away, or choose another backing directory." % (host, name, backing))
            continue
        foreign = foreign_names(state.get("names"))
        if not unit and foreign:
            errors.append("Host %s: %s is '%s': it holds files of its own (%s), and the backing directory must be "
                          "empty or hold only this collection's copies. Choose an empty or new directory."
                          % (host, name, backing, ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")))
            continue

        if entry.get("state") == "absent":
            decisions[token] = {"release": unit, "copy_back": unit and current == "snapshot"}
            if not unit and current == "snapshot":
                warnings.append("%s: '%s' holds a copy, but this collection did not persist '%s' here; it is left "
                                "as it is." % (where, backing, path))
            continue

        action = entry.get("action")
        source = "backing" if current == "snapshot" else "ram"
        if source == "backing" and not unit:
            if action == "migrate":
                ram_holds = "the directory on disk holds data too"
            elif action in LIVE_ACTIONS and state.get("mount_empty") is not True:
                ram_holds = "the live %s mount holds data too" % entry.get("fstype", "RAM")
            else:
                ram_holds = None
            if ram_holds:
                errors.append("Host %s: %s is '%s': it already holds a copy ('current'), and %s at '%s'. Neither is "
                              "dropped for the other: move the backing's copy away (to take the data at '%s'), or "
                              "empty '%s' (to take the backing's copy), then apply again."
                              % (host, name, backing, ram_holds, path, path, path))
                continue
        adopt = not (unit and state.get("active") and current == "snapshot" and action in LIVE_ACTIONS)
        if not adopt:
            verify = None
        elif source == "ram":
            verify = "sync"
        elif action not in LIVE_ACTIONS or state.get("mount_empty") is True:
            verify = "restore"
        else:
            # A live mount that holds data is newer than the backing: the restore keeps it, the next sync saves it.
            verify = None
        decisions[token] = {"source": source, "adopt": adopt, "verify": verify}
    return {"errors": errors, "warnings": warnings, "decisions": decisions}


def trust_error(host, name, backing, found):
    """The refusal of a backing that fails the trust model (docs/security.md). FOUND: a _trust problem, or the text of
    why the backing could not be read."""
    elsewhere = "choose a backing under /var/lib, e.g. /var/lib/ramdisk-backing/<name>"
    if not isinstance(found, dict):
        return ("Host %s: %s is '%s': whether only root can write it could not be read (%s), and the persist helper "
                "acts as root on what it finds there. Fix that, or %s." % (host, name, backing, found, elsewhere))
    commands = _trust.fix(found)
    if found["path"].startswith(backing.rstrip("/") + "/"):
        why = ("only the persist helper, as root, writes the top of a backing, and what it finds there decides what "
               "root changes")
        fix = "look at what '%s' holds and move it out of the backing%s, or %s" % (
            found["path"], " (or run `%s` if root made it)" % commands if commands else "", elsewhere)
    else:
        why = ("the backing and every directory above it must be root's and writable by root alone, or another user "
               "could make the restore and syncs, which run as root, change files outside it")
        if commands:
            fix = "run `%s`, or %s" % (commands, elsewhere)
        elif found["why"] == "writable":
            fix = "%s: a directory every user may write cannot hold one" % elsewhere
        else:
            fix = "move '%s' out of the way, or %s" % (found["path"], elsewhere)
    return "Host %s: %s is '%s': %s; %s. Fix: %s." % (host, name, backing, _trust.describe(found), why, fix)


def _conf_backing(token):
    try:
        with open(paths.persist_conf_file(token)) as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError):
        return None
    for line in text.splitlines():
        if line.startswith("BACKING="):
            value = line[8:]
            try:
                words = shlex.split(value)
            except ValueError:
                return value
            return words[0] if len(words) == 1 else value
    return None


def unit_state(unit, systemd, run):
    """(active, enabled) of UNIT as systemd says; (False, False) without systemd. RUN(argv) -> (rc, out, err),
    with LC_ALL=C."""
    if not systemd:
        return False, False
    rc, out, _err = run(["systemctl", "show", "-p", "ActiveState", "-p", "UnitFileState", unit])
    values = dict(line.split("=", 1) for line in (out or "").splitlines() if "=" in line) if rc == 0 else {}
    return values.get("ActiveState") == "active", values.get("UnitFileState") == "enabled"


def read_state(token, backing, live_path, systemd, run):
    """What review_persist() decides from for the mount with TOKEN (see there), read from the host. LIVE_PATH: the
    path of a live RAM mount whose emptiness matters, or None. RUN: as unit_state() takes it."""
    unit = os.path.exists(paths.persist_unit_files(token)["persist"])
    conf_backing = _conf_backing(token) if unit else None
    active = unit_state(unit_names(token)["persist"], systemd, run)[0] if unit else False
    state = {"unit": unit, "active": active, "conf_backing": conf_backing, "backing_exists": False,
             "backing_is_dir": False, "current": "missing", "names": [], "mount_empty": None, "trust": None}
    if backing:
        try:
            state["trust"] = _trust.check_backing(backing)
        except _trust.TrustError as exc:
            state["trust"] = str(exc)
        state["backing_exists"] = os.path.lexists(backing)
        state["backing_is_dir"] = os.path.isdir(backing) and not os.path.islink(backing)
        current = os.path.join(backing, "current")
        if os.path.lexists(current):
            state["current"] = "snapshot" if os.path.islink(current) and os.path.isdir(current) else "other"
        if state["backing_is_dir"]:
            try:
                state["names"] = sorted(os.listdir(backing))
            except OSError:
                pass
    if live_path:
        try:
            state["mount_empty"] = not [name for name in os.listdir(live_path) if name != "lost+found"]
        except OSError:
            state["mount_empty"] = None
    return state


def conf_text(entry):
    """The record the helper reads for ENTRY (a planned mount with persist): its mount, backing, interval, the
    copies the backing keeps, and the services an interval sync stops for its copy."""
    persist = entry["persist"]
    return ("# The RAM mount and the backing directory on disk that keeps it, read by the persist helper for its units\n"
            "# and by the metrics collector (INTERVAL_SECONDS: how often the timer syncs; KEEP: how many complete\n"
            "# copies the backing keeps, current included; STOP_SERVICES=1: an interval sync stops those of SERVICES\n"
            "# that run for its copy, and starts them again).\n"
            "MOUNT=%s\nBACKING=%s\nINTERVAL_SECONDS=%d\nKEEP=%d\nSERVICES=%s\nSTOP_SERVICES=%d\n"
            % (shlex.quote(entry["path"]), shlex.quote(persist["backing"]), int(persist.get("interval_seconds") or 0),
               int(persist.get("keep") or PERSIST_KEEP), shlex.quote(" ".join(persist.get("services") or [])),
               1 if persist.get("stop_services") and persist.get("services") else 0))


def journald_limits(size_bytes):
    """journald's limits for a journal mount of SIZE_BYTES: SystemMaxUse, SystemKeepFree, SystemMaxFileSize and
    SystemMaxFiles in bytes and files, or None when the size is unknown.

    The journal may take half of the mount and stops growing while less than a quarter is free: the rest is for the
    text logs and the copies logrotate makes. journald's own defaults (10% and 15% of the file system, files of
    8 MiB allocated at once) are computed when it first opens /var/log/journal and kept until it restarts, so a
    mount made while it runs would keep the limits of the disk below it."""
    if not isinstance(size_bytes, int) or isinstance(size_bytes, bool) or size_bytes <= 0:
        return None
    page = 4 * KIB
    max_use = size_bytes // 2 // page * page
    keep_free = size_bytes // 4 // page * page
    max_file = min(max(max_use // 8 // page * page, JOURNAL_FILE_MIN), JOURNAL_FILE_MAX)
    max_files = max(JOURNAL_FILES_DEFAULT, max_use // JOURNAL_FILE_FLOOR)
    return {"SystemMaxUse": max_use, "SystemKeepFree": keep_free, "SystemMaxFileSize": max_file,
            "SystemMaxFiles": max_files}


def journald_dropin_text(entry):
    """The journald drop-in of ENTRY (a planned mount with persist that holds the journal), or None: not a journal
    mount, or its size is unknown (journald's own defaults apply)."""
    if not holds_journal(entry.get("path")):
        return None
    size = entry.get("size_bytes") or entry.get("ram_bytes")
    limits = journald_limits(size)
    if limits is None:
        return None
    return ("# journald writes its journal into the RAM mount at %s (%d bytes): the journal may take half of it and\n"
            "# leaves a quarter free for the other logs and logrotate's copies. journald reads this when it starts.\n"
            "[Journal]\n" % (entry["path"], size)
            + "".join("%s=%d\n" % (key, limits[key])
                      for key in ("SystemMaxUse", "SystemKeepFree", "SystemMaxFileSize", "SystemMaxFiles")))


def unit_texts(entry):
    """The persist unit, the sync service and its timer of ENTRY, by kind (see unit_names())."""
    token = entry["token"]
    path = entry["path"]
    persist = entry["persist"]
    backing = persist["backing"]
    interval = persist["interval"]
    services = " ".join(persist.get("services") or [])
    names = unit_names(token)
    helper = paths.PERSIST_HELPER
    before = "Before=%s\n" % services if services else ""
    required = "RequiredBy=%s\n" % services if services else ""
    if holds_journal(path):
        # The journal's mount: restored in early boot, before journald moves in (systemd-journal-flush.service is
        # among the services) and before systemd-tmpfiles makes the log files; stopped, with its last sync, after
        # journald left (the flush service's stop runs journalctl --smart-relinquish-var) and before the unmount.
        before = ("DefaultDependencies=no\n"
                  "After=systemd-remount-fs.service\n"
                  "%sBefore=systemd-tmpfiles-setup.service sysinit.target shutdown.target\n"
                  "Conflicts=shutdown.target\n" % before)
    if persist.get("stop_services") and services:
        priority = (
            "# The copy runs while the helper holds %(services)s stopped, so at full speed; a sync killed\n"
            "# meanwhile (a TERM or a KILL past TimeoutStopSec) leaves them to this, which starts them again.\n"
            "ExecStopPost=%(helper)s resume %(token)s\n"
            % {"services": services, "helper": paths.PERSIST_HELPER, "token": token})
    else:
        priority = ("# A background copy: the services that use the data come first (best-effort, so it is never "
                    "starved).\nNice=10\nIOSchedulingClass=best-effort\nIOSchedulingPriority=7\n")
    values = {"priority": priority, "path": path, "path_condition": path.replace("%", "%%"), "backing": backing,
              "interval": interval, "token": token, "helper": helper, "before": before, "required": required,
              "persist": names["persist"], "sync": names["sync"], "timer": names["timer"]}
    texts = {
        "persist": (
            "# Keeps the RAM mount at %(path)s in %(backing)s on disk. Starting restores an\n"
            "# empty mount from the backing's current copy, before the services that use the data; stopping (after them,\n"
            "# at shutdown too) writes the mount back. %(timer)s writes it back every %(interval)s.\n"
            "[Unit]\n"
            "Description=Keep the RAM mount %(path)s in %(backing)s\n"
            "RequiresMountsFor=%(path)s %(backing)s\n"
            "# Nothing mounted there at boot (a run cut short before the path's fstab line was written, or after it\n"
            "# was removed): skipped, not failed, so the services it comes before start on the directory on disk.\n"
            "ConditionPathIsMountPoint=%(path_condition)s\n"
            "Wants=%(timer)s\n"
            "%(before)s"
            "\n[Service]\n"
            "Type=oneshot\n"
            "RemainAfterExit=yes\n"
            "ExecStart=%(helper)s restore %(token)s\n"
            "ExecStop=%(helper)s sync %(token)s\n"
            "# The services wait for their data, however long the copy takes; a stop-time sync gets as long as the\n"
            "# shutdown allows, and one cut short leaves the backing on its last complete copy.\n"
            "TimeoutStartSec=infinity\n"
            "TimeoutStopSec=30min\n"
            "\n[Install]\n"
            "WantedBy=multi-user.target\n"
            "%(required)s"),
        "sync": (
            "# Writes the RAM mount at %(path)s back to %(backing)s, started by\n"
            "# %(timer)s. Only while %(persist)s runs: a mount that was\n"
            "# not restored is never synced over the backing.\n"
            "[Unit]\n"
            "Description=Write the RAM mount %(path)s back to %(backing)s\n"
            "Requisite=%(persist)s\n"
            "After=%(persist)s\n"
            "\n[Service]\n"
            "Type=oneshot\n"
            "ExecStart=%(helper)s sync %(token)s\n"
            "%(priority)s"),
        "timer": (
            "# Writes the RAM mount at %(path)s back to %(backing)s every\n"
            "# %(interval)s; started and stopped with %(persist)s (no After= on it:\n"
            "# a timer comes before timers.target, which comes before any ordinary service).\n"
            "[Unit]\n"
            "Description=Write the RAM mount %(path)s back every %(interval)s\n"
            "PartOf=%(persist)s\n"
            "\n[Timer]\n"
            "OnActiveSec=%(interval)s\n"
            "OnUnitActiveSec=%(interval)s\n"
            "AccuracySec=1s\n"
            "Unit=%(sync)s\n"),
    }
    return dict((kind, text % values) for kind, text in texts.items())
