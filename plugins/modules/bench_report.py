#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: bench_report
short_description: Turn fetched RAM-versus-disk benchmark results into results.json, results.csv and a report
version_added: 1.0.0
description:
  - 'Runs on the controller (C(delegate_to: localhost), C(run_once: true)) after the role C(ramdisk.provision.benchmark)
    has fetched each host''s raw files into O(path)C(/<host>/).'
  - Reads every host's C(manifest.json), the raw fio JSON (C(--output-format=json+)), the dd output and the probes'
    JSON, and normalizes them into records named as fio names them (C(bw_bytes), C(iops), C(clat_ns) percentiles),
    each with its context (kernel, CPU, cores, MemTotal, backend, mount options, zram algorithm and mm_stat, profile).
  - Each test ran several times (the profile's runs); every figure is the median of its runs, with the lowest and
    highest run beside it (C(<metric>_min), C(<metric>_max)) and the geometric mean of the runs (C(<metric>_gmean)).
  - RAM against disk is the geometric mean of the RAM runs over the geometric mean of the disk runs, with the range
    the runs allow. A comparison whose RAM runs and disk runs overlap is reported as "no clear difference", not as a
    ratio. fio's fdatasync test is compared by its mean latency (every sync of the run); its p50, p99, p99.9 and
    latency distribution are in the tables and charts.
  - 'A manifest of schema 3 (the role''s probe registry: C(probes), each M(ramdisk.provision.bench_plan) item with its
    M(ramdisk.provision.bench_probe) result) is read from the results'' figures, parsed on the host; only fio''s latency
    histograms are read from the raw files. The warm-up round is listed in C(runs.csv) (C(warmup)) and kept out of
    every figure. Each figure carries its mode, its row label (C(ram), C(cache), C(direct), C(buffered), C(sync),
    C(cached), C(published)), the share of what it issued that reached the device and the device counters, n, its
    coefficient of variation and the interval of its median with the coverage it really has.'
  - 'Schema 3 comparisons: one per job and mode, the ratio with an exact interval on its logarithm; RAM is ahead only
    when the whole 95% interval lies above 1. The headline counts the jobs where RAM is ahead; a disk row labelled
    C(cache) is shown and never counted, and a latency under 1 microsecond (a no-op such as fdatasync on tmpfs) gets
    no ratio. The host''s C(environment) is shown as it came, and every probe run with over 2% CPU steal is flagged.'
  - Writes C(results.json), C(results.csv) (one row per figure), C(runs.csv) (one row per run), C(report.md),
    C(report.html) and PNG charts into O(path).
  - For a run of the C(seeds) profile, the report and the summary show each write-up's experiment (dd, bonnie++, fio,
    pg_test_fsync) with our figures, their spread and RAM against disk beside the figures the write-up published,
    its source named, and say on which host and target a test did not run and why (C(results.json) key C(seeds)).
  - A file is rewritten only when its content changes; C(changed) says whether any was.
author: ramdisk.provision maintainers (@ramdisk-provision)
requirements:
  - matplotlib on the controller (for the charts only; O(charts=false) does without it)
options:
  path:
    description:
      - The run's directory on the controller, C(<results_dir>/<run_id>), holding one directory per host.
    type: path
    required: true
  hosts:
    description:
      - Hosts to report, each a directory under O(path). Default is every directory there that holds a
        C(manifest.json).
    type: list
    elements: str
  groups:
    description:
      - The inventory groups of each host (host name to list of group names), for the per-group figures.
      - A host missing here counts in the group C(all) only.
    type: dict
    default: {}
  charts:
    description:
      - Draw the PNG charts with matplotlib. Without them the reports carry tables only.
    type: bool
    default: true
  compare:
    description:
      - An earlier run to hold this one against, its directory (C(<results_dir>/<run_id>)) or its C(results.json).
      - The report then lists every figure that moved beyond the spread of the two runs (their ranges do not
        overlap), better or worse, and counts the ones that moved only within it.
    type: path
  title:
    description:
      - Title of C(report.md) and C(report.html).
    type: str
    default: RAM storage versus disk
extends_documentation_fragment:
  - ramdisk.provision._attributes
  - ramdisk.provision._attributes.check_mode_full
attributes:
  platform:
    support: full
    platforms: posix
notes:
  - Ratios compare each RAM-backed target with each disk target of the same host; for latency the ratio is
    disk over RAM, so above 1 always means RAM is better.
  - Per-group figures are geometric means of the hosts' ratios; groups holding the same hosts are one row.
seealso:
  - module: ramdisk.provision.ramdisk_facts
"""

EXAMPLES = r"""
- name: Write the report of this run
  ramdisk.provision.bench_report:
    path: "{{ benchmark_results_dir }}/{{ benchmark_run_id }}"
    groups: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'group_names'))) }}"
  delegate_to: localhost
  run_once: true

- name: Tables only, on a controller without matplotlib
  ramdisk.provision.bench_report:
    path: /srv/benchmarks/20250101T120000Z
    charts: false
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
files:
  description: Every file the report consists of, written or (in check mode) to be written, under O(path).
  returned: always
  type: list
  elements: str
  sample:
    - /srv/benchmarks/20250101T120000Z/results.json
    - /srv/benchmarks/20250101T120000Z/results.csv
    - /srv/benchmarks/20250101T120000Z/report.md
    - /srv/benchmarks/20250101T120000Z/report.html
    - /srv/benchmarks/20250101T120000Z/throughput.png
report:
  description: Path of C(report.html).
  returned: always
  type: str
  sample: /srv/benchmarks/20250101T120000Z/report.html
hosts:
  description: The hosts reported.
  returned: always
  type: list
  elements: str
  sample: [db1, db2]
records:
  description: Number of normalized records in C(results.json) and C(results.csv).
  returned: always
  type: int
  sample: 56
ratios:
  description: One sentence per compared figure, RAM against disk, per host.
  returned: always
  type: list
  elements: str
  sample:
    - tmpfs (/srv/ram) writes sequentially ×9.6 faster than disk (/var/tmp) on host db1
summary:
  description: >-
    A few lines for the terminal: per RAM backend and test, the result over the first group's hosts (the
    group that holds them all), its range over the runs, and how many comparisons behind it were clear.
  returned: always
  type: list
  elements: str
  sample:
    - "Group all, lab, quick profile, 3 runs per figure (median; range over the runs):"
    - "  tmpfs: sequential write (fio) ×9.6 faster (×8.1-11.2; 3 of 3 comparisons clear)"
problems:
  description: Raw files that were missing or did not parse; their figures are left out.
  returned: always
  type: list
  elements: str
  sample: []
"""

import datetime
import json
import os
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.ramdisk.provision.plugins.module_utils import _bench
from ansible_collections.ramdisk.provision.plugins.module_utils import _bench_stats
from ansible_collections.ramdisk.provision.plugins.module_utils._report import (
    HAS_MATPLOTLIB, MATPLOTLIB_IMPORT_ERROR, plt, render_html, render_markdown, ticker)
from ansible_collections.ramdisk.provision.plugins.module_utils._size import format_size


def load_host(path, host):
    directory = os.path.join(path, host)
    with open(os.path.join(directory, "manifest.json"), encoding="utf-8") as handle:
        manifest = json.load(handle)
    manifest = _bench.normalize_manifest(manifest)
    manifest["host"] = manifest.get("host") or host

    def read_raw(name):
        with open(os.path.join(directory, os.path.basename(name)), encoding="utf-8", errors="replace") as handle:
            return handle.read()

    return manifest, read_raw


def find_hosts(path):
    return sorted(name for name in os.listdir(path)
                  if os.path.isfile(os.path.join(path, name, "manifest.json")))


# --- charts ---------------------------------------------------------------------------------------

# Ten distinct colours (matplotlib's tab10), one per target across every chart of a run, so a target
# keeps its colour and no two targets share one.
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")


def target_colors(records):
    labels = sorted(set((r["kind"] != "ram", r["label"]) for r in records))
    return dict((label, PALETTE[number % len(PALETTE)]) for number, (_is_disk, label) in enumerate(labels))


def _bar_chart(filename, title, ylabel, categories, series, log=False):
    """Grouped bars: one group per category, one bar per series (name, color, values, lows, highs);
    the error bar of a bar spans its lowest and highest run. The legend sits beside the plot, never
    over a bar. A log axis only when the values differ by more than 100 times, and the axis label says so; there
    each value is a dot, as a bar's length means nothing on a log axis."""
    width = 0.8 / max(len(series), 1)
    figure, axes = plt.subplots(figsize=(max(6.5, 1.4 * len(categories) + 4.5), 4.4), dpi=100)
    shown = [value for _name, _color, values, _lows, _highs in series for value in values if value]
    use_log = bool(log and shown and max(shown) / min(shown) > 100)
    for number, (name, color, values, lows, highs) in enumerate(series):
        positions = [index + (number - (len(series) - 1) / 2.0) * width for index in range(len(categories))]
        heights = [value if value else 0 for value in values]
        errors = [[max(value - low, 0) if value and low else 0 for value, low in zip(values, lows)],
                  [max(high - value, 0) if value and high else 0 for value, high in zip(values, highs)]]
        spread = any(errors[0]) or any(errors[1])
        if use_log:
            kept = [n for n, value in enumerate(values) if value]
            axes.errorbar([positions[n] for n in kept], [values[n] for n in kept],
                          yerr=[[errors[0][n] for n in kept], [errors[1][n] for n in kept]] if spread else None,
                          fmt="o", markersize=7, color=color, markeredgecolor="black", markeredgewidth=0.4,
                          ecolor="black", elinewidth=0.8, capsize=3, label=name)
        else:
            axes.bar(positions, heights, width, label=name, color=color, edgecolor="black", linewidth=0.4,
                     yerr=errors if spread else None, capsize=3, error_kw={"elinewidth": 0.8})
    axes.set_xticks(range(len(categories)))
    axes.set_xticklabels(categories, rotation=20 if len(categories) > 4 else 0,
                         ha="right" if len(categories) > 4 else "center")
    axes.set_title(title)
    if use_log:
        axes.set_yscale("log")
        ylabel += " (log scale)"
    axes.set_ylabel(ylabel)
    axes.grid(axis="y", alpha=0.3)
    axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    figure.tight_layout()
    figure.savefig(filename, format="png", metadata={"Software": None})
    plt.close(figure)


