# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The correctness gate on canned answer_check results."""

from __future__ import annotations

import pytest

from ansible_collections.llmops.vllm.plugins.plugin_utils._answer_gate import (
    AnswerGateError,
    answer_gate,
    check_tolerance,
)
from ansible_collections.llmops.vllm.plugins.plugin_utils._decision import decide, with_correctness

VALID = {"name": "check_stock", "arguments": '{"site": "A", "item": "b"}', "problem": None}
BROKEN = {"name": "check_stock", "arguments": '{"site": "A", "item"', "problem": "its arguments are not JSON: ..."}


def answer(text, finish_reason="stop", reasoning=0, tool_calls=()):
    return {"text": text, "finish_reason": finish_reason, "reasoning_characters": reasoning,
            "tool_calls": list(tool_calls)}


def checked(answers, workload=None, sha="s1"):
    result = {"answers": answers, "prompt_set_sha256": sha, "labels": {}}
    if workload:
        result["labels"]["workload"] = workload
    return result


def looped(*results):
    return {"changed": False, "results": list(results)}


BASELINE = [answer("def f(x):\n    return x + %d\n" % index) for index in range(8)]


def test_an_a_a_variant_passes():
    gate = answer_gate(checked(list(BASELINE)), checked(list(BASELINE)))

    assert gate["passed"] and gate["problems"] == [] and gate["examples"] == []
    assert gate["workloads"]["default"]["greedy_mismatches"] == 0


def test_answers_within_the_engine_s_nondeterminism_pass_and_beyond_it_fail():
    two_differ = [answer(item["text"] + "#") if index < 2 else item for index, item in enumerate(BASELINE)]
    three_differ = [answer(item["text"][:5] + "!") if index < 3 else item for index, item in enumerate(BASELINE)]

    assert answer_gate(checked(two_differ), checked(BASELINE), tolerance=0.25)["passed"]
    gate = answer_gate(checked(three_differ), checked(BASELINE), tolerance=0.25)

    assert not gate["passed"]
    assert gate["problems"] == ["workload default: 3 of 8 greedy answers differ from the baseline's "
                                "(the tolerance allows 2)"]
    assert gate["examples"][0] == ("workload default: request 1: the answers part at character 5 "
                                   "(the baseline's has 27 characters, the variant's 6)")
    assert gate["workloads"]["default"]["greedy_mismatch_rate"] == pytest.approx(3 / 8)


def test_tool_calls_that_no_longer_parse_fail_even_when_the_text_agrees():
    baseline = [answer("", "tool_calls", tool_calls=[VALID]) for dummy in range(8)]
    variant = [answer("", "tool_calls", tool_calls=[BROKEN if index < 4 else VALID]) for index in range(8)]

    gate = answer_gate(looped(checked(variant, "tools")), looped(checked(baseline, "tools")))

    assert not gate["passed"]
    # Read whole, the four answers whose calls broke differ from the baseline's too.
    assert gate["problems"] == ["workload tools: 4 of 8 greedy answers differ from the baseline's (the tolerance "
                                "allows 2)", "workload tools: valid tool calls: 50%, against the baseline's 100%"]
    assert gate["examples"][0] == "workload tools: request 1: the answers differ in their tool calls"
    assert any(example.startswith("workload tools: request 1: the variant's tool call check_stock: its arguments are "
                                  "not JSON") for example in gate["examples"])
    figures = gate["workloads"]["tools"]
    assert (figures["baseline"]["valid_tool_calls"], figures["variant"]["valid_tool_calls"]) == (8, 4)


def test_lost_reasoning_and_shifted_finish_reasons_fail():
    baseline = [answer("a", reasoning=120) for dummy in range(8)]
    variant = [answer("a", "length" if index < 4 else "stop", reasoning=0 if index < 6 else 120)
               for index in range(8)]

    gate = answer_gate(checked(variant), checked(baseline))

    assert gate["problems"] == [
        "workload default: 6 of 8 greedy answers differ from the baseline's (the tolerance allows 2)",
        "workload default: answers with reasoning: 25%, against the baseline's 100%",
        "workload default: finish reasons length 4, stop 4, against the baseline's stop 8",
    ]
    assert gate["examples"][0] == "workload default: request 1: the answers differ in their reasoning, finish reason"


