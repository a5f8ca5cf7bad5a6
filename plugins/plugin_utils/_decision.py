# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Keep a variant or roll back to the baseline: the one rule, with the figures behind it.

A trial measures the baseline in one server lifetime and the variant in another. Repeats inside a
lifetime only show how noisy one lifetime is; two lifetimes of the same server differ by more
(on the mock node the same baseline gave 775 to 986 tok/s over four lifetimes). So the interval
of the difference is the wider of:

- the within-lifetime interval: Welch's 95% interval (module_utils._benchmark_statistics) of the difference of the two means of runs;
- the between-lifetime interval: from the baseline's own history (the mean of every earlier
  lifetime of the same host, model and unit checksum, plus this trial's), the spread of lifetime
  means s, and the difference of two lifetimes: t(0.975, k-1) * sqrt(2) * s. A lifetime mean
  already carries its own run noise, so the two are not added.

Per concurrency level, with d the change in output throughput and [L, U] its 95% interval, both
in percent of the baseline, and m the margin:

- faster: L > 0, shown faster;
- not slower: L >= -m, shown to be at most m percent slower;
- slower: U < -m, shown to be more than m percent slower;
- inconclusive: otherwise; the interval is too wide to tell.

The trial is inconclusive, whatever the levels say, when either side has fewer than min_runs runs
at a level or any failed request. Latency SLOs come next: a variant whose level breaks a limit (an
absolute one such as p99 TTFT in ms, or a regression in percent against the baseline's same
figure) is rolled back for that, whatever its throughput. keep_when=not_slower keeps a variant when every level is faster
or not slower; keep_when=faster also needs one level shown faster. Anything else rolls back: the
known-good baseline is the safe answer, and the reason says what would decide it.

A level whose benchmark stopped early (openai_benchmark's stop_when_slower) is judged on the runs
it measured, even fewer than min_runs: the sequential test that stopped it (Welch's interval at
99% per look, module_utils._sequential_stop) is stricter than the verdict's. Such a trial always
rolls back: slower when that test, run again here on the same runs and widened by how the
baseline's lifetimes differ (which the benchmark's look could not know), shows the variant losing;
inconclusive when it does not (lifetimes that differ more than the margin, or another rule or margin).
"""

from __future__ import annotations

import math
import statistics
import typing as t
from collections.abc import Iterable, Mapping

from ansible_collections.llmops.vllm.plugins.module_utils._benchmark_statistics import welch_half_width
from ansible_collections.llmops.vllm.plugins.module_utils._sequential_stop import describe as describe_stop
from ansible_collections.llmops.vllm.plugins.module_utils._sequential_stop import lifetime_half_width_pct, losing
from ansible_collections.llmops.vllm.plugins.module_utils._type_names import plain_type_name
from ansible_collections.llmops.vllm.plugins.plugin_utils._comparison import (
    ComparisonError,
    benchmark_levels,
    by_concurrency,
    metric_number,
    percent_change,
)
from ansible_collections.llmops.vllm.plugins.plugin_utils._workloads import (
    DEFAULT_WORKLOAD,
    WorkloadError,
    workload_results,
)

KEEP = 'keep'
ROLL_BACK = 'roll_back'
FASTER = 'faster'
NOT_SLOWER = 'not_slower'
SLOWER = 'slower'
INCONCLUSIVE = 'inconclusive'
SLO_BREACHED = 'slo_breached'
INCORRECT = 'incorrect'
KEEP_WHEN = (NOT_SLOWER, FASTER)

# How much slower a kept variant may be shown to be at most, in percent of the baseline's output
# tokens/s. Chosen from the error rates that tests/benchmarks/verdict_error_rates.py measures
# (docs/benchmarking.md).
DEFAULT_MARGIN_PCT = 8.0

# Latency figures an SLO may bound: those openai_benchmark reports for every level.
SLO_METRICS = tuple('%s_%s_ms' % (stat, metric) for metric in ('ttft', 'tpot', 'itl', 'e2el')
                    for stat in ('median', 'p90', 'p99'))
_SLO_KEYS = SLO_METRICS + ('max_regression_pct', 'by_concurrency')

MIN_RUNS = 3

# What of a decision is the decision itself: stored, written to JSON and kept in the node's record.
DECISION_KEYS = ('decision', 'outcome', 'rule', 'reason', 'to_decide', 'keep_when', 'margin_pct', 'min_runs',
                 'delta_pct', 'failed_requests', 'slo', 'levels', 'history', 'workloads', 'baseline', 'unit_checksum',
                 'identity', 'stopped_early', 'contaminated', 'foreign_traffic_accepted', 'kv_cache', 'correctness',
                 'baseline_lifetimes', 'max_lifetimes', 'pairs', 'look', 'lifetimes', 'looks', 'unstable', 'dark_minutes',
                 'pair_minutes', 'slo_judged')


class DecisionError(ComparisonError):
    """The inputs cannot be decided on; the message says why."""


def runs_of(level: Mapping[str, t.Any]) -> list[float]:
    """The output tokens/s of every run of one level: the repeats, or the level's own figure."""
    repeats = level.get('output_throughput_repeats')
    if isinstance(repeats, (list, tuple)) and repeats:
        return [_finite(value, 'output_throughput_repeats') for value in repeats]
    value = level.get('output_throughput_mean', level.get('output_throughput'))
    if value is None:
        raise DecisionError('a benchmark level has no output_throughput')
    return [_finite(value, 'output_throughput')]


