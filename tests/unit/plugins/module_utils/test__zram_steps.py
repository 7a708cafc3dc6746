# SPDX-License-Identifier: GPL-3.0-or-later
"""zram devices as journaled transactions, on a fake kernel (no real sysfs, no swap): the steps, their undo,
the all-or-nothing run, and recovery after a death at every journal write.

The real kernel runs them in scripts/test/transaction.sh (tests/transaction/transaction.py).
"""

from __future__ import annotations

import errno
import json
import os

import pytest

from ansible_collections.ramdisk.provision.plugins.module_utils import _executor as ex_mod
from ansible_collections.ramdisk.provision.plugins.module_utils import _steps as steps_mod
from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths as paths
from ansible_collections.ramdisk.provision.plugins.module_utils import _zram_steps as zs
from ansible_collections.ramdisk.provision.plugins.module_utils._dry_run import mark_todo
from ansible_collections.ramdisk.provision.plugins.module_utils._journal import Journal
from ansible_collections.ramdisk.provision.plugins.module_utils._zram_plan import unit_name

FSTAB = "# static\nUUID=1 / ext4 defaults 0 1\n/dev/sdb2 none swap sw 0 0\n"
MIB = 1024 * 1024


class FakeKernel(zs.Kernel):
    """zram devices and swaps in dicts; other paths (fstab) read from the scratch directory for real."""

    def __init__(self, offered=("lzo-rle", "lzo", "lz4")):
        self.devices = {}
        self.swapping = {}
        self.offered = list(offered)

    def read(self, path):
        if path.startswith(zs.SYS_BLOCK + "/"):
            name, attr = path[len(zs.SYS_BLOCK) + 1:].split("/", 1)
            device = self.devices.get(name)
            if device is None:
                return None
            if attr == "disksize":
                return "%d\n" % device["disksize"]
            if attr == "comp_algorithm":
                return " ".join("[%s]" % a if a == device["algorithm"] else a for a in self.offered) + "\n"
            if attr == "mm_stat":
                return "0 0 0 %d 0 0 0 0 0\n" % device["mem_limit"]
            if attr == "dev":
                return "253:%d\n" % zs.device_number(name)
            return None
        return super().read(path)

    def write(self, path, value):
        if path == zs.CONTROL + "/hot_remove":
            name = "zram%s" % value
            if name not in self.devices:
                raise OSError(errno.ENODEV, "No such device")
            if self.devices[name]["disksize"]:
                raise OSError(errno.EBUSY, "Device or resource busy")
            del self.devices[name]
            return
        name, attr = path[len(zs.SYS_BLOCK) + 1:].split("/", 1)
        device = self.devices[name]
        if attr == "reset":
            if name in self.swapping:
                raise OSError(errno.EBUSY, "Device or resource busy")
            device.update(disksize=0, algorithm=self.offered[0], mem_limit=0)
        elif attr == "comp_algorithm":
            if value not in self.offered or device["disksize"]:
                raise OSError(errno.EINVAL, "Invalid argument")
            device["algorithm"] = value
        elif attr == "disksize":
            device["disksize"] = int(value)
        elif attr == "mem_limit":
            device["mem_limit"] = int(value)

    def hot_add(self):
        number = zs.lowest_free_number(list(self.devices))
        self.devices["zram%d" % number] = {"disksize": 0, "algorithm": self.offered[0], "mem_limit": 0}
        return number

    def names(self):
        return sorted(self.devices, key=zs.device_number)

    def swaps(self):
        return [{"path": "/dev/" + name, "type": "partition", "size_bytes": 0, "used_bytes": 0, "priority": priority}
                for name, priority in self.swapping.items()]

    def mounts(self):
        return []

    def wait_node(self, name):
        return True


