# SPDX-License-Identifier: GPL-3.0-or-later
"""Every error message the collection can print is covered in docs/troubleshooting.md, and the page
quotes no message the code no longer prints.

The messages are found by reading the code, not by running it:

- Python under plugins/: the problem argument of ``entry.error(key, value, problem, fix)``, what is
  appended to a list named ``errors``, ``fail_json(msg=...)``, ``self.fail(...)``, every
  ``raise SomethingError("...")`` with a message, and the strings returned by functions named
  ``*_reason`` or ``*_blocker`` (sentences a module fails with, such as why zram is unavailable);
- roles/*/tasks: ``ansible.builtin.fail`` ``msg`` and ``ansible.builtin.assert`` ``fail_msg``, including
  the sentences a task builds in its ``vars`` with ``out.append(...)`` in Jinja, and the value of every
  ``set_fact`` key ending in ``_errors`` (with the task vars it names): a later assert prints those;
- roles/*/templates/*.j2, roles/*/files/*.sh and module_utils/_zram_steps.py: ``die "..."`` and ``echo "..." >&2``
  in the scripts the roles install, which print at boot or on the sync timer (shell expansions such as ``$MOUNT``
  are filled in at run time).

Each message is keyed by its distinctive phrase: the longest piece of literal text between the parts
filled in at run time (host, variable, value) in its first sentence, which states the problem (the
fix comes after). The page must contain that phrase (case, spacing, backticks and table escapes do not
matter). Run this file with Python to list every phrase and where it comes from:

    .venv/bin/python tests/unit/test_troubleshooting.py [--missing]
"""

from __future__ import annotations

import ast
import glob
import os
import re
import sys

import pytest
import yaml

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAGE = os.path.join(REPO_ROOT, "docs", "troubleshooting.md")
# Shorter phrases are not distinctive enough to find a message by.
MIN_PHRASE = 8
# Placeholders in %-format, str.format and Jinja, which split a message into literal pieces.
_PLACEHOLDER = re.compile(
    r"%(?:\([^)]*\))?[-#0 +]*\d*(?:\.\d+)?[sdrfixoeEgGc%]|\{[^{}]*\}|\{\{.*?\}\}|\{%.*?%\}|\\\d", re.S
)
# Shell expansions in the installed scripts: $VAR, ${VAR...}, $(command), $1; filled in at run time.
_SHELL_EXPANSION = re.compile(r"\$\{[^}]*\}|\$\([^)]*\)|\$[A-Za-z_][A-Za-z0-9_]*|\$[0-9*@#?]")
# A sentence ends at ". " before a capital, or where a filled-in part (itself ending a sentence) is
# followed by one: "... is refused: {{ reasons }} Free /tmp ...".
_SENTENCE_END = re.compile(r"(?<=\S)\.[\s\x00]+(?=[A-Z])|\x00\s+(?=[A-Z][a-z])")


# --- phrases ---------------------------------------------------------------------------------------


def normalize(text):
    text = text.replace("\\|", "|").replace("`", "")
    return re.sub(r"\s+", " ", text).strip().lower()


def phrase_of(pieces):
    """The distinctive phrase of a message given as its literal pieces.

    Placeholders split the pieces further. The phrase is the longest piece of the first sentence
    that has one of at least MIN_PHRASE characters: the problem, which comes before the fix.
    """
    template = "\x00".join(_PLACEHOLDER.sub("\x00", piece) for piece in pieces)
    for sentence in _SENTENCE_END.split(template):
        parts = [re.sub(r"\s+", " ", part).strip(" :;,.'\"()-") for part in sentence.split("\x00")]
        parts = [part for part in parts if len(part) >= MIN_PHRASE]
        if parts:
            return max(parts, key=len)
    return None


# --- Python ----------------------------------------------------------------------------------------


