#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: bench_probe
short_description: Run planned items of the RAM-versus-disk benchmark and measure them
version_added: 1.1.0
description:
  - Runs one item of the plan M(ramdisk.provision.bench_plan) returned (one probe of the registry on one target in
    one round) and measures it; decides nothing the plan decided.
  - 'In this order: makes the directories the item names (C(mkdir)), writes out the file systems it names
    (C(sync): syncfs(2), so the tests before do not write back during this one), runs its C(before) commands
    (such as dropping a file''s cached pages), reads its C(warm) files through, reads the block device counters
    (C(/sys/block/<dev>/stat)) of every level of the block device stack under the target, runs the command (no
    shell; C(LC_ALL=C)) or the program the item names, reads the counters again, and removes what the item made
    (C(remove): its test file, the copy a build ran in), so a target holds one test file at a time.'
  - The raw output goes to the item's raw file whole or not at all (a temporary file beside it, synced, renamed,
    the directory synced); a command that writes its raw file itself (fio's C(--output)) writes to a temporary name
    that is renamed the same way. A failing command leaves no raw file of this item behind.
  - Returns the figures the registry's parser reads from the raw output, the counter deltas per level, the row's
    label (on no block device C(ram), or C(unknown) for a disk target; C(cache) when under 10% of what the probe
    issued reached every level; else the item's mode) and the seconds the command took.
  - Reads the all-CPU line of C(/proc/stat) and C(/proc/loadavg) right before and after the command, and returns
    the share of CPU time a hypervisor stole meanwhile and the load, so a row measured on a busy or robbed host can
    be told apart.
  - In check mode it returns what it would run and runs nothing.
author: ramdisk.provision maintainers (@ramdisk-provision)
options:
  item:
    description:
      - One item of the C(probe_items) that M(ramdisk.provision.bench_plan) returned, as it came.
      - Read are C(host), C(label), C(path), C(probe), C(mode), C(round), C(warmup) and C(raw), the command
        (C(argv), or C(program) with its arguments in C(argv)), and where given C(output), C(sync), C(mkdir),
        C(before), C(warm), C(chdir), C(stdin), C(remove) and C(seed_entry).
      - A path in C(remove) outside the item's target is refused before anything runs.
    type: dict
  items:
    description:
      - Several items of C(probe_items) (a round of them, as C(probe_rounds) of M(ramdisk.provision.bench_plan) and
        M(ramdisk.provision.bench_settle) gives them), run one after the other in their order, as O(item) runs one.
      - Every item is checked before the first runs. When one fails, the failure names it and how many ran before
        it; those kept their raw files, and the items after it do not run.
      - One call for a round saves the cost of a module call per item (about half a second each on the lab's
        containers).
    type: list
    elements: dict
extends_documentation_fragment:
  - ramdisk.provision._attributes
  - ramdisk.provision._attributes.check_mode_full
attributes:
  platform:
    support: full
    platforms: linux
notes:
  - The item's working directory under the target (and a build's C(chdir)) must exist; the role makes them.
  - Exactly one of O(item) and O(items) is given.
seealso:
  - module: ramdisk.provision.bench_plan
"""

EXAMPLES = r"""
- name: Plan the benchmark on the host
  ramdisk.provision.bench_plan:
    host: "{{ inventory_hostname }}"
    targets: "{{ __benchmark_targets }}"
    profile: "{{ __benchmark_profile }}"
    raw_dir: /var/tmp/ramdisk-bench/raw
    random_file: /var/tmp/ramdisk-bench/random.bin
  register: __benchmark_plan

- name: Run each item of the plan, round by round
  ramdisk.provision.bench_probe:
    item: "{{ item }}"
  loop: "{{ __benchmark_plan.probe_items }}"
  loop_control:
    label: "{{ item.probe }} {{ item.label }} {{ item.mode }} {{ item.round }}"
  register: __benchmark_runs
"""

RETURN = r"""
run:
  description:
    - What the module runs (in check mode, would run), in order. C(argv) is the command as run; for a command that
      writes its raw file itself, its output argument names the temporary file.
  returned: when O(item) is given
  type: dict
  sample:
    mkdir: []
    sync: [/srv/ram, /var/tmp, /var/tmp/ramdisk-bench/raw]
    before: []
    warm: [/var/tmp/ramdisk-bench/random.bin]
    program: null
    argv: [dd, if=/var/tmp/ramdisk-bench/random.bin, of=/var/tmp/ramdisk-bench/disk/dd.bin, bs=1M, count=64,
           conv=fdatasync]
    chdir: null
    output: text
    raw: /var/tmp/ramdisk-bench/raw/write_fdatasync-disk-sync-1.out
    remove: [/var/tmp/ramdisk-bench/disk/dd.bin]
raw:
  description: The raw file written (in check mode, to be written).
  returned: when O(item) is given
  type: str
  sample: /var/tmp/ramdisk-bench/raw/write_fdatasync-disk-sync-1.out
seconds:
  description: Wall-clock seconds from the command's start to its end (monotonic clock); 0 in check mode.
  returned: when O(item) is given
  type: float
  sample: 0.4123
figures:
  description:
    - What the registry's parser read from the raw output, one per operation, each with the item's C(probe),
      C(tool), C(test), C(label), C(mode), C(round) and C(warmup); empty in check mode.
  returned: when O(item) is given
  type: list
  elements: dict
  sample:
    - {op: write, io_bytes: 67108864, bw_bytes: 161000000, iops: 153.5, runtime_ms: 417, total_ios: null,
       clat_ns_mean: null, probe: write_fdatasync, tool: dd, test: write_fdatasync, label: disk, mode: sync,
       round: 1, warmup: false}
stack:
  description: The block devices under the target, level by level, its own device first; empty on tmpfs and ramfs.
  returned: when O(item) is given
  type: list
  elements: list
  sample: [[vda1], [vda]]
counters:
  description:
    - Per level of RV(stack), what its devices did while the command ran - bytes read and written, read and write
      requests and flushes; empty in check mode and on no block device.
  returned: when O(item) is given
  type: list
  elements: dict
  sample:
    - {devices: [vda1], read_bytes: 0, write_bytes: 67174400, read_ios: 0, write_ios: 70, flush_ios: 2}
    - {devices: [vda], read_bytes: 0, write_bytes: 67174400, read_ios: 0, write_ios: 70, flush_ios: 2}
issued:
  description:
    - What the item's judged figure says the probe issued - C(what) (read or write) and C(bytes) (null where the
      figure counts none, as pgbench's); the share of it every level saw decides RV(row_label).
  returned: when O(item) is given
  type: dict
  sample: {what: write, bytes: 67108864}
removed:
  description: The paths of the item's C(remove) that were there and are removed; empty in check mode.
  returned: when O(item) is given
  type: list
  elements: str
  sample: [/var/tmp/ramdisk-bench/disk/dd.bin]
record:
  description:
    - What the role keeps of the item for the report - C(item) as it came and C(result) with RV(raw), RV(seconds),
      RV(figures), RV(stack), RV(counters), RV(issued), RV(row_label) and RV(cpu). Empty in check mode.
  returned: when O(item) is given
  type: dict
  sample: {item: {probe: read, label: disk, round: 1}, result: {raw: /var/tmp/ramdisk-bench/raw/read-disk-direct-1.out,
           seconds: 0.41, figures: [], stack: [[vda1], [vda]], counters: [], issued: {what: read, bytes: 67108864},
           row_label: direct}}
row_label:
  description:
    - On no block device C(ram) for a RAM target and C(unknown) for a disk target (an overlay or network file
      system, where nothing shows whether the test reached a disk); C(cache) when under 10% of what the probe issued
      reached every level of the stack (the row measured a cache, and is never counted as disk), else the item's
      mode (direct, buffered, sync, cached, published). Empty in check mode.
  returned: when O(item) is given
  type: str
  sample: sync
cpu:
  description:
    - The CPU around the command - C(steal_share) (the share of all CPU ticks, of every CPU, that the hypervisor
      stole while the command ran), C(load1) (the one-minute load average as the command started) and
      C(load1_after) (as it ended). Each null where C(/proc) could not be read, or in check mode.
  returned: when O(item) is given
  type: dict
  sample: {steal_share: 0.0031, load1: 1.12, load1_after: 1.86}
records:
  description:
    - Given O(items), one per item in the order they ran - C(item) as it came, C(result) as RV(record) holds it and
      C(removed) (RV(removed)); in check mode C(item) and C(run) (RV(run)) only.
  returned: when O(items) is given
  type: list
  elements: dict
  sample:
    - {item: {probe: read, label: disk, round: 1}, removed: [/var/tmp/ramdisk-bench/disk/dd.bin],
       result: {raw: /var/tmp/ramdisk-bench/raw/read-disk-direct-1.out, seconds: 0.41, figures: [],
                stack: [[vda1], [vda]], counters: [], issued: {what: read, bytes: 67108864}, row_label: direct}}
"""

import ctypes
import errno
import json
import os
import pwd
import shutil
import stat
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ramdisk.provision.plugins.module_utils import _atomic
from ansible_collections.ramdisk.provision.plugins.module_utils import _bench_counters
from ansible_collections.ramdisk.provision.plugins.module_utils import _bench_env
from ansible_collections.ramdisk.provision.plugins.module_utils import _probes

REQUIRED = ("host", "label", "path", "probe", "mode", "round", "warmup", "raw", "argv")
TAIL_LINES = 3


def metadata_program(root, dirs, per_dir, size, min_seconds):
    """The metadata probe: create (write SIZE bytes), stat, read and delete every file of a tree of DIRS directories
    of PER_DIR files under ROOT, each phase timed on its own, pass after pass until the passes took MIN_SECONDS (at
    most 10,000 passes): one pass of a thousand files takes a hundredth of a second on RAM, and on a disk it lands
    on either side of a journal commit, so a single pass is noise. Returns the document its parser reads."""
    dirs, per_dir, size, min_seconds = int(dirs), int(per_dir), int(size), float(min_seconds)
    payload = os.urandom(size)
    made, paths = [], []
    try:
        for number in range(dirs):
            folder = os.path.join(root, "d%05d" % number)
            os.mkdir(folder, 0o700)
            made.append(folder)
            paths += [os.path.join(folder, "f%06d" % index) for index in range(per_dir)]
        seconds = dict.fromkeys(("create", "stat", "read", "delete"), 0.0)
        passes = 0
        started = time.perf_counter()
        while True:
            mark = time.perf_counter()
            for path in paths:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                os.write(fd, payload)
                os.close(fd)
            seconds["create"] += time.perf_counter() - mark
            mark = time.perf_counter()
            for path in paths:
                os.lstat(path)
            seconds["stat"] += time.perf_counter() - mark
            mark = time.perf_counter()
            for path in paths:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
                os.read(fd, size)
                os.close(fd)
            seconds["read"] += time.perf_counter() - mark
            mark = time.perf_counter()
            for path in paths:
                os.unlink(path)
            seconds["delete"] += time.perf_counter() - mark
            passes += 1
            if time.perf_counter() - started >= min_seconds or passes >= 10000:
                break
    finally:
        # Whatever a failed pass left, so the next test finds the directory as it was.
        for path in paths:
            try:
                os.unlink(path)
            except OSError:
                pass
        for folder in made:
            try:
                os.rmdir(folder)
            except OSError:
                pass
    return {"files": len(paths) * passes, "passes": passes, "dirs": dirs, "file_bytes": size, "seconds": seconds}


PROGRAMS = {"metadata": metadata_program}


def _syncfs(path):
    """syncfs(2) of the file system PATH is on (Python has no os.syncfs)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.syncfs(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), path)
    finally:
        os.close(fd)


