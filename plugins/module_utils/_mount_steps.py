# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Each planned tmpfs or ramfs mount as ramdisk_apply carries it out (item()): its token, the names of its files
and units, and the texts of the files it writes (the boot-time copy unit, the tmpfiles line, the tmp.mount
drop-in), rendered here once; and what a run says afterwards (notes()).

Whether a mount has anything to do (`todo`) is not decided here: ramdisk_plan asks the executor, in check mode
(_dry_run). No Ansible module writes a systemd unit from fields, hence these texts.
"""

from __future__ import annotations

import hashlib
import os
import re

from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths

DROPIN = _host_paths.TMP_DROPIN
# Words a unit file or a tmpfiles.d line carries as they are; anything else is quoted (existing texts stay as
# they were, so hosts set up before see no change).
_PLAIN_WORD_RE = re.compile(r"^[A-Za-z0-9._@+/:=,-]+\Z")
# A tmpfiles.d 'z' line takes a glob: these stand for themselves only behind a backslash.
_GLOB_RE = re.compile(r"([*?\[\]\\])")


def specifiers(text):
    """TEXT in a unit setting that expands specifiers but splits no words (Description=, ConditionPath*=)."""
    return text.replace("%", "%%")


def unit_word(text, command=False):
    """TEXT as one word of a setting that splits words: RequiresMountsFor=, a tmpfiles.d field, or (COMMAND) an
    ExecStart= argument. Quoted when it holds anything but plain characters, '\\' and '"' escaped; '%' doubled
    (specifiers) and, in a command, '$' doubled (variables). systemd and systemd-tmpfiles both read it back as TEXT.
    """
    text = specifiers(text)
    if command:
        text = text.replace("$", "$$")
    if _PLAIN_WORD_RE.match(text):
        return text
    return '"%s"' % text.replace("\\", "\\\\").replace('"', '\\"')


def escape_path(path):
    """PATH as systemd-escape --path writes it, the name of its .mount unit without the suffix: '/' is '-',
    and a byte other than a letter, digit, ':', '_' or a '.' that does not lead becomes \\xNN."""
    trimmed = "/".join(part for part in path.split("/") if part)
    if not trimmed:
        return "-"
    out = []
    for index, byte in enumerate(trimmed.encode("utf-8", "surrogateescape")):
        char = chr(byte)
        if char == "/":
            out.append("-")
        elif (char.isascii() and (char.isalnum() or char in ":_")) or (char == "." and index > 0):
            out.append(char)
        else:
            out.append("\\x%02x" % byte)
    return "".join(out)


def mount_unit(path):
    """The name systemd gives the .mount unit of PATH."""
    return escape_path(path) + ".mount"


def token(path):
    """The same rule as _plan_core.mount_token(), for entries that come without one."""
    return "%s-%s" % (re.sub(r"[^A-Za-z0-9_.]", "-", path[1:]), hashlib.sha1(path.encode("utf-8")).hexdigest()[:8])


def _octal(mode):
    return "%04o" % int(str(mode), 8)


def seed_unit(entry, stage):
    """The boot-time copy unit of a migrated mount without persist. Paths are quoted for systemd (unit_word)."""
    path = entry["path"]
    parent = path.rsplit("/", 1)[0] or "/"
    lower = "%s/%s" % (stage, path.rsplit("/", 1)[1])

    def run(*argv):
        return "ExecStart=" + " ".join(unit_word(arg, command=True) for arg in argv)

    lines = [
        "# The RAM mount at %s starts empty at boot; this copies in the directory that lies" % path,
        "# under it on disk, seen through a private, non-recursive bind of its parent. The disk copy is only read.",
        "[Unit]",
        "Description=Copy the disk contents of %s into its RAM mount" % specifiers(path),
        "DefaultDependencies=no",
        "RequiresMountsFor=%s" % unit_word(path),
        "ConditionPathIsMountPoint=%s" % specifiers(path),
        "Before=local-fs.target",
        "",
        "[Service]",
        "Type=oneshot",
        "RemainAfterExit=yes",
        run("/usr/bin/mkdir", "-p", stage),
        run("/usr/bin/mount", "--bind", parent, stage),
        run("/usr/bin/mount", "--make-private", stage),
        "# Without the setgid bit a mode=2750 mount gives every directory cp makes; cp -a sets the root's mode last.",
        run("/usr/bin/chmod", "g-s", path),
        run("/usr/bin/cp", "-a", "--no-target-directory", lower + "/.", path),
        "# cp -a also gave the mount's root the disk directory's owner and mode: set the entry's again.",
    ]
    if entry.get("owner") is not None:
        group = entry.get("group")
        lines.append(run("/usr/bin/chown", "%s%s" % (entry["owner"], (":%s" % group) if group is not None else ""),
                         path))
    if entry.get("mode") is not None:
        lines.append(run("/usr/bin/chmod", str(entry["mode"]), path))
    lines += [
        run("/usr/bin/umount", stage),
        # Left empty for the next boot's copy otherwise; '-': another mount's copy may be using it.
        "ExecStart=-" + " ".join(unit_word(arg, command=True) for arg in (
            "/usr/bin/rmdir", "--ignore-fail-on-non-empty", stage, _host_paths.STAGE_ROOT)),
        "ExecStopPost=-" + " ".join(unit_word(arg, command=True) for arg in ("/usr/bin/umount", stage)),
        "",
        "[Install]",
        "WantedBy=local-fs.target",
    ]
    return "\n".join(lines) + "\n"


def tmpfiles_line(entry):
    """Mode and owner of a mount whose file system takes no mode=/uid=/gid= (ramfs, ext4, xfs), set at boot."""
    return ("# Mode and owner of the %s mounted at %s, set again at every boot.\n"
            "z %s %s %s %s -\n" % (entry["fstype"], entry["path"], unit_word(_GLOB_RE.sub(r"\\\1", entry["path"])),
                                   "-" if entry.get("mode") is None else _octal(entry["mode"]),
                                   entry.get("owner") or "-", entry.get("group") or "-"))


def dropin(options):
    """The drop-in that adjusts the distribution's own tmp.mount rather than replacing it."""
    return ("# Adjusts the distribution's own tmp.mount rather than replacing it.\n"
            "[Mount]\nWhat=tmpfs\nType=tmpfs\nOptions=%s\n" % ",".join(options))


