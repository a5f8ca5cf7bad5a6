# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What a node's baseline lifetimes say about the trials it can afford.

A calibration restarts the baseline warm several times and benchmarks every lifetime with two runs. From those
lifetimes it measures how much a lifetime's speed varies from one start to the next (the lifetime CV) and from one
run to the next inside a start (the run CV), how long a warm restart takes, and whether the starts fall into two
groups or drift from the first to the last. From the lifetime CV and the trial's rule (_lifetime_verdict) it works
out how many lifetimes a side a trial needs before a variant as fast as the baseline is kept, and how long the
node is out of service for that; when that exceeds the trial's maximum, the margin cannot be resolved on this node.
"""

from __future__ import annotations

import math
import statistics
import typing as t
from collections.abc import Iterable, Mapping, Sequence

from ansible_collections.llmops.vllm.plugins.module_utils._benchmark_statistics import t_critical
from ansible_collections.llmops.vllm.plugins.plugin_utils import _lifetime_verdict as verdict
from ansible_collections.llmops.vllm.plugins.plugin_utils._comparison import ComparisonError, benchmark_levels, by_concurrency
from ansible_collections.llmops.vllm.plugins.plugin_utils._decision import baseline_lifetimes, runs_of
from ansible_collections.llmops.vllm.plugins.plugin_utils._workloads import WorkloadError, workload_results

# Fewer lifetimes than this tell too little of their spread to plan trials on.
MIN_CALIBRATION_LIFETIMES = 3
# What playbooks/calibrate.yml restarts at least: the bimodality coefficient needs eight lifetimes.
CALIBRATION_LIFETIMES = 8
# The bimodality coefficient above which a sample is taken for two groups (a uniform distribution gives 5/9).
BIMODAL_COEFFICIENT = 5.0 / 9.0
# Lifetimes that rise or fall by more than this share of their spread per start, and fit a line well, drift.
DRIFT_CORRELATION = 0.7
# Planned trials longer than this many lifetimes a side are not worth simulating further.
_PLAN_LIMIT = 50


class CalibrationError(ValueError):
    """The calibration's measurements cannot be read."""


def _cv_pct(logs: Sequence[float]) -> float | None:
    """The coefficient of variation, in percent, of values given as natural logs (their standard deviation)."""
    if len(logs) < 2:
        return None
    return round(100.0 * statistics.stdev(logs), 2)


def bimodality_coefficient(values: Sequence[float]) -> float | None:
    """Sarle's bimodality coefficient (skewness squared plus one, over the sample kurtosis), from 8 values on."""
    count = len(values)
    if count < 8:
        return None
    mean = statistics.fmean(values)
    deviations = [value - mean for value in values]
    second = sum(value ** 2 for value in deviations) / count
    if second == 0:
        return 0.0
    skew = (sum(value ** 3 for value in deviations) / count) / second ** 1.5
    kurtosis = (sum(value ** 4 for value in deviations) / count) / second ** 2 - 3.0
    skew *= math.sqrt(count * (count - 1)) / (count - 2)
    kurtosis = ((count + 1) * kurtosis + 6) * (count - 1) / ((count - 2) * (count - 3))
    return (skew ** 2 + 1) / (kurtosis + 3.0 * (count - 1) ** 2 / ((count - 2) * (count - 3)))


def _drift(logs: Sequence[float]) -> dict[str, t.Any]:
    """The straight-line trend of the lifetimes in the order started: percent per start, and how well it fits."""
    count = len(logs)
    if count < 4:
        return {'pct_per_start': None, 'correlation': None, 'drifts': False}
    order = list(range(count))
    mean_x, mean_y = statistics.fmean(order), statistics.fmean(logs)
    sxx = sum((x - mean_x) ** 2 for x in order)
    syy = sum((y - mean_y) ** 2 for y in logs)
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in zip(order, logs))
    if syy == 0:
        return {'pct_per_start': 0.0, 'correlation': 0.0, 'drifts': False}
    correlation = sxy / math.sqrt(sxx * syy)
    return {'pct_per_start': round(100.0 * sxy / sxx, 3), 'correlation': round(correlation, 3),
            'drifts': abs(correlation) >= DRIFT_CORRELATION}


def lifetimes_needed(lifetime_cv_pct: float, margin_pct: float, history: int = 0,
                     keep_when: str = verdict.NOT_SLOWER) -> int | None:
    """The lifetimes a side after which a variant exactly as fast as the baseline is kept, at this spread.

    The keeping bound of the trial's look (its interval at KEEP_CONFIDENCE, the variant's spread taken as the
    baseline's) must clear the margin; keep_when=faster has no such number (a variant as fast is never shown faster).
    None when more than _PLAN_LIMIT would be needed.
    """
    if keep_when == verdict.FASTER:
        return None
    spread = lifetime_cv_pct / 100.0
    bound = -math.log(1.0 - margin_pct / 100.0)
    if spread == 0:
        return verdict.MIN_LIFETIMES
    for count in range(verdict.MIN_LIFETIMES, _PLAN_LIMIT + 1):
        part = spread ** 2 / count
        pooled = count + history
        df = (2 * part) ** 2 / (part ** 2 / (pooled - 1) + part ** 2 / (count - 1))
        if t_critical(df, verdict.KEEP_CONFIDENCE) * math.sqrt(2 * part) <= bound:
            return count
    return None


