# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The steps of one trial, and which step comes next.

A trial is a sequence of steps. The role asks next_step() what to do, takes that step (the task file
roles/vllm_switch/tasks/step_<name>.yml) and appends what happened to the steps taken; a stop ends the run
with its message, and done ends the trial. Which step
comes next is decided here alone, from the steps taken and the trial's plan, so that the order, and what a
failure at each step leads to, can be read and tested in one place.

The order for a variant judged by one lifetime a side: check it while the baseline serves, make sure the
baseline serves, benchmark it, begin (the record that a trial is under way, written before anything stops), serve
the variant, benchmark it, decide, then keep or roll back.

Judged by lifetimes (max_lifetimes set), the server lifetime is the unit: check, make sure the baseline serves,
begin, restart the baseline (a warm restart: its lifetime starts as the variant's will), benchmark it, serve the
variant (its cold load), benchmark it; then, in turn, serve and benchmark the baseline and the variant again (each a
warm restart), and after every pair decide: keep, roll back, or another pair (the first pair can only fail the
checks that speed cannot outweigh; the looks begin with the second). The decision stops the trial at max_lifetimes
a side.

A failure before the trial begins ends the run with nothing stopped; a failure once it has begun rolls back to the
baseline, and the failure is recorded.
"""

from __future__ import annotations

import dataclasses
import typing as t
from collections.abc import Mapping, Sequence

# What each step does; the role has one task file per step that it takes (stop and done end its loop).
STEPS = {
    'check': 'checks the variant (its weights, the GPUs, its arguments) while the baseline serves',
    'serve': 'makes one side the unit that serves (started and ready)',
    'benchmark': 'benchmarks the side that serves',
    'begin': 'records that the trial is under way, before the baseline stops',
    'decide': 'decides from both sides\' results whether to keep the variant, or (by lifetimes) to measure another pair',
    'keep': 'keeps the variant (enabled at boot) and records the trial',
    'roll_back': 'puts the baseline back (enabled at boot) and records the trial',
    'persist': 'enables at boot the unit that serves',
    'stop': 'ends the run as failed, with what went wrong',
    'done': 'nothing is left to do',
}
SIDES = ('baseline', 'variant')
# A failure at these steps once the trial has begun (the baseline may have stopped) puts the baseline back.
_ROLLS_BACK = {'serve', 'benchmark', 'decide'}
# The longest trial by one lifetime a side takes ten steps; a plan that asks for more has gone round in a circle.
MAX_STEPS = 16
# Whoever reads lifetimes of fewer than this many a side learns nothing of how they spread.
MIN_LIFETIMES = 2
# Each side's lifetimes cost a restart of the GPU node; past this many a side the margin is not for this node.
MAX_LIFETIMES = 12


def step_limit(max_lifetimes: int | None) -> int:
    """The most steps a trial takes: by lifetimes, eight to the first pair's decision, five a pair after it, and the
    end."""
    if not max_lifetimes:
        return MAX_STEPS
    return 8 + 5 * (max_lifetimes - 1) + 3


class TrialStepError(ValueError):
    """The steps taken or the plan cannot be read."""


@dataclasses.dataclass(frozen=True)
class TrialPlan:
    """What the trial is: which variant against which baseline, and whether the sides are benchmarked."""

    variant: str
    baseline: str
    benchmark: bool = True
    decide: bool = True
    # None: one lifetime a side; else the trial interleaves lifetimes up to this many a side.
    max_lifetimes: int | None = None

    @property
    def of_baseline(self) -> bool:
        return self.variant == self.baseline

    @property
    def by_lifetimes(self) -> bool:
        return self.max_lifetimes is not None and self.benchmark and not self.of_baseline

    @classmethod
    def from_mapping(cls, plan: Mapping[str, t.Any]) -> TrialPlan:
        if not isinstance(plan, Mapping):
            raise TrialStepError(f'the plan must be a mapping, got {type(plan).__name__}')
        unknown = sorted(set(plan) - {field.name for field in dataclasses.fields(cls)})
        if unknown:
            raise TrialStepError(f'unknown plan key(s) {", ".join(unknown)}')
        for name in ('variant', 'baseline'):
            if not isinstance(plan.get(name), str) or not plan[name]:
                raise TrialStepError(f'the plan needs {name}, the name of a variant')
        for name in ('benchmark', 'decide'):
            if not isinstance(plan.get(name, True), bool):
                raise TrialStepError(f'the plan\'s {name} must be true or false, got {plan[name]!r}')
        lifetimes = plan.get('max_lifetimes')
        if lifetimes in (None, 0, '0', ''):
            lifetimes = None
        elif isinstance(lifetimes, str) and lifetimes.strip().isdigit():
            lifetimes = int(lifetimes)
        if lifetimes is not None and (isinstance(lifetimes, bool) or not isinstance(lifetimes, int)
                                      or not MIN_LIFETIMES <= lifetimes <= MAX_LIFETIMES):
            raise TrialStepError(f'the plan\'s max_lifetimes must be a whole number from {MIN_LIFETIMES} to '
                                 f'{MAX_LIFETIMES}, or 0 for one lifetime a side, got {plan["max_lifetimes"]!r}')
        return cls(variant=plan['variant'], baseline=plan['baseline'], benchmark=plan.get('benchmark', True),
                   decide=plan.get('decide', True), max_lifetimes=lifetimes)


def _step(name: str, side: str | None = None, **details: t.Any) -> dict[str, t.Any]:
    return {'step': name, 'side': side, **details}


def _taken(entry: t.Any, index: int) -> dict[str, t.Any]:
    if not isinstance(entry, Mapping) or entry.get('step') not in STEPS:
        raise TrialStepError(f'step {index + 1} taken is not one of {", ".join(STEPS)}: {entry!r}')
    if entry.get('side') not in (None, *SIDES):
        raise TrialStepError(f'step {index + 1} taken ({entry["step"]}) has side {entry.get("side")!r}, '
                             f'not one of {", ".join(SIDES)}')
    return dict(entry)


def _count(steps: Sequence[Mapping[str, t.Any]], step: str, side: str | None = None) -> int:
    return sum(1 for entry in steps if entry['step'] == step and entry.get('side') == side and not entry.get('failed'))


def _after_decision(last: Mapping[str, t.Any]) -> dict[str, t.Any]:
    answer = last.get('answer') or {}
    if answer.get('decision') == 'keep':
        return _step('keep', reason=answer.get('reason'))
    if answer.get('decision') == 'another_pair':
        return _step('serve', 'baseline')
    return _step('roll_back', outcome='rolled_back',
                 reason=answer.get('reason') or f'the decision was {answer.get("decision")!r}, not keep')


def _by_lifetimes(steps: Sequence[Mapping[str, t.Any]], plan: TrialPlan) -> dict[str, t.Any] | None:
    """The next step of a trial by lifetimes, or None where it goes as one by one lifetime a side."""
    last = steps[-1]
    step, side = last['step'], last.get('side')
    begun = _count(steps, 'begin') > 0
    if (step, side) == ('serve', 'baseline'):
        # The baseline that served before the trial is restarted, so that both sides' lifetimes start alike.
        return _step('benchmark', 'baseline') if begun else _step('begin')
    if step == 'begin':
        return _step('serve', 'baseline', restart=True)
    if (step, side) == ('benchmark', 'baseline'):
        return _step('serve', 'variant')
    if (step, side) == ('benchmark', 'variant'):
        if not plan.decide:
            # Check mode measures nothing; one pair shows what the trial would do.
            return _step('keep', reason=None)
        # After the first pair too: wrong answers, a broken SLO or failed requests end the trial at once.
        return _step('decide')
    return None


def _after_success(steps: Sequence[Mapping[str, t.Any]], plan: TrialPlan) -> dict[str, t.Any]:
    last = steps[-1]
    step, side = last['step'], last.get('side')
    if plan.by_lifetimes:
        lifetimes_next = _by_lifetimes(steps, plan)
        if lifetimes_next is not None:
            return lifetimes_next
    if step == 'check':
        return _step('serve', 'baseline')
    if (step, side) == ('serve', 'baseline'):
        if plan.of_baseline:
            return _step('persist')
        return _step('benchmark', 'baseline') if plan.benchmark else _step('begin')
    if (step, side) == ('benchmark', 'baseline'):
        return _step('begin')
    if step == 'begin':
        return _step('serve', 'variant')
    if (step, side) == ('serve', 'variant'):
        if plan.benchmark:
            return _step('benchmark', 'variant')
        return _step('keep', reason=None)
    if (step, side) == ('benchmark', 'variant'):
        # Without a decision (check mode) the variant is kept as the trial found it.
        return _step('decide') if plan.decide else _step('keep', reason=None)
    if step == 'decide':
        return _after_decision(last)
    if step == 'roll_back' and last.get('outcome') == 'failed':
        return _step('stop', msg=(f'{plan.variant} failed and was rolled back; {plan.baseline} serves again. '
                                  f'Cause: {last.get("reason")}'))
    if step in ('keep', 'roll_back', 'persist'):
        return _step('done')
    raise TrialStepError(f'no step follows {step}{f" ({side})" if side else ""}')


def next_step(taken: Sequence[Mapping[str, t.Any]] | None, plan: Mapping[str, t.Any] | TrialPlan) -> dict[str, t.Any]:
    """The step to take after those taken: {step, side, ...}; a roll_back carries its outcome and reason,
    a keep its reason, a stop its message, and the serve step that restarts the baseline at a trial's start by
    lifetimes says restart (true).

    Each step taken is the step as this function gave it, with failed (bool) and msg when it failed; a
    decide step carries the decision's answer ({decision, reason}).
    """
    plan = plan if isinstance(plan, TrialPlan) else TrialPlan.from_mapping(plan)
    if taken is None:
        taken = []
    if not isinstance(taken, Sequence) or isinstance(taken, (str, bytes)):
        raise TrialStepError(f'the steps taken must be a list, got {type(taken).__name__}')
    steps = [_taken(entry, index) for index, entry in enumerate(taken)]
    if len(steps) >= step_limit(plan.max_lifetimes if plan.by_lifetimes else None):
        raise TrialStepError(f'the trial took {len(steps)} steps without an end; the last was {steps[-1]["step"]}')
    if not steps:
        return _step('serve', 'baseline') if plan.of_baseline else _step('check')
    last = steps[-1]
    if last['step'] in ('done', 'stop'):
        raise TrialStepError(f'the trial has ended ({last["step"]}); no step follows')
    if last.get('failed'):
        failure = str(last.get('msg') or f'the {last["step"]} step failed without a message')
        if last['step'] in _ROLLS_BACK and _count(steps, 'begin') > 0:
            return _step('roll_back', outcome='failed', reason=failure)
        return _step('stop', msg=failure)
    return _after_success(steps, plan)
