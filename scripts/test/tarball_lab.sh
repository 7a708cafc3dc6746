#!/usr/bin/env bash
# The built tarball, installed into an empty collections path, runs the lab playbooks by their
# collection names (ramdisk.provision.site, ...) against lab containers of its own, so a `make demo`
# lab that is up is left alone. What it checks, on every core:
#   site (first run), site again (changed=0), the mounts the lab policies ask for on each host, facts,
#   rollback, that every path of the policies is mounted as it was before site, and that no deprecation
#   warning comes from the collection's own code (one from a dependency is listed, see docs);
# and on the oldest and the newest core (--all), or with --full: tmp_on_tmpfs (changed=0 after site), the
#   survey, and a small benchmark (report and data on the controller; the molecule benchmark scenario
#   proves the role's every test and figure, on .venv's core).
# Usage: scripts/test/tarball_lab.sh [--core X.Y | --all] [--full]
#   (none)      with the ansible-core of .venv
#   --core X.Y  with ansible-core X.Y, from the venv scripts/test/core_venv.sh gives (the one sanity uses;
#               2.20 and later run on Debian 13's Python in the controller container)
#   --all       every requirements/sanity-core-*.txt at once, each on its own containers (pkg217-lab-*, ...)
# The lab containers are always driven by .venv's ansible; ansible.posix, community.general and
# community.docker come from the ansible package in .venv. Run `make build` first.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
started=$SECONDS
export ANSIBLE_CONFIG=${ANSIBLE_CONFIG:-$repo/scripts/ansible.cfg}