class Executor(ex_mod.Executor):
    """The real executor over the fake kernel; commands act on it, systemctl enable makes its link."""

    def __init__(self, kernel, boot=None, refuse=()):
        self.calls = []
        self.refuse = refuse
        super().__init__(self._run, True, "web1")
        self.kernel = kernel
        if boot is not None:  # another boot than the journal's (which is this machine's)
            self.boot = boot

    def _run(self, argv):
        self.calls.append(" ".join(argv))
        kernel = self.kernel
        if argv[0] in self.refuse:
            return 1, "", "%s: Operation not permitted" % argv[0]
        if argv[0] == "swapon":
            kernel.swapping[argv[-1][5:]] = int(argv[2])
        elif argv[0] == "swapoff":
            kernel.swapping.pop(argv[-1][5:], None)
        elif argv[0] == "blkid":
            return 2, "", ""
        elif argv[:2] == ["systemctl", "enable"]:
            link = paths.zram_unit_link(argv[2][len("ramdisk-zram@"):-len(".service")])
            os.makedirs(os.path.dirname(link), exist_ok=True)
            open(link, "w").close()
        elif argv[:2] == ["systemctl", "disable"]:
            link = paths.zram_unit_link(argv[2][len("ramdisk-zram@"):-len(".service")])
            if os.path.lexists(link):
                os.unlink(link)
        return 0, "", ""


class Killed(BaseException):
    """kill -9: nothing after it runs, not even an undo."""


class DyingJournal(Journal):
    """Dies just before its write number KILL_AT, as the kill tests' hook does (RAMDISK_PROVISION_TEST_KILL_AT)."""

    def __init__(self, path, kill_at):
        super().__init__(path)
        self._kill_at = None
        self.die_at = kill_at

    def _append(self, line):
        if self.writes + 1 == self.die_at:
            self.writes += 1
            raise Killed()
        super()._append(line)


@pytest.fixture
def host(tmp_path, monkeypatch):
    etc = tmp_path / "etc"
    for name, value in (("FSTAB", etc / "fstab"), ("RECORD_DIR", etc / "ramdisk-provision" / "mounts"),
                        ("ZRAM_RECORD_DIR", etc / "ramdisk-provision" / "zram"),
                        ("UNIT_DIR", etc / "systemd" / "system"), ("ZRAM_UNIT", etc / "systemd" / "system" / "z@.service"),
                        ("ZRAM_UNIT_WANTS", etc / "systemd" / "system" / "local-fs-pre.target.wants"),
                        ("ZRAM_SETUP", tmp_path / "libexec" / "zram-setup"),
                        ("ZRAM_GENERATOR_DIR", etc / "systemd" / "zram-generator.conf.d"),
                        ("NEW_ROOT", tmp_path / "run" / "new"), ("STAGE_ROOT", tmp_path / "run" / "lower")):
        monkeypatch.setattr(paths, name, str(value))
    os.makedirs(str(etc))
    (etc / "fstab").write_text(FSTAB)
    monkeypatch.setattr(steps_mod, "mountinfo", lambda: [])
    return tmp_path


def swap(name="swap", size=64 * MIB, **changes):
    entry = {"name": name, "unit": unit_name(name), "use": "swap", "state": "present", "size": size,
             "size_bytes": size, "algorithm": None, "mem_limit_bytes": None, "priority": 100, "fstype": None,
             "mkfs_options": [], "mount": None}
    entry.update(changes)
    return entry


SETTINGS = {"known": {}, "persistence": "units", "allow_swap_cycle": True, "allow_algorithm_fallback": False}


def run(entries, kernel, host, known=None, journal=None, **settings):
    ex = Executor(kernel)
    journal = journal or Journal(str(host / "journal.jsonl"))
    return ex, zs.apply_zram(entries, ex, journal, "run1", dict(SETTINGS, known=known or {}, **settings))


def known_from_records():
    out = {}
    if os.path.isdir(paths.ZRAM_RECORD_DIR):
        for name in os.listdir(paths.ZRAM_RECORD_DIR):
            for line in open(os.path.join(paths.ZRAM_RECORD_DIR, name)):
                if line.startswith("DEVICE="):
                    out[name[:-5]] = line[7:].strip()
    return out


def host_state(kernel):
    files = {}
    for here, _dirs, names in os.walk(os.path.dirname(paths.FSTAB)):
        for name in names:
            files[os.path.join(here, name)] = open(os.path.join(here, name)).read()
    return {"devices": json.dumps(kernel.devices, sort_keys=True), "swaps": dict(kernel.swapping), "files": files}


# Building ---------------------------------------------------------------------------------------------------

