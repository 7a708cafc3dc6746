# SPDX-License-Identifier: GPL-3.0-or-later
"""Run zram_device for real against this machine's kernel.

Skipped where zram cannot be driven (no /sys/class/zram-control, /sys read-only, not root). The devices are
the host's: the ``zram`` fixture removes every device these tests made, swap and mounts included, also when
a test fails, and never touches a device that existed before the test. The kernel may be shared with other work,
so no test lets device=auto change anything: auto takes the first free device, which may be another's that it
has just made and not yet set up (the module's documentation says so). A test sets up a device it made itself
(hot_add); auto runs only in check mode or where it fails before any change.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys

import pytest

import ansible_collections.ramdisk.provision.plugins.modules.zram_device as module_under_test
from ansible_collections.ramdisk.provision.plugins.module_utils._procfs import parse_mountinfo, parse_swaps
from ansible_collections.ramdisk.provision.plugins.module_utils._zram import ALGORITHM_PREFERENCE, parse_mm_stat

MODULE_NAME = module_under_test.__name__
CONTROL = "/sys/class/zram-control"
MIB = 1024 ** 2


def _why_not_usable():
    if not os.path.isdir(CONTROL):
        return "no %s: zram is not loaded here, or /sys is not the host's" % CONTROL
    if os.geteuid() != 0:
        return "zram needs root"
    if os.statvfs(CONTROL).f_flag & os.ST_RDONLY or not os.access(os.path.join(CONTROL, "hot_remove"), os.W_OK):
        return "%s is not writable (read-only /sys)" % CONTROL
    return None


def _read(path):
    with open(path) as handle:
        return handle.read()


def _write(path, value):
    with open(path, "w") as handle:
        handle.write(str(value))


def _names():
    return set(name for name in os.listdir("/sys/block") if name.startswith("zram"))


def _swaps():
    return {entry["path"]: entry for entry in parse_swaps(_read("/proc/swaps"))}


def _mountpoints(device):
    return [mount["mount_point"] for mount in parse_mountinfo(_read("/proc/self/mountinfo"))
            if mount["source"] == "/dev/" + device]


def _sys(device, attr):
    return _read("/sys/block/%s/%s" % (device, attr)).strip()


class Zram(object):
    """Runs the module and remembers every device it reported that was not there before."""

    def __init__(self, tmp_path):
        self.tmp_path = tmp_path
        self.before = _names()
        self.made = []
        self.runs = 0

    def run(self, check=False, diff=False, **args):
        self.runs += 1
        args.update(_ansible_check_mode=check, _ansible_diff=diff)
        args_file = self.tmp_path / ("args%d.json" % self.runs)
        args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        proc = subprocess.run([sys.executable, "-m", MODULE_NAME, str(args_file)], capture_output=True, text=True,
                              env=env, timeout=120, check=False)
        result = json.loads(proc.stdout)
        device = result.get("device")
        if device and device not in self.before and device not in self.made and not check:
            self.made.append(device)
        return result

    def cleanup(self):
        leftovers = []
        for device in self.made:
            if not os.path.exists("/sys/block/" + device):
                continue
            for point in _mountpoints(device):
                subprocess.run(["umount", point], check=False)
            if "/dev/" + device in _swaps():
                subprocess.run(["swapoff", "/dev/" + device], check=False)
            try:
                # As the module does: a moment's EBUSY after the unmount is tried again.
                module_under_test._write_when_free("/sys/block/%s/reset" % device, 1)
                module_under_test._write_when_free(CONTROL + "/hot_remove", device[len("zram"):])
            except OSError as exc:
                leftovers.append("%s (%s)" % (device, exc))
        assert not leftovers, "could not remove zram devices these tests made: %s" % ", ".join(leftovers)


@pytest.fixture
def zram(tmp_path):
    reason = _why_not_usable()
    if reason:
        pytest.skip(reason)
    helper = Zram(tmp_path)
    yield helper
    helper.cleanup()


def _ok(result):
    assert result.get("failed") is not True, result
    return result


def _hot_add(zram):
    """A new device of this test's own (reading hot_add makes one and gives its number), removed at the end."""
    device = "zram%d" % int(_read(CONTROL + "/hot_add").strip())
    zram.made.append(device)
    return device


def _create(zram, **extra):
    device = _hot_add(zram)
    result = _ok(zram.run(device=device, size="64M", algorithm="lz4", **extra))
    assert result["changed"] is True and result["action"] == "configure" and result["device"] == device
    return device


