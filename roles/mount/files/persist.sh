#!/bin/sh
# Installed by the ramdisk.provision collection (ramdisk_apply): changes here are overwritten on its next run.
# Keeps a RAM mount's contents in a backing directory on disk. A shell script, not Ansible, because
# systemd runs it at boot, at shutdown and from a timer: ramdisk-persist-TOKEN.service runs restore when
# it starts (before the services that use the data) and sync when it stops (after them), and
# ramdisk-persist-sync-TOKEN.timer runs sync every interval. TOKEN names /etc/ramdisk-provision/persist/TOKEN.conf,
# which gives MOUNT, BACKING, KEEP (how many complete copies the backing keeps, current included; 2 if unset), and
# SERVICES and STOP_SERVICES (1: a sync stops those of SERVICES that run for its copy, and starts them again).
#
#   persist restore TOKEN   fill an empty MOUNT from BACKING/current; a MOUNT that holds data is newer: kept
#   persist sync TOKEN      write MOUNT's changes into BACKING/current (the first time: copy MOUNT to
#                           BACKING/snap-STAMP and point BACKING/current at it)
#   persist resume TOKEN    start the services a sync killed while it held them stopped left stopped (the sync
#                           service's ExecStopPost)
#
# A sync writes only what changed: its copy, persist-delta.py beside this script (the collection's
# _persist_delta.py, run with python3, which needs no rsync), stages the new and changed entries under
# BACKING/.persist-delta, flushes them with a commit record, then moves them into current by rename(2), the
# entries they replace moved aside as the reverse delta that keeps the copy before (KEEP copies: current and the
# newest KEEP-1 reverse deltas). A crash before the commit record leaves current as it was; one after it leaves a
# record that the next sync finishes; a restore meanwhile applies the record to the RAM copy and never writes the
# backing, so a full backing disk cannot keep the data from the mount at boot.
# The first copy, or any sync without python3 or the copy, copies MOUNT whole into a new snapshot as before: with
# rsync --link-dest on the current copy when rsync is there, else with cp -a (COPY_TOOL in the status says which).
#
# A first copy never leaves the backing half-written: it copies into BACKING/.new-STAMP, flushes it to disk,
# renames it to snap-STAMP, points a new link at it and renames that link over BACKING/current (rename(2)
# is atomic), flushes the directory, and only then removes the copies beyond KEEP. A crash at any point leaves
# current on a complete copy. Any copy error (a full disk, a file that vanished or could not be read) fails
# the sync: the partial copy is removed and current stays where it was. A sync is refused, with exit status
# 3, while BACKING holds a copy and this mount of MOUNT was not restored from it (the backing is the newer
# one), or MOUNT holds nothing.
#
# journald's files are copied only when closed. While journald writes into MOUNT (a log mount), a sync first has it
# write what it was sent (journalctl --sync) and close its files (journalctl --rotate archives each as
# NAME@....journal, which journald never writes again), and leaves out the active files it opens anew (a .journal
# name without '@'); the next sync's rotation archives their entries.
# Once journald left MOUNT (at shutdown, systemd-journal-flush.service's stop runs journalctl --smart-relinquish-var
# before the last sync), every file is closed and copied.
#
# A copy of a database's files taken while it writes them is not one it can start from. With STOP_SERVICES=1 a
# sync stops those of SERVICES that run just before its copy and starts them again right after it, also when the
# copy failed or the sync was stopped (TERM), and records how long they were down. Which it stopped is written to
# /run first, so that a sync killed outright leaves them to "persist resume" (the sync service's ExecStopPost) or
# to the next sync. A service that was not running stays stopped; nothing is started while the system shuts down
# (the stop-time sync, after the services, makes the last copy), nor against a stop queued meanwhile. At the
# stop-time sync the services have stopped already (the persist unit is ordered before them): it stops nothing.
#
# Each sync attempt, done or not, is recorded in /var/lib/ramdisk-provision/persist/TOKEN.status (result, exit
# status, start and end, how it copied, and the figures of the last successful one); then the metrics collector
# runs when it is installed (ramdisk_metrics: true), so its figures show the attempt at once.
set -eu
export LC_ALL=C
conf_dir=/etc/ramdisk-provision/persist
state_dir=/run/ramdisk-provision/persist
status_dir=/var/lib/ramdisk-provision/persist
metrics_collector=/usr/local/libexec/ramdisk-provision/metrics/_metrics.py
delta_helper=/usr/local/libexec/ramdisk-provision/persist-delta.py
started=$(date +%s.%N)
stamp='' sync_bytes='' backing_bytes='' written_bytes='' copy='' copy_tool='' made_dir='' made_link='' deltas=''
services_stopped='' services_down_since='' services_down_seconds='' services_left_down='' terminated=''

