# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""hostile_state: fixtures, host snapshots and clean-up for tests/hostile/hostile.yml.

An action plugin, so it runs in the controller's own process: the test drives localhost only (connection
local, inside the mount namespace of scripts/test/hostile.sh), and each case needs it twice, which as a
module would cost two Python start-ups per case.

Arguments: action (baseline, prepare or check), workdir (the test's directory, where snapshots are kept),
scratch (the cases' fixture directory, emptied after each case), case (its vars and setup: every path and
backing in it is watched; its expect or expect_warning), outcome and host (check: 'accepted' or the failed
result of the run, and the host's name), setup (baseline: fixtures every case shares), commands (baseline: returns
those of them that are installed, as installed), warnings_file (where the
hostile_warnings callback writes what the run printed).

baseline makes the shared fixtures and records the host as every case starts from it. prepare makes the
case's fixtures and records the host before the case. check records it after, puts the host back as the
baseline found it (mounts, zram devices and swap of this run, fstab, the roles' directories, /srv), and
appends the case's verdict to verdicts.jsonl in the workdir: ok, expected, got, what changed (changes) and
what was undone that the fixtures do not explain (cleanup).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import time

from ansible.plugins.action import ActionBase

# Directories the roles write to. They are private copies inside the namespace; watched and cleaned anyway.
TRACKED = (
    "/etc/systemd/system",
    "/etc/tmpfiles.d",
    "/etc/ramdisk-provision",
    "/etc/modules-load.d",
    "/etc/modprobe.d",
    "/usr/local/libexec/ramdisk-provision",
    "/var/lib/ramdisk-backing",
    "/run/ramdisk-backing",
)
# Whole trees the namespace makes private: a case may leave nothing in them (/srv also holds the fixtures).
CLEANED = ("/srv",) + TRACKED
# Directories whose entries are listed when a case names a path there; elsewhere (/, /usr, /tmp, /run, ...)
# other processes add and remove entries, so only the path itself and its parent are compared.
LISTED = ("/srv", "/etc", "/usr/local", "/var/lib/ramdisk-backing", "/run/ramdisk-backing")
# Mounts a case could take away. The namespace starts with a copy of the host's mounts, and the kernel
# detaches a copy when its mount point is deleted on the host (a container going, another test cleaning
# up), so a mount that goes elsewhere says nothing about the case.
WATCHED_MOUNTS = ("/srv", "/run/lock")
MAX_ENTRIES = 20000
HASH_LIMIT = 64 * 1024 * 1024
ZRAM_CONTROL = "/sys/class/zram-control"


def _under(path, roots):
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def entry(path):
    """Type, mode, owner and content (checksum, link target or device) of PATH, never following it."""
    try:
        st = os.lstat(path)
    except (OSError, ValueError) as exc:
        return {"error": errno.errorcode.get(getattr(exc, "errno", None) or 0, type(exc).__name__)}
    out = {"mode": "%04o" % stat.S_IMODE(st.st_mode), "owner": "%d:%d" % (st.st_uid, st.st_gid)}
    if stat.S_ISLNK(st.st_mode):
        out.update(type="link", target=os.readlink(path))
    elif stat.S_ISDIR(st.st_mode):
        out.update(type="dir")
    elif stat.S_ISREG(st.st_mode):
        out.update(type="file", size=st.st_size)
        if st.st_size <= HASH_LIMIT:
            digest = hashlib.sha256()
            try:
                with open(path, "rb") as handle:
                    for block in iter(lambda: handle.read(1 << 20), b""):
                        digest.update(block)
                out["sha256"] = digest.hexdigest()
            except OSError as exc:
                out["sha256"] = "unreadable: %s" % exc
    elif stat.S_ISFIFO(st.st_mode):
        out.update(type="fifo")
    elif stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        out.update(type="char" if stat.S_ISCHR(st.st_mode) else "block",
                   device="%d:%d" % (os.major(st.st_rdev), os.minor(st.st_rdev)))
    else:
        out.update(type="other")
    return out


def listing(root, recursive=True):
    """{relative path: entry} of everything under ROOT (not ROOT itself), never following symlinks."""
    out = {}
    todo = [""]
    while todo and len(out) < MAX_ENTRIES:
        rel = todo.pop()
        try:
            names = sorted(os.listdir(os.path.join(root, rel) if rel else root))
        except (OSError, ValueError):
            continue
        for name in names:
            sub = os.path.join(rel, name) if rel else name
            info = entry(os.path.join(root, sub))
            out[sub] = info
            if recursive and info.get("type") == "dir":
                todo.append(sub)
    return out


def _run(argv):
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False,
                          env=dict(os.environ, LC_ALL="C"))
    return proc.returncode, proc.stdout.decode("utf-8", "backslashreplace"), proc.stderr.decode("utf-8", "backslashreplace")


def _read(path):
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def zram_devices():
    """The zram devices as zramN@INODE: the inode number of the device's sysfs directory tells a device made since
    from one that was there, where the kernel reused its number (the other lane of make test removes and makes
    devices on this kernel too)."""
    out = []
    try:
        names = sorted(name for name in os.listdir("/sys/block") if name.startswith("zram"))
    except OSError:
        return []
    for name in names:
        try:
            out.append("%s@%d" % (name, os.stat(os.path.join("/sys/block", name)).st_ino))
        except OSError:
            continue  # gone meanwhile
    return out


def _zram_name(ident):
    return ident.split("@", 1)[0]


def _unescape(field):
    """A /proc/self/mountinfo field with its octal escapes (\\040 for a space, ...) decoded."""
    out, i = bytearray(), 0
    raw = field.encode("utf-8", "surrogateescape")
    while i < len(raw):
        if raw[i:i + 1] == b"\\" and raw[i + 1:i + 4].isdigit() and len(raw[i + 1:i + 4]) == 3:
            out.append(int(raw[i + 1:i + 4], 8))
            i += 4
        else:
            out.append(raw[i])
            i += 1
    return out.decode("utf-8", "surrogateescape")


def mountinfo(proc="self"):
    """[{id, target, fstype, source, options}] in mount order, from /proc/PROC/mountinfo."""
    mounts = []
    for line in _read("/proc/%s/mountinfo" % proc).decode("utf-8", "surrogateescape").splitlines():
        left, _sep, right = line.partition(" - ")
        fields, tail = left.split(" "), right.split(" ")
        if len(fields) < 6 or len(tail) < 3:
            continue
        mounts.append({"id": int(fields[0]), "target": _unescape(fields[4]), "options": fields[5],
                       "fstype": tail[0], "source": _unescape(tail[1]), "super": tail[2]})
    return mounts


def named_paths(case):
    """Every absolute path and backing directory the case's variables and fixtures name."""
    found = []

    def walk(value):
        if isinstance(value, dict):
            for key, item in value.items():
                if key in ("path", "backing") and isinstance(item, str) and item.startswith("/"):
                    found.append(item)
                else:
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk((case or {}).get("vars"))
    for fixture in (case or {}).get("setup") or []:
        for kind in FIXTURES:
            if isinstance(fixture, dict) and isinstance(fixture.get(kind), str):
                found.append(fixture[kind])
    return sorted(set(found))


def snapshot(case, scratch):
    paths = {}
    for path in named_paths(case):
        parent = os.path.dirname(path.rstrip("/")) or "/"
        for one in (path, parent):
            if one in paths:
                continue
            info = entry(one)
            if info.get("type") == "dir" and _under(one, LISTED) and not _under(one, (scratch,)):
                info["entries"] = listing(one, recursive=False)
            if info.get("type") == "link":
                target = os.path.realpath(one)
                info["resolved"] = dict(entry(target), path=target)
                if info["resolved"].get("type") == "dir" and _under(target, LISTED):
                    info["resolved"]["entries"] = listing(target, recursive=False)
            paths[one] = info
    return {
        "fstab": hashlib.sha256(_read("/etc/fstab")).hexdigest(),
        "mounts": _run(["findmnt", "-rn", "-o", "TARGET,SOURCE,FSTYPE,OPTIONS"])[1].splitlines(),
        "swaps": _read("/proc/swaps").decode("utf-8", "backslashreplace").splitlines()[1:],
        "zram": zram_devices(),
        "tracked": dict((path, dict(listing(path), **{".": entry(path)})) for path in TRACKED),
        "scratch": listing(scratch),
        "paths": paths,
    }


def _target(findmnt_line):
    """The mount point of a line of findmnt -r, its \\xHH escapes decoded."""
    field = findmnt_line.split(" ", 1)[0]
    return re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), field)


