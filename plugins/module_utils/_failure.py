# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""How ramdisk_plan and ramdisk_apply run programs and say why they stopped, whatever stopped them.

AnsibleModule.run_command ends the module with a bare "Error executing command." when a program cannot start
(a helper that is gone): in the middle of a transaction, with nothing said about it. Here a program that is not
there is an exit status and a sentence, which the step turns into its own error (and its undo); and an error
nobody foresaw ends the module with what happened and what the host holds: the journal's open transactions
(which the next run finishes or undoes) and what is mounted at the paths the run was given.
"""

from __future__ import annotations

import os
import traceback

from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths as paths
from ansible_collections.ramdisk.provision.plugins.module_utils._journal import Journal
from ansible_collections.ramdisk.provision.plugins.module_utils._procfs import parse_mountinfo

MISSING = 127
MAX_LISTED = 10


def program_runner(module):
    """RUN(argv) -> (rc, out, err) with LC_ALL=C; a program that is not there (or not executable) gives exit 127
    and a sentence naming it, instead of ending the module."""
    def run(argv):
        program = argv[0]
        found = program if os.path.isabs(program) else module.get_bin_path(program)
        if not found or not os.path.isfile(found) or not os.access(found, os.X_OK):
            return MISSING, "", "%s: no such program on this host (or it is not executable)" % program
        return module.run_command([found] + list(argv[1:]), environ_update={"LC_ALL": "C"})
    return run


def journal_state(journal_path=None):
    """A sentence on the journal: its open transactions (path, action, steps done of all) or none."""
    journal_path = journal_path or paths.JOURNAL
    try:
        txns = [txn for txn in Journal.transactions(Journal(journal_path).read()) if not txn["closed"]]
    except Exception as exc:  # pylint: disable=broad-except
        return "the journal %s could not be read (%s)" % (journal_path, exc)
    if not txns:
        return "the journal %s holds no transaction left open" % journal_path
    said = ["%s (%s, %s: %d of %d steps done)" % (txn["what"].get("path"), txn["what"].get("action"),
                                                  "being undone" if txn["aborted"] else "past its pivot"
                                                  if txn["forward"] else "before its pivot",
                                                  len(txn["results"]), len(txn["what"].get("steps") or []))
            for txn in txns[:MAX_LISTED]]
    return ("the journal %s holds %d open transaction(s), which the next run finishes or undoes before anything "
            "else: %s" % (journal_path, len(txns), "; ".join(said)))


def mounts_state(wanted):
    """A sentence on what is mounted at each of the paths WANTED (in their order), read now."""
    try:
        with open("/proc/self/mountinfo") as handle:
            mounts = parse_mountinfo(handle.read())
    except (IOError, OSError) as exc:
        return "the mount table could not be read (%s)" % exc
    said = []
    for path in wanted:
        on_top = [mount for mount in mounts if mount["mount_point"] == path]
        said.append("%s: %s" % (path, "%s from %s" % (on_top[-1]["fstype"], on_top[-1]["source"]) if on_top
                                else "nothing mounted"))
    return "mounted now: %s" % ("; ".join(said) if said else "no path was given")


def unexpected(host, module_name, exc, wanted):
    """The message of a module stopped by EXC, an error nobody foresaw: what happened, where, what the host holds."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = " (at %s:%d)" % (os.path.basename(frames[-1].filename), frames[-1].lineno) if frames else ""
    return ("Host %s: %s stopped on an unexpected error: %s: %s%s. What the host holds: %s; %s. Run again once "
            "the cause is fixed; the traceback is in this result's exception."
            % (host, module_name, exc.__class__.__name__, str(exc) or "(no message)", where,
               journal_state(), mounts_state(wanted)))
