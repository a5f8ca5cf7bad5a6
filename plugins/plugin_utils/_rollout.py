# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A variant rolled out across a fleet behind a canary: the plan, the canary's verdict and the end state.

The canary runs the full trial. Only a variant that the canary's trial kept, and that serves there, goes to
the other nodes; they switch in batches without a trial of their own. A node that fails is rolled back alone
by the switch role; these functions say which nodes serve what, in words an operator acts on.
"""

from __future__ import annotations

import typing as t
from collections.abc import Mapping, Sequence


class RolloutError(ValueError):
    """The rollout cannot be planned as asked; the message names the variable and the rule."""


def _whole_number(value: t.Any, name: str, lowest: int, highest: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).strip().isdigit():
        raise RolloutError(f'{name}: must be a whole number, got {value!r}')
    number = int(value)
    if number < lowest or (highest is not None and number > highest):
        bounds = f'from {lowest} to {highest}' if highest is not None else f'at least {lowest}'
        raise RolloutError(f'{name}: must be {bounds}, got {number}')
    return number


def rollout_plan(nodes: Sequence[str], canary: str | None = None, batch_size: t.Any = 1,
                 max_fail_percentage: t.Any = 0) -> dict[str, t.Any]:
    """The canary, the batches of the other nodes after it, and how many nodes may fail.

    The canary is the first node unless named; it serves the variant while the batches after it switch."""
    nodes = list(nodes or [])
    if not nodes:
        raise RolloutError('vllm_target_hosts: the rollout has no node (check the group and --limit)')
    if len(set(nodes)) != len(nodes):
        raise RolloutError('vllm_target_hosts: a node is listed twice')
    if canary in (None, ''):
        canary = nodes[0]
    if canary not in nodes:
        raise RolloutError(f"vllm_rollout_canary: {canary!r} is not a node of this rollout ({', '.join(nodes)})")
    size = _whole_number(batch_size, 'vllm_rollout_batch_size', 1)
    percentage = _whole_number(max_fail_percentage, 'vllm_rollout_max_fail_percentage', 0, 100)
    rest = [node for node in nodes if node != canary]
    return {
        'canary': canary,
        'rest': rest,
        'batches': [rest[start:start + size] for start in range(0, len(rest), size)],
        'batch_size': size,
        'max_fail_percentage': percentage,
    }


def _serving(outcome: Mapping[str, t.Any]) -> list[str]:
    serving = outcome.get('serving')
    return [str(name) for name in serving] if isinstance(serving, Sequence) and not isinstance(serving, str) else []


def canary_verdict(outcome: Mapping[str, t.Any] | None, canary: str, variant: str,
                   rest: Sequence[str]) -> dict[str, t.Any]:
    """Whether the rollout goes on after the canary, from the canary's vllm_switch_outcome.

    It goes on only when the variant serves on the canary and its trial record there says kept: kept by this run's
    trial, or by an earlier trial of this very unit (a rerun, which tries nothing again). Anything else (rolled
    back, failed, blocked, a variant that serves with no trial recorded) stops it with the other nodes as they were."""
    outcome = outcome if isinstance(outcome, Mapping) else {}
    recorded = outcome.get('recorded') or 'never tried'
    reason = outcome.get('reason') or 'no reason recorded'
    serving = _serving(outcome)
    others = ', '.join(rest) if rest else 'none'
    if recorded == 'kept' and variant in serving:
        return {'proceed': True,
                'message': f'The canary {canary} kept {variant} ({reason}); rolling it out to {others}.'}
    where = ', '.join(serving) if serving else 'nothing'
    return {'proceed': False,
            'message': f'The canary {canary} did not keep {variant} ({recorded.replace("_", " ")}: {reason}); {where} '
                       f'serves there. The rollout stops here: the other nodes ({others}) were not touched.'}


def rollout_summary(variant: str, canary: str, outcomes: Mapping[str, t.Any]) -> dict[str, t.Any]:
    """What each node of the rollout serves at its end, from each node's vllm_switch_outcome (None: never reached)."""
    switched, rolled_back, untouched, notes = [], [], [], []
    for node, outcome in outcomes.items():
        outcome = outcome if isinstance(outcome, Mapping) else {}
        said = outcome.get('outcome')
        reason = outcome.get('reason') or 'no reason recorded'
        if variant in _serving(outcome):
            switched.append(node)
        elif said in ('failed', 'rolled_back'):
            rolled_back.append(node)
            notes.append(f'{node} ({said.replace("_", " ")}: {reason})')
        else:
            untouched.append(node)
            if said:
                notes.append(f'{node} not switched ({reason})')
    parts = [f'{variant} serves on {len(switched)} of {len(outcomes)} nodes'
             + (f' ({", ".join(switched)})' if switched else '') + f', {canary} the canary']
    if rolled_back:
        parts.append('Rolled back alone, the baseline serving there: ' + ', '.join(rolled_back))
    if untouched:
        parts.append('Not switched: ' + ', '.join(untouched))
    return {'switched': switched, 'rolled_back': rolled_back, 'untouched': untouched,
            'complete': len(switched) == len(outcomes), 'message': '. '.join(parts + notes) + '.'}
