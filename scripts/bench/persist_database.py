# SPDX-License-Identifier: GPL-3.0-or-later
"""What a consistent interval sync of a database costs (make bench-persist-database).

In a systemd container of the lab image ramdisk-lab/debian:12-postgresql (PostgreSQL 15), /var/lib/postgresql is a
tmpfs kept in /var/lib/ramdisk-backing/pg by the collection's own persist helper, record and units (conf_text() and
unit_texts() of plugins/module_utils/_persist.py, persist.services: [postgresql@15-main.service]). For a small
database (pgbench scale 1) and one of about 1 GiB (scale 64), with pgbench running (4 clients, TPC-B, restarted at
once when the server goes away), each interval sync (systemctl start ramdisk-persist-sync-TOKEN.service) is measured
twice each way:

  stop_services: true   the helper stops PostgreSQL, copies, starts it: its status gives the downtime (stop + copy
                        + start) and the sync's time; pgbench's committed transactions per second (pgbench_history's
                        rows by their start time) give the throughput lost against the median second of the run;
  stop_services: false  the live copy, for the same figures (no downtime; what the copy's I/O costs).

Then the copies themselves: each copy made under pgbench (the live ones with a CHECKPOINT run during the copy, as
PostgreSQL does every checkpoint_timeout or max_wal_size) is started on its own as a second server, and checked:
its recovery (the server log), and TPC-B's own invariant, the sum of the account balances equal to that of the
branches, the tellers and the history's deltas, which every committed transaction keeps.

Usage: persist_database.py [--scales 1,64] [--seconds 40] [--keep]   (containers are named dbsync-bench-*)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO_ROOT, ".cache", "collections"))

# pylint: disable=wrong-import-position
from ansible_collections.ramdisk.provision.plugins.module_utils._persist import conf_text, unit_names, unit_texts  # noqa: E402
from ansible_collections.ramdisk.provision.plugins.module_utils._mount_steps import token as mount_token  # noqa: E402
from ansible_collections.ramdisk.provision.plugins.module_utils._persist_steps import (  # noqa: E402
    delta_helper_text,
    persist_helper_text,
)

IMAGE = "ramdisk-lab/debian:12-postgresql"
NAME = "dbsync-bench"
STAGE = "/opt/dbsync-bench"
MOUNT = "/var/lib/postgresql"
BACKING = "/var/lib/ramdisk-backing/pg"
SERVICE = "postgresql@15-main.service"
TOKEN = mount_token(MOUNT)
UNITS = unit_names(TOKEN)
HELPER = "/usr/local/libexec/ramdisk-provision/persist"
STATUS = "/var/lib/ramdisk-provision/persist/%s.status" % TOKEN
PSQL = "runuser -u postgres -- psql -X -q -At -d bench -c"
BIN = "/usr/lib/postgresql/15/bin"


def entry(stop):
    persist = {"backing": BACKING, "interval": "1h", "interval_seconds": 3600, "services": [SERVICE], "keep": 2,
               "stop_services": stop}
    return {"path": MOUNT, "token": TOKEN, "persist": persist}


def docker(*args, check=True, timeout=1800):
    done = subprocess.run(["docker"] + list(args), capture_output=True, text=True, timeout=timeout, check=False)
    if check and done.returncode != 0:
        raise RuntimeError("docker %s failed (%d): %s%s"
                           % (" ".join(args[:3]), done.returncode, done.stdout[-2000:], done.stderr[-2000:]))
    return done


def sh(script, check=True, timeout=1800):
    return docker("exec", NAME, "bash", "-ec", script, check=check, timeout=timeout).stdout


def stage_files(directory, stop):
    """The helper, its record and the units, as the role writes them, into DIRECTORY."""
    # The program and its engine, as ramdisk_apply installs them.
    for name, text in (("persist", persist_helper_text()), ("persist-delta.py", delta_helper_text())):
        with open(os.path.join(directory, name), "w", encoding="utf-8") as handle:
            handle.write(text)
    with open(os.path.join(directory, "%s.conf" % TOKEN), "w", encoding="utf-8") as handle:
        handle.write(conf_text(entry(stop)))
    for kind, text in unit_texts(entry(stop)).items():
        with open(os.path.join(directory, UNITS[kind]), "w", encoding="utf-8") as handle:
            handle.write(text)


def install(stop):
    """The record and units of stop_services STOP, from the stage."""
    sh("cp %s/stop-%d/%s.conf /etc/ramdisk-provision/persist/ && "
       "cp %s/stop-%d/ramdisk-persist-* /etc/systemd/system/ && systemctl daemon-reload"
       % (STAGE, int(stop), TOKEN, STAGE, int(stop)))


def boot():
    docker("rm", "-f", NAME, check=False)
    stage = tempfile.mkdtemp(prefix="dbsync-bench-")
    for stop in (False, True):
        os.mkdir(os.path.join(stage, "stop-%d" % int(stop)))
        stage_files(os.path.join(stage, "stop-%d" % int(stop)), stop)
    os.chmod(stage, 0o755)
    docker("run", "-d", "--name", NAME, "--cap-add", "SYS_ADMIN", "--security-opt", "apparmor=unconfined",
           "--security-opt", "seccomp=unconfined", "--cgroupns", "host", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
           "--tmpfs", "/run", "--tmpfs", "/run/lock", "--network", "none", "-v", "%s:%s:ro" % (stage, STAGE),
           IMAGE, "/lib/systemd/systemd")
    deadline = time.monotonic() + 120
    while docker("exec", NAME, "systemctl", "is-system-running", "--wait", check=False).stdout.strip() not in (
            "running", "degraded"):
        if time.monotonic() > deadline:
            raise RuntimeError("systemd did not come up in %s" % NAME)
        time.sleep(0.2)
    # The data moved onto a tmpfs, the helper and units installed, the first copy made, persist started: what the
    # role's adoption does, by hand.
    sh("systemctl stop %(service)s\n"
       "mkdir -p -m 0700 %(backing)s /etc/ramdisk-provision/persist\n"
       "mkdir -p /usr/local/libexec/ramdisk-provision && install -m 0755 %(stage)s/stop-1/persist %(helper)s\n"
       "install -m 0644 %(stage)s/stop-1/persist-delta.py /usr/local/libexec/ramdisk-provision/persist-delta.py\n"
       "cp -a %(mount)s /var/tmp/seed && mount -t tmpfs -o size=4G,mode=0755 tmpfs %(mount)s\n"
       "cp -a /var/tmp/seed/. %(mount)s/ && rm -rf /var/tmp/seed\n"
       % {"service": SERVICE, "backing": BACKING, "stage": STAGE, "helper": HELPER, "mount": MOUNT})
    install(True)
    sh("%s sync %s && systemctl enable --now %s && systemctl start %s"
       % (HELPER, TOKEN, UNITS["persist"], SERVICE))
    return stage


# pgbench with 4 clients, restarted as soon as the server answers again; its transactions are pgbench_history's rows.
DRIVER = r'''
end=$(( $(date +%%s) + %(seconds)d ))
while [ "$(date +%%s)" -lt "$end" ]; do
  left=$(( end - $(date +%%s) ))
  [ "$left" -gt 0 ] || break
  runuser -u postgres -- pgbench -n -c 4 -j 2 -T "$left" bench >/dev/null 2>&1 || :
  until runuser -u postgres -- pg_isready -q; do sleep 0.05; done
done
'''


def per_second(since):
    rows = sh("%s \"select extract(epoch from date_trunc('second', mtime))::bigint, count(*) from pgbench_history "
              "where mtime >= to_timestamp(%f) group by 1 order by 1\"" % (PSQL, since))
    return dict((int(a), int(b)) for a, b in (line.split("|") for line in rows.split()))


def run_syncs(stop, seconds, syncs):
    """pgbench for SECONDS with SYNCS interval syncs; returns the figures and the copies made."""
    install(stop)
    began = float(sh("date +%s.%N"))
    driver = subprocess.Popen(["docker", "exec", NAME, "bash", "-c", DRIVER % {"seconds": seconds}],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results = []
    gap = seconds / (syncs + 1)
    for number in range(syncs):
        time.sleep(gap if number == 0 else max(0, began + gap * (number + 1) - float(sh("date +%s.%N"))))
        sh("systemctl start %s || :" % UNITS["sync"])
        status = dict(line.split("=", 1) for line in sh("cat %s" % STATUS).splitlines())
        failed = status["RESULT"] != "ok"
        results.append({"result": status["RESULT"], "started": float(status["STARTED"]),
                        "finished": float(status["FINISHED"]),
                        "down": float(status.get("SERVICES_DOWN_SECONDS", "0") or 0),
                        "written": None if failed else int(status["LAST_OK_WRITTEN_BYTES"]),
                        "snapshot": None if failed else status["LAST_OK_SNAPSHOT"],
                        "why": sh("journalctl -q -u %s -n 4 --no-pager | grep -E 'vanished|failed' | head -2 || :"
                                  % UNITS["sync"]).strip() if failed else ""})
    driver.wait(timeout=seconds + 120)
    counts = per_second(began)
    first, last = int(began) + 2, int(began) + seconds - 1
    seconds_in = range(first, last)
    windows = [(int(r["started"]) - 1, int(r["finished"]) + 3) for r in results]
    quiet = [counts.get(s, 0) for s in seconds_in if not any(a <= s <= b for a, b in windows)]
    median = statistics.median(quiet) if quiet else 0
    for result, (a, b) in zip(results, windows):
        done = sum(counts.get(s, 0) for s in range(a, b + 1))
        result["lost_transactions"] = max(0, round(median * (b - a + 1) - done))
        result["lost_seconds"] = round(result["lost_transactions"] / median, 1) if median else None
        result["sync_seconds"] = round(result["finished"] - result["started"], 2)
    return {"median_tps": median, "syncs": results, "per_second": [counts.get(s, 0) for s in range(int(began), last + 1)],
            "began": began}


CHECK = r'''
copy=/var/tmp/check
rm -rf "$copy" /var/tmp/check.sock; mkdir -m 0700 /var/tmp/check.sock; chown postgres /var/tmp/check.sock
cp -a %(source)s/15/main "$copy"
rm -f "$copy/postmaster.pid"
printf "port = 5499\nlisten_addresses = ''\nunix_socket_directories = '/var/tmp/check.sock'\n" > "$copy/postgresql.conf"
echo "local all all trust" > "$copy/pg_hba.conf"; : > "$copy/pg_ident.conf"
chown -R postgres: "$copy"
rm -f /var/tmp/check.log
if runuser -u postgres -- %(bin)s/pg_ctl -D "$copy" -l /var/tmp/check.log -w -t 120 start >/dev/null 2>&1; then
  q() { runuser -u postgres -- psql -X -q -At -h /var/tmp/check.sock -p 5499 -d bench -c "$1" 2>&1; }
  echo "STARTED yes"
  sums="select (select sum(abalance) from pgbench_accounts) || ' ' || (select sum(bbalance) from pgbench_branches)"
  sums="$sums || ' ' || (select sum(tbalance) from pgbench_tellers)"
  sums="$sums || ' ' || (select coalesce(sum(delta), 0) from pgbench_history)"
  echo "SUMS $(q "$sums" | tr '\n' ' ')"
  q "create extension if not exists amcheck" >/dev/null
  echo "AMCHECK $(q "select bt_index_check('pgbench_accounts_pkey', true)" | tr '\n' ' ')"
  runuser -u postgres -- %(bin)s/pg_ctl -D "$copy" -m immediate stop >/dev/null 2>&1 || :
else
  echo "STARTED no"
fi
grep -E "not properly shut down|redo (starts|done)|invalid|PANIC|FATAL|ERROR|could not|checkpoint record|consistent" \
  /var/tmp/check.log | sed 's/^/LOG /' | head -12
rm -rf "$copy"
'''


def check_copy(source):
    """SOURCE (a copy of the mount) started on its own as a second server: its recovery and TPC-B's sums."""
    out = sh(CHECK % {"source": source, "bin": BIN}, check=False)
    found = {"started": "STARTED yes" in out, "log": [], "sums": None, "amcheck": None}
    for line in out.splitlines():
        if line.startswith("SUMS "):
            found["sums"] = line[5:].split()
        elif line.startswith("AMCHECK "):
            found["amcheck"] = line[8:].strip()
        elif line.startswith("LOG "):
            found["log"].append(line[4:].split("LOG:", 1)[-1].strip()[:160])
    sums = found["sums"] or []
    found["consistent"] = bool(found["started"] and len(sums) == 4 and len(set(sums)) == 1
                               and not (found["amcheck"] or "").startswith("ERROR"))
    return found


