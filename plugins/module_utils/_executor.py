# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Carry out planned RAM mounts on the host as journaled transactions, and recover what a dead run left.

One transaction per planned mount: its steps are worked out in full before the first one runs (with what each
undoes: the old fstab lines, the old file texts, the mount below), written to the intent journal (_journal),
then run one by one, each flushed to the journal before it acts and marked done after. Each transaction has a
point of no return, its pivot: the new mount in place (mount, or the move of a filled and verified mount over
the directory), the remount, or the unmount. A run that dies before the pivot is rolled back by the next run;
one that dies after it is rolled forward (in the same boot; after a reboot only its file steps are finished, as
the boot itself mounted what the files say).

A migrate fills the new file system where nobody sees it, under a private mount of our own (NEW_ROOT), from a
private, non-recursive bind of the directory (what is on disk there, without the mounts under it), verifies the
copy, sets the root's owner and mode, and only then moves the mount over the directory: until that instant the
directory is untouched and visible, so a kill anywhere before it hides nothing.

Why by hand: ansible.posix.mount rewrites /etc/fstab in place (a full disk left it empty) and neither it nor any
other module journals or moves mounts; the steps here use the kernel's tools (mount, umount, cp, systemctl)
with argument lists, and _atomic for every file.
"""

from __future__ import annotations

import grp
import os
import pwd
import shlex
import stat

from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths as paths
from ansible_collections.ramdisk.provision.plugins.module_utils import _brd_steps
from ansible_collections.ramdisk.provision.plugins.module_utils._atomic import AtomicWriteError, remove_file, write_file
from ansible_collections.ramdisk.provision.plugins.module_utils._fstab import remove_entry, set_entry
from ansible_collections.ramdisk.provision.plugins.module_utils._fstab import parse as parse_fstab
from ansible_collections.ramdisk.provision.plugins.module_utils._journal import Journal, boot_id
from ansible_collections.ramdisk.provision.plugins.module_utils._mount_identity import unique_mount_id
from ansible_collections.ramdisk.provision.plugins.module_utils._persist_steps import PersistSteps
from ansible_collections.ramdisk.provision.plugins.module_utils._persist_steps import build as build_persisted
from ansible_collections.ramdisk.provision.plugins.module_utils._persist_steps import persisted_after
from ansible_collections.ramdisk.provision.plugins.module_utils._procfs import parse_mountinfo
from ansible_collections.ramdisk.provision.plugins.module_utils._tree import compare_trees, is_empty_dir, tree_digest
from ansible_collections.ramdisk.provision.plugins.module_utils import _zram_steps

HEADER = "# Written by the ramdisk.provision collection: changes here are overwritten on its next run.\n"
# Steps that act on mounts: after a reboot they have nothing left to undo or finish.
LIVE_STEPS = ("mount", "move", "unmount", "remount", "root", "bind", "release", "copy", "systemctl_start", "sync",
              "verify", "writeback", "journal_var") + _zram_steps.LIVE_STEPS + _brd_steps.LIVE_STEPS
PIVOTS = ("mount", "move", "remount", "unmount", "systemctl_start")
MAX_LISTED = 10


class StepError(Exception):
    pass


def _read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def mountinfo():
    return parse_mountinfo(_read("/proc/self/mountinfo") or "")


def mount_result(path):
    """What a step that mounted at PATH journals of the mount on top there: its mount ID and, where the kernel has
    one, its unique ID (the mount ID alone is given out again after an umount)."""
    mount = top_mount(path)
    return {"mount_id": mount["mount_id"] if mount else None, "unique": unique_mount_id(path) if mount else None}


def is_mount(path, mount, mount_id, unique):
    """Whether MOUNT (top_mount(PATH)) is the one a step saw as MOUNT_ID and UNIQUE (None: not known)."""
    if mount is None or mount["mount_id"] != mount_id:
        return False
    return unique is None or unique_mount_id(path) in (None, unique)


def top_mount(path, mounts=None):
    """The mount on top at PATH (the last one listed there), or None."""
    found = None
    for mount in mounts if mounts is not None else mountinfo():
        if mount["mount_point"] == path:
            found = mount
    return found


def _account_id(value, by_name):
    """A numeric id for an owner or group given by number or name; -1 (leave as it is) for None."""
    if value is None:
        return -1
    if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
        return int(value)
    return by_name(value)[2]


def _uid(value):
    return _account_id(value, pwd.getpwnam)


def _gid(value):
    return _account_id(value, grp.getgrnam)


def _fill_options(options):
    """The options to fill a migrated mount with: a setgid root would pass its group bit to every directory
    the copy makes, so the root's own mode is set once the copy is verified."""
    out = []
    for option in options:
        key, sep, value = option.partition("=")
        if key == "mode" and sep and len(value) == 4 and value[0] in "01234567":
            value = "%o" % (int(value, 8) & 0o1777)
            option = "mode=%s" % value
        elif option == "ro":
            option = "rw"  # filled first; made read-only once its root is set (_seal)
        out.append(option)
    return out


