# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The decision rule (an exact interval on the log ratio, its verdict) and the stopping rule of the benchmark."""

from __future__ import annotations

import math
import random

import pytest

from ansible_collections.ramdisk.provision.plugins.module_utils import _bench_stats as stats


def test_mann_whitney_counts_are_the_rank_arrangements():
    counts = stats._counts(5, 5)
    assert sum(counts) == math.comb(10, 5)
    assert counts[0] == counts[-1] == 1
    assert counts == counts[::-1]


@pytest.mark.parametrize("n, m, k, coverage", [
    # Known critical values of the Mann-Whitney test, two-sided 5%: U <= 2 for 5 against 5, U <= 55 for 15 against 15.
    (5, 5, 3, 1 - 2 * 4 / 252.0),
    (15, 15, 65, None),
])
def test_the_cut_is_the_largest_with_95_percent(n, m, k, coverage):
    got_k, got_coverage = stats._cut(n, m, 0.95)
    assert got_k == k
    assert got_coverage >= 0.95
    if coverage is not None:
        assert got_coverage == pytest.approx(coverage)
    # One more pair in would fall below 95%.
    counts = stats._counts(n, m)
    assert 1 - 2 * sum(counts[:k + 1]) / float(sum(counts)) < 0.95


def test_three_against_three_cannot_be_bounded_and_is_never_clear():
    result = stats.compare([100, 101, 102], [1, 2, 3])
    assert not result["bounded"]
    assert result["high"] == float("inf")
    assert result["verdict"] == stats.UNCLEAR
    # 4 against 4: the lowest to the highest of the 16 differences, 1 - 2/70 = 97.1%.
    four = stats.compare([100, 101, 102, 103], [1, 2, 3, 4])
    assert four["bounded"] and four["coverage"] == pytest.approx(1 - 2 / 70.0)
    assert (four["low"], four["high"]) == (pytest.approx(25.0), pytest.approx(103.0))


def test_a_clear_difference_is_called_for_the_right_side():
    ram = [1000, 1010, 990, 1005, 995]
    disk = [100, 101, 99, 102, 98]
    result = stats.compare(ram, disk)
    assert result["verdict"] == stats.AHEAD
    assert result["ratio"] == pytest.approx(10.0, rel=0.03)
    assert 1 < result["low"] <= result["ratio"] <= result["high"]
    assert result["coverage"] == pytest.approx(0.9683, abs=1e-4)
    # A latency: lower is better, so the RAM side with the higher latency is behind.
    assert stats.compare(ram, disk, higher_is_better=False)["verdict"] == stats.BEHIND
    assert stats.compare(disk, ram)["verdict"] == stats.BEHIND


def test_overlapping_samples_are_no_clear_difference():
    assert stats.compare([100, 103, 98, 101, 99], [102, 97, 100, 104, 99])["verdict"] == stats.UNCLEAR


def test_a_ratio_needs_positive_figures():
    with pytest.raises(ValueError, match="above 0"):
        stats.compare([1, 2, 0, 3, 4], [1, 2, 3, 4, 5])
    with pytest.raises(ValueError, match="empty"):
        stats.compare([], [1, 2, 3, 4, 5])


def test_the_false_clear_rate_is_exactly_under_5_percent_for_every_run_count():
    """Two samples of one distribution are called clear when the interval misses a ratio of 1, which happens with
    probability 1 - coverage exactly (no ties); the coverage is at least 95% for every size the rule allows."""
    for first in range(4, stats.MAX_RUNS + 1):
        for second in range(4, stats.MAX_RUNS + 1):
            k, coverage = stats._cut(first, second, 0.95)
            assert k >= 1 and 1 - coverage <= 0.05


