#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: survey_report
short_description: Write the fleet survey of /tmp, memory and swap, with the what-if of the policy
version_added: 1.1.0
description:
  - 'Runs on the controller (C(delegate_to: localhost), C(run_once: true)) after C(playbooks/survey.yml) has read
    every host with M(ramdisk.provision.ramdisk_plan).'
  - 'The analysis of the survey of 502 production servers, on your own fleet: per host the survey''s columns (/tmp
    usage as C(du -s) counts it and its inode count, C(free)''s memory and swap columns), and over the fleet and
    each group the survey''s statistics (max, min, mean, median, mode), its bands and its two verdicts: /tmp fits
    in half of RAM; /tmp fits in available memory plus free swap. Hosts that fail the second are the outliers.'
  - A host whose cgroup memory limit is below its RAM (a container started with a memory limit, a slice with
    C(MemoryMax)) is judged on that limit, as M(ramdisk.provision.ramdisk_facts) caps its memory figures; its RAM
    is marked C((cgroup limit)) in the report and C(mem_limited_by) in C(survey.json) names the cgroup.
  - The what-if of the host's policy, as C(site.yml) would apply it, refused (with every reason) or what each mount
    would get. Nothing on any host is changed.
  - Hosts that did not answer are listed, and hosts whose /tmp scan stopped at its time limit are marked (their
    figure is a lower bound); none is dropped silently.
  - Writes C(survey.csv) (one row per host, the survey's columns in bytes), C(survey.json), C(report.md), a
    self-contained C(report.html) and PNG charts into O(path).
author: ramdisk.provision maintainers (@ramdisk-provision)
requirements:
  - matplotlib on the controller (for the charts only; O(charts=false) does without it)
options:
  path:
    description:
      - The run's directory on the controller, C(<survey_results_dir>/<run_id>); made when missing.
    type: path
    required: true
  hosts:
    description:
      - Every host the survey was run on, answered or not.
    type: list
    elements: str
    required: true
  plans:
    description:
      - What M(ramdisk.provision.ramdisk_plan) returned for each host that answered (host name to result), as a
        dict or as its JSON text (C(| to_json)). The text is much faster for thousands of hosts, since Ansible
        checks a dict value by value before the module starts.
    type: raw
    required: true
  groups:
    description:
      - The inventory groups of each host (host name to list of group names), for the per-group figures.
    type: dict
    default: {}
  charts:
    description:
      - Draw the PNG charts with matplotlib.
    type: bool
    default: true
extends_documentation_fragment:
  - ramdisk.provision._attributes
  - ramdisk.provision._attributes.check_mode_full
attributes:
  platform:
    support: full
    platforms: posix
notes:
  - The verdicts use the rule of the /tmp gate of M(ramdisk.provision.ramdisk_facts). Sizes in the bands are as
    C(du -h) and C(free -h) print them (1 MB is 1024 KiB). C(used) is as procps-ng 4 computes it, memory that is
    not available.
seealso:
  - module: ramdisk.provision.ramdisk_plan
  - module: ramdisk.provision.bench_report
"""

EXAMPLES = r"""
- name: Write the survey of the hosts of this play
  ramdisk.provision.survey_report:
    path: "{{ playbook_dir }}/survey-results/{{ run_id }}"
    hosts: "{{ ansible_play_hosts_all }}"
    plans: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, '__survey_plan'))) }}"
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
report:
  description: Path of C(report.html).
  returned: always
  type: str
  sample: /srv/survey/20261124T030000Z/report.html
files:
  description: Every file of the survey under O(path).
  returned: always
  type: list
  elements: str
  sample: [/srv/survey/20261124T030000Z/survey.csv, /srv/survey/20261124T030000Z/report.html]
summary:
  description: The lines the terminal shows, the fleet's verdicts first.
  returned: always
  type: list
  elements: str
  sample:
    - "502 hosts answered, 0 did not; /tmp fits in half of RAM on 485 (96.6%), in available memory plus free swap
      on 498 (99.2%); outliers: h401, h403, h405, h407"
outliers:
  description: The hosts whose /tmp does not fit in available memory plus free swap.
  returned: always
  type: list
  elements: str
  sample: [db7]