def _series_by_target(records, tool, test, op, metric, scale, colors):
    """(categories, series) with one category per host and one series per target label: the median
    and the lowest and highest run."""
    hosts = sorted(set(r["host"] for r in records))
    labels = sorted(set((r["kind"] != "ram", r["label"]) for r in records))
    index = dict(((r["host"], r["label"], r["tool"], r["test"], r["op"]), r) for r in records)
    series = []
    for _is_disk, label in labels:
        kinds = [r for r in records if r["label"] == label]
        name = "%s (%s)" % (label, kinds[0]["backend"] or kinds[0]["kind"]) if kinds else label
        values, lows, highs = [], [], []
        for host in hosts:
            record = index.get((host, label, tool, test, op)) or {}
            for out, column in ((values, metric), (lows, metric + "_min"), (highs, metric + "_max")):
                value = record.get(column, record.get(metric))
                out.append(value / scale if value else None)
        if any(values):
            series.append((name, colors.get(label, PALETTE[0]), values, lows, highs))
    return hosts, series


def _ratio_chart(filename, rows, hosts=None):
    """One line per compared test of the first group (all hosts): how many times better RAM is than disk
    (geometric mean over its hosts and RAM targets) as a dot, the range the runs allow as a whisker,
    and the 1x line. Ratios run from below 1 to thousands, so the axis is logarithmic and says so; dots
    rather than bars, since a bar's length on a log axis does not read as its size. A test whose runs
    overlap is drawn grey and says so."""
    first = rows[0]["group"]
    rows = [row for row in rows if row["group"] == first]
    labels = ["%s: %s" % (row["ram_backend"], row["title"]) for row in rows]
    figure, axes = plt.subplots(figsize=(10, max(3.0, 0.34 * len(rows) + 1.5)), dpi=100)
    positions = list(range(len(rows)))[::-1]
    for position, row in zip(positions, rows):
        color = "#2ca02c" if row["clear"] and row["ratio_geomean"] >= 1 else (
            "#d62728" if row["clear"] else "#888888")
        low, mid, high = row["ratio_low"], row["ratio_geomean"], row["ratio_high"]
        axes.plot([low, high], [position, position], color=color, linewidth=2.2, solid_capstyle="butt")
        axes.plot([mid], [position], "o", color=color, markersize=6, markeredgecolor="black", markeredgewidth=0.5)
        axes.annotate(row["words"], (max(high, mid), position), xytext=(6, 0), textcoords="offset points",
                      va="center", fontsize="small")
    axes.axvline(1.0, color="black", linewidth=0.8)
    axes.set_xscale("log")
    values = [value for row in rows for value in (row["ratio_low"], row["ratio_high"]) if value]
    axes.set_xlim(min(values + [1.0]) / 1.5, max(values + [1.0]) * 8)
    axes.xaxis.set_major_formatter(ticker.FuncFormatter(
        lambda value, _position: "\u00d7%g" % value))
    axes.set_yticks(positions)
    axes.set_yticklabels(labels, fontsize="small")
    axes.set_ylim(-0.8, len(rows) - 0.2)
    # Schema 3 rows (with a mode) carry the decision rule's interval, older ones the range of the runs.
    axes.set_xlabel("times better than disk, log scale\n(dot: geometric mean over the hosts and RAM targets; line: "
                    "%s; grey: no clear difference)" % ("95% interval of the ratio" if "mode" in rows[0]
                                                        else "range of the runs"), fontsize="small")
    # HOSTS: their names when every group holds the same hosts, which then name the chart better than the groups.
    where = "host%s %s" % ("s" if "," in hosts else "", hosts) if hosts else "hosts of group %s" % first
    axes.set_title("RAM against disk, %s" % where)
    axes.grid(axis="x", alpha=0.3, which="both")
    figure.tight_layout()
    figure.savefig(filename, format="png", metadata={"Software": None})
    plt.close(figure)


LATENCY_TITLES = {
    ("randrw", "read"): "Completion latency of random 4 KiB reads (fio randrw, every run)",
    ("randrw", "write"): "Completion latency of random 4 KiB writes (fio randrw, every run)",
    ("fsync", "sync"): "Latency of fdatasync after each 4 KiB write (fio, every run)",
}


def _latency_chart(filename, title, curves, kinds):
    """Cumulative distribution of latency: one line per host and target, RAM solid and disk dashed. Both
    axes are stretched where the story is: time on a log axis (latencies span ns to ms), the share on a
    logit axis that spreads the tail (p90, p99, p99.9 as far apart as p50 and p90); both labelled so."""
    figure, axes = plt.subplots(figsize=(9, 4.8), dpi=100)
    floor, top = 0.001, 0.9999
    for name, color, label, points in curves:
        xs = [value / 1000.0 for value, _share in points]
        ys = [min(max(share, floor), top) for _value, share in points]
        axes.step(xs, ys, where="post", color=color, linewidth=1.6,
                  linestyle="-" if kinds.get(label) == "ram" else "--", label=name)
    axes.set_xscale("log")
    axes.set_yscale("logit")
    axes.set_ylim(0.01, top)
    ticks = (0.01, 0.1, 0.5, 0.9, 0.99, 0.999)
    axes.set_yticks(ticks)
    axes.set_yticklabels(["p%g" % (100 * tick) for tick in ticks])
    axes.yaxis.set_minor_formatter(ticker.NullFormatter())
    axes.set_xlabel("latency, microseconds (log scale)")
    axes.set_ylabel("operations at or below (logit scale)")
    axes.set_title(title)
    axes.grid(alpha=0.3, which="major")
    axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    figure.tight_layout()
    figure.savefig(filename, format="png", metadata={"Software": None})
    plt.close(figure)


def draw_latency_charts(path, records, latency_bins):
    """latency_<job>_<op>.png for each job of _bench.LATENCY_JOBS that has histograms; their file names."""
    colors = target_colors(records)
    kinds = dict((r["label"], r["kind"]) for r in records)
    backends = dict(((r["host"], r["label"]), r["backend"]) for r in records)
    multi_host = len(set(r["host"] for r in records)) > 1
    written = []
    for job, op in _bench.LATENCY_JOBS:
        curves = []
        for (host, label, bins_job, bins_op), bins in sorted(latency_bins.items()):
            if (bins_job, bins_op) != (job, op):
                continue
            name = "%s (%s)" % (label, backends.get((host, label)) or kinds.get(label))
            curves.append((host + ": " + name if multi_host else name, colors.get(label, PALETTE[0]), label,
                           _bench.cdf_points(bins)))
        if curves:
            filename = "latency_%s_%s.png" % (job, op)
            _latency_chart(os.path.join(path, filename), LATENCY_TITLES[(job, op)], curves, kinds)
            written.append(filename)
    return written


def draw_memory_chart(path, samples, phases):
    """memory.png: MemAvailable and Shmem (as shares of MemTotal) and swap used, over the run's time, one
    panel per host (at most 8), with each target's tests shaded; returns the file names."""
    hosts = [host for host in sorted(samples) if len(samples[host]) > 1][:8]
    if not hosts:
        return []
    figure, panels = plt.subplots(len(hosts), 1, figsize=(9.5, 2.3 * len(hosts) + 0.8), dpi=100, squeeze=False)
    for panel, host in zip([row[0] for row in panels], hosts):
        rows = samples[host]
        start = rows[0]["time"]
        total = float(rows[0].get("MemTotal") or 1)
        times = [row["time"] - start for row in rows]
        panel.plot(times, [100 * row.get("MemAvailable", 0) / total for row in rows], color="#1f77b4",
                   label="MemAvailable")
        panel.plot(times, [100 * row.get("Shmem", 0) / total for row in rows], color="#ff7f0e", label="Shmem")
        panel.plot(times, [100 * (row.get("SwapTotal", 0) - row.get("SwapFree", 0)) / total for row in rows],
                   color="#d62728", label="swap used")
        panel.axhline(100 * _bench.MEMORY_FLOOR_SHARE, color="#999999", linewidth=0.7, linestyle=":")
        span = max(times[-1], 1.0)
        for number, (label, began, ended) in enumerate(phases.get(host) or []):
            if began and ended:
                panel.axvspan(began - start, ended - start, color="#cccccc" if number % 2 else "#e8e8e8", zorder=0)
                # Alternate heights, so the names of short neighbouring targets do not run together; a stretch too
                # short to hold its name (targets taking turns round by round) goes unnamed.
                if (ended - began) >= 0.04 * span:
                    panel.annotate(label, ((began + ended) / 2.0 - start, 100 if number % 2 else 90), ha="center",
                                   va="top", fontsize="x-small", color="#555555")
        panel.set_ylim(0, 105)
        panel.set_ylabel("% of MemTotal", fontsize="small")
        panel.set_title("%s (MemTotal %s)" % (host, format_size(total, measured=True)), fontsize="small")
        panel.grid(alpha=0.3)
    panels[0][0].legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    panels[-1][0].set_xlabel("seconds since the tests began (shaded: one target's tests, a stretch per visit; dotted: 10%"
                             " of MemTotal)")
    figure.tight_layout()
    figure.savefig(os.path.join(path, "memory.png"), format="png", metadata={"Software": None})
    plt.close(figure)
    return ["memory.png"]


