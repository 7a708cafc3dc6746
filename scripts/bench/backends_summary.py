#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""Sum up one run of scripts/bench/backends.yml: a table per test, one column per backend.

Reads <run dir>/results.json (written by ramdisk.provision.bench_report) and <run dir>/context.json
(written by the playbook) and writes into the output directory:

- summary.md    the tables docs/choosing-a-backend.md quotes, with the machine and the date;
- figures.csv   every figure of the run, without the scratch paths (one row per test and backend);
- machine.json  the machine: kernel, CPU, cores, RAM, fio version, memory copy ceiling, load.

Usage:
    python scripts/bench/backends_summary.py RUN_DIR [--out DIR]   # DIR defaults to RUN_DIR
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys

ORDER = ("tmpfs", "ramfs", "zram", "brd", "disk")
MIB = 1048576.0
CSV_COLUMNS = (
    "label", "backend", "fstype", "mount_options", "file_size_bytes", "direct", "zram_algorithm",
    "zram_mm_stat_after", "tool", "test", "op", "mode", "bw_bytes", "iops", "io_bytes", "runtime_ms", "clat_ns_mean",
    "clat_ns_p50", "clat_ns_p99", "memcopy_fraction",
)
# (tool, test, op, field, heading, unit, higher is better). A row is found by test and op: the tool of a test may
# change (small_files, one dd per file before the probe registry, is one fio process since).
ROWS = (
    ("fio", "seq_write", "write", "bw_bytes", "fio sequential write, 1 MiB blocks, one job per core", "MiB/s", True),
    ("fio", "seq_read", "read", "bw_bytes", "fio sequential read, 1 MiB blocks, one job per core", "MiB/s", True),
    ("fio", "randrw", "read", "iops", "fio random 4 KiB reads (50/50 mix with writes)", "IOPS", True),
    ("fio", "randrw", "write", "iops", "fio random 4 KiB writes (50/50 mix with reads)", "IOPS", True),
    ("fio", "fsync", "write", "iops", "fio 4 KiB writes each followed by fdatasync", "IOPS", True),
    ("fio", "fsync", "sync", "clat_ns_p99", "fio fdatasync latency, 99th percentile", "µs", False),
    ("dd", "write_fdatasync", "write", "bw_bytes", "dd write, 1 MiB blocks, one fdatasync at the end", "MiB/s", True),
    ("dd", "write_dsync", "write", "bw_bytes", "dd write, 1 MiB blocks, oflag=dsync", "MiB/s", True),
    ("dd", "read", "read", "bw_bytes", "dd read back", "MiB/s", True),
    ("fio", "small_files", "write", "iops", "1 KiB files, each written with O_DSYNC", "files/s", True),
    ("metadata", "metadata", "create", "iops", "small-file create (1 KiB each)", "files/s", True),
    ("metadata", "metadata", "stat", "iops", "small-file stat", "files/s", True),
    ("metadata", "metadata", "read", "iops", "small-file read", "files/s", True),
    ("metadata", "metadata", "delete", "iops", "small-file delete", "files/s", True),
)


# Schema 3 records carry the mode a test ran in; where the backends ran a test in more than one (ramfs takes no
# O_DIRECT: every target runs it buffered, those that can run it O_DIRECT too), each mode is a row of its own.
MODE_WORDS = {"buffered": "buffered", "direct": "O_DIRECT", "sync": "synced", "cached": "cached"}


