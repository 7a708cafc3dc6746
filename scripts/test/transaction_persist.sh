#!/usr/bin/env bash
# make transaction-persist: the kill points of a persisted mount (tests/transaction/persist.py), its adoption and
# its removal (state absent): a run killed just before each of its journal writes, then run again (no data hidden
# or lost, the disk copy untouched, the backing empty of ours or one complete copy; the end state of one whole
# run: mount, fstab, record, units and timer, the backing's copy, the service that uses the data running).
#
# persist needs systemd as PID 1 and mounts that systemd sees, so each case runs in a fresh systemd container of
# the lab's Debian 12 image (containers named txpersist-<this shell's pid>-*, removed after each case and at exit)
# that sees a read-only stage of this checkout (plugins, persist helper, these tests, ansible-core's package)
# made under this run's work directory (/var/tmp/ramdisk-transaction-persist.*). No zram device or swap is made.
#
# Power cuts (--only adopt-cut,live-cut,remove-cut): the same runs and a live tmpfs gaining persist, each killed at
# journal write N, then the container's PID 1 killed, its boot, a new boot id and the next run (where is the data).
#
# Arguments go to the driver: --only adopt,remove,handover, --jobs N (2), --image IMAGE (ramdisk-lab/debian:12), --points N,...
# Output: a table per kind, each failure, the counts and the time; each failed case's log and result stay in
# build/transaction-persist/. Exits 1 when a property failed, 2 when the test itself could not run.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD

die() { echo "transaction-persist: $*" >&2; exit 2; }
[[ -x .venv/bin/python ]] || die "no .venv: run make setup first"
bash scripts/lab/dockerd.sh
bash scripts/lab/images.sh bookworm >/dev/null || die "the lab image ramdisk-lab/debian:12 could not be made"
bash scripts/lab/link_collection.sh

started=$SECONDS
prefix=txpersist-$$-

# Work directories of earlier runs that were killed before their clean-up.
for old in /var/tmp/ramdisk-transaction-persist.*; do
  [[ -d $old && -f $old/pid ]] || continue
  kill -0 "$(cat "$old/pid")" 2>/dev/null || rm -rf --one-file-system "$old"
done

work=$(mktemp -d /var/tmp/ramdisk-transaction-persist.XXXXXX)
echo $$ >"$work/pid"

# shellcheck disable=SC2317  # runs from the EXIT trap
cleanup() {
  local rc=$? name
  for name in $(docker ps -a --format '{{.Names}}' | grep "^$prefix" || true); do
    docker rm -f "$name" >/dev/null 2>&1 || true
  done
  rm -rf --one-file-system "$work"
  exit "$rc"
}
trap cleanup EXIT

echo "transaction-persist: cases in systemd containers $prefix*, work directory $work"
rc=0
.venv/bin/python tests/transaction/persist.py --work "$work" --keep "$repo/build/transaction-persist" --tag "$$" "$@" || rc=$?
echo "transaction-persist: $((SECONDS - started)) s"
exit "$rc"
