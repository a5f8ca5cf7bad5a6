# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import statistics

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils._benchmark_statistics import t_critical_95, welch_half_width
from ansible_collections.llmops.vllm.plugins.plugin_utils._decision import (
    DEFAULT_MARGIN_PCT,
    DecisionError,
    decide,
    decide_workloads,
    baseline_lifetimes,
    history_from_node,
    judge_level,
    kv_cache_room,
    lifetime_spread,
    merged_slo,
)


def level(runs, concurrency=4, failed=0, **extra):
    """One openai_benchmark level with these per-run output tokens/s."""
    result = {'max_concurrency': concurrency, 'output_throughput_repeats': list(runs),
              'output_throughput': statistics.fmean(runs), 'failed': failed}
    result.update(extra)
    return result


def around(centre, spread, count=5):
    """count runs centred on centre, spread evenly by +/- spread."""
    if count == 1:
        return [centre]
    step = 2.0 * spread / (count - 1)
    return [centre - spread + step * index for index in range(count)]


def result(*levels):
    return {'results': list(levels)}


def test_probe_a_a_variant_two_percent_slower_with_tight_runs_is_kept_only_within_the_margin():
    # Issue probe (a): -2% +/- 0.5 against a baseline +/- 0.5 was kept as "not slower" by the old rule.
    variant = result(level(around(98.0, 0.5)))
    baseline = result(level(around(100.0, 0.5)))

    within_margin = decide(variant, baseline, margin_pct=3.0)
    tight_margin = decide(variant, baseline, margin_pct=1.0)

    assert (within_margin['decision'], within_margin['outcome']) == ('keep', 'not_slower')
    assert within_margin['levels'][0]['lower_pct'] >= -3.0
    assert (tight_margin['decision'], tight_margin['outcome']) == ('roll_back', 'slower')
    assert tight_margin['reason'].startswith('slower at concurrency 4: -2.0% (95% interval')


def test_probe_b_a_level_that_may_be_slower_is_not_outvoted_by_a_faster_one():
    # Issue probe (b): +20% at concurrency 1 and -8% +/- 10 at 16 gave an overall "faster" and a keep.
    variant = result(level(around(120.0, 1.0), concurrency=1), level(around(920.0, 90.0), concurrency=16))
    baseline = result(level(around(100.0, 1.0), concurrency=1), level(around(1000.0, 10.0), concurrency=16))

    answer = decide(variant, baseline, margin_pct=3.0)

    assert [item['status'] for item in answer['levels']] == ['faster', 'inconclusive']
    assert (answer['decision'], answer['outcome']) == ('roll_back', 'inconclusive')
    assert answer['reason'].startswith('inconclusive at concurrency 16: -8.0% (95% interval')
    assert 'more repeats or more prompts per run narrow it' in answer['to_decide']


def test_keep_when_faster_needs_a_level_shown_faster():
    variant = result(level(around(101.0, 3.0)))
    baseline = result(level(around(100.0, 3.0)))
    faster = result(level(around(110.0, 3.0)))

    not_faster = decide(variant, baseline, keep_when='faster')
    shown_faster = decide(faster, baseline, keep_when='faster')

    assert (not_faster['decision'], not_faster['outcome']) == ('roll_back', 'not_slower')
    assert not_faster['reason'].startswith('not shown faster: +1.0% (95% interval')
    assert (shown_faster['decision'], shown_faster['outcome']) == ('keep', 'faster')
    assert shown_faster['rule'].startswith('keep_when=faster')


@pytest.mark.parametrize('runs, reason', [
    (1, 'inconclusive: 1 runs of the variant and 1 of the baseline at concurrency 4; at least 3 each are needed'),
    (2, 'inconclusive: 2 runs of the variant and 2 of the baseline at concurrency 4; at least 3 each are needed'),
])
def test_fewer_than_three_runs_a_side_is_inconclusive_whatever_the_figures(runs, reason):
    answer = decide(result(level(around(150.0, 0.1, runs))), result(level(around(100.0, 0.1, runs))))

    assert (answer['decision'], answer['outcome']) == ('roll_back', 'inconclusive')
    assert answer['reason'] == reason + '; to decide it: vllm_switch_benchmark.repeats of at least 3'