def test_a_new_swap_device_is_made_turned_on_at_the_pivot_then_written_for_the_boot(host):
    ex = Executor(FakeKernel())
    steps, pivot, info = zs.build_zram(swap(algorithm="lz4"), ex, SETTINGS, set())
    names = [step["step"] for step in steps]
    assert names == ["zram_add", "zram_set", "mkswap", "swapon", "file", "file", "file", "reload", "systemctl",
                     "swap_fstab"]
    assert steps[pivot]["step"] == "swapon" and all(name not in zs.LIVE_STEPS for name in names[pivot + 1:])
    assert steps[1]["args"]["writes"] == [["comp_algorithm", "lz4"], ["disksize", 64 * MIB]]
    assert info["device"] == "zram0" and info["action"] == "create"


def test_each_new_device_of_a_run_gets_the_next_number_the_kernel_gives(host):
    kernel = FakeKernel()
    kernel.hot_add()  # zram0, someone else's
    ex = Executor(kernel)
    taken = set()
    first = zs.build_zram(swap("a"), ex, SETTINGS, taken)[2]["device"]
    second = zs.build_zram(swap("b"), ex, SETTINGS, taken)[2]["device"]
    assert (first, second) == ("zram1", "zram2")


def test_apply_leaves_the_device_swap_fstab_line_unit_and_record_and_a_rerun_changes_nothing(host):
    kernel = FakeKernel()
    ex, out = run([swap(algorithm="lz4")], kernel, host)
    assert kernel.devices["zram0"] == {"disksize": 64 * MIB, "algorithm": "lz4", "mem_limit": 0}
    assert kernel.swapping == {"zram0": 100}
    assert open(paths.FSTAB).read() == FSTAB + (
        "/dev/zram0 none swap pri=100,x-systemd.requires=ramdisk-zram@swap.service,x-systemd.makefs 0 0\n")
    assert "DEVICE=zram0\nSIZE=%d\nALGORITHM=lz4\n" % (64 * MIB) in open(paths.zram_record_file("swap")).read()
    assert open(paths.ZRAM_SETUP).read().startswith("#!/bin/sh\n# Written by the ramdisk.provision collection")
    assert os.stat(paths.ZRAM_SETUP).st_mode & 0o777 == 0o755
    assert "ExecStart=%s %%i" % paths.ZRAM_SETUP in open(paths.ZRAM_UNIT).read()
    assert out[0]["changed"] and not os.path.exists(str(host / "journal.jsonl"))
    _ex, again = run([swap(algorithm="lz4")], kernel, host, known=known_from_records())
    assert again[0]["steps"] == [] and not again[0]["changed"]


def test_the_plan_skips_a_settled_swap_device_and_not_one_whose_size_changed(host):
    kernel = FakeKernel()
    run([swap(algorithm="lz4")], kernel, host)
    settings = dict(SETTINGS, known=known_from_records())
    checking = Executor(kernel)
    checking.check = True
    plan = {"tmpfs": [], "ramfs": [], "zram": [], "zram_swap": [swap(algorithm="lz4")], "brd": {}}
    mark_todo(plan, checking, settings, False)
    assert plan["zram_swap"][0]["todo"] is False
    plan["zram_swap"] = [swap(algorithm="lz4", size_bytes=128 * MIB)]
    mark_todo(plan, checking, settings, False)
    assert plan["zram_swap"][0]["todo"] is True
    assert kernel.devices["zram0"]["disksize"] == 64 * MIB and kernel.swapping == {"zram0": 100}


def test_a_recorded_device_that_is_gone_is_made_again_and_its_old_fstab_line_goes(host):
    # After a reboot without the boot unit, or a device removed by hand: the number may change.
    kernel = FakeKernel()
    with open(paths.FSTAB, "a") as handle:
        handle.write("/dev/zram5 none swap pri=100,x-systemd.requires=ramdisk-zram@swap.service,x-systemd.makefs 0 0\n")
    _ex, out = run([swap()], kernel, host, known={"swap": "zram5"})
    assert out[0]["device"] == "zram0"
    fstab = open(paths.FSTAB).read()
    assert "/dev/zram5" not in fstab and "/dev/zram0 none swap" in fstab


