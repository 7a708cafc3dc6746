"""Real state after the tmpfs role, read again after the instance restarts."""

from __future__ import annotations

from ramstate import findmnt, memtotal, option, restarted

MIB = 1024 * 1024


def test_tmp_is_tmpfs_with_safe_options(host):
    mnt = findmnt(host, "/tmp")
    assert mnt is not None, "/tmp is not a mount point"
    assert mnt["fstype"] == "tmpfs"
    assert option(mnt, "nosuid") and option(mnt, "nodev")
    assert not option(mnt, "noexec"), "noexec must stay off for /tmp unless asked"
    assert option(mnt, "nr_inodes") == "204800"
    # 25% of RAM, as the kernel rounds it: whole pages of MemTotal.
    pages = memtotal(host) // 4096
    assert int(mnt["size"]) == -(-pages * 25 // 100) * 4096
    tmp = host.file("/tmp")
    assert tmp.mode == 0o1777 and tmp.user == "root" and tmp.group == "root"


def test_tmp_persisted_the_distribution_way(host):
    dropin = host.file("/etc/systemd/system/tmp.mount.d/50-ramdisk-provision.conf")
    fstab = host.file("/etc/fstab").content_string
    if host.file("/usr/lib/systemd/system/tmp.mount").exists:
        assert dropin.exists and "size=25%" in dropin.content_string
        assert " /tmp " not in fstab
    else:
        assert not dropin.exists
        assert any(line.split()[1:3] == ["/tmp", "tmpfs"] for line in fstab.splitlines() if line.strip())


def test_cache_owner_mode_and_flags(host):
    mnt = findmnt(host, "/srv/cache")
    assert mnt["fstype"] == "tmpfs"
    assert int(mnt["size"]) == 64 * MIB
    for flag in ("nosuid", "nodev", "noexec", "noatime"):
        assert option(mnt, flag), flag
    assert option(mnt, "nr_inodes") == "20000"
    cache = host.file("/srv/cache")
    assert cache.user == "builder" and cache.group == "builder" and cache.mode == 0o750


def test_migrated_data_matches_the_disk_copy(host):
    mnt = findmnt(host, "/srv/data")
    assert mnt["fstype"] == "tmpfs" and int(mnt["size"]) == 32 * MIB
    check = host.run("cd /srv/data && sha256sum --strict -c /root/srv-data.sha256")
    assert check.rc == 0, check.stdout + check.stderr
    private = host.file("/srv/data/private")
    assert private.user == "builder" and private.mode == 0o700
    assert host.file("/srv/data/private/secret").mode == 0o600
    assert host.file("/srv/data/link").linked_to == "/srv/data/readme.txt"
    assert host.file("/srv/data/readme.txt").inode == host.file("/srv/data/hardlink").inode
    xattr = host.run("getfattr --only-values -n user.origin /srv/data/readme.txt")
    assert xattr.stdout == "disk"


def test_disk_copy_under_the_mount_is_untouched(host):
    # Seen through a private, non-recursive bind of / that shows what lies under the tmpfs.
    out = host.run(
        "mkdir -p /run/ramdisk-test/lower && mount --bind / /run/ramdisk-test/lower && "
        "mount --make-private /run/ramdisk-test/lower && "
        "cd /run/ramdisk-test/lower/srv/data && sha256sum --strict -c /root/srv-data.sha256; "
        "rc=$?; cd /; umount /run/ramdisk-test/lower; exit $rc"
    )
    assert out.rc == 0, out.stdout + out.stderr


def test_grown_tmpfs_kept_its_contents(host):
    mnt = findmnt(host, "/srv/grow")
    assert mnt["fstype"] == "tmpfs" and int(mnt["size"]) == 48 * MIB
    marker = host.file("/srv/grow/marker")
    if restarted(host):
        # It lived only in RAM and was never migrated: a restart must not conjure it back.
        assert not marker.exists
    else:
        assert marker.content_string == "still here\n"


def test_fstab_entries_are_not_duplicated(host):
    targets = [line.split()[1] for line in host.file("/etc/fstab").content_string.splitlines()
               if line.strip() and not line.lstrip().startswith("#")]
    assert len(targets) == len(set(targets))
