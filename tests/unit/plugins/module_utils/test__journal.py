# SPDX-License-Identifier: GPL-3.0-or-later
"""The intent journal: durable lines, transactions read back, the kill hook; a torn last line cut before the next
append, a torn start glued to a line by older writers, an unreadable line accounted for, texts kept in blobs."""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import pytest

from ansible_collections.ramdisk.provision.plugins.module_utils import _executor as ex_mod

from ansible_collections.ramdisk.provision.plugins.module_utils._journal import (BLOB_REF, KILL_ENV, Journal,
                                                                                 JournalError, boot_id)

# persist_host (and host, which it builds on) are fixtures.
from test__executor import Recorder, _dead_run, entry, host  # noqa: F401 # pylint: disable=unused-import
from test__persist_steps import Systemd, persist_host, persisted  # noqa: F401 # pylint: disable=unused-import

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


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


# A torn last line -----------------------------------------------------------------------------------------

def _steps(directory):
    """The steps of a small transaction on real files in DIRECTORY (the first's text inline, the second's in a
    blob)."""
    return [{"step": "file", "args": {"file": os.path.join(str(directory), "%s.conf" % name), "text": text,
                                      "mode": 0o644, "old": "old %s\n" % name, "old_mode": 0o644}}
            for name, text in (("a", "new a\n"), ("b", "new b\n" * 1000), ("c", "new c\n"))]


def _whole_then(tmp_path, last):
    """(bytes of a journal: a txn line, step 0 begun and done; the bytes of LAST, the line a run died in)."""
    journal = Journal(str(tmp_path / "journal.jsonl"))
    journal.txn("dead", "t", {"path": "/srv/a", "action": "mount", "pivot": None, "steps": _steps(tmp_path)})
    journal.mark("begin", "dead", "t", 0)
    journal.mark("done", "dead", "t", 0, {"x": 1})
    journal.close()
    with open(journal.path, "rb") as handle:
        whole = handle.read()
    other = Journal(str(tmp_path / "last" / "journal.jsonl"))
    last(other)
    other.close()
    with open(other.path, "rb") as handle:
        return whole, handle.read()


@pytest.fixture
def ram_path(tmp_path):
    """A scratch directory on tmpfs where there is one (/dev/shm): the byte-by-byte cases append and flush some
    thousand times, and what they test is where the bytes go, not how long a disk takes to flush them."""
    if not os.path.isdir("/dev/shm"):
        return tmp_path
    directory = tempfile.mkdtemp(prefix="test-journal-", dir="/dev/shm")
    yield pathlib.Path(directory)
    shutil.rmtree(directory, ignore_errors=True)


NEXT = [{"t": "abort", "run": "next", "txn": "t"}, {"t": "close", "run": "next", "txn": "t"}]


@pytest.mark.parametrize("last", [
    lambda j: j.txn("dead", "u", {"path": "/srv/b", "action": "migrate", "pivot": 1,
                                  "steps": _steps(os.path.dirname(j.path))}),
    lambda j: j.mark("begin", "dead", "t", 1),
], ids=["txn", "begin"])
def test_a_line_torn_at_every_byte_then_two_appends_read_every_whole_record_in_order(ram_path, last):
    tmp_path = ram_path
    whole, line = _whole_then(tmp_path, last)
    path = str(tmp_path / "journal.jsonl")
    want = [json.loads(raw) for raw in whole.splitlines()]
    for cut in range(1, len(line)):
        with open(path, "wb") as handle:
            handle.write(whole + line[:cut])
        journal = Journal(path)
        for record in NEXT:
            journal.mark(record["t"], record["run"], record["txn"])
        journal.close()
        got = journal.read()
        assert got[0]["t"] == "txn" and got[0]["what"]["steps"] == _steps(tmp_path), cut
        assert got[1:len(want)] == want[1:], cut
        # Torn before its newline, the record is whole: it stays, and gets its newline.
        kept = cut == len(line) - 1
        assert [record["t"] for record in got[len(want):len(want) + kept]] == [json.loads(line)["t"]] * kept
        assert got[len(want) + kept:] == NEXT, cut
        with open(path, "rb") as handle:
            assert handle.read().startswith(whole + (line if kept else b"") + b'{"run":"next"'), cut


