#!/usr/bin/env bash
# make demo-test: the README's first command as a new user runs it, on the built-in lab, with the package lock held.
# 1) Another process holds dpkg's frontend lock for the first 20 s (as a fresh cloud machine's boot-time apt run
#    does); `make demo` must pass (its package step waits for the lock when it has packages to install: after
#    make setup it has none, and the apt-lock suite shows the wait itself). The demo's benchmark is cut to one RAM path and
#    one fio job, run twice (DEMO_BENCHMARK), so that the front door costs minutes, not ten.
# 2) The demo's last 25 lines are its recap: the heading, each lab host with its RAM mounts and what site.yml
#    changed, the benchmark's headline for lab-build, the survey's verdict, and both reports' paths, which exist.
# 3) site.yml again on the lab changes nothing on any host.
# The lab is left as found: taken down again (make lab-down) when it was not up before.
# Exits 1 when a property does not hold, 2 when the test cannot run.
set -euo pipefail
cd "$(dirname "$0")/../.."
started=$SECONDS
out=build/demo-test
rm -rf "$out"
mkdir -p "$out"
die() { echo "demo-test: $*" >&2; exit 2; }
((EUID == 0)) || die "run as root: the lab's containers and disks need it"
# What the Makefile exports, for the site.yml run after the demo.
export PATH=$PWD/.venv/bin:$PATH ANSIBLE_CONFIG=$PWD/scripts/ansible.cfg ANSIBLE_COLLECTIONS_PATH=$PWD/.cache/collections

hosts=(lab-build lab-cache lab-db)
was_up=0
docker ps -a --format '{{.Names}}' 2>/dev/null | grep -qx lab-build && was_up=1

lock=/var/lib/dpkg/lock-frontend
holder=
# shellcheck disable=SC2317  # runs from the EXIT trap
cleanup() {
  local rc=$?
  if [[ -n $holder ]]; then kill "$holder" 2>/dev/null || true; fi
  if ((was_up == 0)); then
    make --no-print-directory lab-down > "$out/lab-down.log" 2>&1 || echo "demo-test: make lab-down failed (log: $out/lab-down.log)" >&2
  fi
  exit "$rc"
}
trap cleanup EXIT

if [[ -e $lock ]]; then
  # dpkg's own lock, taken as apt takes it (an fcntl lock), for 20 s.
  python3 -c 'import fcntl, sys, time
f = open(sys.argv[1], "r+"); fcntl.lockf(f, fcntl.LOCK_EX); print("held", flush=True); time.sleep(20)' "$lock" \
    > "$out/holder.log" 2>&1 &
  holder=$!
  for _ in $(seq 50); do grep -q held "$out/holder.log" 2>/dev/null && break; sleep 0.1; done
  echo "demo-test: dpkg's lock held by pid $holder for 20 s"
fi

# As the Makefile's DEMO_BENCHMARK is written: the JSON in single quotes.
bench="--limit lab-build -e '{\"benchmark_targets\": [{\"path\": \"/var/cache/lab-build\", \"label\": \"build\"}], \"benchmark_tests\": [\"fio\"], \"benchmark_fio_jobs\": [\"fsync\"], \"benchmark_max_runs\": 5}'"
echo "demo-test: make demo (its output: $out/demo.log)"
set +e
make --no-print-directory demo DEMO_BENCHMARK="$bench" > "$out/demo.log" 2>&1
rc=$?
set -e
problems=()
((rc == 0)) || problems+=("make demo exited $rc")
tail -n 25 "$out/demo.log" > "$out/last25.txt"
echo "demo-test: the demo's last 25 lines:"
sed 's/^/  | /' "$out/last25.txt"

has() { grep -qE "$1" "$out/last25.txt" || problems+=("the last 25 lines hold no line matching '$1' ($2)"); }
has '^== make demo: what happened \(' "the recap's heading"
for host in "${hosts[@]}"; do
  has "^  $host +(no change|changed [0-9]+) +/tmp tmpfs [0-9.]+ [KMG]iB" "$host's mounts and what site.yml changed"
done
has '^  lab-build: RAM ' "the benchmark's headline for lab-build"
has '^Survey: /tmp fits in half of RAM' "the survey's verdict"
for report in survey benchmark; do
  path=$(sed -n "s/^  $report: *//p" "$out/last25.txt")
  if [[ -z $path ]]; then
    problems+=("the last 25 lines name no $report report")
  elif [[ ! -s $path ]]; then
    problems+=("the $report report named, $path, is not there")
  fi
done

echo "demo-test: site.yml again (its output: $out/site-again.log)"
if ansible-playbook -i inventories/lab playbooks/site.yml > "$out/site-again.log" 2>&1; then
  for host in "${hosts[@]}"; do
    grep -qE "^$host +: ok=[0-9]+ +changed=0 +unreachable=0 +failed=0" "$out/site-again.log" ||
      problems+=("site.yml again changed or failed on $host: $(grep -E "^$host +:" "$out/site-again.log" | tr -s ' ')")
  done
else
  problems+=("site.yml again failed (see $out/site-again.log)")
fi

if ((${#problems[@]})); then
  printf 'demo-test: FAIL: %s\n' "${problems[@]}"
  echo "demo-test: $((SECONDS - started)) s"
  exit 1
fi
echo "demo-test: passed: make demo, with dpkg's lock held for its first 20 s, ended with its recap; site.yml again changed nothing ($((SECONDS - started)) s)"
