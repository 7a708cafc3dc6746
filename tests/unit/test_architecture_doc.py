# SPDX-License-Identifier: GPL-3.0-or-later
"""The import picture in docs/architecture.md says only what the code does: each arrow between two of the
collection's Python files is an import, and each role it names calls the modules it points to."""

from __future__ import annotations

import ast
import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAGE = os.path.join(REPO, "docs", "architecture.md")
DIRS = (os.path.join("plugins", "modules"), os.path.join("plugins", "module_utils"))
ARROW = re.compile(r"^\s*([\w\"\[\]:, ]+?)\s*-->\s*([\w &]+?)\s*$")


def _imports():
    out = {}
    for directory in DIRS:
        for name in os.listdir(os.path.join(REPO, directory)):
            if not name.endswith(".py"):
                continue
            with open(os.path.join(REPO, directory, name), encoding="utf-8") as handle:
                tree = ast.parse(handle.read())
            found = set()
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module and "module_utils" in node.module:
                    last = node.module.rsplit(".", 1)[1]
                    found.update(alias.name for alias in node.names) if last == "module_utils" else found.add(last)
            out[name[:-3]] = found
    return out


def _arrows():
    with open(PAGE, encoding="utf-8") as handle:
        text = handle.read()
    block = text.split("```mermaid", 1)[1].split("```", 1)[0]
    for line in block.splitlines():
        match = ARROW.match(line)
        if match:
            for target in match.group(2).split("&"):
                yield match.group(1).strip(), target.strip()


def test_every_arrow_between_python_files_is_an_import():
    imports = _imports()
    arrows = [(source, target) for source, target in _arrows() if source in imports]
    assert len(arrows) > 20
    wrong = [(source, target) for source, target in arrows if target not in imports[source]]
    assert not wrong, wrong


def test_the_roles_it_names_call_the_modules_it_points_to():
    from_roles = [(source, target) for source, target in _arrows() if source.startswith("roles")]
    assert sorted(target for _source, target in from_roles) == ["ramdisk_apply", "ramdisk_plan"]
    roles = re.search(r"roles: ([\w, ]+)", from_roles[0][0]).group(1).split(", ")
    assert sorted(roles) == ["brd", "ramdisk", "ramfs", "tmpfs", "zram"]
    for role in roles:
        text = ""
        for directory, _subdirectories, names in os.walk(os.path.join(REPO, "roles", role, "tasks")):
            for name in names:
                with open(os.path.join(directory, name), encoding="utf-8") as handle:
                    text += handle.read()
        for _source, module in from_roles:
            assert "ramdisk.provision.%s:" % module in text, (role, module)
