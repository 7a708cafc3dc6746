# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""persist.stop_services under a real systemd (make transaction-persist-services).

In a systemd container of the lab's Debian 12 image, /srv/data is a tmpfs kept in /srv/backing (a directory of the
host, bind-mounted, so that it outlives the container) by the collection's helper, record and units (conf_text() and
unit_texts() with stop_services: true), and txdata.service, listed in persist.services, uses it; the service logs each
start and stop to a file of the host. A drop-in of the sync service holds its copy at a gate when asked (the engine's
kill point after its plan, with SIGSTOP), so that each case acts while the copy runs, without timing. Cases, each
checked through systemd and the helper's status:

- interval: the timer's sync service copies with txdata stopped and starts it again; the status gives the downtime.
- admin-stopped: a service an admin stopped stays stopped through a sync.
- term: `systemctl stop` of the sync service mid-copy: the sync fails, txdata runs again, current is unchanged.
- kill: SIGKILL to the sync service mid-copy: ExecStopPost (`persist resume`) starts txdata, the record is gone.
- shutdown: `systemctl poweroff` mid-copy: txdata is not started again; the persist unit's stop-time sync, after
  it, writes the last copy (seen in the backing on the host once the container is gone).

Usage: persist_services.py [--image IMAGE] [--keep]   (container dbsync-persist-services-<pid>)
Exits 1 when a check failed, 2 when the test could not run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, ".cache", "collections"))

# pylint: disable=wrong-import-position
from ansible_collections.ramdisk.provision.plugins.module_utils._persist import conf_text, unit_names, unit_texts  # noqa: E402
from ansible_collections.ramdisk.provision.plugins.module_utils._persist_steps import (  # noqa: E402
    delta_helper_text,
    persist_helper_text,
)

# The entry as the plan gives it to conf_text() and unit_texts().
ENTRY = {"path": "/srv/data", "token": "srv-data-test", "persist": {
    "backing": "/srv/backing", "interval": "1h", "interval_seconds": 3600, "services": ["txdata.service"], "keep": 2,
    "stop_services": True}}
MOUNT, TOKEN, BACKING = ENTRY["path"], ENTRY["token"], ENTRY["persist"]["backing"]
SERVICE = ENTRY["persist"]["services"][0]
UNITS = unit_names(TOKEN)
HELPER = "/usr/local/libexec/ramdisk-provision/persist"
STATUS, STOPPED = ("%s/%s.%s" % (where, TOKEN, kind) for where, kind in (
    ("/var/lib/ramdisk-provision/persist", "status"), ("/run/ramdisk-provision/persist", "stopped")))
TXDATA = """[Unit]
Description=Uses /srv/data (test)
[Service]
WorkingDirectory=/srv/data
ExecStartPre=/bin/sh -c 'echo start >> /host/services.log'
ExecStart=/bin/sleep infinity
ExecStopPost=/bin/sh -c 'echo stop >> /host/services.log'
[Install]
WantedBy=multi-user.target
"""
# The gate: the sync service's next sync stops itself (SIGSTOP) at the engine's kill point after its plan, with the
# services stopped for its copy; the test acts, then lets it go on (SIGCONT) or stops or kills it.
GATE_DROPIN = "/run/systemd/system/%s.d/gate.conf"
GATE = """[Service]
Environment=PERSIST_DELTA_KILL_AT=planned PERSIST_DELTA_KILL_SIGNAL=SIGSTOP
"""


class Container(object):
    def __init__(self, image, host_dir):
        self.name = "dbsync-persist-services-%d" % os.getpid()
        self.image = image
        self.host_dir = host_dir

    def docker(self, *args, check=True, timeout=300):
        done = subprocess.run(["docker"] + list(args), capture_output=True, text=True, timeout=timeout, check=False)
        if check and done.returncode != 0:
            raise RuntimeError("docker %s: %s %s" % (" ".join(args[:4]), done.stdout[-1500:], done.stderr[-1500:]))
        return done

    def sh(self, script, check=True, timeout=300):
        return self.docker("exec", self.name, "sh", "-ec", script, check=check, timeout=timeout).stdout

    def start(self):
        self.docker("run", "-d", "--name", self.name, "--cap-add", "SYS_ADMIN", "--security-opt", "apparmor=unconfined",
                    "--security-opt", "seccomp=unconfined", "--cgroupns", "host", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
                    "--tmpfs", "/run", "--tmpfs", "/run/lock", "--network", "none",
                    "-v", "%s/backing:%s" % (self.host_dir, BACKING), "-v", "%s/host:/host" % self.host_dir,
                    "-v", "%s/stage:/stage:ro" % self.host_dir, self.image, "/lib/systemd/systemd")
        deadline = time.monotonic() + 120
        while self.docker("exec", self.name, "systemctl", "is-system-running", "--wait", check=False).stdout.strip() \
                not in ("running", "degraded"):
            if time.monotonic() > deadline:
                raise RuntimeError("systemd did not come up")
            time.sleep(0.2)

    def remove(self):
        self.docker("rm", "-f", self.name, check=False)


