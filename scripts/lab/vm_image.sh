#!/usr/bin/env bash
# Builds the lab's Debian 12 VM disk image offline: debootstrap from Debian's archive (cloud kernel,
# openssh-server, python3), configured for a qemu boot with -kernel/-initrd, packed with mkfs.ext4 -d
# into a sparse raw image. Outputs in .cache/vm/: debian12.img, vmlinuz, initrd.img and the lab SSH
# key pair (made once). Rebuilt only when the recipe (suite, package list, this script, the lab
# public key) changes: its hash is kept next to the image.
# Usage: scripts/lab/vm_image.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

SUITE=bookworm
# dbus: shutdown and systemctl reboot ask logind over D-Bus, and fail without it.
PACKAGES=linux-image-cloud-amd64,initramfs-tools,openssh-server,systemd-sysv,udev,dbus,ifupdown,isc-dhcp-client,python3,sudo,kmod,e2fsprogs,xfsprogs,util-linux,procps,fio
HOSTNAME_VM=debian12-vm
SIZE=3G
OUT=.cache/vm
IMG=$OUT/debian12.img
KEY=$OUT/lab_ed25519
STAMP=$OUT/debian12.recipe

# shellcheck source=scripts/lab/mirror.sh
source "$(dirname "$0")/mirror.sh"

mkdir -p "$OUT"
# One key pair for the lab, made once: the image's authorized_keys carries its public half.
if [[ ! -f $KEY || ! -f $KEY.pub ]]; then
  rm -f "$KEY" "$KEY.pub"
  ssh-keygen -q -t ed25519 -N '' -C ramdisk-provision-lab -f "$KEY"
  echo "vm_image.sh: made the lab SSH key $KEY"
fi

recipe=$(printf '%s\n' "$SUITE" "$PACKAGES" "$SIZE" | cat - "$0" "$KEY.pub" | sha256sum | cut -c1-16)
if [[ -f $IMG && -f $OUT/vmlinuz && -f $OUT/initrd.img && $(cat "$STAMP" 2>/dev/null) == "$recipe" ]]; then
  echo "vm_image.sh: $IMG is up to date (recipe $recipe)"
  exit 0
fi

started=$SECONDS
root=$(mktemp -d /var/tmp/ramdisk-lab-vm.XXXXXX)
cleanup() {
  # debootstrap mounts /proc and /sys in the target; never let rm reach through a leftover mount.
  findmnt -rn -o TARGET | grep -F "$root/" | sort -r | xargs -r umount -l || true
  rm -rf --one-file-system "$root" "$root.log" "$IMG.tmp"
}
trap cleanup EXIT

echo "vm_image.sh: debootstrap $SUITE into $root (a few minutes)"
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$root" "$(lab_mirror)" >"$root.log" 2>&1 \
  || { tail -n 20 "$root.log" >&2; echo "vm_image.sh: debootstrap $SUITE failed; log above" >&2; exit 1; }
echo "vm_image.sh: debootstrap done ($((SECONDS - started)) s)"

echo "$HOSTNAME_VM" >"$root/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 %s\n::1 localhost ip6-localhost ip6-loopback\n' "$HOSTNAME_VM" >"$root/etc/hosts"
# Root on the virtio disk; the kernel mounts it rw (the command line says so), fsck is not wanted.
printf '/dev/vda / ext4 rw,errors=remount-ro 0 0\n' >"$root/etc/fstab"
# net.ifnames=0 on the kernel command line: the virtio NIC is eth0, whatever its PCI slot. Hotplug,
# not auto: boot does not wait for udev to settle (seconds under emulation), eth0 comes up when seen.
cat >"$root/etc/network/interfaces" <<'EOF'
auto lo
iface lo inet loopback

allow-hotplug eth0
iface eth0 inet dhcp
EOF

# Root logs in by the lab key only; no passwords anywhere (root's stays locked).
install -d -m 0700 "$root/root/.ssh"
install -m 0600 "$KEY.pub" "$root/root/.ssh/authorized_keys"
cat >"$root/etc/ssh/sshd_config.d/ramdisk-lab.conf" <<'EOF'
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UseDNS no
EOF

# A login prompt on the serial console, the only console the VM has.
ln -sf /lib/systemd/system/serial-getty@.service "$root/etc/systemd/system/getty.target.wants/serial-getty@ttyS0.service"
# Under software emulation every unit counts: no text consoles but the serial one, no timers that
# would only download or scrub, no KVM modules (the emulated CPU offers SVM; nothing here uses it).
printf 'blacklist kvm_amd\nblacklist kvm_intel\nblacklist kvm\n' >"$root/etc/modprobe.d/ramdisk-lab.conf"
for unit in getty-static.service getty@tty1.service apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer e2scrub_reap.service fstrim.timer man-db.timer; do
  ln -sf /dev/null "$root/etc/systemd/system/$unit"
done
# Each boot of a fresh overlay gets its own machine id.
: >"$root/etc/machine-id"
rm -f "$root/var/lib/dbus/machine-id"
chroot "$root" apt-get clean
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin

kernels=("$root"/boot/vmlinuz-*) initrds=("$root"/boot/initrd.img-*)
[[ -f ${kernels[0]} && -f ${initrds[0]} ]] \
  || { echo "vm_image.sh: no kernel or initrd in $root/boot; is linux-image-cloud-amd64 in PACKAGES?" >&2; exit 1; }

echo "vm_image.sh: packing $IMG ($SIZE sparse ext4)"
rm -f "$IMG.tmp"
truncate -s "$SIZE" "$IMG.tmp"
mkfs.ext4 -q -F -L root -d "$root" "$IMG.tmp"
cp "${kernels[0]}" "$OUT/vmlinuz"
cp "${initrds[0]}" "$OUT/initrd.img"
mv -f "$IMG.tmp" "$IMG"
echo "$recipe" >"$STAMP"
echo "vm_image.sh: built $IMG, $(basename "${kernels[0]}") (recipe $recipe, $((SECONDS - started)) s)"
