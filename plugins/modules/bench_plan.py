#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: bench_plan
short_description: Plan the RAM-versus-disk benchmark on the host, every item and every error before anything runs
version_added: 1.1.0
description:
  - Turns the targets and the profile into the items the benchmark runs (targets x probes x rounds, round 0 a
    warm-up that is measured and discarded, the targets taking turns), each with its command, cache policy, raw file
    and the figures it is judged by, from the registry of probes; M(ramdisk.provision.bench_probe) runs one item.
  - Reads on the host what the plan needs from it - the cores this process may run on (as C(nproc) counts them),
    MemTotal and MemAvailable from C(/proc/meminfo).
  - Like against like - one test runs with the same job options on every target, the file size the smallest any
    target allows; where a RAM target refuses O_DIRECT, every target runs the test buffered and the targets that
    take O_DIRECT run it once more, labelled.
  - With any error (an unknown test, a profile value that is no whole number, a target without room, no RAM target,
    fewer than 5 runs), fails with every error listed and no item, before anything runs.
  - Never changes the host.
author: ramdisk.provision maintainers (@ramdisk-provision)
options:
  host:
    description: The name errors give the host (the inventory name).
    type: str
    required: true
  targets:
    description:
      - The paths to benchmark, each with C(label) (a plain name, unique), C(path), C(kind) (C(ram) or C(disk)),
        C(file_size_bytes) (the most a test file may take on it) and C(direct_ok) (whether it takes O_DIRECT).
    type: list
    elements: dict
    required: true
  profile:
    description:
      - The profile's figures (the role's C(vars/main.yml), with C(benchmark_scale) applied) - C(runs),
        C(fio_runtime), C(small_files), the C(meta_*) figures and, for the tests that need them, C(pgbench_*) and
        the seeds' figures.
    type: dict
    required: true
  tests:
    description: The tests to run (C(benchmark_tests)) - dd, fio, metadata, pgbench, compile.
    type: list
    elements: str
    default: [dd, fio, metadata]
  fio_jobs:
    description: The fio jobs to run (C(benchmark_fio_jobs)); all of them when not given.
    type: list
    elements: str
  seeds:
    description: The write-ups' experiments to run (C(benchmark_seeds)) - tmp_dd, bonnie, fio_dbtest, pg_test_fsync, dd_64k.
    type: list
    elements: str
    default: []
  seed_tools:
    description: The host's tools for the seeds - C(bonnie) and C(pg_test_fsync) (their paths), C(user) (an existing
      unprivileged user for bonnie++).
    type: dict
    default: {}
  runs:
    description: Measured rounds (C(benchmark_runs)); 0 for the profile's, at least 5.
    type: int
    default: 0
  dir_name:
    description: The benchmark's directory under each target; the item's files go under C(<path>/<dir_name>/<label>).
    type: str
    default: ramdisk-bench
  raw_dir:
    description: The directory on the host for the raw files, one per item.
    type: path
    default: ""
  random_file:
    description: The file of random data the dd writes copy from.
    type: path
    default: ""
  pg_bin:
    description: The directory of PostgreSQL's programs (pgbench), for the pgbench test.
    type: str
    default: ""
  compile_command:
    description: The build the compile test times, as a list of arguments; C({cores}) is replaced by the cores.
    type: list
    elements: str
    default: []
  compile_user:
    description: The unprivileged user the build runs as.
    type: str
    default: ""
  compile_source:
    description: The source tree the compile test copies (out of the clock, as O(compile_user)) before each build.
    type: str
    default: ""
extends_documentation_fragment:
  - ramdisk.provision._attributes
  - ramdisk.provision._attributes.check_mode_full
attributes:
  platform:
    support: full
    platforms: linux
seealso:
  - module: ramdisk.provision.bench_probe
"""

EXAMPLES = r"""
- name: Plan the benchmark of a tmpfs against the disk
  ramdisk.provision.bench_plan:
    host: "{{ inventory_hostname }}"
    targets:
      - {label: ram, path: /srv/ram, kind: ram, file_size_bytes: 268435456, direct_ok: false}
      - {label: disk, path: /var/tmp, kind: disk, file_size_bytes: 268435456, direct_ok: true}
    profile: {runs: 5, fio_runtime: 10, small_files: 500, meta_dirs: 10, meta_files_per_dir: 100,
              meta_file_bytes: 1024, meta_seconds: 2}
    raw_dir: /var/tmp/ramdisk-bench/raw
    random_file: /var/tmp/ramdisk-bench/random.bin
  register: __benchmark_plan
