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
