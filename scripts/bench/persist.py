# SPDX-License-Identifier: GPL-3.0-or-later
"""What one persist sync writes to the disk and how long it takes (make bench-persist).

A tmpfs holds a tree of at least 1 GiB in 50,000 files (mostly small, a fifth of them up to 128 KiB, a few of some
MiB, a few symlinks and hard links). The backing is on an ext4 of its own: a file under /var/tmp, on this machine's
disk, attached as a loop device with direct I/O, so that the device's count of bytes written (/sys/block/loopN/stat)
holds this benchmark's writes and nobody else's. The persist helper (plugins/module_utils/_persist_helper.py, its
host paths pointed at the work directory) makes the first copy; then 1% of the tree changes, by files (rewritten,
added, removed) and by bytes, and one sync of it is measured two ways, each from the same starting copy (the designs
before, cp -a of the whole mount and rsync --link-dest, went with the shell helper in issue 41; README keeps their
figures):

  (c) rsync by hand, with the helper's options and --link-dest, then `sync -f` so that its data is on the disk
      (the helper flushes too, and only data on the disk can be counted);
  (d) ours now: the helper with its copy (persist-delta.py, the collection's _persist_delta.py, KEEP=2): only the
      changed entries are copied (into a stage, then moved into current under a commit record), the replaced ones
      moved aside as the reverse delta that keeps the previous snapshot; no tree of hard links. Its rollback puts
      the starting copy back after each turn (not measured), and `verify` checks current against the mount's digest;
  (d') the next sync of (d), after another 1% of changes: the steady state, which also drops the oldest reverse
      delta (KEEP=2).

(c) and (d) run twice, taking turns, the starting copy put back after each; the faster of each counts. Then a
second tree of the same size in 10,000 files shows how the bytes written by (c) (the --link-dest design) and by (d)
scale with the number of files: --link-dest pays for every unchanged file, (d) for the changed ones. Figures for
each: wall time; bytes written to the device, from just before the run until a `sync` after it (so the metadata the
run left dirty, and the file system's journal, count too); the write_bytes of the run's processes (/proc/self/io of
this process, which takes in its reaped children's: the pages they dirtied, data and metadata, not the journal); and
the blocks of the new copy that the starting copy does not share (du over both, the helper's own figure). Targets
printed beside them: (d) and (d') write at most 3% of the tree (its data, apparent sizes), and take at most 1.2x
the time of (c).

Then the memory of one sync (issue 41): trees of 100,000 and 1,000,000 empty files (1,000 a directory) on a tmpfs,
copied to a backing on a tmpfs of its own (rsync -a, then current -> snap-1, as the helper's first copy), 1% of the
files rewritten, and one sync of each measured: its peak memory (ru_maxrss of the sync process, from wait4, which
counts from the bench's own high-water mark at the fork; and the process's own VmHWM, from its report) and its
time, beside `rsync -a --delete` by hand of the same change into a copy of the same starting tree. Target printed
beside it: under 256 MiB at 1,000,000 files.

Runs as root in a private mount namespace (it re-runs itself under `unshare --mount --propagation private`), so the
mounts are seen by nobody else; the loop device is the kernel's, so it is detached at the end, and everything else
it made is removed, whatever happens.
"""

from __future__ import annotations

