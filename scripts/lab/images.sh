#!/usr/bin/env bash
# Builds the lab's container images offline: debootstrap from Debian's archive, then docker import.
# An image is rebuilt only when its recipe (suite, package list, this script) changes: the recipe's
# hash is stored as a label on the image.
# Usage: scripts/lab/images.sh [bookworm] [trixie] [bookworm-postgresql] [bookworm-metrics] [trixie-build]
#        [trixie-controller]   (default: all six; `make demo` asks for the lab's four)
#
# Speed, for the first run on a fresh machine: the two base images (bookworm, trixie) are debootstrapped
# at the same time, with their downloaded packages kept in .cache/debootstrap so that a rebuild fetches
# nothing again. The other images are the bookworm image plus a package or two: each is the bookworm
# image's tree (or the trixie image's) with apt-get run in a chroot (seconds), not a debootstrap of its own,
# and they are made at the same time. Package caches and apt lists are left out of the images (the containers have no network).
set -euo pipefail
cd "$(dirname "$0")/../.."

PACKAGES=python3,systemd,systemd-sysv,util-linux,e2fsprogs,fio,kmod,procps,attr,acl,sudo,bonnie++,rsync
REPO=ramdisk-lab/debian
CACHE=$PWD/.cache/debootstrap
# Image name -> tag, and what it is made from: a Debian suite (base images) or a base image plus packages.
# bookworm-postgresql is for molecule/database and the lab's database host: the package's postinst makes
# the 15/main cluster and enables it (nothing starts in the chroot). bookworm-metrics has Debian's
# prometheus-node-exporter for molecule/metrics. trixie-build is the lab's builder host and the benchmark
# scenario's Debian 13 instance: a C compiler, make, and Lua's sources from Debian's source package in
# /usr/local/src/lua (SOURCE), a real code base for the benchmark's compile test. trixie-controller is not a
# lab host: it runs ansible-core 2.20 and later, which need Python 3.12 or newer, on Debian 13's own Python for
# the tests (scripts/test/controller.sh), with git and shellcheck for ansible-test.
declare -A TAG=([bookworm]=12 [trixie]=13 [bookworm-postgresql]=12-postgresql [bookworm-metrics]=12-metrics
                [trixie-build]=13-build [trixie-controller]=13-controller)
declare -A SUITE=([bookworm]=bookworm [trixie]=trixie)
declare -A BASE=([bookworm-postgresql]=bookworm [bookworm-metrics]=bookworm [trixie-build]=trixie
                 [trixie-controller]=trixie)
declare -A EXTRA=([bookworm-postgresql]=postgresql [bookworm-metrics]=prometheus-node-exporter
                  [trixie-build]="gcc make libc6-dev" [trixie-controller]="python3-venv git ca-certificates shellcheck")
declare -A SOURCE=([trixie-build]=lua5.4)

# shellcheck source=scripts/lab/mirror.sh
source "$(dirname "$0")/mirror.sh"

recipe_of() {
  if [[ -n ${SUITE[$1]:-} ]]; then
    printf '%s\n' "${SUITE[$1]}" "$PACKAGES" | cat - "$0" | sha256sum | cut -c1-16
  else
    printf '%s\n' "$(recipe_of "${BASE[$1]}")" "${EXTRA[$1]}" "${SOURCE[$1]:-}" | sha256sum | cut -c1-16
  fi
}

up_to_date() {
  [[ $(docker image inspect -f '{{ index .Config.Labels "recipe" }}' "$REPO:${TAG[$1]}" 2>/dev/null) == "$(recipe_of "$1")" ]]
}

# The tree, as an image: no package cache or apt lists; units that wait for consoles or hardware, which a
# container has not, masked (they only slow the boot).
import_tree() {
  local name=$1 root=$2
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*_* 2>/dev/null || true
  for unit in getty.target systemd-udevd.service systemd-udev-trigger.service \
              systemd-timesyncd.service apt-daily.timer apt-daily-upgrade.timer; do
    ln -sf /dev/null "$root/etc/systemd/system/$unit"
  done
  tar -C "$root" -c . | docker import \
    --change "LABEL recipe=$(recipe_of "$name")" \
    --change 'CMD ["/lib/systemd/systemd"]' \
    - "$REPO:${TAG[$name]}" >/dev/null
}

