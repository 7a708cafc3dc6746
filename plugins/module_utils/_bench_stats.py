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
