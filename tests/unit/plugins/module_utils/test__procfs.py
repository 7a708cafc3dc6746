# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

import pytest

from ansible_collections.ramdisk.provision.plugins.module_utils._procfs import (
    detect_container,
    in_kernel_tree,
    is_ram_backed,
    kernel_at_least,
    merged_options,
    mount_for_path,
    option_value,
    parse_filesystems,
    parse_kernel_release,
    parse_meminfo,
    parse_mountinfo,
    parse_swaps,
    parse_zram_algorithms,
    ram_block_kind,
    ram_storage_mounts,
    unescape_octal,
)

MEMINFO = """\
MemTotal:       24682416 kB
MemFree:        22709920 kB
MemAvailable:   24017000 kB
Buffers:          102400 kB
Cached:          1200000 kB
SwapCached:            0 kB
Shmem:             12796 kB
SwapTotal:       4194300 kB
SwapFree:        4194300 kB
HugePages_Total:       0
Hugepagesize:       2048 kB
"""

MOUNTINFO = r"""22 27 0:21 / /proc rw,relatime - proc proc rw
24 27 0:6 / /dev rw,relatime - devtmpfs devtmpfs rw,size=12331664k,nr_inodes=3082916,mode=755
25 24 0:23 / /dev/shm rw,nosuid,nodev shared:3 - tmpfs tmpfs rw,size=24682416k,inode64
27 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw,discard
30 27 0:27 / /tmp rw,nosuid,nodev,noatime shared:12 master:4 - tmpfs tmpfs rw,size=2097152k,nr_inodes=1048576,mode=1777,noswap,inode64
31 27 0:28 / /mnt/my\040cache rw,relatime - tmpfs my\040tmp rw,size=1024k,mode=755
32 27 252:0 / /var/cache/build rw,noatime - ext4 /dev/zram0 rw
33 27 1:0 / /srv/brd rw - xfs /dev/ram0 rw,attr2
34 27 0:29 / /srv/ramfs rw,relatime - ramfs ramfs rw
35 27 0:30 /sub /srv/bind rw - ext4 /dev/vda1 rw
36 30 0:31 / /tmp rw,relatime - tmpfs tmpfs rw,size=1024k
"""

# /proc/self/mountinfo of a lab container (docker 20.10, cgroup v1 host; `--tmpfs /run --tmpfs /run/lock`,
# cgroups bound in), with the overlay's directories and the container id cut short. Docker masks /proc/acpi
# and /sys/firmware with empty read-only tmpfs (half of RAM each) and /proc/keys, /proc/timer_list with
# binds of the /dev tmpfs's null device.
DOCKER_MOUNTINFO = r"""118 67 0:57 / / rw,relatime master:3 - overlay overlay rw,lowerdir=L1:L2,upperdir=U,workdir=W
119 118 0:60 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
120 118 0:61 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755
121 120 0:62 / /dev/pts rw,nosuid,noexec,relatime - devpts devpts rw,gid=5,mode=620,ptmxmode=666
122 118 0:63 / /sys ro,nosuid,nodev,noexec,relatime - sysfs sysfs ro
123 120 0:59 / /dev/mqueue rw,nosuid,nodev,noexec,relatime - mqueue mqueue rw
124 120 0:64 / /dev/shm rw,nosuid,nodev,noexec,relatime - tmpfs shm rw,size=65536k
125 118 0:65 / /run rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw
126 118 254:0 /var/lib/docker/containers/ID/resolv.conf /etc/resolv.conf rw,relatime - ext4 /dev/vda rw,discard
127 118 254:0 /var/lib/docker/containers/ID/hostname /etc/hostname rw,relatime - ext4 /dev/vda rw,discard
128 118 254:0 /var/lib/docker/containers/ID/hosts /etc/hosts rw,relatime - ext4 /dev/vda rw,discard
129 125 0:66 / /run/lock rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw
130 122 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs ro,size=4096k,nr_inodes=1024,mode=755
131 130 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
132 130 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
139 130 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
140 130 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
68 119 0:60 /bus /proc/bus ro,nosuid,nodev,noexec,relatime - proc proc rw
69 119 0:60 /fs /proc/fs ro,nosuid,nodev,noexec,relatime - proc proc rw
70 119 0:60 /irq /proc/irq ro,nosuid,nodev,noexec,relatime - proc proc rw
96 119 0:60 /sys /proc/sys ro,nosuid,nodev,noexec,relatime - proc proc rw
97 119 0:67 / /proc/acpi ro,relatime - tmpfs tmpfs ro
98 119 0:61 /null /proc/keys rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755
99 119 0:61 /null /proc/timer_list rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755
100 122 0:68 / /sys/firmware ro,relatime - tmpfs tmpfs ro
"""

