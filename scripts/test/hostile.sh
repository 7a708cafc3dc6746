#!/usr/bin/env bash
# make hostile: every invalid and hostile request (tests/policies/invalid.yml, tests/policies/hostile.yml) runs
# through the entry role ramdisk.provision.ramdisk on this machine's own kernel, as root, in one
# ansible-playbook run (tests/hostile/hostile.yml); each must be refused (or only warn) and change nothing.
#
# The run happens in a mount namespace of its own (unshare --mount --propagation private) where /etc is a
# private copy (so /etc/fstab, units, tmpfiles and the roles' records are), /srv is an empty private
# directory (the cases' scratch paths, /srv/ramdisk-hostile/...), and /usr/local, /var/lib and /run are
# overlays whose writes stay in the test's directory: what a case mounts or writes never reaches the host.
# zram devices and swap are the kernel's, not the namespace's: each case's own are removed after it (they
# are recorded in the private /etc), and again here on the way out, even after a failure.
#
# HOSTILE_CASES=REGEX runs only the cases whose names match. Output: a table of every case, each failure
# with what was expected and what came, then the count; the full ansible log and the verdicts
# (verdicts.jsonl) stay in build/hostile/. Exits 1 when a case failed, 2 when the test itself could not run.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD

# In the namespace: make the private views, then run every case.
inside() {
  local work=$1
  mount --bind "$work/etc" /etc
  mount --bind "$work/srv" /srv
  local dir
  for dir in /usr/local /var/lib /run; do
    local name=${dir#/}
    name=${name//\//-}
    mount -t overlay overlay -o "lowerdir=$dir,upperdir=$work/$name/upper,workdir=$work/$name/work" "$dir"
  done
  # invalid.yml refuses ramfs over a live tmpfs at /run/lock, as the lab containers have it.
  mountpoint -q /run/lock || mount -t tmpfs -o mode=1777,size=5M tmpfs /run/lock
  export ANSIBLE_CONFIG=$repo/scripts/ansible.cfg
  export ANSIBLE_COLLECTIONS_PATH=$repo/.cache/collections
  export ANSIBLE_CALLBACK_PLUGINS=$repo/tests/hostile/callback_plugins
  export ANSIBLE_CALLBACKS_ENABLED=hostile_warnings${ANSIBLE_CALLBACKS_ENABLED:+,$ANSIBLE_CALLBACKS_ENABLED}
  export ANSIBLE_TASK_TIMEOUT=${HOSTILE_TASK_TIMEOUT:-120}
  export ANSIBLE_NOCOLOR=1
  export HOSTILE_WARNINGS_FILE=$work/warnings.jsonl
  "$repo/.venv/bin/ansible-playbook" -i localhost, -c local \
    -e "ansible_python_interpreter=$repo/.venv/bin/python" \
    -e "hostile_workdir=$work" -e "hostile_warnings_file=$HOSTILE_WARNINGS_FILE" \
    "$repo/tests/hostile/hostile.yml"
}

if [[ ${1:-} == --inside ]]; then
  inside "$2"
  exit
fi

die() { echo "hostile: $*" >&2; exit 2; }
((EUID == 0)) || die "run as root: the cases mount file systems and make zram devices"
[[ -x .venv/bin/ansible-playbook ]] || die "no .venv: run make setup first"
command -v unshare >/dev/null || die "unshare (util-linux) is missing"
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null || die "the kernel has no overlay file system"
bash scripts/lab/link_collection.sh

started=$SECONDS
# Each device as zramN@INODE (its sysfs directory's): a number the kernel reused for a device made since is told
# apart from the device that was there.
zram_list() { local d; for d in /sys/block/zram*; do [[ -e $d ]] && echo "${d##*/}@$(stat -L -c %i "$d")"; done; true; }

# Work directories of earlier runs that were killed before their clean-up.
for old in /var/tmp/ramdisk-hostile.*; do
  [[ -d $old && -f $old/pid ]] || continue
  kill -0 "$(cat "$old/pid")" 2>/dev/null || rm -rf --one-file-system "$old"
done

work=$(mktemp -d /var/tmp/ramdisk-hostile.XXXXXX)
echo $$ >"$work/pid"
zram_before=$(zram_list)
swaps_before=$(tail -n +2 /proc/swaps)

# zram devices this run made that are still there: each case removes its own, and names in zram-left those
# it could not; the roles' records in the private /etc name those of a case cut short. Those that were not
# there before the run: swap off, then remove.
# shellcheck disable=SC2317  # both run from the EXIT trap
remove_our_zram() {
  local device
  for device in $( (sed -n 's/^DEVICE=\(zram[0-9]*\)$/\1/p' "$work"/etc/ramdisk-provision/zram/*.conf 2>/dev/null
    cat "$work/zram-left" 2>/dev/null) | sort -u); do
    [[ -e /sys/block/$device ]] || continue
    grep -qx "$device@$(stat -L -c %i "/sys/block/$device")" <<<"$zram_before" && continue
    swapoff "/dev/$device" 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      echo "${device#zram}" >/sys/class/zram-control/hot_remove 2>/dev/null && break
      sleep 0.5
    done
    if [[ -e /sys/block/$device ]]; then
      echo "hostile: could not remove /dev/$device; run: echo ${device#zram} > /sys/class/zram-control/hot_remove" >&2
    else
      echo "hostile: removed /dev/$device, which this run made" >&2
    fi
  done
}

# shellcheck disable=SC2317
cleanup() {
  local rc=$?
  remove_our_zram
  local zram_after swaps_after
  zram_after=$(zram_list)
  swaps_after=$(tail -n +2 /proc/swaps)
  [[ $zram_after == "$zram_before" ]] ||
    echo "hostile: note: zram devices were [${zram_before//$'\n'/ }] and are [${zram_after//$'\n'/ }] (a device not recorded by this run is left alone)" >&2
  [[ $swaps_after == "$swaps_before" ]] || echo "hostile: note: /proc/swaps differs from before the run" >&2
  rm -rf --one-file-system "$work"
  exit "$rc"
}
trap cleanup EXIT

cp -a /etc "$work/etc"
# The lab containers have no postgres account, which invalid.yml's database case relies on.
for file in passwd group shadow gshadow; do
  [[ -f $work/etc/$file ]] && sed -i '/^postgres:/d' "$work/etc/$file"
done
mkdir -p "$work/srv" "$work"/{usr-local,var-lib,run}/{upper,work}

mkdir -p build/hostile
rm -f build/hostile/verdicts.jsonl build/hostile/skipped.json
log=build/hostile/playbook.log
echo "hostile: running the cases on this kernel in a private mount namespace (log: $log)"
set +e
HOSTILE_CASES=${HOSTILE_CASES:-} unshare --mount --propagation private -- bash "$0" --inside "$work" 2>&1 |
  tee "$log" | sed -un 's/^TASK \[Make the fixtures and record the host: \(.*\)\] \**$/  \1/p'
playbook_rc=${PIPESTATUS[0]}
set -e

cp "$work/verdicts.jsonl" build/hostile/ 2>/dev/null || : >build/hostile/verdicts.jsonl
[[ -f $work/skipped.json ]] && cp "$work/skipped.json" build/hostile/
echo
rc=0
.venv/bin/python tests/hostile/report.py build/hostile || rc=$?
echo "hostile: $((SECONDS - started)) s"
if [[ ! -f build/hostile/skipped.json ]]; then
  tail -n 40 "$log" >&2
  die "the test did not finish (ansible-playbook exit $playbook_rc); see $log"
fi
((playbook_rc == 0)) || { echo "hostile: ansible-playbook exited $playbook_rc; see $log" >&2; rc=2; }
exit "$rc"
