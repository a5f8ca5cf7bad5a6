# Copyright (c) 2025, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmops.vllm.plugins.modules import openai_benchmark
from ansible_collections.llmops.vllm.tests.unit.plugins.module_utils.openai_stream_server import (
    ScriptedServer,
    Stream,
    refused_url,
)

SPEC_DECODE_BEFORE = """\
vllm:spec_decode_num_drafts_total{engine="0",model_name="tiny"} 10.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="tiny"} 50.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="tiny"} 20.0
"""
SPEC_DECODE_AFTER = """\
vllm:spec_decode_num_drafts_total{engine="0",model_name="tiny"} 30.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="tiny"} 150.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="tiny"} 80.0
"""
LABELS = {"model": "tiny", "variant": "ngram", "speculative_config": {"method": "ngram", "num_speculative_tokens": 5}}


class ModuleExit(Exception):
    pass


class ModuleFailure(Exception):
    pass


@pytest.fixture(autouse=True)
def module_exits(monkeypatch):
    """exit_json / fail_json raise with the result, which carries the warnings issued so far."""
    warnings = []

    def exit_json(self, **result):
        raise ModuleExit(dict(result, warnings=warnings))

    def fail_json(self, **result):
        raise ModuleFailure(dict(result, warnings=warnings))

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, warning: warnings.append(warning))


def run_module(args, outcome=ModuleExit):
    with patch_module_args(args):
        with pytest.raises(outcome) as caught:
            openai_benchmark.main()
    return caught.value.args[0]


def short_streams(count):
    return [Stream(chunks=[(0.0, 1), (0.0, 2)], prompt_tokens=9) for dummy in range(count)]


def test_measures_every_level_and_echoes_labels():
    with ScriptedServer(short_streams(1 + 2 + 2), metrics_pages=[SPEC_DECODE_BEFORE, SPEC_DECODE_AFTER]) as server:
        result = run_module({
            "base_url": server.base_url + "/",
            "model": "tiny",
            "api_key": "sk-secret",
            "num_prompts": 2,
            "concurrency": [1, 2],
            "max_tokens": 3,
            "labels": LABELS,
        })

    assert result["changed"] is False
    assert result["labels"] == LABELS
    assert [level["max_concurrency"] for level in result["results"]] == [1, 2]
    assert [level["completed"] for level in result["results"]] == [2, 2]
    assert [level["total_output_tokens"] for level in result["results"]] == [6, 6]
    assert result["results"][0]["spec_decode_acceptance_rate"] == pytest.approx(60.0)
    assert result["results"][0]["spec_decode_acceptance_length"] == pytest.approx(4.0)
    assert result["msg"] == "Measured 2 concurrency levels; 4 of 4 requests succeeded."
    assert all(request["_authorization"] == "Bearer sk-secret" for request in server.requests)


def test_returns_the_options_used_without_the_api_key():
    with ScriptedServer(short_streams(2)) as server:
        result = run_module({"base_url": server.base_url, "model": "tiny", "api_key": "sk-secret", "num_prompts": 1})

    assert "api_key" not in result["options"]
    assert "sk-secret" not in repr(result)
    assert result["options"]["metrics_url"] == server.base_url + "/metrics"
    assert result["options"]["burstiness"] == 1.0
    assert result["options"]["concurrency"] == [1]
    assert result["options"]["prompt_set"] == "novel_reasoning"


def test_a_partial_failure_returns_normally_with_errors():
    streams = short_streams(2) + [Stream(status=500, error_body={"error": {"message": "engine dead"}})]
    with ScriptedServer(streams) as server:
        result = run_module({"base_url": server.base_url, "model": "tiny", "num_prompts": 2})

    level = result["results"][0]
    assert (level["completed"], level["failed"]) == (1, 1)
    assert level["errors"]["http_500"]["count"] == 1
    assert result["msg"] == "Measured 1 concurrency level; 1 of 2 requests succeeded."


def test_fails_when_no_request_succeeded():
    streams = short_streams(1) + [Stream(status=500, error_body={"error": {"message": "engine dead"}})] * 2
    with ScriptedServer(streams) as server:
        result = run_module({"base_url": server.base_url, "model": "tiny", "num_prompts": 2}, ModuleFailure)

    assert result["msg"] == "No request succeeded. Measured 1 concurrency level; 0 of 2 requests succeeded."
    assert result["results"][0]["errors"]["http_500"]["first_message"] == "HTTP 500 Internal Server Error: engine dead"


