"""PostgreSQL on tmpfs with persist: real state after converge, and again after a clean restart."""

from __future__ import annotations

import re

from pg import BACKING, DATADIR, ON_DISK, PATH, ROWS, ROWS_SUM, SERVICE, TOKEN, UNITS, psql, systemctl
from ramstate import findmnt, option, restarted

MIB = 1024 * 1024


def listing(host, path):
    """The names in PATH, hidden ones too (testinfra's listdir leaves those out), sorted."""
    return sorted(host.check_output("ls -A1 %s", path).splitlines())


def test_datadir_is_on_tmpfs(host):
    mnt = findmnt(host, PATH)
    assert mnt is not None, "%s is not a mount point" % PATH
    assert mnt["fstype"] == "tmpfs"
    # The database purpose: nosuid, nodev and noexec, private to postgres.
    assert option(mnt, "nosuid") and option(mnt, "nodev") and option(mnt, "noexec")
    assert int(mnt["size"]) == 512 * MIB
    root = host.file(PATH)
    assert root.user == "postgres" and root.group == "postgres" and root.mode == 0o700
    fstab = [line.split() for line in host.file("/etc/fstab").content_string.splitlines()
             if line.strip() and not line.startswith("#")]
    assert [line[1:3] for line in fstab if line[1] == PATH] == [[PATH, "tmpfs"]]


def test_persist_units_run_and_start_at_boot(host):
    persist, sync, timer = UNITS
    assert systemctl(host, "is-enabled", persist) == "enabled"
    assert systemctl(host, "is-active", persist) == "active"
    assert systemctl(host, "is-active", timer) == "active"
    assert host.file("/etc/systemd/system/%s" % sync).exists
    # The service needs its data: it starts after the restore, and stops before the stop-time sync.
    requires = host.run("systemctl show -p Requires -p After --value %s", SERVICE).stdout
    assert persist in requires
    unit = host.file("/etc/systemd/system/%s" % persist).content_string
    assert unit.startswith("# Written by the ramdisk.provision collection")
    assert "RequiresMountsFor=%s %s" % (PATH, BACKING) in unit
    assert "OnUnitActiveSec=5min" in host.file("/etc/systemd/system/%s" % timer).content_string
    # The backing fills the mount at boot; no seed unit copies the older disk directory in.
    assert not host.file("/etc/systemd/system/ramdisk-seed-%s.service" % TOKEN).exists


def test_postgresql_runs_from_ram(host):
    assert systemctl(host, "is-active", SERVICE) == "active"
    assert psql(host, "SHOW data_directory") == DATADIR
    held_by = host.run("findmnt -n -o TARGET -T %s", DATADIR).stdout.strip()
    assert held_by == PATH


def test_rows_written_in_ram_survive_a_restart(host):
    if not restarted(host):
        psql(host, "DROP TABLE IF EXISTS in_ram; CREATE TABLE in_ram (id integer PRIMARY KEY, note text); "
                   "INSERT INTO in_ram SELECT i, 'written in RAM ' || i FROM generate_series(1, %d) AS i" % ROWS)
    assert psql(host, "SELECT count(*) || ' ' || sum(id) FROM in_ram") == "%d %d" % (ROWS, ROWS_SUM)
    # Adopted from the directory on disk at the first run (prepare.yml wrote it there).
    assert psql(host, "SELECT count(*) FROM on_disk") == str(ON_DISK)


