#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""Write the reference pages in docs/ from the collection's own documentation.

Sources, read without running any plugin code:

- roles/<role>/meta/argument_specs.yml (plus roles/<role>/defaults/main.yml for defaults)
  -> docs/roles/<role>.md
- `ansible-doc --json` of every module (plugins/modules/<module>.py) and filter (plugins/filter/<filter>.yml):
  the documentation as Ansible itself reads it, doc fragments merged -> docs/modules/<module>.md and
  docs/filters/<filter>.md. ansible-doc is the one next to the running Python (the venv's, pinned in
  requirements/dev.txt), and sees only this collection, through a temporary collections path.
- an index of all of them, plus the hand-written docs/*.md pages -> docs/README.md

docs/roles, docs/modules and docs/filters hold generated pages only; a page there without a source is
removed. Output is stable: same sources, same bytes.

Usage:
    python scripts/docs/gen_docs.py           # write the pages
    python scripts/docs/gen_docs.py --check   # exit 1 and name each stale page when docs/ is out of date
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMMAND = "python scripts/docs/gen_docs.py"
GENERATED_DIRS = ("roles", "modules", "filters")
INLINE_LIMIT = 60  # longer defaults and samples go below the table as YAML blocks


def read_galaxy(root):
    with open(os.path.join(root, "galaxy.yml"), encoding="utf-8") as handle:
        galaxy = yaml.safe_load(handle)
    return "%s.%s" % (galaxy["namespace"], galaxy["name"])


# --- markup ---------------------------------------------------------------------------------------

_MARKUP = re.compile(r"\bHORIZONTALLINE\b|\b(RV|[CIOVBMLUEP])\(")


def _closing_paren(text, start):
    """Index of the ')' that closes the '(' before start; nested pairs count, first ')' as fallback."""
    depth = 0
    for index in range(start, len(text)):
        char = text[index]
        if char == "(":
            depth += 1
        elif char == ")":
            if depth == 0:
                return index
            depth -= 1
    first = text.find(")", start)
    return first


def code(text):
    """Inline code that survives backticks and table pipes inside."""
    text = str(text)
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return "%s%s%s%s%s" % (fence, pad, text, pad, fence)


class Renderer:
    def __init__(self, collection, pages):
        self.collection = collection
        # fqcn -> path relative to docs/, for M() and P() links
        self.pages = pages

    def link_to(self, fqcn, plugin_type, here):
        target = self.pages.get((plugin_type, fqcn))
        if target is None:
            return code(fqcn)
        return "[%s](%s)" % (code(fqcn), os.path.relpath(target, os.path.dirname(here)).replace(os.sep, "/"))

    def markup(self, text, here):
        """Turn Ansible doc markup into Markdown. here: the page's path relative to docs/."""
        text = str(text)
        out = []
        pos = 0
        while True:
            match = _MARKUP.search(text, pos)
            if match is None:
                out.append(text[pos:])
                break
            out.append(text[pos : match.start()])
            name = match.group(1)
            if name is None:
                out.append("\n\n---\n\n")
                pos = match.end()
                continue
            end = _closing_paren(text, match.end())
            if end < 0:
                out.append(text[match.start() :])
                break
            inner = text[match.end() : end]
            pos = end + 1
            if name in ("C", "O", "V", "RV", "E"):
                out.append(code(inner))
            elif name == "I":
                out.append("*%s*" % inner)
            elif name == "B":
                out.append("**%s**" % inner)
            elif name == "U":
                out.append("<%s>" % inner)
            elif name == "L":
                label, _sep, url = inner.rpartition(",")
                out.append("[%s](%s)" % (label.strip(), url.strip()))
            elif name == "M":
                out.append(self.link_to(inner, "module", here))
            elif name == "P":
                fqcn, _sep, plugin_type = inner.partition("#")
                out.append(self.link_to(fqcn, plugin_type or "module", here))
        return "".join(out)

    def paragraphs(self, value, here, joiner="\n\n"):
        if value is None:
            return ""
        if isinstance(value, (list, tuple)):
            return joiner.join(self.markup(item, here).strip() for item in value)
        return self.markup(value, here).strip()

    def cell(self, value, here):
        """Text for a table cell: one line, paragraphs split by <br>, pipes escaped."""
        text = self.paragraphs(value, here, joiner="<br><br>")
        text = " ".join(line.strip() for line in text.splitlines())
        return text.replace("|", "\\|")


def inline_value(value):
    return json.dumps(value, ensure_ascii=False)


class _IndentedDumper(yaml.SafeDumper):
    """Lists indented under their key, as yamllint's default and our own YAML files have them."""

    def increase_indent(self, flow=False, indentless=False):
        return super().increase_indent(flow, False)


def yaml_block(value):
    return yaml.dump(
        value, Dumper=_IndentedDumper, default_flow_style=False, sort_keys=False, allow_unicode=True, width=100
    ).rstrip()


def choice_text(value):
    """A choice as a user writes it: strings bare, anything else (booleans, numbers) as JSON."""
    return value if isinstance(value, str) else inline_value(value)


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


# --- option and return value tables --------------------------------------------------------------


def _child_name(parent, name, spec):
    if parent is None:
        return name
    return "%s%s.%s" % (parent[0], "[]" if parent[1] else "", name)


def flatten(specs, children_key, parent=None):
    """(dotted name, spec) for every option, depth first, in sorted order at each level."""
    rows = []
    for name in sorted(specs or {}):
        spec = specs[name] or {}
        full = _child_name(parent, name, spec)
        rows.append((full, spec))
        children = spec.get(children_key) or (spec.get("options") if children_key == "suboptions" else None)
        if children:
            is_list = spec.get("type") == "list"
            rows.extend(flatten(children, children_key, (full, is_list)))
    return rows


def lookup_default(defaults, dotted):
    """The value at a dotted name in defaults/main.yml, or a sentinel when absent or under a list."""
    if "[]" in dotted:
        return _MISSING
    node = defaults
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


_MISSING = object()


class Page:
    def __init__(self, renderer, here):
        self.renderer = renderer
        self.here = here
        self.lines = []
        self.blocks = []  # (heading, value) shown below a table

    def add(self, *lines):
        self.lines.extend(lines)

    def md(self, value, joiner="\n\n"):
        return self.renderer.paragraphs(value, self.here, joiner)

    def cell(self, value):
        return self.renderer.cell(value, self.here)

    def value_cell(self, value, heading, long_target=None):
        text = inline_value(value)
        if len(text) <= INLINE_LIMIT:
            return code(text).replace("|", "\\|")
        if long_target:
            return "see [%s](#%s)" % (long_target, slug(long_target))
        self.blocks.append((heading, value))
        return "see [below](#%s)" % slug(heading)

    def flush_blocks(self):
        for heading, value in self.blocks:
            self.add("#### %s" % heading, "", "```yaml", yaml_block(value), "```", "")
        self.blocks = []

    def options_table(self, specs, children_key, defaults=None, long_target=None):
        rows = flatten(specs, children_key)
        if not rows:
            self.add("None.", "")
            return
        self.add(
            "| Option | Type | Elements | Default | Choices | Required | Description |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        )
        for name, spec in rows:
            if "default" in spec:
                default = spec["default"]
            elif defaults is not None:
                default = lookup_default(defaults, name)
            else:
                default = _MISSING
            default_cell = (
                "" if default is _MISSING else self.value_cell(default, "Default of `%s`" % name, long_target)
            )
            choices = spec.get("choices")
            choices_cell = ", ".join(code(choice_text(c)) for c in choices).replace("|", "\\|") if choices else ""
            description = spec.get("description")
            if spec.get("aliases"):
                description = list(description if isinstance(description, list) else [description or ""])
                description.append("Aliases: %s." % ", ".join("C(%s)" % a for a in spec["aliases"]))
            self.add(
                "| %s | %s | %s | %s | %s | %s | %s |"
                % (
                    code(name),
                    spec.get("type", "str"),
                    spec.get("elements", ""),
                    default_cell,
                    choices_cell,
                    "yes" if spec.get("required") else "no",
                    self.cell(description),
                )
            )
        self.add("")
        self.flush_blocks()

    def return_table(self, returns):
        rows = flatten(returns, "contains")
        if not rows:
            self.add("None.", "")
            return
        self.add(
            "| Key | Type | Elements | Returned | Description | Sample |",
            "| --- | --- | --- | --- | --- | --- |",
        )
        for name, spec in rows:
            sample = self.value_cell(spec["sample"], "Sample of `%s`" % name) if "sample" in spec else ""
            self.add(
                "| %s | %s | %s | %s | %s | %s |"
                % (
                    code(name),
                    spec.get("type", ""),
                    spec.get("elements", ""),
                    self.cell(spec.get("returned", "")),
                    self.cell(spec.get("description")),
                    sample,
                )
            )
        self.add("")
        self.flush_blocks()

    def text(self):
        return "\n".join(self.lines).rstrip() + "\n"


def header(source):
    return "<!-- Generated by scripts/docs/gen_docs.py from %s. Do not edit; run: %s -->" % (source, COMMAND)


def common_sections(page, doc):
    if doc.get("version_added"):
        page.add("Added in version %s." % doc["version_added"], "")
    deprecated = doc.get("deprecated")
    if isinstance(deprecated, dict):
        version = deprecated.get("removed_in") or deprecated.get("removed_at_date") or "a later release"
        page.add("**Deprecated**, removed in %s: %s Instead: %s" % (
            version, page.md(deprecated.get("why") or ""), page.md(deprecated.get("alternative") or "")), "")
    if doc.get("requirements"):
        page.add("## Requirements", "")
        page.add(*["- %s" % page.md(item) for item in doc["requirements"]])
        page.add("")


def tail_sections(page, doc):
    if doc.get("notes"):
        page.add("## Notes", "")
        page.add(*["- %s" % page.md(note).replace("\n", "\n  ") for note in doc["notes"]])
        page.add("")
    if doc.get("seealso"):
        page.add("## See also", "")
        for item in doc["seealso"]:
            if "module" in item:
                line = page.renderer.link_to(item["module"], "module", page.here)
            elif "plugin" in item:
                line = page.renderer.link_to(item["plugin"], item.get("plugin_type", "module"), page.here)
            elif "link" in item:
                line = "[%s](%s)" % (item.get("name", item["link"]), item["link"])
            else:
                line = item.get("name", "")
            if item.get("description"):
                line += ": " + page.md(item["description"], " ")
            page.add("- " + line)
        page.add("")
    authors = doc.get("author")
    if authors:
        authors = authors if isinstance(authors, list) else [authors]
        page.add("## Authors", "")
        page.add(*["- %s" % a for a in authors])
        page.add("")


# --- roles ---------------------------------------------------------------------------------------


def _load_yaml(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def role_page(root, renderer, collection, role):
    here = "roles/%s.md" % role
    specs = (_load_yaml(os.path.join(root, "roles", role, "meta", "argument_specs.yml")) or {}).get(
        "argument_specs"
    ) or {}
    defaults_path = os.path.join(root, "roles", role, "defaults", "main.yml")
    defaults = (_load_yaml(defaults_path) or {}) if os.path.exists(defaults_path) else {}
    main = specs.get("main") or {}
    page = Page(renderer, here)
    page.add(header("roles/%s/meta/argument_specs.yml and roles/%s/defaults/main.yml" % (role, role)), "")
    page.add("# Role %s.%s" % (collection, role), "")
    if main.get("short_description"):
        page.add(page.md(main["short_description"]), "")
    if main.get("description"):
        page.add(page.md(main["description"]), "")
    entry_points = sorted(specs, key=lambda name: (name != "main", name))
    for entry in entry_points:
        spec = specs[entry] or {}
        page.add("## Entry point `%s`" % entry, "")
        if entry != "main":
            if spec.get("short_description"):
                page.add(page.md(spec["short_description"]), "")
            if spec.get("description"):
                page.add(page.md(spec["description"]), "")
        # defaults/main.yml applies to every entry point of the role
        page.add("### Options of `%s`" % entry, "")
        page.options_table(spec.get("options") or {}, "options", defaults, "Shipped defaults" if defaults else None)
    if os.path.exists(defaults_path):
        with open(defaults_path, encoding="utf-8") as handle:
            shipped = handle.read().rstrip()
        page.add("## Shipped defaults", "", "`roles/%s/defaults/main.yml`:" % role, "", "```yaml", shipped, "```", "")
    return here, page.text(), main.get("short_description", "")


# --- modules -------------------------------------------------------------------------------------


class AnsibleDocError(Exception):
    pass


def _ansible_doc_executable():
    beside = os.path.join(os.path.dirname(sys.executable), "ansible-doc")
    if os.access(beside, os.X_OK):
        return beside
    found = shutil.which("ansible-doc")
    if found is None:
        raise AnsibleDocError(
            "ansible-doc is not installed next to %s nor on PATH; run with the project's venv: "
            ".venv/bin/python scripts/docs/gen_docs.py" % sys.executable
        )
    return found


def ansible_doc(root, collection, plugin_type, names):
    """{short name: ansible-doc's JSON (doc, examples, return)} for plugins of the collection at root."""
    if not names:
        return {}
    namespace, name = collection.split(".", 1)
    with tempfile.TemporaryDirectory(prefix="gen_docs.") as tmp:
        link = os.path.join(tmp, "ansible_collections", namespace, name)
        os.makedirs(os.path.dirname(link))
        os.symlink(os.path.abspath(root), link)
        config = os.path.join(tmp, "ansible.cfg")
        with open(config, "w", encoding="utf-8") as handle:
            handle.write("[defaults]\n")
        env = dict(os.environ)
        env.update(
            ANSIBLE_CONFIG=config,
            ANSIBLE_COLLECTIONS_PATH=tmp,
            ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false",
            ANSIBLE_HOME=os.path.join(tmp, "home"),
            ANSIBLE_LOCAL_TEMP=os.path.join(tmp, "local"),
            ANSIBLE_NOCOLOR="1",
            ANSIBLE_DEPRECATION_WARNINGS="false",
            LC_ALL="C.UTF-8",
        )
        command = [_ansible_doc_executable(), "-t", plugin_type, "--json"]
        command += ["%s.%s" % (collection, short) for short in names]
        result = subprocess.run(command, cwd=tmp, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise AnsibleDocError(
            "ansible-doc -t %s could not read the documentation (fix the plugin's documentation):\n%s"
            % (plugin_type, (result.stderr or result.stdout).strip())
        )
    try:
        data = json.loads(result.stdout)
    except ValueError:
        raise AnsibleDocError("ansible-doc -t %s printed no JSON:\n%s" % (plugin_type, result.stdout[-2000:]))
    out = {}
    for short in names:
        fqcn = "%s.%s" % (collection, short)
        if fqcn not in data or not (data[fqcn] or {}).get("doc"):
            raise AnsibleDocError("ansible-doc -t %s has no documentation for %s" % (plugin_type, fqcn))
        out[short] = data[fqcn]
    return out


def module_page(renderer, collection, module, data):
    here = "modules/%s.md" % module
    doc = dict(data.get("doc") or {})
    examples = (data.get("examples") or "").strip("\n")
    returns = data.get("return") or {}

    page = Page(renderer, here)
    page.add(header("`ansible-doc -t module %s.%s` (plugins/modules/%s.py)" % (collection, module, module)), "")
    page.add("# Module %s.%s" % (collection, module), "")
    if doc.get("short_description"):
        page.add(page.md(doc["short_description"]), "")
    common_sections(page, doc)
    page.add("## Synopsis", "")
    page.add(*["- %s" % page.md(item).replace("\n", "\n  ") for item in _as_list(doc.get("description"))])
    page.add("")
    page.add("## Options", "")
    page.options_table(doc.get("options") or {}, "suboptions")
    attributes = doc.get("attributes") or {}
    if attributes:
        page.add("## Attributes", "")
        page.add("| Attribute | Support | Description |", "| --- | --- | --- |")
        for name in sorted(attributes):
            attribute = attributes[name] or {}
            support = str(attribute.get("support", ""))
            if attribute.get("platforms"):
                platforms = attribute["platforms"]
                platforms = platforms if isinstance(platforms, list) else [platforms]
                support += " (%s)" % ", ".join(str(p) for p in platforms)
            if attribute.get("details"):
                support += ": " + page.cell(attribute["details"])
            page.add("| %s | %s | %s |" % (code(name), support, page.cell(attribute.get("description"))))
        page.add("")
    if examples:
        page.add("## Examples", "", "```yaml", examples, "```", "")
    page.add("## Return values", "")
    page.return_table(returns)
    tail_sections(page, doc)
    return here, page.text(), doc.get("short_description", "")


def _as_list(value):
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


# --- filters -------------------------------------------------------------------------------------


def filter_page(renderer, collection, name, source, data):
    doc = dict(data.get("doc") or {})
    here = "filters/%s.md" % name
    page = Page(renderer, here)
    page.add(header("`ansible-doc -t filter %s.%s` (plugins/filter/%s)" % (collection, name, source)), "")
    page.add("# Filter %s.%s" % (collection, name), "")
    if doc.get("short_description"):
        page.add(page.md(doc["short_description"]), "")
    common_sections(page, doc)
    page.add("## Synopsis", "")
    page.add(*["- %s" % page.md(item).replace("\n", "\n  ") for item in _as_list(doc.get("description"))])
    page.add("")
    positional = doc.get("positional")
    if positional:
        positional = positional if isinstance(positional, list) else [p.strip() for p in str(positional).split(",")]
        others = sorted(set(doc.get("options") or {}) - set(positional))
        page.add(
            "`%s` is the value on the left of the `|`%s%s."
            % (
                positional[0],
                (", then %s in this order" % ", ".join(code(p) for p in positional[1:])) if len(positional) > 1 else "",
                "; the other options are the filter's arguments" if others else "",
            ),
            "",
        )
    page.add("## Input and options", "")
    page.options_table(doc.get("options") or {}, "suboptions")
    examples = data.get("examples")
    if isinstance(examples, str) and examples.strip():
        page.add("## Examples", "", "```yaml", examples.strip("\n"), "```", "")
    page.add("## Return value", "")
    page.return_table(data.get("return") or {})
    tail_sections(page, doc)
    return here, page.text(), doc.get("short_description", "")


# --- index and driver ----------------------------------------------------------------------------


def _first_heading(path):
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("# "):
                return line[2:].strip()
    return os.path.basename(path)


def sources(root):
    roles = (
        sorted(
            name
            for name in os.listdir(os.path.join(root, "roles"))
            if os.path.isfile(os.path.join(root, "roles", name, "meta", "argument_specs.yml"))
        )
        if os.path.isdir(os.path.join(root, "roles"))
        else []
    )
    modules_dir = os.path.join(root, "plugins", "modules")
    modules = (
        sorted(
            name[:-3]
            for name in os.listdir(modules_dir)
            if name.endswith(".py") and not name.startswith("_") and name != "__init__.py"
        )
        if os.path.isdir(modules_dir)
        else []
    )
    filter_dir = os.path.join(root, "plugins", "filter")
    filters = (
        sorted(name for name in os.listdir(filter_dir) if name.endswith((".yml", ".yaml")))
        if os.path.isdir(filter_dir)
        else []
    )
    return roles, modules, filters


def render_all(root):
    """{path relative to docs/: text} for every generated page."""
    collection = read_galaxy(root)
    roles, modules, filter_files = sources(root)
    pages = {}
    for module in modules:
        pages[("module", "%s.%s" % (collection, module))] = "modules/%s.md" % module
    filter_names = {}
    for source in filter_files:
        doc = (_load_yaml(os.path.join(root, "plugins", "filter", source)) or {}).get("DOCUMENTATION") or {}
        name = doc.get("name") or os.path.splitext(source)[0]
        filter_names[source] = name
        pages[("filter", "%s.%s" % (collection, name))] = "filters/%s.md" % name
    for role in roles:
        pages[("role", "%s.%s" % (collection, role))] = "roles/%s.md" % role
    renderer = Renderer(collection, pages)

    out = {}
    index = {"roles": [], "modules": [], "filters": []}
    for role in roles:
        path, text, short = role_page(root, renderer, collection, role)
        out[path] = text
        index["roles"].append(("%s.%s" % (collection, role), path, short))
    module_docs = ansible_doc(root, collection, "module", modules)
    for module in modules:
        path, text, short = module_page(renderer, collection, module, module_docs[module])
        out[path] = text
        index["modules"].append(("%s.%s" % (collection, module), path, short))
    filter_docs = ansible_doc(root, collection, "filter", sorted(set(filter_names.values())))
    for source in filter_files:
        name = filter_names[source]
        path, text, short = filter_page(renderer, collection, name, source, filter_docs[name])
        out[path] = text
        index["filters"].append(("%s.%s" % (collection, name), path, short))

    docs_dir = os.path.join(root, "docs")
    hand_written = sorted(
        name
        for name in (os.listdir(docs_dir) if os.path.isdir(docs_dir) else [])
        if name.endswith(".md") and name != "README.md"
    )
    # The index is the page people open first: its commands name the venv's Python, which has ansible-doc.
    readme_command = ".venv/bin/python scripts/docs/gen_docs.py"
    lines = [
        "<!-- Generated by scripts/docs/gen_docs.py from roles/, plugins/ and the hand-written pages in docs/. "
        "Do not edit; run: %s -->" % readme_command,
        "",
        "# %s documentation" % collection,
        "",
    ]
    if hand_written:
        lines += ["## Guides", ""]
        lines += ["- [%s](%s)" % (_first_heading(os.path.join(docs_dir, name)), name) for name in hand_written]
        lines.append("")
    for section, title in (("roles", "Roles"), ("modules", "Modules"), ("filters", "Filters")):
        if not index[section]:
            continue
        lines += ["## %s" % title, "", "| Name | Description |", "| --- | --- |"]
        for fqcn, path, short in sorted(index[section]):
            lines.append("| [%s](%s) | %s |" % (code(fqcn), path, renderer.cell(short, "README.md")))
        lines.append("")
    lines += [
        "Pages under `roles/`, `modules/` and `filters/` and this index are generated from the collection's own",
        "documentation: edit the sources, then, from the top of the clone, run",
        "`%s`." % readme_command,
        "",
    ]
    out["README.md"] = "\n".join(lines)
    return out


def stale_files(root, wanted):
    """Generated paths (relative to docs/) whose file is missing, differs, or has no source."""
    docs_dir = os.path.join(root, "docs")
    stale = []
    for path in sorted(wanted):
        full = os.path.join(docs_dir, path)
        try:
            with open(full, encoding="utf-8") as handle:
                if handle.read() != wanted[path]:
                    stale.append((path, "differs"))
        except FileNotFoundError:
            stale.append((path, "missing"))
    for path in orphans(root, wanted):
        stale.append((path, "has no source"))
    return stale


def orphans(root, wanted):
    found = []
    for directory in GENERATED_DIRS:
        full = os.path.join(root, "docs", directory)
        if not os.path.isdir(full):
            continue
        for name in sorted(os.listdir(full)):
            path = "%s/%s" % (directory, name)
            if name.endswith(".md") and path not in wanted:
                found.append(path)
    return found


def write(root, wanted):
    docs_dir = os.path.join(root, "docs")
    written = []
    for path, reason in stale_files(root, wanted):
        full = os.path.join(docs_dir, path)
        if reason == "has no source":
            os.remove(full)
            written.append("removed docs/%s" % path)
            continue
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(wanted[path])
        written.append("wrote docs/%s" % path)
    return written


def main(argv=None):
    parser = argparse.ArgumentParser(description="Generate docs/ from argument specs, module and filter docs.")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if any generated page is stale")
    parser.add_argument("--root", default=REPO_ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        wanted = render_all(args.root)
    except AnsibleDocError as exc:
        print("gen_docs: %s" % exc, file=sys.stderr)
        return 2
    if args.check:
        stale = stale_files(args.root, wanted)
        if stale:
            for path, reason in stale:
                print("gen_docs: docs/%s %s" % (path, reason), file=sys.stderr)
            print(
                "gen_docs: %d generated page(s) out of date; to fix, run: %s" % (len(stale), COMMAND), file=sys.stderr
            )
            return 1
        print("gen_docs: %d generated pages up to date" % len(wanted))
        return 0
    changes = write(args.root, wanted)
    for line in changes:
        print("gen_docs: " + line)
    print("gen_docs: %d generated pages, %d changed" % (len(wanted), len(changes)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