def literal_pieces(node):
    """Literal text of an expression that builds a string: constants, %, +, f-strings, .format()."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return literal_pieces(node.left)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return literal_pieces(node.left) + literal_pieces(node.right)
    if isinstance(node, ast.JoinedStr):
        return [value.value if isinstance(value, ast.Constant) else "{}" for value in node.values]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        return literal_pieces(node.func.value)
    if isinstance(node, ast.IfExp):
        return literal_pieces(node.body) + ["{}"] + literal_pieces(node.orelse)
    return []


def _call_name(node):
    func = node.func
    if isinstance(func, ast.Attribute):
        owner = func.value
        owner_name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else ""
        return func.attr, owner_name
    if isinstance(func, ast.Name):
        return func.id, ""
    return "", ""


def python_messages(path):
    """(line, kind, [literal pieces]) of every error message built in a Python file."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), filename=path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name.endswith(("_reason", "_blocker")):
            # Its sentences reach the user through the caller's fail_json or fail.
            for inner in ast.walk(node):
                if isinstance(inner, ast.Return) and inner.value is not None:
                    found.append((inner.lineno, node.name + "()", literal_pieces(inner.value)))
            continue
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            name, _owner = _call_name(node.exc)
            if name.endswith("Error"):
                found.append((node.lineno, "raise " + name, literal_pieces(node.exc.args[0])))
            continue
        if not isinstance(node, ast.Call):
            continue
        name, owner = _call_name(node)
        if name == "error" and len(node.args) >= 3:
            found.append((node.lineno, "error()", literal_pieces(node.args[2])))
        elif name == "append" and owner.endswith("errors") and node.args:
            found.append((node.lineno, "errors.append()", literal_pieces(node.args[0])))
        elif name == "fail_json":
            for keyword in node.keywords:
                if keyword.arg == "msg":
                    found.append((node.lineno, "fail_json()", literal_pieces(keyword.value)))
        elif name == "fail" and owner == "self" and node.args:
            found.append((node.lineno, "fail()", literal_pieces(node.args[0])))
    return found


# --- roles -----------------------------------------------------------------------------------------

_JINJA_STRING = re.compile(r"'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"")


def _appends(text):
    """The argument text of every out.append(...) in a Jinja template, brackets balanced."""
    found = []
    for match in re.finditer(r"\bout\.append\(", text):
        depth, pos = 1, match.end()
        while pos < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[pos], 0)
            pos += 1
        found.append(text[match.end() : pos - 1])
    return found


def _literal_groups(expression):
    """String literals of a Jinja expression, adjacent ones joined (Jinja concatenates them)."""
    groups = []
    end = None
    for match in _JINJA_STRING.finditer(expression):
        value = match.group(1) if match.group(1) is not None else match.group(2) or ""
        if end is not None and not expression[end : match.start()].strip() and groups:
            groups[-1] += value
        else:
            groups.append(value)
        end = match.end()
    return groups


def jinja_messages(text):
    """Messages in a Jinja template.

    Each out.append(...) is one message. Otherwise the text outside {{ }} is one, and each string
    literal (adjacent ones joined) of four words or more inside {{ }} is one more.
    """
    appends = _appends(text)
    if appends:
        return [_literal_groups(arg) for arg in appends]
    messages = [_PLACEHOLDER.split(text)]
    for expression in re.findall(r"\{\{(.*?)\}\}", text, re.S):
        # A sentence has words; 'unknown error' in a default() is a stand-in, not a message.
        messages.extend([group] for group in _literal_groups(expression) if len(group.split()) >= 4)
    return messages


def _tasks(items):
    for task in items or []:
        if not isinstance(task, dict):
            continue
        yield task
        for key in ("block", "rescue", "always"):
            yield from _tasks(task.get(key))