@pytest.mark.parametrize('side', ['variant', 'baseline'])
def test_failed_requests_on_either_side_are_inconclusive(side):
    sides = {'variant': result(level(around(110.0, 0.5))), 'baseline': result(level(around(100.0, 0.5)))}
    sides[side]['results'][0]['failed'] = 2

    answer = decide(sides['variant'], sides['baseline'])

    assert (answer['decision'], answer['outcome']) == ('roll_back', 'inconclusive')
    assert answer['failed_requests'][side] == 2
    assert 'failed requests' in answer['reason']


def test_the_interval_is_never_narrower_than_the_baselines_lifetimes_show():
    # Runs inside one lifetime agree within 0.5%, but the baseline's lifetimes spread by ~5%.
    variant = result(level(around(97.0, 0.5)))
    baseline = result(level(around(100.0, 0.5)))
    history = [{'max_concurrency': 4, 'output_throughput': value, 'lifetime': 'L%d' % index}
               for index, value in enumerate([95.0, 105.0, 100.0, 92.0, 108.0])]

    without = decide(variant, baseline)
    with_history = decide(variant, baseline, history=history)

    level_figures = with_history['levels'][0]
    lifetimes = [95.0, 105.0, 100.0, 92.0, 108.0, 100.0]
    expected = t_critical_95(5) * 2 ** 0.5 * statistics.stdev(lifetimes) * 100.0 / statistics.fmean(lifetimes)
    assert level_figures['lifetimes'] == 6
    assert level_figures['between_half_width_pct'] == pytest.approx(expected)
    assert level_figures['half_width_pct'] == pytest.approx(expected)
    assert level_figures['half_width_pct'] > level_figures['within_half_width_pct']
    assert (without['decision'], with_history['decision']) == ('keep', 'roll_back')
    assert with_history['outcome'] == 'inconclusive'
    assert 'between-lifetime noise decides the width' in with_history['to_decide']
    assert without['history']['note'].startswith('no earlier baseline lifetimes')
    assert without['reason'].endswith('(no earlier baseline lifetimes of this host, model and unit: the interval'
                                      ' covers only the noise within one lifetime)')
    assert '(no earlier baseline' not in with_history['reason']
    assert with_history['history']['earlier_lifetimes'] == 5


def test_the_trials_own_lifetime_is_counted_once():
    history = [{'max_concurrency': 4, 'output_throughput': 100.0, 'lifetime': 'now'},
               {'max_concurrency': 4, 'output_throughput': 101.0, 'lifetime': 'before'}]

    answer = decide(result(level(around(100.0, 0.5))), result(level(around(100.0, 0.5))), history=history,
                    baseline_lifetime='now')

    assert answer['levels'][0]['lifetimes'] == 2


@pytest.mark.parametrize('delta, half_width, margin, status', [
    (5.0, 4.0, 8.0, 'faster'),
    (5.0, 5.0, 8.0, 'not_slower'),      # lower end exactly 0 is not shown faster
    (-3.0, 5.0, 8.0, 'not_slower'),     # lower end -8: exactly the margin still counts
    (-3.0, 5.1, 8.0, 'inconclusive'),
    (-20.0, 5.0, 8.0, 'slower'),
    (-13.0, 5.0, 8.0, 'inconclusive'),  # upper end exactly -8 is not beyond the margin
])
def test_judge_level_edges(delta, half_width, margin, status):
    assert judge_level(delta, half_width, margin) == status


def test_welch_half_width_and_lifetime_spread_by_hand():
    # Two sides of 3 runs with variance 1 each: se = sqrt(2/3), Welch df = 4.
    assert welch_half_width([9.0, 10.0, 11.0], [19.0, 20.0, 21.0]) == pytest.approx(2.7764 * (2 / 3) ** 0.5, rel=3e-5)
    assert welch_half_width([10.0], [20.0, 21.0]) is None
    assert welch_half_width([10.0, 10.0], [20.0, 20.0]) == 0.0
    assert lifetime_spread([100.0]) == {'lifetimes': 1, 'cv_pct': None, 'half_width_pct': None}
    spread = lifetime_spread([90.0, 110.0])
    assert spread['cv_pct'] == pytest.approx(statistics.stdev([90.0, 110.0]))
    assert spread['half_width_pct'] == pytest.approx(12.7062 * 2 ** 0.5 * spread['cv_pct'])


@pytest.mark.parametrize('kwargs, message', [
    ({'keep_when': 'always'}, 'keep_when must be one of not_slower, faster'),
    ({'margin_pct': -1}, 'margin_pct must not be negative'),
    ({'min_runs': 0}, 'min_runs must be a positive integer'),
])
def test_bad_settings_are_refused(kwargs, message):
    with pytest.raises(DecisionError, match=message):
        decide(result(level([1.0, 1.0, 1.0])), result(level([1.0, 1.0, 1.0])), **kwargs)


