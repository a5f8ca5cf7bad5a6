# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: rollout_canary_verdict
short_description: Whether a rollout goes on after its canary's trial
version_added: 1.1.0
author:
  - llmops.vllm maintainers (!UNKNOWN)
description:
  - The rollout goes on only when the variant serves on the canary and its trial record there says it was kept,
    by this run or an earlier trial of this very unit (a rerun). Anything else (rolled back, failed, blocked, a
    variant that serves with no trial recorded) stops it, with the other nodes as they were.
options:
  _input:
    description:
      - The canary's C(vllm_switch_outcome), as the C(llmops.vllm.vllm_switch) role set it (C(outcome), C(reason),
        C(recorded), C(serving)).
    type: dict
    required: true
  canary:
    description: The canary's inventory name.
    type: str
    required: true
  variant:
    description: The variant rolled out.
    type: str
    required: true
  rest:
    description: The other nodes of the rollout.
    type: list
    elements: str
    required: true
seealso:
  - plugin: llmops.vllm.rollout_plan
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Decide whether the rollout goes on
  ansible.builtin.set_fact:
    verdict: >-
      {{ vllm_switch_outcome | llmops.vllm.rollout_canary_verdict(canary=inventory_hostname, variant='ngram',
                                                                 rest=['gpu-node-02']) }}
"""

RETURN = r"""
_value:
  description: The verdict.
  type: dict
  contains:
    proceed:
      description: Whether the other nodes switch.
      type: bool
    message:
      description: What the canary decided and what happens next, for the operator.
      type: str
"""

from ansible_collections.llmops.vllm.plugins.plugin_utils._rollout import canary_verdict


def rollout_canary_verdict(outcome, canary, variant, rest):
    return canary_verdict(outcome, canary, variant, rest)


class FilterModule:
    def filters(self):
        return {'rollout_canary_verdict': rollout_canary_verdict}
