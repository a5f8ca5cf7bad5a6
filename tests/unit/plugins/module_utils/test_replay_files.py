# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import json
import re

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils._replay_files import (
    ReplayFileError,
    estimated_tokens,
    read_replay_file,
)

SYSTEM = {"role": "system", "content": "You review code."}


def write(tmp_path, text, name="traffic.jsonl"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_prompt_lines_round_trip_unicode(tmp_path):
    path = write(tmp_path, '{"prompt": "first"}\n\n' + json.dumps({"prompt": "Größe – 東京", "source": "x"}) + "\n")

    assert read_replay_file(path) == [{"prompt": "first"}, {"prompt": "Größe – 東京"}]


def test_openai_chat_lines_keep_history_tools_and_output_length(tmp_path):
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    lines = [
        {"model": "kimi", "messages": [SYSTEM, {"role": "user", "content": "Review this."},
                                       {"role": "assistant", "content": "Looks fine."},
                                       {"role": "user", "content": "And the tests?"}], "max_completion_tokens": 300},
        {"messages": [{"role": "user", "content": "Find it."}], "tools": tools, "max_tokens": 50, "stream": True},
    ]
    path = write(tmp_path, "\n".join(json.dumps(line) for line in lines))

    requests = read_replay_file(path)

    assert requests[0] == {"messages": lines[0]["messages"], "max_tokens": 300}
    assert requests[1] == {"messages": lines[1]["messages"], "tools": tools, "max_tokens": 50}


def test_captured_sampling_is_kept_and_other_fields_are_not(tmp_path):
    line = {"messages": [{"role": "user", "content": "Go."}], "temperature": 1.0, "top_p": 0.95, "top_k": -1,
            "min_p": 0.0, "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.1,
            "seed": 7, "stream": True, "user": "someone", "temperature_unit": "x"}
    path = write(tmp_path, json.dumps(line) + "\n" + json.dumps({"prompt": "plain", "top_p": None}) + "\n")

    requests = read_replay_file(path)

    assert requests[0]["sampling"] == {"temperature": 1.0, "top_p": 0.95, "top_k": -1, "min_p": 0.0,
                                       "presence_penalty": 0.5, "frequency_penalty": -0.5,
                                       "repetition_penalty": 1.1, "seed": 7}
    assert requests[1] == {"prompt": "plain"}


def test_sharegpt_conversations_replay_their_history_up_to_the_last_human_turn(tmp_path):
    answer = "x" * 401
    entries = [
        {"id": "a", "conversations": [
            {"from": "system", "value": "Be terse."},
            {"from": "human", "value": "Plan a trip."},
            {"from": "gpt", "value": "Where to?"},
            {"from": "human", "value": "Kraków."},
            {"from": "gpt", "value": answer},
        ]},
        {"conversations": [{"from": "gpt", "value": "A lonely answer."}]},
        {"conversations": [{"from": "human", "value": "Unanswered."}]},
    ]
    path = write(tmp_path, json.dumps(entries), name="sharegpt.json")

    requests = read_replay_file(path)

    assert requests == [
        {"messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Plan a trip."},
                      {"role": "assistant", "content": "Where to?"}, {"role": "user", "content": "Kraków."}],
         "max_tokens": 101},
        {"messages": [{"role": "user", "content": "Unanswered."}]},
    ]


def test_tokens_are_estimated_at_four_characters_each():
    assert [estimated_tokens(text) for text in ("", "abc", "abcd", "abcde")] == [1, 1, 1, 2]


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"prompt": "ok"}\nnot json\n', "line 2 is not JSON"),
        ('{"text": "no prompt"}\n', 'line 1 must be an object with a string "prompt" or a list "messages"'),
        ('{"prompt": "a"}\n["prompt"]\n', "line 2 must be an object"),
        ("\n\n", "holds no requests"),
        ('{"messages": []}\n', '"messages" must be a non-empty list'),
        ('{"messages": [{"role": "robot", "content": "hi"}]}\n', "line 1 message 1 must be an object whose role"),
        ('{"messages": [{"role": "user", "content": 3}]}\n', "content must be a string, a list of parts or null"),
        ('{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}\n',
         "the last message must come from the user or a tool, not the assistant"),
        ('{"messages": [{"role": "user", "content": "q"}], "tools": {"a": 1}}\n', '"tools" must be a list'),
        ('{"prompt": "q", "max_tokens": 0}\n', "max_tokens must be a positive integer, got 0"),
        ('{"prompt": "q"}\n{"prompt": "q", "temperature": -1}\n', "line 2: temperature must be a finite number of at least 0"),
        ('{"prompt": "q", "top_p": 0}\n', "line 1: top_p must be greater than 0 and at most 1"),
        ('{"prompt": "q", "top_p": "high"}\n', "line 1: top_p must be greater than 0 and at most 1"),
        ('{"prompt": "q", "top_k": 2.5}\n', "line 1: top_k must be a whole number"),
        ('{"prompt": "q", "presence_penalty": 3}\n', "line 1: presence_penalty must be between -2 and 2"),
        ('{"prompt": "q", "repetition_penalty": 0}\n', "line 1: repetition_penalty must be a finite number greater"),
        ('{"prompt": "q", "seed": true}\n', "line 1: seed must be a whole number"),
        ('[{"conversations": "no"}]', 'entry 1 must be an object with a list "conversations"'),
        ('[{"conversations": [{"from": "bot", "value": "x"}]}]', 'entry 1 turn 1 must be an object with "from"'),
        ("[oops", "is not JSON"),
    ],
)
def test_a_bad_file_is_reported_with_its_place_and_rule(tmp_path, content, message):
    path = write(tmp_path, content)

    with pytest.raises(ReplayFileError, match=re.escape(message)):
        read_replay_file(path)


def test_a_missing_file_raises_oserror(tmp_path):
    with pytest.raises(OSError):
        read_replay_file(str(tmp_path / "absent.jsonl"))
