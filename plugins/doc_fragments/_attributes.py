# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment(object):

    # Each module sets support (and platforms) for these in its own attributes.
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check mode and report what would change without changing the target.
  diff_mode:
    description: Returns details on what has changed, or would change in check mode, in diff mode.
  platform:
    description: Target operating systems the module runs on.
"""

    FACTS = r"""
options: {}
attributes:
  facts:
    description: Returns an C(ansible_facts) dictionary that updates the host's facts.
"""

    # Full check mode and no diff: added beside the plain fragment by the modules that support exactly that.
    CHECK_MODE_FULL = r"""
options: {}
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""
