#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: tree_verify
short_description: Check that two directory trees hold the same files
version_added: 1.0.0
description:
  - Compares two directory trees entry by entry, for example a directory and the tmpfs its data was copied into.
  - For every entry it compares the type, mode, owner, group, size, the SHA-256 of regular files, symlink
    targets, device numbers, the modification time of files and directories (not of the two roots, which
    copying changes) and extended attributes.
  - Walks each tree on its own file system only and never follows symbolic links.
  - When O(dest) is a mount point, an empty C(lost+found) directory at its root that O(src) does not have is
    not a difference, since mkfs.ext4 makes one on every new file system.
  - Never changes the host.
author: ramdisk.provision maintainers (@ramdisk-provision)
options:
  src:
    description: The tree that was copied from.
    type: path
    required: true
  dest:
    description: The tree that was copied to.
    type: path
    required: true
  fail_on_mismatch:
    description: Fail, listing the differences, when the trees differ.
    type: bool
    default: true
  compare_xattrs:
    description: Compare extended attributes too. Turn off when one side cannot keep them.
    type: bool
    default: true
  compare_mtime:
    description: Compare modification times of files and directories.
    type: bool
    default: true
extends_documentation_fragment:
  - ramdisk.provision._attributes
  - ramdisk.provision._attributes.check_mode_full
attributes:
  platform:
    support: full
    platforms: linux
"""

EXAMPLES = r"""
- name: Check the copy of /tmp in the new tmpfs
  ramdisk.provision.tree_verify:
    src: /tmp
    dest: /run/ramdisk-migrate/tmp

- name: Report differences without failing
  ramdisk.provision.tree_verify:
    src: /var/cache/build
    dest: /mnt/staging
    fail_on_mismatch: false
  register: __verify
"""

RETURN = r"""
matched:
  description: Whether the trees are the same.
  returned: always
  type: bool
  sample: true
entries:
  description: The number of entries in the source tree, its root included.
  returned: always
  type: int
  sample: 1042
mismatch_count:
  description: The number of differences found, of which at most 50 are listed.
  returned: always
  type: int
  sample: 0
mismatches:
  description: Sentences naming each difference, at most 50.
  returned: always
  type: list
  elements: str
  sample:
    - "'cache/a.bin' differs in content (sha256): 3f1c2a9b7d10 in the source, 9e0a11c4b2d7 in the destination."
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ramdisk.provision.plugins.module_utils._tree import compare_trees, tree_digest

MAX_LISTED = 50


def main():
    module = AnsibleModule(
        argument_spec=dict(
            src=dict(type="path", required=True),
            dest=dict(type="path", required=True),
            fail_on_mismatch=dict(type="bool", default=True),
            compare_xattrs=dict(type="bool", default=True),
            compare_mtime=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    src = module.params["src"]
    dest = module.params["dest"]
    for name, path in (("src", src), ("dest", dest)):
        if not os.path.isdir(path) or os.path.islink(path):
            module.fail_json(msg="%s is '%s', which is not a directory. Give the path of an existing directory."
                             % (name, path))
    try:
        source, source_problems = tree_digest(src, xattrs=module.params["compare_xattrs"])
        destination, dest_problems = tree_digest(dest, xattrs=module.params["compare_xattrs"])
    except (IOError, OSError) as exc:
        module.fail_json(msg="Could not read the trees: %s. Run with become: true if the files are not readable."
                         % exc)
    mismatches = source_problems + dest_problems + compare_trees(
        source, destination, mtime=module.params["compare_mtime"], b_fs_root=os.path.ismount(dest))
    result = dict(
        changed=False,
        matched=not mismatches,
        entries=len(source),
        mismatch_count=len(mismatches),
        mismatches=mismatches[:MAX_LISTED],
    )
    if mismatches and module.params["fail_on_mismatch"]:
        module.fail_json(
            msg="%s and %s differ in %d ways: %s Keep the source until the copy is fixed."
            % (src, dest, len(mismatches), " ".join(mismatches[:MAX_LISTED])),
            **result
        )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
