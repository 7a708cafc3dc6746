#!/usr/bin/env bash
# Makes this checkout importable as the collection ramdisk.provision: Ansible finds collections only
# under .../ansible_collections/<namespace>/<name>. Beside it, the ansible.posix that galaxy.yml asks for.
set -euo pipefail
cd "$(dirname "$0")/../.."
link=.cache/collections/ansible_collections/ramdisk/provision
mkdir -p "$(dirname "$link")"
[[ -L $link ]] || ln -sfn ../../../.. "$link"

# ansible.posix 2.2.0 is the first whose mount module no longer imports ansible.module_utils._text nor passes
# warnings to exit_json, both deprecated by ansible-core 2.20 and removed in 2.23/2.24; the ansible package in
# .venv (12.x, the last for Python 3.11) ships 2.1.0. No Galaxy here: the collection is read out of the wheel of
# the ansible package that ships it (downloaded, not installed), into .cache/collections-deps, which the tests and
# the tarball lab put before the ansible package's own collections. community.general stays the package's.
POSIX_FROM=ansible==14.5.0
deps=.cache/collections-deps
stamp=$deps/.from
if [[ ! -f $stamp || $(cat "$stamp") != "$POSIX_FROM" ]]; then
  rm -rf "$deps" .cache/wheels/ansible-*.whl
  mkdir -p .cache/wheels
  .venv/bin/python -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version 3.13 --dest .cache/wheels "$POSIX_FROM"
  .venv/bin/python - .cache/wheels/ansible-*.whl "$deps" << 'PYTHON'
import sys, zipfile
wheel, target = sys.argv[1:]
with zipfile.ZipFile(wheel) as archive:
    names = [n for n in archive.namelist() if n.startswith('ansible_collections/ansible/posix/')]
    archive.extractall(target, names)
print('link_collection: ansible.posix from %s: %d files in %s' % (wheel.rsplit('/', 1)[-1], len(names), target))
PYTHON
  rm -f .cache/wheels/ansible-*.whl
  echo "$POSIX_FROM" > "$stamp"
fi
posix=.cache/collections/ansible_collections/ansible
[[ -L $posix ]] || ln -sfn ../../collections-deps/ansible_collections/ansible "$posix"
