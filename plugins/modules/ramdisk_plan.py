#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: ramdisk_plan
short_description: Decide a host's whole RAM-disk request on the host, before anything changes
version_added: 1.1.0
description:
  - Reads the host once (memory, swap, every mount, zram and brd devices, the paths of the request, accounts,
    the records of earlier runs) and decides the whole request of the role M(ramdisk.provision.ramdisk), that is the
    merged policy, purposes, the /tmp gate, the RAM budget, each backend's plan, and C(zram_devices).
  - Refuses, with one sentence per problem naming the host, the variable, the value and the fix, what would
    go wrong half-way through a change, using the host's real state. A path through a symlink, a path under a
    file or another non-directory, a path with control or invisible characters or names Linux refuses, a system
    directory such as a package database (the list is in docs/security.md), a new mount that would hide live
    mounts under it or nest inside a RAM mount, a live tmpfs or ramfs that nothing accounts for (no record, no
    fstab line, no mount unit, no open journal entry), C(state=absent) of a mount this collection did not make,
    owners and groups with no account, and ids outside C(uid_t) are all refused.
  - Tries what only the kernel and mkfs can judge. Each new or changed tmpfs and ramfs is mounted once with
    its exact options in a private mount namespace, which nobody else sees, and goes with it. mkfs runs in
    its dry-run mode on a sparse file of each zram or brd device's size.
  - Changes nothing of the request. With errors, it still succeeds, and the caller refuses the request (the role
    does so before its first change).
  - One exception, first of all - when a run of M(ramdisk.provision.ramdisk_apply) died and left its journal
    (C(/var/lib/ramdisk-provision/journal.jsonl)), it finishes or undoes what the journal lists, under the host
    lock, before it reads the host, and returns what it did in RV(recovered); in check mode, or with
    O(recover=false), it only says what it would do.
author: ramdisk.provision maintainers (@ramdisk-provision)
options:
  host:
    description: The name errors give the host (the inventory name).
    type: str
    required: true
  sources:
    description:
      - The policy variables, in order, each a mapping with C(name) and C(value). First C(ramdisk_mounts),
        then every C(ramdisk_mounts__<group>).
    type: list
    elements: raw
    default: []
  purposes:
    description: The built-in purposes, name to the defaults of its entries.
    type: dict
    default: {}
  purpose_overrides:
    description: The user's C(ramdisk_purposes), merged over O(purposes) per purpose; unknown names and keys are errors.
    type: raw
  defaults:
    description: C(ramdisk_mount_defaults); unknown keys are errors.
    type: raw
  state:
    description: C(present) applies the policy, C(absent) removes every mount of it.
    type: raw
    default: present
  budget:
    description: C(ramdisk_ram_budget), at most all of RAM.
    type: raw
    default: 80%
  zram_ratio:
    description: C(ramdisk_zram_assumed_ratio).
    type: raw
    default: 2.0
  swap_devices:
    description: The zram role's C(zram_devices) set up beside the policy; checked, and counted in the budget.
    type: raw
  swap_defaults:
    description: C(zram_device_defaults), under each of O(swap_devices) and of C(zram_devices) in O(backend_requests).
    type: raw
  swap_allow_fallback:
    description: C(zram_allow_algorithm_fallback).
    type: bool
    default: false
  zram_sources:
    description:
      - >-
        C(zram_devices) and every C(zram_devices__<group>) variable of the host, each as C({name, value}), in the
        order given (the roles give C(zram_devices) first, then the others by name). They are merged into one list,
        each device labelled by its variable and index, as O(sources) merges mounts: a device named twice the same
        way counts once, twice differently is an error naming both.
      - >-
        When given, the merged list is O(backend_requests)' C(zram_devices) (the zram role), or O(swap_devices) when
        there is no O(backend_requests) (the ramdisk role).
    type: list
    elements: raw
    version_added: 1.1.0
  tmp_gate_action:
    description:
      - >-
        What a tmp-purpose entry whose enforced gate refuses it (its data does not fit in RAM) does to the host.
        C(fail) refuses the host's whole request; C(skip) leaves that entry out (its directory stays as it is, on
        disk), plans the rest of the policy and names it in C(skipped) of RV(policy) and in a warning. The ramdisk role's
        C(ramdisk_tmp_gate_action).
    type: str
    default: fail
    version_added: 1.1.0
  zram_persistence:
    description:
      - The zram role's C(zram_persistence). With C(generator), zram-generator must be installed, the host must run
        systemd, and no zram device may set C(mem_limit).
    type: str
    default: units
  scan_timeout:
    description: C(ramdisk_scan_timeout), seconds to spend measuring each path's usage.
    type: raw
    default: 10
  variables:
    description: Names of the host's variables that start like the role's, to warn about look-alikes.
    type: list
    elements: str
    default: []
  backend_requests:
    description:
      - For a backend role used on its own, its lists instead of a policy, with C(tmpfs_mounts) and
        C(tmpfs_defaults) (the tmpfs role), C(ramfs_mounts) and C(ramfs_defaults) (the ramfs role),
        C(zram_devices) (the zram role; its C(zram_device_defaults) and C(zram_allow_algorithm_fallback) come as
        O(swap_defaults) and O(swap_allow_fallback)), C(brd) (the brd role's C(state), C(count), C(size) and
        C(mounts)) and C(brd_defaults) (its C(brd_mount_defaults)).
      - They are planned and checked on the host as the policy's entries are, without purposes or the RAM budget.
        O(sources) and the other policy options are then not used.
    type: dict
  trial:
    description: Try each new or changed tmpfs and ramfs, and mkfs, before the change.
    type: bool
    default: true
  recover:
    description: Finish or undo what a run that died left in the journal before planning. When false (a survey),
      only say what recovery would do.
    type: bool
    default: true
  lock_timeout:
    description: Seconds to wait for the host lock when there is something to recover.
    type: int
    default: 300
  persist_helper:
    description:
      - Deprecated and unused (issue 41). A persisted mount always gets C(todo) from a check-mode run of
        M(ramdisk.provision.ramdisk_apply)'s own steps, whose persist helper is this collection's own program. The
        text given here is ignored; it is accepted so that existing playbooks keep working.
    type: str
  zram_allow_swap_cycle:
    description: The zram role's C(zram_allow_swap_cycle), for the check-mode run that sets each zram device's C(todo).
    type: bool
    default: true
