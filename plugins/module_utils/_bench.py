# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Pure logic of the benchmark role: sizing, fio json+ and dd output parsing, normalized records,
RAM-versus-disk ratios and the report tables. Each function takes text or plain data, so tests feed
fixtures; nothing here touches a host."""

from __future__ import annotations

import hashlib
import json
import math
import re

try:
    # What share of a probe's I/O reached the device (schema 3 manifests). scripts/bench load this file by its path,
    # without the collection, and read schema 1 and 2 manifests only: there the share is not needed.
    from ansible_collections.ramdisk.provision.plugins.module_utils._bench_counters import reached_share as _reached_share
except ImportError:
    _reached_share = None
try:
    from ansible_collections.ramdisk.provision.plugins.module_utils._size import format_size
except ImportError:  # scripts/bench load this file by its path, with plugins/module_utils on sys.path (common.load_bench)
    from _size import format_size  # type: ignore

MIB = 1024 * 1024

# fio's own percentile keys and the record columns they fill.
PERCENTILES = (
    ("50.000000", "clat_ns_p50"),
    ("90.000000", "clat_ns_p90"),
    ("99.000000", "clat_ns_p99"),
    ("99.900000", "clat_ns_p99_9"),
)

# Every record carries its context, so one CSV row is comparable on its own.
CONTEXT_COLUMNS = (
    "run_id", "profile", "host", "groups", "kernel", "cpu_model", "cores", "mem_total_bytes",
    "memcopy_bw_bytes", "fio_version",
)
TARGET_COLUMNS = (
    "label", "path", "kind", "backend", "fstype", "source", "mount_options", "file_size_bytes", "direct",
    "zram_algorithm", "zram_mm_stat_before", "zram_mm_stat_after",
)
FIGURE_COLUMNS = (
    "tool", "test", "op", "bw_bytes", "iops", "io_bytes", "runtime_ms", "clat_ns_mean",
) + tuple(column for _key, column in PERCENTILES) + ("memcopy_fraction", "lat_ns_max", "too_fast")
# A figure is the median of its runs; these also carry the lowest and highest run beside it, and the geometric mean
# of the runs, which RAM against disk is taken from (ratio_rows()).
# lat_ns_max: the worst latency bonnie++ reports; too_fast: bonnie++ printed +++++ (the runs that did, summarized).
SPREAD_METRICS = ("bw_bytes", "iops", "runtime_ms", "clat_ns_mean", "clat_ns_p50", "clat_ns_p99", "clat_ns_p99_9",
                  "lat_ns_max")
SPREAD_COLUMNS = ("runs",) + tuple("%s_%s" % (metric, end) for metric in SPREAD_METRICS for end in ("min", "max", "gmean"))
COLUMNS = CONTEXT_COLUMNS + TARGET_COLUMNS + FIGURE_COLUMNS + SPREAD_COLUMNS
RUN_COLUMNS = CONTEXT_COLUMNS + ("label", "kind", "backend", "round") + FIGURE_COLUMNS
# What a record of a schema 3 manifest (one figure of one bench_probe result) adds: the probe and the mode it ran in,
# the row's label from the device counters (ram, cache, direct, buffered, sync, cached, published), the figure the
# comparison judges it by, what the probe issued and the share of it the weakest level of the block device stack saw,
# the stack and its lowest level's counters, and the CPU steal and load while it ran. Over a figure's runs the device
# figures are medians, steal the highest; a row is labelled cache when any of its measured runs was (cache_runs).
PROBE_COLUMNS = ("probe", "mode", "policy", "row_label", "cache_runs", "judged_metric", "higher_is_better",
                 "issued_what", "issued_bytes", "device_share", "device_stack", "device_read_bytes",
                 "device_write_bytes", "device_flush_ios", "steal_share", "load1", "steady_attained")
# The coefficient of variation of a figure's judged metric (stat_metric; else the first of bw_bytes, iops and
# clat_ns_mean) over the measured runs, and the interval of its median with the coverage it really has
# (_bench_stats.summarize()).
STAT_COLUMNS = ("stat_metric", "cov", "ci_low", "ci_high", "ci_coverage")
# Warm-up rounds (round 0) are listed among the runs, flagged, and kept out of every figure.
PROBE_RUN_COLUMNS = RUN_COLUMNS + ("probe", "mode", "warmup", "row_label", "device_share", "device_read_bytes",
                                   "device_write_bytes", "device_flush_ios", "steal_share", "load1", "raw")
# Above this share of CPU time stolen by the hypervisor while a probe ran, its run is flagged.
STEAL_FLAG = 0.02

# The figures the ratio table compares: (tool, test, op, metric, higher is better, verb for the sentence).
RATIO_METRICS = (
    ("fio", "seq_write", "write", "bw_bytes", True, "writes sequentially"),
    ("fio", "seq_read", "read", "bw_bytes", True, "reads sequentially"),
    ("fio", "randrw", "read", "iops", True, "does random 4 KiB reads"),
    ("fio", "randrw", "write", "iops", True, "does random 4 KiB writes"),
    # fdatasync is judged by its mean latency (every sync of the run), not its p99: on a disk the p99 sits on the bend of
    # the latency curve (p95 about 1 ms, p99 1.1-2.6 ms, p99.9 4-12 ms in three rounds of one run), so a handful of slow
    # syncs moves it; recomputed over five stability checks, the mean agreed as often or more (docs/benchmark-stability.md).
    # p50, p99, p99.9 and the whole distribution stay in the report.
    ("fio", "fsync", "sync", "clat_ns_mean", False, "has a mean fdatasync latency"),
    ("dd", "write_fdatasync", "write", "bw_bytes", True, "writes (dd, fdatasync)"),
    ("dd", "write_dsync", "write", "bw_bytes", True, "writes (dd, oflag=dsync)"),
    ("dd", "read", "read", "bw_bytes", True, "reads back (dd)"),
    ("dd", "small_files", "write", "iops", True, "writes 1 KiB files with dsync"),
    ("metadata", "metadata", "create", "iops", True, "creates small files"),
    ("metadata", "metadata", "stat", "iops", True, "stats small files"),
    ("metadata", "metadata", "read", "iops", True, "reads small files"),
    ("metadata", "metadata", "delete", "iops", True, "deletes small files"),
    ("pgbench", "tpcb_like", "transaction", "iops", True, "runs pgbench's TPC-B-like transactions"),
    ("pgbench", "select_only", "transaction", "iops", True, "runs pgbench's select-only transactions"),
    # The compile test's figure is builds per second (one over the build's time), so faster reads as faster.
    ("compile", "build", "build", "iops", True, "builds the code base"),
)

# What each compared figure is called in the report, so no two rows read alike.
TEST_TITLES = {
    ("fio", "seq_write", "write"): "sequential write (fio)",
    ("fio", "seq_read", "read"): "sequential read (fio)",
    ("fio", "randrw", "read"): "random 4 KiB read, mixed (fio)",
    ("fio", "randrw", "write"): "random 4 KiB write, mixed (fio)",
    ("fio", "fsync", "write"): "4 KiB writes with fdatasync (fio)",
    ("fio", "fsync", "sync"): "fdatasync after 4 KiB writes (fio)",
    ("dd", "write_fdatasync", "write"): "large write, fdatasync at the end (dd)",
    ("dd", "write_dsync", "write"): "large write, every block synced (dd)",
    ("dd", "read", "read"): "read back (dd)",
    ("dd", "small_files", "write"): "1 KiB files written with dsync (dd)",
    ("metadata", "metadata", "create"): "create small files",
    ("metadata", "metadata", "stat"): "stat small files",
    ("metadata", "metadata", "read"): "read small files",
    ("metadata", "metadata", "delete"): "delete small files",
    ("pgbench", "tpcb_like", "transaction"): "TPC-B-like transactions (pgbench)",
    ("pgbench", "select_only", "transaction"): "select-only transactions (pgbench)",
    ("compile", "build", "build"): "build of a code base (compile)",
}


def test_title(tool, test, op):
    return TEST_TITLES.get((tool, test, op)) or "%s %s (%s)" % (test.replace("_", " "), op, tool)


RAM_KINDS = ("tmpfs", "ramfs", "zram", "brd")

_DD_COPIED_RE = re.compile(r"^(\d+) bytes?\b.*copied, ([0-9.]+(?:e[-+]?\d+)?) s\b", re.MULTILINE)
_DD_RECORDS_RE = re.compile(r"^(\d+)\+(\d+) records (in|out)$", re.MULTILINE)


# --- sizing ---------------------------------------------------------------------------------------

def file_size(profile_bytes, mem_available, mount_free, mem_fraction, space_fraction, align=MIB, minimum=MIB):
    """Bytes one test may write on a target: the profile's size, but never more than a share of
    MemAvailable nor a share of the mount's free space, rounded down to ``align``.

    Returns 0 when even ``minimum`` does not fit, which the role turns into an error.
    mount_free of None (ramfs has no limit) counts as unlimited.
    """
    limits = [int(profile_bytes), int(mem_available * mem_fraction)]
    if mount_free is not None:
        limits.append(int(mount_free * space_fraction))
    size = min(limits)
    size -= size % align
    return size if size >= minimum else 0


# --- fio ------------------------------------------------------------------------------------------

def parse_fio_json(text):
    """fio's --output file as a dict. fio may print notes before the JSON; they are skipped."""
    start = text.find("{")
    if start < 0:
        raise ValueError("no JSON object in fio output")
    return json.loads(text[start:])