def _root_options(item, root):
    """The mount options of a new read-only tmpfs with its root as ROOT says, set by the kernel at mount: it takes
    no chown or chmod after. Other mounts: the options as they are."""
    options = list(item["options"])
    if item["fstype"] != "tmpfs" or "ro" not in options:
        return options
    keys = set(option.partition("=")[0] for option in options)
    for key, value in (("mode", root.get("mode")), ("uid", _uid(root.get("owner"))), ("gid", _gid(root.get("group")))):
        if key not in keys and value is not None and value != -1:
            options.append("%s=%s" % (key, value))
    return options


def _seal(steps, item, path):
    """A read-only mount (options: [ro]) filled and rooted at PATH: made read-only now, before anyone sees it."""
    if "ro" in item["options"]:
        steps.append({"step": "remount", "args": {"path": path, "options": ["ro"]}})


class Executor(_zram_steps.ZramSteps, _brd_steps.BrdSteps, PersistSteps):
    """Run and undo steps. RUN(argv) -> (rc, out, err); SYSTEMD: whether systemd is the service manager.
    The zram devices' steps come from _zram_steps.ZramSteps, brd's from _brd_steps.BrdSteps, persist's from
    _persist_steps.PersistSteps.
    PERSIST_HELPER: the text of the persist helper (roles/mount/files/persist.sh), for mounts with persist."""

    def __init__(self, run, systemd, host, journal=None, check=False, persist_helper=None):
        self.run_command = run
        self.persist_helper = persist_helper
        # Sentences for the user that do not stop the run (a persisted mount's last sync refused, ...).
        self.warnings = []
        self.systemd = systemd
        self.host = host
        self.journal = journal
        self.check = check
        self.boot = boot_id()
        # The results of the transaction at hand, by step index (a move's undo needs the mount it moved).
        self.txn_results = {}

    # Tools -----------------------------------------------------------------------------------------------

    def _tool(self, argv, what):
        rc, out, err = self.run_command(argv)
        if rc != 0:
            raise StepError("%s failed (%s): %s" % (what, " ".join(argv), (err or out or "exit %d" % rc).strip()))
        return out

    def error(self, message):
        raise StepError(message)

    def reload(self):
        if self.systemd:
            self._tool(["systemctl", "daemon-reload"], "Reloading systemd")

    # Steps: do ---------------------------------------------------------------------------------------------
    # Each gets its ARGS (as journaled) and returns what it learnt (journaled with `done`).

    def do_mkdir(self, args):
        mode = int(str(args.get("mode") or "0755"), 8)
        for directory in args["create"]:
            if not os.path.isdir(directory):
                os.mkdir(directory, mode)
                os.chmod(directory, mode)  # whatever the umask
        return {}

    def do_mount(self, args):
        argv = ["mount", "-t", args["fstype"]]
        if args.get("options"):
            argv += ["-o", ",".join(args["options"])]
        self._tool(argv + [args["src"], args["path"]], "Mounting %s" % args["path"])
        if args.get("private"):
            self._tool(["mount", "--make-private", args["path"]], "Making %s private" % args["path"])
        return mount_result(args["path"])

    def do_bind(self, args):
        if not os.path.isdir(args["path"]):
            os.makedirs(args["path"], 0o700)
        # Not recursive: the mounts under the directory are not part of what lies on its disk.
        self._tool(["mount", "--bind", args["src"], args["path"]], "Binding %s" % args["src"])
        self._tool(["mount", "--make-private", args["path"]], "Making %s private" % args["path"])
        return mount_result(args["path"])

    def do_copy(self, args):
        self._tool(["cp", "-a", "--no-target-directory", args["src"] + "/.", args["dest"]],
                   "Copying %s into its new mount" % args["path"])
        source, source_problems = tree_digest(args["src"])
        copy, copy_problems = tree_digest(args["dest"])
        mismatches = source_problems + copy_problems + compare_trees(source, copy, "disk directory", "RAM copy",
                                                                     b_fs_root=True,
                                                                     dropped_xattrs=args.get("dropped_xattrs") or ())
        if mismatches:
            raise StepError("the copy of %s differs from the directory on disk in %d ways: %s"
                            % (args["path"], len(mismatches), " ".join(mismatches[:MAX_LISTED])))
        return {"entries": len(source)}

    def do_release(self, args):
        mount = top_mount(args["path"])
        if mount is not None:
            self._tool(["umount", args["path"]], "Releasing %s" % args["path"])
        for directory in (args["path"], os.path.dirname(args["path"])):
            try:
                os.rmdir(directory)
            except OSError:
                break  # still mounted, or another mount's staging is in it
        return {}

    def do_root(self, args):
        info = os.stat(args["path"])
        uid, gid = _uid(args.get("owner")), _gid(args.get("group"))
        # Only what differs: a read-only mount whose root the mount itself set takes no chown (EROFS).
        if uid not in (-1, info.st_uid) or gid not in (-1, info.st_gid):
            os.chown(args["path"], uid, gid)
        if args.get("mode") is not None and int(str(args["mode"]), 8) != stat.S_IMODE(os.stat(args["path"]).st_mode):
            os.chmod(args["path"], int(str(args["mode"]), 8))
        return {"dev": info.st_dev, "unique": unique_mount_id(args["path"]),
                "old": {"mode": stat.S_IMODE(info.st_mode), "uid": info.st_uid, "gid": info.st_gid}}

    def do_move(self, args):
        self._tool(["mount", "--move", args["src"], args["path"]], "Moving the new mount onto %s" % args["path"])
        return mount_result(args["path"])

    def do_remount(self, args):
        self._tool(["mount", "-o", ",".join(["remount"] + list(args["options"])), args["path"]],
                   "Remounting %s" % args["path"])
        return {}

    def do_unmount(self, args):
        mount = top_mount(args["path"])
        if is_mount(args["path"], mount, args["mount_id"], args.get("unique")):
            if args.get("empty") and is_empty_dir(args["path"]) is not True:
                raise StepError("the %s at %s, empty when this run planned to replace it by one filled from the "
                                "disk, is not empty any more, so it stays as it is. Look at what was written there "
                                "(ls -A %s); run again to plan from what is there now"
                                % (mount["fstype"], args["path"], shlex.quote(args["path"])))
            self._tool(["umount", args["path"]], "Unmounting %s" % args["path"])
        return {}

    def do_fstab(self, args):
        text = _read(paths.FSTAB) or ""
        if args.get("line"):
            src, path, fstype, options = args["line"]
            new = set_entry(text, src, path, fstype, ",".join(options))
        else:
            new = remove_entry(text, args["path"])
        if new != text:
            write_file(paths.FSTAB, new)
        return {}

    def do_file(self, args):
        if args.get("text") is None:
            remove_file(args["file"])
        else:
            directory = os.path.dirname(args["file"])
            if not os.path.isdir(directory):
                os.makedirs(directory, 0o755)
            write_file(args["file"], args["text"], mode=args.get("mode", 0o644), owner=0, group=0)
        return {}

    def do_systemctl(self, args):
        if self.systemd and args.get("best_effort"):
            # Bookkeeping only (reset-failed of units that are gone): its outcome changes nothing on the host's data.
            self.run_command(["systemctl"] + list(args["argv"]))
        elif self.systemd:
            self._tool(["systemctl"] + list(args["argv"]), "systemctl %s" % " ".join(args["argv"]))
        return {}

    do_systemctl_start = do_systemctl

    def do_reload(self, args):
        self.reload()
        return {}

    def do_rmdir(self, args):
        try:
            os.rmdir(args["path"])
        except OSError:
            pass  # not empty, or not there: the directory stays, with whatever is in it
        return {}

    # Steps: undo -------------------------------------------------------------------------------------------
    # Each gets ARGS and RESULT ({} when the step never said it was done) and SAME_BOOT; it checks what is
    # there before it acts, so it is safe whether the step ran, half ran, or never started.

    def _ours_on_top(self, args, result, same_boot):
        if not same_boot:
            return False
        mount = top_mount(args["path"])
        if mount is None or mount["mount_id"] == args.get("below"):
            return False
        if result.get("mount_id") is not None:
            return is_mount(args["path"], mount, result["mount_id"], result.get("unique"))
        return mount["fstype"] == args.get("fstype")

    def undo_mkdir(self, args, result, same_boot):
        for directory in reversed(args["create"]):
            if os.path.isdir(directory) and not os.path.ismount(directory):
                try:
                    os.rmdir(directory)
                except OSError:
                    break  # something is in it now: it stays, and so do its parents
        return True

    def undo_mount(self, args, result, same_boot):
        if self._ours_on_top(args, result, same_boot):
            self._tool(["umount", args["path"]], "Taking away the new mount at %s" % args["path"])
        return True

    def undo_bind(self, args, result, same_boot):
        # A bind shows its source's file system type, so the type cannot tell it apart; but it is made at a staging
        # point of ours (STAGE_ROOT/<token>), where what is on top, other than what was there before, is ours.
        mount = top_mount(args["path"]) if same_boot else None
        if mount is not None and mount["mount_id"] != args.get("below") and \
                is_mount(args["path"], mount, result.get("mount_id") or mount["mount_id"], result.get("unique")):
            self._tool(["umount", args["path"]], "Releasing %s" % args["path"])
        for directory in (args["path"], os.path.dirname(args["path"])):
            try:
                os.rmdir(directory)
            except OSError:
                break  # still mounted, or another mount's staging is in it
        return True

    def undo_move(self, args, result, same_boot):
        moved = result if (result or {}).get("mount_id") else self.txn_results.get(args.get("stage_i")) or {}
        mount = top_mount(args["path"]) if same_boot else None
        if moved.get("mount_id") and is_mount(args["path"], mount, moved["mount_id"], moved.get("unique")):
            self._tool(["umount", args["path"]], "Taking away the new mount at %s" % args["path"])
        return True

    def undo_release(self, args, result, same_boot):
        return True

    def undo_copy(self, args, result, same_boot):
        return True  # the copy lives in the new mount, which its own undo takes away

    def undo_root(self, args, result, same_boot):
        # Only on the file system the step changed: once the new mount is gone the path is the disk directory.
        try:
            info = os.stat(args["path"])
        except OSError:
            return True
        unique = result.get("unique")
        # The device number comes back with a new tmpfs; the unique mount ID, where the kernel has one, does not.
        if same_boot and result.get("old") and info.st_dev == result.get("dev") and \
                (unique is None or unique_mount_id(args["path"]) in (None, unique)):
            old = result["old"]
            os.chown(args["path"], old["uid"], old["gid"])
            os.chmod(args["path"], old["mode"])
        return True

    def undo_remount(self, args, result, same_boot):
        return True  # the data is intact either way; the next plan sees the options as they are

    def undo_unmount(self, args, result, same_boot):
        return True  # what was in RAM is gone; there is nothing to put back

    def undo_fstab(self, args, result, same_boot):
        text = _read(paths.FSTAB) or ""
        new = restore_lines(text, args["path"], args.get("old") or [])
        if new != text:
            write_file(paths.FSTAB, new)
            # The reload of the forward order is undone before this: systemd's mount unit of the line would mount it
            # again for the first unit that needs the path (the services started again by the undo).
            self.reload()
        if not same_boot and args.get("line"):
            # The boot mounted what the new line said; it goes only when no old line describes it too: a mount the
            # old lines make as well holds what was written since the boot, and stays.
            mount = top_mount(args["path"])
            if mount is not None and mount["fstype"] == args["line"][2] and mount["source"] == args["line"][0] \
                    and not describes(args.get("old") or [], mount):
                self._tool(["umount", args["path"]], "Taking away the mount the boot made at %s" % args["path"])
        return True

    def undo_file(self, args, result, same_boot):
        if args.get("old") is None:
            remove_file(args["file"])
        else:
            write_file(args["file"], args["old"], mode=args.get("old_mode"), owner=0, group=0)
        return True

    def undo_systemctl(self, args, result, same_boot):
        if args.get("unrestore"):
            # Without the mark of its restore, the stop-time sync of persist refuses: the backing stays as it was.
            remove_file(args["unrestore"])
        if self.systemd and args.get("undo"):
            rc, _out, _err = self.run_command(["systemctl"] + list(args["undo"]))
            return rc == 0
        return True

    undo_systemctl_start = undo_systemctl

    def undo_reload(self, args, result, same_boot):
        self.reload()
        return True

    def undo_rmdir(self, args, result, same_boot):
        return True

    # Probes: did a pivot that never said done take effect? ------------------------------------------------

    def took_effect(self, step, args, same_boot):
        if not same_boot:
            return False
        if step["step"] in _zram_steps.PIVOTS:
            return self.zram_took_effect(step, args, same_boot)
        if step["step"] in _brd_steps.PIVOTS:
            return self.brd_took_effect(step, args, same_boot)
        mount = top_mount(args["path"])
        if step["step"] == "mount":
            return mount is not None and mount["mount_id"] != args.get("below") and mount["fstype"] == args["fstype"]
        if step["step"] == "move":
            return mount is not None and mount["mount_id"] != args.get("below") and mount["fstype"] == args["fstype"]
        if step["step"] == "unmount":
            return not is_mount(args["path"], mount, args.get("mount_id"), args.get("unique"))
        return True  # remount, start: done or not, going on is right


