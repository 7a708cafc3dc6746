#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: bench_settle
short_description: Plan the benchmark's further rounds until every compared figure is steady or at the cap
version_added: 1.1.0
description:
  - The settle step of the P(ramdisk.provision.benchmark#role) role, between its rounds; not meant to be called on
    its own.
  - Reads the figures of the rounds run so far (the C(record) each M(ramdisk.provision.bench_probe) run returned,
    warm-ups left out) and applies the stopping rule to each compared figure of each target - at least 5 runs, then
    more until the coefficient of variation is at most O(cov_limit), or O(max_runs) runs were made.
  - Returns the items of the next round for every comparison (job and cache mode) where a figure of any of its
    targets needs more runs - every target of that comparison runs it, so RAM and disk keep taking turns. No items
    means every figure is steady or at the cap, which RV(status) says per figure.
  - Never changes the host.
author: ramdisk.provision maintainers (@ramdisk-provision)
options:
  plan:
    description: The C(settle_args) that M(ramdisk.provision.bench_plan) returned, as it came.
    type: dict
    required: true
  records:
    description: The C(record) of every M(ramdisk.provision.bench_probe) run so far, warm-ups included.
    type: list
    elements: dict
    required: true
  max_runs:
    description: The most runs a figure gets (the cap), from 5 to 30.
    type: int
    default: 15
  cov_limit:
    description: The coefficient of variation (standard deviation over mean) at or below which a figure is steady.
    type: float
    default: 0.035
extends_documentation_fragment:
  - ramdisk.provision._attributes
  - ramdisk.provision._attributes.check_mode_full
attributes:
  platform:
    support: full
    platforms: linux
seealso:
  - module: ramdisk.provision.bench_plan
  - module: ramdisk.provision.bench_probe
"""

EXAMPLES = r"""
- name: Plan the next round where figures are not steady yet
  ramdisk.provision.bench_settle:
    plan: "{{ __benchmark_plan.settle_args }}"
    records: "{{ __benchmark_records }}"
    max_runs: 15
    cov_limit: 0.035
  register: __benchmark_settle
"""

RETURN = r"""
probe_items:
  description: The items of the next round(s), in the order they run, as M(ramdisk.provision.bench_plan) returns them.
  returned: always
  type: list
  elements: dict
probe_rounds:
  description: The same items as RV(probe_items), a list per round, each list given whole to
    O(ramdisk.provision.bench_probe#module:items).
  returned: always
  type: list
  elements: list
  sample: [[{probe: randrw, label: ram, round: 6}, {probe: randrw, label: disk, round: 6}]]
status:
  description:
    - The stopping rule per compared figure and target - C(probe), C(tool), C(test), C(mode), C(label), C(op),
      C(metric), C(n) (the figures), C(rounds) (the rounds run), C(cov), C(done), C(more) and C(reason)
      (C(steady); C(cap) when stopped unsteady after O(max_runs) rounds; C(few-figures) when rounds ran but gave no figure, as bonnie++'s tests too
      quick to time; C(needs-runs)).
  returned: always
  type: list
  elements: dict
  sample:
    - {probe: randrw, tool: fio, test: randrw, mode: direct, label: disk, op: read, metric: iops, n: 6, rounds: 6,
       cov: 0.061, done: false, more: 1, reason: needs-runs}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ramdisk.provision.plugins.module_utils import _bench_stats
from ansible_collections.ramdisk.provision.plugins.module_utils import _probes

MAX_RUNS_CEILING = 30


def main():
    module = AnsibleModule(
        argument_spec=dict(
            plan=dict(type="dict", required=True),
            records=dict(type="list", elements="dict", required=True),
            max_runs=dict(type="int", default=_bench_stats.MAX_RUNS),
            cov_limit=dict(type="float", default=_bench_stats.COV_LIMIT),
        ),
        supports_check_mode=True,
    )
    params = module.params
    options = dict(params["plan"])
    host = options.get("host") or "this host"
    if not _bench_stats.MIN_RUNS <= params["max_runs"] <= MAX_RUNS_CEILING:
        module.fail_json(msg="Host %s: max_runs is %d: give from %d to %d (benchmark_max_runs)."
                             % (host, params["max_runs"], _bench_stats.MIN_RUNS, MAX_RUNS_CEILING))
    if not 0 < params["cov_limit"] < 1:
        module.fail_json(msg="Host %s: cov_limit is %s: give a coefficient of variation above 0 and below 1, such as"
                             " 0.035 for 3.5%% (benchmark_cov_limit)." % (host, params["cov_limit"]))
    missing = [key for key in ("targets", "profile") if key not in options]
    if missing:
        module.fail_json(msg="Host %s: plan has no %s. Pass the settle_args bench_plan returned, as they came."
                             % (host, ", ".join(missing)))
    targets, profile = options.pop("targets"), options.pop("profile")
    items, figures = [], []
    for record in params["records"]:
        if not record.get("item"):
            continue
        items.append(record["item"])
        figures.extend((record.get("result") or {}).get("figures") or [])
    try:
        out = _probes.settle(items, figures, targets, profile, max_runs=params["max_runs"],
                             cov_limit=params["cov_limit"], **options)
    except (KeyError, TypeError, ValueError) as exc:
        module.fail_json(msg="Host %s: the records given to bench_settle do not match the plan: %s. Pass the records"
                             " bench_probe returned and the settle_args of the same plan." % (host, exc))
    if out["errors"]:
        module.fail_json(msg="Host %s: the plan given to bench_settle has errors: %s" % (host, " ".join(out["errors"])))
    module.exit_json(changed=False, probe_items=out["items"], probe_rounds=_probes.rounds(out["items"]),
                     status=out["status"])


if __name__ == "__main__":
    main()
