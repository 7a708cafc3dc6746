# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Prints the verdicts of tests/hostile/hostile.yml from DIR (verdicts.jsonl, one per case, and skipped.json):
a table, each failure with what was expected and what came, then the count. Exits 1 when any case failed."""

from __future__ import annotations

import json
import os
import sys


def shown(text, limit=600):
    """TEXT on one line, control characters escaped, cut at LIMIT characters."""
    text = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in str(text))
    return text if len(text) <= limit else text[:limit] + "..."


def main(directory):
    with open(os.path.join(directory, "verdicts.jsonl"), encoding="utf-8") as handle:
        verdicts = [json.loads(line) for line in handle if line.strip()]
    skipped = []
    if os.path.exists(os.path.join(directory, "skipped.json")):
        with open(os.path.join(directory, "skipped.json"), encoding="utf-8") as handle:
            skipped = json.load(handle)
    width = len(str(len(verdicts)))
    print("%*s  %-6s %-8s %s" % (width, "#", "result", "from", "case"))
    for number, verdict in enumerate(verdicts, 1):
        result = "pass" if verdict["ok"] else ("CHANGED" if verdict["changes"] or verdict["cleanup"] else "FAIL")
        print("%*d  %-6s %-8s %s" % (width, number, result, verdict["source"], shown(verdict["name"])))
    failed = [(n, v) for n, v in enumerate(verdicts, 1) if not v["ok"]]
    if failed:
        print("\nFailures (CHANGED: the host changed; the test put it back):")
    for number, verdict in failed:
        print("%d. %s (%s.yml)" % (number, shown(verdict["name"]), verdict["source"]))
        print("   expected: %s" % shown(verdict["expected"]))
        print("   got:      %s" % shown(verdict["got"]))
        for change in verdict["changes"][:8]:
            print("   changed:  %s" % shown(change, 300))
        if len(verdict["changes"]) > 8:
            print("   changed:  ... %d more" % (len(verdict["changes"]) - 8))
        for step in verdict["cleanup"]:
            print("   undone:   %s" % shown(step, 300))
    noted = [(n, v) for n, v in enumerate(verdicts, 1) if v.get("notes")]
    if noted:
        print("\nNotes (what other processes on this host changed meanwhile; not counted as changes):")
    for number, verdict in noted:
        for note in verdict["notes"]:
            print("%d. %s: %s" % (number, shown(verdict["name"]), shown(note, 300)))
    for case in skipped:
        print("skipped: %s (%s.yml): %s is installed here" % (shown(case["name"]), case["source"], case["unless_installed"]))
    print("\n%d invalid requests ran: %d refused as expected, %d failed"
          % (len(verdicts), len(verdicts) - len(failed), len(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
