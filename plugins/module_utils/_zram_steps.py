# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""zram devices as journaled transactions: the zram steps of the executor, and what each entry's transaction holds.

One transaction per zram_devices entry, run by _transaction.Transaction under the host lock, all or nothing per run:

- a swap entry: zram_add (hot_add of the number the kernel gives next), zram_set (comp_algorithm, disksize,
  mem_limit, in the order the kernel needs), mkswap, swapon (the pivot), then the files that bring it back at
  boot (the entry's record NAME.conf, the setup script and unit, or a zram-generator drop-in) and its fstab line.
- a file system entry: zram_add, zram_set, mkfs, then the mount's own steps as _mount_txn.build_mount() makes them for
  the path (mount or migrate, root, fstab, record, tmpfiles; the pivot is the mount, or the move of a migrate),
  then the zram files. One transaction: a failure or a kill anywhere leaves neither a device nor a mount.
  An entry with persist gets only its device here: ramdisk_apply carries out its mount as a mount of its own
  (written back and unmounted before the device goes, mounted after it is made).
- an absent entry: swapoff or the mount's unmount (the pivot), the fstab line, the unit, the files, then the device.

The pivot is the last live step, and every file step comes after it: a run that died before it is rolled back
(the device reset and removed; no file was touched), one that died after it is rolled forward (the files
written). After a reboot the devices are gone, so only file steps are finished: the record then names the device
number of the dead run, and the next run, finding no such device, makes a new one, whatever number the kernel
gives, and rewrites the record, unit and fstab line for it (a device whose number changed). A recorded device
that exists is taken as the entry's; one still to be made gets the number hot_add gives next, known before the
transaction is journaled, so that even a run killed between hot_add and the journal's `done` line leaves a device
that recovery can name. If another kernel user (a container on the same kernel) takes that number first, the
step fails and nothing is kept: run again.

Every undo reads the host first (/sys/block, /proc/swaps, the mount table): it is safe whether its step ran, half
ran or never started.
"""

from __future__ import annotations

import errno
import os
import stat
import time

from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths as paths
from ansible_collections.ramdisk.provision.plugins.module_utils._atomic import AtomicWriteError, write_file
from ansible_collections.ramdisk.provision.plugins.module_utils._fstab import format_line, parse, replace_lines
from ansible_collections.ramdisk.provision.plugins.module_utils._mount_steps import item as mount_item
from ansible_collections.ramdisk.provision.plugins.module_utils._mount_txn import build_mount
from ansible_collections.ramdisk.provision.plugins.module_utils._procfs import parse_mountinfo, parse_swaps
from ansible_collections.ramdisk.provision.plugins.module_utils._size import format_size, round_up_pages
from ansible_collections.ramdisk.provision.plugins.module_utils._steps import (
    HEADER, ApplyError, StepError, blkid_type, error_text, file_step)
from ansible_collections.ramdisk.provision.plugins.module_utils._transaction import (
    Transaction, back_out, ensure_new_root, sweep_new_root)
from ansible_collections.ramdisk.provision.plugins.module_utils._zram import (
    ZramError, choose_algorithm, decide, device_number, lowest_free_number, read_device)
from ansible_collections.ramdisk.provision.plugins.module_utils._zram_generator import render_section

SYS_BLOCK = "/sys/block"
CONTROL = paths.ZRAM_CONTROL
# Steps that act on the kernel: after a reboot there is nothing left for them to undo or finish.
LIVE_STEPS = ("zram_add", "zram_set", "zram_remove", "mkswap", "mkfs", "swapon", "swapoff")
PIVOTS = ("swapon", "swapoff")
# The kernel refuses a reset while anyone has the device open; right after a swapoff or an unmount udev may
# still probe it for a moment.
BUSY_RETRY_SECONDS = 2.0
MKFS = {"ext4": ["mkfs.ext4", "-q", "-F"], "xfs": ["mkfs.xfs", "-q", "-f"]}


class Kernel(object):
    """The host's zram devices and swaps; unit tests give the executor a fake with the same methods."""

    def read(self, path):
        try:
            with open(path, "r", errors="replace") as handle:
                return handle.read()
        except (IOError, OSError):
            return None

    def write(self, path, value):
        """One sysfs attribute; a reset or hot_remove refused with EBUSY is tried again for a moment."""
        deadline = time.monotonic() + BUSY_RETRY_SECONDS
        while True:
            try:
                fd = os.open(path, os.O_WRONLY)
                try:
                    os.write(fd, str(value).encode("ascii"))
                finally:
                    os.close(fd)
                return
            except OSError as exc:
                if exc.errno != errno.EBUSY or time.monotonic() >= deadline:
                    raise
            time.sleep(0.1)

    def hot_add(self):
        with open(CONTROL + "/hot_add") as handle:
            return int(handle.read().strip())

    def names(self):
        try:
            return sorted((name for name in os.listdir(SYS_BLOCK) if device_number(name) is not None),
                          key=device_number)
        except OSError:
            return []

    def swaps(self):
        return parse_swaps(self.read("/proc/swaps") or "")

    def mounts(self):
        return parse_mountinfo(self.read("/proc/self/mountinfo") or "")

    def wait_node(self, name):
        # devtmpfs makes the node; give udev a moment where it does it instead.
        for _attempt in range(20):
            if os.path.exists("/dev/" + name):
                return True
            time.sleep(0.1)
        return os.path.exists("/dev/" + name)


def swap_of(kernel, name):
    """The /proc/swaps row of device NAME, or None. A swap turned on from another root shows as /zramN."""
    for entry in kernel.swaps():
        if entry["path"].rsplit("/", 1)[-1] == name:
            return entry
    return None


def mounted_at(kernel, name):
    return [mount["mount_point"] for mount in kernel.mounts() if mount["source"] == "/dev/" + name]


# fstab lines of swap devices: they all have the mount point "none", so they are told apart by their source.

def swap_lines(text, src):
    return [line["raw"] for line in parse(text) if line["entry"] is not None and line["entry"]["src"] == src
            and line["entry"]["fstype"] == "swap"]


def set_swap_lines(text, src, new_lines):
    """TEXT with the swap lines of SRC replaced by NEW_LINES (raw), where the first of them was, or at the end."""
    return replace_lines(text, lambda entry: entry["src"] == src and entry["fstype"] == "swap", new_lines)


class ZramSteps(object):
    """The zram steps, acting through CTX (an _steps.Context, whose kernel is a Kernel): each do_ gets its journaled
    ARGS and returns what it learnt; each undo_ gets ARGS, RESULT ({} when the step never said it was done) and
    SAME_BOOT."""

    live = LIVE_STEPS

    def __init__(self, ctx):
        self.ctx = ctx

    @property
    def kernel(self):
        return self.ctx.kernel

    def steps(self):
        return {
            "zram_add": (self.do_zram_add, self.undo_zram_add),
            "zram_set": (self.do_zram_set, self.undo_zram_set),
            "mkswap": (self.do_mkswap, self.undo_mkswap),
            "mkfs": (self.do_mkfs, self.undo_mkfs),
            "swapon": (self.do_swapon, self.undo_swapon),
            "swapoff": (self.do_swapoff, self.undo_swapoff),
            "zram_remove": (self.do_zram_remove, self.undo_zram_remove),
            "swap_fstab": (self.do_swap_fstab, self.undo_swap_fstab),
        }

    def probes(self):
        return {"swapon": self.swapon_took_effect, "swapoff": self.swapoff_took_effect}

    def _sys(self, name, attr):
        return "%s/%s/%s" % (SYS_BLOCK, name, attr)

    def _device(self, name):
        return read_device(name, self.kernel.read)

    def _reset_remove(self, name, what):
        """Reset and remove device NAME, when it is there and nothing uses it."""
        state = self._device(name)
        if state is None:
            return
        if swap_of(self.kernel, name) or mounted_at(self.kernel, name):
            raise StepError("%s: /dev/%s is still in use (swap or mounted), so it was not removed" % (what, name))
        try:
            if state["initialised"]:
                self.kernel.write(self._sys(name, "reset"), 1)
            self.kernel.write(CONTROL + "/hot_remove", device_number(name))
        except OSError as exc:
            raise StepError("%s: removing /dev/%s failed: %s (echo %d > %s/hot_remove, once nothing holds it)"
                            % (what, name, exc.strerror or exc, device_number(name), CONTROL))

    # zram_add: hot_add, which must give the number planned (the lowest free one) --------------------------

    def do_zram_add(self, args):
        name = args["device"]
        if self._device(name) is not None:
            raise StepError("/dev/%s, which this entry was to get, exists already: another user of this kernel "
                            "made it after the plan" % name)
        try:
            made = "zram%d" % self.kernel.hot_add()
        except (OSError, ValueError) as exc:
            raise StepError("hot_add through %s failed: %s" % (CONTROL, getattr(exc, "strerror", None) or exc))
        if made != name:
            self._reset_remove(made, "taking back the device hot_add gave instead")
            raise StepError("hot_add gave %s, not %s: something outside this host's lock (another container on "
                            "this kernel?) is adding zram devices; %s was removed again. Run again"
                            % (made, name, made))
        if not self.kernel.wait_node(name):
            raise StepError("/dev/%s is missing although /sys/block/%s exists: in a container, bind the host's /dev "
                            "(-v /dev:/dev)" % (name, name))
        return {"device": name}

    def undo_zram_add(self, args, result, same_boot):
        # The number was planned before hot_add, so a run killed before its `done` line still names the device.
        if same_boot:
            self._reset_remove(args["device"], "undoing the new zram device")
        return True

    # zram_set: the settings, in the kernel's order; undo puts back what an existing device had ------------

    def do_zram_set(self, args):
        name = args["device"]
        for attr, value in args["writes"]:
            try:
                self.kernel.write(self._sys(name, attr), value)
            except OSError as exc:
                if attr == "comp_algorithm" and exc.errno == errno.EINVAL:
                    raise StepError("the kernel refused algorithm '%s' for /dev/%s (it offers: %s)"
                                    % (value, name, " ".join((self._device(name) or {}).get("algorithms") or [])
                                       or "none"))
                raise StepError("writing %s to %s failed: %s" % (value, self._sys(name, attr), exc.strerror or exc))
        return {}

    def undo_zram_set(self, args, result, same_boot):
        old = args.get("old")
        name = args["device"]
        state = self._device(name) if same_boot else None
        if old is None or state is None:
            return True  # a new device: the undo of its zram_add takes it away
        writes = []
        if any(attr == "reset" for attr, _value in args["writes"]):
            if swap_of(self.kernel, name) or mounted_at(self.kernel, name):
                return True  # in use again: never reset under its data
            if state["disksize"] == old["disksize"] and state["algorithm"] == old["algorithm"]:
                writes = []
            else:
                writes = [("reset", 1)] + ([("comp_algorithm", old["algorithm"])] if old["algorithm"] else []) + \
                    [("disksize", old["disksize"])]
            if old.get("mem_limit"):
                writes.append(("mem_limit", old["mem_limit"]))
        elif state["mem_limit"] != (old.get("mem_limit") or 0):
            writes = [("mem_limit", old.get("mem_limit") or 0)]
        for attr, value in writes:
            self.kernel.write(self._sys(name, attr), value)
        return True

    # mkswap, mkfs: what they write goes with the device's reset; nothing to undo ------------------------

    def do_mkswap(self, args):
        self.ctx.tool(["mkswap", "-L", args.get("label") or "zram", "/dev/" + args["device"]],
                      "Making swap on /dev/%s" % args["device"])
        return {}

    def undo_mkswap(self, args, result, same_boot):
        return True

    def do_mkfs(self, args):
        self.ctx.tool(MKFS.get(args["fstype"], ["mkfs", "-t", args["fstype"]]) + list(args.get("options") or [])
                      + ["/dev/" + args["device"]], "Making %s on /dev/%s" % (args["fstype"], args["device"]))
        return {}

    def undo_mkfs(self, args, result, same_boot):
        return True

    # swapon, swapoff ----------------------------------------------------------------------------------------

    def do_swapon(self, args):
        name = args["device"]
        if swap_of(self.kernel, name) is None:
            self.ctx.tool(["swapon", "--priority", str(args["priority"]), "/dev/" + name],
                          "Turning swap on for /dev/%s" % name)
        return {"active": True}

    def undo_swapon(self, args, result, same_boot):
        name = args["device"]
        if same_boot and swap_of(self.kernel, name) is not None:
            self.ctx.tool(["swapoff", "/dev/" + name], "Turning the new swap /dev/%s off" % name)
        return True

    def do_swapoff(self, args):
        name = args["device"]
        if swap_of(self.kernel, name) is not None:
            self.ctx.tool(["swapoff", "/dev/" + name], "Turning swap off for /dev/%s" % name)
        return {"off": True}

    def undo_swapoff(self, args, result, same_boot):
        name = args["device"]
        state = self._device(name) if same_boot else None
        if state is None or not state["initialised"] or swap_of(self.kernel, name) is not None:
            return True  # gone (removed, or a reboot), or on again
        if args.get("remake"):
            self.ctx.tool(["mkswap", "-L", args.get("label") or "zram", "/dev/" + name], "Making swap on /dev/%s again" % name)
        self.ctx.tool(["swapon", "--priority", str(args["priority"]), "/dev/" + name], "Turning swap on again for /dev/%s"
                      % name)
        return True

    # zram_remove: reset and hot_remove; what was in it is gone ----------------------------------------------

    def do_zram_remove(self, args):
        self._reset_remove(args["device"], "removing the zram device")
        return {}

    def undo_zram_remove(self, args, result, same_boot):
        return True

    # swap_fstab: the swap lines of one source (their mount point is "none" for all) ------------------------

    def do_swap_fstab(self, args):
        text = self.kernel.read(paths.FSTAB) or ""
        new = set_swap_lines(text, args["src"], [format_line(*args["line"])] if args.get("line") else [])
        if new != text:
            write_file(paths.FSTAB, new)
        return {}

    def undo_swap_fstab(self, args, result, same_boot):
        text = self.kernel.read(paths.FSTAB) or ""
        new = set_swap_lines(text, args["src"], args.get("old") or [])
        if new != text:
            write_file(paths.FSTAB, new)
        return True

    # Did a pivot that never said done take effect (in the same boot)? ------------------------------------

    def swapon_took_effect(self, args):
        return swap_of(self.kernel, args["device"]) is not None

    def swapoff_took_effect(self, args):
        return swap_of(self.kernel, args["device"]) is None


# Files ----------------------------------------------------------------------------------------------------

def conf_text(entry, device, size, algorithm, persistence):
    """The entry's record, which the setup script reads at boot. ALGORITHM: the one asked (none: the kernel's
    default, as on the device now), so that a run that made the device and one that found it write the same."""
    return ("# zram device %s (%s), read by %s at boot (%s).\n"
            "DEVICE=%s\nSIZE=%s\nALGORITHM=%s\nMEM_LIMIT=%s\n"
            % (entry["name"], entry["use"], paths.ZRAM_SETUP,
               "zram_persistence: units" if persistence == "units" else
               "with zram_persistence: generator, only a record of which device the entry has",
               device, size, algorithm or "", entry.get("mem_limit_bytes") or ""))


UNIT_TEXT = """# Creates and sizes the zram device of entry %%i before its swap or file system is made and used.
[Unit]
Description=zram device %%i for ramdisk.provision
DefaultDependencies=no
After=systemd-modules-load.service
Before=local-fs-pre.target swap.target
Wants=local-fs-pre.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=%s %%i

[Install]
WantedBy=local-fs-pre.target
"""

SETUP_TEXT = """# Creates and sizes one zram device at boot from %(conf)s/NAME.conf, before systemd
# makes its swap or file system (x-systemd.makefs) and turns it on. Usage: zram-setup NAME
set -eu
conf=%(conf)s/$1.conf
[ -r "$conf" ] || { echo "zram-setup: $conf is missing" >&2; exit 1; }
. "$conf"
sys=/sys/block/$DEVICE
# A device is added with the lowest free number: add until ours exists (a few at most).
tries=0
while [ ! -e "$sys" ]; do
  [ -w %(control)s/hot_add ] || modprobe zram num_devices=0 2>/dev/null || true
  [ "$tries" -lt 32 ] || { echo "zram-setup: $DEVICE did not appear" >&2; exit 1; }
  cat %(control)s/hot_add >/dev/null
  tries=$((tries + 1))
done
# A device that outlived the last start of this unit (a restarted unit; a container restarted on a kernel
# that kept it) is reset, so it starts empty as after a boot; one still in use (active swap, mounted) that is
# already set up as configured is left as it is, and one that differs is an error.
if [ "$(cat "$sys/disksize")" != "0" ] && ! { echo 1 > "$sys/reset"; } 2>/dev/null; then
  selected=$(sed -n 's/.*\\[\\([^]]*\\)\\].*/\\1/p' "$sys/comp_algorithm")
  if [ "$(cat "$sys/disksize")" = "$SIZE" ] && { [ -z "$ALGORITHM" ] || [ "$selected" = "$ALGORITHM" ]; }; then
    echo "zram-setup: $DEVICE is in use and already set up as configured; left as it is"
    exit 0
  fi
  echo "zram-setup: $DEVICE is in use, so it cannot be reset to size $SIZE${ALGORITHM:+ and algorithm $ALGORITHM}" >&2
  exit 1
fi
[ -z "$ALGORITHM" ] || echo "$ALGORITHM" > "$sys/comp_algorithm"
echo "$SIZE" > "$sys/disksize"
[ -z "$MEM_LIMIT" ] || echo "$MEM_LIMIT" > "$sys/mem_limit"
"""


def setup_text():
    return SETUP_TEXT % {"conf": paths.ZRAM_RECORD_DIR, "control": CONTROL}


def unit_text():
    return UNIT_TEXT % paths.ZRAM_SETUP


# Transactions ---------------------------------------------------------------------------------------------

def _wanted_algorithm(entry, state, kernel, allow_fallback):
    wanted = entry.get("algorithm")
    if not wanted:
        return None, None
    offered = (state or {}).get("algorithms")
    if not offered:
        for other in kernel.names():
            found = read_device(other, kernel.read)
            if found and found["algorithms"]:
                offered = found["algorithms"]
                break
    if not offered:
        return wanted, None  # no device to ask: the kernel says at zram_set
    try:
        return choose_algorithm(wanted, offered, allow_fallback)
    except ZramError as exc:
        raise StepError(str(exc))


def _kept_root(mount):
    """MOUNT with the root keys its entry left unset (root_keep) as the directory at its path has them: a migrate
    keeps the owner and mode of the directory it goes over, and a live mount the ones it has."""
    if not mount.get("root_keep"):
        return mount
    try:
        info = os.stat(mount["path"])
    except FileNotFoundError:
        # The directory the run makes (0755, root's), as the next run finds it: a second run changes nothing.
        info = None
    except (OSError, KeyError):
        return mount
    if info is not None and not stat.S_ISDIR(info.st_mode):
        return mount
    found = {"mode": "%04o" % stat.S_IMODE(info.st_mode), "owner": str(info.st_uid), "group": str(info.st_gid)} \
        if info is not None else {"mode": "0755", "owner": "0", "group": "0"}
    return dict(mount, **dict((key, found[key]) for key in mount["root_keep"] if key in found))


def _mount_entry(entry, device, settings):
    """The entry's mount for the shared pipeline, on /dev/DEVICE; with zram-generator, its setup unit makes the
    device at boot instead of ours."""
    mount = dict(_kept_root(entry["mount"]), src="/dev/" + device)
    if settings.get("persistence") == "generator":
        mount["options"] = [option.replace("x-systemd.requires=" + entry["unit"],
                                           "x-systemd.requires=systemd-zram-setup@%s.service" % device)
                            for option in mount["options"]]
    return mount


def build_zram(entry, ex, settings, taken):
    """(steps, pivot, info) of one planned zram_devices ENTRY (a _zram_plan.plan_zram() device), from what the
    host holds now. SETTINGS: known ({entry name: zramN} from the records), persistence (units or generator),
    allow_swap_cycle, allow_algorithm_fallback, vendor_tmp. TAKEN: device names this run gave out already (check
    mode makes none). INFO: name, use, state, device, action, reboot_required, reason, mount (with persist: the
    mount ramdisk_apply makes after the device)."""
    kernel = ex.kernel
    name = entry["name"]
    known = (settings.get("known") or {}).get(name)
    state = read_device(known, kernel.read) if known else None
    if state is not None and not recorded_device(kernel, entry, known, state):
        state = None  # its number is someone else's now (a reboot gave it to another user): left alone
    persistence = settings.get("persistence") or "units"
    units = persistence == "units" and ex.systemd
    unit = entry["unit"]
    link = paths.zram_unit_link(name)
    fstab = kernel.read(paths.FSTAB) or ""
    steps = []
    pivot = None
    reload_needed = False
    info = {"name": name, "use": entry["use"], "state": entry["state"], "device": known, "action": "ok",
            "reboot_required": False, "reason": None, "mount": None, "algorithm": None,
            "size_bytes": entry.get("size_bytes")}
    filesystem = entry["use"] == "filesystem"
    deep = filesystem and bool((entry.get("mount") or {}).get("persist"))

    def add(step, args):
        steps.append({"step": step, "args": args})

    if entry["state"] == "absent":
        info["action"] = "absent"
        if known is None:
            return steps, pivot, info
        if filesystem and not deep:
            mount_steps, mount_pivot = build_mount(mount_item(_mount_entry(entry, known, settings),
                                                              settings.get("vendor_tmp"), ex.systemd), ex.systemd)
            pivot = mount_pivot
            steps.extend(mount_steps)
        swap = swap_of(kernel, known) if state is not None else None
        if swap is not None:
            pivot = len(steps)
            add("swapoff", {"device": known, "priority": swap["priority"], "label": name})
        old_lines = swap_lines(fstab, "/dev/" + known)
        if old_lines:
            add("swap_fstab", {"src": "/dev/" + known, "line": None, "old": old_lines})
        if os.path.lexists(link):
            add("systemctl", {"argv": ["disable", unit], "undo": ["enable", unit]})
        file_step(steps, paths.zram_record_file(name), None)
        if file_step(steps, paths.zram_generator_dropin(name), None):
            reload_needed = True
        if reload_needed and ex.systemd:
            add("reload", {})
        if state is not None:
            add("zram_remove", {"device": known})
            info["action"] = "remove"
        return steps, pivot, info

    disksize = round_up_pages(entry["size_bytes"])
    algorithm, warning = _wanted_algorithm(entry, state, kernel, settings.get("allow_algorithm_fallback"))
    if warning:
        info["reason"] = warning
    wanted = {"disksize": disksize, "algorithm": algorithm, "mem_limit": entry.get("mem_limit_bytes")}
    made = False
    if state is None:
        # No device yet, or the recorded one is gone (a reboot without its unit, or removed by hand): a new one,
        # with the number hot_add gives next.
        device = "zram%d" % lowest_free_number(list(kernel.names()) + sorted(taken))
        taken.add(device)
        decision = decide(None, wanted, {})
        add("zram_add", {"device": device, "entry": name})
        add("zram_set", {"device": device, "writes": [list(write) for write in decision["steps"]], "old": None})
        info["action"] = "create"
        made = True
    else:
        device = known
        swap = swap_of(kernel, device)
        usage = {"mountpoints": mounted_at(kernel, device), "swap_active": swap is not None,
                 "swap_used_bytes": swap["used_bytes"] if swap else 0, "holders": [], "busy": False,
                 "mem_available_bytes": settings.get("mem_available_bytes") or 0}
        decision = decide(state, wanted, usage)
        action = decision["action"]
        if action == "cycle-swap" and not settings.get("allow_swap_cycle"):
            action = "reboot-required"
            decision["reason"] += " Set zram_allow_swap_cycle: true to do that now, or reboot."
        info["action"] = action
        old = {"disksize": state["disksize"], "algorithm": state["algorithm"], "mem_limit": state["mem_limit"]}
        if action == "reboot-required":
            info.update(reboot_required=True, reason=decision["reason"])
        elif action == "cycle-swap":
            add("swapoff", {"device": device, "priority": swap["priority"], "label": name, "remake": True})
            add("zram_set", {"device": device, "writes": [list(write) for write in decision["steps"]], "old": old})
            made = True
        elif action in ("configure", "reset-then-configure"):
            add("zram_set", {"device": device, "writes": [list(write) for write in decision["steps"]], "old": old})
            made = action == "reset-then-configure"
        if entry["use"] == "swap" and swap is not None and swap["priority"] != entry["priority"] and not made:
            info.update(reboot_required=True, reason="swap priority %s is live; %s applies at the next boot"
                        % (swap["priority"], entry["priority"]))
    info["device"] = device
    info["algorithm"] = algorithm or (state or {}).get("algorithm")
    src = "/dev/" + device
    in_use = not made and (swap_of(kernel, device) is not None or bool(mounted_at(kernel, device)))

    if entry["use"] == "swap":
        if made or (not in_use and blkid_type(ex, device) != "swap"):
            add("mkswap", {"device": device, "label": name})
        if made or swap_of(kernel, device) is None:
            pivot = len(steps)
            add("swapon", {"device": device, "priority": entry["priority"]})
    else:
        if made or (not in_use and blkid_type(ex, device) != entry["fstype"]):
            add("mkfs", {"device": device, "fstype": entry["fstype"], "options": list(entry.get("mkfs_options") or [])})
        mount = _mount_entry(entry, device, settings)
        if deep:
            info["mount"] = mount
        else:
            mount_steps, mount_pivot = build_mount(mount_item(mount, settings.get("vendor_tmp"), ex.systemd), ex.systemd)
            if mount_pivot is not None:
                pivot = len(steps) + mount_pivot
            steps.extend(mount_steps)

    # What brings the device back at boot, after the pivot: finished after a reboot, as the boot needs them.
    file_step(steps, paths.zram_record_file(name),
              conf_text(entry, device, disksize, algorithm, persistence))
    if units:
        changed = file_step(steps, paths.ZRAM_SETUP, "#!/bin/sh\n" + setup_text_with_header(), mode=0o755,
                            header=False)
        changed |= file_step(steps, paths.ZRAM_UNIT, unit_text())
        if file_step(steps, paths.zram_generator_dropin(name), None):
            changed = True
        if changed:
            add("reload", {})
        if changed or not os.path.lexists(link):
            add("systemctl", {"argv": ["enable", unit], "undo": ["disable", unit]})
    elif persistence == "generator":
        text = render_section(entry, device, disksize, algorithm)
        if file_step(steps, paths.zram_generator_dropin(name), text) and ex.systemd:
            add("reload", {})
        if os.path.lexists(link):
            add("systemctl", {"argv": ["disable", unit], "undo": ["enable", unit]})
    if entry["use"] == "swap":
        if known and known != device and swap_lines(fstab, "/dev/" + known):
            add("swap_fstab", {"src": "/dev/" + known, "line": None, "old": swap_lines(fstab, "/dev/" + known)})
        old_lines = swap_lines(fstab, src)
        if persistence == "units":
            line = [src, "none", "swap", "pri=%s,x-systemd.requires=%s,x-systemd.makefs" % (entry["priority"], unit)]
            if old_lines != [format_line(*line)]:
                add("swap_fstab", {"src": src, "line": line, "old": old_lines})
        elif old_lines:
            add("swap_fstab", {"src": src, "line": None, "old": old_lines})
    return steps, pivot, info


def recorded_device(kernel, entry, device, state):
    """Whether DEVICE (its sysfs STATE) is the one the record of ENTRY describes: of the size the record says, or
    in use as the entry uses it (swap; mounted at its path), as a device of ours may be while a reboot is needed.
    After a reboot without our unit the number may belong to another user of the kernel, whose device must not be
    reset or removed."""
    if entry["use"] == "swap" and swap_of(kernel, device) is not None:
        return True
    if entry.get("mount") and entry["mount"]["path"] in mounted_at(kernel, device):
        return True
    size = None
    for line in (kernel.read(paths.zram_record_file(entry["name"])) or "").splitlines():
        if line.startswith("SIZE=") and line[5:].strip().isdigit():
            size = int(line[5:].strip())
    return bool(state["disksize"]) and state["disksize"] == size


def setup_text_with_header():
    return HEADER + setup_text()


def describe_entry(entry):
    return "zram_devices entry '%s'" % entry["name"]


def report_line(info, systemd):
    """The line the role prints for one device, as it did before the executor."""
    if info["state"] == "absent":
        return "%s: %s" % (info["name"], "removed /dev/%s" % info["device"] if info["action"] == "remove"
                           else "absent")
    where = "at %s" % info["mount"]["path"] if info.get("mount") else (
        "at %s" % info["path"] if info.get("path") else "priority %s" % info.get("priority"))
    return "%s: /dev/%s, %s %s, %s %s%s%s" % (
        info["name"], info["device"], info["use"], where, format_size(info.get("size_bytes") or 0),
        info.get("algorithm") or "", "" if not info["reboot_required"] else "; REBOOT REQUIRED: %s" % info["reason"],
        "" if systemd else "; not persisted (no systemd)")


def apply_zram(entries, ex, journal, run, settings):
    """Carry out the planned zram ENTRIES, one transaction each, built just before it runs (from what the host
    holds then). Returns [info + steps, changed]. A failure undoes every transaction of this run, newest first,
    and raises ApplyError saying what failed and what the host holds now."""
    taken = set()
    out = []
    done = []
    staging = False
    try:
        for entry in entries:
            txn = None
            try:
                steps, pivot, info = build_zram(entry, ex, settings, taken)
                info.update(path=(entry.get("mount") or {}).get("path"), priority=entry.get("priority"))
                out.append(dict(info, steps=[step["step"] for step in steps], changed=bool(steps)))
                if ex.check or not steps:
                    continue
                what = {"path": "%s (/dev/%s)" % (describe_entry(entry), info["device"]), "action": "zram " + info["action"],
                        "pivot": pivot, "steps": steps, "zram": entry["name"]}
                if any(step["step"] == "move" for step in steps):
                    ensure_new_root(ex)  # a migrate fills its new mount under our private staging mount
                    staging = True
                txn = Transaction(ex, journal, run, "zram-" + entry["name"], what)
                txn.start()
                txn.forward()
                # What the kernel chose, where the entry left the algorithm to it.
                out[-1]["algorithm"] = (read_device(info["device"], ex.kernel.read) or {}).get("algorithm") or \
                    out[-1]["algorithm"]
            except (StepError, AtomicWriteError, OSError, KeyError) as exc:
                if ex.check:
                    raise
                failed = txn.what["steps"][max(txn.begun)]["step"] if txn is not None and txn.begun else None
                _fail_zram(ex, journal, txn, done, entry, failed, exc)
            done.append((txn, info))
        if staging:
            sweep_new_root(ex)
    finally:
        journal.close()
    if not ex.check:
        journal.clear()
    return out


def _fail_zram(ex, journal, txn, done, entry, failed, exc):
    txns = ([txn] if txn is not None else []) + [older for older, _info in reversed(done) if older is not None]
    undone, problems = back_out(ex, journal, txns)
    devices = sorted(set(step["args"]["device"] for older in txns for step in older.what["steps"]
                         if "device" in (step.get("args") or {})), key=device_number)
    now = []
    for name in devices:
        if read_device(name, ex.kernel.read) is None:
            continue
        swap = swap_of(ex.kernel, name)
        where = mounted_at(ex.kernel, name)
        now.append("/dev/%s%s%s" % (name, " (swap on)" if swap else "", " (mounted at %s)" % ", ".join(where)
                                    if where else ""))
    raise ApplyError(
        "Host %s: %s failed %s: %s. Undone, newest first (each device this run made reset and removed, "
        "its swap turned off or its mount taken away; the fstab lines, units and records as before the run): %s.%s "
        "zram devices of these entries on the host now: %s."
        % (ex.host, describe_entry(entry), "at its step '%s'" % failed if failed else "before its first step",
           error_text(exc), ", ".join(undone) or "nothing",
           (" " + " ".join(problems) + ".") if problems else "", "; ".join(now) or "none"))
