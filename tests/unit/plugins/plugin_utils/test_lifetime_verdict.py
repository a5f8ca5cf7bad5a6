# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import math
import statistics

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils._benchmark_statistics import t_critical
from ansible_collections.llmops.vllm.plugins.plugin_utils._lifetime_verdict import (
    ANOTHER_PAIR,
    FASTER,
    KEEP,
    NOT_SLOWER,
    ROLL_BACK,
    LifetimeVerdictError,
    lifetime_figure,
    look,
    outliers,
    pairs_to_decide,
)


def lifetimes(*speeds):
    """One run per lifetime at each speed (tokens/s)."""
    return [[speed] for speed in speeds]


def test_a_lifetimes_figure_is_the_mean_of_its_runs_on_a_log_scale():
    assert lifetime_figure([100.0, 400.0]) == pytest.approx(math.log(200.0))
    for bad in ([], [0.0], [-3.0], [float('nan')]):
        with pytest.raises(LifetimeVerdictError):
            lifetime_figure(bad)


def test_one_lifetime_a_side_decides_nothing_however_far_apart():
    answer = look(lifetimes(100), lifetimes(20), margin_pct=8)
    assert (answer['action'], answer['rule']) == (ANOTHER_PAIR, 'too_few')
    assert answer['change_pct'] is None and answer['low_pct'] is None


def test_a_variant_far_below_the_margin_is_rolled_back_as_slower():
    answer = look(lifetimes(100, 102), lifetimes(60, 61), margin_pct=8)
    assert (answer['action'], answer['rule']) == (ROLL_BACK, 'slower')
    assert answer['change_pct'] == pytest.approx(100 * (math.sqrt(60 * 61 / (100 * 102)) - 1), abs=0.01)
    assert answer['high_pct'] < -8
    assert answer['reason'].startswith('slower: ')


def test_a_variant_as_fast_as_the_baseline_with_a_tight_spread_is_kept_as_not_slower():
    answer = look(lifetimes(100, 101, 99, 100), lifetimes(100, 99.5, 100.5, 100), margin_pct=8)
    assert (answer['action'], answer['rule']) == (KEEP, NOT_SLOWER)
    assert answer['low_pct'] >= -8


def test_keep_when_faster_needs_the_whole_interval_above_zero():
    faster = lifetimes(120, 121, 119)
    assert look(lifetimes(100, 101, 99), faster, keep_when=FASTER)['rule'] == FASTER
    # As fast as the baseline: no gain to find, and the estimate sits on the losing side of zero.
    same = look(lifetimes(100, 101, 99), lifetimes(99.8, 100.2, 99.5), keep_when=FASTER)
    assert (same['action'], same['rule']) == (ROLL_BACK, 'futility')


def test_an_estimate_beyond_the_margin_with_a_wide_interval_stops_for_futility():
    answer = look(lifetimes(100, 110), lifetimes(85, 95), margin_pct=8)
    assert answer['change_pct'] < -8 < answer['high_pct']
    assert (answer['action'], answer['rule']) == (ROLL_BACK, 'futility')


def test_an_undecided_look_asks_for_another_pair_until_the_maximum_then_rolls_back():
    baseline, variant = lifetimes(100, 112), lifetimes(106, 98)
    first = look(baseline, variant, margin_pct=8, max_lifetimes=4)
    assert (first['action'], first['rule']) == (ANOTHER_PAIR, 'undecided')
    last = look(baseline, variant, margin_pct=8, max_lifetimes=2)
    assert (last['action'], last['rule']) == (ROLL_BACK, 'inconclusive')
    assert last['reason'].startswith('inconclusive after 2 lifetimes a side')
    assert isinstance(last['pairs_to_decide'], int) and last['pairs_to_decide'] >= 1


def test_the_interval_is_welchs_with_the_baselines_spread_pooled_with_its_history():
    baseline, variant, history = [100.0, 104.0, 98.0], [90.0, 95.0, 93.0], [101.0, 97.0, 103.0, 99.5]
    answer = look(lifetimes(*baseline), lifetimes(*variant), [math.log(value) for value in history], margin_pct=8,
                  max_lifetimes=8)
    logs_b, logs_v = [math.log(v) for v in baseline], [math.log(v) for v in variant]
    pooled = logs_b + [math.log(v) for v in history]
    part_b, part_v = statistics.variance(pooled) / 3, statistics.variance(logs_v) / 3
    df = (part_b + part_v) ** 2 / (part_b ** 2 / (len(pooled) - 1) + part_v ** 2 / 2)
    change = statistics.fmean(logs_v) - statistics.fmean(logs_b)
    half_width = t_critical(math.floor(df * 10) / 10, 0.99) * math.sqrt(part_b + part_v)
    assert answer['df'] == pytest.approx(df, abs=0.01)
    assert answer['change_pct'] == pytest.approx(100 * (math.exp(change) - 1), abs=0.01)
    assert answer['low_pct'] == pytest.approx(100 * (math.exp(change - half_width) - 1), abs=0.01)
    assert answer['high_pct'] == pytest.approx(100 * (math.exp(change + half_width) - 1), abs=0.01)
    assert answer['history_lifetimes'] == 4


def test_stored_lifetimes_narrow_the_interval_that_two_lifetimes_alone_leave_wide():
    baseline, variant = lifetimes(100, 103), lifetimes(99, 101)
    alone = look(baseline, variant, margin_pct=8)
    stored = [math.log(value) for value in (101, 99, 102, 100, 98.5, 101.5)]
    with_history = look(baseline, variant, stored, margin_pct=8)
    assert with_history['high_pct'] - with_history['low_pct'] < alone['high_pct'] - alone['low_pct']
    assert with_history['df'] > alone['df']
    assert with_history['change_pct'] == alone['change_pct']


def test_an_outlier_lifetime_is_flagged_and_a_variant_that_spreads_twice_as_much_is_unstable():
    assert outliers([math.log(v) for v in (50, 100, 101, 99, 100.5)]) == [0]
    assert outliers([math.log(v) for v in (100, 101)]) == []
    answer = look(lifetimes(100, 101, 99, 100), lifetimes(90, 110, 100, 95), margin_pct=30, max_lifetimes=4)
    assert answer['unstable'] is True
    assert 'unstable between starts' in answer['reason']


@pytest.mark.parametrize('arguments, message', [
    ({'keep_when': 'notslower'}, 'keep_when must be one of not_slower, faster'),
    ({'margin_pct': 0}, 'margin_pct must lie between 0 and 100'),
    ({'max_lifetimes': 0}, 'max_lifetimes must be a whole number of at least 1'),
])
def test_bad_settings_are_refused_naming_the_setting(arguments, message):
    with pytest.raises(LifetimeVerdictError, match=message):
        look(lifetimes(100, 101), lifetimes(100, 101), **arguments)


def test_pairs_to_decide_is_none_where_no_number_of_pairs_would_decide():
    # 3% slower against keep_when=faster: neither above zero nor below the margin.
    baseline, variant = [math.log(v) for v in (100, 101, 99)], [math.log(v) for v in (97, 98, 96)]
    assert pairs_to_decide(baseline, variant, [], 8, FASTER) is None
    assert pairs_to_decide(baseline, variant, [], 8, NOT_SLOWER) >= 1