# A copy by hand with the helper's rsync options under pgbench, with a CHECKPOINT completing while it runs (as one does
# every checkpoint_timeout or max_wal_size); rsync's "vanished" (24) is let pass, as a tool that ignores it would.
HAND_COPY = r'''
rm -rf /var/tmp/hand; mkdir -m 0700 /var/tmp/hand
rsync -aHAX --numeric-ids --sparse %(mount)s/ /var/tmp/hand/ & copy=$!
sleep %(delay)s; %(psql)s checkpoint
wait "$copy" && echo "RSYNC 0" || echo "RSYNC $?"
'''


def live_copy_by_hand(seconds, delay):
    driver = subprocess.Popen(["docker", "exec", NAME, "bash", "-c", DRIVER % {"seconds": seconds}],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(3)
    out = sh(HAND_COPY % {"mount": MOUNT, "delay": delay, "psql": PSQL}, check=False)
    driver.wait(timeout=seconds + 120)
    found = check_copy("/var/tmp/hand")
    found["rsync"] = out.strip().split()[-1] if out.strip() else "?"
    sh("rm -rf /var/tmp/hand")
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", default="1,64")
    parser.add_argument("--seconds", type=int, default=40)
    parser.add_argument("--syncs", type=int, default=2)
    parser.add_argument("--hand-copies", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="leave the container running")
    args = parser.parse_args(argv)
    report = []
    stage = None
    try:
        stage = boot()
        for scale in [int(s) for s in args.scales.split(",")]:
            sh("runuser -u postgres -- dropdb --if-exists bench; runuser -u postgres -- createdb bench; "
               "runuser -u postgres -- pgbench -q -i -s %d bench >/dev/null 2>&1" % scale)
            size = int(sh("%s \"select pg_database_size('bench')\"" % PSQL))
            # The first copy of this database, so that the measured syncs are the steady ones (incremental).
            sh("systemctl start %s" % UNITS["sync"])
            began = time.monotonic()
            sh("systemctl restart %s" % SERVICE)
            restart = round(time.monotonic() - began, 2)
            for stop in (True, False):
                figures = run_syncs(stop, args.seconds, args.syncs)
                for sync in figures["syncs"]:
                    sync["copy"] = check_copy("%s/%s" % (BACKING, sync["snapshot"])) if sync["snapshot"] else None
                line = {"scale": scale, "database_bytes": size, "stop_services": stop, "restart_seconds": restart}
                line.update(figures)
                report.append(line)
                print(json.dumps(line), flush=True)
            install(True)
            hand = [live_copy_by_hand(12, "0.5" if scale > 8 else "0.05") for number in range(args.hand_copies)]
            report.append({"scale": scale, "database_bytes": size, "hand_copies": hand})
            print(json.dumps(report[-1]), flush=True)
    finally:
        if not args.keep:
            docker("rm", "-f", NAME, check=False)
        if stage:
            shutil.rmtree(stage, ignore_errors=True)
    print()
    print("scale  database  stop_services  restart s  median tps  result  sync s  down s  lost (s of tps)  "
          "written MiB  copy starts, consistent")
    for line in report:
        for sync in line.get("syncs", ()):
            copy = sync["copy"]
            print("%5d  %5.0f MiB  %-13s  %9.2f  %10.0f  %-6s  %6.2f  %6.2f  %15s  %11s  %s" % (
                line["scale"], line["database_bytes"] / 1048576.0, line["stop_services"], line["restart_seconds"],
                line["median_tps"], sync["result"], sync["sync_seconds"], sync["down"], sync["lost_seconds"],
                "%.1f" % (sync["written"] / 1048576.0) if sync["written"] is not None else "-",
                "%s, %s" % (copy["started"], copy["consistent"]) if copy else sync["why"][-100:]))
    for line in report:
        for number, copy in enumerate(line.get("hand_copies", ())):
            print("scale %d, live copy by hand %d (rsync exit %s, CHECKPOINT during it): starts %s, consistent %s, "
                  "sums %s, amcheck %r" % (line["scale"], number + 1, copy["rsync"], copy["started"],
                                           copy["consistent"], copy["sums"], copy["amcheck"]))
            for text in copy["log"]:
                print("    " + text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
