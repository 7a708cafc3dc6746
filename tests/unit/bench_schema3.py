# SPDX-License-Identifier: GPL-3.0-or-later
"""A schema 3 benchmark manifest made the way the role makes one: the items are _probes.plan()'s, each item's figures
are the registry's parser applied to real raw output (tests/unit/fixtures/probes/, fio 3.33, GNU dd and the metadata
probe on a tmpfs and an ext4 disk), scaled per side and round so that the runs scatter, and each result carries
bench_probe's row label, device counters and issued amount."""

from __future__ import annotations

import json
import os
import random

from ansible_collections.ramdisk.provision.plugins.module_utils import _bench_counters
from ansible_collections.ramdisk.provision.plugins.module_utils import _probes

HERE = os.path.dirname(os.path.abspath(__file__))
PROBE_FIXTURES = os.path.join(HERE, "fixtures", "probes")
MIB = 1024 * 1024

PROFILE = {"runs": 5, "fio_runtime": 1, "small_files": 50, "meta_dirs": 2, "meta_files_per_dir": 20,
           "meta_file_bytes": 1024, "meta_seconds": 1}
RAM = {"label": "ram", "path": "/srv/ram", "kind": "ram", "file_size_bytes": 8 * MIB, "direct_ok": False,
       "backend": "tmpfs", "fstype": "tmpfs", "source": "tmpfs", "mount_options": ["rw", "size=64m"]}
DISK = {"label": "disk", "path": "/var/tmp", "kind": "disk", "file_size_bytes": 8 * MIB, "direct_ok": True,
        "backend": "disk", "fstype": "ext4", "source": "/dev/vda1", "mount_options": ["rw", "relatime"]}
RAW_DIR = "/var/tmp/ramdisk-bench/raw"

# The raw output each probe's parser reads, per mode where it differs.
RAW = {
    ("seq_write", None): "seq_write-disk-direct-0.out",
    ("seq_read", "direct"): "seq_read-disk-direct-0.out",
    ("seq_read", "buffered"): "seq_read-ram-buffered-0.out",
    ("randrw", None): "randrw-disk-direct-0.out",
    ("fsync", None): "fsync-disk-sync-0.out",
    ("small_files", None): "small_files-disk-sync-0.out",
    ("write_fdatasync", None): "dd-write_fdatasync-disk-sync.txt",
    ("write_dsync", None): "dd-write_dsync-disk-sync.txt",
    ("read", "direct"): "dd-read-disk-direct.txt",
    ("read", "buffered"): "dd-read-disk-buffered.txt",
    ("metadata", None): "metadata-disk.json",
    # The seeds' dd experiments print what any dd prints.
    ("seed_block_write", None): "dd-write_dsync-disk-sync.txt",
    ("seed_block_write_dsync", None): "dd-write_dsync-disk-sync.txt",
    ("seed_block_read", None): "dd-read-disk-direct.txt",
    ("seed_files_dsync", None): "dd-write_dsync-disk-sync.txt",
    ("seed_64k_write", None): "dd-write_fdatasync-disk-sync.txt",
    ("seed_64k_read", None): "dd-read-disk-direct.txt",
}

# How much faster the RAM side is, per probe (the disk's figures are the fixtures' own).
RAM_FACTOR = {"seq_write": 4.0, "seq_read": 3.0, "randrw": 20.0, "fsync": 50.0, "small_files": 30.0,
              "write_fdatasync": 5.0, "write_dsync": 8.0, "read": 2.0, "metadata": 1.0,
              "seed_block_write": 3.0, "seed_block_write_dsync": 6.0, "seed_block_read": 2.0, "seed_files_dsync": 40.0,
              "seed_64k_write": 1.0, "seed_64k_read": 1.5}
# The seeds profile's figures for the tmp_dd and dd_64k experiments (benchmark_seeds_scale applied).
SEEDS_PROFILE = {"small_files": 50, "fio_runtime": 1, "bonnie_files": 2, "bonnie_max_bytes": 4, "bonnie_dirs": 1,
                 "pg_seconds": 1, "dd_repeats": 2}
RATES = ("bw_bytes", "iops")
TIMES = ("clat_ns_mean", "clat_ns_p50", "clat_ns_p90", "clat_ns_p99", "clat_ns_p99_9", "runtime_ms")


def raw_text(item):
    name = RAW.get((item["probe"], item["mode"])) or RAW[(item["probe"], None)]
    with open(os.path.join(PROBE_FIXTURES, name), encoding="utf-8") as handle:
        return name, handle.read()


def _scaled(figure, factor):
    out = dict(figure)
    for key in RATES:
        if out.get(key) is not None:
            out[key] = out[key] * factor
    for key in TIMES:
        if out.get(key) is not None:
            out[key] = out[key] / factor
    return out


def _counters(item, issued, cache):
    """What the disk's two levels (partition and disk) saw: what the probe issued, or next to nothing (a cache)."""
    what, amount = issued
    amount = 0 if cache else int(amount or 4096)
    level = {"read_bytes": amount if what == "read" else 0, "write_bytes": amount if what == "write" else 0,
             "read_ios": 1, "write_ios": 1, "flush_ios": 0 if cache else 2}
    return [["vda1"], ["vda"]], [dict(level, devices=["vda1"]), dict(level, devices=["vda"])]


