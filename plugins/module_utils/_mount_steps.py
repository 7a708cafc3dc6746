# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the mount role still has to do for each planned mount, so that its tasks loop over only that.

The mount role carries out a plan with a few looped tasks (ansible.posix.mount, file, copy, template,
systemd_service). Each item says which of them it needs in `steps`; ramdisk_plan decides that on the host
by comparing what is there (the fstab line, the root's mode and owner, the record, the unit files) with what
the entry asks for, so a run with nothing to change runs none of them. Without that knowledge (an entry a
zram or brd preflight planned) every step is on: each module is idempotent on its own.

The files the role writes (the boot-time copy unit, the tmpfiles line, the tmp.mount drop-in) are rendered
here, once: the role's templates put the ansible_managed header above the text, and the host-side check
compares the text under that header. No Ansible module writes a systemd unit from fields or compares an
fstab line without changing it, hence this.
"""

from __future__ import annotations

import hashlib
import os
import re

from ansible_collections.ramdisk.provision.plugins.module_utils import _fstab
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


def default_steps(item, systemd, exists):
    """Steps for an entry nobody looked at on the host: every one that can apply to it (EXISTS: the path)."""
    return {
        "mkdir": not exists,
        "fstab": not item["use_dropin"],
        "dropin": item["use_dropin"],
        "seed": bool(item["seeded"] and systemd),
        "enable": bool(item["seeded"] and systemd),
        # A mount that goes takes its boot-time copy unit with it (unseed_items.yml looks for one first).
        "unseed": not item["seeded"] or item.get("state") == "absent",
        "root": True,
        "record": True,
        "tmpfiles": bool(item["texts"]["tmpfiles"] and systemd),
    }


def seeded(entry):
    """Whether a mount is filled from the directory under it on disk each time it is mounted anew (at boot by its
    copy unit; without systemd, by the next run): migrate without persist, which restores its own copy, and not
    /tmp, which starts empty at every boot."""
    return bool(entry.get("migrate") and not entry.get("persist") and entry["path"] != "/tmp")


def item(entry, vendor_tmp, systemd, paths=None):
    """ENTRY with the names and texts the role's tasks use; its `steps` stay as decided, or all that apply.

    PATHS: ramdisk_facts' paths, for whether a mount point exists when nobody decided the steps.
    """
    out = dict(entry)
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
    if not isinstance(out.get("steps"), dict):
        found = (paths or {}).get(entry["path"]) or (paths or {}).get(entry.get("path_given") or entry["path"]) or {}
        out["steps"] = default_steps(out, systemd, bool(found.get("exists")))
    out["todo"] = todo(out)
    return out


def todo(item):
    """Whether the mount role has anything to do for ITEM: skipped as a whole when no item has."""
    # A persisted mount always: ramdisk_apply checks its units and timer run, which the plan does not read.
    return bool(item.get("action") in ("mount", "migrate", "remount", "unmount") or item.get("persist")
                or any(item["steps"].values()))


def items(plan, vendor_tmp, systemd, paths=None):
    return [item(entry, vendor_tmp, systemd, paths) for entry in plan or []]


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


def fstab_lines(text, path):
    """The fields of each /etc/fstab line for PATH (comments and blank lines aside), unescaped (\\040 is a space)."""
    return [[line["entry"][field] for field in _fstab.FIELDS] for line in _fstab.lines_for(text or "", path)]


def fstab_same(text, entry):
    """One line for the path, with these fields and dump and pass 0."""
    return _fstab.same(text or "", entry["src"], entry["path"], entry["fstype"], ",".join(entry["options"]))


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


def steps(entry, host):
    """The steps ENTRY (an item()) still needs, from HOST: what was read there.

    HOST: fstab (text), root (mode, uid, gid of the path, None when missing), uid, gid (the entry's owner and
    group as numbers), record (the current record, or None), files (path -> content or None), links (paths
    that exist among the item's link paths), systemd.
    """
    files = host.get("files") or {}
    texts = entry["texts"]
    names = entry["files"]
    systemd = host.get("systemd")
    unit_there = files.get(names["seed"]) is not None
    if entry["state"] == "absent":
        return {
            "dropin": entry["use_dropin"] and files.get(DROPIN) is not None,
            "fstab": not entry["use_dropin"] and bool(fstab_lines(host.get("fstab"), entry["path"])),
            "unseed": unit_there,
            "tmpfiles": files.get(names["tmpfiles"]) is not None,
            "record": host.get("record") is not None,
        }
    new = entry.get("action") in ("mount", "migrate")
    seed_written = written(files.get(names["seed"]), texts["seed"])
    return {
        "mkdir": host.get("root") is None,
        "fstab": not entry["use_dropin"] and not fstab_same(host.get("fstab"), entry),
        "dropin": entry["use_dropin"] and not written(files.get(DROPIN), texts["dropin"]),
        "seed": bool(entry["seeded"] and systemd and not seed_written),
        "enable": bool(entry["seeded"] and systemd and not (seed_written and names["seed_link"] in (host.get("links") or ()))),
        "unseed": not entry["seeded"] and unit_there,
        "root": new or not root_same(host.get("root"), entry, host.get("uid"), host.get("gid")),
        "record": host.get("record") != entry["record"],
        "tmpfiles": bool(texts["tmpfiles"] and systemd
                         and not written(files.get(names["tmpfiles"]), texts["tmpfiles"])),
    }
