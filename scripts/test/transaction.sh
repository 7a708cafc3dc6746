#!/usr/bin/env bash
# make transaction: the transaction properties of ramdisk_apply on this machine's own kernel, as root
# (tests/transaction/transaction.py): a run killed just before each of its journal writes and once during the
# copy, then run again (nothing hidden, the end state of one whole run); the same kill points (and the whole run)
# followed by a power cut and a boot without systemd, then run again; 2 and 5 runs of one policy at once
# (never two mounts on a path, each refusal names the holder or the change); a run on a full /etc (fails,
# /etc/fstab unchanged, its mount undone). A run is ramdisk_plan, then ramdisk_apply, each a module process.
#
# Each case runs in a fresh mount namespace of its own (unshare --mount --propagation private) where /etc,
# /var/lib and /run are overlays whose writes go to a tmpfs of the case, and /srv is an empty directory of the
# case under this run's work directory (/var/tmp/ramdisk-transaction.*): nothing reaches the host, and the mounts
# go with the namespace. The zram cases, one at a time, make zram devices and swaps, which are the kernel's: each
# case removes every device a record or the journal of its namespace names. About 7 minutes on 2 busy cores.
#
# Arguments go to the driver: --only kill,reboot,cp-kill,concurrency,full-disk,odd-paths,limits,read-only,
# remounted,reboot-undo,zram,zram-root, --tries N (20), --jobs N (2).
# Output: a table per part, each failure, the count and the time; each failed case's log and result stay in
# build/transaction/. Exits 1 when a property failed, 2 when the test itself could not run.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD

die() { echo "transaction: $*" >&2; exit 2; }
((EUID == 0)) || die "run as root: the cases mount file systems"
[[ -x .venv/bin/python ]] || die "no .venv: run make setup first"
command -v unshare >/dev/null || die "unshare (util-linux) is missing"
command -v findmnt >/dev/null || die "findmnt (util-linux) is missing"
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null || die "the kernel has no overlay file system"
bash scripts/lab/link_collection.sh

started=$SECONDS

# Work directories of earlier runs that were killed before their clean-up.
for old in /var/tmp/ramdisk-transaction.*; do
  [[ -d $old && -f $old/pid ]] || continue
  kill -0 "$(cat "$old/pid")" 2>/dev/null || rm -rf --one-file-system "$old"
done

work=$(mktemp -d /var/tmp/ramdisk-transaction.XXXXXX)
echo $$ >"$work/pid"

# Module processes of this run still going (a run waiting for the lock when the test was stopped): they name
# their argument files in $work. Each is ours, ended by its pid.
# shellcheck disable=SC2317  # runs from the EXIT trap
our_processes() {
  local dir pid cmdline
  for dir in /proc/[0-9]*; do
    pid=${dir#/proc/}
    ((pid == $$)) && continue
    cmdline=$(tr '\0' ' ' 2>/dev/null <"$dir/cmdline") || continue
    [[ $cmdline == *" $work/"* ]] && echo "$pid"
  done
  true
}

# shellcheck disable=SC2317
cleanup() {
  local rc=$? pid
  for pid in $(our_processes); do
    kill -KILL "$pid" 2>/dev/null || true
  done
  rm -rf --one-file-system "$work"
  exit "$rc"
}
trap cleanup EXIT

echo "transaction: cases in private mount namespaces under $work"
rc=0
.venv/bin/python tests/transaction/transaction.py --work "$work" --keep "$repo/build/transaction" "$@" || rc=$?
echo "transaction: $((SECONDS - started)) s"
exit "$rc"