def manifest(seed=7, ram_factor=None, cache=(("read", "buffered"),), steal=(), jitter=0.02, targets=(RAM, DISK),
             tests=("dd", "fio", "metadata"), host="lab3", environment=None, seeds=(), max_runs=5, cov_limit=0.035):
    """A schema 3 manifest: CACHE the (probe, mode) pairs whose disk rows a cache served, STEAL the (probe, label,
    round) whose CPU steal was 5%, JITTER the runs' spread. The RAM side is RAM_FACTOR times the disk's. SEEDS (the
    seeds profile: tmp_dd, dd_64k) runs the write-ups' dd experiments instead of TESTS. The settle status is
    _probes.settle()'s of the runs made, with MAX_RUNS and COV_LIMIT (at 5 runs, a CoV above COV_LIMIT is the cap)."""
    rng = random.Random(seed)
    factors = dict(RAM_FACTOR, **(ram_factor or {}))
    profile = dict(PROFILE, **SEEDS_PROFILE) if seeds else dict(PROFILE)
    plan = _probes.plan([dict(t) for t in targets], profile, host=host, tests=() if seeds else tests, cores=2,
                        dir_name="ramdisk-bench", random_file="/var/tmp/ramdisk-bench/random.bin", raw_dir=RAW_DIR,
                        seeds=seeds)
    assert not plan["errors"], plan["errors"]
    probes, measured = [], []
    files = {}
    for item in plan["items"]:
        name, text = raw_text(item)
        figures = _probes.parse(item, text, {"seconds": 0.5})
        factor = (factors[item["probe"]] if item["kind"] == "ram" else 1.0) * rng.lognormvariate(0, jitter)
        figures = [_scaled(figure, factor) for figure in figures]
        issued = _probes.issued(item, figures)
        if item["kind"] == "disk" and not item["path"].startswith("/srv"):
            stack, counters = _counters(item, issued, (item["probe"], item["mode"]) in cache)
        else:
            stack, counters = [], []
        label = _bench_counters.row_label(item["mode"], issued[1], counters, issued[0])
        stolen = (item["probe"], item["label"], item["round"]) in steal
        result = {"figures": figures, "row_label": label, "counters": counters, "stack": stack,
                  "issued": {"what": issued[0], "bytes": issued[1]}, "seconds": 0.5, "raw": item["raw"],
                  "cpu": {"steal_share": 0.05 if stolen else 0.001, "load1": 0.4}}
        probes.append({"item": item, "result": result})
        measured += [dict(figure, probe=item["probe"], mode=item["mode"], label=item["label"], round=item["round"],
                          warmup=item["warmup"]) for figure in figures]
        if item["tool"] == "fio":
            files[os.path.basename(item["raw"])] = text
    options = dict(host=host, tests=() if seeds else tests, cores=2, dir_name="ramdisk-bench", seeds=seeds,
                   random_file="/var/tmp/ramdisk-bench/random.bin", raw_dir=RAW_DIR)
    settled = _probes.settle(plan["items"], measured, [dict(t) for t in targets], profile, max_runs=max_runs,
                             cov_limit=cov_limit, **options)
    assert not settled["errors"] and not settled["items"], settled
    doc = {
        "schema": 3, "host": host, "run_id": "s3", "profile": "seeds" if seeds else "quick", "groups": ["lab", "all"],
        "kernel": "6.18.44", "cpuinfo": "model name\t: AMD EPYC\n", "cores": 2, "mem_total_bytes": 25276063744,
        "mem_available_bytes": 24507441152, "fio_version": "fio-3.33", "fio_installed": False,
        "memcopy": {"bytes": 67108864, "copiers": 2, "seconds": [0.009, 0.0085]}, "tests": [] if seeds else list(tests),
        "seed_skips": dict((name, "" if name in seeds else "not in benchmark_seeds") for name in _probes.SEEDS)
        if seeds else {}, "pgbench_skip": "", "compile_skip": "", "compile_command": [], "seed_tools": {},
        "wall_seconds": 80.0, "measure_seconds": 60.0, "runs": 5, "memory": "",
        "targets": [dict(t, zram=None, direct=1 if t["direct_ok"] else 0, started=1.0, ended=2.0,
                         seed_scale=(plan.get("context") or {}).get("seed") or {}) for t in targets],
        "probes": probes, "settle": settled["status"],
        "stopping_rule": {"max_runs": str(max_runs), "cov_limit": str(cov_limit)},
        "environment": environment if environment is not None else {
            "governor": "performance", "virtualization": "kvm",
            "block_stacks": "NAME   MAJ:MIN\nvda1   254:1\n`-vda  254:0",
            "dirty": {"vm.dirty_ratio": 20, "vm.dirty_background_ratio": 10}},
    }
    return doc, files


def write_run(directory, doc, files):
    """The run directory as bench_report reads it: <dir>/<host>/manifest.json and the raw fio files."""
    host_dir = os.path.join(str(directory), doc["host"])
    os.makedirs(host_dir, exist_ok=True)
    with open(os.path.join(host_dir, "manifest.json"), "w", encoding="utf-8") as handle:
        json.dump(doc, handle)
    for name, text in files.items():
        with open(os.path.join(host_dir, name), "w", encoding="utf-8") as handle:
            handle.write(text)
    return host_dir
