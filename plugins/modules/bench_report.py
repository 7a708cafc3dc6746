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
  - Writes C(results.json), C(results.csv), C(report.md), C(report.html) and PNG charts into O(path).
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
  title:
    description:
      - Title of C(report.md) and C(report.html).
    type: str
    default: RAM storage versus disk
extends_documentation_fragment:
  - ramdisk.provision._attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
notes:
  - Ratios compare each RAM-backed target with each disk target of the same host; for latency the ratio is
    disk over RAM, so above 1 always means RAM is better.
  - Per-group figures are geometric means of the hosts' ratios.
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

MATPLOTLIB_IMPORT_ERROR = None
try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    HAS_MATPLOTLIB = False
    MATPLOTLIB_IMPORT_ERROR = traceback.format_exc()
else:
    HAS_MATPLOTLIB = True

KIND_COLORS = {"ram": "#d9822b", "disk": "#4a7ab5"}


def load_host(path, host):
    directory = os.path.join(path, host)
    with open(os.path.join(directory, "manifest.json"), encoding="utf-8") as handle:
        manifest = json.load(handle)
    manifest["host"] = manifest.get("host") or host

    def read_raw(name):
        with open(os.path.join(directory, os.path.basename(name)), encoding="utf-8", errors="replace") as handle:
            return handle.read()

    return manifest, read_raw


def find_hosts(path):
    return sorted(name for name in os.listdir(path)
                  if os.path.isfile(os.path.join(path, name, "manifest.json")))


# --- charts ---------------------------------------------------------------------------------------

def _bar_chart(filename, title, ylabel, categories, series, log=False):
    """Grouped bars: one group per category, one bar per series (name, color, values)."""
    width = 0.8 / max(len(series), 1)
    figure, axes = plt.subplots(figsize=(max(6, 1.6 * len(categories) + 3), 4.2), dpi=100)
    for number, (name, color, values) in enumerate(series):
        positions = [index + (number - (len(series) - 1) / 2.0) * width for index in range(len(categories))]
        heights = [value if value else 0 for value in values]
        axes.bar(positions, heights, width, label=name, color=color, edgecolor="black", linewidth=0.4)
    axes.set_xticks(range(len(categories)))
    axes.set_xticklabels(categories, rotation=20 if len(categories) > 4 else 0, ha="right" if len(categories) > 4 else "center")
    axes.set_title(title)
    axes.set_ylabel(ylabel)
    shown = [value for _name, _color, values in series for value in values if value]
    # A log axis only when the bars differ by more than 20 times; otherwise it hides the difference.
    if log and shown and max(shown) / min(shown) > 20:
        axes.set_yscale("log")
    axes.grid(axis="y", alpha=0.3)
    axes.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(filename, format="png", metadata={"Software": None})
    plt.close(figure)


def _series_by_target(records, tool, test, op, metric, scale):
    """(categories, series) with one category per host and one series per target label."""
    hosts = sorted(set(r["host"] for r in records))
    labels = sorted(set((r["kind"] != "ram", r["label"]) for r in records))
    index = dict(((r["host"], r["label"], r["tool"], r["test"], r["op"]), r) for r in records)
    series = []
    palette = {"ram": ["#d9822b", "#e8b04a", "#c2562b", "#f0c987"], "disk": ["#4a7ab5", "#7aa6d6", "#2f4f7f"]}
    used = {"ram": 0, "disk": 0}
    for _is_disk, label in labels:
        kinds = [r["kind"] for r in records if r["label"] == label]
        kind = kinds[0] if kinds else "disk"
        color = palette[kind][used[kind] % len(palette[kind])]
        used[kind] += 1
        values = []
        for host in hosts:
            record = index.get((host, label, tool, test, op))
            value = record.get(metric) if record else None
            values.append(value / scale if value else None)
        series.append(("%s (%s)" % (label, kind), color, values))
    return hosts, series


