#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: bench_memory
short_description: Sample the host's memory and swap through the RAM-versus-disk benchmark, until told to stop
version_added: 1.1.0
description:
  - Every O(interval) seconds, appends one line to O(file) - the time, C(/proc/meminfo)'s MemTotal, MemAvailable,
    MemFree, Shmem, Active, Inactive, SwapTotal and SwapFree in bytes, and C(/proc/vmstat)'s pswpin and pswpout -
    tab-separated under a header line, the raw file the benchmark report reads the run's memory from.
  - Ends when the file O(stop) appears, when the directory of O(file) is gone (the run's clean-up) or after
    O(max_seconds), so it never outlives the run. Meant to run beside the tests, with C(async) and a C(poll) of 0.
  - Each line is written whole with one C(write(2)) and the file is synced at the end; a sampler killed before it
    ended leaves every line written so far, and at worst a last line cut short, which the report leaves out. The file
    is made anew (mode 0600, a link in its place refused) in a directory opened once.
  - In check mode it samples nothing and writes nothing, and says so.
  - Written as a module because no tool on a plain host samples these two files together with a wall clock and
    stops by itself (vmstat prints neither Shmem nor MemAvailable).
author: ramdisk.provision maintainers (@ramdisk-provision)
options:
  host:
    description: The name errors give the host (the inventory name); the host's own name when not given.
    type: str
  file:
    description: The file the samples go to, in the run's raw directory; made anew.
    type: path
    required: true
  stop:
    description: The file whose appearance ends the sampling (the role touches it once the tests are done).
    type: path
    required: true
  interval:
    description: Seconds between two samples, above 0.
    type: float
    default: 1.0
  max_seconds:
    description: The most seconds the sampler runs; keep it below the task's C(async) time.
    type: float
    default: 14400
extends_documentation_fragment:
  - ramdisk.provision._attributes
  - ramdisk.provision._attributes.check_mode_full
attributes:
  platform:
    support: full
    platforms: linux
seealso:
  - module: ramdisk.provision.bench_env
"""

EXAMPLES = r"""
- name: Sample memory and swap through the tests
  ramdisk.provision.bench_memory:
    file: /var/tmp/ramdisk-bench/raw/memory.tsv
    stop: /var/tmp/ramdisk-bench/memory.stop
    interval: 1
    max_seconds: 14400
  async: 14460
  poll: 0
  register: __benchmark_memory_job

# ... the tests ...

- name: Stop the memory sampler
  ansible.builtin.file:
    path: /var/tmp/ramdisk-bench/memory.stop
    state: touch
    mode: "0600"

- name: Wait for the memory sampler to end
  ansible.builtin.async_status:
    jid: "{{ __benchmark_memory_job.ansible_job_id }}"
  register: __benchmark_memory_end
  until: __benchmark_memory_end.finished
  retries: 20
  delay: 1
"""

RETURN = r"""
file:
  description: The file the samples went to.
  returned: always
  type: str
  sample: /var/tmp/ramdisk-bench/raw/memory.tsv
samples:
  description: The samples written (lines after the header); 0 in check mode.
  returned: always
  type: int
  sample: 412
seconds:
  description: Seconds from the first sample to the end.
  returned: always
  type: float
  sample: 411.8
ended_by:
  description: Why the sampling ended - C(stop) (the stop file appeared), C(directory gone), C(max_seconds), or
    C(check mode).
  returned: always
  type: str
  sample: stop
msg:
  description: What was done, in one sentence.
  returned: always
  type: str
  sample: 412 samples of memory and swap in /var/tmp/ramdisk-bench/raw/memory.tsv; ended by the stop file.
"""

import os
import platform
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ramdisk.provision.plugins.module_utils import _bench_env

# The longest the sampler sleeps at once, so a long interval still ends soon after the stop file appears.
SLICE = 0.25


def _write_all(fd, text):
    data = text.encode("utf-8")
    while data:
        data = data[os.write(fd, data):]


def _ended(stop, directory, deadline):
    if os.path.lexists(stop):
        return "stop"
    if not os.path.isdir(directory):
        return "directory gone"
    if time.monotonic() >= deadline:
        return "max_seconds"
    return None


def sample(path, stop, interval, max_seconds, proc_root="/proc"):
    """Write samples to PATH until STOP appears, PATH's directory is gone or MAX_SECONDS passed; returns
    {samples, seconds, ended_by}. Raises OSError where the file cannot be made or written."""
    directory = os.path.dirname(path) or "."
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fd = os.open(os.path.basename(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    samples = 0
    started = time.monotonic()
    deadline = started + max_seconds
    try:
        _write_all(fd, _bench_env.memory_header())
        ended = _ended(stop, directory, deadline)
        while ended is None:
            with open(os.path.join(proc_root, "meminfo"), encoding="utf-8") as meminfo:
                mem = meminfo.read()
            with open(os.path.join(proc_root, "vmstat"), encoding="utf-8") as vmstat:
                vm = vmstat.read()
            _write_all(fd, _bench_env.memory_row(mem, vm, time.time()))
            samples += 1
            due = time.monotonic() + interval
            ended = _ended(stop, directory, deadline)
            while ended is None and time.monotonic() < due:
                time.sleep(min(SLICE, max(0.0, due - time.monotonic())))
                ended = _ended(stop, directory, deadline)
        try:
            os.fsync(fd)
        except OSError:
            pass
    finally:
        os.close(fd)
    return {"samples": samples, "seconds": round(time.monotonic() - started, 3), "ended_by": ended}


ENDINGS = {"stop": "ended by the stop file", "directory gone": "ended because its directory is gone",
           "max_seconds": "ended after max_seconds"}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            host=dict(type="str"),
            file=dict(type="path", required=True),
            stop=dict(type="path", required=True),
            interval=dict(type="float", default=1.0),
            max_seconds=dict(type="float", default=14400.0),
        ),
        supports_check_mode=True,
    )
    params = module.params
    host = params["host"] or platform.node()
    for name in ("interval", "max_seconds"):
        if not params[name] > 0:
            module.fail_json(msg="Host %s: the memory sampler's %s is %s; it must be above 0. Give"
                                 " benchmark_memory_interval above 0, or 0 to run no sampler (the role then starts"
                                 " none)." % (host, name, params[name]))
    if module.check_mode:
        module.exit_json(changed=True, file=params["file"], samples=0, seconds=0.0, ended_by="check mode",
                         msg="Check mode: no memory samples taken and %s not written." % params["file"])
    try:
        result = sample(params["file"], params["stop"], params["interval"], params["max_seconds"])
    except OSError as exc:
        module.fail_json(msg="Host %s: the memory sampler could not write %s or read /proc/meminfo and /proc/vmstat: %s."
                             " Make the run's raw directory first (owned by root); a link in the file's place is"
                             " refused." % (host, params["file"], exc),
                         file=params["file"])
    module.exit_json(changed=True, file=params["file"],
                     msg="%d samples of memory and swap in %s; %s." % (result["samples"], params["file"],
                                                                       ENDINGS[result["ended_by"]]), **result)


if __name__ == "__main__":
    main()
