#!/usr/bin/env bash
# Builds the lab's container images offline: debootstrap from Debian's archive, then docker import.
# An image is rebuilt only when its recipe (suite, package list, this script) changes: the recipe's
# hash is stored as a label on the image.
# Usage: scripts/lab/images.sh [bookworm] [trixie]   (default: both)
set -euo pipefail
cd "$(dirname "$0")/../.."

PACKAGES=python3,systemd,systemd-sysv,util-linux,e2fsprogs,fio,kmod,procps,attr,acl,sudo
REPO=ramdisk-lab/debian
declare -A TAG=([bookworm]=12 [trixie]=13)

# shellcheck source=scripts/lab/mirror.sh
source "$(dirname "$0")/mirror.sh"

build() {
  local suite=$1 tag=${TAG[$1]}
  local recipe
  recipe=$(printf '%s\n' "$suite" "$PACKAGES" | cat - "$0" | sha256sum | cut -c1-16)
  if [[ $(docker image inspect -f '{{ index .Config.Labels "recipe" }}' "$REPO:$tag" 2>/dev/null) == "$recipe" ]]; then
    echo "images.sh: $REPO:$tag is up to date (recipe $recipe)"
    return
  fi
  local root
  root=$(mktemp -d /var/tmp/ramdisk-lab-rootfs.XXXXXX)
  trap 'rm -rf "$root"' RETURN
  echo "images.sh: debootstrap $suite into $root (about a minute)"
  debootstrap --variant=minbase --include="$PACKAGES" "$suite" "$root" "$(lab_mirror)" >"$root.log" 2>&1 \
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
((${#suites[@]})) || suites=(bookworm trixie)
for s in "${suites[@]}"; do
  [[ -n ${TAG[$s]:-} ]] || { echo "images.sh: unknown suite '$s' (bookworm or trixie)" >&2; exit 2; }
  build "$s"
done
