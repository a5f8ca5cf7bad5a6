# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import itertools

import pytest

from ansible_collections.llmops.vllm.plugins.plugin_utils._decision import DecisionError
from ansible_collections.llmops.vllm.plugins.plugin_utils._lifetime_decision import decide_by_lifetimes, report_lines

_INVOCATIONS = itertools.count(1)


def lifetime(side, speed, concurrency=4, failed=0, workload=None, uptime_s=30.0, runs=1):
    """One lifetime's benchmark: runs at this speed (tokens/s), labelled with a fresh InvocationID."""
    labels = {'lifetime': 'inv-%d' % next(_INVOCATIONS)}
    if workload:
        labels['workload'] = workload
    level = {'max_concurrency': concurrency, 'output_throughput_repeats': [speed] * runs, 'output_throughput': speed,
             'failed': failed}
    return {'side': side, 'uptime_s': uptime_s, 'benchmark': {'labels': labels, 'results': [level]}}


def trial(baseline, variant):
    """Lifetimes alternating baseline and variant, in the order a trial measures them."""
    lifetimes = []
    for index in range(max(len(baseline), len(variant))):
        if index < len(baseline):
            lifetimes.append(lifetime('baseline', baseline[index]))
        if index < len(variant):
            lifetimes.append(lifetime('variant', variant[index]))
    return lifetimes


def test_a_variant_as_fast_as_the_baseline_over_steady_lifetimes_is_kept_at_the_second_look():
    answer = decide_by_lifetimes(trial([1000, 1010, 995], [1002, 1008, 998]))
    assert (answer['decision'], answer['outcome'], answer['rule']) == ('keep', 'not_slower', 'not_slower')
    assert answer['pairs'] == 3 and answer['look'] == 2
    assert [row['side'] for row in answer['lifetimes']] == ['baseline'] * 3 + ['variant'] * 3
    assert answer['lifetimes'][0]['output_throughput'] == pytest.approx(1000)
    assert answer['lifetimes'][0]['uptime_s'] == 30.0


def test_one_pair_never_decides():
    answer = decide_by_lifetimes(trial([1000], [500]))
    assert answer['decision'] == 'another_pair'
    assert answer['looks'][0]['rule'] == 'too_few'


def test_a_variant_far_slower_is_rolled_back_as_slower():
    answer = decide_by_lifetimes(trial([1000, 1010], [600, 610]))
    assert (answer['decision'], answer['outcome'], answer['rule']) == ('roll_back', 'slower', 'slower')
    assert answer['delta_pct'] == pytest.approx(-39.6, abs=0.2)


def test_a_change_on_the_losing_side_with_a_wide_interval_stops_for_futility():
    answer = decide_by_lifetimes(trial([1000, 1100], [850, 1000]))
    assert (answer['decision'], answer['outcome'], answer['rule']) == ('roll_back', 'futility', 'futility')


def test_an_undecided_trial_asks_for_another_pair_and_at_the_maximum_rolls_back_as_inconclusive():
    baseline, variant = [1000, 1080, 960], [990, 1060, 940]
    answer = decide_by_lifetimes(trial(baseline, variant), max_lifetimes=4)
    assert answer['decision'] == 'another_pair'
    answer = decide_by_lifetimes(trial(baseline + [1050], variant + [930]), max_lifetimes=4)
    assert (answer['decision'], answer['outcome'], answer['rule']) == ('roll_back', 'inconclusive', 'inconclusive')
    assert answer['to_decide'] is not None and 'more pair' in answer['to_decide']


def test_stored_lifetimes_of_the_baseline_narrow_the_interval():
    lifetimes = trial([1000, 1040], [1005, 1035])
    alone = decide_by_lifetimes(lifetimes)
    history = [{'workload': 'default', 'max_concurrency': 4, 'output_throughput': speed, 'lifetime': 'old-%d' % speed,
                'prompt_set_sha256': None} for speed in (1010, 1020, 1015, 1025, 1030, 1012)]
    known = decide_by_lifetimes(lifetimes, history=history)
    width = {name: look['looks'][0]['high_pct'] - look['looks'][0]['low_pct']
             for name, look in (('alone', alone), ('known', known))}
    assert width['known'] < width['alone']
    assert known['looks'][0]['history_lifetimes'] == 6


def test_this_trials_own_lifetimes_in_the_history_count_once():
    lifetimes = trial([1000, 1040], [1005, 1035])
    own = [{'workload': 'default', 'max_concurrency': 4, 'output_throughput': 1000,
            'lifetime': lifetimes[0]['benchmark']['labels']['lifetime']}]
    assert decide_by_lifetimes(lifetimes, history=own)['looks'][0]['history_lifetimes'] == 0


def test_failed_requests_in_the_latest_pair_roll_back_whatever_the_lifetimes_show():
    lifetimes = trial([1000, 1010], [1002])
    lifetimes.append(lifetime('variant', 1008, failed=3))
    answer = decide_by_lifetimes(lifetimes)
    assert (answer['decision'], answer['outcome']) == ('roll_back', 'inconclusive')
    assert answer['failed_requests']['variant'] == 3


