#!/usr/bin/env bash
# `molecule test` for each scenario given (all of molecule/ when none), one after the other: they share
# this machine's cores and some share instance names. Prints how long each took, so a slow scenario shows
# in CI's log, and stops at the first failure (the VM is shut down then: molecule's destroy may not run).
# Usage: scripts/test/molecule.sh [scenario ...]
set -euo pipefail
cd "$(dirname "$0")/../.."
if (($#)); then
  scenarios=("$@")
else
  mapfile -t scenarios < <(find molecule -mindepth 2 -maxdepth 2 -name molecule.yml -printf '%h\n' | xargs -n1 basename | sort)
fi
started=$SECONDS
times=()
for scenario in "${scenarios[@]}"; do
  echo "== molecule test -s $scenario"
  begun=$SECONDS
  if ! molecule test -s "$scenario"; then
    bash scripts/lab/vm.sh down || true
    printf 'molecule: %s\n' "${times[@]}" "$scenario: FAILED after $((SECONDS - begun)) s"
    exit 1
  fi
  times+=("$scenario: passed ($((SECONDS - begun)) s)")
done
printf 'molecule: %s\n' "${times[@]}"
echo "molecule: PASSED, ${#scenarios[@]} scenarios ($((SECONDS - started)) s)"
