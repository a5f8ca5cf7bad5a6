# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The vllm_switch role's timed starts: what a wait's phases become in the trial's record.

The role's own expressions (tasks/wait_ready.yml, tasks/record.yml) are rendered by Ansible's templar
with the variables a run would hold.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

try:
    from ansible.template import trust_as_template
except ImportError:  # ansible-core before 2.19 renders any string
    def trust_as_template(text):
        return text

TASKS = Path(__file__).resolve().parents[3] / 'roles' / 'vllm_switch' / 'tasks'

PHASES = [{'name': 'engine_init', 'label': 'interpreter and API start-up', 'seconds': 38.52, 'ended_at_s': 38.52},
          {'name': 'weights_loaded', 'label': 'weights load', 'seconds': 1522.68, 'ended_at_s': 1561.2},
          {'name': 'first_completion', 'label': 'first completion', 'seconds': 125.75, 'ended_at_s': 1686.95}]
SPECS = {'baseline': {'unit_name': 'vllm-kimi-k2.5-baseline.service'},
         'eagle3': {'unit_name': 'vllm-kimi-k2.5-eagle3.service'}}


def task(file_name, name):
    tasks = yaml.safe_load((TASKS / file_name).read_text(encoding='utf-8'))
    [found] = [entry for entry in tasks if entry['name'] == name]
    return found


def render(text, variables):
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(text))


def keep_start(variables):
    """Run the 'keep' task of wait_ready.yml: its condition, then its set_fact, as Ansible would."""
    keep = task('wait_ready.yml', "Keep the start's phases for the trial's record")
    variables = dict(variables, ansible_check_mode=False)
    if not render('{{ %s }}' % keep['when'], variables):
        return variables.get('_vllm_switch_starts')
    local = dict(variables, **keep['vars'])
    local.update((key, render(value, local)) for key, value in keep['vars'].items())
    return render(keep['ansible.builtin.set_fact']['_vllm_switch_starts'], local)


def test_a_timed_wait_adds_its_start_with_the_unit_and_its_variant():
    ready = {'ready': True, 'start_phases': PHASES, 'start_summary': 'first completion after 28m07s: ...',
             'kv_cache': {'tokens': 301056, 'max_model_len': 262144, 'max_concurrency': 1.15}}
    starts = keep_start({'_vllm_switch_starts': [], '_vllm_switch_ready': ready,
                         '_vllm_switch_active': ['vllm-kimi-k2.5-eagle3.service'], 'vllm_service_specs': SPECS})
    assert starts == [{'unit': 'vllm-kimi-k2.5-eagle3.service', 'variant': 'eagle3', 'phases': PHASES,
                       'summary': 'first completion after 28m07s: ...', 'seconds': 1686.95,
                       'kv_cache': {'tokens': 301056, 'max_model_len': 262144, 'max_concurrency': 1.15}}]

    # The rollback's start of the baseline follows it.
    older_engine = {key: value for key, value in ready.items() if key != 'kv_cache'}
    again = keep_start({'_vllm_switch_starts': starts, '_vllm_switch_ready': dict(older_engine, start_summary='b'),
                        '_vllm_switch_active': ['vllm-kimi-k2.5-baseline.service'], 'vllm_service_specs': SPECS})
    assert [(start['variant'], start['summary']) for start in again] == [('eagle3', starts[0]['summary']),
                                                                         ('baseline', 'b')]
    assert again[1]['kv_cache'] is None


def test_a_wait_that_timed_nothing_adds_nothing():
    starts = keep_start({'_vllm_switch_starts': [{'unit': 'u'}], '_vllm_switch_ready': {'ready': True},
                         '_vllm_switch_active': ['vllm-kimi-k2.5-eagle3.service'], 'vllm_service_specs': SPECS})
    assert starts == [{'unit': 'u'}]


def test_the_summary_is_shown_with_the_unit():
    show = task('wait_ready.yml', 'Show how long the start took, phase by phase')
    variables = {'_vllm_switch_ready': {'start_summary': 'first completion after 20.1 s: ...'},
                 '_vllm_switch_active': ['vllm-tiny-llama-ngram.service'], 'ansible_check_mode': False}
    assert render('{{ %s }}' % show['when'], variables)
    assert render(show['ansible.builtin.debug']['msg'], variables) == (
        'vllm-tiny-llama-ngram.service: first completion after 20.1 s: ...')


@pytest.mark.parametrize('starts, expected', [([{'unit': 'u', 'seconds': 20.1}], [{'unit': 'u', 'seconds': 20.1}]),
                                              (None, [])])
def test_the_record_keeps_the_trials_starts(starts, expected):
    record = task('record.yml', 'Write down the trial of {{ _vllm_switch_variant }}')
    variables = {} if starts is None else {'_vllm_switch_starts': starts}
    assert render(record['ansible.builtin.set_fact']['_vllm_switch_record']['starts'], variables) == expected


def test_each_trial_and_each_run_of_the_role_starts_with_no_starts():
    [first] = yaml.safe_load((TASKS / 'trial.yml').read_text(encoding='utf-8'))[:1]
    assert first['ansible.builtin.set_fact'] == {'_vllm_switch_starts': []}
    main = yaml.safe_load((TASKS / 'main.yml').read_text(encoding='utf-8'))
    [switch] = [entry for entry in main if entry['name'] == "Switch under the node's switch lock"]
    assert switch['block'][0]['ansible.builtin.set_fact']['_vllm_switch_starts'] == []