def summarise(lifetimes: Sequence[Sequence[float]], *, warm_restart_s: Iterable[float] = (),
              cold_load_s: Iterable[float] = (), benchmark_s: float | None = None, history: int = 0,
              margin_pct: float = 8.0, keep_when: str = verdict.NOT_SLOWER,
              max_lifetimes: int = 10) -> dict[str, t.Any]:
    """The node's figures and what they mean for its trials.

    lifetimes holds, per lifetime in the order started, its runs' output tokens/s. warm_restart_s and cold_load_s
    are the seconds that warm restarts and cold loads took (the calibration's, and the trials' first loads of a
    variant); benchmark_s how long one lifetime's benchmark took; history the baseline's lifetimes stored before.
    """
    if len(lifetimes) < MIN_CALIBRATION_LIFETIMES:
        raise CalibrationError(f'a calibration needs at least {MIN_CALIBRATION_LIFETIMES} lifetimes, got {len(lifetimes)}')
    try:
        figures = [verdict.lifetime_figure(runs) for runs in lifetimes]
    except verdict.LifetimeVerdictError as error:
        raise CalibrationError(str(error)) from None
    within = [math.log(value) - figure for runs, figure in zip(lifetimes, figures) for value in runs]
    runs_counted = sum(len(runs) for runs in lifetimes)
    run_cv = None
    if runs_counted > len(lifetimes):
        run_cv = round(100.0 * math.sqrt(sum(value ** 2 for value in within) / (runs_counted - len(lifetimes))), 2)
    lifetime_cv = _cv_pct(figures)
    warm = sorted(float(value) for value in warm_restart_s)
    cold = sorted(float(value) for value in cold_load_s)
    warm_s = statistics.median(warm) if warm else None
    cold_s = statistics.median(cold) if cold else None
    coefficient = bimodality_coefficient(figures)
    needed = lifetimes_needed(lifetime_cv or 0.0, margin_pct, history + len(lifetimes), keep_when)
    dark_s = None
    if needed is not None and warm_s is not None:
        # A warm restart of the baseline, the variant's cold load (a warm one where no cold load was measured),
        # then a warm restart for every other lifetime, and a benchmark in each.
        dark_s = warm_s + (cold_s if cold_s is not None else warm_s) + warm_s * (2 * needed - 2) \
            + (benchmark_s or 0.0) * 2 * needed
    answer = {
        'lifetimes': len(figures),
        'figures': [round(math.exp(figure), 2) for figure in figures],
        'lifetime_cv_pct': lifetime_cv,
        'run_cv_pct': run_cv,
        # Two runs a lifetime only pay where runs inside a lifetime vary as much as lifetimes do.
        'runs_per_lifetime': 2 if run_cv is not None and lifetime_cv is not None and run_cv >= lifetime_cv else 1,
        'warm_restart_s': warm_s,
        'cold_load_s': cold_s,
        'cold_warm_ratio': round(cold_s / warm_s, 2) if cold_s and warm_s else None,
        'bimodality_coefficient': None if coefficient is None else round(coefficient, 3),
        'bimodal': coefficient is not None and coefficient > BIMODAL_COEFFICIENT,
        'drift': _drift(figures),
        'outliers': verdict.outliers(figures),
        'margin_pct': margin_pct,
        'keep_when': keep_when,
        'max_lifetimes': max_lifetimes,
        'lifetimes_needed': needed,
        'dark_minutes': None if dark_s is None else round(dark_s / 60.0, 1),
        'resolvable': needed is not None and needed <= max_lifetimes,
    }
    answer['report'] = report_lines(answer)
    return answer


def _seconds(value: float | None) -> str:
    return 'not measured' if value is None else f'{value:.0f} s'