def _finite(value: t.Any, name: str) -> float:
    try:
        return metric_number({name: value}, name, 'input')
    except ComparisonError:
        raise DecisionError(f'{name} must be a finite number, got {value!r}') from None


def check_slo(slo: t.Any, where: str = 'vllm_switch_slo') -> dict[str, t.Any]:
    """Validate an SLO mapping and return it with numbers as floats; raise DecisionError naming the key.

    Shape: absolute limits in ms by metric name (``p99_ttft_ms: 2000``), ``max_regression_pct``
    as a mapping of metric name to percent, and ``by_concurrency`` mapping a level to its own
    limits of the same shape, which replace the general ones key by key.
    """
    if slo is None:
        return {}
    if not isinstance(slo, Mapping):
        raise DecisionError(f'{where} must be a mapping, got {plain_type_name(slo)}')
    checked: dict[str, t.Any] = {}
    for key, value in slo.items():
        here = f'{where}.{key}'
        if key not in _SLO_KEYS:
            raise DecisionError(f'{here}: unknown key; use one of {", ".join(_SLO_KEYS)}')
        if key == 'by_concurrency':
            if not isinstance(value, Mapping):
                raise DecisionError(f'{here} must map concurrency levels to limits')
            checked[key] = {}
            for level, limits in value.items():
                try:
                    number = int(level)
                except (TypeError, ValueError):
                    raise DecisionError(f'{here}: {level!r} is not a concurrency level') from None
                nested = check_slo(limits, f'{here}.{level}')
                if 'by_concurrency' in nested:
                    raise DecisionError(f'{here}.{level}: by_concurrency does not nest')
                checked[key][number] = nested
        elif key == 'max_regression_pct':
            if not isinstance(value, Mapping):
                raise DecisionError(f'{here} must map metric names to a percent, e.g. {{p99_ttft_ms: 20}}')
            checked[key] = {}
            for metric, percent in value.items():
                if metric not in SLO_METRICS:
                    raise DecisionError(f'{here}.{metric}: unknown metric; use one of {", ".join(SLO_METRICS)}')
                checked[key][metric] = _positive(percent, f'{here}.{metric}')
        else:
            checked[key] = _positive(value, here)
    return checked


def check_decision_settings(keep_when: t.Any, margin_pct: t.Any, min_runs: t.Any, prefix: str = '') -> float:
    """The rules of the keep rule, the margin and the minimum of runs; return the margin as a float.

    keep_when is one of KEEP_WHEN, margin_pct a finite percent of at least 0 and below 100 (a
    margin of 100% would keep a variant that serves nothing), and min_runs an integer of at least 1.
    ``prefix`` is laid before each name (``vllm_switch_``), so that the message names the variable.
    """
    if keep_when not in KEEP_WHEN:
        raise DecisionError(f'{prefix}keep_when must be one of {", ".join(KEEP_WHEN)}, got {keep_when!r}')
    margin = _finite(margin_pct, f'{prefix}margin_pct')
    if margin < 0:
        raise DecisionError(f'{prefix}margin_pct must not be negative, got {margin_pct!r}')
    if margin >= 100:
        raise DecisionError(f'{prefix}margin_pct must be below 100 (a percent of the baseline), got {margin_pct!r}')
    if isinstance(min_runs, bool) or not isinstance(min_runs, int) or min_runs < 1:
        raise DecisionError(f'{prefix}min_runs must be a positive integer, got {min_runs!r}')
    return margin


def _positive(value: t.Any, where: str) -> float:
    number = _finite(value, where)
    if number <= 0:
        raise DecisionError(f'{where} must be a positive number, got {value!r}')
    return number


def slo_breaches(variant: Mapping[str, t.Any], baseline: Mapping[str, t.Any], slo: Mapping[str, t.Any]) -> list[str]:
    """What of one level of the variant breaks the (checked) SLO, in words; empty when it holds.

    A figure the variant does not report breaks nothing; a regression needs the baseline's figure too.
    """
    limits = dict(slo)
    level = variant.get('max_concurrency')
    own = (slo.get('by_concurrency') or {}).get(level, {})
    limits.update((key, value) for key, value in own.items() if key != 'max_regression_pct')
    regressions = dict(slo.get('max_regression_pct') or {})
    regressions.update(own.get('max_regression_pct') or {})
    breaches = []
    for metric in SLO_METRICS:
        value = variant.get(metric)
        if value is None:
            continue
        value = _finite(value, metric)
        if metric in limits and value > limits[metric]:
            breaches.append('%s %.1f ms > %g ms' % (_metric_words(metric), value, limits[metric]))
        base = baseline.get(metric)
        if metric in regressions and base:
            change = percent_change(value, _finite(base, metric))
            if change > regressions[metric]:
                breaches.append('%s %+.1f%% vs the baseline (%.1f ms vs %.1f ms) > +%g%%'
                                % (_metric_words(metric), change, value, float(base), regressions[metric]))
    return breaches