def chart_records(records):
    """The figures the charts draw: a schema 3 figure only in a mode a RAM target of its host ran (the direct disk
    figure beside a buffered pair is in the tables, not drawn as if RAM had run it too)."""
    ram_modes = set((r["host"], r["probe"], r["mode"]) for r in records if "mode" in r and r["kind"] == "ram")
    return [r for r in records if "mode" not in r or (r["host"], r["probe"], r["mode"]) in ram_modes]


def draw_charts(path, records, group_rows_bw, group_ratios=None, latency_bins=None):
    """Writes the PNGs into path; returns their file names."""
    written = []
    records = chart_records(records)
    if not records:
        return written
    colors = target_colors(records)
    if group_ratios:
        groups = set(row["group"] for row in group_ratios)
        _ratio_chart(os.path.join(path, "ratios.png"), group_ratios,
                     ", ".join(sorted(set(r["host"] for r in records))) if len(groups) == 1 else None)
        written.append("ratios.png")
    if latency_bins:
        written += draw_latency_charts(path, records, latency_bins)
    for name, title, ylabel, tool, test, op, metric, scale, log in (
        ("throughput_write.png", "Sequential write throughput (fio, 1 MiB, psync)", "MiB/s",
         "fio", "seq_write", "write", "bw_bytes", _bench.MIB, True),
        ("throughput_read.png", "Sequential read throughput (fio, 1 MiB, psync)", "MiB/s",
         "fio", "seq_read", "read", "bw_bytes", _bench.MIB, True),
        ("iops.png", "Random 4 KiB mixed read/write: read IOPS (fio)", "IOPS",
         "fio", "randrw", "read", "iops", 1, True),
        ("latency_p99.png", "p99 fdatasync latency of small synchronous writes (fio)", "microseconds",
         "fio", "fsync", "sync", "clat_ns_p99", 1000.0, True),
    ):
        categories, series = _series_by_target(records, tool, test, op, metric, scale, colors)
        if not series:
            continue
        _bar_chart(os.path.join(path, name), title, ylabel, categories, series, log=log)
        written.append(name)

    # Per group: geometric mean throughput of RAM and of disk targets.
    # Per group only where there are groups of different hosts to set side by side (group_ratios names groups of
    # the same hosts together).
    if group_rows_bw and len(set(row["group"] for row in group_ratios or group_rows_bw)) > 1:
        groups = sorted(set(row["group"] for row in group_rows_bw))
        series = []
        shades = {("ram", "seq_write"): "#ff7f0e", ("ram", "seq_read"): "#ffbb78",
                  ("disk", "seq_write"): "#1f77b4", ("disk", "seq_read"): "#aec7e8"}
        for kind in ("ram", "disk"):
            for test in ("seq_write", "seq_read"):
                values = []
                for group in groups:
                    match = [row for row in group_rows_bw if row["group"] == group and row["kind"] == kind
                             and row["test"] == test]
                    values.append(match[0]["bw_bytes"] / _bench.MIB if match and match[0]["bw_bytes"] else None)
                series.append(("%s, %s" % (kind, test.replace("_", " ")), shades[(kind, test)], values,
                               [None] * len(values), [None] * len(values)))
        _bar_chart(os.path.join(path, "throughput_groups.png"), "Sequential throughput per group (geometric mean)",
                   "MiB/s", groups, series, log=True)
        written.append("throughput_groups.png")

    # Memory ceiling: RAM-storage throughput as a share of memory copy bandwidth, one bar per RAM
    # target and direction.
    fractions = [r for r in records if r.get("memcopy_fraction")]
    if fractions:
        categories = sorted(set("%s\n%s" % (r["host"], r["label"]) for r in fractions))
        series = []
        for test, color in (("seq_write", "#ff7f0e"), ("seq_read", "#1f77b4")):
            values = []
            for category in categories:
                match = [r for r in fractions if "%s\n%s" % (r["host"], r["label"]) == category and r["test"] == test]
                values.append(100 * match[0]["memcopy_fraction"] if match else None)
            series.append((test.replace("_", " "), color, values, [None] * len(values), [None] * len(values)))
        _bar_chart(os.path.join(path, "memcopy_fraction.png"),
                   "RAM storage throughput as a share of memory copy bandwidth", "% of memory copy", categories,
                   series, log=False)
        written.append("memcopy_fraction.png")
    return written


# --- reports --------------------------------------------------------------------------------------

def group_throughput(records, groups):
    """Per group and kind, the geometric mean of fio sequential bandwidth."""
    buckets = {}
    for record in records:
        if record["tool"] != "fio" or record["test"] not in ("seq_write", "seq_read") or not record["bw_bytes"]:
            continue
        for group in groups.get(record["host"]) or ["all"]:
            buckets.setdefault((group, record["kind"], record["test"]), []).append(record["bw_bytes"])
    return [{"group": g, "kind": k, "test": t, "bw_bytes": _bench.geometric_mean(v), "samples": len(v)}
            for (g, k, t), v in sorted(buckets.items())]


def _range(low, high, ratio=None, clear=True):
    """The range of the runs, the way the words beside it read: for '×1.2 slower' (a clear ratio below 1) the range
    of how many times slower, '×1.1-2.0', not the ratios themselves, '×0.5-0.9'."""
    if low is None or high is None:
        return "-"
    if clear and ratio is not None and ratio < 1 and low > 0 and high > 0:
        low, high = 1.0 / high, 1.0 / low
    return "\u00d7%s-%s" % (_bench.format_ratio(low), _bench.format_ratio(high))


def _with_spread(metric, record):
    """'1.2 GiB/s (1.1-1.3 GiB/s)': the median, then the lowest and highest run when there were several."""
    text = _bench.human_metric(metric, record.get(metric))
    low, high = record.get(metric + "_min"), record.get(metric + "_max")
    if (record.get("runs") or 1) > 1 and low is not None and high is not None:
        text += " (%s-%s)" % (_bench.human_metric(metric, low), _bench.human_metric(metric, high))
    return text


def _moved_words(factor):
    """'×2.0 better' or '×1.5 worse', from after over before (above 1 is better)."""
    return "\u00d7%s %s" % (_bench.format_ratio(max(factor, 1 / factor)), "better" if factor >= 1 else "worse")


def _as_figure(row, side):
    """A compare row's one side as a record _with_spread can show."""
    return {row["metric"]: row[side], row["metric"] + "_min": row[side + "_min"],
            row["metric"] + "_max": row[side + "_max"], "runs": 2}


def _runs_words(data, short=False):
    """How many runs the figures are medians of: one count, or the fewest to the most when further batches ran."""
    most = data.get("runs_per_figure") or 1
    fewest = data.get("runs_fewest") or most
    if fewest == most:
        return "%d runs" % most
    return "%d to %d runs%s" % (fewest, most, "" if short else " (more where the first ones scattered)")


# A comparison whose runs' ratios spread wider than this (highest over lowest) is flagged as unsteady.
UNSTEADY = 1.25
TOP = 3


def unsteady(row):
    low, high = row.get("ratio_low"), row.get("ratio_high")
    return bool(low and high and high / low > UNSTEADY)


def verdict_lines(data):
    """One sentence per host: what RAM bought there, in words and numbers (the clearest comparisons first), how
    many comparisons could not tell RAM from disk, and how many were unsteady."""
    out = []
    for host in sorted(set(row["host"] for row in data.get("ratios") or [])):
        rows = [row for row in data["ratios"] if row["host"] == host]
        if "verdict" in rows[0]:
            out.append(probe_verdict_line(host, rows))
            continue
        clear = sorted((row for row in rows if row["clear"]), key=lambda row: -max(row["ratio"], 1 / row["ratio"]))
        shaky = sum(1 for row in rows if unsteady(row))
        best = ", ".join("%s %s (%s, runs %s)" % (
            row["title"], row["words"], row["ram_backend"], _range(row["ratio_low"], row["ratio_high"], row["ratio"], True))
            for row in clear[:TOP])
        text = ("Host %s: RAM was clearly ahead of disk in %d of %d comparisons%s" % (
            host, len(clear), len(rows), ": " + best + ("; %d more in the table" % (len(clear) - TOP)
                                                        if len(clear) > TOP else "") if clear else ""))
        if len(rows) > len(clear):
            text += ". In %d the runs of RAM and disk overlap: no clear difference" % (len(rows) - len(clear))
        if shaky:
            text += (". %d of %d %s unsteady (their runs spread more than %d%%): run the standard profile for "
                     "figures to rely on" % (shaky, len(rows), "is" if shaky == 1 else "are", round((UNSTEADY - 1) * 100)))
        out.append(text + ".")
    return out


