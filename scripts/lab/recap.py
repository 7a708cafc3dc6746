# SPDX-License-Identifier: GPL-3.0-or-later
"""The end of `make demo`: at most 25 lines saying what happened.

- per lab host: what `site.yml` changed there (its PLAY RECAP in build/demo/site.log) and the RAM mounts it holds
  now (build/demo/hosts/<host>.json, written by scripts/lab/recap.yml: path, backend, size), the system's own
  (/dev, /run, ...) left out;
- the benchmark's headline per host (the newest playbooks/benchmark-results/<run>/results.json): the tests where RAM
  was clearly faster, with the ratio and the runs' range, and how many showed no clear difference;
- the survey's verdict per host and the paths of both reports.

Usage: scripts/lab/recap.py --logs build/demo [--seconds N] [--reports playbooks]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SYSTEM = ("/dev", "/dev/shm", "/run", "/run/lock", "/sys", "/proc")
MAX_LINES = 25


def human(size):
    if size is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return ("%d %s" % (size, unit)) if unit == "B" else ("%.1f %s" % (size, unit)).replace(".0 ", " ")
        size /= 1024.0
    return "?"


def newest(root, pattern):
    found = sorted(glob.glob(os.path.join(root, pattern)))
    return found[-1] if found else None


def recap_counts(log):
    """{host: changed} from the last PLAY RECAP of a playbook's log."""
    out = {}
    try:
        text = open(log, encoding="utf-8", errors="replace").read()
    except OSError:
        return out
    text = text[text.rfind("PLAY RECAP"):]
    for host, changed, failed in re.findall(r"^(\S+)\s+:\s+ok=\d+\s+changed=(\d+)\s+unreachable=\d+\s+failed=(\d+)",
                                            text, re.M):
        out[host] = (int(changed), int(failed))
    return out


def host_mounts(path):
    try:
        with open(path, encoding="utf-8") as handle:
            facts = json.load(handle)
    except (OSError, ValueError):
        return None
    mounts = []
    for mount in facts.get("mounts") or []:
        where = mount.get("path") or ""
        if where in SYSTEM or where.startswith(("/run/", "/sys/", "/proc/", "/dev/")):
            continue
        size = mount.get("declared_size_bytes") if mount.get("fstype") == "ramfs" else mount.get("size_bytes")
        mounts.append("%s %s %s" % (where, mount.get("kind") or mount.get("fstype"), human(size) if size else "no limit"))
    return sorted(set(mounts))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--logs", default="build/demo")
    parser.add_argument("--seconds", type=int)
    parser.add_argument("--reports", default=os.path.join(REPO, "playbooks"),
                        help="where benchmark-results/ and survey-results/ are (playbooks/)")
    args = parser.parse_args(argv)
    logs = os.path.join(REPO, args.logs) if not os.path.isabs(args.logs) else args.logs
    took = " (%d min %d s)" % divmod(args.seconds, 60) if args.seconds else ""
    lines = ["", "== make demo: what happened%s ==" % took]
    site = recap_counts(os.path.join(logs, "site.log"))
    hosts = sorted(set(site) | set(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(logs, "hosts", "*.json"))))
    lines.append("RAM mounts per host now (site.yml: tasks that changed something):")
    for host in hosts:
        changed, failed = site.get(host, (None, None))
        state = ("FAILED" if failed else "changed %d" % changed if changed else "no change") if changed is not None \
            else "not in site.yml's recap"
        mounts = host_mounts(os.path.join(logs, "hosts", host + ".json"))
        lines.append("  %-10s %-10s %s" % (host, state, "; ".join(mounts) if mounts else
                                           "(could not read)" if mounts is None else "no RAM mount"))
    results = newest(args.reports, "benchmark-results/*/results.json")
    bench_lines = []
    if results:
        with open(results, encoding="utf-8") as handle:
            bench = json.load(handle)
        for host in bench.get("hosts") or []:
            # Only the comparisons the report counts (a disk row that measured a cache, or a figure too small to
            # divide by, is shown there but not counted); RAM behind the disk is not "ahead".
            ratios = [r for r in bench.get("ratios") or [] if r.get("host") == host and r.get("counted", True)]
            ahead = sorted((r for r in ratios if r.get("clear") and r.get("verdict", "ahead") == "ahead"),
                           key=lambda r: -(r.get("ratio") or 0))
            behind = [r for r in ratios if r.get("clear") and r.get("verdict") == "behind"]
            bench_lines.append("  %s: RAM clearly ahead of disk in %d of %d comparisons, behind in %d, no clear"
                               " difference in %d" % (host, len(ahead), len(ratios), len(behind),
                                                      len(ratios) - len(ahead) - len(behind)))
            for ratio in ahead[:4]:
                bench_lines.append("    %s %-50s %s (×%s-%s)" % (
                    ratio["ram_backend"], ratio["title"][:50], ratio["words"], _num(ratio["ratio_low"]),
                    _num(ratio["ratio_high"])))
            if len(ahead) > 4:
                bench_lines.append("    ... %d more in the report" % (len(ahead) - 4))
    lines.append("Benchmark (RAM against disk, each ratio with its 95% interval; one that reaches past x1 is no clear"
                 " difference):")
    lines.extend(bench_lines or ["  no results under %s/benchmark-results" % args.reports])
    survey = newest(args.reports, "survey-results/*/survey.json")
    if survey:
        with open(survey, encoding="utf-8") as handle:
            rows = json.load(handle).get("rows") or []
        fits = [row["host"] for row in rows if row.get("fits_half_ram") and row.get("fits_free")]
        lines.append("Survey: /tmp fits in half of RAM and in free memory + swap on %d of %d hosts%s"
                     % (len(fits), len(rows), "" if len(fits) == len(rows) else
                        " (not on %s)" % ", ".join(sorted(set(row["host"] for row in rows) - set(fits)))))
    lines.append("Reports:")
    lines.append("  survey:    %s" % (os.path.join(os.path.dirname(survey), "report.html") if survey else "none"))
    lines.append("  benchmark: %s" % (os.path.join(os.path.dirname(results), "report.html") if results else "none"))
    lines.append("  each playbook's output: %s/*.log" % os.path.relpath(logs, os.getcwd()))
    if len(lines) > MAX_LINES + 1:
        lines = lines[:MAX_LINES] + ["  ... (%d more lines cut; see the reports)" % (len(lines) - MAX_LINES)]
    print("\n".join(lines))
    return 1 if any(failed for _changed, failed in site.values()) else 0


def _num(value):
    if value is None:
        return "?"
    return ("%.0f" % value) if value >= 100 else ("%.1f" % value) if value >= 1 else ("%.2f" % value)


if __name__ == "__main__":
    sys.exit(main())