def stage(host_dir):
    directory = os.path.join(host_dir, "stage")
    os.makedirs(directory)
    files = {"%s.conf" % TOKEN: conf_text(ENTRY), SERVICE: TXDATA, "persist": persist_helper_text(),
             "persist-delta.py": delta_helper_text()}
    files.update((UNITS[kind], text) for kind, text in unit_texts(ENTRY).items())
    for name, text in files.items():
        with open(os.path.join(directory, name), "w", encoding="utf-8") as handle:
            handle.write(text)
    for name in ("backing", "host"):
        os.makedirs(os.path.join(host_dir, name), mode=0o700)


SETUP = """
mkdir -p /srv/data /etc/ramdisk-provision/persist /usr/local/libexec/ramdisk-provision
mount -t tmpfs -o size=64m,mode=0755 tmpfs /srv/data
echo one > /srv/data/file
install -m 0755 /stage/persist %(helper)s
install -m 0644 /stage/persist-delta.py /usr/local/libexec/ramdisk-provision/persist-delta.py
cp /stage/%(token)s.conf /etc/ramdisk-provision/persist/
cp /stage/ramdisk-persist-* /stage/txdata.service /etc/systemd/system/
systemctl daemon-reload
%(helper)s sync %(token)s
systemctl enable -q --now %(persist)s
systemctl enable -q --now txdata.service
""" % {"helper": HELPER, "token": TOKEN, "persist": UNITS["persist"]}


def status(box):
    return dict(line.split("=", 1) for line in box.sh("cat %s" % STATUS).splitlines())


def gate(box):
    dropin = GATE_DROPIN % UNITS["sync"]
    box.sh("mkdir -p %s\ncat > %s <<'GATE'\n%sGATE\nsystemctl daemon-reload" % (os.path.dirname(dropin), dropin, GATE))


def wait_copying(box):
    """Until the gated sync stopped itself; notes txdata's state then, and takes the gate away for later syncs."""
    box.sh("for i in $(seq 600); do pid=$(systemctl show -p MainPID --value %s); "
           "[ \"$pid\" != 0 ] && [ \"$(cut -d' ' -f3 /proc/$pid/stat)\" = T ] && break; sleep 0.05; done; "
           "[ \"$pid\" != 0 ] && [ \"$(cut -d' ' -f3 /proc/$pid/stat)\" = T ] || exit 1\n"
           "systemctl is-active txdata.service > /run/state-while-copying || :\n"
           "rm %s && systemctl daemon-reload" % (UNITS["sync"], GATE_DROPIN % UNITS["sync"]))


def open_gate(box):
    box.sh("pid=$(systemctl show -p MainPID --value %s); [ \"$pid\" = 0 ] || kill -CONT \"$pid\"" % UNITS["sync"])


def wait_done(box):
    """Until the sync service is inactive or failed (is-active says no while it is still activating)."""
    box.sh("for i in $(seq 1200); do case $(systemctl show -p ActiveState --value %s) in inactive|failed) exit 0;; "
           "esac; sleep 0.05; done; exit 1" % UNITS["sync"])


def active(box, unit):
    return box.docker("exec", box.name, "systemctl", "is-active", unit, check=False).stdout.strip()


def current(box):
    return box.sh("readlink %s/current" % BACKING).strip()


def unit_journal(box):
    return box.sh("journalctl -q -o short-precise --no-pager -u 'ramdisk-persist*' -u %s | tail -n 40" % SERVICE,
                  check=False)


