"""brd and zram through their roles in the VM, read again after a real reboot."""

from __future__ import annotations

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
