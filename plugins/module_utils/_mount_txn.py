# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""A planned mount as the steps of one transaction (build_mount), and the mount and file steps' do and undo
(MountSteps), which every transaction uses: zram's and brd's mount their file systems through them, persist's put
its files and units in place through them.

The steps use the kernel's tools (mount, umount, cp, systemctl) with argument lists, and _atomic for every file.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shlex
import stat

from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths as paths
from ansible_collections.ramdisk.provision.plugins.module_utils import _steps
from ansible_collections.ramdisk.provision.plugins.module_utils._atomic import remove_file, write_file
from ansible_collections.ramdisk.provision.plugins.module_utils._fstab import lines_for, remove_entry, replace_lines
from ansible_collections.ramdisk.provision.plugins.module_utils._fstab import parse as parse_fstab
from ansible_collections.ramdisk.provision.plugins.module_utils._fstab import same, set_entry
from ansible_collections.ramdisk.provision.plugins.module_utils._mount_identity import unique_mount_id
from ansible_collections.ramdisk.provision.plugins.module_utils._mount_steps import root_same
from ansible_collections.ramdisk.provision.plugins.module_utils._steps import (
    MAX_LISTED, StepError, file_step, missing_dirs, read_text)
from ansible_collections.ramdisk.provision.plugins.module_utils._tree import compare_trees, is_empty_dir, tree_digest

# Steps that act on mounts: after a reboot they have nothing left to undo or finish.
LIVE_STEPS = ("mount", "move", "unmount", "remount", "root", "bind", "release", "copy", "systemctl_start")


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


def fill_options(options):
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


def _remove_staging_point(path):
    """The staging point PATH and its parent (STAGE_ROOT), where empty."""
    for directory in (path, os.path.dirname(path)):
        try:
            os.rmdir(directory)
        except OSError:
            break  # still mounted, or another mount's staging is in it


def _seal(steps, item, path):
    """A read-only mount (options: [ro]) filled and rooted at PATH: made read-only now, before anyone sees it."""
    if "ro" in item["options"]:
        steps.append({"step": "remount", "args": {"path": path, "options": ["ro"]}})


