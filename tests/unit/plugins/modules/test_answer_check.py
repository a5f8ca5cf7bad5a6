# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""llmops.vllm.answer_check against a scripted OpenAI server on 127.0.0.1 that streams whole answers."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils._answer_check import (
    greedy_body,
    schema_problem,
    tool_call_problem,
)
from ansible_collections.llmops.vllm.plugins.module_utils._prompt_sets import TOOLS
from ansible_collections.llmops.vllm.plugins.modules import answer_check
from ansible_collections.llmops.vllm.tests.unit.plugins.module_utils.openai_stream_server import refused_url
from ansible_collections.llmops.vllm.tests.unit.plugins.modules.wait_fakes import run_module


def run(monkeypatch, args, check_mode=False):
    """answer_check's result; the test says whether it failed."""
    return run_module(monkeypatch, answer_check, args, check_mode)


def event(choices=None, usage=None):
    body = {"id": "x", "choices": choices or []}
    if usage:
        body["usage"] = usage
    return "data: " + json.dumps(body, separators=(",", ":")) + "\n\n"


def chat_delta(finish_reason=None, **delta):
    return {"index": 0, "delta": delta, "finish_reason": finish_reason}


class AnswerServer:
    """Answers each POST with the next scripted list of SSE events (strings), or (status, body)."""

    def __init__(self, scripts):
        self.scripts = list(scripts)
        self.bodies = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                server.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                script = server.scripts.pop(0)
                if isinstance(script, tuple):
                    status, text = script
                    data = text.encode()
                    self.send_response(status)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                data = "".join(script).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.httpd.server_address[1]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc_info):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_chat_answers_are_assembled_as_a_client_reads_them(monkeypatch):
    tool_call = [
        event([chat_delta(reasoning="Need the stock ")]),
        event([chat_delta(reasoning_content="first.")]),
        event([chat_delta(tool_calls=[{"index": 0, "id": "c1", "type": "function",
                                       "function": {"name": "check_stock", "arguments": '{"site": "Le'}}])]),
        event([chat_delta(tool_calls=[{"index": 0, "function": {"arguments": 'eds", "item": "pallets"}'}}])]),
        event([chat_delta(tool_calls=[{"index": 1, "function": {"name": "convert_currency",
                                                                "arguments": '{"amount": "ten"}'}}])]),
        event([chat_delta(finish_reason="tool_calls")]),
        event(usage={"prompt_tokens": 90, "completion_tokens": 31, "total_tokens": 121}),
        "data: [DONE]\n\n",
    ]
    plain = [event([chat_delta(content="All ")]), event([chat_delta(content="done.", finish_reason="stop")]),
             "data: [DONE]\n\n"]
    with AnswerServer([tool_call, plain]) as server:
        failed, result = run(monkeypatch, {"base_url": server.url, "model": "kimi", "endpoint": "chat",
                                           "prompt_set": "tool_calls", "num_prompts": 2, "max_tokens": 32,
                                           "labels": {"workload": "tools"}})

    assert not failed
    first, second = result["answers"]
    assert (first["index"], first["text"], first["reasoning_characters"]) == (0, "", len("Need the stock first."))
    assert first["finish_reason"] == "tool_calls" and first["completion_tokens"] == 31
    assert first["tool_calls"] == [
        {"name": "check_stock", "arguments": '{"site": "Leeds", "item": "pallets"}', "problem": None},
        {"name": "convert_currency", "arguments": '{"amount": "ten"}',
         "problem": "it lacks the required argument source"},
    ]
    assert (second["text"], second["finish_reason"], second["tool_calls"]) == ("All done.", "stop", [])
    assert result["labels"] == {"workload": "tools"} and len(result["prompt_set_sha256"]) == 64
    # Greedy and one at a time, whatever the workload samples; the tools went with the requests.
    assert all(body["temperature"] == 0.0 and "top_p" not in body and "seed" not in body for body in server.bodies)
    assert all(body["max_completion_tokens"] == 32 and body["tools"] == TOOLS for body in server.bodies)


