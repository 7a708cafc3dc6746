# SPDX-License-Identifier: GPL-3.0-or-later
"""The cost of one run of the metrics collector (plugins/module_utils/_metrics.py) on a host with 10 RAM mounts
and 2 zram devices, as the timer runs it: `python3 _metrics.py collect`, a new process each time.

Runs as root in a private mount namespace (it re-runs itself under `unshare --mount --propagation private`), so
the 10 tmpfs mounts are seen by nobody else; the 2 zram devices are the kernel's, made with hot_add and removed
again at the end, whatever happens. Each mount is timed twice: empty, then holding 20,000 files: the run must
cost the same, since the collector takes usage from statvfs and never walks a mounted tree. Prints the median and
the slowest of 20 runs of each; exits non-zero when a median is at or over 0.2 s or the full mounts cost clearly
more (over 1.5x and 20 ms more) than the empty ones.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODULE_UTILS = os.path.join(REPO_ROOT, "plugins", "module_utils")
MOUNTS = 10
ZRAM = 2
FILES = 2000  # per mount: 20,000 in all
RUNS = 20
LIMIT = 0.2


def run_collector(lib, config):
    started = time.monotonic()
    subprocess.run([sys.executable, os.path.join(lib, "_metrics.py"), "collect", "--config", config], check=True)
    return time.monotonic() - started


def timings(lib, config):
    run_collector(lib, config)  # warm the page cache once
    return [run_collector(lib, config) for _run in range(RUNS)]


def zram_add(size):
    with open("/sys/class/zram-control/hot_add") as handle:
        number = int(handle.read().strip())
    with open("/sys/block/zram%d/disksize" % number, "w") as handle:
        handle.write(str(size))
    return "zram%d" % number


def zram_remove(device):
    with open("/sys/block/%s/reset" % device, "w") as handle:
        handle.write("1")
    with open("/sys/class/zram-control/hot_remove", "w") as handle:
        handle.write(device[len("zram"):])


def main():
    if os.geteuid() != 0:
        sys.exit("metrics_cost.py mounts tmpfs and makes zram devices: run it as root")
    if os.environ.get("RAMDISK_BENCH_NS") != "1":
        env = dict(os.environ, RAMDISK_BENCH_NS="1")
        sys.exit(subprocess.call(["unshare", "--mount", "--propagation", "private", sys.executable] + sys.argv, env=env))
    work = tempfile.mkdtemp(prefix="ramdisk-metrics-cost-")
    devices = []
    try:
        lib = os.path.join(work, "lib")
        os.mkdir(lib)
        for name in ("_metrics.py", "_procfs.py", "_size.py"):
            shutil.copy(os.path.join(MODULE_UTILS, name), lib)
        zram_conf = os.path.join(work, "zram")
        os.mkdir(zram_conf)
        if os.path.exists("/sys/class/zram-control/hot_add"):
            for index in range(ZRAM):
                device = zram_add(32 * 1024 * 1024)
                devices.append(device)
                with open(os.path.join(zram_conf, "bench%d.conf" % index), "w") as handle:
                    handle.write("DEVICE=%s\nSIZE=%d\n" % (device, 32 * 1024 * 1024))
        else:
            print("no zram on this kernel: timing the mounts only")
        mounts = []
        for index in range(MOUNTS):
            path = os.path.join(work, "m%02d" % index)
            os.mkdir(path)
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64M", "tmpfs", path], check=True)
            mounts.append({"path": path, "backend": "tmpfs", "purpose": "cache"})
        textfile = os.path.join(work, "textfile")
        os.mkdir(textfile)
        config = os.path.join(work, "metrics.json")
        with open(config, "w") as handle:
            json.dump({"textfile_dir": textfile, "state_file": os.path.join(work, "state", "peak.json"),
                       "persist_conf_dir": os.path.join(work, "none"), "persist_status_dir": os.path.join(work, "none"),
                       "zram_conf_dir": zram_conf, "mounts": mounts, "policy_paths": mounts,
                       "budget": {"limit_bytes": 1, "planned_bytes": 1}}, handle)
        empty = timings(lib, config)
        for mount in mounts:
            for number in range(FILES):
                with open(os.path.join(mount["path"], "f%05d" % number), "w") as handle:
                    handle.write("x")
        full = timings(lib, config)
        with open(os.path.join(textfile, "ramdisk.prom")) as handle:
            text = handle.read()
        assert text.count("ramdisk_mount_mounted{") == MOUNTS, "not every mount was reported"
        assert text.count("ramdisk_zram_disksize_bytes{") == len(devices), "not every zram device was reported"
        print("metrics collector, one run (python3 _metrics.py collect; %d RAM mounts, %d zram devices, %d runs each)"
              % (MOUNTS, len(devices), RUNS))
        verdicts = []
        for label, figures in (("mounts empty", empty), ("mounts holding %d files" % (MOUNTS * FILES), full)):
            median = statistics.median(figures)
            ok = median < LIMIT
            verdicts.append(ok)
            print("  %-28s median %.3f s, slowest %.3f s  (target: under %.1f s) %s"
                  % (label, median, max(figures), LIMIT, "ok" if ok else "OVER"))
        slow, fast = statistics.median(full), statistics.median(empty)
        grew = slow > 1.5 * fast and slow - fast > 0.02
        print("  full vs empty: %.2fx (%s)" % (slow / fast, "the collector walks the mounted trees" if grew else "no tree walk"))
        start = statistics.median([_python_start() for _run in range(RUNS)])
        print("  of which Python's own start-up: %.3f s" % start)
        return 0 if all(verdicts) and not grew else 1
    finally:
        for index in range(MOUNTS):
            path = os.path.join(work, "m%02d" % index)
            if os.path.ismount(path):
                subprocess.run(["umount", path], check=True)
        for device in devices:
            zram_remove(device)
        shutil.rmtree(work, ignore_errors=True)


def _python_start():
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.monotonic() - started


if __name__ == "__main__":
    sys.exit(main())