def test_levels_must_overlap():
    with pytest.raises(DecisionError, match='share no concurrency level'):
        decide(result(level([1.0, 1.0, 1.0], concurrency=1)), result(level([1.0, 1.0, 1.0], concurrency=2)))


def test_the_default_margin_is_the_collections_one():
    answer = decide(result(level(around(100.0, 0.5))), result(level(around(100.0, 0.5))))

    assert answer['margin_pct'] == DEFAULT_MARGIN_PCT == 8.0
    assert answer['decision'] == 'keep'


def test_a_faster_variant_that_breaks_a_latency_slo_is_rolled_back_for_it():
    # Issue 11: n-gram's throughput may win while its TTFT loses.
    variant = result(level(around(120.0, 0.5), p99_ttft_ms=812.0, p99_tpot_ms=20.0))
    baseline = result(level(around(100.0, 0.5), p99_ttft_ms=400.0, p99_tpot_ms=22.0))

    kept = decide(variant, baseline, slo={'p99_tpot_ms': 50})
    absolute = decide(variant, baseline, slo={'p99_ttft_ms': 500})
    regression = decide(variant, baseline, slo={'max_regression_pct': {'p99_ttft_ms': 50}})

    assert (kept['decision'], kept['outcome']) == ('keep', 'faster')
    assert (absolute['decision'], absolute['outcome']) == ('roll_back', 'slo_breached')
    assert absolute['reason'].startswith('breaks its SLO at concurrency 4: p99 TTFT 812.0 ms > 500 ms (output tok/s +20.0%')
    assert regression['levels'][0]['slo_breaches'] == ['p99 TTFT +103.0% vs the baseline (812.0 ms vs 400.0 ms) > +50%']
    assert regression['slo'] == {'max_regression_pct': {'p99_ttft_ms': 50.0}}


def test_slo_limits_per_concurrency_level_replace_the_general_ones():
    slo = {'p99_ttft_ms': 500, 'by_concurrency': {16: {'p99_ttft_ms': 2000}}}
    variant = result(level(around(100.0, 0.5), concurrency=1, p99_ttft_ms=450.0),
                     level(around(400.0, 2.0), concurrency=16, p99_ttft_ms=1500.0))
    baseline = result(level(around(100.0, 0.5), concurrency=1, p99_ttft_ms=440.0),
                      level(around(400.0, 2.0), concurrency=16, p99_ttft_ms=1400.0))

    answer = decide(variant, baseline, slo=slo)

    assert [item['slo_breaches'] for item in answer['levels']] == [[], []]
    assert answer['decision'] == 'keep'
    tighter = decide(variant, baseline, slo={'p99_ttft_ms': 500, 'by_concurrency': {'16': {'p99_ttft_ms': 1000}}})
    assert tighter['reason'].startswith('breaks its SLO at concurrency 16: p99 TTFT 1500.0 ms > 1000 ms')


def test_failed_requests_and_too_few_runs_still_come_before_an_slo():
    variant = result(level(around(120.0, 0.5, 2), p99_ttft_ms=900.0))
    baseline = result(level(around(100.0, 0.5, 2), p99_ttft_ms=400.0))

    assert decide(variant, baseline, slo={'p99_ttft_ms': 500})['outcome'] == 'inconclusive'


@pytest.mark.parametrize('slo, message', [
    ('fast', 'vllm_switch_slo must be a mapping'),
    ({'p99_latency_ms': 5}, r'vllm_switch_slo.p99_latency_ms: unknown key'),
    ({'p99_ttft_ms': 0}, r'vllm_switch_slo.p99_ttft_ms must be a positive number'),
    ({'p99_ttft_ms': 'soon'}, r'vllm_switch_slo.p99_ttft_ms must be a finite number'),
    ({'max_regression_pct': 10}, r'vllm_switch_slo.max_regression_pct must map metric names'),
    ({'max_regression_pct': {'ttft': 10}}, r'vllm_switch_slo.max_regression_pct.ttft: unknown metric'),
    ({'by_concurrency': {'many': {}}}, r"vllm_switch_slo.by_concurrency: 'many' is not a concurrency level"),
    ({'by_concurrency': {4: {'by_concurrency': {}}}}, r'vllm_switch_slo.by_concurrency.4: by_concurrency does not nest'),
])
def test_a_bad_slo_is_refused_naming_the_key(slo, message):
    with pytest.raises(DecisionError, match=message):
        decide(result(level([1.0, 1.0, 1.0])), result(level([1.0, 1.0, 1.0])), slo=slo)