def host_targets(workdir):
    """The mount points of the host's own mount namespace, read through the process of scripts/test/hostile.sh
    that made this namespace (its pid is in WORKDIR/pid); None when that cannot be read."""
    try:
        with open(os.path.join(workdir, "pid"), encoding="utf-8") as handle:
            pid = int(handle.read().strip())
        return set(mount["target"] for mount in mountinfo(pid))
    except (OSError, ValueError):
        return None


def differences(before, after, ours, watched):
    """Readable lines for everything that differs between two snapshots: (changes, notes). A mount that
    appears can only be this run's (the namespace's propagation is private). One that goes is a change when it
    is at or under WATCHED or WATCHED_MOUNTS, unless its mount point went from the host's own namespace too
    meanwhile (the snapshots' host_targets, when known): the kernel detaches our copy of a mount whose mount
    point another process removed on the host (a container stopping), which says nothing about the case, even
    one that names / or /var/lib. zram devices and swap are the kernel's, shared with every other test on it: a
    device or swap counts as a change when it is one of OURS (the new devices this run recorded or mounted);
    any other difference there is a note."""
    out, notes = [], []
    if before["fstab"] != after["fstab"]:
        out.append("/etc/fstab changed")
    out.extend("mount appeared: %s" % line for line in after["mounts"] if line not in before["mounts"])
    went = [line for line in before["mounts"] if line not in after["mounts"]]

    host_before, host_after = before.get("host_targets"), after.get("host_targets")
    host_went = set(host_before or ()) - set(host_after or ()) if host_before is not None and host_after is not None else set()

    def ours_went(line):
        target = _target(line)
        return _under(target, watched + WATCHED_MOUNTS) and target not in host_went
    out.extend("mount went: %s" % line for line in went if ours_went(line))
    elsewhere = [line for line in went if not ours_went(line)]
    if elsewhere:
        notes.append("%d mount(s) of the host went, such as %s (they went in the host's own namespace too, or lie "
                     "outside the case's paths)" % (len(elsewhere), _target(elsewhere[0])))
    for key, what in (("swaps", "swap"), ("zram", "zram device")):
        for verb, lines, other in (("appeared", after[key], before[key]), ("went", before[key], after[key])):
            for line in lines:
                if line in other:
                    continue
                name = _zram_name(line.split()[0].rsplit("/", 1)[-1] if line.split() else line)
                if name in ours:
                    out.append("%s %s: %s (made by this run)" % (what, verb, line))
                else:
                    notes.append("%s %s: %s (not recorded or mounted by this run: another test on this kernel?)"
                                 % (what, verb, line))
    pairs = [(path, before["tracked"].get(path, {}), after["tracked"].get(path, {})) for path in TRACKED]
    pairs.append(("scratch", before["scratch"], after["scratch"]))
    for root, old, new in pairs:
        for rel in sorted(set(old) | set(new)):
            if old.get(rel) != new.get(rel):
                out.append("%s: %s -> %s" % (os.path.join(root, rel) if rel != "." else root,
                                             _short(old.get(rel)), _short(new.get(rel))))
    for path in sorted(set(before["paths"]) | set(after["paths"])):
        old, new = before["paths"].get(path), after["paths"].get(path)
        if old != new:
            out.append("%r: %s -> %s" % (path, _short(old), _short(new)))
    return out, notes


