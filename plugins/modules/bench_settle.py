#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: bench_settle
short_description: Tell which benchmark tests need more rounds before their figures settle
version_added: 1.1.0
description:
  - Used by the P(ramdisk.provision.benchmark#role) role's thorough profile between batches of rounds on one
    target; not meant to be called on its own.
  - Reads the rounds the target has run so far (fio's JSON+ files in O(raw_dir), the dd output, the metadata,
    pgbench and compile results the role recorded) and, for each figure the report compares, the median of
    the rounds and the interval that holds the true median with 95% confidence (the order-statistic interval,
    which needs no assumption about the distribution).
  - A figure is settled when that interval is no wider than O(spread) of the median. More rounds narrow the
    interval; a figure whose rounds scatter widely needs many more rounds to settle.
  - Never changes the host.
author: ramdisk.provision maintainers (@ramdisk-provision)
options:
  target:
    description:
      - The target as the role records it, with its rounds so far.
      - C(label), C(path), C(kind) and C(backend), and any of C(fio) (file names in O(raw_dir)), C(dd) (per
        test, a list of sections of O(dd_text)), C(metadata) (the probe's documents), C(pgbench) and
        C(compile) (lists of runs).
    type: dict
    required: true
  raw_dir:
    description: The directory on the host that holds the run's raw files (fio's JSON+).
    type: path
    required: true
  dd_text:
    description: The dd output the role has kept so far, in which the C(dd) entries name their sections.
    type: str
    default: ""
  spread:
    description:
      - The widest interval around a median, as a share of the median, that counts as settled. C(0.1) is 10%.
    type: float
    required: true
extends_documentation_fragment:
  - ramdisk.provision._attributes
  - ramdisk.provision._attributes.check_mode_full
attributes:
  platform:
    support: full
    platforms: linux
"""

EXAMPLES = r"""
- name: Find the tests whose figures have not settled on the tmpfs target
  ramdisk.provision.bench_settle:
    target: "{{ __benchmark_entry }}"
    raw_dir: /var/tmp/ramdisk-bench/raw
    dd_text: "{{ __benchmark_dd_text | default('') }}"
    spread: 0.1
  register: __settle
"""

RETURN = r"""
unsettled:
  description: The tests (fio, metadata, dd, pgbench, compile) with at least one figure that has not settled.
  returned: always
  type: list
  elements: str
  sample: [fio, dd]
figures:
  description:
    - Each compared figure of the target, with C(tool), C(test), C(op), C(metric), C(runs), C(median), C(low)
      and C(high) (the interval of the median), C(width) (its width as a share of the median; null when the
      median is 0 and the rounds differ) and C(settled).
  returned: always
  type: list
  elements: dict
  sample:
    - {tool: fio, test: randrw, op: read, metric: iops, runs: 7, median: 52100.0, low: 49800.0, high: 61200.0,
       width: 0.2188, settled: false}
problems:
  description: Raw files that could not be read or understood; their figures are left out.
  returned: always
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ramdisk.provision.plugins.module_utils import _bench


def main():
    module = AnsibleModule(
        argument_spec=dict(
            target=dict(type="dict", required=True),
            raw_dir=dict(type="path", required=True),
            dd_text=dict(type="str", default=""),
            spread=dict(type="float", required=True),
        ),
        supports_check_mode=True,
    )
    target = module.params["target"]
    missing = [key for key in ("label", "path", "kind", "backend") if key not in target]
    if missing:
        module.fail_json(msg="target has no %s. Pass the target as the benchmark role records it." % ", ".join(missing))
    if not 0 < module.params["spread"] <= 1:
        module.fail_json(msg="spread is %s: give a share of the median above 0 and at most 1, such as 0.1 for 10%%."
                         % module.params["spread"])
    raw_dir = module.params["raw_dir"]

    def read_raw(name):
        if name == "dd.txt":
            return module.params["dd_text"]
        with open(os.path.join(raw_dir, os.path.basename(name))) as handle:
            return handle.read()

    # Only the tests the thorough profile repeats: the seeds' experiments keep their own counts.
    rounds = dict((key, value) for key, value in target.items() if key not in ("seeds",))
    records, problems = _bench.host_records({"host": "this host", "targets": [rounds]}, read_raw)
    figures = _bench.settle_figures(records, module.params["spread"])
    module.exit_json(changed=False, unsettled=_bench.unsettled_tools(figures), figures=figures, problems=problems)


if __name__ == "__main__":
    main()