def describes(lines, mount):
    """Whether one of fstab LINES (raw) mounts what MOUNT (a mountinfo entry) is: its source and type."""
    return any(line["entry"] is not None and line["entry"]["src"] == mount["source"]
               and line["entry"]["fstype"] == mount["fstype"] for line in parse_fstab("".join(lines)))


def restore_lines(text, path, old_lines):
    """TEXT with the lines for PATH replaced by OLD_LINES (raw), where the first line for PATH was (or at the end)."""
    from ansible_collections.ramdisk.provision.plugins.module_utils._fstab import replace_lines
    return replace_lines(text, lambda entry: entry["path"] == path, old_lines)


# Transactions ----------------------------------------------------------------------------------------------

def _file_step(steps, name, text, mode=0o644, header=True):
    """A step that makes NAME hold TEXT under our header (None: removes it), unless it already does. A record is
    JSON, read by the plan: no header."""
    from ansible_collections.ramdisk.provision.plugins.module_utils._mount_steps import written
    old = _read(name)
    if text is None:
        if old is None and not os.path.lexists(name):
            return False
        want = None
    else:
        if (old == text) if not header else written(old, text):
            return False
        want = HEADER + text if header else text
    old_mode = None
    if old is not None:
        old_mode = stat.S_IMODE(os.stat(name).st_mode)
    steps.append({"step": "file", "args": {"file": name, "text": want, "mode": mode, "old": old, "old_mode": old_mode}})
    return True


