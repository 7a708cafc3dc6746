#!/usr/bin/env bash
# Builds the lab's container images offline: debootstrap from Debian's archive, then docker import.
# An image is rebuilt only when its recipe (suite, package list, this script) changes: the recipe's
# hash is stored as a label on the image.
# Usage: scripts/lab/images.sh [bookworm] [trixie] [bookworm-postgresql]   (default: all three)
set -euo pipefail
cd "$(dirname "$0")/../.."

PACKAGES=python3,systemd,systemd-sysv,util-linux,e2fsprogs,fio,kmod,procps,attr,acl,sudo
REPO=ramdisk-lab/debian
# Image name -> Debian suite, tag and package list. bookworm-postgresql is the base image plus Debian's
# PostgreSQL (molecule/database): its postinst makes the 15/main cluster and enables it, while
# debootstrap's policy-rc.d keeps the server from starting during the build.
declare -A SUITE=([bookworm]=bookworm [trixie]=trixie [bookworm-postgresql]=bookworm)
declare -A TAG=([bookworm]=12 [trixie]=13 [bookworm-postgresql]=12-postgresql)
declare -A INCLUDE=([bookworm]=$PACKAGES [trixie]=$PACKAGES [bookworm-postgresql]="$PACKAGES,postgresql")

# shellcheck source=scripts/lab/mirror.sh
source "$(dirname "$0")/mirror.sh"

build() {
  local suite=${SUITE[$1]} tag=${TAG[$1]} packages=${INCLUDE[$1]}
  local recipe
  recipe=$(printf '%s\n' "$suite" "$packages" | cat - "$0" | sha256sum | cut -c1-16)
  if [[ $(docker image inspect -f '{{ index .Config.Labels "recipe" }}' "$REPO:$tag" 2>/dev/null) == "$recipe" ]]; then
    echo "images.sh: $REPO:$tag is up to date (recipe $recipe)"
    return
  fi
  local root
  root=$(mktemp -d /var/tmp/ramdisk-lab-rootfs.XXXXXX)
  trap 'rm -rf "$root"' RETURN
  # The image's /, as docker shows it: service users reach their files while packages configure (mktemp
  # made it 0700, and PostgreSQL's postinst makes its cluster as postgres).
  chmod 0755 "$root"
  echo "images.sh: debootstrap $suite for $REPO:$tag into $root (about a minute)"
  debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$(lab_mirror)" >"$root.log" 2>&1 \
    || { tail -n 20 "$root.log" >&2; echo "images.sh: debootstrap $suite failed; log above" >&2; exit 1; }
  rm -f "$root.log"
  # A container has no consoles or hardware: units that wait for them only slow the boot.
  for unit in getty.target systemd-udevd.service systemd-udev-trigger.service \
              systemd-timesyncd.service apt-daily.timer apt-daily-upgrade.timer; do
    ln -sf /dev/null "$root/etc/systemd/system/$unit"
  done
  echo "images.sh: importing $REPO:$tag"
  tar -C "$root" -c . | docker import \
    --change "LABEL recipe=$recipe" \
    --change 'CMD ["/lib/systemd/systemd"]' \
    - "$REPO:$tag" >/dev/null
}

suites=("$@")
((${#suites[@]})) || suites=(bookworm trixie bookworm-postgresql)
for s in "${suites[@]}"; do
  [[ -n ${TAG[$s]:-} ]] || { echo "images.sh: unknown image '$s' (bookworm, trixie or bookworm-postgresql)" >&2; exit 2; }
  build "$s"
done
