#!/usr/bin/env bash
# Every test suite, in two lanes that run at the same time, so `make test` stays well under CI's limit on a
# machine with 2 cores: most of a molecule scenario's time is spent waiting on containers, not computing.
#   lane 1: lint, unit, hostile, sanity, build, tarball-lab, ee, then the VM scenario (qemu, about 19 minutes)
#   lane 2: the container scenarios of molecule/, one after the other (they share this machine's kernel)
# Each suite writes its whole output to build/test/<suite>.log; the terminal gets one line per suite, and the
# last 150 lines of a failed suite's log. A failed suite stops its lane; the other lane runs to its end, so one
# run shows every failure. Run after `make setup` (the Makefile's `test` target does it).
# Usage: scripts/test/all.sh [--scenarios "a b ..."]   (the container scenarios; all of molecule/ but vm if none)
set -euo pipefail
cd "$(dirname "$0")/../.."
started=$SECONDS
logs=build/test
rm -rf "$logs"
mkdir -p "$logs"

scenarios=
if [[ ${1:-} == --scenarios ]]; then
  scenarios=$2
else
  scenarios=$(find molecule -mindepth 2 -maxdepth 2 -name molecule.yml -printf '%h\n' | xargs -n1 basename | grep -vx vm | sort | xargs)
fi

# What both lanes need, once: the container engine and the lab images (both lanes start containers).
bash scripts/lab/dockerd.sh > "$logs/images.log" 2>&1
if ! bash scripts/lab/images.sh >> "$logs/images.log" 2>&1; then
  tail -n 60 "$logs/images.log"
  echo "test: FAILED: the lab images (log: $logs/images.log)"
  exit 1
fi
echo "test: lab images ready ($((SECONDS - started)) s)"

# One suite: its command's output into its log, one line to the terminal. Returns the command's status.
suite() {
  local name=$1
  shift
  local began=$SECONDS
  if "$@" > "$logs/$name.log" 2>&1; then
    echo "test: $name passed ($((SECONDS - began)) s)"
    echo "$name" >> "$logs/passed"
  else
    echo "test: $name FAILED after $((SECONDS - began)) s; the end of $logs/$name.log:"
    tail -n 150 "$logs/$name.log" | sed "s/^/test: [$name]   /"
    echo "$name" >> "$logs/failed"
    return 1
  fi
}

lane1() {
  suite lint bash scripts/test/lint.sh &&
    suite unit .venv/bin/python -m pytest tests/unit -q &&
    suite hostile bash scripts/test/hostile.sh &&
    suite sanity bash scripts/test/sanity.sh --all &&
    suite build bash scripts/test/build.sh &&
    suite tarball-lab bash scripts/test/tarball_lab.sh --all &&
    suite ee bash scripts/test/ee.sh &&
    suite vm-image bash scripts/lab/vm_image.sh &&
    suite molecule-vm bash scripts/test/molecule.sh vm
}

lane2() {
  local scenario
  for scenario in $scenarios; do
    suite "molecule-$scenario" bash scripts/test/molecule.sh "$scenario" || return 1
  done
}

lane1 &
one=$!
lane2 &
two=$!
wait "$one" || true
wait "$two" || true

passed=$(wc -l < "$logs/passed" 2> /dev/null || echo 0)
if [[ -s $logs/failed ]]; then
  echo "test: FAILED: $(xargs < "$logs/failed") ($passed passed; logs in $logs/, $((SECONDS - started)) s)"
  exit 1
fi
echo "test: lint, unit, hostile, sanity, build, tarball-lab, ee and the molecule scenarios ($scenarios vm) all passed"
echo "suites: $passed passed, 0 failed ($((SECONDS - started)) s; logs in $logs/)"
