# SPDX-License-Identifier: GPL-3.0-or-later
"""Run bench_memory for real, as Ansible does: it samples every 0.1 s into a file the report's parser reads, and
ends when the stop file appears, when its directory is gone or after max_seconds; check mode writes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from conftest import run_module_process

import ansible_collections.ramdisk.provision.plugins.modules.bench_memory as module_under_test
from ansible_collections.ramdisk.provision.plugins.module_utils import _bench
from ansible_collections.ramdisk.provision.plugins.module_utils import _bench_env

MODULE_NAME = module_under_test.__name__


def run(tmp_path, **args):
    return run_module_process(MODULE_NAME, tmp_path, args, timeout=60)


def read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def test_samples_until_the_stop_file_appears(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    out, stop = raw / "memory.tsv", tmp_path / "memory.stop"

    # The stop file comes once three samples are out, however long the module took to start on a busy machine.
    def stop_after_three():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if out.exists() and len(out.read_text().splitlines()) >= 4:
                break
            time.sleep(0.05)
        stop.write_text("")

    timer = threading.Thread(target=stop_after_three, daemon=True)
    timer.start()
    result = run(tmp_path, file=str(out), stop=str(stop), interval=0.1, max_seconds=60)
    timer.join()
    assert result.get("failed") is not True, result
    assert result["ended_by"] == "stop" and result["file"] == str(out) and result["changed"] is True
    text = read(str(out))
    assert text.startswith(_bench_env.memory_header())
    samples = _bench.parse_memory_tsv(text)
    # Every line whole: as many samples as lines after the header, about one per 0.1 s for 0.5 s.
    assert len(samples) == result["samples"] == len(text.splitlines()) - 1
    assert result["samples"] >= 3
    assert samples[0]["MemTotal"] > 0 and "pswpout" in samples[0]
    assert all(later["time"] > earlier["time"] for earlier, later in zip(samples, samples[1:]))
    assert _bench.memory_summary(samples)["samples"] == result["samples"]
    assert os.stat(str(out)).st_mode & 0o777 == 0o600
    assert result["msg"] == "%d samples of memory and swap in %s; ended by the stop file." % (result["samples"], out)


def test_ends_after_max_seconds_and_when_its_directory_is_gone(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    started = time.monotonic()
    result = run(tmp_path, file=str(raw / "memory.tsv"), stop=str(tmp_path / "never"), interval=0.1, max_seconds=0.3)
    assert result.get("failed") is not True, result
    assert result["ended_by"] == "max_seconds" and result["samples"] >= 1
    assert time.monotonic() - started < 20
    # The run's clean-up removes the raw directory: the sampler ends by itself (a long interval is no delay).
    args = tmp_path / "args.json"
    args.write_text('{"ANSIBLE_MODULE_ARGS": {"file": "%s", "stop": "%s", "interval": 5, "max_seconds": 60}}'
                    % (raw / "memory.tsv", tmp_path / "never"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, "-m", MODULE_NAME, str(args)], stdout=subprocess.PIPE, text=True, env=env)
    time.sleep(0.5)
    os.unlink(str(raw / "memory.tsv"))
    os.rmdir(str(raw))
    out, _err = proc.communicate(timeout=20)
    assert '"ended_by": "directory gone"' in out


def test_a_link_in_the_files_place_is_refused(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("keep")
    os.symlink(str(target), str(tmp_path / "memory.tsv"))
    result = run(tmp_path, host="testhost", file=str(tmp_path / "memory.tsv"), stop=str(tmp_path / "stop"),
                 interval=0.1, max_seconds=1)
    assert result["failed"] is True
    assert result["msg"].startswith("Host testhost: the memory sampler could not write %s" % (tmp_path / "memory.tsv"))
    assert read(str(target)) == "keep"


def test_check_mode_samples_nothing_and_says_so(tmp_path):
    out = tmp_path / "memory.tsv"
    result = run(tmp_path, file=str(out), stop=str(tmp_path / "stop"), _ansible_check_mode=True)
    assert result.get("failed") is not True, result
    assert result["samples"] == 0 and result["ended_by"] == "check mode"
    assert result["msg"] == "Check mode: no memory samples taken and %s not written." % out
    assert not out.exists()


def test_an_interval_of_0_is_refused(tmp_path):
    result = run(tmp_path, host="testhost", file=str(tmp_path / "m.tsv"), stop=str(tmp_path / "stop"), interval=0)
    assert result["failed"] is True
    assert result["msg"].startswith("Host testhost: the memory sampler's interval is 0.0; it must be above 0.")
