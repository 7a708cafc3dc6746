#!/usr/bin/env bash
# Runs the lab VM: the image from scripts/lab/vm_image.sh booted under qemu software emulation (TCG),
# on a throw-away qcow2 overlay so every `up` starts from the clean image, reached by SSH on a port
# that qemu's user-mode network forwards from 127.0.0.1.
# Usage: scripts/lab/vm.sh up|down|cut|poweron|status|ssh [command...]
#   up      build the image if its recipe changed, boot, wait for SSH; the last line is the port
#   down    stop the VM and drop its overlay (safe to call at any time)
#   cut     a power cut: qemu killed at once, no shutdown; the overlay stays, with what the guest flushed
#   poweron boot again on the overlay left by cut, wait for SSH; the last line is the port
#   status  exit 0 and print pid and port when the VM runs, exit 3 when it does not
#   ssh     ssh to the VM as root with the lab key
# Environment: VM_NAME (debian12-vm), VM_PORT (2222; the next free one is taken if busy), VM_MEMORY
# (1536, MiB), VM_CPUS (1), VM_BOOT_TIMEOUT (300, seconds to wait for SSH), VM_WAIT (no: up and poweron return
# once qemu runs, without waiting for SSH; the power-cut test cuts a boot before it gets there).
set -euo pipefail
cd "$(dirname "$0")/../.."

NAME=${VM_NAME:-debian12-vm}
IMAGES=.cache/vm
KEY=$IMAGES/lab_ed25519
RUN=$IMAGES/run/$NAME
PIDFILE=$RUN/qemu.pid
PORTFILE=$RUN/port
SERIAL=$RUN/serial.log
OVERLAY=$RUN/overlay.qcow2
SSH_OPTS=(-o BatchMode=yes -o IdentitiesOnly=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null
          -o LogLevel=ERROR -o ConnectTimeout=10)

say() { echo "vm.sh: $*"; }
die() { echo "vm.sh: $*" >&2; exit 1; }

