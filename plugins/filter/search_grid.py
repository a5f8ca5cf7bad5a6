# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: search_grid
short_description: The points of a speculative-decoding search grid, checked and in search order
version_added: 1.1.0
author:
  - llmops.vllm maintainers (!UNKNOWN)
description:
  - Expands a grid of C(speculative_config) values into the variants a search may try, after checking the grid
    before anything is loaded. The error names C(vllm_search_variant) or C(vllm_search_grid) and the rule.
  - Each point is the shared config plus one value of every grid key. Its name is the method, C(k) and the other
    grid keys with their values (V(prompt_lookup_max) shortened to V(max), V(prompt_lookup_min) to V(min)), for
    example V(ngram-k3-max4) or V(eagle3-k2); it follows the variant-name rule.
  - A family is the points that differ only in V(num_speculative_tokens). The list starts with each family's
    largest k (one trial there predicts every smaller k of the family; see P(llmops.vllm.search_step#filter)),
    families in the grid's order, followed by the other points family by family, larger k first.
options:
  _input:
    description:
      - "What every point shares (C(vllm_search_variant)), for example V({method: ngram, prompt_lookup_min: 1}) or
        V({method: eagle3, model: /srv/models/kimi-eagle3}). V(method) is required."
    type: dict
    required: true
  grid:
    description:
      - The searched keys (C(vllm_search_grid)), each a C(speculative_config) key mapped to a list of whole numbers
        from 1 without repeats. V(num_speculative_tokens) is required; no key may also be set in O(_input); the
        grid must give at least two points.
    type: dict
    required: true
  known:
    description:
      - The variants already declared (C(vllm_variants)). As a mapping, a point may share a declared variant's name
        when its C(speculative_config) is the same, and a different one is an error; as a list of names, any point
        name among them is an error.
    type: raw
  allow_unknown_keys:
    description: Accept C(speculative_config) keys that this collection does not know (a newer vLLM's).
    type: bool
    default: false
seealso:
  - plugin: llmops.vllm.search_step
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Expand the search grid
  ansible.builtin.set_fact:
    search_points: >-
      {{ {'method': 'ngram', 'prompt_lookup_min': 1}
         | llmops.vllm.search_grid({'num_speculative_tokens': [2, 3, 4, 5, 6], 'prompt_lookup_max': [2, 3, 4, 5]},
                                   known=vllm_variants) }}

- name: Declare every point as a variant
  ansible.builtin.set_fact:
    vllm_variants: "{{ vllm_variants | combine(search_points | items2dict(key_name='name', value_name='variant')) }}"
"""

RETURN = r"""
_value:
  description: The points, in search order.
  type: list
  elements: dict
  contains:
    name:
      description: The point's variant name.
      type: str
      sample: ngram-k3-max4
    family:
      description: The point without k; the points of a family differ only in V(num_speculative_tokens).
      type: str
      sample: ngram-max4
    k:
      description: The point's V(num_speculative_tokens).
      type: int
      sample: 3
    speculative_config:
      description: The point's full C(speculative_config).
      type: dict
      sample: {method: ngram, prompt_lookup_min: 1, num_speculative_tokens: 3, prompt_lookup_max: 4}
    variant:
      description: The point as an entry of C(vllm_variants), with C(description) and C(speculative_config).
      type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.llmops.vllm.plugins.plugin_utils._variant_search import SearchError, search_points


def _flag(value, name):
    try:
        return boolean(value, strict=True)
    except TypeError:
        raise SearchError(f'{name} must be a boolean, got {value!r}') from None


def search_grid(variant, grid, known=None, allow_unknown_keys=False):
    try:
        allow = _flag(allow_unknown_keys, 'allow_unknown_keys')
        return search_points(variant, grid, known=known, allow_unknown_keys=allow)
    except SearchError as error:
        raise AnsibleFilterError(f'search_grid: {error}') from error


class FilterModule:
    def filters(self):
        return {'search_grid': search_grid}