def report_lines(answer: Mapping[str, t.Any]) -> list[str]:
    """What the calibration says, line by line."""
    lines = [
        f'{answer["lifetimes"]} lifetimes of the baseline (output tok/s): '
        + ', '.join(f'{value:.1f}' for value in answer['figures']),
        f'lifetime CV {answer["lifetime_cv_pct"]}%, run CV '
        + (f'{answer["run_cv_pct"]}%' if answer['run_cv_pct'] is not None else 'not measured (one run a lifetime)')
        + f'; {answer["runs_per_lifetime"]} run(s) a lifetime pay (vllm_switch_lifetime_runs)',
        f'restart: warm {_seconds(answer["warm_restart_s"])}, cold {_seconds(answer["cold_load_s"])}'
        + (f' ({answer["cold_warm_ratio"]}x warm)' if answer['cold_warm_ratio'] else ''),
        'starts: ' + ('bimodal (coefficient %s)' % answer['bimodality_coefficient'] if answer['bimodal']
                      else 'one group' if answer['bimodality_coefficient'] is not None
                      else 'too few lifetimes to tell one group from two')
        + '; ' + (f'drift {answer["drift"]["pct_per_start"]:+.2f}% a start' if answer['drift']['drifts']
                  else 'no drift from start to start'),
    ]
    if answer['outliers']:
        lines.append('outlier lifetime(s): ' + ', '.join(str(index + 1) for index in answer['outliers']))
    if answer['resolvable']:
        lines.append(f'a trial at a {answer["margin_pct"]:g}% margin needs about {answer["lifetimes_needed"]} lifetimes a '
                     f'side for a variant as fast as the baseline; the node is out of service for about '
                     + (f'{answer["dark_minutes"]} min' if answer['dark_minutes'] is not None else 'an unmeasured time'))
    elif answer['keep_when'] == verdict.FASTER:
        lines.append('keep_when=faster: how long a trial takes depends on the gain; a variant as fast as the baseline '
                     'is rolled back')
    else:
        lines.append(f'a {answer["margin_pct"]:g}% margin cannot be resolved on this node: a variant as fast as the '
                     f'baseline would need '
                     + (f'{answer["lifetimes_needed"]}' if answer['lifetimes_needed'] else f'more than {_PLAN_LIMIT}')
                     + f' lifetimes a side, more than vllm_switch_max_lifetimes ({answer["max_lifetimes"]}); widen the '
                       'margin or reduce what makes lifetimes differ')
    return lines


def cold_loads(history: Iterable[t.Any], baseline: str) -> list[float]:
    """Seconds of the cold loads on record: in each trial, the first start of its variant (the baseline's are warm)."""
    seconds = []
    for entry in history:
        if not isinstance(entry, Mapping) or not isinstance(entry.get('starts'), list):
            continue
        seen = set()
        for start in entry['starts']:
            if not isinstance(start, Mapping) or start.get('variant') in (None, baseline) or start['variant'] in seen:
                continue
            seen.add(start['variant'])
            if isinstance(start.get('seconds'), (int, float)) and start['seconds'] > 0:
                seconds.append(float(start['seconds']))
    return seconds


def calibrate_levels(lifetimes: Sequence[t.Any], *, warm_restart_s: Iterable[float] = (),
                     node_history: Iterable[t.Any] = (), cold_load_s: Iterable[float] | None = None,
                     baseline: str = 'baseline', benchmark_s: float | None = None, history: int = 0,
                     margin_pct: float = 8.0, keep_when: str = verdict.NOT_SLOWER,
                     max_lifetimes: int = 10) -> dict[str, t.Any]:
    """summarise() for every workload and level of the calibration's lifetimes; the one that varies most speaks.

    lifetimes are {benchmark} dicts, each benchmark one lifetime's openai_benchmark result(s). The answer also
    holds baseline_lifetimes, the lifetimes as trial records keep them for later trials (_decision.history_from_node).
    cold_load_s, when given, are the cold loads on record; otherwise they are read from node_history (cold_loads).
    """
    if not isinstance(lifetimes, Sequence) or isinstance(lifetimes, (str, bytes)):
        raise CalibrationError(f'lifetimes must be a list, got {type(lifetimes).__name__}')
    by_level: dict[tuple[str, t.Any], list[list[float]]] = {}
    kept = []
    for index, lifetime in enumerate(lifetimes):
        if not isinstance(lifetime, Mapping):
            raise CalibrationError(f'lifetime {index + 1} is not a mapping')
        try:
            results = workload_results(lifetime.get('benchmark'), f'lifetime {index + 1}')
            for workload, result in results.items():
                for key, level in by_concurrency(benchmark_levels(result, workload), workload).items():
                    by_level.setdefault((workload, key), []).append(runs_of(level))
        except (WorkloadError, ComparisonError) as error:
            raise CalibrationError(str(error)) from None
        kept.extend(baseline_lifetimes(lifetime.get('benchmark')))
    cold = list(cold_load_s) if cold_load_s is not None else cold_loads(node_history, baseline)
    levels = []
    for (workload, key), runs in by_level.items():
        summary = summarise(runs, warm_restart_s=warm_restart_s, cold_load_s=cold, benchmark_s=benchmark_s,
                            history=history, margin_pct=margin_pct, keep_when=keep_when, max_lifetimes=max_lifetimes)
        summary.update(workload=workload, max_concurrency=key)
        levels.append(summary)
    if not levels:
        raise CalibrationError('the calibration measured no level')
    worst = max(levels, key=lambda level: level['lifetime_cv_pct'] or 0.0)
    answer = {name: value for name, value in worst.items() if name not in ('workload', 'max_concurrency', 'report')}
    where = f'workload {worst["workload"]} at concurrency {"unlimited" if worst["max_concurrency"] is None else worst["max_concurrency"]}'
    answer.update(levels=levels, baseline_lifetimes=kept,
                  report=[f'{where} (the level whose lifetimes vary most):'] + worst['report'])
    return answer
