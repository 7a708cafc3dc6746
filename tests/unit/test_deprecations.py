# SPDX-License-Identifier: GPL-3.0-or-later
"""scripts/test/deprecations.py: each deprecation warning traced to the collection whose code raised it."""

from __future__ import annotations

import pytest

from conftest import load_script

# As ansible-core 2.21 prints them with ANSIBLE_DISPLAY_TRACEBACK=deprecated (frames shortened).
POSIX = """TASK [ramdisk.provision.mount : Mount /tmp] ***
[DEPRECATION WARNING]: Importing 'to_bytes' from 'ansible.module_utils._text' is deprecated. Use converters.

Traceback (most recent call last):
  File "/root/.ansible/tmp/ansible-tmp-1/AnsiballZ_mount.py", line 266, in <module>
  File "/tmp/p/ansible_ansible.posix.mount_payload.zip/ansible_collections/ansible/posix/plugins/modules/mount.py", line 229, in <module>
  File "/tmp/p/ansible_ansible.posix.mount_payload.zip/ansible/module_utils/_text.py", line 30, in __getattr__
    _warnings.deprecate(
Message: Importing 'to_bytes' from 'ansible.module_utils._text' is deprecated.

changed: [lab-cache]
"""
OURS = """[DEPRECATION WARNING]: Passing `warnings` to `exit_json` or `fail_json` is deprecated.

Traceback (most recent call last):
  File "/tmp/p/ansible_ramdisk.provision.ramdisk_facts_payload.zip/ansible_collections/ramdisk/provision/plugins/modules/ramdisk_facts.py", line 9, in <module>
  File "/tmp/p/ansible_ramdisk.provision.ramdisk_facts_payload.zip/ansible/module_utils/basic.py", line 1, in exit_json
Message: Passing `warnings` to `exit_json` or `fail_json` is deprecated.
"""
CORE = """[DEPRECATION WARNING]: The `get_deprecation_message` method is deprecated.

Traceback (most recent call last):
  File "/usr/lib/python3/ansible/utils/display.py", line 585, in get_deprecation_message
Message: The `get_deprecation_message` method is deprecated.
[DEPRECATION WARNING]: ramdisk.provision.old_filter is deprecated.
ok: [lab-db]
"""


@pytest.fixture(scope="module")
def deprecations():
    return load_script("scripts/test/deprecations.py", "test_deprecations_script")


@pytest.mark.parametrize(
    "text, found",
    [
        (POSIX, [("Importing 'to_bytes' from 'ansible.module_utils._text' is deprecated. Use converters.", "ansible.posix")]),
        (OURS, [("Passing `warnings` to `exit_json` or `fail_json` is deprecated.", "ramdisk.provision")]),
        (CORE, [("The `get_deprecation_message` method is deprecated.", "ansible-core"),
                ("ramdisk.provision.old_filter is deprecated.", None)]),
        ("ok: [lab-db]\n", []),
    ],
)
def test_parse_names_the_innermost_collection(deprecations, text, found):
    assert list(deprecations.parse(text.splitlines())) == found


@pytest.mark.parametrize(
    "text, status, last",
    [
        (POSIX, 0, "deprecations: 1 warning(s), 0 of them from ramdisk.provision"),
        (POSIX + OURS, 1, "deprecations: 2 warning(s), 1 of them from ramdisk.provision"),
        # Without a traceback, a warning that names our collection counts as ours.
        (CORE, 1, "deprecations: 2 warning(s), 1 of them from ramdisk.provision"),
    ],
)
def test_main_fails_only_on_our_own(deprecations, tmp_path, capsys, text, status, last):
    log = tmp_path / "site.log"
    log.write_text(text)
    assert deprecations.main([str(log)]) == status
    assert capsys.readouterr().out.splitlines()[-1] == last
