# Copyright (c) llmops.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The speculative-config rules, one case per rule vLLM applies at start."""

from __future__ import annotations

import pytest

from ansible_collections.llmops.vllm.plugins.plugin_utils._spec_decode import (
    KNOWN_KEYS,
    METHODS,
    canonical_method,
    check_speculative_config,
    parse_version,
)

V032 = (0, 32, 0)
V033 = (0, 33, 0)


def problems(config, target_tp=1, version=V032, allow_unknown_keys=False):
    return check_speculative_config(config, target_tp, version, allow_unknown_keys)


@pytest.mark.parametrize("config, target_tp", [
    ({"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4}, 1),
    ({"method": "ngram", "num_speculative_tokens": 5}, 1),
    ({"method": "ngram_gpu", "num_speculative_tokens": 3, "prompt_lookup_min": 2, "prompt_lookup_max": 2}, 1),
    ({"method": "suffix"}, 1),
    ({"method": "eagle3", "model": "lightseekorg/kimi-k2.5-eagle3", "num_speculative_tokens": 4,
      "draft_tensor_parallel_size": 8}, 8),
    ({"method": "eagle", "model": "yuhuili/EAGLE-LLaMA3-Instruct-8B", "draft_tensor_parallel_size": 1}, 8),
    ({"method": "draft_model", "model": "/srv/models/draft"}, 2),
    ({"method": "mtp", "num_speculative_tokens": 1}, 8),
    ({"method": "deepseek_mtp", "num_speculative_tokens": 2}, 8),
    ({"method": "dspark", "num_speculative_tokens": 7}, 1),
    ({"method": "medusa", "model": "FasterDecoding/medusa-vicuna-7b-v1.3", "num_speculative_tokens": 3}, 1),
])
def test_configs_vllm_accepts_pass(config, target_tp):
    assert problems(config, target_tp) == []


@pytest.mark.parametrize("config, key, rule", [
    ("ngram", "", "must be a mapping"),
    ({"num_speculative_tokens": 5}, "method", "required, one of"),
    ({"method": "medusa2", "num_speculative_tokens": 5}, "method", "unknown method 'medusa2'"),
    ({"method": "foo_mtp", "num_speculative_tokens": 5}, "method", "unknown method 'foo_mtp'"),
    ({"method": ["ngram"], "num_speculative_tokens": 5}, "method", "unknown method"),
    ({"method": "ngram"}, "num_speculative_tokens", "required for method 'ngram'"),
    ({"method": "mtp"}, "num_speculative_tokens", "required for method 'mtp'"),
    ({"method": "ngram", "num_speculative_tokens": 0}, "num_speculative_tokens", "integer > 0, got 0"),
    ({"method": "ngram", "num_speculative_tokens": -1}, "num_speculative_tokens", "integer > 0"),
    ({"method": "ngram", "num_speculative_tokens": True}, "num_speculative_tokens", "integer > 0, got True"),
    ({"method": "ngram", "num_speculative_tokens": "5"}, "num_speculative_tokens", "integer > 0, got '5'"),
    ({"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_min": 0}, "prompt_lookup_min", "integer >= 1"),
    ({"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 2.5}, "prompt_lookup_max", "integer >= 1"),
    ({"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_min": 5, "prompt_lookup_max": 4},
     "prompt_lookup_min", "must be <= prompt_lookup_max, got 5 > 4"),
    ({"method": "eagle3", "num_speculative_tokens": 4}, "model", "required for method 'eagle3'"),
    ({"method": "eagle", "num_speculative_tokens": 4}, "model", "required for method 'eagle'"),
    ({"method": "draft_model", "num_speculative_tokens": 4}, "model", "required for method 'draft_model'"),
    ({"method": "eagle3", "model": "", "num_speculative_tokens": 4}, "model", "non-empty string"),
    ({"method": "eagle3", "model": "d", "num_speculative_tokens": 4, "draft_tensor_parallel_size": 4},
     "draft_tensor_parallel_size", "must be 1 or the target tensor_parallel_size (8), got 4"),
    ({"method": "eagle3", "model": "d", "num_speculative_tokens": 4, "draft_tensor_parallel_size": 0},
     "draft_tensor_parallel_size", "must be an integer >= 1, got 0"),
    ({"method": "eagle3", "model": "d", "num_speculative_tokens": 4, "tensor_parallel_size": 8},
     "tensor_parallel_size", "set draft_tensor_parallel_size instead"),
    ({"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup": 4}, "prompt_lookup", "unknown key"),
    ({"method": "ngram", "num_speculative_tokens": 5, "target_model_config": {}}, "target_model_config",
     "unknown key"),
])
def test_configs_vllm_refuses_are_reported_with_key_and_rule(config, key, rule):
    found = problems(config, target_tp=8)
    assert [problem[0] for problem in found] == [key], found
    assert rule in found[0][1]


def test_every_problem_is_reported_not_only_the_first():
    found = problems({"method": "ngram", "num_speculative_tokens": 0, "prompt_lookup_min": 3,
                      "prompt_lookup_max": 2, "bogus": 1})
    assert [problem[0] for problem in found] == ["bogus", "num_speculative_tokens", "prompt_lookup_min"]


def test_unknown_keys_pass_when_the_variant_allows_them():
    config = {"method": "ngram", "num_speculative_tokens": 5, "speculative_token_tree": "[(0,)]"}
    assert problems(config, allow_unknown_keys=True) == []
    assert [problem[0] for problem in problems(config)] == ["speculative_token_tree"]


def test_allow_unknown_keys_does_not_let_tensor_parallel_size_through():
    config = {"method": "ngram", "num_speculative_tokens": 5, "tensor_parallel_size": 1}
    assert [problem[0] for problem in problems(config, allow_unknown_keys=True)] == ["tensor_parallel_size"]


@pytest.mark.parametrize("method", ["medusa", "mlp_speculator"])
def test_methods_removed_in_033_are_refused_from_that_version(method):
    config = {"method": method, "model": "some/draft", "num_speculative_tokens": 3}
    assert problems(config, version=V032) == []
    found = problems(config, version=V033)
    assert found == [("method", "method %r was removed in vLLM 0.33 (declared version 0.33.0)" % method)]


def test_an_unknown_target_size_skips_only_the_draft_size_comparison():
    config = {"method": "eagle3", "model": "d", "num_speculative_tokens": 4, "draft_tensor_parallel_size": 4}
    assert problems(config, target_tp=None) == []
    assert [problem[0] for problem in problems(dict(config, draft_tensor_parallel_size="4"), target_tp=None)] == [
        "draft_tensor_parallel_size"]


def test_prompt_lookup_on_another_method_is_refused_as_ignored_not_compared():
    config = {"method": "eagle3", "model": "d", "num_speculative_tokens": 4,
              "prompt_lookup_min": 5, "prompt_lookup_max": 4}
    assert problems(config) == [
        ("prompt_lookup_max", "only the n-gram methods (ngram, ngram_gpu) read it; vLLM ignores it for method 'eagle3'"),
        ("prompt_lookup_min", "only the n-gram methods (ngram, ngram_gpu) read it; vLLM ignores it for method 'eagle3'"),
    ]


@pytest.mark.parametrize("key, value, rule", [
    ("suffix_decoding_max_tree_depth", 0, "must be >= 1, got 0"),
    ("suffix_decoding_max_tree_depth", 2.5, "must be an integer, got 2.5"),
    ("suffix_decoding_max_cached_requests", -1, "must be >= 0, got -1"),
    ("suffix_decoding_max_spec_factor", -0.5, "must be >= 0, got -0.5"),
    ("suffix_decoding_min_token_prob", 1.01, "must be in [0, 1], got 1.01"),
    ("suffix_decoding_min_token_prob", True, "must be a number, got True"),
])
def test_suffix_decoding_ranges_are_vllms(key, value, rule):
    assert problems({"method": "suffix", key: value}) == [(key, rule)]


def test_suffix_decoding_settings_pass_in_range_and_are_refused_on_another_method():
    settings = {"suffix_decoding_max_tree_depth": 1, "suffix_decoding_max_cached_requests": 0,
                "suffix_decoding_max_spec_factor": 0, "suffix_decoding_min_token_prob": 1}
    assert problems(dict(settings, method="suffix")) == []
    assert problems({"method": "ngram", "num_speculative_tokens": 3, "suffix_decoding_min_token_prob": 0.2}) == [
        ("suffix_decoding_min_token_prob", "only the suffix method reads it; vLLM ignores it for method 'ngram'")]


def test_the_method_table_only_names_known_keys():
    assert set(METHODS) and {"method", "model", "num_speculative_tokens"} <= KNOWN_KEYS
    assert "tensor_parallel_size" not in KNOWN_KEYS


@pytest.mark.parametrize("method, canonical", [("deepseek_mtp", "mtp"), ("mtp", "mtp"), ("eagle3", "eagle3")])
def test_legacy_mtp_names_mean_mtp(method, canonical):
    assert canonical_method(method) == canonical


@pytest.mark.parametrize("text, version", [
    ("0.32.0", (0, 32, 0)),
    ("0.33", (0, 33, 0)),
    ("0.33.0rc1", (0, 33, 0)),
    ("0.32.0+cpu", (0, 32, 0)),
    ("1", (1, 0, 0)),
])
def test_versions_parse_to_their_release(text, version):
    assert parse_version(text) == version


@pytest.mark.parametrize("text", ["", "latest", "v0.32.0", None])
def test_versions_without_a_release_are_refused(text):
    with pytest.raises(ValueError, match="numeric release"):
        parse_version(text)
