#!/usr/bin/env bash
# Every test suite, on two lanes that run at the same time and take the next suite from one queue, longest
# first, so both lanes end close together on a machine with 2 cores (a molecule scenario mostly waits on its
# containers, the VM on qemu). The queue's order comes from each suite's time in CI's runs (EXPECTED below).
# Suites that need another first run as one item: build, then tarball-lab; vm-image, then molecule-vm.
# Each suite writes its whole output to build/test/<suite>.log; the terminal gets one line per suite, and the
# last 150 lines of a failed suite's log. A failed suite does not stop the others, so one run shows every failure.
# At the end: each suite's time, each lane's busy and idle time, the first lines of each failed suite that say
# what failed, the total. Run after `make setup`.
# Usage: scripts/test/all.sh [--scenarios "a b ..."]   (the container scenarios; all of molecule/ but vm if none)
#        LANES=N for another number of lanes (2).
set -euo pipefail
cd "$(dirname "$0")/../.."
started=$SECONDS
logs=build/test
rm -rf "$logs"
mkdir -p "$logs"
lanes=${LANES:-2}
[[ $lanes =~ ^[1-9]$ ]] || { echo "test: LANES must be 1 to 9, not '$lanes'" >&2; exit 2; }

scenarios=
if [[ ${1:-} == --scenarios ]]; then
  scenarios=$2
else
  scenarios=$(find molecule -mindepth 2 -maxdepth 2 -name molecule.yml -printf '%h\n' | xargs -n1 basename | grep -vx vm | sort | xargs)
fi

# Seconds each item took in a whole run (39cada7, 2026-11-28), for the queue's order only (an unknown suite counts as 300).
declare -A EXPECTED=([vm-image+molecule-vm]=470 [build+tarball-lab]=775 [sanity]=850 [hostile]=400
                     [molecule-benchmark]=545 [molecule-metrics]=115 [molecule-zram]=115 [molecule-tmpfs_ramfs]=90
                     [molecule-database]=75 [molecule-policy]=55 [molecule-tmpfs_absent]=55 [molecule-survey]=45
                     [molecule-tmpfs_invalid]=30 [unit]=160 [lint]=45 [transaction]=440
                     [transaction-persist]=340 [transaction-powercut]=1300 [log]=45 [transaction-persist-services]=10
                     [ee]=5 [apt-lock]=30 [demo]=75 [powercut]=620 [local-user]=115)
# The command of each suite.
declare -A COMMAND=([lint]="bash scripts/test/lint.sh" [unit]=".venv/bin/python -m pytest tests/unit -q"
                    [hostile]="bash scripts/test/hostile.sh" [transaction]="bash scripts/test/transaction.sh"
                    [transaction-persist]="bash scripts/test/transaction_persist.sh"
                    [transaction-powercut]="bash scripts/test/powercut_matrix.sh --stride 2"
                    [log]="bash scripts/test/log_purpose.sh"
                    [transaction-persist-services]="make transaction-persist-services"
                    [sanity]="bash scripts/test/sanity.sh --all"
                    [build]="bash scripts/test/build.sh" [tarball-lab]="bash scripts/test/tarball_lab.sh --all"
                    [ee]="bash scripts/test/ee.sh" [apt-lock]="bash scripts/test/apt_lock.sh" [demo]="bash scripts/test/demo.sh" [vm-image]="bash scripts/lab/vm_image.sh"
                    [molecule-vm]="bash scripts/test/molecule.sh vm" [powercut]="bash scripts/test/powercut.sh"
                    [local-user]="bash scripts/test/local_user.sh")
items=(lint unit hostile transaction transaction-persist transaction-powercut transaction-persist-services log sanity build+tarball-lab ee apt-lock demo vm-image+molecule-vm powercut local-user)
for scenario in $scenarios; do
  COMMAND[molecule-$scenario]="bash scripts/test/molecule.sh $scenario"
  items+=("molecule-$scenario")
done
for item in "${items[@]}"; do
  printf '%s %s\n' "${EXPECTED[$item]:-300}" "$item"
done | sort -k1,1nr -k2,2 | cut -d' ' -f2 > "$logs/queue"