def test_a_recorded_number_that_another_user_holds_now_is_left_alone_and_a_new_device_made(host):
    kernel = FakeKernel()
    run([swap()], kernel, host)
    kernel.swapping.clear()  # a reboot: the swap and the device went; someone else's device has the number now
    kernel.devices["zram0"] = {"disksize": 8 * MIB, "algorithm": "lzo", "mem_limit": 0}
    _ex, out = run([swap()], kernel, host, known=known_from_records())
    assert out[0]["device"] == "zram1" and out[0]["action"] == "create"
    assert kernel.devices["zram0"] == {"disksize": 8 * MIB, "algorithm": "lzo", "mem_limit": 0}
    assert "/dev/zram0" not in open(paths.FSTAB).read()


def test_a_mem_limit_change_is_made_live_and_its_undo_puts_the_old_one_back(host):
    kernel = FakeKernel()
    run([swap()], kernel, host)
    ex = Executor(kernel)
    steps, pivot, info = zs.build_zram(swap(mem_limit_bytes=32 * MIB), ex, dict(SETTINGS, known={"swap": "zram0"}),
                                       set())
    assert [step["step"] for step in steps][:1] == ["zram_set"] and steps[0]["args"]["writes"] == [["mem_limit", 32 * MIB]]
    ex.do("zram_set", steps[0]["args"])
    assert kernel.devices["zram0"]["mem_limit"] == 32 * MIB
    ex.undo("zram_set", steps[0]["args"], {}, True)
    assert kernel.devices["zram0"]["mem_limit"] == 0


def test_a_new_size_of_live_swap_waits_for_a_reboot_without_cycling(host):
    kernel = FakeKernel()
    run([swap()], kernel, host)
    ex = Executor(kernel)
    steps, pivot, info = zs.build_zram(swap(size=128 * MIB), ex,
                                       dict(SETTINGS, known={"swap": "zram0"}, allow_swap_cycle=False), set())
    assert info["reboot_required"] and "reboot" in info["reason"]
    assert not any(step["step"] in zs.LIVE_STEPS for step in steps)
    assert [step["step"] for step in steps] == ["file"]  # the record says the size asked, for the next boot


def test_a_cycled_swap_is_undone_back_to_its_old_size_and_on_again(host):
    kernel = FakeKernel()
    run([swap()], kernel, host)
    ex = Executor(kernel, refuse=("swapon",))
    with pytest.raises(ex_mod.ApplyError):
        zs.apply_zram([swap(size=128 * MIB)], ex, Journal(str(host / "j")), "run2",
                      dict(SETTINGS, known={"swap": "zram0"}, mem_available_bytes=8 << 30))
    assert kernel.devices["zram0"]["disksize"] == 64 * MIB
    # swapon is refused in this test, so the undo's swapon is too: the device is back at its size, swap off.
    assert [call.split()[0] for call in ex.calls if call.split()[0] in ("swapoff", "mkswap", "swapon")] == [
        "swapoff", "mkswap", "swapon", "mkswap", "swapon"]


def test_an_absent_entry_turns_swap_off_at_the_pivot_then_files_then_the_device(host):
    kernel = FakeKernel()
    run([swap()], kernel, host)
    ex = Executor(kernel)
    steps, pivot, info = zs.build_zram(swap(state="absent"), ex, dict(SETTINGS, known={"swap": "zram0"}), set())
    assert [step["step"] for step in steps] == ["swapoff", "swap_fstab", "systemctl", "file", "zram_remove"]
    assert pivot == 0
    zs.apply_zram([swap(state="absent")], ex, Journal(str(host / "j")), "run2", dict(SETTINGS, known={"swap": "zram0"}))
    assert kernel.devices == {} and kernel.swapping == {} and open(paths.FSTAB).read() == FSTAB
    assert not os.path.exists(paths.zram_record_file("swap"))


# All or nothing -----------------------------------------------------------------------------------------------

