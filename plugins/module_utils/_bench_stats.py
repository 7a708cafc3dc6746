# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The benchmark's decision rule and stopping rule, on plain lists of figures.

RAM against disk is one comparison per job: the ratio of the two samples' typical figures, with a confidence
interval on its logarithm. The interval is exact and distribution-free (the Hodges-Lehmann shift of the log
figures and its Mann-Whitney interval): with the at most 15 runs a side the stopping rule allows, every one of
the 15 x 15 arrangements of the ranks can be counted, so the coverage stated is the true one, not an
approximation (a bootstrap with 5 runs a side covers less than it says). Two samples of one distribution are
called clearly different at most 1 - coverage of the time, whatever the distribution.

A figure is summarized with its run count, coefficient of variation and the order-statistic interval of its
median, each interval with the coverage it really has (below 6 runs that is min-max at 93.8% for 5 runs, 75% for
3, never labelled 95%)."""

from __future__ import annotations

import math

from ansible_collections.ramdisk.provision.plugins.module_utils import _bench

CONFIDENCE = 0.95
MIN_RUNS = 5
MAX_RUNS = 15
COV_LIMIT = 0.035

AHEAD = "ahead"
BEHIND = "behind"
UNCLEAR = "no clear difference"


def _counts(n, m):
    """counts[u]: how many of the C(n + m, n) rank arrangements of n values against m give the Mann-Whitney
    count U = u (pairs where the first sample's value is the lower), for u in 0..n*m."""
    table = {}

    def ways(a, b):
        key = (a, b)
        if key not in table:
            if a == 0 or b == 0:
                table[key] = [1]
            else:
                # The largest of all a + b values is either one of the first sample's (it is below none of the
                # other sample: U unchanged) or one of the second's (every value of the first is below it: U + a).
                first, second = ways(a - 1, b), ways(a, b - 1)
                out = [0] * (a * b + 1)
                for u, count in enumerate(first):
                    out[u] += count
                for u, count in enumerate(second):
                    out[u + a] += count
                table[key] = out
        return table[key]

    return ways(n, m)


def _cut(n, m, confidence):
    """(k, coverage): the largest k such that the k-th lowest to the k-th highest of the n*m pairwise differences
    holds the true shift with at least CONFIDENCE, and that interval's exact coverage. k is 0 when no interval
    of these sizes reaches CONFIDENCE (too few runs): the interval is then unbounded."""
    counts = _counts(n, m)
    total = float(sum(counts))
    k, coverage, below = 0, 1.0, 0
    for candidate in range(1, n * m // 2 + 1):
        below += counts[candidate - 1]
        share = 1.0 - 2.0 * below / total
        if share < confidence:
            break
        k, coverage = candidate, share
    return k, coverage


def _logs(values, what):
    out = []
    for value in values:
        value = float(value)
        if math.isnan(value) or value <= 0 or math.isinf(value):
            raise ValueError("%s holds %r: a ratio needs figures above 0" % (what, value))
        out.append(math.log(value))
    if not out:
        raise ValueError("%s is empty: a comparison needs runs on both sides" % what)
    return out


def log_ratio_interval(first, second, confidence=CONFIDENCE):
    """FIRST over SECOND (lists of positive figures, e.g. RAM and disk IOPS): the ratio of their typical
    figures (exp of the median of all pairwise log differences) and its confidence interval, as ratios.
    ``coverage`` is the interval's true coverage (at least CONFIDENCE, or less with ``bounded`` False when
    the samples are too small for any bounded interval: 3 against 3 runs or fewer)."""
    a, b = _logs(first, "the first sample"), _logs(second, "the second sample")
    diffs = sorted(x - y for x in a for y in b)
    count = len(diffs)
    middle = count // 2
    shift = diffs[middle] if count % 2 else (diffs[middle - 1] + diffs[middle]) / 2.0
    k, coverage = _cut(len(a), len(b), confidence)
    if k == 0:
        low, high = 0.0, float("inf")
    else:
        low, high = math.exp(diffs[k - 1]), math.exp(diffs[count - k])
    return {"ratio": math.exp(shift), "low": low, "high": high, "coverage": coverage, "bounded": k > 0,
            "n_first": len(a), "n_second": len(b)}


def verdict(interval, higher_is_better=True):
    """ahead, behind or no clear difference, for the first sample, from log_ratio_interval()'s INTERVAL: clear
    only when the whole interval lies on one side of 1."""
    if not interval["bounded"]:
        return UNCLEAR
    if interval["low"] > 1.0:
        return AHEAD if higher_is_better else BEHIND
    if interval["high"] < 1.0:
        return BEHIND if higher_is_better else AHEAD
    return UNCLEAR


def compare(first, second, higher_is_better=True, confidence=CONFIDENCE):
    """log_ratio_interval() with its verdict."""
    out = log_ratio_interval(first, second, confidence)
    out["verdict"] = verdict(out, higher_is_better)
    return out


def cov(values):
    """Coefficient of variation: the sample standard deviation over the mean; None below 2 values or at a mean
    of 0."""
    values = [float(value) for value in values]
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    if mean == 0:
        return None
    var = sum((value - mean) ** 2 for value in values) / (len(values) - 1)
    return math.sqrt(var) / abs(mean)


def median_interval(values, confidence=CONFIDENCE):
    """(low, high, coverage): _bench.median_interval() of VALUES and how often such an interval holds the true
    median, exactly (below 6 values, under 95%)."""
    low, high = _bench.median_interval(values, confidence)
    if low is None:
        return None, None, None
    return low, high, _bench.median_rank(len(values), confidence)[1]


def _median(ordered):
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2.0


def summary(values, confidence=CONFIDENCE):
    """One figure as the report carries it: n, median, CoV and the median's interval with its true coverage."""
    ordered = sorted(float(value) for value in values)
    low, high, coverage = median_interval(ordered, confidence)
    return {"n": len(ordered), "median": _median(ordered) if ordered else None, "cov": cov(ordered),
            "low": low, "high": high, "coverage": coverage}


def stop(values, min_runs=MIN_RUNS, max_runs=MAX_RUNS, cov_limit=COV_LIMIT):
    """The stopping rule for one figure's runs so far (the warm-up round left out): at least MIN_RUNS, then more
    until the coefficient of variation is COV_LIMIT or less, or MAX_RUNS were run. ``more`` is how many runs to
    add now (0 when done); ``reason`` is steady, cap (stopped unsteady: the report says so) or needs-runs."""
    n = len(values)
    if min_runs < 2 or max_runs < min_runs:
        raise ValueError("the stopping rule needs 2 <= min_runs <= max_runs, not %r and %r" % (min_runs, max_runs))
    spread = cov(values)
    if n < min_runs:
        return {"done": False, "more": min_runs - n, "reason": "needs-runs", "n": n, "cov": spread}
    if spread is not None and spread <= cov_limit:
        return {"done": True, "more": 0, "reason": "steady", "n": n, "cov": spread}
    if n >= max_runs:
        return {"done": True, "more": 0, "reason": "cap", "n": n, "cov": spread}
    return {"done": False, "more": 1, "reason": "needs-runs", "n": n, "cov": spread}


# --- schema 3: figures and comparisons from the probes' records ---------------------------------------

# A time per operation under this is no storage operation: fdatasync on tmpfs returns in 0.2 us, having nothing to
# write out. A ratio to it is a ratio to a no-op (issue 42: "fdatasync x2358"), so a comparison of a latency figure
# with either side under it gets no ratio and is never counted; the registry judges such a job by its operations per
# second instead (fio fsync: writes and their fdatasync as pairs).
NOOP_NS = 1000.0
NOT_COMPARABLE = "not comparable"


def _figure_key(record):
    return (record["host"], record["label"], record["tool"], record["test"], record["op"], record.get("mode"))


def _stat_metric(record):
    if record.get("judged_metric"):
        return record["judged_metric"]
    for metric in ("bw_bytes", "iops", "clat_ns_mean"):
        if record.get(metric) is not None:
            return metric
    return None


def _measured(run_records):
    """{figure key: [run records]} of the measured runs (warm-ups left out)."""
    out = {}
    for record in run_records:
        if not record.get("warmup"):
            out.setdefault(_figure_key(record), []).append(record)
    return out


def summarize(run_records, confidence=CONFIDENCE):
    """_bench.summarize(), and for each figure of a schema 3 manifest the STAT_COLUMNS of its judged metric (else its
    first of bw_bytes, iops, clat_ns_mean): the coefficient of variation over the measured runs and the interval of the
    median with its true coverage (summary())."""
    records = _bench.summarize(run_records)
    runs = _measured(run_records)
    for record in records:
        if "mode" not in record:
            continue
        metric = _stat_metric(record)
        values = [run[metric] for run in runs.get(_figure_key(record), []) if metric and run.get(metric) is not None]
        one = summary(values, confidence) if values else {}
        record.update(stat_metric=metric, cov=one.get("cov"), ci_low=one.get("low"), ci_high=one.get("high"),
                      ci_coverage=one.get("coverage"))
    return records


def _noop(metric, ram, disk):
    """Why a comparison of METRIC is against a no-op, or ''."""
    if not metric.startswith(("clat_ns", "lat_ns")):
        return ""
    for side, value in (("RAM", ram), ("disk", disk)):
        if value is not None and value < NOOP_NS:
            return ("the %s side takes %.2f \u00b5s per operation, under %.0f \u00b5s: a no-op for storage, so a ratio to"
                    " it means nothing" % (side, value / 1000.0, NOOP_NS / 1000.0))
    return ""


def _mode_title(record):
    title = _bench.figure_title(record["tool"], record["test"], record["op"], record["judged_metric"])
    return title + (", %s" % record["mode"] if record.get("mode") in ("buffered", "direct") else "")


def _verb(record):
    for tool, test, op, _metric, _higher, verb in _bench.RATIO_METRICS + _bench.SEED_METRICS:
        if (tool, test, op) == (record["tool"], record["test"], record["op"]):
            return verb
    return "runs %s" % _mode_title(record)


def coverage_words(coverage, runs=None):
    """'95% (exact 96.9%)', or where too few runs allow no 95% interval '93.8% only (lowest to highest of 5 runs)'."""
    if coverage is None:
        return "-"
    if coverage >= CONFIDENCE - 1e-9:
        return "%g%% (exact %.1f%%)" % (100 * CONFIDENCE, 100 * coverage)
    return "%.1f%% only (%s)" % (100 * coverage, "lowest to highest of %d runs" % runs if runs else "too few runs")


def probe_ratio_rows(records, run_records, confidence=CONFIDENCE):
    """RAM against disk from schema 3 figures: per host, RAM target, disk target, job (probe), mode and judged figure,
    one comparison: compare() of the two sides' measured runs (the exact interval on the log ratio). The rows carry
    _bench.ratio_rows()'s keys (ratio, ratio_low and ratio_high are the ratio and its interval, above 1 better for RAM
    whatever the metric) and: ``verdict`` (ahead, behind, no clear difference, or not comparable), ``coverage`` (the
    interval's true one), ``counted`` (false for a disk row labelled cache and a comparison without a ratio), ``why``,
    ``ram_figure`` and ``disk_figure`` (summary()), ``disk_row_label``, ``disk_device_share``. RECORDS are
    summarize()'s, RUN_RECORDS host_records()'."""
    runs = _measured(run_records)
    order = dict(((tool, test, op), number) for number, (tool, test, op, _m, _h, _v)
                 in enumerate(_bench.RATIO_METRICS + _bench.SEED_METRICS))
    hosts = {}
    for record in records:
        if "mode" in record and record.get("judged_metric"):
            hosts.setdefault(record["host"], []).append(record)
    rows = []
    for host in sorted(hosts):
        index = dict(((r["label"], r["probe"], r["mode"], r["op"]), r) for r in hosts[host])
        rams = sorted(set(r["label"] for r in hosts[host] if r["kind"] == "ram"))
        disks = sorted(set(r["label"] for r in hosts[host] if r["kind"] == "disk"))
        figures = sorted(set((r["probe"], r["mode"], r["op"]) for r in hosts[host]),
                         key=lambda key: (order.get(next((r["tool"], r["test"], r["op"]) for r in hosts[host]
                                                         if (r["probe"], r["mode"], r["op"]) == key), len(order)), key))
        for ram in rams:
            for disk in disks:
                for probe_id, mode, op in figures:
                    a, b = index.get((ram, probe_id, mode, op)), index.get((disk, probe_id, mode, op))
                    if a and b:
                        rows.append(_comparison(a, b, runs, confidence))
    return rows


def _comparison(a, b, runs, confidence):
    metric, higher = a["judged_metric"], a["higher_is_better"]
    ram = [run[metric] for run in runs.get(_figure_key(a), []) if run.get(metric) is not None]
    disk = [run[metric] for run in runs.get(_figure_key(b), []) if run.get(metric) is not None]
    ram_figure, disk_figure = summary(ram, confidence), summary(disk, confidence)
    row = {"host": a["host"], "groups": a.get("groups"), "ram_label": a["label"], "ram_backend": a.get("backend"),
           "disk_label": b["label"], "disk_backend": b.get("backend"), "tool": a["tool"], "test": a["test"],
           "op": a["op"], "probe": a["probe"], "mode": a["mode"], "metric": metric, "title": _mode_title(a),
           "higher_is_better": higher, "ram_value": ram_figure["median"], "disk_value": disk_figure["median"],
           "ram_figure": ram_figure, "disk_figure": disk_figure, "runs": min(len(ram), len(disk)),
           "disk_row_label": b.get("row_label"), "disk_device_share": b.get("device_share"),
           "disk_cache_runs": b.get("cache_runs"), "ratio": None, "ratio_low": None, "ratio_high": None,
           "coverage": None, "bounded": False, "clear": False, "verdict": NOT_COMPARABLE, "why": ""}
    row["why"] = _noop(metric, ram_figure["median"], disk_figure["median"])
    if not row["why"]:
        try:
            found = compare(ram, disk, higher, confidence)
        except ValueError as exc:
            row["why"] = str(exc)
        else:
            ratio, low, high = found["ratio"], found["low"], found["high"]
            if not higher:
                # Latency: disk over RAM, so above 1 is better for RAM here too.
                ratio, low, high = 1.0 / ratio, (1.0 / high if found["bounded"] else 0.0), (
                    1.0 / low if found["bounded"] else float("inf"))
            row.update(ratio=round(ratio, 4), coverage=found["coverage"], bounded=found["bounded"],
                       verdict=found["verdict"], clear=found["verdict"] != UNCLEAR,
                       ratio_low=round(low, 4) if found["bounded"] else None,
                       ratio_high=round(high, 4) if found["bounded"] else None)
    row["counted"] = row["verdict"] != NOT_COMPARABLE and row["disk_row_label"] != "cache"
    if row["counted"] is False and not row["why"]:
        row["why"] = ("under 10%% of what the disk row issued reached the device in %s of its %d runs: a cache was "
                      "measured, not the disk" % (b.get("cache_runs"), len(disk)))
    row["words"] = (_bench.ratio_words(row["ratio"], higher, row["clear"]) if row["ratio"] is not None
                    else "no ratio")
    row["sentence"] = _sentence(a, b, row)
    return row


def _sentence(a, b, row):
    where = "%s (%s) %s" % (a.get("backend") or a["label"], a.get("path"), _verb(a))
    if row["ratio"] is None:
        return "%s: no ratio to disk (%s) on host %s: %s" % (where, b.get("path"), a["host"], row["why"])
    interval = ""
    if row["bounded"]:
        low, high = row["ratio_low"], row["ratio_high"]
        if row["clear"] and row["ratio"] < 1:
            low, high = 1.0 / high, 1.0 / low
        interval = "\u00d7%s-%s, %s" % (
            _bench.format_ratio(low), _bench.format_ratio(high), coverage_words(row["coverage"]))
    spread = "%s; %d and %d runs" % (
        interval or "no bounded interval", row["ram_figure"]["n"], row["disk_figure"]["n"])
    if not row["clear"]:
        text = "%s: no clear difference from disk (%s) on host %s (\u00d7%s; %s)" % (
            where, b.get("path"), a["host"], _bench.format_ratio(row["ratio"]), spread)
    else:
        text = "%s %s than disk (%s) on host %s (%s)" % (where, row["words"], b.get("path"), a["host"], spread)
    if not row["counted"]:
        text += "; not counted: the disk row is labelled cache"
    return text


MIXED = "mixed"


def job_rows(rows):
    """One verdict per job: probe_ratio_rows()' ROWS grouped by host, RAM target, disk target, probe and mode (a job
    judged by several figures, as metadata's create, stat, read and delete, is one job; their timings share a run, so
    one chance event moves them together). Over the job's counted figures: ahead when any is ahead and none behind,
    behind the other way round, mixed when some are each, else no clear difference; a job none of whose figures counts
    keeps its figures' verdict and why, not counted. ``clear`` is any figure clear; ``ratio`` the geometric mean of
    the figures' ratios."""
    jobs, order = {}, []
    for row in rows:
        key = (row["host"], row["ram_label"], row["disk_label"], row["probe"], row["mode"])
        if key not in jobs:
            jobs[key] = []
            order.append(key)
        jobs[key].append(row)
    out = []
    for key in order:
        members = jobs[key]
        counted = [row for row in members if row["counted"]]
        judged = counted or members
        verdicts = set(row["verdict"] for row in judged)
        if AHEAD in verdicts and BEHIND in verdicts:
            verdict = MIXED
        elif AHEAD in verdicts or BEHIND in verdicts:
            verdict = AHEAD if AHEAD in verdicts else BEHIND
        elif verdicts == set([NOT_COMPARABLE]):
            verdict = NOT_COMPARABLE
        else:
            verdict = UNCLEAR
        ratios = [row["ratio"] for row in judged if row["ratio"]]
        title = members[0]["title"] if len(members) == 1 else "%s (%s)" % (
            members[0]["test"].replace("_", " "), ", ".join(row["op"] for row in members))
        out.append({"host": key[0], "ram_label": key[1], "disk_label": key[2], "probe": key[3], "mode": key[4],
                    "ram_backend": members[0]["ram_backend"], "title": title, "figures": len(members),
                    "verdict": verdict, "counted": bool(counted), "clear": any(row["clear"] for row in judged),
                    "ratio": _bench.geometric_mean(ratios) if ratios else None,
                    "why": "; ".join(sorted(set(row["why"] for row in members if row["why"] and not row["counted"]))),
                    "words": members[0]["words"] if len(members) == 1 else (
                        "%s (%s)" % (verdict, ", ".join("%s %s" % (row["op"], row["words"]) for row in members)))})
    return out


def binomial_tail(count, trials, rate):
    """The chance of COUNT or more successes in TRIALS at RATE: how surprising COUNT clear calls are."""
    if count <= 0:
        return 1.0
    total, term = 0.0, (1.0 - rate) ** trials
    for k in range(trials + 1):
        if k >= count:
            total += term
        if k < trials:
            term = term * (trials - k) / (k + 1) * rate / (1.0 - rate) if rate < 1 else 0.0
    return min(total, 1.0)


def _no_raw(name):
    raise IOError("an A/A check reads no raw file (%s)" % name)


def aa_check(manifest, confidence=CONFIDENCE, unit="job"):
    """An A/A run: a schema 3 manifest of one host with two RAM targets, one of them declared ``kind: disk`` in the
    plan (tmpfs against tmpfs). Every comparison there is between two samples of one thing, so at most 1 - CONFIDENCE
    of them (5%) should be called clear. A comparison is a job (job_rows(): one per probe and mode), called clear when
    any of its figures is (ahead, behind or mixed). Returns {comparisons, clear, share, p_value (the chance of that
    many clear calls or more if the rule's false alarms were 5%), rows ([probe, mode, verdict, ratio]),
    problems}. The rule's own false-alarm rate at 5 to 15 runs a side is 4.4% on average (4.99% at worst), so a run
    of 20 comparisons shows 2 or more clear (over 5%) about one time in five by chance: gate on p_value, not on
    share alone."""
    manifest = dict(manifest, host=manifest.get("host") or "aa")
    run_records, problems = _bench.host_records(manifest, _no_raw)
    # UNIT figure counts each judged figure of a job (metadata's four phases, each timed on its own) as a comparison.
    figure_rows = probe_ratio_rows(summarize(run_records, confidence), run_records, confidence)
    rows = [row for row in (figure_rows if unit == "figure" else job_rows(figure_rows))
            if row["verdict"] != NOT_COMPARABLE]
    clear = sum(1 for row in rows if row["clear"])
    return {"comparisons": len(rows), "clear": clear, "share": clear / float(len(rows)) if rows else None,
            "p_value": binomial_tail(clear, len(rows), 1.0 - CONFIDENCE) if rows else None,
            "rows": [{"probe": row["probe"], "mode": row["mode"], "verdict": row["verdict"], "ratio": row["ratio"]}
                     for row in rows],
            "problems": problems}