class MountSteps(object):
    """The mount and file steps, acting through CTX (an _steps.Context)."""

    live = LIVE_STEPS

    def __init__(self, ctx):
        self.ctx = ctx

    def steps(self):
        return {
            "mkdir": (self.do_mkdir, self.undo_mkdir),
            "mount": (self.do_mount, self.undo_mount),
            "bind": (self.do_bind, self.undo_bind),
            "copy": (self.do_copy, self.undo_copy),
            "release": (self.do_release, self.undo_release),
            "root": (self.do_root, self.undo_root),
            "move": (self.do_move, self.undo_move),
            "remount": (self.do_remount, self.undo_remount),
            "unmount": (self.do_unmount, self.undo_unmount),
            "fstab": (self.do_fstab, self.undo_fstab),
            "file": (self.do_file, self.undo_file),
            "systemctl": (self.do_systemctl, self.undo_systemctl),
            "systemctl_start": (self.do_systemctl, self.undo_systemctl),
            "reload": (self.do_reload, self.undo_reload),
            "rmdir": (self.do_rmdir, self.undo_rmdir),
        }

    def probes(self):
        return {"mount": self.mount_took_effect, "move": self.mount_took_effect, "unmount": self.unmount_took_effect}

    def boot_probes(self):
        """Probes of what a step left in files, which hold across a reboot (a boot pivot begun, not said done)."""
        return {"fstab": self.fstab_took_effect}

    def fstab_took_effect(self, args):
        """Whether /etc/fstab holds the step's line (or, for a removal, no line for its path): a file, so this holds
        across a reboot too."""
        text = read_text(paths.FSTAB) or ""
        if args.get("line"):
            src, path, fstype, options = args["line"]
            return same(text, src, path, fstype, ",".join(options))
        return not lines_for(text, args["path"])

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
        self.ctx.tool(argv + [args["src"], args["path"]], "Mounting %s" % args["path"])
        if args.get("private"):
            self.ctx.tool(["mount", "--make-private", args["path"]], "Making %s private" % args["path"])
        return _steps.mount_result(args["path"])

    def do_bind(self, args):
        if not os.path.isdir(args["path"]):
            os.makedirs(args["path"], 0o700)
        # Not recursive: the mounts under the directory are not part of what lies on its disk.
        self.ctx.tool(["mount", "--bind", args["src"], args["path"]], "Binding %s" % args["src"])
        self.ctx.tool(["mount", "--make-private", args["path"]], "Making %s private" % args["path"])
        return _steps.mount_result(args["path"])

    def do_copy(self, args):
        self.ctx.tool(["cp", "-a", "--no-target-directory", args["src"] + "/.", args["dest"]],
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
        mount = _steps.top_mount(args["path"])
        if mount is not None:
            self.ctx.tool(["umount", args["path"]], "Releasing %s" % args["path"])
        _remove_staging_point(args["path"])
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
        self.ctx.tool(["mount", "--move", args["src"], args["path"]], "Moving the new mount onto %s" % args["path"])
        return _steps.mount_result(args["path"])

    def do_remount(self, args):
        self.ctx.tool(["mount", "-o", ",".join(["remount"] + list(args["options"])), args["path"]],
                      "Remounting %s" % args["path"])
        return {}

    def do_unmount(self, args):
        mount = _steps.top_mount(args["path"])
        if _steps.is_mount(args["path"], mount, args["mount_id"], args.get("unique")):
            if args.get("empty") and is_empty_dir(args["path"]) is not True:
                raise StepError("the %s at %s, empty when this run planned to replace it by one filled from the "
                                "disk, is not empty any more, so it stays as it is. Look at what was written there "
                                "(ls -A %s); run again to plan from what is there now"
                                % (mount["fstype"], args["path"], shlex.quote(args["path"])))
            self.ctx.tool(["umount", args["path"]], "Unmounting %s" % args["path"])
        return {}

    def do_fstab(self, args):
        text = read_text(paths.FSTAB) or ""
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
        if self.ctx.systemd and args.get("best_effort"):
            # Bookkeeping only (reset-failed of units that are gone): its outcome changes nothing on the host's data.
            self.ctx.run_command(["systemctl"] + list(args["argv"]))
        elif self.ctx.systemd:
            self.ctx.tool(["systemctl"] + list(args["argv"]), "systemctl %s" % " ".join(args["argv"]))
        return {}

    def do_reload(self, args):
        self.ctx.reload()
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
        mount = _steps.top_mount(args["path"])
        if mount is None or mount["mount_id"] == args.get("below"):
            return False
        if result.get("mount_id") is not None:
            return _steps.is_mount(args["path"], mount, result["mount_id"], result.get("unique"))
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
            self.ctx.tool(["umount", args["path"]], "Taking away the new mount at %s" % args["path"])
        return True

    def undo_bind(self, args, result, same_boot):
        # A bind shows its source's file system type, so the type cannot tell it apart; but it is made at a staging
        # point of ours (STAGE_ROOT/<token>), where what is on top, other than what was there before, is ours.
        mount = _steps.top_mount(args["path"]) if same_boot else None
        if mount is not None and mount["mount_id"] != args.get("below") and \
                _steps.is_mount(args["path"], mount, result.get("mount_id") or mount["mount_id"], result.get("unique")):
            self.ctx.tool(["umount", args["path"]], "Releasing %s" % args["path"])
        _remove_staging_point(args["path"])
        return True

    def undo_move(self, args, result, same_boot):
        moved = result if (result or {}).get("mount_id") else self.ctx.txn_results.get(args.get("stage_i")) or {}
        mount = _steps.top_mount(args["path"]) if same_boot else None
        if moved.get("mount_id") and _steps.is_mount(args["path"], mount, moved["mount_id"], moved.get("unique")):
            self.ctx.tool(["umount", args["path"]], "Taking away the new mount at %s" % args["path"])
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
        text = read_text(paths.FSTAB) or ""
        new = restore_lines(text, args["path"], args.get("old") or [])
        if new != text:
            write_file(paths.FSTAB, new)
            # The reload of the forward order is undone before this: systemd's mount unit of the line would mount it
            # again for the first unit that needs the path (the services started again by the undo).
            self.ctx.reload()
        if not same_boot and args.get("line"):
            # The boot mounted what the new line said; it goes only when no old line describes it too: a mount the
            # old lines make as well holds what was written since the boot, and stays.
            mount = _steps.top_mount(args["path"])
            if mount is not None and mount["fstype"] == args["line"][2] and mount["source"] == args["line"][0] \
                    and not describes(args.get("old") or [], mount):
                self.ctx.tool(["umount", args["path"]], "Taking away the mount the boot made at %s" % args["path"])
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
        if self.ctx.systemd and args.get("undo"):
            rc, _out, _err = self.ctx.run_command(["systemctl"] + list(args["undo"]))
            return rc == 0
        return True

    def undo_reload(self, args, result, same_boot):
        self.ctx.reload()
        return True

    def undo_rmdir(self, args, result, same_boot):
        return True

    # Probes: did a pivot that never said done take effect (in the same boot)? -----------------------------

    def mount_took_effect(self, args):
        mount = _steps.top_mount(args["path"])
        return mount is not None and mount["mount_id"] != args.get("below") and mount["fstype"] == args["fstype"]

    def unmount_took_effect(self, args):
        return not _steps.is_mount(args["path"], _steps.top_mount(args["path"]), args.get("mount_id"), args.get("unique"))


def describes(lines, mount):
    """Whether one of fstab LINES (raw) mounts what MOUNT (a mountinfo entry) is: its source and type."""
    return any(line["entry"] is not None and line["entry"]["src"] == mount["source"]
               and line["entry"]["fstype"] == mount["fstype"] for line in parse_fstab("".join(lines)))


def restore_lines(text, path, old_lines):
    """TEXT with the lines for PATH replaced by OLD_LINES (raw), where the first line for PATH was (or at the end)."""
    return replace_lines(text, lambda entry: entry["path"] == path, old_lines)


def record_text(item):
    return json.dumps(item["record"], indent=4, sort_keys=True) + "\n"


def build_mount(item, systemd, middle=()):
    """(steps, pivot) of ITEM's mount itself (what _executor.build() gives an item without persist); MIDDLE: steps
    to take before its record (persist's), or before a mount point that goes is removed. Those of MIDDLE marked
    "boot" (what must hold before a boot mounts the path: persist's helper, units, checked first copy and enabled
    unit) come before the /etc/fstab line when this transaction writes the path's first one, in their order, and
    the line becomes the point of no return after a reboot (boot_pivot); else they stay where they are."""
    path = item["path"]
    mounts = _steps.mountinfo()
    top = _steps.top_mount(path, mounts)
    fstab = read_text(paths.FSTAB) or ""
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
            units |= file_step(steps, paths.TMP_DROPIN, None)
        elif old_lines:
            steps.append({"step": "fstab", "args": {"path": path, "line": None, "old": old_lines}})
            units = True
        if os.path.lexists(files["seed"]):
            steps.append({"step": "systemctl", "args": {"argv": ["disable", os.path.basename(files["seed"])],
                                                        "undo": ["enable", os.path.basename(files["seed"])]}})
            units |= file_step(steps, files["seed"], None)
        if units and systemd:
            steps.append({"step": "reload", "args": {}})
        steps.extend(middle)
        if action == "unmount" and (item.get("record") or {}).get("created_dir"):
            steps.append({"step": "rmdir", "args": {"path": path}})
        file_step(steps, files["tmpfiles"], None)
        file_step(steps, files["record"], None)
        return steps, pivot

    for key, lookup, kind in (("owner", _uid, "user"), ("group", _gid, "group")):
        try:
            lookup(item.get(key))
        except KeyError:
            raise StepError("%s.%s is %r: no such %s on this host. Create it first or choose another %s"
                            % (item.get("label") or path, key, item.get(key), kind, key))
    if not os.path.isdir(path):
        steps.append({"step": "mkdir", "args": {"create": missing_dirs(path)}})
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
                                               "below": (_steps.top_mount(lower, mounts) or {}).get("mount_id")}})
        steps.append({"step": "mkdir", "args": {"create": [stage]}})
        stage_i = len(steps)
        steps.append({"step": "mount", "args": {"path": stage, "src": item["src"], "fstype": item["fstype"],
                                                "options": fill_options(item["options"]), "below": None}})
        steps.append({"step": "copy", "args": {"path": path, "src": lower, "dest": stage,
                                               "dropped_xattrs": item.get("dropped_xattrs") or []}})
        steps.append({"step": "release", "args": {"path": lower}})
        steps.append({"step": "root", "args": dict(root, path=stage)})
        _seal(steps, item, stage)
        pivot = len(steps)
        steps.append({"step": "move", "args": {"src": stage, "path": path, "fstype": item["fstype"],
                                               "below": (top or {}).get("mount_id"), "stage_i": stage_i}})
    elif action == "mount" and item["use_dropin"]:
        units |= file_step(steps, paths.TMP_DROPIN, texts["dropin"])
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
        if file_step(steps, files["seed"], texts["seed"]):
            steps.append({"step": "reload", "args": {}})
            units = True
        if units or not os.path.lexists(files["seed_link"]):
            steps.append({"step": "systemctl", "args": {"argv": ["enable", seed_unit], "undo": ["disable", seed_unit]}})
    elif os.path.lexists(files["seed"]):
        steps.append({"step": "systemctl", "args": {"argv": ["disable", seed_unit], "undo": ["enable", seed_unit]}})
        units |= file_step(steps, files["seed"], None)
    middle = [dict(step) for step in middle]
    boot = [step for step in middle if step.pop("boot", False)]
    if item["use_dropin"]:
        if action != "mount":
            units |= file_step(steps, paths.TMP_DROPIN, texts["dropin"])
    elif not same(fstab, item["src"], path, item["fstype"], ",".join(item["options"])):
        # A boot from the line on mounts the path: with the backing's checked copy and persist's unit enabled
        # first, it restores the mount before the services that use it start. Before the line a boot leaves the
        # path on disk, where the data of record is, and the recovery undoes the rest; from the line on it
        # finishes (the line is the boot pivot). Nothing writes into an empty mount at boot that the next run
        # would take for newer data than the backing.
        if old_lines:
            boot = []  # a line already mounts the path at boot: persist orders its steps for that (its build())
        steps.extend(boot)
        middle = [step for step in middle if not any(step is moved for moved in boot)]
        pivot_at_boot = {}
        if boot:
            for step in steps:
                if (step.get("args") or {}).get("boot_pivot"):
                    step["args"] = dict(step["args"])
                    del step["args"]["boot_pivot"]
            pivot_at_boot = {"boot_pivot": True}
        steps.append({"step": "fstab", "args": dict({"path": path, "line": [item["src"], path, item["fstype"],
                                                                            list(item["options"])], "old": old_lines},
                                                    **pivot_at_boot)})
        units = True
    if units and systemd and not (steps and steps[-1]["step"] == "reload"):
        steps.append({"step": "reload", "args": {}})
    steps.extend(middle)
    file_step(steps, files["record"], record_text(item), header=False)
    if texts.get("tmpfiles") and systemd:
        file_step(steps, files["tmpfiles"], texts["tmpfiles"])
    return steps, pivot