core=
all=
full=
while (($#)); do
  case $1 in
    --core)
      [[ $# -ge 2 && $2 =~ ^2\.[0-9]+$ ]] || { echo "tarball-lab: --core wants a version such as 2.17" >&2; exit 2; }
      core=$2
      shift 2
      ;;
    --all) all=1; shift ;;
    --full) full=1; shift ;;
    -h | --help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "tarball-lab: unknown argument $1" >&2; exit 2 ;;
  esac
done

version=$(.venv/bin/python -c 'import yaml; print(yaml.safe_load(open("galaxy.yml"))["version"])')
tarball=$repo/build/ramdisk-provision-$version.tar.gz
[[ -f $tarball ]] || { echo "tarball-lab: FAILED: $tarball is missing (run make build first)"; exit 1; }

if [[ -n $all ]]; then
  [[ -z $core ]] || { echo "tarball-lab: give --core or --all, not both" >&2; exit 2; }
  mapfile -t cores < <(find requirements -maxdepth 1 -name 'sanity-core-*.txt' | sed -E 's/.*sanity-core-([0-9.]+)\.txt$/\1/' | sort -V)
  ((${#cores[@]})) || { echo "tarball-lab: no requirements/sanity-core-*.txt" >&2; exit 2; }
  # The venvs first, one at a time, so no two pip runs race; then every core at once.
  for each in "${cores[@]}"; do bash scripts/test/core_venv.sh "$each" > /dev/null; done
  declare -A pid=()
  for each in "${cores[@]}"; do
    if [[ $each == "${cores[0]}" || $each == "${cores[-1]}" ]]; then
      bash "$0" --core "$each" --full &
    else
      bash "$0" --core "$each" &
    fi
    pid[$each]=$!
  done
  summary=()
  failed=0
  for each in "${cores[@]}"; do
    if wait "${pid[$each]}"; then
      summary+=("ansible-core $each: passed")
    else
      summary+=("ansible-core $each: FAILED")
      failed=$((failed + 1))
    fi
  done
  printf 'tarball-lab: %s\n' "${summary[@]}"
  if ((failed)); then
    echo "tarball-lab: FAILED on $failed of ${#cores[@]} ansible-core versions ($((SECONDS - started)) s)"
    exit 1
  fi
  echo "tarball-lab: PASSED on ansible-core ${cores[*]} ($((SECONDS - started)) s)"
  exit 0
fi

if [[ -n $core ]]; then
  venv=$repo/$(bash scripts/test/core_venv.sh "$core")
else
  venv=$repo/.venv
fi
core_version=$("$venv/bin/python" -c 'import ansible; print(ansible.__version__)')
core=${core:-$(cut -d. -f1,2 <<< "$core_version")}
# Every message names the core: with --all, the runs print side by side.
say() { echo "tarball-lab [$core]: $*"; }
# The collections the tarball depends on: ansible.posix 2.2 from .cache/collections-deps (link_collection.sh),
# community.general (and community.docker, for the lab's connection) from the ansible package in .venv.
purelib=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
deps=$repo/.cache/collections-deps:$purelib
[[ -d $repo/.cache/collections-deps/ansible_collections/ansible/posix ]] ||
  { say "FAILED: no ansible.posix in .cache/collections-deps (run scripts/lab/link_collection.sh)"; exit 1; }
lab_playbook() { ANSIBLE_COLLECTIONS_PATH=$deps "$repo/.venv/bin/ansible-playbook" "$@"; }
# The playbooks' output stays here, one log per playbook.
logs=$repo/build/tarball-lab/$core
rm -rf "$logs"
mkdir -p "$logs"
# Under the repository: a core run in the controller container sees only the repository.
tmp=$(mktemp -d "$repo/build/tarball-lab/.work-$core.XXXXXX")
inventory=$tmp/inventory
prefix=pkg${core//./}-
down() {
  lab_playbook -i "$inventory" "$repo/scripts/lab/lab.yml" -e lab_state=absent > /dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap down EXIT

say "installing $(basename "$tarball") offline into an empty collections path with ansible-core $core_version"
# Only that path: where make's collections path (the checkout) is seen, the install is skipped as done.
ANSIBLE_COLLECTIONS_PATH=$tmp "$venv/bin/ansible-galaxy" collection install --offline --no-deps -p "$tmp" "$tarball" > "$logs/install.log" 2>&1 ||
  { sed 's/^/  /' "$logs/install.log"; say "FAILED: ansible-galaxy collection install"; exit 1; }
[[ -f $tmp/ansible_collections/ramdisk/provision/MANIFEST.json ]] ||
  { sed 's/^/  /' "$logs/install.log"; say "FAILED: the tarball was not installed into $tmp"; exit 1; }

# The lab inventory and its group policies, with every host renamed to $prefix<host>: containers of
# their own, so a lab that `make demo` brought up is not touched.
cp -r inventories/lab "$inventory"
.venv/bin/python - "$inventory/hosts.yml" "$prefix" <<'PYTHON'
import sys, yaml
path, prefix = sys.argv[1:]
def rename(group):
    if group.get('hosts'):
        group['hosts'] = {prefix + name: values for name, values in group['hosts'].items()}
    for child in (group.get('children') or {}).values():
        rename(child)
inventory = yaml.safe_load(open(path))
rename(inventory['all'])
open(path, 'w').write('---\n' + yaml.safe_dump(inventory, sort_keys=False))
PYTHON
mapfile -t hosts < <(.venv/bin/ansible-inventory -i "$inventory/hosts.yml" --list |
  .venv/bin/python -c 'import json,sys; print("\n".join(sorted(json.load(sys.stdin)["_meta"]["hostvars"])))')
((${#hosts[@]})) || { say "FAILED: no hosts in $inventory/hosts.yml"; exit 1; }

say "lab containers ${hosts[*]}"
# Fresh containers: any left by an interrupted run go first.
lab_playbook -i "$inventory" "$repo/scripts/lab/lab.yml" -e lab_state=absent > /dev/null 2>&1 || true
lab_playbook -i "$inventory" "$repo/scripts/lab/lab.yml" > "$logs/lab.log" 2>&1 ||
  { tail -n 40 "$logs/lab.log"; say "FAILED: the lab containers did not come up"; exit 1; }

# From an empty directory: nothing of the checkout can be picked up as a collection or a playbook.
work=$tmp/work
mkdir -p "$work"
cd "$work"

# Runs one playbook of the installed collection with the core under test; prints the recap. Each deprecation
# warning comes with its traceback (ansible-core 2.19 and later), which names the code that raised it.
play() {
  local label=$1; shift
  local began=$SECONDS
  if ! ANSIBLE_COLLECTIONS_PATH=$tmp:$deps ANSIBLE_DISPLAY_TRACEBACK=deprecated ANSIBLE_DEPRECATION_WARNINGS=true \
      "$venv/bin/ansible-playbook" -i "$inventory" "$@" > "$logs/$label.log" 2>&1; then
    tail -n 60 "$logs/$label.log" | sed "s/^/tarball-lab [$core]:   /"
    say "FAILED: $label (log: build/tarball-lab/$core/$label.log)"
    exit 1
  fi
  say "$label passed ($((SECONDS - began)) s)"
  sed -n '/^PLAY RECAP/,$p' "$logs/$label.log" | grep -E 'ok=' | sed "s/^/tarball-lab [$core]:   /"
}
# The sum of changed= over the recap of one log.
changed() {
  sed -n '/^PLAY RECAP/,$p' "$logs/$1.log" | grep -oE 'changed=[0-9]+' | awk -F= '{ sum += $2 } END { print sum + 0 }'
}

# What the lab's group policies ask for (inventories/lab/group_vars), read back with findmnt.
declare -A want=(
  ["${prefix}lab-build"]="/tmp=tmpfs /var/cache/lab-build=tmpfs /var/cache/lab-web=tmpfs /var/cache/lab-locks=ramfs"
  ["${prefix}lab-cache"]="/tmp=tmpfs /var/cache/lab-web=tmpfs /var/cache/lab-locks=ramfs"
  ["${prefix}lab-db"]="/tmp=tmpfs /var/lib/postgresql=tmpfs"
)
# Read from outside, through the container engine: not through the collection under test.
mounts_of() {
  docker exec "$1" findmnt -rn -o TARGET,FSTYPE,OPTIONS
}
# The line of findmnt for one path ("" when nothing is mounted there).
mount_line() {
  grep -E "^$2 " <<< "$1" || true
}
# before: records what is mounted at each path; applied: each path has its backend with nosuid,nodev;
# rolled back: each path is as it was before (Debian 13's own tmp.mount puts /tmp on tmpfs, for one).
declare -A before=()
check_mounts() {
  local when=$1 host pair path fstype out line bad=()
  for host in "${hosts[@]}"; do
    out=$(mounts_of "$host") || { echo "$out"; say "FAILED: cannot read the mounts of $host"; exit 1; }
    for pair in ${want[$host]:-}; do
      path=${pair%=*} fstype=${pair#*=}
      line=$(mount_line "$out" "$path")
      case $when in
        before) before[$host$path]=$line ;;
        applied)
          if [[ $line != "$path $fstype "* ]]; then bad+=("$host: $path is not $fstype (${line:-nothing mounted})"); continue; fi
          [[ $line == *nosuid* && $line == *nodev* ]] || bad+=("$host: $path lacks nosuid,nodev ($line)") ;;
        *)
          [[ $line == "${before[$host$path]}" ]] ||
            bad+=("$host: $path is '${line:-nothing mounted}', before site it was '${before[$host$path]:-nothing mounted}'") ;;
      esac
    done
  done
  if ((${#bad[@]})); then
    printf "tarball-lab [$core]:   %s\n" "${bad[@]}"
    say "FAILED: mounts $when"
    exit 1
  fi
  if [[ $when == before ]]; then return; fi
  say "mounts $when: as expected on ${hosts[*]}"
}
check_mounts before
play site ramdisk.provision.site
(($(changed site) > 0)) || { say "FAILED: site changed nothing on fresh containers"; exit 1; }
play site-again ramdisk.provision.site
(($(changed site-again) == 0)) || { say "FAILED: site run again changed $(changed site-again) tasks (should be 0)"; exit 1; }

check_mounts applied

play facts ramdisk.provision.facts

if [[ -n $full ]]; then
play tmp_on_tmpfs ramdisk.provision.tmp_on_tmpfs
(($(changed tmp_on_tmpfs) == 0)) || { say "FAILED: tmp_on_tmpfs after site changed $(changed tmp_on_tmpfs) tasks"; exit 1; }

# The report's charts need matplotlib in the Python that runs Ansible; a core's own venv has none.
charts=true
"$venv/bin/python" -c 'import matplotlib' 2> /dev/null || charts=false
# The survey, read-only, from the installed collection: its files land under the working directory.
play survey ramdisk.provision.survey -e survey_run_id=tarball -e survey_charts=$charts
(($(changed survey) == 0)) || { say "FAILED: the survey changed $(changed survey) tasks (it only reads)"; exit 1; }
for file in survey.csv survey.json report.md report.html; do
  [[ -s $work/survey-results/tarball/$file ]] || { say "FAILED: the survey left no survey-results/tarball/$file"; exit 1; }
done
grep -q "^pkg[0-9]*-lab-db," "$work/survey-results/tarball/survey.csv" || { say "FAILED: survey.csv has no row for lab-db"; exit 1; }

# The least rounds (a warm-up and 5) of dd, one fio job and the metadata test at a small scale on each host's /tmp
# against its disk, the two taking turns: this proves the packaged role and report work on this core. Every test's
# figures and spread (pgbench, the compile, the seeds profile too) are the molecule benchmark scenario's to check, so
# the hosts measure all at once here.
play benchmark ramdisk.provision.benchmark -e benchmark_run_id=tarball -e benchmark_charts=$charts -e benchmark_max_runs=5 \
  -e benchmark_one_host_at_a_time=false -e '{"benchmark_tests": ["dd", "fio", "metadata"], "benchmark_fio_jobs": ["fsync"]}' \
  -e '{"benchmark_targets": [{"path": "/tmp", "label": "tmp"}]}' \
  -e '{"benchmark_scale": {"size_bytes": 8388608, "fio_runtime": 1, "small_files": 20, "meta_seconds": 1}}'
results=$work/benchmark-results/tarball
for file in report.md results.csv runs.csv; do
  [[ -s $results/$file ]] || { find "$work" | head -40; say "FAILED: the benchmark left no $results/$file"; exit 1; }
done
# Every target of every host ran a warm-up and 5 rounds, taking turns with the other targets round by round.
turns=$("$venv/bin/python" - "$results" << 'EOF'
import glob, json, sys
bad = []
for path in sorted(glob.glob(sys.argv[1] + "/*/manifest.json")):
    manifest = json.load(open(path))
    labels = [t["label"] for t in manifest["targets"]]
    visits = []
    for probe in manifest["probes"]:
        visit = (probe["item"]["round"], probe["item"]["label"])
        if not visits or visits[-1] != visit:
            visits.append(visit)
    if visits != [(number, label) for number in range(6) for label in labels]:
        bad.append("%s: %s" % (path.split("/")[-2], visits))
print("; ".join(bad) if bad else "ok")
EOF
)
[[ $turns == ok ]] || { say "FAILED: the targets did not take turns round by round: $turns"; exit 1; }
say "benchmark results in the working directory (charts: $charts): $(find "$results" -maxdepth 1 -type f -printf '%f ')"
fi

play rollback ramdisk.provision.rollback
check_mounts "rolled back"

# Deprecation warnings are errors for the collection's own code; one from a dependency is listed.
if ! "$repo/.venv/bin/python" "$repo/scripts/test/deprecations.py" "$logs"/*.log > "$logs/deprecations.txt"; then
  sed "s/^/tarball-lab [$core]:   /" "$logs/deprecations.txt"
  say "FAILED: the collection's own code raised a deprecation warning (build/tarball-lab/$core/deprecations.txt)"
  exit 1
fi
say "$(tail -n 1 "$logs/deprecations.txt")"

ran="site, site again, facts${full:+, tmp_on_tmpfs, survey, benchmark} and rollback"
say "PASSED (the installed tarball ran $ran on ${#hosts[@]} lab hosts, $((SECONDS - started)) s)"
