# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""persist (a RAM mount kept in a backing directory on disk) as steps of ramdisk_apply's transactions.

build() turns one planned mount with persist into the steps of one transaction, decided again from the host as it
is under the lock, by the same review_persist() that the plan used:

- mounted: the services that use the data stopped; the mount (a migrate whose backing holds the data of record is a
  plain mount: the backing fills it); the helper, its record and units; the backing's first copy made from the RAM
  mount and checked (source ram); persist enabled and started, which restores an empty mount from the backing
  (checked); the timer; the record of the mount; the services started again.
- absent, set up by this collection (release): the services stopped; the timer and persist stopped (the stop
  writes the mount back), and the backing's copy checked against the mount and written again if it differs; the
  unmount; the backing's copy returned into the directory on disk and checked; the copies, units and helper gone;
  the services started again.

The pivot is the mount (or its move, remount or unmount) as for any mount, or for a live mount that only gains
persist, the start of the persist unit: a run killed before it is undone by the next run, one killed after it is
finished. Undoing the start of persist first takes away the mark of its restore, so that its stop-time sync refuses
(the backing is not overwritten); undoing the first copy puts the backing back as it was, only while the data is
somewhere else too. After a reboot RAM is gone, and the point of no return is the step marked boot_pivot instead
(the executor's recover): the fstab line of a mount that gets its first one (written after the first copy is
checked and the persist unit enabled, so a boot mounts the path only to restore it; the line counts as written when
/etc/fstab holds it); where a line already mounts the path at boot (a live mount gaining persist), the first copy
made (the unit is enabled before it, so a boot after it restores the copy, and one before it fails the unit rather
than start the services on an empty mount; the copy counts as made when current names it); else the first copy,
once checked against the mount (its verify step). Before it the data of record is where it was before the run (the
directory on disk of a migrate, or, for a live mount, whatever complete copy the backing holds, which undo_sync then
keeps).

PersistSteps holds the steps' do_ and undo_ functions; the executor composes them with the other families' (_steps).
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import stat
import sys

from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths as paths
from ansible_collections.ramdisk.provision.plugins.module_utils import _persist_delta
from ansible_collections.ramdisk.provision.plugins.module_utils import _persist_helper
from ansible_collections.ramdisk.provision.plugins.module_utils import _steps
from ansible_collections.ramdisk.provision.plugins.module_utils._atomic import fsync_dir
from ansible_collections.ramdisk.provision.plugins.module_utils._fstab import lines_for
from ansible_collections.ramdisk.provision.plugins.module_utils._mount_txn import build_mount
from ansible_collections.ramdisk.provision.plugins.module_utils._plan_core import holds_journal
from ansible_collections.ramdisk.provision.plugins.module_utils._persist import (
    BACKING_NAMES_RE,
    LIVE_ACTIONS,
    conf_text,
    journald_dropin_text,
    read_state,
    review_persist,
    unit_names,
    unit_state,
    unit_texts,
)
from ansible_collections.ramdisk.provision.plugins.module_utils._steps import MAX_LISTED, file_step, missing_dirs
from ansible_collections.ramdisk.provision.plugins.module_utils._tree import compare_trees, tree_digest

RUNNING = ("active", "activating", "reloading")
JOURNALD = "systemd-journald.service"


def _current_target(backing):
    link = os.path.join(backing, "current")
    return os.readlink(link) if os.path.islink(link) else None


def _source(module):
    loader = getattr(module, "__loader__", None)
    text = loader.get_source(module.__name__) if loader is not None and hasattr(loader, "get_source") else None
    if text is None:
        with open(module.__file__, encoding="utf-8") as handle:
            text = handle.read()
    return text


def delta_helper_text():
    """The text of the helper's copy (this collection's _persist_delta.py), as the host gets it."""
    return _source(_persist_delta)


# The interpreter the units run the helper with: the system's python3 (the plan refuses persist on a host without
# one), at /usr/bin on the root file system that a journal mount's early restore can reach; else python3 on PATH, else
# the interpreter this module runs under, outside any venv of it (the helper needs the standard library only).
SYSTEM_PYTHON = "/usr/bin/python3"