extends_documentation_fragment:
  - ramdisk.provision._attributes
  - ramdisk.provision._attributes.check_mode_full
attributes:
  platform:
    support: full
    platforms: linux
notes:
  - The trial mounts need C(unshare) (util-linux) and the right to make a mount namespace (root, or
    CAP_SYS_ADMIN in a container). Where that is missing, a warning says the kernel checks the options when
    the mount is made.
"""

EXAMPLES = r"""
- name: Decide the policy of this host
  ramdisk.provision.ramdisk_plan:
    host: "{{ inventory_hostname }}"
    sources:
      - name: ramdisk_mounts
        value:
          - {path: /var/cache/build, purpose: build, size: 2G}
    purposes:
      build: {mode: "0755", owner: root, group: root, noexec: false}
  register: plan

- name: Refuse the request when anything in it is wrong
  ansible.builtin.assert:
    that: plan.errors | length == 0
    fail_msg: "{{ plan.errors }}"
"""

RETURN = r"""
recovered:
  description: What a run that died had left half done, and whether it was finished (forward) or undone (back);
    in check mode, or with O(recover=false), what would be done.
  returned: always
  type: list
  elements: dict
  sample: [{"path": "/var/cache/build", "action": "migrate", "way": "back", "boot": "same"}]
errors:
  description: Every reason to refuse the request, one sentence each; empty when it can go ahead.
  returned: always
  type: list
  elements: str
  sample: ["Host web1: ramdisk_mounts[0].path is '/srv/etc': a symlink on this host (/srv/etc leads to '/etc'),
            and a mount or copy through a link lands on its target. Use the real path '/etc', or remove the link."]
plan_warnings:
  description:
    - What goes ahead but deserves a look (a gate set to warn, a look-alike variable, ...). Each is also shown
      as a warning of the task.
  returned: always
  type: list
  elements: str
  sample: ["Host web1: the variable ramdisk_mount__web looks like ramdisk_mounts__<group> but is not one, ..."]
policy:
  description:
    - The merged entries, the RAM budget with everything it counts, and the /tmp gates.
    - C(skipped), since 1.1.0, the tmp-purpose entries that O(tmp_gate_action=skip) left out, each with its
      C(path), C(label) and the gate's C(reasons); they are not in C(entries) and the budget does not count them.
  returned: always
  type: dict
  sample: {"entries": [], "budget": {"limit": "80%", "limit_bytes": 13743895347, "total_bytes": 0,
           "within": true, "counted": []}, "gates": [], "skipped": []}
tmpfs:
  description: The tmpfs mounts, each with its action (mount, migrate, remount, ok, unmount, absent-ok), options
    (with uid= and gid=), the record the mount role keeps of it, and what was mounted on top of its path when the
    plan was made (C(seen.mount_id), null when nothing; with it C(seen.unique) and C(seen.boot), the mount's unique
    64-bit ID on Linux 6.8 and later, null before, and the boot ID), which M(ramdisk.provision.ramdisk_apply) checks.
    C(refill) is true on a migrate of a mount of ours found empty over what the directory holds on disk (a boot
    mounted it from its /etc/fstab line and nothing copied the data in); it is replaced by one filled from the disk.
  returned: always
  type: list
  elements: dict
  sample: [{"path": "/var/cache/build", "action": "mount", "fstype": "tmpfs", "options": ["size=2G", "mode=755"]}]
ramfs:
  description: The ramfs mounts, as RV(tmpfs).
  returned: always
  type: list
  elements: dict
  sample: []
todo:
  description:
    - Whether any backend has anything to do; false on a run that would change nothing, so the roles skip the
      backends. Each tmpfs, ramfs and zram entry has its own C(todo), and so has RV(brd). It comes from
      M(ramdisk.provision.ramdisk_apply)'s own steps, built in check mode on what the host holds (mounts, fstab,
      roots, records, units, a persisted mount's backing and timer, a zram device's sysfs); what that cannot answer
      counts as to do, so that ramdisk_apply runs and says why.
  returned: when errors is empty
  type: bool
  sample: false
