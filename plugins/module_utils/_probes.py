# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The benchmark's tests as a registry of probes, and the plan that turns targets and a profile into the items a
run measures.

Each probe (PROBES) has its command for one target, its cache policy (and why), the parser of its raw output and
the figures it is judged by. plan() returns every item (targets x probes x rounds, round 0 a warm-up that is
measured and discarded) and every error before anything runs. Adding a test is one entry here and its parser.

Like against like: one test runs with the same job options on every target of the run, the file size the
smallest any target allows, and the same O_DIRECT choice. Where a test bypasses the page cache on the disk
(O_DIRECT) and a RAM target cannot open files O_DIRECT (ramfs; tmpfs before Linux 6.6), every target runs the test
buffered (the ``buffered`` pair, on the disk partly a page cache figure, so its device counters decide the label)
and the targets that can run it O_DIRECT run it once more (``direct``: on the disk the figure that reached the
device, shown beside the pair, not compared with a buffered RAM figure)."""

from __future__ import annotations

import json
import re

from ansible_collections.ramdisk.provision.plugins.module_utils import _bench
from ansible_collections.ramdisk.provision.plugins.module_utils import _bench_stats

MIB = 1024 * 1024

# Cache policies: how a probe keeps (or does not keep) a cache out of its figure.
DIRECT = "direct"       # O_DIRECT: the page cache is bypassed; on RAM where the file system allows it
BUFFERED = "buffered"   # the like-against-like pair where a RAM target refuses O_DIRECT
SYNC = "sync"           # buffered writes forced to the device by fdatasync or O_DSYNC before the clock stops
CACHED = "cached"       # measures the cached path on purpose; the device counters say what still reached the disk

POLICY_WHY = {
    DIRECT: "O_DIRECT bypasses the page cache, so a disk figure is the device's; where a RAM file system refuses "
            "O_DIRECT the test also runs buffered on every target, labelled",
    BUFFERED: "buffered on every target, because a RAM target refuses O_DIRECT; a read has the file's cached pages "
              "dropped first (fio invalidate=1, dd iflag=nocache); on the disk the row may still be partly a cache "
              "figure, which its device counters decide",
    SYNC: "buffered writes, but each is (or the run ends) forced to stable storage by fdatasync or O_DSYNC, and "
          "the clock includes it",
    CACHED: "the kernel serves metadata (dentries, inodes) and small files from memory on every file system; the "
            "row measures that path and the journal, and the device counters label it cache when little reached "
            "the disk",
}

PUBLISHED = "published"  # a seed write-up's own command, caches as it had them

POLICY_WHY[PUBLISHED] = ("the write-up's own command, as it ran it, to compare with its published figures; caches "
                         "are as it had them, and the device counters label each disk row")

# What an item's raw file holds (its "output"): the command writes it itself (fio's --output, to a temporary name the
# runner renames), the command's standard output then its standard error, or the runner's record of the run
# ({"seconds", "rc", "stdout", "stderr"}: the build, timed by the runner).
FILE_OUTPUT = "file"
TEXT_OUTPUT = "text"
RUN_RECORD = "run"

# Units of the judged metrics.
UNITS = {"bw_bytes": "B/s", "iops": "ops/s", "clat_ns_mean": "ns", "clat_ns_p99": "ns", "lat_ns_max": "ns"}

PLAIN_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

# What the profile must say (roles/benchmark/vars/main.yml) for each test.
PROFILE_KEYS = {
    "fio": ("fio_runtime",),
    "dd": ("small_files",),
    "metadata": ("meta_dirs", "meta_files_per_dir", "meta_file_bytes", "meta_seconds"),
    "pgbench": ("pgbench_scale", "pgbench_seconds"),
    "compile": (),
    "seeds": ("small_files", "fio_runtime", "bonnie_files", "bonnie_max_bytes", "bonnie_dirs", "pg_seconds",
              "dd_repeats"),
}
SEEDS = ("tmp_dd", "bonnie", "fio_dbtest", "pg_test_fsync", "dd_64k")
# The tool each seed needs (seed_tools, from the host's tool probe), and why it is skipped without it.
# seed_tools: {"bonnie": its path, "pg_test_fsync": its path, "user": benchmark_seed_user when it exists}.
SEED_TOOLS = {
    "bonnie": ("bonnie", "bonnie++ is not installed on this host (Debian package bonnie++), so the tmpfs vs ext3"
                         " write-up could not be rerun here."),
    "pg_test_fsync": ("pg_test_fsync", "PostgreSQL is not installed on this host (pg_test_fsync comes with the server"
                                       " package, postgresql-15 on Debian 12), so the PostgreSQL write-up could not"
                                       " be rerun here."),
}

# Options every fio probe shares, after the runtime: time-based runs, files removed by fio itself, one summary per
# job, the file's cached pages dropped before the job.
FIO_COMMON = (("time_based", 1), ("unlink", 1), ("group_reporting", 1), ("invalidate", 1))


# The fio jobs' own options, in command-line order, and whether a job runs one process per core (the sequential
# write-ups do). Data: fio's default buffers (random, scrambled per write), never zeros, so zram stores real pages.
FIO_JOB_OPTIONS = {
    "seq_write": ((("rw", "write"), ("bs", "1M"), ("ioengine", "psync")), True),
    "seq_read": ((("rw", "read"), ("bs", "1M"), ("ioengine", "psync")), True),
    "randrw": ((("rw", "randrw"), ("rwmixread", 50), ("bs", "4k"), ("ioengine", "psync")), False),
    "fsync": ((("rw", "write"), ("bs", "4k"), ("ioengine", "sync"), ("fdatasync", 1)), False),
}


def fio_steady_options(runtime):
    """fio's own steady state: a ramp (not measured) of a third of the runtime, at most 5 s; from 10 s of runtime on,
    fio's steady-state detection too (the IOPS slope over half the runtime within 1%), which ends a job early
    once steady and records whether it got there."""
    runtime = int(runtime)
    options = [("runtime", runtime), ("ramp_time", max(1, min(5, runtime // 3)))]
    if runtime >= 10:
        options += [("ss", "iops_slope:1%"), ("ss_dur", runtime // 2)]
    return options


def _fio_parser(jobname):
    def parse(text):
        doc = _bench.parse_fio_json(text)
        # Whether fio's steady-state detection (ss, from 10 s of runtime) saw the job settle; None without ss.
        states = [job["steadystate"].get("attained") for job in doc.get("jobs") or []
                  if job.get("jobname") == jobname and "steadystate" in job]
        steady = bool(all(states)) if states else None
        return [dict(figure, steady_attained=steady) for figure in _bench.fio_figures(doc, jobname)]
    return parse


def _dd_parser(op, block_size):
    def parse(text):
        return [_bench.dd_figures(text, op, block_size)]
    return parse


def _metadata_parser(text):
    return _bench.metadata_figures(json.loads(text))


def _pgbench_parser(text):
    return [_bench.pgbench_figures(text)]


def _compile_parser(text):
    """The timing probe's JSON line: {"seconds": ..., "rc": ...}."""
    run = json.loads(text)
    if int(run.get("rc", 1)) != 0:
        raise ValueError("the build exited with %r" % run.get("rc"))
    return [_bench.compile_figures(run["seconds"])]


