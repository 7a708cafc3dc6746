#!/usr/bin/env bash
# Builds the lab's Debian 12 VM disk image offline: debootstrap from Debian's archive (cloud kernel,
# openssh-server, python3), configured for a qemu boot with -kernel and no initrd, packed with
# mkfs.ext4 -d into a sparse raw image. Outputs in .cache/vm/: debian12.img, vmlinuz and the lab SSH
# key pair (made once). Rebuilt only when the recipe (suite, package list, this script, the lab
# public key) changes: its hash is kept next to the image.
# Usage: scripts/lab/vm_image.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

SUITE=bookworm
# dbus: shutdown and systemctl reboot ask logind over D-Bus, and fail without it. The network is
# systemd-networkd's (in systemd): no ifupdown or DHCP client scripts to run at every boot. rsync: persist's
# incremental syncs (the collection does not install it); logrotate: the power-cut test's /var/log.
PACKAGES=linux-image-cloud-amd64,initramfs-tools,openssh-server,systemd-sysv,udev,dbus,python3,sudo,kmod,e2fsprogs,xfsprogs,util-linux,procps,fio,rsync,logrotate
HOSTNAME_VM=debian12-vm
SIZE=3G
OUT=.cache/vm
IMG=$OUT/debian12.img
KEY=$OUT/lab_ed25519
STAMP=$OUT/debian12.recipe

# shellcheck source=scripts/lab/mirror.sh
source "$(dirname "$0")/mirror.sh"

mkdir -p "$OUT"
# One build at a time: make test's lanes may both ask for the image (molecule vm, the power-cut test).
exec 8>"$OUT/.build.lock"
flock 8
# One key pair for the lab, made once: the image's authorized_keys carries its public half.
if [[ ! -f $KEY || ! -f $KEY.pub ]]; then
  rm -f "$KEY" "$KEY.pub"
  ssh-keygen -q -t ed25519 -N '' -C ramdisk-provision-lab -f "$KEY"
  echo "vm_image.sh: made the lab SSH key $KEY"
fi

recipe=$(printf '%s\n' "$SUITE" "$PACKAGES" "$SIZE" | cat - "$0" "$KEY.pub" | sha256sum | cut -c1-16)
if [[ -f $IMG && -f $OUT/vmlinuz && $(cat "$STAMP" 2>/dev/null) == "$recipe" ]]; then
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
# Root on an NVMe disk, whose driver the cloud kernel has built in (virtio-blk is a module): no
# initrd to unpack and run, seconds of each boot under emulation. The kernel mounts it rw (the command
# line says so); fsck is not wanted.
printf '/dev/nvme0n1 / ext4 rw,errors=remount-ro 0 0\n' >"$root/etc/fstab"
# net.ifnames=0 on the kernel command line: the virtio NIC is eth0, whatever its PCI slot. qemu's user
# network always hands out 10.0.2.15: a static address needs no DHCP exchange at boot.
install -d "$root/etc/systemd/network"
printf '[Match]\nName=eth0\n\n[Network]\nAddress=10.0.2.15/24\nGateway=10.0.2.2\n' >"$root/etc/systemd/network/10-eth0.network"
chroot "$root" systemctl enable --quiet systemd-networkd.service

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
# would only download or scrub, no KVM modules (the emulated CPU offers SVM; nothing here uses it),
# none of the modules, debug mounts and pstore that nothing here uses.
printf 'blacklist kvm_amd\nblacklist kvm_intel\nblacklist kvm\n' >"$root/etc/modprobe.d/ramdisk-lab.conf"
for unit in getty-static.service getty@tty1.service apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer e2scrub_reap.service fstrim.timer man-db.timer \
            modprobe@drm.service modprobe@efi_pstore.service modprobe@dm_mod.service modprobe@fuse.service modprobe@loop.service \
            sys-kernel-debug.mount sys-kernel-tracing.mount dev-hugepages.mount sys-fs-fuse-connections.mount systemd-pstore.service; do
  ln -sf /dev/null "$root/etc/systemd/system/$unit"
done
# systemd runs every generator at boot and at each daemon-reload, which the roles do often: together
# a second of each under emulation. Kept: fstab's (the roles persist there), getty's (serial console).
install -d "$root/etc/systemd/system-generators"
for generator in cryptsetup debug gpt-auto hibernate-resume integritysetup rc-local run system-update sysv veritysetup; do
  ln -sf /dev/null "$root/etc/systemd/system-generators/systemd-$generator-generator"
done

# Ansible runs each module from a zip (AnsiballZ) that Python compiles afresh every time: under
# emulation 3 of the 5 s a task takes. This hook keeps that bytecode, keyed by a hash of the source,
# in the VM (its overlay is dropped at `down`); the modules run as they would without it.
cat >"$root/usr/lib/python3/dist-packages/ramdisk_lab_zipcache.py" <<'EOF'
"""Lab VM only (scripts/lab/vm_image.sh): keeps the bytecode of modules imported from zip files."""

import _imp
import marshal
import os
import zipimport

_DIR = "/var/cache/ramdisk-lab-pyc"
_KEY = zipimport._bootstrap_external._RAW_MAGIC_NUMBER
_compile_source = zipimport._compile_source


def _cached_compile_source(pathname, source):
    cached = os.path.join(_DIR, _imp.source_hash(_KEY, source).hex())
    try:
        with open(cached, "rb") as f:
            code = marshal.loads(f.read())
        _imp._fix_co_filename(code, pathname)
        return code
    except Exception:
        pass
    code = _compile_source(pathname, source)
    try:
        os.makedirs(_DIR, mode=0o700, exist_ok=True)
        partial = "%s.%d" % (cached, os.getpid())
        with open(partial, "wb") as f:
            f.write(marshal.dumps(code))
        os.replace(partial, cached)
    except Exception:
        pass
    return code


zipimport._compile_source = _cached_compile_source
EOF
echo 'import ramdisk_lab_zipcache' >"$root/usr/lib/python3/dist-packages/ramdisk-lab-zipcache.pth"
chroot "$root" python3 -m py_compile /usr/lib/python3/dist-packages/ramdisk_lab_zipcache.py
# Each boot of a fresh overlay gets its own machine id.
: >"$root/etc/machine-id"
rm -f "$root/var/lib/dbus/machine-id"
chroot "$root" apt-get clean
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin

kernels=("$root"/boot/vmlinuz-*)
[[ -f ${kernels[0]} ]] \
  || { echo "vm_image.sh: no kernel in $root/boot; is linux-image-cloud-amd64 in PACKAGES?" >&2; exit 1; }

echo "vm_image.sh: packing $IMG ($SIZE sparse ext4)"
rm -f "$IMG.tmp"
truncate -s "$SIZE" "$IMG.tmp"
mkfs.ext4 -q -F -L root -d "$root" "$IMG.tmp"
cp "${kernels[0]}" "$OUT/vmlinuz"
rm -f "$OUT/initrd.img"
mv -f "$IMG.tmp" "$IMG"
echo "$recipe" >"$STAMP"
echo "vm_image.sh: built $IMG, $(basename "${kernels[0]}") (recipe $recipe, $((SECONDS - started)) s)"
