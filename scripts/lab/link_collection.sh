#!/usr/bin/env bash
# Makes this checkout importable as the collection ramdisk.provision: Ansible finds collections only
# under .../ansible_collections/<namespace>/<name>.
set -euo pipefail
cd "$(dirname "$0")/../.."
link=.cache/collections/ansible_collections/ramdisk/provision
mkdir -p "$(dirname "$link")"
[[ -L $link ]] || ln -sfn ../../../.. "$link"