def test_create_idempotent_reconfigure_and_remove(zram):
    planned = _ok(zram.run(check=True, diff=True, device="auto", size="64M", algorithm="lz4"))
    assert planned["changed"] is True and planned["action"] in ("create", "configure")
    assert planned["diff"]["after"] == {"state": "present", "disksize_bytes": 64 * MIB, "algorithm": "lz4",
                                        "mem_limit_bytes": 0}

    device = _hot_add(zram)
    made = _ok(zram.run(diff=True, device=device, size="64M", algorithm="lz4"))
    assert made["device"] == device and made["action"] == "configure"
    assert made["changed"] is True and made["device_path"] == "/dev/" + device
    assert _sys(device, "disksize") == str(64 * MIB)
    assert "[lz4]" in _sys(device, "comp_algorithm")
    assert os.path.exists("/dev/" + device)
    assert made["disksize_bytes"] == 64 * MIB and made["algorithm"] == "lz4" and made["used_as"] == "unused"
    assert "lz4" in made["algorithms_offered"] and made["reboot_required"] is False
    assert made["diff"]["after"]["disksize_bytes"] == 64 * MIB

    again = _ok(zram.run(device=device, size="64M", algorithm="lz4"))
    assert again["changed"] is False and again["action"] == "ok" and again["changes"] == {}

    # Data in, mm_stat and the ratio out.
    fd = os.open("/dev/" + device, os.O_WRONLY)
    try:
        os.write(fd, b"ramdisk.provision zram test " * 40000)
        os.fsync(fd)
    finally:
        os.close(fd)
    stats = _ok(zram.run(device=device, size="64M"))["mm_stat"]
    assert stats["orig_data_size"] > 0 and stats["compression_ratio"] > 1
    assert stats["mem_limit"] == parse_mm_stat(_sys(device, "mm_stat"))["mem_limit"] == 0

    dry = _ok(zram.run(check=True, device=device, size="128M"))
    assert dry["changed"] is True and dry["action"] == "reset-then-configure"
    assert _sys(device, "disksize") == str(64 * MIB)

    # Unused but initialised: reset and set up again; the algorithm not asked for is kept.
    resized = _ok(zram.run(device=device, size="128M"))
    assert resized["changed"] is True and resized["action"] == "reset-then-configure"
    assert _sys(device, "disksize") == str(128 * MIB) and "[lz4]" in _sys(device, "comp_algorithm")
    assert resized["changes"] == {"disksize": [64 * MIB, 128 * MIB]}

    # mem_limit changes live, without a reset.
    limited = _ok(zram.run(device=device, size="128M", mem_limit="32M"))
    assert limited["action"] == "configure" and limited["mem_limit_bytes"] == 32 * MIB
    assert parse_mm_stat(_sys(device, "mm_stat"))["mem_limit"] == 32 * MIB
    assert _ok(zram.run(device=device, size="128M", mem_limit="32M"))["changed"] is False
    # A reset for a new algorithm keeps the limit in force.
    relzo = _ok(zram.run(device=device, size="128M", algorithm="lzo"))
    assert relzo["action"] == "reset-then-configure" and relzo["mem_limit_bytes"] == 32 * MIB
    assert "[lzo]" in _sys(device, "comp_algorithm")

    planned_removal = _ok(zram.run(check=True, diff=True, device=device, state="absent"))
    assert planned_removal["changed"] is True and planned_removal["diff"]["after"] == {"state": "absent"}
    assert os.path.exists("/sys/block/" + device)
    removed = _ok(zram.run(device=device, state="absent"))
    assert removed["changed"] is True and removed["action"] == "remove"
    assert not os.path.exists("/sys/block/" + device)
    gone = _ok(zram.run(device=device, state="absent"))
    assert gone["changed"] is False and gone["action"] == "absent"


def test_algorithm_not_offered(zram):
    failed = zram.run(device="auto", size="64M", algorithm="no-such-algo")
    assert failed["failed"] is True
    offered = failed["algorithms_offered"]
    assert offered
    assert "'no-such-algo'" in failed["msg"] and ", ".join(offered) in failed["msg"]
    # A device made for this run is not left behind.
    if failed["device"] not in zram.before:
        assert not os.path.exists("/sys/block/%s" % failed["device"])

    fallback = _ok(zram.run(device=_hot_add(zram), size="64M", algorithm="no-such-algo",
                            allow_algorithm_fallback=True))
    best = [name for name in ALGORITHM_PREFERENCE if name in offered][0]
    assert fallback["algorithm"] == best and "[%s]" % best in _sys(fallback["device"], "comp_algorithm")
    # ansible-core 2.19 returns warnings as structured events; older ones as strings.
    assert "zram algorithm 'no-such-algo' is not offered" in json.dumps(fallback.get("warnings", []))