def workload(name, *levels):
    return {'labels': {'workload': name}, 'results': list(levels)}


def looped(*results):
    """What a looped openai_benchmark task registers: one module result per workload."""
    return {'changed': False, 'msg': 'All items completed', 'results': list(results)}


def test_every_workload_must_keep_the_variant_and_the_first_that_does_not_says_why():
    # Code editing copies the prompt (n-gram gains 20%); tool calls write fresh text (n-gram loses 30%).
    variant = looped(workload('code', level(around(120.0, 1.0))), workload('tools', level(around(70.0, 1.0))))
    baseline = looped(workload('code', level(around(100.0, 1.0))), workload('tools', level(around(100.0, 1.0))))

    answer = decide_workloads(variant, baseline)

    assert (answer['decision'], answer['outcome']) == ('roll_back', 'slower')
    assert answer['reason'].startswith('workload tools: slower at concurrency 4: -30.0%')
    assert [(item['name'], item['decision'], item['outcome']) for item in answer['workloads']] == [
        ('code', 'keep', 'faster'), ('tools', 'roll_back', 'slower')]
    statuses = [(item['workload'], item['status']) for item in answer['levels']]
    assert statuses == [('code', 'faster'), ('tools', 'slower')]
    assert answer['delta_pct'] == pytest.approx(-5.0)


def test_a_variant_kept_by_every_workload_is_faster_when_one_shows_it():
    variant = looped(workload('code', level(around(120.0, 1.0))), workload('chat', level(around(99.0, 1.0))))
    baseline = looped(workload('code', level(around(100.0, 1.0))), workload('chat', level(around(100.0, 1.0))))

    answer = decide_workloads(variant, baseline)

    assert (answer['decision'], answer['outcome']) == ('keep', 'faster')
    assert answer['reason'].startswith('every workload passes: code faster at concurrency 4: +20.0%')
    assert '; chat not slower at concurrency 4: -1.0%' in answer['reason']


def test_a_workload_slo_is_laid_over_the_trials_and_rolls_back_for_its_breach():
    variant = looped(workload('code', level(around(120.0, 1.0), p99_ttft_ms=900.0)),
                     workload('chat', level(around(120.0, 1.0), p99_ttft_ms=900.0)))
    baseline = looped(workload('code', level(around(100.0, 1.0), p99_ttft_ms=500.0)),
                      workload('chat', level(around(100.0, 1.0), p99_ttft_ms=500.0)))

    loose = decide_workloads(variant, baseline, slo={'p99_ttft_ms': 1000})
    tight = decide_workloads(variant, baseline, slo={'p99_ttft_ms': 1000}, workload_slo={'chat': {'p99_ttft_ms': 800}})

    assert loose['decision'] == 'keep'
    assert (tight['decision'], tight['outcome']) == ('roll_back', 'slo_breached')
    assert tight['reason'].startswith('workload chat: breaks its SLO at concurrency 4: p99 TTFT 900.0 ms > 800 ms')
    assert [item['slo'] for item in tight['workloads']] == [{'p99_ttft_ms': 1000.0}, {'p99_ttft_ms': 800.0}]
    assert tight['slo'] is None


def test_a_workload_that_shows_a_failure_gives_the_reason_before_one_that_could_not_tell():
    # Code editing is too noisy to tell; the chat workload breaks its SLO for certain.
    noisy_variant = [100.0, 160.0, 80.0, 140.0, 90.0]
    variant = looped(workload('code', level(noisy_variant)),
                     workload('chat', level(around(120.0, 1.0), p99_ttft_ms=900.0)))
    baseline = looped(workload('code', level(around(100.0, 1.0))),
                      workload('chat', level(around(100.0, 1.0), p99_ttft_ms=500.0)))

    answer = decide_workloads(variant, baseline, workload_slo={'chat': {'p99_ttft_ms': 800}})

    assert [(item['name'], item['outcome']) for item in answer['workloads']] == [
        ('code', 'inconclusive'), ('chat', 'slo_breached')]
    assert (answer['decision'], answer['outcome']) == ('roll_back', 'slo_breached')
    assert answer['reason'].startswith('workload chat: breaks its SLO at concurrency 4: p99 TTFT 900.0 ms > 800 ms')
    assert answer['reason'].endswith('(also rolled back by code)')


