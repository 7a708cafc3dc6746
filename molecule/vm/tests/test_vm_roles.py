"""brd and zram through their roles in the VM, read again after a real reboot."""

from __future__ import annotations

import pytest
from ramstate import findmnt, option

MIB = 1024 * 1024


def test_brd_has_two_64m_disks_loaded_with_its_options(host):
    assert host.file("/sys/module/brd/parameters/rd_nr").content_string.strip() == "2"
    assert host.file("/sys/module/brd/parameters/rd_size").content_string.strip() == "65536"
    assert int(host.check_output("blockdev --getsize64 /dev/ram1")) == 64 * MIB


def test_brd_disk_is_mounted_with_owner_and_mode(host):
    mnt = findmnt(host, "/srv/brd")
    assert mnt is not None and mnt["source"] == "/dev/ram0" and mnt["fstype"] == "ext4"
    assert option(mnt, "nosuid") and option(mnt, "nodev")
    root = host.file("/srv/brd")
    assert root.user == "nobody" and root.mode == 0o750


def test_zram_swap_is_on_with_priority(host):
    swaps = [line.split() for line in host.file("/proc/swaps").content_string.splitlines()[1:]]
    zram = [fields for fields in swaps if fields[0].startswith("/dev/zram")]
    assert len(zram) == 1, swaps
    path, _kind, size_kib, _used, priority = zram[0]
    assert priority == "100"
    assert int(size_kib) * 1024 >= 120 * MIB
    name = path.rsplit("/", 1)[1]
    assert int(host.file("/sys/block/%s/disksize" % name).content_string) == 128 * MIB


def test_zram_file_system_is_mounted(host):
    mnt = findmnt(host, "/srv/zram")
    assert mnt is not None and mnt["source"].startswith("/dev/zram") and mnt["fstype"] == "ext4"
    assert option(mnt, "discard") and option(mnt, "nosuid")
    name = mnt["source"].rsplit("/", 1)[1]
    assert int(host.file("/sys/block/%s/disksize" % name).content_string) == 96 * MIB
    # ext4 keeps its journal and inode tables out of the size it reports.
    assert 80 * MIB <= int(mnt["size"]) <= 96 * MIB


@pytest.mark.parametrize("path, source", [("/srv/brd-keep", "/dev/ram1"), ("/srv/zram-keep", "/dev/zram")])
def test_a_persisted_brd_or_zram_file_system_keeps_its_data_across_the_reboot(host, path, source):
    """Mounted over the directory it took in, its backing holding a copy; after the reboot, what was written into
    RAM just before it (reboot.yml) is back: written back at shutdown, restored at boot after its device."""
    mnt = findmnt(host, path)
    assert mnt is not None and mnt["source"].startswith(source) and mnt["fstype"] == "ext4", mnt
    assert option(mnt, "nosuid") and option(mnt, "nodev")
    assert host.file(path + "/kept.txt").content_string == "kept on disk by persist\n"
    backing = "/var/lib/ramdisk-test/" + path.rsplit("/", 1)[1]
    assert host.file(backing + "/current/kept.txt").content_string == "kept on disk by persist\n"
    written = host.file("/root/written-before-reboot")
    if written.exists:  # after the side effect's reboot
        assert host.file(path + "/written-before-reboot").content_string == written.content_string
        assert written.content_string.strip() != host.file("/proc/sys/kernel/random/boot_id").content_string.strip()
