# Copyright (c) 2025, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import json
import random
import types

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils import _load_generation
from ansible_collections.llmops.vllm.plugins.module_utils._load_generation import (
    BenchmarkAborted,
    _ChunkedBody,
    OpenAITarget,
    arrival_offsets,
    request_body,
    load_requests,
    run_benchmark,
    run_load,
    run_window,
)
from ansible_collections.llmops.vllm.plugins.module_utils._benchmark_statistics import (
    run_output_throughput,
    summarize_level,
)
from ansible_collections.llmops.vllm.tests.unit.plugins.module_utils.openai_stream_server import (
    ScriptedServer,
    Stream,
    VirtualClock,
    refused_url,
)

SPEC_DECODE_BEFORE = """\
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="tiny"} 100.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="tiny"} 500.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="tiny"} 200.0
"""
SPEC_DECODE_AFTER = """\
vllm:spec_decode_num_drafts_total{engine="0",model_name="tiny"} 140.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="tiny"} 700.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="tiny"} 290.0
"""


@pytest.fixture
def clock(monkeypatch):
    """Virtual time for the load generator; its sleeps advance the clock instead of waiting."""
    virtual = VirtualClock()
    fake_time = types.SimpleNamespace(perf_counter=virtual.perf_counter, sleep=virtual.sleep)
    monkeypatch.setattr(_load_generation, "time", fake_time)
    return virtual


def options(base_url, **overrides):
    values = dict(
        base_url=base_url,
        model="tiny",
        api_key=None,
        endpoint="completions",
        prompt_set="novel_reasoning",
        num_prompts=2,
        concurrency=[1],
        request_rate=None,
        burstiness=1.0,
        max_tokens=16,
        temperature=0.0,
        ignore_eos=True,
        warmup_requests=0,
        repeats=1,
        seed=0,
        timeout=5.0,
        metrics_url=base_url + "/metrics",
    )
    values.update(overrides)
    return values


def load(server, streams_count, endpoint="completions", api_key=None, timeout=5.0, concurrency=1):
    target = OpenAITarget(server.base_url, endpoint, api_key, timeout)
    return run_load(target, [b"{}"] * streams_count, concurrency, [0.0] * streams_count)


def test_times_each_token_chunk_as_vllm_bench_serve_does(clock):
    streams = [Stream(chunks=[(0.050, 1), (0.060, 1), (0.080, 2), (0.090, 1)], prompt_tokens=11)]
    with ScriptedServer(streams, clock) as server:
        run = load(server, 1)

    outcome = run.outcomes[0]
    assert outcome.success
    assert outcome.ttft == pytest.approx(0.050)
    assert outcome.itl == pytest.approx([0.010, 0.020, 0.010])
    assert outcome.latency == pytest.approx(0.090)
    assert outcome.output_tokens == 5
    assert outcome.prompt_tokens == 11
    assert run.duration == pytest.approx(0.090)


def test_later_requests_on_a_kept_alive_connection_are_timed_from_their_own_start(clock):
    streams = [Stream(chunks=[(0.010, 1), (0.020, 1)]), Stream(chunks=[(0.030, 1), (0.045, 3)])]
    with ScriptedServer(streams, clock) as server:
        run = load(server, 2)

    second = run.outcomes[1]
    assert second.ttft == pytest.approx(0.030)
    assert second.latency == pytest.approx(0.045)
    assert second.output_tokens == 4
    assert run.duration == pytest.approx(0.020 + 0.045)


def test_chat_stream_and_spaced_usage_are_read(clock):
    streams = [Stream(chunks=[(0.020, 1), (0.025, 2)], chat=True, usage_spacing=True, prompt_tokens=3)]
    with ScriptedServer(streams, clock) as server:
        run = load(server, 1, endpoint="chat", api_key="secret")

    outcome = run.outcomes[0]
    assert (outcome.success, outcome.output_tokens, outcome.prompt_tokens) == (True, 3, 3)
    assert server.requests[0]["_path"] == "/v1/chat/completions"
    assert server.requests[0]["_authorization"] == "Bearer secret"


