#!/usr/bin/env bash
# make transaction-powercut: the power-cut matrix (tests/transaction/powercut_matrix.py). Every transaction kind
# (mount, migrate, a zram file system; migrate with persist, persist adopting a backing, a live mount gaining
# persist, removal with return, /var/log on the log purpose with journald writing) cut after each of its journal
# writes, then booted and run again: no file lost, none hidden, none only in RAM. It prints the number of points and
# a table per kind.
#
# mount, migrate and zram run in private mount namespaces on this machine's kernel (as make transaction; zram one
# point at a time, every device it made removed); the persist and log kinds in systemd containers of the lab's
# Debian 12 image (pcmatrix-<this shell's pid>-*, removed after each point and at exit), where the cut is docker
# kill + docker start and a new boot id.
#
# Arguments go to the driver: --only KIND,... , --jobs N (2), --max N (at most N points a kind, a quick look).
# Each failed point's log and result stay in build/transaction-powercut/. Exits 1 when a property failed, 2 when
# the test itself could not run.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD

die() { echo "transaction-powercut: $*" >&2; exit 2; }
((EUID == 0)) || die "run as root: the cases mount file systems"
[[ -x .venv/bin/python ]] || die "no .venv: run make setup first"
bash scripts/lab/dockerd.sh
bash scripts/lab/images.sh bookworm >/dev/null || die "the lab image ramdisk-lab/debian:12 could not be made"
bash scripts/lab/link_collection.sh

started=$SECONDS
prefix=pcmatrix-$$-
work=$(mktemp -d /var/tmp/ramdisk-powercut-matrix.XXXXXX)

# Containers of a driver stopped before its own clean-up; a namespace case's mounts went with its namespace.
trap 'docker ps -aq --filter "name=^$prefix" | xargs -r docker rm -f >/dev/null; rm -rf --one-file-system "$work"' EXIT

echo "transaction-powercut: namespaces and containers $prefix*, work directory $work"
rc=0
.venv/bin/python tests/transaction/powercut_matrix.py --work "$work" --keep "$repo/build/transaction-powercut" \
  --tag "$$" "$@" || rc=$?
echo "transaction-powercut: $((SECONDS - started)) s"
exit "$rc"