zram:
  description: The zram devices of the policy (file systems), or C(zram_devices) of O(backend_requests), for the zram role.
  returned: always
  type: list
  elements: dict
  sample: []
zram_swap:
  description: The devices of O(swap_devices), for the zram role.
  returned: always
  type: list
  elements: dict
  sample: []
zram_known:
  description: The device each zram entry got on earlier runs (name to C(zramN)), from the zram role's records.
  returned: always
  type: dict
  sample: {"swap": "zram0"}
brd:
  description: The brd plan (module action and mounts), empty when the policy has no brd entry and O(backend_requests) no C(brd).
  returned: always
  type: dict
  sample: {}
backends:
  description: Each backend role's share of the policy, as that role's variables take it (tmpfs_mounts,
    ramfs_mounts, zram_devices, brd).
  returned: always
  type: dict
  sample: {"tmpfs_mounts": [], "ramfs_mounts": [], "zram_devices": [], "brd": {}}
persist:
  description: The persist decision of each persisted mount, by its token.
  returned: always
  type: dict
  sample: {}
host_paths:
  description: The host paths the roles' tasks and templates name (the metrics collector's files, and
    C(module_tmpdir), where modules unpack while a run mounts over /tmp), from the collection's one list of them,
    so that no role writes a path of its own.
  returned: always
  type: dict
  sample: {"metrics_dir": "/usr/local/libexec/ramdisk-provision/metrics",
           "metrics_collector": "/usr/local/libexec/ramdisk-provision/metrics/_metrics.py",
           "metrics_config": "/etc/ramdisk-provision/metrics.json",
           "metrics_peak": "/var/lib/ramdisk-provision/metrics-peak.json",
           "status_command": "/usr/local/sbin/ramdisk-status", "unit_dir": "/etc/systemd/system",
           "module_tmpdir": "/run"}
ansible_facts:
  description: The facts read, as ramdisk.provision.ramdisk_facts returns them, and C(service_mgr) (C(systemd),
    or the name of PID 1), so the roles need no second facts gathering to learn it.
  returned: always
  type: dict
  sample: {"ramdisk": {"memory": {"total_bytes": 25769803776}}, "service_mgr": "systemd"}
