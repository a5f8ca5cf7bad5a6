# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Latency SLOs judged once, at the decision, on the requests of all of a side's lifetimes pooled.

A p99 over one lifetime's 48 requests is in effect its slowest request, and a trial looks after every pair: judged at
every look, one slow request (network jitter on the controller's client included) ends the trial. So the SLO is
judged once, when the looks would keep the variant, and on each side's requests pooled over all its lifetimes in the
trial (openai_benchmark's ``latency_samples_ms``: every request's TTFT, TPOT and E2E latency).

A percentile needs requests behind it: below MIN_REQUESTS_FOR_P99 pooled requests a p99 limit is judged on the
p90 of those requests instead (a p99 of fewer requests is their maximum or next to it), and the answer says so.
Metrics without per-request samples (ITL, and results from before the samples) are judged on the median of the
side's lifetimes' own figures, said as such.
"""

from __future__ import annotations

import statistics
import typing as t
from collections.abc import Mapping, Sequence

from ansible_collections.llmops.vllm.plugins.module_utils._benchmark_statistics import percentile
from ansible_collections.llmops.vllm.plugins.plugin_utils._comparison import ComparisonError, benchmark_levels, by_concurrency
from ansible_collections.llmops.vllm.plugins.plugin_utils._decision import (
    SLO_METRICS,
    DecisionError,
    merged_slo,
    slo_breaches,
)
from ansible_collections.llmops.vllm.plugins.plugin_utils._workloads import WorkloadError, workload_results

# Fewer pooled requests than this cannot put a p99 apart from the maximum: the p90 is judged instead.
MIN_REQUESTS_FOR_P99 = 100
FALLBACK_STAT = 'p90'
_QUANTILES = {'median': 50.0, 'p90': 90.0, 'p99': 99.0}
# The latencies that openai_benchmark samples for every request.
SAMPLED = ('ttft', 'tpot', 'e2el')


def pooled_figures(levels: Sequence[Mapping[str, t.Any]]) -> tuple[dict[str, float], dict[str, str], int | None]:
    """The SLO metrics of one side at one workload and level, over the lifetimes' results ``levels``.

    Returns (figures by metric, how each was judged where it is not the metric itself, pooled requests or None).
    """
    figures: dict[str, float] = {}
    how: dict[str, str] = {}
    samples = {name: [] for name in SAMPLED}
    sampled = bool(levels) and all(isinstance(level.get('latency_samples_ms'), Mapping) for level in levels)
    if sampled:
        for level in levels:
            for name in SAMPLED:
                samples[name].extend(float(value) for value in level['latency_samples_ms'].get(name) or [])
    requests = len(samples['ttft']) if sampled else None
    for metric in SLO_METRICS:
        stat, name, dummy = metric.split('_')
        values = sorted(samples.get(name) or [])
        if sampled and name in SAMPLED and values:
            judged = stat
            if stat == 'p99' and len(values) < MIN_REQUESTS_FOR_P99:
                judged = FALLBACK_STAT
                how[metric] = (f'judged on the {FALLBACK_STAT} of {len(values)} pooled requests (a p99 needs at '
                               f'least {MIN_REQUESTS_FOR_P99})')
            figures[metric] = percentile(values, _QUANTILES[judged])
            continue
        reported = [float(level[metric]) for level in levels if level.get(metric) is not None]
        if reported:
            figures[metric] = statistics.median(reported)
            lifetimes = f'{len(reported)} lifetime{"" if len(reported) == 1 else "s"}'
            how[metric] = f'the median of {lifetimes}\' own figures (no per-request samples)'
    return figures, how, requests


def named_metrics(slo: Mapping[str, t.Any], concurrency: t.Any) -> set[str]:
    """The metrics that a (checked) SLO limits at one level: its limits, its regressions, the level's own."""
    own = (slo.get('by_concurrency') or {}).get(concurrency, {})
    named = set()
    for limits in (slo, own):
        named.update(key for key in limits if key in SLO_METRICS)
        named.update(limits.get('max_regression_pct') or {})
    return named


def _levels_by_key(benchmarks: Sequence[t.Any], side: str) -> dict[tuple[str, t.Any], list[Mapping[str, t.Any]]]:
    """Every lifetime's level results of one side, by (workload, concurrency)."""
    pooled: dict[tuple[str, t.Any], list[Mapping[str, t.Any]]] = {}
    for benchmark in benchmarks:
        try:
            results = workload_results(benchmark, side)
            for workload, result in results.items():
                for level, value in by_concurrency(benchmark_levels(result, side), side).items():
                    pooled.setdefault((workload, level), []).append(value)
        except (WorkloadError, ComparisonError) as error:
            raise DecisionError(str(error)) from None
    return pooled


def judge_pooled_slo(lifetimes: Sequence[Mapping[str, t.Any]], slo: t.Any = None,
                     workload_slo: Mapping[str, t.Any] | None = None) -> dict[str, t.Any]:
    """The SLO judged once on the trial's lifetimes, each {side, benchmark}: {breached, levels, reason}.

    Each level lists its pooled requests a side, its breaches and how a metric was judged where it was not as named.
    """
    sides = {side: [item['benchmark'] for item in lifetimes if item.get('side') == side]
             for side in ('baseline', 'variant')}
    baseline, variant = _levels_by_key(sides['baseline'], 'baseline'), _levels_by_key(sides['variant'], 'variant')
    levels = []
    for key in [key for key in variant if key in baseline]:
        workload, concurrency = key
        own = merged_slo(slo, (workload_slo or {}).get(workload), f'the slo of workload {workload}')
        if not own:
            continue
        variant_figures, variant_how, variant_requests = pooled_figures(variant[key])
        baseline_figures, dummy, baseline_requests = pooled_figures(baseline[key])
        breaches = slo_breaches(dict(variant_figures, max_concurrency=concurrency),
                                dict(baseline_figures, max_concurrency=concurrency), own)
        named = named_metrics(own, concurrency)
        levels.append({'workload': workload, 'max_concurrency': concurrency, 'breaches': breaches,
                       'requests': {'baseline': baseline_requests, 'variant': variant_requests},
                       'judged_as': {metric: how for metric, how in variant_how.items() if metric in named}})
    breaking = [level for level in levels if level['breaches']]
    reason = None
    if breaking:
        level = breaking[0]
        workloads = {workload for workload, dummy in variant}
        where = f"workload {level['workload']}: " if len(workloads) > 1 else ''
        pooled = sum(1 for item in lifetimes if item.get('side') == 'variant')
        requests = level['requests']['variant']
        over = f'{requests} requests of {pooled} lifetime(s)' if requests is not None else f'{pooled} lifetime(s)'
        reason = (f"{where}breaks its SLO at concurrency {level['max_concurrency']}: {'; '.join(level['breaches'])}, "
                  f"over {over} pooled")
        notes = sorted({how for level in breaking for how in level['judged_as'].values()})
        if notes:
            reason += f" ({'; '.join(notes)})"
    return {'breached': bool(breaking), 'levels': levels, 'reason': reason}
