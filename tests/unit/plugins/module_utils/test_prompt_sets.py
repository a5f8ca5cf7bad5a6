# Copyright (c) 2025, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import json
import random
import re

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils._prompt_sets import (
    GENERATORS,
    TOOLS,
    built_in_requests,
    padded_request,
    request_characters,
)

BUILT_IN = sorted(GENERATORS)


def load_prompts(name, count, seed):
    return [request["prompt"] for request in built_in_requests(name, count, seed)]


@pytest.mark.parametrize("name", BUILT_IN)
def test_same_seed_gives_the_same_prompts_and_another_seed_others(name):
    assert load_prompts(name, 20, seed=3) == load_prompts(name, 20, seed=3)
    assert load_prompts(name, 20, seed=3) != load_prompts(name, 20, seed=4)


@pytest.mark.parametrize("name", BUILT_IN)
def test_the_first_prompts_do_not_depend_on_how_many_are_asked_for(name):
    assert load_prompts(name, 5, seed=1) == load_prompts(name, 50, seed=1)[:5]


@pytest.mark.parametrize("name", BUILT_IN)
def test_prompts_are_distinct_and_fit_a_small_context(name):
    prompts = load_prompts(name, 500, seed=0)

    assert len(set(prompts)) == 500
    assert max(len(prompt) for prompt in prompts) <= 1200
    assert min(len(prompt) for prompt in prompts) >= 200


def test_sets_differ_from_each_other():
    firsts = {name: load_prompts(name, 1, seed=0)[0] for name in BUILT_IN}
    assert len(set(firsts.values())) == len(BUILT_IN)


def test_code_editing_prompts_carry_the_code_to_copy_back():
    prompt = load_prompts("code_editing", 1, seed=9)[0]

    assert "```python\n" in prompt
    assert "return the" in prompt.lower()
    code = prompt.split("```python\n", 1)[1]
    assert "@dataclass" in code and "def " in code


def test_novel_reasoning_asks_for_reasoning_over_fresh_facts():
    prompts = load_prompts("novel_reasoning", 200, seed=0)
    facts = [tuple(re.findall(r"[A-Z][a-z]+|\d+", prompt)) for prompt in prompts]

    assert all(re.search(r"reason|explain|think|work it out", prompt, re.IGNORECASE) for prompt in prompts)
    assert len(set(facts)) == 200


def test_summarization_prompts_carry_a_report_to_quote():
    prompt = load_prompts("summarization", 1, seed=2)[0]
    report, ask = prompt.split("\n\n")

    assert report.startswith("Weekly operations report")
    assert len(re.findall(r"\d+", report)) >= 6
    assert "exactly" in ask or "word for word" in ask


def test_a_name_that_is_no_built_in_set_gives_none():
    assert built_in_requests("/srv/traffic/sample.jsonl", 3, seed=0) is None


def test_tool_call_requests_are_chat_requests_with_tools_and_fresh_facts():
    requests = built_in_requests("tool_calls", 50, seed=0)

    assert all(request["tools"] == TOOLS for request in requests)
    assert all([message["role"] for message in request["messages"]] == ["system", "user"] for request in requests)
    assert len({request["messages"][1]["content"] for request in requests}) == 50
    names = {tool["function"]["name"] for tool in TOOLS}
    assert names == {"check_stock", "schedule_shipment", "convert_currency"}
    assert json.loads(json.dumps(requests)) == requests


def test_padding_reaches_the_target_length_before_the_question():
    request = {"prompt": "What changed on Monday?"}
    padded = padded_request(request, 8000, random.Random(1))

    assert request_characters(padded) >= 8000
    assert padded["prompt"].startswith("Reference material:")
    assert padded["prompt"].endswith("What changed on Monday?")
    assert request == {"prompt": "What changed on Monday?"}


def test_padding_goes_into_the_first_user_message_and_leaves_long_requests_alone():
    request = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                            {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Sum it up."}]}
    padded = padded_request(request, 3000, random.Random(2))

    assert padded["messages"][0] == {"role": "system", "content": "Be brief."}
    assert padded["messages"][1]["content"].endswith("Hi") and len(padded["messages"][1]["content"]) > 2500
    assert padded["messages"][3] == {"role": "user", "content": "Sum it up."}
    assert padded_request(padded, 3000, random.Random(2)) is padded