def _metric_words(metric: str) -> str:
    stat, name, dummy = metric.split('_')
    return '%s %s' % (stat, name.upper())


def lifetime_spread(lifetime_means: list[float]) -> dict[str, t.Any]:
    """What k lifetime means of the baseline say about the difference between two lifetimes.

    Returns the count, the coefficient of variation in percent and the half-width, in percent of
    the mean, of the 95% interval of the difference of two lifetimes; the last two are None with
    fewer than two lifetimes.
    """
    count = len(lifetime_means)
    if count < 2:
        return {'lifetimes': count, 'cv_pct': None, 'half_width_pct': None}
    mean = statistics.fmean(lifetime_means)
    cv_pct = statistics.stdev(lifetime_means) * 100.0 / mean if mean > 0 else None
    half_width = lifetime_half_width_pct(cv_pct, count, confidence=0.95)
    return {'lifetimes': count, 'cv_pct': cv_pct, 'half_width_pct': half_width}


def judge_level(delta_pct: float, half_width_pct: float, margin_pct: float) -> str:
    """faster, not_slower, slower or inconclusive for one level; see the module docstring."""
    lower, upper = delta_pct - half_width_pct, delta_pct + half_width_pct
    if lower > 0:
        return FASTER
    if lower >= -margin_pct:
        return NOT_SLOWER
    if upper < -margin_pct:
        return SLOWER
    return INCONCLUSIVE


def _failed(levels: list[Mapping[str, t.Any]]) -> int:
    return sum(int(level.get('failed') or 0) for level in levels)


def history_means(history: Iterable[Mapping[str, t.Any]]) -> dict[t.Any, dict[str, float]]:
    """Mean output tokens/s per level and lifetime of earlier baseline measurements.

    Each item is one measured level: ``max_concurrency``, ``output_throughput`` (tokens/s) and
    ``lifetime`` (what tells one server start from another: systemd's InvocationID, else the run).
    Several measurements of one lifetime count once, by their mean.
    """
    grouped: dict[t.Any, dict[str, list[float]]] = {}
    for item in history:
        value = item.get('output_throughput')
        lifetime = item.get('lifetime')
        if value is None or lifetime is None:
            continue
        grouped.setdefault(item.get('max_concurrency'), {}).setdefault(str(lifetime), []).append(
            _finite(value, 'history output_throughput'))
    return {level: {lifetime: statistics.fmean(values) for lifetime, values in lifetimes.items()}
            for level, lifetimes in grouped.items()}


def decide(variant: t.Any, baseline: t.Any, history: Iterable[Mapping[str, t.Any]] = (),
           keep_when: str = NOT_SLOWER, margin_pct: float = DEFAULT_MARGIN_PCT, min_runs: int = MIN_RUNS,
           baseline_lifetime: str | None = None, slo: t.Any = None,
           accept_foreign_traffic: bool = False) -> dict[str, t.Any]:
    """Keep the variant or roll back, with the rule that decided and the figures behind it.

    variant and baseline are openai_benchmark results (or their lists of levels); history holds the
    baseline's earlier lifetimes (see history_means); baseline_lifetime names the lifetime this
    trial's baseline was measured in, so that it is not counted twice.
    A level whose server served requests that the benchmark did not send
    (``foreign_requests``, from the server's own counters) is contaminated: the two sides were not
    measured alike, and the trial rolls back as inconclusive unless accept_foreign_traffic is set.
    """
    margin_pct = check_decision_settings(keep_when, margin_pct, min_runs)
    slo = check_slo(slo)
    try:
        variant_levels = benchmark_levels(variant, 'variant')
        baseline_levels = benchmark_levels(baseline, 'baseline')
        by_variant = by_concurrency(variant_levels, 'variant')
        by_baseline = by_concurrency(baseline_levels, 'baseline')
    except ComparisonError as error:
        raise DecisionError(str(error)) from None
    shared = [level for level in by_variant if level in by_baseline]
    if not shared:
        raise DecisionError('the variant and the baseline share no concurrency level')
    past = history_means(_same_requests(history, by_baseline))
    current = baseline_lifetime or 'this trial'
    levels = [_level(key, by_variant[key], by_baseline[key], past.get(key, {}), current, margin_pct, min_runs)
              for key in shared]
    for level in levels:
        level['slo_breaches'] = slo_breaches(by_variant[level['max_concurrency']],
                                             by_baseline[level['max_concurrency']], slo)
    stops = _early_stops(levels, by_variant, by_baseline, keep_when, margin_pct)
    failed = {'variant': _failed(variant_levels), 'baseline': _failed(baseline_levels)}
    contaminated = contaminated_levels(by_variant, by_baseline, shared)
    if contaminated and not accept_foreign_traffic:
        decision = _contaminated_answer(contaminated)
    else:
        decision = _overall(levels, failed, keep_when, margin_pct, min_runs, stops)
    history_note = _history_note(levels)
    if not history_note['earlier_lifetimes'] and decision['outcome'] in (FASTER, NOT_SLOWER, SLOWER):
        # Said where the operator reads it: an interval without history may be too narrow.
        decision['reason'] += ' (%s)' % history_note['note']
    deltas = [level['delta_pct'] for level in levels if level['delta_pct'] is not None]
    decision.update(
        keep_when=keep_when,
        margin_pct=margin_pct,
        min_runs=min_runs,
        delta_pct=statistics.fmean(deltas) if deltas else None,
        failed_requests=failed,
        slo=slo or None,
        levels=levels,
        history=history_note,
        stopped_early=bool(stops),
        contaminated=contaminated,
        foreign_traffic_accepted=bool(accept_foreign_traffic and contaminated),
    )
    return decision