def probe_verdict_line(host, rows):
    """A schema 3 host's headline: in how many jobs (one per probe and mode, _bench_stats.job_rows()) RAM was clearly
    ahead, counting only the jobs that count (a disk row labelled cache and a ratio to a no-op are shown, not counted),
    then where it was behind, mixed or could not be told from disk."""
    jobs = _bench_stats.job_rows(rows)
    counted = [job for job in jobs if job["counted"]]
    ahead = sorted((job for job in counted if job["verdict"] == _bench_stats.AHEAD), key=lambda job: -job["ratio"])
    behind = [job for job in counted if job["verdict"] == _bench_stats.BEHIND]
    mixed = [job for job in counted if job["verdict"] == _bench_stats.MIXED]
    best = ", ".join("%s %s (%s)" % (job["title"], job["words"], job["ram_backend"]) for job in ahead[:TOP])
    text = "Host %s: RAM clearly ahead of disk in %d of %d jobs%s" % (
        host, len(ahead), len(counted), ": " + best + ("; %d more in the table" % (len(ahead) - TOP)
                                                       if len(ahead) > TOP else "") if ahead else "")
    if behind:
        text += ". Behind in %d: %s" % (
            len(behind), ", ".join("%s %s" % (job["title"], job["words"]) for job in behind))
    if mixed:
        text += ". Ahead in some figures and behind in others in %d: %s" % (
            len(mixed), ", ".join(job["title"] for job in mixed))
    unclear = len(counted) - len(ahead) - len(behind) - len(mixed)
    if unclear:
        text += ". No clear difference in %d" % unclear
    cache = [job for job in jobs if job["verdict"] != _bench_stats.NOT_COMPARABLE and not job["counted"]]
    if cache:
        text += ". Not counted: %d where the disk row measured a cache (%s)" % (
            len(cache), ", ".join(job["title"] for job in cache))
    noop = [job for job in jobs if job["verdict"] == _bench_stats.NOT_COMPARABLE]
    if noop:
        text += ". No ratio: %s" % "; ".join("%s (%s)" % (job["title"], job["why"]) for job in noop)
    return text + "."


def _one_group(data):
    """The hosts' names when every group holds the same hosts (then per-group figures repeat the per-host ones)."""
    groups = set(row["group"] for row in data.get("group_ratios") or [])
    return ", ".join(data.get("hosts") or []) if len(groups) == 1 else None


def summary_lines(data):
    """The few lines the terminal shows: per RAM backend and test, the first group's (all hosts) result
    and the range of the runs."""
    if data.get("seeds"):
        return list(data.get("warnings") or []) + seed_summary_lines(data)
    rows = data["group_ratios"]
    if not rows:
        return ["No RAM-versus-disk comparison: no host had both a RAM target and a disk target."]
    first = rows[0]["group"]
    # The answer first; what did not run or went wrong after the figures.
    lines = verdict_lines(data)
    hosts = _one_group(data)
    where = "host%s %s" % ("s" if "," in hosts else "", hosts) if hosts else "the hosts of " + first
    if data.get("schema") == 3:
        lines.append("RAM against disk on %s (%s profile, %s; ratio of the typical figures, its 95%% interval; only the "
                     "jobs that count):" % (where, data["profile"], _runs_words(data, short=True)))
    else:
        lines.append("RAM against disk on %s (%s profile, geometric means of %s, range of the runs):"
                     % (where, data["profile"], _runs_words(data, short=True)))
    width = max(len(row["title"]) for row in rows)
    for row in rows:
        if row["group"] != first:
            continue
        unclear = row["rows"] - row["clear"]
        lines.append("  %-6s %-*s %-20s %s%s" % (
            row["ram_backend"], width, row["title"], row["words"],
            _range(row["ratio_low"], row["ratio_high"], row["ratio_geomean"], row["clear"] > 0),
            "; %d of %d comparisons unclear" % (unclear, row["rows"]) if unclear and row["clear"] else ""))
    lines += list(data.get("warnings") or []) + list(data.get("skipped") or [])
    if data.get("steal_flags"):
        lines.append("%d probe runs had more than %d%% of the CPU stolen by the hypervisor (listed in the report's "
                     "environment section)." % (len(data["steal_flags"]), round(100 * _bench.STEAL_FLAG)))
    if data.get("stopped"):
        lines.append("%d figures stopped before they settled, their runs scattering more than the stopping rule allows "
                     "(listed in the report): read their comparisons with care, or run them on a quieter host."
                     % len(data["stopped"]))
    if data.get("unsettled"):
        lines.append("%d figures had not settled after their last round (listed in the report): their runs scatter."
                     % len(data["unsettled"]))
    if data.get("compare"):
        rows = data["compare"]["rows"]
        moved = [row for row in rows if row["changed"]]
        lines.append("Against run %s: %d of %d figures moved beyond the spread (%d better, %d worse)." % (
            data["compare"]["run_id"], len(moved), len(rows), sum(1 for row in moved if row["factor"] >= 1),
            sum(1 for row in moved if row["factor"] < 1)))
    return lines


