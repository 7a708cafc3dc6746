# SPDX-License-Identifier: GPL-3.0-or-later
"""Every host path of module_utils/_host_paths.py is written there and nowhere else in plugins/, roles/ and playbooks/
(issue 43): other files import it, or read what ramdisk_plan returns. Text for people does not count: module
DOCUMENTATION, EXAMPLES and RETURN, docstrings, comments, the filter documentation and the argument specs'
descriptions name paths to explain them."""

from __future__ import annotations

import ast
import os
import re

import yaml

from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TREES = ("plugins", "roles", "playbooks")
DEFINED_IN = os.path.join("plugins", "module_utils", "_host_paths.py")
DOC_NAMES = {"DOCUMENTATION", "EXAMPLES", "RETURN"}
DESCRIPTION_KEYS = {"description", "short_description"}


def _values():
    """Each path _host_paths defines at module level (a string, or a string of a tuple), with its name."""
    found = {}
    for name, value in vars(_host_paths).items():
        if name.startswith("_") or not name.isupper():
            continue
        for item in value if isinstance(value, tuple) else (value,):
            if isinstance(item, str) and item.startswith("/"):
                found.setdefault(item, name)
    return found


VALUES = _values()
# A path, or a path under it; not a longer name that starts the same (/etc/fstab is not /etc/fstab.d), nor the tail
# of a longer path (/lib/systemd/system is not /usr/lib/systemd/system).
PATTERNS = {value: re.compile(r"(?<![\w./-])%s(?![\w.-])" % re.escape(value)) for value in VALUES}


def _docstrings(tree):
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def python_texts(text):
    """The string constants of a Python source that code uses: not docstrings, not the module documentation."""
    tree = ast.parse(text)
    skipped = _docstrings(tree)
    for node in tree.body:
        names = [target.id for target in getattr(node, "targets", ()) if isinstance(target, ast.Name)]
        if isinstance(node, ast.Assign) and DOC_NAMES.intersection(names):
            skipped.update(id(inner) for inner in ast.walk(node.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped:
            yield node.value


def yaml_texts(text, relative):
    """The scalars of a YAML file (comments are gone once parsed), less the text written for people."""
    specs = relative.endswith("meta/argument_specs.yml")
    filter_docs = relative.startswith("plugins/")

    def walk(node, top):
        if isinstance(node, dict):
            for key, value in node.items():
                if (specs and key in DESCRIPTION_KEYS) or (filter_docs and top and key in DOC_NAMES):
                    continue
                yield from walk(key, False)
                yield from walk(value, False)
        elif isinstance(node, list):
            for value in node:
                yield from walk(value, False)
        elif isinstance(node, str):
            yield node

    for document in yaml.safe_load_all(text):
        yield from walk(document, True)


def template_texts(text):
    """A template as the host gets it, less its Jinja comments."""
    yield re.sub(r"\{#.*?#\}", "", text, flags=re.S)


def texts(relative, text):
    if relative.endswith(".py"):
        return python_texts(text)
    if relative.endswith((".yml", ".yaml")):
        return yaml_texts(text, relative)
    return template_texts(text)


def copies(relative, text):
    """(path, name in _host_paths) for each path of _host_paths that the file writes out."""
    found = set()
    for piece in texts(relative, text):
        matched = [value for value, pattern in PATTERNS.items() if pattern.search(piece)]
        # The longest path found says the most: /etc/ramdisk-provision/persist, not also /etc/ramdisk-provision.
        found.update((value, VALUES[value]) for value in matched
                     if not any(other.startswith(value + "/") for other in matched))
    return found


def _files():
    for tree in TREES:
        for directory, subdirectories, names in os.walk(os.path.join(REPO, tree)):
            subdirectories[:] = sorted(name for name in subdirectories if name != "__pycache__")
            for name in sorted(names):
                if name.endswith((".pyc", ".pyo")):
                    continue
                path = os.path.join(directory, name)
                relative = os.path.relpath(path, REPO).replace(os.sep, "/")
                if relative != DEFINED_IN.replace(os.sep, "/"):
                    yield relative, path


def test_each_host_path_is_written_once():
    found = []
    for relative, path in _files():
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        for value, name in sorted(copies(relative, text)):
            found.append("%s: %s (_host_paths.%s)" % (relative, value, name))
    assert not found, "host paths copied outside _host_paths.py; import them or read __ramdisk_plan.host_paths:\n" + \
        "\n".join(found)


def test_the_check_sees_copies_in_code_and_not_in_text_for_people():
    source = '''"""Lives in /etc/fstab."""
DOCUMENTATION = "C(/etc/fstab)"
# /etc/fstab
def f():
    """/etc/fstab"""
    return open("/etc/fstab.d") or "/usr/lib/systemd/systemd" or "/usr/lib/systemd/system-x"
'''
    assert copies("plugins/x.py", source) == set()
    assert copies("plugins/x.py", source + 'F = "/etc/fstab"\n') == {("/etc/fstab", "FSTAB")}
    assert copies("plugins/x.py", 'D = "/etc/ramdisk-provision/new"\n') == {("/etc/ramdisk-provision", "ETC_DIR")}
    spec = "argument_specs:\n  main:\n    description: /etc/fstab\n    options:\n      x: {default: /etc/fstab}\n"
    assert copies("roles/r/meta/argument_specs.yml", spec) == {("/etc/fstab", "FSTAB")}
    assert copies("roles/r/tasks/main.yml", "# /etc/fstab\n- name: x\n  stat: {path: /etc/fstab}\n") == {
        ("/etc/fstab", "FSTAB")}
    assert copies("roles/r/templates/t.j2", "{# /etc/fstab #}\nExecStart=/etc/fstab\n") == {("/etc/fstab", "FSTAB")}
