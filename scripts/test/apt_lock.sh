#!/usr/bin/env bash
# make apt-lock: the package step of scripts/bootstrap.sh (scripts/lib/apt.sh) with the package lock held by another
# process, in a lab container (its own dpkg database and lock; apt-get install of a package that is already there
# needs no network). 1) A holder lets go after 20 s: apt_get waits, says who holds the lock, and succeeds.
# 2) APT_LOCK_WAIT=4 with the lock held 20 s: apt_get gives up after about 4 s and says to run it again.
# Exits 1 when either does not hold, 2 when the test cannot run (no docker or lab image: make setup, lab images).
set -euo pipefail
cd "$(dirname "$0")/../.."
image=ramdisk-lab/debian:12
docker image inspect "$image" >/dev/null 2>&1 || { echo "apt-lock: no $image: run scripts/lab/images.sh" >&2; exit 2; }

inside=$(cat <<'SH'
set -u
source /apt/apt.sh
hold() {  # hold dpkg's frontend lock as apt does (an fcntl lock), for $1 seconds
  python3 -c 'import fcntl, sys, time
f = open("/var/lib/dpkg/lock-frontend", "w"); fcntl.lockf(f, fcntl.LOCK_EX); open("/tmp/held", "w").close()
time.sleep(float(sys.argv[1]))' "$1" &
  while [ ! -e /tmp/held ]; do sleep 0.1; done
}
hold 20; began=$SECONDS
apt_get install -y -qq dpkg 2>/tmp/err1; rc1=$?
echo "case1 rc=$rc1 waited=$((SECONDS - began))"; cat /tmp/err1
wait; rm -f /tmp/held
hold 20; began=$SECONDS
APT_LOCK_WAIT=4 apt_get install -y -qq dpkg 2>/tmp/err2; rc2=$?
echo "case2 rc=$rc2 waited=$((SECONDS - began))"; cat /tmp/err2
kill %1 2>/dev/null; wait
SH
)
out=$(docker run --rm --network none -v "$PWD/scripts/lib:/apt:ro" "$image" bash -c "$inside" 2>&1)
while IFS= read -r line; do echo "apt-lock:   $line"; done <<< "$out"
fail=0
check() { if grep -qE "$1" <<< "$out"; then echo "apt-lock: ok: $2"; else echo "apt-lock: FAILED: $2"; fail=1; fi; }
check '^case1 rc=0 waited=(1[6-9]|2[0-9]|3[0-9])$' "held for 20 s: apt_get waited for it and installed"
check 'apt: waiting up to 600 s for the package lock, held by process [0-9]+ \(python3\)' "the wait names the holder"
check 'apt: got the package lock after' "the end of the wait is said"
check '^case2 rc=[1-9][0-9]* waited=([4-9])$' "APT_LOCK_WAIT=4: apt_get gave up after about 4 s"
check 'still held after 4 s; run this again' "giving up says to run it again"
exit "$fail"