def _read_through(path):
    with open(path, "rb", buffering=0) as source:
        while source.read(1 << 20):
            pass


def _make_dir(spec):
    """The directory SPEC names ({path, mode, owner}), made if missing, its mode and owner set through a descriptor
    opened without following a link: a link put in its place is refused, not followed."""
    path = spec["path"]
    mode = int(str(spec.get("mode") or "0700"), 8)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            raise OSError(errno.ENOTDIR, "it exists and is not a directory", path)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if spec.get("owner"):
            os.fchown(fd, pwd.getpwnam(spec["owner"]).pw_uid, -1)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def _tail(*texts):
    lines = [line.strip() for text in texts for line in (text or "").splitlines() if line.strip()]
    return " / ".join(lines[-TAIL_LINES:]) or "no output"


def _temp_name(raw):
    return os.path.join(os.path.dirname(raw), ".%s%s%d.partial" % (os.path.basename(raw), _atomic.TEMP_INFIX,
                                                                   os.getpid()))


def _remove(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def _commit(temp, raw):
    """Make the complete TEMP the raw file: synced, renamed over RAW, the directory synced."""
    fd = os.open(temp, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(temp, raw)
    _atomic.fsync_dir(os.path.dirname(raw) or ".")


class Probe(object):
    """One item: what it runs, then running it."""

    def __init__(self, module, item):
        self.module = module
        self.item = item
        self.host = item.get("host") or "this host"
        missing = [key for key in REQUIRED if key not in item]
        if missing:
            module.fail_json(msg="Host %s: the benchmark item given to bench_probe has no %s. Pass an item exactly as"
                                 " bench_plan returned it." % (self.host, ", ".join(missing)))
        self.where = "probe %s on benchmark target %s (%s), round %s" % (
            item["probe"], item["path"], item["label"], item["round"])
        try:
            _probes.probe(item["probe"])
        except KeyError:
            module.fail_json(msg="Host %s: the benchmark item names probe %r, which the registry does not hold (it"
                                 " holds %s). Pass an item exactly as bench_plan returned it."
                                 % (self.host, item["probe"], ", ".join(_probes.PROBE_IDS)))
        self.program = item.get("program")
        if self.program is not None and self.program not in PROGRAMS:
            module.fail_json(msg="Host %s: the benchmark item of probe %s names the program %r, which bench_probe does"
                                 " not hold (it holds %s). Pass an item exactly as bench_plan returned it."
                                 % (self.host, item["probe"], self.program, ", ".join(sorted(PROGRAMS))))
        self.raw = item["raw"]
        self.output = item.get("output") or _probes.TEXT_OUTPUT
        self.argv = [str(part) for part in item["argv"]]
        self.temp = None
        # This item's place among the items of a call given several, and their number (0: a call of one item).
        self.batch_place, self.batch_size = 0, 0
        if self.output == _probes.FILE_OUTPUT:
            # The command writes its raw file itself: to a temporary name, renamed once the command succeeded.
            wanted = "--output=" + self.raw
            if wanted not in self.argv:
                module.fail_json(msg="Host %s: the command of %s does not write the item's raw file %s (no %s among"
                                     " its arguments). Pass an item exactly as bench_plan returned it."
                                     % (self.host, self.where, self.raw, wanted))
            self.temp = _temp_name(self.raw)
            self.argv[self.argv.index(wanted)] = "--output=" + self.temp

    def plan(self):
        item = self.item
        return {"mkdir": list(item.get("mkdir") or []), "sync": list(item.get("sync") or []),
                "before": [[str(part) for part in argv] for argv in item.get("before") or []],
                "warm": list(item.get("warm") or []), "program": self.program, "argv": self.argv,
                "chdir": item.get("chdir"), "output": self.output, "raw": self.raw,
                "remove": list(item.get("remove") or [])}

    def check_remove(self, run):
        """Every path the item removes lies under its target: the plan names only files under the target's test
        directory, and nothing else is removed, whatever an item says."""
        top = os.path.join(os.path.normpath(self.item["path"]), "")
        for path in run["remove"]:
            if not os.path.isabs(path) or os.path.normpath(path) != path or not path.startswith(top):
                self.fail("Host %s: %s would remove %r, which is outside its target %s. Pass an item exactly as"
                          " bench_plan returned it." % (self.host, self.where, path, self.item["path"]))

    def remove(self, run):
        """What the item made (its test file, a build's copy), so the target holds one test file at a time. A tree
        goes by shutil.rmtree, which on Linux walks by directory descriptors and never follows a link (a build's copy
        is the build user's to change)."""
        removed = []
        for path in run["remove"]:
            try:
                if stat.S_ISDIR(os.lstat(path).st_mode):
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
            except FileNotFoundError:
                continue
            except OSError as exc:
                self.fail("Host %s: could not remove %s after %s: %s. Remove it by hand; the role's cleanup removes"
                          " the run's directory at the end." % (self.host, path, self.where, exc))
            removed.append(path)
        return removed

    def fail(self, msg, **extra):
        if self.temp:
            _remove(self.temp)
        if self.batch_size:
            msg += (" It was item %d of the %d of this call: the %d before it ran and kept their raw files, the rest"
                    " did not run." % (self.batch_place + 1, self.batch_size, self.batch_place))
        self.module.fail_json(msg=msg, raw=self.raw, **extra)

    def prepare(self, run):
        for spec in run["mkdir"]:
            try:
                _make_dir(spec)
            except (OSError, KeyError, ValueError) as exc:
                self.fail("Host %s: could not make the directory %s for %s: %s. Check that the benchmark's directory"
                          " on the target is there and owned by root, and that the owner named exists."
                          % (self.host, spec.get("path"), self.where, exc))
        for path in run["sync"]:
            try:
                _syncfs(path)
            except OSError as exc:
                self.fail("Host %s: could not write out the file system of %s before %s: %s. The path must exist"
                          " and be readable by root." % (self.host, path, self.where, exc.strerror or exc))
        for argv in run["before"]:
            rc, out, err = self.command(argv)
            if rc != 0:
                self.fail("Host %s: the command run before %s exited with %d: %s. Run it by hand to see more: %s."
                          % (self.host, self.where, rc, _tail(out, err), " ".join(argv)), rc=rc, stdout=out, stderr=err)
        for path in run["warm"]:
            try:
                _read_through(path)
            except OSError as exc:
                self.fail("Host %s: could not read the file %s into the page cache before %s: %s. Make the benchmark's"
                          " random file first (the role's prepare step)." % (self.host, path, self.where,
                                                                             exc.strerror or exc))

    def command(self, argv, started=None, data=None, cwd=None):
        try:
            return self.module.run_command(argv, data=data, cwd=cwd, environ_update={"LC_ALL": "C"},
                                           expand_user_and_vars=False, errors="surrogate_then_replace",
                                           before_communicate_callback=started, handle_exceptions=False)
        except OSError as exc:
            self.fail("Host %s: %s could not start its command %s: %s. Install the tool (the role's install step)"
                      " or fix the path in the item." % (self.host, self.where, argv[0], exc.strerror or exc))

    def stack(self):
        try:
            return _bench_counters.stack(self.item["path"])
        except OSError as exc:
            self.fail("Host %s: the block device stack under the target of %s could not be read: %s. The target must"
                      " exist, and /sys show the host's block devices." % (self.host, self.where, exc))

    def counters(self, levels):
        try:
            return _bench_counters.read_counters(levels)
        except (OSError, ValueError) as exc:
            self.fail("Host %s: the block device counters under the target of %s could not be read: %s. The row"
                      " cannot be shown to reach the disk without them: run where /sys shows the host's block"
                      " devices." % (self.host, self.where, exc))

    def execute(self, run):
        """(the raw text, None where the command wrote the raw file itself; the command's seconds)."""
        if self.program is not None:
            started = time.monotonic()
            try:
                doc = PROGRAMS[self.program](*self.argv)
            except (OSError, ValueError, TypeError) as exc:
                self.fail("Host %s: the benchmark program %s of %s failed: %s. Check that the benchmark's directory on"
                          " the target is there and has room." % (self.host, self.program, self.where, exc))
            seconds = time.monotonic() - started
            return json.dumps(doc, sort_keys=True) + "\n", seconds
        if run["chdir"] and not os.path.isdir(run["chdir"]):
            self.fail("Host %s: the directory the command of %s runs in is missing: %s. Make it first (the role copies"
                      " the build's source there)." % (self.host, self.where, run["chdir"]))
        clock = {}
        rc, out, err = self.command(run["argv"], started=lambda _proc: clock.setdefault("start", time.monotonic()),
                                    data=self.item.get("stdin"), cwd=run["chdir"])
        seconds = time.monotonic() - clock.get("start", time.monotonic())
        if rc != 0:
            advice = ("The target ran out of space: free space on it or lower benchmark_space_fraction."
                      if "No space left" in (out or "") + (err or "") else
                      "Run the same command by hand to see more: %s." % " ".join(run["argv"]))
            self.fail("Host %s: the benchmark command of %s exited with %d: %s. %s"
                      % (self.host, self.where, rc, _tail(out, err), advice), rc=rc, stdout=out, stderr=err)
        if self.output == _probes.FILE_OUTPUT:
            return None, seconds
        if self.output == _probes.RUN_RECORD:
            return json.dumps({"seconds": seconds, "rc": rc, "stdout": out, "stderr": err}) + "\n", seconds
        gap = "\n" if out and err and not out.endswith("\n") else ""
        return out + gap + err, seconds

    def keep(self, text):
        """The raw file, whole or not at all."""
        try:
            if text is None:
                _commit(self.temp, self.raw)
                self.temp = None
                with open(self.raw, encoding="utf-8", errors="surrogateescape") as handle:
                    return handle.read()
            _atomic.write_file(self.raw, text)
            return text
        except OSError as exc:
            self.fail("Host %s: the raw output of %s could not be kept in %s: %s. Make the raw directory first and"
                      " give it room." % (self.host, self.where, self.raw, exc))


def measure(probe, run):
    """Run one checked item (PROBE, its RUN from plan()) and measure it: (removed, result)."""
    item = probe.item
    probe.prepare(run)
    levels = probe.stack()
    before = probe.counters(levels)
    cpu_before = _bench_env.cpu_reading()
    text, seconds = probe.execute(run)
    cpu_after = _bench_env.cpu_reading()
    after = probe.counters(levels)
    text = probe.keep(text)
    removed = probe.remove(run)
    try:
        figures = _probes.parse(item, text, {"seconds": seconds})
    except (ValueError, KeyError, TypeError) as exc:
        probe.fail("Host %s: the output of %s is not what its parser reads: %s. The raw output is kept in %s;"
                   " look at it, and run the command by hand (%s)."
                   % (probe.host, probe.where, exc, probe.raw, " ".join(run["argv"])))
    level_deltas = _bench_counters.deltas(levels, before, after)
    what, amount = _probes.issued(item, figures)
    return removed, {"raw": probe.raw, "seconds": seconds, "figures": figures, "stack": levels,
                     "counters": level_deltas, "issued": {"what": what, "bytes": amount},
                     "row_label": _bench_counters.row_label(item["mode"], amount, level_deltas, what,
                                                            kind=item.get("kind") or "ram"),
                     "cpu": _bench_env.cpu_over(cpu_before, cpu_after)}


def main():
    module = AnsibleModule(argument_spec=dict(item=dict(type="dict"), items=dict(type="list", elements="dict")),
                           mutually_exclusive=[("item", "items")], required_one_of=[("item", "items")],
                           supports_check_mode=True)
    if module.params["items"] is not None:
        # A round of items in one call: a module call costs about half a second of the connection's time, which
        # 160 items paid one by one. Every item is checked before the first runs; they run in the plan's order.
        probes = [Probe(module, item) for item in module.params["items"]]
        runs = [probe.plan() for probe in probes]
        if module.check_mode:
            module.exit_json(changed=True, records=[{"item": probe.item, "run": run} for probe, run in zip(probes, runs)])
        for probe, run in zip(probes, runs):
            probe.check_remove(run)
        records = []
        for probe, run in zip(probes, runs):
            probe.batch_place, probe.batch_size = len(records), len(probes)
            removed, result = measure(probe, run)
            records.append({"item": probe.item, "result": result, "removed": removed})
        module.exit_json(changed=True, records=records)

    probe = Probe(module, module.params["item"])
    run = probe.plan()
    if module.check_mode:
        module.exit_json(changed=True, run=run, raw=probe.raw, seconds=0.0, figures=[], stack=[], counters=[],
                         issued={}, row_label="", removed=[], record={},
                         cpu=_bench_env.cpu_over((None, None), (None, None)))
    probe.check_remove(run)
    removed, result = measure(probe, run)
    module.exit_json(changed=True, run=run, removed=removed, record={"item": probe.item, "result": result}, **result)


if __name__ == "__main__":
    main()