def _short(info):
    if info is None:
        return "absent"
    text = json.dumps(info, sort_keys=True)
    return text if len(text) <= 400 else text[:400] + "..."


# Fixtures: each is a mapping whose kind key names the path.
FIXTURES = ("directory", "file", "link", "fifo", "device", "tmpfs")


def make_fixture(fixture):
    kind = next((k for k in FIXTURES if k in fixture), None)
    if kind is None:
        raise ValueError("a fixture needs one of %s: %r" % (", ".join(FIXTURES), fixture))
    path = fixture[kind]
    # /srv is private to the test's namespace and put back after every case.
    if not _under(os.path.normpath(path), ("/srv",)) or ".." in path.split("/"):
        raise ValueError("fixture %r is not under /srv" % path)
    parent = os.path.dirname(path)
    os.makedirs(parent, mode=0o755, exist_ok=True)
    if kind == "directory":
        os.makedirs(path, exist_ok=True)
        for name, content in sorted((fixture.get("files") or {}).items()):
            with open(os.path.join(path, name), "w", encoding="utf-8") as handle:
                handle.write(content)
    elif kind == "file":
        with open(path, "wb") as handle:
            if "size" in fixture:
                handle.write(os.urandom(int(fixture["size"])))
            else:
                handle.write(fixture.get("content", "a fixture file\n").encode("utf-8"))
    elif kind == "link":
        os.symlink(fixture["to"], path)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        major, minor = (int(part) for part in str(fixture.get("char", "1:3")).split(":"))
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(major, minor))
    elif kind == "tmpfs":
        os.makedirs(path, exist_ok=True)
        options = "size=%s,mode=%s" % (fixture.get("size", "8M"), fixture.get("mode", "0755"))
        code, _out, err = _run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", path])
        if code:
            raise ValueError("mount tmpfs at %r: %s" % (path, err.strip()))
        for name, content in sorted((fixture.get("files") or {}).items()):
            with open(os.path.join(path, name), "w", encoding="utf-8") as handle:
                handle.write(content)
    if kind != "link":
        if "mode" in fixture and kind != "tmpfs":
            os.chmod(path, int(str(fixture["mode"]), 8))
        if "owner" in fixture or "group" in fixture:
            os.chown(path, int(fixture.get("owner", -1)), int(fixture.get("group", -1)))