def contaminated_levels(by_variant: Mapping[t.Any, Mapping[str, t.Any]], by_baseline: Mapping[t.Any, Mapping[str, t.Any]],
                        shared: Iterable[t.Any]) -> list[dict[str, t.Any]]:
    """The levels, baseline's first, whose server served requests the benchmark did not send.

    A level without the server's counters (``foreign_requests`` null) cannot show contamination and
    is not listed; the benchmark warns that it could not read them.
    """
    found = []
    for key in shared:
        for side, levels in (('baseline', by_baseline), ('variant', by_variant)):
            count = levels[key].get('foreign_requests')
            if isinstance(count, (int, float)) and not isinstance(count, bool) and count > 0:
                found.append({'side': side, 'max_concurrency': key, 'foreign_requests': int(count)})
    return found


def _contaminated_answer(contaminated):
    first = contaminated[0]
    others = len(contaminated) - 1
    return _answer(
        ROLL_BACK, INCONCLUSIVE, 'contaminated: both sides are measured out of service, with no request but the '
        "benchmark's",
        'inconclusive: contaminated at concurrency %s: the %s\'s server served %d request%s that the benchmark did '
        'not send%s, so the two sides were not measured alike'
        % (first['max_concurrency'], first['side'], first['foreign_requests'],
           '' if first['foreign_requests'] == 1 else 's',
           '' if not others else ' (and %d more level%s)' % (others, '' if others == 1 else 's')),
        'keep users off the node during the trial (vllm_switch_drain_hook_before, see docs/benchmarking.md), or '
        'accept foreign traffic with vllm_switch_accept_foreign_traffic: true, then the trial again')


def _early_stops(levels, by_variant, by_baseline, keep_when, margin_pct):
    """The sequential test, run again on the runs of each level whose benchmark stopped early.

    Marks every level with ``stopped_early``; a stopped level is judged on the runs it has, whatever
    min_runs says. Returns the test's answer by level, in the order measured.
    """
    stops = {}
    for level in levels:
        key = level['max_concurrency']
        level['stopped_early'] = bool(by_variant[key].get('stopped_early'))
        if not level['stopped_early']:
            continue
        # Judged again here with the baseline's lifetimes, which the benchmark's own look did not have.
        stops[key] = losing(runs_of(by_baseline[key]), runs_of(by_variant[key]), keep_when, margin_pct,
                            lifetime_cv_pct=level['between_cv_pct'], lifetimes=level['lifetimes'])
        level['too_few_runs'] = False
        if level['half_width_pct'] is not None:
            level['status'] = judge_level(level['delta_pct'], level['half_width_pct'], margin_pct)
    return stops


def _same_requests(history, by_baseline):
    """Only earlier lifetimes measured with the same requests tell how much lifetimes differ."""
    kept = []
    for item in history:
        level = by_baseline.get(item.get('max_concurrency')) or {}
        sent, now = item.get('prompt_set_sha256'), level.get('prompt_set_sha256')
        if sent is None or now is None or sent == now:
            kept.append(item)
    return kept


def with_correctness(answer: Mapping[str, t.Any], gate: Mapping[str, t.Any] | None) -> dict[str, t.Any]:
    """The decision once the answers are checked: a variant that fails the gate is rolled back as incorrect.

    gate is _answer_gate.answer_gate's answer, or None when the answers were not checked. An incorrect
    variant rolls back whatever its speed: a faster server that answers wrongly is not an option.
    """
    decided = dict(answer, correctness=gate)
    if gate is None or gate['passed']:
        return decided
    reason = 'incorrect: %s' % '; '.join(gate['problems'])
    if gate['examples']:
        reason += '; for example, %s' % gate['examples'][0]
    decided.update(_answer(ROLL_BACK, INCORRECT, 'answers', reason,
                           'find what changes the answers (its speculative config, its serve_args), '
                           'or raise vllm_switch_answer_tolerance if the A/A rate of this node is higher'))
    return decided


