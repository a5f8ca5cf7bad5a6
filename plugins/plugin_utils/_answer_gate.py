# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Whether a variant still answers as its baseline does: the correctness gate of a trial.

Both sides answer the same few requests greedily (llmops.vllm.answer_check). Speculative decoding
keeps a draft only where the target model agrees, so greedy answers must match, up to the engine's
own nondeterminism (batch shapes and kernels that differ between a step of one token and a step
that verifies several). The gate compares, per workload:

- greedy equivalence: the share of requests whose answers differ, read whole: the reasoning that a reasoning parser
  splits off (by its digest), the text, the tool calls and the finish reason. A thinking model's first tokens are all
  reasoning, so a check whose answers never get past it compares no text or tool call, and the gate says so;
- tool calls: the share of calls that are valid (JSON, a declared tool, its required arguments and
  types), and the share of answers that call a tool;
- reasoning: the share of answers with reasoning split off;
- finish reasons: how far their distributions lie apart (total variation distance).

Each may differ from the baseline's by at most ``tolerance``, a share of the requests: the A/A
rate of the engine's nondeterminism with room to spare (docs/benchmarking.md). A variant that
breaks any of them is incorrect, whatever its speed.
"""

from __future__ import annotations

import typing as t
from collections.abc import Mapping

from ansible_collections.llmops.vllm.plugins.module_utils._type_names import plain_type_name
from ansible_collections.llmops.vllm.plugins.plugin_utils._workloads import DEFAULT_WORKLOAD

DEFAULT_TOLERANCE = 0.25
EXAMPLES_PER_WORKLOAD = 3


class AnswerGateError(ValueError):
    """Answers that cannot be compared; the message says why."""


def answers_by_workload(value: t.Any, side: str) -> dict[str, Mapping[str, t.Any]]:
    """answer_check results by workload name: one result, or what a looped task registers."""
    if not isinstance(value, Mapping):
        raise AnswerGateError(f'the {side} answers must be an answer_check result, got {plain_type_name(value)}')
    items = value['results'] if isinstance(value.get('results'), list) else [value]
    by_name = {}
    for item in items:
        if not isinstance(item, Mapping) or not isinstance(item.get('answers'), list):
            raise AnswerGateError(f'the {side} answers hold a result without a list of answers')
        by_name[str((item.get('labels') or {}).get('workload') or DEFAULT_WORKLOAD)] = item
    return by_name


def check_tolerance(tolerance: t.Any, where: str = 'tolerance') -> float:
    """The tolerance as a float from 0 to 1; raises AnswerGateError naming ``where``."""
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 <= tolerance <= 1:
        raise AnswerGateError(f'{where} must be a share of the requests from 0 to 1, got {tolerance!r}')
    return float(tolerance)


def answer_gate(variant: t.Any, baseline: t.Any, tolerance: float = DEFAULT_TOLERANCE) -> dict[str, t.Any]:
    """The gate over every workload: {passed, tolerance, workloads: {name: gate}, problems, examples}."""
    tolerance = check_tolerance(tolerance)
    variants = answers_by_workload(variant, 'variant')
    baselines = answers_by_workload(baseline, 'baseline')
    workloads = {}
    problems = []
    examples = []
    for name, result in variants.items():
        if name not in baselines:
            raise AnswerGateError(f'workload {name!r} has answers from the variant but not from the baseline')
        gate = compare_answers(result, baselines[name], tolerance)
        workloads[name] = gate
        problems.extend(f'workload {name}: {problem}' for problem in gate['problems'])
        examples.extend(f'workload {name}: {example}' for example in gate['examples'])
    return {'passed': not problems, 'tolerance': tolerance, 'workloads': workloads, 'problems': problems,
            'examples': examples}


def compare_answers(variant: Mapping[str, t.Any], baseline: Mapping[str, t.Any], tolerance: float) -> dict[str, t.Any]:
    """One workload's gate: the figures of both sides, what breaks the tolerance, and examples."""
    if variant.get('prompt_set_sha256') != baseline.get('prompt_set_sha256'):
        raise AnswerGateError('the two sides were not asked the same requests (their prompt_set_sha256 differ)')
    pairs = list(zip(baseline['answers'], variant['answers']))
    if not pairs or len(baseline['answers']) != len(variant['answers']):
        raise AnswerGateError('the two sides do not hold the same number of answers')
    count = len(pairs)
    differing = [(index, old, new) for index, (old, new) in enumerate(pairs) if _parts_differing(old, new)]
    sides = {'baseline': _figures(baseline['answers']), 'variant': _figures(variant['answers'])}
    problems = []
    notes = []
    if sides['baseline']['reached_answer_share'] == 0 and sides['baseline']['reasoning_share']:
        notes.append('no answer got past its reasoning within the check\'s max_tokens, so only the reasoning and the '
                     'finish reasons were compared, no text or tool call: raise vllm_switch_answer_max_tokens, or ask '
                     'with thinking off (vllm_switch_answer_chat_template_kwargs)')
    if len(differing) > tolerance * count:
        problems.append('%d of %d greedy answers differ from the baseline\'s (the tolerance allows %d)'
                        % (len(differing), count, int(tolerance * count)))
    for figure, words in (('valid_tool_call_share', 'valid tool calls'),
                          ('tool_calling_share', 'answers that call a tool'),
                          ('reasoning_share', 'answers with reasoning')):
        old, new = sides['baseline'][figure], sides['variant'][figure]
        if old is not None and new is not None and abs(new - old) > tolerance:
            problems.append('%s: %.0f%%, against the baseline\'s %.0f%%' % (words, new * 100, old * 100))
    distance = _total_variation(sides['baseline']['finish_reasons'], sides['variant']['finish_reasons'], count)
    if distance > tolerance:
        problems.append('finish reasons %s, against the baseline\'s %s' % (
            _counts_text(sides['variant']['finish_reasons']), _counts_text(sides['baseline']['finish_reasons'])))
    examples = [_difference(index, old, new) for index, old, new in differing[:EXAMPLES_PER_WORKLOAD]]
    examples.extend(_broken_calls(pairs)[:EXAMPLES_PER_WORKLOAD])
    return {
        'passed': not problems,
        'requests': count,
        'thinking': _thinking(baseline),
        'notes': notes,
        'greedy_mismatches': len(differing),
        'greedy_mismatch_rate': len(differing) / float(count),
        'finish_reason_distance': distance,
        'baseline': sides['baseline'],
        'variant': sides['variant'],
        'problems': problems,
        'examples': examples,
    }


