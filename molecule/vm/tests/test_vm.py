"""Real state in the VM after converge, read again after a real reboot."""

from __future__ import annotations

from ramstate import findmnt, memtotal, option

MIB = 1024 * 1024


def test_tmp_is_tmpfs(host):
    mnt = findmnt(host, "/tmp")
    assert mnt is not None, "/tmp is not a mount point"
    assert mnt["fstype"] == "tmpfs"
    assert option(mnt, "nosuid") and option(mnt, "nodev")
    pages = memtotal(host) // 4096
    assert int(mnt["size"]) == -(-pages * 25 // 100) * 4096


def test_migrated_data_is_in_ram(host):
    mnt = findmnt(host, "/srv/data")
    assert mnt is not None and mnt["fstype"] == "tmpfs"
    assert int(mnt["size"]) == 32 * MIB
    # After the reboot the role's boot-time copy has put it there again.
    check = host.run("cd /srv/data && sha256sum --strict -c /root/srv-data.sha256")
    assert check.rc == 0, check.stdout + check.stderr
