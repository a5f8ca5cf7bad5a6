# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Rank the variants that compare-variants tried on one node, from their trial records.

The ranking follows the verdict, it does not overrule it: only a variant that its trial kept can win, and
among those the one whose worst level is surest to be fast (the highest lower end of a 95% interval of the
change in output tokens/s, over every workload and concurrency) ranks first; the mean change breaks ties.
A node whose compared variants were all rolled back, failed or blocked keeps its baseline.
"""

from __future__ import annotations

import typing as t
from collections.abc import Iterable, Mapping

# After the kept variants, the others in the order an operator would look at them again.
_OUTCOME_ORDER = {'kept': 0, 'rolled_back': 1, 'in_progress': 2, 'failed': 3, 'blocked': 4}


class RankingError(ValueError):
    """The records cannot be ranked; the message says why."""


def _levels(decision: Mapping[str, t.Any]) -> list[Mapping[str, t.Any]]:
    levels = decision.get('levels') or []
    if not isinstance(levels, list):
        raise RankingError('decision.levels must be a list')
    return [level for level in levels if isinstance(level, Mapping)]


def _worst_lower(decision: Mapping[str, t.Any]) -> float | None:
    """The lowest lower end of the 95% interval over every level, or the lowest change where none has one."""
    levels = _levels(decision)
    lowers = [level['lower_pct'] for level in levels if level.get('lower_pct') is not None]
    if lowers:
        return float(min(lowers))
    deltas = [level['delta_pct'] for level in levels if level.get('delta_pct') is not None]
    return float(min(deltas)) if deltas else None


def ranking_row(record: Mapping[str, t.Any]) -> dict[str, t.Any]:
    """What the ranking shows of one variant's trial record."""
    if not isinstance(record, Mapping) or not record.get('variant'):
        raise RankingError(f'a trial record needs a variant, got {record!r}')
    decision = record.get('decision') or {}
    if not isinstance(decision, Mapping):
        raise RankingError(f"the decision of {record['variant']} must be a mapping")
    identity = record.get('identity') or {}
    delta = decision.get('delta_pct')
    return {
        'variant': record['variant'],
        'outcome': record.get('outcome') or 'untried',
        'decision': decision.get('outcome'),
        'delta_pct': None if delta is None else float(delta),
        'worst_lower_pct': _worst_lower(decision),
        'trial': identity.get('short') if isinstance(identity, Mapping) else None,
        'reason': str(record.get('reason') or ''),
    }


def _sort_key(row: Mapping[str, t.Any]) -> tuple:
    missing = float('-inf')
    return (_OUTCOME_ORDER.get(row['outcome'], len(_OUTCOME_ORDER)),
            -(row['worst_lower_pct'] if row['worst_lower_pct'] is not None else missing),
            -(row['delta_pct'] if row['delta_pct'] is not None else missing),
            row['variant'])


def compared_records(records: t.Any, variants: Iterable[str]) -> list[dict[str, t.Any]]:
    """The record of each compared variant, in the order compared, from the node's records by variant.

    A variant without a record failed before its trial could write one (its checks refused it, for example).
    """
    if not isinstance(records, Mapping):
        raise RankingError(f'the records must map each variant to its record, got {type(records).__name__}')
    return [dict(records.get(name) or {'variant': name, 'outcome': 'failed', 'reason': 'no trial record was written'})
            for name in variants]


def rank_variants(records: Iterable[Mapping[str, t.Any]], baseline: str) -> dict[str, t.Any]:
    """The compared variants best first, the one to serve (a kept variant, or the baseline), and a table."""
    rows = [ranking_row(record) for record in records]
    names = [row['variant'] for row in rows]
    duplicated = sorted({name for name in names if names.count(name) > 1})
    if duplicated:
        raise RankingError(f'each variant is ranked once; twice: {", ".join(duplicated)}')
    if baseline in names:
        raise RankingError(f'the baseline {baseline!r} is what the variants are compared with, not one of them')
    rows.sort(key=_sort_key)
    for rank, row in enumerate(rows, start=1):
        row['rank'] = rank
    kept = [row for row in rows if row['outcome'] == 'kept']
    best = kept[0]['variant'] if kept else baseline
    return {'ranked': rows, 'best': best, 'table': ranking_table(rows, baseline, best)}


def percent_text(value: float | None) -> str:
    """A change in percent as the ranking shows it everywhere: '+3.0%', or '–' when there is none."""
    return '–' if value is None else f'{value:+.1f}%'


def ranking_table(rows: list[Mapping[str, t.Any]], baseline: str, best: str) -> list[str]:
    """The ranking as aligned text lines, as the play prints it."""
    header = ('rank', 'variant', 'outcome', 'Δ output', 'worst 95% low', 'trial', 'reason')
    cells = [(str(row['rank']), row['variant'], row['outcome'].replace('_', ' '), percent_text(row['delta_pct']),
              percent_text(row['worst_lower_pct']), row['trial'] or '–', _shorten(row['reason'], 90)) for row in rows]
    widths = [max(len(line[index]) for line in [header] + cells) for index in range(len(header) - 1)]
    lines = ['  '.join(part.ljust(width) for part, width in zip(line[:-1], widths)) + '  ' + line[-1]
             for line in [header] + cells]
    lines.append(f'serves: {best}' + ('' if best != baseline else ' (no compared variant was kept)'))
    return lines


def _shorten(text: str, limit: int) -> str:
    text = ' '.join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + '…'


def compare_plan(names: t.Any, known: Iterable[str], baseline: str) -> list[str]:
    """The variants compare-variants tries, in order, after checking them against the declared variants."""
    where = 'vllm_compare_variants'
    if not isinstance(names, (list, tuple)) or not names:
        raise RankingError(f'{where}: give a non-empty list of variant names, for example [ngram, eagle3]')
    known = sorted(known)
    plan = []
    for index, name in enumerate(names):
        if not isinstance(name, str) or not name:
            raise RankingError(f'{where}[{index}]: a variant name, got {name!r}')
        if name == baseline:
            raise RankingError(f'{where}[{index}]: {name} is the baseline, which every variant is compared with')
        if name not in known:
            raise RankingError(f"{where}[{index}]: unknown variant {name!r}; declared: {', '.join(known)}")
        if name in plan:
            raise RankingError(f'{where}[{index}]: {name} is listed twice')
        plan.append(name)
    return plan