"""

import glob
import grp
import json
import os
import pwd
import stat
import traceback

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths
from ansible_collections.ramdisk.provision.plugins.module_utils._dry_run import mark_todo
from ansible_collections.ramdisk.provision.plugins.module_utils._executor import Executor, recover
from ansible_collections.ramdisk.provision.plugins.module_utils._failure import program_runner, unexpected
from ansible_collections.ramdisk.provision.plugins.module_utils._host_facts import TMP, _read, gather
from ansible_collections.ramdisk.provision.plugins.module_utils._journal import Journal, JournalError
from ansible_collections.ramdisk.provision.plugins.module_utils._lock import HostLock, LockHeld
from ansible_collections.ramdisk.provision.plugins.module_utils._mount_identity import identity
from ansible_collections.ramdisk.provision.plugins.module_utils._persist import read_state
from ansible_collections.ramdisk.provision.plugins.module_utils._host_plan import (
    RECORD_DIR, file_kind, merge_zram_sources, plan_host)
from ansible_collections.ramdisk.provision.plugins.module_utils._plan_core import normalize_path, path_text_problem
from ansible_collections.ramdisk.provision.plugins.module_utils._procfs import mem_available, parse_mountinfo
from ansible_collections.ramdisk.provision.plugins.module_utils._steps import StepError
from ansible_collections.ramdisk.provision.plugins.module_utils._trust import state_dirs_error

ZRAM_RECORD_DIR = _host_paths.ZRAM_RECORD_DIR
PERSIST_CONF_DIR = _host_paths.PERSIST_CONF_DIR
UNIT_DIR = _host_paths.UNIT_DIR


class HostView(object):
    """The questions plan_host() asks of the host, answered by reading it (and by trials nobody sees)."""

    def __init__(self, module, trial=True):
        self.module = module
        self.trial = trial
        self._unshare = None
        self._trials = {}

    def first_link(self, path):
        """(component, target) of the first symlink along PATH, or None."""
        current = ""
        for part in path.strip("/").split("/"):
            current += "/" + part
            try:
                info = os.lstat(current)
            except OSError:
                return None
            if stat.S_ISLNK(info.st_mode):
                return current, os.path.realpath(current)
        return None

    def realpath(self, path):
        return os.path.realpath(path)

    def not_a_directory(self, path):
        """(component, what it is) of the first parent of PATH that is there and is not a directory, nor a link to
        one, or None (a missing parent is made by the mount's mkdir)."""
        current = ""
        for part in path.strip("/").split("/")[:-1]:
            current += "/" + part
            try:
                info = os.stat(current)
            except OSError:
                return None
            if not stat.S_ISDIR(info.st_mode):
                what = file_kind(info.st_mode)
                return current, "a symlink to %s" % what if os.path.islink(current) else what
        return None

    @staticmethod
    def read(path):
        """A file's text, or None when it is missing or unreadable."""
        return _read(path)

    @staticmethod
    def exists(path):
        return os.path.lexists(path)

    @staticmethod
    def users_of(path):
        """(pid, command) of each process with a file, directory or mapping under PATH, as fuser -m finds them.

        Read from /proc by hand: psutil is not on every host, and fuser (psmisc) is not either. A process in
        another mount namespace (a container, a unit with PrivateTmp=) names its own mounts' paths, which do not
        hold this one busy: it is left out.
        """
        prefix = path.rstrip("/") + "/"
        found = []

        def namespace(pid):
            try:
                return os.readlink("/proc/%s/ns/mnt" % pid)
            except OSError:
                return None

        own = namespace("self")
        for pid in sorted((name for name in os.listdir("/proc") if name.isdigit()), key=int):
            if int(pid) == os.getpid() or own is not None and namespace(pid) not in (None, own):
                continue
            base = "/proc/%s/" % pid
            names = [base + "cwd", base + "root", base + "exe"]
            try:
                names += [base + "fd/" + fd for fd in os.listdir(base + "fd")]
            except OSError:
                pass
            targets = []
            for name in names:
                try:
                    targets.append(os.readlink(name))
                except OSError:
                    continue
            for line in (_read(base + "maps") or "").splitlines():
                fields = line.split(None, 5)
                if len(fields) == 6:
                    targets.append(fields[5])
            if any(target == path or target.startswith(prefix) for target in targets):
                found.append((int(pid), (_read(base + "comm") or "?").strip()))
        return found

    def records(self):
        out = {}
        for name in sorted(glob.glob(os.path.join(RECORD_DIR, "*.json"))):
            try:
                record = json.loads(_read(name) or "")
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("path"), str):
                out[record["path"]] = record
        return out

    @staticmethod
    def journal_paths():
        """The paths of the journal's open transactions: what a run that died was changing."""
        try:
            lines = Journal(_host_paths.JOURNAL).read()
        except JournalError:
            return []
        return [txn["what"].get("path") for txn in Journal.transactions(lines) if not txn["closed"]]

    def zram_records(self):
        out = {}
        for name in sorted(glob.glob(os.path.join(ZRAM_RECORD_DIR, "*.conf"))):
            device = None
            for line in (_read(name) or "").splitlines():
                if line.startswith("DEVICE=") and line[7:].startswith("zram") and line[11:].isdigit():
                    device = line[7:]
            out[os.path.basename(name)[:-5]] = {"device": device}
        return out

    @staticmethod
    def _lookup(value, by_name, by_id):
        try:
            if isinstance(value, int) and not isinstance(value, bool):
                by_id(value)
                return value
            if isinstance(value, str):
                return by_name(value)[2]
        except (KeyError, OverflowError, ValueError):
            return None
        return None

    def user(self, value):
        return self._lookup(value, pwd.getpwnam, pwd.getpwuid)

    def group(self, value):
        return self._lookup(value, grp.getgrnam, grp.getgrgid)

    def user_name(self, uid):
        try:
            return pwd.getpwuid(uid).pw_name
        except (KeyError, TypeError, OverflowError):
            return uid

    def group_name(self, gid):
        try:
            return grp.getgrgid(gid).gr_name
        except (KeyError, TypeError, OverflowError):
            return gid

    def systemd(self):
        return os.path.isdir(_host_paths.SYSTEMD_RUN_DIR)

    def service_manager(self):
        """What runs as PID 1, as the roles name it (service_mgr)."""
        return "systemd" if self.systemd() else (_read("/proc/1/comm") or "unknown").strip()

    def vendor_tmp_mount(self):
        # Where distributions ship their own tmp.mount.
        return any(os.path.exists(path) for path in _host_paths.VENDOR_TMP_UNITS)

    def backing_has_copy(self, backing):
        return os.path.isdir(os.path.join(backing, "current"))

    def persist_state(self, token, backing, live_path):
        return read_state(token, backing, live_path, self.systemd(), program_runner(self.module))

    def _can_unshare(self):
        if self._unshare is None:
            tool = self.module.get_bin_path("unshare")
            if tool is None:
                self._unshare = "no unshare command (util-linux)"
            else:
                rc, _out, err = self.module.run_command([tool, "--mount", "--propagation", "private", "--", "true"],
                                                        environ_update={"LC_ALL": "C"})
                self._unshare = tool if rc == 0 else "no private mount namespace: %s" % (err.strip() or rc)
        return self._unshare

    def trial_mount(self, fstype, options):
        """None when the kernel takes FSTYPE with OPTIONS; {'message'} when it refuses; {'unavailable'}."""
        if not self.trial:
            return None
        key = (fstype, tuple(options))
        if key in self._trials:
            return self._trials[key]
        tool = self._can_unshare()
        if not tool.startswith("/"):
            return {"unavailable": tool}
        target = os.path.join(self.module.tmpdir, "trial")
        if not os.path.isdir(target):
            os.mkdir(target, 0o700)
        # The namespace and the mount in it end with the mount command itself.
        argv = [tool, "--mount", "--propagation", "private", "--", self.module.get_bin_path("mount", True),
                "-t", fstype] + (["-o", ",".join(options)] if options else []) + [fstype, target]
        rc, out, err = self.module.run_command(argv, environ_update={"LC_ALL": "C"})
        result = None if rc == 0 else {"message": _said(err or out, target) or "exit status %d" % rc}
        self._trials[key] = result
        return result

    def has_mkfs(self, fstype):
        return self.module.get_bin_path("mkfs." + fstype) is not None

    def has_program(self, name):
        return self.module.get_bin_path(name) is not None

    def mkfs_dry_run(self, fstype, size_bytes, options):
        """None when mkfs would make FSTYPE on a device of SIZE_BYTES with OPTIONS; else what it said."""
        if not self.trial:
            return None
        image = os.path.join(self.module.tmpdir, "mkfs-trial.img")
        with open(image, "wb") as handle:
            handle.truncate(size_bytes)
        # -n (ext4) and -N (xfs) only work out the layout: nothing is written, even to the sparse file.
        dry = ["-n", "-F", "-q"] if fstype.startswith("ext") else ["-N", "-f", "-q"]
        try:
            rc, out, err = self.module.run_command([self.module.get_bin_path("mkfs." + fstype, True)] + dry
                                                   + list(options) + [image], environ_update={"LC_ALL": "C"})
        finally:
            os.unlink(image)
        return None if rc == 0 else _said(err or out, image) or "exit status %d" % rc


