# SPDX-License-Identifier: GPL-3.0-or-later
"""The intent journal: durable lines, transactions read back, a torn last line, the kill hook."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ansible_collections.ramdisk.provision.plugins.module_utils._journal import KILL_ENV, Journal, JournalError


def _journal(tmp_path):
    return Journal(str(tmp_path / "state" / "journal.jsonl"))


def test_a_transaction_reads_back_as_written(tmp_path):
    journal = _journal(tmp_path)
    steps = [{"step": "mkdir", "args": {}}, {"step": "mount", "args": {}}]
    what = {"path": "/srv/a", "action": "mount", "pivot": 1, "steps": steps}
    journal.txn("run1", "srv-a", what)
    journal.mark("begin", "run1", "srv-a", 0)
    journal.mark("done", "run1", "srv-a", 0, {"x": 1})
    journal.mark("begin", "run1", "srv-a", 1)
    journal.close()
    (txn,) = Journal.transactions(journal.read())
    assert txn["what"] == what
    assert txn["begun"] == {0, 1} and txn["results"] == {0: {"x": 1}}
    assert not txn["forward"] and not txn["closed"] and not txn["aborted"]
    assert os.stat(journal.path).st_mode & 0o777 == 0o600


@pytest.mark.parametrize("marks, forward, aborted, closed", [
    (["forward"], True, False, False),
    (["forward", "close"], True, False, True),
    # A run that fails later undoes a transaction it had closed: the abort reopens it.
    (["forward", "close", "abort"], False, True, False),
    (["abort", "close"], False, True, True),
])
def test_marks_decide_the_transaction_state(tmp_path, marks, forward, aborted, closed):
    journal = _journal(tmp_path)
    journal.txn("r", "t", {"steps": []})
    for mark in marks:
        journal.mark(mark, "r", "t")
    (txn,) = Journal.transactions(journal.read())
    assert (txn["forward"], txn["aborted"], txn["closed"]) == (forward, aborted, closed)


def test_a_torn_last_line_is_dropped_but_a_torn_middle_line_is_an_error(tmp_path):
    journal = _journal(tmp_path)
    journal.txn("r", "t", {"steps": []})
    journal.close()
    with open(journal.path, "a") as handle:
        handle.write('{"t": "begin", "run": "r", "txn": "t", "i"')
    assert [line["t"] for line in journal.read()] == ["txn"]
    with open(journal.path, "a") as handle:
        handle.write('\n{"t": "close", "run": "r", "txn": "t"}\n')
    with pytest.raises(JournalError, match="changed by hand"):
        journal.read()


def test_lines_of_other_transactions_do_not_mix(tmp_path):
    journal = _journal(tmp_path)
    journal.txn("r1", "a", {"steps": []})
    journal.txn("r2", "a", {"steps": []})
    journal.mark("close", "r1", "a")
    first, second = Journal.transactions(journal.read())
    assert first["closed"] and not second["closed"]


def test_clear_removes_the_file_and_a_missing_journal_reads_empty(tmp_path):
    journal = _journal(tmp_path)
    journal.txn("r", "t", {"steps": []})
    journal.clear()
    assert not os.path.exists(journal.path)
    assert journal.read() == []
    journal.clear()


def test_the_kill_hook_stops_the_process_before_that_write(tmp_path):
    path = tmp_path / "journal.jsonl"
    code = ("from ansible_collections.ramdisk.provision.plugins.module_utils._journal import Journal\n"
            "j = Journal(%r)\nj.txn('r', 't', {})\nj.mark('begin', 'r', 't', 0)\nj.mark('done', 'r', 't', 0)\n"
            % str(path))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    env[KILL_ENV] = "3"
    proc = subprocess.run([sys.executable, "-c", code], env=env, check=False)
    assert proc.returncode == -9
    assert [line["t"] for line in Journal(str(path)).read()] == ["txn", "begin"]