def thinking(reasoning_sha, finish_reason="length"):
    """A thinking model's answer cut within its reasoning: no text, no tool call."""
    return dict(answer("", finish_reason, reasoning=240), reasoning_sha256=reasoning_sha)


def test_answers_that_never_leave_their_reasoning_are_compared_on_it_and_the_gate_says_so():
    # Kimi-K2.5 with thinking on: 64 greedy tokens are all reasoning, and the text is empty on both sides.
    baseline = [thinking("r%d" % index) for index in range(8)]
    variant = [thinking("r%d" % index if index < 5 else "other") for index in range(8)]

    gate = answer_gate(checked(variant), dict(checked(baseline), chat_template_kwargs={"thinking": True}))

    assert gate["problems"] == ["workload default: 3 of 8 greedy answers differ from the baseline's (the tolerance "
                                "allows 2)"]
    figures = gate["workloads"]["default"]
    assert figures["thinking"] == "on" and figures["baseline"]["reached_answer_share"] == 0
    assert figures["notes"] == ["no answer got past its reasoning within the check's max_tokens, so only the "
                                "reasoning and the finish reasons were compared, no text or tool call: raise "
                                "vllm_switch_answer_max_tokens, or ask with thinking off "
                                "(vllm_switch_answer_chat_template_kwargs)"]


def test_answers_asked_with_thinking_off_reach_their_text_and_say_so():
    baseline = dict(checked(list(BASELINE)), chat_template_kwargs={"thinking": False})

    figures = answer_gate(checked(list(BASELINE)), baseline)["workloads"]["default"]

    assert figures["thinking"] == "off" and figures["notes"] == []
    assert figures["baseline"]["reached_answer_share"] == 1.0


def test_answers_to_other_requests_cannot_be_compared():
    with pytest.raises(AnswerGateError, match="not asked the same requests"):
        answer_gate(checked(BASELINE, sha="s2"), checked(BASELINE))
    with pytest.raises(AnswerGateError, match="not from the baseline"):
        answer_gate(looped(checked(BASELINE, "chat")), looped(checked(BASELINE, "code")))
    with pytest.raises(AnswerGateError, match="same number of answers"):
        answer_gate(checked(BASELINE[:4]), checked(BASELINE))


@pytest.mark.parametrize("value", [-0.1, 1.5, "0.2", True, None])
def test_the_tolerance_is_a_share(value):
    with pytest.raises(AnswerGateError, match="vllm_switch_answer_tolerance must be a share of the requests"):
        check_tolerance(value, "vllm_switch_answer_tolerance")


def test_an_incorrect_variant_is_rolled_back_whatever_its_speed():
    fast = {"results": [{"max_concurrency": 4, "output_throughput_repeats": [200.0, 201.0, 202.0],
                         "output_throughput": 201.0, "failed": 0}]}
    slow = {"results": [{"max_concurrency": 4, "output_throughput_repeats": [100.0, 101.0, 102.0],
                         "output_throughput": 101.0, "failed": 0}]}
    speed = decide(fast, slow)
    wrong = [answer("x") for dummy in range(8)]

    failed = with_correctness(speed, answer_gate(checked(wrong), checked(BASELINE)))
    passed = with_correctness(speed, answer_gate(checked(BASELINE), checked(BASELINE)))
    unchecked = with_correctness(speed, None)

    assert speed["decision"] == "keep"
    assert (failed["decision"], failed["outcome"], failed["rule"]) == ("roll_back", "incorrect", "answers")
    assert failed["reason"].startswith("incorrect: workload default: 8 of 8 greedy answers differ from the "
                                       "baseline's (the tolerance allows 2); for example, workload default: request 1")
    assert failed["levels"] == speed["levels"] and failed["correctness"]["passed"] is False
    assert (passed["decision"], passed["outcome"], passed["correctness"]["passed"]) == ("keep", speed["outcome"], True)
    assert unchecked["correctness"] is None and unchecked["decision"] == "keep"