def _record_text(item):
    import json
    return json.dumps(item["record"], indent=4, sort_keys=True) + "\n"


def build(item, systemd, ex=None, after=None):
    """(steps, pivot) of ITEM (a mount_items() entry) from what the host holds now; pivot is None when the
    transaction has no point of no return (files only). EX (the executor) answers a persisted mount's questions;
    AFTER: the persisted mounts at the end of the run (_persist_steps.persisted_after)."""
    if item.get("persist"):
        return build_persisted(item, ex, _build_mount, _file_step, after)
    return _build_mount(item, systemd)


def _build_mount(item, systemd, middle=()):
    """build() of the mount itself; MIDDLE: steps to take before its record (persist's), or before a mount point
    that goes is removed."""
    from ansible_collections.ramdisk.provision.plugins.module_utils._fstab import lines_for, same
    from ansible_collections.ramdisk.provision.plugins.module_utils._mount_steps import root_same
    path = item["path"]
    mounts = mountinfo()
    top = top_mount(path, mounts)
    fstab = _read(paths.FSTAB) or ""
    old_lines = [line["raw"] for line in lines_for(fstab, path)]
    files = item["files"]
    texts = item["texts"]
    steps = []
    pivot = None
    units = False
    action = item.get("action")

    if item["state"] == "absent":
        if action == "unmount" and not item["use_dropin"] and top is not None:
            pivot = len(steps)
            steps.append({"step": "unmount", "args": {"path": path, "mount_id": top["mount_id"],
                                                      "unique": unique_mount_id(path)}})
        if item["use_dropin"]:
            units |= _file_step(steps, paths.TMP_DROPIN, None)
        elif old_lines:
            steps.append({"step": "fstab", "args": {"path": path, "line": None, "old": old_lines}})
            units = True
        if os.path.lexists(files["seed"]):
            steps.append({"step": "systemctl", "args": {"argv": ["disable", os.path.basename(files["seed"])],
                                                        "undo": ["enable", os.path.basename(files["seed"])]}})
            units |= _file_step(steps, files["seed"], None)
        if units and systemd:
            steps.append({"step": "reload", "args": {}})
        steps.extend(middle)
        if action == "unmount" and (item.get("record") or {}).get("created_dir"):
            steps.append({"step": "rmdir", "args": {"path": path}})
        _file_step(steps, files["tmpfiles"], None)
        _file_step(steps, files["record"], None)
        return steps, pivot

    for key, lookup, kind in (("owner", _uid, "user"), ("group", _gid, "group")):
        try:
            lookup(item.get(key))
        except KeyError:
            raise StepError("%s.%s is %r: no such %s on this host. Create it first or choose another %s"
                            % (item.get("label") or path, key, item.get(key), kind, key))
    if not os.path.isdir(path):
        create = []
        current = path
        while current not in ("", "/") and not os.path.lexists(current):
            create.insert(0, current)
            current = os.path.dirname(current)
        steps.append({"step": "mkdir", "args": {"create": create}})
    root = {"path": path, "mode": item.get("mode"), "owner": item.get("owner"), "group": item.get("group")}
    if action == "migrate":
        lower = "%s/%s" % (paths.STAGE_ROOT, item["token"])
        stage = "%s/%s" % (paths.NEW_ROOT, item["token"])
        if item.get("refill") and top is not None:
            # The plan found it empty over the data on disk (a boot mounted it, nothing filled it): it goes first, so
            # that the bind below shows the directory on disk; its undo has nothing to put back.
            steps.append({"step": "unmount", "args": {"path": path, "mount_id": top["mount_id"], "empty": True,
                                                      "unique": unique_mount_id(path)}})
        steps.append({"step": "bind", "args": {"src": path, "path": lower, "fstype": None,
                                               "below": (top_mount(lower, mounts) or {}).get("mount_id")}})
        steps.append({"step": "mkdir", "args": {"create": [stage]}})
        stage_i = len(steps)
        steps.append({"step": "mount", "args": {"path": stage, "src": item["src"], "fstype": item["fstype"],
                                                "options": _fill_options(item["options"]), "below": None}})
        steps.append({"step": "copy", "args": {"path": path, "src": lower, "dest": stage,
                                               "dropped_xattrs": item.get("dropped_xattrs") or []}})
        steps.append({"step": "release", "args": {"path": lower}})
        steps.append({"step": "root", "args": dict(root, path=stage)})
        _seal(steps, item, stage)
        pivot = len(steps)
        steps.append({"step": "move", "args": {"src": stage, "path": path, "fstype": item["fstype"],
                                               "below": (top or {}).get("mount_id"), "stage_i": stage_i}})
    elif action == "mount" and item["use_dropin"]:
        units |= _file_step(steps, paths.TMP_DROPIN, texts["dropin"])
        steps.append({"step": "reload", "args": {}})
        pivot = len(steps)
        steps.append({"step": "systemctl_start", "args": {"argv": ["start", "tmp.mount"], "undo": ["stop", "tmp.mount"],
                                                          "path": path}})
        steps.append({"step": "root", "args": root})
    elif action == "mount":
        pivot = len(steps)
        steps.append({"step": "mount", "args": {"path": path, "src": item["src"], "fstype": item["fstype"],
                                                "options": _root_options(item, root),
                                                "below": (top or {}).get("mount_id")}})
        steps.append({"step": "root", "args": root})
    else:
        if action == "remount":
            pivot = len(steps)
            steps.append({"step": "remount", "args": {"path": path, "options": list(item["remount_options"])}})
        info = None
        try:
            info = os.stat(path)
        except OSError:
            pass
        live = {"mode": "%o" % stat.S_IMODE(info.st_mode), "uid": info.st_uid, "gid": info.st_gid} if info else None
        try:
            same_root = root_same(live, item, _uid(item.get("owner")) if item.get("owner") is not None else None,
                                  _gid(item.get("group")) if item.get("group") is not None else None)
        except KeyError:
            same_root = False
        if action == "remount" or not same_root:
            steps.append({"step": "root", "args": root})

    # What the boot needs, before the fstab line that mounts the path at boot.
    seed_unit = os.path.basename(files["seed"])
    if item["seeded"] and systemd:
        if _file_step(steps, files["seed"], texts["seed"]):
            steps.append({"step": "reload", "args": {}})
            units = True
        if units or not os.path.lexists(files["seed_link"]):
            steps.append({"step": "systemctl", "args": {"argv": ["enable", seed_unit], "undo": ["disable", seed_unit]}})
    elif os.path.lexists(files["seed"]):
        steps.append({"step": "systemctl", "args": {"argv": ["disable", seed_unit], "undo": ["enable", seed_unit]}})
        units |= _file_step(steps, files["seed"], None)
    if item["use_dropin"]:
        if action != "mount":
            units |= _file_step(steps, paths.TMP_DROPIN, texts["dropin"])
    elif not same(fstab, item["src"], path, item["fstype"], ",".join(item["options"])):
        steps.append({"step": "fstab", "args": {"path": path, "line": [item["src"], path, item["fstype"],
                                                                       list(item["options"])], "old": old_lines}})
        units = True
    if units and systemd and not (steps and steps[-1]["step"] == "reload"):
        steps.append({"step": "reload", "args": {}})
    steps.extend(middle)
    _file_step(steps, files["record"], _record_text(item), header=False)
    if texts.get("tmpfiles") and systemd:
        _file_step(steps, files["tmpfiles"], texts["tmpfiles"])
    return steps, pivot