def test_a_whole_last_record_without_its_newline_is_read_and_kept(tmp_path):
    whole, line = _whole_then(tmp_path, lambda j: j.mark("begin", "dead", "t", 1))
    path = str(tmp_path / "journal.jsonl")
    with open(path, "wb") as handle:
        handle.write(whole + line[:-1])
    assert Journal(path).read()[-1] == {"t": "begin", "run": "dead", "txn": "t", "i": 1}
    journal = Journal(path)
    journal.mark("close", "next", "t")
    journal.close()
    assert [record["t"] for record in journal.read()[-2:]] == ["begin", "close"]


@pytest.mark.parametrize("last", [
    lambda j: j.txn("dead", "u", {"path": "/srv/b", "action": "migrate", "pivot": 1,
                                  "steps": _steps(os.path.dirname(j.path))}),
    lambda j: j.mark("done", "dead", "t", 1, {"mount_id": 7}),
], ids=["txn", "done"])
def test_a_line_torn_at_every_byte_and_glued_to_the_next_by_an_older_writer_reads_whole(ram_path, last):
    tmp_path = ram_path
    whole, line = _whole_then(tmp_path, last)
    path = str(tmp_path / "journal.jsonl")
    want = [json.loads(raw) for raw in whole.splitlines()]
    glued = b"".join(json.dumps(record, sort_keys=True, separators=(",", ":")).encode() + b"\n" for record in NEXT)
    for cut in range(1, len(line)):
        with open(path, "wb") as handle:
            handle.write(whole + line[:cut] + glued)
        got = Journal(path).read()
        assert got[1:] == want[1:] + NEXT, cut


def test_a_torn_start_glued_to_a_whole_line_by_an_older_writer_gives_the_whole_line(tmp_path):
    whole, line = _whole_then(tmp_path, lambda j: j.mark("begin", "dead", "t", 1))
    path = str(tmp_path / "journal.jsonl")
    glued = line[:-8] + b'{"i":1,"run":"dead","t":"undone","txn":"t"}\n'
    with open(path, "wb") as handle:
        handle.write(whole + glued + b'{"run":"dead","t":"close","txn":"t"}\n')
    (txn,) = Journal.transactions(Journal(path).read())
    assert txn["aborted"] and txn["closed"] and txn["undone"] == {1} and txn["results"] == {0: {"x": 1}}


# A line that cannot be read -----------------------------------------------------------------------------

def _write_olds(tmp_path):
    for name in "abc":
        (tmp_path / ("%s.conf" % name)).write_text("old %s\n" % name)


def _damage(path, number, garbage=b"\x00\x17 not a record {\"t\n"):
    with open(path, "rb") as handle:
        lines = handle.read().splitlines(True)
    lines[number - 1] = garbage
    with open(path, "wb") as handle:
        handle.write(b"".join(lines))


def _executor():
    return ex_mod.Executor(lambda argv: (0, "", ""), False, "web1")


def test_an_unreadable_line_after_a_done_step_undoes_the_step_it_may_have_begun(tmp_path):
    """The dead run began step 1 (its line then damaged on disk) and wrote b.conf: recovery takes it back too."""
    _write_olds(tmp_path)
    steps = _steps(tmp_path)
    journal = Journal(str(tmp_path / "state" / "journal.jsonl"))
    journal.txn("dead", "u", {"path": "/srv/b", "action": "mount", "pivot": None, "steps": []})
    journal.txn("dead", "t", {"path": "/srv/a", "action": "mount", "pivot": None, "steps": steps})
    ex = _executor()
    for i in (0, 1):
        journal.mark("begin", "dead", "t", i)
        ex.do("file", steps[i]["args"])
        if i == 0:
            journal.mark("done", "dead", "t", 0)
    journal.mark("close", "dead", "u")  # a later line, so that the damaged one is in the middle
    journal.close()
    _damage(journal.path, 5)
    assert Journal.transactions(journal.read())[1]["maybe_begun"] == {1}
    ex = _executor()
    report = ex_mod.recover(ex, Journal(journal.path))
    assert report[0]["way"] == "back" and "line 5 of the journal cannot be read" in report[0]["assumed"][0]
    assert [(tmp_path / ("%s.conf" % name)).read_text() for name in "abc"] == ["old a\n", "old b\n", "old c\n"]
    assert any("line 5" in warning and "undone" in warning for warning in ex.warnings)
    assert not os.path.exists(journal.path)


