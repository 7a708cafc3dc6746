# SPDX-License-Identifier: GPL-3.0-or-later
"""scripts/bench/backends_summary.py on a schema 3 run: a test the backends ran in two modes is two rows."""

from __future__ import annotations

import json

import pytest

from conftest import load_script


@pytest.fixture(scope="module")
def backends_summary():
    return load_script("scripts/bench/backends_summary.py", "bench_backends_summary")


def record(label, test, op, mode, bw_bytes=None, iops=None, tool="fio"):
    return {"host": "h", "label": label, "tool": tool, "test": test, "op": op, "mode": mode, "bw_bytes": bw_bytes,
            "iops": iops}


def test_each_mode_is_a_row_and_each_ratio_is_to_the_disk_in_that_mode(backends_summary, tmp_path):
    # ramfs takes no O_DIRECT: every target reads buffered, tmpfs and the disk O_DIRECT too. The direct disk row is
    # the device (100 MiB/s), the buffered one a cache (1000 MiB/s); small_files is a fio probe now.
    mib = 1048576
    records = [record("tmpfs", "seq_read", "read", "buffered", 4000 * mib), record("ramfs", "seq_read", "read", "buffered", 5000 * mib),
               record("disk", "seq_read", "read", "buffered", 1000 * mib),
               record("tmpfs", "seq_read", "read", "direct", 3000 * mib), record("disk", "seq_read", "read", "direct", 100 * mib),
               record("tmpfs", "small_files", "write", "sync", iops=20000.0), record("disk", "small_files", "write", "sync", iops=500.0)]
    (tmp_path / "results.json").write_text(json.dumps({
        "records": records, "run_id": "20261129T010000Z", "profile": "quick",
        "context": {"h": {"kernel": "6.18", "cores": 2, "mem_total_bytes": 4 * 1024 ** 3, "memcopy_bw_bytes": 1e10,
                          "fio_version": "fio-3.33"}}}))
    text, _machine, rows = backends_summary.summarize(str(tmp_path))
    assert "| test | unit | tmpfs | ramfs | disk |" in text
    assert ("| fio sequential read, 1 MiB blocks, one job per core, buffered | MiB/s | 4,000 (×4) | 5,000 (×5) | 1,000 |"
            in text)
    assert "| fio sequential read, 1 MiB blocks, one job per core, O_DIRECT | MiB/s | 3,000 (×30) |  | 100 |" in text
    assert "| 1 KiB files, each written with O_DSYNC | files/s | 20,000 (×40) |  | 500 |" in text
    assert [(row["label"], row["test"], row["mode"]) for row in rows][:3] == [
        ("tmpfs", "seq_read", "buffered"), ("tmpfs", "seq_read", "direct"), ("tmpfs", "small_files", "sync")]