def test_merged_slo_replaces_keys_levels_and_metrics_one_by_one():
    general = {'p99_ttft_ms': 1000, 'max_regression_pct': {'p99_tpot_ms': 10, 'p99_ttft_ms': 20},
               'by_concurrency': {8: {'p99_ttft_ms': 3000, 'max_regression_pct': {'p99_tpot_ms': 15}}}}
    own = {'p99_tpot_ms': 50, 'max_regression_pct': {'p99_ttft_ms': 5},
           'by_concurrency': {8: {'max_regression_pct': {'p99_ttft_ms': 30}}, 1: {'p99_ttft_ms': 400}}}

    assert merged_slo(general, own, 'here') == {
        'p99_ttft_ms': 1000.0, 'p99_tpot_ms': 50.0, 'max_regression_pct': {'p99_tpot_ms': 10.0, 'p99_ttft_ms': 5.0},
        'by_concurrency': {8: {'p99_ttft_ms': 3000.0, 'max_regression_pct': {'p99_tpot_ms': 15.0, 'p99_ttft_ms': 30.0}},
                           1: {'p99_ttft_ms': 400.0}}}
    with pytest.raises(DecisionError, match=r'^the slo of chat\.p99_ttft_ms must be a positive number'):
        merged_slo({}, {'p99_ttft_ms': -1}, 'the slo of chat')


def test_a_single_unlabelled_result_is_the_default_workload_and_reads_as_before():
    variant = result(level(around(120.0, 1.0)))
    baseline = result(level(around(100.0, 1.0)))

    answer = decide_workloads(variant, baseline)

    assert answer == dict(decide(variant, baseline), workloads=[
        {'name': 'default', 'decision': 'keep', 'outcome': 'faster', 'reason': answer['reason'],
         'delta_pct': pytest.approx(20.0), 'slo': None}])
    assert answer['reason'].startswith('faster at concurrency 4')


def test_a_workload_missing_on_the_baseline_is_refused():
    with pytest.raises(DecisionError, match="workload 'tools' was measured on the variant but not on the baseline"):
        decide_workloads(looped(workload('tools', level([1.0, 2.0, 3.0]))),
                         looped(workload('code', level([1.0, 2.0, 3.0]))))


def test_history_counts_only_lifetimes_of_the_same_workload_and_requests():
    # Two earlier lifetimes 20% apart widen the interval past the margin, but only where they apply.
    history = [{'max_concurrency': 4, 'output_throughput': value, 'lifetime': lifetime, 'workload': 'code',
                'prompt_set_sha256': 'same'} for value, lifetime in ((90.0, 'L1'), (110.0, 'L2'))]
    variant = looped(workload('code', level(around(99.0, 0.5), prompt_set_sha256='same')))
    baseline = looped(workload('code', level(around(100.0, 0.5), prompt_set_sha256='same')))
    other_requests = looped(workload('code', level(around(100.0, 0.5), prompt_set_sha256='other')))
    other_workload = [dict(item, workload='tools') for item in history]

    assert decide_workloads(variant, baseline, history=history)['outcome'] == 'inconclusive'
    assert decide_workloads(variant, other_requests, history=history)['outcome'] == 'not_slower'
    assert decide_workloads(variant, baseline, history=other_workload)['outcome'] == 'not_slower'


def test_a_level_carries_the_tpots_and_the_acceptance_that_the_variant_search_models():
    rates = [0.81, 0.66, 0.58]
    variant = result(level(around(120.0, 0.5), median_tpot_ms=11.5, spec_decode_per_position_acceptance_rates=rates,
                           spec_decode_acceptance_length=3.05))
    baseline = result(level(around(100.0, 0.5), median_tpot_ms=14.0))

    figures = decide(variant, baseline)['levels'][0]
    unmeasured = decide(baseline, baseline)['levels'][0]

    assert (figures['variant_tpot_ms'], figures['baseline_tpot_ms']) == (11.5, 14.0)
    assert (figures['acceptance_rates'], figures['acceptance_length']) == (rates, 3.05)
    assert (unmeasured['acceptance_rates'], unmeasured['acceptance_length']) == (None, None)


def test_a_level_carries_each_side_s_share_of_answers_cut_at_max_tokens():
    variant = result(level(around(120.0, 0.5), max_tokens_share=0.25))
    baseline = result(level(around(100.0, 0.5), max_tokens_share=0.0))

    figures = decide(variant, baseline)['levels'][0]
    unreported = decide(result(level(around(120.0, 0.5))), baseline)['levels'][0]

    assert (figures['variant_max_tokens_share'], figures['baseline_max_tokens_share']) == (0.25, 0.0)
    assert unreported['variant_max_tokens_share'] is None


