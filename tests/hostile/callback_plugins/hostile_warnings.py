# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: hostile_warnings
type: notification
short_description: Records the warnings a run prints, for tests/hostile
description:
  - Appends every warning of a task result, and every C(debug) message that starts with C(WARNING), as one JSON
    line to the file named by the environment variable E(HOSTILE_WARNINGS_FILE), so the hostile-request test can
    check that a case warned. Does nothing when the variable is not set.
requirements:
  - enabled through E(ANSIBLE_CALLBACKS_ENABLED) (scripts/test/hostile.sh does)
"""

import json
import os

from ansible.plugins.callback import CallbackBase


def _texts(result):
    """The warning texts of one task or loop item result."""
    # ansible-core 2.19 names them result and task; earlier releases only _result and _task.
    data = getattr(result, "result", None)
    if data is None:
        data = getattr(result, "_result")
    task = getattr(result, "task", None) or getattr(result, "_task")
    texts = []
    for warning in getattr(result, "warnings", None) or data.get("warnings") or []:
        event = getattr(warning, "event", None)
        texts.append(event.msg if event is not None else str(warning))
    # The roles' own warnings are debug messages that start with WARNING.
    if getattr(task, "action", "") in ("debug", "ansible.builtin.debug", "ansible.legacy.debug"):
        message = data.get("msg")
        for line in message if isinstance(message, list) else [message]:
            if isinstance(line, str) and line.lstrip().upper().startswith("WARNING"):
                texts.append(line)
    return texts


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "notification"
    CALLBACK_NAME = "hostile_warnings"
    CALLBACK_NEEDS_ENABLED = True

    def _record(self, result):
        path = os.environ.get("HOSTILE_WARNINGS_FILE")
        texts = _texts(result)
        if not path or not texts:
            return
        with open(path, "a", encoding="utf-8") as handle:
            for text in texts:
                handle.write(json.dumps(text) + "\n")

    def v2_runner_on_ok(self, result):
        self._record(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record(result)

    def v2_runner_item_on_ok(self, result):
        self._record(result)

    def v2_runner_item_on_failed(self, result):
        self._record(result)