def helper_interpreter():
    if os.access(SYSTEM_PYTHON, os.X_OK):
        return SYSTEM_PYTHON
    return shutil.which("python3") or os.path.realpath(sys.executable)


def persist_helper_text():
    """The persist helper (this collection's _persist_helper.py) with the line that names its interpreter, and its
    PLACES written out from _host_paths: on the host it runs alone."""
    values = sorted(_persist_helper.places(paths).items())
    places = "PLACES = {\n%s}\n" % "".join("    %r: %r,\n" % pair for pair in values)
    # One line carries the marker (test__host_paths runs the text without the collection).
    lines = [places if line.rstrip().endswith(_persist_helper.PLACES_MARKER) else line
             for line in _source(_persist_helper).splitlines(True)]
    return "#!%s\n%s" % (helper_interpreter(), "".join(lines))


def _read_current(backing):
    """Before current is read as a copy: a sync cut short after its commit point is finished first."""
    if os.path.isdir(backing):
        _persist_delta.roll_forward(backing)


def _remove(path):
    """PATH (a file, a link or a directory with all it holds) removed when it is there, from its parent's directory
    descriptor and following no link: the engine's remove_at, which the helper's syncs use on the host too."""
    try:
        parent = os.open(os.path.dirname(path) or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        _persist_delta.remove_at(parent, os.path.basename(path))
    finally:
        os.close(parent)


RETURN_SUFFIXES = (".ramdisk-return", ".ramdisk-replaced")
RENAME_EXCHANGE = 2


def return_names(path):
    """(the copy made beside PATH, the old directory during a swap by two renames): in PATH's parent, hidden."""
    parent, name = os.path.split(path.rstrip("/"))
    return tuple(os.path.join(parent, ".%s%s" % (name, suffix)) for suffix in RETURN_SUFFIXES)


def exchange(new, path, aside):
    """NEW in place of PATH in one step where the kernel can (renameat2 RENAME_EXCHANGE: PATH's old directory is
    then at NEW); else by two renames through ASIDE, after which the old directory is at NEW too. A kill between
    those two leaves PATH missing and ASIDE whole: do_return puts it back before anything else."""
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is not None:
        at_fdcwd = -100
        if renameat2(at_fdcwd, os.fsencode(new), at_fdcwd, os.fsencode(path), RENAME_EXCHANGE) == 0:
            return
        error = ctypes.get_errno()
        if error not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise OSError(error, "exchanging %s and %s: %s" % (new, path, os.strerror(error)))
    os.rename(path, aside)
    os.rename(new, path)
    os.rename(aside, new)


# A directory that is a mount point of its own: the copy returns inside it (NEW), the old entries go aside (PART,
# renamed WHOLE once all are there), then the new ones move up: renames within its own file system only.
IN_PLACE = (".ramdisk-return", ".ramdisk-replaced", ".ramdisk-replaced-all")


def _own_mount(path):
    """Whether PATH is itself a mount point in the kernel's table (a bind or a volume ismount() cannot see)."""
    real = os.path.realpath(path)
    return any(mount["mount_point"] == real for mount in _steps.mountinfo())


def _move_entries(src, dst, skip=()):
    for name in os.listdir(src):
        if name not in skip:
            os.rename(os.path.join(src, name), os.path.join(dst, name))


def resume_in_place(path):
    """A swap in place that a kill cut short, finished (all the old entries were aside: the new ones move up) or
    undone (the old entries back); the backing keeps the data until the step after the return either way."""
    new, part, whole = (os.path.join(path, name) for name in IN_PLACE)
    if os.path.isdir(whole):
        _move_entries(new, path)
        _remove_ours(new)
        _remove_ours(whole)
    elif os.path.isdir(part):
        _move_entries(part, path)
        os.rmdir(part)
        _remove_ours(new)
    fsync_dir(path)


def swap_in_place(path):
    """The checked copy in PATH/NEW becomes PATH's contents: every old entry renamed into PART, PART renamed WHOLE (all
    old entries are aside), the new entries renamed up, PATH given the copy's root attributes, then the old go."""
    new, part, whole = (os.path.join(path, name) for name in IN_PLACE)
    if any(name in IN_PLACE for name in os.listdir(new)):
        raise OSError(errno.EEXIST, "the backing's copy of %s holds one of the names %s that the return uses: move it "
                                    "and run again" % (path, ", ".join(IN_PLACE)))
    os.mkdir(part, 0o700)
    _move_entries(path, part, skip=IN_PLACE)
    fsync_dir(part)
    os.rename(part, whole)
    fsync_dir(path)
    _move_entries(new, path)
    fd = os.open(new, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        meta = _persist_delta._meta(os.fstat(fd), _persist_delta._xattrs(fd), "")  # pylint: disable=protected-access
    finally:
        os.close(fd)
    os.rmdir(new)
    _remove_ours(whole)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        _persist_delta.set_attrs_fd(fd, meta)
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_by_copy(fresh, path):
    """PATH's entries replaced by a copy of FRESH's (the engine's copier, by directory descriptors), where no rename
    can swap them: PATH emptied first, then filled, then flushed."""
    _persist_helper.empty_directory(path, spare=None)
    src = os.open(fresh, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        dst = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            _persist_delta.Copier().copy_contents(src, dst, None)
            os.fsync(dst)
        finally:
            os.close(dst)
    finally:
        os.close(src)


def _remove_ours(path):
    """Remove PATH, a directory of do_return's own name (its owner is the data's); a link or a file there is refused."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        raise OSError(errno.EEXIST, "'%s' is in the way of the data's return and is not a directory: move it away "
                                    "and run again" % path)
    _remove(path)


def _is_mount_point(path):
    try:
        return os.path.ismount(path)
    except OSError:
        return False


def running_services(ctx, services):
    """Those of SERVICES that run now (CTX: an _steps.Context)."""
    out = []
    for service in services or ():
        rc, text, _err = ctx.run_command(["systemctl", "show", "-p", "ActiveState", "--value", service])
        if rc == 0 and text.strip() in RUNNING:
            out.append(service)
    return out


class PersistSteps(object):
    """The persist steps, acting through CTX (an _steps.Context: tool, error, run_command, systemd, warnings)."""

    # Steps that act on a live mount: after a reboot they have nothing left to undo or finish.
    live = ("sync", "verify", "writeback", "journal_var")

    def __init__(self, ctx):
        self.ctx = ctx

    def steps(self):
        return {
            "sync": (self.do_sync, self.undo_sync),
            "verify": (self.do_verify, self.undo_verify),
            "writeback": (self.do_writeback, self.undo_writeback),
            "return": (self.do_return, self.undo_return),
            "journald": (self.do_journald, self.undo_journald),
            "journal_var": (self.do_journal_var, self.undo_journal_var),
            "clear_backing": (self.do_clear_backing, self.undo_clear_backing),
        }

    def boot_probes(self):
        return {"sync": self.sync_took_effect}

    def sync_took_effect(self, args):
        """Whether the first copy was made: the backing's current names a copy the backing did not hold before the
        run (a file, so this holds across a reboot; the helper switches current only to a whole copy)."""
        target = _current_target(args["backing"]) if os.path.isdir(args["backing"]) else None
        return target is not None and target != args.get("current") and target not in (args.get("before") or ())

    def probes(self):
        return {}

    def _compare(self, src, dest, src_name, dest_name):
        source, source_problems = tree_digest(src)
        copy, copy_problems = tree_digest(dest)
        return len(source), source_problems + copy_problems + compare_trees(source, copy, src_name, dest_name)

    # do ----------------------------------------------------------------------------------------------------

    def do_sync(self, args):
        self.ctx.tool([args["helper"], "sync", args["token"]], "Making the backing's first copy of %s" % args["path"])
        return {}

    def do_verify(self, args):
        if args.get("backing"):
            _read_current(args["backing"])
        entries, mismatches = self._compare(args["src"], args["dest"], args["src_name"], args["dest_name"])
        if mismatches:
            self.ctx.error("%s differs from %s in %d ways: %s" % (args["dest_name"], args["src_name"], len(mismatches),
                                                                  " ".join(mismatches[:MAX_LISTED])))
        return {"entries": entries}

    def do_writeback(self, args):
        """Before a persisted mount goes: the backing's current copy must be the mount as it is now."""
        current = os.path.join(args["backing"], "current") + "/."
        _read_current(args["backing"])
        if os.path.isdir(current):
            _entries, mismatches = self._compare(args["path"], current, "the RAM mount", "the backing's copy")
            if not mismatches:
                return {"synced": False}
        rc, _out, err = self.ctx.run_command([args["helper"], "sync", args["token"]])
        if rc == 3:
            # The helper refuses only when the backing holds the newer copy: that one returns to disk.
            self.ctx.warnings.append("host %s: the RAM copy at %s is not written back: %s. The backing's current copy "
                                     "returns to disk instead."
                                     % (self.ctx.host, args["path"], (err or "").strip().rstrip(".")))
            return {"synced": False, "refused": (err or "").strip()}
        if rc != 0:
            self.ctx.error("writing %s back to %s failed (exit %d): %s. Nothing was unmounted."
                           % (args["path"], args["backing"], rc, (err or "").strip()))
        _entries, mismatches = self._compare(args["path"], current, "the RAM mount", "the backing's copy")
        if mismatches:
            self.ctx.error("the backing's copy of %s differs from the mount in %d ways: %s"
                           % (args["path"], len(mismatches), " ".join(mismatches[:MAX_LISTED])))
        return {"synced": True}

    def do_return(self, args):
        """The backing's current copy into the directory on disk, which holds what was there before persist. The copy
        is made beside the directory (RETURN_SUFFIX) and checked, then swapped in by one rename: a kill or a power cut
        anywhere leaves the directory whole, old or new, and the backing's copy, which stays until the step after
        this one. The old directory goes only once the new one is on disk. Done again from the start after a kill."""
        path = args["path"]
        current = os.path.join(args["backing"], "current") + "/."
        fresh, aside = return_names(path)
        if not os.path.lexists(path) and os.path.lexists(aside):
            os.rename(aside, path)  # killed between the two renames of a swap: the old directory back first
            fsync_dir(os.path.dirname(path))
        _read_current(args["backing"])
        if not os.path.isdir(current):
            return {"returned": False}
        if _is_mount_point(path):
            self.ctx.error("'%s' is still a mount point, so its data cannot return to the directory on disk. Unmount it "
                           "(findmnt %s shows what is there), then run again; the backing %s keeps the data until then"
                           % (path, path, args["backing"]))
        if not os.path.isdir(path):
            os.makedirs(path, 0o755)
        in_place = _own_mount(path)
        if in_place:
            # The directory is a mount point of its own (a container's volume, a bind): renaming it is refused
            # (EXDEV, EBUSY), so the copy is made inside it and swapped in entry by entry (swap_in_place).
            fresh = os.path.join(path, IN_PLACE[0])
            resume_in_place(path)
        for left in (fresh,) if in_place else (fresh, aside):
            # A copy cut short, or the directory a swap replaced: the directory on disk and the backing hold the data.
            _remove_ours(left)
        os.mkdir(fresh, 0o700)
        os.chmod(fresh, 0o700)  # no setgid from the parent: the copy gives the root the backing copy's mode last
        try:
            # The helper's own return (by the engine's copier, a sync cut short applied) into the new directory.
            _persist_helper.return_copy(args["backing"], fresh)
        except _persist_helper.PersistError as exc:
            self.ctx.error("returning the backing's copy of %s to the directory on disk failed: %s. The directory on "
                           "disk and the backing %s are as they were" % (path, exc, args["backing"]))
        entries, mismatches = self._compare(current, fresh, "the backing's copy", "the directory on disk")
        if mismatches:
            self.ctx.error("the copy returned beside %s differs from the backing's copy in %d ways: %s. The directory "
                           "on disk and the backing are as they were" % (path, len(mismatches),
                                                                         " ".join(mismatches[:MAX_LISTED])))
        lost = os.path.join(fresh, "lost+found")
        if args.get("fstype") not in ("tmpfs", "ramfs") and os.path.isdir(lost) and not os.listdir(lost):
            os.rmdir(lost)  # the RAM file system's own, empty: not data
        self.ctx.tool(["sync", "-f", fresh], "Flushing the copy returned beside %s" % path)
        if in_place:
            swap_in_place(path)
            _entries, mismatches = self._compare(current, path, "the backing's copy", "the directory on disk")
            if mismatches:
                self.ctx.error("the directory on disk differs from the backing's copy of %s in %d ways after the swap: "
                               "%s. The backing %s keeps the data" % (path, len(mismatches),
                                                                      " ".join(mismatches[:MAX_LISTED]), args["backing"]))
            return {"returned": True, "entries": entries, "in_place": True}
        try:
            exchange(fresh, path, aside)
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.EBUSY):
                raise
            # overlayfs (a container's root) refuses to rename a directory of its lower layer: the checked copy
            # beside it is copied over instead; until it is gone it and the backing each hold the data whole.
            replace_by_copy(fresh, path)
            _entries, mismatches = self._compare(current, path, "the backing's copy", "the directory on disk")
            if mismatches:
                self.ctx.error("the directory on disk differs from the backing's copy of %s in %d ways: %s. The backing "
                               "%s and %s keep the data" % (path, len(mismatches), " ".join(mismatches[:MAX_LISTED]),
                                                            args["backing"], fresh))
        fsync_dir(os.path.dirname(path))
        _remove_ours(fresh)
        return {"returned": True, "entries": entries}

    def do_journald(self, args):
        """journald reads its drop-ins only when it starts (systemd 252 has no reload for it): a restart, which keeps
        its clients' streams (they wait in systemd's file descriptor store)."""
        if args.get("on") == "do" and self.ctx.systemd:
            self.ctx.tool(["systemctl", "restart", JOURNALD], "Restarting journald for its new size limit")
        return {}

    def do_journal_var(self, args):
        """journald out of /var/log/journal (relinquish) or back in (flush). Not systemd-journal-flush.service's stop:
        its --smart-relinquish-var does nothing while /var/log/journal is on the root file system, as it is before
        the mount."""
        self.ctx.tool(["journalctl", "--%s" % ("relinquish-var" if args["to"] == "relinquish" else "flush")],
                      "Moving journald %s /var/log/journal" % ("out of" if args["to"] == "relinquish" else "into"))
        return {}

    def do_clear_backing(self, args):
        """The data is back on disk: the helper's copies go, and the backing directory when nothing else is in it."""
        backing = args["backing"]
        if not os.path.isdir(backing):
            return {}
        names = os.listdir(backing)
        # current first, so a kill midway never leaves it pointing at a copy that is gone.
        for name in sorted((name for name in names if BACKING_NAMES_RE.match(name)), key=lambda n: n != "current"):
            _remove(os.path.join(backing, name))
        try:
            os.rmdir(backing)
        except OSError:
            pass  # files of someone else's: they stay
        return {}

    # undo --------------------------------------------------------------------------------------------------

    def undo_sync(self, args, result, same_boot):
        """The backing as it was before the first copy: current back on its old copy (or gone), new copies gone;
        only while the data is somewhere else too (the directory on disk of a migrate, or the same live mount in
        this boot). After a reboot a live mount's RAM is gone: a copy the sync made is the only one, and stays."""
        backing = args["backing"]
        if not os.path.isdir(backing):
            return True
        if not args.get("disk"):
            mount = _steps.top_mount(args["path"]) if same_boot else None
            if mount is None or args.get("mount_id") is None or mount["mount_id"] != args["mount_id"]:
                return True
        link = os.path.join(backing, "current")
        if args.get("current") is None:
            if os.path.islink(link):
                os.unlink(link)
        elif _current_target(backing) != args["current"]:
            temporary = os.path.join(backing, ".current-undo")
            if os.path.lexists(temporary):
                os.unlink(temporary)
            os.symlink(args["current"], temporary)
            os.rename(temporary, link)
        fsync_dir(backing)
        before = set(args.get("before") or ())
        for name in os.listdir(backing):
            if name not in before and name != "current" and BACKING_NAMES_RE.match(name):
                _remove(os.path.join(backing, name))
        return True

    def undo_verify(self, args, result, same_boot):
        return True

    def undo_writeback(self, args, result, same_boot):
        return True  # a complete copy of the mount as it was: the backing keeps it

    def undo_return(self, args, result, same_boot):
        return True  # after the pivot: only ever finished

    def undo_clear_backing(self, args, result, same_boot):
        return True

    def undo_journal_var(self, args, result, same_boot):
        if not same_boot:
            return True  # a new boot: journald is where the boot put it
        rc, _out, _err = self.ctx.run_command(["journalctl", "--flush" if args["to"] == "relinquish" else "--relinquish-var"])
        return rc == 0

    def undo_journald(self, args, result, same_boot):
        # Put before the drop-in's file step: undone after it, so journald starts again with the file as it was.
        if args.get("on") == "undo" and self.ctx.systemd:
            rc, _out, _err = self.ctx.run_command(["systemctl", "restart", JOURNALD])
            return rc == 0
        return True


def _step(name, **args):
    return {"step": name, "args": args}


def _systemctl(argv, undo=None, **extra):
    args = {"argv": list(argv), "undo": list(undo) if undo else None}
    args.update(extra)
    return {"step": "systemctl", "args": args}


def persisted_after(items):
    """The tokens of the persisted mounts the host holds once ITEMS (every mount_items() entry of one run) are all
    carried out: those set up now, less the ones the run releases, plus the ones it sets up. Each transaction is
    built before any runs, so what is shared between them (the helper) is decided on this end state."""
    tokens = set(name[:-len(".conf")] for name in _listdir(paths.PERSIST_CONF_DIR) if name.endswith(".conf"))
    for item in items:
        if item.get("state") == "absent":
            tokens.discard(item["token"])
        elif item.get("persist"):
            tokens.add(item["token"])
    return tokens


def build(item, ex, after=None):
    """(steps, pivot) of ITEM (a mount_items() entry with persist): the mount's own steps (_mount_txn.build_mount)
    with persist's put before its record. EX: the executor (host queries, systemd); AFTER: persisted_after() of the
    whole run (None: the host as it is, for a transaction alone)."""
    token = item["token"]
    persist = item["persist"]
    path = item["path"]
    backing = persist["backing"]
    if not ex.systemd:
        ex.error("%s.persist is set, but this host does not run systemd, and persist needs systemd units to restore "
                 "the data at boot and write it back. Set persist: null here" % item.get("label", path))
    live = path if item["state"] == "mounted" and item.get("action") in LIVE_ACTIONS else None
    state = read_state(token, backing, live, ex.systemd, ex.run_command)
    review = review_persist([item], {token: state}, ex.host)
    if review["errors"]:
        ex.error(" ".join(error.split(": ", 1)[1] if error.startswith("Host ") else error
                          for error in review["errors"]).rstrip("."))
    ex.warnings.extend(review["warnings"])
    decision = review["decisions"].get(token) or {}
    names = unit_names(token)
    unit_files = paths.persist_unit_files(token)
    stopped = running_services(ex, persist.get("services")) if decision.get("adopt") or decision.get("release") else []
    # services: the undo after a reboot stops them again first (the boot started them; see Transaction.back).
    pre = [_systemctl(["stop"] + stopped, ["start"] + stopped, services=True)] if stopped else []
    post = [_systemctl(["start"] + stopped)] if stopped else []
    if holds_journal(path) and ex.systemd and (decision.get("adopt") or decision.get("release")):
        # journald writes the journal mount's files: out of /var/log/journal while the mount changes, back after.
        pre.append(_step("journal_var", to="relinquish"))
        post.insert(0, _step("journal_var", to="flush"))

    if item["state"] == "absent":
        if not decision.get("release"):
            steps, pivot = build_mount(item, ex.systemd, [])
            return steps, pivot
        timer_active = unit_state(names["timer"], True, ex.run_command)[0]
        unit_active, enabled = unit_state(names["persist"], True, ex.run_command)
        release = []
        if timer_active:
            release.append(_systemctl(["stop", names["timer"]], ["start", names["timer"]]))
        if unit_active:
            # Its stop writes the mount back one last time (after the services that use the data stopped).
            release.append(_systemctl(["stop", names["persist"]], ["start", names["persist"]]))
        if item.get("action") == "unmount":
            release.append(_step("writeback", path=path, backing=backing, token=token, helper=paths.PERSIST_HELPER))
        middle = [_step("return", path=path, backing=backing, fstype=item.get("fstype")),
                  _step("clear_backing", backing=backing)]
        if enabled:
            middle.append(_systemctl(["disable", names["persist"]]))
        units = False
        for kind in ("timer", "sync", "persist"):
            units |= file_step(middle, unit_files[kind], None)
        file_step(middle, paths.persist_conf_file(token), None)
        for suffix in (".restored", ".partial", ".lock"):
            file_step(middle, "%s/%s%s" % (paths.PERSIST_STATE_DIR, token, suffix), None)
        # The last sync's status: the metrics collector would go on reporting a mount that is gone.
        file_step(middle, "%s/%s.status" % (paths.PERSIST_STATUS_DIR, token), None)
        _journald_steps(middle, token, None)
        if after is None:
            after = persisted_after([item])
        if not after - {token}:
            # No persisted mount is left once the whole run is done: the helper goes too.
            file_step(middle, paths.PERSIST_HELPER, None)
            file_step(middle, paths.PERSIST_DELTA, None)
        if units:
            middle.append(_step("reload"))
            # A boot between the unmount and this run failed the units (no mount to restore): gone now, so is that.
            middle.append(_systemctl(["reset-failed", names["persist"], names["sync"], names["timer"]],
                                     best_effort=True))
        steps, pivot = build_mount(item, ex.systemd, middle)
        for step in steps:
            if step["step"] == "fstab":
                # After a reboot: until the line is gone the boot mounts the path again and persist restores it, so
                # the removal is undone (and done again by the next run); from then on it is finished.
                step["args"]["boot_pivot"] = True
        return pre + release + steps + post, (None if pivot is None else pivot + len(pre) + len(release))

    mount_item = item
    if item.get("action") == "migrate" and decision.get("source") == "backing":
        # The backing holds the data of record; the directory on disk is older. The persist unit fills the mount.
        mount_item = dict(item, action="mount")
    # Marked "boot" (see build_mount()): the helper, its units, the first copy and its check, and the enabled unit
    # come before a new fstab line, so that no boot mounts the path until the backing holds a checked copy and the
    # unit that restores it before its services is enabled. journald's new limits stay after the line: they are
    # the mount's, and journald applies them to wherever /var/log is at its next start. Where a line already mounts
    # the path at boot (a live mount gaining persist), the unit is enabled before the first copy instead, and the
    # copy made is the point of no return after a reboot: a boot from then on restores it before the services,
    # and one before it fails the unit (no copy yet) and the services that require it, rather than let them write
    # into an empty mount that the next run would take for newer data than the copy.
    line_before = bool(lines_for(_steps.read_text(paths.FSTAB) or "", path))
    middle = []
    create = []
    journald_text = journald_dropin_text(item)
    for directory in (paths.LIBEXEC_DIR, paths.PERSIST_CONF_DIR) + ((paths.JOURNALD_DROPIN_DIR,) if journald_text else ()):
        create.extend(missing for missing in missing_dirs(directory) if missing not in create)
    if create:
        middle.append(_step("mkdir", create=create))
    if not os.path.isdir(backing):
        # Only root reads the copies as a whole; inside, each keeps its own owners and modes.
        middle.append(_step("mkdir", create=missing_dirs(backing), mode="0700"))
    file_step(middle, paths.PERSIST_HELPER, persist_helper_text(), mode=0o755, header=False)
    file_step(middle, paths.PERSIST_DELTA, delta_helper_text(), mode=0o644, header=False)
    file_step(middle, paths.persist_conf_file(token), conf_text(item))
    unit_active, enabled = unit_state(names["persist"], True, ex.run_command) if state["unit"] else (False, False)
    timer_active = unit_state(names["timer"], True, ex.run_command)[0] if state["unit"] else False
    texts = unit_texts(item)
    changed = {}
    for kind in ("persist", "sync", "timer"):
        changed[kind] = file_step(middle, unit_files[kind], texts[kind])
    if any(changed.values()):
        middle.append(_step("reload"))
    for step in middle:
        step["boot"] = True
    if state["unit"] and changed["persist"]:
        # [Install] links follow the unit's new RequiredBy=.
        enable = dict(_systemctl(["reenable", names["persist"]]), boot=True)
    elif not enabled:
        enable = dict(_systemctl(["enable", names["persist"]], ["disable", names["persist"]]), boot=True)
    else:
        enable = None
    # Before the services start again: journald, moved out of the mount with them, moves in with its new limits.
    _journald_steps(middle, token, journald_text)
    if decision.get("adopt") and decision.get("source") == "ram":
        # Where the data is besides RAM until the first copy is checked: a migrate leaves the directory on disk as
        # it was, a new mount starts empty; a live mount has no other copy, so after a reboot its backing's copy is
        # the only one (undo_sync).
        elsewhere = {"disk": True} if mount_item.get("action") in ("migrate", "mount") else \
            {"mount_id": (_steps.top_mount(path) or {}).get("mount_id")}
        if line_before and enable is not None:
            middle.append(enable)
            enable = None
        # boot_pivot: after a reboot (RAM gone) the point of no return, whatever the pivot of this boot: before it
        # the data of record is where it was (recover rolls back), from it on the backing's copy: the copy checked,
        # or, where a line already mounts the path at boot and the unit that restores it is enabled, the copy made
        # (its probe reads current). Before a new fstab line (build_mount) the line takes it over.
        middle.append(dict(_step("sync", path=path, backing=backing, token=token, helper=paths.PERSIST_HELPER,
                                 before=state["names"],
                                 current=_current_target(backing) if os.path.isdir(backing) else None,
                                 **dict(elsewhere, **({"boot_pivot": True} if line_before else {}))), boot=True))
        middle.append(dict(_step("verify", src=path, dest=backing + "/current/.", src_name="the RAM mount",
                                 dest_name="the backing's first copy", backing=backing,
                                 **({} if line_before else {"boot_pivot": True})), boot=True))
    if enable is not None:
        middle.append(enable)
    restored = "%s/%s.restored" % (paths.PERSIST_STATE_DIR, token)
    start = None
    if decision.get("verify") == "restore" and unit_active:
        # Still running from a mount that is gone: its stop-time sync refuses the new, empty mount, its start fills it.
        start = ["restart", names["persist"]]
    elif not unit_active:
        start = ["start", names["persist"]]
    start_i = None
    if start:
        start_i = len(middle)
        args = {"argv": start, "undo": ["stop", names["persist"]], "unrestore": restored, "path": path}
        middle.append({"step": "systemctl_start", "args": args})
    if decision.get("verify") == "restore":
        middle.append(_step("verify", src=backing + "/current/.", dest=path, src_name="the backing's copy",
                            dest_name="the RAM mount restored from it", backing=backing))
    if state["unit"] and changed["timer"] and timer_active:
        middle.append(_systemctl(["restart", names["timer"]]))
    elif not timer_active:
        middle.append(_systemctl(["start", names["timer"]], ["stop", names["timer"]]))
    steps, pivot = build_mount(mount_item, ex.systemd, middle)
    # With neither a pivot nor a start, nothing live changes: a failed step is undone, a killed one finished or
    # undone by its files alone.
    if pivot is None and start_i is not None:
        pivot = steps.index(middle[start_i])
    if pivot is not None:
        pivot += len(pre)
    return pre + steps + post, pivot


def _journald_steps(middle, token, text):
    """The journald drop-in of the mount with TOKEN made to hold TEXT (None: removed), between two journald steps:
    the restart after it when done, and one before it that restarts journald when the change is undone."""
    steps = []
    if file_step(steps, paths.journald_dropin_file(token), text):
        middle.append(_step("journald", on="undo"))
        middle.extend(steps)
        middle.append(_step("journald", on="do"))


def _listdir(directory):
    try:
        return os.listdir(directory)
    except OSError:
        return []