# The parts of a greedy answer that must match, in the order a reader meets them.
_PARTS = ('reasoning', 'text', 'tool calls', 'finish reason')


def _part(answer, part):
    if part == 'reasoning':
        return answer.get('reasoning_sha256', answer.get('reasoning_characters'))
    if part == 'text':
        return answer.get('text')
    if part == 'tool calls':
        return [(call.get('name'), call.get('arguments')) for call in answer.get('tool_calls') or ()]
    return answer.get('finish_reason')


def _parts_differing(old, new):
    """The parts in which two greedy answers differ: the whole answer is compared, not its text alone."""
    return [part for part in _PARTS if _part(old, part) != _part(new, part)]


def _thinking(result):
    """Whether the answers were asked with the chat template's thinking on, off, or as the template defaults."""
    kwargs = result.get('chat_template_kwargs') or {}
    for key in ('thinking', 'enable_thinking'):
        if key in kwargs:
            return 'on' if kwargs[key] else 'off'
    return 'template default'


def _figures(answers):
    calls = [call for answer in answers for call in answer.get('tool_calls') or ()]
    reasons: dict[str, int] = {}
    for answer in answers:
        reason = answer.get('finish_reason') or 'unknown'
        reasons[reason] = reasons.get(reason, 0) + 1
    return {
        'tool_calls': len(calls),
        'valid_tool_calls': sum(1 for call in calls if call.get('problem') is None),
        'valid_tool_call_share': (sum(1 for call in calls if call.get('problem') is None) / float(len(calls))
                                  if calls else None),
        'tool_calling_share': sum(1 for answer in answers if answer.get('tool_calls')) / float(len(answers)),
        'reasoning_share': sum(1 for answer in answers if answer.get('reasoning_characters')) / float(len(answers)),
        # Answers that got past their reasoning to text or a tool call: only those show the answer itself.
        'reached_answer_share': sum(1 for answer in answers if (answer.get('text') or '').strip()
                                    or answer.get('tool_calls')) / float(len(answers)),
        'finish_reasons': reasons,
    }


def _total_variation(first, second, count):
    reasons = set(first) | set(second)
    return sum(abs(first.get(reason, 0) - second.get(reason, 0)) for reason in reasons) / (2.0 * count)


def _counts_text(counts):
    return ', '.join('%s %d' % (reason, counts[reason]) for reason in sorted(counts))


def _difference(index, old, new):
    parts = _parts_differing(old, new)
    if parts[0] != 'text':
        return 'request %d: the answers differ in their %s' % (index + 1, ', '.join(parts))
    old_text, new_text = old.get('text') or '', new.get('text') or ''
    at = next((position for position, (a, b) in enumerate(zip(old_text, new_text)) if a != b),
              min(len(old_text), len(new_text)))
    return ('request %d: the answers part at character %d (the baseline\'s has %d characters, the variant\'s %d)'
            % (index + 1, at, len(old_text), len(new_text)))


def _broken_calls(pairs):
    broken = []
    for index, (old, new) in enumerate(pairs):
        old_valid = all(call.get('problem') is None for call in old.get('tool_calls') or ())
        for call in new.get('tool_calls') or ():
            if call.get('problem') is not None and old_valid:
                broken.append('request %d: the variant\'s tool call %s: %s (the baseline\'s calls were valid)'
                              % (index + 1, call.get('name') or '(unnamed)', call['problem']))
    return broken