def fio_argv(name, options, directory, output, global_options=(), fio="fio"):
    """argv for one fio job the way the role builds it (tasks/fio.yml): JSON+ to ``output``, the global
    options, then the job's name and options ([(option, value), ...]). Each job is a fio run of its own."""
    argv = [fio, "--output-format=json+", "--output=%s" % output, "--directory=%s" % directory]
    argv.extend("--%s=%s" % (key, value) for key, value in global_options)
    argv.append("--name=%s" % name)
    argv.extend("--%s=%s" % (key, value) for key, value in options)
    return argv


def percentile_from_bins(bins, percent):
    """The latency under which ``percent`` of the samples fall, from json+ histogram bins
    ({"ns": count}); fio's rule: the first bin whose running count reaches percent of all."""
    items = sorted((int(value), int(count)) for value, count in bins.items())
    total = sum(count for _value, count in items)
    if total == 0:
        return None
    wanted = total * percent / 100.0
    running = 0
    for value, count in items:
        running += count
        if running >= wanted:
            return value
    return items[-1][0]


def _latency(section):
    """The latency dict of a fio op section: clat_ns for read and write, lat_ns for sync (an
    fdatasync has no submission phase, so its whole latency is its completion latency)."""
    if "clat_ns" in section:
        return section["clat_ns"]
    return section.get("lat_ns") or {}


def _op_count(op, section):
    if op == "sync":
        # fio 3.x leaves sync.total_ios at 0; the latency sample count is the number of syncs.
        return int(section.get("total_ios") or 0) or int(_latency(section).get("N") or 0)
    return int(section.get("total_ios") or 0)


def fio_round_doc(names, read_raw):
    """One round of fio on a target as one document: ``names`` is the round's raw file (every job in one fio
    run, as the role wrote them in 1.0.0) or a list of them (a fio run per job); their jobs are joined in
    order and the first file's other fields kept. Raises what read_raw or parse_fio_json raise."""
    docs = [parse_fio_json(read_raw(name)) for name in _as_list(names)] or [{}]
    doc = dict(docs[0])
    doc["jobs"] = [job for one in docs for job in one.get("jobs") or []]
    return doc


def fio_job_names(doc):
    """The job names of a fio run, in the order fio ran them."""
    names = []
    for job in doc.get("jobs") or []:
        if job.get("jobname") not in names:
            names.append(job.get("jobname"))
    return names


def fio_figures(doc, jobname=None):
    """Normalized figures per op (read, write, sync) of one fio job (``jobname``; all jobs when
    None), summed over its processes (numjobs).

    Bandwidth and IOPS add up across jobs; latency percentiles come from fio's own when there is
    one job, and from the merged json+ bins when there are several.
    """
    jobs = [job for job in doc.get("jobs") or [] if jobname is None or job.get("jobname") == jobname]
    figures = []
    for op in ("read", "write", "sync"):
        sections = [job[op] for job in jobs if _op_count(op, job.get(op) or {}) > 0]
        if not sections:
            continue
        runtimes = [int(job.get("job_runtime") or 0) for job in jobs if _op_count(op, job.get(op) or {}) > 0]
        if op == "sync":
            runtimes = [max(int(job["write"].get("runtime") or 0), 1) for job in jobs
                        if _op_count(op, job.get(op) or {}) > 0]
        count = sum(_op_count(op, section) for section in sections)
        runtime_ms = max(int(section.get("runtime") or 0) for section in sections) if op != "sync" else max(runtimes)
        record = {
            "op": op,
            "io_bytes": sum(int(section.get("io_bytes") or 0) for section in sections) if op != "sync" else None,
            "bw_bytes": sum(int(section.get("bw_bytes") or 0) for section in sections) if op != "sync" else None,
            "iops": (sum(float(section.get("iops") or 0.0) for section in sections) if op != "sync"
                     else count / (runtime_ms / 1000.0)),
            "runtime_ms": runtime_ms,
            "total_ios": count,
        }
        latencies = [_latency(section) for section in sections]
        samples = sum(int(lat.get("N") or 0) for lat in latencies)
        record["clat_ns_mean"] = (sum(float(lat.get("mean") or 0.0) * int(lat.get("N") or 0) for lat in latencies)
                                  / samples) if samples else None
        if len(latencies) == 1 and latencies[0].get("percentile"):
            for key, column in PERCENTILES:
                record[column] = latencies[0]["percentile"].get(key)
        else:
            merged = {}
            for lat in latencies:
                for value, number in (lat.get("bins") or {}).items():
                    merged[value] = merged.get(value, 0) + int(number)
            for key, column in PERCENTILES:
                record[column] = percentile_from_bins(merged, float(key)) if merged else None
        figures.append(record)
    return figures


def fio_latency_bins(doc, jobname, op):
    """The json+ completion latency histogram ({ns: count}) of one op of one fio job, merged over the
    job's processes; empty when the job did none of that op."""
    merged = {}
    for job in doc.get("jobs") or []:
        if job.get("jobname") != jobname or _op_count(op, job.get(op) or {}) == 0:
            continue
        for value, count in (_latency(job[op]).get("bins") or {}).items():
            merged[int(value)] = merged.get(int(value), 0) + int(count)
    return merged


def cdf_points(bins):
    """[(latency_ns, share of samples at or below it)], from a json+ histogram, in rising order."""
    items = sorted((int(value), int(count)) for value, count in bins.items() if int(count) > 0)
    total = float(sum(count for _value, count in items))
    points = []
    running = 0
    for value, count in items:
        running += count
        points.append((value, running / total))
    return points


# The latency distributions the report draws: (fio job, op).
LATENCY_JOBS = (("randrw", "read"), ("randrw", "write"), ("fsync", "sync"))


def host_latency_bins(manifest, read_raw):
    """{(host, label, job, op): histogram} for LATENCY_JOBS, merged over every round of each target;
    a raw file that cannot be read is left out (host_records reports it)."""
    found = {}
    if manifest.get("probes") is not None:
        return _probe_latency_bins(manifest, read_raw)
    for target in manifest.get("targets") or []:
        for names in _as_list(target.get("fio")):
            try:
                doc = fio_round_doc(names, read_raw)
            except (IOError, OSError, ValueError):
                continue
            for job, op in LATENCY_JOBS:
                bins = fio_latency_bins(doc, job, op)
                if not bins:
                    continue
                merged = found.setdefault((manifest["host"], target["label"], job, op), {})
                for value, count in bins.items():
                    merged[value] = merged.get(value, 0) + count
    return found


def _probe_latency_bins(manifest, read_raw):
    """host_latency_bins() of a schema 3 manifest: from the raw fio file of each measured item of the jobs drawn, in
    the mode a RAM target ran them (the direct disk figure beside a buffered pair is not drawn against it)."""
    entries = [entry for entry in manifest["probes"] if not (entry.get("item") or {}).get("warmup")]
    ram_modes = set(((entry.get("item") or {}).get("probe"), (entry.get("item") or {}).get("mode"))
                    for entry in entries if (entry.get("item") or {}).get("kind") == "ram")
    found = {}
    for entry in entries:
        item, result = entry.get("item") or {}, entry.get("result") or {}
        jobs = [(job, op) for job, op in LATENCY_JOBS if job == item.get("probe")]
        if not jobs or item.get("tool") != "fio" or (item["probe"], item.get("mode")) not in ram_modes:
            continue
        try:
            # The raw file's host path; the controller keeps it by its name in the host's directory.
            doc = parse_fio_json(read_raw((result.get("raw") or item.get("raw") or "").rsplit("/", 1)[-1]))
        except (IOError, OSError, ValueError):
            continue
        for job, op in jobs:
            merged = found.setdefault((manifest["host"], item["label"], job, op), {})
            for value, count in fio_latency_bins(doc, job, op).items():
                merged[value] = merged.get(value, 0) + count
    return dict((key, bins) for key, bins in found.items() if bins)


# --- dd and the small Python probes ------------------------------------------------------------

def parse_dd(text):
    """Every transfer dd reported in ``text`` (several when one output holds many dd runs):
    a list of {bytes, seconds}. Records lines are counted too, for a sanity check."""
    runs = [{"bytes": int(size), "seconds": float(seconds)} for size, seconds in _DD_COPIED_RE.findall(text)]
    if not runs:
        raise ValueError("no 'bytes ... copied, N s' line in dd output")
    return runs


def dd_sections(text):
    """The role's dd.txt: ``=== <label> <test>`` headers, each followed by that run's output."""
    sections = {}
    title = None
    for line in text.splitlines(True):
        if line.startswith("=== "):
            title = line[4:].strip()
            sections[title] = ""
        elif title is not None:
            sections[title] += line
    return sections


