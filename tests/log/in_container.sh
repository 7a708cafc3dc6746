#!/bin/sh
# The container's side of the log purpose's real test (scripts/test/log_purpose.sh), run as root in a systemd
# container where tests/log/apply.yml put /var/log on tmpfs, kept in /var/lib/ramdisk-backing/log.
#
#   in_container.sh writer start|stop   numbered lines (n=1, n=2, ...) logged with logger -t logtest by a transient
#                                        unit; /var/lib/logtest.n (on disk: the numbers go on across boots) holds
#                                        the last number logger returned from
#   in_container.sh sync K               the last number logged, then a sync as the timer starts it, then what the
#                                        backing's new copy holds: one line "sync K ..." of figures, or a failure
#   in_container.sh rotate-cost N        N rounds of journalctl --sync and --rotate (what a sync adds), timed
#   in_container.sh logrotate            logrotate -f on a log file in the mount, then Debian's whole configuration
#   in_container.sh boot-check MIN       after a boot: the lines up to MIN in the journal, journalctl --verify, and
#                                        the restore ordered before journald's flush and systemd-tmpfiles
#   in_container.sh end-check MAX        what one whole run leaves: /var/log on tmpfs, the drop-in, journald writing
#                                        there with its limit, the flush service, persist and its timer active,
#                                        journalctl --verify, the lines 1..MAX
#   in_container.sh removed-check MAX FROM TO   after state absent: /var/log on disk with the lines 1..MAX and
#                                        FROM..TO, journald writing there, journalctl --verify, no drop-in and no
#                                        backing
# Exits 1 with "FAIL: ..." on stderr when a property does not hold.
set -eu
export LC_ALL=C
BACKING=/var/lib/ramdisk-backing/log
# The persist record names the token (none once state absent removed it).
TOKEN=$(find /etc/ramdisk-provision/persist -name '*.conf' -printf '%f\n' 2>/dev/null | sed 's/\.conf$//')
MID=$(cat /etc/machine-id)