def seeded(entry):
    """Whether a mount is filled from the directory under it on disk each time it is mounted anew (at boot by its
    copy unit; without systemd, by the next run): migrate without persist, which restores its own copy, and not
    /tmp, which starts empty at every boot."""
    return bool(entry.get("migrate") and not entry.get("persist") and entry["path"] != "/tmp")


def item(entry, vendor_tmp, systemd):
    """ENTRY with the names and texts ramdisk_apply uses. An entry the plan gave no `todo` (a backend's own plan,
    the deprecated mount role's) counts as work: ramdisk_apply finds out for itself."""
    out = dict(entry)
    out.pop("steps", None)  # what versions before 1.1.0 planned for the mount role's loops
    out["token"] = entry.get("token") or token(entry["path"])
    if "use_dropin" not in entry:
        out["use_dropin"] = bool(entry["path"] == "/tmp" and entry.get("fstype") == "tmpfs" and vendor_tmp and systemd)
    out["seeded"] = seeded(entry)
    out["stage"] = "%s/%s" % (_host_paths.STAGE_ROOT, out["token"])
    out["files"] = {
        "seed": _host_paths.seed_unit_file(out["token"]),
        "seed_link": _host_paths.seed_link(out["token"]),
        "tmpfiles": _host_paths.tmpfiles_file(out["token"]),
        "record": _host_paths.record_file(out["token"]),
    }
    out["texts"] = {
        "seed": seed_unit(entry, out["stage"]) if out["seeded"] else None,
        "tmpfiles": tmpfiles_line(entry) if entry.get("fstype") != "tmpfs" else None,
        "dropin": dropin(entry.get("options") or []) if out["use_dropin"] else None,
    }
    if not out.get("record"):
        out["record"] = {"path": entry["path"], "fstype": entry.get("fstype"), "created_dir": False, "root_kept": {}}
    out.setdefault("todo", True)
    return out


def items(plan, vendor_tmp, systemd):
    return [item(entry, vendor_tmp, systemd) for entry in plan or []]


def _empty(path):
    """Whether PATH is a directory with nothing in it but lost+found (a migrated mount that copied nothing)."""
    try:
        return not [name for name in os.listdir(path) if name != "lost+found"]
    except OSError:
        return False


def notes(host, carried_out, done, recovered, systemd):
    """The warnings a run owes its reader, only where they apply: what a dead run had left and what became of it
    (RECOVERED, recover()'s list), a migrated mount that nothing fills at boot (no systemd; not when the copy holds
    nothing, as a new cache's), and a mount without persist taken away now, with what was written in it.
    CARRIED_OUT: the items() given to apply(); DONE: what apply() returned for them."""
    out = ["Host %s: a run that died had left %s (%s) half done; it was %s."
           % (host, entry.get("path"), entry.get("action"), "finished" if entry.get("way") == "forward" else "undone")
           for entry in recovered or []]
    changed = set(entry["path"] for entry in done or [] if entry.get("changed"))
    for entry in carried_out or []:
        if entry["path"] not in changed:
            continue
        if entry.get("seeded") and entry.get("action") == "migrate" and not systemd and not _empty(entry["path"]):
            out.append("Host %s does not run systemd, so after a reboot the RAM mount at %s starts empty over the "
                       "disk copy. Run this role again after each boot, or set migrate to false and manage the "
                       "contents yourself." % (host, entry["path"]))
        if entry.get("action") == "unmount" and not entry.get("use_dropin") and not entry.get("persist"):
            out.append("Host %s: %s was unmounted without persist, so what was written there since it was mounted "
                       "went with it; the directory on disk is as it was before the mount." % (host, entry["path"]))
    return out


def written(content, text):
    """Whether a file's CONTENT is TEXT under a header of comment lines (the role's ansible_managed)."""
    if content is None or text is None:
        return False
    content = content.rstrip("\n")
    text = text.rstrip("\n")
    if not content.endswith(text):
        return False
    head = content[:len(content) - len(text)]
    return all(not line.strip() or line.startswith("#") for line in head.split("\n"))


def root_same(root, entry, uid, gid):
    """Whether the live root (ROOT: mode, uid, gid as read) already has the entry's mode and owner."""
    if not root or root.get("mode") is None:
        return False
    if entry.get("mode") is not None and int(str(root["mode"]), 8) != int(str(entry["mode"]), 8):
        return False
    if entry.get("owner") is not None and uid != root.get("uid"):
        return False
    if entry.get("group") is not None and gid != root.get("gid"):
        return False
    return True