def ensure_new_root(ex):
    """A private mount of our own under which a migrate fills its new mount: a mount can only be moved out of
    a parent that does not share its mounts, and nobody else sees it there half filled."""
    if top_mount(paths.NEW_ROOT) is not None:
        return
    if not os.path.isdir(paths.NEW_ROOT):
        os.makedirs(paths.NEW_ROOT, 0o700)
    ex._tool(["mount", "-t", "tmpfs", "-o", "mode=0700,size=1m,nosuid,nodev,noexec", "ramdisk-provision",
              paths.NEW_ROOT], "Mounting the private staging area %s" % paths.NEW_ROOT)
    ex._tool(["mount", "--make-private", paths.NEW_ROOT], "Making %s private" % paths.NEW_ROOT)


def sweep_new_root(ex):
    """Take away what a dead run left under NEW_ROOT (never seen by anyone: it is ours by where it is), then
    NEW_ROOT itself. Returns the paths unmounted."""
    prefix = paths.NEW_ROOT + "/"
    left = [mount["mount_point"] for mount in mountinfo() if mount["mount_point"].startswith(prefix)]
    for point in sorted(set(left), key=len, reverse=True):
        ex._tool(["umount", point], "Taking away %s, left by a run that died" % point)
    if top_mount(paths.NEW_ROOT) is not None:
        ex._tool(["umount", paths.NEW_ROOT], "Releasing %s" % paths.NEW_ROOT)
    try:
        os.rmdir(paths.NEW_ROOT)
    except OSError:
        pass
    return left


