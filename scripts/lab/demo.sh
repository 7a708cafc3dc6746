#!/usr/bin/env bash
# make demo, after make lab: the survey, the policy (site.yml), the facts and the demo's benchmark on the built-in
# lab, each playbook's output on the terminal and in build/demo/<playbook>.log, then a recap of at most 25 lines
# (scripts/lab/recap.py): what each host has, whether the policy run changed it, the benchmark's headline and the
# reports' paths. DEMO_BENCHMARK_ARGS: the benchmark's arguments (the Makefile's DEMO_BENCHMARK).
set -euo pipefail
cd "$(dirname "$0")/../.."
logs=build/demo
rm -rf "$logs"
mkdir -p "$logs/hosts"
began=$SECONDS
play() {  # play NAME ARGS...: one playbook of the lab, its output kept
  local name=$1
  shift
  ansible-playbook -i inventories/lab "$@" 2>&1 | tee "$logs/$name.log"
  return "${PIPESTATUS[0]}"
}
play survey playbooks/survey.yml
play site playbooks/site.yml
play facts playbooks/facts.yml
# The Makefile's DEMO_BENCHMARK, one argument per line (its -e holds spaces).
mapfile -t bench_args < <(printf '%s' "${DEMO_BENCHMARK_ARGS:-}" | .venv/bin/python -c 'import shlex, sys; print("\n".join(shlex.split(sys.stdin.read())))')
play benchmark playbooks/benchmark.yml "${bench_args[@]}"
# The recap reads each host's RAM mounts again, quietly, then the logs and the newest reports.
ansible-playbook -i inventories/lab scripts/lab/recap.yml -e "recap_dir=$PWD/$logs/hosts" > "$logs/recap-facts.log" 2>&1 \
  || echo "demo: could not read the hosts again for the recap (log: $logs/recap-facts.log)"
.venv/bin/python scripts/lab/recap.py --logs "$logs" --seconds $((SECONDS - began))
