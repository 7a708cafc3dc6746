# SPDX-License-Identifier: GPL-3.0-or-later
"""docs/recipes.md says only what the roles take: every YAML block parses and names its group_vars file, every
variable and key is one the argument specs accept, and each recipe, as a host in all of its groups gets it, is
planned by plan_host() without an error, on a host of fake facts (the ramdisk role's own request, rendered from its
defaults and vars). The playbooks its commands name exist."""

from __future__ import annotations

import copy
import os
import re

import pytest
import yaml
from jinja2.nativetypes import NativeEnvironment

from conftest import REPO_ROOT, load_script
from ansible_collections.ramdisk.provision.plugins.module_utils import _host_plan as hp

DOC = os.path.join(REPO_ROOT, "docs", "recipes.md")
ROLES = ("ramdisk", "zram", "tmpfs")
POLICY_PREFIX = "ramdisk_mounts__"
ZRAM_PREFIX = "zram_devices__"
FILE_LINE = re.compile(r"^# (group_vars/[A-Za-z0-9_.-]+\.yml)$")
GIB = 1024 ** 3
MIB = 1024 ** 2

# The fake HostView of plan_host()'s own tests: accounts, links, records, what the kernel and mkfs refuse.
FakeView = load_script(os.path.join("tests", "unit", "plugins", "module_utils", "test__host_plan.py"),
                       "host_plan_tests").FakeView