class Transaction(object):
    """One planned mount's steps, run through the journal."""

    def __init__(self, ex, journal, run, txn, what):
        self.ex = ex
        self.journal = journal
        self.run = run
        self.txn = txn
        self.what = what
        self.begun = set()
        self.results = {}
        self.undone = set()

    def start(self):
        self.journal.txn(self.run, self.txn, self.what)

    def _do(self, i):
        step = self.what["steps"][i]
        self.ex.txn_results = self.results
        self.begun.add(i)
        self.journal.mark("begin", self.run, self.txn, i)
        result = getattr(self.ex, "do_" + step["step"])(step["args"]) or {}
        self.results[i] = result
        self.journal.mark("done", self.run, self.txn, i, result)
        if i == self.what.get("pivot"):
            self.journal.mark("forward", self.run, self.txn)

    def forward(self, start=0, same_boot=True):
        for i in range(start, len(self.what["steps"])):
            if i in self.results:
                continue
            if not same_boot and self.what["steps"][i]["step"] in LIVE_STEPS:
                continue
            self._do(i)
        self.journal.mark("close", self.run, self.txn)

    def back(self, same_boot=True):
        """Undo every begun step, newest first. The abort line is written first, so a death midway goes on
        backwards at the next run, never forwards."""
        self.journal.mark("abort", self.run, self.txn)
        self.ex.txn_results = self.results
        if not same_boot:
            self.stop_services_again()
        for i in sorted(self.begun - self.undone, reverse=True):
            step = self.what["steps"][i]
            getattr(self.ex, "undo_" + step["step"])(step["args"], self.results.get(i) or {}, same_boot)
            self.undone.add(i)
            self.journal.mark("undone", self.run, self.txn, i)
        self.journal.mark("close", self.run, self.txn)

    def stop_services_again(self):
        """After a reboot the services the dead run stopped (persist.services) run again, started by the boot, and
        may hold files in what the boot mounted from the new fstab line (a logger in /var/log), which the undo takes
        away: stopped again first. The undo of their stop step starts them, last, as in the same boot."""
        for i in sorted(self.begun - self.undone):
            step = self.what["steps"][i]
            if step["step"] == "systemctl" and (step.get("args") or {}).get("services"):
                self.ex.do_systemctl(step["args"])