def kv_cache_room(variant: t.Any, starts: Iterable[Mapping[str, t.Any]], variant_name: str,
                  baseline_name: str) -> dict[str, t.Any]:
    """Whether the variant's KV cache holds what its workloads asked of it at their concurrency.

    A level needs max_concurrency x (its longest prompt + the workload's max_tokens) tokens of KV
    cache for every request to keep its context at once; with less, vLLM preempts and recomputes, and
    a trial that measured fewer or shorter requests than the node serves would not show it. starts
    are the trial's starts (the switch role's records: variant, kv_cache as
    wait_for_openai_endpoint read it); each side's capacity is that of its last start that logged one.
    Returns {variant_tokens, baseline_tokens, needs: [{workload, max_concurrency, tokens}], short:
    [sentences]}; ``short`` is empty when the cache holds every level's need or its size is unknown.
    """
    capacity = {}
    for start in starts or ():
        cache = start.get('kv_cache') if isinstance(start, Mapping) else None
        if isinstance(cache, Mapping) and isinstance(cache.get('tokens'), int):
            capacity[start.get('variant')] = cache['tokens']
    try:
        results = workload_results(variant, 'variant')
    except WorkloadError as error:
        raise DecisionError(str(error)) from None
    needs = []
    for name, result in results.items():
        max_tokens = (result.get('options') or {}).get('max_tokens')
        for level in benchmark_levels(result, 'variant'):
            prompt = level.get('max_input_tokens')
            concurrency = level.get('max_concurrency')
            if not isinstance(max_tokens, int) or not isinstance(prompt, int) or not isinstance(concurrency, int):
                continue
            needs.append({'workload': name, 'max_concurrency': concurrency, 'prompt_tokens': prompt,
                          'max_tokens': max_tokens, 'tokens': concurrency * (prompt + max_tokens)})
    held = capacity.get(variant_name)
    short = []
    if held is not None:
        for need in needs:
            if need['tokens'] > held:
                short.append('workload %s at concurrency %d needs up to %d x (%s + %s) = %s tokens of KV cache; '
                             "%s's holds %s" % (need['workload'], need['max_concurrency'], need['max_concurrency'],
                                                _thousands(need['prompt_tokens']), _thousands(need['max_tokens']),
                                                _thousands(need['tokens']), variant_name, _thousands(held)))
    return {'variant_tokens': held, 'baseline_tokens': capacity.get(baseline_name), 'needs': needs, 'short': short}


def _thousands(number):
    return '{:,}'.format(number)


def merged_slo(general: t.Any, own: t.Any, where: str) -> dict[str, t.Any]:
    """A workload's SLO laid over the trial's: its keys replace the general ones, level by level and metric by metric."""
    merged = check_slo(general)
    extra = check_slo(own, where)
    for key, value in extra.items():
        if key in ('by_concurrency', 'max_regression_pct'):
            combined = dict(merged.get(key) or {})
            for inner, limits in value.items():
                if key == 'by_concurrency' and inner in combined:
                    nested = dict(combined[inner])
                    regressions = dict(nested.get('max_regression_pct') or {})
                    regressions.update(limits.get('max_regression_pct') or {})
                    nested.update(limits)
                    if regressions:
                        nested['max_regression_pct'] = regressions
                    combined[inner] = nested
                else:
                    combined[inner] = limits
            merged[key] = combined
        else:
            merged[key] = value
    return merged


# The outcomes of a workload that rolls back, the most definite first.
_ROLL_BACK_ORDER = {SLO_BREACHED: 0, SLOWER: 1, INCONCLUSIVE: 2, NOT_SLOWER: 3}


