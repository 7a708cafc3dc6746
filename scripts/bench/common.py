# SPDX-License-Identifier: GPL-3.0-or-later
"""What the benchmark scripts that drive the role share: the role's pure helpers, and the project's ansible-playbook."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_bench():
    """plugins/module_utils/_bench.py, loaded from its file with no collections path: the _size.py it needs then comes
    from beside it, as on a host beside _metrics.py."""
    module_utils = os.path.join(REPO_ROOT, "plugins", "module_utils")
    if module_utils not in sys.path:
        sys.path.append(module_utils)
    spec = importlib.util.spec_from_file_location("ramdisk_bench", os.path.join(module_utils, "_bench.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ansible_playbook():
    """The virtualenv's ansible-playbook (make setup), else the one on PATH."""
    local = os.path.join(REPO_ROOT, ".venv", "bin", "ansible-playbook")
    return local if os.path.exists(local) else shutil.which("ansible-playbook") or "ansible-playbook"