def test_fails_early_when_every_warmup_request_fails():
    result = run_module({"base_url": refused_url(), "model": "tiny", "warmup_requests": 2}, ModuleFailure)

    assert result["msg"].startswith("Every warm-up request failed; the first error was: ConnectionRefusedError")
    assert result["errors"]["connection_refused"]["count"] == 2
    assert result["results"] == []


def test_check_mode_sends_nothing():
    result = run_module({"base_url": refused_url(), "model": "tiny", "_ansible_check_mode": True})

    assert result["results"] == []
    assert result["msg"] == "Check mode: no request was sent."
    assert result["changed"] is False


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"num_prompts": 0}, "num_prompts must be at least 1"),
        ({"concurrency": [4, 0]}, "concurrency must list at least one level, each at least 1"),
        ({"concurrency": []}, "concurrency must list at least one level, each at least 1"),
        ({"request_rate": 0}, "request_rate must be a positive number"),
        ({"request_rate": 2, "burstiness": -1}, "burstiness must be a positive number"),
        ({"timeout": 0}, "timeout must be a positive number"),
        ({"warmup_requests": -1}, "warmup_requests must not be negative"),
        ({"temperature": -0.5}, "temperature must be a finite number of at least 0 (0 is greedy)"),
        ({"temperature": float("inf")}, "temperature must be a finite number of at least 0 (0 is greedy)"),
        ({"top_p": 0}, "top_p must be greater than 0 and at most 1"),
        ({"top_p": 1.5}, "top_p must be greater than 0 and at most 1"),
        ({"top_k": -2}, "top_k must be a whole number: -1 or 0 for no limit, else at least 1"),
        ({"min_p": 1.2}, "min_p must be between 0 and 1"),
        ({"presence_penalty": -2.5}, "presence_penalty must be between -2 and 2"),
        ({"frequency_penalty": 2.5}, "frequency_penalty must be between -2 and 2"),
        ({"repetition_penalty": 0}, "repetition_penalty must be a finite number greater than 0 (1 is none)"),
        ({"top_p": float("nan")}, "top_p must be greater than 0 and at most 1"),
        ({"base_url": "http://127.0.0.1:8000/v1"}, "base_url is the server root: drop the trailing /v1"),
        ({"context_tokens": 0}, "context_tokens must be at least 1"),
        ({"chat_template_kwargs": {"thinking": True}, "tool_choice": "none"},
         "chat_template_kwargs needs endpoint: chat; tool_choice needs endpoint: chat"),
    ],
)
def test_bad_option_values_fail_before_any_request(overrides, message):
    args = {"base_url": refused_url(), "model": "tiny"}
    args.update(overrides)
    result = run_module(args, ModuleFailure)

    assert result["msg"] == message


def test_burstiness_requires_a_request_rate():
    result = run_module({"base_url": refused_url(), "model": "tiny", "burstiness": 0.5}, ModuleFailure)

    assert "burstiness" in result["msg"] and "request_rate" in result["msg"]


