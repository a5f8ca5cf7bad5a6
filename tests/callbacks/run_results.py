# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A test helper, not part of the collection: what a playbook run returned, as JSON, for the molecule checks.

A molecule step that runs a playbook of the collection as an operator would (ansible-playbook in a command task)
enables this callback for that run (ANSIBLE_CALLBACK_PLUGINS and ANSIBLE_CALLBACKS_ENABLED). At the end of the run
it writes to the file that LLMOPS_VLLM_RUN_RESULTS names:

- custom_stats: what set_stats reported, per host, and under "_run" what it reported for the run as a whole;
- failed: every task that failed and was not ignored, with its host, action and returned msg;
- facts: per host, the last value set_fact gave each fact that LLMOPS_VLLM_RUN_RESULTS_FACTS names
  (comma-separated).

The checks then assert on returned values instead of matching the console's text.
"""

from __future__ import annotations

import json
import os

from ansible.module_utils.common.json import AnsibleJSONEncoder
from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "run_results"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._path = os.environ.get("LLMOPS_VLLM_RUN_RESULTS")
        self._wanted_facts = [name for name in os.environ.get("LLMOPS_VLLM_RUN_RESULTS_FACTS", "").split(",") if name]
        self._failed = []
        self._facts = {}

    def v2_runner_on_ok(self, result):
        facts = result._result.get("ansible_facts") or {}
        for name in self._wanted_facts:
            if name in facts:
                self._facts.setdefault(result._host.get_name(), {})[name] = facts[name]

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if not ignore_errors:
            self._failed.append({"host": result._host.get_name(), "action": result._task.action,
                                 "msg": result._result.get("msg")})

    def v2_playbook_on_stats(self, stats):
        if not self._path:
            return
        results = {"custom_stats": stats.custom, "failed": self._failed, "facts": self._facts}
        with open(self._path, "w", encoding="utf-8") as handle:
            json.dump(results, handle, cls=AnsibleJSONEncoder, sort_keys=True)