def boot_pivot(steps):
    """The index of the step after which a transaction is rolled forward after a reboot, when it is not its pivot
    (a step whose args say boot_pivot): a persisted mount's first copy checked (the only copy left once RAM is gone),
    or the removal of its fstab line (before it, the boot mounted and restored it again). None: the pivot decides."""
    for i, step in enumerate(steps):
        if (step.get("args") or {}).get("boot_pivot"):
            return i
    return None


def describe(what):
    """A short line for a transaction: path, action, and its steps' names."""
    return "%s (%s: %s)" % (what.get("path"), what.get("action"), ", ".join(step["step"] for step in what["steps"]))


def recover(ex, journal):
    """Finish or undo what a dead run left in the journal. Returns [{path, action, way, steps}] (way: forward
    or back), and removes the journal once every transaction in it is closed. In check mode only says."""
    lines = journal.read()
    txns = [txn for txn in Journal.transactions(lines) if not txn["closed"]]
    report = []
    unreadable = [str(line["line"]) for line in lines if line.get("t") == "unreadable"]
    if unreadable and not any(txn["assumed"] for txn in txns):
        ex.warnings.append("Host %s: line %s of the journal %s cannot be read; no later line names a transaction it "
                           "could have begun, so recovery assumed that none of its steps began"
                           % (ex.host, ", ".join(unreadable), journal.path))
    for found in reversed(txns):
        what = found["what"]
        steps = what.get("steps") or []
        pivot = what.get("pivot")
        same_boot = found["boot"] is not None and found["boot"] == ex.boot
        forward = found["forward"] and not found["aborted"]
        # A step an unreadable journal line may have begun counts as begun: the host's state decides.
        begun = found["begun"] | found["maybe_begun"]
        if not forward and not found["aborted"] and pivot is not None and pivot in begun:
            if pivot in found["results"]:
                forward = True
            elif ex.took_effect(steps[pivot], steps[pivot]["args"], same_boot):
                forward = True
                found["results"][pivot] = mount_result(steps[pivot]["args"].get("path", ""))
                found["results"].update((i, {}) for i in begun if i < pivot and i not in found["results"])
        if forward and not same_boot and pivot is not None and steps[pivot]["step"] in ("mount", "move", "systemctl_start") \
                and pivot not in found["results"]:
            forward = False
        if forward and pivot is not None and pivot not in found["results"]:
            found["results"][pivot] = {}  # a forward line comes after the pivot's done, or its probe: it took effect
        after_boot = boot_pivot(steps)
        if not same_boot and after_boot is not None:
            # The reboot took RAM: a persisted mount's data is where the boot pivot says (see boot_pivot), whatever
            # the pivot of the boot the run began in said.
            forward = after_boot in found["results"] and not found["aborted"]
        entry = {"path": what.get("path"), "action": what.get("action"), "way": "forward" if forward else "back",
                 "run": found["run"], "boot": "same" if same_boot else "earlier",
                 "steps_done": sorted(found["results"]), "steps": [step["step"] for step in steps]}
        if found["assumed"]:
            entry["assumed"] = found["assumed"]
            ex.warnings.append("Host %s: the journal %s of a run that died, for %s: %s. It was %s."
                               % (ex.host, journal.path, what.get("path"), "; ".join(found["assumed"]),
                                  "left as it is (check mode)" if ex.check else "finished" if forward else "undone"))
        report.append(entry)
        if ex.check:
            continue
        journal.require(found, [i for i in range(len(steps)) if i not in found["results"]] if forward
                        else begun - found["undone"], "finish" if forward else "undo")
        txn = Transaction(ex, journal, found["run"], found["txn"], what)
        txn.begun = set(begun)
        txn.results = dict(found["results"])
        txn.undone = set(found["undone"])
        if forward:
            # What the probe found or the order of the lines showed, journaled: a death from here on goes on forward.
            for i in sorted(set(found["results"]) - found["done_lines"]):
                journal.mark("done", found["run"], found["txn"], i, found["results"][i])
            journal.mark("forward", found["run"], found["txn"])
            txn.forward(same_boot=same_boot)
        else:
            txn.back(same_boot=same_boot)
    if not ex.check:
        swept = sweep_new_root(ex)
        if swept:
            report.append({"path": paths.NEW_ROOT, "action": "staging", "way": "back", "unmounted": swept})
        journal.clear()
    return report


