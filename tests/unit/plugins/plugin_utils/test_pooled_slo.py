# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""SLOs judged once on each side's requests pooled over its lifetimes (plugins/plugin_utils/_pooled_slo.py)."""

from __future__ import annotations

from ansible_collections.llmops.vllm.plugins.plugin_utils._pooled_slo import (
    MIN_REQUESTS_FOR_P99,
    judge_pooled_slo,
    pooled_figures,
)


def level(ttft_ms, concurrency=1, **reported):
    """One level of an openai_benchmark result with every request's TTFT, and its own p99 as the module reports it."""
    ordered = sorted(ttft_ms)
    rank = (len(ordered) - 1) * 0.99
    low = int(rank)
    p99 = ordered[low] + (ordered[min(low + 1, len(ordered) - 1)] - ordered[low]) * (rank - low)
    return dict({'max_concurrency': concurrency, 'p99_ttft_ms': p99,
                 'latency_samples_ms': {'ttft': list(ttft_ms), 'tpot': [10.0] * len(ttft_ms),
                                        'e2el': [2000.0] * len(ttft_ms)}}, **reported)


def lifetime(side, *levels, workload='chat'):
    return {'side': side, 'benchmark': [{'labels': {'workload': workload}, 'results': list(levels)}]}


def test_one_slow_request_breaks_its_lifetimes_p99_but_not_the_pooled_one():
    slow = level([300.0] * 47 + [5000.0])
    # That lifetime's own p99 over 48 requests sits between its two slowest: far above the limit.
    assert slow['p99_ttft_ms'] > 1000
    lifetimes = [lifetime('baseline', level([300.0] * 48)), lifetime('variant', slow),
                 lifetime('baseline', level([300.0] * 48)), lifetime('variant', level([300.0] * 48)),
                 lifetime('baseline', level([300.0] * 48)), lifetime('variant', level([300.0] * 48))]

    judged = judge_pooled_slo(lifetimes, {'p99_ttft_ms': 1000})

    assert not judged['breached']
    (only,) = judged['levels']
    assert only['requests'] == {'baseline': 144, 'variant': 144} and only['judged_as'] == {}


def test_a_slow_tail_that_holds_over_the_pooled_requests_breaks_the_slo():
    slow = [300.0] * 44 + [5000.0] * 4
    lifetimes = [lifetime('baseline', level([300.0] * 48)), lifetime('variant', level(slow))] * 3

    judged = judge_pooled_slo(lifetimes, {'p99_ttft_ms': 1000})

    assert judged['breached']
    assert judged['levels'][0]['breaches'] == ['p99 TTFT 5000.0 ms > 1000 ms']
    assert judged['reason'] == ('breaks its SLO at concurrency 1: p99 TTFT 5000.0 ms > 1000 ms, over 144 requests of '
                                '3 lifetime(s) pooled')


def test_below_the_stated_count_a_p99_limit_is_judged_on_the_p90_and_says_so():
    figures, how, requests = pooled_figures([level([100.0 + index for index in range(60)])])

    assert requests == 60 < MIN_REQUESTS_FOR_P99
    # A judgement is said only of the metrics the SLO names: ITL, never sampled per request, is not one here.
    judged = judge_pooled_slo([lifetime('baseline', level([100.0] * 60)), lifetime('variant', level([100.0] * 60))],
                              {'p99_ttft_ms': 1000})
    assert judged['levels'][0]['judged_as'] == {
        'p99_ttft_ms': 'judged on the p90 of 60 pooled requests (a p99 needs at least 100)'}
    # The p90 of 100..159 ms (linear between ranks): 153.1 ms, not the p99 of 158.41 ms.
    assert round(figures['p99_ttft_ms'], 2) == 153.1
    assert how['p99_ttft_ms'] == 'judged on the p90 of 60 pooled requests (a p99 needs at least 100)'
    assert 'median_ttft_ms' not in how


def test_a_regression_is_judged_on_both_sides_pooled_requests():
    lifetimes = [lifetime('baseline', level([200.0] * 60)), lifetime('variant', level([260.0] * 60))] * 2

    judged = judge_pooled_slo(lifetimes, {'max_regression_pct': {'p99_ttft_ms': 25}})

    assert judged['breached']
    assert judged['levels'][0]['breaches'][0].startswith('p99 TTFT +30.0% vs the baseline (260.0 ms vs 200.0 ms)')


def test_results_without_samples_are_judged_on_the_median_of_the_lifetimes_figures():
    bare = [{'max_concurrency': 1, 'p99_ttft_ms': value} for value in (900.0, 1200.0, 1100.0)]
    figures, how, requests = pooled_figures(bare)

    assert requests is None and figures['p99_ttft_ms'] == 1100.0
    assert how['p99_ttft_ms'] == "the median of 3 lifetimes' own figures (no per-request samples)"


def test_a_workloads_own_slo_applies_to_its_levels_and_none_judges_nothing():
    lifetimes = [lifetime('baseline', level([300.0] * 48), workload='tools'),
                 lifetime('variant', level([3000.0] * 48), workload='tools')]

    assert judge_pooled_slo(lifetimes) == {'breached': False, 'levels': [], 'reason': None}
    judged = judge_pooled_slo(lifetimes, None, {'tools': {'p90_ttft_ms': 2000}})
    assert judged['breached'] and judged['levels'][0]['workload'] == 'tools'