"""

RETURN = r"""
probe_items:
  description:
    - Every item of the run in the order it runs - round by round (round 0 the warm-up), the targets taking turns.
    - Each has C(host), C(label), C(path), C(kind), C(probe), C(tool), C(test), C(round), C(warmup), C(mode) (the
      cache policy it runs under), C(policy) and C(why), C(figures) (the judged ones), C(raw), C(argv) (or
      C(program) with its arguments), C(output) (C(file) where the command writes the raw file itself, C(text) for
      its output, C(run) for the runner's record), C(sync), C(before), C(warm), C(note), and where needed C(chdir),
      C(stdin), C(mkdir) and C(seed_entry). Empty when there are errors.
  returned: always
  type: list
  elements: dict
  sample:
    - {host: lab, label: disk, path: /var/tmp, kind: disk, probe: write_fdatasync, tool: dd, test: write_fdatasync,
       round: 0, warmup: true, mode: sync, policy: sync, raw: /var/tmp/ramdisk-bench/raw/write_fdatasync-disk-sync-0.out,
       argv: [dd, if=/var/tmp/ramdisk-bench/random.bin, of=/var/tmp/ramdisk-bench/disk/dd.bin, bs=1M, count=64,
              conv=fdatasync], output: text, sync: [/srv/ram, /var/tmp, /var/tmp/ramdisk-bench/raw], before: [],
       warm: [/var/tmp/ramdisk-bench/random.bin], note: ""}
probe_rounds:
  description:
    - RV(probe_items) cut into rounds, one list per round in the order they run, for O(ramdisk.provision.bench_probe#module:items)
      (a round per call).
  returned: always
  type: list
  elements: list
errors:
  description: Every error of the plan, each naming the host, the variable, the value and the fix.
  returned: always
  type: list
  elements: str
  sample: []
size_bytes:
  description: The size every target's test files take, the same on each (0 with errors).
  returned: always
  type: int
  sample: 268435456
skipped_seeds:
  description: The seeds that cannot run on this host, each with why.
  returned: always
  type: dict
  sample: {bonnie: "bonnie++ is not installed on this host (Debian package bonnie++), ..."}
dirs:
  description: The directories to make before the first item, each with C(path), C(mode) and where needed C(owner).
  returned: always
  type: list
  elements: dict
  sample: [{path: /var/tmp/ramdisk-bench/raw, mode: "0700"}, {path: /srv/ram/ramdisk-bench/ram, mode: "0700"}]
setup:
  description:
    - The commands to run, in order, after the directories and before the first item, as lists of arguments (no
      shell) - the random data the dd writes copy, and for pgbench each target's private cluster made, started and
      filled.
  returned: always
  type: list
  elements: list
  sample: [[dd, if=/dev/urandom, of=/var/tmp/ramdisk-bench/random.bin, bs=1M, count=64, iflag=fullblock, status=none]]
teardown:
  description: The commands to run after the last item, also when one failed (pgbench's clusters stopped).
  returned: always
  type: list
  elements: list
  sample: []
seed_scale:
  description: The seeds' experiments scaled to the run's test size (file sizes and counts); empty without seeds.
  returned: always
  type: dict
target_skips:
  description: The tests a target is left out of, each with C(label), C(test) and C(why) (the compile test on a target
    that lets no other user in).
  returned: always
  type: list
  elements: dict
  sample: [{label: locks, test: compile, why: "the target directory /var/cache/locks lets no other user in, and the build runs as nobody."}]
settle_args:
  description:
    - What M(ramdisk.provision.bench_settle) needs to plan further rounds as this plan did - these options and the
      host's C(cores) and C(mem_total). Empty with errors.
  returned: always
  type: dict
summary:
  description: One line on what will be measured - the cores, the tests (seeds with why one is skipped) and each target.
  returned: always
  type: str
  sample: "2 cores, tests dd, fio, metadata; ram = /srv/ram (ram, 64 MiB per test); disk = /var/tmp (disk, 64 MiB per test)"
host_facts:
  description:
    - What was read on the host for the plan - C(cores), C(mem_total) and C(mem_available) (bytes, capped by the
      cgroup's memory limit as M(ramdisk.provision.bench_targets) reads them).
  returned: always
  type: dict
  sample: {cores: 2, mem_total: 4110417920, mem_available: 3517353984}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ramdisk.provision.plugins.module_utils import _bench_targets
from ansible_collections.ramdisk.provision.plugins.module_utils import _probes


def host_facts():
    """{cores, mem_total, mem_available}: the cores this process may run on (what nproc counts), and MemTotal and
    MemAvailable in bytes capped by the cgroup's memory limit: the figures bench_targets sized the test files by,
    read the same way (_bench_targets.read_host()), so the plan's notes and checks agree with its sizes."""
    _mountinfo, memory = _bench_targets.read_host()
    return {"cores": _bench_targets.cores(), "mem_total": int(memory["total_bytes"]),
            "mem_available": int(memory["available_bytes"])}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            host=dict(type="str", required=True),
            targets=dict(type="list", elements="dict", required=True),
            profile=dict(type="dict", required=True),
            tests=dict(type="list", elements="str", default=["dd", "fio", "metadata"]),
            fio_jobs=dict(type="list", elements="str"),
            seeds=dict(type="list", elements="str", default=[]),
            seed_tools=dict(type="dict", default={}),
            runs=dict(type="int", default=0),
            dir_name=dict(type="str", default="ramdisk-bench"),
            raw_dir=dict(type="path", default=""),
            random_file=dict(type="path", default=""),
            pg_bin=dict(type="str", default=""),
            compile_command=dict(type="list", elements="str", default=[]),
            compile_user=dict(type="str", default=""),
            compile_source=dict(type="str", default=""),
        ),
        supports_check_mode=True,
    )
    params = module.params
    host = params["host"]
    try:
        facts = host_facts()
    except (OSError, ValueError) as exc:
        module.fail_json(msg="Host %s: could not read the host's cores and memory for the benchmark plan: %s. The plan"
                             " needs Linux with /proc mounted." % (host, exc))
    args = settle_args(params, facts)
    result = _probes.plan(params["targets"], params["profile"], mem_available=facts["mem_available"], **args)
    out = {"changed": False, "probe_items": result["items"], "probe_rounds": _probes.rounds(result["items"]),
           "errors": result["errors"], "size_bytes": result["size_bytes"],
           "skipped_seeds": result["skipped"], "host_facts": facts, "dirs": result.get("dirs", []),
           "setup": result.get("setup", []), "teardown": result.get("teardown", []), "settle_args": {}, "summary": "",
           "target_skips": result.get("target_skips", []), "seed_scale": (result.get("context") or {}).get("seed") or {}}
    if result["errors"]:
        module.fail_json(msg="The benchmark plan of host %s has %d error(s), so nothing ran: %s"
                             % (host, len(result["errors"]), " ".join(result["errors"])), **out)
    out["settle_args"] = dict(args, targets=params["targets"], profile=params["profile"])
    out["summary"] = summary(params["targets"], params["tests"], params["seeds"], result, facts["cores"])
    module.exit_json(**out)


def settle_args(params, facts):
    """The keyword arguments of _probes.plan() (and of settle()) from the module's options and the host's facts."""
    return {"host": params["host"], "tests": params["tests"],
            "fio_jobs": list(_probes.FIO_JOBS if params["fio_jobs"] is None else params["fio_jobs"]),
            "runs": params["runs"], "cores": facts["cores"], "dir_name": params["dir_name"],
            "random_file": params["random_file"] or "", "raw_dir": params["raw_dir"] or "",
            "mem_total": facts["mem_total"], "pg_bin": params["pg_bin"],
            "compile_command": params["compile_command"], "compile_user": params["compile_user"],
            "compile_source": params["compile_source"], "seeds": params["seeds"], "seed_tools": params["seed_tools"]}


def summary(targets, tests, seeds, result, cores):
    """One line on what will be measured."""
    size = "%d MiB" % (result["size_bytes"] // _probes.MIB)
    what = ", ".join(list(tests) + ["%s (skipped: %s)" % (seed, result["skipped"][seed]) if seed in result["skipped"]
                                    else seed for seed in seeds])
    return "%d cores, tests %s; %s" % (cores, what, "; ".join(
        "%s = %s (%s%s, %s per test)" % (target["label"], target["path"], target["kind"],
                                         ", " + target["backend"] if target.get("backend") else "", size)
        for target in targets))


if __name__ == "__main__":
    main()
