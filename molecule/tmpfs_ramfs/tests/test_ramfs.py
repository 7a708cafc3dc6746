"""Real state after the ramfs role, read again after the instance restarts."""

from __future__ import annotations

from ramstate import findmnt, option


def test_cache_is_ramfs_with_owner_mode_and_flags(host):
    mnt = findmnt(host, "/srv/ramfs-cache")
    assert mnt is not None and mnt["fstype"] == "ramfs"
    for flag in ("nosuid", "nodev", "noexec"):
        assert option(mnt, flag), flag
    cache = host.file("/srv/ramfs-cache")
    # ramfs takes no uid=: after a restart only the tmpfiles.d line can have set these.
    assert cache.user == "cacher" and cache.group == "cacher" and cache.mode == 0o750


def test_nothing_but_mode_reaches_the_kernel(host):
    line = [fields for fields in (raw.split() for raw in host.file("/etc/fstab").content_string.splitlines())
            if fields[1:2] == ["/srv/ramfs-cache"]]
    assert line and line[0][2] == "ramfs"
    assert not any(opt.startswith(("size=", "uid=", "gid=")) for opt in line[0][3].split(","))


def test_migrated_data_is_in_ram(host):
    mnt = findmnt(host, "/srv/ramfs-data")
    assert mnt is not None and mnt["fstype"] == "ramfs"
    check = host.run("cd /srv/ramfs-data && sha256sum --strict -c /root/ramfs-data.sha256")
    assert check.rc == 0, check.stdout + check.stderr


def test_facts_read_ramfs_usage_from_the_tree(host):
    written = host.run("printf 'x%.0s' $(seq 1 100000) > /srv/ramfs-cache/blob && sync")
    assert written.rc == 0
    try:
        facts = host.ansible("ramdisk.provision.ramdisk_facts", "paths=/srv/ramfs-cache", check=False,
                             become=True)["ansible_facts"]["ramdisk"]
    finally:
        host.run("rm -f /srv/ramfs-cache/blob")
    (cache,) = [mount for mount in facts["mounts"] if mount["path"] == "/srv/ramfs-cache"]
    assert cache["fstype"] == "ramfs" and cache["usage_from"] == "tree"
    assert cache["used_bytes"] >= 100000