def _records():
    """zram device names that the roles recorded in the namespace's /etc/ramdisk-provision/zram."""
    names = set()
    conf = "/etc/ramdisk-provision/zram"
    for name in (os.listdir(conf) if os.path.isdir(conf) else []):
        for line in _read(os.path.join(conf, name)).decode("utf-8", "replace").splitlines():
            if line.startswith("DEVICE="):
                names.add(line.split("=", 1)[1].strip())
    return names


def _remove(path):
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
        return None
    except OSError as exc:
        return "could not remove %r: %s" % (path, exc)


def restore(baseline, fixture_mounts, scratch, workdir):
    """Put the namespace and the kernel back as BASELINE found them; return what was undone that the
    case's fixtures (FIXTURE_MOUNTS, the scratch directory) do not explain."""
    done = []
    known = set(m["id"] for m in baseline["mountinfo"])
    mounted = mountinfo()
    ours_zram = set(_zram_name(ident) for ident in zram_devices() if ident not in baseline["zram"])
    ours_zram &= _records() | set(m["source"][5:] for m in mounted if m["source"].startswith("/dev/zram"))
    # Swap is global: only swap on a zram device of this run is turned off.
    for line in _read("/proc/swaps").decode("utf-8", "replace").splitlines()[1:]:
        device = line.split()[0] if line.split() else ""
        if device.startswith("/dev/zram") and device[5:] in ours_zram:
            code, _out, err = _run(["swapoff", device])
            done.append("swapoff %s%s" % (device, "" if code == 0 else ": " + err.strip()))
    for mount in reversed(mounted):
        if mount["id"] in known:
            continue
        code, _out, err = _run(["umount", mount["target"]])
        if code:
            code, _out, err = _run(["umount", "-l", mount["target"]])
        if mount["id"] not in fixture_mounts or code:
            done.append("umount %r (%s)%s" % (mount["target"], mount["fstype"], "" if code == 0 else ": " + err.strip()))
    now = set(m["id"] for m in mountinfo())
    for mount in baseline["mountinfo"]:
        if mount["id"] not in now and mount["fstype"] in ("tmpfs", "ramfs") and _under(mount["target"], WATCHED_MOUNTS):
            os.makedirs(mount["target"], exist_ok=True)
            code, _out, err = _run(["mount", "-t", mount["fstype"], "-o", mount["super"], mount["source"], mount["target"]])
            done.append("mount %s again at %r%s" % (mount["fstype"], mount["target"], "" if code == 0 else ": " + err.strip()))
    for name in sorted(ours_zram):
        for _attempt in range(25):
            try:
                with open(os.path.join(ZRAM_CONTROL, "hot_remove"), "w", encoding="utf-8") as handle:
                    handle.write(name[len("zram"):])
                done.append("hot_remove %s" % name)
                break
            except OSError as exc:
                if exc.errno != errno.EBUSY:
                    done.append("hot_remove %s: %s" % (name, exc))
                    break
                time.sleep(0.2)
        else:
            done.append("hot_remove %s: still busy" % name)
        if os.path.exists(os.path.join("/sys/block", name)):
            # scripts/test/hostile.sh tries again on its way out.
            with open(os.path.join(workdir, "zram-left"), "a", encoding="utf-8") as handle:
                handle.write(name + "\n")
    if _read("/etc/fstab") != baseline["fstab_bytes"].encode("utf-8", "surrogateescape"):
        with open("/etc/fstab", "wb") as handle:
            handle.write(baseline["fstab_bytes"].encode("utf-8", "surrogateescape"))
        done.append("/etc/fstab restored")
    # The scratch directory holds only fixtures and what the role made there (which the snapshots show).
    if os.path.isdir(scratch):
        for name in os.listdir(scratch):
            done.append(_remove(os.path.join(scratch, name)))
    for root in CLEANED:
        old = baseline["cleaned"].get(root)
        if old is None:
            if os.path.lexists(root):
                done.append(_remove(root) or "removed %s" % root)
            continue
        new = listing(root)
        for rel in sorted(set(new) - set(old), key=lambda r: -r.count("/")):
            if os.path.lexists(os.path.join(root, rel)):
                done.append(_remove(os.path.join(root, rel)) or "removed %s" % os.path.join(root, rel))
        for rel, info in sorted(old.items()):
            path = os.path.join(root, rel)
            now_info = entry(path)
            if now_info == info or info.get("type") == "link":
                continue
            if now_info.get("type") != info.get("type"):
                done.append("%r is a %s now, was a %s: not restored" % (path, now_info.get("type"), info.get("type")))
                continue
            uid, gid = (int(part) for part in info["owner"].split(":"))
            os.lchown(path, uid, gid)
            os.chmod(path, int(info["mode"], 8))
            if entry(path) != info:
                done.append("%r: content changed, not restored" % path)
            else:
                done.append("%r: owner and mode restored" % path)
    return [line for line in done if line]