def report_sections(data, charts):
    """The report as a list of (kind, payload): ('h', text), ('p', text), ('table', (headers, rows)),
    ('img', file), rendered to Markdown and HTML alike."""
    runs = _runs_words(data)
    out = [("h1", data["title"])]
    verdicts = verdict_lines(data)
    if verdicts:
        out.append(("h2", "What RAM bought"))
        out.append(("list", verdicts))
    if data.get("schema") == 3:
        out.append(("p", PROBE_INTRO % (data["run_id"], data["profile"], data["generated"], runs)))
    else:
        out += [("p", "Run %s, profile %s, generated %s. Every figure is the median of %s, with the lowest and "
                      "highest run beside it. RAM against disk is taken between the geometric means of the two "
                      "sides' runs; a comparison whose RAM runs and disk runs overlap says \"no clear difference\": its runs "
                      "cannot tell RAM from disk. Raw files per host are in the host's directory; "
                      "every figure is in results.json and results.csv, every run in runs.csv."
                      % (data["run_id"], data["profile"], data["generated"], runs))]
    if data.get("seeds"):
        out += seed_sections(data)
    if data.get("skipped"):
        out.append(("list", data["skipped"]))
    if "ratios.png" in charts:
        out.append(("img", ("ratios.png", "How many times better RAM is than disk, per test, with %s" % (
            "its 95% interval" if data.get("schema") == 3 else "the range of the runs"))))
    # Per group only where the groups differ in their hosts; otherwise it repeats the per-host table.
    if data["group_ratios"] and not _one_group(data):
        out.append(("h2", "Per group (geometric mean over the group's hosts and RAM targets)"))
        out.append(("table", (["group", "RAM backend", "test", "hosts", "result", "range of the runs", "clear"],
                              [[r["group"], r["ram_backend"], r["title"], r["hosts"], r["words"],
                                _range(r["ratio_low"], r["ratio_high"], r["ratio_geomean"], r["clear"] > 0),
                                "%d of %d" % (r["clear"], r["rows"])]
                               for r in data["group_ratios"]])))
    paths = dict(((r["host"], r["label"]), r["path"]) for r in data["records"])
    out.append(("h2", "RAM versus disk, per host"))
    old_rows = [r for r in data["ratios"] if "verdict" not in r]
    if old_rows or data.get("schema") != 3:
        out.append(("table", (["host", "RAM", "disk", "test", "result", "range of the runs", "runs"],
                              [[r["host"], "%s (%s, %s)" % (r["ram_label"], r["ram_backend"],
                                                            paths[(r["host"], r["ram_label"])]),
                                "%s (%s)" % (r["disk_label"], paths[(r["host"], r["disk_label"])]), r["title"],
                                r["words"], _range(r["ratio_low"], r["ratio_high"], r["ratio"], r["clear"])
                                + (" (unsteady)" if unsteady(r) else ""), r["runs"]]
                               for r in old_rows])))
    out += probe_comparison_sections(data, paths)
    for name, caption in (("throughput_write.png", "Sequential write throughput per host"),
                          ("throughput_read.png", "Sequential read throughput per host"),
                          ("throughput_groups.png", "Sequential throughput per group"),
                          ("iops.png", "Random 4 KiB read IOPS"),
                          ("latency_p99.png", "p99 fdatasync latency"),
                          ("latency_randrw_read.png", "Latency distribution of random 4 KiB reads, RAM (solid) and "
                                                      "disk (dashed)"),
                          ("latency_randrw_write.png", "Latency distribution of random 4 KiB writes"),
                          ("latency_fsync_sync.png", "Latency distribution of fdatasync"),
                          ("memcopy_fraction.png", "RAM storage as a share of memory copy bandwidth")):
        if name in charts:
            out.append(("img", (name, caption)))
    if data.get("compare"):
        compare = data["compare"]
        moved = [row for row in compare["rows"] if row["changed"]]
        out.append(("h2", "Against run %s" % compare["run_id"]))
        out.append(("p", "%d of the %d figures both runs have moved beyond the spread (the two runs' ranges do not "
                         "overlap); the others moved only within it. Run %s used the %s profile." % (
                             len(moved), len(compare["rows"]), compare["run_id"], compare["profile"])))
        out.append(("table", (["host", "target", "test", "before", "now", "change"],
                              [[row["host"], row["label"], row["title"],
                                _with_spread(row["metric"], _as_figure(row, "before")),
                                _with_spread(row["metric"], _as_figure(row, "after")),
                                _moved_words(row["factor"])] for row in moved])))
    if data.get("memory"):
        out.append(("h2", "Memory during the run"))
        out.append(("p", "Sampled from /proc/meminfo and /proc/vmstat while the tests ran. Shmem is what tmpfs and "
                         "ramfs hold; a host that swaps, or whose MemAvailable falls low, during the benchmark would "
                         "do so in production with a RAM disk of that size."))
        rows = []
        for host in sorted(data["memory"]):
            summary = data["memory"][host]
            if not summary:
                continue
            rows.append([host, summary["samples"], "%.0f s" % summary["seconds"],
                         format_size(summary["mem_available_first_bytes"], measured=True),
                         "%s (%.0f%%)" % (format_size(summary["mem_available_min_bytes"], measured=True),
                                          100 * (summary["mem_available_min_share"] or 0)),
                         format_size(summary["shmem_rise_bytes"], measured=True),
                         "%d out, %d in" % (summary["swap_out_pages"], summary["swap_in_pages"])])
        out.append(("table", (["host", "samples", "over", "MemAvailable at the start", "lowest MemAvailable",
                               "Shmem rose by", "pages swapped"], rows)))
        if "memory.png" in charts:
            out.append(("img", ("memory.png", "Memory and swap through the run, per host")))
        if data["warnings"]:
            out.append(("p", " ".join(data["warnings"])))
    out.append(("h2", "Memory ceiling"))
    out.append(("p", "Memory copy bandwidth of each host, measured with one copier per core (as many as fio's "
                     "sequential jobs), and RAM storage's sequential fio throughput as a share of it: how close the file "
                     "system path gets to what the memory can do."))
    ceiling = []
    for r in data["records"]:
        if r.get("memcopy_fraction"):
            ceiling.append([r["host"], r["label"], _bench.test_title(r["tool"], r["test"], r["op"]),
                            _with_spread("bw_bytes", r), _bench.human_metric("bw_bytes", r["memcopy_bw_bytes"]),
                            "%.0f%%" % (100 * r["memcopy_fraction"])])
    out.append(("table", (["host", "target", "test", "throughput", "memory copy", "share"], ceiling)))
    out.append(("h2", "Figures"))
    figures = []
    for r in data["records"]:
        if "mode" in r:
            continue
        figures.append([r["host"], r["label"], _bench.test_title(r["tool"], r["test"], r["op"]),
                        _with_spread("bw_bytes", r), _with_spread("iops", r), _with_spread("clat_ns_mean", r),
                        _with_spread("clat_ns_p50", r), _with_spread("clat_ns_p99", r), _with_spread("clat_ns_p99_9", r),
                        _with_spread("runtime_ms", r), r.get("runs") or 1])
    if figures:
        out.append(("table", (["host", "target", "test", "throughput", "operations", "latency mean", "latency p50",
                               "latency p99", "latency p99.9", "time", "runs"], figures)))
    out += probe_figure_sections(data)
    out.append(("p", "Operations are per second: I/O operations for fio and dd, files for the small-file tests, "
                     "transactions for pgbench, builds for the compile test. Time is how long one run of the test took."))
    if data.get("unsettled"):
        out.append(("h2", "Figures that did not settle"))
        out.append(("p", "After every batch of rounds these medians were still uncertain by more than the settle spread: "
                         "the interval that holds the true median with 95% confidence was wider than that share of it. "
                         "Their rounds scatter; read their ratios with care, or run them on a quieter host."))
        out.append(("table", (["host", "target", "test", "runs", "median", "95% interval of the median", "width"],
                              [[u["host"], u["label"], _bench.test_title(u["tool"], u["test"], u["op"]), u["runs"],
                                _bench.human_metric(u["metric"], u["median"]),
                                "%s – %s" % (_bench.human_metric(u["metric"], u["low"]), _bench.human_metric(u["metric"], u["high"])),
                                "%.0f%%" % (100 * u["width"]) if u.get("width") is not None else "-"]
                               for u in data["unsettled"]])))
    if data.get("stopped"):
        out.append(("h2", "Figures that did not settle"))
        out.append(("p", "The stopping rule runs every figure at least 5 times, then once more until the coefficient of "
                         "variation of its runs is at most the limit (benchmark_cov_limit), up to a cap "
                         "(benchmark_max_runs). These figures stopped above the limit: at the cap, or because some "
                         "runs gave no figure. Their intervals are wider; read their comparisons with care, or run "
                         "them on a quieter host."))
        out.append(("table", (["host", "target", "test", "mode", "figure", "runs", "CoV", "why it stopped"],
                              [[u["host"], u["label"], _bench.test_title(u.get("tool") or "", u.get("test") or u["probe"], u["op"]), u["mode"], u["metric"],
                                u.get("rounds"), "%.1f%%" % (100 * u["cov"]) if u.get("cov") is not None else "-",
                                _stopped_words(u)] for u in data["stopped"]])))
    out.append(("h2", "Hosts and targets"))
    hosts = []
    for host in data["hosts"]:
        ctx = data["context"][host]
        measured = ctx.get("measure_seconds")
        hosts.append([host, ctx["groups"], ctx["kernel"], ctx["cpu_model"], ctx["cores"],
                      format_size(ctx["mem_total_bytes"], measured=True), _bench.human_metric("bw_bytes", ctx["memcopy_bw_bytes"]),
                      ctx["fio_version"], "%.1f s" % measured if measured is not None else "-"])
    out.append(("table", (["host", "groups", "kernel", "CPU", "cores", "MemTotal", "memory copy", "fio",
                           "measuring time"], hosts)))
    targets = []
    for host in data["hosts"]:
        for target in data["targets"][host]:
            targets.append([host, target["label"], target["path"], target["backend"], target["mount_options"],
                            format_size(target["file_size_bytes"], measured=True), target["direct"],
                            target["zram_algorithm"] or "-", target["zram_mm_stat_after"] or "-"])
    out.append(("table", (["host", "target", "path", "backend", "mount options", "file size", "direct", "zram algorithm",
                           "zram mm_stat after"], targets)))
    out.append(("p", "RAM targets never use O_DIRECT (tmpfs and ramfs have no device to bypass to); disk targets use it "
                     "for fio's sequential and random jobs when the file system allows, so disk figures come from the "
                     "device, not the page cache. The fdatasync job is buffered everywhere, as databases write. dd and "
                     "fio write random data (never /dev/zero), so zram stores real pages. Measuring time is the time "
                     "the host's tests ran, without waiting for other hosts."))
    out += environment_sections(data)
    if data["problems"]:
        out.append(("h2", "Problems"))
        out.append(("p", "; ".join(data["problems"])))
    return out


PROBE_INTRO = (
    "Run %s, profile %s, generated %s. Every figure is the median of its measured runs (%s; the warm-up round is "
    "run, listed in runs.csv and left out of every figure), shown with n, its coefficient of variation (CoV) and the "
    "interval of the median with the coverage that interval really has: 95%% where the runs allow it (6 or more), "
    "else the lowest to the highest run with its own, lower coverage. RAM against disk is one comparison per job and "
    "mode (fio's randrw is judged by its reads alone; metadata's create, stat, read and delete are one job, ahead "
    "when any of them is and none behind); each judged figure is the ratio of the two sides' typical figures with an "
    "exact, distribution-free interval on its logarithm (Hodges-Lehmann and Mann-Whitney; its true coverage beside "
    "it). RAM is clearly ahead only when the whole interval lies above 1, "
    "behind when below, and otherwise there is no clear difference. A disk row labelled cache (under 10%% of what it "
    "issued reached the device in any of its runs) is shown and never counted as disk; a latency under 1 \u00b5s "
    "is a no-op for storage and gets no ratio. Raw files per host are in the host's directory; every figure is in "
    "results.json and results.csv, every run in runs.csv.")


def _figure_words(metric, figure):
    """'1.2 GiB/s (n 5, CoV 2.1%; 1.1-1.3 GiB/s, 93.8% only (lowest to highest of 5 runs))'."""
    if not figure or figure.get("median") is None:
        return "-"
    text = "%s (n %d" % (_bench.human_metric(metric, figure["median"]), figure["n"])
    if figure.get("cov") is not None:
        text += ", CoV %.1f%%" % (100 * figure["cov"])
    if figure.get("low") is not None and figure["n"] > 1:
        text += "; %s-%s, %s" % (_bench.human_metric(metric, figure["low"]), _bench.human_metric(metric, figure["high"]),
                                 _bench_stats.coverage_words(figure["coverage"], figure["n"]))
    return text + ")"


