#!/usr/bin/env bash
# Power cuts in the lab VM (tests/powercut/powercut.py): a directory with known data migrated into a persisted tmpfs
# by a first run that a power cut stops, then a persisted tmpfs filled with numbered markers, one clean
# reboot, then CUTS power cuts (3 here, as make test runs it; `make test-powercut` runs 10) during syncs, between
# them, during the restore at boot and early in a boot. Its own VM (powercut-vm), stopped again at the end.
# Run after `make setup`; the VM image is built first when its recipe changed.
set -euo pipefail
cd "$(dirname "$0")/../.."
export VM_NAME=powercut-vm
trap 'bash scripts/lab/vm.sh down >/dev/null 2>&1 || :' EXIT
bash scripts/lab/vm_image.sh
.venv/bin/python tests/powercut/powercut.py --cuts "${CUTS:-3}" "$@"
