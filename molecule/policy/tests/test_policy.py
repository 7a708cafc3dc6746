"""Real state after the group policies are applied, read again after the instance restarts."""

from __future__ import annotations

from ramstate import findmnt, memtotal, option, restarted

MIB = 1024 ** 2


def builder(host):
    return "debian13" in host.backend.get_hostname()


def test_tmp_is_gated_tmpfs_with_its_purpose_defaults(host):
    mnt = findmnt(host, "/tmp")
    assert mnt is not None and mnt["fstype"] == "tmpfs"
    assert option(mnt, "nosuid") and option(mnt, "nodev") and not option(mnt, "noexec")
    assert abs(int(mnt["size"]) - memtotal(host) // 2) <= memtotal(host) // 100
    assert host.file("/tmp").mode == 0o1777
    if not restarted(host):
        # Migrated in; after a restart /tmp starts empty, as a tmpfs /tmp does.
        assert host.file("/tmp/keep-me.txt").content_string == "still here\n"


def test_build_tree_only_on_the_builders_host_with_exec_and_its_owner(host):
    mnt = findmnt(host, "/var/cache/lab-build")
    if not builder(host):
        assert mnt is None
        return
    assert mnt is not None and mnt["fstype"] == "tmpfs"
    assert option(mnt, "nosuid") and option(mnt, "nodev") and option(mnt, "noatime")
    assert not option(mnt, "noexec")
    root = host.file("/var/cache/lab-build")
    assert root.user == "builder" and root.group == "builder" and root.mode == 0o755
    check = host.run("cd /var/cache/lab-build && sha256sum --strict -c /root/build.sha256")
    assert check.rc == 0, check.stdout + check.stderr
    ran = host.run("/var/cache/lab-build/run.sh")
    assert ran.rc == 0 and ran.stdout.strip() == "built"


def test_cache_policy_on_both_hosts_is_data_only(host):
    web = findmnt(host, "/var/cache/lab-web")
    assert web is not None and web["fstype"] == "tmpfs" and int(web["size"]) == 256 * MIB
    for flag in ("nosuid", "nodev", "noexec"):
        assert option(web, flag), flag
    locks = findmnt(host, "/var/cache/lab-locks")
    assert locks is not None and locks["fstype"] == "ramfs"
    for flag in ("nosuid", "nodev", "noexec"):
        assert option(locks, flag), flag
    assert host.file("/var/cache/lab-locks").mode == 0o750


def test_every_policy_mount_is_in_fstab_or_the_tmp_unit(host):
    fstab = [line.split() for line in host.file("/etc/fstab").content_string.splitlines()
             if line.strip() and not line.startswith("#")]
    targets = {fields[1] for fields in fstab if len(fields) > 1}
    expected = {"/var/cache/lab-web", "/var/cache/lab-locks"} | ({"/var/cache/lab-build"} if builder(host) else set())
    assert expected <= targets