def cases(box, check):
    # interval: the sync service, as the timer starts it.
    before = current(box)
    box.sh("echo two > /srv/data/file")
    gate(box)
    box.sh("systemctl start --no-block %s" % UNITS["sync"])
    wait_copying(box)
    open_gate(box)
    wait_done(box)
    found = status(box)
    check("interval: txdata stopped while copying",
          box.sh("cat /run/state-while-copying").strip() in ("inactive", "failed"))
    check("interval: txdata running again", active(box, SERVICE) == "active")
    # txdata requires the persist unit (RequiredBy=): stopping txdata leaves it, and its timer, running.
    check("interval: the persist unit and the timer still run",
          (active(box, UNITS["persist"]), active(box, UNITS["timer"])) == ("active", "active"))
    check("interval: the copy is current", current(box) == before and box.sh("cat %s/current/file" % BACKING) == "two\n")
    ok = found.get("RESULT") == "ok" and found.get("SERVICES_STOPPED") == "'%s'" % SERVICE \
        and float(found.get("SERVICES_DOWN_SECONDS", "0")) > 0
    check("interval: status ok with the downtime" + ("" if ok else " (%s)" % found), ok)

    # admin-stopped
    box.sh("systemctl stop txdata.service; systemctl start %s" % UNITS["sync"])
    check("admin-stopped: txdata stays stopped", active(box, SERVICE) == "inactive")
    check("admin-stopped: nothing recorded as stopped", "SERVICES_STOPPED" not in status(box))
    box.sh("systemctl start txdata.service")

    # term, then kill, mid-copy
    for how, command in (("term", "systemctl stop %s" % UNITS["sync"]),
                         ("kill", "systemctl kill --signal=KILL %s" % UNITS["sync"])):
        before = current(box)
        box.sh("echo %s > /srv/data/file" % how)
        gate(box)
        box.sh("systemctl start --no-block %s" % UNITS["sync"])
        wait_copying(box)
        box.sh(command)
        wait_done(box)
        check("%s: txdata stopped while copying" % how, box.sh("cat /run/state-while-copying").strip() != "active")
        check("%s: txdata running again" % how, active(box, SERVICE) == "active")
        check("%s: current unchanged" % how, current(box) == before
              and box.sh("cat %s/current/file" % BACKING) != "%s\n" % how)
        check("%s: no record of stopped services left" % how,
              box.docker("exec", box.name, "test", "-e", STOPPED, check=False).returncode == 1)
        if active(box, SERVICE) != "active":
            print(unit_journal(box))
            print(box.sh("cat %s; ls -la /run/ramdisk-provision/persist/; systemctl status --no-pager %s || :"
                         % (STATUS, SERVICE), check=False))
        if how == "term":
            said = box.sh("journalctl -q -u %s --no-pager" % UNITS["sync"]).splitlines()[-8:]
            print("      term: started again by %s" % (
                "ExecStopPost" if any("a sync was killed" in line for line in said) else "the helper itself"))
            check("term: status failed, services started", status(box).get("RESULT") == "failed"
                  and status(box).get("SERVICES_LEFT_DOWN") == "''")
        else:
            journal = box.sh("journalctl -q -u %s --no-pager" % UNITS["sync"])
            check("kill: ExecStopPost said so", "a sync was killed while it held txdata.service stopped" in journal)


def shutdown(box, host_dir, check):
    box.sh("echo last > /srv/data/file; : > /host/services.log")
    gate(box)
    box.sh("systemctl start --no-block %s" % UNITS["sync"])
    wait_copying(box)
    box.sh("echo poweroff >> /host/services.log; systemctl poweroff --no-block")
    deadline = time.monotonic() + 120
    while box.docker("inspect", "-f", "{{.State.Running}}", box.name, check=False).stdout.strip() == "true":
        if time.monotonic() > deadline:
            raise RuntimeError("the container did not power off")
        time.sleep(0.5)
    with open(os.path.join(host_dir, "host", "services.log"), encoding="utf-8") as handle:
        log = handle.read().split()
    check("shutdown: txdata not started again after the poweroff (%s)" % " ".join(log),
          "start" not in log[log.index("poweroff"):])
    backing = os.path.join(host_dir, "backing")
    with open(os.path.join(backing, "current", "file"), encoding="utf-8") as handle:
        check("shutdown: the stop-time sync wrote the last copy", handle.read() == "last\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default="ramdisk-lab/debian:12")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args(argv)
    host_dir = tempfile.mkdtemp(prefix="dbsync-persist-services-", dir="/var/tmp")
    failures = []

    def check(what, ok):
        print("%s  %s" % ("ok  " if ok else "FAIL", what), flush=True)
        if not ok:
            failures.append(what)

    box = Container(args.image, host_dir)
    began = time.monotonic()
    try:
        stage(host_dir)
        box.start()
        box.sh(SETUP)
        cases(box, check)
        shutdown(box, host_dir, check)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        print("could not run: %s" % exc)
        return 2
    finally:
        if not args.keep:
            box.remove()
            shutil.rmtree(host_dir, ignore_errors=True)
    print("%d checks failed; %.0f s" % (len(failures), time.monotonic() - began))
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