def stopped(runs, concurrency=4, **extra):
    """A level openai_benchmark stopped early after these runs."""
    return level(runs, concurrency=concurrency, stopped_early=True, stopped_early_reason='stopped after run 2 of 5',
                 **extra)


def test_a_level_stopped_early_is_judged_on_its_runs_and_rolls_back_as_slower():
    baseline = result(level(around(100.0, 2.0), concurrency=1), level(around(100.0, 2.0)),
                      level(around(100.0, 2.0), concurrency=16))
    variant = result(level(around(99.0, 2.0), concurrency=1), stopped([80.0, 82.0]))

    answer = decide(variant, baseline, margin_pct=5.0, min_runs=3)

    assert (answer['decision'], answer['outcome']) == ('roll_back', 'slower')
    assert answer['stopped_early'] is True
    assert [item['stopped_early'] for item in answer['levels']] == [False, True]
    judged = answer['levels'][1]
    # Two runs are fewer than min_runs, yet the level is judged: the stop's test is stricter.
    assert (judged['variant_runs'], judged['too_few_runs'], judged['status']) == (2, False, 'slower')
    assert answer['reason'].startswith('slower at concurrency 4: the benchmark stopped early, after 2 runs of the'
                                       ' variant against 5 of the baseline: output tok/s -19.0% (99% interval')
    assert 'look 1 of at most 4' in answer['reason']
    assert 'cannot be shown at most 5.0% slower' in answer['reason']


def test_a_stopped_level_never_keeps_even_when_the_decision_reads_it_otherwise():
    # Stopped under keep_when=faster (shown slower at all), decided under not_slower with a wide margin.
    baseline = result(level(around(100.0, 1.0)))
    variant = result(stopped([95.0, 95.5]))

    answer = decide(variant, baseline, keep_when='not_slower', margin_pct=20.0)

    assert (answer['decision'], answer['outcome']) == ('roll_back', 'inconclusive')
    assert answer['stopped_early'] is True
    assert 'the benchmark stopped early, but under keep_when=not_slower and a 20.0% margin' in answer['reason']
    assert 'vllm_switch_early_stop: false' in answer['to_decide']
    # The same runs under the benchmark's own rule: slower.
    assert decide(variant, baseline, keep_when='faster')['outcome'] == 'slower'


def test_a_level_stopped_early_within_how_baseline_lifetimes_differ_is_not_called_slower():
    # The benchmark stopped an A/A-like variant 12% down on its runs alone; the baseline's lifetimes differ by
    # about that much, so the verdict cannot call it slower: inconclusive, rolled back, never kept.
    baseline = result(level([100.0, 100.2, 99.8, 100.1, 99.9]))
    variant = result(stopped([88.0, 88.1, 87.9]))
    history = [{'max_concurrency': 4, 'lifetime': name, 'output_throughput': value}
               for name, value in (('a', 112.0), ('b', 95.0), ('c', 104.0), ('d', 90.0))]

    without = decide(variant, baseline, margin_pct=8.0)
    with_history = decide(variant, baseline, history=history, margin_pct=8.0, baseline_lifetime='now')

    assert without['outcome'] == 'slower'
    assert (with_history['decision'], with_history['outcome']) == ('roll_back', 'inconclusive')
    assert 'from how the baseline\'s lifetimes differ' in with_history['reason']
    assert with_history['stopped_early'] is True


def test_without_a_stop_the_decision_is_unchanged():
    baseline = result(level(around(100.0, 2.0)))
    short = result(level([80.0, 82.0]))

    answer = decide(short, baseline, margin_pct=5.0, min_runs=3)

    assert answer['stopped_early'] is False
    assert answer['levels'][0]['stopped_early'] is False
    assert (answer['decision'], answer['outcome']) == ('roll_back', 'inconclusive')
    assert answer['reason'].startswith('inconclusive: 2 runs of the variant and 5 of the baseline')


