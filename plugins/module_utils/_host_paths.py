# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every path and name the collection uses on a managed host, in one place.

Modules and module_utils import these; the host copies of the metrics collector and the persist helper get them
too (a copy of this file beside _metrics.py; the helper's PLACES written from them on install). It needs only the
standard library. tests/unit/test_host_paths_once.py fails on a copy of any of these paths elsewhere.
"""

from __future__ import annotations

# What survives a reboot: records of what the collection made, and its configs.
ETC_DIR = "/etc/ramdisk-provision"
RECORD_DIR = ETC_DIR + "/mounts"
ZRAM_RECORD_DIR = ETC_DIR + "/zram"
PERSIST_CONF_DIR = ETC_DIR + "/persist"

# The intent journal: what a run is about to do and how to undo it, read first by every run. On disk, so that
# file steps left half done by a power cut are found after the reboot.
STATE_DIR = "/var/lib/ramdisk-provision"
JOURNAL = STATE_DIR + "/journal.jsonl"
# Texts too large for a journal line (the persist helper, old file texts), one file per text, named by its sha256.
JOURNAL_BLOBS = STATE_DIR + "/journal-blobs"

# What lives only as long as the boot: the host lock, and the private mounts a change works through.
RUN_DIR = "/run/ramdisk-provision"
LOCK = RUN_DIR + "/lock"
# A private bind of a migrated directory's parent, which shows the disk copy under a RAM mount.
STAGE_ROOT = RUN_DIR + "/lower"
# A private mount under which a migrate fills its new RAM mount before moving it over the directory.
NEW_ROOT = RUN_DIR + "/new"

# persist: the helper its units run (_persist_helper.py's PLACES name the same places), what a restore leaves
# for the syncs of that boot, the result of each sync (read by the metrics collector), and the collector.
LIBEXEC_DIR = "/usr/local/libexec/ramdisk-provision"
PERSIST_HELPER = LIBEXEC_DIR + "/persist"
# Its copy engine: plugins/module_utils/_persist_delta.py, which the helper loads from here.
PERSIST_DELTA = LIBEXEC_DIR + "/persist-delta.py"
PERSIST_STATE_DIR = RUN_DIR + "/persist"
PERSIST_STATUS_DIR = STATE_DIR + "/persist"
# The metrics collector (ramdisk_metrics): _metrics.py with the modules it imports (_procfs.py, this file) beside it;
# the config the ramdisk role writes for it, the peak record it keeps (ramdisk_facts reads it too), and the command
# that prints its table.
METRICS_DIR = LIBEXEC_DIR + "/metrics"
METRICS_COLLECTOR = METRICS_DIR + "/_metrics.py"
METRICS_CONFIG = ETC_DIR + "/metrics.json"
METRICS_PEAK = STATE_DIR + "/metrics-peak.json"
STATUS_COMMAND = "/usr/local/sbin/ramdisk-status"

# Where root reads what it acts on (records, the journal, the lock, the helpers its units run): each, and every
# directory above it, must be writable by root alone (_trust, docs/security.md).
STATE_DIRS = (ETC_DIR, STATE_DIR, RUN_DIR, LIBEXEC_DIR)

FSTAB = "/etc/fstab"
UNIT_DIR = "/etc/systemd/system"
TMPFILES_DIR = "/etc/tmpfiles.d"
# journald's drop-ins: a persisted mount that holds the journal gives journald a size limit that fits it.
JOURNALD_DROPIN_DIR = "/etc/systemd/journald.conf.d"
TMP_DROPIN_DIR = UNIT_DIR + "/tmp.mount.d"
TMP_DROPIN = TMP_DROPIN_DIR + "/50-ramdisk-provision.conf"
# The boot-time copy unit's [Install] WantedBy: enabling it makes a link here.
SEED_WANTS = UNIT_DIR + "/local-fs.target.wants"
# There while systemd runs as PID 1 (sd_booted(3)); units generated at boot (fstab's) live here too.
SYSTEMD_RUN_DIR = "/run/systemd/system"
# Where a mount unit made by hand or shipped by the distribution is found (fstab's own are generated under /run).
MOUNT_UNIT_DIRS = (UNIT_DIR, SYSTEMD_RUN_DIR, "/usr/lib/systemd/system", "/lib/systemd/system")
VENDOR_TMP_UNITS = ("/usr/lib/systemd/system/tmp.mount", "/lib/systemd/system/tmp.mount")


# zram: the kernel's control files (hot_add, hot_remove); the boot-time setup script and unit (units persistence),
# zram-generator where Debian's systemd-zram-generator installs it (/lib is /usr/lib on merged-/usr systems) and its
# drop-ins (generator persistence); zswap's switch, which zram swap wants off.
ZRAM_CONTROL = "/sys/class/zram-control"
ZRAM_SETUP = LIBEXEC_DIR + "/zram-setup"
ZRAM_UNIT = UNIT_DIR + "/ramdisk-zram@.service"
# The unit's [Install] WantedBy: enabling ramdisk-zram@NAME.service makes a link here.
ZRAM_UNIT_WANTS = UNIT_DIR + "/local-fs-pre.target.wants"
ZRAM_GENERATORS = ("/usr/lib/systemd/system-generators/zram-generator", "/lib/systemd/system-generators/zram-generator")
ZRAM_GENERATOR_DIR = "/etc/systemd/zram-generator.conf.d"
ZSWAP_ENABLED = "/sys/module/zswap/parameters/enabled"

# brd: the module's sysfs directory (there while it is loaded) and parameters; the files that load it at boot
# with its disks (systemd-modules-load), named as community.general.modprobe `persistent: present` names them, so
# hosts set up by earlier versions of the brd role are taken over.
BRD_MODULE = "/sys/module/brd"
BRD_PARAMETERS = BRD_MODULE + "/parameters"
BRD_MODULES_LOAD = "/etc/modules-load.d/brd.conf"
BRD_MODPROBE = "/etc/modprobe.d/brd.conf"


def for_roles():
    """The few paths the roles' YAML names (the metrics collector's files), returned by ramdisk_plan as host_paths."""
    return {
        "metrics_dir": METRICS_DIR,
        "metrics_collector": METRICS_COLLECTOR,
        "metrics_config": METRICS_CONFIG,
        "metrics_peak": METRICS_PEAK,
        "status_command": STATUS_COMMAND,
        "unit_dir": UNIT_DIR,
        # Where the roles have modules unpack (TMPDIR) while a run mounts over /tmp: the parent of RUN_DIR, root's
        # own on every host, and never a mount of ours (the plan refuses a mount at /run itself).
        "module_tmpdir": RUN_DIR.rsplit("/", 1)[0],
    }


def zram_record_file(name):
    return "%s/%s.conf" % (ZRAM_RECORD_DIR, name)


def zram_unit_link(name):
    return "%s/ramdisk-zram@%s.service" % (ZRAM_UNIT_WANTS, name)


def zram_generator_dropin(name):
    return "%s/ramdisk-provision-%s.conf" % (ZRAM_GENERATOR_DIR, name)


def record_file(token):
    return "%s/%s.json" % (RECORD_DIR, token)


def seed_unit_file(token):
    return "%s/ramdisk-seed-%s.service" % (UNIT_DIR, token)


def seed_link(token):
    return "%s/ramdisk-seed-%s.service" % (SEED_WANTS, token)


def tmpfiles_file(token):
    return "%s/ramdisk-provision-%s.conf" % (TMPFILES_DIR, token)


def journald_dropin_file(token):
    return "%s/ramdisk-provision-%s.conf" % (JOURNALD_DROPIN_DIR, token)


def persist_conf_file(token):
    return "%s/%s.conf" % (PERSIST_CONF_DIR, token)


def persist_unit_files(token):
    """The persist unit, the sync service and its timer of the mount with TOKEN, by kind."""
    return {
        "persist": "%s/ramdisk-persist-%s.service" % (UNIT_DIR, token),
        "sync": "%s/ramdisk-persist-sync-%s.service" % (UNIT_DIR, token),
        "timer": "%s/ramdisk-persist-sync-%s.timer" % (UNIT_DIR, token),
    }