def test_backing_current_is_one_complete_copy(host):
    link = host.file("%s/current" % BACKING)
    assert link.is_symlink
    target = link.linked_to
    assert re.match(r"^%s/snap-\d{8}T\d{6}\.\d+Z$" % re.escape(BACKING), target), target
    # The switch is done: nothing half-written or left over (no copy being made, no sync in place waiting to be
    # rolled forward), and at most persist.keep copies (2 by default: the current one and, once a second sync ran,
    # the one before it: a snapshot, or the reverse delta of a sync in place).
    names = listing(host, BACKING)
    copies = [name for name in names if name.startswith("snap-")]
    delta = listing(host, BACKING + "/.persist-delta") if ".persist-delta" in names else []
    undo = [name for name in delta if name.startswith("undo-")]
    assert names == sorted(["current"] + copies + ([".persist-delta"] if delta else [])), names
    assert not {"commit.json", "rollback.json"} & set(delta), delta
    assert target.rsplit("/", 1)[1] in copies and len(copies) + len(undo) <= 2, (names, delta)
    assert host.file(BACKING).mode == 0o700
    # A PostgreSQL of its own, in single-user mode, reads a scratch copy of the snapshot.
    check = "/var/tmp/ramdisk-test-snapshot"
    host.run("rm -rf %s", check)
    assert host.run("cp -a %s/. %s", target, check).rc == 0
    state = host.run("/usr/lib/postgresql/15/bin/pg_controldata %s/15/main", check).stdout
    # Made while PostgreSQL was stopped, whichever sync made it: the first run's copy, the stop-time sync of the
    # restart, or the timer's (the database purpose's persist.stop_services stops it for the copy).
    assert re.search(r"Database cluster state:\s+shut down", state), state
    sql = "SELECT count(*) FROM on_disk;" + ("SELECT count(*), sum(id) FROM in_ram;" if restarted(host) else "")
    single = host.run(
        "printf '%%s\\n' %s | runuser -u postgres -- /usr/lib/postgresql/15/bin/postgres --single "
        "-c config_file=/etc/postgresql/15/main/postgresql.conf -c data_directory=%s/15/main "
        "-c external_pid_file= postgres", sql, check)
    host.run("rm -rf %s", check)
    assert single.rc == 0, single.stderr
    values = re.findall(r'= "(\d+)"', single.stdout)
    assert values[0] == str(ON_DISK), single.stdout
    if restarted(host):
        # The stop-time sync ran after PostgreSQL stopped: every row written in RAM is on disk.
        assert values[1:] == [str(ROWS), str(ROWS_SUM)], single.stdout


def test_disk_directory_under_the_mount_is_untouched(host):
    # A private, non-recursive bind of / shows what lies under the tmpfs: the data as it was before.
    out = host.run(
        "mkdir -p /run/ramdisk-test/lower && mount --bind / /run/ramdisk-test/lower && "
        "mount --make-private /run/ramdisk-test/lower && "
        "ls /run/ramdisk-test/lower%s/15/main/PG_VERSION; rc=$?; umount /run/ramdisk-test/lower; exit $rc", PATH)
    assert out.rc == 0, out.stdout + out.stderr


def test_a_timed_sync_writes_the_changes_into_the_copy(host):
    persist, sync, _timer = UNITS
    before = host.file("%s/current" % BACKING).linked_to
    # What the timer starts every interval, started now; the service is stopped for the copy and runs again after.
    assert host.run("systemctl start %s", sync).rc == 0
    after = host.file("%s/current" % BACKING).linked_to
    # A sync after the first writes what changed into current in place (persist-delta.py): the copy keeps its
    # name, and the one before it stays as a reverse delta (persist.keep is 2 by default); any older one went.
    assert after == before
    names = listing(host, BACKING)
    assert names == [".persist-delta", "current", before.rsplit("/", 1)[1]], names
    delta = listing(host, BACKING + "/.persist-delta")
    assert not {"commit.json", "rollback.json"} & set(delta), delta
    assert len([name for name in delta if name.startswith("undo-")]) == 1, delta
    assert psql(host, "SELECT count(*) FROM on_disk") == str(ON_DISK)
    assert systemctl(host, "is-active", persist) == "active"
    assert systemctl(host, "is-active", SERVICE) == "active"
    log = host.run("journalctl -u %s -o cat --no-pager", sync).stdout
    assert "synced %s to %s (in place" % (PATH, after) in log, log