def test_a_failure_at_device_k_of_n_undoes_every_device_this_run_made(host):
    kernel = FakeKernel()
    kernel.hot_add()  # zram0: another user's, left alone
    before = host_state(kernel)
    entries = [swap("a"), swap("b", algorithm="lz4"), swap("c", algorithm="zstd"), swap("d")]
    with pytest.raises(ex_mod.ApplyError) as caught:
        run(entries, kernel, host)
    message = str(caught.value)
    # The algorithm is checked against what the devices offer before entry c's device is made.
    assert "Host web1: zram_devices entry 'c' failed before its first step: the kernel does not offer zram " \
           "algorithm 'zstd'; it offers: lzo-rle, lzo, lz4" in message
    assert "Undone, newest first" in message
    assert "zram_devices entry 'b' (/dev/zram2), zram_devices entry 'a' (/dev/zram1)." in message
    assert message.endswith("zram devices of these entries on the host now: none.")
    assert host_state(kernel) == before
    assert not os.path.exists(str(host / "journal.jsonl"))


def test_a_setting_the_kernel_refuses_at_device_k_undoes_its_device_and_the_ones_before(host):
    kernel = FakeKernel(offered=())  # no device to ask before the first is made: the kernel says at zram_set
    kernel.offered = ["lzo-rle", "lzo", "lz4"]
    real_names = kernel.names
    kernel.names = lambda: []  # nothing to read the offered algorithms from when planning
    before = host_state(kernel)
    with pytest.raises(ex_mod.ApplyError) as caught:
        run([swap("a"), swap("c", algorithm="zstd")], kernel, host)
    kernel.names = real_names
    message = str(caught.value)
    assert "zram_devices entry 'c' failed at its step 'zram_set': the kernel refused algorithm 'zstd'" in message
    assert host_state(kernel) == before


def test_swapon_refused_at_the_last_device_undoes_the_earlier_swaps_too(host):
    kernel = FakeKernel()
    before = host_state(kernel)

    class Limited(Executor):
        def _run(self, argv):
            if argv[0] == "swapon" and len(self.kernel.swapping) == 2:
                return 255, "", "swapon: /dev/zram2: swapon failed: Operation not permitted"
            return Executor._run(self, argv)
    ex = Limited(kernel)
    with pytest.raises(ex_mod.ApplyError) as caught:
        zs.apply_zram([swap("a"), swap("b"), swap("c")], ex, Journal(str(host / "j")), "run1", SETTINGS)
    assert "failed at its step 'swapon'" in str(caught.value) and "Operation not permitted" in str(caught.value)
    assert host_state(kernel) == before


# Undo reads the host first ------------------------------------------------------------------------------------

def test_each_undo_is_safe_when_its_step_never_ran(host):
    ex = Executor(FakeKernel())
    args = {"device": "zram4", "priority": 100, "writes": [["disksize", 1]], "old": None, "src": "/dev/zram4",
            "line": None}
    for name in ("zram_add", "zram_set", "mkswap", "mkfs", "swapon", "swapoff", "zram_remove", "swap_fstab"):
        assert ex.undo(name, args, {}, True) is True
    assert ex.calls == [] and open(paths.FSTAB).read() == FSTAB


def test_the_device_hot_add_gave_instead_of_the_planned_one_is_given_back(host):
    kernel = FakeKernel()
    ex = Executor(kernel)
    kernel.hot_add()  # something else took zram0 after the plan
    with pytest.raises(ex_mod.StepError, match="exists already"):
        ex.do("zram_add", {"device": "zram0"})
    kernel.devices.clear()
    kernel.hot_add()
    del kernel.devices["zram0"]
    kernel.devices["zram1"] = {"disksize": 0, "algorithm": "lzo-rle", "mem_limit": 0}
    real = kernel.hot_add
    kernel.hot_add = lambda: (kernel.devices.__setitem__("zram0", {"disksize": 0, "algorithm": "x", "mem_limit": 0}),
                              real())[1]  # another user takes zram0 in the same instant
    with pytest.raises(ex_mod.StepError, match="hot_add gave zram2, not zram0"):
        ex.do("zram_add", {"device": "zram0"})
    assert "zram2" not in kernel.devices


# Recovery -----------------------------------------------------------------------------------------------------

def reset_host():
    """/etc as before any run: the fstab of the fixture, nothing else."""
    for here, _dirs, names in os.walk(os.path.dirname(paths.FSTAB)):
        for name in names:
            os.unlink(os.path.join(here, name))
    if os.path.exists(paths.ZRAM_SETUP):
        os.unlink(paths.ZRAM_SETUP)
    with open(paths.FSTAB, "w") as handle:
        handle.write(FSTAB)


