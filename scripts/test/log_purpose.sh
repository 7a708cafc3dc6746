#!/usr/bin/env bash
# make test-log: the log purpose for real, in a systemd container of the lab's Debian 12 image (named
# logpurpose-<this shell's pid>, removed at exit). tests/log/apply.yml puts /var/log on a 64M tmpfs with purpose log,
# kept in /var/lib/ramdisk-backing/log, through the ramdisk role over the Docker connection; a second run changes
# nothing. Then tests/log/in_container.sh, in the container:
#   - journald writes numbered lines (logger) without a pause while SYNCS syncs run, each as the timer starts it;
#     after each, journalctl --verify passes on the backing's new copy of the journal, it holds every line logged
#     before the sync, and no active journal file (time per sync, journal files in the mount and in the copy);
#   - the time journalctl --sync and --rotate add to a sync;
#   - logrotate -f on a file in the mount, then on Debian's whole configuration;
#   - a clean reboot (systemctl poweroff, docker start): every line logged before it is back, the last sync copied
#     the active journal file (journald had left the mount), the restore ended before journald's flush and
#     systemd-tmpfiles; ramdisk-status shows the mount;
#   - a power cut (docker kill, docker start): every line logged before the last completed sync is back, and
#     journalctl --verify passes;
#   - state absent: /var/log on disk again with every line but those the power cut took, journald writing there,
#     no drop-in, no backing.
# --kill N,N,... (make test-log-kill) runs, instead, the role's run killed just before those journal writes of
# ramdisk_apply, each in a fresh container, then run again (about 35 s a point).
# IMAGE=ramdisk-lab/debian:13 runs it on Debian 13 (systemd 257); KEEP_CONTAINER=1 keeps the container of a failed
# run for a look inside.
# The logrotate package (not in the lab image) is fetched once with apt-get download into .cache/debs.
# Exits 1 when a property failed, 2 when the test itself could not run.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH=$PWD/.venv/bin:$PATH ANSIBLE_CONFIG=$PWD/scripts/ansible.cfg ANSIBLE_COLLECTIONS_PATH=$PWD/.cache/collections
IMAGE=${IMAGE:-ramdisk-lab/debian:12}
SYNCS=${SYNCS:-8}
started=$SECONDS
name=logpurpose-$$

die() { echo "test-log: $*" >&2; exit 2; }
fail() { echo "test-log: FAILED: $*" >&2; exit 1; }
[[ -x .venv/bin/python ]] || die "no .venv: run make setup first"
bash scripts/lab/dockerd.sh
docker image inspect "$IMAGE" >/dev/null 2>&1 || die "no lab image $IMAGE: run bash scripts/lab/images.sh bookworm"
bash scripts/lab/link_collection.sh
# .cache/debs is missing in a fresh clone: find fails there, and that is no error.
deb=$(find .cache/debs -name 'logrotate_*.deb' 2>/dev/null | sort | tail -n1 || :)
if [[ -z $deb ]]; then
  mkdir -p .cache/debs
  (cd .cache/debs && apt-get download logrotate) >/dev/null || die "apt-get download logrotate failed"
  deb=$(find .cache/debs -name 'logrotate_*.deb' | sort | tail -n1)
fi

work=$(mktemp -d)
# shellcheck disable=SC2317  # runs from the EXIT trap
cleanup() {
  local rc=$?
  rm -rf "$work"
  if [[ -n ${KEEP_CONTAINER:-} && $rc -ne 0 ]]; then
    echo "test-log: $name kept (KEEP_CONTAINER): docker rm -f $name when done" >&2
  else
    docker rm -f "$name" >/dev/null 2>&1 || true
  fi
  exit "$rc"
}
trap cleanup EXIT

inside() { docker exec "$name" "$@"; }
# Waits for the container's systemd to finish booting (no answer at all until its bus is up).
booted() {
  local state deadline=$((SECONDS + 120))
  while ((SECONDS < deadline)); do
    state=$(inside systemctl is-system-running --wait 2>/dev/null || true)
    [[ $state == running || $state == degraded ]] && return 0
    sleep 0.5
  done
  die "$name did not finish booting: $(inside systemctl --failed --no-legend 2>&1 | head -n5)"
}
apply() {
  local log=$1
  shift
  ansible-playbook -i "$name," -e ansible_connection=community.docker.docker "$@" tests/log/apply.yml >"$log" 2>&1 \
    || { tail -n 40 "$log"; fail "the ramdisk role failed (log above)"; }
}

start_container() {
  docker rm -f "$name" >/dev/null 2>&1 || true
  docker run -d --name "$name" --cap-add SYS_ADMIN --security-opt apparmor=unconfined --security-opt seccomp=unconfined \
    --cgroupns host -v /sys/fs/cgroup:/sys/fs/cgroup:rw --tmpfs /run --tmpfs /run/lock --network none \
    "$IMAGE" /lib/systemd/systemd >/dev/null || die "docker run failed"
  booted
  { docker cp "$deb" "$name:/root/logrotate.deb" && inside dpkg -i /root/logrotate.deb >/dev/null; } \
    || die "installing logrotate failed"
  docker cp tests/log/in_container.sh "$name:/usr/local/bin/logtest"
}

