# SPDX-License-Identifier: GPL-3.0-or-later
"""Each role is a door of its own (issue 43): no role or playbook sets another role's private variables
(__<role>_*), and no role reaches into another role's files by path (role_path ~ '/../<role>/...'). A role takes
what it needs through the other role's public variables, or from what ramdisk_plan returns."""

from __future__ import annotations

import os
import re

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLES = sorted(name for name in os.listdir(os.path.join(REPO, "roles"))
               if os.path.isdir(os.path.join(REPO, "roles", name)))
PRIVATE = re.compile(r"^__([a-z0-9]+)_")
# role_path, then up out of the role and into another one's directory (the collection's plugins are not a role).
INTO_A_ROLE = re.compile(r"role_path\s*\}*\s*(?:~\s*)?['\"]?/\.\./(?:\.\./roles/)?(%s)/" % "|".join(map(re.escape, ROLES)))


def _yaml_files():
    for top in ("roles", "playbooks"):
        for directory, subdirectories, names in os.walk(os.path.join(REPO, top)):
            subdirectories.sort()
            for name in sorted(names):
                if name.endswith((".yml", ".yaml", ".j2")):
                    yield os.path.relpath(os.path.join(directory, name), REPO).replace(os.sep, "/")


def _owner(relative):
    """The role a file belongs to, or None for a playbook."""
    parts = relative.split("/")
    return parts[1] if parts[0] == "roles" else None


def _set_names(node):
    """Every variable name a task or play sets: the keys of vars, set_fact and include_role's vars, and register."""
    if isinstance(node, list):
        for item in node:
            yield from _set_names(item)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key == "vars" and isinstance(value, dict):
            yield from value
        elif key in ("ansible.builtin.set_fact", "set_fact") and isinstance(value, dict):
            yield from (name for name in value if name != "cacheable")
        elif key == "register" and isinstance(value, str):
            yield value
        if isinstance(value, (list, dict)):
            yield from _set_names(value)


def crossings(relative, text):
    """What RELATIVE (a file of roles/ or playbooks/) does across a role's boundary, as sentences."""
    owner = _owner(relative)
    out = []
    if relative.endswith((".yml", ".yaml")):
        for name in sorted(set(_set_names(yaml.safe_load(text)))):
            match = PRIVATE.match(str(name))
            if match and match.group(1) in ROLES and match.group(1) != owner:
                out.append("%s sets %s, a private variable of the role %s" % (relative, name, match.group(1)))
    for match in INTO_A_ROLE.finditer(text):
        if match.group(1) != owner:
            out.append("%s reads the role %s's files by path" % (relative, match.group(1)))
    return out


def test_no_role_or_playbook_crosses_into_another_role():
    found = []
    for relative in _yaml_files():
        with open(os.path.join(REPO, relative), encoding="utf-8") as handle:
            found.extend(crossings(relative, handle.read()))
    assert not found, "\n".join(found)


@pytest.mark.parametrize("relative, text, said", [
    ("roles/ramdisk/tasks/apply.yml",
     "- name: x\n  ansible.builtin.include_role: {name: ramdisk.provision.zram}\n  vars:\n    __zram_planned: {}\n",
     "roles/ramdisk/tasks/apply.yml sets __zram_planned, a private variable of the role zram"),
    ("playbooks/site.yml",
     "- hosts: all\n  tasks:\n    - ansible.builtin.set_fact:\n        __ramdisk_recover: false\n",
     "playbooks/site.yml sets __ramdisk_recover, a private variable of the role ramdisk"),
    ("roles/ramdisk/tasks/plan.yml",
     "- name: x\n  ansible.builtin.debug:\n    msg: \"{{ role_path ~ '/../mount/files/persist.sh' }}\"\n",
     "roles/ramdisk/tasks/plan.yml reads the role mount's files by path"),
])
def test_the_check_sees_each_kind_of_crossing(relative, text, said):
    """The three crossings main had at 1ed3741 (apply.yml, survey.yml, plan.yml), each caught."""
    assert crossings(relative, text) == [said]


def test_a_role_may_set_its_own_private_variables_and_copy_the_collections_plugins():
    text = ("- name: x\n  ansible.builtin.copy:\n    src: \"{{ role_path }}/../../plugins/module_utils/_size.py\"\n"
            "  register: __ramdisk_copied\n")
    assert crossings("roles/ramdisk/tasks/metrics.yml", text) == []
