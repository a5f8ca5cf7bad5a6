# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A rollout goes past its canary only on a kept variant that serves there, and says what every node serves."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.filter.rollout_canary_verdict import rollout_canary_verdict
from ansible_collections.llmops.vllm.plugins.filter.rollout_plan import rollout_plan
from ansible_collections.llmops.vllm.plugins.filter.rollout_summary import rollout_summary

NODES = ['gpu-node-01', 'gpu-node-02', 'gpu-node-03', 'gpu-node-04', 'gpu-node-05']


def test_the_first_node_is_the_canary_and_the_rest_switch_in_batches():
    plan = rollout_plan(NODES, batch_size=2, max_fail_percentage='25')
    assert plan == {'canary': 'gpu-node-01', 'rest': NODES[1:],
                    'batches': [['gpu-node-02', 'gpu-node-03'], ['gpu-node-04', 'gpu-node-05']],
                    'batch_size': 2, 'max_fail_percentage': 25}


def test_a_named_canary_leaves_the_others_in_inventory_order():
    plan = rollout_plan(NODES, canary='gpu-node-03')
    assert plan['canary'] == 'gpu-node-03'
    assert plan['batches'] == [['gpu-node-01'], ['gpu-node-02'], ['gpu-node-04'], ['gpu-node-05']]


def test_one_node_is_its_own_canary_with_nothing_after_it():
    assert rollout_plan(['gpu-node-01'], canary='') == {
        'canary': 'gpu-node-01', 'rest': [], 'batches': [], 'batch_size': 1, 'max_fail_percentage': 0}


@pytest.mark.parametrize('nodes, kwargs, message', [
    ([], {}, 'vllm_target_hosts: the rollout has no node'),
    (['a', 'a'], {}, 'vllm_target_hosts: a node is listed twice'),
    (NODES, {'canary': 'gpu-node-09'}, "vllm_rollout_canary: 'gpu-node-09' is not a node of this rollout (gpu-node-01, "),
    (NODES, {'batch_size': 0}, 'vllm_rollout_batch_size: must be at least 1, got 0'),
    (NODES, {'batch_size': '50%'}, "vllm_rollout_batch_size: must be a whole number, got '50%'"),
    (NODES, {'batch_size': True}, 'vllm_rollout_batch_size: must be a whole number, got True'),
    (NODES, {'max_fail_percentage': 101}, 'vllm_rollout_max_fail_percentage: must be from 0 to 100, got 101'),
    (NODES, {'max_fail_percentage': -1}, "vllm_rollout_max_fail_percentage: must be a whole number, got -1"),
])
def test_a_bad_plan_names_the_variable_and_the_rule(nodes, kwargs, message):
    with pytest.raises(AnsibleFilterError) as error:
        rollout_plan(nodes, **kwargs)
    assert str(error.value).startswith(message)


def outcome(recorded, serving, said='kept', reason='not slower at concurrency 4'):
    return {'variant': 'ngram', 'outcome': said, 'reason': reason, 'recorded': recorded, 'serving': serving}


def test_a_variant_kept_and_serving_on_the_canary_goes_on_to_the_others():
    verdict = rollout_canary_verdict(outcome('kept', ['ngram']), 'gpu-node-01', 'ngram', ['gpu-node-02'])
    assert verdict == {'proceed': True, 'message': 'The canary gpu-node-01 kept ngram (not slower at concurrency 4); '
                                                   'rolling it out to gpu-node-02.'}


def test_a_rerun_goes_on_when_an_earlier_trial_of_the_same_unit_kept_it():
    verdict = rollout_canary_verdict(outcome('kept', ['ngram'], said='unchanged', reason='no trial ran'),
                                     'gpu-node-01', 'ngram', ['gpu-node-02'])
    assert verdict['proceed']


@pytest.mark.parametrize('recorded, serving, said', [
    ('rolled_back', ['baseline'], 'rolled_back'),
    ('failed', ['baseline'], 'failed'),
    ('blocked', ['baseline'], 'unchanged'),
    # Started by hand, never tried: it serves, but nothing kept it.
    (None, ['ngram'], 'unchanged'),
    # Kept once, and since fallen back in service.
    ('fell_back', ['baseline'], 'unchanged'),
])
def test_anything_but_a_kept_variant_that_serves_stops_the_rollout_untouched(recorded, serving, said):
    verdict = rollout_canary_verdict(outcome(recorded, serving, said=said), 'gpu-node-01', 'ngram',
                                     ['gpu-node-02', 'gpu-node-03'])
    assert not verdict['proceed']
    assert verdict['message'].startswith('The canary gpu-node-01 did not keep ngram (')
    assert verdict['message'].endswith(f"{serving[0]} serves there. The rollout stops here: the other nodes "
                                       '(gpu-node-02, gpu-node-03) were not touched.')


def test_a_canary_without_an_outcome_stops_the_rollout():
    verdict = rollout_canary_verdict(None, 'gpu-node-01', 'ngram', [])
    assert verdict == {'proceed': False, 'message': 'The canary gpu-node-01 did not keep ngram (never tried: no reason '
                                                    'recorded); nothing serves there. The rollout stops here: the '
                                                    'other nodes (none) were not touched.'}


def test_the_summary_names_the_node_rolled_back_alone_and_why():
    summary = rollout_summary('ngram', 'gpu-node-01', {
        'gpu-node-01': outcome('kept', ['ngram']),
        'gpu-node-02': outcome('failed', ['baseline'], said='failed', reason='crashed at start: SIGILL'),
        'gpu-node-03': outcome('kept', ['ngram'], reason='rolled out'),
        'gpu-node-04': None,
    })
    assert summary['switched'] == ['gpu-node-01', 'gpu-node-03']
    assert summary['rolled_back'] == ['gpu-node-02']
    assert summary['untouched'] == ['gpu-node-04']
    assert not summary['complete']
    assert summary['message'] == (
        'ngram serves on 2 of 4 nodes (gpu-node-01, gpu-node-03), gpu-node-01 the canary. '
        'Rolled back alone, the baseline serving there: gpu-node-02. Not switched: gpu-node-04. '
        'gpu-node-02 (failed: crashed at start: SIGILL).')


def test_a_node_that_had_rolled_the_variant_back_itself_is_not_switched_and_says_why():
    summary = rollout_summary('ngram', 'gpu-node-01', {
        'gpu-node-01': outcome('kept', ['ngram']),
        'gpu-node-02': outcome('rolled_back', ['baseline'], said='unchanged',
                               reason='no trial ran (the target already runs, or was decided earlier)'),
    })
    assert summary['untouched'] == ['gpu-node-02'] and summary['rolled_back'] == []
    assert summary['message'].endswith('gpu-node-02 not switched (no trial ran (the target already runs, or was '
                                       'decided earlier)).')


def test_a_complete_rollout():
    summary = rollout_summary('ngram', 'gpu-node-01', {node: outcome('kept', ['ngram']) for node in NODES[:2]})
    assert summary['complete'] and summary['message'] == (
        'ngram serves on 2 of 2 nodes (gpu-node-01, gpu-node-02), gpu-node-01 the canary.')
