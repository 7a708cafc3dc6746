#!/usr/bin/env bash
# Prints the virtualenv that runs ansible-core X.Y, making it first when needed: .venv when it has the
# very version requirements/sanity-core-X.Y.txt pins, else .cache/venv-core-X.Y from that file (without
# a file, the newest X.Y.* from PyPI). sanity.sh and tarball_lab.sh share these venvs.
# Usage: scripts/test/core_venv.sh X.Y   (the venv's path, relative to the repo, on stdout; progress on stderr)
set -euo pipefail
cd "$(dirname "$0")/../.."

PYTHON_VERSION=3.11
core=${1:-}
[[ $core =~ ^2\.[0-9]+$ ]] || { echo "core_venv: wants a version such as 2.17" >&2; exit 2; }

pins=requirements/sanity-core-$core.txt
pinned=
if [[ -f $pins ]]; then
  pinned=$(sed -nE 's/^ansible-core==([0-9][^ ;#]*).*/\1/p' "$pins")
  [[ -n $pinned ]] || { echo "core_venv: $pins does not pin ansible-core==X.Y.Z" >&2; exit 2; }
else
  echo "core_venv: no $pins; taking the newest ansible-core $core.* from PyPI" >&2
fi
dev_core=$(.venv/bin/python -c 'import ansible; print(ansible.__version__)' 2> /dev/null || true)
if [[ -n $pinned && $pinned == "$dev_core" ]]; then
  echo .venv
  exit 0
fi

venv=.cache/venv-core-$core
stamp=$venv/.requirements.sha256
want=$(if [[ -f $pins ]]; then sha256sum "$pins" | cut -d' ' -f1; else echo "newest $core"; fi)
if [[ ! -x $venv/bin/ansible-playbook || ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
  echo "core_venv: creating $venv with ansible-core ${pinned:-$core.* (newest)}" >&2
  rm -rf "$venv"
  "python$PYTHON_VERSION" -m venv "$venv"
  if [[ -f $pins ]]; then
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$pins" >&2
  else
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "ansible-core==$core.*" >&2
  fi
  echo "$want" > "$stamp"
fi
echo "$venv"
