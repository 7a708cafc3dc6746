#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: bench_targets
short_description: Find and check the benchmark's targets on the host, and every error of the request, before anything is written
version_added: 1.1.0
description:
  - Chooses the paths the RAM-versus-disk benchmark measures - O(targets) when given, else every RAM-backed mount of
    the host (tmpfs, ramfs, and file systems on zram C(/dev/zramN) or brd C(/dev/ramN), from
    C(/proc/self/mountinfo)) outside O(system_mounts) - then O(disk_path) with the label C(disk).
  - Looks at each one - whether it exists, is a directory (a symbolic link is not) and is writable, its mount (the
    one the path is on, the top one where mounts are stacked), RAM or disk, the free space, and the size of a test
    file on it - the profile's size, at most O(memory_fraction) of MemAvailable and O(space_fraction) of the free
    space, in whole MiB, 0 under 1 MiB.
  - Asks each disk target whether it takes O_DIRECT - a new, randomly named hidden file in the target (created with
    O_EXCL and O_NOFOLLOW by the directory's descriptor) is switched to O_DIRECT and takes one aligned 4096-byte
    block, then is removed. A RAM target is never asked and never takes it (tmpfs and ramfs have no device to
    bypass to). The probe runs in check mode too - it only reads a capability, and removes its file; the target
    directory's modification time changes.
  - Finds the tools of the optional tests - bonnie++ and pg_test_fsync for the seeds profile, PostgreSQL and its
    user for pgbench, fio (C(fio --version), no shell), and for the compile test the build command, the build user
    and the source tree, walked as that user (a child process that drops root) by directory descriptors, never
    following a link, so a tree it cannot read, one that spans file systems, one over 100,000 files or a directory
    swapped while it is walked is refused before anything is copied.
  - Returns the targets as M(ramdisk.provision.bench_plan) takes them, why each optional test does not run here,
    and every error of the request (each naming the host, the variable, the value and the fix); with any error it
    fails with all of them.
  - Never changes the host but for the O_DIRECT probe's file, which it removes.
author: ramdisk.provision maintainers (@ramdisk-provision)
options:
  host:
    description: The name errors give the host (the inventory name).
    type: str
    required: true
  targets:
    description:
      - The paths to benchmark (C(benchmark_targets)), each a dict with C(path) and optionally C(label) (a plain
        name, unique; the path with its runs of other characters than letters and digits made C(-) when not given,
        C(root) for C(/)).
      - Empty for every RAM-backed mount of the host outside O(system_mounts).
    type: list
    elements: dict
    default: []
  disk_path:
    description: The directory on the disk to compare against (C(benchmark_disk_path)), added with the label C(disk); empty or null for none.
    type: str
  system_mounts:
    description: A regular expression matched at the start of a mount point - the mounts of the system, never picked as targets by themselves.
    type: str
    default: ^/(dev|run|sys|proc)(/|$)
  profile_size_bytes:
    description: The most one test file may hold in the profile (its C(size_bytes)), before the memory and space limits.
    type: int
    required: true
  memory_fraction:
    description: The share of MemAvailable one test file may take (C(benchmark_memory_fraction)).
    type: float
    default: 0.25
  space_fraction:
    description: The share of a target's free space one test file may take (C(benchmark_space_fraction)).
    type: float
    default: 0.25
  dir_name:
    description: The run's directory name under each target; the O_DIRECT probe's file is named after it.
    type: str
    default: ramdisk-bench
  tests:
    description: The tests asked for (C(benchmark_tests)) - dd, fio, metadata, pgbench, compile.
    type: list
    elements: str
    default: [dd, fio, metadata]
  profile:
    description: The profile (C(benchmark_profile)); C(seeds) runs the write-ups' experiments instead of the tests.
    type: str
    choices: [quick, standard, thorough, seeds]
    default: quick
  seeds:
    description: The write-ups' experiments asked for (C(benchmark_seeds)) - tmp_dd, bonnie, fio_dbtest, pg_test_fsync, dd_64k.
    type: list
    elements: str
    default: []
  seed_user:
    description: The unprivileged user bonnie++ runs as (C(benchmark_seed_user)).
    type: str
    default: nobody
  compile_source:
    description: The source tree the compile test builds (C(benchmark_compile_source)), an absolute path.
    type: str
    default: ""
  compile_command:
    description: The build command (C(benchmark_compile_command)), a list of arguments, the program first; a string is refused.
    type: raw
    default: [make, "-j{cores}"]
  compile_user:
    description: The unprivileged user the build runs as (C(benchmark_compile_user)).
    type: str
    default: nobody
  needs_fio:
    description: Whether the run needs fio; when not given, it does for the fio test or the seeds profile's fio_dbtest that is not skipped.
    type: bool
  install_fio:
    description:
      - Whether the role installs fio where it is missing (C(benchmark_install_fio)); when false, a run that needs
        fio on a host without it is an error.
    type: bool
    default: true
extends_documentation_fragment:
  - ramdisk.provision._attributes
  - ramdisk.provision._attributes.check_mode_full
attributes:
  platform:
    support: full
    platforms: linux
seealso:
  - module: ramdisk.provision.bench_plan
  - module: ramdisk.provision.ramdisk_facts
"""

EXAMPLES = r"""
- name: Find the RAM mounts, check them and the disk path, and the tools of the tests
  ramdisk.provision.bench_targets:
    host: "{{ inventory_hostname }}"
    targets: "{{ benchmark_targets }}"
    disk_path: "{{ benchmark_disk_path }}"
    profile_size_bytes: 67108864
    memory_fraction: "{{ benchmark_memory_fraction }}"
    space_fraction: "{{ benchmark_space_fraction }}"
    dir_name: ramdisk-bench.20250101T120000Z
    tests: "{{ benchmark_tests }}"
    profile: "{{ benchmark_profile }}"
  register: __benchmark_found

- name: Plan the run on those targets
  ramdisk.provision.bench_plan:
    host: "{{ inventory_hostname }}"
    targets: "{{ __benchmark_found.targets }}"
    profile: {runs: 5, fio_runtime: 3, small_files: 200, meta_dirs: 10, meta_files_per_dir: 100,
              meta_file_bytes: 1024, meta_seconds: 2}
"""

RETURN = r"""
targets:
  description:
    - Every target in order (the given or found ones, then the disk path), each with C(label), C(path), C(exists),
      C(is_dir), C(others_enter), C(writeable), C(kind) (C(ram) or C(disk)), C(backend) (tmpfs, ramfs, zram, brd or
      the disk's file system type), C(fstype), C(source) (a bind mount's with its directory in brackets),
      C(mount_point), C(mount_options), C(free_bytes) (null on ramfs), C(file_size_bytes) (0 when under 1 MiB),
      C(zram_device) (such as C(zram0), else null) and C(direct_ok) (whether it takes O_DIRECT; false on RAM).
  returned: always
  type: list
  elements: dict
  sample:
    - {label: srv-ram, path: /srv/ram, exists: true, is_dir: true, others_enter: true, writeable: true, kind: ram,
       backend: tmpfs, fstype: tmpfs, source: tmpfs, mount_point: /srv/ram, mount_options: [rw, relatime, size=1048576k],
       free_bytes: 1073741824, file_size_bytes: 67108864, zram_device: null, direct_ok: false}
    - {label: disk, path: /var/tmp, exists: true, is_dir: true, others_enter: true, writeable: true, kind: disk,
       backend: ext4, fstype: ext4, source: /dev/vda1, mount_point: /, mount_options: [rw, relatime],
       free_bytes: 75622010880, file_size_bytes: 67108864, zram_device: null, direct_ok: true}
errors:
  description: Every error of the request, each naming the host, the variable, the value and the fix; empty when it can run.
  returned: always
  type: list
  elements: str
  sample: []
tools:
  description:
    - The tools of the optional tests - C(bonnie) and C(pg_test_fsync) (paths, empty when missing), C(user) (whether
      O(seed_user) exists), C(pg_bin) (the directory of one PostgreSQL version with initdb, pg_ctl, pgbench and
      postgres), C(postgres) (whether the postgres user exists) and C(compile).
    - C(compile) is empty unless the compile test is asked for; then C(source) (the tree's real path, empty when it
      is no directory), C(program) (the build program's path), C(user), C(given_absolute), C(bytes), C(files),
      C(unreadable), C(other_mounts), C(too_many) and C(error) of the walk as the build user.
  returned: success
  type: dict
  sample: {bonnie: "", pg_test_fsync: "", user: true, pg_bin: "", postgres: false, compile: {}}
has_fio:
  description: Whether C(fio --version) ran.
  returned: success
  type: bool
  sample: true
fio_version:
  description: What C(fio --version) printed, empty without fio.
  returned: success
  type: str
  sample: fio-3.33
needs_fio:
  description: Whether the run needs fio (O(needs_fio), or the fio test or the seeds profile's fio_dbtest).
  returned: success
  type: bool
  sample: true
pgbench_skip:
  description: Why the opt-in pgbench test does not run on this host; empty when it runs or was not asked for.
  returned: success
  type: str
  sample: ""
compile_skip:
  description: Why the opt-in compile test does not run on this host; empty when it runs or was not asked for.
  returned: success
  type: str
  sample: ""
seed_skips:
  description: For the seeds profile, each seed and why it does not run here (empty for the ones that do); empty otherwise.
  returned: success
  type: dict
  sample: {tmp_dd: "", bonnie: "bonnie++ is not installed on this host (Debian package bonnie++), so the tmpfs vs ext3 write-up could not be rerun here."}
cores:
  description: The cores this process may run on, as C(nproc) counts them.
  returned: success
  type: int
  sample: 2
mem_total:
  description: MemTotal in bytes, capped by the cgroup's memory limit (as M(ramdisk.provision.ramdisk_facts) gives it).
  returned: success
  type: int
  sample: 4110417920
mem_available:
  description: MemAvailable in bytes, capped by the cgroup's memory limit; the test file sizes are a share of it.
  returned: success
  type: int
  sample: 3517353984
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ramdisk.provision.plugins.module_utils import _bench_targets


def fio_version(module):
    """(has_fio, version): whether `fio --version` runs here, and what it printed."""
    fio = module.get_bin_path("fio")
    if not fio:
        return False, ""
    rc, out, _err = module.run_command([fio, "--version"], environ_update={"LC_ALL": "C"})
    return rc == 0, out.strip() if rc == 0 else ""


def main():
    module = AnsibleModule(
        argument_spec=dict(
            host=dict(type="str", required=True),
            targets=dict(type="list", elements="dict", default=[]),
            disk_path=dict(type="str"),
            system_mounts=dict(type="str", default=_bench_targets.SYSTEM_MOUNTS),
            profile_size_bytes=dict(type="int", required=True),
            memory_fraction=dict(type="float", default=0.25),
            space_fraction=dict(type="float", default=0.25),
            dir_name=dict(type="str", default="ramdisk-bench"),
            tests=dict(type="list", elements="str", default=["dd", "fio", "metadata"]),
            profile=dict(type="str", choices=["quick", "standard", "thorough", "seeds"], default="quick"),
            seeds=dict(type="list", elements="str", default=[]),
            seed_user=dict(type="str", default="nobody"),
            compile_source=dict(type="str", default=""),
            compile_command=dict(type="raw", default=["make", "-j{cores}"]),
            compile_user=dict(type="str", default="nobody"),
            needs_fio=dict(type="bool"),
            install_fio=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    host = module.params["host"]
    try:
        result = _bench_targets.survey(module.params, fio=fio_version(module))
    except (OSError, ValueError) as exc:
        module.fail_json(msg="Host %s: could not read the host's mounts and memory for the benchmark's targets: %s."
                             " bench_targets needs Linux with /proc mounted." % (host, exc), errors=[], targets=[])
    out = dict(result, changed=False)
    if result["errors"]:
        module.fail_json(msg="Host %s: the benchmark request has %d error(s), so nothing ran: %s"
                             % (host, len(result["errors"]), " ".join(result["errors"])), **out)
    module.exit_json(**out)


if __name__ == "__main__":
    main()
