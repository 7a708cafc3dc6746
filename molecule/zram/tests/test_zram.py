"""Real zram state in the containers after converge, read again after a restart.

The devices are the host kernel's, so a container restart is not a reboot, and this is what it shows:
- the kernel keeps every zram device, and keeps the swap on: systemd has no swap units in a container and
  does not turn swap off when the container stops. The role's boot unit finds the swap device in use and
  set up as configured, and leaves it as it is.
- the file system's device is free once the container's mounts went with it: the boot unit resets it and
  sizes it again, empty as after a boot. But systemd never sees a block device appear in a container (no
  udev), so neither systemd-makefs nor the fstab mount runs: the mount stays away (nofail, see converge.yml).
molecule/vm shows a real reboot, where both come back.
"""

from __future__ import annotations

import os
from pathlib import Path

from ramstate import findmnt, option, restarted

MIB = 1024 * 1024
PATH = "/var/cache/zram-test"
RECORDS = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).resolve().parents[3])) / ".cache" / "molecule-zram"


def record(text):
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))


def device_of(host, name):
    return record(host.file("/etc/ramdisk-provision/zram/%s.conf" % name).content_string)["DEVICE"]


def sysfs(host, device, attr):
    return host.file("/sys/block/%s/%s" % (device, attr)).content_string.strip()


def selected_algorithm(host, device):
    return [word[1:-1] for word in sysfs(host, device, "comp_algorithm").split() if word.startswith("[")][0]


def swaps(host):
    """/proc/swaps by device name: a swap turned on in a container that has since restarted shows as /zramN."""
    entries = {}
    for line in host.file("/proc/swaps").content_string.splitlines()[1:]:
        path, _kind, size_kib, used_kib, priority = line.split()
        entries[path.rsplit("/", 1)[1]] = {"path": path, "size_kib": int(size_kib), "priority": int(priority)}
    return entries


def unit_state(host, unit):
    out = host.check_output("systemctl show -p ActiveState -p Result %s", unit)
    return dict(line.split("=", 1) for line in out.splitlines())


def fstab_line(host, source):
    for line in host.file("/etc/fstab").content_string.splitlines():
        fields = line.split()
        if fields and fields[0] == source:
            return fields
    return None


def test_containers_got_distinct_devices():
    # Both containers drive the host's one zram; each record names the device its entry got.
    # Only this scenario's containers: the metrics scenario keeps its records beside them (debian12-metrics).
    devices = [record(path.read_text())["DEVICE"] for path in sorted(RECORDS.glob("*-zram/*.conf"))]
    assert len(devices) == 4, devices
    assert len(set(devices)) == len(devices), devices


def test_swap_is_on_with_its_size_algorithm_and_priority(host):
    device = device_of(host, "swap")
    assert int(sysfs(host, device, "disksize")) == 72 * MIB
    assert selected_algorithm(host, device) == "lz4"
    swap = swaps(host).get(device)
    assert swap is not None, host.file("/proc/swaps").content_string
    assert swap["priority"] == 100
    # mkswap keeps one page for its header.
    assert swap["size_kib"] * 1024 == 72 * MIB - 4096


def test_swap_is_persisted_by_the_boot_unit_and_fstab(host):
    device = device_of(host, "swap")
    assert fstab_line(host, "/dev/" + device)[1:4] == [
        "none", "swap", "pri=100,x-systemd.requires=ramdisk-zram@swap.service,x-systemd.makefs"]
    assert host.service("ramdisk-zram@swap.service").is_enabled
    # systemd makes no swap units in a container: the kernel, not systemd, keeps this swap on.
    assert host.run("systemctl list-units --type swap --all --no-legend --plain").stdout.strip() == ""
    if restarted(host):
        assert unit_state(host, "ramdisk-zram@swap.service") == {"ActiveState": "active", "Result": "success"}
        log = host.run("journalctl -b -u ramdisk-zram@swap.service --no-pager -o cat")
        assert "%s is in use and already set up as configured; left as it is" % device in log.stdout, log.stdout


def test_file_system_device_has_its_size_and_algorithm(host):
    device = device_of(host, "cache")
    assert int(sysfs(host, device, "disksize")) == 88 * MIB
    assert selected_algorithm(host, device) == "lzo"
    fields = fstab_line(host, "/dev/" + device)
    assert fields[1:3] == [PATH, "ext4"]
    assert fields[3].split(",") == ["discard", "nosuid", "nodev", "nofail", "x-systemd.device-timeout=10s",
                                    "x-systemd.before=local-fs.target",
                                    "x-systemd.requires=ramdisk-zram@cache.service", "x-systemd.makefs"]
    assert host.service("ramdisk-zram@cache.service").is_enabled


def test_file_system_is_mounted_with_owner_mode_and_migrated_data(host):
    if restarted(host):
        return
    device = device_of(host, "cache")
    mnt = findmnt(host, PATH)
    assert mnt is not None and mnt["source"] == "/dev/" + device and mnt["fstype"] == "ext4"
    for flag in ("discard", "nosuid", "nodev"):
        assert option(mnt, flag), flag
    # ext4 keeps its journal and inode tables out of the size it reports.
    assert 76 * MIB <= int(mnt["size"]) <= 88 * MIB
    root = host.file(PATH)
    assert root.user == "builder" and root.group == "builder" and root.mode == 0o750
    check = host.run("cd %s && sha256sum --strict -c /root/zram-test.sha256" % PATH)
    assert check.rc == 0, check.stdout + check.stderr
    blob = host.file(PATH + "/objects/blob")
    assert blob.user == "builder" and blob.mode == 0o600


def test_disk_copy_under_the_mount_is_untouched(host):
    # Seen through a private, non-recursive bind of / that shows what lies under the zram file system.
    out = host.run(
        "mkdir -p /run/ramdisk-test/lower && mount --bind / /run/ramdisk-test/lower && "
        "mount --make-private /run/ramdisk-test/lower && "
        "cd /run/ramdisk-test/lower%s && sha256sum --strict -c /root/zram-test.sha256; "
        "rc=$?; cd /; umount /run/ramdisk-test/lower; exit $rc" % PATH
    )
    assert out.rc == 0, out.stdout + out.stderr


def test_restart_made_the_file_system_device_anew(host):
    if not restarted(host):
        return
    device = device_of(host, "cache")
    assert unit_state(host, "ramdisk-zram@cache.service") == {"ActiveState": "active", "Result": "success"}
    # The boot unit reset the device and sized it again: nothing on it, as after a boot.
    assert host.run("blkid -p /dev/%s" % device).rc == 2
    assert findmnt(host, PATH) is None
