# SPDX-License-Identifier: GPL-3.0-or-later
"""The imports between plugins/module_utils: each module loads alone, none imports a collection module inside a
function (the old way round an import loop), and the graph of their imports has no loop."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest

from conftest import COLLECTIONS_DIR, REPO_ROOT

MODULE_UTILS = os.path.join(REPO_ROOT, "plugins", "module_utils")
PACKAGE = "ansible_collections.ramdisk.provision.plugins.module_utils"
NAMES = sorted(name[:-3] for name in os.listdir(MODULE_UTILS) if name.endswith(".py") and name != "__init__.py")


def _imported(node):
    """The module_utils modules an import NODE names (a copy on a host imports its sibling by its bare name)."""
    if isinstance(node, ast.Import):
        full = [alias.name for alias in node.names]
    elif node.module == PACKAGE:
        full = [PACKAGE + "." + alias.name for alias in node.names]
    else:
        full = [node.module or ""]
    out = set()
    for name in full:
        if name.startswith(PACKAGE + "."):
            name = name[len(PACKAGE) + 1:]
        if name in NAMES:
            out.add(name)
    return out


def _imports(name):
    """({modules NAME imports}, [(line, module) imported inside a function])."""
    with open(os.path.join(MODULE_UTILS, name + ".py"), encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    found = set()
    nested = []
    functions = [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for function in functions:
        for node in ast.walk(function):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                nested.extend((node.lineno, module) for module in sorted(_imported(node)))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found |= _imported(node)
    found.discard(name)
    return found, nested


def _cycle(graph):
    """One loop in GRAPH ({name: {names}}) as a list of names, or None."""
    state = {}

    def visit(name, path):
        state[name] = "open"
        for other in sorted(graph[name]):
            if state.get(other) == "open":
                return path[path.index(other):] + [other]
            if other not in state:
                found = visit(other, path + [other])
                if found:
                    return found
        state[name] = "done"
        return None
    for name in sorted(graph):
        if name not in state:
            found = visit(name, [name])
            if found:
                return found
    return None


def test_no_module_imports_a_collection_module_inside_a_function():
    nested = ["%s.py:%d imports %s" % (name, line, module) for name in NAMES for line, module in _imports(name)[1]]
    assert nested == []


def test_the_imports_between_module_utils_have_no_loop():
    graph = dict((name, _imports(name)[0]) for name in NAMES)
    assert "_executor" in graph["_dry_run"] and "_procfs" in graph["_metrics"]  # the parse sees each spelling
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_the_loop_finder_finds_a_loop():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


@pytest.mark.parametrize("name", NAMES)
def test_each_module_imports_alone_in_a_fresh_interpreter(name):
    env = dict(os.environ, PYTHONPATH=COLLECTIONS_DIR)
    done = subprocess.run([sys.executable, "-c", "import %s.%s" % (PACKAGE, name)], env=env, capture_output=True,
                          text=True, check=False, cwd="/")
    assert done.returncode == 0, done.stderr
