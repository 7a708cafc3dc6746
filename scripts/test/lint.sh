#!/usr/bin/env bash
# Lints the repo offline: yamllint (.yamllint), antsibull-changelog lint plus a release preview of the
# fragments (scripts/test/changelog.sh), then ansible-lint (.ansible-lint, profile production).
# Runs every step, then fails if any failed.
set -euo pipefail
cd "$(dirname "$0")/../.."

started=$SECONDS
export PATH=$PWD/.venv/bin:$PATH
[[ -t 1 ]] || export NO_COLOR=1
# ansible-lint resolves ramdisk.provision.* (our roles, modules) through this link to the checkout;
# offline it does not install the collection itself.
bash scripts/lab/link_collection.sh
export ANSIBLE_COLLECTIONS_PATH=$PWD/.cache/collections${ANSIBLE_COLLECTIONS_PATH:+:$ANSIBLE_COLLECTIONS_PATH}

failed=()
step() {
  local name=$1 t0=$SECONDS
  shift
  echo "lint: $name"
  if "$@"; then
    echo "lint: $name passed ($((SECONDS - t0)) s)"
  else
    echo "lint: $name FAILED ($((SECONDS - t0)) s)"
    failed+=("$name")
  fi
}

step yamllint yamllint -f parsable .
# antsibull-changelog lint, then a release preview of the fragments on a scratch copy (repo untouched).
step "antsibull-changelog" bash scripts/test/changelog.sh
step ansible-lint ansible-lint --offline

if ((${#failed[@]})); then
  echo "lint: FAILED: ${failed[*]} ($((SECONDS - started)) s)"
  exit 1
fi
echo "lint: PASSED ($((SECONDS - started)) s)"