def test_without_usage_the_token_chunks_are_counted(clock):
    with ScriptedServer([Stream(chunks=[(0.01, 3), (0.02, 3)], usage=False)], clock) as server:
        outcome = load(server, 1).outcomes[0]

    assert (outcome.success, outcome.output_tokens, outcome.prompt_tokens) == (True, 2, 0)


@pytest.mark.parametrize("framing", ["close_delimited", 7, 1000])
def test_any_framing_of_the_body_is_read(framing):
    streams = [Stream(chunks=[(0.0, 1), (0.0, 2), (0.0, 1)], framing=framing) for dummy in range(2)]
    with ScriptedServer(streams) as server:
        run = load(server, 2)

    assert [(outcome.success, outcome.output_tokens) for outcome in run.outcomes] == [(True, 4), (True, 4)]
    assert [len(outcome.itl) for outcome in run.outcomes] == [2, 2]


def test_chunked_framing_cut_at_any_byte_gives_the_same_payload():
    body = b"5;ext=1\r\nhello\r\n1\r\n \r\nb\r\ndata: [x]\n\n\r\n0\r\nTrailer: y\r\n\r\n"
    for cut in range(len(body) + 1):
        decoder = _ChunkedBody()
        payload = decoder.feed(body[:cut]) + decoder.feed(body[cut:])
        assert (payload, decoder.finished) == (b"hello data: [x]\n\n", True), cut

    decoder = _ChunkedBody()
    assert b"".join(decoder.feed(body[index:index + 1]) for index in range(len(body))) == b"hello data: [x]\n\n"
    assert decoder.finished


def test_bad_chunk_framing_is_a_protocol_error():
    with pytest.raises(ValueError):
        _ChunkedBody().feed(b"zz\r\nhello\r\n")


@pytest.mark.parametrize(
    "stream, kind, message",
    [
        (
            Stream(status=500, error_body={"error": {"message": "engine dead", "type": "InternalServerError"}}),
            "http_500",
            "HTTP 500 Internal Server Error: engine dead",
        ),
        (
            Stream(status=400, error_body={"error": {"message": "min_p is not supported", "code": 400}}),
            "http_400",
            "HTTP 400 Bad Request: min_p is not supported",
        ),
        (Stream(status=404, error_body={"detail": "Not Found"}), "http_404", "HTTP 404 Not Found: Not Found"),
        (
            Stream(chunks=[(0.01, 1)], error_event={"error": {"message": "Internal server error", "code": 500}}),
            "stream_error",
            "Internal server error",
        ),
        (Stream(chunks=[(0.01, 1), (0.02, 1)], done=False), "incomplete_stream", "the stream ended before"),
        (Stream(chunks=[]), "no_tokens", "the stream carried no token chunk"),
        (Stream(chunks=[(0.01, 1), (0.02, 1), (0.03, 1)], cut_after=2), "connection_closed", "IncompleteRead"),
    ],
)
def test_a_failed_request_is_recorded_not_raised(clock, stream, kind, message):
    with ScriptedServer([stream], clock) as server:
        outcome = load(server, 1).outcomes[0]

    assert not outcome.success
    assert outcome.error_kind == kind
    assert outcome.error_message.startswith(message)


def test_connection_refused_is_recorded():
    target = OpenAITarget(refused_url(), "completions", None, 5.0)
    outcome = run_load(target, [b"{}"], 1, [0.0]).outcomes[0]

    assert (outcome.success, outcome.error_kind) == (False, "connection_refused")
    assert "Connection refused" in outcome.error_message


def test_a_stalled_stream_times_out():
    with ScriptedServer([Stream(stall=True)]) as server:
        outcome = load(server, 1, timeout=0.3).outcomes[0]

    assert (outcome.success, outcome.error_kind) == (False, "timeout")


def test_after_a_failure_the_next_request_uses_a_new_connection(clock):
    streams = [Stream(chunks=[(0.01, 1), (0.02, 1)], cut_after=1), Stream(chunks=[(0.01, 1), (0.02, 1)])]
    with ScriptedServer(streams, clock) as server:
        run = load(server, 2)

    assert [outcome.success for outcome in run.outcomes] == [False, True]