say() { echo "persist ${token:-}: $*" >&2; }
die() { say "$*"; exit "${2:-1}"; }

[ $# -eq 2 ] || die "usage: persist restore|sync|resume TOKEN" 2
command=$1
token=$2
case $token in */*|.*|'') die "'$token' is not a token" 2 ;; esac
conf=$conf_dir/$token.conf
[ -r "$conf" ] || die "$conf is missing"
MOUNT='' BACKING='' KEEP='' SERVICES='' STOP_SERVICES=''
# shellcheck source=/dev/null
. "$conf"
if [ -z "$MOUNT" ] || [ -z "$BACKING" ]; then
  die "$conf does not give MOUNT and BACKING"
fi
# A bad KEEP (the role writes a checked one) costs disk space, never a sync.
case $KEEP in
  '') keep=2 ;;
  0*|*[!0-9]*) say "KEEP=$KEEP in $conf is not a whole number of 1 or more: keeping 2 copies"; keep=2 ;;
  *) keep=$KEEP ;;
esac

# The status of a sync attempt, written through a temporary file and a rename; the figures of the last
# successful sync are kept across failed ones. Never changes the exit status of the helper.
record_sync() {
  code=$1
  # 4: the copy became current, and a service it stopped did not start again.
  case $code in 0|4) result=ok ;; 3) result=refused ;; *) result=failed ;; esac
  status=$status_dir/$token.status
  if mkdir -p "$status_dir" && tmp=$(mktemp "$status.XXXXXX"); then
    {
      echo "RESULT=$result"
      echo "EXIT=$code"
      echo "STARTED=$started"
      echo "FINISHED=$(date +%s.%N)"
      if [ -n "$copy" ]; then
        echo "COPY=$copy"
        echo "COPY_TOOL=$copy_tool"
      fi
      if [ -n "$services_stopped" ]; then
        echo "SERVICES_STOPPED='$services_stopped'"
        echo "SERVICES_DOWN_SECONDS=$services_down_seconds"
        echo "SERVICES_LEFT_DOWN='$services_left_down'"
      fi
      if [ "$result" = ok ]; then
        echo "LAST_OK_SNAPSHOT=snap-$stamp"
        echo "LAST_OK_FINISHED=$(date +%s.%N)"
        echo "LAST_OK_BYTES=$sync_bytes"
        echo "LAST_OK_WRITTEN_BYTES=$written_bytes"
        echo "LAST_OK_BACKING_BYTES=$backing_bytes"
      elif [ -r "$status" ]; then
        grep '^LAST_OK_' "$status" || :
      fi
    } >"$tmp" || :
    if ! { chmod 0644 "$tmp" && mv -f "$tmp" "$status"; }; then
      rm -f "$tmp"
    fi
  fi
  collect_metrics
  return 0
}

collect_metrics() {
  if [ -r "$metrics_collector" ]; then
    python3 "$metrics_collector" collect >/dev/null 2>&1 || say "the metrics collector failed"
  fi
}

# The end of a sync attempt: a copy that did not become current goes (current never points at it), then the
# status. Runs on a stop by systemd too (TERM), so a sync cut short is recorded as failed.
finish_sync() {
  code=$1
  if [ "$code" -ne 0 ]; then
    for made in "$made_link" "$made_dir"; do
      if [ -n "$made" ] && { [ -e "$made" ] || [ -L "$made" ]; }; then
        rm -rf -- "$made" || say "could not remove the partial copy $made; the next sync removes it"
      fi
    done
  fi
  start_services
  # A copy that became current, with a service that did not start again: the unit fails, so that it shows.
  if [ "$code" -eq 0 ] && [ -n "$services_left_down" ] && ! shutting_down; then
    code=4
  fi
  record_sync "$code"
  exit "$code"
}

shutting_down() {
  [ "$(systemctl is-system-running 2>/dev/null || :)" = stopping ]
}

# Stops those of SERVICES that run (active, reloading or starting), after writing their names to the record that
# start_services reads; a service an admin stopped is not in it, so it stays stopped.
stop_services() {
  [ "$STOP_SERVICES" = 1 ] && [ -n "$SERVICES" ] || return 0
  running=''
  for unit in $SERVICES; do
    case $(systemctl show -p ActiveState --value -- "$unit" 2>/dev/null || :) in
      active|reloading|activating) running="$running $unit" ;;
    esac
  done
  running=${running# }
  [ -n "$running" ] || return 0
  if ! { record=$(mktemp "$stopped.XXXXXX") && echo "$running" >"$record" && mv -f "$record" "$stopped"; }; then
    die "could not write $stopped, the record of the services this sync stops: $running not stopped"
  fi
  services_stopped=$running
  services_down_since=$(date +%s.%N)
  # shellcheck disable=SC2086 # unit names, checked by the role: no spaces or wildcards
  systemctl stop -- $running || die "could not stop $running for a consistent copy of $MOUNT"
  say "stopped $running for the copy"
}

# Starts the services of the record (this sync's, or those a sync killed earlier left stopped), unless the system
# is shutting down; then removes the record. One that fails to start is named in the status and the journal. A sync
# stopped by systemd (TERM) keeps the record when it cannot read it or start them: systemd's TERM also reaches the
# processes its trap starts, until it has signalled every process of the unit; then the sync service's
# ExecStopPost, which runs once none is left, starts them (persist resume).
# shellcheck disable=SC2086 # unit names, checked by the role: no spaces or wildcards
start_services() {
  [ -e "$stopped" ] || return 0
  units=$(cat "$stopped") || units=''
  [ -n "$services_stopped" ] || services_stopped=$units
  keep_record=''
  if [ -z "$units" ]; then
    keep_record=$terminated
    services_left_down=$services_stopped
  elif shutting_down; then
    services_left_down=$units
    say "the system is shutting down: $units stay stopped"
  # --job-mode=fail: never reverses a stop queued meanwhile (an admin's, a shutdown's, the persist unit's own).
  elif systemctl start --job-mode=fail -- $units; then
    say "started $units again"
  else
    services_left_down=$units
    keep_record=$terminated
    say "could not start $units again after the copy: see systemctl status $units"
  fi
  if [ -n "$services_down_since" ]; then
    services_down_seconds=$(awk -v a="$services_down_since" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }') \
      || services_down_seconds=''
  fi
  [ -n "$keep_record" ] || rm -f "$stopped"
}

# After persist resume: the status of the sync that left the record says which services are still stopped.
note_resumed() {
  status=$status_dir/$token.status
  grep -q '^SERVICES_LEFT_DOWN=' "$status" 2>/dev/null || return 0
  if tmp=$(mktemp "$status.XXXXXX"); then
    if LEFT=$services_left_down awk '/^SERVICES_LEFT_DOWN=/ { $0 = "SERVICES_LEFT_DOWN=\047" ENVIRON["LEFT"] "\047" }
        { print }' "$status" >"$tmp" && chmod 0644 "$tmp" && mv -f "$tmp" "$status"; then
      collect_metrics
    else
      rm -f "$tmp"
    fi
  fi
}
if [ "$command" = sync ]; then
  trap 'finish_sync $?' EXIT
  trap 'terminated=1; exit 143' TERM
  trap 'exit 130' INT
fi

mkdir -p "$state_dir"
chmod 0700 "$state_dir"
# Written by a restore (or a first sync) with the identity of the mount it filled: the syncs of that mount
# may write it back. A new mount at MOUNT (a reboot, a remount by hand) has another identity.
restored=$state_dir/$token.restored
# In MOUNT while a restore copies in, so that a restore cut short is emptied and done again, never synced.
partial=$MOUNT/.ramdisk-persist-partial

# The services a sync stopped, while they are stopped (see stop_services).
stopped=$state_dir/$token.stopped

# One restore or sync of a mount at a time (the timer's sync and the stop-time sync may meet).
exec 9>"$state_dir/$token.lock"
flock 9

if [ "$command" = resume ]; then
  [ -e "$stopped" ] || exit 0
  say "a sync was killed while it held $(cat "$stopped") stopped"
  start_services
  note_resumed
  [ -z "$services_left_down" ] || exit 1
  exit 0
fi
# A sync killed outright while it held services stopped, outside systemd: start them before anything else.
if [ "$command" = sync ] && [ -e "$stopped" ]; then
  say "a sync was killed while it held $(cat "$stopped") stopped"
  start_services
  services_stopped='' services_down_seconds='' services_left_down=''
fi

mountpoint -q "$MOUNT" || die "$MOUNT is not a mount point: refusing to touch the directory under it"
[ -d "$BACKING" ] || die "the backing directory $BACKING is missing"
case $(stat -f -c %T "$BACKING") in
  tmpfs|ramfs) die "the backing directory $BACKING is in RAM, so it would not outlive a reboot" ;;
esac

# The mount ID and device of the mount at MOUNT (the top one), from the kernel's mount table.
identity() {
  awk -v m="$MOUNT" '$5 == m { id = $1 " " $3 } END { print id }' /proc/self/mountinfo
}

# Entries of a directory other than lost+found (the file system's own on ext4 and xfs).
holds_data() {
  [ -n "$(find "$1" -mindepth 1 -maxdepth 1 ! -name lost+found -print -quit)" ]
}

# rsync that can keep ACLs and xattrs (Debian's can), so that its copy keeps all that cp -a keeps.
rsync_usable() {
  command -v rsync >/dev/null 2>&1 || return 1
  case $(rsync --version 2>/dev/null) in
    ''|*'no ACLs'*|*'no xattrs'*) return 1 ;;
  esac
  return 0
}

# Whether journald has files of MOUNT open (it writes its journal there). A host without journald has none.
journald_writes_here() {
  pid=$(systemctl show -p MainPID --value systemd-journald.service 2>/dev/null) || return 1
  case $pid in ''|0|*[!0-9]*) return 1 ;; esac
  [ -n "$(find "/proc/$pid/fd" -lname "$MOUNT/*.journal" -print -quit 2>/dev/null)" ]
}

# Before the copy: journald's open files of MOUNT closed, and the files it writes after that left out of the copy.
journal_excludes=''
close_journal() {
  journald_writes_here || return 0
  # --sync first: journald writes what it has been sent so far, so every line logged before the sync is in the copy.
  { journalctl --sync && journalctl --rotate; } || die "journalctl --rotate failed, so the journal files journald writes in $MOUNT cannot be closed for the copy; $BACKING/current is unchanged"
  journal_excludes=yes
}

# The copy that writes only what changed: python3 and persist-delta.py.
delta_usable() {
  command -v python3 >/dev/null 2>&1 && [ -r "$delta_helper" ]
}

# A sync by the copy cut short after its commit point: current is half-way until the next sync finishes it.
delta_pending() {
  [ -e "$BACKING/.persist-delta/commit.json" ] || [ -e "$BACKING/.persist-delta/rollback.json" ]
}

# A number of the copy's JSON report ($2) by its name ($1).
report_number() {
  printf '%s\n' "$2" | sed -n "s/.*\"$1\": \([0-9][0-9]*\).*/\1/p"
}

