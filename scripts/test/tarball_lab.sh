#!/usr/bin/env bash
# The built tarball, installed into an empty collections path, runs the lab playbooks by their
# collection names (ramdisk.provision.site, ...) against lab containers of its own, so a `make demo`
# lab that is up is left alone. What it checks:
#   site (first run), site again (changed=0), the mounts the lab policies ask for on each host,
#   facts, tmp_on_tmpfs (changed=0 after site), benchmark (report and data on the controller),
#   rollback, and that every path of the policies is mounted as it was before site.
# Run `make build` first (scripts/test/build.sh makes the tarball and checks it statically).
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
started=$SECONDS
export PATH=$repo/.venv/bin:$PATH

version=$(python -c 'import yaml; print(yaml.safe_load(open("galaxy.yml"))["version"])')
tarball=$repo/build/ramdisk-provision-$version.tar.gz
[[ -f $tarball ]] || { echo "tarball-lab: FAILED: $tarball is missing (run make build first)"; exit 1; }

tmp=$(mktemp -d)
inventory=$tmp/inventory
prefix=pkg-
down() {
  ANSIBLE_COLLECTIONS_PATH=$tmp ansible-playbook -i "$inventory" "$repo/scripts/lab/lab.yml" -e lab_state=absent > /dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap down EXIT

echo "tarball-lab: installing $tarball offline into an empty collections path"
export ANSIBLE_COLLECTIONS_PATH=$tmp
ansible-galaxy collection install --offline --no-deps -p "$tmp" "$tarball" > /dev/null

# The lab inventory and its group policies, with every host renamed to $prefix<host>: containers of
# their own, so a lab that `make demo` brought up is not touched.
cp -r inventories/lab "$inventory"
python - "$inventory/hosts.yml" "$prefix" <<'EOF'
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
EOF
mapfile -t hosts < <(ansible-inventory -i "$inventory" --list | python -c 'import json,sys; print("\n".join(sorted(json.load(sys.stdin)["_meta"]["hostvars"])))')

echo "tarball-lab: lab containers ${hosts[*]}"
# Fresh containers: any left by an interrupted run go first.
ansible-playbook -i "$inventory" "$repo/scripts/lab/lab.yml" -e lab_state=absent > /dev/null 2>&1 || true
ansible-playbook -i "$inventory" "$repo/scripts/lab/lab.yml" > "$tmp/lab.log" 2>&1 ||
  { tail -n 40 "$tmp/lab.log"; echo "tarball-lab: FAILED: the lab containers did not come up"; exit 1; }

# From an empty directory: nothing of the checkout can be picked up as a collection or a playbook.
work=$tmp/work
mkdir -p "$work"
cd "$work"

# Runs one playbook of the installed collection; prints the recap; keeps the output in $tmp/<label>.log.
play() {
  local label=$1; shift
  local began=$SECONDS
  if ! ansible-playbook -i "$inventory" "$@" > "$tmp/$label.log" 2>&1; then
    tail -n 60 "$tmp/$label.log" | sed 's/^/tarball-lab:   /'
    echo "tarball-lab: FAILED: $label"
    exit 1
  fi
  echo "tarball-lab: $label passed ($((SECONDS - began)) s)"
  sed -n '/^PLAY RECAP/,$p' "$tmp/$label.log" | grep -E 'ok=' | sed 's/^/tarball-lab:   /'
}
# The sum of changed= over the recap of one log.
changed() {
  sed -n '/^PLAY RECAP/,$p' "$tmp/$1.log" | grep -oE 'changed=[0-9]+' | awk -F= '{ sum += $2 } END { print sum + 0 }'
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
    out=$(mounts_of "$host") || { echo "$out"; echo "tarball-lab: FAILED: cannot read the mounts of $host"; exit 1; }
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
    printf 'tarball-lab:   %s\n' "${bad[@]}"
    echo "tarball-lab: FAILED: mounts $when"
    exit 1
  fi
  if [[ $when == before ]]; then return; fi
  echo "tarball-lab: mounts $when: as expected on ${hosts[*]}"
}
check_mounts before
play site ramdisk.provision.site
(($(changed site) > 0)) || { echo "tarball-lab: FAILED: site changed nothing on fresh containers"; exit 1; }
play site-again ramdisk.provision.site
(($(changed site-again) == 0)) || { echo "tarball-lab: FAILED: site run again changed $(changed site-again) tasks (should be 0)"; exit 1; }

check_mounts applied

play facts ramdisk.provision.facts
play tmp_on_tmpfs ramdisk.provision.tmp_on_tmpfs
(($(changed tmp_on_tmpfs) == 0)) || { echo "tarball-lab: FAILED: tmp_on_tmpfs after site changed $(changed tmp_on_tmpfs) tasks"; exit 1; }

play benchmark ramdisk.provision.benchmark -e benchmark_run_id=tarball
results=$work/benchmark-results/tarball
for file in report.md results.csv; do
  [[ -s $results/$file ]] || { find "$work" | head -40; echo "tarball-lab: FAILED: the benchmark left no $results/$file"; exit 1; }
done
echo "tarball-lab: benchmark results in the working directory: $(find "$results" -maxdepth 1 -type f -printf '%f ')"

play rollback ramdisk.provision.rollback
check_mounts "rolled back"

echo "tarball-lab: PASSED (the installed tarball ran site, site again, facts, tmp_on_tmpfs, benchmark and rollback on ${#hosts[@]} lab hosts, $((SECONDS - started)) s)"