SWAPS = """Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority
/dev/zram0                              partition\t4194300\t\t1024\t\t100
/swap\\040file                           file\t\t2097148\t\t0\t\t-2
"""

FILESYSTEMS = "nodev\tsysfs\nnodev\ttmpfs\nnodev\tramfs\n\text4\n\txfs\nnodev\tproc\n"


def test_parse_meminfo_in_bytes():
    info = parse_meminfo(MEMINFO)
    assert info["MemTotal"] == 24682416 * 1024
    assert info["MemAvailable"] == 24017000 * 1024
    assert info["Shmem"] == 12796 * 1024
    assert info["HugePages_Total"] == 0  # no unit: a count, kept as is


def test_parse_mountinfo_fields():
    mounts = parse_mountinfo(MOUNTINFO)
    assert len(mounts) == 11
    tmp = mounts[4]
    assert tmp["mount_id"] == 30 and tmp["parent_id"] == 27
    assert (tmp["major"], tmp["minor"]) == (0, 27)
    assert tmp["root"] == "/"
    assert tmp["mount_point"] == "/tmp"
    assert tmp["mount_options"] == ["rw", "nosuid", "nodev", "noatime"]
    assert tmp["optional_fields"] == ["shared:12", "master:4"]
    assert tmp["fstype"] == "tmpfs" and tmp["source"] == "tmpfs"
    assert "noswap" in tmp["super_options"]
    assert mounts[9]["root"] == "/sub"


def test_parse_mountinfo_octal_escapes():
    mounts = parse_mountinfo(MOUNTINFO)
    assert mounts[5]["mount_point"] == "/mnt/my cache"
    assert mounts[5]["source"] == "my tmp"
    assert unescape_octal(r"a\011b\012c\134d") == "a\tb\nc\\d"


def test_merged_options_keep_order_once():
    tmp = parse_mountinfo(MOUNTINFO)[4]
    assert merged_options(tmp) == [
        "rw", "nosuid", "nodev", "noatime", "size=2097152k", "nr_inodes=1048576", "mode=1777", "noswap", "inode64"]
    assert option_value(merged_options(tmp), "size") == "2097152k"
    assert option_value(merged_options(tmp), "noswap") is True
    assert option_value(merged_options(tmp), "huge") is None


@pytest.mark.parametrize(
    "fstype, source, ram, kind",
    [
        ("tmpfs", "tmpfs", True, None),
        ("ramfs", "ramfs", True, None),
        ("ext4", "/dev/zram0", True, "zram"),
        ("xfs", "/dev/ram12", True, "brd"),
        ("ext4", "/dev/vda1", False, None),
        ("ext4", "/dev/zram0p1", False, None),
        ("ext4", "/dev/ramdisk", False, None),
    ],
)
def test_ram_backed(fstype, source, ram, kind):
    assert is_ram_backed(fstype, source) is ram
    assert ram_block_kind(source) == kind


@pytest.mark.parametrize(
    "path, inside",
    [
        ("/proc", True),
        ("/proc/acpi", True),
        ("/sys/firmware", True),
        ("/sys/fs/cgroup", True),
        ("/sys/devices/virtual/powercap", True),
        ("/processing", False),
        ("/sysroot", False),
        ("/srv/sys", False),
        ("/dev/shm", False),
        ("/run", False),
        ("/", False),
    ],
)
def test_in_kernel_tree(path, inside):
    assert in_kernel_tree(path) is inside


def test_ram_storage_mounts_leave_out_docker_masks():
    mounts = parse_mountinfo(DOCKER_MOUNTINFO)
    # Each mask is a tmpfs, so is_ram_backed() alone would count it.
    masked = ["/sys/fs/cgroup", "/proc/acpi", "/proc/keys", "/proc/timer_list", "/sys/firmware"]
    assert [m["mount_point"] for m in mounts if is_ram_backed(m["fstype"], m["source"])] == [
        "/dev", "/dev/shm", "/run", "/run/lock"] + masked
    assert [m["mount_point"] for m in ram_storage_mounts(mounts)] == ["/dev", "/dev/shm", "/run", "/run/lock"]


