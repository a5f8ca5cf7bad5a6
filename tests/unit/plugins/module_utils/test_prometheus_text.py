# Copyright (c) 2025, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import math

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils._prometheus_text import (
    SpecDecodeTotals,
    parse_samples,
    spec_decode_delta,
    spec_decode_totals,
)

# As vLLM 0.32 exposes them through prometheus_client with two engines (data parallel 2).
VLLM_METRICS = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny"} 0.0
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="tiny"} 100.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="tiny"} 60.0
# HELP vllm:spec_decode_num_drafts_created Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_created gauge
vllm:spec_decode_num_drafts_created{engine="0",model_name="tiny"} 1.7959630064274595e+09
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="tiny"} 500.0
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="tiny"} 300.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="tiny"} 320.0
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="tiny"} 100.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny",position="0"} 90.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny",position="1"} 80.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="tiny",position="0"} 40.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="tiny",position="1"} 20.0
vllm:spec_decode_num_accepted_tokens_per_pos_created{engine="0",model_name="tiny",position="0"} 1.79596300642e+09
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="tiny"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="tiny"} 33.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="tiny"} 1.25
process_virtual_memory_bytes 1.2e+10
"""


def test_parses_names_labels_and_values():
    samples = parse_samples(VLLM_METRICS)

    assert samples[0] == ("vllm:num_requests_running", {"engine": "0", "model_name": "tiny"}, 0.0)
    assert samples[-1] == ("process_virtual_memory_bytes", {}, 1.2e10)
    bucket = [sample for sample in samples if sample.labels.get("le") == "+Inf"][0]
    assert bucket.value == 33.0
    assert len(samples) == 17


def test_label_values_may_hold_escapes_braces_and_commas():
    text = 'vllm:cache_config_info{model_name="a \\"quoted\\" {x}, y",path="C:\\\\m\\nn"} 1 1700000000000\n'

    (sample,) = parse_samples(text)
    assert sample.labels == {"model_name": 'a "quoted" {x}, y', "path": "C:\\m\nn"}
    assert sample.value == 1.0


def test_special_values():
    samples = parse_samples("a NaN\nb +Inf\nc -Inf\n")

    assert math.isnan(samples[0].value)
    assert samples[1].value == math.inf
    assert samples[2].value == -math.inf


@pytest.mark.parametrize("text", ["<html><body>Bad gateway</body></html>", "vllm:x{a=\"1\"} many\n"])
def test_text_that_is_not_an_exposition_is_rejected(text):
    with pytest.raises(ValueError, match="line 1"):
        parse_samples(text)


def test_spec_decode_counters_are_summed_over_engines():
    totals = spec_decode_totals(parse_samples(VLLM_METRICS))

    assert totals == SpecDecodeTotals(160.0, 800.0, 420.0, {0: 130.0, 1: 100.0})


def test_a_server_without_spec_decode_has_no_totals():
    assert spec_decode_totals(parse_samples('vllm:num_requests_running{engine="0",model_name="tiny"} 0.0\n')) is None


def test_delta_gives_vllm_bench_serve_acceptance():
    before = SpecDecodeTotals(100.0, 500.0, 200.0, {0: 80.0, 1: 60.0, 2: 40.0})
    after = SpecDecodeTotals(140.0, 700.0, 290.0, {0: 116.0, 1: 90.0, 2: 64.0})

    delta = spec_decode_delta(before, after)
    assert delta.pop("spec_decode_per_position_acceptance_rates") == pytest.approx([0.9, 0.75, 0.6])
    assert delta == pytest.approx({
        "spec_decode_acceptance_rate": 45.0,
        "spec_decode_acceptance_length": 1 + 90 / 40,
        "spec_decode_num_drafts": 40,
        "spec_decode_draft_tokens": 200,
        "spec_decode_accepted_tokens": 90,
    })


@pytest.mark.parametrize(
    "before, after",
    [
        (None, SpecDecodeTotals(1.0, 5.0, 2.0, {})),
        (SpecDecodeTotals(1.0, 5.0, 2.0, {}), None),
        (SpecDecodeTotals(1.0, 5.0, 2.0, {}), SpecDecodeTotals(1.0, 5.0, 2.0, {})),
        # a restarted server starts its counters again from zero
        (SpecDecodeTotals(100.0, 500.0, 200.0, {}), SpecDecodeTotals(3.0, 15.0, 4.0, {})),
    ],
)
def test_no_delta_without_two_readings_or_new_drafts(before, after):
    assert spec_decode_delta(before, after) == {}
