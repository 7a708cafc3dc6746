# SPDX-License-Identifier: GPL-3.0-or-later
"""docs/ is in sync with the sources (argument specs, ansible-doc), and every role's argument specs match its defaults."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys

import pytest
import yaml

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GEN_DOCS = os.path.join(REPO_ROOT, "scripts", "docs", "gen_docs.py")
ROLES = sorted(
    os.path.basename(os.path.dirname(os.path.dirname(path)))
    for path in glob.glob(os.path.join(REPO_ROOT, "roles", "*", "meta", "argument_specs.yml"))
)


def _load(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _copy_sources(tmp_path):
    for name in ("galaxy.yml", "roles", "plugins", "docs"):
        source = os.path.join(REPO_ROOT, name)
        target = tmp_path / name
        if os.path.isdir(source):
            shutil.copytree(source, target)
        else:
            shutil.copyfile(source, target)


def test_docs_in_sync():
    result = subprocess.run(
        [sys.executable, GEN_DOCS, "--check"], cwd=REPO_ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_gen_docs_check_names_a_stale_page(tmp_path):
    """--check against a copy with one page edited and one removed names both and the fix."""
    _copy_sources(tmp_path)
    subprocess.run([sys.executable, GEN_DOCS, "--root", str(tmp_path)], check=True, capture_output=True)
    (tmp_path / "docs" / "README.md").write_text("edited by hand\n", encoding="utf-8")
    (tmp_path / "docs" / "roles" / "tmpfs.md").unlink()
    result = subprocess.run(
        [sys.executable, GEN_DOCS, "--check", "--root", str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 1
    assert "docs/README.md differs" in result.stderr
    assert "docs/roles/tmpfs.md missing" in result.stderr
    assert "python scripts/docs/gen_docs.py" in result.stderr


@pytest.mark.parametrize("role", ROLES)
def test_argument_specs_match_defaults(role):
    role_dir = os.path.join(REPO_ROOT, "roles", role)
    specs = _load(os.path.join(role_dir, "meta", "argument_specs.yml")) or {}
    main = (specs.get("argument_specs") or {}).get("main")
    assert main is not None, "roles/%s/meta/argument_specs.yml has no entry point main" % role
    spec_keys = set(main.get("options") or {})
    defaults_path = os.path.join(role_dir, "defaults", "main.yml")
    default_keys = set((_load(defaults_path) or {}) if os.path.exists(defaults_path) else {})

    problems = []
    only_in_specs = sorted(spec_keys - default_keys)
    only_in_defaults = sorted(default_keys - spec_keys)
    if only_in_specs:
        problems.append(
            "in roles/%s/meta/argument_specs.yml (main) but missing from roles/%s/defaults/main.yml: %s"
            % (role, role, ", ".join(only_in_specs))
        )
    if only_in_defaults:
        problems.append(
            "in roles/%s/defaults/main.yml but missing from roles/%s/meta/argument_specs.yml (main): %s"
            % (role, role, ", ".join(only_in_defaults))
        )
    assert not problems, "; ".join(problems)


def test_module_pages_come_from_ansible_doc():
    """Module pages show what ansible-doc shows: our doc fragment's attributes merged in, no paths."""
    sys.path.insert(0, os.path.dirname(GEN_DOCS))
    try:
        import gen_docs
    finally:
        sys.path.pop(0)
    first = gen_docs.render_all(REPO_ROOT)
    assert first == gen_docs.render_all(REPO_ROOT), "gen_docs must give the same bytes for the same sources"
    page = first["modules/ramdisk_facts.md"]
    assert "ansible-doc -t module ramdisk.provision.ramdisk_facts" in page.splitlines()[0]
    # check_mode comes from plugins/doc_fragments/_attributes.py, merged by ansible-doc
    assert "| `check_mode` |" in page
    for text in first.values():
        assert REPO_ROOT not in text, "a generated page holds a path of this machine"


def test_gen_docs_names_a_plugin_ansible_doc_cannot_read(tmp_path):
    _copy_sources(tmp_path)
    module = tmp_path / "plugins" / "modules" / "tree_verify.py"
    text = module.read_text(encoding="utf-8")
    module.write_text(text.replace("short_description:", "short_description: [unclosed", 1), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, GEN_DOCS, "--check", "--root", str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "ramdisk.provision.tree_verify" in result.stderr


def test_security_page_lists_the_refused_directories_of_the_code():
    """docs/security.md's table of refused directories is REFUSED_DIRECTORIES, row for row, and names its exceptions."""
    from ansible_collections.ramdisk.provision.plugins.module_utils._plan_core import (
        REFUSED_DIRECTORIES,
        REFUSED_EXCEPTIONS,
    )

    with open(os.path.join(REPO_ROOT, "docs", "security.md"), encoding="utf-8") as handle:
        page = handle.read()
    begin = page.index("<!-- refused-directories:")
    end = page.index("<!-- end refused-directories -->")
    rows = [line for line in page[begin:end].splitlines() if line.startswith("| `")]
    wanted = ["| `%s` | %s | %s |" % (path, "and everything under it" if tree else "itself only", why)
              for path, tree, why in REFUSED_DIRECTORIES]
    assert rows == wanted, "update the table in docs/security.md from REFUSED_DIRECTORIES in plugins/module_utils/_plan_core.py"
    for allowed in REFUSED_EXCEPTIONS:
        assert "`%s` stays allowed" % allowed in page[end:]