import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HELPER = os.path.join(REPO_ROOT, "plugins", "module_utils", "_persist_helper.py")
DELTA = os.path.join(REPO_ROOT, "plugins", "module_utils", "_persist_delta.py")
TOKEN = "bench-persist"
SEED = 35
MIB = 1024 * 1024
GIB = 1024 * MIB
DIRECTORIES = (100, 10)  # 1,000 directories, 50 files each
# (files, smallest, largest bytes): 1.09 GiB of data in 50,000 files, 1.19 GiB on the tmpfs
SIZE_CLASSES = ((40000, 256, 8 * 1024), (9880, 8 * 1024, 128 * 1024), (120, MIB, 4 * MIB))
# The same bytes in a fifth of the files, each five times the size: how the bytes written scale with files.
SCALED_CLASSES = tuple((count // 5, low * 5, high * 5) for count, low, high in SIZE_CLASSES)
MIN_BYTES, MIN_FILES = GIB, 50000
SYMLINKS = 100
HARD_LINKS = 100
CHANGED_SHARE = 0.01
# Of the changed files: rewritten, added, removed.
CHANGE_MIX = (0.4, 0.3, 0.3)
RSYNC_OPTIONS = ["-aHAX", "--numeric-ids", "--sparse", "--modify-window=-1"]
TARGET_WRITTEN_SHARE = 0.03
TURNS = 2
IMAGE_BYTES = 4 * GIB
TARGET_TIME_RATIO = 1.2
MEMORY_TREES = (100000, 1000000)
FILES_PER_DIRECTORY = 1000
TARGET_PEAK_RSS = 256 * MIB


def run(argv, **kwargs):
    return subprocess.run(argv, check=True, **kwargs)


# The program as the host runs it, loaded by path (it loads its engine from the path PLACES gives), its host paths
# in the work directory, as the unit tests point it at theirs.
WRAPPER = """import importlib.util, sys
spec = importlib.util.spec_from_file_location("persist_helper", %(program)r)
helper = importlib.util.module_from_spec(spec)
spec.loader.exec_module(helper)
helper.PLACES.update(%(places)r)
sys.exit(helper.main())
"""


def helper_copy(work, file_name="persist"):
    """The helper with its host paths in WORK."""
    places = {"conf_dir": os.path.join(work, "conf"), "state_dir": os.path.join(work, "state"),
              "status_dir": os.path.join(work, "status"), "metrics_collector": os.path.join(work, "no-collector"),
              "engine": DELTA}
    os.makedirs(places["conf_dir"], exist_ok=True)
    path = os.path.join(work, file_name)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("#!%s\n" % sys.executable + WRAPPER % {"program": HELPER, "places": places})
    os.chmod(path, 0o755)
    return path


def configure(work, mount, backing, keep):
    with open(os.path.join(work, "conf", TOKEN + ".conf"), "w", encoding="utf-8") as handle:
        handle.write("MOUNT=%s\nBACKING=%s\nKEEP=%d\n" % (mount, backing, keep))


def make_tree(root, rng, classes=None):
    """The tree (of SIZE_CLASSES unless CLASSES); returns (relative paths of its regular files, their total size)."""
    block = os.urandom(8 * MIB)
    sizes = []
    for count, low, high in classes or SIZE_CLASSES:
        sizes.extend(rng.randint(low, high) for _number in range(count))
    rng.shuffle(sizes)
    per_directory = len(sizes) // (DIRECTORIES[0] * DIRECTORIES[1])
    files = []
    total = 0
    position = 0
    for top in range(DIRECTORIES[0]):
        for sub in range(DIRECTORIES[1]):
            directory = os.path.join(root, "d%03d" % top, "s%02d" % sub)
            os.makedirs(directory)
            for number in range(per_directory):
                size = sizes[position]
                position += 1
                rel = os.path.join("d%03d" % top, "s%02d" % sub, "f%03d.dat" % number)
                write_file(os.path.join(root, rel), size, block, rng)
                files.append(rel)
                total += size
    for number in range(SYMLINKS):
        os.symlink(os.path.basename(files[number]), os.path.join(root, os.path.dirname(files[number]), "link%d" % number))
    for number in range(HARD_LINKS):
        source = files[-1 - number]
        os.link(os.path.join(root, source), os.path.join(root, os.path.dirname(source), "hard%d" % number))
    return files, total


def write_file(path, size, block, rng):
    start = rng.randrange(0, len(block) - min(size, len(block)) + 1)
    with open(path, "wb") as handle:
        remaining = size
        while remaining:
            piece = block[start:start + min(remaining, len(block) - start)]
            handle.write(piece)
            remaining -= len(piece)
            start = 0
        # A unique tail, so no two files are alike.
        handle.write(os.urandom(16))


def change_tree(root, files, total, rng, new_prefix="new"):
    """1% of the files and of the bytes: rewritten, added, removed. Returns a description (and the removed paths)."""
    block = os.urandom(8 * MIB)
    changed = max(3, int(len(files) * CHANGED_SHARE))
    rewritten_n, added_n = int(changed * CHANGE_MIX[0]), int(changed * CHANGE_MIX[1])
    removed_n = changed - rewritten_n - added_n
    picked = rng.sample(range(len(files)), rewritten_n + removed_n)
    rewritten = [files[i] for i in picked[:rewritten_n]]
    removed = [files[i] for i in picked[rewritten_n:]]
    written = 0
    for rel in rewritten:
        path = os.path.join(root, rel)
        size = os.path.getsize(path)
        write_file(path, size, block, rng)
        written += size
    # The added files bring the bytes written up to 1% of the tree.
    each = max(1024, int((total * CHANGED_SHARE - written) / added_n))
    for number in range(added_n):
        rel = os.path.join("d%03d" % rng.randrange(DIRECTORIES[0]), "s%02d" % rng.randrange(DIRECTORIES[1]),
                           "%s%03d.dat" % (new_prefix, number))
        write_file(os.path.join(root, rel), each, block, rng)
        written += each
    for rel in removed:
        os.unlink(os.path.join(root, rel))
    return {"files": changed, "rewritten": rewritten_n, "added": added_n, "removed": removed_n, "bytes": written,
            "removed_paths": removed}


def sectors_written(stat_path):
    with open(stat_path) as handle:
        return int(handle.read().split()[6]) * 512


def own_write_bytes():
    with open("/proc/self/io") as handle:
        values = dict(line.split(": ") for line in handle.read().splitlines())
    return int(values["write_bytes"])


def du_new(old, new):
    """Bytes NEW takes on disk that OLD does not share with it."""
    out = run(["du", "-s", "-B1", old, new], capture_output=True, text=True).stdout
    return int(out.splitlines()[1].split()[0])


def measure(argv, env, stat_path, outputs=None):
    """(seconds, bytes to the device until a sync after it, bytes the processes wrote) of one run of ARGV; its
    standard output is appended to OUTPUTS when given."""
    run(["sync"])
    disk, own = sectors_written(stat_path), own_write_bytes()
    started = time.monotonic()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        sys.exit("bench-persist: %s failed (exit %d): %s" % (" ".join(argv), done.returncode, done.stderr.strip()))
    run(["sync"])
    if outputs is not None:
        outputs.append(done.stdout)
    return seconds, sectors_written(stat_path) - disk, own_write_bytes() - own


def quiet_writes(seconds, stat_path):
    """Bytes the device took over SECONDS of doing nothing (the file system's own housekeeping)."""
    run(["sync"])
    before = sectors_written(stat_path)
    time.sleep(seconds)
    run(["sync"])
    return sectors_written(stat_path) - before


def current(backing):
    return os.readlink(os.path.join(backing, "current"))


def read_status(work):
    with open(os.path.join(work, "status", TOKEN + ".status"), encoding="utf-8") as handle:
        return dict(line.split("=", 1) for line in handle.read().splitlines())


def point_current(backing, name):
    """current back to NAME, as the helper switches it (a new link renamed over the old one)."""
    link = os.path.join(backing, ".current-bench")
    os.symlink(name, link)
    os.rename(link, os.path.join(backing, "current"))


def delta_command(args, env, outputs=None):
    """The prototype's argv for ARGS, or, with ENV, its JSON report of a run that must succeed."""
    argv = [sys.executable, DELTA] + args
    if env is None:
        return argv
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    report = json.loads(done.stdout or "{}")
    if done.returncode != 0 or report.get("result") != "ok":
        sys.exit("bench-persist: persist_delta.py %s failed: %s %s" % (" ".join(args), done.stdout, done.stderr))
    return report


def empty(directory):
    for name in os.listdir(directory):
        run(["rm", "-rf", os.path.join(directory, name)])


def mb(value):
    return "%.1f MB" % (value / 1e6)


def timed_rusage(argv, env):
    """(seconds, peak RSS in bytes by wait4's ru_maxrss, stdout) of ARGV run as a child."""
    started = time.monotonic()
    child = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE)
    out = child.stdout.read()
    child.stdout.close()
    _pid, status, usage = os.wait4(child.pid, 0)
    seconds = time.monotonic() - started
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("bench-persist: %s failed: %s" % (" ".join(argv), out.decode(errors="replace")))
    return seconds, usage.ru_maxrss * 1024, out


def memory_figures(work, env, rng, sizes=MEMORY_TREES):
    """One sync of 1% changed at each of SIZES (files): its peak memory and time, beside rsync -a by hand."""
    rows = []
    for files in sizes:
        mount, backing = os.path.join(work, "memory-mount"), os.path.join(work, "memory-backing")
        for path in (mount, backing):
            os.mkdir(path)
            run(["mount", "-t", "tmpfs", "-o", "size=4G,nr_inodes=0,mode=0755", "ramdisk-bench", path])
        try:
            started = time.monotonic()

            def name_of(number):
                return os.path.join(mount, "d%04d" % (number // FILES_PER_DIRECTORY),
                                    "f%04d" % (number % FILES_PER_DIRECTORY))

            # No list of the names: the bench's own memory is where a child's ru_maxrss starts.
            for number in range(files):
                if number % FILES_PER_DIRECTORY == 0:
                    os.mkdir(os.path.dirname(name_of(number)))
                os.close(os.open(name_of(number), os.O_CREAT | os.O_WRONLY, 0o644))
            built = time.monotonic() - started
            snapshot = os.path.join(backing, "snap-1")
            by_hand = os.path.join(backing, "by-hand")
            run(["rsync", "-a", mount + "/", snapshot])
            os.symlink("snap-1", os.path.join(backing, "current"))
            run(["cp", "-a", snapshot, by_hand])
            for number in rng.sample(range(files), files // 100):
                with open(name_of(number), "wb") as handle:
                    handle.write(b"changed by the bench")
            seconds, peak, out = timed_rusage([sys.executable, DELTA, "sync", mount, backing], env)
            report = json.loads(out)
            rsync_seconds, rsync_peak, _out = timed_rusage(["rsync", "-a", "--delete", mount + "/", by_hand + "/"], env)
            rows.append((files, built, seconds, peak, report.get("peak_rss_bytes", 0), report["operations"],
                         rsync_seconds, rsync_peak))
        finally:
            for path in (mount, backing):
                subprocess.run(["umount", path], check=False)
                os.rmdir(path)
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print("")
    print("memory of one sync, 1%% of the files changed (trees of empty files, %d a directory, on tmpfs; both syncs "
          "on %d cores shared with others)" % (FILES_PER_DIRECTORY, os.cpu_count() or 0))
    print("%9s %8s %10s %14s %14s %12s %12s %14s" % ("files", "built", "sync time", "ru_maxrss", "own VmHWM",
                                                     "operations", "rsync -a", "rsync maxrss"))
    for files, built, seconds, peak, hwm, counts, rsync_seconds, rsync_peak in rows:
        print("%9d %7.1fs %9.1fs %14s %14s %12d %11.1fs %14s"
              % (files, built, seconds, mb(peak), mb(hwm), sum(counts.values()), rsync_seconds, mb(rsync_peak)))
    print("(ru_maxrss of a child starts from its parent's high-water mark at the fork: this bench's is %s)" % mb(own))
    largest = rows[-1]
    met = max(largest[3], largest[4]) < TARGET_PEAK_RSS if own < TARGET_PEAK_RSS else largest[4] < TARGET_PEAK_RSS
    print("target: a sync of %d files under %s of peak memory: %s %s"
          % (largest[0], mb(TARGET_PEAK_RSS), mb(largest[4] if own >= TARGET_PEAK_RSS else max(largest[3:5])),
             "ok" if met else "OVER"))
    return met


def main():
    if os.geteuid() != 0:
        sys.exit("bench-persist mounts a tmpfs: run it as root")
    for tool in ("rsync", "unshare", "du", "flock", "findmnt", "losetup", "mkfs.ext4"):
        if not shutil.which(tool):
            sys.exit("bench-persist needs %s" % tool)
    if os.environ.get("RAMDISK_BENCH_NS") != "1":
        env = dict(os.environ, RAMDISK_BENCH_NS="1")
        sys.exit(subprocess.call(["unshare", "--mount", "--propagation", "private", sys.executable] + sys.argv, env=env))
    work = tempfile.mkdtemp(prefix="ramdisk-bench-persist-", dir="/var/tmp")
    if "--memory-only" in sys.argv[1:]:
        # The memory figures alone (SIZES as a comma-separated list after it, else MEMORY_TREES).
        index = sys.argv.index("--memory-only")
        sizes = tuple(int(one) for one in sys.argv[index + 1].split(",")) if len(sys.argv) > index + 1 \
            else MEMORY_TREES
        try:
            return 0 if memory_figures(work, dict(os.environ, LC_ALL="C"), random.Random(SEED), sizes) else 1
        finally:
            shutil.rmtree(work, ignore_errors=True)
    mount = os.path.join(work, "mount")
    disk = os.path.join(work, "disk")
    loop = None
    try:
        fstype = run(["findmnt", "-n", "-o", "FSTYPE", "-T", work], capture_output=True, text=True).stdout.strip()
        if fstype in ("tmpfs", "ramfs"):
            sys.exit("bench-persist: /var/tmp is %s here, not a disk" % fstype)
        image = os.path.join(work, "backing.img")
        with open(image, "wb") as handle:
            handle.truncate(IMAGE_BYTES)
        # Inode tables and journal written now, not by the kernel in the background while a sync is measured.
        run(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", image])
        loop = run(["losetup", "--find", "--show", "--direct-io=on", image], capture_output=True,
                   text=True).stdout.strip()
        os.mkdir(disk)
        run(["mount", "-t", "ext4", loop, disk])
        backing = os.path.join(disk, "backing")
        os.makedirs(backing, mode=0o700)
        os.mkdir(mount)
        run(["mount", "-t", "tmpfs", "-o", "size=3G,mode=0755", "ramdisk-bench", mount])
        helper = helper_copy(work)
        stat_path = "/sys/block/%s/stat" % os.path.basename(loop)
        env = dict(os.environ, LC_ALL="C")
        rng = random.Random(SEED)

        started = time.monotonic()
        files, total = make_tree(mount, rng)
        # The tree's size is its data (apparent sizes), the stricter base for the share written; the tmpfs holds
        # more (whole pages).
        tree_bytes = int(run(["du", "-s", "-B1", "--apparent-size", mount], capture_output=True,
                             text=True).stdout.split()[0])
        tmpfs_bytes = int(run(["du", "-s", "-B1", mount], capture_output=True, text=True).stdout.split()[0])
        entries = int(run(["sh", "-c", 'find "$1" -mindepth 1 | wc -l', "sh", mount], capture_output=True,
                          text=True).stdout)
        built = time.monotonic() - started
        if total < MIN_BYTES or len(files) < MIN_FILES:
            sys.exit("bench-persist: the tree came out smaller than 1 GiB and 50,000 files")

        configure(work, mount, backing, 2)
        first = measure([helper, "sync", TOKEN], env, stat_path)
        start_copy = current(backing)
        change = change_tree(mount, files, total, rng)
        quiet_seconds = 2.0
        quiet = quiet_writes(quiet_seconds, stat_path)

        # (c) rsync by hand, into a directory of its own beside the starting copy, then flushed.
        by_hand = os.path.join(backing, "by-hand")
        argv = ["sh", "-c", 'rsync "$@" && sync -f "$0"', by_hand] + RSYNC_OPTIONS + [
            "--link-dest=%s" % os.path.join(backing, start_copy), mount + "/", by_hand]
        runs = {"c": [], "d": []}
        delta_statuses = []
        for turn in range(TURNS):
            runs["c"].append(measure(argv, env, stat_path) + (du_new(os.path.join(backing, start_copy), by_hand),))
            run(["rm", "-rf", by_hand])
            # (d) the helper as it is now, from the same starting copy, which its copy updates in place; verified
            # against the mount.
            measured = measure([helper, "sync", TOKEN], env, stat_path)
            delta_statuses.append(read_status(work))
            if delta_statuses[-1].get("COPY_TOOL") != "persist-delta" or current(backing) != start_copy:
                sys.exit("bench-persist: the helper did not sync in place: %s" % delta_statuses[-1])
            runs["d"].append(measured + (int(delta_statuses[-1]["LAST_OK_WRITTEN_BYTES"]),))
            delta_command(["verify", backing], env)
            if turn < TURNS - 1:
                # The starting copy back, from the reverse delta; the last turn's generation stays for (d').
                delta_command(["rollback", backing], env)
        rows = {"c": min(runs["c"]), "d": min(runs["d"])}
        delta_status = delta_statuses[runs["d"].index(rows["d"])]

        # (d') the next sync: another 1% changed; it also drops the reverse delta beyond KEEP=2 (none the first time).
        removed = set(change["removed_paths"])
        second = change_tree(mount, [rel for rel in files if rel not in removed], total, rng, new_prefix="next")
        rows["e"] = measure([helper, "sync", TOKEN], env, stat_path)
        next_status = read_status(work)
        rows["e"] += (int(next_status["LAST_OK_WRITTEN_BYTES"]),)
        delta_command(["verify", backing], env)

        # Scaling: the same bytes in 10,000 files, one turn of (c) and of (d) from a first copy of its own.
        empty(backing)
        empty(mount)
        scaled_files, scaled_total = make_tree(mount, rng, SCALED_CLASSES)
        scaled_tree = int(run(["du", "-s", "-B1", "--apparent-size", mount], capture_output=True,
                              text=True).stdout.split()[0])
        configure(work, mount, backing, 2)
        measure([helper, "sync", TOKEN], env, stat_path)
        scaled_start = os.path.join(backing, current(backing))
        scaled_change = change_tree(mount, scaled_files, scaled_total, rng, new_prefix="scaled")
        scaled_argv = ["sh", "-c", 'rsync "$@" && sync -f "$0"', by_hand] + RSYNC_OPTIONS + [
            "--link-dest=%s" % scaled_start, mount + "/", by_hand]
        scaled = {"c": measure(scaled_argv, env, stat_path)}
        run(["rm", "-rf", by_hand])
        scaled["d"] = measure([helper, "sync", TOKEN], env, stat_path)
        delta_command(["verify", backing], env)

        print("persist sync of a %.2f GiB tree (%.2f GiB on the tmpfs): %d regular files (%d entries with directories "
              "and links), built in %.1f s; %d cores"
              % (tree_bytes / GIB, tmpfs_bytes / GIB, len(files), entries, built, os.cpu_count() or 0))
        print("backing: ext4 on %s, a %d GiB file under /var/tmp (%s) with direct I/O; the first copy took %.1f s and "
              "wrote %s" % (loop, IMAGE_BYTES // GIB, fstype, first[0], mb(first[1])))
        print("changed: %d files (%.2f%%: %d rewritten, %d added, %d removed), %s of new data (%.2f%% of the tree)"
              % (change["files"], 100.0 * change["files"] / len(files), change["rewritten"], change["added"],
                 change["removed"], mb(change["bytes"]), 100.0 * change["bytes"] / tree_bytes))
        print("then for (d'): %d files more, %s of new data" % (second["files"], mb(second["bytes"])))
        print("the device took %s in %.0f s while nothing ran" % (mb(quiet), quiet_seconds))
        print("")
        labels = {"c": "(c) rsync by hand, then sync -f", "d": "(d) ours now (persist-delta, in place)",
                  "e": "(d') its next sync (steady state)"}
        print("%-38s %8s %11s %14s %11s %16s" % ("", "time", "disk", "share of tree", "processes", "new blocks (du)"))
        for key in ("c", "d", "e"):
            seconds, written, own, new = rows[key]
            share = 100.0 * written / tree_bytes
            print("%-38s %7.2fs %11s %13.2f%% %11s %16s" % (labels[key], seconds, mb(written), share, mb(own), mb(new)))
        print("(the new blocks of (d) and (d'): the helper's LAST_OK_WRITTEN_BYTES, the blocks of the entries copied "
              "and the commit record)")
        print("")
        print("turns of (c): %s; of (d): %s (the faster counts)"
              % tuple(", ".join("%.2f s" % one[0] for one in runs[key]) for key in ("c", "d")))
        print("(d)'s own figure, LAST_OK_WRITTEN_BYTES: %s; (d')'s: %s"
              % (mb(int(delta_status["LAST_OK_WRITTEN_BYTES"])), mb(int(next_status["LAST_OK_WRITTEN_BYTES"]))))
        for key in ("d", "e"):
            key_share = float(rows[key][1]) / tree_bytes
            key_ratio = rows[key][0] / rows["c"][0]
            print("target: %s at most %d%% of the tree and %.1fx the time of (c): %.2f%%, %.2fx %s"
                  % (labels[key].split(" ", 1)[0], TARGET_WRITTEN_SHARE * 100, TARGET_TIME_RATIO, key_share * 100,
                     key_ratio, "ok" if key_share <= TARGET_WRITTEN_SHARE and key_ratio <= TARGET_TIME_RATIO
                     else "OVER"))
        print("")
        print("scaling: the same bytes, 1% of the files changed, bytes written to the device by (c) --link-dest "
              "and by (d)")
        print("%8s %10s %12s %8s %18s %12s %8s" % ("files", "new data", "(c) disk", "share", "(c) less new data",
                                                   "(d) disk", "share"))
        for count, tree, new_bytes, c_row, d_row in (
                (len(scaled_files), scaled_tree, scaled_change["bytes"], scaled["c"], scaled["d"]),
                (len(files), tree_bytes, change["bytes"], rows["c"], rows["d"])):
            print("%8d %10s %12s %7.2f%% %12s (%4.0f B/file) %12s %7.2f%%"
                  % (count, mb(new_bytes), mb(c_row[1]), 100.0 * c_row[1] / tree, mb(c_row[1] - new_bytes),
                     float(c_row[1] - new_bytes) / count, mb(d_row[1]), 100.0 * d_row[1] / tree))
        met = all(float(rows[key][1]) / tree_bytes <= TARGET_WRITTEN_SHARE
                  and rows[key][0] / rows["c"][0] <= TARGET_TIME_RATIO for key in ("d", "e"))
        sys.stdout.flush()
        # The 1 GiB trees' mounts emptied first: the memory trees need the room.
        empty(backing)
        empty(mount)
        memory_met = memory_figures(work, env, rng)
        return 0 if met and memory_met else 1
    finally:
        for mounted in (mount, disk):
            if os.path.ismount(mounted):
                subprocess.run(["umount", mounted], check=False)
        if loop:
            subprocess.run(["losetup", "-d", loop], check=False)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