def dd_figures(text, op, block_size, wall_seconds=None):
    """One record for a dd test. Bandwidth is bytes over the seconds dd itself measured; for many
    small files (one dd each) IOPS are files per second of the whole run's wall time when given,
    which includes starting each dd, as the shell-loop write-ups measure it."""
    runs = parse_dd(text)
    total_bytes = sum(run["bytes"] for run in runs)
    seconds = sum(run["seconds"] for run in runs)
    if len(runs) > 1:
        elapsed = wall_seconds if wall_seconds else seconds
        iops = len(runs) / elapsed if elapsed > 0 else None
    else:
        iops = (total_bytes / float(block_size)) / seconds if seconds > 0 else None
    return {
        "op": op,
        "io_bytes": total_bytes,
        # Many small files are counted in files per second: dd's own seconds leave out starting each dd.
        "bw_bytes": int(total_bytes / seconds) if seconds > 0 and len(runs) == 1 else None,
        "iops": iops,
        "runtime_ms": int(round((wall_seconds if wall_seconds else seconds) * 1000)),
        "total_ios": len(runs) if len(runs) > 1 else None,
        "clat_ns_mean": (seconds / len(runs)) * 1e9 if len(runs) > 1 else None,
    }


def metadata_figures(doc):
    """Records from the metadata probe's JSON: ops per second of create, stat, read and delete."""
    files = int(doc["files"])
    figures = []
    for op in ("create", "stat", "read", "delete"):
        seconds = float(doc["seconds"][op])
        figures.append({
            "op": op,
            "io_bytes": files * int(doc.get("file_bytes", 0)) if op in ("create", "read") else None,
            "bw_bytes": None,
            "iops": files / seconds if seconds > 0 else None,
            "runtime_ms": int(round(seconds * 1000)),
            "total_ios": files,
            "clat_ns_mean": seconds / files * 1e9 if files else None,
        })
    return figures


def memcopy_bw(doc):
    """Bytes per second of memory copy, all the probe's copiers together (one per core), from its best pass."""
    best = min(float(seconds) for seconds in doc["seconds"])
    return int(int(doc["bytes"]) / best) if best > 0 else None


# --- two runs against each other ------------------------------------------------------------------

# The figure each test is judged by, per (tool, test, op), and whether higher is better.
def _judged_metric(tool, test, op, record=None):
    if record and record.get("judged_metric"):
        # Schema 3: the figure the plan's item judges it by.
        return record["judged_metric"], bool(record.get("higher_is_better"))
    for m_tool, m_test, m_op, metric, higher, _verb in RATIO_METRICS + SEED_METRICS:
        if (m_tool, m_test, m_op) == (tool, test, op):
            return metric, higher
    return None, True


def compare_runs(before, after):
    """Every figure two runs share (same host, target, test), each judged by its ratio metric, with
    ``changed`` true only when the two runs' ranges do not overlap: a move within the spread is no
    change. ``factor`` is after over before (the geometric means of their runs, as ratio_rows() takes them),
    turned round for latency, so above 1 is better."""
    index = dict(((r["host"], r["label"], r["tool"], r["test"], r["op"], r.get("mode")), r) for r in before)
    rows = []
    for record in after:
        key = (record["host"], record["label"], record["tool"], record["test"], record["op"], record.get("mode"))
        old = index.get(key)
        metric, higher = _judged_metric(record["tool"], record["test"], record["op"], record)
        if not old or not metric or not old.get(metric) or not record.get(metric):
            continue
        old_mid, old_low, old_high = _spread(old, metric)
        new_mid, new_low, new_high = _spread(record, metric)
        old_mean, new_mean = _mean(old, metric), _mean(record, metric)
        factor = new_mean / float(old_mean) if higher else old_mean / float(new_mean)
        rows.append({
            "host": record["host"], "label": record["label"], "tool": record["tool"], "test": record["test"],
            "op": record["op"], "title": test_title(record["tool"], record["test"], record["op"]), "metric": metric,
            "before": old_mid, "before_min": old_low, "before_max": old_high,
            "after": new_mid, "after_min": new_low, "after_max": new_high,
            "factor": round(factor, 3), "changed": new_low > old_high or new_high < old_low,
        })
        if "mode" in record:
            rows[-1]["mode"] = record["mode"]
    return rows


# --- memory during the run ----------------------------------------------------------------------

# Below this share of MemTotal, MemAvailable is too low for comfort: the kernel starts reclaiming hard
# and a RAM disk of the tested size would crowd out the host's own work.
MEMORY_FLOOR_SHARE = 0.10


def parse_memory_tsv(text):
    """The role's memory.tsv (a header, then one tab-separated sample per line: time, /proc/meminfo
    fields in bytes, /proc/vmstat swap counters) as a list of dicts of numbers; a last line cut short
    by the end of the run is left out."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    header = lines[0].split("\t")
    samples = []
    for line in lines[1:]:
        fields = line.split("\t")
        if len(fields) != len(header):
            continue
        try:
            samples.append(dict((key, float(value) if key == "time" else int(value))
                                for key, value in zip(header, fields) if value != ""))
        except ValueError:
            continue
    return samples


def memory_summary(samples):
    """What the run did to the host's memory: the lowest MemAvailable (bytes and share of MemTotal),
    how far Shmem (tmpfs and ramfs pages) rose above its first sample, the least SwapFree, and the pages
    swapped out and in during the run."""
    if not samples:
        return None
    first, last = samples[0], samples[-1]
    total = first.get("MemTotal") or 0
    available = [sample["MemAvailable"] for sample in samples if "MemAvailable" in sample]
    lowest = min(available) if available else None
    return {
        "samples": len(samples),
        "seconds": round(last["time"] - first["time"], 1),
        "mem_total_bytes": total,
        "mem_available_first_bytes": first.get("MemAvailable"),
        "mem_available_min_bytes": lowest,
        "mem_available_min_share": round(lowest / float(total), 4) if lowest is not None and total else None,
        "shmem_rise_bytes": max(sample.get("Shmem", 0) for sample in samples) - first.get("Shmem", 0),
        "swap_free_min_bytes": min(sample.get("SwapFree", 0) for sample in samples),
        "swap_out_pages": last.get("pswpout", 0) - first.get("pswpout", 0),
        "swap_in_pages": last.get("pswpin", 0) - first.get("pswpin", 0),
    }


def memory_warnings(host, summary, floor=MEMORY_FLOOR_SHARE):
    """Sentences for a run that pushed the host into swap or MemAvailable below the floor."""
    if not summary:
        return []
    warnings = []
    if summary["swap_out_pages"] > 0:
        warnings.append("Host %s went into swap during the benchmark: %d pages swapped out, %d in. Its figures "
                        "include swapping; lower benchmark_memory_fraction or run with less else on the host."
                        % (host, summary["swap_out_pages"], summary["swap_in_pages"]))
    share = summary["mem_available_min_share"]
    if share is not None and share < floor:
        warnings.append("Host %s: MemAvailable fell to %.1f%% of MemTotal during the benchmark (under %d%%): a RAM "
                        "disk of the tested size leaves the host little room; size it smaller or lower "
                        "benchmark_memory_fraction." % (host, 100 * share, round(100 * floor)))
    return warnings


# --- /proc and /sys text -------------------------------------------------------------------------

def cpu_model(cpuinfo):
    """The CPU's name from /proc/cpuinfo (x86 'model name', else arm 'Hardware' or 'CPU part')."""
    for key in ("model name", "Hardware", "Processor", "cpu model", "CPU part"):
        for line in cpuinfo.splitlines():
            name, sep, value = line.partition(":")
            if sep and name.strip() == key and value.strip():
                return value.strip()
    return None


MM_STAT_FIELDS = ("orig_data_size", "compr_data_size", "mem_used_total", "mem_limit", "mem_used_max",
                  "same_pages", "pages_compacted", "huge_pages", "huge_pages_since")


def parse_mm_stat(text):
    """zram's /sys/block/zramN/mm_stat as a dict (older kernels print fewer columns)."""
    if not text or not text.strip():
        return None
    values = [int(field) for field in text.split()]
    return dict(zip(MM_STAT_FIELDS, values))


def zram_algorithm(text):
    """The selected algorithm in zram's comp_algorithm (``lzo [lzo-rle] lz4``)."""
    for word in (text or "").split():
        if word.startswith("[") and word.endswith("]"):
            return word[1:-1]
    return None


# --- records, ratios, tables ---------------------------------------------------------------------

def host_context(manifest):
    memcopy = manifest.get("memcopy")
    return {
        "run_id": manifest.get("run_id"),
        "profile": manifest.get("profile"),
        "host": manifest["host"],
        "groups": " ".join(manifest.get("groups") or []),
        "kernel": manifest.get("kernel"),
        "cpu_model": cpu_model(manifest.get("cpuinfo") or ""),
        "cores": manifest.get("cores"),
        "mem_total_bytes": manifest.get("mem_total_bytes"),
        "memcopy_bw_bytes": memcopy_bw(memcopy) if memcopy else None,
        "fio_version": manifest.get("fio_version"),
    }


