"""PostgreSQL helpers shared by this scenario's verifies (tests/ and rollback/)."""

from __future__ import annotations

import hashlib

PATH = "/var/lib/postgresql"
DATADIR = "/var/lib/postgresql/15/main"
BACKING = "/var/lib/ramdisk-backing/postgresql"
SERVICE = "postgresql@15-main.service"
# The collection's name for the mount: its path, readable, and a hash (module_utils/_mount_steps.py token()).
TOKEN = "var-lib-postgresql-" + hashlib.sha1(PATH.encode()).hexdigest()[:8]
UNITS = ("ramdisk-persist-%s.service" % TOKEN, "ramdisk-persist-sync-%s.service" % TOKEN,
         "ramdisk-persist-sync-%s.timer" % TOKEN)
ROWS = 1000
# sum(1..ROWS) and the 50 rows written on disk before the tmpfs (prepare.yml).
ROWS_SUM = ROWS * (ROWS + 1) // 2
ON_DISK = 50


def psql(host, sql):
    """One value from SQL run by postgres over the local socket."""
    cmd = host.run("runuser -u postgres -- psql -X -A -t -v ON_ERROR_STOP=1 -c %s", sql)
    assert cmd.rc == 0, cmd.stderr
    return cmd.stdout.strip()


def systemctl(host, verb, unit):
    return host.run("systemctl %s %s", verb, unit).stdout.strip()
