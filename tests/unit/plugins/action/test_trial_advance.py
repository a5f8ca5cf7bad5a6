# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""trial_advance as the switch role calls it, in a play: each form of its arguments checked against its documentation,
the state carried from task to task in a registered result, a failed task's result and systemd's words handed back."""

from __future__ import annotations

from ansible_collections.llmops.vllm.tests.unit.plugins.action.test_lifetime_actions import run_play

SPEC = {'argv': ['/opt/vllm/0.32.0/bin/python', '-m', 'vllm.entrypoints.openai.api_server', '--model', '/srv/m'],
        'env_file': '/etc/vllm/m-{name}.env', 'vllm_version': '0.32.0'}
SETTINGS = {
    'kind': 'switch', 'host': 'node-1', 'model': 'm', 'variant': 'ngram', 'baseline': 'baseline',
    'sides': {side: dict(SPEC, name=name, unit_name=f'vllm-m-{name}.service', env_file=f'/etc/vllm/m-{name}.env')
              for side, name in (('baseline', 'baseline'), ('variant', 'ngram'))},
    'units': {'baseline': 'vllm-m-baseline.service', 'ngram': 'vllm-m-ngram.service'},
    'max_lifetimes': 2, 'workloads': [{'name': 'default', 'options': {}, 'slo': {}}],
}
DIGEST = 'ab' * 32


def test_a_switch_is_advanced_from_task_to_task_and_a_failure_rolls_it_back(tmp_path):
    inspected = {'unit_states': ['active', 'inactive'], 'records': {}, 'history': [],
                 'sha256sum': [f'{DIGEST}  /etc/systemd/system/vllm-m-{name}.service' for name in ('baseline', 'ngram')]
                 + [f'{DIGEST}  /etc/vllm/m-{name}.env' for name in ('baseline', 'ngram')]}
    step = 'llmops.vllm.trial_advance'
    results = run_play(tmp_path, [
        {step: {'new': SETTINGS}},
        {step: {'state': '{{ result_0.state }}', 'result': {'holder': {'user': 'ops', 'controller': 'ctl'}}}},
        {step: {'state': '{{ result_1.state }}', 'result': inspected}},
        {step: {'state': '{{ result_2.state }}', 'result': {'weights': ['/srv/m']}}},
        {step: {'state': '{{ result_3.state }}', 'result': {'ready': {'version': '0.32.0'}, 'invocation': 'i-1'}}},
        {step: {'state': '{{ result_4.state }}', 'result': {'record': {'variant': 'ngram', 'outcome': 'in_progress'}}}},
        {step: {'state': '{{ result_5.state }}', 'result': {'ready': {'version': '0.32.0'}, 'invocation': 'i-2'}}},
        # The benchmark's task failed: its failed item speaks, and systemd says the baseline still runs.
        {step: {'state': '{{ result_6.state }}', 'unit_states': ['active', 'inactive'],
                'failed_result': {'failed': True, 'msg': 'One or more items failed',
                                  'results': [{'failed': True, 'msg': 'the job was killed', 'elapsed': 3.5}]}}},
        {step: {'state': '{{ result_7.state }}', 'close': True}},
        {step: {'state': '{{ result_7.state }}', 'result': {}, 'close': True}, 'ignore_errors': True},
    ])
    names = [result['next']['step'] + (' ' + result['next']['side'] if result['next'].get('side') else '')
             for result in results[:8]]
    assert names == ['lock', 'inspect', 'check variant', 'serve baseline', 'begin', 'serve baseline',
                     'benchmark baseline', 'serve baseline']
    assert results[1]['msg'] == 'next: inspect' and results[1]['next']['files'][0] == '/etc/systemd/system/vllm-m-baseline.service'
    rolled_back = results[7]['state']
    assert rolled_back['outcome'] == 'failed' and rolled_back['reason'] == 'the job was killed'
    assert rolled_back['failure'] == {'msg': 'the job was killed', 'elapsed': 3.5}
    assert rolled_back['next']['rolling_back'] and rolled_back['active'] == ['vllm-m-baseline.service']
    closing = results[8]['closing']
    assert closing['outcome']['outcome'] == 'failed' and closing['in_service'] is True
    assert results[9]['failed'] and 'give exactly one of new, result, failed_result, close' in results[9]['msg']


def test_a_state_that_cannot_move_on_fails_and_hands_the_state_back(tmp_path):
    results = run_play(tmp_path, [
        {'llmops.vllm.trial_advance': {'new': SETTINGS}},
        {'llmops.vllm.trial_advance': {'state': '{{ result_0.state | combine({"version": 0}) }}', 'result': {}},
         'ignore_errors': True},
        {'llmops.vllm.trial_advance': {'new': dict(SETTINGS, max_lifetimes=13)}, 'ignore_errors': True},
    ])
    assert results[1]['failed'] and results[1]['msg'].startswith('trial_advance: the state is not one that')
    assert results[1]['state']['version'] == 0
    assert results[2]['failed'] and 'max_lifetimes must be a whole number from 1 to 12, got 13' in results[2]['msg']
