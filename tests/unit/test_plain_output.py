# SPDX-License-Identifier: GPL-3.0-or-later
"""What a user sees outside `make`: no ansible.cfg of ours, the default callback. Three refusals through
ramdisk_mounts (an unknown key, a purpose that does not exist, a size above RAM) each print a short output that
names the variable and the value. The runs are in check mode and refused by the plan before any change."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAY = """- hosts: localhost
  gather_facts: false
  roles:
    - role: ramdisk.provision.ramdisk
      vars:
        ramdisk_mounts: "{{ mounts }}"
"""


@pytest.mark.parametrize("mounts, words", [
    ('[{"path": "/srv/plain-output", "sise": "1G"}]', "ramdisk_mounts[0].sise is '1G': an unknown key"),
    ('[{"path": "/srv/plain-output", "size": "1G", "purpose": "caches"}]',
     "ramdisk_mounts[0].purpose is 'caches': not a known purpose"),
    ('[{"path": "/srv/plain-output", "size": "64T"}]', "ramdisk_mounts[0].size is '64T'"),
])
def test_a_refusal_outside_make_is_short_and_names_variable_and_value(tmp_path, mounts, words):
    (tmp_path / "play.yml").write_text(PLAY)
    (tmp_path / "ansible.cfg").write_text("")
    env = dict(os.environ, ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".cache", "collections"))
    for name in ("ANSIBLE_STDOUT_CALLBACK", "ANSIBLE_CALLBACKS_ENABLED", "ANSIBLE_CALLBACK_RESULT_FORMAT"):
        env.pop(name, None)
    run = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-c", "local", "-i",
                          "localhost,", "--check", str(tmp_path / "play.yml"), "-e",
                          "ansible_python_interpreter=%s" % sys.executable, "-e", '{"mounts": %s}' % mounts],
                         env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=300, check=False)
    out = run.stdout + run.stderr
    assert run.returncode != 0, out
    assert words in out
    assert len(out.splitlines()) < 30 and len(out) < 3000, out