def test_keep_when_faster_needs_a_level_shown_faster():
    faster = decide_by_lifetimes(trial([1000, 1010, 1005], [1200, 1210, 1190]), keep_when='faster')
    assert (faster['decision'], faster['outcome']) == ('keep', 'faster')
    same = decide_by_lifetimes(trial([1000, 1010, 1005], [995, 1000, 1003]), keep_when='faster')
    assert (same['decision'], same['outcome'], same['rule']) == ('roll_back', 'futility', 'futility')


def test_a_variant_whose_starts_spread_far_more_is_flagged_unstable():
    answer = decide_by_lifetimes(trial([1000, 1010, 1005, 1002], [1000, 1300, 800, 1100]))
    assert answer['unstable'] is True


def test_an_outlier_lifetime_is_flagged_in_the_table():
    answer = decide_by_lifetimes(trial([1000, 1002, 998, 1001, 640], [1000, 1001, 999, 1002, 1000]))
    flagged = [(row['side'], row['number']) for row in answer['lifetimes'] if row['outlier']]
    assert flagged == [('baseline', 5)]


def test_every_workload_and_level_is_looked_at_and_the_worst_speaks():
    lifetimes = []
    for speeds in ((1000, 1000), (1010, 1008)):
        for side, speed in zip(('baseline', 'variant'), speeds):
            chat = lifetime(side, speed, workload='chat')
            code = lifetime(side, speed * (0.6 if side == 'variant' else 1.0), workload='code')
            lifetimes.append({'side': side, 'uptime_s': 10.0,
                              'benchmark': [chat['benchmark'], dict(code['benchmark'], labels=dict(
                                  code['benchmark']['labels'], lifetime=chat['benchmark']['labels']['lifetime']))]})
    answer = decide_by_lifetimes(lifetimes)
    assert (answer['decision'], answer['outcome']) == ('roll_back', 'slower')
    assert answer['reason'].startswith('workload code')
    assert {look['workload'] for look in answer['looks']} == {'chat', 'code'}


def test_the_report_has_a_row_per_lifetime_and_the_dark_time():
    answer = decide_by_lifetimes(trial([1000, 1080, 960], [990, 1060, 940]))
    lines = report_lines(answer, dark_seconds=1800, pair_seconds=600)
    assert len([line for line in lines if line.split()[0].isdigit()]) == 6
    assert any('30.0 min' in line and '10.0 min' in line for line in lines)


@pytest.mark.parametrize('lifetimes, message', [
    ([{'side': 'canary', 'benchmark': {'results': []}}], 'must name its side'),
    (trial([1000], []), 'needs a lifetime of each side'),
    ('baseline', 'lifetimes must be a list'),
])
def test_lifetimes_that_cannot_be_read_are_refused(lifetimes, message):
    with pytest.raises(DecisionError, match=message):
        decide_by_lifetimes(lifetimes)


def test_a_maximum_below_one_lifetime_is_refused():
    with pytest.raises(DecisionError, match='max_lifetimes must be a whole number of at least 1'):
        decide_by_lifetimes(trial([1000, 1010], [1000, 1010]), max_lifetimes=0)


def _stored(speeds):
    return [{'workload': 'default', 'max_concurrency': 4, 'output_throughput': speed, 'lifetime': 'old-%d' % index,
             'prompt_set_sha256': None} for index, speed in enumerate(speeds)]


def test_one_lifetime_a_side_looks_once_with_the_baseline_s_spread_from_its_stored_lifetimes():
    steady = _stored([1000, 1010, 995, 1005, 998, 1003])
    kept = decide_by_lifetimes(trial([1002], [1001]), history=steady, max_lifetimes=1)
    assert (kept['decision'], kept['outcome']) == ('keep', 'not_slower')
    assert kept['look'] == 1 and kept['pairs'] == 1 and kept['looks'][0]['history_lifetimes'] == 6
    slower = decide_by_lifetimes(trial([1002], [700]), history=steady, max_lifetimes=1)
    assert (slower['decision'], slower['outcome']) == ('roll_back', 'slower')
    # A spread too wide for one pair to tell rolls back as inconclusive, the first look being the last.
    spread = _stored([900, 1100, 950, 1060])
    unclear = decide_by_lifetimes(trial([1000], [990]), history=spread, max_lifetimes=1)
    assert (unclear['decision'], unclear['outcome']) == ('roll_back', 'inconclusive')


def test_one_lifetime_a_side_without_stored_lifetimes_rolls_back_as_inconclusive_and_says_how_to_decide():
    answer = decide_by_lifetimes(trial([1000], [1000]), max_lifetimes=1)
    assert (answer['decision'], answer['outcome']) == ('roll_back', 'inconclusive')
    assert 'calibrate' in answer['reason'] and 'vllm_switch_max_lifetimes' in answer['reason']
    assert any('no interval' in line for line in report_lines(answer))
