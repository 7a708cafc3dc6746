# SPDX-License-Identifier: GPL-3.0-or-later
"""Time the tree walker ramdisk_facts uses against `du -sx` plus `find | wc -l`.

Builds trees of 10k, 100k and (unless --quick) 1M small files in a temporary directory
under /var/tmp, removed afterwards. Each figure is the best of 5 warm runs, ours and theirs
interleaved; the median ratio is printed too. Exits non-zero only when our usage or inode
count differs from du's or find's; timings are reported, not judged.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FILES_PER_DIR = 1000
RUNS = 5


def load_tree_module():
    # _tree has no collection imports, so it loads from its file without a collections path.
    path = os.path.join(REPO_ROOT, "plugins", "module_utils", "_tree.py")
    spec = importlib.util.spec_from_file_location("ramdisk_tree", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def grow_tree(root, have, want):
    """Add small files until the tree holds `want` files, FILES_PER_DIR per directory."""
    for number in range(have, want):
        directory = os.path.join(root, "d%04d" % (number // FILES_PER_DIR))
        if number % FILES_PER_DIR == 0:
            os.makedirs(directory, exist_ok=True)
        fd = os.open(os.path.join(directory, "f%04d" % (number % FILES_PER_DIR)), os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, b"x")
        os.close(fd)


def run_ours(tree, root):
    result = tree.tree_usage(root)
    return result["usage_bytes"], result["inodes"]


def run_du_find(root):
    du = subprocess.run(["du", "-sx", "--block-size=1", root], check=True, capture_output=True,
                        env=dict(os.environ, LC_ALL="C"))
    usage = int(du.stdout.split()[0])
    find = subprocess.Popen(["find", root], stdout=subprocess.PIPE)
    lines = 0
    for chunk in iter(lambda: find.stdout.read(1 << 16), b""):
        lines += chunk.count(b"\n")
    find.stdout.close()
    if find.wait() != 0:
        raise RuntimeError("find %s failed" % root)
    return usage, lines


def timed(function, *args):
    started = time.perf_counter()
    result = function(*args)
    return time.perf_counter() - started, result


def compare(tree, root):
    """Best and median seconds of both sides, runs interleaved so that load elsewhere hits both alike."""
    run_ours(tree, root)  # warm the cache so both sides read the same state
    run_du_find(root)
    ours_times, theirs_times = [], []
    ours = theirs = None
    for _run in range(RUNS):
        seconds, ours = timed(run_ours, tree, root)
        ours_times.append(seconds)
        seconds, theirs = timed(run_du_find, root)
        theirs_times.append(seconds)
    return (min(ours_times), statistics.median(ours_times), ours,
            min(theirs_times), statistics.median(theirs_times), theirs)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="stop at 100,000 files")
    parser.add_argument("--max", type=int, default=1000000, help="largest tree (default 1000000)")
    options = parser.parse_args(argv)
    limit = min(options.max, 100000) if options.quick else options.max
    sizes = [size for size in (10000, 100000, 1000000) if size <= limit]

    tree = load_tree_module()
    workdir = tempfile.mkdtemp(prefix="ramdisk-facts-scan-", dir="/var/tmp")
    root = os.path.join(workdir, "tree")
    os.mkdir(root)
    wrong = []
    rows = []
    try:
        have = 0
        for size in sizes:
            grow_tree(root, have, size)
            have = size
            os.sync()  # write the new tree back now, not while the walks are being timed
            ours_s, ours_med, ours, theirs_s, theirs_med, theirs = compare(tree, root)
            if ours != theirs:
                wrong.append("%d files: ours usage=%d inodes=%d, du+find usage=%d inodes=%d"
                             % (size, ours[0], ours[1], theirs[0], theirs[1]))
            rows.append((size, ours_s, theirs_s, ours_med / theirs_med))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    print("best of %d interleaved runs each; ratio = ours / (du -sx + find | wc -l)" % RUNS)
    header = ("files", "ours s", "du+find s", "ratio", "median ratio", "ours x/10x", "du+find x/10x")
    print("%10s %10s %12s %8s %13s %12s %14s" % header)
    previous = None
    for size, ours_s, theirs_s, median_ratio in rows:
        growth_ours = "-" if previous is None else "%.1f" % (ours_s / previous[1])
        growth_theirs = "-" if previous is None else "%.1f" % (theirs_s / previous[2])
        ratio = ours_s / theirs_s
        row = (size, ours_s, theirs_s, ratio, median_ratio, growth_ours, growth_theirs)
        print("%10d %10.3f %12.3f %8.2f %13.2f %12s %14s" % row)
        previous = (size, ours_s, theirs_s)
    print("target: ratio <= 1.00 and growth about 10 per 10x (linear); printed, not asserted")
    if wrong:
        print("WRONG COUNTS:\n  " + "\n  ".join(wrong))
        return 1
    print("counts: usage and inodes equal du -sx and find at every size")
    return 0


if __name__ == "__main__":
    sys.exit(main())