restore() {
  if [ -e "$partial" ]; then
    say "a restore into $MOUNT was cut short: emptying it to restore again"
    find "$MOUNT" -mindepth 1 -maxdepth 1 ! -name lost+found -exec rm -rf -- {} +
  fi
  if holds_data "$MOUNT"; then
    say "$MOUNT holds data, newer than the backing: kept as it is"
  elif [ -d "$BACKING/current/" ]; then
    : >"$partial"
    # A setgid root passes the bit to every directory cp makes in it; cp -a sets the root's own mode last.
    chmod g-s "$MOUNT"
    if delta_pending; then
      # Read only: the record is applied to the RAM copy; the next sync rolls the backing forward.
      delta_usable || die "$BACKING holds a sync cut short, which only $delta_helper (with python3) can read"
      python3 "$delta_helper" restore "$BACKING" "$MOUNT" >/dev/null \
        || die "copying $BACKING/current with its pending sync into $MOUNT failed"
    else
      cp -a --no-target-directory "$BACKING/current/." "$MOUNT" || die "copying $BACKING/current into $MOUNT failed"
    fi
    rm -f "$partial"
    say "restored $MOUNT from $BACKING/$(readlink "$BACKING/current")"
  elif [ -e "$BACKING/current" ] || [ -L "$BACKING/current" ]; then
    die "$BACKING/current is not a copy this collection made (a link to a directory)"
  else
    die "$BACKING has no current copy to restore $MOUNT from; run the role again to make one"
  fi
  identity >"$restored"
}

