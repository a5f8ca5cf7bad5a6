# Copyright (c) 2025, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils._benchmark_statistics import (
    distribution_ms,
    mean_ci95,
    percentile,
    summarize_errors,
    summarize_level,
    t_critical_95,
)
from ansible_collections.llmops.vllm.plugins.module_utils._load_generation import LoadRun, RequestOutcome


def succeeded(ttft, itl, output_tokens, prompt_tokens=10):
    outcome = RequestOutcome()
    outcome.success = True
    outcome.ttft = ttft
    outcome.itl = list(itl)
    outcome.latency = ttft + sum(itl)
    outcome.output_tokens = output_tokens
    outcome.prompt_tokens = prompt_tokens
    return outcome


def failed(kind, message):
    return RequestOutcome().fail(kind, message)


def test_percentile_interpolates_between_ranks_like_numpy():
    values = [1.0, 2.0, 3.0, 4.0]
    assert percentile(values, 50) == pytest.approx(2.5)
    assert percentile(values, 99) == pytest.approx(3.97)
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 4.0
    assert percentile([5.0], 99) == 5.0


def test_distribution_reports_milliseconds_with_population_std():
    assert distribution_ms("ttft", [0.010, 0.020, 0.030, 0.060]) == pytest.approx({
        "mean_ttft_ms": 30.0,
        "median_ttft_ms": 25.0,
        "std_ttft_ms": (((20 ** 2) + (10 ** 2) + 0 + (30 ** 2)) / 4) ** 0.5,
        "p90_ttft_ms": 30.0 + 30.0 * 0.7,
        "p99_ttft_ms": 30.0 + 30.0 * 0.97,
    })


def test_an_empty_distribution_is_zero():
    assert set(distribution_ms("itl", []).values()) == {0.0}


def test_confidence_interval_uses_student_t_and_sample_std():
    mean, half_width = mean_ci95([10.0, 12.0, 14.0])
    assert mean == pytest.approx(12.0)
    # sample std 2, n 3: 4.3027 * 2 / sqrt(3)
    assert half_width == pytest.approx(4.3027 * 2 / 3 ** 0.5, rel=3e-5)


def test_identical_repeats_have_no_spread():
    assert mean_ci95([7.0, 7.0]) == (7.0, 0.0)


@pytest.mark.parametrize("degrees, expected", [(1, 12.7062), (4, 2.7764), (30, 2.0423), (60, 2.0003), (1000, 1.9623)])
def test_t_critical_values(degrees, expected):
    # Published values, rounded to four decimals; the computed ones must round to them.
    assert t_critical_95(degrees) == pytest.approx(expected, abs=5e-5)


def test_level_metrics_follow_vllm_bench_serve_definitions():
    outcomes = [
        # one chunk of 1 token, then chunks of 2 and 1 tokens: 4 tokens over 3 chunks
        succeeded(ttft=0.100, itl=[0.020, 0.040], output_tokens=4, prompt_tokens=20),
        succeeded(ttft=0.300, itl=[0.030], output_tokens=2, prompt_tokens=30),
        # a single-token answer has no TPOT
        succeeded(ttft=0.200, itl=[], output_tokens=1, prompt_tokens=5),
        failed("http_500", "HTTP 500 Internal Server Error: engine dead"),
    ]
    result = summarize_level(4, [LoadRun(outcomes, 2.0)])

    assert result["max_concurrency"] == 4
    assert (result["completed"], result["failed"]) == (3, 1)
    assert (result["total_input_tokens"], result["total_output_tokens"]) == (55, 7)
    assert result["duration"] == 2.0
    assert result["request_throughput"] == pytest.approx(1.5)
    assert result["output_throughput"] == pytest.approx(3.5)
    assert result["total_token_throughput"] == pytest.approx(31.0)
    assert result["mean_ttft_ms"] == pytest.approx(200.0)
    assert result["median_ttft_ms"] == pytest.approx(200.0)
    # TPOT = (E2E - TTFT) / (tokens - 1): 60 ms / 3 and 30 ms / 1
    assert result["mean_tpot_ms"] == pytest.approx((20.0 + 30.0) / 2)
    assert result["mean_itl_ms"] == pytest.approx(30.0)
    assert result["mean_e2el_ms"] == pytest.approx((160.0 + 330.0 + 200.0) / 3)
    assert result["errors"] == {
        "http_500": {"count": 1, "first_message": "HTTP 500 Internal Server Error: engine dead"}
    }
    assert "output_throughput_mean" not in result


def test_a_level_where_everything_failed_reports_zeros():
    result = summarize_level(1, [LoadRun([failed("connection_refused", "refused")] * 3, 0.5)])

    assert (result["completed"], result["failed"], result["output_throughput"]) == (0, 3, 0.0)
    assert result["mean_ttft_ms"] == 0.0
    assert result["errors"] == {"connection_refused": {"count": 3, "first_message": "refused"}}


def test_repeats_are_pooled_and_their_spread_reported():
    first = LoadRun([succeeded(0.1, [0.1], 2), succeeded(0.1, [0.1], 2)], 1.0)
    second = LoadRun([succeeded(0.1, [0.1], 2), succeeded(0.1, [0.1], 2)], 2.0)
    third = LoadRun([succeeded(0.1, [0.1], 2), failed("timeout", "timed out")], 1.0)
    result = summarize_level(2, [first, second, third])

    assert (result["completed"], result["failed"]) == (5, 1)
    assert result["duration"] == pytest.approx(4.0)
    assert result["output_throughput"] == pytest.approx(10 / 4.0)
    assert result["output_throughput_repeats"] == pytest.approx([4.0, 2.0, 2.0])
    assert result["output_throughput_mean"] == pytest.approx(8 / 3)
    # sample std of (4, 2, 2) is sqrt(4/3); t(2) = 4.3027
    assert result["output_throughput_ci95"] == pytest.approx(4.3027 * (4 / 3) ** 0.5 / 3 ** 0.5, rel=3e-5)


def test_errors_keep_the_first_message_of_each_kind():
    errors = summarize_errors([
        failed("http_500", "first 500"),
        succeeded(0.1, [], 1),
        failed("connection_closed", "IncompleteRead"),
        failed("http_500", "second 500"),
    ])

    assert errors == {
        "http_500": {"count": 2, "first_message": "first 500"},
        "connection_closed": {"count": 1, "first_message": "IncompleteRead"},
    }
