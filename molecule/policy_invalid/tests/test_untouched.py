"""After every invalid policy, and after a restart: nothing of the roles' is on the host."""

from __future__ import annotations

from ramstate import findmnt

# Mount points the cases name that are plain directories of our own (system paths are mounted anyway).
CASE_PATHS = (
    "/srv/build", "/srv/build/ccache", "/srv/cache", "/srv/ramcache", "/srv/shared", "/srv/scratch", "/srv/pgdata",
    "/srv/zcache", "/srv/ram0", "/srv/ram1", "/srv/full", "/srv/big", "/srv/www",
)


def test_no_mount_was_made(host):
    for path in CASE_PATHS:
        assert findmnt(host, path) is None, path
        # Only the prepared data directories exist; no case created a mount point.
        assert host.file(path).exists == (path in ("/srv/full", "/srv/big")), path


def test_run_lock_is_still_the_container_tmpfs(host):
    assert findmnt(host, "/run/lock")["fstype"] == "tmpfs"


def test_fstab_units_and_helpers_are_untouched(host):
    fstab = host.file("/etc/fstab").content_string
    for word in ("tmpfs", "ramfs", "zram", "/dev/ram"):
        assert word not in fstab, word
    assert not host.file("/etc/systemd/system/tmp.mount.d").exists
    assert not host.file("/etc/ramdisk-provision").exists
    assert not host.file("/usr/local/libexec/ramdisk-provision").exists
    assert not host.file("/var/lib/ramdisk-backing").exists
    units = host.run("find /etc/systemd/system -name 'ramdisk-*' -o -name '*persist*'")
    assert units.stdout == "", units.stdout


def test_data_on_disk_is_visible(host):
    assert host.file("/srv/full/data.txt").content_string == "must stay visible\n"
    assert host.file("/srv/big/blob").size == 2 * 1024 * 1024
    assert host.file("/srv/afile").is_file