def test_a_stop_in_one_workload_is_said_for_the_trial():
    baseline = [{'labels': {'workload': 'chat'}, 'results': [level(around(100.0, 2.0))]},
                {'labels': {'workload': 'code'}, 'results': [level(around(100.0, 2.0))]}]
    variant = [{'labels': {'workload': 'chat'}, 'results': [level(around(101.0, 2.0))]},
               {'labels': {'workload': 'code'}, 'results': [stopped([70.0, 71.0])]}]

    answer = decide_workloads(variant, baseline, margin_pct=5.0)

    assert answer['stopped_early'] is True
    assert (answer['decision'], answer['outcome']) == ('roll_back', 'slower')
    assert answer['reason'].startswith('workload code: slower at concurrency 4: the benchmark stopped early')


def test_a_level_whose_server_served_foreign_requests_rolls_back_as_contaminated_naming_it_and_the_count():
    # Without the check this trial keeps the variant: the baseline's figures were lowered by foreign traffic.
    variant = result(level(around(130.0, 1.0), foreign_requests=0))
    baseline = result(level(around(100.0, 1.0), foreign_requests=37))

    answer = decide(variant, baseline)
    accepted = decide(variant, baseline, accept_foreign_traffic=True)

    assert (answer['decision'], answer['outcome']) == ('roll_back', 'inconclusive')
    assert answer['reason'].startswith("inconclusive: contaminated at concurrency 4: the baseline's server served 37 "
                                       'requests that the benchmark did not send')
    assert 'vllm_switch_accept_foreign_traffic' in answer['to_decide']
    assert answer['contaminated'] == [{'side': 'baseline', 'max_concurrency': 4, 'foreign_requests': 37}]
    assert answer['foreign_traffic_accepted'] is False
    assert (accepted['decision'], accepted['outcome']) == ('keep', 'faster')
    assert accepted['contaminated'] == answer['contaminated'] and accepted['foreign_traffic_accepted'] is True


def test_clean_levels_and_levels_without_the_servers_counters_are_not_contaminated():
    variant = result(level(around(130.0, 1.0), foreign_requests=None), level(around(130.0, 1.0), 8))
    baseline = result(level(around(100.0, 1.0), foreign_requests=0), level(around(100.0, 1.0), 8))

    answer = decide(variant, baseline)

    assert answer['decision'] == 'keep' and answer['contaminated'] == [] and answer['foreign_traffic_accepted'] is False


def test_every_workload_names_its_contaminated_levels():
    variant = [dict(result(level(around(130.0, 1.0), foreign_requests=2)), labels={'workload': 'chat'}),
               dict(result(level(around(130.0, 1.0))), labels={'workload': 'code'})]
    baseline = [dict(result(level(around(100.0, 1.0))), labels={'workload': 'chat'}),
                dict(result(level(around(100.0, 1.0))), labels={'workload': 'code'})]

    answer = decide_workloads(variant, baseline)

    assert (answer['decision'], answer['outcome']) == ('roll_back', 'inconclusive')
    assert answer['reason'].startswith("workload chat: inconclusive: contaminated at concurrency 4: the variant's server "
                                       'served 2 requests')
    assert answer['contaminated'] == [{'side': 'variant', 'max_concurrency': 4, 'foreign_requests': 2, 'workload': 'chat'}]


def measured(name, max_tokens, *levels):
    return dict(workload(name, *levels), options={'max_tokens': max_tokens})


def test_a_variant_whose_kv_cache_cannot_hold_its_workloads_at_their_concurrency_is_flagged():
    variant = looped(measured('code', 16384, level([1.0], concurrency=1, max_input_tokens=412),
                              level([1.0], concurrency=8, max_input_tokens=412)),
                     measured('tools', 2048, level([1.0], concurrency=8, max_input_tokens=900)))
    starts = [{'variant': 'baseline', 'kv_cache': {'tokens': 301056}},
              {'variant': 'eagle3', 'kv_cache': {'tokens': 50000}},
              {'variant': 'eagle3', 'kv_cache': {'tokens': 100752, 'max_model_len': 262144, 'max_concurrency': 0.38}}]

    room = kv_cache_room(variant, starts, 'eagle3', 'baseline')

    # The last start counts; 8 x (412 + 16384) = 134368 does not fit in 100752, 8 x (900 + 2048) = 23584 does.
    assert (room['variant_tokens'], room['baseline_tokens']) == (100752, 301056)
    assert [need['tokens'] for need in room['needs']] == [16796, 134368, 23584]
    assert room['short'] == ["workload code at concurrency 8 needs up to 8 x (412 + 16,384) = 134,368 tokens of "
                             "KV cache; eagle3's holds 100,752"]