def target_context(target):
    zram = target.get("zram") or {}
    before = parse_mm_stat(zram.get("mm_stat_before"))
    after = parse_mm_stat(zram.get("mm_stat_after"))
    return {
        "label": target["label"],
        "path": target["path"],
        "kind": target["kind"],
        "backend": target["backend"],
        "fstype": target.get("fstype"),
        "source": target.get("source"),
        "mount_options": ",".join(target.get("mount_options") or []),
        "file_size_bytes": target.get("file_size_bytes"),
        "direct": target.get("direct"),
        "zram_algorithm": zram_algorithm(zram.get("comp_algorithm")) if zram else None,
        "zram_mm_stat_before": json.dumps(before, sort_keys=True) if before else None,
        "zram_mm_stat_after": json.dumps(after, sort_keys=True) if after else None,
    }


def normalize_manifest(manifest):
    """A schema-3 manifest (the role on the registry) with each target's zram state and O_DIRECT flag where
    target_context() reads them: ``zram`` from the environment the role read before and after the tests (bench_env),
    ``direct`` from the target's ``direct_ok``. Older manifests come back as they are."""
    if "probes" not in manifest:
        return manifest
    environment = manifest.get("environment") or {}

    def zram_of(when):
        return dict((entry.get("device"), entry) for entry in (environment.get(when) or {}).get("zram") or [])

    before, after = zram_of("before"), zram_of("after")
    targets = []
    for target in manifest.get("targets") or []:
        target = dict(target)
        device = target.get("zram_device")
        if device and device in before:
            target["zram"] = {"device": device, "comp_algorithm": before[device].get("comp_algorithm"),
                              "mm_stat_before": before[device].get("mm_stat"),
                              "mm_stat_after": (after.get(device) or {}).get("mm_stat")}
        if "direct" not in target and "direct_ok" in target:
            target["direct"] = 1 if target["direct_ok"] else 0
        plan = manifest.get("plan") or {}
        if plan.get("seed_scale") and "seed_scale" not in target:
            target["seed_scale"] = plan["seed_scale"]
        for skip in plan.get("target_skips") or []:
            if skip.get("label") == target.get("label") and skip.get("test") == "compile":
                target.setdefault("compile_skip", skip.get("why"))
        targets.append(target)
    return dict(manifest, targets=targets)


def _as_list(value):
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _num(value):
    """A figure as a number (ansible-core 2.17 and 2.18 may template numbers into text); None stays None."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return int(number) if number.is_integer() and "." not in str(value) else number


def _probe_records(manifest, warmups):
    """host_records() of a schema 3 manifest: one record per figure of each ``probes`` entry's result, as bench_probe
    parsed it on the host (no raw file is read again), with the entry's item's probe, mode and side (its kind: an A/A
    run declares one of two RAM targets a disk) and the result's row label, device counters and CPU steal."""
    context = host_context(manifest)
    targets = dict((target.get("label"), target) for target in manifest.get("targets") or [])
    records, problems = [], []
    for entry in manifest["probes"]:
        item, result = (entry or {}).get("item") or {}, (entry or {}).get("result") or {}
        if item.get("warmup") and not warmups:
            continue
        try:
            label = item["label"]
            target_ctx = target_context(targets.get(label) or {"label": label, "path": item.get("path"),
                                                               "kind": item.get("kind"), "backend": item.get("kind")})
            target_ctx["kind"] = item.get("kind") or target_ctx["kind"]
            counters = result.get("counters") or []
            issued = result.get("issued") or {}
            cpu = result.get("cpu") or {}
            lowest = counters[-1] if counters else {}
            share = None
            if _reached_share is not None and _num(issued.get("bytes")):
                share = _reached_share(_num(issued["bytes"]), counters, issued.get("what") or "write")
            base = {"probe": item["probe"], "mode": item["mode"], "policy": item.get("policy"),
                    "row_label": result.get("row_label") or None, "round": int(item["round"]),
                    "warmup": bool(item.get("warmup")), "issued_what": issued.get("what"),
                    "issued_bytes": _num(issued.get("bytes")),
                    "device_share": round(share, 4) if share is not None else None,
                    "device_stack": " > ".join("+".join(level) for level in result.get("stack") or []) or None,
                    "device_read_bytes": _num(lowest.get("read_bytes")),
                    "device_write_bytes": _num(lowest.get("write_bytes")),
                    "device_flush_ios": _num(lowest.get("flush_ios")), "steal_share": _num(cpu.get("steal_share")),
                    "load1": _num(cpu.get("load1")), "raw": (result.get("raw") or "").rsplit("/", 1)[-1] or None}
            judged = {}
            for figure in item.get("figures") or []:
                judged.setdefault(figure["op"], figure)
            for figure in result["figures"]:
                record = dict((column, None) for column in COLUMNS + PROBE_COLUMNS)
                record.update(context)
                record.update(target_ctx)
                record.update((key, _num(figure[key])) for key in FIGURE_COLUMNS if key in figure)
                record.update(base, tool=figure.get("tool") or item["tool"], test=figure.get("test") or item["test"],
                              op=figure["op"], steady_attained=figure.get("steady_attained"))
                one = judged.get(figure["op"])
                if one:
                    record.update(judged_metric=one["metric"], higher_is_better=bool(one["higher_is_better"]))
                if (record["kind"] == "ram" and record["bw_bytes"] and context["memcopy_bw_bytes"]
                        and record["tool"] == "fio" and record["test"] in ("seq_read", "seq_write")):
                    record["memcopy_fraction"] = round(record["bw_bytes"] / float(context["memcopy_bw_bytes"]), 4)
                records.append(record)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            problems.append("%s: probe %s on %s (%s), round %s: %s: %s" % (
                manifest["host"], item.get("probe"), item.get("label"), item.get("mode"), item.get("round"),
                type(exc).__name__, exc))
    return records, problems


def steal_flags(manifest, limit=STEAL_FLAG):
    """Sentences for the probes (warm-ups too) during which the hypervisor stole more than LIMIT of the CPU."""
    out = []
    for entry in manifest.get("probes") or []:
        item, result = (entry or {}).get("item") or {}, (entry or {}).get("result") or {}
        steal = _num((result.get("cpu") or {}).get("steal_share"))
        if steal is not None and steal > limit:
            load = _num((result.get("cpu") or {}).get("load1"))
            out.append("Host %s: %s on %s (%s), round %s%s: CPU steal %.1f%%%s, above %d%%: the hypervisor took CPU"
                       " time while it ran." % (
                           manifest["host"], item.get("probe"), item.get("label"), item.get("mode"), item.get("round"),
                           " (warm-up)" if item.get("warmup") else "", 100 * steal,
                           ", load %.2f" % load if load is not None else "", round(100 * limit)))
    return out


def host_records(manifest, read_raw, warmups=False):
    """Every normalized record of one host, one per run (``round`` 1, 2, ...). ``read_raw(name)``
    returns the text of a raw file the role fetched (fio JSON, dd output, probe JSON); a missing or
    unreadable one is reported in ``problems`` rather than failing the whole report.

    A target's fio files, dd entries and metadata documents are lists with one item per round (a single
    item, not in a list, is one round).

    A schema 3 manifest (``probes``: bench_plan's items, each with its bench_probe result) gives its records from the
    results' figures instead (_probe_records()), each with PROBE_COLUMNS; the warm-up round (0) only with WARMUPS, its
    records flagged ``warmup``, for the runs table."""
    if manifest.get("probes") is not None:
        return _probe_records(manifest, warmups)
    context = host_context(manifest)
    records = []
    problems = []

    def add(target_ctx, tool, test, figures, round_number):
        for figure in figures:
            record = dict((column, None) for column in COLUMNS)
            record.update(context)
            record.update(target_ctx)
            record.update(tool=tool, test=test, round=round_number)
            record.update(figure)
            record.pop("total_ios", None)
            if (record["kind"] == "ram" and record["bw_bytes"] and context["memcopy_bw_bytes"]
                    and tool == "fio" and test in ("seq_read", "seq_write")):
                record["memcopy_fraction"] = round(record["bw_bytes"] / float(context["memcopy_bw_bytes"]), 4)
            records.append(record)

    for target in manifest.get("targets") or []:
        target_ctx = target_context(target)
        for round_number, names in enumerate(_as_list(target.get("fio")), 1):
            try:
                doc = fio_round_doc(names, read_raw)
                for job in target.get("fio_jobs") or fio_job_names(doc):
                    add(target_ctx, "fio", job, fio_figures(doc, job), round_number)
            except (IOError, OSError, ValueError, KeyError) as exc:
                problems.append("%s: %s: %s" % (manifest["host"], ", ".join(_as_list(names)), exc))
        sections = {}
        for test, entries in sorted((target.get("dd") or {}).items()):
            for round_number, entry in enumerate(_as_list(entries), 1):
                try:
                    if entry["file"] not in sections:
                        sections[entry["file"]] = dd_sections(read_raw(entry["file"]))
                    text = sections[entry["file"]][entry["section"]] if entry.get("section") else read_raw(entry["file"])
                    figure = dd_figures(text, entry["op"], entry["block_size"], entry.get("wall_seconds"))
                    add(target_ctx, "dd", test, [figure], round_number)
                except (IOError, OSError, ValueError, KeyError) as exc:
                    problems.append("%s: dd %s on %s: %s" % (manifest["host"], test, target["label"], exc))
        for test, entries in sorted((target.get("seeds") or {}).items()):
            for round_number, entry in enumerate(_as_list(entries), 1):
                try:
                    if entry["kind"] == "fio":
                        figures = fio_figures(parse_fio_json(read_raw(entry["file"])), entry["test"])
                        add(target_ctx, "fio", entry["test"], figures + dbtest_total(figures), round_number)
                        continue
                    if entry["file"] not in sections:
                        sections[entry["file"]] = dd_sections(read_raw(entry["file"]))
                    for figure in seed_figures(entry, sections[entry["file"]][entry["section"]]):
                        add(target_ctx, entry["tool"], figure.pop("test"), [figure], round_number)
                except (IOError, OSError, ValueError, KeyError, TypeError) as exc:
                    problems.append("%s: %s on %s: %s" % (manifest["host"], test, target["label"], exc))
        for run in target.get("pgbench") or []:
            try:
                add(target_ctx, "pgbench", run["test"], [pgbench_figures(run["output"])], int(run["round"]))
            except (ValueError, KeyError, TypeError) as exc:
                problems.append("%s: pgbench on %s: %s" % (manifest["host"], target["label"], exc))
        for run in target.get("compile") or []:
            try:
                add(target_ctx, "compile", "build", [compile_figures(run["seconds"])], int(run["round"]))
            except (ValueError, KeyError, TypeError) as exc:
                problems.append("%s: compile on %s: %s" % (manifest["host"], target["label"], exc))
        for round_number, metadata in enumerate(_as_list(target.get("metadata")), 1):
            try:
                doc = metadata if isinstance(metadata, dict) else json.loads(read_raw(metadata))
                add(target_ctx, "metadata", "metadata", metadata_figures(doc), round_number)
            except (IOError, OSError, ValueError, KeyError) as exc:
                problems.append("%s: metadata on %s: %s" % (manifest["host"], target["label"], exc))
    return records, problems


