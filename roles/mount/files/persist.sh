#!/bin/sh
# Installed by the ramdisk.provision collection (ramdisk_apply): changes here are overwritten on its next run.
# Keeps a RAM mount's contents in a backing directory on disk. A shell script, not Ansible, because
# systemd runs it at boot, at shutdown and from a timer: ramdisk-persist-TOKEN.service runs restore when
# it starts (before the services that use the data) and sync when it stops (after them), and
# ramdisk-persist-sync-TOKEN.timer runs sync every interval. TOKEN names /etc/ramdisk-provision/persist/TOKEN.conf,
# which gives MOUNT and BACKING.
#
#   persist restore TOKEN   fill an empty MOUNT from BACKING/current; a MOUNT that holds data is newer: kept
#   persist sync TOKEN      copy MOUNT to BACKING/snap-STAMP and switch BACKING/current to it
#
# A sync never leaves the backing half-written: it copies into BACKING/.new-STAMP, flushes it to disk,
# renames it to snap-STAMP, points a new link at it and renames that link over BACKING/current (rename(2)
# is atomic), flushes the directory, and only then removes older copies. A crash at any point leaves
# current on a complete copy. A sync is refused, with exit status 3, while BACKING holds a copy and this
# mount of MOUNT was not restored from it (the backing is the newer one), or MOUNT holds nothing.
#
# Each sync attempt, done or not, is recorded in /var/lib/ramdisk-provision/persist/TOKEN.status (result, exit
# status, start and end, and the figures of the last successful one); then the metrics collector runs when
# it is installed (ramdisk_metrics: true), so its figures show the attempt at once.
set -eu
export LC_ALL=C
conf_dir=/etc/ramdisk-provision/persist
state_dir=/run/ramdisk-provision/persist
status_dir=/var/lib/ramdisk-provision/persist
metrics_collector=/usr/local/libexec/ramdisk-provision/metrics/_metrics.py
started=$(date +%s.%N)
stamp='' sync_bytes='' backing_bytes=''

say() { echo "persist ${token:-}: $*" >&2; }
die() { say "$*"; exit "${2:-1}"; }

[ $# -eq 2 ] || die "usage: persist restore|sync TOKEN" 2
command=$1
token=$2
case $token in */*|.*|'') die "'$token' is not a token" 2 ;; esac
conf=$conf_dir/$token.conf
[ -r "$conf" ] || die "$conf is missing"
MOUNT='' BACKING=''
# shellcheck source=/dev/null
. "$conf"
if [ -z "$MOUNT" ] || [ -z "$BACKING" ]; then
  die "$conf does not give MOUNT and BACKING"
fi

# The status of a sync attempt, written through a temporary file and a rename; the figures of the last
# successful sync are kept across failed ones. Never changes the exit status of the helper.
record_sync() {
  code=$1
  case $code in 0) result=ok ;; 3) result=refused ;; *) result=failed ;; esac
  status=$status_dir/$token.status
  if mkdir -p "$status_dir" && tmp=$(mktemp "$status.XXXXXX"); then
    {
      echo "RESULT=$result"
      echo "EXIT=$code"
      echo "STARTED=$started"
      echo "FINISHED=$(date +%s.%N)"
      if [ "$code" -eq 0 ]; then
        echo "LAST_OK_SNAPSHOT=snap-$stamp"
        echo "LAST_OK_FINISHED=$(date +%s.%N)"
        echo "LAST_OK_BYTES=$sync_bytes"
        echo "LAST_OK_BACKING_BYTES=$backing_bytes"
      elif [ -r "$status" ]; then
        grep '^LAST_OK_' "$status" || :
      fi
    } >"$tmp" || :
    if ! { chmod 0644 "$tmp" && mv -f "$tmp" "$status"; }; then
      rm -f "$tmp"
    fi
  fi
  if [ -r "$metrics_collector" ]; then
    python3 "$metrics_collector" collect >/dev/null 2>&1 || say "the metrics collector failed"
  fi
  return 0
}
if [ "$command" = sync ]; then
  trap 'record_sync $?' EXIT
fi

mkdir -p "$state_dir"
chmod 0700 "$state_dir"
# Written by a restore (or a first sync) with the identity of the mount it filled: the syncs of that mount
# may write it back. A new mount at MOUNT (a reboot, a remount by hand) has another identity.
restored=$state_dir/$token.restored
# In MOUNT while a restore copies in, so that a restore cut short is emptied and done again, never synced.
partial=$MOUNT/.ramdisk-persist-partial

# One restore or sync of a mount at a time (the timer's sync and the stop-time sync may meet).
exec 9>"$state_dir/$token.lock"
flock 9

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
    cp -a --no-target-directory "$BACKING/current/." "$MOUNT" || die "copying $BACKING/current into $MOUNT failed"
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
  if [ -e "$BACKING/current" ]; then
    if [ ! -e "$restored" ] || [ "$(cat "$restored")" != "$(identity)" ]; then
      die "$MOUNT was not restored from $BACKING since it was mounted: the backing copy is the newer one" 3
    fi
    holds_data "$MOUNT" || ! holds_data "$BACKING/current/" \
      || die "$MOUNT holds nothing while $BACKING/current holds data: not synced over it (restore first)" 3
  fi
  stamp=$(date -u +%Y%m%dT%H%M%S.%NZ)
  new=$BACKING/.new-$stamp
  cp -a --no-target-directory "$MOUNT/." "$new" || die "copying $MOUNT to $new failed; $BACKING/current is unchanged"
  # syncfs: every file of the copy is on disk before it becomes current.
  sync -f "$new"
  mv -T "$new" "$BACKING/snap-$stamp"
  ln -s "snap-$stamp" "$BACKING/.current-$stamp"
  mv -T "$BACKING/.current-$stamp" "$BACKING/current"
  # fsync the directory: the switch is on disk before the older copy goes.
  sync "$BACKING"
  for old in "$BACKING"/snap-* "$BACKING"/.new-* "$BACKING"/.current-*; do
    if [ "$old" != "$BACKING/snap-$stamp" ] && { [ -e "$old" ] || [ -L "$old" ]; }; then
      rm -rf -- "$old"
    fi
  done
  identity >"$restored"
  # What the copy and the whole backing take on disk, in one walk: du counts each file once.
  sizes=$(du -s -B1 "$BACKING/snap-$stamp" "$BACKING" | awk 'NR == 1 { s = $1 } { t += $1 } END { print s " " t }')
  sync_bytes=${sizes% *}
  backing_bytes=${sizes#* }
  say "synced $MOUNT to $BACKING/snap-$stamp"
}

case $command in
  restore) restore ;;
  sync) sync_back ;;
  *) die "usage: persist restore|sync TOKEN" 2 ;;
esac
