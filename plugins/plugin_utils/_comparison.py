# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A variant's results beside the baseline's: the changes in percent, and which baseline each is measured against.

This module labels nothing. Whether a variant is faster, not slower or slower is the decision's
(plugin_utils._decision), taken once per trial on its runs and the baseline's lifetimes; the console
table and the report show that decision, or show a result as undecided when no trial decided it.
"""

from __future__ import annotations

import dataclasses
import math
import typing as t
from collections.abc import Iterable, Mapping, Sequence

from ansible_collections.llmops.vllm.plugins.module_utils._type_names import plain_type_name

# Benchmark options that do not change the workload of one concurrency level: levels are matched
# by concurrency, repeats only narrow the confidence interval, and the rest is plumbing.
_OPTIONS_NOT_AFFECTING_RESULTS = frozenset(
    ('api_key', 'concurrency', 'labels', 'metrics_url', 'repeats', 'timeout', 'warmup_requests'))


class ComparisonError(ValueError):
    """The two results cannot be compared; the message says why."""


@dataclasses.dataclass(frozen=True)
class LevelChange:
    """How one concurrency level of a variant differs from the same level of the baseline, in percent."""

    max_concurrency: int | None
    delta_pct: float
    variant_output_throughput: float
    baseline_output_throughput: float
    tpot_delta_pct: float | None
    ttft_delta_pct: float | None

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


def level_change(variant: Mapping[str, t.Any], baseline: Mapping[str, t.Any]) -> LevelChange:
    """The changes of one concurrency level of a variant against the same level of the baseline."""
    variant_value = output_throughput(variant, 'variant')[0]
    baseline_value = output_throughput(baseline, 'baseline')[0]
    if baseline_value <= 0:
        raise ComparisonError('the baseline produced no output tokens, so there is nothing to compare against')
    return LevelChange(
        max_concurrency=variant.get('max_concurrency'),
        delta_pct=percent_change(variant_value, baseline_value),
        variant_output_throughput=variant_value,
        baseline_output_throughput=baseline_value,
        tpot_delta_pct=percent_change(metric_number(variant, 'median_tpot_ms', 'variant'),
                                      metric_number(baseline, 'median_tpot_ms', 'baseline')),
        ttft_delta_pct=percent_change(metric_number(variant, 'median_ttft_ms', 'variant'),
                                      metric_number(baseline, 'median_ttft_ms', 'baseline')),
    )


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


def differing_options(first: Mapping[str, t.Any], second: Mapping[str, t.Any]) -> list[str]:
    """Names of the benchmark options that differ between two runs and change what is measured."""
    names = (set(first) | set(second)) - _OPTIONS_NOT_AFFECTING_RESULTS
    return sorted(name for name in names if first.get(name) != second.get(name))


@dataclasses.dataclass(frozen=True)
class ComparisonRow:
    """A stored record beside the baseline record it is measured against."""

    record: t.Any
    baseline: t.Any = None
    change: LevelChange | None = None
    problem: str | None = None
    differing_options: tuple[str, ...] = ()

    @property
    def baseline_from_same_run(self) -> bool:
        return self.baseline is not None and self.baseline.run_id == self.record.run_id


def comparison_rows(records: Iterable[t.Any], baseline_candidates: Iterable[t.Any],
                    baseline_variant: str) -> dict[tuple[str, str], list[ComparisonRow]]:
    """Rows per (host, model): the latest record of each variant and level, beside a baseline.

    Records are results_store records. The baseline of a record is the latest successful baseline
    record of the same host, model, workload and concurrency from the same run; failing that, the
    latest one recorded before it. The baseline variant's own rows come first and carry no change.
    """
    candidates = [candidate for candidate in baseline_candidates
                  if candidate.variant == baseline_variant and not candidate.task_failed]
    groups: dict[tuple[str, str], list[ComparisonRow]] = {}
    for record in _latest_per_series(records):
        if record.variant == baseline_variant:
            row = ComparisonRow(record=record)
        else:
            row = _beside(record, _select_baseline(record, candidates))
        groups.setdefault((record.host, record.model), []).append(row)
    for rows in groups.values():
        rows.sort(key=lambda row: (row.record.variant != baseline_variant, row.record.variant,
                                   row.record.workload, _concurrency_order(row.record.max_concurrency)))
    return dict(sorted(groups.items()))


def _beside(record: t.Any, baseline: t.Any) -> ComparisonRow:
    if baseline is None:
        return ComparisonRow(record=record, problem='no baseline measured at this concurrency')
    differing = tuple(differing_options(record.options, baseline.options))
    try:
        change = level_change(record.metrics, baseline.metrics)
    except ComparisonError as error:
        return ComparisonRow(record=record, baseline=baseline, problem=str(error), differing_options=differing)
    return ComparisonRow(record=record, baseline=baseline, change=change, differing_options=differing)


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