def test_a_a_two_samples_of_one_distribution_are_called_clear_at_most_5_percent():
    """The A/A property: per run count, 1,000 comparisons of two samples drawn from one skewed distribution
    (log-normal, 10% spread, as the benchmark's figures are), a fixed seed. Each count's exact false rate is
    1 - coverage (3.2% at 5 runs, 4.99% at 8, 4.5% at 15), so one count's 1,000 may land a little above 5% by
    chance (this seed: 25, 62 and 41 of 1,000; 62 is 1.7 standard deviations over 4.99%): each is held to three standard deviations
    over 5%, all 3,000 together to 5%."""
    draw = random.Random(20261128)
    total = 0
    for runs in (5, 8, 15):
        clear = 0
        for _turn in range(1000):
            first = [draw.lognormvariate(math.log(500.0), 0.1) for _run in range(runs)]
            second = [draw.lognormvariate(math.log(500.0), 0.1) for _run in range(runs)]
            if stats.compare(first, second)["verdict"] != stats.UNCLEAR:
                clear += 1
        assert clear <= 50 + 3 * math.sqrt(1000 * 0.05 * 0.95)
        total += clear
    assert total <= 0.05 * 3000


def test_a_real_difference_of_20_percent_is_found_at_15_runs():
    draw = random.Random(7)
    found = 0
    for _turn in range(200):
        first = [draw.lognormvariate(math.log(600.0), 0.1) for _run in range(15)]
        second = [draw.lognormvariate(math.log(500.0), 0.1) for _run in range(15)]
        found += stats.compare(first, second)["verdict"] == stats.AHEAD
    assert found >= 180


def test_cov():
    assert stats.cov([10.0]) is None
    assert stats.cov([10.0, 10.0, 10.0]) == 0.0
    assert stats.cov([9.0, 11.0]) == pytest.approx(math.sqrt(2.0) / 10.0)


@pytest.mark.parametrize("count, rank, coverage", [
    (3, 1, 0.75),           # min-max of 3: 75%, never 95%
    (5, 1, 0.9375),         # min-max of 5: 93.75%
    (6, 1, 0.96875),
    (10, 2, 1 - 2 * 11 / 1024.0),
    (15, 4, None),
])
def test_median_interval_states_its_true_coverage(count, rank, coverage):
    values = list(range(100, 100 + count))
    low, high, got = stats.median_interval(values)
    assert (low, high) == (values[rank - 1], values[count - rank])
    if coverage is not None:
        assert got == pytest.approx(coverage)
    if count >= 6:
        assert got >= 0.95


def test_summary_carries_n_cov_and_interval():
    out = stats.summary([10, 11, 9, 10.5, 9.5])
    assert out["n"] == 5
    assert out["median"] == 10
    assert out["cov"] == pytest.approx(0.0791, abs=1e-4)
    assert (out["low"], out["high"], out["coverage"]) == (9, 11, 0.9375)


def test_stop_wants_at_least_five_runs():
    assert stats.stop([1.0, 1.0]) == {"done": False, "more": 3, "reason": "needs-runs", "n": 2, "cov": 0.0}


def test_stop_when_steady():
    out = stats.stop([100, 101, 99, 100, 100])
    assert out["done"] and out["reason"] == "steady" and out["more"] == 0


def test_stop_adds_one_run_at_a_time_while_unsteady_then_reports_the_cap():
    noisy = [100, 120, 80, 110, 90]
    out = stats.stop(noisy)
    assert (out["done"], out["more"], out["reason"]) == (False, 1, "needs-runs")
    assert out["cov"] > 0.035
    capped = stats.stop(noisy * 3)
    assert (capped["done"], capped["reason"], capped["n"]) == (True, "cap", 15)


def test_stop_at_the_limit_is_steady():
    # A CoV of the limit or less stops; just above it does not.
    values = [97.0, 103.0, 97.0, 103.0, 97.0, 103.0]
    spread = stats.cov(values)
    assert spread == pytest.approx(3.0 * math.sqrt(6.0 / 5.0) / 100.0)
    assert stats.stop(values, cov_limit=spread)["reason"] == "steady"
    assert stats.stop(values, cov_limit=spread * 0.99)["reason"] == "needs-runs"


def test_stop_refuses_a_rule_that_cannot_stop():
    with pytest.raises(ValueError):
        stats.stop([1.0], min_runs=5, max_runs=4)


def test_a_figure_that_is_not_a_number_is_refused():
    with pytest.raises(ValueError, match="above 0"):
        stats.compare([float("nan"), 1, 2, 3, 4], [1, 2, 3, 4, 5])
