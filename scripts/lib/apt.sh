# shellcheck shell=bash
# apt_get ARGS...: apt-get, waiting for the package lock that another process holds (a fresh cloud machine's
# unattended-upgrades or cloud-init often does for minutes after boot), up to APT_LOCK_WAIT seconds (600), with a
# line on standard error saying who holds it. apt-get is asked not to wait itself (DPkg::Lock::Timeout=0: on
# Debian 12 its own wait covers dpkg's locks but not apt-get update's), and is run again every 3 s while it
# refuses on a lock. Sourced by scripts/bootstrap.sh.
apt_get() {
  local wait=${APT_LOCK_WAIT:-600} began=$SECONDS err rc said=0
  err=$(mktemp)
  while true; do
    rc=0
    apt-get -o DPkg::Lock::Timeout=0 "$@" 2>"$err" || rc=$?
    if ((rc == 0 || SECONDS - began >= wait)) || ! grep -q 'Could not get lock\|Unable to lock' "$err"; then
      break
    fi
    if ((!said)); then
      echo "apt: waiting up to $wait s for the package lock, $(grep -o 'held by process [0-9]* ([^)]*)' "$err" \
        | head -n 1 || echo 'held by another process')" >&2
      said=1
    fi
    sleep 3
  done
  ((said && rc == 0)) && echo "apt: got the package lock after $((SECONDS - began)) s" >&2
  if ((rc != 0)); then
    cat "$err" >&2
    if grep -q 'Could not get lock\|Unable to lock' "$err"; then
      echo "apt: the package lock was still held after $wait s; run this again once the other apt or dpkg is done" >&2
    fi
  fi
  rm -f "$err"
  return "$rc"
}
