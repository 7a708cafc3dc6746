# SPDX-License-Identifier: GPL-3.0-or-later
"""The README is the Galaxy page: short, user-facing first, its links and examples whole (issue 44).

Every relative link of README.md and docs/*.md names a file that exists, and an anchor a heading of it makes (as
GitHub makes them); every YAML block of README.md parses; the copy engine of persist is named as it is, never as
the rsync of the shell helper before 1.1.0, in the pages that describe what the collection does now.
"""

from __future__ import annotations

import glob
import os
import re

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LINK_RE = re.compile(r"\]\(([^)\s]+)\)")
# Pages that say what the collection does now. benchmarks.md and testing.md keep the measured history (rsync was
# the design before issue 35); security.md compares nested mounts with `rsync -x`; metrics.md names what the
# status files of the shell helper said; getting-started.md lists the Debian packages the lab installs.
NOW_PAGES = ("README.md", "docs/recipes.md", "docs/policies.md", "docs/troubleshooting.md", "docs/choosing-a-backend.md",
             "roles/tmpfs/meta/argument_specs.yml", "roles/ramfs/meta/argument_specs.yml",
             "roles/zram/meta/argument_specs.yml", "roles/brd/meta/argument_specs.yml",
             "roles/ramdisk/meta/argument_specs.yml")


def _read(relative):
    with open(os.path.join(REPO, relative), encoding="utf-8") as handle:
        return handle.read()


def _anchors(text):
    """The anchors GitHub makes of a page's headings: lower case, punctuation dropped, spaces to hyphens."""
    out = set()
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if fenced or not line.startswith("#"):
            continue
        title = line.lstrip("#").strip().lower()
        slug = re.sub(r"[^\w\- ]", "", title).replace(" ", "-")
        base, n = slug, 1
        while slug in out:
            slug = "%s-%d" % (base, n)
            n += 1
        out.add(slug)
    return out


def _pages():
    found = glob.glob(os.path.join(REPO, "docs", "**", "*.md"), recursive=True)
    return ["README.md"] + sorted(os.path.relpath(path, REPO) for path in found)


def test_the_readme_is_short_and_starts_with_what_a_user_needs():
    text = _read("README.md")
    lines = text.splitlines()
    assert len(lines) <= 150, "README.md has %d lines: move detail into docs/" % len(lines)
    headings = [line for line in lines if line.startswith("## ")]
    assert headings[:4] == ["## From a clone: the two commands", "## Requirements", "## Installation",
                            "## Quick start: /tmp on tmpfs on every host"], headings
    assert "make demo" in text and "make test" in text


def test_every_relative_link_names_a_file_and_a_heading_there():
    broken = []
    for page in _pages():
        text = _read(page)
        for target in LINK_RE.findall(text):
            if re.match(r"^[a-z]+:", target):
                continue
            path, _sep, anchor = target.partition("#")
            resolved = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            full = os.path.join(REPO, resolved)
            if not os.path.exists(full):
                broken.append("%s: %s (no such file)" % (page, target))
            elif anchor and resolved.endswith(".md") and anchor not in _anchors(_read(resolved)):
                broken.append("%s: %s (no such heading)" % (page, target))
    assert not broken, "\n".join(broken)


def test_every_yaml_block_of_the_readme_parses():
    blocks = re.findall(r"```yaml\n(.*?)```", _read("README.md"), re.S)
    assert blocks
    for block in blocks:
        assert yaml.safe_load(block) is not None


def test_persist_is_described_by_its_own_copy_engine_not_rsync():
    found = ["%s:%d: %s" % (page, number, line.strip())
             for page in NOW_PAGES if os.path.exists(os.path.join(REPO, page))
             for number, line in enumerate(_read(page).splitlines(), 1) if "rsync" in line]
    assert not found, "persist copies with persist-delta.py (no rsync) since 1.1.0:\n" + "\n".join(found)