def role_messages(path):
    """(task name, kind, [literal pieces]) of every fail and assert message of a tasks file."""
    with open(path, encoding="utf-8") as handle:
        data = yaml.safe_load(handle)
    found = []
    for task in _tasks(data if isinstance(data, list) else []):
        for module, key in (("fail", "msg"), ("assert", "fail_msg"), ("assert", "msg")):
            args = task.get("ansible.builtin." + module) or task.get(module)
            if not isinstance(args, dict) or not isinstance(args.get(key), str):
                continue
            template = args[key]
            # A message that is only a variable ({{ __errors }}) is built in the task's vars.
            sources = [template]
            if re.fullmatch(r"\s*\{\{[^{}]*\}\}\s*", template) or "out.append" not in template:
                sources += [value for value in (task.get("vars") or {}).values() if isinstance(value, str)]
            for source in sources:
                for pieces in jinja_messages(source):
                    found.append((task.get("name", "?"), "%s %s" % (module, key), pieces))
        facts = task.get("ansible.builtin.set_fact") or task.get("set_fact")
        if isinstance(facts, dict):
            task_vars = task.get("vars") or {}
            for fact, value in facts.items():
                if not (str(fact).endswith("_errors") and isinstance(value, str)):
                    continue
                # "{{ __errors }}": the sentences are built in the task var it names.
                sources = [value] + [task_vars[name] for name in re.findall(r"\b\w+\b", value)
                                     if isinstance(task_vars.get(name), str)]
                for source in sources:
                    for pieces in jinja_messages(source):
                        found.append((task.get("name", "?"), "set_fact " + fact, pieces))
    return found


# --- scripts the roles install ---------------------------------------------------------------------

_SHELL_MESSAGE = re.compile(r"""\bdie\s+"((?:[^"\\]|\\.)*)"|\becho\s+"((?:[^"\\]|\\.)*)"\s*>&2""")


def template_messages(path):
    """(line, kind, [literal pieces]) of every die "..." and echo "..." >&2 of a role template."""
    found = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if line.lstrip().startswith("#"):
                continue
            for match in _SHELL_MESSAGE.finditer(line):
                kind, text = ("die", match.group(1)) if match.group(1) is not None else ("echo >&2", match.group(2))
                found.append((number, kind, _SHELL_EXPANSION.split(text)))
    return found


# --- all of them -----------------------------------------------------------------------------------


def collect(root=REPO_ROOT):
    """{phrase: [where, ...]} for every error message of the collection."""
    def python_files():
        for path in sorted(glob.glob(os.path.join(root, "plugins", "**", "*.py"), recursive=True)):
            if "doc_fragments" not in path:
                for line, kind, pieces in python_messages(path):
                    yield "%s:%d %s" % (os.path.relpath(path, root), line, kind), pieces

    def task_files():
        for path in sorted(glob.glob(os.path.join(root, "roles", "*", "tasks", "*.yml"))):
            for name, kind, pieces in role_messages(path):
                yield "%s (%s) %s" % (os.path.relpath(path, root), name, kind), pieces

    def template_files():
        # The zram boot script is installed by the executor, which holds its text (module_utils/_zram_steps.py).
        for path in sorted(glob.glob(os.path.join(root, "roles", "*", "templates", "*.j2"))
                           + glob.glob(os.path.join(root, "roles", "*", "files", "*.sh"))) + [
                os.path.join(root, "plugins", "module_utils", "_zram_steps.py")]:
            for line, kind, pieces in template_messages(path):
                yield "%s:%d %s" % (os.path.relpath(path, root), line, kind), pieces

    phrases = {}
    for source in (python_files, task_files, template_files):
        for where, pieces in source():
            phrase = phrase_of(pieces)
            if phrase:
                phrases.setdefault(phrase, []).append(where)
    return phrases


def missing(phrases, page_text):
    text = normalize(page_text)
    return sorted(phrase for phrase in phrases if normalize(phrase) not in text)


# --- tests -----------------------------------------------------------------------------------------

PHRASES = collect()


def test_messages_are_found():
    """The scan itself works: it finds messages of each kind in the places they are known to be."""
    wheres = " ".join(where for places in PHRASES.values() for where in places)
    for kind in ("error()", "errors.append()", "fail_json()", "raise SizeError", "fail msg", "assert fail_msg",
                 "unavailable_reason()",
                 "_persist_helper.py", "_zram_steps.py", " echo >&2"):
        assert kind in wheres, "no message of kind %s found: the scan is broken" % kind
    assert "a system path that must not be hidden under a RAM-backed mount" in PHRASES
    assert "is not a mount point: refusing to touch the directory under it" in PHRASES
    assert len(PHRASES) > 50