sync_back() {
  [ ! -e "$partial" ] || die "$MOUNT holds a restore cut short: it is not synced over the backing"
  previous=''
  if [ -e "$BACKING/current" ]; then
    if [ ! -e "$restored" ] || [ "$(cat "$restored")" != "$(identity)" ]; then
      die "$MOUNT was not restored from $BACKING since it was mounted: the backing copy is the newer one" 3
    fi
    holds_data "$MOUNT" || ! holds_data "$BACKING/current/" \
      || die "$MOUNT holds nothing while $BACKING/current holds data: not synced over it (restore first)" 3
    previous=$(readlink "$BACKING/current" || :)
    # Only a copy of ours, beside the new one (hard links stay on one file system), is linked to.
    case $previous in */*) previous='' ;; snap-*) ;; *) previous='' ;; esac
    [ -z "$previous" ] || [ -d "$BACKING/$previous" ] || previous=''
  fi
  close_journal
  if [ -n "$previous" ] && delta_usable; then
    sync_delta
    return
  fi
  ! delta_pending || die "$BACKING holds a sync cut short, which only $delta_helper (with python3) can finish"
  stamp=$(date -u +%Y%m%dT%H%M%S.%NZ)
  new=$BACKING/.new-$stamp
  made_dir=$new
  stop_services
  if rsync_usable; then
    copy_tool=rsync
    copy=full
    link=''
    if [ -n "$previous" ]; then
      copy=incremental
      link=--link-dest=$BACKING/$previous
    fi
    # -a -H -A -X --numeric-ids --sparse: what cp -a keeps (owners by number, modes, times, hard links, ACLs,
    # xattrs, holes, devices and other special files, the root's own owner and mode), access times aside.
    # --modify-window=-1: a file is unchanged only with the same modification time to the nanosecond.
    rsync -aHAX --numeric-ids --sparse --modify-window=-1 ${link:+"$link"} \
      ${journal_excludes:+"--include=*@*.journal"} ${journal_excludes:+"--exclude=*.journal"} "$MOUNT/" "$new" \
      || die "copying $MOUNT to $new failed (rsync exit status $?); $BACKING/current is unchanged"
  else
    say "rsync is not installed, or lacks ACL or xattr support: copying all of $MOUNT"
    copy_tool='cp'
    copy=full
    cp -a --no-target-directory "$MOUNT/." "$new" \
      || die "copying $MOUNT to $new failed (cp exit status $?); $BACKING/current is unchanged"
    [ -z "$journal_excludes" ] || find "$new" -type f -name '*.journal' ! -name '*@*' -delete
  fi
  start_services
  # syncfs: every file of the copy is on disk before it becomes current.
  sync -f "$new"
  mv -T "$new" "$BACKING/snap-$stamp"
  made_dir=$BACKING/snap-$stamp
  made_link=$BACKING/.current-$stamp
  ln -s "snap-$stamp" "$made_link"
  mv -T "$made_link" "$BACKING/current"
  made_dir='' made_link=''
  # fsync the directory: the switch is on disk before any older copy goes.
  sync "$BACKING"
  identity >"$restored"
  # What this sync wrote: the blocks of the new copy that the previous copy does not share (du counts each file
  # once). Not rsync's --stats: it leaves out the files it copies from the previous copy when only their mode or
  # owner changed, which are written all the same. With the previous copy's size from the status of the sync that
  # made it (a copy never changes), the one walk below gives it; else, or when that copy goes now, a walk of both.
  previous_bytes=''
  if [ -n "$previous" ] && [ -r "$status_dir/$token.status" ]; then
    previous_bytes=$(awk -F= -v snap="$previous" '$1 == "LAST_OK_SNAPSHOT" { s = $2 } $1 == "LAST_OK_BYTES" { b = $2 }
      END { if (s == snap && b ~ /^[0-9]+$/) print b }' "$status_dir/$token.status")
  fi
  if [ -n "$previous" ] && { [ -z "$previous_bytes" ] || [ "$keep" -eq 1 ]; }; then
    written_bytes=$(du -s -B1 "$BACKING/$previous" "$BACKING/snap-$stamp" | awk 'NR == 2 { print $1 }')
  fi
  remove_beyond_keep
  # What the copy and the whole backing take on disk, in one walk: the new copy, what the previous one holds
  # besides (it stays unless KEEP=1), then the rest.
  if [ -n "$previous" ] && [ -d "$BACKING/$previous" ]; then
    set -- "$BACKING/snap-$stamp" "$BACKING/$previous" "$BACKING"
  else
    set -- "$BACKING/snap-$stamp" "$BACKING"
  fi
  sizes=$(du -s -B1 "$@" | awk 'NR == 1 { n = $1 } NR == 2 { p = $1 } { t += $1 } END { print n " " p + 0 " " t }')
  sync_bytes=${sizes%% *}
  backing_bytes=${sizes##* }
  previous_only=${sizes#* }
  previous_only=${previous_only% *}
  if [ -z "$written_bytes" ] && [ -n "$previous_bytes" ] && [ $# -eq 3 ]; then
    # The new copy's size less what it shares with the previous one (its size less what it holds alone); a
    # figure that cannot be (a previous copy changed by hand) leaves the whole copy counted.
    written_bytes=$((sync_bytes - previous_bytes + previous_only))
    [ "$written_bytes" -ge 0 ] || written_bytes=''
  fi
  # A first copy, or one of everything by cp, wrote all of it.
  [ -n "$written_bytes" ] || written_bytes=$sync_bytes
  say "synced $MOUNT to $BACKING/snap-$stamp ($copy copy, $written_bytes bytes written)"
}

# A sync by the copy: current (snapshot $previous) updated in place, under its commit record. The services stay
# stopped (STOP_SERVICES) until the changes are on disk.
sync_delta() {
  copy_tool=persist-delta
  copy=incremental
  stamp=${previous#snap-}
  stop_services
  # The journal files journald opened anew after its rotation: left out, as from the copy below.
  report=$(python3 "$delta_helper" sync "$MOUNT" "$BACKING" --keep "$keep" \
    ${journal_excludes:+"--include=*@*.journal"} ${journal_excludes:+"--exclude=*.journal"}) || {
    error=$(printf '%s\n' "$report" | sed -n 's/.*"error": "\(.*\)"}$/\1/p')
    die "copying the changes of $MOUNT into $BACKING/current failed: ${error:-persist-delta.py failed}"
  }
  start_services
  identity >"$restored"
  written_bytes=$(report_number written_bytes "$report")
  deltas=$(report_number reverse_deltas "$report")
  remove_beyond_keep
  sizes=$(du -s -B1 "$BACKING/$previous" "$BACKING" | awk 'NR == 1 { n = $1 } { t += $1 } END { print n " " t }')
  sync_bytes=${sizes% *}
  backing_bytes=${sizes#* }
  say "synced $MOUNT to $BACKING/$previous (in place, $written_bytes bytes written)"
}

# The copies beyond KEEP, oldest first by name (the stamp), and what syncs cut short left. The new copy stays, and
# with KEEP of 2 or more the previous one too, whatever their names say (the clock may have gone back). A removal
# that fails leaves a copy for the next sync to remove; it never fails this one, whose copy is current already.
remove_beyond_keep() {
  spared=$BACKING/snap-$stamp
  kept=1
  if [ -n "$deltas" ]; then
    # The copy's reverse deltas are the older copies: snapshots of earlier syncs count beside them.
    kept=$((1 + deltas))
  elif [ "$keep" -gt 1 ] && [ -n "$previous" ]; then
    spared="$spared $BACKING/$previous"
    kept=2
  fi
  others=0
  for old in "$BACKING"/snap-*; do
    if ! spared "$old" && { [ -e "$old" ] || [ -L "$old" ]; }; then
      others=$((others + 1))
    fi
  done
  excess=$((others - keep + kept))
  for old in "$BACKING"/snap-* "$BACKING"/.new-* "$BACKING"/.current-*; do
    if spared "$old" || { [ ! -e "$old" ] && [ ! -L "$old" ]; }; then
      continue
    fi
    case ${old#"$BACKING"/} in
      snap-*)
        [ "$excess" -gt 0 ] || continue
        excess=$((excess - 1))
        ;;
    esac
    rm -rf -- "$old" || say "could not remove $old; the next sync tries again"
  done
}

# Whether $1 is one of the copies remove_beyond_keep spares (paths carry no spaces: the role checks them).
spared() {
  for spared_one in $spared; do
    [ "$1" != "$spared_one" ] || return 0
  done
  return 1
}

case $command in
  restore) restore ;;
  sync) sync_back ;;
  *) die "usage: persist restore|sync|resume TOKEN" 2 ;;
esac