def test_an_unreadable_plan_line_refuses_with_the_fix_and_the_fix_lets_recovery_go_on(tmp_path):
    _write_olds(tmp_path)
    steps = _steps(tmp_path)
    journal = Journal(str(tmp_path / "state" / "journal.jsonl"))
    journal.txn("dead", "t", {"path": "/srv/a", "action": "mount", "pivot": None, "steps": steps[:1]})
    journal.mark("begin", "dead", "t", 0)
    journal.mark("done", "dead", "t", 0)
    journal.mark("close", "dead", "t")
    journal.txn("dead", "u", {"path": "/srv/b", "action": "mount", "pivot": None, "steps": steps[1:]})
    journal.mark("begin", "dead", "u", 0)
    journal.close()
    _damage(journal.path, 5)
    with pytest.raises(JournalError) as caught:
        ex_mod.recover(_executor(), Journal(journal.path))
    message = str(caught.value)
    assert "line 5 cannot be read" in message and journal.path in message and "aside" not in message
    fix = message.split("printf '%s\\n' '")[1].split("'")[0]
    assert json.loads(fix) == {"run": "dead", "t": "close", "txn": "u"}
    with open(journal.path, "a") as handle:
        handle.write(fix + "\n")
    assert ex_mod.recover(_executor(), Journal(journal.path)) == []
    assert not os.path.exists(journal.path)


def test_a_closed_transaction_before_an_unreadable_line_does_its_last_step_again(tmp_path):
    """The lost line may have been the abort of a later failure, which had begun to undo the last step."""
    _write_olds(tmp_path)
    steps = _steps(tmp_path)[:2]
    journal = Journal(str(tmp_path / "state" / "journal.jsonl"))
    journal.txn("dead", "v", {"path": "/srv/b", "action": "mount", "pivot": None, "steps": []})
    journal.txn("dead", "t", {"path": "/srv/a", "action": "mount", "pivot": 0, "steps": steps})
    ex = _executor()
    for i in (0, 1):
        journal.mark("begin", "dead", "t", i)
        ex.do("file", steps[i]["args"])
        journal.mark("done", "dead", "t", i)
    journal.mark("forward", "dead", "t")
    journal.mark("close", "dead", "t")
    journal.mark("abort", "dead", "t")
    ex.undo("file", steps[1]["args"], {}, True)  # then killed before its undone line
    journal.mark("close", "dead", "v")
    journal.close()
    _damage(journal.path, 9)
    report = ex_mod.recover(_executor(), Journal(journal.path))
    assert report[0]["way"] == "forward" and "undo began" in report[0]["assumed"][0]
    assert (tmp_path / "b.conf").read_text() == "new b\n" * 1000 and (tmp_path / "a.conf").read_text() == "new a\n"


# Blobs ------------------------------------------------------------------------------------------------------

