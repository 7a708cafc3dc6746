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


PLUGINS = os.path.join(REPO_ROOT, "plugins")
# Private names still taken from another module_utils module: (importing file, module, name) -> why.
PRIVATE_IMPORTS_ALLOWED = {
    ("module_utils/_persist_steps.py", "_persist_delta", "_meta"):
        "the restore records its root as the delta engine records every entry; not part of _plan's split (issue 43, "
        "1c), listed so this list can only shrink",
    ("module_utils/_persist_steps.py", "_persist_delta", "_xattrs"):
        "as _meta, its argument",
    ("modules/ramdisk_plan.py", "_host_facts", "_read"):
        "the host view reads /proc and its records as ramdisk_facts does; not part of _plan's split (issue 43, 1c)",
}


def _private_uses(tree):
    """[(line, module, name)] of the underscore-prefixed names TREE takes from a module_utils module: by
    `from ..._x import _y` or as the attribute `_x._y` of a module it imported."""
    found = []
    modules = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module.startswith(PACKAGE + "."):
                module = module[len(PACKAGE) + 1:]
            if module in NAMES:
                found.extend((node.lineno, module, alias.name) for alias in node.names
                             if alias.name.startswith("_") and not alias.name.startswith("__"))
            elif module == PACKAGE:
                modules.update((alias.asname or alias.name, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.name[len(PACKAGE) + 1:] if alias.name.startswith(PACKAGE + ".") else alias.name
                if name in NAMES and (alias.asname or "." not in alias.name):
                    modules[alias.asname or alias.name] = name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules \
                and node.attr.startswith("_") and not node.attr.startswith("__"):
            found.append((node.lineno, modules[node.value.id], node.attr))
    return found


def _plugin_files():
    for top, dirs, files in os.walk(PLUGINS):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.relpath(os.path.join(top, name), PLUGINS)


def test_no_plugin_imports_a_private_name_of_another_module_utils_module():
    found = []
    used = set()
    for rel in _plugin_files():
        with open(os.path.join(PLUGINS, rel), encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
        own = os.path.basename(rel)[:-3] if rel.startswith("module_utils/") else None
        for line, module, name in _private_uses(tree):
            if module == own:
                continue
            if (rel, module, name) in PRIVATE_IMPORTS_ALLOWED:
                used.add((rel, module, name))
                continue
            found.append("%s:%d takes %s.%s: make it public in %s, or move it" % (rel, line, module, name, module))
    assert found == []
    assert sorted(set(PRIVATE_IMPORTS_ALLOWED) - used) == [], "no longer needed: remove from PRIVATE_IMPORTS_ALLOWED"


def test_the_private_name_finder_sees_each_spelling():
    tree = ast.parse("from %s._tree import _show, DROPPABLE_XATTRS\n"
                     "from %s import _size as size\n"
                     "import %s._tree\n"
                     "import _procfs\n"
                     "size._unit(1)\n_procfs._read('x')\nsize.format_size(1)\n" % (PACKAGE, PACKAGE, PACKAGE))
    assert sorted(_private_uses(tree)) == [(1, "_tree", "_show"), (5, "_size", "_unit"), (6, "_procfs", "_read")]
