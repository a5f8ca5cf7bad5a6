# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: variant_weights
short_description: The weights a variant loads, its model and its draft, as llmops.vllm.verify_weights takes them
version_added: 1.1.0
author:
  - llmops.vllm maintainers (!UNKNOWN)
description:
  - Reads the model from the command line the variant's unit runs and the draft from its speculative config.
  - An absolute path is a directory on the node; anything else is a hub repository, with the C(revision) serve
    argument (the model) or the speculative config's C(revision) (the draft), V(null) when unpinned.
options:
  _input:
    description: One variant, as P(llmops.vllm.variant_specs#filter) returns each.
    type: dict
    required: true
seealso:
  - module: llmops.vllm.verify_weights
"""

EXAMPLES = r"""
- name: Check the weights of the target
  llmops.vllm.verify_weights:
    path: "{{ item.path | default(omit) }}"
    repo_id: "{{ item.repo_id | default(omit) }}"
    revision: "{{ item.revision | default(omit, true) }}"
    hub_cache: "{{ vllm_hub_cache if item.repo_id is defined else omit }}"
    what: "{{ item.what }}"
  loop: "{{ target_spec | llmops.vllm.variant_weights }}"
"""

RETURN = r"""
_value:
  description: One entry per weights the variant loads, the model first.
  type: list
  elements: dict
  contains:
    what:
      description: What the weights are, for example V(the draft of eagle3).
      type: str
    kind:
      description: V(model) or V(draft).
      type: str
    path:
      description: The directory, for weights on a local path.
      type: str
    repo_id:
      description: The hub repository, for weights from the hub.
      type: str
    revision:
      description: The hub revision; V(null) when unpinned.
      type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.plugin_utils._trial_identity import TrialIdentityError, weights_of_spec


def variant_weights(spec):
    try:
        return weights_of_spec(spec)
    except TrialIdentityError as error:
        raise AnsibleFilterError(f'variant_weights: {error}') from error


class FilterModule:
    def filters(self):
        return {'variant_weights': variant_weights}