def test_active_swap_is_cycled_only_when_allowed(zram):
    device = _create(zram)
    path = "/dev/" + device
    subprocess.run(["mkswap", path], check=True, capture_output=True)
    subprocess.run(["swapon", "-p", "7", path], check=True)
    assert _swaps()[path]["priority"] == 7

    report = _ok(zram.run(device=device, size="96M", algorithm="lz4"))
    # This machine has far more than 256 MiB available and the swap holds nearly nothing.
    assert report["action"] == "cycle-swap" and report["changed"] is False
    assert report["reboot_required"] is True and "allow_swap_cycle" in report["reason"]
    assert report["used_as"] == "swap" and report["swap_priority"] == 7 and report["swap_cycled"] is False
    assert path in _swaps() and _sys(device, "disksize") == str(64 * MIB)

    dry = _ok(zram.run(check=True, device=device, size="96M", algorithm="lz4", allow_swap_cycle=True))
    assert dry["changed"] is True and dry["action"] == "cycle-swap" and path in _swaps()

    cycled = _ok(zram.run(device=device, size="96M", algorithm="lz4", allow_swap_cycle=True))
    assert cycled["changed"] is True and cycled["swap_cycled"] is True and cycled["swap_priority"] == 7
    assert cycled["reboot_required"] is False
    assert path not in _swaps() and _sys(device, "disksize") == str(96 * MIB)
    assert "[lz4]" in _sys(device, "comp_algorithm")

    # The caller's part: mkswap and swapon with the priority handed back.
    subprocess.run(["mkswap", path], check=True, capture_output=True)
    subprocess.run(["swapon", "-p", str(cycled["swap_priority"]), path], check=True)
    refused = zram.run(device=device, state="absent")
    assert refused["failed"] is True and "active swap" in refused["msg"] and "swapoff" in refused["msg"]
    assert os.path.exists("/sys/block/" + device)
    subprocess.run(["swapoff", path], check=True)
    assert _ok(zram.run(device=device, state="absent"))["changed"] is True
    assert not os.path.exists("/sys/block/" + device)


def test_mounted_filesystem_is_never_reset(zram, tmp_path):
    device = _create(zram)
    path = "/dev/" + device
    subprocess.run(["mkfs.ext4", "-q", path], check=True, capture_output=True)
    point = tmp_path / "mnt"
    point.mkdir()
    subprocess.run(["mount", path, str(point)], check=True)
    (point / "data").write_text("kept")

    report = _ok(zram.run(device=device, size="96M", algorithm="lz4", allow_swap_cycle=True))
    assert report["action"] == "reboot-required" and report["changed"] is False and report["reboot_required"] is True
    assert str(point) in report["reason"] and "never reset" in report["reason"]
    assert report["used_as"] == "filesystem"
    assert (point / "data").read_text() == "kept" and _sys(device, "disksize") == str(64 * MIB)

    refused = zram.run(device=device, state="absent")
    assert refused["failed"] is True and "mounted at %s" % point in refused["msg"]
    subprocess.run(["umount", str(point)], check=True)
    assert _ok(zram.run(device=device, state="absent"))["changed"] is True


@pytest.mark.parametrize(
    "args, words",
    [
        (dict(device="sda", size="64M"), ["'sda'", "zramN"]),
        (dict(device="auto", size="10X"), ["size is '10X'", "unknown unit"]),
        (dict(device="auto", size="64M", mem_limit="lots"), ["mem_limit is 'lots'"]),
        (dict(device="auto", state="absent"), ["auto", "give its name"]),
        (dict(device="zram4095", size="64M"), ["zram4095 does not exist", "device: auto"]),
        (dict(device="auto"), ["size"]),
    ],
)
def test_bad_input_fails_clearly(zram, args, words):
    result = zram.run(**args)
    assert result["failed"] is True
    for word in words:
        assert word in result["msg"]
    # A failed run leaves no device of its own behind.
    assert not [device for device in zram.made if os.path.exists("/sys/block/" + device)]


def test_a_moment_of_ebusy_is_waited_out(monkeypatch):
    calls = []

    def busy_twice(path, value):
        calls.append((path, value))
        if len(calls) < 3:
            raise OSError(errno.EBUSY, "Device or resource busy")

    monkeypatch.setattr(module_under_test, "_write", busy_twice)
    monkeypatch.setattr(module_under_test, "BUSY_RETRY_PAUSE", 0.01)
    module_under_test._write_when_free("/sys/block/zram9/reset", 1)
    assert calls == [("/sys/block/zram9/reset", 1)] * 3


def test_a_device_held_open_is_still_refused(monkeypatch):
    def always(errno_value):
        def write(path, value):
            raise OSError(errno_value, os.strerror(errno_value))
        return write

    monkeypatch.setattr(module_under_test, "BUSY_RETRY_SECONDS", 0.05)
    monkeypatch.setattr(module_under_test, "BUSY_RETRY_PAUSE", 0.01)
    monkeypatch.setattr(module_under_test, "_write", always(errno.EBUSY))
    with pytest.raises(OSError) as busy:
        module_under_test._write_when_free("/sys/block/zram9/reset", 1)
    assert busy.value.errno == errno.EBUSY
    # Other errors are not tried again.
    monkeypatch.setattr(module_under_test, "BUSY_RETRY_SECONDS", 60)
    monkeypatch.setattr(module_under_test, "_write", always(errno.EINVAL))
    with pytest.raises(OSError) as invalid:
        module_under_test._write_when_free("/sys/block/zram9/reset", 1)
    assert invalid.value.errno == errno.EINVAL