def decide_workloads(variant: t.Any, baseline: t.Any, history: Iterable[Mapping[str, t.Any]] = (),
                     keep_when: str = NOT_SLOWER, margin_pct: float = DEFAULT_MARGIN_PCT, min_runs: int = MIN_RUNS,
                     baseline_lifetime: str | None = None, slo: t.Any = None,
                     workload_slo: Mapping[str, t.Any] | None = None,
                     accept_foreign_traffic: bool = False) -> dict[str, t.Any]:
    """decide() for every workload of a trial; the variant is kept only when every workload keeps it.

    variant and baseline are openai_benchmark results, one per workload (see workload_results);
    history items name their workload with ``workload``; workload_slo maps a workload to its own SLO,
    laid over ``slo``. The answer is decide()'s, with ``workloads`` listing each workload's answer and
    every level naming its workload. Of the workloads that roll back, the one with the most definite
    outcome (an SLO breach, then slower, then inconclusive; the first measured among equals) gives the
    outcome and the reason.
    """
    try:
        variants = workload_results(variant, 'variant')
        baselines = workload_results(baseline, 'baseline')
    except WorkloadError as error:
        raise DecisionError(str(error)) from None
    unmatched = [name for name in variants if name not in baselines]
    if unmatched:
        raise DecisionError(f'workload {unmatched[0]!r} was measured on the variant but not on the baseline')
    history = list(history)
    answers = {}
    for name, result in variants.items():
        own_slo = merged_slo(slo, (workload_slo or {}).get(name), f'the slo of workload {name}')
        own_history = [item for item in history if (item.get('workload') or DEFAULT_WORKLOAD) == name]
        answers[name] = decide(result, baselines[name], history=own_history, keep_when=keep_when,
                               margin_pct=margin_pct, min_runs=min_runs, baseline_lifetime=baseline_lifetime,
                               slo=own_slo, accept_foreign_traffic=accept_foreign_traffic)
    summaries = [{'name': name, 'decision': answer['decision'], 'outcome': answer['outcome'],
                  'reason': answer['reason'], 'delta_pct': answer['delta_pct'], 'slo': answer['slo']}
                 for name, answer in answers.items()]
    if list(answers) == [DEFAULT_WORKLOAD]:
        return dict(answers[DEFAULT_WORKLOAD], workloads=summaries)
    levels = [dict(level, workload=name) for name, answer in answers.items() for level in answer['levels']]
    deltas = [level['delta_pct'] for level in levels if level['delta_pct'] is not None]
    first = next(iter(answers.values()))
    combined = {
        'keep_when': keep_when, 'margin_pct': first['margin_pct'], 'min_runs': min_runs, 'rule': first['rule'],
        'delta_pct': statistics.fmean(deltas) if deltas else None,
        'failed_requests': {side: sum(answer['failed_requests'][side] for answer in answers.values())
                            for side in ('variant', 'baseline')},
        'slo': first['slo'] if len({repr(answer['slo']) for answer in answers.values()}) == 1 else None,
        'levels': levels,
        'history': min((answer['history'] for answer in answers.values()), key=lambda note: note['earlier_lifetimes']),
        'workloads': summaries,
        'stopped_early': any(answer['stopped_early'] for answer in answers.values()),
        'contaminated': [dict(level, workload=name) for name, answer in answers.items()
                         for level in answer['contaminated']],
        'foreign_traffic_accepted': any(answer['foreign_traffic_accepted'] for answer in answers.values()),
    }
    # A shown failure names the trial's outcome before a workload that could not tell: an operator who reads
    # "inconclusive" would rerun a trial that another workload has already failed for certain.
    rolled_back = sorted(((name, answer) for name, answer in answers.items() if answer['decision'] != KEEP),
                         key=lambda item: _ROLL_BACK_ORDER.get(item[1]['outcome'], len(_ROLL_BACK_ORDER)))
    if rolled_back:
        name, answer = rolled_back[0]
        combined.update(decision=ROLL_BACK, outcome=answer['outcome'], to_decide=answer['to_decide'],
                        reason='workload %s: %s' % (name, answer['reason']))
        if len(rolled_back) > 1:
            combined['reason'] += ' (also rolled back by %s)' % ', '.join(other for other, dummy in rolled_back[1:])
        return combined
    outcome = FASTER if any(answer['outcome'] == FASTER for answer in answers.values()) else NOT_SLOWER
    combined.update(decision=KEEP, outcome=outcome, to_decide=None,
                    reason='every workload passes: ' + '; '.join('%s %s' % (name, answer['reason'])
                                                                 for name, answer in answers.items()))
    return combined


def _level(key, variant, baseline, past, current, margin_pct, min_runs):
    variant_runs = runs_of(variant)
    baseline_runs = runs_of(baseline)
    variant_mean = statistics.fmean(variant_runs)
    baseline_mean = statistics.fmean(baseline_runs)
    if baseline_mean <= 0:
        raise DecisionError('the baseline produced no output tokens at max_concurrency %s' % key)
    delta_pct = percent_change(variant_mean, baseline_mean)
    within = welch_half_width(variant_runs, baseline_runs)
    within_pct = None if within is None else within * 100.0 / baseline_mean
    lifetimes = dict(past)
    lifetimes[str(current)] = baseline_mean
    between = lifetime_spread(list(lifetimes.values()))
    widths = [width for width in (within_pct, between['half_width_pct']) if width is not None]
    half_width_pct = max(widths) if widths else None
    too_few = min(len(variant_runs), len(baseline_runs)) < min_runs
    if too_few or half_width_pct is None:
        status = INCONCLUSIVE
    else:
        status = judge_level(delta_pct, half_width_pct, margin_pct)
    return {
        'max_concurrency': key,
        'status': status,
        'delta_pct': delta_pct,
        'lower_pct': None if half_width_pct is None else delta_pct - half_width_pct,
        'upper_pct': None if half_width_pct is None else delta_pct + half_width_pct,
        'half_width_pct': half_width_pct,
        'within_half_width_pct': within_pct,
        'between_half_width_pct': between['half_width_pct'],
        'between_cv_pct': between['cv_pct'],
        'lifetimes': between['lifetimes'],
        'variant_output_throughput': variant_mean,
        'baseline_output_throughput': baseline_mean,
        'variant_runs': len(variant_runs),
        'baseline_runs': len(baseline_runs),
        'too_few_runs': too_few,
        'tpot_delta_pct': percent_change(variant.get('median_tpot_ms'), baseline.get('median_tpot_ms')),
        'ttft_delta_pct': percent_change(variant.get('median_ttft_ms'), baseline.get('median_ttft_ms')),
        # What the variant search models a speculative config from (plugin_utils/_variant_search.py): the cost of a
        # step from the TPOTs, and what a smaller k would gain from the acceptance at each draft position.
        'variant_tpot_ms': variant.get('median_tpot_ms'),
        'baseline_tpot_ms': baseline.get('median_tpot_ms'),
        'acceptance_rates': variant.get('spec_decode_per_position_acceptance_rates'),
        'acceptance_length': variant.get('spec_decode_acceptance_length'),
        # Answers cut off at max_tokens were measured shorter than the node serves them.
        'variant_max_tokens_share': variant.get('max_tokens_share'),
        'baseline_max_tokens_share': baseline.get('max_tokens_share'),
    }


