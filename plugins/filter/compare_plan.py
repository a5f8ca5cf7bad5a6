# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: compare_plan
short_description: Check the variants that compare-variants is asked to try, before anything changes
version_added: 1.1.0
author:
  - llmops.vllm maintainers (!UNKNOWN)
description:
  - Returns the variant names of C(vllm_compare_variants) in the order given, after checking that the list is
    not empty, that each name is a declared variant, that none is the baseline and that none is listed twice.
  - The error names C(vllm_compare_variants), the item and the rule.
options:
  _input:
    description: The variant names, C(vllm_compare_variants).
    type: list
    elements: str
    required: true
  known:
    description: The declared variants, for example the keys of C(vllm_service_specs).
    type: list
    elements: str
    required: true
  baseline:
    description: The name of the baseline variant.
    type: str
    required: true
seealso:
  - plugin: llmops.vllm.variant_ranking
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Check the variants to compare
  ansible.builtin.set_fact:
    compare_plan: "{{ vllm_compare_variants | llmops.vllm.compare_plan(known=vllm_service_specs.keys(), baseline='baseline') }}"
"""

RETURN = r"""
_value:
  description: The variant names to try, in order.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.plugin_utils._ranking import RankingError
from ansible_collections.llmops.vllm.plugins.plugin_utils._ranking import compare_plan as plan


def compare_plan(names, known, baseline):
    try:
        return plan(names, list(known), baseline)
    except RankingError as error:
        raise AnsibleFilterError(str(error)) from error


class FilterModule:
    def filters(self):
        return {'compare_plan': compare_plan}