def planned_records(lines):
    """{path: the record each open transaction of journal LINES was to write}: what the dead run's plan found at
    the path before it began (whether the directory was there, its root), which a later plan cannot see."""
    import json
    out = {}
    for found in Journal.transactions(lines):
        if found["closed"]:
            continue
        for step in found["what"].get("steps") or []:
            args = step.get("args") or {}
            if step.get("step") == "file" and isinstance(args.get("text"), str) and \
                    os.path.dirname(args.get("file") or "") == paths.RECORD_DIR:
                try:
                    record = json.loads(args["text"])
                except ValueError:
                    continue
                if isinstance(record, dict):
                    out[found["what"].get("path")] = record
    return out


class ApplyError(Exception):
    pass


def _error_text(exc):
    return str(exc).rstrip(".") if str(exc) else exc.__class__.__name__


def apply(items, ex, journal, run):
    """Carry out ITEMS (mount_items() entries), one transaction each. Returns [{path, action, steps, changed}].

    A step that fails undoes its transaction, then the new mounts (mount, migrate) that this run made before
    it, newest first, and raises ApplyError saying what failed, what was undone and what was left.
    """
    planned = []
    after = persisted_after(items)
    for item in items:
        try:
            steps, pivot = build(item, ex.systemd, ex, after)
        except (StepError, OSError) as exc:
            raise ApplyError("Host %s: %s cannot be carried out, so this run changed nothing: %s."
                             % (ex.host, item["path"], _error_text(exc)))
        planned.append((item, steps, pivot))
    out = [{"path": item["path"], "action": item.get("action"), "steps": [step["step"] for step in steps],
            "changed": bool(steps)} for item, steps, pivot in planned]
    if ex.check:
        return out
    done = []
    try:
        if any(item.get("action") == "migrate" and steps for item, steps, pivot in planned):
            ensure_new_root(ex)
        for item, steps, pivot in planned:
            if not steps:
                continue
            what = {"path": item["path"], "action": item.get("action"), "pivot": pivot, "steps": steps}
            txn = Transaction(ex, journal, run, item["token"], what)
            txn.start()
            try:
                txn.forward()
            except (StepError, AtomicWriteError, OSError, KeyError) as exc:
                failed = what["steps"][max(txn.begun)]["step"] if txn.begun else "start"
                _fail(ex, journal, txn, done, item, failed, exc)
            done.append(txn)
        sweep_new_root(ex)
    finally:
        journal.close()
    journal.clear()
    return out


def back_out(ex, journal, txns):
    """Undo TXNS in their order; then, when all went, the staging area and the journal. Returns (the paths undone,
    sentences for what could not be)."""
    undone = []
    problems = []
    for older in txns:
        try:
            older.back()
            undone.append(older.what["path"])
        except (StepError, AtomicWriteError, OSError) as undo_exc:
            problems.append("undoing %s failed: %s; the journal keeps it, and the next run goes on undoing it"
                            % (older.what["path"], _error_text(undo_exc)))
    if not problems:
        try:
            sweep_new_root(ex)
            journal.clear()  # every transaction of the run is closed
        except (StepError, OSError) as sweep_exc:
            problems.append("clearing the staging area failed: %s" % _error_text(sweep_exc))
    return undone, problems


def _fail(ex, journal, txn, done, item, failed, exc):
    left = []
    going = [txn]
    for older in reversed(done):
        if older.what.get("action") not in ("mount", "migrate"):
            left.append("%s (%s, kept)" % (older.what["path"], older.what.get("action")))
        else:
            going.append(older)
    undone, problems = back_out(ex, journal, going)
    now = ["%s %s %s" % (mount["mount_point"], mount["fstype"], mount["source"]) for mount in mountinfo()
           if mount["mount_point"] in [older.what["path"] for older in [txn] + done]]
    raise ApplyError(
        "Host %s: %s (%s) failed at its step '%s': %s. Undone, in this order (each directory on disk shows as it "
        "was; its fstab line, units and record are as before): %s. Left as this run changed them: %s.%s Mounted "
        "now at those paths: %s."
        % (ex.host, item["path"], item.get("action"), failed, _error_text(exc), ", ".join(undone) or "nothing",
           ", ".join(left) or "nothing", (" " + " ".join(problems) + ".") if problems else "",
           "; ".join(now) or "nothing"))
