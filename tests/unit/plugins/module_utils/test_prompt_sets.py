# Copyright (c) 2025, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import json
import re

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils._prompt_sets import GENERATORS, load_prompts

BUILT_IN = sorted(GENERATORS)


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


def test_a_jsonl_file_is_used_in_order_and_repeated(tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text('{"prompt": "first"}\n\n{"prompt": "second", "source": "x"}\n', encoding="utf-8")

    assert load_prompts(str(path), 5, seed=0) == ["first", "second", "first", "second", "first"]


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"prompt": "ok"}\nnot json\n', "line 2 is not JSON"),
        ('{"text": "no prompt"}\n', 'line 1 must be an object with a string "prompt"'),
        ('["prompt"]\n', 'line 1 must be an object with a string "prompt"'),
        ("\n\n", "holds no prompts"),
    ],
)
def test_a_bad_jsonl_file_is_reported_with_its_line(tmp_path, content, message):
    path = tmp_path / "prompts.jsonl"
    path.write_text(content, encoding="utf-8")

    with pytest.raises(ValueError, match=re.escape(message)):
        load_prompts(str(path), 1, seed=0)


def test_a_missing_file_raises_oserror(tmp_path):
    with pytest.raises(OSError):
        load_prompts(str(tmp_path / "absent.jsonl"), 1, seed=0)


def test_file_prompts_round_trip_unicode(tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text(json.dumps({"prompt": "Zusammenfassung: Größe – 東京"}) + "\n", encoding="utf-8")

    assert load_prompts(str(path), 1, seed=0) == ["Zusammenfassung: Größe – 東京"]