def load(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def shown(value, unit):
    if unit == "MiB/s":
        value = value / MIB
    elif unit == "µs":
        value = value / 1000.0
    if value >= 100:
        return "{:,.0f}".format(value)
    if value >= 10:
        return "{:.1f}".format(value)
    return "{:.2f}".format(value)


def ratio(value, disk, higher_better):
    if not value or not disk:
        return ""
    times = value / disk if higher_better else disk / value
    return " (×{:.2g})".format(times) if times < 10 else " (×{:,.0f})".format(times)


def summarize(run_dir):
    results = load(os.path.join(run_dir, "results.json"))
    context_path = os.path.join(run_dir, "context.json")
    context = load(context_path) if os.path.exists(context_path) else {}
    records = results["records"]
    hosts = sorted({r["host"] for r in records})
    if len(hosts) != 1:
        raise SystemExit("backends_summary: expected the results of one host, found %s" % (hosts or "none"))
    host_context = results["context"][hosts[0]]
    labels = [label for label in ORDER if any(r["label"] == label for r in records)]
    labels += sorted({r["label"] for r in records} - set(labels))
    by_key = {(r["label"], r["test"], r["op"], r.get("mode")): r for r in records}
    zram = next((r for r in records if r["label"] == "zram" and r.get("zram_mm_stat_after")), None)

    machine = {
        "run_id": results["run_id"],
        "profile": results["profile"],
        "kernel": host_context.get("kernel"),
        "uname": context.get("uname"),
        "cpu_model": context.get("cpu_model") or host_context.get("cpu_model"),
        "cores": host_context.get("cores"),
        "mem_total_bytes": host_context.get("mem_total_bytes"),
        "memcopy_bw_bytes": host_context.get("memcopy_bw_bytes"),
        "fio_version": host_context.get("fio_version"),
        "disk_source": context.get("disk_source"),
        "ram_size": context.get("ram_size"),
        "zram_algorithm": (zram or {}).get("zram_algorithm") or context.get("zram_algorithm"),
        "loadavg_before": context.get("loadavg_before"),
        "loadavg_after": context.get("loadavg_after"),
        "measured": labels,
        "left_out": context.get("skipped") or {},
    }

    run = results["run_id"]
    date = "%s-%s-%s" % (run[0:4], run[4:6], run[6:8]) if len(run) >= 8 and run[:8].isdigit() else run
    lines = [
        "# Backends measured on one machine, %s" % date,
        "",
        "Run `%s`, profile `%s`, by `scripts/bench/backends.yml` (role `ramdisk.provision.benchmark`)." % (
            run, results["profile"]),
        "",
        "| machine | |",
        "| --- | --- |",
        "| kernel | %s |" % machine["kernel"],
        "| CPU | %s, %s cores |" % (machine["cpu_model"], machine["cores"]),
        "| RAM | %.1f GiB |" % ((machine["mem_total_bytes"] or 0) / 1024.0 ** 3),
        "| one-thread memory copy | %s MiB/s |" % shown(machine["memcopy_bw_bytes"] or 0, "MiB/s"),
        "| disk | %s (ext4) |" % (machine["disk_source"] or "unknown"),
        "| fio | %s |" % machine["fio_version"],
        "| RAM file systems | %s each; zram compressor %s |" % (machine["ram_size"], machine["zram_algorithm"]),
        "| load average before, after | %s; %s |" % (
            " ".join((machine["loadavg_before"] or "?").split()[:3]), " ".join((machine["loadavg_after"] or "?").split()[:3])),
        "",
    ]
    for label, reason in sorted(machine["left_out"].items()):
        lines += ["%s was left out: %s." % (label, reason), ""]
    lines += [
        "Figures are the run's own; in brackets, how many times better than the disk (for latency, disk over RAM).",
        "",
        "| test | unit | %s |" % " | ".join(labels),
        "| --- | --- |%s" % (" ---: |" * len(labels)),
    ]
    for _tool, test, op, field, heading, unit, higher in ROWS:
        modes = sorted(set(key[3] for key in by_key if key[1:3] == (test, op)), key=str)
        for mode in modes:
            disk = (by_key.get(("disk", test, op, mode)) or {}).get(field)
            cells = []
            for label in labels:
                value = (by_key.get((label, test, op, mode)) or {}).get(field)
                if value is None:
                    cells.append("")
                else:
                    cells.append(shown(value, unit) + ("" if label == "disk" else ratio(value, disk, higher)))
            if any(cells):
                title = heading + (", %s" % MODE_WORDS.get(mode, mode) if len(modes) > 1 else "")
                lines.append("| %s | %s | %s |" % (title, unit, " | ".join(cells)))
    lines.append("")
    if zram:
        stat = zram["zram_mm_stat_after"]
        stat = json.loads(stat) if isinstance(stat, str) else stat
        if stat.get("mem_used_max"):
            lines += [
                "zram (%s) after the run: at most %.0f MiB of RAM used (mem_used_max), %s pages stored uncompressed "
                "since it was made (huge_pages_since). The benchmark writes random data, which does not compress: the "
                "worst case for zram." % (
                    machine["zram_algorithm"], stat["mem_used_max"] / MIB, "{:,}".format(stat.get("huge_pages_since") or 0)),
                "",
            ]
    rows = [{column: r.get(column) for column in CSV_COLUMNS} for r in records]
    rows.sort(key=lambda r: (labels.index(r["label"]) if r["label"] in labels else 99, r["tool"], r["test"], r["op"],
                             r["mode"] or ""))
    return "\n".join(lines), machine, rows


def main(argv=None):
    parser = argparse.ArgumentParser(description="Sum up a run of scripts/bench/backends.yml.")
    parser.add_argument("run_dir")
    parser.add_argument("--out", help="directory to write summary.md, figures.csv and machine.json (default: RUN_DIR)")
    args = parser.parse_args(argv)
    out = args.out or args.run_dir
    text, machine, rows = summarize(args.run_dir)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "summary.md"), "w", encoding="utf-8", newline="\n") as handle:
        handle.write(text)
    with open(os.path.join(out, "machine.json"), "w", encoding="utf-8", newline="\n") as handle:
        json.dump(machine, handle, indent=2, sort_keys=True, ensure_ascii=False)
        handle.write("\n")
    with open(os.path.join(out, "figures.csv"), "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(text)
    print("backends_summary: wrote summary.md, figures.csv and machine.json in %s" % out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