def test_the_same_seed_asks_the_same_requests(monkeypatch):
    answers = [event([{"index": 0, "text": "x", "finish_reason": "length"}]), "data: [DONE]\n\n"]
    with AnswerServer([answers, answers]) as server:
        dummy, first = run(monkeypatch, {"base_url": server.url, "model": "tiny", "prompt_set": "code_editing",
                                         "num_prompts": 1})
        dummy, second = run(monkeypatch, {"base_url": server.url, "model": "tiny", "prompt_set": "code_editing",
                                          "num_prompts": 1})

    assert first["prompt_set_sha256"] == second["prompt_set_sha256"]
    assert server.bodies[0]["prompt"] == server.bodies[1]["prompt"]
    assert first["answers"][0]["text_sha256"] == second["answers"][0]["text_sha256"]


@pytest.mark.parametrize("script, message", [
    ((500, '{"error": {"message": "engine dead"}}'), "request 1 of the answer check got no complete answer: HTTP 500"),
    ([event([{"index": 0, "text": "x"}])], "the stream ended before 'data: [DONE]'"),
    (['data: {"error": {"message": "boom"}}\n\n'], "the stream carried an error"),
])
def test_a_request_without_a_complete_answer_fails_the_check(monkeypatch, script, message):
    with AnswerServer([script]) as server:
        failed, result = run(monkeypatch, {"base_url": server.url, "model": "tiny", "num_prompts": 1})

    assert failed and message in result["msg"]


def test_bad_values_and_an_unreachable_server_fail_clearly(monkeypatch):
    assert run(monkeypatch, {"base_url": refused_url(), "model": "tiny", "num_prompts": 0}) == (
        True, {"changed": False, "labels": {}, "msg": "num_prompts must be at least 1"})
    failed, result = run(monkeypatch, {"base_url": refused_url(), "model": "tiny"})
    assert failed and "got no complete answer" in result["msg"]


def test_check_mode_sends_nothing(monkeypatch):
    failed, result = run(monkeypatch, {"base_url": refused_url(), "model": "tiny"}, check_mode=True)

    assert not failed and "answers" not in result and result["msg"].startswith("Check mode")


def test_a_replayed_request_s_sampling_gives_way_to_greedy():
    options = {"temperature": 1.0, "top_p": 0.9, "sampling_seed": 3, "max_tokens": 16, "ignore_eos": False,
               "tools": None, "tool_choice": None, "chat_template_kwargs": None}
    request = {"prompt": "Hi", "sampling": {"temperature": 0.7, "seed": 4}}

    body = json.loads(greedy_body("completions", "tiny", request, options))

    assert body["temperature"] == 0.0 and not {"top_p", "seed"} & set(body)


@pytest.mark.parametrize("call, problem", [
    ({"name": "check_stock", "arguments": '{"site": "A", "item": "b"}'}, None),
    ({"name": "launch", "arguments": "{}"}, "calls 'launch', which the request does not declare"),
    ({"name": "check_stock", "arguments": '{"site": "A", "item"'}, "its arguments are not JSON"),
    ({"name": "check_stock", "arguments": ""}, "its arguments are not JSON"),
    ({"name": "check_stock", "arguments": "[1]"}, "its arguments are not a JSON object"),
    ({"name": "schedule_shipment", "arguments": '{"origin": "A", "destination": "B", "item": "c", "quantity": 2.5}'},
     "its argument quantity is not of type integer"),
    ({"name": "schedule_shipment", "arguments": '{"origin": "A", "destination": "B", "item": "c", "quantity": true}'},
     "its argument quantity is not of type integer"),
    ({"name": "convert_currency", "arguments": '{"amount": 3, "source": "EUR", "target": "GBP"}'}, None),
])
def test_tool_calls_are_checked_against_the_declared_schema(call, problem):
    found = tool_call_problem(call, TOOLS)

    assert found == problem if problem is None else found.startswith(problem)


def test_schema_enums_and_closed_objects():
    schema = {"type": "object", "properties": {"unit": {"type": "string", "enum": ["C", "F"]}},
              "additionalProperties": False}

    assert schema_problem({"unit": "C"}, schema) is None
    assert schema_problem({"unit": "K"}, schema) == "its argument unit is not one of ['C', 'F']"
    assert schema_problem({"unit": "C", "x": 1}, schema) == "it passes x, which the tool does not declare"