@pytest.mark.parametrize("entries", [[swap("a", algorithm="lz4")], [swap("a"), swap("b", mem_limit_bytes=MIB)]],
                         ids=["one swap", "two swaps"])
def test_a_run_killed_at_every_journal_write_is_recovered_to_the_state_of_a_whole_run(host, entries):
    counting = DyingJournal(str(host / "count.jsonl"), kill_at=10 ** 6)
    whole = FakeKernel()
    zs.apply_zram(entries, Executor(whole), counting, "run1", SETTINGS)
    reference = host_state(whole)
    writes = counting.writes
    # The first transaction: txn, begin and done of its 10 steps, forward, close.
    assert writes >= 23 + 2 * 7 * (len(entries) - 1)
    for kill_at in range(1, writes + 1):
        reset_host()
        kernel = FakeKernel()
        journal = DyingJournal(str(host / "journal.jsonl"), kill_at)
        with pytest.raises(Killed):
            zs.apply_zram(entries, Executor(kernel), journal, "run1", SETTINGS)
        journal.close()
        # The next run: recovery (as ramdisk_plan and ramdisk_apply do first), then the run itself.
        ex = Executor(kernel)
        # A kill at a transaction's first line leaves it unwritten, and the ones before it whole.
        ex_mod.recover(ex, Journal(str(host / "journal.jsonl")))
        unaccounted = set(kernel.devices) - set(known_from_records().values())
        assert not unaccounted, (kill_at, unaccounted)
        zs.apply_zram(entries, Executor(kernel), Journal(str(host / "journal.jsonl")), "run2",
                      dict(SETTINGS, known=known_from_records()))
        assert host_state(kernel) == reference, kill_at
        assert not os.path.exists(str(host / "journal.jsonl"))


def test_after_a_reboot_a_run_past_its_pivot_writes_its_files_and_touches_no_device(host):
    kernel = FakeKernel()
    entries = [swap("a")]
    steps = zs.build_zram(entries[0], Executor(FakeKernel()), SETTINGS, set())[0]
    pivot = [step["step"] for step in steps].index("swapon")
    journal = DyingJournal(str(host / "journal.jsonl"), kill_at=2 + 2 * (pivot + 1) + 1 + 1)
    with pytest.raises(Killed):
        zs.apply_zram(entries, Executor(kernel), journal, "run1", SETTINGS)
    journal.close()
    rebooted = FakeKernel()  # the devices and swaps are gone
    ex = Executor(rebooted, boot="boot-2")
    report = ex_mod.recover(ex, Journal(str(host / "journal.jsonl")))
    assert report[0]["way"] == "forward" and report[0]["boot"] == "earlier"
    assert rebooted.devices == {} and not any(call.startswith(("swap", "mkswap")) for call in ex.calls)
    assert "DEVICE=zram0" in open(paths.zram_record_file("a")).read()
    assert "/dev/zram0 none swap" in open(paths.FSTAB).read()


def test_after_a_reboot_a_run_before_its_pivot_is_undone_without_touching_devices(host):
    kernel = FakeKernel()
    journal = DyingJournal(str(host / "journal.jsonl"), kill_at=5)  # zram_add and zram_set done, mkswap begun
    with pytest.raises(Killed):
        zs.apply_zram([swap("a")], Executor(kernel), journal, "run1", SETTINGS)
    journal.close()
    rebooted = FakeKernel()
    rebooted.hot_add()  # zram0 now belongs to someone else: left alone
    ex = Executor(rebooted, boot="boot-2")
    report = ex_mod.recover(ex, Journal(str(host / "journal.jsonl")))
    assert report[0]["way"] == "back" and "zram0" in rebooted.devices
    assert open(paths.FSTAB).read() == FSTAB


def filesystem(name="build", path="/srv/zram-unit-test", **changes):
    entry = swap(name, use="filesystem", priority=None, fstype="ext4", mkfs_options=["-m", "0"])
    mount = {"path": path, "path_given": path, "label": "zram_devices[0]", "state": "mounted", "action": "mount",
             "fstype": "ext4", "src": None, "options": ["discard", "nosuid", "nodev", "nofail",
                                                        "x-systemd.requires=%s" % unit_name(name), "x-systemd.makefs"],
             "remount_options": [], "mode": "0755", "owner": None, "group": None, "migrate": False, "persist": None}
    mount.update(changes)
    entry["mount"] = mount
    return entry