def test_a_large_text_goes_to_a_blob_before_its_line_and_reads_back_checked(tmp_path):
    steps = _steps(tmp_path)
    journal = Journal(str(tmp_path / "state" / "journal.jsonl"))
    journal.txn("r", "t", {"path": "/srv/a", "action": "mount", "pivot": None, "steps": steps})
    journal.close()
    text = steps[1]["args"]["text"]
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    blob = os.path.join(journal.blobs, digest)
    assert journal.blobs == str(tmp_path / "state" / "journal-blobs")
    assert open(blob).read() == text and os.stat(blob).st_mode & 0o777 == 0o600
    assert os.path.getsize(journal.path) < 2048 and digest in open(journal.path).read()
    (txn,) = Journal.transactions(journal.read())
    assert txn["what"]["steps"] == steps
    with open(blob, "a") as handle:
        handle.write("tampered")
    (txn,) = Journal.transactions(journal.read())
    ref = txn["what"]["steps"][1]["args"]["text"]
    assert ref[BLOB_REF] == digest and ref["problem"].startswith("damaged")
    journal.require(txn, [0, 2], "undo")  # steps that do not need the blob
    with pytest.raises(JournalError, match="step 1 .*blob %s, which is damaged" % blob):
        journal.require(txn, [1], "undo")
    os.unlink(blob)
    (txn,) = Journal.transactions(journal.read())
    assert txn["what"]["steps"][1]["args"]["text"]["problem"].startswith("missing")
    journal.clear()
    assert not os.path.exists(journal.path) and os.listdir(journal.blobs) == []


def test_recovery_names_the_missing_blob_of_a_step_it_must_undo_and_ignores_one_never_begun(tmp_path):
    _write_olds(tmp_path)
    steps = _steps(tmp_path)
    for args in (steps[0]["args"], steps[2]["args"]):
        args["old"] = args["old"] * 1000  # their old texts in blobs too
    journal = Journal(str(tmp_path / "state" / "journal.jsonl"))
    journal.txn("dead", "t", {"path": "/srv/a", "action": "mount", "pivot": None, "steps": steps})
    journal.mark("begin", "dead", "t", 0)
    journal.close()
    os.unlink(os.path.join(journal.blobs, hashlib.sha256(steps[2]["args"]["old"].encode()).hexdigest()))
    ex_mod.recover(_executor(), Journal(journal.path))  # step 2 never began: its blob is not needed
    assert not os.path.exists(journal.path) and os.listdir(journal.blobs) == []
    journal = Journal(str(tmp_path / "state" / "journal.jsonl"))
    journal.txn("dead", "t", {"path": "/srv/a", "action": "mount", "pivot": None, "steps": steps})
    journal.mark("begin", "dead", "t", 0)
    journal.close()
    os.unlink(os.path.join(journal.blobs, hashlib.sha256(steps[0]["args"]["old"].encode()).hexdigest()))
    with pytest.raises(JournalError, match="to undo its step 0 .*a.conf.*is missing"):
        ex_mod.recover(_executor(), Journal(journal.path))
    assert os.path.exists(journal.path)


def test_a_persisted_mounts_adoption_line_holds_references_not_the_helpers(persist_host):
    # The helper and the engine the adoption installs (their texts, ~100 KB, are what a line must not carry inline).
    ex = Systemd(units={"db.service": ("active", "enabled")})
    item = persisted(persist_host / "backing")
    steps, pivot = ex_mod.build(item, True, ex)
    what = {"path": item["path"], "action": item["action"], "pivot": pivot, "steps": steps}
    inline = len(json.dumps({"t": "txn", "run": "r", "txn": item["token"], "boot": "b", "what": what},
                            sort_keys=True, separators=(",", ":"))) + 1
    journal = Journal(str(persist_host / "state" / "journal.jsonl"))
    journal.txn("r", item["token"], what)
    journal.close()
    size = os.path.getsize(journal.path)
    print("adoption txn line: %d bytes inline, %d bytes with blobs" % (inline, size))
    assert inline > 60000 and size < 8192
    (txn,) = Journal.transactions(journal.read())
    assert txn["what"]["steps"] == json.loads(json.dumps(steps))


def test_a_recovery_killed_after_its_forward_line_does_not_do_the_pivot_again(host):  # noqa: F811
    """The probe found the pivot done and the recovery wrote its forward line, then died: the next one goes on."""
    ex = Recorder(boot=boot_id())
    journal, _steps = _dead_run(host, entry(), stop_after=1)  # mkdir done, mount (the pivot) begun
    journal.mark("forward", "dead", entry()["token"])
    journal.close()
    report = ex_mod.recover(ex, Journal(journal.path))
    assert report[0]["way"] == "forward" and "do mount /srv/a" not in ex.calls
    assert not os.path.exists(journal.path)
