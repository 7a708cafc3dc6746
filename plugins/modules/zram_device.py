#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: zram_device
short_description: Create, configure, reset and remove a zram block device
version_added: 1.0.0
description:
  - Drives a zram device through C(/sys/block/zramN) and C(/sys/class/zram-control) so that it has the asked
    size, compression algorithm and memory limit, and reports its C(mm_stat).
  - Writes the compression algorithm before the disk size, because the kernel refuses a new algorithm once a
    disk size is set, and the memory limit last.
  - Changing the size or algorithm of a live device needs a reset, which is only done when it cannot hurt
    the host. An initialised device that nobody uses is reset and set up again. A mounted file system is never
    reset under its data. Active swap is only cycled (swapoff, reset, set up) when O(allow_swap_cycle=true) and
    C(MemAvailable) is at least the swap in use times 1.25 plus 256 MiB, so swapoff can take its pages back.
    In every other case nothing is changed, RV(reboot_required=true) and RV(reason) says why.
  - The memory limit can change on a live device and is set without a reset.
  - Makes no swap and no file system; after RV(swap_cycled=true) the caller runs C(mkswap) and C(swapon)
    (with RV(swap_priority)) again.
  - Fails with a message that says what to do when zram cannot work on the host (no zram module loaded, or
    a container without the host's C(/sys) and C(/dev)).
author: ramdisk.provision maintainers (@ramdisk-provision)
options:
  device:
    description:
      - The device name, such as C(zram0), or C(auto).
      - V(auto) takes the first zram device that has no disk size and is not in use, or makes a new one with
        C(hot_add) and takes whichever name the kernel gives it; RV(device) returns its name. Every run with
        V(auto) takes a free device, so use the returned name on later runs to stay idempotent.
      - Runs that share one kernel (containers with the host's C(/sys)) should not use V(auto) at the same
        time, because two of them may both take the same free device before either has sized it.
      - A named device that does not exist is made with C(hot_add) when the kernel gives that name next;
        otherwise the module fails and says which name it would give.
    type: str
    required: true
  state:
    description:
      - V(present) makes the device exist with the asked settings.
      - V(absent) resets and removes the device. It refuses, and fails, while the device is active swap, mounted
        or open.
    type: str
    choices: [present, absent]
    default: present
  size:
    description:
      - The disk size (uncompressed capacity) as bytes or a size expression such as V(512M), V(2G), V(25%) of
        RAM or V(min(ram / 2, 8G)). Units are binary. Rounded up to whole pages, as the kernel does.
      - Required with O(state=present).
    type: str
  algorithm:
    description:
      - Compression algorithm, such as V(lz4), V(zstd), V(lzo-rle) or V(lzo). It must be one the kernel lists in
        C(comp_algorithm) (RV(algorithms_offered)), unless O(allow_algorithm_fallback=true).
      - When not given, a new device keeps the kernel's default and an existing one keeps its algorithm.
    type: str
  allow_algorithm_fallback:
    description:
      - When O(algorithm) is not offered, take the best one offered (zstd, then lz4, lzo-rle, lzo, then the
        first listed) and warn, instead of failing.
    type: bool
    default: false
  mem_limit:
    description:
      - The most RAM the device may use for compressed data, as bytes or a size expression like O(size).
        V(0) (or V(none)) means no limit.
      - When not given, the limit in force is kept.
    type: str
  allow_swap_cycle:
    description:
      - Allow swapping off an active swap device to reset and reconfigure it, when free memory can take its
        pages back (see the description). The caller then runs C(mkswap) and C(swapon) again.
      - When false, such a change is only reported (RV(action=cycle-swap), RV(reboot_required=true)).
    type: bool
    default: false
extends_documentation_fragment:
  - ramdisk.provision._attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  platform:
    support: full
    platforms: linux
notes:
  - Needs root. The number of compression streams is not an option; Linux 6.x sizes them per CPU and no
    longer has C(max_comp_streams).
  - In a container, zram needs the host's C(/sys) (read-write) and C(/dev) bound in, and access to the zram
    block major; the devices are the host's.
  - In check mode, the name that V(auto) would get from C(hot_add) is a prediction (the kernel gives the
    lowest free number).
seealso:
  - name: zram in the kernel documentation
    description: Documentation/admin-guide/blockdev/zram.rst
    link: https://docs.kernel.org/admin-guide/blockdev/zram.html
"""

EXAMPLES = r"""
- name: Make a zram device of half the RAM, at most 8 GiB, with zstd or the best offered
  ramdisk.provision.zram_device:
    device: auto
    size: min(ram / 2, 8G)
    algorithm: zstd
    allow_algorithm_fallback: true
  register: __zram

- name: Make it swap
  ansible.builtin.command:
    argv: [mkswap, "{{ __zram.path }}"]
  when: __zram.changed

- name: Resize zram0, swapping it off first when memory allows
  ramdisk.provision.zram_device:
    device: zram0
    size: 4G
    algorithm: lz4
    mem_limit: 1G
    allow_swap_cycle: true
  register: __zram0

- name: Say when only a reboot applies the change
  ansible.builtin.debug:
    msg: "{{ __zram0.reason }}"
  when: __zram0.reboot_required

- name: Remove zram1
  ramdisk.provision.zram_device:
    device: zram1
    state: absent
"""

RETURN = r"""
device:
  description: The device name (the one V(auto) chose or made).
  returned: always
  type: str
  sample: zram0
device_path:
  description: The device node.
  returned: always
  type: str
  sample: /dev/zram0
action:
  description:
    - What was decided. V(ok) (nothing to do), V(create) (hot_add, then set up), V(configure) (set up a
      device without disk size, or change only the memory limit), V(reset-then-configure) (an unused
      initialised device), V(cycle-swap) (active swap whose pages fit in free memory), V(reboot-required),
      V(remove) and V(absent) (already gone) for O(state=absent).
  returned: always
  type: str
  sample: reset-then-configure
reboot_required:
  description: True when the device was left differing from what was asked; only a reboot (or freeing the
    device) applies the change. RV(reason) says why.
  returned: always
  type: bool
  sample: false
reason:
  description: Why the device is reset, cycled or left as it is; null when nothing needs explaining.
  returned: always
  type: str
  sample: "zram0 is active swap with 1.2 GiB in use and MemAvailable 900.0 MiB is below the 1.8 GiB needed to
    take its pages back (used * 1.25 + 256 MiB); disksize 4.0 GiB -> 8.0 GiB takes effect after a reboot."
changes:
  description: Each setting that differs from what was asked, as [before, after].
  returned: always
  type: dict
  sample: {"disksize": [4294967296, 8589934592], "algorithm": ["lzo-rle", "lz4"]}
swap_cycled:
  description: True when the module swapped the device off and set it up again; the caller runs C(mkswap) and
    C(swapon) next.
  returned: always
  type: bool
  sample: false
swap_priority:
  description: The swap priority the device had when it was active swap, for C(swapon -p); else null.
  returned: always
  type: int
  sample: 100
used_as:
  description: What the device is used for now, V(swap), V(filesystem), V(other) (open or held by another
    device) or V(unused).
  returned: always
  type: str
  sample: unused
disksize_bytes:
  description: The disk size now (0 when not initialised or removed).
  returned: always
  type: int
  sample: 67108864
algorithm:
  description: The compression algorithm selected now; null when the device does not exist.
  returned: always
  type: str
  sample: lz4
algorithms_offered:
  description: The algorithms the kernel offers in C(comp_algorithm).
  returned: always
  type: list
  elements: str
  sample: [lzo-rle, lzo, lz4]
mem_limit_bytes:
  description: The memory limit in force, 0 for none.
  returned: always
  type: int
  sample: 0
mm_stat:
  description:
    - The device's C(mm_stat) fields as the kernel names them; sizes in bytes, C(same_pages), C(pages_compacted),
      C(huge_pages) and C(huge_pages_since) in pages (null where the kernel lacks the column).
    - C(compression_ratio) is C(orig_data_size / compr_data_size), null while nothing is stored.
    - Empty when the device does not exist.
  returned: always
  type: dict
  sample:
    orig_data_size: 8192
    compr_data_size: 74
    mem_used_total: 12288
    mem_limit: 0
    mem_used_max: 12288
    same_pages: 0
    pages_compacted: 0
    huge_pages: 0
    huge_pages_since: 0
    compression_ratio: 110.7
"""

import errno
import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths
from ansible_collections.ramdisk.provision.plugins.module_utils._procfs import (
    detect_container,
    parse_meminfo,
    parse_mountinfo,
    parse_swaps,
)
from ansible_collections.ramdisk.provision.plugins.module_utils._size import SizeError, parse_size, round_up_pages
from ansible_collections.ramdisk.provision.plugins.module_utils._zram import (
    ZramError,
    choose_algorithm,
    decide,
    device_number,
    device_usage,
    lowest_free_number,
    read_device,
    removal_blocker,
    swap_devs,
    unavailable_reason,
)

SYS_BLOCK = "/sys/block"
CONTROL = _host_paths.ZRAM_CONTROL
NO_LIMIT_WORDS = ("0", "none", "unlimited")


def _read(path, default=None):
    try:
        with open(path, "r", errors="replace") as handle:
            return handle.read()
    except (IOError, OSError):
        return default


def _write(path, value):
    """Write one sysfs attribute; errors (EBUSY, EINVAL, EACCES) come back as OSError."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, str(value).encode("ascii"))
    finally:
        os.close(fd)


# How long a reset or hot_remove that the kernel refuses with EBUSY is tried again. Right after an unmount or a
# swapoff, something may still hold the device open for a moment (udev probes the device on the change event),
# and the kernel refuses a reset while anyone has it open: this project's tests met it once, on a device free a
# moment later. A device that something really holds is still refused after this, and reported as open.
BUSY_RETRY_SECONDS = 2.0
BUSY_RETRY_PAUSE = 0.1


def _write_when_free(path, value):
    """_write(), tried again on EBUSY for up to BUSY_RETRY_SECONDS; the last EBUSY comes back as OSError."""
    deadline = time.monotonic() + BUSY_RETRY_SECONDS
    while True:
        try:
            return _write(path, value)
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() >= deadline:
                raise
        time.sleep(BUSY_RETRY_PAUSE)


def zram_names():
    try:
        names = [name for name in os.listdir(SYS_BLOCK) if device_number(name) is not None]
    except OSError:
        return []
    return sorted(names, key=device_number)


def _sys_read_only():
    for path in (CONTROL, SYS_BLOCK):
        if os.path.exists(path):
            try:
                return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
            except OSError:
                return False
    return False


def _container():
    present = [path for path in ("/.dockerenv", "/run/.containerenv") if os.path.exists(path)]
    return detect_container(_read("/proc/1/environ"), present, _read("/run/systemd/container"))


def exclusively_busy(path):
    """True when /dev/zramN cannot be opened exclusively, None when the node is missing.

    O_EXCL on a block device (without O_CREAT) asks the kernel for an exclusive claim, which it refuses
    with EBUSY while the device is mounted, active swap, held by device-mapper or md, or claimed by another
    exclusive opener. Plain shared opens are not seen this way; the kernel's own check at reset catches them.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_EXCL)
    except OSError as exc:
        if exc.errno == errno.EBUSY:
            return True
        if exc.errno == errno.ENOENT:
            return None
        return False
    os.close(fd)
    return False


def usage_of(name, state, busy_check=True):
    swaps = parse_swaps(_read("/proc/swaps", ""))
    mountinfo = parse_mountinfo(_read("/proc/self/mountinfo", ""))
    try:
        holders = sorted(os.listdir(os.path.join(SYS_BLOCK, name, "holders")))
    except OSError:
        holders = []
    busy = bool(busy_check and state is not None and exclusively_busy("/dev/" + name))
    dev = state["dev"] if state else None
    return device_usage(name, dev, swaps, mountinfo, holders, busy, swap_devs(swaps, os.stat))


def _view(state):
    if state is None:
        return {"state": "absent"}
    return {"state": "present", "disksize_bytes": state["disksize"], "algorithm": state["algorithm"],
            "mem_limit_bytes": state["mem_limit"]}


class ZramDevice(object):
    def __init__(self, module):
        self.module = module
        self.result = dict(
            changed=False, device=None, path=None, action="ok", reboot_required=False, reason=None, changes={},
            swap_cycled=False, swap_priority=None, used_as="unused", disksize_bytes=0, algorithm=None,
            algorithms_offered=[], mem_limit_bytes=0, mm_stat={},
        )
        self.created = None

    def fail(self, msg):
        if self.created and not self.module.check_mode:
            # Leave nothing behind that this run made.
            self._try_remove(self.created)
        self.module.fail_json(msg=msg, **self.result)

    def _try_remove(self, name):
        try:
            state = read_device(name, _read)
            if state and state["initialised"]:
                _write_when_free(os.path.join(SYS_BLOCK, name, "reset"), 1)
            _write_when_free(os.path.join(CONTROL, "hot_remove"), device_number(name))
        except OSError:
            self.module.warn("Could not remove %s, which this run made; remove it with "
                             "'echo %d > %s/hot_remove'." % (name, device_number(name), CONTROL))

    def set_device(self, name):
        self.result["device"] = name
        self.result["device_path"] = "/dev/" + name

    def report(self, state, usage):
        if state is not None:
            self.result.update(disksize_bytes=state["disksize"], algorithm=state["algorithm"],
                               algorithms_offered=state["algorithms"], mem_limit_bytes=state["mem_limit"],
                               mm_stat=state["mm_stat"])
        else:
            self.result.update(disksize_bytes=0, algorithm=None, mem_limit_bytes=0, mm_stat={})
        if usage is not None:
            self.result["used_as"] = usage["used_as"]

    def finish(self, before, after):
        if self.module._diff:
            self.result["diff"] = dict(before=before, after=after, before_header=self.result["device_path"],
                                       after_header=self.result["device_path"])
        self.module.exit_json(**self.result)

    # --- kernel operations -------------------------------------------------------------------------

    def hot_add(self):
        try:
            text = _read_strict(os.path.join(CONTROL, "hot_add"))
        except OSError as exc:
            self.fail("Could not add a zram device through %s/hot_add: %s. Run as root; in a container, bind "
                      "the host's /sys read-write." % (CONTROL, exc.strerror or exc))
        name = "zram%d" % int(text.strip())
        self.created = name
        # devtmpfs makes the node; give udev a moment where it does it instead.
        for _attempt in range(20):
            if os.path.exists("/dev/" + name):
                break
            time.sleep(0.1)
        return name

    def apply(self, name, steps):
        for attr, value in steps:
            path = os.path.join(SYS_BLOCK, name, attr)
            try:
                (_write_when_free if attr == "reset" else _write)(path, value)
            except OSError as exc:
                if attr == "reset" and exc.errno == errno.EBUSY:
                    return "%s is open by a process, so the kernel refused to reset it" % name
                self.fail("Could not write %s to %s: %s. Nothing else was changed after this step; check that "
                          "the device is not in use and run again." % (value, path, exc.strerror or exc))
        return None

    def swapoff(self, name):
        swapoff = self.module.get_bin_path("swapoff", required=True)
        rc, out, err = self.module.run_command([swapoff, "/dev/" + name], environ_update={"LC_ALL": "C"})
        if rc != 0:
            self.fail("swapoff /dev/%s failed (rc %d): %s. The device was left as it was."
                      % (name, rc, (err or out).strip()))

    # --- states -------------------------------------------------------------------------------------

    def pick_auto(self, names):
        """The first device without disk size that is not in use, or None."""
        for name in names:
            state = read_device(name, _read)
            if state is None or state["initialised"]:
                continue
            if usage_of(name, state)["used_as"] == "unused":
                return name
        return None

    def present(self, params, meminfo):
        module = self.module
        ram = meminfo.get("MemTotal")
        try:
            disksize = parse_size(params["size"], ram_bytes=ram)
        except SizeError as exc:
            self.fail("size is '%s': %s. Give bytes or an expression such as 512M, 25%% or min(ram / 2, 8G)."
                      % (params["size"], exc))
        mem_limit = None
        if params["mem_limit"] is not None:
            if str(params["mem_limit"]).strip().lower() in NO_LIMIT_WORDS:
                mem_limit = 0
            else:
                try:
                    mem_limit = parse_size(params["mem_limit"], ram_bytes=ram)
                except SizeError as exc:
                    self.fail("mem_limit is '%s': %s. Give bytes, an expression such as 1G or 10%%, or 0 for no "
                              "limit." % (params["mem_limit"], exc))

        names = zram_names()
        name = params["device"]
        if name == "auto":
            name = self.pick_auto(names) or "zram%d" % lowest_free_number(names)
        self.set_device(name)
        state = read_device(name, _read)
        if state is None:
            if not os.path.isdir(CONTROL):
                self.fail("%s does not exist and %s is missing, so no device can be added (zram older than "
                          "Linux 4.2). Use one of the devices the zram module made: %s."
                          % (name, CONTROL, ", ".join(names) or "none"))
            expected = lowest_free_number(names)
            if device_number(name) != expected:
                self.fail("%s does not exist and hot_add would make zram%d. Use device: auto, or name zram%d."
                          % (name, expected, expected))

        offered = state["algorithms"] if state else None
        if offered is None and names:
            other = read_device(names[0], _read)
            offered = other["algorithms"] if other else None
        self.result["algorithms_offered"] = offered or []

        def resolve_algorithm(offered):
            if params["algorithm"] is None:
                return None
            if not offered:
                # A real run checks it again on the device hot_add makes; only check mode never gets there.
                if module.check_mode:
                    module.warn("No zram device exists yet, so algorithm '%s' is checked against what the kernel "
                                "offers only once one is made (not in check mode)." % params["algorithm"])
                return params["algorithm"]
            try:
                chosen, warning = choose_algorithm(params["algorithm"], offered, params["allow_algorithm_fallback"])
            except ZramError as exc:
                self.fail("%s: %s." % (name, exc))
            if warning:
                module.warn(warning)
            return chosen

        wanted = {"disksize": disksize, "algorithm": resolve_algorithm(offered), "mem_limit": mem_limit}
        usage = usage_of(name, state)
        usage["mem_available_bytes"] = meminfo.get("MemAvailable", meminfo.get("MemFree", 0))
        decision = decide(state, wanted, usage)
        action = decision["action"]
        self.result.update(action=action, reason=decision["reason"], changes=decision["changes"])
        self.result["swap_priority"] = usage["swap_priority"]
        before = _view(state)
        predicted = dict(state="present", disksize_bytes=round_up_pages(disksize),
                         algorithm=wanted["algorithm"] or (state or {}).get("algorithm"),
                         mem_limit_bytes=mem_limit if mem_limit is not None else (state or {}).get("mem_limit", 0))

        if action == "ok":
            self.report(state, usage)
            self.finish(before, before)
        if action == "reboot-required" or (action == "cycle-swap" and not params["allow_swap_cycle"]):
            if action == "cycle-swap":
                self.result["reason"] += (" Set allow_swap_cycle: true to do that now (then run mkswap and swapon "
                                          "again), or reboot.")
            self.result["reboot_required"] = True
            self.report(state, usage)
            self.finish(before, before)

        self.result["changed"] = True
        if module.check_mode:
            self.report(state, usage)
            if action == "cycle-swap":
                self.result["swap_cycled"] = True
            self.result.update(disksize_bytes=predicted["disksize_bytes"], algorithm=predicted["algorithm"],
                               mem_limit_bytes=predicted["mem_limit_bytes"])
            self.finish(before, predicted)

        if action == "create":
            made = self.hot_add()
            if made != name:
                if params["device"] != "auto":
                    self.set_device(made)
                    self.fail("hot_add made %s, not %s (another run may have taken it); %s was removed again. "
                              "Run again." % (made, name, made))
                # hot_add hands each caller its own device, so auto takes the one it got: on a kernel shared
                # by containers, another one may have taken the predicted name in the meantime.
                name = made
                self.set_device(name)
            state = read_device(name, _read)
            if state is None:
                self.fail("hot_add made %s but /sys/block/%s is missing." % (name, name))
            self.result["algorithms_offered"] = state["algorithms"]
            wanted["algorithm"] = resolve_algorithm(state["algorithms"])
            decision = decide(state, wanted, usage_of(name, state, busy_check=False))
            self.result["changes"] = decision["changes"]
        if action == "cycle-swap":
            self.swapoff(name)
            self.result["swap_cycled"] = True
        refused = self.apply(name, decision["steps"])
        if refused:
            # Nothing was written; after a swapoff the caller still swaps on again (swap_cycled).
            self.result.update(changed=self.result["swap_cycled"], action="reboot-required", reboot_required=True,
                               reason="%s; %s" % (refused, decision["reason"]))
        if not os.path.exists("/dev/" + name):
            self.fail("/dev/%s is missing although /sys/block/%s exists: this looks like a container with its own "
                      "/dev. Bind the host's /dev into it (-v /dev:/dev) so the device can be used." % (name, name))
        after_state = read_device(name, _read)
        self.report(after_state, usage_of(name, after_state, busy_check=False))
        self.finish(before, _view(after_state))

    def absent(self, params):
        name = params["device"]
        if name == "auto":
            self.fail("device is 'auto', which names no device to remove; give its name, such as zram1.")
        self.set_device(name)
        self.result["action"] = "absent"
        state = read_device(name, _read)
        if state is None:
            self.finish({"state": "absent"}, {"state": "absent"})
        usage = usage_of(name, state)
        self.report(state, usage)
        self.result["swap_priority"] = usage["swap_priority"]
        blocker = removal_blocker(name, usage)
        if blocker:
            self.fail("Refusing to remove %s: %s" % (name, blocker))
        self.result.update(action="remove", changed=True)
        if not self.module.check_mode:
            steps = [("reset", 1)] if state["initialised"] else []
            refused = self.apply(name, steps)
            if refused:
                self.fail("Refusing to remove %s: %s. Close what holds it, then run again." % (name, refused))
            try:
                _write_when_free(os.path.join(CONTROL, "hot_remove"), device_number(name))
            except OSError as exc:
                self.fail("Could not remove %s through %s/hot_remove: %s. It was reset; close what holds it and "
                          "run again." % (name, CONTROL, exc.strerror or exc))
        self.report(None, None)
        self.finish(_view(state), {"state": "absent"})


def _read_strict(path):
    with open(path, "r") as handle:
        return handle.read()


def main():
    module = AnsibleModule(
        argument_spec=dict(
            device=dict(type="str", required=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            size=dict(type="str"),
            algorithm=dict(type="str"),
            allow_algorithm_fallback=dict(type="bool", default=False),
            mem_limit=dict(type="str"),
            allow_swap_cycle=dict(type="bool", default=False),
        ),
        required_if=[("state", "present", ("size",))],
        supports_check_mode=True,
    )
    params = module.params
    device = params["device"]
    runner = ZramDevice(module)
    if device != "auto" and device_number(device) is None:
        module.fail_json(msg="device is '%s', which is not a zram device name; give zramN (such as zram0) or auto."
                         % device, **runner.result)

    names = zram_names()
    reason = unavailable_reason(os.path.isdir(CONTROL), names, _sys_read_only(), _container())
    if reason:
        if params["state"] == "absent" and device not in names and not names:
            # Nothing to remove where there is no zram at all.
            runner.set_device(device if device != "auto" else None)
            runner.result["action"] = "absent"
            module.exit_json(**runner.result)
        module.fail_json(msg=reason, **runner.result)
    if params["state"] == "absent":
        runner.absent(params)
    meminfo = parse_meminfo(_read("/proc/meminfo", ""))
    if not meminfo.get("MemTotal"):
        module.fail_json(msg="/proc/meminfo is missing or empty: zram_device needs Linux with /proc mounted.",
                         **runner.result)
    runner.present(params, meminfo)


if __name__ == "__main__":
    main()
