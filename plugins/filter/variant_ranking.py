# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: variant_ranking
short_description: Rank the variants compared on one node, and name the one that should serve
version_added: 1.1.0
author:
  - llmops.vllm maintainers (!UNKNOWN)
description:
  - Ranks the trial records of the variants that C(llmops.vllm.compare_variants) tried on one node.
  - Only a variant that its trial kept can rank first. Kept variants are ordered by the lowest lower end of the
    95% interval of their change in output tokens/s over every workload and concurrency (the level they are
    surest to be fast at), then by the mean change; rolled-back, failed and blocked variants follow in that
    order.
  - RV(_value.best) is the first kept variant, or the baseline when none was kept.
options:
  _input:
    description:
      - The trial records of the compared variants, as the M(llmops.vllm.trial_history) entries and the node's
        per-variant records hold them.
      - Or, with O(variants), the node's records by variant (RV(llmops.vllm.trial_record_info#module:records)); a
        compared variant without a record ranks as failed.
    type: raw
    required: true
  variants:
    description: The compared variants, in the order compared, when the input maps each variant to its record.
    type: list
    elements: str
    version_added: 1.2.0
  baseline:
    description: The name of the baseline variant, which serves when no compared variant was kept.
    type: str
    required: true
seealso:
  - module: llmops.vllm.trial_decision
"""

EXAMPLES = r"""
- name: Rank the compared variants
  ansible.builtin.set_fact:
    ranking: "{{ trial_records | llmops.vllm.variant_ranking(baseline='baseline') }}"

- name: Print the ranked table
  ansible.builtin.debug:
    msg: "{{ ranking.table }}"
"""

RETURN = r"""
_value:
  description: The ranking.
  type: dict
  contains:
    ranked:
      description: One row per variant, best first, with C(rank), C(variant), C(outcome), C(decision), C(delta_pct),
        C(worst_lower_pct), C(trial) (the short trial identity) and C(reason).
      type: list
      elements: dict
    best:
      description: The variant that should serve.
      type: str
      sample: ngram
    table:
      description: The ranking as aligned text lines, the last one naming what serves.
      type: list
      elements: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.plugin_utils._ranking import RankingError, compared_records, rank_variants


def variant_ranking(records, baseline, variants=None):
    try:
        if variants is not None:
            records = compared_records(records, variants)
        return rank_variants(records, baseline)
    except RankingError as error:
        raise AnsibleFilterError(f'variant_ranking: {error}') from error


class FilterModule:
    def filters(self):
        return {'variant_ranking': variant_ranking}
