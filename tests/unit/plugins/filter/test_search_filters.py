# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The search filters as a play calls them: the grid from play variables, a step on trial records, the errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.filter.search_grid import search_grid
from ansible_collections.llmops.vllm.plugins.filter.search_step import search_step

REPO = Path(__file__).resolve().parents[4]
COLLECTIONS = REPO.parents[2] if REPO.parent.parent.name == 'ansible_collections' else REPO / '.cache' / 'collections'

PLAYBOOK = """
- name: Search a grid
  hosts: localhost
  gather_facts: false
  vars:
    vllm_variants:
      baseline: {}
      ngram: {speculative_config: {method: ngram, prompt_lookup_min: 1, num_speculative_tokens: 3,
                                   prompt_lookup_max: 4}}
      ngram-k3-max1: {speculative_config: {method: ngram, prompt_lookup_min: 1, num_speculative_tokens: 3,
                                           prompt_lookup_max: 1}}
    vllm_search_variant: {method: ngram, prompt_lookup_min: 1}
    vllm_search_grid: {num_speculative_tokens: [1, 2, 3], prompt_lookup_max: [1, 4]}
    seed_record:
      variant: ngram
      baseline: baseline
      outcome: kept
      reason: faster at concurrency 8
      decision:
        levels:
          - {max_concurrency: 8, variant_output_throughput: 510.0, baseline_output_throughput: 360.0,
             variant_tpot_ms: 14.0, baseline_tpot_ms: 20.0, acceptance_rates: [0.75, 0.55, 0.2],
             acceptance_length: 2.5}
  tasks:
    - name: Expand the grid
      ansible.builtin.set_fact:
        points: "{{ vllm_search_variant | llmops.vllm.search_grid(vllm_search_grid, known=vllm_variants) }}"

    - name: Decide the first step from the seeded record
      ansible.builtin.set_fact:
        step: >-
          {{ points | llmops.vllm.search_step(records=[seed_record], declared=vllm_variants, baseline='baseline',
                                              max_loads=max_loads | default(none), exhaustive='no') }}

    - name: A grid that repeats a shared key
      ansible.builtin.set_fact:
        repeated: "{{ vllm_search_variant | llmops.vllm.search_grid({'num_speculative_tokens': [1, 2],
                                                                     'prompt_lookup_min': [1]}) }}"
      register: repeated_key
      ignore_errors: true

    - name: Names alone cannot show that a declared point has the same config
      ansible.builtin.set_fact:
        by_name: "{{ vllm_search_variant | llmops.vllm.search_grid(vllm_search_grid, known=vllm_variants.keys()) }}"
      register: names_only
      ignore_errors: true

    - name: Check what the filters said
      ansible.builtin.assert:
        that:
          - points | map(attribute='name') | list == ['ngram-k3-max1', 'ngram-k3-max4', 'ngram-k2-max1',
                                                      'ngram-k1-max1', 'ngram-k2-max4', 'ngram-k1-max4']
          - step.next == 'ngram-k3-max1'
          - step.loads == 0
          - step.best == 'ngram'
          - >-
            step.summary.splitlines()[0] == "loads paid for: 0 of the grid's 6 points"
          - repeated_key is failed
          - "'search_grid: vllm_search_grid.prompt_lookup_min: prompt_lookup_min is set in vllm_search_variant too'
             in repeated_key.msg"
          - names_only is failed
          - "'point ngram-k3-max1 is already a declared variant' in names_only.msg"
"""


def test_the_search_filters_in_a_play(tmp_path):
    (tmp_path / 'ansible.cfg').write_text(f'[defaults]\ncollections_path = {COLLECTIONS}\n', encoding='utf-8')
    (tmp_path / 'play.yml').write_text(PLAYBOOK, encoding='utf-8')
    env = {key: value for key, value in os.environ.items() if not key.startswith('ANSIBLE_')}
    env.update(ANSIBLE_CONFIG=str(tmp_path / 'ansible.cfg'), ANSIBLE_NOCOLOR='1',
               ANSIBLE_LOCAL_TEMP=str(tmp_path / 'tmp'))
    run = subprocess.run([str(Path(sys.executable).parent / 'ansible-playbook'), 'play.yml', '-e', 'max_loads=4'],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert 'ok=5' in run.stdout and 'failed=0' in run.stdout and 'ignored=2' in run.stdout


def test_the_filters_turn_rule_breaks_into_filter_errors():
    with pytest.raises(AnsibleFilterError, match='search_grid: vllm_search_grid.num_speculative_tokens is required'):
        search_grid({'method': 'ngram'}, {'prompt_lookup_max': [1, 4]})
    points = search_grid({'method': 'ngram'}, {'num_speculative_tokens': [1, 2]})
    with pytest.raises(AnsibleFilterError, match='search_step: max_loads must be a whole number >= 1'):
        search_step(points, records=[], max_loads='none')
    with pytest.raises(AnsibleFilterError, match="search_step: exhaustive must be a boolean, got 'perhaps'"):
        search_step(points, records=[], exhaustive='perhaps')


def test_the_step_filter_takes_numbers_as_extra_vars_give_them():
    points = search_grid({'method': 'ngram'}, {'num_speculative_tokens': [1, 2]})
    interrupted = {'variant': 'ngram-k2', 'baseline': 'baseline', 'outcome': 'in_progress'}

    answer = search_step(points, records=[interrupted], max_loads='1', exhaustive='false', min_error_pct='3')

    assert (answer['next'], answer['done'], answer['loads']) == (None, True, 1)
    assert answer['reason'].startswith('max_loads reached (1 of 1)')