build_base() {
  local name=$1 suite=${SUITE[$1]} root
  root=$(mktemp -d /var/tmp/ramdisk-lab-rootfs.XXXXXX)
  # The image's /, as docker shows it: service users reach their files while packages configure.
  chmod 0755 "$root"
  mkdir -p "$CACHE/$suite"
  debootstrap --variant=minbase --cache-dir="$CACHE/$suite" --include="$PACKAGES" \
    "$suite" "$root" "$(lab_mirror)" || { rm -rf "$root"; return 1; }
  import_tree "$name" "$root"
  rm -rf "$root"
}

build_derived() {
  local name=$1 base=${BASE[$1]} root cid
  root=$(mktemp -d /var/tmp/ramdisk-lab-rootfs.XXXXXX)
  chmod 0755 "$root"
  cid=$(docker create "$REPO:${TAG[$base]}")
  docker export "$cid" | tar -C "$root" -x
  docker rm "$cid" >/dev/null
  # apt in a chroot: the machine's network and name servers, the image's own sources (the same mirror and
  # suite as its base). /proc for the packages' scripts; nothing is started (no init runs in a chroot).
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  mount -t proc proc "$root/proc"
  local rc=0
  DEBIAN_FRONTEND=noninteractive chroot "$root" sh -c \
    "apt-get update -qq && apt-get install -y -qq --no-install-recommends ${EXTRA[$name]//,/ }" || rc=$?
  # A source package's upstream tarball, unpacked into /usr/local/src/<name without its version>: the
  # sources list of the image gets a deb-src twin of its deb line for apt-get source, then loses it again.
  local src=${SOURCE[$name]:-}
  if ((rc == 0)) && [[ -n $src ]]; then
    DEBIAN_FRONTEND=noninteractive chroot "$root" sh -ec "
      cp /etc/apt/sources.list /etc/apt/sources.list.orig
      sed -n 's/^deb /deb-src /p' /etc/apt/sources.list.orig >>/etc/apt/sources.list
      apt-get update -qq
      mkdir -p /var/tmp/source /usr/local/src/${src%%[0-9.]*}
      cd /var/tmp/source && apt-get source --download-only -qq $src
      tar -C /usr/local/src/${src%%[0-9.]*} --strip-components=1 --no-same-owner -xf ${src}_*.orig.tar.*
      mv /etc/apt/sources.list.orig /etc/apt/sources.list
      rm -rf /var/tmp/source" || rc=$?
  fi
  umount "$root/proc"
  ((rc == 0)) && import_tree "$name" "$root" || rc=$?
  rm -rf "$root"
  return "$rc"
}

# Runs builds at the same time, each with its own log; prints a line per image, and the log's end for a
# failed one. Returns non-zero when any failed.
run_all() {
  local kind=$1; shift
  local -A pid=() log=()
  local name failed=0
  for name in "$@"; do
    if up_to_date "$name"; then
      echo "images.sh: $REPO:${TAG[$name]} is up to date (recipe $(recipe_of "$name"))"
      continue
    fi
    log[$name]=$(mktemp /var/tmp/ramdisk-lab-image.XXXXXX.log)
    echo "images.sh: building $REPO:${TAG[$name]} ..."
    "build_$kind" "$name" >"${log[$name]}" 2>&1 &
    pid[$name]=$!
  done
  for name in "${!pid[@]}"; do
    if wait "${pid[$name]}"; then
      echo "images.sh: $REPO:${TAG[$name]} built"
      rm -f "${log[$name]}"
    else
      tail -n 20 "${log[$name]}" >&2
      echo "images.sh: building $REPO:${TAG[$name]} failed; the log's end is above (${log[$name]})" >&2
      failed=1
    fi
  done
  return "$failed"
}

wanted=("$@")
((${#wanted[@]})) || wanted=(bookworm trixie bookworm-postgresql bookworm-metrics trixie-build trixie-controller)
bases=() derived=()
for name in "${wanted[@]}"; do
  [[ -n ${TAG[$name]:-} ]] || { echo "images.sh: unknown image '$name' (${!TAG[*]})" >&2; exit 2; }
  if [[ -n ${SUITE[$name]:-} ]]; then bases+=("$name"); else derived+=("$name"); fi
done
# A derived image needs its base up to date first.
for name in "${derived[@]}"; do
  [[ " ${bases[*]} " == *" ${BASE[$name]} "* ]] || bases+=("${BASE[$name]}")
done
start=$SECONDS
run_all base "${bases[@]}"
((${#derived[@]} == 0)) || run_all derived "${derived[@]}"
echo "images.sh: images ready in $((SECONDS - start)) s"
