# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""How long a trial keeps the node out of service, said before anything stops.

The node is dark from the baseline's first benchmark (the node leaves the load balancer for it) until the side that
the decision keeps serves again. What fills that time is known from the trial's order (_trial): stops, starts
of the model and benchmarks. Their lengths come from the node's own records where it has them: the starts that
earlier trials timed, cold (a variant's first load in a trial) and warm (every other), and the seconds a request
took at each workload's concurrency. A figure the node has not measured yet is assumed, and named as assumed, so
that the operator knows how far to trust the plan.
"""

from __future__ import annotations

import math
import statistics
import typing as t
from collections.abc import Iterable, Mapping, Sequence

from ansible_collections.llmops.vllm.plugins.module_utils._benchmark_options import ARGUMENT_SPEC, measured_prompts
from ansible_collections.llmops.vllm.plugins.plugin_utils._lifetime_verdict import first_look
from ansible_collections.llmops.vllm.plugins.plugin_utils._workloads import WorkloadError, workload_results

# vLLM's own shutdown, then the GPUs' memory coming free: the mock's serving stops took 3 s median, 7.7 s at worst.
ASSUMED_STOP_S = 10.0


class DarkWindowError(ValueError):
    """The plan's inputs cannot be read."""


def _default(option: str) -> t.Any:
    return ARGUMENT_SPEC[option]["default"]


def recorded_starts(records: Mapping[str, Mapping[str, t.Any]], baseline: str) -> tuple[list[float], dict[str, list[float]]]:
    """(warm start seconds, cold start seconds by variant) from the trials on record.

    In a trial's record the starts are in the order they happened. A variant's first start there is cold: its weights
    were not the ones in the page cache and its compile cache may be new. Every other start, the baseline's
    included (it served just before), is a warm restart.
    """
    warm: list[float] = []
    cold: dict[str, list[float]] = {}
    for record in records.values():
        seen: set[str] = set()
        for start in (record or {}).get('starts') or []:
            seconds, variant = start.get('seconds'), start.get('variant')
            if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or seconds <= 0:
                continue
            if variant and variant != baseline and variant not in seen:
                cold.setdefault(variant, []).append(float(seconds))
            else:
                warm.append(float(seconds))
            if variant:
                seen.add(variant)
    return warm, cold


def benchmark_timing(results: t.Any) -> list[dict[str, t.Any]]:
    """One row per workload and concurrency level of a benchmark: requests completed, their seconds, output tokens.

    Takes what the role's benchmark task registers (a loop over workloads), one module result or a list of them.
    The trial's record keeps these rows; the next trial's plan reads the node's speed from them.
    """
    try:
        by_workload = workload_results(results, 'benchmark')
    except WorkloadError as error:
        raise DarkWindowError(str(error)) from None
    rows = []
    for workload, result in by_workload.items():
        for level in result.get('results') or []:
            # Durations add up over repeats, and completed pools them: their ratio is seconds a request.
            if isinstance(level, Mapping) and level.get('completed') and level.get('duration'):
                rows.append({
                    'workload': workload,
                    'concurrency': int(level.get('max_concurrency') or 1),
                    'requests': int(level['completed']),
                    'seconds': round(float(level['duration']), 3),
                    'output_tokens': int(level.get('total_output_tokens') or 0),
                })
    return rows


def _latest_timing(records: Mapping[str, Mapping[str, t.Any]]) -> dict[tuple[str, int], dict[str, t.Any]]:
    latest: dict[tuple[str, int], tuple[str, dict[str, t.Any]]] = {}
    for record in records.values():
        when = str((record or {}).get('recorded_at') or '')
        for row in (record or {}).get('benchmark_timing') or []:
            key = (row.get('workload'), int(row.get('concurrency') or 1))
            if row.get('requests') and row.get('seconds') and (key not in latest or latest[key][0] < when):
                latest[key] = (when, row)
    return {key: row for key, (when, row) in latest.items()}


def _level_seconds(workload: Mapping[str, t.Any], concurrency: int, timing: Mapping[tuple[str, int], Mapping[str, t.Any]],
                   stream_tok_s: float | None) -> tuple[float | None, str, bool]:
    """Seconds one level of a workload takes on one side, where the figure comes from, and whether it was measured."""
    options = workload.get('options') or {}
    repeats = int(options.get('repeats') or workload.get('repeats') or 1)
    warmups = int(options.get('warmup_requests', _default('warmup_requests')))
    prompts = measured_prompts(dict(options, num_prompts=options.get('num_prompts')))
    if prompts is None:
        return _window_seconds(workload, concurrency, repeats, warmups, timing, stream_tok_s)
    requests = prompts * repeats + warmups
    rate = options.get('request_rate')
    floor = requests / float(rate) if rate else 0.0
    row = timing.get((workload['name'], concurrency))
    if row:
        per_request = float(row['seconds']) / int(row['requests'])
        return max(requests * per_request, floor), (
            f"{workload['name']} at concurrency {concurrency}: {per_request:.2f} s a request, measured over "
            f"{row['requests']} requests"), True
    same_level = [row for (name, level), row in timing.items() if level == concurrency]
    if same_level:
        row = same_level[0]
        per_request = float(row['seconds']) / int(row['requests'])
        return max(requests * per_request, floor), (
            f"{workload['name']} at concurrency {concurrency}: {per_request:.2f} s a request, as measured for "
            f"{row['workload']} (assumed alike)"), False
    max_tokens = int(options.get('max_tokens') or _default('max_tokens'))
    if stream_tok_s:
        seconds = math.ceil(requests / concurrency) * max_tokens / float(stream_tok_s)
        return max(seconds, floor), (
            f"{workload['name']} at concurrency {concurrency}: assumed {max_tokens} tokens a request at "
            f"{stream_tok_s:g} tok/s a stream (an upper bound: answers that end sooner take less)"), False
    return None, f"{workload['name']} at concurrency {concurrency}: no speed on record and none assumed", False


def _window_seconds(workload: Mapping[str, t.Any], concurrency: int, repeats: int, warmups: int,
                    timing: Mapping[tuple[str, int], Mapping[str, t.Any]],
                    stream_tok_s: float | None) -> tuple[float | None, str, bool]:
    """A time-boxed level takes its warm-up and window each repeat, whatever the answers' lengths, plus its warm-up
    requests, timed as the node answered this level before, else as max_tokens at the assumed stream speed."""
    options = workload.get('options') or {}
    windows = repeats * (float(options.get('warmup_s') or 0.0) + float(options['duration_s']))
    said = f"{workload['name']} at concurrency {concurrency}: {repeats} window(s) of {windows / repeats:g} s"
    if not warmups:
        return windows, said + ' (time-boxed)', True
    row = timing.get((workload['name'], concurrency))
    if row:
        per_request = float(row['seconds']) / int(row['requests'])
        return windows + warmups * per_request, (
            f'{said} and {warmups} warm-up request(s) at {per_request:.2f} s, measured'), True
    if stream_tok_s:
        max_tokens = int(options.get('max_tokens') or _default('max_tokens'))
        seconds = math.ceil(warmups / concurrency) * max_tokens / float(stream_tok_s)
        return windows + seconds, (
            f'{said} and {warmups} warm-up request(s) of at most {max_tokens} tokens at {stream_tok_s:g} tok/s a '
            'stream (an upper bound)'), False
    return None, f'{said}, and its warm-up requests: no speed on record and none assumed', False


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def plan(records: Mapping[str, Mapping[str, t.Any]], *, baseline: str, variant: str,
         workloads: Iterable[Mapping[str, t.Any]], max_lifetimes: int = 0, expected_load_s: float | None = None,
         stream_tok_s: float | None = None, stop_s: float | None = None,
         expected_warm_restart_s: float | None = None) -> dict[str, t.Any]:
    """The node's planned dark window for a trial of variant against baseline, in minutes, with its sources.

    records maps each variant to its latest trial record on the node. Lifetimes are interleaved, from the first look
    (the second pair, or the one pair of a trial of one lifetime a side) to max_lifetimes a side (0 is read as 1).
    expected_load_s stands in for starts the node never timed, expected_warm_restart_s for a warm restart it never
    timed (a restart whose weights are in the page cache is far shorter than a cold load); stream_tok_s for a speed
    it never measured.
    """
    if not isinstance(records, Mapping):
        raise DarkWindowError(f'records must be a mapping of variant to record, got {type(records).__name__}')
    if max_lifetimes < 0:
        raise DarkWindowError(f'max_lifetimes must not be negative, got {max_lifetimes}')
    assumed: list[str] = []
    measured: list[str] = []
    warm_starts, cold_starts = recorded_starts(records, baseline)
    warm_s = _median(warm_starts)
    if warm_s is not None:
        measured.append(f'warm restart {warm_s:.0f} s (median of {len(warm_starts)} recorded)')
    cold_own = cold_starts.get(variant, [])
    cold_any = [value for values in cold_starts.values() for value in values]
    cold_s = _median(cold_own) or _median(cold_any)
    if cold_own:
        measured.append(f'cold load of {variant} {cold_s:.0f} s (median of {len(cold_own)} recorded)')
    elif cold_any:
        assumed.append(f'cold load {cold_s:.0f} s, as other variants\' first loads took (median of {len(cold_any)})')
    if warm_s is None and expected_warm_restart_s:
        warm_s = float(expected_warm_restart_s)
        assumed.append(f'warm restart {warm_s:.0f} s (vllm_switch_expected_warm_restart_s)')
    if warm_s is None:
        if cold_s is not None:
            warm_s = cold_s
            assumed.append(f'warm restart {warm_s:.0f} s, as long as a cold load')
        elif expected_load_s:
            warm_s = float(expected_load_s)
            assumed.append(f'warm restart {warm_s:.0f} s (vllm_expected_load_seconds)')
    if cold_s is None and warm_s is not None:
        cold_s = float(expected_load_s) if expected_load_s else warm_s
        source = ' (vllm_expected_load_seconds)' if expected_load_s else ', as long as a warm restart'
        assumed.append(f'cold load {cold_s:.0f} s{source}')
    if warm_s is None:
        assumed.append('starts: not known (none on record, and no vllm_expected_load_seconds)')
    stop = float(stop_s) if stop_s else ASSUMED_STOP_S
    (measured if stop_s else assumed).append(f'{stop:.0f} s a stop')
    timing = _latest_timing(records)
    benchmark_s: float | None = 0.0
    for workload in workloads:
        for concurrency in (workload.get('options') or {}).get('concurrency') or _default('concurrency'):
            seconds, source, was_measured = _level_seconds(workload, int(concurrency), timing, stream_tok_s)
            (measured if was_measured else assumed).append(source)
            benchmark_s = None if seconds is None or benchmark_s is None else benchmark_s + seconds
    known = warm_s is not None and cold_s is not None and benchmark_s is not None
    max_lifetimes = max(1, max_lifetimes)
    fewest, most = first_look(max_lifetimes), max_lifetimes

    def dark(lifetimes: int, rolled_back: bool) -> float | None:
        if not known:
            return None
        return dark_seconds(lifetimes, rolled_back, stop_s=stop, warm_s=warm_s, cold_s=cold_s, benchmark_s=benchmark_s)

    least, most_s = dark(fewest, False), dark(most, True)
    answer = {
        'least_minutes': None if least is None else round(least / 60.0, 1),
        'most_minutes': None if most_s is None else round(most_s / 60.0, 1),
        'lifetimes': {'fewest': fewest, 'most': most},
        # What each pair of lifetimes after the first look adds: two warm restarts, two stops, two benchmarks.
        'pair_minutes': (round(2 * (stop + warm_s + benchmark_s) / 60.0, 1)
                         if known and max_lifetimes > 1 else None),
        'warm_restart_s': None if warm_s is None else round(warm_s, 1),
        'cold_load_s': None if cold_s is None else round(cold_s, 1),
        'stop_s': stop,
        'benchmark_s': None if benchmark_s is None else round(benchmark_s, 1),
        'measured': measured,
        'assumed': assumed,
    }
    answer['lines'] = plan_lines(answer, variant)
    return answer


def dark_seconds(lifetimes: int, rolled_back: bool, *, stop_s: float, warm_s: float, cold_s: float,
                 benchmark_s: float) -> float:
    """Seconds out of service for a trial of ``lifetimes`` a side, ended by a rollback or not.

    The baseline restarts warm, the variant loads cold, then each side restarts warm for every further pair; each
    lifetime is stopped once and benchmarked once. A rollback adds one more stop and the baseline's warm restart.
    """
    seconds = 2 * lifetimes * (stop_s + benchmark_s) + warm_s + cold_s + (2 * lifetimes - 2) * warm_s
    return seconds + (stop_s + warm_s if rolled_back else 0.0)


def budget_refusal(answer: Mapping[str, t.Any], budget_minutes: float | None, variant: str) -> str | None:
    """Why a plan does not fit the dark-minutes budget, with what would fit; None when it fits or there is no budget.

    The plan's upper bound is what must fit: the most lifetimes a side, rolled back, with the baseline's reload. A
    plan that lacks a figure cannot be held to a budget, so it is refused too, naming what would complete it.
    """
    if budget_minutes is None:
        return None
    budget = f'vllm_switch_max_dark_minutes={budget_minutes:g}'
    if answer.get('most_minutes') is None:
        missing = [line for line in answer.get('assumed') or [] if 'not known' in line or 'none assumed' in line]
        return (f'the trial of {variant} cannot be held to {budget}: its plan lacks a figure ({"; ".join(missing)}). '
                'Set vllm_expected_load_seconds and vllm_switch_expected_stream_tok_s, or give every workload a '
                'window (duration_s). Nothing was stopped.')
    if answer['most_minutes'] <= budget_minutes:
        return None
    planned_benchmark_s = float(answer['benchmark_s'])
    starts = dict(stop_s=float(answer['stop_s']), warm_s=float(answer['warm_restart_s']),
                  cold_s=float(answer['cold_load_s']))
    most = int(answer['lifetimes']['most'])
    limit_s = budget_minutes * 60.0

    def dark(lifetimes: int, benchmark_s: float) -> float:
        return dark_seconds(lifetimes, True, benchmark_s=benchmark_s, **starts)

    fits = [lifetimes for lifetimes in range(most - 1, 0, -1) if dark(lifetimes, planned_benchmark_s) <= limit_s]
    would_fit = []
    if fits:
        would_fit.append(f'vllm_switch_max_lifetimes={fits[0]} (at most {dark(fits[0], planned_benchmark_s) / 60:.0f} min)')
    # The benchmark a lifetime may take for the planned lifetimes to fit: the rest of the plan is starts and stops.
    room_s = (limit_s - dark(most, 0.0)) / (2 * most)
    if room_s > 0:
        would_fit.append(f'benchmarks of at most {_span(room_s / 60.0)} a lifetime (planned '
                         f'{_span(planned_benchmark_s / 60.0)}): shorter windows (duration_s) or fewer requests')
    if not would_fit:
        would_fit.append(f"nothing at this node's starts: one lifetime a side without a benchmark is already "
                         f'{_span(dark(1, 0.0) / 60.0)}; raise the budget')
    return (f"the trial of {variant} may keep the node out of service for {_span(answer['most_minutes'])} "
            f"({most} lifetimes a side and rolled back), more than {budget}. What would fit: "
            f"{'; or '.join(would_fit)}. Nothing was stopped.")


def calibration_refusal(answer: Mapping[str, t.Any], lifetimes: int, budget_minutes: float | None) -> str | None:
    """Why a calibration of ``lifetimes`` warm restarts of the baseline does not fit the budget, or None.

    Each restart is a stop, a warm restart and one benchmark of the baseline; the node is dark from the first stop to
    the end of the last benchmark. ``answer`` is a plan of the baseline's (its warm restart, stop and benchmark).
    """
    if budget_minutes is None:
        return None
    budget = f'vllm_switch_max_dark_minutes={budget_minutes:g}'
    figures = [answer.get(key) for key in ('stop_s', 'warm_restart_s', 'benchmark_s')]
    if any(figure is None for figure in figures):
        return (f'the calibration cannot be held to {budget}: its plan lacks a figure '
                f'({"; ".join(answer.get("assumed") or [])}). Nothing was stopped.')
    each_s = sum(float(figure) for figure in figures)
    minutes = lifetimes * each_s / 60.0
    if minutes <= budget_minutes:
        return None
    fits = int(budget_minutes * 60.0 // each_s)
    return (f'the calibration\'s {lifetimes} warm restarts of the baseline may keep the node out of service for '
            f'{_span(minutes)} ({_span(each_s / 60.0)} each), more than {budget}; {fits} fit. Run it in a longer '
            'window, or with shorter benchmarks. Nothing was stopped.')


def _span(minutes: float) -> str:
    if minutes < 1:
        return f'{minutes * 60:.0f} s'
    if minutes < 10:
        return f'{minutes:.1f} min'
    return f'{minutes:.0f} min' if minutes < 120 else f'{minutes / 60.0:.1f} h'


def plan_lines(answer: Mapping[str, t.Any], variant: str) -> list[str]:
    """What the operator reads before the node goes dark."""
    lifetimes = answer['lifetimes']
    if answer['least_minutes'] is None:
        head = f'the trial of {variant} keeps the node out of service for an unknown time (a figure is missing below)'
    elif lifetimes['most'] == 1:
        head = (f"the trial of {variant} keeps the node out of service for about {_span(answer['least_minutes'])}, "
                f"{_span(answer['most_minutes'])} if it is rolled back")
    else:
        head = (f"the trial of {variant} keeps the node out of service for {_span(answer['least_minutes'])} to "
                f"{_span(answer['most_minutes'])}: {lifetimes['fewest']} lifetimes a side and kept at the first look, "
                f"to {lifetimes['most']} a side and rolled back")
    lines = [head]
    if answer['benchmark_s'] is not None:
        lines.append(f"each lifetime's benchmark takes about {_span(answer['benchmark_s'] / 60.0)}")
    lines.append('measured: ' + ('; '.join(answer['measured']) or 'nothing yet'))
    lines.append('assumed: ' + ('; '.join(answer['assumed']) or 'nothing'))
    return lines