def test_ram_storage_mounts_keep_every_ram_backend():
    kept = [m["mount_point"] for m in ram_storage_mounts(parse_mountinfo(MOUNTINFO))]
    assert kept == ["/dev/shm", "/tmp", "/mnt/my cache", "/var/cache/build", "/srv/brd", "/srv/ramfs", "/tmp"]


@pytest.mark.parametrize(
    "path, mount_point, mount_id",
    [
        ("/tmp", "/tmp", 36),  # stacked: the later mount is on top
        ("/tmp/x/y", "/tmp", 36),
        ("/tmpx", "/", 27),
        ("/var/cache/build/obj", "/var/cache/build", 32),
        ("/mnt/my cache/a", "/mnt/my cache", 31),
        ("/", "/", 27),
    ],
)
def test_mount_for_path(path, mount_point, mount_id):
    mount = mount_for_path(parse_mountinfo(MOUNTINFO), path)
    assert mount["mount_point"] == mount_point
    assert mount["mount_id"] == mount_id


def test_parse_swaps():
    assert parse_swaps(SWAPS) == [
        {"path": "/dev/zram0", "type": "partition", "size_bytes": 4194300 * 1024, "used_bytes": 1024 * 1024,
         "priority": 100},
        {"path": "/swap file", "type": "file", "size_bytes": 2097148 * 1024, "used_bytes": 0, "priority": -2},
    ]
    assert parse_swaps("Filename\tType\tSize\tUsed\tPriority\n") == []


def test_parse_filesystems():
    assert parse_filesystems(FILESYSTEMS) == {"sysfs", "tmpfs", "ramfs", "ext4", "xfs", "proc"}


@pytest.mark.parametrize(
    "text, algorithms, selected",
    [
        ("lzo [lzo-rle] lz4\n", ["lzo", "lzo-rle", "lz4"], "lzo-rle"),
        ("lzo lzo-rle lz4 lz4hc 842 [zstd]\n", ["lzo", "lzo-rle", "lz4", "lz4hc", "842", "zstd"], "zstd"),
        ("lzo lz4\n", ["lzo", "lz4"], None),
        ("", [], None),
    ],
)
def test_parse_zram_algorithms(text, algorithms, selected):
    assert parse_zram_algorithms(text) == {"algorithms": algorithms, "selected": selected}


@pytest.mark.parametrize(
    "environ, present, systemd_file, expected",
    [
        (None, ["/.dockerenv"], None, "docker"),
        (None, ["/run/.containerenv"], None, "podman"),
        (None, ["/.dockerenv", "/run/.containerenv"], None, "podman"),
        ("PATH=/bin\0container=lxc\0TERM=xterm\0", [], None, "lxc"),
        ("container=systemd-nspawn\0", [], None, "systemd-nspawn"),
        ("PATH=/bin\0HOME=/\0", [], None, None),
        (None, [], None, None),
        (None, [], "systemd-nspawn\n", "systemd-nspawn"),
        ("container=podman\0", ["/.dockerenv"], None, "podman"),
    ],
)
def test_detect_container(environ, present, systemd_file, expected):
    assert detect_container(environ, present, systemd_file) == expected


@pytest.mark.parametrize(
    "release, minimum, expected",
    [
        ("6.4.0", (6, 4), True),
        ("6.3.13-200.fc38.x86_64", (6, 4), False),
        ("6.18.44-fc-v445", (6, 4), True),
        ("5.15.0-105-generic", (6, 4), False),
        ("7.0", (6, 4), True),
        ("6", (6, 4), False),
        ("4.18.0-513.el8.x86_64", (4, 18), True),
        ("garbage", (6, 4), False),
    ],
)
def test_kernel_at_least(release, minimum, expected):
    assert kernel_at_least(release, minimum) is expected


def test_parse_kernel_release():
    assert parse_kernel_release("6.8.0-45-generic") == (6, 8, 0)
    assert parse_kernel_release("6.4") == (6, 4)