def median(values):
    ordered = sorted(values)
    if not ordered:
        return None
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2.0


def median_rank(count, confidence=0.95):
    """(k, coverage): the order-statistic interval of a median of COUNT values is the k-th lowest to the k-th highest,
    k as large as the binomial law allows at CONFIDENCE, and it holds the true median with probability coverage,
    exactly. Below 6 values no k reaches 95%: k is 1 (the lowest to the highest) with its own, lower coverage
    (93.75% for 5 values, 75% for 3)."""
    # below[j]: the chance that at most j of COUNT values fall below the median.
    below, term, total = [], 1.0, 0.0
    for j in range(count // 2 + 1):
        total += term
        below.append(total / 2.0 ** count)
        term = term * (count - j) / (j + 1)
    k = 1
    while k + 1 <= count // 2 and 1 - 2 * below[k] >= confidence:
        k += 1
    return k, (1 - 2 * below[k - 1] if count > 1 else 0.0)


def median_interval(values, confidence=0.95):
    """The interval that holds the true median of what VALUES sample with at least CONFIDENCE, whatever their
    distribution: the k-th lowest and the k-th highest value (median_rank()). Below 6 values it is the lowest to the
    highest, which holds it less often: median_rank() says how often.

    Written here because the standard library has no binomial law before Python 3.8's statistics module,
    and that one has no such interval; the module runs on the hosts' Python."""
    ordered = sorted(values)
    count = len(ordered)
    if not count:
        return None, None
    k, _coverage = median_rank(count, confidence)
    return ordered[k - 1], ordered[count - k]


def visit_order(targets, runs, interleave=True):
    """The order the role measures TARGETS in, as visits: each visit runs the listed rounds of every test on one
    target. Interleaved, the targets take turns one round at a time (round 1 on every target, then round 2, ...),
    so that a drift of the host during the run (a disk's write-back regime, a busy neighbour) falls on every
    target alike instead of on whichever target was being measured then. Otherwise each target runs all its
    rounds in one visit. ``first`` and ``last`` mark a target's first and last visit: the first starts its
    record, the last may run further rounds where figures have not settled, and keeps the record.

    ``order`` is the visit's place in the whole order, and a digest of that order. The role loops include_tasks
    over the visits, and Ansible runs an include once for every host whose loop item is equal, at the place of the
    first host that had it: two hosts with different targets but one equal visit would have their visits run out
    of order (seen in the lab: a host ran round 2 of two targets before round 1 of the others). With the digest,
    only hosts with the very same order share includes (a fleet of alike hosts still does, in order)."""
    runs = int(runs)
    if runs < 1:
        raise ValueError("runs must be at least 1, not %r" % (runs,))
    targets = list(targets)
    if not interleave or runs == 1 or len(targets) < 2:
        rounds = list(range(1, runs + 1))
        visits = [{"target": target, "rounds": rounds, "first": True, "last": True} for target in targets]
    else:
        visits = [{"target": target, "rounds": [number], "first": number == 1, "last": number == runs}
                  for number in range(1, runs + 1) for target in targets]
    digest = hashlib.sha256(json.dumps(visits, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:16]
    for place, visit in enumerate(visits):
        visit["order"] = "%s-%d" % (digest, place)
    return visits


def target_phases(targets):
    """The stretches of the run spent on each target, from the manifest's TARGETS, in time order: (label, began,
    ended) for every visit (interleaved runs visit each target once per round), or the target's start and end
    when the manifest has no visits (runs made before visits were recorded)."""
    phases = []
    for target in targets or []:
        spans = target.get("visits") or [[target.get("started"), target.get("ended")]]
        for span in spans:
            if span and len(span) == 2 and span[0]:
                phases.append((target.get("label"), span[0], span[1]))
    return sorted(phases, key=lambda phase: float(phase[1]))


# The tests the thorough profile repeats until their figures settle, in the order target.yml runs them.
SETTLE_TOOLS = ("fio", "metadata", "dd", "pgbench", "compile")


def settle_figures(records, spread, confidence=0.95):
    """How settled each compared figure of one target is, from its per-round RECORDS (host_records()): the
    judged metric's median over the rounds and the interval that holds the true median (median_interval());
    ``width`` is that interval's width over the median, and the figure is settled when it is SPREAD or less.
    More rounds narrow the interval, while the lowest to the highest only widens: the interval is what more
    rounds can settle."""
    groups, order = {}, []
    for record in records:
        metric, _higher = _judged_metric(record["tool"], record["test"], record["op"])
        if metric is None or record.get(metric) is None:
            continue
        key = (record["tool"], record["test"], record["op"])
        if key not in groups:
            groups[key] = (metric, [])
            order.append(key)
        groups[key][1].append(record[metric])
    out = []
    for key in order:
        metric, values = groups[key]
        middle = median(values)
        low, high = median_interval(values, confidence)
        if middle:
            width = (high - low) / float(abs(middle))
        else:
            width = 0.0 if high == low else float("inf")
        out.append({"tool": key[0], "test": key[1], "op": key[2], "metric": metric, "runs": len(values),
                    "median": middle, "low": low, "high": high,
                    "width": round(width, 4) if width != float("inf") else None,
                    "settled": width <= spread})
    return out


def unsettled_tools(figures):
    """The tools (SETTLE_TOOLS order) with at least one figure settle_figures() found not settled."""
    found = set(figure["tool"] for figure in figures if not figure["settled"])
    return [tool for tool in SETTLE_TOOLS if tool in found]


def summarize(run_records):
    """One record per host, target and figure from the records of its runs: each figure the median of
    the runs, ``runs`` how many there were, and ``<metric>_min``/``_max``/``_gmean`` the lowest and highest run
    and the geometric mean of the runs, for the figures that carry a spread."""
    groups = {}
    order = []
    for record in run_records:
        if record.get("warmup"):
            continue
        key = (record["host"], record["label"], record["tool"], record["test"], record["op"], record.get("mode"))
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(record)
    summary = []
    numeric = ("bw_bytes", "iops", "io_bytes", "runtime_ms", "clat_ns_mean", "memcopy_fraction", "lat_ns_max") + tuple(
        column for _key, column in PERCENTILES)
    for key in order:
        runs = groups[key]
        record = dict((column, runs[0].get(column)) for column in COLUMNS + (PROBE_COLUMNS if "mode" in runs[0] else ()))
        record["runs"] = len(runs)
        if "mode" in runs[0]:
            record.update(_probe_summary(runs))
        # How many runs bonnie++ found too fast to time (it printed +++++ for them).
        record["too_fast"] = sum(1 for run in runs if run.get("too_fast")) or None
        for column in numeric:
            values = [run[column] for run in runs if run.get(column) is not None]
            value = median(values) if values else None
            if value is not None and column in ("io_bytes", "runtime_ms", "bw_bytes"):
                value = int(round(value))
            record[column] = value
            if column in SPREAD_METRICS:
                record[column + "_min"] = min(values) if values else None
                record[column + "_max"] = max(values) if values else None
                record[column + "_gmean"] = geometric_mean(values)
        summary.append(record)
    return summary


def _probe_summary(runs):
    """The PROBE_COLUMNS of a schema 3 figure over its measured runs: device figures the median, steal the highest,
    and the row labelled cache when any run was."""
    out = {}
    for column in ("device_share", "device_read_bytes", "device_write_bytes", "device_flush_ios", "issued_bytes",
                   "load1"):
        values = [run[column] for run in runs if run.get(column) is not None]
        out[column] = median(values) if values else None
    steal = [run["steal_share"] for run in runs if run.get("steal_share") is not None]
    out["steal_share"] = max(steal) if steal else None
    out["cache_runs"] = sum(1 for run in runs if run.get("row_label") == "cache")
    labels = [run.get("row_label") for run in runs if run.get("row_label")]
    out["row_label"] = "cache" if out["cache_runs"] else (labels[0] if labels else None)
    steady = [run.get("steady_attained") for run in runs if run.get("steady_attained") is not None]
    out["steady_attained"] = all(steady) if steady else None
    return out


def _index(records):
    return dict(((r["host"], r["label"], r["tool"], r["test"], r["op"]), r) for r in records)


def _spread(record, metric):
    """The figure (the median of its runs), its lowest and its highest run."""
    value = record.get(metric)
    low = record.get(metric + "_min")
    high = record.get(metric + "_max")
    return value, (low if low is not None else value), (high if high is not None else value)


def _mean(record, metric):
    """What a ratio takes of a figure: the geometric mean of its runs (the median where none was kept)."""
    return record.get(metric + "_gmean") or record.get(metric)


def ratio_rows(records):
    """For each host, each RAM target against each disk target, each compared figure: how many
    times better RAM is (higher is better: ram/disk; latency: disk/ram), with the range the runs allow (worst RAM
    run against best disk run, and the other way round). When the RAM runs and the disk runs overlap, ``clear`` is
    false: the runs cannot tell them apart.

    The ratio is the geometric mean of the RAM runs over the geometric mean of the disk runs (the geometric mean of
    every RAM run against every disk run), not the ratio of the two medians (``ram_value``, ``disk_value``): a
    ratio's average is the geometric one, the same whichever side is on top, and it uses every run where the median
    of three keeps one. Measured on the lab (docs/benchmark-stability.md): over five checks of two runs back to
    back, ratios taken so agreed within 1.25x in 75-90% of comparisons, from the medians in 72-84%."""
    index = _index(records)
    targets = {}
    for record in records:
        targets.setdefault(record["host"], {}).setdefault(record["label"], record)
    rows = []
    for host in sorted(targets):
        rams = [r for r in targets[host].values() if r["kind"] == "ram"]
        disks = [r for r in targets[host].values() if r["kind"] == "disk"]
        for ram in sorted(rams, key=lambda r: r["label"]):
            for disk in sorted(disks, key=lambda r: r["label"]):
                for tool, test, op, metric, higher, verb in RATIO_METRICS + SEED_METRICS:
                    a = index.get((host, ram["label"], tool, test, op))
                    b = index.get((host, disk["label"], tool, test, op))
                    if not a or not b or not a.get(metric) or not b.get(metric):
                        continue
                    a_mid, a_low, a_high = _spread(a, metric)
                    b_mid, b_low, b_high = _spread(b, metric)
                    if not (a_low and a_high and b_low and b_high):
                        continue
                    a_mean, b_mean = _mean(a, metric), _mean(b, metric)
                    if higher:
                        ratio, low, high = a_mean / float(b_mean), a_low / float(b_high), a_high / float(b_low)
                    else:
                        ratio, low, high = b_mean / float(a_mean), b_low / float(a_high), b_high / float(a_low)
                    clear = a_low > b_high or a_high < b_low
                    runs = min(int(a.get("runs") or 1), int(b.get("runs") or 1))
                    rows.append({
                        "host": host, "groups": ram["groups"], "ram_label": ram["label"], "ram_backend": ram["backend"],
                        "disk_label": disk["label"], "disk_backend": disk["backend"],
                        "tool": tool, "test": test, "op": op, "metric": metric,
                        "title": figure_title(tool, test, op, metric),
                        "higher_is_better": higher,
                        "ram_value": a_mid, "disk_value": b_mid, "ratio": round(ratio, 3),
                        "ratio_low": round(low, 3), "ratio_high": round(high, 3), "runs": runs, "clear": clear,
                        "words": ratio_words(ratio, higher, clear),
                        "sentence": sentence(ram["backend"], ram["path"], disk["path"], host, verb, ratio, higher,
                                             clear=clear, low=low, high=high, runs=runs),
                    })
    return rows


def ratio_words(ratio, higher, clear=True):
    """The ratio as the table says it: '×9.6 faster', '×1.3 slower', '×2 lower' (latency), or 'no clear
    difference' when the runs overlap."""
    if not clear:
        return "no clear difference"
    if ratio >= 1:
        return "\u00d7%s %s" % (format_ratio(ratio), "faster" if higher else "lower")
    return "\u00d7%s %s" % (format_ratio(1.0 / ratio), "slower" if higher else "higher")


def sentence(backend, ram_path, disk_path, host, verb, ratio, higher, clear=True, low=None, high=None, runs=1):
    """'tmpfs (/srv/ram) writes sequentially ×9.6 faster than disk (/var/tmp) on host h (×8.1-11.2 over
    5 runs)'; a ratio below 1 is said the other way round ('×1.3 slower'), never as 'x0.8 faster'; when
    the runs overlap: 'tmpfs (/srv/ram) stats small files: no clear difference from disk (/var/tmp) on
    host h (×1.1, runs ×0.8-1.4)'."""
    spread = ""
    if runs > 1 and low is not None and high is not None:
        spread = "\u00d7%s-%s over %d runs" % (format_ratio(low), format_ratio(high), runs)
    if not clear:
        return "%s (%s) %s: no clear difference from disk (%s) on host %s (\u00d7%s, runs %s)" % (
            backend, ram_path, verb, disk_path, host, format_ratio(ratio), spread[:spread.index(" over")] if spread
            else "overlap")
    if ratio >= 1:
        word = "faster" if higher else "lower"
    else:
        word = "slower" if higher else "higher"
        ratio = 1.0 / ratio
        if spread:
            spread = "\u00d7%s-%s over %d runs" % (format_ratio(1.0 / high), format_ratio(1.0 / low), runs)
    return "%s (%s) %s \u00d7%s %s than disk (%s) on host %s%s" % (
        backend, ram_path, verb, format_ratio(ratio), word, disk_path, host, " (%s)" % spread if spread else "")


def format_ratio(ratio):
    """Two digits that mean something: '×420', '×42', '×4.2', and near 1 two decimals ('×1.02', '×0.96'), so a clear
    2% gain never prints as '×1.0 faster'."""
    if ratio >= 100:
        return "%d" % round(ratio)
    if ratio >= 10:
        return "%.0f" % ratio
    if 0.9 <= ratio < 1.095:
        return "%.2f" % ratio
    return "%.1f" % ratio


def geometric_mean(values):
    values = [v for v in values if v and v > 0]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def group_rows(ratios, groups):
    """Per group (every group a host is in, 'all' included), the geometric mean of each compared
    figure's ratio over the group's hosts and RAM targets, and of the ends of their ranges. Groups
    that hold exactly the same hosts are one row, named together ('all, lab'). ``clear`` counts the
    rows behind it whose runs did not overlap."""
    members = {}
    for row in ratios:
        for group in groups.get(row["host"]) or ["all"]:
            members.setdefault(group, set()).add(row["host"])
    names = {}
    for group in sorted(members, key=lambda name: (name != "all", name)):
        names.setdefault(frozenset(members[group]), []).append(group)
    buckets = {}
    for row in ratios:
        seen = set()
        for group in groups.get(row["host"]) or ["all"]:
            name = ", ".join(names[frozenset(members[group])])
            if name in seen:
                continue
            seen.add(name)
            # A schema 3 row's mode (buffered and direct runs of one test are two comparisons) and its title.
            key = (name, row["ram_backend"], row["tool"], row["test"], row["op"], row["metric"], row.get("mode") or "")
            bucket = buckets.setdefault(key, {"hosts": set(), "ratios": [], "low": [], "high": [], "clear": 0,
                                              "higher": row.get("higher_is_better", True), "mode": row.get("mode"),
                                              "title": row["title"]})
            bucket["hosts"].add(row["host"])
            bucket["ratios"].append(row["ratio"])
            bucket["low"].append(row.get("ratio_low") or row["ratio"])
            bucket["high"].append(row.get("ratio_high") or row["ratio"])
            bucket["clear"] += 1 if row.get("clear", True) else 0
    rows = []
    order = dict(((tool, test, op), number) for number, (tool, test, op, _m, _h, _v)
                 in enumerate(RATIO_METRICS + SEED_METRICS))
    for key in sorted(buckets, key=lambda key: (not key[0].startswith("all"), key[0], key[1],
                                                order.get(key[2:5], len(order)), key)):
        group, backend, tool, test, op, metric, _mode = key
        bucket = buckets[key]
        ratio = geometric_mean(bucket["ratios"])
        rows.append({
            "group": group, "ram_backend": backend, "tool": tool, "test": test, "op": op, "metric": metric,
            "title": bucket["title"] if bucket["mode"] else figure_title(tool, test, op, metric),
            "hosts": len(bucket["hosts"]), "rows": len(bucket["ratios"]),
            "ratio_geomean": round(ratio, 3), "ratio_low": round(geometric_mean(bucket["low"]), 3),
            "ratio_high": round(geometric_mean(bucket["high"]), 3), "clear": bucket["clear"],
            "words": ratio_words(ratio, bucket["higher"], bucket["clear"] > 0),
        })
        if bucket["mode"]:
            rows[-1]["mode"] = bucket["mode"]
    return rows


def csv_text(records, columns=COLUMNS):
    """CSV of the records, one per line, in ``columns`` order (no csv module quirks: fields with a
    comma, quote or newline are quoted, quotes doubled)."""
    def cell(value):
        if value is None:
            return ""
        if isinstance(value, float):
            value = repr(round(value, 6))
        text = str(value)
        if any(char in text for char in ',"\n'):
            text = '"%s"' % text.replace('"', '""')
        return text

    lines = [",".join(columns)]
    for record in records:
        lines.append(",".join(cell(record.get(column)) for column in columns))
    return "\n".join(lines) + "\n"


def human_metric(metric, value):
    if value is None:
        return "-"
    if metric == "bw_bytes":
        return format_size(value, measured=True) + "/s"
    if metric.startswith("clat_ns") or metric.startswith("lat_ns"):
        if value >= 1e6:
            return "%.2f ms" % (value / 1e6)
        return "%.1f \u00b5s" % (value / 1e3)
    if metric == "runtime_ms":
        return "%.2f s" % (value / 1000.0)
    if value >= 1000:
        return "%.0f/s" % value
    if value >= 10:
        return "%.1f/s" % value
    return "%.3g/s" % value


# --- the seeds' experiments ---------------------------------------------------------------------------
# The write-ups the project started from, each rerun here the way it was run (scaled to the host), with
# the figures they published printed beside ours. Their figures come from other machines: context, not
# a target. Each row: (tool, test, op, metric, higher is better, title, published RAM, published disk,
# published ratio RAM over disk, or for latency disk over RAM). Published values are text as printed.
SEEDS = (
    {
        "id": "tmp_dd",
        "source": "the /tmp write-up (502 servers)",
        "ran": "dd of one large block from random data, the same with oflag=dsync, a read back of it, then many "
               "1 KiB files each written by its own dd with oflag=dsync",
        "published_sides": ("tmpfs", "SSD"),
        "rows": (
            ("dd", "seed_block_write", "write", "bw_bytes", True, "one large block written (dd)",
             "1.4 GB/s", "285 MB/s", 1.4e9 / 285e6),
            ("dd", "seed_block_write_dsync", "write", "bw_bytes", True, "one large block, oflag=dsync (dd)",
             "869 MB/s", "180 MB/s", 869.0 / 180.0),
            ("dd", "seed_block_read", "read", "bw_bytes", True, "the block read back (dd)", None, None, None),
            ("dd", "seed_files_dsync", "write", "iops", True, "1 KiB files, one dd each, oflag=dsync",
             "10,000 files in 15.5 s", "10,000 files in 26.7 s", 26.7 / 15.5),
        ),
    },
    {
        "id": "bonnie",
        "source": "the tmpfs vs ext3 write-up",
        "ran": "bonnie++ -f -s 0 -n <files>:<max>:0:<dirs> (files of random size from 0 to <max> bytes in "
               "<dirs> directories: create, stat and delete in sequential and in random order)",
        "published_sides": ("tmpfs", "ext3"),
        # bonnie++ gives a rate per test (none when the test was too quick to time) and its worst latency.
        "rows": tuple(
            row for op, title in (("create_seq", "create files, sequential order"),
                                  ("stat_seq", "stat files, sequential order"),
                                  ("delete_seq", "delete files, sequential order"),
                                  ("create_random", "create files, random order"),
                                  ("stat_random", "stat files, random order"),
                                  ("delete_random", "delete files, random order"))
            for row in (("bonnie++", "files", op, "iops", True, "%s (bonnie++)" % title, None, None, None),
                        ("bonnie++", "files", op, "lat_ns_max", False, "%s, worst latency (bonnie++)" % title,
                         None, None, None))),
    },
    {
        "id": "fio_dbtest",
        "source": "the ramdisk guide",
        "ran": "fio --name=dbtest --ioengine=libaio --rw=randrw --bs=4k --iodepth=64 --numjobs=4 --time_based "
               "--group_reporting",
        "published_sides": ("RAM disk", "disk"),
        "rows": (
            ("fio", "dbtest", "readwrite", "iops", True, "dbtest IOPS, read and write (fio)", "1089k", "137k",
             1089.0 / 137.0),
            ("fio", "dbtest", "read", "clat_ns_p99", False, "dbtest p99 read latency (fio)", "26 \u00b5s",
             "1536 \u00b5s", 1536.0 / 26.0),
            ("fio", "dbtest", "write", "clat_ns_p99", False, "dbtest p99 write latency (fio)", "36 \u00b5s",
             "1687 \u00b5s", 1687.0 / 36.0),
        ),
    },
    {
        "id": "pg_test_fsync",
        "source": "the PostgreSQL write-up",
        "ran": "pg_test_fsync -f <file> -s <seconds>, PostgreSQL's own test of its WAL sync methods",
        "published_sides": ("tmpfs", "disk"),
        "rows": (
            ("pg_test_fsync", "one_8k_write", "fdatasync", "iops", True, "fdatasync, one 8 kB write (pg_test_fsync)",
             "1,137,033 ops/s", None, None),
            ("pg_test_fsync", "one_8k_write", "fsync", "iops", True, "fsync, one 8 kB write (pg_test_fsync)",
             "1,146,431 ops/s", None, None),
            ("pg_test_fsync", "one_8k_write", "open_datasync", "iops", True,
             "open_datasync, one 8 kB write (pg_test_fsync)", None, None, None),
            ("pg_test_fsync", "one_8k_write", "open_sync", "iops", True, "open_sync, one 8 kB write (pg_test_fsync)",
             None, None, None),
        ),
    },
    {
        "id": "dd_64k",
        "source": "the dd write-up",
        "ran": "dd bs=64k count=1k conv=fdatasync, then a read of the file with bs=64k, repeated and averaged",
        "published_sides": ("tmpfs", "disk"),
        "rows": (
            ("dd", "seed_64k_write", "write", "bw_bytes", True, "64 KiB blocks, conv=fdatasync (dd, averaged)",
             None, None, 3.5),
            ("dd", "seed_64k_read", "read", "bw_bytes", True, "64 KiB blocks read back (dd, averaged)",
             None, None, 0.9),
        ),
    },
)
SEED_IDS = tuple(seed["id"] for seed in SEEDS)
SEED_METRICS = tuple((row[0], row[1], row[2], row[3], row[4], "on the seed test '%s' is" % row[5])
                     for seed in SEEDS for row in seed["rows"])
# The title of each seed figure; bonnie++'s rate and worst latency share a (tool, test, op).
SEED_TITLES = dict((row[:4], row[5]) for seed in SEEDS for row in seed["rows"])
for _seed in SEEDS:
    for _row in _seed["rows"]:
        if _row[3] != "lat_ns_max":
            TEST_TITLES[_row[:3]] = _row[5]


# A compared figure whose test reports several: its title says which one the ratio is taken from.
FIGURE_TITLES = {
    ("fio", "fsync", "sync", "clat_ns_mean"): "fdatasync after 4 KiB writes, mean latency (fio)",
}


def figure_title(tool, test, op, metric):
    """What a compared figure is called: the seed's own title, else the figure's, else the test's."""
    return (SEED_TITLES.get((tool, test, op, metric)) or FIGURE_TITLES.get((tool, test, op, metric))
            or test_title(tool, test, op))


# pg_test_fsync's sections, by the first words of their heading, and the test name each gets.
_PG_SECTIONS = (
    ("Compare file sync methods using one", "one_8k_write"),
    ("Compare file sync methods using two", "two_8k_writes"),
    ("Compare open_sync with different write sizes", "open_sync_sizes"),
    ("Test if fsync on non-write file descriptor", "fsync_other_descriptor"),
    ("Non-sync'ed", "no_sync"),
)
_PG_LINE_RE = re.compile(r"^\s+(\S.*?)\s+([0-9.]+) ops/sec\s+([0-9.]+) usecs/op\s*$")
_LATENCY_RE = re.compile(r"^([0-9.]+)(ns|us|ms|s)$")


def parse_pg_test_fsync(text):
    """pg_test_fsync's output as figures: one per method line that has a rate, test named for its
    section, op for the method ('fdatasync', '4x4kB open_sync writes' as '4x4kB_open_sync_writes');
    iops is ops/sec, clat_ns_mean its usecs/op. Methods the platform lacks ('n/a') are left out."""
    figures = []
    test = None
    for line in text.splitlines():
        for start, name in _PG_SECTIONS:
            if line.startswith(start):
                test = name
        found = _PG_LINE_RE.match(line)
        if found and test:
            op = re.sub(r"[^A-Za-z0-9_]+", "_", re.sub(r"\s*\*\s*", "x", found.group(1))).strip("_")
            figures.append({"test": test, "op": op, "iops": float(found.group(2)),
                            "clat_ns_mean": float(found.group(3)) * 1000.0, "bw_bytes": None, "io_bytes": None,
                            "runtime_ms": None})
    if not figures:
        raise ValueError("no 'ops/sec' line in pg_test_fsync output")
    return figures


def _bonnie_latency_ns(text):
    found = _LATENCY_RE.match(text.strip())
    if not found:
        return None
    return float(found.group(1)) * {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[found.group(2)]


BONNIE_OPS = ("create_seq", "stat_seq", "delete_seq", "create_random", "stat_random", "delete_random")


def parse_bonnie_csv(text):
    """The figures of bonnie++'s file tests from the CSV line it prints (format 1.98 and later): per
    test, files per second and the test's worst latency (bonnie++ reports the maximum). A rate of
    '+++++' means the test took too little time for bonnie++ to time it: no rate, latency still kept.
    The file tests are the 12 fields before the 12 latencies that end the line; the last 6 of those
    belong to them."""
    lines = [line for line in text.splitlines() if re.match(r"^\d+\.\d+,", line)]
    if not lines:
        raise ValueError("no CSV line in bonnie++ output")
    fields = lines[-1].strip().split(",")
    if len(fields) < 30:
        raise ValueError("no CSV line in bonnie++ output: %d fields" % len(fields))
    rates, latencies = fields[-24:-12], fields[-6:]
    figures = []
    for number, op in enumerate(BONNIE_OPS):
        rate = rates[2 * number]
        figures.append({"test": "files", "op": op,
                        "iops": float(rate) if re.match(r"^[0-9.]+$", rate) else None,
                        "lat_ns_max": _bonnie_latency_ns(latencies[number]),
                        "too_fast": rate.startswith("+"), "bw_bytes": None, "io_bytes": None, "runtime_ms": None})
    return figures


def dd_average(text, op):
    """Repeated dd runs of one round (the dd write-up's loop) as one figure: the mean of each run's bytes
    over its own seconds, as the write-up averaged them."""
    runs = parse_dd(text)
    rates = [run["bytes"] / run["seconds"] for run in runs if run["seconds"] > 0]
    return {"op": op, "bw_bytes": int(sum(rates) / len(rates)) if rates else None, "io_bytes": sum(run["bytes"] for run in runs),
            "iops": None, "runtime_ms": int(round(sum(run["seconds"] for run in runs) * 1000)), "repeats": len(runs)}


def _dd_block(entry, text):
    figure = dd_figures(text, entry["op"], entry["block_size"])
    figure["iops"] = None
    return [dict(figure, test=entry["test"])]


def _dd_files(entry, _text):
    """Files per second of the whole loop's wall time, starting each dd included, as the write-up timed it."""
    wall = float(entry["wall_seconds"])
    files = int(entry["files"])
    return [{"test": entry["test"], "op": "write", "iops": files / wall if wall > 0 else None, "bw_bytes": None,
             "io_bytes": files * 1024, "runtime_ms": int(round(wall * 1000)), "clat_ns_mean": wall / files * 1e9}]


_SEED_PARSERS = {
    "dd_block": _dd_block,
    "dd_files": _dd_files,
    "dd_repeat": lambda entry, text: [dict(dd_average(text, entry["op"]), test=entry["test"])],
    "bonnie": lambda _entry, text: parse_bonnie_csv(text),
    "pg_test_fsync": lambda _entry, text: parse_pg_test_fsync(text),
}


def seed_figures(entry, text):
    """Figures of one round of one seed test, from its raw text: ``entry`` is the manifest's record of
    that round (its kind picks the parser; an unknown kind is a KeyError, reported as a problem)."""
    return _SEED_PARSERS[entry["kind"]](entry, text)


def dbtest_total(figures):
    """fio dbtest's read and write together, the way the guide quotes its IOPS: one more figure."""
    ops = dict((figure["op"], figure) for figure in figures)
    if "read" not in ops or "write" not in ops:
        return []
    return [{"op": "readwrite", "iops": ops["read"]["iops"] + ops["write"]["iops"],
             "bw_bytes": (ops["read"]["bw_bytes"] or 0) + (ops["write"]["bw_bytes"] or 0),
             "io_bytes": (ops["read"]["io_bytes"] or 0) + (ops["write"]["io_bytes"] or 0),
             "runtime_ms": max(ops["read"]["runtime_ms"], ops["write"]["runtime_ms"])}]


def seed_rows(records, hosts_seeds=None):
    """Per seed: its rows of figures, each RAM target of each host against each of its disk targets,
    ours beside the published; and per host the seed's parameters or why it was skipped."""
    index = _index(records)
    labels = {}
    for record in records:
        labels.setdefault(record["host"], {}).setdefault(record["label"], record)
    out = []
    for seed in SEEDS:
        rows = []
        for host in sorted(labels):
            rams = sorted((r for r in labels[host].values() if r["kind"] == "ram"), key=lambda r: r["label"])
            disks = sorted((r for r in labels[host].values() if r["kind"] == "disk"), key=lambda r: r["label"])
            for tool, test, op, metric, higher, title, pub_ram, pub_disk, pub_ratio in seed["rows"]:
                for ram in rams:
                    a = index.get((host, ram["label"], tool, test, op))
                    for disk in disks or [None]:
                        b = index.get((host, disk["label"], tool, test, op)) if disk else None
                        if not a and not b:
                            continue
                        row = {"host": host, "ram_label": ram["label"], "ram_backend": ram["backend"],
                               "disk_label": disk["label"] if disk else None, "tool": tool, "test": test, "op": op,
                               "metric": metric, "title": title, "higher_is_better": higher,
                               "published_ram": pub_ram, "published_disk": pub_disk, "published_ratio": pub_ratio,
                               "ram": _figure_of(a, metric), "disk": _figure_of(b, metric), "ratio": None,
                               "ratio_low": None, "ratio_high": None, "clear": None}
                        if row["ram"]["value"] and row["disk"]["value"]:
                            a_mid, a_low, a_high = _spread(a, metric)
                            b_mid, b_low, b_high = _spread(b, metric)
                            a_mean, b_mean = _mean(a, metric), _mean(b, metric)
                            if higher:
                                ratio, low, high = a_mean / float(b_mean), a_low / float(b_high), a_high / float(b_low)
                            else:
                                ratio, low, high = b_mean / float(a_mean), b_low / float(a_high), b_high / float(a_low)
                            row.update(ratio=round(ratio, 3), ratio_low=round(low, 3), ratio_high=round(high, 3),
                                       clear=a_low > b_high or a_high < b_low)
                        rows.append(row)
        hosts = {}
        for host, seeds in sorted((hosts_seeds or {}).items()):
            if seed["id"] in (seeds or {}):
                hosts[host] = seeds[seed["id"]]
        out.append({"id": seed["id"], "source": seed["source"], "ran": seed["ran"],
                    "published_sides": list(seed["published_sides"]), "rows": rows, "hosts": hosts})
    return out


def _figure_of(record, metric):
    if not record:
        return {"value": None, "min": None, "max": None, "runs": 0, "too_fast": False}
    value, low, high = _spread(record, metric)
    return {"value": value, "min": low, "max": high, "runs": int(record.get("runs") or 1),
            "too_fast": int(record.get("too_fast") or 0)}


# --- pgbench ---------------------------------------------------------------------------------------

_PGBENCH_TPS_RE = re.compile(r"^tps = ([0-9.]+) \(without initial connection time\)", re.MULTILINE)
_PGBENCH_LATENCY_RE = re.compile(r"^latency average = ([0-9.]+) ms", re.MULTILINE)
_PGBENCH_COUNT_RE = re.compile(r"^number of transactions actually processed: (\d+)", re.MULTILINE)


def pgbench_figures(text):
    """One pgbench run's figure: transactions per second (without the time to connect) as iops, its
    average latency, and how many transactions it made."""
    tps = _PGBENCH_TPS_RE.search(text)
    if not tps:
        raise ValueError("no 'tps = N (without initial connection time)' line in pgbench output")
    latency = _PGBENCH_LATENCY_RE.search(text)
    count = _PGBENCH_COUNT_RE.search(text)
    return {"op": "transaction", "iops": float(tps.group(1)), "bw_bytes": None, "io_bytes": None, "runtime_ms": None,
            "clat_ns_mean": float(latency.group(1)) * 1e6 if latency else None,
            "total_ios": int(count.group(1)) if count else None}


# --- compile ---------------------------------------------------------------------------------------

def compile_figures(seconds):
    """One build's figure: its wall time, and builds per second (one over it) as iops, the figure the ratio
    table compares, so a faster build reads as faster."""
    seconds = float(seconds)
    if seconds <= 0:
        raise ValueError("a build cannot take %r seconds" % seconds)
    return {"op": "build", "iops": 1.0 / seconds, "bw_bytes": None, "io_bytes": None,
            "runtime_ms": int(round(seconds * 1000)), "clat_ns_mean": None}
