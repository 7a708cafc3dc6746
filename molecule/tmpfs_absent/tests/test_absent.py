"""After state: absent, and again after a restart: no tmpfs of ours, disk data as it was."""

from __future__ import annotations

from ramstate import findmnt


def test_mounts_are_gone(host):
    assert findmnt(host, "/srv/keep") is None
    assert findmnt(host, "/srv/scratch") is None


def test_fstab_and_dropin_are_clean(host):
    fstab = host.file("/etc/fstab").content_string
    for path in ("/tmp", "/srv/keep", "/srv/scratch"):
        assert f" {path} " not in fstab
    assert not host.file("/etc/systemd/system/tmp.mount.d/50-ramdisk-provision.conf").exists


def test_tmp_is_back_to_the_distribution_default(host):
    mnt = findmnt(host, "/tmp")
    if host.file("/usr/lib/systemd/system/tmp.mount").exists:
        # Debian 13 mounts /tmp itself; the role only removed its own drop-in.
        assert mnt is not None and mnt["fstype"] == "tmpfs"
    else:
        assert mnt is None


def test_disk_directories_are_as_they_were(host):
    assert host.file("/srv/keep/on-disk.txt").content_string == "written before the tmpfs\n"
    assert not host.file("/srv/keep/in-ram.txt").exists
    # /srv/scratch did not exist before: the role made it as a mount point, and took it away with the mount.
    assert not host.file("/srv/scratch").exists
    assert host.file("/srv/keep").is_directory
    assert not host.file("/etc/ramdisk-provision/mounts").exists or not host.file(
        "/etc/ramdisk-provision/mounts").listdir()
