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

The order for a variant: check it while the baseline serves, make sure the baseline serves, benchmark it,
begin (the record that a trial is under way, written before anything stops), serve the variant, benchmark it,
decide, then keep or roll back. A failure before the baseline stops ends the run with nothing stopped; a
failure from the variant's start on rolls back to the baseline, and the failure is recorded.
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
    'decide': 'decides from both sides\' results whether to keep the variant',
    'keep': 'keeps the variant (enabled at boot) and records the trial',
    'roll_back': 'puts the baseline back (enabled at boot) and records the trial',
    'persist': 'enables at boot the unit that serves',
    'stop': 'ends the run as failed, with what went wrong',
    'done': 'nothing is left to do',
}
SIDES = ('baseline', 'variant')
# A failure at these steps happens after the baseline stopped, so the baseline is put back.
_ROLLS_BACK = {('serve', 'variant'), ('benchmark', 'variant'), ('decide', None)}
# The longest trial takes ten steps; a plan that asks for more has gone round in a circle.
MAX_STEPS = 16


class TrialStepError(ValueError):
    """The steps taken or the plan cannot be read."""


@dataclasses.dataclass(frozen=True)
class TrialPlan:
    """What the trial is: which variant against which baseline, and whether the sides are benchmarked."""

    variant: str
    baseline: str
    benchmark: bool = True
    decide: bool = True

    @property
    def of_baseline(self) -> bool:
        return self.variant == self.baseline

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
        return cls(variant=plan['variant'], baseline=plan['baseline'], benchmark=plan.get('benchmark', True),
                   decide=plan.get('decide', True))


def _step(name: str, side: str | None = None, **details: t.Any) -> dict[str, t.Any]:
    return {'step': name, 'side': side, **details}


def _taken(entry: t.Any, index: int) -> dict[str, t.Any]:
    if not isinstance(entry, Mapping) or entry.get('step') not in STEPS:
        raise TrialStepError(f'step {index + 1} taken is not one of {", ".join(STEPS)}: {entry!r}')
    if entry.get('side') not in (None, *SIDES):
        raise TrialStepError(f'step {index + 1} taken ({entry["step"]}) has side {entry.get("side")!r}, '
                             f'not one of {", ".join(SIDES)}')
    return dict(entry)


def _after_success(last: Mapping[str, t.Any], plan: TrialPlan) -> dict[str, t.Any]:
    step, side = last['step'], last.get('side')
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
        answer = last.get('answer') or {}
        if answer.get('decision') == 'keep':
            return _step('keep', reason=answer.get('reason'))
        return _step('roll_back', outcome='rolled_back',
                     reason=answer.get('reason') or f'the decision was {answer.get("decision")!r}, not keep')
    if step == 'roll_back' and last.get('outcome') == 'failed':
        return _step('stop', msg=(f'{plan.variant} failed and was rolled back; {plan.baseline} serves again. '
                                  f'Cause: {last.get("reason")}'))
    if step in ('keep', 'roll_back', 'persist'):
        return _step('done')
    raise TrialStepError(f'no step follows {step}{f" ({side})" if side else ""}')


def next_step(taken: Sequence[Mapping[str, t.Any]] | None, plan: Mapping[str, t.Any] | TrialPlan) -> dict[str, t.Any]:
    """The step to take after those taken: {step, side, ...}; a roll_back carries its outcome and reason,
    a keep its reason, a stop its message.

    Each step taken is the step as this function gave it, with failed (bool) and msg when it failed; a
    decide step carries the decision's answer ({decision, reason}).
    """
    plan = plan if isinstance(plan, TrialPlan) else TrialPlan.from_mapping(plan)
    if taken is None:
        taken = []
    if not isinstance(taken, Sequence) or isinstance(taken, (str, bytes)):
        raise TrialStepError(f'the steps taken must be a list, got {type(taken).__name__}')
    steps = [_taken(entry, index) for index, entry in enumerate(taken)]
    if len(steps) >= MAX_STEPS:
        raise TrialStepError(f'the trial took {len(steps)} steps without an end; the last was {steps[-1]["step"]}')
    if not steps:
        return _step('serve', 'baseline') if plan.of_baseline else _step('check')
    last = steps[-1]
    if last['step'] in ('done', 'stop'):
        raise TrialStepError(f'the trial has ended ({last["step"]}); no step follows')
    if last.get('failed'):
        failure = str(last.get('msg') or f'the {last["step"]} step failed without a message')
        if (last['step'], last.get('side')) in _ROLLS_BACK:
            return _step('roll_back', outcome='failed', reason=failure)
        return _step('stop', msg=failure)
    return _after_success(last, plan)