def _load(*parts):
    with open(os.path.join(REPO_ROOT, *parts), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _options(role):
    return _load("roles", role, "meta", "argument_specs.yml")["argument_specs"]["main"]["options"]


SPECS = dict((role, _options(role)) for role in ROLES)
# The ramdisk role takes persist as raw (ramdisk_plan names a wrong key in one sentence); its keys are the tmpfs
# role's, which the planner checks an entry's persist against.
PERSIST_SPEC = SPECS["tmpfs"]["tmpfs_mounts"]["options"]["persist"]


def _sections():
    """[(title, [(file, data)])]: each `## ` section of the page with its YAML blocks, in order."""
    sections = []
    block = None
    with open(DOC, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if block is not None:
                if line.rstrip() == "```":
                    text = "".join(block[1])
                    found = FILE_LINE.match(block[1][0].rstrip()) if block[1] else None
                    assert found, "docs/recipes.md:%d: the YAML block's first line must name its file, such as " \
                                  "'# group_vars/all.yml'" % block[0]
                    data = yaml.safe_load(text)
                    assert isinstance(data, dict) and data, "docs/recipes.md:%d: not a mapping of variables" % block[0]
                    sections[-1][1].append((found.group(1), data))
                    block = None
                else:
                    block[1].append(line)
            elif line.startswith("## "):
                sections.append((line[3:].strip(), []))
            elif line.rstrip() == "```yaml":
                assert sections, "docs/recipes.md:%d: a YAML block before the first recipe" % number
                block = (number + 1, [])
    assert block is None, "docs/recipes.md: a YAML block is not closed"
    return [(title, blocks) for title, blocks in sections if blocks]


RECIPES = _sections()


def _setups(blocks):
    """Each state a recipe describes: its files as first given, then, for each later block naming a file again (the
    undo), the same files with that one replaced."""
    base = {}
    for name, data in blocks:
        base.setdefault(name, data)
    setups = [("as given", base)]
    seen = set()
    for name, data in blocks:
        if name in seen:
            setups.append(("%s again" % name, dict(base, **{name: data})))
        seen.add(name)
    return setups


def _variables(files):
    """The variables of a host in every group of FILES; two files may not set one variable."""
    merged = {}
    for name, data in sorted(files.items()):
        for variable, value in data.items():
            assert variable not in merged, "%s sets %s, and another file of the recipe does too" % (name, variable)
            merged[variable] = value
    return merged


def test_the_page_has_five_recipes_each_with_its_files():
    assert len(RECIPES) == 5, [title for title, _blocks in RECIPES]
    for title, blocks in RECIPES:
        assert blocks, title


def _spec_of(variable):
    if variable.startswith(POLICY_PREFIX) and len(variable) > len(POLICY_PREFIX):
        return SPECS["ramdisk"]["ramdisk_mounts"]
    if variable.startswith(ZRAM_PREFIX) and len(variable) > len(ZRAM_PREFIX):
        return SPECS["zram"]["zram_devices"]
    for role in ROLES:
        if variable in SPECS[role]:
            return SPECS[role][variable]
    return None


def _key_errors(where, value, spec):
    """Every key under VALUE that SPEC (an argument spec option) does not know, and every value outside its choices."""
    errors = []
    if "choices" in spec and not isinstance(value, (dict, list)) and value not in spec["choices"]:
        errors.append("%s is %r: not one of %s" % (where, value, spec["choices"]))
    options = spec.get("options")
    if options is None:
        return errors
    items = list(enumerate(value)) if isinstance(value, list) else [(None, value)]
    for index, item in items:
        here = where if index is None else "%s[%s]" % (where, index)
        if not isinstance(item, dict):
            errors.append("%s is %r: not a mapping" % (here, item))
            continue
        for key, sub in item.items():
            if key not in options:
                errors.append("%s.%s: not a key the argument spec accepts (%s)" % (here, key, ", ".join(sorted(options))))
                continue
            child = options[key]
            if key == "persist" and "options" not in child and sub is not None:
                child = PERSIST_SPEC
            errors.extend(_key_errors("%s.%s" % (here, key), sub, child))
    return errors


@pytest.mark.parametrize("title, blocks", RECIPES, ids=[title for title, _blocks in RECIPES])
def test_every_variable_and_key_is_one_the_roles_accept(title, blocks):
    errors = []
    for name, data in blocks:
        for variable, value in data.items():
            spec = _spec_of(variable)
            if spec is None:
                errors.append("%s: %s is not a variable of the %s roles, nor %s<group> or %s<group>"
                              % (name, variable, ", ".join(ROLES), POLICY_PREFIX, ZRAM_PREFIX))
                continue
            errors.extend("%s: %s" % (name, error) for error in _key_errors(variable, value, spec))
    assert not errors, "\n".join(errors)


def _role_variables(variables):
    """The ramdisk role's variables for a host with VARIABLES: its defaults, the recipe's over them, and its
    vars/main.yml (the built-in purposes) rendered from both, as Ansible renders them."""
    values = dict(_load("roles", "ramdisk", "defaults", "main.yml"), **variables)
    # The role's vars, less what only Ansible renders (query and lookup): the zram sources are built below.
    values.update((name, value) for name, value in _load("roles", "ramdisk", "vars", "main.yml").items()
                  if name != "__ramdisk_zram_sources")
    environment = NativeEnvironment()

    def render(value):
        if isinstance(value, str) and "{{" in value:
            return environment.from_string(value).render(**values)
        if isinstance(value, dict):
            return dict((key, render(item)) for key, item in value.items())
        if isinstance(value, list):
            return [render(item) for item in value]
        return value

    return dict((name, render(value)) for name, value in values.items())


def _request(variables):
    """What roles/ramdisk/tasks/plan.yml hands ramdisk_plan for a host with VARIABLES."""
    values = _role_variables(variables)
    sources = [{"name": "ramdisk_mounts", "value": values["ramdisk_mounts"]}]
    if values["ramdisk_merge_policies"]:
        sources += [{"name": name, "value": values[name]} for name in sorted(values)
                    if name.startswith(POLICY_PREFIX) and len(name) > len(POLICY_PREFIX)]
    present = values["ramdisk_state"] == "present"
    swap_devices, source_errors = values["ramdisk_zram_swap_devices"], []
    if present and swap_devices is None:
        # zram_devices and every zram_devices__<group>, merged on the host (ramdisk_plan's zram_sources).
        zram_sources = [{"name": "zram_devices", "value": values.get("zram_devices") or []}]
        zram_sources += [{"name": name, "value": values[name]} for name in sorted(values)
                         if name.startswith(ZRAM_PREFIX)]
        swap_devices, source_errors = hp.merge_zram_sources(zram_sources, "recipe-host")
    return {
        "sources": sources, "purposes": values["__ramdisk_builtin_purposes"],
        "purpose_overrides": values["ramdisk_purposes"], "defaults": values["ramdisk_mount_defaults"],
        "state": values["ramdisk_state"], "budget": values["ramdisk_ram_budget"],
        "zram_ratio": values["ramdisk_zram_assumed_ratio"],
        "swap_devices": swap_devices if present else [], "source_errors": source_errors,
        "swap_defaults": values.get("zram_device_defaults", {}),
        "swap_allow_fallback": values.get("zram_allow_algorithm_fallback", False),
        "zram_persistence": values.get("zram_persistence", "units"), "scan_timeout": values["ramdisk_scan_timeout"],
        "variables": sorted(name for name in values if name.lower().startswith("r")),
    }


def _facts(ram, paths, available=None):
    """A systemd host of RAM bytes (AVAILABLE of them free, else 3 in 4) with 2 GiB of disk swap, whose directories
    PATHS (path -> bytes in it) hold data."""
    return {
        "memory": {"total_bytes": ram, "available_bytes": ram * 3 // 4 if available is None else available},
        "swap": {"total_bytes": 2 * GIB, "free_bytes": 2 * GIB, "devices": []},
        "paths": dict((path, {"exists": True, "is_dir": True, "empty": False, "usage_bytes": usage,
                              "inodes": 100, "complete": True}) for path, usage in paths.items()),
        "mounts": [{"path": "/dev/shm", "kind": "tmpfs", "fstype": "tmpfs", "source": "tmpfs", "options": ["rw"],
                    "size_bytes": ram // 2, "used_bytes": 0}],
        "all_mounts": [{"path": "/", "fstype": "ext4", "source": "/dev/sda1"},
                       {"path": "/dev/shm", "fstype": "tmpfs", "source": "tmpfs"}],
        "support": {"tmpfs": True, "ramfs": True, "zram": True, "zram_algorithms": ["lzo-rle", "lz4", "zstd"],
                    "kernel": "6.1.0"},
        "zram": [],
        "brd": {"loaded": False, "devices": []},
    }


# What each directory of the recipes holds on the fake host: /tmp, logs and a database that fit.
HELD = {"/tmp": 100 * MIB, "/var/log": 40 * MIB, "/var/lib/postgresql": 300 * MIB}
USERS = {"root": 0, "postgres": 111, "builder": 1000}


def _plan(variables, ram, held=None, available=None):
    held = dict(HELD, **(held or {}))
    paths = {}
    for name, value in variables.items():
        if name == "ramdisk_mounts" or name.startswith(POLICY_PREFIX):
            for entry in value:
                paths[entry["path"]] = held.get(entry["path"], 0)
    view = FakeView(users=USERS, groups=USERS)
    return hp.plan_host(_request(variables), _facts(ram, paths, available), view, host="h1")


def _ram(title):
    """The recipe for a small host is planned on one of 1 GiB; the others on 16 GiB."""
    return 1 * GIB if "small host" in title else 16 * GIB


@pytest.mark.parametrize("title, blocks", RECIPES, ids=[title for title, _blocks in RECIPES])
def test_each_recipe_is_planned_without_an_error(title, blocks):
    for setup, files in _setups(blocks):
        result = _plan(_variables(files), _ram(title))
        assert result["errors"] == [], "%s (%s):\n%s" % (title, setup, "\n".join(result["errors"]))
        planned = result["tmpfs"] + result["zram_swap"]
        assert planned, "%s (%s): nothing planned" % (title, setup)


def _recipe(word):
    (blocks,) = [blocks for title, blocks in RECIPES if word in title]
    return _variables(_setups(blocks)[0][1])


def test_the_tmp_gate_refuses_a_host_where_tmp_does_not_fit_today():
    """Recipe 1 says so: the host's policy is refused, naming the gate. Here /tmp's 6 GiB fit in half of RAM, but
    not in the 3 GiB available plus 2 GiB of free swap."""
    result = _plan(_recipe("/tmp"), 16 * GIB, held={"/tmp": 6 * GIB}, available=3 * GIB)
    (error,) = result["errors"]
    assert "ramdisk_mounts__all[0] puts '/tmp' in RAM, but it does not fit" in error
    assert "does not fit in free memory and swap" in error
    assert "set ramdisk_mounts__all[0].gate to warn or off" in error


def test_tmp_at_half_of_ram_and_the_database_are_over_the_budget_of_an_8_gib_host():
    """Recipe 1 says so, and that a /tmp of 25% fits."""
    together = dict(_recipe("/tmp"), **_recipe("PostgreSQL"))
    (error,) = _plan(together, 8 * GIB)["errors"]
    assert "over ramdisk_ram_budget" in error
    smaller = copy.deepcopy(together)
    smaller["ramdisk_mounts__all"][0]["size"] = "25%"
    assert _plan(smaller, 8 * GIB)["errors"] == []


def test_the_commands_name_playbooks_that_exist():
    with open(DOC, encoding="utf-8") as handle:
        named = set(re.findall(r"ramdisk\.provision\.([a-z_]+)", handle.read()))
    playbooks = set(name[:-4] for name in os.listdir(os.path.join(REPO_ROOT, "playbooks")) if name.endswith(".yml"))
    roles = set(os.listdir(os.path.join(REPO_ROOT, "roles")))
    assert "site" in named
    assert named <= playbooks | roles, sorted(named - playbooks - roles)
