# SPDX-License-Identifier: GPL-3.0-or-later
"""What the benchmark scripts that drive the role share: the role's pure helpers, and the project's ansible-playbook."""

from __future__ import annotations

import importlib.util
import os
import shutil

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_bench():
    """plugins/module_utils/_bench.py, loaded from its file: it has no collection imports, so it needs no collections path."""
    spec = importlib.util.spec_from_file_location("ramdisk_bench", os.path.join(REPO_ROOT, "plugins", "module_utils", "_bench.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ansible_playbook():
    """The virtualenv's ansible-playbook (make setup), else the one on PATH."""
    local = os.path.join(REPO_ROOT, ".venv", "bin", "ansible-playbook")
    return local if os.path.exists(local) else shutil.which("ansible-playbook") or "ansible-playbook"