def _judged(tool, test, op, unit=None):
    """The figure the report judges (tool, test, op) by, from _bench.RATIO_METRICS."""
    for m_tool, m_test, m_op, metric, higher, _verb in _bench.RATIO_METRICS:
        if (m_tool, m_test, m_op) == (tool, test, op):
            return {"op": op, "metric": metric, "unit": unit or UNITS[metric], "higher_is_better": higher}
    raise KeyError((tool, test, op))


# --- the commands ---------------------------------------------------------------------------------

def _fio_command(name):
    options, per_core = FIO_JOB_OPTIONS[name]

    def command(ctx):
        mib = ctx["size_bytes"] // MIB
        numjobs = min(ctx["cores"], mib) if per_core else 1
        job = list(options) + [("numjobs", numjobs), ("size", (mib // numjobs) * MIB),
                               ("direct", 1 if ctx["mode"] == DIRECT else 0)]
        global_options = fio_steady_options(ctx["profile"]["fio_runtime"]) + list(FIO_COMMON)
        return {"argv": _bench.fio_argv(name, job, ctx["dir"], ctx["raw"], global_options)}
    return command


def _small_files_command(ctx):
    """Many 1 KiB files, each created on open and written with O_DSYNC, in one fio process (one dd per file
    timed process start-up more than storage: 899 us a file wall against 33.5 us inside dd)."""
    files = int(ctx["profile"]["small_files"])
    job = [("rw", "write"), ("bs", "1k"), ("filesize", "1k"), ("nrfiles", files), ("openfiles", 1),
           ("file_service_type", "sequential"), ("create_on_open", 1), ("sync", "dsync"), ("ioengine", "psync"),
           ("unlink", 1)]
    return {"argv": _bench.fio_argv("small_files", job, ctx["dir"], ctx["raw"])}


def _dd_file(ctx):
    return ctx["dir"] + "/dd.bin"


def _dd_write(flag):
    def command(ctx):
        return {"argv": ["dd", "if=" + ctx["random"], "of=" + _dd_file(ctx), "bs=1M",
                         "count=%d" % (ctx["size_bytes"] // MIB), flag], "warm": [ctx["random"]],
                "remove": [_dd_file(ctx)]}
    return command


def _dd_read(ctx):
    """The read makes its own file first, out of the clock (so a round that reruns only the read, as the settle step
    may, has one), and removes it after, so a target holds one test file at a time."""
    write = ["dd", "if=" + ctx["random"], "of=" + _dd_file(ctx), "bs=1M", "count=%d" % (ctx["size_bytes"] // MIB),
             "conv=fdatasync", "status=none"]
    if ctx["mode"] == DIRECT:
        return {"argv": ["dd", "if=" + _dd_file(ctx), "of=/dev/null", "bs=1M", "iflag=direct"], "before": [write],
                "remove": [_dd_file(ctx)]}
    # Buffered: the pages the write left are dropped first (a no-op on tmpfs and ramfs, whose pages are the data).
    return {"argv": ["dd", "if=" + _dd_file(ctx), "of=/dev/null", "bs=1M"],
            "before": [write, ["dd", "if=" + _dd_file(ctx), "iflag=nocache", "count=0", "status=none"]],
            "remove": [_dd_file(ctx)]}


def _metadata_command(ctx):
    """The metadata probe (a program of the probe module) and its arguments: the tree's shape and least time."""
    spec = ctx["profile"]
    dirs = int(spec["meta_dirs"])
    # Each file takes a 4 KiB block at least: keep the tree within the test's size.
    per_dir = min(int(spec["meta_files_per_dir"]), max(ctx["size_bytes"] // 4096 // dirs, 1))
    return {"program": "metadata", "argv": [ctx["dir"], str(dirs), str(per_dir), str(int(spec["meta_file_bytes"])),
                                            str(spec["meta_seconds"])]}


PG_PORT = "5433"


def _pgbench_command(select_only):
    def command(ctx):
        pg_dir = ctx["dir"] + "/pgbench"
        cores = str(ctx["cores"])
        argv = ["runuser", "-u", "postgres", "--", ctx["pg_bin"] + "/pgbench", "-c", cores, "-j", cores,
                "-T", str(ctx["profile"]["pgbench_seconds"])]
        argv += ["-S"] if select_only else []
        return {"argv": argv + ["-h", pg_dir, "-p", PG_PORT, "-U", "postgres", "postgres"]}
    return command


def _compile_command(ctx):
    """The build of a fresh copy of the source tree, copied out of the clock as the build user (modes and times kept,
    so make sees the tree as it is at the source) and removed after. The directories above the copy let the user
    pass (0711), not list."""
    build = [part.replace("{cores}", str(ctx["cores"])) for part in ctx["compile_command"]]
    user, chdir = ctx["compile_user"], "%s/compile/round-%d" % (ctx["dir"], ctx["round"])
    return {"argv": ["runuser", "-u", user, "--"] + build, "chdir": chdir, "output": RUN_RECORD,
            "mkdir": [{"path": ctx["dir"].rsplit("/", 1)[0], "mode": "0711"}, {"path": ctx["dir"], "mode": "0711"},
                      {"path": ctx["dir"] + "/compile", "mode": "0700", "owner": user}],
            "before": [["runuser", "-u", user, "--", "cp", "-R", "--preserve=mode,timestamps",
                        ctx["compile_source"], chdir]],
            "remove": [chdir]}


# --- the registry ---------------------------------------------------------------------------------

def _probe(probe_id, tool, test, figures, policy, command, parse, group, direct_capable=False):
    """One registry entry. FIGURES: the judged figures, each (op) for the one RATIO_METRICS names, or
    (op, metric, unit, higher is better)."""
    judged = [_judged(tool, test, one[0]) if len(one) == 1 else
              {"op": one[0], "metric": one[1], "unit": one[2], "higher_is_better": one[3]} for one in figures]
    return {"id": probe_id, "tool": tool, "test": test, "group": group, "policy": policy,
            "why": POLICY_WHY[policy], "direct_capable": direct_capable, "command": command, "parse": parse,
            "figures": judged}


# Each probe's group is the benchmark_tests entry that asks for it (fio probes by benchmark_fio_jobs too).
PROBES = (
    _probe("seq_write", "fio", "seq_write", [("write",)], DIRECT, _fio_command("seq_write"), _fio_parser("seq_write"),
           "fio", direct_capable=True),
    _probe("seq_read", "fio", "seq_read", [("read",)], DIRECT, _fio_command("seq_read"), _fio_parser("seq_read"),
           "fio", direct_capable=True),
    # One job of mixed reads and writes: one comparison (the reads), the writes shown beside it.
    _probe("randrw", "fio", "randrw", [("read",)], DIRECT, _fio_command("randrw"), _fio_parser("randrw"),
           "fio", direct_capable=True),
    # Small writes each followed by fdatasync, buffered on every backend: how databases write their log. Judged by
    # write-and-sync pairs per second: the fdatasync alone is a no-op on tmpfs (0.2 us), a ratio to it means nothing.
    _probe("fsync", "fio", "fsync", [("write", "iops", "writes+fdatasync/s", True)], SYNC, _fio_command("fsync"),
           _fio_parser("fsync"), "fio"),
    _probe("write_fdatasync", "dd", "write_fdatasync", [("write",)], SYNC, _dd_write("conv=fdatasync"),
           _dd_parser("write", MIB), "dd"),
    _probe("write_dsync", "dd", "write_dsync", [("write",)], SYNC, _dd_write("oflag=dsync"),
           _dd_parser("write", MIB), "dd"),
    _probe("read", "dd", "read", [("read",)], DIRECT, _dd_read, _dd_parser("read", MIB), "dd", direct_capable=True),
    # Part of the dd test (benchmark_tests: dd), run by fio since it is one process.
    _probe("small_files", "fio", "small_files", [("write", "iops", "files/s", True)], SYNC, _small_files_command,
           _fio_parser("small_files"), "dd"),
    _probe("metadata", "metadata", "metadata", [("create",), ("stat",), ("read",), ("delete",)], CACHED,
           _metadata_command, _metadata_parser, "metadata"),
    _probe("tpcb_like", "pgbench", "tpcb_like", [("transaction", "iops", "tx/s", True)], SYNC,
           _pgbench_command(False), _pgbench_parser, "pgbench"),
    _probe("select_only", "pgbench", "select_only", [("transaction", "iops", "tx/s", True)], CACHED,
           _pgbench_command(True), _pgbench_parser, "pgbench"),
    _probe("build", "compile", "build", [("build", "iops", "builds/s", True)], CACHED, _compile_command,
           _compile_parser, "compile"),
)


# --- the seeds' experiments -----------------------------------------------------------------------

def seed_scale(size_bytes, spec, runs, user="nobody"):
    """The seeds' experiments scaled to a target: SIZE_BYTES its test size (the seeds profile's size_bytes at most),
    SPEC the seeds profile (with benchmark_seeds_scale), RUNS the rounds."""
    size = int(size_bytes)
    max_bytes = int(spec["bonnie_max_bytes"])
    # bonnie++ -n: fewer files first, then smaller ones, so that files of half the largest size on average fit.
    bonnie_files = min(int(spec["bonnie_files"]), size // (1024 * (max_bytes // 2)))
    if bonnie_files < 1:
        max_bytes = min(max_bytes, size * 2 // 1024)
        bonnie_files = 1
    return {"block_bytes": size, "files": max(min(int(spec["small_files"]), size // 4096 // int(runs)), 1),
            "fio_job_bytes": max(size // 4 // MIB, 1) * MIB, "fio_runtime": int(spec["fio_runtime"]),
            "bonnie_files": bonnie_files, "bonnie_max_bytes": max_bytes, "bonnie_dirs": int(spec["bonnie_dirs"]),
            "bonnie_user": user, "pg_seconds": int(spec["pg_seconds"]), "dd_count": min(1024, size // 65536),
            "dd_repeats": int(spec["dd_repeats"])}


def _seed_block(flag=None, read=False):
    def command(ctx):
        scale, block = ctx["seed"], "bs=%d" % ctx["seed"]["block_bytes"]
        argv = ["dd", "if=" + ctx["random"], "of=%s/block.bin" % ctx["dir"], block, "count=1", "iflag=fullblock"]
        out = {"seed_entry": {"kind": "dd_block", "block_size": scale["block_bytes"]}, "warm": [ctx["random"]],
               "remove": ["%s/block.bin" % ctx["dir"]]}
        if read:
            # The write-up read the block its write had just left: the read writes it first, out of the clock.
            out["before"] = [argv + ["status=none"]]
            out["argv"] = ["dd", "if=%s/block.bin" % ctx["dir"], "of=/dev/null", block]
            return out
        out["argv"] = argv + ([flag] if flag else [])
        return out
    return command


def _seed_files(ctx):
    files, folder = ctx["seed"]["files"], "%s/files-%d" % (ctx["dir"], ctx["round"])
    return {"argv": ["xargs", "-I", "{}", "dd", "if=" + ctx["random"], "of=%s/f{}" % folder, "bs=1k", "count=1",
                     "skip={}", "oflag=dsync", "status=none"],
            "stdin": "\n".join(str(number) for number in range(files)), "mkdir": [{"path": folder, "mode": "0700"}],
            "seed_entry": {"kind": "dd_files", "files": files}, "remove": [folder]}


def _seed_bonnie(ctx):
    scale = ctx["seed"]
    return {"argv": [ctx["seed_tools"].get("bonnie", ""), "-f", "-s", "0", "-n",
                     "%d:%d:0:%d" % (scale["bonnie_files"], scale["bonnie_max_bytes"], scale["bonnie_dirs"]),
                     "-d", ctx["dir"] + "/bonnie", "-u", scale["bonnie_user"]],
            "mkdir": [{"path": ctx["dir"] + "/bonnie", "mode": "0700", "owner": scale["bonnie_user"]}],
            "seed_entry": {"kind": "bonnie"}, "remove": [ctx["dir"] + "/bonnie"]}


def _seed_dbtest(ctx):
    scale = ctx["seed"]
    job = [("ioengine", "libaio"), ("rw", "randrw"), ("bs", "4k"), ("iodepth", 64), ("numjobs", 4),
           ("time_based", 1), ("group_reporting", 1), ("runtime", scale["fio_runtime"]),
           ("size", scale["fio_job_bytes"]), ("unlink", 1)]
    return {"argv": _bench.fio_argv("dbtest", job, ctx["dir"], ctx["raw"]), "output": "file"}


def _seed_pg_test_fsync(ctx):
    return {"argv": [ctx["seed_tools"].get("pg_test_fsync", ""), "-f", ctx["dir"] + "/pg_test_fsync.out", "-s",
                     "%d" % ctx["seed"]["pg_seconds"]], "seed_entry": {"kind": "pg_test_fsync"},
            "remove": [ctx["dir"] + "/pg_test_fsync.out"]}


def _seed_64k(read=False):
    def command(ctx):
        scale = ctx["seed"]
        target = "%s/dd64k.bin" % ctx["dir"]
        argv = (["dd", "if=" + target, "of=/dev/null"] if read else ["dd", "if=" + ctx["random"], "of=" + target])
        argv += ["bs=64k", "count=%d" % scale["dd_count"]] + ([] if read else ["conv=fdatasync"])
        out = {"argv": ["xargs", "-I", "{}"] + argv,
               "stdin": "\n".join(str(number) for number in range(scale["dd_repeats"])),
               "seed_entry": {"kind": "dd_repeat"}, "warm": [ctx["random"]], "remove": [target]}
        if read:
            # The reads need the file the writes left: made first, out of the clock.
            out["before"] = [["dd", "if=" + ctx["random"], "of=" + target, "bs=64k", "count=%d" % scale["dd_count"],
                              "conv=fdatasync", "status=none"]]
        return out
    return command


def _seed_parser(test, op=None):
    def parse(text, item=None, run=None):
        entry = dict((item or {}).get("seed_entry") or {}, test=test, op=op)
        if entry.get("kind") == "dd_files":
            entry["wall_seconds"] = (run or {}).get("seconds", 0)
        return _bench.seed_figures(entry, text)
    return parse


def _dbtest_parser(text, item=None, run=None):
    del item, run
    figures = _bench.fio_figures(_bench.parse_fio_json(text), "dbtest")
    return figures + _bench.dbtest_total(figures)


def _seed_figures(tool, test):
    return [(row[2], row[3], UNITS.get(row[3], ""), row[4]) for row in _bench.SEED_METRICS if row[:2] == (tool, test)]


# (seed, entry id, tool, test, command, parser): each write-up's experiment, as it ran it.
SEED_PROBES = tuple(
    _probe(probe_id, tool, test, _seed_figures(tool, test), PUBLISHED, command, parser, "seed:" + seed)
    for seed, probe_id, tool, test, command, parser in (
        ("tmp_dd", "seed_block_write", "dd", "seed_block_write", _seed_block(),
         _seed_parser("seed_block_write", "write")),
        ("tmp_dd", "seed_block_write_dsync", "dd", "seed_block_write_dsync", _seed_block("oflag=dsync"),
         _seed_parser("seed_block_write_dsync", "write")),
        ("tmp_dd", "seed_block_read", "dd", "seed_block_read", _seed_block(read=True),
         _seed_parser("seed_block_read", "read")),
        ("tmp_dd", "seed_files_dsync", "dd", "seed_files_dsync", _seed_files,
         _seed_parser("seed_files_dsync", "write")),
        ("bonnie", "bonnie", "bonnie++", "files", _seed_bonnie, _seed_parser("files")),
        ("fio_dbtest", "dbtest", "fio", "dbtest", _seed_dbtest, _dbtest_parser),
        ("pg_test_fsync", "pg_test_fsync", "pg_test_fsync", "one_8k_write", _seed_pg_test_fsync,
         _seed_parser("one_8k_write")),
        ("dd_64k", "seed_64k_write", "dd", "seed_64k_write", _seed_64k(), _seed_parser("seed_64k_write", "write")),
        ("dd_64k", "seed_64k_read", "dd", "seed_64k_read", _seed_64k(read=True),
         _seed_parser("seed_64k_read", "read")),
    ))
for _seed_entry in SEED_PROBES:
    _seed_entry["parse_context"] = True
PROBES = PROBES + SEED_PROBES
PROBE_IDS = tuple(entry["id"] for entry in PROBES)
FIO_JOBS = tuple(entry["id"] for entry in PROBES if entry["tool"] == "fio" and entry["group"] == "fio")
TESTS = ("dd", "fio", "metadata", "pgbench", "compile")


def probe(probe_id):
    for entry in PROBES:
        if entry["id"] == probe_id:
            return entry
    raise KeyError(probe_id)


def parse(item, text, run=None):
    """The figures of one item's raw output, each with the item's labels; RUN is what the runner measured (the
    seconds of the whole command, which the seeds' many small files are counted by)."""
    entry = probe(item["probe"])
    figures = entry["parse"](text, item, run) if entry.get("parse_context") else entry["parse"](text)
    out = []
    for figure in figures:
        # A seed's output may hold more than its own test (pg_test_fsync prints one 8 KiB write, then two): each
        # figure keeps the test its parser named, the probe's own by default.
        out.append(dict(figure, probe=entry["id"], tool=entry["tool"], test=figure.get("test") or entry["test"],
                        label=item["label"],
                        mode=item["mode"], round=item["round"], warmup=item["warmup"]))
    return out


# --- the plan -------------------------------------------------------------------------------------

def _modes(entry, targets):
    """[(mode, [targets])]: who runs ENTRY how (see the module's docstring). The build runs as an unprivileged user,
    so a target that lets no other user in (others_enter false) is left out of it: the role never changes a target's
    permissions (target_skips() says why)."""
    if entry["group"] == "compile":
        targets = [target for target in targets if target.get("others_enter", True)]
    if not entry["direct_capable"]:
        return [(entry["policy"], list(targets))]
    if all(target["direct_ok"] for target in targets):
        return [(DIRECT, list(targets))]
    direct = [target for target in targets if target["direct_ok"]]
    return [(BUFFERED, list(targets))] + ([(DIRECT, direct)] if direct else [])


def _target_errors(host, targets, mem_available):
    errors = []
    if not any(target.get("kind") == "ram" for target in targets):
        errors.append("Host %s: no RAM-backed path to benchmark: benchmark_targets names none and none was found."
                      " Mount one first (role ramdisk.provision.tmpfs) or list it in benchmark_targets." % host)
    labels = [target.get("label") for target in targets]
    for target in targets:
        what = "benchmark target %s (%s)" % (target.get("path"), target.get("label"))
        if not PLAIN_LABEL.match(str(target.get("label") or "")):
            errors.append("Host %s: benchmark_targets label %r of %s is not a plain name: use letters, digits, ., _"
                          " and - (it names the raw files)." % (host, target.get("label"), target.get("path")))
        if target.get("kind") not in ("ram", "disk"):
            errors.append("Host %s: %s has kind %r; the plan needs ram or disk (from ramdisk_facts)."
                          % (host, what, target.get("kind")))
        if int(target.get("file_size_bytes") or 0) < MIB:
            errors.append("Host %s: no room to benchmark %s: a test file needs at least 1 MiB within"
                          " benchmark_space_fraction and benchmark_memory_fraction (%s MemAvailable)."
                          " Free space or raise the fractions." % (host, what, mem_available))
        if "direct_ok" not in target:
            errors.append("Host %s: %s was not asked whether it takes O_DIRECT (direct_ok missing): probe every"
                          " target, RAM ones too, before planning." % (host, what))
    for label in sorted(set(label for label in labels if labels.count(label) > 1), key=str):
        errors.append("Host %s: benchmark target label %r is used more than once. Give each entry of"
                      " benchmark_targets its own label." % (host, label))
    return errors


def plan(targets, profile, host="localhost", tests=("dd", "fio", "metadata"), fio_jobs=FIO_JOBS, runs=0, cores=1,
         dir_name="ramdisk-bench", random_file="", raw_dir="", mem_total=None, mem_available=None,
         pg_bin="", compile_command=(), compile_user="", compile_source="", seeds=(), seed_tools=None):
    """{"items", "errors", "size_bytes", "skipped" ({seed: why}), "context", "dirs", "setup", "teardown"}: every item of the run, in the order it
    runs (round by round, the targets taking turns, round 0 the warm-up), or, when anything is wrong, no items and
    every error.

    TARGETS: [{label, path, kind (ram or disk), file_size_bytes, direct_ok}]; PROFILE: the profile's figures
    (vars/main.yml), with benchmark_scale applied. RUNS: measured rounds, 0 for the profile's (at least 5, where the
    stopping rule starts; the settle step adds rounds up to its cap). SEEDS: the write-ups' experiments to run
    (benchmark_seeds, the seeds profile), SEED_TOOLS the host's {bonnie, pg_test_fsync, user}."""
    targets = list(targets)
    errors = _target_errors(host, targets, mem_available)
    for test in tests:
        if test not in TESTS:
            errors.append("Host %s: benchmark_tests holds %r, which is no test. Use %s."
                          % (host, test, ", ".join(TESTS)))
            continue
        for key in PROFILE_KEYS[test]:
            value = profile.get(key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                errors.append("Host %s: the profile's %s is %r; test %s needs a whole number of at least 1. Fix it in"
                              " benchmark_scale (or benchmark_seeds_scale)." % (host, key, value, test))
    seed_tools = dict(seed_tools or {})
    for seed in seeds:
        if seed not in SEEDS:
            errors.append("Host %s: benchmark_seeds holds %r, which is no seed. Use %s."
                          % (host, seed, ", ".join(SEEDS)))
    if seeds:
        for key in PROFILE_KEYS["seeds"]:
            value = profile.get(key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                errors.append("Host %s: the seeds profile's %s is %r; it needs a whole number of at least 1. Fix it in"
                              " benchmark_seeds_scale." % (host, key, value))
    skipped = dict((seed, SEED_TOOLS[seed][1]) for seed in seeds if seed in SEED_TOOLS
                   and not seed_tools.get(SEED_TOOLS[seed][0]))
    if "bonnie" in seeds and "bonnie" not in skipped and not seed_tools.get("user"):
        skipped["bonnie"] = ("benchmark_seed_user does not exist on this host; bonnie++ runs as root only with -u and a"
                             " user. Give an existing unprivileged user.")
    if "fio" in tests:
        for job in fio_jobs:
            if job not in FIO_JOBS:
                errors.append("Host %s: benchmark_fio_jobs holds %r, which is no fio job. Use %s."
                              % (host, job, ", ".join(FIO_JOBS)))
    if "pgbench" in tests and not pg_bin:
        errors.append("Host %s: benchmark_tests asks for pgbench, but no PostgreSQL with initdb, pg_ctl and pgbench"
                      " is installed (Debian: postgresql). Install it or leave pgbench out." % host)
    if "compile" in tests and (isinstance(compile_command, str) or not compile_command or not compile_user
                               or not compile_source):
        errors.append("Host %s: benchmark_compile_command is %s, benchmark_compile_user %r and benchmark_compile_source"
                      " %r: the compile test needs a list of arguments, an unprivileged user and a source tree. Give"
                      " all three, such as [make, \"-j{cores}\"], nobody and /usr/src/project."
                      % (host, json.dumps(compile_command), compile_user, compile_source))
    # The profile's runs are raised to the least the decision rule needs; a benchmark_runs below it is an error.
    measured = int(runs) if runs else max(int(profile.get("runs") or 0), _bench_stats.MIN_RUNS)
    if measured < _MIN_RUNS:
        errors.append("Host %s: benchmark_runs is %d: with fewer than %d runs a side a comparison at 95%% is at best"
                      " the lowest to the highest difference (4 runs) or unbounded (3 or fewer), and the stopping rule"
                      " starts at %d. Set %d or more, or 0 for the profile's."
                      % (host, measured, _MIN_RUNS, _MIN_RUNS, _MIN_RUNS))
    if errors:
        return {"items": [], "errors": errors, "size_bytes": 0, "skipped": skipped}

    # One size for every target of the run, so RAM and disk write the same amount.
    size = min(int(target["file_size_bytes"]) for target in targets)
    size -= size % MIB
    entries = [entry for entry in PROBES if (entry["group"] in tests and (entry["group"] != "fio"
                                                                          or entry["id"] in fio_jobs))
               or (entry["group"][5:] in seeds and entry["group"][5:] not in skipped)]
    context = {"seed": seed_scale(size, profile, measured, seed_tools.get("user") or "nobody") if seeds else {},
               "seed_tools": seed_tools, "host": host, "size_bytes": size, "cores": max(1, int(cores)),
               "dir_name": dir_name, "random": random_file, "raw_dir": raw_dir, "mem_total": mem_total,
               "pg_bin": pg_bin, "compile_command": list(compile_command), "compile_user": compile_user,
               "compile_source": compile_source, "profile": profile}
    runs_of = [(entry, mode, group) for entry in entries for mode, group in _modes(entry, targets)]
    items = []
    for round_number in range(0, measured + 1):
        items.extend(_round_items(runs_of, targets, round_number, context))
    out = {"items": items, "errors": [], "size_bytes": size, "skipped": skipped, "context": context,
           "target_skips": target_skips(targets, tests, compile_user)}
    out.update(_host_steps(targets, tests, entries, context))
    return out


_MIN_RUNS = _bench_stats.MIN_RUNS


def target_skips(targets, tests, compile_user):
    """[{label, test, why}]: the tests a target is left out of, and why."""
    if "compile" not in tests:
        return []
    why = "the target directory %s lets no other user in, and the build runs as %s."
    return [{"label": target["label"], "test": "compile", "why": why % (target["path"], compile_user)}
            for target in targets if not target.get("others_enter", True)]


def _test_dir(target, context):
    return "%s/%s/%s" % (target["path"], context["dir_name"], target["label"])


def _host_steps(targets, tests, entries, context):
    """What the run makes before its first item and undoes after its last: {"dirs": [{path, mode, owner}],
    "setup": [argv], "teardown": [argv]} - the raw directory and a test directory per target, the random data the
    dd writes copy (never /dev/zero, which zram stores for free), and pgbench's private cluster per target (the
    host's own binaries as the postgres user, a socket directory of its own and no TCP listener, so it never meets a
    running server or its data; stopped by the teardown whatever happened)."""
    dirs = ([{"path": context["raw_dir"], "mode": "0700"}] if context["raw_dir"] else [])
    dirs += [{"path": _test_dir(target, context), "mode": "0700"} for target in targets]
    setup, teardown = [], []
    if context["random"]:
        # As much as one dd write copies, or the seeds' small files read, at least 1 MiB.
        profile = context["profile"]
        # dd (and the seeds' dd tests, whose small files skip through it 1 KiB at a time) copies from it.
        uses_dd = any(entry["tool"] == "dd" for entry in entries)
        mib = max(context["size_bytes"] // MIB, (int(profile.get("small_files") or 0) + 1023) // 1024, 1) if uses_dd else 1
        setup.append(["dd", "if=/dev/urandom", "of=" + context["random"], "bs=1M", "count=%d" % mib,
                      "iflag=fullblock", "status=none"])
    if "pgbench" in tests:
        bin_dir = context["pg_bin"]
        as_postgres = ["runuser", "-u", "postgres", "--"]
        # About 16 MB of tables per unit of scale: the profile's, within the test size.
        scale = max(min(int(context["profile"]["pgbench_scale"]), context["size_bytes"] // (16 * MIB)), 1)
        for target in targets:
            test_dir = _test_dir(target, context)
            pg_dir = test_dir + "/pgbench"
            # The run's directories are 0700; 0711 lets the postgres user pass, not list.
            dirs += [{"path": "%s/%s" % (target["path"], context["dir_name"]), "mode": "0711"},
                     {"path": test_dir, "mode": "0711"}, {"path": pg_dir, "mode": "0700", "owner": "postgres"}]
            setup += [as_postgres + [bin_dir + "/initdb", "-D", pg_dir + "/data", "-A", "trust", "-U", "postgres",
                                     "-E", "UTF8", "--locale=C"],
                      as_postgres + [bin_dir + "/pg_ctl", "-D", pg_dir + "/data", "-l", pg_dir + "/server.log", "-w",
                                     "-o", "-k %s -p %s -c listen_addresses=" % (pg_dir, PG_PORT), "start"],
                      as_postgres + [bin_dir + "/pgbench", "-i", "-q", "-s", str(scale), "-h", pg_dir, "-p", PG_PORT,
                                     "-U", "postgres", "postgres"]]
            teardown.append(as_postgres + [bin_dir + "/pg_ctl", "-D", pg_dir + "/data", "-m", "fast", "-w", "stop"])
    return {"dirs": dirs, "setup": setup, "teardown": teardown}


def _round_items(runs_of, targets, round_number, context):
    items = []
    # What the tests before left to write back goes out before the clock starts: every target's file system and the
    # raw files' (syncfs, not sync(2) of the whole host, so a busy mount elsewhere neither delays nor blocks a test).
    sync = []
    for path in [target["path"] for target in targets] + ([context["raw_dir"]] if context["raw_dir"] else []):
        if path not in sync:
            sync.append(path)
    for target in targets:
        for entry, mode, group in runs_of:
            if target not in group:
                continue
            ctx = dict(context, dir=_test_dir(target, context), mode=mode, round=round_number,
                       raw="%s/%s-%s-%s-%d.out" % (context["raw_dir"], entry["id"], target["label"], mode,
                                                   round_number))
            item = {"host": context["host"], "label": target["label"], "path": target["path"],
                    "kind": target["kind"], "probe": entry["id"], "tool": entry["tool"], "test": entry["test"],
                    "round": round_number, "warmup": round_number == 0, "mode": mode, "policy": entry["policy"],
                    "why": entry["why"], "figures": entry["figures"], "raw": ctx["raw"], "before": [], "warm": [],
                    "remove": []}
            item.update(entry["command"](ctx))
            if entry["tool"] == "fio":
                # fio writes its JSON+ to the raw file itself.
                item["output"] = FILE_OUTPUT
            item.setdefault("output", TEXT_OUTPUT)
            item["sync"] = list(sync)
            item["note"] = _note(target, mode, context["size_bytes"], context["mem_total"])
            items.append(item)
    return items


def _note(target, mode, size, mem_total):
    """Why a disk row may still be a cache figure, when it may."""
    if target["kind"] != "disk" or mode == DIRECT or not mem_total or size >= 2 * int(mem_total):
        return ""
    return ("working set %d MiB is under twice the host's memory (%d MiB), which could cache it; the device"
            " counters decide whether the row reached the disk" % (size // MIB, int(mem_total) // MIB))


def issued(item, figures):
    """(what, amount) the item's first judged figure says the probe issued, for _bench_counters.row_label(): what is
    read or write (a read op reads, every other op writes), amount its io_bytes, None where the figure has none
    (pgbench, the build: the counters then cannot label the row cache)."""
    op = probe(item["probe"])["figures"][0]["op"]
    amount = None
    for figure in figures:
        if figure.get("op") == op and figure.get("io_bytes"):
            amount = int(figure["io_bytes"])
            break
    return ("read" if op == "read" else "write"), amount


def rounds(items):
    """ITEMS (in the order they run) cut into rounds: one list per round, in order, each as it runs. bench_probe runs
    a round per call."""
    out = []
    for one in items:
        if not out or out[-1][0]["round"] != one["round"]:
            out.append([])
        out[-1].append(one)
    return out


def comparisons(items):
    """[(probe, mode)]: one comparison per job and mode, RAM against disk, where both sides run it."""
    kinds = {}
    for one in items:
        kinds.setdefault((one["probe"], one["mode"]), set()).add(one["kind"])
    return sorted(key for key, seen in kinds.items() if seen >= {"ram", "disk"})


def settle(items, figures, targets, profile, max_runs=_bench_stats.MAX_RUNS, cov_limit=_bench_stats.COV_LIMIT,
           **options):
    """The settle step: {"items": the next rounds to run, "status": the stopping rule per figure}. ITEMS are the
    plan's items run so far, FIGURES what parse() made of them (warm-ups left out here). Per comparison (probe and
    mode) and judged figure, each target's runs go through _bench_stats.stop() (MAX_RUNS its cap, COV_LIMIT the
    coefficient of variation it stops at); where any target of a comparison needs more runs, every target of it
    runs them, so both sides keep taking turns. No items: every figure is steady or at the cap (the status says
    which)."""
    base = plan(targets, profile, **options)
    if base["errors"]:
        return {"items": [], "status": [], "errors": base["errors"]}
    by_label = dict((target["label"], target) for target in targets)
    groups, last = {}, {}
    for one in items:
        key = (one["probe"], one["mode"])
        groups.setdefault(key, [])
        if one["label"] not in groups[key]:
            groups[key].append(one["label"])
        last[key] = max(last.get(key, 0), one["round"])
    ran = {}
    for one in items:
        if not one["warmup"]:
            key = (one["probe"], one["mode"], one["label"])
            ran[key] = ran.get(key, 0) + 1
    status, wanted = [], {}
    for (probe_id, mode), labels in sorted(groups.items()):
        for judged in probe(probe_id)["figures"]:
            for label in labels:
                values = [figure[judged["metric"]] for figure in figures
                          if (figure["probe"], figure["mode"], figure["label"], figure["op"],
                              figure.get("test", probe(probe_id)["test"]))
                          == (probe_id, mode, label, judged["op"], probe(probe_id)["test"]) and not figure["warmup"]
                          and figure.get(judged["metric"]) is not None]
                rule = _bench_stats.stop(values, max_runs=max_runs, cov_limit=cov_limit)
                rounds = ran.get((probe_id, mode, label), 0)
                # The cap counts the rounds run, not the figures: a run that gave no figure (bonnie++ on tmpfs finds
                # some of its tests too quick to time) is no reason to run more, and more would never end.
                if rounds >= _bench_stats.MIN_RUNS and len(values) < rounds and not rule["done"]:
                    rule = dict(rule, done=True, more=0, reason="few-figures")
                rule["more"] = max(0, min(rule["more"], max_runs - rounds))
                if not rule["more"] and not rule["done"]:
                    rule = dict(rule, done=True, reason="cap")
                rule["rounds"] = rounds
                status.append(dict(rule, probe=probe_id, mode=mode, label=label, op=judged["op"],
                                   metric=judged["metric"], tool=probe(probe_id)["tool"], test=probe(probe_id)["test"]))
                wanted[(probe_id, mode)] = max(wanted.get((probe_id, mode), 0), rule["more"])
    new = []
    top = max([last[key] + wanted[key] for key in wanted if wanted[key]] or [0])
    for round_number in range(1, top + 1):
        for key in sorted(wanted, key=lambda pair: (PROBE_IDS.index(pair[0]), pair[1])):
            if not last[key] < round_number <= last[key] + wanted[key]:
                continue
            runs_of = [(probe(key[0]), key[1], [by_label[label] for label in groups[key]])]
            new.extend(_round_items(runs_of, targets, round_number, base["context"]))
    # Round by round, the targets taking turns, as in the plan.
    order = dict((target["label"], place) for place, target in enumerate(targets))
    new.sort(key=lambda one: (one["round"], order[one["label"]]))
    return {"items": new, "status": status, "errors": []}


def judge(items, figures, row_labels=None):
    """One comparison per job, mode and RAM-disk pair: [{probe, mode, op, metric, unit, ram, disk, ram_figure,
    disk_figure (_bench_stats.summary()), comparison (_bench_stats.compare(), RAM over disk), counted}]. ITEMS say
    which label is RAM and which disk; FIGURES are parse()'s, warm-ups left out. ROW_LABELS, {(label, probe, mode):
    label} from _bench_counters.row_label(), mark disk rows served by a cache: such a comparison is shown but not
    counted as RAM against disk (``counted`` False, ``why`` says so)."""
    row_labels = row_labels or {}
    kinds = dict((one["label"], one["kind"]) for one in items)
    out = []
    for probe_id, mode in comparisons(items):
        for judged in probe(probe_id)["figures"]:
            values = {}
            for figure in figures:
                if ((figure["probe"], figure["mode"], figure["op"], figure.get("test", probe(probe_id)["test"]))
                        == (probe_id, mode, judged["op"], probe(probe_id)["test"])
                        and not figure["warmup"] and figure.get(judged["metric"]) is not None):
                    values.setdefault(figure["label"], []).append(figure[judged["metric"]])
            rams = [label for label in values if kinds.get(label) == "ram"]
            disks = [label for label in values if kinds.get(label) == "disk"]
            for ram in rams:
                for disk in disks:
                    label = row_labels.get((disk, probe_id, mode), "")
                    row = {"probe": probe_id, "mode": mode, "op": judged["op"], "metric": judged["metric"],
                           "unit": judged["unit"], "ram": ram, "disk": disk, "disk_label": label,
                           "ram_figure": _bench_stats.summary(values[ram]),
                           "disk_figure": _bench_stats.summary(values[disk]),
                           "comparison": _bench_stats.compare(values[ram], values[disk], judged["higher_is_better"]),
                           "counted": label != "cache", "why": ""}
                    if label == "cache":
                        row["why"] = ("under 10% of what the disk row issued reached the device: a cache was"
                                      " measured, not the disk")
                    out.append(row)
    return out
