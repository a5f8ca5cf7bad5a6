# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The dark window's plan (plugins/plugin_utils/_dark_window.py), on canned records."""

from __future__ import annotations

import pytest

from ansible_collections.llmops.vllm.plugins.plugin_utils._dark_window import (
    ASSUMED_STOP_S,
    DarkWindowError,
    benchmark_timing,
    budget_refusal,
    dark_seconds,
    plan,
    recorded_starts,
)

WORKLOADS = [{'name': 'chat', 'options': {'num_prompts': 40, 'concurrency': [1, 8], 'max_tokens': 1024,
                                          'warmup_requests': 2, 'repeats': 1}}]


def record(starts, timing=(), when='2026-12-01T09:00:00+00:00'):
    return {'recorded_at': when, 'starts': [{'variant': variant, 'seconds': seconds} for variant, seconds in starts],
            'benchmark_timing': list(timing)}


RECORDS = {
    'ngram': record([('baseline', 300.0), ('ngram', 1800.0), ('baseline', 320.0), ('ngram', 340.0)],
                    [{'workload': 'chat', 'concurrency': 1, 'requests': 40, 'seconds': 400.0, 'output_tokens': 30000},
                     {'workload': 'chat', 'concurrency': 8, 'requests': 40, 'seconds': 100.0, 'output_tokens': 30000}]),
    'eagle3': record([('baseline', 310.0), ('eagle3', 2000.0)]),
}


def test_a_variants_first_start_in_a_trial_is_cold_and_every_other_start_warm():
    warm, cold = recorded_starts(RECORDS, 'baseline')
    assert sorted(warm) == [300.0, 310.0, 320.0, 340.0]
    assert cold == {'ngram': [1800.0], 'eagle3': [2000.0]}


def test_a_trial_by_lifetimes_is_planned_from_the_nodes_own_figures():
    answer = plan(RECORDS, baseline='baseline', variant='ngram', workloads=WORKLOADS, max_lifetimes=10,
                  expected_load_s=1800, stop_s=5)
    # 42 requests at 10 s (concurrency 1) and at 2.5 s (concurrency 8) a request.
    assert answer['benchmark_s'] == 525.0
    assert answer['warm_restart_s'] == 315.0 and answer['cold_load_s'] == 1800.0
    assert answer['lifetimes'] == {'fewest': 2, 'most': 10}
    assert answer['pair_minutes'] == round(2 * (5 + 315 + 525) / 60, 1)
    # Two lifetimes a side, kept: four stops and benchmarks, a warm restart, the cold load and two more warm ones.
    assert answer['least_minutes'] == round((4 * (5 + 525) + 315 + 1800 + 2 * 315) / 60, 1)
    # Ten a side, then the rollback's stop and warm restart.
    assert answer['most_minutes'] == round((20 * (5 + 525) + 315 + 1800 + 18 * 315 + 5 + 315) / 60, 1)
    assert answer['assumed'] == []
    assert answer['lines'][0].startswith('the trial of ngram keeps the node out of service for ')


def test_a_variant_never_loaded_borrows_the_other_variants_cold_loads_as_an_assumption():
    answer = plan(RECORDS, baseline='baseline', variant='mtp', workloads=WORKLOADS, max_lifetimes=1)
    assert answer['cold_load_s'] == 1900.0
    assert any('other variants' in line for line in answer['assumed'])
    assert f'{ASSUMED_STOP_S:.0f} s a stop' in answer['assumed']
    # One lifetime a side: the baseline's warm restart and the variant's cold load, each side stopped once and
    # benchmarked once; a rollback adds a stop and a warm restart. 0, deprecated, plans the same.
    assert answer['lifetimes'] == {'fewest': 1, 'most': 1} and answer['pair_minutes'] is None
    assert answer['least_minutes'] == round((2 * (ASSUMED_STOP_S + 525) + 315 + 1900) / 60, 1)
    assert answer['most_minutes'] == round((2 * (ASSUMED_STOP_S + 525) + 315 + 1900 + ASSUMED_STOP_S + 315) / 60, 1)
    assert plan(RECORDS, baseline='baseline', variant='mtp', workloads=WORKLOADS, max_lifetimes=0) == answer