running_pid() {
  local pid
  pid=$(cat "$PIDFILE" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && grep -qa qemu-system "/proc/$pid/cmdline" || return 1
  echo "$pid"
}

port_busy() { [[ -n $(ss -Htln "sport = :$1") ]]; }

vm_ssh() { ssh "${SSH_OPTS[@]}" -i "$KEY" -p "$(cat "$PORTFILE")" root@127.0.0.1 "$@"; }

serial_tail() {
  echo "---- last lines of $SERIAL" >&2
  tail -n 25 "$SERIAL" 2>/dev/null | tr -d '\r' >&2 || true
  echo "----" >&2
}

boot() {
  local port=$1 keep=${2:-}
  rm -f "$PIDFILE"
  if [[ -z $keep ]]; then
    rm -f "$OVERLAY"
    # The overlay names its base relative to itself: the run directory moves with the checkout.
    qemu-img create -q -f qcow2 -b ../../debian12.img -F raw "$OVERLAY"
  fi
  # -daemonize does not go with -nographic: no display, the serial console into a file instead.
  # restrict=on: the guest reaches nothing outside qemu; only the forwarded SSH port comes in.
  # No -no-reboot: a reboot in the guest resets the machine and qemu boots the same kernel again.
  # One vCPU: with two, a module run took a third longer here and boot was no quicker (cross-CPU TLB
  # flushes under TCG; unsynchronised TSCs leave the guest the slow HPET clock).
  # Root on NVMe, built into the kernel: no initrd (scripts/lab/vm_image.sh). The disk keeps qemu's default
  # cache (writeback): the guest sees a volatile write cache and flushes it, and a flush reaches the host's page
  # cache, which outlives qemu; so a cut (kill -9 of qemu) loses what the guest wrote but did not flush, as a
  # power cut does.
  qemu-system-x86_64 -name "$NAME" -accel tcg -smp "${VM_CPUS:-1}" -m "${VM_MEMORY:-1536}" \
    -nodefaults -display none -serial "file:$SERIAL" -monitor none \
    -kernel "$IMAGES/vmlinuz" \
    -append "console=ttyS0 root=/dev/nvme0n1 rootwait rw net.ifnames=0" \
    -drive "file=$OVERLAY,format=qcow2,if=none,id=root" -device nvme,drive=root,serial=lab-root \
    -netdev "user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:$port-:22" -device virtio-net-pci,netdev=n0 \
    -daemonize -pidfile "$PIDFILE" 2>"$RUN/qemu.err"
}

up() {
  local pid port tries deadline keep=${1:-}
  if pid=$(running_pid); then
    say "$NAME already runs (pid $pid)"
    cat "$PORTFILE"
    return
  fi
  if [[ -n $keep ]]; then
    [[ -f $OVERLAY ]] || die "$NAME has no disk to power on again: scripts/lab/vm.sh up"
  else
    bash scripts/lab/vm_image.sh
  fi
  command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 missing: apt-get install qemu-system-x86 qemu-utils"
  mkdir -p "$RUN"
  port=${VM_PORT:-2222}
  # Take the first free port from VM_PORT up; another process may grab it first, so retry.
  for tries in 1 2 3 4 5 6 7 8 9 10; do
    while port_busy "$port"; do port=$((port + 1)); done
    if boot "$port" "$keep"; then break; fi
    if ! grep -q 'hostfwd\|host forwarding' "$RUN/qemu.err" || ((tries == 10)); then
      die "qemu did not start: $(cat "$RUN/qemu.err")"
    fi
    port=$((port + 1))
  done
  echo "$port" >"$PORTFILE"
  pid=$(cat "$PIDFILE")
  say "booting $NAME (pid $pid, ssh on 127.0.0.1:$port, serial log $SERIAL)"
  if [[ ${VM_WAIT:-yes} == no ]]; then
    echo "$port"
    return
  fi
  local started=$SECONDS
  deadline=$((SECONDS + ${VM_BOOT_TIMEOUT:-300}))
  until vm_ssh true 2>/dev/null; do
    if ! kill -0 "$pid" 2>/dev/null; then
      serial_tail
      down >/dev/null
      die "qemu exited while $NAME booted; serial log above"
    fi
    if ((SECONDS >= deadline)); then
      serial_tail
      down >/dev/null
      die "no SSH on 127.0.0.1:$port after ${VM_BOOT_TIMEOUT:-300} s; serial log above"
    fi
    sleep 2
  done
  say "$NAME is up: ssh on 127.0.0.1:$port after $((SECONDS - started)) s"
  echo "$port"
}

down() {
  local pid _
  if pid=$(running_pid); then
    # The overlay is thrown away: no clean shutdown of the guest is needed, only qemu's end.
    kill "$pid"
    for _ in {1..50}; do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    say "stopped $NAME (pid $pid)"
  else
    say "$NAME is not running"
  fi
  # The serial log stays for a post-mortem; the next `up` starts it afresh.
  rm -f "$OVERLAY" "$PIDFILE" "$PORTFILE"
}

# A power cut: SIGKILL, so qemu neither shuts the guest down nor writes out anything the guest did not flush.
cut() {
  local pid _
  pid=$(running_pid) || die "$NAME is not running"
  kill -9 "$pid"
  for _ in {1..50}; do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  rm -f "$PIDFILE" "$PORTFILE"
  say "cut the power of $NAME (pid $pid); its disk stays for: scripts/lab/vm.sh poweron"
}

status() {
  local pid
  if pid=$(running_pid); then
    echo "$NAME running pid=$pid port=$(cat "$PORTFILE")"
  else
    echo "$NAME stopped"
    exit 3
  fi
}

case ${1:-} in
  up) up ;;
  down) down ;;
  cut) cut ;;
  poweron) up keep ;;
  status) status ;;
  ssh) shift; running_pid >/dev/null || die "$NAME is not running: scripts/lab/vm.sh up"; vm_ssh "$@" ;;
  *) echo "usage: $0 up|down|cut|poweron|status|ssh [command...]" >&2; exit 2 ;;
esac
