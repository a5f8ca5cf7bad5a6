# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: rollout_plan
short_description: Plan a variant's rollout across a fleet behind a canary, before any node is touched
version_added: 1.1.0
author:
  - llmops.vllm maintainers (!UNKNOWN)
description:
  - Returns the canary (the first node unless named), the other nodes and their batches, after checking the
    rollout's variables. The error names the variable and the rule.
  - The canary runs the full trial; the other nodes switch in batches of O(batch_size) only when it kept the variant.
options:
  _input:
    description: The nodes of the rollout, in inventory order.
    type: list
    elements: str
    required: true
  canary:
    description: The node that runs the full trial first (C(vllm_rollout_canary)); the first node when empty.
    type: str
  batch_size:
    description: How many nodes after the canary switch at once (C(vllm_rollout_batch_size)), a whole number from 1.
    type: raw
    default: 1
  max_fail_percentage:
    description: The share of a batch that may fail before the rollout stops (C(vllm_rollout_max_fail_percentage)), 0 to 100.
    type: raw
    default: 0
seealso:
  - plugin: llmops.vllm.rollout_canary_verdict
    plugin_type: filter
  - plugin: llmops.vllm.rollout_summary
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Plan the rollout
  ansible.builtin.set_fact:
    rollout: "{{ groups['vllm_nodes'] | llmops.vllm.rollout_plan(canary=vllm_rollout_canary | default(none), batch_size=1) }}"
"""

RETURN = r"""
_value:
  description: The plan.
  type: dict
  contains:
    canary:
      description: The node that runs the full trial first.
      type: str
    rest:
      description: The other nodes, in order.
      type: list
      elements: str
    batches:
      description: The other nodes in the batches that switch together.
      type: list
      elements: list
    batch_size:
      description: How many nodes switch at once after the canary.
      type: int
    max_fail_percentage:
      description: The share of a batch that may fail before the rollout stops.
      type: int
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.plugin_utils._rollout import RolloutError
from ansible_collections.llmops.vllm.plugins.plugin_utils._rollout import rollout_plan as plan


def rollout_plan(nodes, canary=None, batch_size=1, max_fail_percentage=0):
    try:
        return plan(nodes, canary, batch_size, max_fail_percentage)
    except RolloutError as error:
        raise AnsibleFilterError(str(error)) from error


class FilterModule:
    def filters(self):
        return {'rollout_plan': rollout_plan}
