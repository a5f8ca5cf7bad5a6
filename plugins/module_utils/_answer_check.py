# This module_utils file is private to the llmops.vllm collection; it may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Greedy answers to a few fixed requests, read whole from their streams, to compare two servers.

Speculative decoding must not change what a model answers at temperature 0 (the drafts are only
kept where the target model agrees), and it has broken the streaming of tool calls before. So the
answers are read as clients read them, from the stream: the text, the reasoning that a reasoning
parser splits off, every tool call assembled from its deltas and checked against the schema of the
tool it names, and the finish reason. The requests go one at a time, so that batching cannot change
an answer.
"""

from __future__ import annotations

import hashlib
import json

from ansible_collections.llmops.vllm.plugins.module_utils._benchmark_options import SAMPLING_PARAMETERS
from ansible_collections.llmops.vllm.plugins.module_utils._load_generation import OpenAITarget, request_body

_JSON_TYPES = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


class AnswerError(Exception):
    """A request of the check that got no complete answer; the message says which and why."""


def greedy_body(endpoint, model, request, options):
    """The streamed body of ``request`` at temperature 0, whatever sampling the workload or a replay names."""
    greedy = dict(options, temperature=0.0, sampling_seed=None)
    greedy.update((name, None) for name in SAMPLING_PARAMETERS if name != "temperature")
    request = dict((key, value) for key, value in request.items() if key != "sampling")
    return request_body(endpoint, model, request, greedy)


def check_answers(options, requests):
    """Send ``requests`` one at a time and return their answers, in order.

    ``options`` are llmops.vllm.answer_check's. Raises AnswerError when a request gets no complete answer.
    """
    target = OpenAITarget(options["base_url"], options["endpoint"], options["api_key"], options["timeout"],
                          options.get("ssl_context"))
    answers = []
    for index, request in enumerate(requests):
        body = greedy_body(options["endpoint"], options["model"], request, options)
        tools = request.get("tools") or options.get("tools") or []
        try:
            answer = read_answer(target, body, options["endpoint"] == "chat")
        except (OSError, ValueError, AnswerError) as exc:
            raise AnswerError("request %d of the answer check got no complete answer: %s" % (index + 1, exc))
        answer["index"] = index
        answer["tool_calls"] = [dict(call, problem=tool_call_problem(call, tools)) for call in answer["tool_calls"]]
        answers.append(answer)
    return answers


def read_answer(target, body, chat):
    """One request's whole answer from its stream: text, reasoning, tool calls, finish reason, tokens."""
    connection = target.connection()
    try:
        connection.request("POST", target.path, body, target.headers)
        response = connection.getresponse()
        if response.status != 200:
            raise AnswerError("HTTP %d %s: %s" % (response.status, response.reason,
                                                  response.read(2000).decode("utf-8", "replace").strip()))
        return _assembled(response, chat)
    finally:
        connection.close()


def _assembled(response, chat):
    text = []
    reasoning = []
    calls = {}
    finish_reason = None
    completion_tokens = None
    done = False
    for raw in response:
        line = raw.strip()
        if not line.startswith(b"data:"):
            continue
        payload = line[5:].strip()
        if payload == b"[DONE]":
            done = True
            break
        event = json.loads(payload)
        if not isinstance(event, dict):
            raise AnswerError("a stream event is not a JSON object")
        if event.get("error"):
            raise AnswerError("the stream carried an error: %s" % json.dumps(event["error"])[:500])
        completion_tokens = (event.get("usage") or {}).get("completion_tokens", completion_tokens)
        for choice in event.get("choices") or ():
            finish_reason = choice.get("finish_reason") or finish_reason
            if not chat:
                text.append(choice.get("text") or "")
                continue
            delta = choice.get("delta") or {}
            text.append(delta.get("content") or "")
            # vLLM 0.32 names it reasoning; earlier releases, reasoning_content.
            reasoning.append(delta.get("reasoning") or delta.get("reasoning_content") or "")
            for call in delta.get("tool_calls") or ():
                entry = calls.setdefault(call.get("index", len(calls)), {"name": "", "arguments": ""})
                function = call.get("function") or {}
                entry["name"] = entry["name"] or function.get("name") or ""
                entry["arguments"] += function.get("arguments") or ""
    if not done:
        raise AnswerError("the stream ended before 'data: [DONE]'")
    answer_text = "".join(text)
    reasoning_text = "".join(reasoning)
    return {
        "text": answer_text,
        "text_sha256": hashlib.sha256(answer_text.encode("utf-8")).hexdigest(),
        "reasoning_characters": len(reasoning_text),
        # The reasoning itself is compared by its digest: a thinking model's first tokens are all reasoning.
        "reasoning_sha256": hashlib.sha256(reasoning_text.encode("utf-8")).hexdigest(),
        "tool_calls": [calls[index] for index in sorted(calls)],
        "finish_reason": finish_reason,
        "completion_tokens": completion_tokens,
    }


def tool_call_problem(call, tools):
    """What is wrong with one assembled tool call against the tools the request declared, or None."""
    declared = {}
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and function.get("name"):
            declared[function["name"]] = function.get("parameters") or {}
    if call["name"] not in declared:
        return "calls %r, which the request does not declare" % call["name"]
    try:
        arguments = json.loads(call["arguments"])
    except ValueError:
        return "its arguments are not JSON: %r" % call["arguments"][:80]
    if not isinstance(arguments, dict):
        return "its arguments are not a JSON object"
    return schema_problem(arguments, declared[call["name"]])


def schema_problem(arguments, schema):
    """The first way ``arguments`` break the object schema of a tool's parameters, or None.

    The parts of JSON Schema that tool declarations use: required keys, property types and enums,
    and additionalProperties: false.
    """
    for key in schema.get("required") or ():
        if key not in arguments:
            return "it lacks the required argument %s" % key
    properties = schema.get("properties") or {}
    for key, value in arguments.items():
        declared = properties.get(key)
        if declared is None:
            if schema.get("additionalProperties") is False:
                return "it passes %s, which the tool does not declare" % key
            continue
        kinds = declared.get("type")
        kinds = [kinds] if isinstance(kinds, str) else list(kinds or ())
        if kinds and not any(_is_type(value, kind) for kind in kinds):
            return "its argument %s is not of type %s" % (key, " or ".join(kinds))
        if "enum" in declared and value not in declared["enum"]:
            return "its argument %s is not one of %s" % (key, declared["enum"])
    return None


def _is_type(value, kind):
    if kind in ("integer", "number") and isinstance(value, bool):
        return False
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _JSON_TYPES.get(kind, (object,)))