def test_a_fresh_node_assumes_its_load_time_and_stream_speed_and_says_so():
    answer = plan({}, baseline='baseline', variant='ngram', workloads=WORKLOADS, max_lifetimes=2,
                  expected_load_s=1800, stream_tok_s=64)
    assert answer['warm_restart_s'] == 1800.0 and answer['cold_load_s'] == 1800.0
    # 42 requests of at most 1024 tokens at 64 tok/s: one at a time, then eight at a time.
    assert answer['benchmark_s'] == 42 * 16 + 6 * 16
    assert answer['measured'] == []
    assert any('vllm_expected_load_seconds' in line for line in answer['assumed'])
    assert any('64 tok/s a stream' in line for line in answer['assumed'])


def test_without_a_speed_the_plan_says_it_cannot_tell():
    answer = plan({}, baseline='baseline', variant='ngram', workloads=WORKLOADS, max_lifetimes=2, expected_load_s=60)
    assert answer['least_minutes'] is None and answer['most_minutes'] is None
    assert 'unknown time' in answer['lines'][0]
    assert any('no speed on record' in line for line in answer['assumed'])


def test_another_workload_at_the_same_level_stands_in_for_one_never_measured():
    tools = [{'name': 'tools', 'options': {'num_prompts': 10, 'concurrency': [8], 'warmup_requests': 0}}]
    answer = plan(RECORDS, baseline='baseline', variant='ngram', workloads=tools, max_lifetimes=2)
    assert answer['benchmark_s'] == 25.0
    assert any('as measured for chat (assumed alike)' in line for line in answer['assumed'])


def test_the_latest_timing_of_a_level_wins():
    older = record([], [{'workload': 'chat', 'concurrency': 8, 'requests': 10, 'seconds': 100.0}], '2026-11-01')
    newer = record([], [{'workload': 'chat', 'concurrency': 8, 'requests': 10, 'seconds': 10.0}], '2026-12-01')
    one_level = [{'name': 'chat', 'options': {'num_prompts': 10, 'concurrency': [8], 'warmup_requests': 0}}]
    answer = plan({'a': older, 'b': newer}, baseline='baseline', variant='a', workloads=one_level, max_lifetimes=2,
                  expected_load_s=60)
    assert answer['benchmark_s'] == 10.0


def test_a_poisson_rate_bounds_a_level_from_below():
    rated = [{'name': 'chat', 'options': {'num_prompts': 40, 'concurrency': [8], 'warmup_requests': 0,
                                          'request_rate': 0.1}}]
    answer = plan(RECORDS, baseline='baseline', variant='ngram', workloads=rated, max_lifetimes=2)
    assert answer['benchmark_s'] == 400.0


def test_bad_records_are_refused():
    with pytest.raises(DarkWindowError, match='records must be a mapping'):
        plan([], baseline='baseline', variant='ngram', workloads=WORKLOADS)


def test_benchmark_timing_reads_a_looped_benchmark():
    looped = {'results': [
        {'labels': {'workload': 'chat'}, 'results': [
            {'max_concurrency': 1, 'completed': 40, 'duration': 400.04, 'total_output_tokens': 30000},
            {'max_concurrency': 8, 'completed': 0, 'duration': 0.0}]},
        {'labels': {'workload': 'tools'}, 'results': [
            {'max_concurrency': 8, 'completed': 12, 'duration': 30.0, 'total_output_tokens': 900}]}]}
    assert benchmark_timing(looped) == [
        {'workload': 'chat', 'concurrency': 1, 'requests': 40, 'seconds': 400.04, 'output_tokens': 30000},
        {'workload': 'tools', 'concurrency': 8, 'requests': 12, 'seconds': 30.0, 'output_tokens': 900}]
    with pytest.raises(DarkWindowError):
        benchmark_timing('not a benchmark')


def test_a_plan_within_the_budget_or_without_one_is_not_refused():
    answer = plan(RECORDS, baseline='baseline', variant='ngram', workloads=WORKLOADS, max_lifetimes=10, stop_s=5)
    assert budget_refusal(answer, None, 'ngram') is None
    assert budget_refusal(answer, answer['most_minutes'], 'ngram') is None


