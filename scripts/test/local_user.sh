#!/usr/bin/env bash
# make test-local-user: a local user against a persisted RAM mount (tests/adversary/local_user.py): mallory, an
# unprivileged user, writes the backing, plants the helper's names in the mount root, swaps directories for links to
# root-only places while syncs run, fills the mount and makes a million inodes, 30 s each, each attack in a fresh
# systemd container of the lab's Debian 12 image (advuser-<this shell's pid>-*, removed after each and at exit, with
# the driver's work directory /var/tmp/ramdisk-local-user.*). After each: syncs went on, nothing lost (also after a
# power cut and the boot's restore), no file outside the mount and the backing changed, nothing of a root-only place
# in the mount or the backing. A verdict per attack.
#
# Arguments go to the driver: --only backing,plant,... --seconds S (30) --inodes N (1000000) --nr-inodes N (20000,
# the inodes attack's mount) --jobs N (2) --image IMAGE.
# Exits 1 when an attack's check failed, 2 when the test itself could not run.
set -euo pipefail
cd "$(dirname "$0")/../.."

[[ -x .venv/bin/python ]] || { echo "local-user: no .venv: run make setup first" >&2; exit 2; }
bash scripts/lab/dockerd.sh
bash scripts/lab/images.sh bookworm >/dev/null || { echo "local-user: no lab image ramdisk-lab/debian:12" >&2; exit 2; }
bash scripts/lab/link_collection.sh >/dev/null
started=$SECONDS
echo "local-user: attacks in systemd containers advuser-$$-*"
rc=0
.venv/bin/python tests/adversary/local_user.py --tag "$$" "$@" || rc=$?
echo "local-user: $((SECONDS - started)) s"
exit "$rc"
