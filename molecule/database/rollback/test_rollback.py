"""After state: absent, and again after a restart: no tmpfs, no persist, every row back on disk."""

from __future__ import annotations

from pg import BACKING, DATADIR, ON_DISK, PATH, ROWS, ROWS_SUM, SERVICE, TOKEN, UNITS, psql, systemctl
from ramstate import findmnt


def test_tmpfs_is_gone(host):
    assert findmnt(host, PATH) is None
    assert " %s " % PATH not in host.file("/etc/fstab").content_string


def test_persist_is_gone(host):
    for unit in UNITS:
        assert not host.file("/etc/systemd/system/%s" % unit).exists, unit
    assert not host.file("/etc/ramdisk-provision/persist/%s.conf" % TOKEN).exists
    assert not host.file("/usr/local/libexec/ramdisk-provision/persist").exists
    assert not host.file(BACKING).exists
    assert not host.file("/etc/systemd/system/%s.requires" % SERVICE).exists


def test_postgresql_runs_from_disk_with_every_row(host):
    assert systemctl(host, "is-active", SERVICE) == "active"
    assert psql(host, "SHOW data_directory") == DATADIR
    assert host.run("findmnt -n -o TARGET -T %s", DATADIR).stdout.strip() == "/"
    # Written in RAM after the first run: the rollback returned them to the directory on disk.
    assert psql(host, "SELECT count(*) || ' ' || sum(id) FROM in_ram") == "%d %d" % (ROWS, ROWS_SUM)
    assert psql(host, "SELECT count(*) FROM on_disk") == str(ON_DISK)


def test_data_directory_belongs_to_postgres(host):
    datadir = host.file(DATADIR)
    assert datadir.user == "postgres" and datadir.mode == 0o700
    assert not host.file("%s/lost+found" % PATH).exists
