# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.filter.trial_next_step import trial_next_step
from ansible_collections.llmops.vllm.plugins.plugin_utils._trial_steps import MAX_STEPS, TrialStepError, next_step, step_limit

PLAN = {'variant': 'ngram', 'baseline': 'baseline'}


def run(plan, failing=None, decision='keep', reason='ngram is 12% faster'):
    """Take the steps the function names until the trial ends, the way the role's loop does.

    failing names the (step, side) that fails; every other step succeeds. Returns the steps taken, the last
    one (done or stop) included.
    """
    taken = []
    while True:
        step = next_step(taken, plan)
        if step['step'] in ('done', 'stop'):
            return taken + [step]
        if (step['step'], step['side']) == failing:
            taken.append({**step, 'failed': True, 'msg': f'{step["step"]} broke'})
            continue
        answer = {'decision': decision, 'reason': reason} if step['step'] == 'decide' else {}
        taken.append({**step, 'failed': False, 'answer': answer})


def names(steps):
    return [(step['step'], step['side']) if step['side'] else step['step'] for step in steps]


def test_a_kept_variant_takes_every_step_in_order():
    steps = run(PLAN)

    assert names(steps) == ['check', ('serve', 'baseline'), ('benchmark', 'baseline'), 'begin', ('serve', 'variant'),
                            ('benchmark', 'variant'), 'decide', 'keep', 'done']
    assert steps[-2]['reason'] == 'ngram is 12% faster'


def test_a_variant_the_decision_does_not_keep_is_rolled_back_with_the_decisions_reason():
    steps = run(PLAN, decision='rollback', reason='ngram is 9% slower')

    assert names(steps)[-2:] == ['roll_back', 'done']
    assert steps[-2]['outcome'] == 'rolled_back'
    assert steps[-2]['reason'] == 'ngram is 9% slower'


def test_a_decision_without_a_reason_still_gives_the_rollback_one():
    steps = run(PLAN, decision='incorrect', reason=None)

    assert steps[-2]['step'] == 'roll_back'
    assert "'incorrect'" in steps[-2]['reason']


@pytest.mark.parametrize('failing', [('check', None), ('serve', 'baseline'), ('benchmark', 'baseline'),
                                     ('begin', None)])
def test_a_failure_before_the_baseline_stops_ends_the_run_with_nothing_rolled_back(failing):
    steps = run(PLAN, failing=failing)

    assert names(steps)[-2:] == [failing[0] if failing[1] is None else failing, 'stop']
    assert 'roll_back' not in names(steps)
    assert 'serve' not in [step['step'] for step in steps if step['side'] == 'variant']
    assert steps[-1]['msg'] == f'{failing[0]} broke'


@pytest.mark.parametrize('failing', [('serve', 'variant'), ('benchmark', 'variant'), ('decide', None)])
def test_a_failure_once_the_baseline_stopped_rolls_back_as_failed_and_then_ends_the_run(failing):
    steps = run(PLAN, failing=failing)

    roll_back, stop = steps[-2], steps[-1]
    assert (roll_back['step'], roll_back['outcome'], roll_back['reason']) == ('roll_back', 'failed', f'{failing[0]} broke')
    assert stop == {'step': 'stop', 'side': None,
                    'msg': f'ngram failed and was rolled back; baseline serves again. Cause: {failing[0]} broke'}
    assert 'keep' not in names(steps)


def test_a_rollback_that_fails_ends_the_run_with_the_rollbacks_own_message():
    taken = [{'step': 'roll_back', 'side': None, 'outcome': 'failed', 'reason': 'x', 'failed': True,
              'msg': 'no unit of the model serves'}]

    assert next_step(taken, PLAN) == {'step': 'stop', 'side': None, 'msg': 'no unit of the model serves'}


def test_a_keep_that_fails_is_not_rolled_back():
    taken = [{'step': 'keep', 'side': None, 'failed': True, 'msg': 'the record could not be written'}]

    assert next_step(taken, PLAN)['step'] == 'stop'


def test_without_benchmarks_the_variant_is_served_and_kept_undecided():
    steps = run({**PLAN, 'benchmark': False})

    assert names(steps) == ['check', ('serve', 'baseline'), 'begin', ('serve', 'variant'), 'keep', 'done']
    assert steps[-2]['reason'] is None


def test_without_a_decision_the_benchmarked_variant_is_kept_undecided():
    steps = run({**PLAN, 'decide': False})

    assert names(steps)[-3:] == [('benchmark', 'variant'), 'keep', 'done']


def test_the_baseline_is_only_served_and_persisted():
    assert names(run({'variant': 'baseline', 'baseline': 'baseline'})) == [('serve', 'baseline'), 'persist', 'done']


def test_a_failed_start_of_the_baseline_as_target_ends_the_run():
    steps = run({'variant': 'baseline', 'baseline': 'baseline'}, failing=('serve', 'baseline'))

    assert names(steps)[-1] == 'stop'


def test_a_failure_without_a_message_is_still_named():
    taken = [{'step': 'check', 'side': None, 'failed': True}]

    assert next_step(taken, PLAN)['msg'] == 'the check step failed without a message'