unanswered:
  description: The hosts of the survey that returned nothing (unreachable or failed).
  returned: always
  type: list
  elements: str
  sample: []
"""

import datetime
import json
import math
import os

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.ramdisk.provision.plugins.module_utils import _survey
from ansible_collections.ramdisk.provision.plugins.module_utils._report import (
    HAS_MATPLOTLIB, MATPLOTLIB_IMPORT_ERROR, plt, render_html, render_markdown, ticker)
from ansible_collections.ramdisk.provision.plugins.module_utils._size import format_size


def _size(value):
    return "-" if value is None else format_size(int(round(value)))


def _save(figure, path, name):
    figure.tight_layout()
    figure.savefig(os.path.join(path, name), format="png", metadata={"Software": None})
    plt.close(figure)
    return name


def _size_ticks(axis, low, high):
    """Ticks at the binary sizes (1 B, 1 KiB, ... 1 TiB, and 16x steps between) that fall in LOW-HIGH."""
    names = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
    ticks = [16 ** power for power in range(0, 13) if low <= 16 ** power <= high]
    if len(ticks) < 2:
        ticks = [4 ** power for power in range(0, 26) if low <= 4 ** power <= high]
    axis.set_ticks(ticks)
    labels = []
    for tick in ticks:
        power = int(math.log(tick, 1024) + 1e-9)
        labels.append("%d %s" % (tick // 1024 ** power, names[power]))
    axis.set_ticklabels(labels)
    axis.set_minor_formatter(ticker.NullFormatter())


def draw_charts(path, rows):
    """tmp_usage.png, tmp_vs_ram.png and memory_swap.png; their file names."""
    if not rows:
        return []
    written = []
    # /tmp usage spans bytes to terabytes: logarithmic bins, labelled in sizes.
    figure, axes = plt.subplots(figsize=(8.5, 4), dpi=100)
    usage = [max(row["tmp_bytes"], 1) for row in rows]
    # The bins and the axis span the data (a bin of 4x on each side), not bytes to terabytes.
    low = int(math.floor(math.log(min(usage), 4))) - 1
    high = int(math.ceil(math.log(max(usage), 4))) + 1
    edges = [4.0 ** power for power in range(max(low, 0), high + 1)]
    axes.hist(usage, bins=edges, color="#1f77b4", edgecolor="black", linewidth=0.4)
    axes.set_xscale("log")
    axes.set_xlim(edges[0], edges[-1])
    _size_ticks(axes.xaxis, edges[0], edges[-1])
    axes.set_xlabel("/tmp usage (log scale, bins of 4x)")
    axes.set_ylabel("hosts")
    axes.yaxis.set_major_locator(ticker.MaxNLocator(integer=True))
    axes.set_title("/tmp usage across %d hosts" % len(rows))
    axes.grid(axis="y", alpha=0.3)
    written.append(_save(figure, path, "tmp_usage.png"))

    # /tmp against RAM, with the half-of-RAM line: a dot above it is a host whose /tmp would not fit.
    figure, axes = plt.subplots(figsize=(8.5, 5), dpi=100)
    for label, color, keep in (("fits in half of RAM", "#2ca02c", lambda row: row["fits_half_ram"]),
                               ("over half of RAM, fits in available + swap", "#ff7f0e",
                                lambda row: not row["fits_half_ram"] and row["fits_free"]),
                               ("outlier: beyond available + swap", "#d62728", lambda row: not row["fits_free"])):
        chosen = [row for row in rows if keep(row)]
        if chosen:
            axes.scatter([row["mem_total"] / 1024.0 ** 3 for row in chosen],
                         [max(row["tmp_bytes"], 1) for row in chosen],
                         s=18, color=color, edgecolor="black", linewidth=0.3, label="%s (%d)" % (label, len(chosen)))
    # The axes span the hosts' RAM and /tmp and the half-of-RAM line over that RAM, with a margin.
    rams = [row["mem_total"] / 1024.0 ** 3 for row in rows]
    line = [min(rams) / 1.5, max(rams) * 1.5]
    halves = [value / 2 * 1024.0 ** 3 for value in line]
    axes.plot(line, halves, color="black", linewidth=0.8, linestyle="--", label="half of RAM")
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlim(line[0], line[1])
    bottom = min(usage + halves) / 4.0
    top = max(usage + halves) * 4.0
    axes.set_ylim(bottom, top)
    _size_ticks(axes.yaxis, bottom, top)
    axes.set_xlabel("RAM, GiB (log scale)")
    axes.set_ylabel("/tmp usage (log scale)")
    axes.set_title("/tmp usage against RAM")
    axes.grid(alpha=0.3, which="both")
    axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    written.append(_save(figure, path, "tmp_vs_ram.png"))

    # Swap only where some host has it, and swap used only where some host uses it: nothing is drawn for a
    # quantity that is zero on every host.
    swaps = [row["swap_total"] / 1024.0 ** 3 for row in rows]
    used = [row["swap_used"] / 1024.0 ** 3 for row in rows]
    if any(swaps):
        figure, (memory, swap) = plt.subplots(1, 2, figsize=(10, 3.8), dpi=100)
    else:
        figure, memory = plt.subplots(figsize=(6, 3.8), dpi=100)
        swap = None
    totals = [row["mem_total"] / 1024.0 ** 3 for row in rows]
    memory.hist(totals, bins=min(30, max(5, len(set(totals)))), color="#1f77b4", edgecolor="black", linewidth=0.4)
    memory.set_xlabel("RAM, GiB")
    memory.set_ylabel("hosts")
    memory.yaxis.set_major_locator(ticker.MaxNLocator(integer=True))
    memory.set_title("Total memory" if swap is not None else "Total memory (no host has swap)")
    if swap is not None:
        series = [(swaps, "#9467bd", "swap total")] + ([(used, "#d62728", "swap used")] if any(used) else [])
        swap.hist([values for values, _color, _label in series], bins=min(30, max(5, len(set(swaps)))),
                  color=[color for _values, color, _label in series], label=[label for _v, _c, label in series],
                  edgecolor="black", linewidth=0.4)
        swap.set_xlabel("GiB")
        swap.set_title("Swap" if any(used) else "Swap (no host uses any)")
        swap.legend(fontsize="small")
    for axes in (memory, swap):
        if axes is not None:
            axes.grid(axis="y", alpha=0.3)
    written.append(_save(figure, path, "memory_swap.png"))
    return written


def _verdict_text(verdicts):
    return ("/tmp fits in half of RAM on %d of %d hosts (%s%%), in available memory plus free swap on %d (%s%%)"
            % (verdicts["fits_half_ram"], verdicts["hosts"], verdicts["fits_half_ram_share"],
               verdicts["fits_free_memory_and_swap"], verdicts["fits_free_memory_and_swap_share"]))


def _limit_note(row):
    """Where a host's RAM is a cgroup's memory limit, says so (the survey's RAM is what the host can use)."""
    return ", its cgroup's memory limit" if row.get("mem_limited_by") else ""


def _ram(row):
    return _size(row["mem_total"]) + (" (cgroup limit)" if row.get("mem_limited_by") else "")


def summary_lines(data):
    fleet = data["groups"][0][1]
    verdicts = fleet["verdicts"]
    lines = ["%d hosts answered, %d did not%s." % (
        verdicts["hosts"], len(data["unanswered"]), (": " + ", ".join(data["unanswered"])) if data["unanswered"] else "")]
    if verdicts["hosts"]:
        lines.append(_verdict_text(verdicts) + ".")
        lines.append("Outliers (/tmp beyond available memory plus free swap): %s." % (
            ", ".join("%s (%s of /tmp, %s RAM%s)" % (row["host"], _size(row["tmp_bytes"]), _size(row["mem_total"]),
                                                     _limit_note(row))
                      for row in verdicts["outliers"]) or "none"))
    if verdicts.get("with_peak"):
        lines.append("On their peak record (ramdisk_metrics), /tmp at its most since the record began fits in half of "
                     "RAM on %d of %d hosts (%s%%), in available memory plus free swap on %d (%s%%); beyond half of "
                     "RAM at its peak: %s." % (
                         verdicts["peak_fits_half_ram"], verdicts["with_peak"], verdicts["peak_fits_half_ram_share"],
                         verdicts["peak_fits_free_memory_and_swap"], verdicts["peak_fits_free_memory_and_swap_share"],
                         ", ".join(verdicts["peak_outliers"]) or "none"))
    if verdicts["lower_bound"]:
        lines.append("/tmp scan stopped at its time limit on %s: their usage is a lower bound." % ", ".join(
            verdicts["lower_bound"]))
    refused = [row["host"] for row in data["rows"] if row["what_if"]["refused"]]
    lines.append("What-if of the policy: site.yml would be refused on %d host(s)%s." % (
        len(refused), (": " + ", ".join(refused)) if refused else ""))
    return lines


def report_sections(data, charts):
    out = [("h1", "Fleet survey: /tmp, memory and swap"),
           ("p", "Run %s, generated %s. The analysis of the survey of 502 production servers (96.6%% could hold all of "
                 "/tmp in half of their RAM, 99.2%% in free memory plus free swap), on these hosts. Sizes as du -h and "
                 "free -h print them. Every figure per host is in survey.csv and survey.json." % (
                     data["run_id"], data["generated"]))]
    for line in summary_lines(data):
        out.append(("p", line))
    out.append(("h2", "Verdicts per group"))
    out.append(("table", (["group", "hosts", "fits in half of RAM", "fits in available + swap", "outliers",
                           "lower bounds"],
                          [[group, found["verdicts"]["hosts"],
                            "%d (%s%%)" % (found["verdicts"]["fits_half_ram"], found["verdicts"]["fits_half_ram_share"]),
                            "%d (%s%%)" % (found["verdicts"]["fits_free_memory_and_swap"],
                                           found["verdicts"]["fits_free_memory_and_swap_share"]),
                            ", ".join(row["host"] for row in found["verdicts"]["outliers"]) or "-",
                            ", ".join(found["verdicts"]["lower_bound"]) or "-"]
                           for group, found in data["groups"]])))
    for name, caption in (("tmp_usage.png", "/tmp usage across the hosts"),
                          ("tmp_vs_ram.png", "/tmp usage against RAM, with the half-of-RAM line"),
                          ("memory_swap.png", "Memory and swap across the hosts")):
        if name in charts:
            out.append(("img", (name, caption)))
    fleet = data["groups"][0][1]
    out.append(("h2", "Statistics (all hosts)"))
    out.append(("table", (["figure", "max", "min", "mean", "median", "mode"],
                          [[name] + [_size(found[key]) for key in ("max", "min", "mean", "median", "mode")]
                           for name, found in sorted(fleet["statistics"].items())])))
    out.append(("p", "The mode is the size most hosts share; '-' when no two hosts share one."))
    out.append(("h2", "Bands (all hosts)"))
    out.append(("table", (["hosts with", "count", "share"],
                          [[name, count, "%s%%" % share] for name, count, share in fleet["bands"]])))
    out.append(("h2", "Outliers"))
    outliers = fleet["verdicts"]["outliers"]
    out.append(("table", (["host", "/tmp", "RAM", "available", "free swap", "fits in half of RAM"],
                          [[row["host"], _size(row["tmp_bytes"]), _ram(row), _size(row["mem_available"]),
                            _size(row["swap_free"]), "yes" if row["fits_half_ram"] else "no"] for row in outliers])))
    out.append(("h2", "What site.yml would do (nothing was changed)"))
    whatif = []
    for row in data["rows"]:
        found = row["what_if"]
        whatif.append([row["host"], "refused" if found["refused"] else "goes ahead",
                       " ".join(found["errors"]) if found["refused"] else "; ".join(found["lines"]) or "nothing to do",
                       " ".join(found["warnings"]) or "-"])
    out.append(("table", (["host", "verdict", "reasons, or what it would do", "warnings"], whatif)))
    out.append(("h2", "Hosts"))
    out.append(("table", (["host", "groups", "/tmp", "entries", "RAM", "available", "swap", "swap used", "RAM mounts",
                           "policy paths"],
                          [[row["host"], " ".join(row["groups"]),
                            _size(row["tmp_bytes"]) + ("" if row["complete"] else " or more")
                            + ("" if row.get("tmp_peak_bytes") is None else " (peak %s)" % _size(row["tmp_peak_bytes"])),
                            row["tmp_inodes"],
                            _ram(row), _size(row["mem_available"]), _size(row["swap_total"]),
                            _size(row["swap_used"]), ", ".join(row["ram_mounts"]) or "-",
                            ", ".join("%s %s" % (entry["path"], _size(entry["usage_bytes"]))
                                      for entry in row["policy_paths"]) or "-"] for row in data["rows"]])))
    if data["unanswered"]:
        out.append(("h2", "Hosts that did not answer"))
        out.append(("p", "%s: unreachable, or the survey failed there; they are counted nowhere above."
                    % ", ".join(data["unanswered"])))
    return out


def build(hosts, plans, groups, run_id):
    rows = []
    for host in sorted(plans):
        row = _survey.host_row(host, plans[host] or {}, groups.get(host))
        row["verdict"] = _survey.verdict(row, row["tmp_is_ram_backed"])
        row["fits_half_ram"] = row["verdict"]["fits_half_ram"]
        row["fits_free"] = row["verdict"]["fits_free_memory_and_swap"]
        rows.append(row)
    return {
        "schema": 1,
        "run_id": run_id,
        "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "columns": list(_survey.SURVEY_COLUMNS),
        "rows": rows,
        "groups": _survey.by_group(rows),
        "unanswered": sorted(host for host in hosts if host not in plans),
    }


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            hosts=dict(type="list", elements="str", required=True),
            plans=dict(type="raw", required=True),
            groups=dict(type="dict", default={}),
            charts=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    path = module.params["path"]
    if module.params["charts"] and not HAS_MATPLOTLIB:
        module.fail_json(msg=missing_required_lib("matplotlib", reason="to draw the survey charts (or set charts=false)")
                         + " Install it on the controller, in the Python that runs ansible: python3 -m pip install matplotlib.",
                         exception=MATPLOTLIB_IMPORT_ERROR)
    plans = module.params["plans"]
    if isinstance(plans, str):
        try:
            plans = json.loads(plans)
        except ValueError as exc:
            module.fail_json(msg="plans is not JSON text (%s): give what ramdisk_plan returned per host, as a dict or "
                                 "as its JSON text." % exc)
    if not isinstance(plans, dict):
        module.fail_json(msg="plans is a %s: give what ramdisk_plan returned per host, host name to result, as a dict "
                             "or as its JSON text." % type(plans).__name__)
    groups = dict((str(host), [str(name) for name in (names or [])]) for host, names in module.params["groups"].items())
    data = build(module.params["hosts"], plans, groups, os.path.basename(path.rstrip("/")))
    charts = []
    files = ["survey.csv", "survey.json", "report.md", "report.html"]
    if not module.check_mode:
        try:
            os.makedirs(path, exist_ok=True)
            if module.params["charts"]:
                charts = draw_charts(path, data["rows"])
            sections = report_sections(data, charts)
            outputs = {
                "survey.csv": _survey.csv_text(data["rows"]),
                "survey.json": json.dumps(data, indent=2, sort_keys=True, default=str) + "\n",
                "report.md": render_markdown(sections),
                "report.html": render_html(sections, "Fleet survey", path),
            }
            for name, content in outputs.items():
                with open(os.path.join(path, name + ".tmp"), "w", encoding="utf-8") as handle:
                    handle.write(content)
                os.rename(os.path.join(path, name + ".tmp"), os.path.join(path, name))
        except (IOError, OSError) as exc:
            module.fail_json(msg="Could not write the survey into %s: %s. Check that the controller may write there, or "
                                 "set survey_results_dir." % (path, exc))
    fleet = data["groups"][0][1]["verdicts"]
    # A survey is the run's output on the controller, not a change to any host.
    # The plans of a large fleet would come back whole in the result's invocation: say how many instead.
    arguments = dict(module.params, plans="(the plans of %d hosts)" % len(plans))
    module.exit_json(changed=False, invocation={"module_args": arguments}, report=os.path.join(path, "report.html"),
                     files=[os.path.join(path, name) for name in files + charts], summary=summary_lines(data),
                     outliers=[row["host"] for row in fleet["outliers"]], unanswered=data["unanswered"])


if __name__ == "__main__":
    main()