def test_a_bad_prompt_file_is_reported(tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text("not json\n", encoding="utf-8")
    result = run_module({"base_url": refused_url(), "model": "tiny", "prompt_set": str(path)}, ModuleFailure)

    assert result["msg"].startswith("Cannot run the benchmark: %s line 1 is not JSON" % path)


def test_a_replayed_conversation_goes_to_the_chat_endpoint_with_its_history_and_stops_at_eos(tmp_path):
    path = tmp_path / "conversations.json"
    path.write_text('[{"conversations": [{"from": "human", "value": "Plan it."}, {"from": "gpt", "value": "Where?"},'
                    ' {"from": "human", "value": "Kraków."}, {"from": "gpt", "value": "Twelve chars"}]}]',
                    encoding="utf-8")
    with ScriptedServer(short_streams(3)) as server:
        result = run_module({"base_url": server.base_url, "model": "tiny", "endpoint": "chat", "prompt_set": str(path),
                             "num_prompts": 2, "chat_template_kwargs": {"thinking": True}})

    assert result["results"][0]["completed"] == 2
    assert [request["_path"] for request in server.requests] == ["/v1/chat/completions"] * 3
    for request in server.requests:
        assert [message["content"] for message in request["messages"]] == ["Plan it.", "Where?", "Kraków."]
        assert request["max_completion_tokens"] == 3
        assert request["chat_template_kwargs"] == {"thinking": True}
        assert "ignore_eos" not in request
    assert "Kraków" not in repr(result)


def test_a_chat_set_sent_to_the_completions_endpoint_is_refused():
    result = run_module({"base_url": refused_url(), "model": "tiny", "prompt_set": "tool_calls"}, ModuleFailure)

    assert result["msg"] == ("Cannot run the benchmark: a request with messages needs endpoint chat;"
                             " /v1/completions takes a prompt")


def test_an_unreachable_metrics_url_is_a_warning_not_a_failure():
    with ScriptedServer(short_streams(2)) as server:
        result = run_module({
            "base_url": server.base_url,
            "model": "tiny",
            "num_prompts": 1,
            "metrics_url": refused_url() + "/metrics",
        })

    assert result["results"][0]["completed"] == 1
    assert "spec_decode_acceptance_rate" not in result["results"][0]
    assert any("spec-decode acceptance is not reported" in warning for warning in result["warnings"])


def test_stop_when_slower_stops_a_level_and_skips_the_rest():
    # The scripted server answers in microseconds: any real baseline of a billion tokens/s is far faster.
    baseline = {"1": [1.0e9, 1.01e9, 0.99e9, 1.0e9], "2": [1.0e9, 1.01e9, 0.99e9, 1.0e9]}
    with ScriptedServer(short_streams(1 + 2)) as server:
        result = run_module({
            "base_url": server.base_url,
            "model": "tiny",
            "num_prompts": 1,
            "concurrency": [1, 2],
            "repeats": 4,
            "stop_when_slower": {"baseline_runs": baseline, "margin_pct": 5, "keep_when": "not_slower"},
        })

    assert len(server.requests) == 1 + 2
    assert [level["max_concurrency"] for level in result["results"]] == [1]
    level = result["results"][0]
    assert level["stopped_early"] is True
    assert len(level["output_throughput_repeats"]) == 2
    assert level["completed"] == 2
    assert level["stopped_early_test"]["look"] == 1
    assert level["stopped_early_test"]["upper_pct"] < -5
    assert level["stopped_early_reason"].startswith("stopped after run 2 of 4: 2 runs of the variant against 4")
    assert result["stopped_early"] is True
    assert result["stopped_early_reason"].startswith("at concurrency 1, stopped after run 2 of 4")
    assert result["stopped_early_reason"].endswith("; level 2 skipped")
    assert "Stopped early" in result["msg"]
    assert "stop_when_slower" not in result["options"]


def test_stop_when_slower_goes_on_while_the_variant_may_win():
    # A baseline far slower than anything the server does: the variant is never losing.
    baseline = {1: [1.0e-3, 1.1e-3, 0.9e-3]}
    with ScriptedServer(short_streams(1 + 3 + 3)) as server:
        result = run_module({
            "base_url": server.base_url,
            "model": "tiny",
            "num_prompts": 1,
            "concurrency": [1, 2],
            "repeats": 3,
            "stop_when_slower": {"baseline_runs": baseline, "keep_when": "faster"},
        })

    assert len(server.requests) == 1 + 3 + 3
    assert [len(level["output_throughput_repeats"]) for level in result["results"]] == [3, 3]
    assert not any("stopped_early" in level for level in result["results"])
    assert result["stopped_early"] is False
    assert "stopped_early_reason" not in result


def test_without_stop_when_slower_nothing_changes():
    with ScriptedServer(short_streams(1 + 2 + 2)) as server:
        result = run_module({"base_url": server.base_url, "model": "tiny", "num_prompts": 1, "concurrency": [1, 2],
                             "repeats": 2})

    assert len(server.requests) == 1 + 2 + 2
    assert "stopped_early" not in result
    assert not any(key.startswith("stopped_early") for level in result["results"] for key in level)


@pytest.mark.parametrize("stop, message", [
    ({"baseline_runs": {"one": [1.0, 2.0]}}, "stop_when_slower.baseline_runs.one: the key must be a concurrency level"),
    ({"baseline_runs": {"1": [1.0, "fast"]}}, "stop_when_slower.baseline_runs.1 must be a list of output throughputs"),
    ({"baseline_runs": {"1": 5.0}}, "stop_when_slower.baseline_runs.1 must be a list"),
    ({"baseline_runs": {}, "margin_pct": -1}, "stop_when_slower.margin_pct must be a finite number of at least 0"),
])
def test_bad_stop_when_slower_fails_before_any_request(stop, message):
    with ScriptedServer() as server:
        result = run_module({"base_url": server.base_url, "model": "tiny", "stop_when_slower": stop},
                            outcome=ModuleFailure)
        assert server.requests == []
    assert message in result["msg"]


def test_levels_before_the_stop_keep_all_their_runs():
    # No baseline runs for level 1: it is never tested and runs to its end; level 2 stops after its second run.
    baseline = {"2": [1.0e9, 1.01e9, 0.99e9]}
    with ScriptedServer(short_streams(1 + 3 + 2)) as server:
        result = run_module({
            "base_url": server.base_url,
            "model": "tiny",
            "num_prompts": 1,
            "concurrency": [1, 2, 4],
            "repeats": 3,
            "stop_when_slower": {"baseline_runs": baseline, "keep_when": "faster"},
        })

    assert len(server.requests) == 1 + 3 + 2
    assert [len(level["output_throughput_repeats"]) for level in result["results"]] == [3, 2]
    assert "stopped_early" not in result["results"][0]
    assert result["results"][1]["stopped_early"] is True
    assert result["stopped_early_reason"].startswith("at concurrency 2, stopped after run 2 of 3")
    assert result["stopped_early_reason"].endswith("; level 4 skipped")


def counters(finished, running=0, waiting=0):
    return (
        'vllm:request_success_total{engine="0",finished_reason="stop",model_name="tiny"} %d.0\n'
        'vllm:request_success_total{engine="0",finished_reason="length",model_name="tiny"} 3.0\n'
        'vllm:num_requests_running{engine="0",model_name="tiny"} %d.0\n'
        'vllm:num_requests_waiting{engine="0",model_name="tiny"} %d.0\n' % (finished, running, waiting)
    )


@pytest.mark.parametrize("after, finished_after, foreign", [
    # The server finished exactly the benchmark's 2 requests of the level: nothing foreign.
    (counters(12), 15, 0),
    # 5 more finished than the benchmark sent, and one is still running when the level is over.
    (counters(17, running=1), 20, 6),
    # One foreign request waits in the queue when the level ends.
    (counters(12, waiting=1), 15, 1),
])
def test_requests_the_benchmark_did_not_send_are_counted_from_the_servers_own_counters(after, finished_after, foreign):
    with ScriptedServer(short_streams(1 + 2), metrics_pages=[counters(10), after]) as server:
        result = run_module({"base_url": server.base_url, "model": "tiny", "num_prompts": 2})

    level = result["results"][0]
    assert level["foreign_requests"] == foreign
    # Every finish reason counts: 10 stopped and 3 cut at their length before the level.
    assert level["server_requests_before"] == {"finished": 13, "running": 0, "waiting": 0}
    assert level["server_requests_after"]["finished"] == finished_after


def test_without_the_servers_counters_foreign_requests_are_unknown():
    with ScriptedServer(short_streams(1 + 2), metrics_pages=[SPEC_DECODE_BEFORE, SPEC_DECODE_AFTER]) as server:
        result = run_module({"base_url": server.base_url, "model": "tiny", "num_prompts": 2})

    assert result["results"][0]["foreign_requests"] is None


def test_a_reading_waits_for_the_servers_queue_to_empty_so_a_late_count_is_not_called_foreign():
    # The server counts the last request a moment after its stream ended: read at once, the level would look
    # one request short now and the next level one request over.
    pages = [counters(10), counters(11, running=1), counters(12)]
    with ScriptedServer(short_streams(1 + 2), metrics_pages=pages) as server:
        result = run_module({"base_url": server.base_url, "model": "tiny", "num_prompts": 2})

    assert result["results"][0]["foreign_requests"] == 0
    assert result["results"][0]["server_requests_after"] == {"finished": 15, "running": 0, "waiting": 0}