# What every lane needs, once: the container engine and the lab images.
bash scripts/lab/dockerd.sh > "$logs/images.log" 2>&1
if ! bash scripts/lab/images.sh >> "$logs/images.log" 2>&1; then
  tail -n 60 "$logs/images.log"
  echo "test: FAILED: the lab images (log: $logs/images.log)"
  exit 1
fi
echo "test: lab images ready ($((SECONDS - started)) s); $lanes lanes, queue: $(xargs < "$logs/queue")"

# The next item of the queue (empty when there is none), taken under a lock: lanes pop at the same time.
pop() {
  local fd item
  exec {fd}>> "$logs/queue.lock"
  flock "$fd"
  item=$(head -n 1 "$logs/queue")
  sed -i '1d' "$logs/queue"
  exec {fd}>&-
  printf '%s' "$item"
}

# One suite: its command's output into its log, one line to the terminal. Returns the command's status.
suite() {
  local lane=$1 name=$2 began=$SECONDS
  # The command is one of COMMAND's fixed strings above; word splitting makes its arguments.
  # shellcheck disable=SC2086
  if ${COMMAND[$name]} > "$logs/$name.log" 2>&1; then
    echo "test: [lane $lane] $name passed ($((SECONDS - began)) s)"
    echo "$name $((SECONDS - began)) passed" >> "$logs/times"
  else
    echo "test: [lane $lane] $name FAILED after $((SECONDS - began)) s; the end of $logs/$name.log:"
    tail -n 150 "$logs/$name.log" | sed "s/^/test: [$name]   /"
    echo "$name $((SECONDS - began)) FAILED" >> "$logs/times"
    echo "$name" >> "$logs/failed"
    return 1
  fi
}

lane() {
  local lane=$1 began=$SECONDS busy=0 item name t0
  while item=$(pop) && [[ -n $item ]]; do
    t0=$SECONDS
    IFS=+ read -ra names <<< "$item"
    for name in "${names[@]}"; do
      # A suite whose first part failed is not run; the first part's failure says why.
      suite "$lane" "$name" || { [[ $name == "${names[-1]}" ]] || echo "test: [lane $lane] not run: ${item#*+} (after $name failed)"; break; }
    done
    busy=$((busy + SECONDS - t0))
  done
  echo "$lane $busy $((SECONDS - began))" >> "$logs/lanes"
}

lanes_began=$SECONDS
pids=()
for ((n = 1; n <= lanes; n++)); do
  lane "$n" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || true; done
wall=$((SECONDS - lanes_began))

echo "test: suites by time: $(sort -k2,2nr "$logs/times" | awk '{ printf "%s%s %s s", sep, $1, $2; sep = ", " }')"
while read -r n busy _; do
  echo "test: lane $n busy $busy s, idle $((wall - busy)) s of the lanes' $wall s"
done < <(sort -n "$logs/lanes")
passed=$(grep -c ' passed$' "$logs/times" || true)
if [[ -s $logs/failed ]]; then
  # CI shows only the end of this output: each failed suite's first lines that say what failed come last.
  while read -r name; do
    echo "test: what failed in $name (the first such lines of $logs/$name.log):"
    grep -m 20 -E 'FAIL|CHANGED|fatal:|Error|error:|expected:|got:|changed:|undone:|Traceback' "$logs/$name.log" \
      | cut -c1-300 | sed "s/^/test: [$name]   /" || echo "test: [$name]   (no such line; see the log's end above)"
  done < "$logs/failed"
  echo "test: FAILED: $(xargs < "$logs/failed") ($passed passed; logs in $logs/, $((SECONDS - started)) s)"
  exit 1
fi
echo "test: lint, unit, hostile, transaction, transaction-persist, transaction-powercut, transaction-persist-services, log, sanity, build, tarball-lab, ee, apt-lock, demo, powercut, local-user and the molecule scenarios ($scenarios vm) all passed"
echo "suites: $passed passed, 0 failed (total $((SECONDS - started)) s, of which the lab images $((lanes_began - started)) s; logs in $logs/)"
