# This module_utils file is private to the llmops.vllm collection; it may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Replay files: requests captured from real traffic, in the formats people already keep them in.

- JSONL, one request per line: ``{"prompt": str}`` for /v1/completions, or the body of a chat
  request, ``{"messages": [...]}`` with optional ``tools`` and ``max_tokens`` (or
  ``max_completion_tokens``), as an OpenAI-style client sent it. The sampling it names
  (``temperature``, ``top_p``, ``top_k``, ``min_p``, the penalties, ``seed``) is kept, so that it
  is replayed as it was served.
- ShareGPT-style JSON: a list of ``{"conversations": [{"from": "system"|"human"|"gpt", "value": str}]}``.
  Each conversation is replayed up to its last human turn, with every earlier turn as history; the
  answer recorded after that turn sets the request's output length (about 4 characters a token, as
  there is no tokenizer on the client).

A request is a dict with ``prompt`` (a string) or ``messages`` (a list), and optionally ``tools``,
``max_tokens`` and ``sampling`` (a dict of the captured sampling parameters). Errors name the file, the line or entry, and the rule.
"""

from __future__ import annotations

import json
import math

from ansible_collections.llmops.vllm.plugins.module_utils._benchmark_options import (
    SAMPLING_PARAMETERS,
    sampling_problems,
)

CHARACTERS_PER_TOKEN = 4

_ROLES = ("system", "developer", "user", "assistant", "tool")
_SHAREGPT_ROLES = {
    "system": "system",
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "chatgpt": "assistant",
    "tool": "tool",
    "function_response": "tool",
}


class ReplayFileError(ValueError):
    """A replay file that cannot be used; the message names the file, the place and the rule."""


def estimated_tokens(text):
    """Tokens in ``text`` by the usual rule of thumb, at least one."""
    return max(1, int(math.ceil(len(text) / float(CHARACTERS_PER_TOKEN))))


def read_replay_file(path):
    """Every request of a replay file, in order; raises ReplayFileError or OSError."""
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    if not text.strip():
        raise ReplayFileError("%s holds no requests" % path)
    if text.lstrip().startswith("["):
        requests = _sharegpt_requests(path, text)
    else:
        requests = _jsonl_requests(path, text)
    if not requests:
        raise ReplayFileError("%s holds no requests" % path)
    return requests


def _jsonl_requests(path, text):
    requests = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = "%s line %d" % (path, number)
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise ReplayFileError("%s is not JSON: %s" % (where, exc))
        requests.append(_jsonl_request(where, record))
    return requests


def _jsonl_request(where, record):
    if not isinstance(record, dict):
        raise ReplayFileError('%s must be an object with a string "prompt" or a list "messages"' % where)
    if isinstance(record.get("prompt"), str):
        request = {"prompt": record["prompt"]}
    elif "messages" in record:
        request = {"messages": _checked_messages(where, record["messages"])}
        if record.get("tools") is not None:
            if not isinstance(record["tools"], list) or not all(isinstance(tool, dict) for tool in record["tools"]):
                raise ReplayFileError('%s: "tools" must be a list of objects' % where)
            request["tools"] = record["tools"]
    else:
        raise ReplayFileError('%s must be an object with a string "prompt" or a list "messages"' % where)
    limit = record.get("max_completion_tokens", record.get("max_tokens"))
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ReplayFileError("%s: max_tokens must be a positive integer, got %r" % (where, limit))
        request["max_tokens"] = limit
    sampling = dict((name, record[name]) for name in SAMPLING_PARAMETERS + ("seed",) if record.get(name) is not None)
    problems = sampling_problems(sampling, where="%s: " % where)
    if problems:
        raise ReplayFileError("; ".join("%s %s" % problem for problem in problems))
    if sampling:
        request["sampling"] = sampling
    return request


def _checked_messages(where, messages):
    if not isinstance(messages, list) or not messages:
        raise ReplayFileError('%s: "messages" must be a non-empty list' % where)
    for index, message in enumerate(messages):
        here = "%s message %d" % (where, index + 1)
        if not isinstance(message, dict) or message.get("role") not in _ROLES:
            raise ReplayFileError("%s must be an object whose role is one of %s" % (here, ", ".join(_ROLES)))
        content = message.get("content")
        if not (content is None or isinstance(content, (str, list))):
            raise ReplayFileError("%s: content must be a string, a list of parts or null" % here)
    if messages[-1]["role"] not in ("user", "tool"):
        raise ReplayFileError("%s: the last message must come from the user or a tool, not the %s"
                              % (where, messages[-1]["role"]))
    return messages


def _sharegpt_requests(path, text):
    try:
        entries = json.loads(text)
    except ValueError as exc:
        raise ReplayFileError("%s is not JSON: %s" % (path, exc))
    requests = []
    for index, entry in enumerate(entries):
        where = "%s entry %d" % (path, index + 1)
        turns = entry.get("conversations") if isinstance(entry, dict) else None
        if not isinstance(turns, list):
            raise ReplayFileError('%s must be an object with a list "conversations"' % where)
        request = _sharegpt_request(where, turns)
        if request is not None:
            requests.append(request)
    return requests


def _sharegpt_request(where, turns):
    messages = []
    for number, turn in enumerate(turns, 1):
        role = _SHAREGPT_ROLES.get(turn.get("from")) if isinstance(turn, dict) else None
        if role is None or not isinstance(turn.get("value"), str):
            raise ReplayFileError('%s turn %d must be an object with "from" (one of %s) and a string "value"'
                                  % (where, number, ", ".join(sorted(_SHAREGPT_ROLES))))
        messages.append({"role": role, "content": turn["value"]})
    last_user = max((index for index, message in enumerate(messages) if message["role"] == "user"), default=None)
    if last_user is None:
        # Nothing to send: a conversation without a human turn is skipped, not an error.
        return None
    request = {"messages": messages[:last_user + 1]}
    answer = messages[last_user + 1] if last_user + 1 < len(messages) else None
    if answer is not None and answer["role"] == "assistant" and answer["content"]:
        request["max_tokens"] = estimated_tokens(answer["content"])
    return request