def test_an_unknown_kv_cache_flags_nothing():
    variant = result(level([1.0], concurrency=64, max_input_tokens=2000))
    variant['options'] = {'max_tokens': 4096}

    room = kv_cache_room(variant, [{'variant': 'ngram', 'kv_cache': None}], 'ngram', 'baseline')

    assert room == {'variant_tokens': None, 'baseline_tokens': None,
                    'needs': [{'workload': 'default', 'max_concurrency': 64, 'prompt_tokens': 2000,
                               'max_tokens': 4096, 'tokens': 390144}],
                    'short': []}


def in_lifetime(lifetime, result, checksum='aaa', identity=None):
    """A module result of the baseline as the role measures it: labelled with its lifetime and unit."""
    labels = dict(result.get('labels') or {}, lifetime=lifetime, unit_checksum=checksum)
    if identity:
        labels['trial_identity'] = identity
    return dict(result, labels=labels)


def decided(lifetimes, baseline='baseline', outcome='rolled_back'):
    """A decided record of the node's history, holding what its decision returned."""
    return {'variant': 'ngram', 'baseline': baseline, 'outcome': outcome,
            'decision': {'decision': 'roll_back', 'baseline_lifetimes': lifetimes}}


def test_a_trial_keeps_its_clean_baseline_measurements_with_lifetime_unit_and_identity():
    baseline = looped(in_lifetime('L1', workload('code', level([99.0, 100.0, 101.0]),
                                                 level([50.0, 51.0, 52.0], concurrency=8, failed=1)), identity='id-1'),
                      in_lifetime('L1', workload('chat', level([80.0, 80.0, 80.0], foreign_requests=2))))
    assert baseline_lifetimes(baseline) == [
        {'workload': 'code', 'max_concurrency': 4, 'output_throughput': 100.0, 'lifetime': 'L1',
         'prompt_set_sha256': None, 'unit_checksum': 'aaa', 'identity': 'id-1'}]


def test_a_baseline_without_a_lifetime_label_teaches_nothing():
    assert baseline_lifetimes(workload('default', level([99.0, 100.0, 101.0]))) == []


def test_the_node_history_gives_the_lifetimes_of_the_same_baseline_unit_and_identity():
    def kept(lifetime, value, checksum='aaa', identity='id-1'):
        return {'workload': 'default', 'max_concurrency': 4, 'output_throughput': value, 'lifetime': lifetime,
                'prompt_set_sha256': None, 'unit_checksum': checksum, 'identity': identity}

    entries = [
        {'variant': 'ngram', 'baseline': 'baseline', 'outcome': 'in_progress', 'decision': None},
        decided([kept('L1', 100.0), kept('L2', 90.0, checksum='bbb')]),
        decided([kept('L1', 100.0)], outcome='rolled_back'),      # the same trial recorded again: counted once
        decided([kept('L3', 80.0, identity='id-2')]),              # same unit, another environment or release
        decided([kept('L4', 70.0, identity=None)]),                 # kept before identities existed
        decided([kept('L5', 60.0)], baseline='main'),              # another baseline variant
        'not a record',
    ]
    history = history_from_node(entries, baseline='baseline', unit_checksum='aaa', identity='id-1')
    assert [(item['lifetime'], item['output_throughput']) for item in history] == [('L1', 100.0), ('L4', 70.0)]
    assert history[0] == {'max_concurrency': 4, 'output_throughput': 100.0, 'lifetime': 'L1', 'workload': 'default',
                          'prompt_set_sha256': None}


def test_what_one_trial_keeps_is_what_the_next_trial_learns_from():
    # A -5% variant with runs 1 tok/s apart is kept on the within-lifetime interval alone; after two more
    # lifetimes of the baseline 10% apart, the same -5% is too uncertain to keep.
    history = []
    for lifetime, base in (('L1', 100.0), ('L2', 110.0), ('L3', 90.0)):
        baseline = in_lifetime(lifetime, workload('default', level(around(base, 1.0))))
        variant = workload('default', level(around(base * 0.95, 1.0)))
        learnt = history_from_node(history, baseline='baseline', unit_checksum='aaa')
        answer = decide_workloads(variant, baseline, history=learnt, baseline_lifetime=lifetime)
        history.append(decided(baseline_lifetimes(baseline)))
        if lifetime == 'L1':
            assert (answer['decision'], answer['history']['earlier_lifetimes']) == ('keep', 0)
    assert (answer['decision'], answer['outcome'], answer['history']['earlier_lifetimes']) == \
        ('roll_back', 'inconclusive', 2)