def outcome_text(outcome):
    """The error of a failed run (its result), or 'accepted'; a failed loop says why in its items."""
    if not isinstance(outcome, dict):
        return str(outcome)
    items = [item.get("msg", "") for item in outcome.get("results") or [] if isinstance(item, dict) and item.get("failed")]
    message = items or outcome.get("msg") or "failed without a message"
    return "\n".join(str(line) for line in message) if isinstance(message, list) else str(message)


def verdict(case, outcome, host, changes, warnings):
    """A refusal case passes when the run failed with a message that names the host and holds every fragment of
    expect; a warning case when the run succeeded and one warning holds every fragment of expect_warning. Both
    only when nothing changed."""
    warn = "expect_warning" in case
    expect = case["expect_warning"] if warn else case["expect"]
    fragments = [expect] if isinstance(expect, str) else list(expect)
    text = outcome_text(outcome)
    accepted = text == "accepted"
    if warn:
        answered = accepted and any(all(f in w for f in fragments) for w in warnings)
        got = "accepted, " + ("warnings: %s" % json.dumps(warnings) if warnings else "no warning")
    else:
        prefix = "Host %s:" % host
        if case.get("refused_by") == "argument_spec":
            named = text.startswith("Validation of arguments failed")
        else:
            named = prefix in text
        answered = not accepted and named and all(f in text for f in fragments)
        got = "accepted" if accepted else text
    return {"name": case.get("name"), "source": case.get("source"), "ok": answered and not changes,
            "expected": ("warning " if warn else "") + json.dumps(fragments), "got": got}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        args = self._task.args
        if getattr(self._connection, "transport", None) != "local":
            return dict(result, failed=True, msg="hostile_state works on localhost only (connection local)")
        action, workdir, scratch = args.get("action"), args.get("workdir"), args.get("scratch")
        case = args.get("case") or {}
        if action not in ("baseline", "prepare", "check") or not workdir or not scratch:
            return dict(result, failed=True, msg="hostile_state needs action (baseline, prepare, check), workdir and scratch")
        try:
            result.update(self._act(action, workdir, scratch, case, args))
        except (OSError, ValueError, KeyError) as exc:
            result.update(failed=True, msg="hostile_state %s: %s" % (action, exc))
        return result

    @staticmethod
    def _act(action, workdir, scratch, case, args):
        baseline_file = os.path.join(workdir, "baseline.json")
        before_file = os.path.join(workdir, "before.json")
        warnings_file = args.get("warnings_file")
        if action == "baseline":
            for fixture in args.get("setup") or []:
                make_fixture(fixture)
            os.makedirs(scratch, mode=0o755, exist_ok=True)
            baseline = {
                "mountinfo": mountinfo(),
                "zram": zram_devices(),
                "fstab_bytes": _read("/etc/fstab").decode("utf-8", "surrogateescape"),
                "cleaned": dict((root, listing(root)) for root in CLEANED if os.path.lexists(root)),
            }
            with open(baseline_file, "w", encoding="utf-8") as handle:
                json.dump(baseline, handle)
            return dict(changed=True, mounts=len(baseline["mountinfo"]), zram=baseline["zram"],
                        installed=[name for name in args.get("commands") or [] if shutil.which(name)])
        if action == "prepare":
            for fixture in case.get("setup") or []:
                make_fixture(fixture)
            # The host's mount points first, ours after (and the other way round after the case): a mount of the
            # host that another process removes meanwhile is then either in neither before-list, or in both (and
            # gone from the host's after-list), never ours alone, which would count it against the case.
            targets = host_targets(workdir)
            before = snapshot(case, scratch)
            before["mount_ids"] = [m["id"] for m in mountinfo()]
            before["host_targets"] = sorted(targets) if targets is not None else None
            with open(before_file, "w", encoding="utf-8") as handle:
                json.dump(before, handle)
            if warnings_file:
                open(warnings_file, "w", encoding="utf-8").close()
            return dict(changed=True)
        with open(before_file, encoding="utf-8") as handle:
            before = json.load(handle)
        after = snapshot(case, scratch)
        seen = []
        if warnings_file and os.path.exists(warnings_file):
            seen = [json.loads(line) for line in _read(warnings_file).decode("utf-8").splitlines() if line]
        with open(baseline_file, encoding="utf-8") as handle:
            baseline = json.load(handle)
        new_zram = set(_zram_name(ident) for ident in set(after["zram"]) - set(before["zram"]))
        ours = new_zram & (_records() | set(m["source"][5:] for m in mountinfo() if m["source"].startswith("/dev/zram")))
        watched = tuple(named_paths(case))
        watched += tuple(os.path.realpath(path) for path in named_paths(case) if "\0" not in path and os.path.islink(path))
        targets = host_targets(workdir)
        after["host_targets"] = sorted(targets) if targets is not None else None
        changes, notes = differences(before, after, ours, watched)
        cleanup = restore(baseline, set(before["mount_ids"]), scratch, workdir)
        found = verdict(case, args.get("outcome"), args.get("host"), changes, seen)
        # Anything the clean-up had to undo beyond the fixtures is a change too, even if no snapshot showed it.
        found.update(ok=found["ok"] and not cleanup, changes=changes, notes=notes, cleanup=cleanup)
        with open(os.path.join(workdir, "verdicts.jsonl"), "a", encoding="utf-8") as handle:
            handle.write(json.dumps(found) + "\n")
        return dict(changed=False, verdict=found)