def _said(text, scratch):
    """What a tool said, on one line, without the scratch path of the trial or mount's hint about dmesg."""
    text = " ".join(text.replace(scratch + ": ", "").replace(scratch, "the trial").split())
    return text.split(" dmesg(1) ", maxsplit=1)[0].rstrip(".")[:300]


def _paths(sources, swap_devices, backend_requests=None):
    """Every path the request names that can be looked at (normalised), /tmp first."""
    out = [TMP]
    values = [value for source in sources or () if isinstance(source, dict) for value in [source.get("value")]]
    values.append(swap_devices)
    given = backend_requests if isinstance(backend_requests, dict) else {}
    values.extend(given.get(name) for name in ("tmpfs_mounts", "ramfs_mounts", "zram_devices"))
    values.append(given["brd"].get("mounts") if isinstance(given.get("brd"), dict) else None)
    for value in values:
        if not isinstance(value, (list, tuple)):
            continue
        for item in value:
            raw = item.get("path") if isinstance(item, dict) else None
            if isinstance(raw, str) and raw.startswith("/") and path_text_problem(raw) is None:
                path = normalize_path(raw)
                if path is not None and path not in out:
                    out.append(path)
    return out


def _recover(module, params):
    """What a run that died left in the journal, finished or undone before the host is read (only said in check
    mode, or with recover false), so that the plan is made from a host with nothing half done."""
    if not os.path.exists(_host_paths.JOURNAL):
        return []
    host = params["host"]
    check = module.check_mode or not params["recover"]
    executor = Executor(program_runner(module),
                        os.path.isdir(_host_paths.SYSTEMD_RUN_DIR), host, check=check)
    lock = None
    try:
        if not check:
            client = (os.environ.get("SSH_CLIENT") or "").split()
            lock = HostLock(holder={"run": "plan", "controller": client[0] if client else "local connection"})
            lock.acquire(params["lock_timeout"])
        recovered = recover(executor, Journal(_host_paths.JOURNAL))
        for warning in executor.warnings:  # an unreadable journal line, and what recovery assumed it said
            module.warn(warning)
        return recovered
    except LockHeld as exc:
        module.fail_json(msg="Host %s: a run that died left changes half done, and another run holds the host "
                             "lock, so this one changed nothing: %s" % (host, exc))
    except (JournalError, StepError, OSError) as exc:
        module.fail_json(msg="Host %s: recovering what an earlier run left failed: %s. The journal %s keeps it; "
                             "run again once the cause is fixed." % (host, exc, _host_paths.JOURNAL))
    finally:
        if lock is not None:
            lock.release()
    return []


