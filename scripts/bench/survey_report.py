# SPDX-License-Identifier: GPL-3.0-or-later
"""Time survey_report on a synthetic fleet (default 10,000 hosts in 20 groups): the whole report, charts
included, written into build/bench-survey/. Prints the time beside the target (under 10 s).
Run through `make bench-survey`."""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(REPO_ROOT, "build", "bench-survey")
GIB = 1024 ** 3
TARGET_SECONDS = 10.0


def plan(rng, total):
    """One host as ramdisk_plan returns it, with the fields the survey reads."""
    tmp = int(10 ** rng.uniform(3, 10.8))
    swap = rng.choice((0, 2 * GIB, 8 * GIB))
    return {
        "errors": [], "warnings": [], "tmpfs": [], "ramfs": [], "zram": [], "zram_swap": [], "brd": {},
        "policy": {"entries": [{"path": "/tmp", "backend": "tmpfs"}],
                   "budget": {"limit": "80%", "limit_bytes": int(total * 0.8), "total_bytes": total // 2}},
        "ansible_facts": {"ramdisk": {
            "memory": {"total_bytes": total, "available_bytes": total // 2, "free_bytes": total // 4,
                       "shmem_bytes": 4096, "used_bytes": total // 2, "buff_cache_bytes": total // 4},
            "swap": {"total_bytes": swap, "free_bytes": swap // 2, "devices": []},
            "paths": {"/tmp": {"usage_bytes": tmp, "inodes": rng.randint(1, 100000), "complete": True}},
            "tmp_gate": {"usage_bytes": tmp, "complete": True, "tmp_is_ram_backed": False},
            "support": {"tmpfs": True, "ramfs": True, "zram": True, "brd": False},
            "mounts": [],
        }},
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=10000)
    args = parser.parse_args()
    rng = random.Random(502)
    hosts = ["h%05d" % number for number in range(args.hosts)]
    plans = dict((host, plan(rng, rng.choice((2, 4, 8, 16, 32, 64, 128)) * GIB)) for host in hosts)
    groups = dict((host, ["g%02d" % (number % 20)]) for number, host in enumerate(hosts))
    os.makedirs(OUT, exist_ok=True)
    args_file = os.path.join(OUT, "args.json")
    with open(args_file, "w", encoding="utf-8") as handle:
        # The plans as JSON text, as playbooks/survey.yml passes them.
        json.dump({"ANSIBLE_MODULE_ARGS": {"path": os.path.join(OUT, "run"), "hosts": hosts, "plans": json.dumps(plans),
                                           "groups": groups}}, handle)
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO_ROOT, ".cache", "collections"), MPLBACKEND="Agg")
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "ansible_collections.ramdisk.provision.plugins.modules.survey_report",
                           args_file], capture_output=True, text=True, env=env, check=False)
    seconds = time.monotonic() - started
    result = json.loads(proc.stdout)
    if result.get("failed"):
        raise SystemExit("survey_report failed: %s" % result.get("msg"))
    print("\n".join(result["summary"][:2]))
    print("survey_report, %d synthetic hosts in 20 groups, charts included: %.1f s (target under %.0f s: %s)"
          % (args.hosts, seconds, TARGET_SECONDS, "met" if seconds < TARGET_SECONDS else "not met"))
    print("report: %s" % os.path.relpath(result["report"], REPO_ROOT))


if __name__ == "__main__":
    main()
