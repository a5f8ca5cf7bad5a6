# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""trial_decision by lifetimes and lifetime_calibration as a play calls them: options checked against their
documentation, answers as the role reads them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]
COLLECTIONS = REPO.parents[2] if REPO.parent.parent.name == 'ansible_collections' else REPO / '.cache' / 'collections'


def lifetime(side, speeds, number):
    return {'side': side, 'uptime_s': 12.5,
            'benchmark': {'labels': {'lifetime': f'{side}-{number}', 'workload': 'default', 'unit_checksum': 'abc'},
                          'results': [{'max_concurrency': 4, 'output_throughput_repeats': speeds,
                                       'output_throughput': sum(speeds) / len(speeds), 'failed': 0}]}}


def run_play(tmp_path, tasks):
    """Run the tasks on localhost; returns the exit code and each task's registered result."""
    registered = [dict(task, register=f'result_{index}') for index, task in enumerate(tasks)]
    answers = tmp_path / 'answers.json'
    keep = {'ansible.builtin.copy': {'dest': str(answers), 'mode': '0600',
                                     'content': '{{ [%s] | to_json }}' % ', '.join(
                                         f'result_{index}' for index in range(len(tasks)))}}
    playbook = tmp_path / 'play.yml'
    playbook.write_text(json.dumps([{'hosts': 'localhost', 'gather_facts': False, 'tasks': registered + [keep]}]),
                        encoding='utf-8')
    env = {key: value for key, value in os.environ.items() if not key.startswith(('ANSIBLE_', 'LLMOPS_VLLM_'))}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS), ANSIBLE_NOCOLOR='1', ANSIBLE_LOCAL_TEMP=str(tmp_path / 'tmp'),
               ANSIBLE_LOCALHOST_WARNING='false', ANSIBLE_INVENTORY_UNPARSED_WARNING='false')
    run = subprocess.run([str(Path(sys.executable).parent / 'ansible-playbook'), str(playbook)], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    return json.loads(answers.read_text(encoding='utf-8'))


def test_a_trial_by_lifetimes_and_a_calibration_answer_as_the_role_reads_them(tmp_path):
    trial = [lifetime('baseline', [1000.0], 1), lifetime('variant', [1004.0], 1),
             lifetime('baseline', [1010.0], 2), lifetime('variant', [1006.0], 2),
             lifetime('baseline', [995.0], 3), lifetime('variant', [1001.0], 3)]
    calibration = [{'benchmark': lifetime('baseline', [1000.0 + 7 * index, 1002.0 + 7 * index], index)['benchmark']}
                   for index in range(8)]
    results = run_play(tmp_path, [
        {'llmops.vllm.trial_decision': {'variant': trial[-1]['benchmark'], 'baseline': trial[-2]['benchmark'],
                                        'variant_name': 'ngram', 'model': 'tiny-llama', 'lifetimes': trial,
                                        'max_lifetimes': 6, 'dark_seconds': 600.0, 'pair_seconds': 120.0}},
        {'llmops.vllm.lifetime_calibration': {'lifetimes': calibration, 'warm_restart_seconds': [30.0, 32.0],
                                              'margin_pct': 8.0}},
        {'llmops.vllm.trial_decision': {'variant': trial[-1]['benchmark'], 'baseline': trial[-2]['benchmark'],
                                        'variant_name': 'ngram', 'model': 'tiny-llama', 'lifetimes': trial,
                                        'max_lifetimes': 0}, 'ignore_errors': True},
    ])
    decision, calibrated, refused = results
    assert (decision['decision'], decision['outcome'], decision['pairs'], decision['look']) == ('keep', 'not_slower', 3, 2)
    assert decision['dark_minutes'] == 10.0 and decision['pair_minutes'] == 2.0
    assert [row['invocation'] for row in decision['lifetimes']][:3] == ['baseline-1', 'baseline-2', 'baseline-3']
    # Every baseline lifetime of the trial, not only the last, joins the node's history.
    assert {item['lifetime'] for item in decision['baseline_lifetimes']} == {'baseline-1', 'baseline-2', 'baseline-3'}
    assert calibrated['lifetimes'] == 8 and calibrated['warm_restart_s'] == 31.0 and calibrated['resolvable']
    assert len(calibrated['baseline_lifetimes']) == 8
    assert refused['failed'] and 'max_lifetimes must be a whole number of at least 1' in refused['msg']
