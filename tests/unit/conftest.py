# SPDX-License-Identifier: GPL-3.0-or-later
"""Make ansible_collections.ramdisk.provision importable from a plain clone.

A symlink <repo>/.cache/collections/ansible_collections/ramdisk/provision -> <repo> is created
once and the collections directory is put first on sys.path.
"""

from __future__ import annotations

import os
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTIONS_DIR = os.path.join(REPO_ROOT, ".cache", "collections")


def _link_collection():
    namespace_dir = os.path.join(COLLECTIONS_DIR, "ansible_collections", "ramdisk")
    link = os.path.join(namespace_dir, "provision")
    os.makedirs(namespace_dir, exist_ok=True)
    if os.path.islink(link) and os.path.realpath(link) == os.path.realpath(REPO_ROOT):
        return
    if os.path.islink(link):
        os.unlink(link)
    # Relative, so the tree stays valid wherever the clone lives.
    os.symlink(os.path.relpath(REPO_ROOT, namespace_dir), link)


_link_collection()
if COLLECTIONS_DIR not in sys.path:
    sys.path.insert(0, COLLECTIONS_DIR)
os.environ["ANSIBLE_COLLECTIONS_PATH"] = COLLECTIONS_DIR + os.pathsep + os.environ.get("ANSIBLE_COLLECTIONS_PATH", "")


def run_module_process(module_name, tmp_path, args, timeout=300):
    """Run the module MODULE_NAME for real, as Ansible does (a Python process reading its arguments from a file),
    and return its JSON result. Matplotlib draws without a display."""
    import json
    import subprocess

    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), MPLBACKEND="Agg")
    proc = subprocess.run([sys.executable, "-m", module_name, str(args_file)], capture_output=True, text=True,
                          env=env, timeout=timeout, check=False)
    return json.loads(proc.stdout)


def load_script(relative_path, name):
    """Import one of the repo's scripts (e.g. scripts/test/deprecations.py) as a module named NAME."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, os.path.join(REPO_ROOT, relative_path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