@pytest.mark.parametrize('taken, plan, message', [
    ([], {'variant': 'ngram'}, 'the plan needs baseline'),
    ([], {**PLAN, 'benchmark': 'False'}, "benchmark must be true or false, got 'False'"),
    ([], {**PLAN, 'benchmarks': True}, 'unknown plan key(s) benchmarks'),
    ([], ['ngram'], 'the plan must be a mapping'),
    ('check', PLAN, 'the steps taken must be a list'),
    ([{'step': 'warm_up'}], PLAN, 'step 1 taken is not one of check'),
    ([{'step': 'serve', 'side': 'draft'}], PLAN, "has side 'draft'"),
    ([{'step': 'done', 'side': None}], PLAN, 'the trial has ended (done)'),
    ([{'step': 'keep', 'side': None, 'failed': False}] * MAX_STEPS, PLAN, f'took {MAX_STEPS} steps without an end'),
])
def test_steps_and_plans_that_cannot_be_read_are_refused(taken, plan, message):
    with pytest.raises(TrialStepError) as error:
        next_step(taken, plan)
    assert message in str(error.value)


def test_the_filter_names_itself_when_it_refuses():
    with pytest.raises(AnsibleFilterError, match='^trial_next_step: the plan needs variant'):
        trial_next_step([], {'baseline': 'baseline'})


def test_the_filter_gives_the_first_step():
    assert trial_next_step([], PLAN) == {'step': 'check', 'side': None}


LIFETIMES = dict(PLAN, max_lifetimes=4)


def run_pairs(plan, answers, failing_at=None):
    """Take a trial by lifetimes whose looks answer, in turn, the decisions in answers; failing_at (index, step, side)
    fails the index-th time that step is named."""
    taken, looks, seen = [], iter(answers), {}
    while True:
        step = next_step(taken, plan)
        if step['step'] in ('done', 'stop'):
            return taken + [step]
        key = (step['step'], step['side'])
        seen[key] = seen.get(key, 0) + 1
        if failing_at and (seen[key], *key) == failing_at:
            taken.append({**step, 'failed': True, 'msg': f'{step["step"]} broke'})
            continue
        answer = {'decision': next(looks), 'reason': 'look'} if step['step'] == 'decide' else {}
        taken.append({**step, 'failed': False, 'answer': answer})


def test_a_trial_by_lifetimes_restarts_the_baseline_and_decides_after_every_pair():
    steps = run_pairs(LIFETIMES, ['another_pair', 'keep'])
    assert names(steps) == ['check', ('serve', 'baseline'), 'begin', ('serve', 'baseline'), ('benchmark', 'baseline'),
                            ('serve', 'variant'), ('benchmark', 'variant'), 'decide', ('serve', 'baseline'),
                            ('benchmark', 'baseline'), ('serve', 'variant'), ('benchmark', 'variant'), 'decide',
                            'keep', 'done']
    assert steps[3]['restart'] is True
    assert not steps[8].get('restart')


def test_a_first_pair_that_fails_its_checks_rolls_back_at_once():
    steps = run_pairs(LIFETIMES, ['roll_back'])
    assert [step['step'] for step in steps].count('benchmark') == 2
    assert steps[-2]['step'] == 'roll_back' and steps[-2]['outcome'] == 'rolled_back'


def test_another_pair_alternates_the_sides_until_a_look_decides():
    steps = run_pairs(LIFETIMES, ['another_pair', 'another_pair', 'another_pair', 'roll_back'])
    assert [step['step'] for step in steps].count('decide') == 4
    assert [(step['step'], step['side']) for step in steps].count(('benchmark', 'variant')) == 4
    assert steps[-2]['step'] == 'roll_back' and steps[-2]['outcome'] == 'rolled_back'


def test_the_longest_trial_by_lifetimes_fits_its_step_limit():
    plan = dict(PLAN, max_lifetimes=12)
    steps = run_pairs(plan, ['another_pair'] * 11 + ['roll_back'])
    assert len(steps) <= step_limit(12)
    assert steps[-1]['step'] == 'done'


def test_a_failed_restart_of_the_baseline_rolls_back_once_the_trial_has_begun():
    steps = run_pairs(LIFETIMES, ['another_pair', 'keep'], failing_at=(2, 'serve', 'baseline'))
    assert steps[-2]['step'] == 'roll_back' and steps[-2]['outcome'] == 'failed'
    assert steps[-1]['step'] == 'stop'


def test_a_failure_before_the_trial_begins_stops_with_nothing_stopped():
    steps = run_pairs(LIFETIMES, ['keep'], failing_at=(1, 'serve', 'baseline'))
    assert names(steps)[-1] == 'stop'
    assert 'roll_back' not in [step['step'] for step in steps]


def test_a_later_benchmark_failure_of_the_baseline_rolls_back():
    steps = run_pairs(LIFETIMES, ['another_pair', 'another_pair', 'keep'], failing_at=(2, 'benchmark', 'baseline'))
    assert steps[-2]['step'] == 'roll_back' and steps[-2]['outcome'] == 'failed'


def test_check_mode_by_lifetimes_takes_one_pair_and_keeps():
    steps = run_pairs(dict(LIFETIMES, decide=False), [])
    assert names(steps)[-2:] == ['keep', 'done']
    assert 'decide' not in names(steps)


def test_a_trial_of_the_baseline_itself_is_not_by_lifetimes():
    steps = run_pairs(dict(LIFETIMES, variant='baseline'), [])
    assert names(steps) == [('serve', 'baseline'), 'persist', 'done']


@pytest.mark.parametrize('value', [1, 13, 'eight', True, 2.5])
def test_a_bad_max_lifetimes_is_refused_with_the_rule(value):
    with pytest.raises(TrialStepError, match='max_lifetimes must be a whole number from 2 to 12'):
        next_step([], dict(PLAN, max_lifetimes=value))


@pytest.mark.parametrize('value', [0, None, '0'])
def test_no_max_lifetimes_is_one_lifetime_a_side(value):
    steps = run(dict(PLAN, max_lifetimes=value))
    assert 'begin' in names(steps) and names(steps).index(('benchmark', 'baseline')) < names(steps).index('begin')
