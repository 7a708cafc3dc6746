# SPDX-License-Identifier: GPL-3.0-or-later
"""What the benchmark role takes from a script that drives it: its argument specs, and the runs its preflight
(roles/benchmark/tasks/main.yml) allows. A script that passes anything else fails on the lab, not here."""

from __future__ import annotations

import os

import yaml

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Refused by the preflight since the stopping rule replaced them (issue 42).
REMOVED = ("benchmark_settle_batches", "benchmark_settle_spread", "benchmark_interleave")


def assert_the_role_takes(variables):
    with open(os.path.join(REPO_ROOT, "roles", "benchmark", "meta", "argument_specs.yml"), encoding="utf-8") as handle:
        options = yaml.safe_load(handle)["argument_specs"]["main"]["options"]
    assert not set(variables) - set(options), sorted(set(variables) - set(options))
    assert not set(variables) & set(REMOVED)
    runs, max_runs = int(variables.get("benchmark_runs", 0)), int(variables.get("benchmark_max_runs", 15))
    assert runs == 0 or 5 <= runs <= max_runs
    assert 5 <= max_runs <= 30