def _where(level):
    key = level['max_concurrency']
    return 'at concurrency %s' % ('unlimited' if key is None else key)


def _interval(level):
    if level['lower_pct'] is None:
        return '%+.1f%% (no interval: one run a side and no baseline history)' % level['delta_pct']
    return '%+.1f%% (95%% interval %+.1f%% to %+.1f%%)' % (level['delta_pct'], level['lower_pct'], level['upper_pct'])


def _overall(levels, failed, keep_when, margin_pct, min_runs, stops):
    rule = ('keep_when=not_slower: keep when every level is shown to be at most %.1f%% slower' % margin_pct
            if keep_when == NOT_SLOWER else
            'keep_when=faster: keep when every level is shown to be at most %.1f%% slower and one is shown faster'
            % margin_pct)
    if failed['variant'] or failed['baseline']:
        return _answer(ROLL_BACK, INCONCLUSIVE, rule,
                       'inconclusive: %d failed requests in the variant\'s benchmark and %d in the baseline\'s'
                       % (failed['variant'], failed['baseline']),
                       'a benchmark without failed requests (see the errors of each level), then the trial again')
    if stops:
        return _stopped_answer(levels, stops, rule, keep_when, margin_pct)
    few = [level for level in levels if level['too_few_runs']]
    if few:
        level = few[0]
        return _answer(ROLL_BACK, INCONCLUSIVE, rule,
                       'inconclusive: %d runs of the variant and %d of the baseline %s; at least %d each are needed'
                       % (level['variant_runs'], level['baseline_runs'], _where(level), min_runs),
                       'vllm_switch_benchmark.repeats of at least %d' % min_runs)
    breaking = [level for level in levels if level['slo_breaches']]
    if breaking:
        level = breaking[0]
        return _answer(ROLL_BACK, SLO_BREACHED, rule,
                       'breaks its SLO %s: %s (output tok/s %s)'
                       % (_where(level), '; '.join(level['slo_breaches']), _interval(level)), None)
    slower = [level for level in levels if level['status'] == SLOWER]
    if slower:
        level = min(slower, key=lambda item: item['upper_pct'])
        return _answer(ROLL_BACK, SLOWER, rule,
                       'slower %s: %s output tok/s vs the baseline, beyond the %.1f%% margin'
                       % (_where(level), _interval(level), margin_pct), None)
    unclear = [level for level in levels if level['status'] == INCONCLUSIVE]
    if unclear:
        level = min(unclear, key=lambda item: -math.inf if item['lower_pct'] is None else item['lower_pct'])
        return _answer(ROLL_BACK, INCONCLUSIVE, rule,
                       'inconclusive %s: %s output tok/s vs the baseline; the interval reaches past -%.1f%%'
                       % (_where(level), _interval(level), margin_pct), _what_would_decide(level))
    faster = [level for level in levels if level['status'] == FASTER]
    outcome = FASTER if faster else NOT_SLOWER
    best = max(faster or levels, key=lambda item: item['lower_pct'])
    worst = min(levels, key=lambda item: item['lower_pct'])
    if keep_when == FASTER and not faster:
        return _answer(ROLL_BACK, NOT_SLOWER, rule,
                       'not shown faster: %s output tok/s vs the baseline %s' % (_interval(best), _where(best)),
                       _what_would_decide(best))
    if faster:
        reason = 'faster %s: %s output tok/s vs the baseline' % (_where(best), _interval(best))
    else:
        reason = 'not slower %s: %s output tok/s vs the baseline, within the %.1f%% margin' % (
            _where(worst), _interval(worst), margin_pct)
    return _answer(KEEP, outcome, rule, reason, None)


def _stopped_answer(levels, stops, rule, keep_when, margin_pct):
    """Roll back a trial whose benchmark stopped early: it stopped because the variant was losing."""
    shown = [key for key, test in stops.items() if test['losing']]
    key = shown[0] if shown else next(iter(stops))
    where = _where(next(level for level in levels if level['max_concurrency'] == key))
    test = stops[key]
    if shown:
        return _answer(ROLL_BACK, SLOWER, rule, 'slower %s: the benchmark stopped early, after %s'
                       % (where, describe_stop(test)), None)
    figures = ('%d runs of the variant and %d of the baseline' % (test['variant_runs'], test['baseline_runs'])
               if test['delta_pct'] is None else describe_stop(test))
    return _answer(ROLL_BACK, INCONCLUSIVE, rule,
                   'inconclusive %s: the benchmark stopped early, but under keep_when=%s and a %.1f%% margin its'
                   ' runs do not show the variant losing: %s' % (where, keep_when, margin_pct, figures),
                   'a benchmark run under the same keep_when and margin_pct, or without stopping early'
                   ' (vllm_switch_early_stop: false), then the trial again')