def draw_charts(path, records, group_rows_bw):
    """Writes the PNGs into path; returns their file names."""
    written = []
    if not records:
        return written
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
        categories, series = _series_by_target(records, tool, test, op, metric, scale)
        if not any(value for _n, _c, values in series for value in values):
            continue
        _bar_chart(os.path.join(path, name), title, ylabel, categories, series, log=log)
        written.append(name)

    # Per group: geometric mean throughput of RAM and of disk targets.
    if group_rows_bw:
        groups = sorted(set(row["group"] for row in group_rows_bw))
        series = []
        for kind in ("ram", "disk"):
            for test, shade in (("seq_write", 1.0), ("seq_read", 0.6)):
                values = []
                for group in groups:
                    match = [row for row in group_rows_bw if row["group"] == group and row["kind"] == kind
                             and row["test"] == test]
                    values.append(match[0]["bw_bytes"] / _bench.MIB if match and match[0]["bw_bytes"] else None)
                series.append(("%s %s" % (kind, test.replace("_", " ")), KIND_COLORS[kind] if shade == 1.0
                               else {"ram": "#f0c987", "disk": "#a9c4e6"}[kind], values))
        _bar_chart(os.path.join(path, "throughput_groups.png"), "Sequential throughput per group (geometric mean)",
                   "MiB/s", groups, series, log=True)
        written.append("throughput_groups.png")

    # Memory ceiling: RAM-storage throughput as a fraction of one-thread memory copy bandwidth.
    fractions = [r for r in records if r.get("memcopy_fraction")]
    if fractions:
        categories, series = _series_by_target(fractions, "fio", "seq_read", "read", "memcopy_fraction", 1)
        write_categories, write_series = _series_by_target(fractions, "fio", "seq_write", "write", "memcopy_fraction", 1)
        series = [("read " + s[0], s[1], s[2]) for s in series] + [("write " + s[0], "#c2562b", s[2]) for s in write_series]
        _bar_chart(os.path.join(path, "memcopy_fraction.png"),
                   "RAM storage throughput as a fraction of one-thread memory copy", "fraction of memcpy bandwidth",
                   categories, series, log=False)
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


def _table(headers, rows):
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join("---" for _h in headers) + " |"]
    for row in rows:
        lines.append("| " + " | ".join(str(cell).replace("|", "\\|") for cell in row) + " |")
    return lines


def report_sections(data, charts):
    """The report as a list of (kind, payload): ('h', text), ('p', text), ('table', (headers, rows)),
    ('img', file), rendered to Markdown and HTML alike."""
    out = [("h1", data["title"]),
           ("p", "Run %s, profile %s, generated %s. Raw files per host are in the host's directory; every figure "
                 "is in results.json and results.csv." % (data["run_id"], data["profile"], data["generated"]))]
    out.append(("h2", "RAM versus disk"))
    out.append(("table", (["host", "RAM", "disk", "test", "ratio", "in words"],
                          [[r["host"], r["ram_label"], r["disk_label"], "%s %s %s" % (r["tool"], r["test"], r["op"]),
                            "\u00d7" + _bench.format_ratio(r["ratio"]), r["sentence"]] for r in data["ratios"]])))
    if data["group_ratios"]:
        out.append(("h2", "Per group (geometric mean of the hosts' ratios)"))
        out.append(("table", (["group", "RAM backend", "test", "hosts", "ratio"],
                              [[r["group"], r["ram_backend"], "%s %s %s" % (r["tool"], r["test"], r["op"]), r["hosts"],
                                "\u00d7" + _bench.format_ratio(r["ratio_geomean"])] for r in data["group_ratios"]])))
    for name, caption in (("throughput_write.png", "Sequential write throughput per host"),
                          ("throughput_read.png", "Sequential read throughput per host"),
                          ("throughput_groups.png", "Sequential throughput per group"),
                          ("iops.png", "Random 4 KiB read IOPS"),
                          ("latency_p99.png", "p99 fdatasync latency"),
                          ("memcopy_fraction.png", "RAM storage as a fraction of memory copy bandwidth")):
        if name in charts:
            out.append(("img", (name, caption)))
    out.append(("h2", "Memory ceiling"))
    out.append(("p", "One-thread memory copy bandwidth of each host, and RAM storage's sequential fio throughput as a "
                     "fraction of it: how close the file system path gets to what the memory can do."))
    ceiling = []
    for r in data["records"]:
        if r.get("memcopy_fraction"):
            ceiling.append([r["host"], r["label"], r["test"], _bench.human_metric("bw_bytes", r["bw_bytes"]),
                            _bench.human_metric("bw_bytes", r["memcopy_bw_bytes"]), "%.0f%%" % (100 * r["memcopy_fraction"])])
    out.append(("table", (["host", "target", "test", "throughput", "memcpy", "fraction"], ceiling)))
    out.append(("h2", "Figures"))
    figures = []
    for r in data["records"]:
        figures.append([r["host"], r["label"], r["tool"], r["test"], r["op"], _bench.human_metric("bw_bytes", r["bw_bytes"]),
                        _bench.human_metric("iops", r["iops"]), _bench.human_metric("clat_ns_p99", r["clat_ns_p99"])])
    out.append(("table", (["host", "target", "tool", "test", "op", "bw_bytes", "iops", "clat_ns p99"], figures)))
    out.append(("h2", "Hosts and targets"))
    hosts = []
    for host in data["hosts"]:
        ctx = data["context"][host]
        hosts.append([host, ctx["groups"], ctx["kernel"], ctx["cpu_model"], ctx["cores"],
                      _bench.human_bytes(ctx["mem_total_bytes"]), _bench.human_metric("bw_bytes", ctx["memcopy_bw_bytes"]),
                      ctx["fio_version"]])
    out.append(("table", (["host", "groups", "kernel", "CPU", "cores", "MemTotal", "memcpy", "fio"], hosts)))
    targets = []
    for host in data["hosts"]:
        for target in data["targets"][host]:
            targets.append([host, target["label"], target["path"], target["backend"], target["mount_options"],
                            _bench.human_bytes(target["file_size_bytes"]), target["direct"],
                            target["zram_algorithm"] or "-", target["zram_mm_stat_after"] or "-"])
    out.append(("table", (["host", "target", "path", "backend", "mount options", "file size", "direct", "zram algorithm",
                           "zram mm_stat after"], targets)))
    out.append(("p", "RAM targets never use O_DIRECT (tmpfs and ramfs have no device to bypass to); disk targets use it "
                     "for fio's sequential and random jobs when the file system allows, so disk figures come from the "
                     "device, not the page cache. The fdatasync job is buffered everywhere, as databases write. dd and "
                     "fio write random data (never /dev/zero), so zram stores real pages."))
    if data["problems"]:
        out.append(("h2", "Problems"))
        out.append(("p", "; ".join(data["problems"])))
    return out


