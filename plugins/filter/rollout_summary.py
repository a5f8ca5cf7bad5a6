# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: rollout_summary
short_description: What each node of a rollout serves at its end, in one sentence
version_added: 1.1.0
author:
  - llmops.vllm maintainers (!UNKNOWN)
description:
  - Sorts the nodes of a rollout into those that serve the variant, those where it failed or was rolled back alone
    (the baseline serving there) and those that were not switched, from the switch outcome of each, and names why.
options:
  _input:
    description: The variant rolled out.
    type: str
    required: true
  canary:
    description: The canary's inventory name.
    type: str
    required: true
  outcomes:
    description:
      - Each node's C(vllm_switch_outcome) (C(outcome), C(reason), C(serving)), V(null) for a node that the rollout
        never reached.
    type: dict
    required: true
seealso:
  - plugin: llmops.vllm.rollout_plan
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Say what the fleet serves
  ansible.builtin.debug:
    msg: "{{ ('ngram' | llmops.vllm.rollout_summary(canary='gpu-node-01', outcomes=outcomes)).message }}"
"""

RETURN = r"""
_value:
  description: The end state.
  type: dict
  contains:
    switched:
      description: The nodes that serve the variant.
      type: list
      elements: str
    rolled_back:
      description: The nodes where the variant failed or was rolled back; the baseline serves there.
      type: list
      elements: str
    untouched:
      description: The nodes that were not switched.
      type: list
      elements: str
    complete:
      description: Whether every node serves the variant.
      type: bool
    message:
      description: The end state in one sentence, naming the nodes rolled back alone and why.
      type: str
"""

from ansible_collections.llmops.vllm.plugins.plugin_utils._rollout import rollout_summary as summary


def rollout_summary(variant, canary, outcomes):
    return summary(variant, canary, dict(outcomes or {}))


class FilterModule:
    def filters(self):
        return {'rollout_summary': rollout_summary}
