# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Variant-against-baseline comparison and the verdict rule.

The callback's table, the report and the benchmark_verdict filter (and through it the decision to
keep a variant or roll back) all judge a variant here, so they can never disagree.

The verdict is taken on output throughput (tokens/s), the number an operator is paid in; TPOT and
TTFT deltas are reported beside it. When both sides carry a 95% confidence interval from repeated
runs, the variant is faster (slower) when the 95% interval of the difference, of half-width
sqrt(h_variant^2 + h_baseline^2), lies entirely above (below) zero. Without intervals on both
sides the delta has to leave a symmetric noise band of +/- noise_pct percent of the baseline.

"Within noise" only says that no difference was shown, which a noisy measurement always says. A
variant is therefore also judged "not slower" only when the measurement shows it to be at most
noise_pct slower: the lower end of the 95% interval of the difference (without intervals, the delta
itself) is at least -noise_pct. That is what the switch role keeps a variant on.
"""

from __future__ import annotations

import dataclasses
import math
import typing as t
from collections.abc import Iterable, Mapping, Sequence

from ansible_collections.llmops.vllm.plugins.module_utils._type_names import plain_type_name

FASTER = 'faster'
SLOWER = 'slower'
WITHIN_NOISE = 'within_noise'

# The one margin of the collection, in percent of the baseline's output tokens/s: how much slower a
# kept variant may be shown to be at most (trial_decision), and the noise band of comparisons
# without confidence intervals. Chosen from the error rates that tests/benchmarks/verdict_error_rates.py
# measures (docs/benchmarking.md).
DEFAULT_MARGIN_PCT = 8.0
DEFAULT_NOISE_PCT = DEFAULT_MARGIN_PCT

# Benchmark options that do not change the workload of one concurrency level: levels are matched
# by concurrency, repeats only narrow the confidence interval, and the rest is plumbing.
_OPTIONS_NOT_AFFECTING_RESULTS = frozenset(
    ('api_key', 'concurrency', 'labels', 'metrics_url', 'repeats', 'timeout', 'warmup_requests'))


class ComparisonError(ValueError):
    """The two results cannot be compared; the message says why."""


@dataclasses.dataclass(frozen=True)
class LevelVerdict:
    """The judgement of one concurrency level."""

    max_concurrency: int | None
    verdict: str
    delta_pct: float
    method: str
    threshold_pct: float
    variant_output_throughput: float
    baseline_output_throughput: float
    tpot_delta_pct: float | None
    ttft_delta_pct: float | None
    lower_bound_pct: float
    not_slower: bool

    def as_dict(self) -> dict[str, t.Any]:
        return dataclasses.asdict(self)


def percent_change(new: float | None, old: float | None) -> float | None:
    """Change from old to new in percent of old, or None when either is unknown or old is zero."""
    if new is None or old is None or old == 0:
        return None
    return (new - old) * 100.0 / old


def output_throughput(metrics: Mapping[str, t.Any], side: str = 'result') -> tuple[float, float | None]:
    """Output tokens/s of one level and the half-width of its 95% interval (None without repeats)."""
    value = metric_number(metrics, 'output_throughput_mean', side)
    if value is None:
        value = metric_number(metrics, 'output_throughput', side)
    if value is None:
        raise ComparisonError(f'the {side} has no output_throughput')
    return value, metric_number(metrics, 'output_throughput_ci95', side)


def compare_level(variant: Mapping[str, t.Any], baseline: Mapping[str, t.Any],
                  noise_pct: float = DEFAULT_NOISE_PCT) -> LevelVerdict:
    """Judge one concurrency level of a variant against the same level of the baseline."""
    if noise_pct < 0:
        raise ComparisonError(f'noise_pct must not be negative, got {noise_pct}')
    variant_value, variant_ci = output_throughput(variant, 'variant')
    baseline_value, baseline_ci = output_throughput(baseline, 'baseline')
    if baseline_value <= 0:
        raise ComparisonError('the baseline produced no output tokens, so there is nothing to compare against')
    delta_pct = percent_change(variant_value, baseline_value)
    if variant_ci is not None and baseline_ci is not None:
        method = 'ci95'
        threshold_pct = math.hypot(variant_ci, baseline_ci) * 100.0 / baseline_value
    else:
        method = 'noise_band'
        threshold_pct = float(noise_pct)
    if delta_pct > threshold_pct:
        verdict = FASTER
    elif delta_pct < -threshold_pct:
        verdict = SLOWER
    else:
        verdict = WITHIN_NOISE
    lower_bound_pct = delta_pct - threshold_pct if method == 'ci95' else delta_pct
    return LevelVerdict(
        max_concurrency=variant.get('max_concurrency'),
        verdict=verdict,
        delta_pct=delta_pct,
        method=method,
        threshold_pct=threshold_pct,
        variant_output_throughput=variant_value,
        baseline_output_throughput=baseline_value,
        tpot_delta_pct=percent_change(metric_number(variant, 'median_tpot_ms', 'variant'),
                                      metric_number(baseline, 'median_tpot_ms', 'baseline')),
        ttft_delta_pct=percent_change(metric_number(variant, 'median_ttft_ms', 'variant'),
                                      metric_number(baseline, 'median_ttft_ms', 'baseline')),
        lower_bound_pct=lower_bound_pct,
        not_slower=lower_bound_pct >= -noise_pct,
    )


def overall_verdict(verdicts: Iterable[str]) -> str:
    """One verdict for several levels: slower anywhere loses, otherwise faster anywhere wins."""
    verdicts = list(verdicts)
    if SLOWER in verdicts:
        return SLOWER
    if FASTER in verdicts:
        return FASTER
    return WITHIN_NOISE


def benchmark_levels(value: t.Any, side: str = 'result') -> list[Mapping[str, t.Any]]:
    """The per-level dicts of a whole openai_benchmark result, a list of levels, or one level."""
    if isinstance(value, Mapping):
        levels = value['results'] if 'results' in value else [value]
    elif isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        levels = value
    else:
        raise ComparisonError(
            f'the {side} must be an openai_benchmark result, a list of its results or one of them,'
            f' not {plain_type_name(value)}')
    if not isinstance(levels, Sequence) or isinstance(levels, (str, bytes)):
        raise ComparisonError(f'the results of the {side} must be a list')
    if not levels:
        raise ComparisonError(f'the {side} holds no benchmark results')
    if not all(isinstance(level, Mapping) for level in levels):
        raise ComparisonError(f'every result of the {side} must be a dictionary')
    return list(levels)


def compare_results(variant: t.Any, baseline: t.Any, noise_pct: float = DEFAULT_NOISE_PCT) -> dict[str, t.Any]:
    """Compare every concurrency level the two results share; see the module docstring for the rule.

    The overall delta_pct is the mean of the levels' deltas.
    """
    variant_levels = by_concurrency(benchmark_levels(variant, 'variant'), 'variant')
    baseline_levels = by_concurrency(benchmark_levels(baseline, 'baseline'), 'baseline')
    shared = [level for level in variant_levels if level in baseline_levels]
    if not shared:
        raise ComparisonError(
            f'the variant (max_concurrency {sorted(variant_levels, key=_concurrency_order)}) and the baseline'
            f' (max_concurrency {sorted(baseline_levels, key=_concurrency_order)}) share no concurrency level')
    judged = [compare_level(variant_levels[level], baseline_levels[level], noise_pct) for level in shared]
    return {
        'verdict': overall_verdict(level.verdict for level in judged),
        'not_slower': all(level.not_slower for level in judged),
        'delta_pct': sum(level.delta_pct for level in judged) / len(judged),
        'noise_pct': float(noise_pct),
        'levels': [level.as_dict() for level in judged],
    }


def differing_options(first: Mapping[str, t.Any], second: Mapping[str, t.Any]) -> list[str]:
    """Names of the benchmark options that differ between two runs and change what is measured."""
    names = (set(first) | set(second)) - _OPTIONS_NOT_AFFECTING_RESULTS
    return sorted(name for name in names if first.get(name) != second.get(name))


@dataclasses.dataclass(frozen=True)
class ComparisonRow:
    """A stored record beside the baseline record it is judged against."""

    record: t.Any
    baseline: t.Any = None
    verdict: LevelVerdict | None = None
    problem: str | None = None
    differing_options: tuple[str, ...] = ()

    @property
    def baseline_from_same_run(self) -> bool:
        return self.baseline is not None and self.baseline.run_id == self.record.run_id


def comparison_rows(records: Iterable[t.Any], baseline_candidates: Iterable[t.Any], baseline_variant: str,
                    noise_pct: float = DEFAULT_NOISE_PCT) -> dict[tuple[str, str], list[ComparisonRow]]:
    """Rows per (host, model): the latest record of each variant and level, judged against a baseline.

    Records are results_store records. The baseline of a record is the latest successful baseline
    record of the same host, model, workload and concurrency from the same run; failing that, the
    latest one recorded before it. The baseline variant's own rows come first and carry no verdict.
    """
    candidates = [candidate for candidate in baseline_candidates
                  if candidate.variant == baseline_variant and not candidate.task_failed]
    groups: dict[tuple[str, str], list[ComparisonRow]] = {}
    for record in _latest_per_series(records):
        if record.variant == baseline_variant:
            row = ComparisonRow(record=record)
        else:
            row = _judge(record, _select_baseline(record, candidates), noise_pct)
        groups.setdefault((record.host, record.model), []).append(row)
    for rows in groups.values():
        rows.sort(key=lambda row: (row.record.variant != baseline_variant, row.record.variant,
                                   row.record.workload, _concurrency_order(row.record.max_concurrency)))
    return dict(sorted(groups.items()))


def _judge(record: t.Any, baseline: t.Any, noise_pct: float) -> ComparisonRow:
    if baseline is None:
        return ComparisonRow(record=record, problem='no baseline measured at this concurrency')
    differing = tuple(differing_options(record.options, baseline.options))
    try:
        verdict = compare_level(record.metrics, baseline.metrics, noise_pct)
    except ComparisonError as error:
        return ComparisonRow(record=record, baseline=baseline, problem=str(error), differing_options=differing)
    return ComparisonRow(record=record, baseline=baseline, verdict=verdict, differing_options=differing)


def _select_baseline(record: t.Any, candidates: list[t.Any]) -> t.Any:
    same_level = [candidate for candidate in candidates
                  if (candidate.host, candidate.model, candidate.workload, candidate.max_concurrency)
                  == (record.host, record.model, record.workload, record.max_concurrency)]
    same_run = [candidate for candidate in same_level if candidate.run_id == record.run_id]
    earlier = [candidate for candidate in same_level if candidate.recorded_at <= record.recorded_at]
    for pool in (same_run, earlier):
        if pool:
            return max(pool, key=_chronological)
    return None


def _latest_per_series(records: Iterable[t.Any]) -> list[t.Any]:
    latest: dict[tuple[t.Any, ...], t.Any] = {}
    for record in sorted(records, key=_chronological):
        latest[(record.host, record.model, record.variant, record.workload, record.max_concurrency)] = record
    return list(latest.values())


def _chronological(record: t.Any) -> tuple[str, float]:
    # Rows of one second are ordered by insertion, which the row id keeps; unsaved records sort last.
    return record.recorded_at, record.row_id if record.row_id is not None else math.inf


def _concurrency_order(max_concurrency: int | None) -> tuple[bool, int]:
    # No concurrency limit means more load than any limit, so it sorts last.
    return max_concurrency is None, max_concurrency or 0


def by_concurrency(levels: list[Mapping[str, t.Any]], side: str) -> dict[int | None, Mapping[str, t.Any]]:
    by_level: dict[int | None, Mapping[str, t.Any]] = {}
    for level in levels:
        key = level.get('max_concurrency')
        if key in by_level:
            raise ComparisonError(f'the {side} has more than one result at max_concurrency {key}')
        by_level[key] = level
    return by_level


def metric_number(metrics: Mapping[str, t.Any], key: str, side: str) -> float | None:
    value = metrics.get(key)
    if value is None:
        return None
    if isinstance(value, bool):
        raise ComparisonError(f'{key} of the {side} must be a number, got {value!r}')
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ComparisonError(f'{key} of the {side} must be a number, got {value!r}') from None
    if not math.isfinite(number):
        raise ComparisonError(f'{key} of the {side} must be finite, got {value!r}')
    return number