def render_markdown(sections):
    lines = []
    for kind, payload in sections:
        if kind == "h1":
            lines += ["# " + payload, ""]
        elif kind == "h2":
            lines += ["## " + payload, ""]
        elif kind == "p":
            lines += [payload, ""]
        elif kind == "table":
            lines += _table(*payload) + [""]
        elif kind == "img":
            lines += ["![%s](%s)" % (payload[1], payload[0]), ""]
    return "\n".join(lines)


def _escape(text):
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def render_html(sections, title):
    body = []
    for kind, payload in sections:
        if kind in ("h1", "h2"):
            body.append("<%s>%s</%s>" % (kind, _escape(payload), kind))
        elif kind == "p":
            body.append("<p>%s</p>" % _escape(payload))
        elif kind == "table":
            headers, rows = payload
            body.append("<table><thead><tr>%s</tr></thead><tbody>" % "".join("<th>%s</th>" % _escape(h) for h in headers))
            for row in rows:
                body.append("<tr>%s</tr>" % "".join("<td>%s</td>" % _escape(cell) for cell in row))
            body.append("</tbody></table>")
        elif kind == "img":
            body.append('<figure><img src="%s" alt="%s"><figcaption>%s</figcaption></figure>'
                        % (_escape(payload[0]), _escape(payload[1]), _escape(payload[1])))
    style = ("body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em}"
             "table{border-collapse:collapse;margin:1em 0;font-size:90%}"
             "td,th{border:1px solid #bbb;padding:3px 6px;text-align:left}th{background:#eee}"
             "img{max-width:100%}")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s</title><style>%s</style></head>"
            "<body>\n%s\n</body></html>\n" % (_escape(title), style, "\n".join(body)))


def build(path, hosts, groups, title):
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
        host_records, host_problems = _bench.host_records(manifest, read_raw)
        records += host_records
        problems += host_problems
        context[host] = _bench.host_context(manifest)
        context[host]["wall_seconds"] = manifest.get("wall_seconds")
        context[host]["fio_installed"] = manifest.get("fio_installed")
        targets[host] = [_bench.target_context(target) for target in manifest.get("targets") or []]
    host_groups = dict((host, groups.get(host) or ["all"]) for host in hosts)
    ratios = _bench.ratio_rows(records)
    return {
        "schema": 1,
        "title": title,
        "run_id": run_id,
        "profile": profile,
        "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "hosts": sorted(context),
        "context": context,
        "targets": targets,
        "columns": list(_bench.COLUMNS),
        "records": records,
        "ratios": ratios,
        "group_ratios": _bench.group_rows(ratios, host_groups),
        "group_throughput": group_throughput(records, host_groups),
        "problems": problems,
    }


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
        try:
            chart_names = draw_charts(path, data["records"], data["group_throughput"])
        except Exception as exc:  # matplotlib raises many kinds; the message says which chart and why
            module.fail_json(msg="Drawing the charts in %s failed: %s" % (path, exc), exception=traceback.format_exc())
    elif module.params["charts"]:
        chart_names = sorted(name for name in os.listdir(path) if name.endswith(".png"))

    sections = report_sections(data, chart_names)
    outputs = {
        "results.json": (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8"),
        "results.csv": _bench.csv_text(data["records"]).encode("utf-8"),
        "report.md": render_markdown(sections).encode("utf-8"),
        "report.html": render_html(sections, data["title"]).encode("utf-8"),
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
        problems=data["problems"],
    )


if __name__ == "__main__":
    main()