def _what_would_decide(level):
    within = level['within_half_width_pct']
    between = level['between_half_width_pct']
    if within is None and between is None:
        return 'at least two runs a side'
    if between is not None and (within is None or between >= within):
        return ('between-lifetime noise decides the width (+/-%.1f%% from %d baseline lifetimes): more baseline'
                ' lifetimes in the history narrow it (ansible-playbook llmops.vllm.benchmark after a restart of the baseline)'
                % (between, level['lifetimes']))
    return ('within-lifetime noise decides the width (+/-%.1f%%): more repeats or more prompts per run narrow it'
            % within)


def _answer(decision, outcome, rule, reason, to_decide):
    sentence = reason if not to_decide else '%s; to decide it: %s' % (reason, to_decide)
    return {'decision': decision, 'outcome': outcome, 'rule': rule, 'reason': sentence, 'to_decide': to_decide}


def _history_note(levels):
    counts = [level['lifetimes'] for level in levels]
    earlier = min(counts) - 1 if counts else 0
    if earlier <= 0:
        return {'earlier_lifetimes': 0,
                'note': 'no earlier baseline lifetimes of this host, model and unit: the interval covers only the'
                        ' noise within one lifetime'}
    return {'earlier_lifetimes': earlier,
            'note': '%d earlier baseline lifetimes of this host, model and unit bound the interval from below'
                    % earlier}


def baseline_lifetimes(baseline: t.Any, *, unit_checksum: str | None = None,
                       identity: str | None = None) -> list[dict[str, t.Any]]:
    """This trial's clean measurements of the baseline, one per workload and level, for the node's history.

    The decision returns them, the trial's record keeps them, and later trials on the node learn the
    baseline's lifetimes from them (history_from_node). Each names its lifetime (the ``lifetime`` label:
    the unit's InvocationID), unit checksum and identity; a result without a lifetime label cannot tell
    one server start from another and is left out, as is a level with a failed or a foreign request,
    which says how busy the node was rather than how fast the baseline is.
    """
    try:
        results = workload_results(baseline, 'baseline')
    except WorkloadError as error:
        raise DecisionError(str(error)) from None
    measured = []
    for workload, result in results.items():
        labels = result.get('labels') or {}
        lifetime = labels.get('lifetime')
        if not lifetime or not isinstance(result.get('results'), list):
            continue
        for level in result['results']:
            if not isinstance(level, Mapping) or level.get('failed') or (level.get('foreign_requests') or 0) > 0:
                continue
            value = level.get('output_throughput_mean', level.get('output_throughput'))
            if value is None:
                continue
            measured.append({'workload': workload, 'max_concurrency': level.get('max_concurrency'),
                             'output_throughput': _finite(value, 'baseline output_throughput'),
                             'lifetime': str(lifetime), 'prompt_set_sha256': level.get('prompt_set_sha256'),
                             'unit_checksum': labels.get('unit_checksum') or unit_checksum,
                             'identity': labels.get('trial_identity') or identity})
    return measured


def history_from_node(entries: Iterable[t.Any], *, baseline: str, unit_checksum: str | None,
                      identity: str | None = None) -> list[dict[str, t.Any]]:
    """The baseline's earlier lifetimes from the node's history (trial_record_info), as decide() takes them.

    Every decided trial's record keeps its baseline measurements under ``decision.baseline_lifetimes``
    (baseline_lifetimes). Only those of the same baseline variant and unit checksum count: a changed unit
    is another server, and so is the same unit with another identity (environment, vLLM version). The same
    measurement kept by several records (a trial recorded as decided and then as rolled back, or one
    baseline measurement shared by the trials of a comparison) counts once.
    """
    seen = set()
    history = []
    for entry in entries:
        if not isinstance(entry, Mapping) or entry.get('baseline') != baseline:
            continue
        decision = entry.get('decision')
        kept = decision.get('baseline_lifetimes') if isinstance(decision, Mapping) else None
        for item in kept if isinstance(kept, list) else ():
            if not isinstance(item, Mapping) or item.get('output_throughput') is None or not item.get('lifetime'):
                continue
            if unit_checksum is not None and item.get('unit_checksum') != unit_checksum:
                continue
            if identity is not None and item.get('identity') not in (None, identity):
                continue
            measurement = {'max_concurrency': item.get('max_concurrency'),
                           'output_throughput': item['output_throughput'], 'lifetime': str(item['lifetime']),
                           'workload': item.get('workload') or DEFAULT_WORKLOAD,
                           'prompt_set_sha256': item.get('prompt_set_sha256')}
            key = tuple(sorted(measurement.items(), key=lambda pair: pair[0]))
            if key not in seen:
                seen.add(key)
                history.append(measurement)
    return history
