"""After every bad request: nothing of the role's is on the host."""

from __future__ import annotations

from ramstate import findmnt


def test_no_mount_was_made(host):
    for path in ("/srv/x", "/srv/full", "/srv/a", "/srv/b"):
        assert findmnt(host, path) is None, path


def test_fstab_has_no_tmpfs_line(host):
    fstab = host.file("/etc/fstab").content_string
    assert "tmpfs" not in fstab
    assert not host.file("/etc/systemd/system/tmp.mount.d").exists


def test_data_on_disk_is_visible(host):
    assert host.file("/srv/full/data.txt").content_string == "must stay visible\n"