def test_a_plan_past_the_budget_is_refused_with_the_most_lifetimes_and_the_benchmark_that_would_fit():
    answer = plan(RECORDS, baseline='baseline', variant='ngram', workloads=WORKLOADS, max_lifetimes=10, stop_s=5)
    figures = dict(stop_s=5.0, warm_s=315.0, cold_s=1800.0, benchmark_s=525.0)
    assert round(dark_seconds(10, True, **figures) / 60, 1) == answer['most_minutes']
    # L lifetimes a side, rolled back, take 1690 L + 1805 s here: seven 227.3 min, eight 255.4 min.
    refusal = budget_refusal(answer, 240, 'ngram')
    assert dark_seconds(7, True, **figures) <= 240 * 60 < dark_seconds(8, True, **figures)
    assert 'vllm_switch_max_lifetimes=7 ' in refusal and 'vllm_switch_max_dark_minutes=240' in refusal
    # At ten lifetimes a side the starts and stops alone take (315 + 1800 + 18 * 315 + 20 * 5 + 5 + 315) s, which
    # leaves (240 * 60 - 8205) / 20 s = 5.2 min for each lifetime's benchmark.
    fixed = dark_seconds(10, True, stop_s=5.0, warm_s=315.0, cold_s=1800.0, benchmark_s=0.0)
    assert fixed == 8205.0
    assert 'benchmarks of at most 5.2 min a lifetime (planned 8.8 min)' in refusal


def test_a_budget_no_trial_fits_says_so():
    answer = plan(RECORDS, baseline='baseline', variant='ngram', workloads=WORKLOADS, max_lifetimes=2, stop_s=5)
    refusal = budget_refusal(answer, 30, 'ngram')
    assert 'raise the budget' in refusal and 'vllm_switch_max_lifetimes' not in refusal


def test_a_plan_that_lacks_a_figure_cannot_be_held_to_a_budget():
    answer = plan({}, baseline='baseline', variant='ngram', workloads=WORKLOADS, max_lifetimes=2)
    assert answer['most_minutes'] is None
    refusal = budget_refusal(answer, 240, 'ngram')
    assert refusal.startswith('the trial of ngram cannot be held to vllm_switch_max_dark_minutes=240')
    assert 'starts: not known' in refusal


def test_a_time_boxed_workload_costs_its_windows_whatever_the_answers_lengths():
    windowed = [{'name': 'chat', 'options': {'duration_s': 600.0, 'warmup_s': 60.0, 'concurrency': [1, 8],
                                             'max_tokens': 16384, 'warmup_requests': 0, 'repeats': 1}}]
    answer = plan({}, baseline='baseline', variant='ngram', workloads=windowed, max_lifetimes=2, expected_load_s=1800,
                  stream_tok_s=74)
    # Two levels of a 60-s warm-up and a 600-s window, known without any speed.
    assert answer['benchmark_s'] == 1320.0
    assert any(line.endswith('(time-boxed)') for line in answer['measured'])
    # A warm-up request before the windows is timed as the node answered before, else bounded by max_tokens.
    with_warmup = [dict(windowed[0], options=dict(windowed[0]['options'], warmup_requests=1))]
    bounded = plan({}, baseline='baseline', variant='ngram', workloads=with_warmup, max_lifetimes=2,
                   expected_load_s=1800, stream_tok_s=74)
    assert bounded['benchmark_s'] == round(1320.0 + 16384 / 74 + 16384 / 74, 1)


def test_an_expected_warm_restart_stands_in_until_the_node_has_timed_one():
    answer = plan({}, baseline='baseline', variant='ngram', workloads=WORKLOADS, max_lifetimes=2, expected_load_s=1800,
                  stream_tok_s=74, expected_warm_restart_s=300)
    assert (answer['warm_restart_s'], answer['cold_load_s']) == (300.0, 1800.0)
    assert 'warm restart 300 s (vllm_switch_expected_warm_restart_s)' in answer['assumed']
    # A restart the node timed wins over the assumption.
    timed = plan(RECORDS, baseline='baseline', variant='ngram', workloads=WORKLOADS, max_lifetimes=2,
                 expected_warm_restart_s=60)
    assert timed['warm_restart_s'] == 315.0
