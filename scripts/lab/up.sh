#!/usr/bin/env bash
# `make lab`: installs what the lab needs and brings it up, as fast as a fresh machine allows. The
# Debian packages come first (docker, debootstrap); then the virtualenv and the lab's images are made at
# the same time (one waits on PyPI, the other on Debian's mirror and dpkg); then the containers start.
# Only the images the lab inventory names are built here; the tests build the others.
set -euo pipefail
cd "$(dirname "$0")/../.."
start=$SECONDS

bash scripts/bootstrap.sh --apt-only
bash scripts/lab/dockerd.sh
venv_log=$(mktemp /var/tmp/ramdisk-lab-venv.XXXXXX.log)
bash scripts/bootstrap.sh --venv-only >"$venv_log" 2>&1 &
venv_pid=$!
images_rc=0
bash scripts/lab/images.sh bookworm trixie bookworm-postgresql trixie-build || images_rc=$?
if ! wait "$venv_pid"; then
  tail -n 20 "$venv_log" >&2
  echo "up.sh: the virtualenv failed; its log's end is above ($venv_log)" >&2
  exit 1
fi
cat "$venv_log"
rm -f "$venv_log"
((images_rc == 0)) || exit "$images_rc"
bash scripts/lab/link_collection.sh
echo "up.sh: tools and images ready in $((SECONDS - start)) s"
.venv/bin/ansible-playbook -i inventories/lab scripts/lab/lab.yml