def _device_words(record):
    """What reached the lowest device of a disk row: its share of what the probe issued and the bytes and flushes."""
    if not record.get("device_stack"):
        return "no block device"
    share = record.get("device_share")
    return "%s: %s of issued; read %s, written %s, %s flushes%s" % (
        record["device_stack"], "%.0f%%" % (100 * share) if share is not None else "-",
        format_size(record.get("device_read_bytes"), measured=True), format_size(record.get("device_write_bytes"), measured=True),
        _count(record.get("device_flush_ios")),
        ("; cache in %d runs" % record["cache_runs"]) if record.get("cache_runs") else "")


def probe_comparison_sections(data, paths):
    """The schema 3 comparisons: each with both figures (n, CoV, interval), the disk row's label and what reached its
    device, the ratio with its interval and true coverage, the verdict and whether it counts."""
    rows = [r for r in data["ratios"] if "verdict" in r]
    if not rows:
        return []
    records = dict(((r["host"], r["label"], r["probe"], r["mode"], r["op"]), r) for r in data["records"] if "mode" in r)
    table = []
    for r in rows:
        disk = records.get((r["host"], r["disk_label"], r["probe"], r["mode"], r["op"])) or {}
        interval = "-"
        if r["ratio"] is not None:
            interval = "%s, %s" % (_range(r["ratio_low"], r["ratio_high"], r["ratio"], r["clear"]),
                                   _bench_stats.coverage_words(r["coverage"])) if r["bounded"] else "unbounded"
        verdict = r["verdict"] if r["counted"] else "%s, not counted: %s" % (r["verdict"], r["why"])
        table.append([r["host"], "%s (%s, %s)" % (r["ram_label"], r["ram_backend"], paths.get((r["host"], r["ram_label"]))),
                      "%s (%s)" % (r["disk_label"], paths.get((r["host"], r["disk_label"]))), r["title"],
                      r["disk_row_label"] or "-", _figure_words(r["metric"], r["ram_figure"]),
                      _figure_words(r["metric"], r["disk_figure"]), r["words"], interval, verdict,
                      _device_words(disk)])
    out = [("table", (["host", "RAM", "disk", "test", "disk row", "RAM figure", "disk figure", "result",
                       "interval of the ratio", "verdict", "disk device"], table))]
    compared = set((r["host"], r["probe"], r["mode"]) for r in rows)
    alone = []
    for r in data["records"]:
        if "mode" in r and r["kind"] == "disk" and r.get("judged_metric") and (r["host"], r["probe"], r["mode"]) not in compared:
            alone.append("Host %s, %s (%s): %s, %s: %s; row %s; %s" % (
                r["host"], r["label"], r["path"], _bench.test_title(r["tool"], r["test"], r["op"]), r["mode"],
                _figure_words(r["judged_metric"], {"median": r.get(r["judged_metric"]), "n": r["runs"], "cov": r["cov"],
                                                   "low": r["ci_low"], "high": r["ci_high"],
                                                   "coverage": r["ci_coverage"]}),
                r.get("row_label") or "-", _device_words(r)))
    if alone:
        out.append(("p", "Disk figures with no RAM side to compare with: the direct run beside a buffered pair, where a "
                         "RAM target cannot open files O_DIRECT (the device's own figure, not held against a buffered "
                         "RAM figure):"))
        out.append(("list", alone))
    return out


def probe_figure_sections(data):
    """Every schema 3 figure: its mode and row label, the figure with n, CoV and interval, what reached the device, and
    the most CPU steal seen while it ran; a figure stopped at the cap with its CoV above the limit says so."""
    rows, stopped = [], {}
    for status in data.get("stopped") or []:
        stopped.setdefault((status["host"], status["label"], status["probe"], status["mode"], status["op"],
                            status["metric"]), []).append(status)
    for r in data["records"]:
        if "mode" not in r:
            continue
        metric = r.get("stat_metric")
        figure = {"median": r.get(metric) if metric else None, "n": r.get("runs") or 0, "cov": r.get("cov"),
                  "low": r.get("ci_low"), "high": r.get("ci_high"), "coverage": r.get("ci_coverage")}
        note = [_stopped_words(status) for status in stopped.get(
            (r["host"], r["label"], r.get("probe"), r["mode"], r["op"], r.get("judged_metric")), [])]
        if r.get("steal_share") is not None and r["steal_share"] > _bench.STEAL_FLAG:
            note.append("CPU steal up to %.1f%%" % (100 * r["steal_share"]))
        if r.get("steady_attained") is False:
            note.append("fio's steady state not reached")
        rows.append([r["host"], r["label"], _bench.test_title(r["tool"], r["test"], r["op"]), r["mode"],
                     r.get("row_label") or "-", ("%s: " % metric if metric and metric != r.get("judged_metric") else "")
                     + _figure_words(metric or "iops", figure), _device_words(r), "; ".join(note) or "-"])
    if not rows:
        return []
    return [("table", (["host", "target", "test", "mode", "row", "figure (median, n, CoV, interval of the median)",
                        "device (lowest level)", "notes"], rows))]


def _environment_value(value):
    """One value of the environment manifest as text: numbers and words as they are, a dict as key=value pairs."""
    if isinstance(value, dict):
        return ", ".join("%s=%s" % (key, _environment_value(one)) for key, one in sorted(value.items()))
    if isinstance(value, list):
        return "; ".join(_environment_value(one) for one in value)
    return "-" if value is None or value == "" else str(value)


def environment_sections(data):
    """What each host's environment manifest holds (bench_env: governor, virtualization, block device stacks, dirty_*
    sysctls, steal), shown as it came, and every probe run with more than 2% of its CPU stolen."""
    environments = data.get("environment") or {}
    if not environments and not data.get("steal_flags"):
        return []
    out = [("h2", "Environment"),
           ("p", "What each host reported about itself while the tests ran, as it reported it. A probe run during which "
                 "the hypervisor stole more than %d%% of the CPU is listed below it: its figure may be low for reasons "
                 "that are not storage." % round(100 * _bench.STEAL_FLAG))]
    for host in sorted(environments):
        env = environments[host] or {}
        out.append(("h3", "Host %s" % host))
        rows, blocks = [], []
        for key in sorted(env):
            value = env[key]
            if isinstance(value, str) and "\n" in value.strip():
                blocks.append((key, value.rstrip("\n")))
            else:
                rows.append([key, _environment_value(value)])
        if rows:
            out.append(("table", (["what", "value"], rows)))
        for key, text in blocks:
            out.append(("p", key + ":"))
            out.append(("pre", text))
        if not env:
            out.append(("p", "The host reported no environment."))
    if data.get("steal_flags"):
        out.append(("list", data["steal_flags"]))
    return out


