# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import math
import random

import pytest

from ansible_collections.llmops.vllm.plugins.plugin_utils._calibration import (
    CalibrationError,
    bimodality_coefficient,
    calibrate_levels,
    cold_loads,
    lifetimes_needed,
    summarise,
)


def spread_lifetimes(cv_pct, count=8, runs=2, run_cv_pct=0.5, seed=1):
    rng = random.Random(seed)
    lifetimes = []
    for dummy in range(count):
        speed = 1000 * math.exp(rng.gauss(0, cv_pct / 100))
        lifetimes.append([speed * math.exp(rng.gauss(0, run_cv_pct / 100)) for dummy in range(runs)])
    return lifetimes


def test_a_steady_node_resolves_the_margin_in_few_lifetimes_and_says_what_it_costs():
    answer = summarise(spread_lifetimes(2.0), warm_restart_s=[60, 62, 58], cold_load_s=[1800], benchmark_s=120)
    assert 1.0 < answer['lifetime_cv_pct'] < 3.5
    assert answer['run_cv_pct'] < answer['lifetime_cv_pct']
    assert answer['runs_per_lifetime'] == 1
    assert answer['resolvable'] and 2 <= answer['lifetimes_needed'] <= 4
    assert answer['cold_warm_ratio'] == pytest.approx(30.0)
    # A warm restart, the cold load, the other warm restarts and a benchmark in each lifetime.
    needed = answer['lifetimes_needed']
    assert answer['dark_minutes'] == pytest.approx((60 + 1800 + 60 * (2 * needed - 2) + 120 * 2 * needed) / 60, abs=0.1)


def test_a_node_whose_lifetimes_spread_more_than_the_margin_allows_cannot_resolve_it():
    answer = summarise(spread_lifetimes(12.0), warm_restart_s=[60], margin_pct=8.0, max_lifetimes=10)
    assert not answer['resolvable']
    assert answer['lifetimes_needed'] is None or answer['lifetimes_needed'] > 10


def test_runs_that_vary_as_much_as_lifetimes_ask_for_two_runs_a_lifetime():
    answer = summarise(spread_lifetimes(1.0, run_cv_pct=3.0))
    assert answer['runs_per_lifetime'] == 2


def test_one_run_a_lifetime_measures_no_run_cv():
    answer = summarise(spread_lifetimes(2.0, runs=1))
    assert answer['run_cv_pct'] is None and answer['runs_per_lifetime'] == 1


def test_two_groups_of_starts_are_found_bimodal_and_one_spread_group_is_not():
    two = [[1000.0]] * 5 + [[800.0]] * 5
    assert summarise(two)['bimodal']
    assert not summarise(spread_lifetimes(3.0, count=12, seed=5))['bimodal']
    assert bimodality_coefficient([1.0] * 7) is None


def test_lifetimes_that_fall_start_after_start_drift():
    falling = [[1000 * (1 - 0.02 * index)] for index in range(8)]
    answer = summarise(falling)
    assert answer['drift']['drifts'] and answer['drift']['pct_per_start'] == pytest.approx(-2.2, abs=0.3)
    assert not summarise(spread_lifetimes(2.0, seed=3))['drift']['drifts']


def test_lifetimes_needed_grows_with_the_spread_and_shrinks_with_stored_lifetimes():
    assert lifetimes_needed(0.5, 8.0) == 2 and lifetimes_needed(1.0, 8.0) == 3
    assert lifetimes_needed(3.0, 8.0) > lifetimes_needed(1.0, 8.0)
    assert lifetimes_needed(3.0, 8.0, history=20) <= lifetimes_needed(3.0, 8.0)
    assert lifetimes_needed(30.0, 8.0) is None
    assert lifetimes_needed(3.0, 8.0, keep_when='faster') is None


def test_cold_loads_are_each_trials_first_start_of_its_variant():
    history = [{'starts': [{'variant': 'baseline', 'seconds': 40}, {'variant': 'ngram', 'seconds': 300},
                           {'variant': 'baseline', 'seconds': 41}, {'variant': 'ngram', 'seconds': 45}]},
               {'starts': [{'variant': 'eagle', 'seconds': 500}]}, {'outcome': 'kept'}]
    assert cold_loads(history, 'baseline') == [300.0, 500.0]


def benchmark(speeds, lifetime, concurrency=(4,)):
    return {'labels': {'lifetime': lifetime, 'workload': 'default', 'unit_checksum': 'abc'},
            'results': [{'max_concurrency': level, 'output_throughput_repeats': list(speeds),
                         'output_throughput': sum(speeds) / len(speeds), 'failed': 0} for level in concurrency]}


def test_every_level_is_calibrated_and_the_lifetimes_are_kept_for_the_history():
    lifetimes = [{'benchmark': benchmark(runs, 'inv-%d' % index, concurrency=(1, 8))}
                 for index, runs in enumerate(spread_lifetimes(2.0))]
    answer = calibrate_levels(lifetimes, warm_restart_s=[50.0], node_history=[], margin_pct=8.0)
    assert [level['max_concurrency'] for level in answer['levels']] == [1, 8]
    assert len(answer['baseline_lifetimes']) == 16
    assert {item['lifetime'] for item in answer['baseline_lifetimes']} == {'inv-%d' % index for index in range(8)}
    assert answer['report'][0].startswith('workload default at concurrency')


@pytest.mark.parametrize('lifetimes, message', [
    ([[1000.0], [1001.0]], 'at least 3 lifetimes'),
    ([[1000.0], [-1.0], [990.0]], 'positive numbers'),
])
def test_measurements_that_cannot_be_read_are_refused(lifetimes, message):
    with pytest.raises(CalibrationError, match=message):
        summarise(lifetimes)
