# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The one decision of a trial: keep, roll back, or measure another pair of server lifetimes.

A trial benchmarks the baseline and the variant in turn, each in a fresh server lifetime, and looks after every
pair from the second on (plugins/plugin_utils/_lifetime_verdict.look), or after the first when the trial measures
one lifetime a side (max_lifetimes 1), whose baseline spread comes from the node's history alone. decide(state)
is the one entry point, from a trial's state (plugins/plugin_utils/_trial.py); this module turns the trial's
benchmarks into those looks and their answers into one decision:

- Each workload and concurrency level is looked at on its own, from every lifetime of the trial: the runs of a
  level in one lifetime make that lifetime's figure. The baseline's stored lifetimes of the same identity, workload,
  level and prompts (the node's history) widen what is known of how its lifetimes spread.
- The latest pair passes the checks that speed cannot outweigh first (failed requests, foreign traffic), through
  _decision.decide_workloads; a variant that fails one is rolled back for it at once.
- Latency SLOs are judged once, when the looks have decided, on each side's requests pooled over all its lifetimes
  (_pooled_slo); a breach then rolls back, whatever speed decided.
- A level shown slower, then one stopped for futility, rolls the variant back; every level kept keeps it
  (keep_when=faster also needs one level shown faster); a trial at max_lifetimes a side that is still undecided
  rolls back as inconclusive; anything else asks for another pair.
- The greedy answers of the first lifetime of each side pass the answer gate (_answer_gate): a variant that answers
  otherwise is rolled back as incorrect, whatever its speed.
"""

from __future__ import annotations

import math
import typing as t
from collections.abc import Iterable, Mapping, Sequence

from ansible_collections.llmops.vllm.plugins.plugin_utils import _lifetime_verdict as verdict
from ansible_collections.llmops.vllm.plugins.plugin_utils._answer_gate import AnswerGateError, answer_gate
from ansible_collections.llmops.vllm.plugins.plugin_utils._comparison import ComparisonError, benchmark_levels, by_concurrency
from ansible_collections.llmops.vllm.plugins.plugin_utils._decision import (
    FASTER,
    INCONCLUSIVE,
    KEEP,
    NOT_SLOWER,
    ROLL_BACK,
    SLO_BREACHED,
    SLOWER,
    DecisionError,
    baseline_lifetimes,
    check_slo,
    decide_workloads,
    kv_cache_room,
    merged_slo,
    runs_of,
    with_correctness,
)
from ansible_collections.llmops.vllm.plugins.plugin_utils._pooled_slo import judge_pooled_slo
from ansible_collections.llmops.vllm.plugins.plugin_utils._workloads import WorkloadError, workload_results

SIDES = ('baseline', 'variant')
ANOTHER_PAIR = verdict.ANOTHER_PAIR
FUTILITY = 'futility'
# The outcomes of the latest pair's checks that end a trial whatever the lifetimes would show.
_FINAL_CHECKS = (SLO_BREACHED,)
# Of the levels that roll back, the most definite one speaks for the trial.
_ROLL_BACK_ORDER = {'slower': 0, FUTILITY: 1, 'inconclusive': 2}


def _lifetime_runs(lifetimes: Sequence[Mapping[str, t.Any]]) -> dict[str, list[dict[str, t.Any]]]:
    """Per side, in the order measured: each lifetime's levels by workload and concurrency."""
    sides: dict[str, list[dict[str, t.Any]]] = {side: [] for side in SIDES}
    for index, lifetime in enumerate(lifetimes):
        if not isinstance(lifetime, Mapping) or lifetime.get('side') not in SIDES:
            raise DecisionError(f'lifetime {index + 1} must name its side (baseline or variant), got {lifetime!r}')
        try:
            results = workload_results(lifetime.get('benchmark'), f'lifetime {index + 1}')
            levels = {(workload, key): level for workload, result in results.items()
                      for key, level in by_concurrency(benchmark_levels(result, workload), workload).items()}
        except (WorkloadError, ComparisonError) as error:
            raise DecisionError(str(error)) from None
        first = next(iter(results.values()))
        sides[lifetime['side']].append({
            'levels': levels,
            'invocation': (first.get('labels') or {}).get('lifetime'),
            'uptime_s': lifetime.get('uptime_s'),
        })
    return sides


def _stored(history: Iterable[Mapping[str, t.Any]], workload: str, key: t.Any, prompts: t.Any,
            this_trial: set) -> list[float]:
    """The log figures of the baseline's stored lifetimes of one workload and level, this trial's left out."""
    figures = []
    for item in history:
        if item.get('workload') != workload or item.get('max_concurrency') != key or item.get('lifetime') in this_trial:
            continue
        if prompts and item.get('prompt_set_sha256') not in (None, prompts):
            continue
        value = item.get('output_throughput')
        if isinstance(value, (int, float)) and value > 0 and math.isfinite(value):
            figures.append(math.log(value))
    return figures


def lifetime_table(sides: Mapping[str, Sequence[Mapping[str, t.Any]]], looks: Mapping[t.Any, Mapping[str, t.Any]]
                   ) -> list[dict[str, t.Any]]:
    """One row per lifetime, in the order measured: side, invocation, uptime, runs and figure (mean tok/s)."""
    rows = []
    for side in SIDES:
        for number, lifetime in enumerate(sides[side], start=1):
            runs = [value for level in lifetime['levels'].values() for value in runs_of(level)]
            flagged = any(number - 1 in look['outliers'][side] for look in looks.values())
            rows.append({'side': side, 'number': number, 'invocation': lifetime['invocation'],
                         'uptime_s': lifetime['uptime_s'], 'runs': len(runs),
                         'output_throughput': round(math.exp(sum(math.log(value) for value in runs) / len(runs)), 2),
                         'outlier': flagged})
    return rows


def _combined(looks: Mapping[t.Any, Mapping[str, t.Any]], faster_looks: Mapping[t.Any, Mapping[str, t.Any]],
              keep_when: str) -> tuple[str, str, str, Mapping[str, t.Any]]:
    """(decision, outcome, rule, the look that speaks) from every level's look."""
    rolled = [(key, look) for key, look in looks.items() if look['action'] == verdict.ROLL_BACK]
    if rolled:
        key, look = min(rolled, key=lambda item: _ROLL_BACK_ORDER.get(item[1]['rule'], 9))
        outcome = {'slower': SLOWER, FUTILITY: FUTILITY}.get(look['rule'], INCONCLUSIVE)
        return ROLL_BACK, outcome, look['rule'], look
    if keep_when == FASTER:
        if all(look['action'] == verdict.KEEP for look in looks.values()):
            shown = [look for look in faster_looks.values() if look['action'] == verdict.KEEP]
            if shown:
                return KEEP, FASTER, FASTER, shown[0]
            if all(look['action'] == verdict.ROLL_BACK for look in faster_looks.values()):
                look = min(faster_looks.values(), key=lambda item: _ROLL_BACK_ORDER.get(item['rule'], 9))
                return ROLL_BACK, FUTILITY if look['rule'] == FUTILITY else INCONCLUSIVE, look['rule'], look
        elif all(look['rule'] == FUTILITY for look in faster_looks.values()):
            look = next(iter(faster_looks.values()))
            return ROLL_BACK, FUTILITY, FUTILITY, look
        waiting = [look for look in looks.values() if look['action'] == ANOTHER_PAIR]
        return ANOTHER_PAIR, INCONCLUSIVE, 'undecided', (waiting or list(faster_looks.values()))[0]
    waiting = [look for look in looks.values() if look['action'] == ANOTHER_PAIR]
    if waiting:
        return ANOTHER_PAIR, INCONCLUSIVE, 'undecided', min(waiting, key=lambda item: item['low_pct'] or -math.inf)
    return KEEP, NOT_SLOWER, NOT_SLOWER, min(looks.values(), key=lambda item: item['low_pct'])


def _where(key: tuple[str, t.Any], workloads: int) -> str:
    workload, level = key
    place = 'at concurrency %s' % ('unlimited' if level is None else level)
    return f'workload {workload} {place}' if workloads > 1 else place


def decide_by_lifetimes(lifetimes: Sequence[Mapping[str, t.Any]], history: Iterable[Mapping[str, t.Any]] = (),
                        keep_when: str = NOT_SLOWER, margin_pct: float = 8.0, max_lifetimes: int = 10,
                        slo: t.Any = None, workload_slo: Mapping[str, t.Any] | None = None,
                        accept_foreign_traffic: bool = False) -> dict[str, t.Any]:
    """Decide a trial by lifetimes after its latest pair.

    lifetimes lists every lifetime of this trial in the order measured, each {side, benchmark, uptime_s}: side is
    baseline or variant, benchmark the openai_benchmark result(s) of that lifetime (one per workload), uptime_s how
    long its server had served when it was measured. history holds the baseline's stored lifetimes
    (_decision.history_from_node). Returns decide_workloads' answer for the latest pair, with decision (keep,
    roll_back or another_pair), outcome, rule and reason from the looks, and look (the look's number), levels'
    looks, the lifetime table, and the flags (outliers, an unstable variant).
    """
    if not isinstance(lifetimes, Sequence) or isinstance(lifetimes, (str, bytes)):
        raise DecisionError(f'lifetimes must be a list, got {type(lifetimes).__name__}')
    if isinstance(max_lifetimes, bool) or not isinstance(max_lifetimes, int) or max_lifetimes < 1:
        raise DecisionError(f'max_lifetimes must be a whole number of at least 1, got {max_lifetimes!r}')
    sides = _lifetime_runs(lifetimes)
    if not sides['baseline'] or not sides['variant']:
        raise DecisionError('a trial by lifetimes needs a lifetime of each side before a decision')
    latest = {side: next(item['benchmark'] for item in reversed(lifetimes) if item['side'] == side) for side in SIDES}
    # The latest pair's checks: failed requests and foreign traffic. The SLO is judged once, at the decision, on
    # all of the trial's requests pooled (_pooled_slo), not on each pair's few.
    checks = decide_workloads(latest['variant'], latest['baseline'], keep_when=keep_when, margin_pct=margin_pct,
                              min_runs=1, accept_foreign_traffic=accept_foreign_traffic)
    checks['slo'] = check_slo(slo) or None
    for summary in checks.get('workloads') or []:
        summary['slo'] = merged_slo(slo, (workload_slo or {}).get(summary['name']),
                                    f"the slo of workload {summary['name']}") or None
    failed = checks['failed_requests']['variant'] or checks['failed_requests']['baseline']
    contaminated = checks['contaminated'] and not accept_foreign_traffic
    pairs = min(len(sides['baseline']), len(sides['variant']))
    # The looks begin with the second pair; with one lifetime a side, the first pair is the one look.
    answer = dict(checks, min_runs=1, max_lifetimes=max_lifetimes, pairs=pairs,
                  look=max(0, pairs - verdict.first_look(max_lifetimes) + 1))
    shared = [key for key in sides['variant'][0]['levels']
              if all(key in lifetime['levels'] for side in SIDES for lifetime in sides[side])]
    if not shared:
        raise DecisionError('the lifetimes of the trial share no workload and concurrency level')
    history = list(history)
    this_trial = {lifetime['invocation'] for lifetime in sides['baseline'] if lifetime['invocation']}
    looks, faster_looks = {}, {}
    for key in shared:
        runs = {side: [runs_of(lifetime['levels'][key]) for lifetime in sides[side]] for side in SIDES}
        prompts = sides['baseline'][-1]['levels'][key].get('prompt_set_sha256')
        stored = _stored(history, key[0], key[1], prompts, this_trial)
        looks[key] = verdict.look(runs['baseline'], runs['variant'], stored, margin_pct, NOT_SLOWER, max_lifetimes)
        if keep_when == FASTER:
            faster_looks[key] = verdict.look(runs['baseline'], runs['variant'], stored, margin_pct, FASTER,
                                             max_lifetimes)
    answer['lifetimes'] = lifetime_table(sides, looks)
    answer['looks'] = [dict(look, workload=key[0], max_concurrency=key[1]) for key, look in looks.items()]
    answer['unstable'] = any(look['unstable'] for look in looks.values())
    answer['history'] = {'earlier_lifetimes': min(look['history_lifetimes'] for look in looks.values()),
                         'note': 'the baseline\'s stored lifetimes of this identity widen the estimate of its spread'}
    if failed or contaminated or checks['outcome'] in _FINAL_CHECKS:
        # Speed cannot outweigh these; the latest pair's checks have said why.
        return answer
    decision, outcome, rule, look = _combined(looks, faster_looks, keep_when)
    key = next(key for key, value in {**looks, **faster_looks}.items() if value is look)
    reason = f'{_where(key, len({workload for workload, dummy in shared}))}: {look["reason"]}'
    to_decide = None
    if decision != KEEP and look.get('pairs_to_decide'):
        to_decide = f'about {look["pairs_to_decide"]} more pair(s) of lifetimes, if the change and spreads hold'
    answer.update(decision=decision, outcome=outcome, rule=rule, reason=reason, to_decide=to_decide,
                  delta_pct=look['change_pct'])
    if decision != ANOTHER_PAIR:
        # The decision is made: the SLO is judged now, once, and a breach outranks what speed decided.
        judged = judge_pooled_slo(lifetimes, slo, workload_slo)
        answer['slo_judged'] = judged['levels']
        if judged['breached']:
            answer.update(decision=ROLL_BACK, outcome=SLO_BREACHED, rule='slo', to_decide=None,
                          reason=f"{judged['reason']}; speed alone: {reason}")
    return answer


def _minutes(seconds: float | None) -> str:
    return '?' if seconds is None else f'{seconds / 60:.1f} min'


def report_lines(answer: Mapping[str, t.Any], dark_seconds: float | None = None,
                 pair_seconds: float | None = None) -> list[str]:
    """What the operator reads after a look: the lifetimes, the look and its rule, the flags, the node's dark time."""
    lines = ['lifetime  side      invocation                        uptime      runs  output tok/s']
    for row in answer.get('lifetimes') or []:
        uptime = '-' if row['uptime_s'] is None else f'{row["uptime_s"]:.0f} s'
        lines.append(f'{row["number"]:>8}  {row["side"]:<8}  {str(row["invocation"] or "-"):<32}  {uptime:>8}  '
                     f'{row["runs"]:>4}  {row["output_throughput"]:>12.1f}{"  outlier" if row["outlier"] else ""}')
    for look in answer.get('looks') or []:
        where = 'unlimited' if look['max_concurrency'] is None else look['max_concurrency']
        if look['change_pct'] is None:
            figures = 'too few lifetimes for a look'
        elif look['low_pct'] is None:
            figures = f'{look["change_pct"]:+.1f}%, no interval (nothing shows how much lifetimes differ)'
        else:
            figures = (f'{look["change_pct"]:+.1f}%, {round(100 * look["confidence"])}% interval '
                       f'{look["low_pct"]:+.1f}% to {look["high_pct"]:+.1f}% (df {look["df"]:.1f}, '
                       f'{look["history_lifetimes"]} stored)')
        lines.append(f'workload {look["workload"]} at concurrency {where}: {figures}; rule {look["rule"]}')
    if answer.get('look'):
        when = f'look {answer.get("look")} after {answer.get("pairs")} pair{"" if answer.get("pairs") == 1 else "s"}'
    else:
        when = 'after the first pair (the looks begin with the second)'
    lines.append(f'{when}: {answer.get("decision")} ({answer.get("outcome")}): {answer.get("reason")}')
    if answer.get('unstable'):
        lines.append('the variant is unstable between starts: its lifetimes spread at least twice as much as the baseline\'s')
    outliers = [f'{row["side"]} {row["number"]}' for row in answer.get('lifetimes') or [] if row['outlier']]
    if outliers:
        lines.append('outlier lifetime(s): ' + ', '.join(outliers))
    cost = f'the node has been out of service for {_minutes(dark_seconds)}'
    if answer.get('decision') == ANOTHER_PAIR or answer.get('to_decide'):
        cost += f'; one more pair costs about {_minutes(pair_seconds)}'
    lines.append(cost)
    return lines


def decide(state: Mapping[str, t.Any]) -> dict[str, t.Any]:
    """The decision of a trial from its state, after its latest pair of lifetimes: the one rule that keeps a variant.

    state is a trial's state (_trial.py) or a mapping with the same keys: ``lifetimes`` ({side, benchmark,
    uptime_s}, in the order measured), ``history`` (the baseline's stored lifetimes, _decision.history_from_node),
    ``settings`` (keep_when, margin_pct, max_lifetimes, slo, workloads with their own slo,
    accept_foreign_traffic, answer_tolerance), ``answers`` (the greedy answers of each side's first lifetime, or
    none), ``starts`` (what each start showed of its KV cache), the names ``variant`` and ``baseline``, and
    ``identities`` (each side's sha256 and unit_checksum). Returns decide_by_lifetimes' answer with correctness
    (an incorrect variant rolls back whatever its speed), kv_cache, baseline_lifetimes (this trial's, which its
    record keeps for later trials) and what the decision is about (model, host, variant, baseline, identity).
    """
    settings = state.get('settings') or {}
    lifetimes = list(state.get('lifetimes') or [])
    workload_slo = {item['name']: item.get('slo') for item in settings.get('workloads') or []
                    if isinstance(item, Mapping) and item.get('name')}
    answer = decide_by_lifetimes(lifetimes, history=state.get('history') or [],
                                 keep_when=settings.get('keep_when', NOT_SLOWER),
                                 margin_pct=float(settings.get('margin_pct', 8.0)),
                                 max_lifetimes=int(settings.get('max_lifetimes', 10)), slo=settings.get('slo'),
                                 workload_slo=workload_slo or settings.get('workload_slo'),
                                 accept_foreign_traffic=bool(settings.get('accept_foreign_traffic')))
    latest_variant = next(item['benchmark'] for item in reversed(lifetimes) if item['side'] == 'variant')
    answer['kv_cache'] = kv_cache_room(latest_variant, state.get('starts') or [], state['variant'], state['baseline'])
    answers = state.get('answers') or {}
    gate = None
    if answers.get('variant') is not None or answers.get('baseline') is not None:
        if answers.get('variant') is None or answers.get('baseline') is None:
            raise DecisionError('the answers of both sides go together: give both or neither')
        try:
            gate = answer_gate(answers['variant'], answers['baseline'], settings.get('answer_tolerance', 0.25))
        except AnswerGateError as error:
            raise DecisionError(str(error)) from None
    answer = with_correctness(answer, gate)
    identities = state.get('identities') or {}
    baseline_identity = identities.get('baseline') or {}
    variant_identity = identities.get('variant') or {}
    answer['baseline_lifetimes'] = [
        measured for item in lifetimes if item['side'] == 'baseline'
        for measured in baseline_lifetimes(item['benchmark'], unit_checksum=baseline_identity.get('unit_checksum'),
                                           identity=baseline_identity.get('sha256'))]
    answer.update(host=state.get('host'), model=state.get('model'), variant=state['variant'],
                  baseline=state['baseline'], unit_checksum=variant_identity.get('unit_checksum'),
                  identity=variant_identity.get('sha256'))
    return answer