if [[ ${1:-} == --kill ]]; then
  # Each case: a fresh container, journald writing, the role's run killed just before journal write N
  # (RAMDISK_PROVISION_TEST_KILL_AT, read by ramdisk_apply only: ramdisk_plan writes no journal on a clean host),
  # then a whole run and one more that changes nothing; end-check: the state of one uninterrupted run, no line lost.
  for n in ${2//,/ }; do
    [[ $n =~ ^[1-9][0-9]*$ ]] || die "--kill takes journal write numbers such as 5,20,44, not '$n'"
    start_container
    inside logtest writer start
    if ansible-playbook -i "$name," -e ansible_connection=community.docker.docker \
        -e "{\"logtest_environment\": {\"RAMDISK_PROVISION_TEST_KILL_AT\": \"$n\"}}" tests/log/apply.yml \
        >"$work/killed.log" 2>&1; then
      echo "test-log: kill point $n: the run was not killed (past its last journal write)"
      continue
    fi
    logged=$(inside logtest writer stop)
    apply "$work/rerun.log"
    apply "$work/again.log"
    grep -q 'changed=0 .*failed=0' "$work/again.log" || fail "kill point $n: a run after the recovery changed something"
    inside logtest end-check "$logged" || fail "kill point $n"
    echo "test-log: kill point $n: recovered, then a run changed nothing"
  done
  echo "test-log: kill points passed in $((SECONDS - started)) s"
  exit 0
fi

start_container

step=$SECONDS
apply "$work/apply.log"
echo "test-log: the role put /var/log on tmpfs ($((SECONDS - step)) s): $(inside findmnt -no FSTYPE,SIZE /var/log | xargs)"
apply "$work/again.log"
grep -q 'changed=0 .*failed=0' "$work/again.log" || { tail -n 20 "$work/again.log"; fail "a second run changed something"; }
echo "test-log: a second run changed nothing"
inside sh -c "grep -qx SystemMaxUse=33554432 /etc/systemd/journald.conf.d/ramdisk-provision-*.conf" \
  || fail "journald's drop-in does not give SystemMaxUse=33554432 (half of the 64M mount)"
limits=$(inside journalctl -u systemd-journald -o cat | grep 'System Journal (/var/log' | tail -n1)
[[ $limits =~ max\ 32(\.0)?M ]] || fail "journald does not use the drop-in's limit on the mount: $limits"
echo "test-log: journald on the mount: $limits"

inside logtest writer start
for ((k = 1; k <= SYNCS; k++)); do
  inside logtest sync "$k" || fail "sync $k"
done
inside logtest rotate-cost 5
inside logtest logrotate || fail "logrotate"
inside logtest sync "$((SYNCS + 1))" || fail "the sync after logrotate"
inside test -f /var/lib/ramdisk-backing/log/current/logtest.log.1 || fail "the rotated log is not in the backing's copy"

# A clean reboot: the last sync runs after journald left the mount, so it copies the active file too.
logged=$(inside logtest writer stop)
inside systemctl poweroff 2>/dev/null || true  # the connection goes with the container
docker wait "$name" >/dev/null
docker start "$name" >/dev/null
booted
# shellcheck disable=SC2016  # expanded in the container
inside sh -c 'test -f /var/lib/ramdisk-backing/log/current/journal/"$(cat /etc/machine-id)"/system.journal' \
  || fail "the sync at shutdown did not copy system.journal: journald had not left the mount"
inside logtest boot-check "$logged" || fail "after a clean reboot"
inside ramdisk-status | grep -E '^PATH|^/var/log ' || fail "ramdisk-status does not show /var/log"

# A power cut: what the last completed sync holds comes back.
inside logtest writer start
inside logtest sync "$((SYNCS + 2))" | tee "$work/last-sync" || fail "the sync before the power cut"
synced=$(sed -n 's/.*lines 1\.\.\([0-9]*\) all.*/\1/p' "$work/last-sync")
sleep 1
docker kill "$name" >/dev/null
docker start "$name" >/dev/null
booted
inside logtest boot-check "$synced" || fail "after a power cut"

# state absent: the logs return to the directory on disk, journald with them (the lines the power cut took aside).
since=$(($(inside cat /var/lib/logtest.n) + 1))
inside logtest writer start
logged=$(inside logtest writer stop)
step=$SECONDS
apply "$work/absent.log" -e ramdisk_state=absent
echo "test-log: state absent took $((SECONDS - step)) s"
inside logtest removed-check "$synced" "$since" "$logged" || fail "after state absent"
echo "test-log: passed in $((SECONDS - started)) s"