@pytest.mark.parametrize(
    "pieces, phrase",
    [
        (["Host %s: %s.path is '%s': it is a file, not a directory. Remove or move it."], "it is a file, not a directory"),
        (["not a boolean"], "not a boolean"),
        (["%s: %s"], None),
        (["%s is %s: ", "the size must be above zero, and this is %d%%"], "the size must be above zero, and this is"),
        (["Host {{ inventory_hostname }}: /tmp does not fit in RAM, so tmpfs_tmp is refused: {{ x }} Free /tmp."],
         "/tmp does not fit in RAM, so tmpfs_tmp is refused"),
        (_SHELL_EXPANSION.split("$MOUNT was not restored from $BACKING since it was mounted: the copy is newer"),
         "since it was mounted: the copy is newer"),
        (_SHELL_EXPANSION.split("zram-setup: $DEVICE is in use, so it cannot be reset to size $SIZE${ALGORITHM:+ x}"),
         "is in use, so it cannot be reset to size"),
    ],
)
def test_phrase_of(pieces, phrase):
    assert phrase_of(pieces) == phrase


def test_every_message_is_in_troubleshooting_page():
    with open(PAGE, encoding="utf-8") as handle:
        page = handle.read()
    absent = missing(PHRASES, page)
    assert not absent, "docs/troubleshooting.md does not cover %d message(s); add each phrase with its cause and fix:\n%s" % (
        len(absent), "\n".join("  %r  (%s)" % (phrase, "; ".join(PHRASES[phrase])) for phrase in absent))


def _strings(node):
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)


def source_text(root=REPO_ROOT):
    """Every string the code holds (Python constants, YAML values of role tasks, role templates), for finding
    stale rows."""
    texts = []
    for path in glob.glob(os.path.join(root, "plugins", "**", "*.py"), recursive=True):
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), filename=path)
        texts.extend(node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str))
    for path in glob.glob(os.path.join(root, "roles", "*", "tasks", "*.yml")):
        with open(path, encoding="utf-8") as handle:
            texts.extend(_strings(yaml.safe_load(handle)))
    for path in glob.glob(os.path.join(root, "roles", "*", "templates", "*.j2")) + \
            glob.glob(os.path.join(root, "roles", "*", "files", "*.sh")):
        with open(path, encoding="utf-8") as handle:
            texts.append(handle.read())
    return _loose(" ".join(texts))


def _loose(text):
    """Lower case, one space, no quotes, %% as %: YAML's '' and %-format escapes do not matter."""
    return re.sub(r"\s+", " ", re.sub(r"[`'\"]|\\\|", "", text.replace("%%", "%"))).lower()


def stale_rows(page_text, source):
    """Quoted messages in the first column of the page's tables that no code holds any more."""
    stale = []
    for line in page_text.splitlines():
        if not line.startswith("| `"):
            continue
        first_cell = re.split(r"(?<!\\)\|", line)[1]
        for quoted in re.findall(r"`([^`]+)`", first_cell):
            for fragment in re.split(r"<[^>]*>|\.\.\.", quoted):
                fragment = _loose(fragment).strip(" :;,.()")
                if len(fragment) >= 12 and fragment not in source:
                    stale.append(fragment)
    return stale


def test_page_quotes_only_messages_the_code_prints():
    """A message removed or reworded in the code must not linger on the page."""
    with open(PAGE, encoding="utf-8") as handle:
        page = handle.read()
    stale = stale_rows(page, source_text())
    assert not stale, "docs/troubleshooting.md quotes text no code prints any more; update or remove:\n  %s" % (
        "\n  ".join(stale))


if __name__ == "__main__":
    only_missing = "--missing" in sys.argv[1:]
    page_text = open(PAGE, encoding="utf-8").read() if os.path.exists(PAGE) else ""
    show = missing(PHRASES, page_text) if only_missing else sorted(PHRASES)
    for phrase in show:
        print("%s\n    %s" % (phrase, "\n    ".join(PHRASES[phrase])))
    print("%d phrases%s" % (len(show), " missing from docs/troubleshooting.md" if only_missing else ""))
