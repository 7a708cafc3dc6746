#!/usr/bin/env bash
# Installs what the lab and the tests need on a fresh Debian 12 machine (run as root).
# Idempotent: a second run only checks. Prints one line per step.
# Usage: scripts/bootstrap.sh [--test] [--apt-only | --venv-only]
#   --test       also what only the tests use: qemu for the VM scenario, promtool (Debian's prometheus)
#                for the alert rules' tests, chromium for the report's screenshot test
#   --apt-only   Debian packages only; --venv-only: the virtualenv only (make demo runs the two at once)
set -euo pipefail
cd "$(dirname "$0")/.."

test_tools=0 apt=1 venv=1
for arg in "$@"; do
  case $arg in
    --test) test_tools=1 ;;
    --apt-only) venv=0 ;;
    --venv-only) apt=0 ;;
    *) echo "bootstrap: unknown option '$arg' (--test, --apt-only, --venv-only)" >&2; exit 2 ;;
  esac
done

VENV=${VENV:-.venv}
# Python 3.11: ansible-core 2.19, the newest release that runs on it, is what the tools are pinned to.
PY=${PYTHON:-$(command -v python3.11 || command -v python3)}
APT_PACKAGES=(docker.io debootstrap fio rsync shellcheck python3-venv)
((test_tools)) && APT_PACKAGES+=(qemu-system-x86 qemu-utils openssh-client prometheus chromium)

missing=()
((apt)) || APT_PACKAGES=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "bootstrap: installing ${missing[*]} from Debian"
  export DEBIAN_FRONTEND=noninteractive
  # shellcheck source=scripts/lib/apt.sh
  source scripts/lib/apt.sh
  apt_get update -qq
  apt_get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

stamp="$VENV/.requirements.sha256"
want=$(sha256sum requirements/dev.txt | cut -d' ' -f1)
((venv)) || exit 0
if [[ ! -x $VENV/bin/python || ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
  echo "bootstrap: creating $VENV with the pinned tools (requirements/dev.txt)"
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q -r requirements/dev.txt
  echo "$want" > "$stamp"
fi
echo "bootstrap: tools ready in $VENV"