def _todo(module, params, result):
    """Whether any backend has anything to do (and each persisted mount and zram device's own todo), from
    ramdisk_apply's steps built in check mode (_dry_run)."""
    systemd = os.path.isdir(_host_paths.SYSTEMD_RUN_DIR)
    executor = Executor(program_runner(module), systemd,
                        params["host"], check=True, persist_helper=params["persist_helper"])
    settings = {"known": result.get("zram_known") or {}, "persistence": params["zram_persistence"],
                "allow_swap_cycle": params["zram_allow_swap_cycle"],
                "allow_algorithm_fallback": params["swap_allow_fallback"],
                "vendor_tmp": any(os.path.exists(path) for path in _host_paths.VENDOR_TMP_UNITS),
                "mem_available_bytes": mem_available()}
    return mark_todo(result, executor, settings, settings["vendor_tmp"])


def main():
    module = AnsibleModule(
        argument_spec=dict(
            host=dict(type="str", required=True),
            sources=dict(type="list", elements="raw", default=[]),
            purposes=dict(type="dict", default={}),
            purpose_overrides=dict(type="raw"),
            defaults=dict(type="raw"),
            state=dict(type="raw", default="present"),
            budget=dict(type="raw", default="80%"),
            zram_ratio=dict(type="raw", default=2.0),
            swap_devices=dict(type="raw"),
            swap_defaults=dict(type="raw"),
            swap_allow_fallback=dict(type="bool", default=False),
            zram_sources=dict(type="list", elements="raw"),
            tmp_gate_action=dict(type="str", default="fail"),
            scan_timeout=dict(type="raw", default=10),
            variables=dict(type="list", elements="str", default=[]),
            backend_requests=dict(type="dict"),
            trial=dict(type="bool", default=True),
            zram_persistence=dict(type="str", default="units"),
            recover=dict(type="bool", default=True),
            lock_timeout=dict(type="int", default=300),
            persist_helper=dict(type="str"),
            zram_allow_swap_cycle=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    try:
        _main(module)
    except Exception as exc:  # pylint: disable=broad-except
        # Whatever nobody foresaw still says what happened and what the host holds.
        module.fail_json(msg=unexpected(module.params["host"], "ramdisk_plan", exc, _paths(
            module.params["sources"], module.params["swap_devices"], module.params["backend_requests"])),
            exception=traceback.format_exc())


def _main(module):
    params = module.params
    if not os.path.exists("/proc/self/mountinfo"):
        module.fail_json(msg="Host %s: /proc/self/mountinfo is missing: ramdisk_plan needs Linux with /proc mounted."
                         % params["host"])
    # Before the journal is read and recovered: a journal or record someone else could have written would steer root.
    untrusted = state_dirs_error(params["host"], _host_paths.STATE_DIRS)
    if untrusted:
        module.fail_json(msg=untrusted)
    recovered = _recover(module, params)
    scan_timeout = params["scan_timeout"]
    if isinstance(scan_timeout, str):
        try:
            scan_timeout = float(scan_timeout)
        except ValueError:
            pass
    usable_timeout = scan_timeout if isinstance(scan_timeout, (int, float)) and 0 <= scan_timeout <= 3600 else 10
    source_errors = []
    if params["zram_sources"] is not None:
        merged, source_errors = merge_zram_sources(params["zram_sources"], params["host"])
        if params["backend_requests"] is not None:
            params["backend_requests"] = dict(params["backend_requests"], zram_devices=merged)
        else:
            params["swap_devices"] = merged
    try:
        # One reading of the mount table for the facts the plan decides from and for what it says it saw on each
        # path (seen): read twice, a mount that another run moved in between was seen but not planned for.
        mountinfo = parse_mountinfo(_read("/proc/self/mountinfo") or "")
        facts = gather(_paths(params["sources"], params["swap_devices"], params["backend_requests"]), usable_timeout,
                       mountinfo)
        facts["all_mounts"] = [{"path": mount["mount_point"], "fstype": mount["fstype"], "source": mount["source"]}
                               for mount in mountinfo]
    except (IOError, OSError) as exc:
        module.fail_json(msg="Host %s: could not read the host's memory and mounts: %s." % (params["host"], exc))
    request = dict((key, params[key]) for key in ("sources", "purposes", "purpose_overrides", "state", "budget",
                                                  "zram_ratio", "swap_devices", "swap_defaults",
                                                  "swap_allow_fallback", "variables", "backend_requests",
                                                  "zram_persistence", "tmp_gate_action"))
    request["defaults"] = params["defaults"] if params["defaults"] is not None else {}
    request["source_errors"] = source_errors
    request["scan_timeout"] = scan_timeout
    result = plan_host(request, facts, HostView(module, params["trial"]), host=params["host"])
    # What each planned path had on top when the plan was made: ramdisk_apply refuses to act on a path that
    # changed since (another run got there first).
    top = dict((mount["mount_point"], mount["mount_id"]) for mount in mountinfo)
    for entry in (result.get("tmpfs") or []) + (result.get("ramfs") or []):
        # With the mount's unique ID where the kernel has one: the mount ID alone comes back after an umount.
        entry["seen"] = dict(identity(entry["path"]) if entry["path"] in top else {}, mount_id=top.get(entry["path"]))
    facts.pop("all_mounts", None)
    # Under its own key: a module's result may no longer carry warnings itself (ansible-core 2.19).
    result["plan_warnings"] = result.pop("warnings")
    for warning in result["plan_warnings"]:
        module.warn(warning)
    if not result["errors"]:
        result["todo"] = _todo(module, params, result)
    # The roles only ask whether it is systemd; with this, no second facts gathering is needed for it.
    result["recovered"] = recovered
    result["host_paths"] = _host_paths.for_roles()
    module.exit_json(changed=bool(recovered) and not module.check_mode and params["recover"],
                     ansible_facts={"ramdisk": facts, "service_mgr": HostView(module).service_manager()}, **result)


if __name__ == "__main__":
    main()
