# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""zram: sysfs parsing, algorithm choice and the decision what to do with a device.

Pure logic: every function takes text, dicts or a reader callable, so tests feed fixtures.
Field names follow the kernel's Documentation/admin-guide/blockdev/zram.rst.
"""

from __future__ import annotations

import os
import re

from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths
from ansible_collections.ramdisk.provision.plugins.module_utils._procfs import (
    kernel_at_least,
    parse_kernel_release,
    parse_zram_algorithms,
)
from ansible_collections.ramdisk.provision.plugins.module_utils._size import format_size, round_up_pages

MIB = 1024 ** 2

# Best first: zstd packs tightest, lz4 is fastest, lzo-rle beats lzo on zero-heavy pages.
ALGORITHM_PREFERENCE = ("zstd", "lz4", "lzo-rle", "lzo")

# mm_stat columns in the kernel's order; huge_pages_since is missing before Linux 5.15.
MM_STAT_FIELDS = (
    "orig_data_size",  # bytes stored, uncompressed
    "compr_data_size",  # bytes after compression
    "mem_used_total",  # bytes of RAM used, allocator overhead included
    "mem_limit",  # bytes; 0 means no limit
    "mem_used_max",  # bytes, high-water mark
    "same_pages",  # pages that were one repeated value (no memory used)
    "pages_compacted",  # pages freed by compaction
    "huge_pages",  # pages stored uncompressed
    "huge_pages_since",  # huge pages since the last reset
)

# Swap cycling rule: swapoff pulls every used swap page back into RAM. It is only done when
# MemAvailable >= used * 5/4 + 256 MiB: a quarter on top for what moves while it runs, and a floor
# so a nearly empty device on a nearly full host still waits for a reboot.
SWAP_CYCLE_NUMERATOR = 5
SWAP_CYCLE_DENOMINATOR = 4
SWAP_CYCLE_MARGIN_BYTES = 256 * MIB

# MAX_SWAPFILES (include/linux/swap.h): a swap entry in a page table keeps its swap type in 5 bits, so there are 32
# types, and the kernel keeps some of them for entries that are not swap: device-private memory (4.14: 2, 5.14: 4
# with device-exclusive entries, 6.15: 3, counted as 4), page migration (3 since 5.19, counted as 3 throughout),
# hardware-poisoned pages, PTE markers (5.19 with CONFIG_PTE_MARKER, always since 6.2) and swap-in errors (5.19 to
# 6.1). Nothing in /proc or /sys says how many, so max_swap_areas() works it out from the kernel's version and
# config, each range at its largest, and all of them where the config cannot be read: the figure is never above
# the kernel's (28 on a 6.18 without device-private memory and memory failure, measured; 23 on a 6.12 and 22 on a
# 6.1 with all of them). Past it, swapon fails with EPERM, after the devices before it were set up.
SWAP_TYPES = 32
# zram's hot_add has no limit of its own (an IDR without a bound; num_devices only sets how many are made at load),
# so the swap areas are the limit a request of zram devices meets.

# zram's own compressors since Linux 6.12 (drivers/block/zram/zcomp.c, in its order): CONFIG_ZRAM_BACKEND_<X>.
ZRAM_BACKEND_NAMES = (("LZO", ("lzo-rle", "lzo")), ("LZ4", ("lz4",)), ("LZ4HC", ("lz4hc",)), ("ZSTD", ("zstd",)),
                      ("DEFLATE", ("deflate",)), ("842", ("842",)))
# Before 6.12 zram takes any compressor of the crypto API (crypto_has_comp, which loads its module), such as these.
CRYPTO_COMPRESSORS = (("CONFIG_CRYPTO_LZO", ("lzo", "lzo-rle")), ("CONFIG_CRYPTO_LZ4", ("lz4",)),
                      ("CONFIG_CRYPTO_LZ4HC", ("lz4hc",)), ("CONFIG_CRYPTO_ZSTD", ("zstd",)),
                      ("CONFIG_CRYPTO_DEFLATE", ("deflate",)), ("CONFIG_CRYPTO_842", ("842",)))
_CRYPTO_COMPRESSION_TYPES = ("compression", "scomp", "acomp")

ACTIONS = ("ok", "create", "configure", "reset-then-configure", "cycle-swap", "reboot-required")
_DEVICE_RE = re.compile(r"^zram(\d+)$")


class ZramError(ValueError):
    """A zram request that cannot be met; the message is a plain sentence."""


def device_number(name):
    """3 for 'zram3'; None when ``name`` is not a zram device name."""
    match = _DEVICE_RE.match(name or "")
    return int(match.group(1)) if match else None


def parse_comp_algorithm(text):
    """comp_algorithm (``lzo [lzo-rle] lz4``) as {'algorithms': [...], 'selected': name}."""
    return parse_zram_algorithms(text or "")


def parse_mm_stat(text):
    """mm_stat as a dict of the kernel's fields (None for columns this kernel lacks), plus
    compression_ratio = orig_data_size / compr_data_size, rounded to 2 places (None when nothing is stored)."""
    values = [int(word) for word in (text or "").split() if word.lstrip("-").isdigit()]
    result = dict((name, values[index] if index < len(values) else None) for index, name in enumerate(MM_STAT_FIELDS))
    result["compression_ratio"] = compression_ratio(result["orig_data_size"], result["compr_data_size"])
    return result


def compression_ratio(orig, compr):
    if not orig or not compr:
        return None
    return round(float(orig) / float(compr), 2)


def parse_dev(text):
    """(major, minor) from a sysfs ``dev`` file (``253:0``), or None."""
    major, sep, minor = (text or "").strip().partition(":")
    if not sep or not major.isdigit() or not minor.isdigit():
        return None
    return int(major), int(minor)


def lowest_free_number(names):
    """The number hot_add will give next: the kernel allocates the lowest free id."""
    used = set(number for number in (device_number(name) for name in names) if number is not None)
    number = 0
    while number in used:
        number += 1
    return number


def choose_algorithm(wanted, offered, allow_fallback, preference=ALGORITHM_PREFERENCE):
    """Pick the compression algorithm to set.

    Returns (algorithm, warning): warning is a sentence when a fallback was taken, else None.
    Raises ZramError naming what is offered when ``wanted`` is not offered and no fallback is allowed.
    """
    offered = list(offered or [])
    if not offered:
        raise ZramError("the kernel offers no zram compression algorithm (comp_algorithm is empty)")
    if wanted in offered:
        return wanted, None
    if not allow_fallback:
        raise ZramError(
            "the kernel does not offer zram algorithm '%s'; it offers: %s. Choose one of those, or allow "
            "allow_algorithm_fallback to take the best offered" % (wanted, ", ".join(offered))
        )
    ranked = [name for name in preference if name in offered] or offered
    chosen = ranked[0]
    return chosen, "zram algorithm '%s' is not offered by the kernel (it offers: %s); using '%s' instead." % (
        wanted, ", ".join(offered), chosen)


def read_device(name, read):
    """Current state of /sys/block/<name> through ``read(path) -> text or None``.

    Returns None when the device does not exist, else a dict: disksize, algorithm, algorithms,
    mem_limit, mm_stat, dev (major, minor) and initialised.
    """
    base = "/sys/block/%s/" % name
    disksize = read(base + "disksize")
    if disksize is None:
        return None
    algorithms = parse_comp_algorithm(read(base + "comp_algorithm"))
    mm_stat = parse_mm_stat(read(base + "mm_stat"))
    size = int(disksize.strip() or 0)
    return {
        "name": name,
        "disksize": size,
        "initialised": size > 0,
        "algorithm": algorithms["selected"],
        "algorithms": algorithms["algorithms"],
        # mem_limit is write-only in sysfs; mm_stat carries the value in force.
        "mem_limit": mm_stat["mem_limit"] or 0,
        "mm_stat": mm_stat,
        "dev": parse_dev(read(base + "dev")),
    }


def device_usage(name, dev, swaps, mountinfo, holders=(), busy=False, swap_devs=None):
    """How a device is in use, from parsed /proc/swaps and /proc/self/mountinfo.

    dev: (major, minor) of the device or None; swap_devs: {swap path: (major, minor)} where known,
    so a swap opened through another path (a by-id link) still counts; busy: an exclusive open failed.
    """
    path = "/dev/%s" % name
    swap = None
    for entry in swaps:
        if entry["path"] == path or (dev is not None and (swap_devs or {}).get(entry["path"]) == dev):
            swap = entry
            break
    mountpoints = [
        mount["mount_point"] for mount in mountinfo
        if mount["source"] == path or (dev is not None and (mount["major"], mount["minor"]) == tuple(dev))
    ]
    if swap is not None:
        used_as = "swap"
    elif mountpoints:
        used_as = "filesystem"
    elif holders or busy:
        used_as = "other"
    else:
        used_as = "unused"
    return {
        "used_as": used_as,
        "swap_active": swap is not None,
        "swap_used_bytes": swap["used_bytes"] if swap else 0,
        "swap_priority": swap["priority"] if swap else None,
        "mountpoints": mountpoints,
        "holders": list(holders),
        "busy": bool(busy),
    }


def swap_devs(swaps, stat):
    """{swap path: (major, minor)} for the swaps that are block devices; ``stat`` is os.stat or a stand-in."""
    result = {}
    for entry in swaps:
        try:
            st = stat(entry["path"])
        except OSError:
            continue
        if st.st_rdev:
            result[entry["path"]] = (os.major(st.st_rdev), os.minor(st.st_rdev))
    return result


def swap_cycle_fits(swap_used_bytes, mem_available_bytes):
    """The swap cycling rule (see SWAP_CYCLE_*): True when free memory can take the pages back."""
    return mem_available_bytes >= swap_cycle_need(swap_used_bytes)


def swap_cycle_need(swap_used_bytes):
    return swap_used_bytes * SWAP_CYCLE_NUMERATOR // SWAP_CYCLE_DENOMINATOR + SWAP_CYCLE_MARGIN_BYTES


def decide(current, wanted, usage):
    """What to do to bring a device to ``wanted``.

    current: read_device() output, or None when the device does not exist.
    wanted: {'disksize': bytes, 'algorithm': name or None (keep), 'mem_limit': bytes or None (keep)}.
    usage: device_usage() output plus 'mem_available_bytes'.

    Returns {'action', 'reason', 'changes': {attr: [before, after]}, 'steps': [(attr, value), ...],
    'needs_reset'}. Steps are in the order the kernel needs: comp_algorithm before disksize (it refuses
    a new algorithm once disksize is set), mem_limit last.
    """
    disksize = round_up_pages(wanted["disksize"])
    mem_limit = None if wanted.get("mem_limit") is None else round_up_pages(wanted["mem_limit"])
    algorithm = wanted.get("algorithm")
    result = {"action": "ok", "reason": None, "changes": {}, "steps": [], "needs_reset": False}

    if current is None or not current["initialised"]:
        result["action"] = "create" if current is None else "configure"
        before = current or {"disksize": 0, "algorithm": None, "mem_limit": 0}
        if algorithm is not None and algorithm != before["algorithm"]:
            result["changes"]["algorithm"] = [before["algorithm"], algorithm]
            result["steps"].append(("comp_algorithm", algorithm))
        result["changes"]["disksize"] = [before["disksize"], disksize]
        result["steps"].append(("disksize", disksize))
        if mem_limit is not None and mem_limit != before["mem_limit"]:
            result["changes"]["mem_limit"] = [before["mem_limit"], mem_limit]
            result["steps"].append(("mem_limit", mem_limit))
        return result

    # An initialised device: the algorithm and disksize only change through a reset.
    reset_changes = {}
    if disksize != current["disksize"]:
        reset_changes["disksize"] = [current["disksize"], disksize]
    if algorithm is not None and algorithm != current["algorithm"]:
        reset_changes["algorithm"] = [current["algorithm"], algorithm]
    limit_change = mem_limit is not None and mem_limit != current["mem_limit"]
    result["changes"] = dict(reset_changes)
    if limit_change:
        result["changes"]["mem_limit"] = [current["mem_limit"], mem_limit]

    if not reset_changes:
        if limit_change:
            # mem_limit can be changed on a live device.
            result["action"] = "configure"
            result["steps"] = [("mem_limit", mem_limit)]
        return result

    # A reset puts the kernel's default algorithm back and lifts mem_limit; restore what was not asked.
    keep_algorithm = algorithm if algorithm is not None else current["algorithm"]
    keep_limit = mem_limit if mem_limit is not None else current["mem_limit"]
    steps = [("reset", 1)]
    if keep_algorithm:
        steps.append(("comp_algorithm", keep_algorithm))
    steps.append(("disksize", disksize))
    if keep_limit:
        steps.append(("mem_limit", keep_limit))
    result["steps"] = steps
    result["needs_reset"] = True
    what = " and ".join(
        "%s %s -> %s" % (attr, _show(attr, change[0]), _show(attr, change[1]))
        for attr, change in sorted(reset_changes.items()))
    name = current.get("name") or "the device"

    if usage.get("mountpoints"):
        result["action"] = "reboot-required"
        result["reason"] = (
            "%s holds a file system mounted at %s; a mounted file system is never reset under its data, so "
            "%s takes effect after a reboot (or after you unmount it)." % (name, ", ".join(usage["mountpoints"]), what))
        return result
    if usage.get("swap_active"):
        used = usage.get("swap_used_bytes") or 0
        available = usage.get("mem_available_bytes") or 0
        need = swap_cycle_need(used)
        if swap_cycle_fits(used, available):
            result["action"] = "cycle-swap"
            result["reason"] = (
                "%s is active swap with %s in use; MemAvailable %s covers the %s needed (used * 1.25 + 256 MiB), "
                "so it can be swapped off, reset and set up again for %s."
                % (name, format_size(used), format_size(available), format_size(need), what))
        else:
            result["action"] = "reboot-required"
            result["reason"] = (
                "%s is active swap with %s in use and MemAvailable %s is below the %s needed to take its pages "
                "back (used * 1.25 + 256 MiB); %s takes effect after a reboot."
                % (name, format_size(used), format_size(available), format_size(need), what))
        return result
    if usage.get("holders") or usage.get("busy"):
        held = ", ".join(usage.get("holders") or []) or "another process"
        result["action"] = "reboot-required"
        result["reason"] = (
            "%s is open (held by %s), so it cannot be reset; %s takes effect after a reboot (or once it is "
            "released)." % (name, held, what))
        return result
    result["action"] = "reset-then-configure"
    result["reason"] = "%s is initialised but unused; it is reset and set up again for %s." % (name, what)
    return result


def _show(attr, value):
    if attr in ("disksize", "mem_limit") and isinstance(value, int):
        return format_size(value)
    return str(value)


def removal_blocker(name, usage):
    """A sentence saying why ``name`` must not be removed, or None when it is free."""
    if usage.get("swap_active"):
        return "%s is active swap; run swapoff /dev/%s (and drop it from fstab) before state=absent." % (name, name)
    if usage.get("mountpoints"):
        return "%s is mounted at %s; unmount it before state=absent." % (name, ", ".join(usage["mountpoints"]))
    if usage.get("holders") or usage.get("busy"):
        held = ", ".join(usage.get("holders") or []) or "another process"
        return "%s is open (held by %s); release it before state=absent." % (name, held)
    return None


def unavailable_reason(control_exists, devices, sys_read_only, container=None):
    """A sentence saying why zram cannot be driven here and what to do, or None when it can."""
    where = " (this looks like a %s container)" % container if container else ""
    if not control_exists and not devices:
        return (
            "zram is not available on this host%s: %s and /sys/block/zram* are missing. "
            "Load the module with 'modprobe zram' (or use a kernel with CONFIG_ZRAM); in a container, load it "
            "on the host and bind the host's /sys and /dev (-v /sys:/sys:rw -v /dev:/dev)." % (where, _host_paths.ZRAM_CONTROL))
    if sys_read_only:
        return (
            "zram cannot be configured on this host%s: /sys is mounted read-only. In a container, bind the "
            "host's /sys read-write and its /dev (-v /sys:/sys:rw -v /dev:/dev), or manage zram on the host."
            % where)
    return None


def parse_kernel_config(text):
    """A kernel config (/proc/config.gz, /boot/config-<release>) as {option: value}; options not set are left out."""
    options = {}
    for line in (text or "").splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key.startswith("CONFIG_"):
            options[key] = value.strip().strip('"')
    return options


def max_swap_areas(release, config):
    """(the most swap areas this kernel takes, how that was worked out); see SWAP_TYPES.

    CONFIG: parse_kernel_config() output, or None when the config cannot be read.
    """
    version = parse_kernel_release(release or "")

    def since(minimum):
        # A release that cannot be read counts as one that has it.
        return not version or kernel_at_least(release, minimum)

    def option(name):
        return config is None or config.get(name) == "y"

    reserved = []
    if since((4, 14)) and option("CONFIG_DEVICE_PRIVATE"):
        reserved.append((4 if since((5, 14)) else 2, "device-private memory"))
    if option("CONFIG_MIGRATION"):
        reserved.append((3, "page migration"))
    if option("CONFIG_MEMORY_FAILURE"):
        reserved.append((1, "hardware-poisoned pages"))
    after_6_2 = bool(version) and kernel_at_least(release, (6, 2))
    if since((5, 19)) and (after_6_2 or option("CONFIG_PTE_MARKER")):
        reserved.append((1, "PTE markers"))
    if since((5, 19)) and not after_6_2:
        reserved.append((1, "swap-in errors"))
    limit = SWAP_TYPES - sum(count for count, _what in reserved)
    basis = "%d swap types less %s, on Linux %s %s" % (
        SWAP_TYPES, ", ".join("%d for %s" % item for item in reserved) or "none", release or "(version unknown)",
        "as its config has it" if config is not None else "with every option counted, as its config is unreadable")
    return limit, basis


def parse_crypto_compressors(text):
    """The names of the compression algorithms in /proc/crypto, in order, once each."""
    names = []
    name = None
    for line in (text or "").splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            name = None
            continue
        key, value = key.strip(), value.strip()
        if key == "name":
            name = value
        elif key == "type" and value in _CRYPTO_COMPRESSION_TYPES and name and name not in names:
            names.append(name)
    return names


def kernel_zram_algorithms(release, config, crypto_text=None, module_present=None):
    """(algorithms, source) zram takes on this kernel, for when no zram device shows its comp_algorithm.

    Since 6.12 zram has its own compressors, chosen at build time (CONFIG_ZRAM_BACKEND_*), and /proc/crypto says
    nothing about them; only the config tells. Before, zram takes what the crypto API has, built in or as a module.
    CONFIG: parse_kernel_config() or None; CRYPTO_TEXT: /proc/crypto; MODULE_PRESENT(name): the module is there to
    load (None: modules cannot be loaded). Returns ([], None) when it cannot be known.
    """
    if config is not None and any(key.startswith("CONFIG_ZRAM_BACKEND_") for key in config):
        names = [name for suffix, group in ZRAM_BACKEND_NAMES if config.get("CONFIG_ZRAM_BACKEND_" + suffix) == "y"
                 for name in group]
        # A vendor's own compressors (CONFIG_ZRAM_BACKEND_LZ4K and the like) come after, by their own names.
        known = set("CONFIG_ZRAM_BACKEND_" + suffix for suffix, _group in ZRAM_BACKEND_NAMES)
        names += [key[len("CONFIG_ZRAM_BACKEND_"):].lower() for key, value in sorted(config.items())
                  if key.startswith("CONFIG_ZRAM_BACKEND_") and key not in known and value == "y"
                  and key != "CONFIG_ZRAM_BACKEND_FORCE_ANY"]
        return (names, "the kernel's config (CONFIG_ZRAM_BACKEND_*)") if names else ([], None)
    if not parse_kernel_release(release or "") or kernel_at_least(release, (6, 12)):
        return [], None
    if config is not None:
        names = [name for option, group in CRYPTO_COMPRESSORS
                 if config.get(option) == "y" or (config.get(option) == "m" and module_present is not None)
                 for name in group]
        source = "the kernel's config (CONFIG_CRYPTO_*)"
    else:
        names = parse_crypto_compressors(crypto_text)
        if module_present is not None:
            names += [name for _option, group in CRYPTO_COMPRESSORS for name in group
                      if name not in names and module_present(name)]
        source = "/proc/crypto and the kernel's modules"
    if not kernel_at_least(release, (5, 1)):
        # lzo-rle came with 5.1.
        names = [name for name in names if name != "lzo-rle"]
    return (names, source) if names else ([], None)