def _number(value):
    """A figure of the manifest as a number: ansible-core 2.17 and 2.18 write templated numbers as text."""
    try:
        return float(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None


def _skipped_everywhere(data):
    """Why each test did not run, per host: the opt-in tests' skip lines and the seeds' reasons, as sentences."""
    lines = ["%s." % line.rstrip(".") for line in data.get("skipped") or []]
    for host, seeds in sorted((data.get("seed_skips") or {}).items()):
        for seed, why in sorted(seeds.items()):
            if not why.startswith("not asked for"):
                lines.append("%s did not run on host %s: %s" % (seed, host, why))
    return lines or ["No test was asked for."]


def host_seeds(manifest):
    """Per seed, how it ran on this host: why it did not (the host lacks the tool, or a target kept it out),
    and each target's scale (sizes and counts, numbers even where older cores wrote them as text)."""
    out = {}
    skips = manifest.get("seed_skips") or {}
    for seed in _bench.SEED_IDS:
        why = skips.get(seed, "not run: the manifest does not mention it.")
        targets = {}
        for target in manifest.get("targets") or []:
            scale = dict((key, value if key == "bonnie_user" else _number(value))
                         for key, value in (target.get("seed_scale") or {}).items())
            targets[target["label"]] = {"scale": scale, "skipped": (target.get("seed_skips") or {}).get(seed) or ""}
        out[seed] = {"skipped": why, "targets": targets}
    return out


def _count(value):
    return "{:,}".format(int(value)) if value is not None else "-"


def seed_scale_words(seed, scale):
    """How a seed ran on one target, in the write-up's own terms."""
    if not scale:
        return "-"
    if seed == "tmp_dd":
        return "one block of %s, %s files of 1 KiB (the write-up: 10,000; files per second compares)" % (
            format_size(scale.get("block_bytes"), measured=True), _count(scale.get("files")))
    if seed == "bonnie":
        files = scale.get("bonnie_files") or 0
        return "-n %d:%d:0:%d, %s files (the write-up: -n 50:250000:0:1000), as user %s" % (
            files, scale.get("bonnie_max_bytes") or 0, scale.get("bonnie_dirs") or 0, _count(files * 1024),
            scale.get("bonnie_user"))
    if seed == "fio_dbtest":
        return "--size=%s per job, --runtime=%d s" % (
            format_size(scale.get("fio_job_bytes"), measured=True), scale.get("fio_runtime") or 0)
    if seed == "pg_test_fsync":
        return "-s %d (seconds per test)" % (scale.get("pg_seconds") or 0)
    if seed == "dd_64k":
        return "bs=64k count=%d, write and read %d times in each run, averaged (the write-up: 100 runs)" % (
            scale.get("dd_count") or 0, scale.get("dd_repeats") or 0)
    return "-"


def _seed_figure(metric, figure):
    """Our figure of one side: median (lowest-highest run), or why there is none."""
    if figure["value"] is None:
        if figure.get("too_fast"):
            return "too quick for bonnie++ to time (+++++)"
        return "-"
    return _with_spread(metric, {metric: figure["value"], metric + "_min": figure["min"], metric + "_max": figure["max"],
                                 "runs": figure["runs"]})


def _seed_ratio(row):
    if row.get("verdict"):
        # Schema 3: the decision rule's comparison of the same job (_bench_stats.probe_ratio_rows()).
        if row["ratio"] is None:
            return "no ratio: %s" % row["why"] if row.get("why") else "-"
        interval = "no bounded interval"
        if row.get("bounded"):
            interval = "%s, %s" % (_range(row["ratio_low"], row["ratio_high"], row["ratio"], row["clear"]),
                                   _bench_stats.coverage_words(row["coverage"]))
        words = row["words"]
        if not row["clear"]:
            words += " (\u00d7%s)" % _bench.format_ratio(row["ratio"])
        return "%s (%s)%s" % (words, interval, "" if row.get("counted", True) else "; not counted: the disk row is labelled cache")
    if row["ratio"] is None:
        return "-"
    return "%s (%s)" % (_bench.ratio_words(row["ratio"], row["higher_is_better"], row["clear"]),
                        _range(row["ratio_low"], row["ratio_high"], row["ratio"], row["clear"]))


def judge_seed_rows(seeds, ratios):
    """Schema 3: each seed row takes the decision rule's comparison of the same job from RATIOS
    (_bench_stats.probe_ratio_rows()): its ratio, exact interval and verdict replace the overlap of the runs'
    ranges that _bench.seed_rows() reads from older records."""
    judged = dict(((row["host"], row["ram_label"], row["disk_label"], row["tool"], row["test"], row["op"],
                    row["metric"]), row) for row in ratios if row.get("verdict"))
    for seed in seeds:
        for row in seed["rows"]:
            found = judged.get((row["host"], row["ram_label"], row["disk_label"], row["tool"], row["test"], row["op"],
                                row["metric"]))
            if found:
                row.update((key, found[key]) for key in ("ratio", "ratio_low", "ratio_high", "clear", "verdict",
                                                         "coverage", "bounded", "counted", "why", "words"))
    return seeds


def _published_ratio(row):
    if row["published_ratio"] is None:
        return "-"
    return _bench.ratio_words(row["published_ratio"], row["higher_is_better"])


def _published(row, sides):
    parts = []
    for side, value in zip(sides, (row["published_ram"], row["published_disk"])):
        if value:
            parts.append("%s %s" % (side, value))
    return ", ".join(parts) or "-"


def seed_sections(data):
    """The seeds' experiments: per write-up, how it ran here, why it did not where it did not, and its
    figures beside the published ones."""
    out = [("h2", "The seeds' experiments"),
           ("p", "Each experiment of the write-ups this project started from, rerun the way the write-up ran it and "
                 "scaled to the host (the sizes below). The published figures come from the write-ups' machines, "
                 "disks and kernels: context for ours, not a target. Ours are the median of the runs with the lowest "
                 "and highest run; RAM against disk is the decision rule's, as in the comparisons above: the ratio "
                 "of every RAM run to every disk run (their median) with its exact interval and that interval's true "
                 "coverage, and no clear difference when the interval holds 1 (reports of older runs: the range the runs allow, and no clear difference "
                 "when the runs overlap). The data is random, never /dev/zero, where the write-ups may have used "
                 "zeros.")]
    for seed in data["seeds"]:
        sides = seed["published_sides"]
        out.append(("h3", "%s: %s" % (seed["id"], seed["source"])))
        out.append(("p", "Ran: %s. Published: %s against %s." % (seed["ran"], sides[0], sides[1])))
        lines = []
        for host, how in sorted(seed["hosts"].items()):
            if how["skipped"]:
                lines.append("Host %s: skipped: %s" % (host, how["skipped"]))
                continue
            for label, target in sorted(how["targets"].items()):
                if target["skipped"]:
                    lines.append("Host %s, target %s: skipped: %s" % (host, label, target["skipped"]))
                else:
                    lines.append("Host %s, target %s: %s." % (host, label, seed_scale_words(seed["id"], target["scale"])))
        if lines:
            out.append(("list", lines))
        if seed["rows"]:
            out.append(("table", (["host", "RAM", "disk", "figure", "published", "published RAM against disk",
                                   "RAM here", "disk here", "RAM against disk here"],
                                  [[row["host"], "%s (%s)" % (row["ram_label"], row["ram_backend"]), row["disk_label"] or "-",
                                    row["title"], _published(row, sides), _published_ratio(row),
                                    _seed_figure(row["metric"], row["ram"]), _seed_figure(row["metric"], row["disk"]),
                                    _seed_ratio(row)] for row in seed["rows"]])))
        else:
            out.append(("p", "No host ran it."))
    return out


def seed_summary_lines(data):
    """The terminal's lines for the seeds profile: per write-up, each figure's RAM-against-disk result here
    (the first group's, over its hosts) beside the published one, and where the test was skipped."""
    first = data["group_ratios"][0]["group"] if data["group_ratios"] else None
    here = dict(((row["tool"], row["test"], row["op"], row["metric"]), row) for row in data["group_ratios"]
                if row["group"] == first)
    lines = ["The seeds' experiments, RAM against disk on the hosts of %s (median of %s runs, range of the runs), "
             "beside what each write-up published on its own machine (context, not a target):"
             % (first or "all", data.get("runs_per_figure") or 1)]
    for seed in data["seeds"]:
        sides = seed["published_sides"]
        lines.append("%s (%s against %s):" % (seed["source"], sides[0], sides[1]))
        for host, how in sorted(seed["hosts"].items()):
            if how["skipped"]:
                lines.append("  skipped on %s: %s" % (host, how["skipped"]))
                continue
            for label, target in sorted(how["targets"].items()):
                if target["skipped"]:
                    lines.append("  skipped on %s, target %s: %s" % (host, label, target["skipped"]))
        if not seed["rows"]:
            continue
        for tool, test, op, metric, higher, title, pub_ram, pub_disk, pub_ratio in _bench.SEEDS[
                _bench.SEED_IDS.index(seed["id"])]["rows"]:
            row = here.get((tool, test, op, metric))
            published = _published({"published_ram": pub_ram, "published_disk": pub_disk}, sides)
            if pub_ratio:
                published = "%s%s" % (_bench.ratio_words(pub_ratio, higher),
                                      " (%s)" % published if published != "-" else "")
            if not row and published == "-":
                continue
            result = "-"
            if row:
                result = "%s %s" % (row["words"], _range(row["ratio_low"], row["ratio_high"], row["ratio_geomean"],
                                                         row["clear"] > 0))
            lines.append("  %-48s here %s; published %s" % (title, result, published))
    return lines


def latency_histograms(path, hosts):
    """The merged latency histograms of every host, for the distribution charts (not kept in results.json:
    the raw fio files hold them)."""
    found = {}
    for host in hosts:
        try:
            manifest, read_raw = load_host(path, host)
        except (IOError, OSError, ValueError):
            continue
        found.update(_bench.host_latency_bins(manifest, read_raw))
    return found


def stopped_figures(manifest, host):
    """The figures of a schema 3 manifest that the stopping rule gave up on: its settle status (bench_settle's) with
    reason cap (the CoV still above the limit after the most runs allowed) or few-figures (runs that gave no figure),
    with the rule's limits (benchmark_max_runs, benchmark_cov_limit) where the manifest records them."""
    rule = manifest.get("stopping_rule") or {}
    out = []
    for status in manifest.get("settle") or []:
        if status.get("reason") in ("cap", "few-figures"):
            cap = _number(rule.get("max_runs"))
            out.append(dict(status, host=host, max_runs=int(cap) if cap is not None else None,
                            cov_limit=_number(rule.get("cov_limit"))))
    return out


def _stopped_words(status):
    cov = "CoV %.1f%%" % (100 * status["cov"]) if status.get("cov") is not None else "no CoV"
    limit = " (limit %.1f%%)" % (100 * status["cov_limit"]) if status.get("cov_limit") is not None else ""
    if status["reason"] == "cap":
        return "stopped at the cap of %s runs, %s%s" % (status.get("max_runs") or status.get("rounds"), cov, limit)
    return "stopped: %s of %s runs gave this figure, %s%s" % (status.get("n"), status.get("rounds"), cov, limit)


def build(path, hosts, groups, title):
    samples, memory, phases, warnings, seeds_of_hosts, workload_skips, unsettled = {}, {}, {}, [], {}, [], []
    environment, steal_flags, schema3, stopped = {}, [], False, []
    records = []
    problems = []
    context = {}
    targets = {}
    run_id = profile = None
    for host in hosts:
        try:
            manifest, read_raw = load_host(path, host)
        except (IOError, OSError, ValueError) as exc:
            problems.append("%s: manifest.json: %s" % (host, exc))
            continue
        manifest["groups"] = groups.get(host) or manifest.get("groups") or ["all"]
        run_id = run_id or manifest.get("run_id")
        profile = profile or manifest.get("profile")
        host_records, host_problems = _bench.host_records(manifest, read_raw, warmups=True)
        if manifest.get("probes") is not None:
            # Schema 3: the probes' results, the host's environment and the runs the hypervisor stole from.
            schema3 = True
            environment[host] = manifest.get("environment") or {}
            steal_flags += _bench.steal_flags(manifest)
            stopped += stopped_figures(manifest, host)
        records += host_records
        problems += host_problems
        context[host] = _bench.host_context(manifest)
        context[host]["wall_seconds"] = manifest.get("wall_seconds")
        context[host]["measure_seconds"] = _number(manifest.get("measure_seconds"))
        if manifest.get("memory"):
            try:
                samples[host] = _bench.parse_memory_tsv(read_raw(manifest["memory"]))
            except (IOError, OSError) as exc:
                problems.append("%s: %s: %s" % (host, manifest["memory"], exc))
            memory[host] = _bench.memory_summary(samples.get(host))
            warnings += _bench.memory_warnings(host, memory[host])
            phases[host] = [(label, _number(began), _number(ended))
                            for label, began, ended in _bench.target_phases(manifest.get("targets"))]
        context[host]["fio_installed"] = manifest.get("fio_installed")
        if manifest.get("pgbench_skip"):
            workload_skips.append("pgbench did not run on host %s: %s" % (host, manifest["pgbench_skip"]))
        if manifest.get("compile_skip"):
            workload_skips.append("compile did not run on host %s: %s" % (host, manifest["compile_skip"]))
        for target in manifest.get("targets") or []:
            for figure in target.get("unsettled") or []:
                unsettled.append(dict(figure, host=host, label=target.get("label")))
            if target.get("compile_skip"):
                workload_skips.append("compile did not run on host %s, target %s: %s"
                                      % (host, target.get("label"), target["compile_skip"]))
        if manifest.get("profile") == "seeds":
            seeds_of_hosts[host] = host_seeds(manifest)
        targets[host] = [_bench.target_context(target) for target in manifest.get("targets") or []]
    host_groups = dict((host, groups.get(host) or ["all"]) for host in hosts)
    run_columns = _bench.PROBE_RUN_COLUMNS if schema3 else _bench.RUN_COLUMNS
    runs = [dict((column, record.get(column)) for column in run_columns) for record in records]
    run_records = records
    records = _bench_stats.summarize(run_records)
    # Schema 1 and 2 records keep the ratios of the geometric means; schema 3 figures get the decision rule.
    ratios = _bench.ratio_rows([record for record in records if "mode" not in record])
    ratios += _bench_stats.probe_ratio_rows(records, run_records)
    counted = [row for row in ratios if row.get("counted", True)]
    columns = _bench.COLUMNS + ((_bench.PROBE_COLUMNS + _bench.STAT_COLUMNS) if schema3 else ())
    data = {
        "schema": 3 if schema3 else 2,
        "runs_per_figure": max([record["runs"] for record in records] or [1]),
        "runs_fewest": min([record["runs"] for record in records] or [1]),
        "title": title,
        "run_id": run_id,
        "profile": profile,
        "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "hosts": sorted(context),
        "context": context,
        "targets": targets,
        "columns": list(columns),
        "records": records,
        "runs": runs,
        "ratios": ratios,
        "group_ratios": _bench.group_rows(counted, host_groups),
        "group_throughput": group_throughput(records, host_groups),
        "memory": memory,
        "memory_samples": samples,
        "phases": phases,
        "warnings": warnings,
        "problems": problems,
        "seeds": judge_seed_rows(_bench.seed_rows(records, seeds_of_hosts), ratios) if seeds_of_hosts else [],
        "skipped": workload_skips,
        # Figures whose median was still uncertain by more than benchmark_settle_spread after the last batch.
        "unsettled": unsettled,
        # Schema 3: figures the stopping rule left unsteady, at the cap of runs or with runs that gave no figure.
        "stopped": stopped,
        # Per host, the seeds that did not run and why (a seeds run only).
        "seed_skips": dict((host, dict((seed, how["skipped"]) for seed, how in sorted(seeds.items()) if how["skipped"]))
                           for host, seeds in sorted(seeds_of_hosts.items())),
    }
    if schema3:
        data.update(environment=environment, steal_flags=steal_flags, run_columns=list(run_columns))
    return data


def _differs(filename, content):
    try:
        with open(filename, "rb") as handle:
            return handle.read() != content
    except (IOError, OSError):
        return True


def _stable(data):
    """The report minus its generation time, to decide whether anything changed."""
    return dict((key, value) for key, value in data.items() if key != "generated")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            hosts=dict(type="list", elements="str"),
            groups=dict(type="dict", default={}),
            charts=dict(type="bool", default=True),
            title=dict(type="str", default="RAM storage versus disk"),
            compare=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    path = module.params["path"]
    if module.params["charts"] and not HAS_MATPLOTLIB:
        module.fail_json(msg=missing_required_lib("matplotlib", reason="to draw the benchmark charts (or set charts=false)")
                         + " Install it on the controller, in the Python that runs ansible: python3 -m pip install matplotlib.",
                         exception=MATPLOTLIB_IMPORT_ERROR)
    if not os.path.isdir(path):
        module.fail_json(msg="path %s is not a directory: run the benchmark role first, or give the run directory "
                             "<results_dir>/<run_id>." % path)
    hosts = module.params["hosts"] if module.params["hosts"] is not None else find_hosts(path)
    if not hosts:
        module.fail_json(msg="No host directory with a manifest.json under %s: the benchmark role fetches one per host "
                             "into <results_dir>/<run_id>/<host>/." % path)
    groups = dict((str(host), [str(g) for g in (names or [])]) for host, names in module.params["groups"].items())
    data = build(path, hosts, groups, module.params["title"])
    # The samples stay in each host's memory.tsv; results.json keeps what they add up to.
    samples = data.pop("memory_samples")
    if module.params["compare"]:
        earlier = module.params["compare"]
        if os.path.isdir(earlier):
            earlier = os.path.join(earlier, "results.json")
        try:
            with open(earlier, encoding="utf-8") as handle:
                before = json.load(handle)
            rows = _bench.compare_runs(before["records"], data["records"])
        except (IOError, OSError, ValueError, KeyError, TypeError) as exc:
            module.fail_json(msg="compare is %s: it is not the results.json of an earlier benchmark run (%s). Give the "
                                 "run's directory, <results_dir>/<run_id>, or leave compare out." % (earlier, exc))
        data["compare"] = {"run_id": before.get("run_id"), "profile": before.get("profile"), "rows": rows}
    if not data["records"] and not data["problems"]:
        # Nothing failed: every test asked for was skipped (its tool, source or user missing on every host).
        module.fail_json(msg="Nothing was measured under %s: every test asked for was skipped on every host. %s "
                             "Install what the tests need on the hosts, or ask for other tests (benchmark_tests, "
                             "benchmark_seeds)." % (path, " ".join(_skipped_everywhere(data))), problems=[])
    if not data["records"]:
        module.fail_json(msg="No figures could be read for any host under %s: %s" % (path, "; ".join(data["problems"])),
                         problems=data["problems"])

    results_path = os.path.join(path, "results.json")
    try:
        with open(results_path, encoding="utf-8") as handle:
            previous = json.load(handle)
    except (IOError, OSError, ValueError):
        previous = None
    # Decide changed first: same figures as the results already there means nothing to write.
    changed = previous is None or _stable(previous) != json.loads(json.dumps(_stable(data)))
    if not changed:
        data["generated"] = previous.get("generated", data["generated"])

    chart_names = []
    if module.params["charts"] and not module.check_mode and changed:
        latency_bins = latency_histograms(path, data["hosts"])
        try:
            chart_names = draw_charts(path, data["records"], data["group_throughput"], data["group_ratios"],
                                      latency_bins)
            chart_names += draw_memory_chart(path, samples, data["phases"])
        except Exception as exc:  # matplotlib raises many kinds; the message says which chart and why
            module.fail_json(msg="Drawing the charts in %s failed: %s" % (path, exc), exception=traceback.format_exc())
    elif module.params["charts"]:
        chart_names = sorted(name for name in os.listdir(path) if name.endswith(".png"))

    sections = report_sections(data, chart_names)
    outputs = {
        "results.json": (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8"),
        "results.csv": _bench.csv_text(data["records"], data["columns"]).encode("utf-8"),
        "runs.csv": _bench.csv_text(data["runs"], data.get("run_columns") or _bench.RUN_COLUMNS).encode("utf-8"),
        "report.md": render_markdown(sections).encode("utf-8"),
        "report.html": render_html(sections, data["title"], path).encode("utf-8"),
    }
    if not module.check_mode:
        for name, content in outputs.items():
            filename = os.path.join(path, name)
            if _differs(filename, content):
                changed = True
                try:
                    with open(filename + ".tmp", "wb") as handle:
                        handle.write(content)
                    os.rename(filename + ".tmp", filename)
                except (IOError, OSError) as exc:
                    module.fail_json(msg="Could not write %s: %s. Check that the controller may write to %s."
                                     % (filename, exc, path))
    files = [os.path.join(path, name) for name in list(outputs) + chart_names]
    module.exit_json(
        changed=changed,
        files=files,
        report=os.path.join(path, "report.html"),
        hosts=data["hosts"],
        records=len(data["records"]),
        ratios=[row["sentence"] for row in data["ratios"]],
        summary=summary_lines(data),
        problems=data["problems"],
    )


if __name__ == "__main__":
    main()