def test_a_kept_alive_connection_closed_by_the_server_is_retried_once(clock):
    streams = [Stream(chunks=[(0.01, 1)]) for dummy in range(3)]
    with ScriptedServer(streams, clock, close_after_each=True) as server:
        run = load(server, 3)

    assert [outcome.success for outcome in run.outcomes] == [True, True, True]
    assert len(server.requests) == 3


def test_concurrency_fills_and_caps_requests_in_flight():
    streams = [Stream(chunks=[(0.0, 1)], hold_until=3) for dummy in range(3)]
    streams += [Stream(chunks=[(0.0, 1), (0.0, 1)]) for dummy in range(9)]
    with ScriptedServer(streams) as server:
        run = load(server, 12, concurrency=3)

    assert all(outcome.success for outcome in run.outcomes)
    assert server.max_in_flight == 3


def test_request_bodies_ask_for_usage_and_honour_the_options():
    completion = json.loads(request_body("completions", "tiny", {"prompt": "Hi"}, options("", max_tokens=32)))
    chat = json.loads(request_body("chat", "tiny", {"prompt": "Hi"},
                                   options("", max_tokens=32, temperature=0.7, ignore_eos=False)))

    assert completion == {
        "model": "tiny",
        "prompt": "Hi",
        "max_tokens": 32,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": True,
    }
    assert chat == {
        "model": "tiny",
        "messages": [{"role": "user", "content": "Hi"}],
        "max_completion_tokens": 32,
        "temperature": 0.7,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def test_unset_sampling_is_left_to_the_model_s_generation_config():
    body = json.loads(request_body("chat", "kimi", {"prompt": "Hi"}, options("", temperature=None)))

    assert not set(body) & {"temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty",
                            "repetition_penalty", "seed"}


def test_sampling_options_are_sent_and_the_seed_follows_the_request_s_place():
    chosen = options("", temperature=1.0, top_p=0.95, top_k=40, min_p=0.05, presence_penalty=0.1,
                     frequency_penalty=0.2, repetition_penalty=1.05, sampling_seed=100)

    bodies = [json.loads(request_body("chat", "kimi", {"prompt": "Hi"}, chosen, index)) for index in (0, 3)]

    assert {key: bodies[0][key] for key in ("temperature", "top_p", "top_k", "min_p", "presence_penalty",
                                            "frequency_penalty", "repetition_penalty")} == {
        "temperature": 1.0, "top_p": 0.95, "top_k": 40, "min_p": 0.05, "presence_penalty": 0.1,
        "frequency_penalty": 0.2, "repetition_penalty": 1.05}
    assert [body["seed"] for body in bodies] == [100, 103]


def test_a_replayed_request_keeps_its_captured_sampling_over_the_workload_s():
    captured = {"messages": [{"role": "user", "content": "Go."}], "sampling": {"temperature": 0.6, "seed": 9}}

    body = json.loads(request_body("chat", "kimi", captured, options("", temperature=1.0, top_p=0.95,
                                                                     sampling_seed=0), 5))

    assert (body["temperature"], body["seed"], body["top_p"]) == (0.6, 9, 0.95)
    assert "sampling" not in body


def test_two_benchmarks_with_one_sampling_seed_send_the_same_seeds(clock):
    sent = []
    for dummy in range(2):
        streams = [Stream(chunks=[(0.01, 1)]) for dummy in range(1 + 3)]
        with ScriptedServer(streams, clock) as server:
            run_benchmark(options(server.base_url, num_prompts=3, warmup_requests=1, sampling_seed=40,
                                  temperature=1.0))
        sent.append([(request["prompt"], request["seed"]) for request in server.requests])

    assert sent[0] == sent[1]
    assert [seed for dummy, seed in sent[0]] == [40, 41, 42, 43]


def test_chat_bodies_carry_history_tools_template_kwargs_and_the_request_s_own_length():
    messages = [{"role": "system", "content": "Terse."}, {"role": "user", "content": "Go."}]
    tools = [{"type": "function", "function": {"name": "f"}}]
    chosen = options("", max_tokens=64, ignore_eos=False, chat_template_kwargs={"thinking": True},
                     tool_choice="none", tools=tools)

    short = json.loads(request_body("chat", "kimi", {"messages": messages, "max_tokens": 10}, chosen))
    capped = json.loads(request_body("chat", "kimi", {"messages": messages, "max_tokens": 999, "tools": []}, chosen))
    own_tools = [{"type": "function", "function": {"name": "g"}}]
    own = json.loads(request_body("chat", "kimi", {"messages": messages, "tools": own_tools}, chosen))

    assert short["messages"] == messages and short["max_completion_tokens"] == 10
    assert short["chat_template_kwargs"] == {"thinking": True}
    assert short["tools"] == tools and short["tool_choice"] == "none"
    assert capped["max_completion_tokens"] == 64
    assert own["tools"] == own_tools
    assert "ignore_eos" not in short


def test_a_chat_request_cannot_go_to_the_completions_endpoint():
    with pytest.raises(ValueError, match="needs endpoint chat"):
        request_body("completions", "kimi", {"messages": [{"role": "user", "content": "Go."}]}, options(""))


def test_requests_come_from_a_replay_file_repeated_and_padded(tmp_path):
    path = tmp_path / "chats.jsonl"
    path.write_text('{"messages": [{"role": "user", "content": "one"}]}\n{"prompt": "two"}\n', encoding="utf-8")

    requests = load_requests(str(path), 3, seed=0)
    padded = load_requests(str(path), 3, seed=0, context_tokens=500)

    assert requests == [{"messages": [{"role": "user", "content": "one"}]}, {"prompt": "two"},
                        {"messages": [{"role": "user", "content": "one"}]}]
    assert padded[0]["messages"][0]["content"].endswith("one")
    assert len(padded[1]["prompt"]) >= 2000 and padded[1]["prompt"].endswith("two")
    assert load_requests(str(path), 3, seed=0, context_tokens=500) == padded


def test_unlimited_rate_sends_everything_at_once():
    assert arrival_offsets(4, None, 1.0, random.Random(0)) == [0.0, 0.0, 0.0, 0.0]


def test_poisson_arrivals_are_seeded_and_end_at_count_over_rate():
    first = arrival_offsets(50, 5.0, 1.0, random.Random(7))
    again = arrival_offsets(50, 5.0, 1.0, random.Random(7))
    other = arrival_offsets(50, 5.0, 1.0, random.Random(8))

    assert first == again
    assert first != other
    assert first[-1] == pytest.approx(50 / 5.0)
    assert first == sorted(first)
    assert first[0] > 0


def test_higher_burstiness_spreads_arrivals_more_evenly():
    def gap_spread(burstiness):
        offsets = arrival_offsets(2000, 10.0, burstiness, random.Random(3))
        gaps = [later - earlier for earlier, later in zip(offsets, offsets[1:])]
        mean = sum(gaps) / len(gaps)
        return (sum((gap - mean) ** 2 for gap in gaps) / len(gaps)) ** 0.5 / mean

    # The coefficient of variation of gamma gaps is 1 / sqrt(shape): 2, 1 and 0.5 here.
    assert gap_spread(0.25) == pytest.approx(2.0, rel=0.15)
    assert gap_spread(1.0) == pytest.approx(1.0, rel=0.1)
    assert gap_spread(4.0) == pytest.approx(0.5, rel=0.1)


def test_request_rate_paces_the_dispatch(clock):
    offsets = arrival_offsets(3, 10.0, 1.0, random.Random(1))
    streams = [Stream(chunks=[(0.0, 1)]) for dummy in range(3)]
    # The server leaves the clock alone here, so only the dispatcher's sleeps move it.
    with ScriptedServer(streams) as server:
        target = OpenAITarget(server.base_url, "completions", None, 5.0)
        run = run_load(target, [b"{}"] * 3, 1, offsets)

    assert all(outcome.success for outcome in run.outcomes)
    assert run.duration == pytest.approx(offsets[-1])


def test_run_benchmark_measures_each_level_and_reads_spec_decode_counters(clock):
    streams = [Stream(chunks=[(0.01, 2), (0.02, 2)]) for dummy in range(1 + 2 * 2)]
    pages = [SPEC_DECODE_BEFORE, SPEC_DECODE_AFTER, SPEC_DECODE_AFTER, SPEC_DECODE_AFTER]
    with ScriptedServer(streams, clock, metrics_pages=pages) as server:
        results, warnings = run_benchmark(options(server.base_url, concurrency=[1, 2], warmup_requests=1))

    assert warnings == []
    assert [result["max_concurrency"] for result in results] == [1, 2]
    assert [result["completed"] for result in results] == [2, 2]
    assert results[0]["spec_decode_acceptance_rate"] == pytest.approx(90 / 200 * 100)
    assert results[0]["spec_decode_acceptance_length"] == pytest.approx(1 + 90 / 40)
    # Nothing was drafted during the second level, so it reports no acceptance.
    assert "spec_decode_acceptance_rate" not in results[1]
    prompts = [request["prompt"] for request in server.requests]
    assert len(set(prompts)) == 5
    assert all(request["model"] == "tiny" and request["max_tokens"] == 16 for request in server.requests)


def test_each_level_counts_how_its_answers_ended(clock):
    streams = [Stream(chunks=[(0.01, 1), (0.02, 1)], finish_reason=reason)
               for reason in ("length", "stop", "length", "stop", "stop")]
    streams.append(Stream(chunks=[(0.01, 1)], chat=True, finish_reason="tool_calls"))
    streams.append(Stream(chunks=[(0.01, 1)]))
    streams.append(Stream(status=500, error_body={"error": {"message": "dead"}}))
    with ScriptedServer(streams, clock) as server:
        results, dummy = run_benchmark(options(server.base_url, num_prompts=8))

    result = results[0]
    assert result["finish_reasons"] == {"length": 2, "stop": 3, "tool_calls": 1, "unknown": 1}
    # The answer without a finish reason and the failed request count neither way.
    assert result["max_tokens_share"] == pytest.approx(2 / 6)


def test_no_finish_reason_at_all_leaves_the_cut_off_share_unknown(clock):
    with ScriptedServer([Stream(chunks=[(0.01, 1)])], clock) as server:
        results, dummy = run_benchmark(options(server.base_url, num_prompts=1))

    assert results[0]["finish_reasons"] == {"unknown": 1}
    assert results[0]["max_tokens_share"] is None


def test_run_benchmark_pools_repeats(clock):
    streams = [Stream(chunks=[(0.01, 1), (0.02, 1)]) for dummy in range(2)]
    streams += [Stream(chunks=[(0.01, 1), (0.04, 1)]) for dummy in range(2)]
    with ScriptedServer(streams, clock) as server:
        results, warnings = run_benchmark(options(server.base_url, repeats=2))

    result = results[0]
    assert result["completed"] == 4
    assert result["duration"] == pytest.approx(0.04 + 0.08)
    assert result["output_throughput_repeats"] == pytest.approx([4 / 0.04, 4 / 0.08])
    assert result["output_throughput_mean"] == pytest.approx(75.0)
    assert "Could not read" in warnings[0]


def test_partial_failure_is_a_result_not_an_exception(clock):
    streams = [
        Stream(chunks=[(0.01, 1)]),
        Stream(status=500, error_body={"error": {"message": "engine dead"}}),
        Stream(status=500, error_body={"error": {"message": "still dead"}}),
    ]
    with ScriptedServer(streams, clock) as server:
        results, dummy = run_benchmark(options(server.base_url, num_prompts=3))

    assert (results[0]["completed"], results[0]["failed"]) == (1, 2)
    assert results[0]["errors"] == {
        "http_500": {"count": 2, "first_message": "HTTP 500 Internal Server Error: engine dead"}
    }


def test_every_warmup_request_failing_aborts_before_measuring():
    with pytest.raises(BenchmarkAborted) as caught:
        run_benchmark(options(refused_url(), warmup_requests=2))

    assert "Every warm-up request failed" in str(caught.value)
    assert caught.value.errors["connection_refused"]["count"] == 2


def test_a_base_url_that_is_not_http_is_rejected():
    with pytest.raises(ValueError, match="is not an http"):
        OpenAITarget("ftp://127.0.0.1:21", "completions", None, 5.0)


def window(server, streams_count, warmup_s, duration_s, concurrency=1):
    target = OpenAITarget(server.base_url, "completions", None, 5.0)
    body = request_body("completions", "tiny", {"prompt": "p"}, options(server.base_url, duration_s=duration_s), 0)
    return run_window(target, lambda: body, concurrency, warmup_s, duration_s)


def test_a_window_counts_the_tokens_that_arrived_inside_it_from_streams_it_cut_and_streams_begun_before(clock):
    # A warm-up of 0.6 s, then the window from 0.6 s to 1.6 s. The first stream, sent in the warm-up, writes 2 tokens
    # before the window and 2 inside it; the second, sent at 1.0 s, writes 3 tokens by 1.3 s and is cut at 1.6 s
    # before its next chunk (at 1.9 s) arrives.
    streams = [Stream(chunks=[(0.5, 2), (1.0, 2)]), Stream(chunks=[(0.3, 3), (0.9, 4)])]
    with ScriptedServer(streams, clock) as server:
        run = window(server, 2, warmup_s=0.6, duration_s=1.0)

    assert server.requests[0]["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert run.windowed and run.duration == 1.0
    first, second = run.outcomes
    assert (first.in_window, first.cut, first.output_tokens, first.window_tokens) == (False, False, 4, 2)
    assert (second.in_window, second.cut, second.output_tokens, second.window_tokens) == (True, True, 3, 3)
    assert second.ttft == pytest.approx(0.3) and second.latency == pytest.approx(0.3)
    assert run_output_throughput(run) == pytest.approx(5.0)
    level = summarize_level(1, [run])
    # The cut stream is timed (TTFT) but neither completed nor failed; the warm-up's stream is no measured request.
    assert (level["completed"], level["failed"], level["cut_streams"], level["window_s"]) == (0, 0, 1, 1.0)
    assert level["total_output_tokens"] == 5 and level["output_throughput"] == pytest.approx(5.0)
    assert level["mean_ttft_ms"] == pytest.approx(300.0)
    # Every measured request's own latencies, for a trial to pool over lifetimes; a cut stream has no E2E latency.
    assert level["latency_samples_ms"] == {"ttft": [300.0], "tpot": [], "e2el": []}


def test_a_stream_cut_after_several_chunks_gives_its_tpot_up_to_its_last_token(clock):
    streams = [Stream(chunks=[(0.1, 1), (0.3, 2), (0.5, 2), (2.0, 1)])]
    with ScriptedServer(streams, clock) as server:
        run = window(server, 1, warmup_s=0.0, duration_s=1.0)

    (outcome,) = run.outcomes
    assert outcome.cut and outcome.output_tokens == 5 and outcome.window_tokens == 5
    level = summarize_level(1, [run])
    # (0.5 - 0.1) s over the 4 tokens after the first.
    assert level["mean_tpot_ms"] == pytest.approx(100.0)
    assert level["mean_e2el_ms"] == 0.0 and level["completed"] == 0


def test_without_continuous_usage_a_cut_stream_counts_its_chunks(clock):
    streams = [Stream(chunks=[(0.1, 3), (0.2, 3), (5.0, 3)], usage=False)]
    with ScriptedServer(streams, clock) as server:
        run = window(server, 1, warmup_s=0.0, duration_s=1.0)

    assert run.outcomes[0].cut and run.outcomes[0].window_tokens == 2


def test_run_benchmark_measures_windows_instead_of_counts(clock):
    streams = [Stream(chunks=[(0.2, 2), (0.4, 2)]) for dummy in range(3)]
    with ScriptedServer(streams, clock) as server:
        results, warnings = run_benchmark(options(server.base_url, num_prompts=None, duration_s=1.0, warmup_s=0.0,
                                                  metrics_url=None))

    (level,) = results
    # Streams of 0.4 s one after another: the window from 0 to 1 s holds two whole ones and the third, sent at 0.8 s,
    # cut at 1.0 s after its first 2 tokens (its next chunk comes at 1.2 s).
    assert (level["completed"], level["cut_streams"], level["total_output_tokens"]) == (2, 1, 10)
    assert level["output_throughput"] == pytest.approx(10.0)
    assert len(server.requests) == 3