def test_a_file_system_device_its_mkfs_and_its_mount_are_one_transaction_with_the_mount_as_pivot(host):
    ex = Executor(FakeKernel())
    steps, pivot, info = zs.build_zram(filesystem(), ex, SETTINGS, set())
    names = [step["step"] for step in steps]
    assert names[:5] == ["zram_add", "zram_set", "mkfs", "mkdir", "mount"] and pivot == 4
    assert steps[pivot]["args"]["src"] == "/dev/zram0"
    assert steps[2]["args"]["options"] == ["-m", "0"]
    fstab = [step for step in steps if step["step"] == "fstab"][0]["args"]["line"]
    assert fstab[:3] == ["/dev/zram0", "/srv/zram-unit-test", "ext4"]
    assert all(name not in zs.LIVE_STEPS + ("mount", "root") for name in names[pivot + 2:])
    assert info["mount"] is None  # the mount is in the transaction, not left to the mount role


def test_with_persist_only_the_device_is_here_and_its_mount_goes_to_the_mount_role(host):
    ex = Executor(FakeKernel())
    steps, pivot, info = zs.build_zram(filesystem(persist={"backing": "/var/lib/x"}), ex, SETTINGS, set())
    assert [step["step"] for step in steps][:3] == ["zram_add", "zram_set", "mkfs"] and "mount" not in [
        step["step"] for step in steps]
    assert info["mount"]["src"] == "/dev/zram0" and pivot is None


def test_with_zram_generator_the_mount_waits_for_its_setup_unit_and_the_drop_in_is_written(host):
    ex = Executor(FakeKernel())
    settings = dict(SETTINGS, persistence="generator")
    steps, pivot, info = zs.build_zram(filesystem(), ex, settings, set())
    fstab = [step for step in steps if step["step"] == "fstab"][0]["args"]["line"]
    assert "x-systemd.requires=systemd-zram-setup@zram0.service" in fstab[3]
    dropin = [step for step in steps if step["step"] == "file" and "zram-generator" in step["args"]["file"]][0]
    assert "[zram0]" in dropin["args"]["text"] and "fs-type = ext4" in dropin["args"]["text"]


def test_a_migrated_directory_keeps_the_owner_and_mode_its_entry_leaves_unset(host):
    data = host / "data"
    os.makedirs(str(data))
    os.chown(str(data), 4242, 4343)
    os.chmod(str(data), 0o2750)
    ex = Executor(FakeKernel())
    entry = filesystem(path=str(data), action="migrate", migrate=True, root_keep=["mode", "owner", "group"])
    steps, pivot, _info = zs.build_zram(entry, ex, SETTINGS, set())
    root = [step["args"] for step in steps if step["step"] == "root"][0]
    assert (root["mode"], root["owner"], root["group"]) == ("2750", "4242", "4343")
    assert steps[pivot]["step"] == "move"
    # What the entry sets, it keeps.
    steps, _pivot, _info = zs.build_zram(dict(entry, mount=dict(entry["mount"], root_keep=["group"])), ex, SETTINGS,
                                         set())
    root = [step["args"] for step in steps if step["step"] == "root"][0]
    assert (root["mode"], root["owner"], root["group"]) == ("0755", None, "4343")


def test_a_directory_the_run_makes_gets_the_root_a_second_run_finds(host):
    # The VM's molecule scenario: /srv/zram did not exist; the second run found it 0755 root's and changed the record.
    missing = host / "made"
    kept = zs._kept_root({"path": str(missing), "root_keep": ["mode", "owner", "group"]})
    os.makedirs(str(missing), 0o755)
    os.chmod(str(missing), 0o755)
    found = zs._kept_root({"path": str(missing), "root_keep": ["mode", "owner", "group"]})
    assert (kept["mode"], kept["owner"], kept["group"]) == (found["mode"], found["owner"], found["group"]) \
        == ("0755", "0", "0")