fail() { echo "FAIL: $*" >&2; exit 1; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# How many of the numbers $3..$2 (1..$2 without $3) the journal files of directory $1 lack (0: all there).
missing() {
  journalctl --directory="$1" -t logtest -o cat 2>/dev/null | sed -n 's/^n=//p' \
    | awk -v min="${3:-1}" -v max="$2" '{ seen[$1] = 1 }
        END { m = 0; for (i = min; i <= max; i++) if (!(i in seen)) m++; print m }'
}

case $1 in
  writer)
    if [ "$2" = start ]; then
      rm -f /run/logtest.stop
      # shellcheck disable=SC2016  # expanded by the writer's own shell
      systemd-run --quiet --unit=logtest-writer sh -c '
        i=$(cat /var/lib/logtest.n 2>/dev/null || echo 0)
        while [ ! -e /run/logtest.stop ]; do
          i=$((i + 1)); logger -t logtest "n=$i"; echo "$i" >/var/lib/logtest.n.new; mv /var/lib/logtest.n.new /var/lib/logtest.n
        done'
      sleep 1
    else
      : >/run/logtest.stop
      while systemctl is-active --quiet logtest-writer; do sleep 0.1; done
      # journald has written every line it was sent.
      journalctl --sync
      cat /var/lib/logtest.n
    fi
    ;;
  sync)
    logged=$(cat /var/lib/logtest.n)
    started=$(now_ms)
    # The test syncs faster than systemd's start limit (5 starts in 10 s) allows; the timer never comes near it.
    systemctl reset-failed "ramdisk-persist-sync-$TOKEN.service"
    systemctl start "ramdisk-persist-sync-$TOKEN.service" || fail "sync $2: the sync service failed"
    took=$(($(now_ms) - started))
    copy=$BACKING/$(readlink "$BACKING/current")
    journal=$copy/journal/$MID
    verify=$(journalctl --verify --directory="$journal" 2>&1) || fail "sync $2: journalctl --verify of $journal: $verify"
    lacks=$(missing "$journal" "$logged")
    [ "$lacks" -eq 0 ] || fail "sync $2: $journal lacks $lacks of the lines n=1..$logged logged before the sync"
    active=$(find "$journal" -name '*.journal' ! -name '*@*' | wc -l)
    [ "$active" -eq 0 ] || fail "sync $2: the copy holds $active active journal file(s) of a journald still writing"
    echo "sync $2: $took ms, lines 1..$logged all in the copy, journal files in the mount" \
      "$(find "/var/log/journal/$MID" -name '*.journal' | wc -l), in the copy $(find "$journal" -name '*.journal' | wc -l)," \
      "written $(sed -n 's/^LAST_OK_WRITTEN_BYTES=//p' "/var/lib/ramdisk-provision/persist/$TOKEN.status") bytes," \
      "newest archived file $(find "$journal" -name '*@*.journal' -printf '%T@ %k\n' | sort -n | tail -n1 | cut -d' ' -f2) KiB"
    ;;
  rotate-cost)
    started=$(now_ms)
    i=0
    while [ "$i" -lt "$2" ]; do
      journalctl --sync
      journalctl --rotate
      i=$((i + 1))
    done
    echo "rotate-cost: $(( ($(now_ms) - started) / $2 )) ms per journalctl --sync and --rotate ($2 rounds)"
    ;;
  logrotate)
    printf '/var/log/logtest.log {\n  rotate 2\n  missingok\n  create 0640 root adm\n}\n' >/etc/logrotate.d/logtest
    seq 1 1000 >/var/log/logtest.log
    logrotate -f /etc/logrotate.d/logtest || fail "logrotate -f /etc/logrotate.d/logtest failed"
    [ "$(wc -l </var/log/logtest.log.1)" -eq 1000 ] || fail "logrotate: /var/log/logtest.log.1 does not hold the 1000 lines"
    { [ -f /var/log/logtest.log ] && [ ! -s /var/log/logtest.log ]; } || fail "logrotate: no new empty /var/log/logtest.log"
    [ "$(stat -c %a:%U:%G /var/log/logtest.log)" = 640:root:adm ] || fail "logrotate: the new file is $(stat -c %a:%U:%G /var/log/logtest.log)"
    logrotate -f /etc/logrotate.conf || fail "logrotate -f /etc/logrotate.conf (Debian's whole configuration) failed"
    echo "logrotate: /var/log/logtest.log rotated to .1 and made again (0640 root:adm); logrotate -f /etc/logrotate.conf ok"
    ;;
  boot-check)
    verify=$(journalctl --verify --directory="/var/log/journal/$MID" 2>&1) || fail "after the boot: journalctl --verify: $verify"
    lacks=$(missing "/var/log/journal/$MID" "$2")
    [ "$lacks" -eq 0 ] || fail "after the boot: the journal lacks $lacks of the lines n=1..$2"
    restored=$(systemctl show -p ExecMainExitTimestampMonotonic --value "ramdisk-persist-$TOKEN.service")
    for unit in systemd-journal-flush.service systemd-tmpfiles-setup.service; do
      began=$(systemctl show -p ExecMainStartTimestampMonotonic --value "$unit")
      { [ "$restored" -gt 0 ] && [ "$restored" -le "$began" ]; } \
        || fail "after the boot: the restore ended at $restored us, $unit started at $began us"
    done
    echo "boot-check: lines 1..$2 all in the journal, journalctl --verify ok, restore ended before journald's flush" \
      "and systemd-tmpfiles ($restored us <= their starts)"
    ;;
  end-check)
    [ "$(findmnt -no FSTYPE /var/log)" = tmpfs ] || fail "end state: /var/log is not a tmpfs"
    grep -qx SystemMaxUse=33554432 /etc/systemd/journald.conf.d/ramdisk-provision-*.conf \
      || fail "end state: no journald drop-in with SystemMaxUse=33554432"
    pid=$(systemctl show -p MainPID --value systemd-journald.service)
    [ -n "$(find "/proc/$pid/fd" -lname "/var/log/journal/$MID/*.journal" -print -quit)" ] \
      || fail "end state: journald does not write into the mount"
    journalctl -u systemd-journald -o cat | grep 'System Journal (/var/log' | tail -n1 | grep -Eq 'max 32(\.0)?M' \
      || fail "end state: journald does not use the drop-in's limit"
    for unit in systemd-journal-flush.service "ramdisk-persist-$TOKEN.service" "ramdisk-persist-sync-$TOKEN.timer"; do
      systemctl is-active --quiet "$unit" || fail "end state: $unit is not active"
    done
    verify=$(journalctl --verify --directory="/var/log/journal/$MID" 2>&1) || fail "end state: journalctl --verify: $verify"
    lacks=$(missing "/var/log/journal/$MID" "$2")
    [ "$lacks" -eq 0 ] || fail "end state: the journal lacks $lacks of the lines n=1..$2"
    ;;
  removed-check)
    ! mountpoint -q /var/log || fail "after state absent: /var/log is still a mount point"
    ! ls /etc/systemd/journald.conf.d/ramdisk-provision-*.conf 2>/dev/null || fail "after state absent: the drop-in is left"
    [ ! -e "$BACKING" ] || fail "after state absent: the backing $BACKING is left"
    pid=$(systemctl show -p MainPID --value systemd-journald.service)
    [ -n "$(find "/proc/$pid/fd" -lname "/var/log/journal/$MID/system.journal" -print -quit)" ] \
      || fail "after state absent: journald does not write into /var/log/journal on disk"
    verify=$(journalctl --verify --directory="/var/log/journal/$MID" 2>&1) || fail "after state absent: journalctl --verify: $verify"
    # The lines logged between the last sync and the power cut are gone, as they should be.
    lacks=$(missing "/var/log/journal/$MID" "$2")
    [ "$lacks" -eq 0 ] || fail "after state absent: the journal on disk lacks $lacks of the lines n=1..$2"
    lacks=$(missing "/var/log/journal/$MID" "$4" "$3")
    [ "$lacks" -eq 0 ] || fail "after state absent: the journal on disk lacks $lacks of the lines n=$3..$4"
    echo "removed-check: /var/log on disk again with lines 1..$2 and $3..$4, journalctl --verify ok, journald" \
      "writing there, no drop-in, no backing"
    ;;
  *)
    fail "usage: in_container.sh writer start|stop | sync K | rotate-cost N | logrotate | boot-check MIN | end-check MAX | removed-check MAX FROM TO"
    ;;
esac
