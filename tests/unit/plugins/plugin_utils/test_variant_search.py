# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The variant search: the grid, the model (acceptance and step cost) and the decision, on canned trial records.

The figures follow what the mock node and published Kimi-K2.5 drafts show: a baseline at 20 ms TPOT, n-gram
acceptance that falls from ~0.75 at the first draft position, EAGLE-3 acceptance lengths of 2.6 to 3.1.
"""

from __future__ import annotations

import random

import pytest

from ansible_collections.llmops.vllm.plugins.plugin_utils._variant_search import (
    SearchError,
    fit_step_cost,
    search_points,
    search_step,
    tokens_per_step,
)

NGRAM = {'method': 'ngram', 'prompt_lookup_min': 1}
GRID = {'num_speculative_tokens': [1, 2, 3], 'prompt_lookup_max': [1, 4]}
EAGLE = {'method': 'eagle3', 'model': '/srv/models/kimi-eagle3'}
CONCURRENCY = 8
BASELINE_TPOT = 20.0
# Output tokens/s = concurrency / TPOT, less what prefill and scheduling take.
DECODE_SHARE = 0.9


def throughput_at(tpot_ms):
    return CONCURRENCY * 1000.0 / tpot_ms * DECODE_SHARE


BASELINE_THROUGHPUT = throughput_at(BASELINE_TPOT)


class Truth:
    """A synthetic node: per family acceptance by position, a step that costs fixed + per_draft * k, and noise."""

    def __init__(self, rates, fixed_ms=3.0, per_draft_ms=4.0, noise=0.02, seed=0, failing=()):
        self.rates = rates
        self.fixed_ms = fixed_ms
        self.per_draft_ms = per_draft_ms
        self.noise = noise
        self.seed = seed
        self.failing = set(failing)
        self.clock = 0
        self.tries = {}

    def tpot(self, point):
        rates = self.rates[point['family']][:point['k']]
        step = BASELINE_TPOT + self.fixed_ms + self.per_draft_ms * point['k']
        return step / (1.0 + sum(rates))

    def best(self, points):
        """The point that is fastest without noise."""
        return min(points, key=self.tpot)['name']

    def trial(self, point, name=None):
        """The record the role writes after a trial of point (under name, the point's by default)."""
        self.clock += 1
        name = name or point['name']
        stamp = '2026-12-01T10:%02d:00Z' % self.clock
        if point['name'] in self.failing:
            return {'variant': name, 'baseline': 'baseline', 'outcome': 'failed', 'reason': 'the server did not start',
                    'decision': None, 'recorded_at': stamp}
        # The noise of a trial depends on the point and how often it was tried, not on the order of the
        # search: the pruned search and the exhaustive one see the same measurement of a point.
        self.tries[point['name']] = self.tries.get(point['name'], 0) + 1
        draw = random.Random('%s/%s/%d' % (self.seed, point['name'], self.tries[point['name']]))

        def jitter(value):
            return value * (1.0 + draw.uniform(-self.noise, self.noise))

        tpot = jitter(self.tpot(point))
        variant_throughput = jitter(throughput_at(tpot))
        rates = [min(1.0, jitter(rate)) for rate in self.rates[point['family']][:point['k']]]
        return record(name, variant_throughput, jitter(BASELINE_THROUGHPUT), tpot, jitter(BASELINE_TPOT), rates,
                      stamp=stamp)


def record(name, variant_throughput, baseline_throughput, tpot, baseline_tpot, rates, stamp=None, workloads=None,
           outcome=None):
    delta = (variant_throughput - baseline_throughput) * 100.0 / baseline_throughput
    kept = outcome or ('kept' if delta > -1.0 else 'rolled_back')
    levels = []
    for workload in workloads or [None]:
        level = {'max_concurrency': CONCURRENCY, 'status': 'faster' if delta > 0 else 'slower', 'delta_pct': delta,
                 'lower_pct': delta - 2.0, 'upper_pct': delta + 2.0, 'variant_output_throughput': variant_throughput,
                 'baseline_output_throughput': baseline_throughput, 'variant_tpot_ms': tpot,
                 'baseline_tpot_ms': baseline_tpot, 'acceptance_rates': list(rates),
                 'acceptance_length': 1.0 + sum(rates)}
        if workload:
            level['workload'] = workload
        levels.append(level)
    verdict = '%s at concurrency 8: %+.1f%% output tok/s vs the baseline' % (
        'faster' if delta > 0 else 'slower', delta)
    return {'variant': name, 'model': 'kimi-k2.5', 'baseline': 'baseline', 'outcome': kept, 'reason': verdict,
            'decision': {'decision': 'keep' if kept == 'kept' else 'roll_back', 'outcome': 'faster', 'reason': verdict,
                         'levels': levels},
            'unit_checksum': 'c0ffee', 'recorded_at': stamp}


def run_search(points, truth, records=(), **options):
    """Feed trial records back to search_step until it is done; the loaded names in order and the last answer."""
    records = list(records)
    loaded = []
    for dummy in range(len(points) + 2):
        answer = search_step(points, records, baseline='baseline', **options)
        if answer['done']:
            return loaded, answer
        point = next(item for item in points if item['name'] == answer['next'])
        loaded.append(point['name'])
        records.append(truth.trial(point))
    raise AssertionError('the search did not finish: loaded %s' % loaded)


# ------------------------------------------------------------------------------------------------------ the grid

def test_the_grid_gives_named_points_with_each_familys_largest_k_first():
    points = search_points(NGRAM, GRID)

    assert [point['name'] for point in points] == [
        'ngram-k3-max1', 'ngram-k3-max4', 'ngram-k2-max1', 'ngram-k1-max1', 'ngram-k2-max4', 'ngram-k1-max4']
    first = points[0]
    assert first['family'] == 'ngram-max1' and first['k'] == 3
    assert first['speculative_config'] == {'method': 'ngram', 'prompt_lookup_min': 1, 'num_speculative_tokens': 3,
                                           'prompt_lookup_max': 1}
    assert first['variant']['speculative_config'] == first['speculative_config']
    assert 'ngram-max1' in first['variant']['description']


def test_an_eagle3_grid_names_points_by_k_alone():
    points = search_points(EAGLE, {'num_speculative_tokens': [1, 2, 3, 4, 5]})

    assert [point['name'] for point in points] == ['eagle3-k5', 'eagle3-k4', 'eagle3-k3', 'eagle3-k2', 'eagle3-k1']
    assert {point['family'] for point in points} == {'eagle3'}
    assert points[2]['speculative_config'] == dict(EAGLE, num_speculative_tokens=3)


@pytest.mark.parametrize('variant, grid, message', [
    (['ngram'], GRID, 'vllm_search_variant must be a mapping'),
    ({'prompt_lookup_min': 1}, GRID, 'vllm_search_variant.method is required'),
    (NGRAM, {}, 'vllm_search_grid must be a non-empty mapping'),
    (NGRAM, {'prompt_lookup_max': [1, 4]}, 'vllm_search_grid.num_speculative_tokens is required'),
    (NGRAM, {'num_speculative_tokens': [1, 2], 'prompt_lookup_min': [1]},
     'vllm_search_grid.prompt_lookup_min: prompt_lookup_min is set in vllm_search_variant too'),
    (NGRAM, {'num_speculative_tokens': 3}, 'vllm_search_grid.num_speculative_tokens must be a list'),
    (NGRAM, {'num_speculative_tokens': []}, 'vllm_search_grid.num_speculative_tokens must list at least one value'),
    (NGRAM, {'num_speculative_tokens': [1, 0]}, 'values must be whole numbers >= 1, got 0'),
    (NGRAM, {'num_speculative_tokens': [1, 2.5]}, 'values must be whole numbers >= 1, got 2.5'),
    (NGRAM, {'num_speculative_tokens': [True, 2]}, 'values must be whole numbers >= 1, got True'),
    (NGRAM, {'num_speculative_tokens': [2, 3, 2]}, 'each value once; twice: 2'),
    (NGRAM, {'num_speculative_tokens': [3]}, 'vllm_search_grid must give at least 2 points to search, got 1'),
    ({'method': 'ngram', 'prompt_lookup_min': 3}, {'num_speculative_tokens': [2], 'prompt_lookup_max': [2, 4]},
     'vllm_search_variant.prompt_lookup_min: point ngram-k2-max2: must be <= prompt_lookup_max, got 3 > 2'),
    ({'method': 'eagle3'}, {'num_speculative_tokens': [1, 2]}, "vllm_search_variant.model: point eagle3-k2: required"),
    (NGRAM, {'num_speculative_tokens': [1, 2], 'no_such_key': [1]}, 'vllm_search_grid.no_such_key: point'),
    (NGRAM, {'num_speculative_tokens': [1, 2], 'suffix_decoding_max_tree_depth_and_some_more_words': [10 ** 40]},
     'breaks the variant-name rule'),
])
def test_the_grid_checks_name_the_variable_and_the_rule(variant, grid, message):
    with pytest.raises(SearchError) as caught:
        search_points(variant, grid)

    assert message in str(caught.value)


def test_a_declared_variant_of_a_point_name_must_have_the_same_config():
    points = search_points(NGRAM, GRID)
    same = {'ngram-k3-max4': {'speculative_config': dict(points[1]['speculative_config'])}}
    other = {'ngram-k3-max4': {'speculative_config': {'method': 'ngram', 'num_speculative_tokens': 5}}}

    assert search_points(NGRAM, GRID, known=same) == points
    with pytest.raises(SearchError, match='vllm_search_grid: point ngram-k3-max4 is already a declared variant '
                                          'with another speculative_config'):
        search_points(NGRAM, GRID, known=other)
    with pytest.raises(SearchError, match='pass known as the mapping'):
        search_points(NGRAM, GRID, known=['baseline', 'ngram-k3-max4'])
    assert search_points(NGRAM, GRID, known=['baseline', 'ngram']) == points


# ----------------------------------------------------------------------------------------------------- the model

def test_tokens_per_step_of_a_smaller_k_come_from_the_rates_measured_at_a_larger_one():
    rates = [0.81, 0.66, 0.58, 0.49, 0.43]

    assert tokens_per_step(rates, 5) == pytest.approx(3.97)
    assert tokens_per_step(rates, 2) == pytest.approx(2.47)
    assert tokens_per_step(rates, 1) == pytest.approx(1.81)
    assert tokens_per_step(rates, 6) is None


def test_one_trial_at_k3_predicts_k2_and_k1_of_its_family_and_nothing_of_another():
    truth = Truth({'ngram-max1': [0.5, 0.25, 0.1], 'ngram-max4': [0.75, 0.55, 0.2]}, noise=0.0)
    points = search_points(NGRAM, GRID)
    anchor = points[1]

    answer = search_step(points, [truth.trial(anchor)])

    predictions = answer['predictions']
    assert predictions['ngram-k3-max1']['predicted_throughput'] is None
    assert predictions['ngram-k3-max1']['basis'].startswith('must load: no trial of family ngram-max1')
    assert predictions['ngram-k2-max1']['predicted_throughput'] is None
    # One k: the line runs through the baseline (0, 20 ms) and k 3 (35 ms a step): 5 ms per draft token.
    measured = throughput_at(truth.tpot(anchor))
    for k, tokens in ((2, 2.3), (1, 1.75)):
        modelled_anchor = 35.0 / 2.5
        modelled = (20.0 + 5.0 * k) / tokens
        assert predictions['ngram-k%d-max4' % k]['predicted_throughput'] == pytest.approx(
            measured * modelled_anchor / modelled)
    assert answer['next'] == 'ngram-k3-max1'


def test_the_step_cost_with_one_k_is_anchored_at_the_baseline():
    fit = fit_step_cost([(3.0, 35.0), (3.0, 35.0)], baseline_tpot=20.0)

    assert fit['base_ms'] == pytest.approx(20.0)
    assert fit['per_draft_token_ms'] == pytest.approx(5.0)
    assert 'anchored at the baseline' in fit['basis']
    assert fit_step_cost([(3.0, 35.0)], baseline_tpot=None) is None


def test_the_step_cost_with_two_k_drops_the_baseline():
    # Speculating costs a fixed 3 ms a step that the baseline does not pay: with the baseline kept, the
    # slope would be wrong.
    fit = fit_step_cost([(3.0, 35.0), (2.0, 31.0), (3.0, 35.0)], baseline_tpot=20.0)

    assert fit['base_ms'] == pytest.approx(23.0)
    assert fit['per_draft_token_ms'] == pytest.approx(4.0)
    assert 'baseline dropped' in fit['basis']


# -------------------------------------------------------------------------------------------------- the decision

FAMILIES = {'ngram-max1': [0.5, 0.25, 0.1], 'ngram-max4': [0.75, 0.55, 0.2]}


@pytest.mark.parametrize('seed', range(12))
def test_the_search_loads_at_most_half_of_a_six_point_grid_and_finds_the_exhaustive_best(seed):
    points = search_points(NGRAM, GRID)

    loaded, answer = run_search(points, Truth(FAMILIES, seed=seed))
    every, reference = run_search(points, Truth(FAMILIES, seed=seed), exhaustive=True)

    assert answer['loads'] == len(loaded) <= 3
    assert loaded[:2] == ['ngram-k3-max1', 'ngram-k3-max4']
    assert sorted(every) == sorted(point['name'] for point in points)
    assert every[:2] == loaded[:2]
    assert reference['loads'] == 6
    assert answer['best'] == reference['best'] == Truth(FAMILIES).best(points) == 'ngram-k2-max4'
    assert answer['summary'].splitlines()[0] == "loads paid for: %d of the grid's 6 points" % len(loaded)
    assert reference['summary'].splitlines()[0] == "loads paid for: 6 of the grid's 6 points"
    # Every point after the anchors was predicted before its trial, and the check says by how much.
    assert [check['name'] for check in reference['checks']] == every[2:]
    for check in reference['checks']:
        error = (check['measured'] - check['predicted']) * 100.0 / check['predicted']
        assert check['error_pct'] == pytest.approx(error)
    assert set(answer['pruned']) | set(loaded) == {point['name'] for point in points}
    assert answer['reason'].startswith('done: no unmeasured point can beat ngram-k2-max4')


def test_the_band_is_ten_percent_until_a_prediction_is_checked_then_the_largest_under_prediction():
    points = search_points(NGRAM, GRID)
    truth = Truth(FAMILIES, noise=0.0)
    records = [truth.trial(points[0]), truth.trial(points[1])]

    before = search_step(points, records)
    assert before['band_pct'] == 10.0 and before['checks'] == []

    # ngram-k2-max4 measured 8% above what was predicted for it: the band widens to 8%.
    predicted = before['predictions']['ngram-k2-max4']['predicted_throughput']
    above = record('ngram-k2-max4', predicted * 1.08, BASELINE_THROUGHPUT, 13.0, BASELINE_TPOT, [0.75, 0.55],
                   stamp='2026-12-01T11:00:00Z')
    after = search_step(points, records + [above])
    assert after['checks'][0]['error_pct'] == pytest.approx(8.0)
    assert after['band_pct'] == pytest.approx(8.0)
    assert after['summary'].splitlines()[2] == 'ngram-k2-max4 predicted %.1f tok/s, measured %.1f (+8.0%%)' % (
        predicted, predicted * 1.08)

    # Measured below the prediction only cost a load: the band falls to the floor.
    below = dict(above, decision=dict(above['decision'], levels=[
        dict(above['decision']['levels'][0], variant_output_throughput=predicted * 0.9)]))
    assert search_step(points, records + [below], min_error_pct=4.0)['band_pct'] == 4.0


def test_a_declared_variants_trial_of_the_same_config_seeds_the_search_at_no_load():
    points = search_points(NGRAM, GRID)
    truth = Truth(FAMILIES, seed=3)
    # An earlier compare run tried {ngram, k 3, max 4} under the name "ngram".
    declared = {'baseline': {}, 'ngram': {'speculative_config': dict(points[1]['speculative_config'])}}
    seed_record = truth.trial(points[1], name='ngram')

    answer = search_step(points, [seed_record], declared=declared)

    assert answer['loads'] == 0
    assert answer['next'] == 'ngram-k3-max1'
    assert answer['predictions']['ngram-k2-max4']['predicted_throughput'] is not None
    assert answer['best'] == 'ngram' and answer['best_point'] == 'ngram-k3-max4'
    assert answer['summary'].splitlines()[1].endswith('1 measured by earlier trials of the same config')

    loaded, final = run_search(points, truth, records=[seed_record], declared=declared)
    assert 'ngram-k3-max4' not in loaded
    assert final['loads'] == len(loaded) <= 2
    assert final['best'] == 'ngram-k2-max4'


def test_max_loads_stops_the_search_and_names_what_was_left():
    points = search_points(NGRAM, GRID)

    loaded, answer = run_search(points, Truth(FAMILIES, seed=1), max_loads=2)

    assert loaded == ['ngram-k3-max1', 'ngram-k3-max4']
    assert answer['done'] and answer['next'] is None and answer['loads'] == 2
    assert answer['reason'].startswith('max_loads reached (2 of 2): not loaded although it could win: ngram-k2-max4')
    assert answer['best'] == 'ngram-k3-max4'


def test_a_failed_point_is_not_loaded_again_and_an_in_progress_one_is():
    points = search_points(NGRAM, GRID)
    truth = Truth(FAMILIES, seed=2, failing={'ngram-k3-max1'})
    interrupted = {'variant': 'ngram-k3-max4', 'baseline': 'baseline', 'outcome': 'in_progress', 'reason': 'switching',
                   'decision': None, 'recorded_at': '2026-12-01T09:00:00Z'}

    first = search_step(points, [interrupted])
    assert first['next'] == 'ngram-k3-max1' and first['loads'] == 1

    loaded, answer = run_search(points, truth, records=[interrupted])
    assert loaded.count('ngram-k3-max1') == 1
    assert 'ngram-k3-max4' in loaded
    assert answer['predictions']['ngram-k3-max1']['basis'].startswith('not loaded again: ngram-k3-max1 failed')
    # The failed family has no rates: its smaller k are loaded, as nothing predicts them, and can still win.
    assert 'ngram-k2-max1' in loaded
    assert answer['best'] != 'ngram-k3-max1'
    assert 'not loaded again: ngram-k3-max1' in answer['reason']


def test_nothing_kept_leaves_the_baseline_best():
    points = search_points(NGRAM, GRID)
    # A slow draft: every point is slower than the baseline.
    truth = Truth({'ngram-max1': [0.1, 0.05, 0.01], 'ngram-max4': [0.15, 0.05, 0.02]}, fixed_ms=6.0, seed=4)

    loaded, answer = run_search(points, truth)

    assert answer['best'] == 'baseline' and answer['best_record'] is None
    assert answer['summary'].splitlines()[-1] == 'best: baseline (no point was kept)'
    assert len(loaded) < len(points)


def test_records_of_other_workloads_count_only_the_workloads_all_share():
    points = search_points(EAGLE, {'num_speculative_tokens': [2, 3]})
    wide = record('eagle3-k3', 500.0, 360.0, 12.0, 20.0, [0.8, 0.6, 0.4], stamp='2026-12-01T10:00:00Z',
                  workloads=['chat', 'code'])
    wide['decision']['levels'][1]['variant_output_throughput'] = 700.0
    narrow = record('eagle3-k2', 520.0, 360.0, 11.5, 20.0, [0.8, 0.6], stamp='2026-12-01T11:00:00Z',
                    workloads=['chat'])

    answer = search_step(points, [wide, narrow])

    assert answer['predictions']['eagle3-k3']['measured_throughput'] == pytest.approx(500.0)
    assert 'only the ones all of them share count: chat@8' in answer['notes'][0]
    assert answer['best'] == 'eagle3-k2'


def test_a_twins_trial_at_another_concurrency_is_not_counted_once_the_search_measured_its_own():
    points = search_points(NGRAM, {'num_speculative_tokens': [5, 6], 'prompt_lookup_max': [4]})
    declared = {'ngram': {'speculative_config': dict(points[1]['speculative_config'])}}
    # deploy-ngram measured the twin at concurrency 8; the search's own trial streams one request at a time.
    twin = record('ngram', 1000.0, 970.0, 3.6, 3.6, [0.7, 0.6, 0.5, 0.4, 0.3], stamp='2026-12-01T10:00:00Z')
    alone = record('ngram-k6-max4', 310.0, 280.0, 2.9, 3.3, [0.7, 0.6, 0.5, 0.4, 0.3, 0.2],
                   stamp='2026-12-01T11:00:00Z')
    alone['decision']['levels'][0]['max_concurrency'] = 1

    before = search_step(points, [twin], declared=declared)
    after = search_step(points, [twin, alone], declared=declared)

    assert before['predictions']['ngram-k5-max4']['measured_throughput'] == pytest.approx(1000.0)
    assert before['next'] == 'ngram-k6-max4'
    assert 'measured_throughput' not in after['predictions']['ngram-k5-max4']
    assert after['notes'] == ['ngram is not counted: it measured default@8, which the later trials did not']
    # k 5 is predicted from k 6's own rates and the baseline's TPOT at concurrency 1, not from the twin's 1000 tok/s.
    assert after['next'] == 'ngram-k5-max4'
    assert after['predictions']['ngram-k5-max4']['predicted_throughput'] < 400.0
    assert 'anchored at the baseline (k 0, 3.30 ms)' in after['predictions']['ngram-k5-max4']['basis']
    assert after['predictions']['ngram-k6-max4']['measured_throughput'] == pytest.approx(310.0)


@pytest.mark.parametrize('seed', range(6))
def test_an_eagle3_grid_of_five_k_loads_the_largest_first_and_prunes_the_rest(seed):
    points = search_points(EAGLE, {'num_speculative_tokens': [1, 2, 3, 4, 5]})
    # An EAGLE-3 head: acceptance length 3.1 at k 3 (as published for Kimi-K2.5 drafts), draft passes that make
    # each extra token cost 4 ms: k 3 is the fastest, 3% ahead of k 4.
    rates = {'eagle3': [0.82, 0.66, 0.62, 0.25, 0.15]}

    loaded, answer = run_search(points, Truth(rates, fixed_ms=2.0, seed=seed))
    every, reference = run_search(points, Truth(rates, fixed_ms=2.0, seed=seed), exhaustive=True)

    assert loaded[0] == every[0] == 'eagle3-k5'
    assert len(loaded) < len(every) == 5
    assert answer['best'] == reference['best'] == Truth(rates).best(points) == 'eagle3-k3'
    assert answer['summary'].splitlines()[0] == "loads paid for: %d of the grid's 5 points" % len(loaded)


def test_bad_arguments_are_refused_with_the_rule():
    points = search_points(NGRAM, GRID)

    with pytest.raises(SearchError, match='max_loads must be a whole number >= 1'):
        search_step(points, [], max_loads=0)
    with pytest.raises(SearchError, match='min_error_pct must be a number >= 0'):
        search_step(points, [], min_error_pct=-1)
    with pytest.raises(SearchError, match='records must be a list of trial records'):
        search_step(points, ['x'])
    with pytest.raises(SearchError, match='baseline must name the baseline variant'):
        search_step(points, [], baseline='')
    with pytest.raises(SearchError, match='declared must map variant names to their specs'):
        search_step(points, [], declared=['ngram'])
    with pytest.raises(SearchError, match='known must be the declared variants'):
        search_points(NGRAM, GRID, known=3)


def test_a_record_against_another_baseline_is_not_counted():
    points = search_points(NGRAM, GRID)
    other = Truth(FAMILIES).trial(points[0])
    other['baseline'] = 'old-baseline'

    answer = search_step(points, [other])

    assert answer['next'] == 'ngram-k3-max1'
    assert 'measured against old-baseline, not baseline' in answer['notes'][0]
