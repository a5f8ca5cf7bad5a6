# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Whether a model, with its draft, leaves room on each GPU for one request of max_model_len.

vLLM only finds out after it has loaded the weights and profiled the GPUs, and a switch has stopped the
baseline by then. This estimate runs before, from config.json, the weights' size on disk and the GPUs'
total memory; docs/model-fit.md gives the sources of every figure and the margin.

Per GPU:

  KV cache a token   MLA (config.json has kv_lora_rank, as DeepSeek-V3 and Kimi-K2.x):
                       (kv_lora_rank + qk_rope_head_dim) x layers x bytes an element.
                     vLLM keeps the compressed latent as one KV head that tensor parallelism does not
                     split (vllm/config/model.py, ModelConfig.get_num_kv_heads returns 1 for MLA), so
                     every rank holds all of it.
                     Otherwise: 2 (K and V) x max(1, kv_heads // TP) x head_dim x layers x bytes an
                     element: heads are divided across ranks, and replicated when there are fewer heads
                     than ranks.
                     layers: those of the largest pipeline stage; decode context parallelism spreads the
                     tokens over its ranks. A draft adds its own layers at its own tensor parallelism.
  weights            ~ size on disk / (TP x PP), the draft's / its TP.
  room               gpu_memory_utilization x GPU total - weights - draft weights - allowance.
  needed             KV cache a token x max_model_len.

Refused when needed exceeds the room by more than the margin; a warning within the margin; fits otherwise.
"""

from __future__ import annotations

import math
import re

GIB = 1024 ** 3
MIB = 1024 ** 2

# Memory each GPU needs besides weights/(TP x PP) and KV cache: activations at max_num_batched_tokens,
# CUDA graphs, NCCL and other non-torch memory, the parts of the model that tensor parallelism replicates.
# Calibrated on published starts of Kimi-K2.5 on 8 x RTX PRO 6000 (docs/model-fit.md): 4.9 GiB in one, about
# 7 GiB implied by another; the margin covers both.
DEFAULT_ALLOWANCE_GIB = 6.0
DEFAULT_MARGIN_GIB = 2.0
# vLLM's own default when the unit does not set it.
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9

# Methods whose draft is a model of its own (speculative_config.model); mtp reuses the target's extra layers.
DRAFT_MODEL_METHODS = ('eagle', 'eagle3', 'draft_model')
MTP_METHODS = ('mtp',)

# Keys under which multimodal wrappers keep the language model's config (Kimi-K2.5: text_config).
LANGUAGE_CONFIG_KEYS = ('text_config', 'language_config', 'llm_config')
# Where vLLM reads a model's context length from when max_model_len is not set.
CONTEXT_KEYS = ('max_position_embeddings', 'max_sequence_length', 'seq_length', 'max_seq_len', 'n_positions')

_HUMAN_INT = re.compile(r'(\d+(?:\.\d+)?)([kmgtKMGT]?)\Z')


class FitError(Exception):
    """The inputs cannot be judged (a config without the fields the rule needs, a setting vLLM would refuse)."""


def language_config(config):
    """The part of config.json that describes the language model."""
    for key in LANGUAGE_CONFIG_KEYS:
        inner = config.get(key)
        if isinstance(inner, dict) and inner.get('num_hidden_layers'):
            return inner
    return config


def is_mla(config):
    return language_config(config).get('kv_lora_rank') is not None


def parse_token_count(value):
    """max_model_len as vLLM reads it: an int, or text such as 256k (x 1000) or 256K (x 1024); None for auto.

    vLLM's argument parser takes lower-case suffixes as decimal and upper-case ones as binary, and -1 or auto
    for 'the longest that fits'.
    """
    if value is None or str(value).strip().lower() in ('auto', '-1'):
        return None
    if isinstance(value, bool):
        raise FitError('max_model_len %r is not a token count (an integer, 256k, 256K or auto)' % (value,))
    if isinstance(value, int):
        return _positive(value, 'max_model_len')
    match = _HUMAN_INT.match(str(value).strip())
    if not match:
        raise FitError('max_model_len %r is not a token count (an integer, 256k, 256K or auto)' % (value,))
    number, suffix = match.groups()
    if suffix.islower():
        return _positive(int(float(number) * 1000 ** ('kmgt'.index(suffix) + 1)), 'max_model_len')
    if '.' in number:
        raise FitError('max_model_len %r: vLLM takes decimals only with k, m, g or t' % (value,))
    return _positive(int(number) * 1024 ** ('KMGT'.index(suffix) + 1 if suffix else 0), 'max_model_len')


def _positive(value, name):
    """A positive whole number, from an int, a whole float or its text (as YAML or a form may give it)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise FitError('%s %r is not a positive whole number' % (name, value))
    try:
        number = int(str(value).strip())
    except ValueError:
        raise FitError('%s %r is not a positive whole number' % (name, value))
    if number < 1:
        raise FitError('%s %r is not a positive whole number' % (name, value))
    return number


def kv_element_bytes(kv_cache_dtype='auto', dtype='auto'):
    """Bytes a KV cache element takes: the model's dtype for auto (half precision unless float32), 1 for fp8."""
    kv = str(kv_cache_dtype or 'auto').lower()
    if kv == 'auto':
        return 4 if str(dtype or 'auto').lower() in ('float32', 'float') else 2
    if kv in ('bfloat16', 'float16', 'half', 'bf16', 'fp16'):
        return 2
    if kv.startswith('fp8'):
        return 1
    raise FitError('kv_cache_dtype %r is not one this check knows (auto, bfloat16, float16, fp8*)' % (kv_cache_dtype,))


def kv_cache_per_token(config, tensor_parallel_size=1, pipeline_parallel_size=1, decode_context_parallel_size=1,
                       element_bytes=2, layers=None):
    """KV cache bytes one token takes on one GPU, and the attention kind (mla or gqa).

    layers overrides num_hidden_layers (an MTP draft uses the target's num_nextn_predict_layers).
    """
    text = language_config(config)
    total_layers = text.get('num_hidden_layers') if layers is None else layers
    if not isinstance(total_layers, int) or total_layers < 0:
        raise FitError('config.json has no num_hidden_layers')
    # vLLM gives the first stages the extra layers; the largest stage sets what one GPU holds.
    stage_layers = int(math.ceil(total_layers / float(pipeline_parallel_size)))
    if text.get('kv_lora_rank') is not None:
        per_layer = (int(text['kv_lora_rank']) + int(text.get('qk_rope_head_dim') or 0)) * element_bytes
        kind = 'mla'
    else:
        heads = text.get('num_attention_heads')
        kv_heads = text.get('num_key_value_heads') or heads
        head_dim = text.get('head_dim')
        if not head_dim and heads and text.get('hidden_size'):
            head_dim = text['hidden_size'] // heads
        if not kv_heads or not head_dim:
            raise FitError('config.json names neither num_key_value_heads nor head_dim / hidden_size and '
                           'num_attention_heads, so its KV cache cannot be sized')
        per_layer = 2 * max(1, int(kv_heads) // tensor_parallel_size) * int(head_dim) * element_bytes
        kind = 'gqa'
    per_token = per_layer * stage_layers / float(decode_context_parallel_size)
    return (int(per_token) if per_token == int(per_token) else per_token), kind


def draft_kind(speculative_config):
    """none, model (a draft checkpoint of its own) or mtp (the target's own extra layers)."""
    spec = speculative_config or {}
    method = str(spec.get('method') or '').lower()
    if method in MTP_METHODS or method.endswith('_mtp'):
        return 'mtp'
    if method in DRAFT_MODEL_METHODS or (not method and spec.get('model')):
        return 'model'
    return 'none'


def gpu_memory_totals(output):
    """MiB of each GPU from `nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits`."""
    totals = []
    for line in output.splitlines():
        field = line.strip()
        if not field:
            continue
        number = field.split()[0]
        try:
            totals.append(int(float(number)))
        except ValueError:
            # A faulted GPU reads [Unknown Error] or [GPU requires reset] here.
            raise FitError('nvidia-smi reports no memory total for GPU %d: %s' % (len(totals), field))
    if not totals:
        raise FitError('nvidia-smi lists no GPU')
    return totals


def serve_settings(config, serve_args):
    """The flags the rule reads, with vLLM's defaults for those the unit leaves out."""
    args = serve_args or {}
    text = language_config(config)
    settings = {
        'tensor_parallel_size': _positive(args.get('tensor_parallel_size', 1), 'tensor_parallel_size'),
        'pipeline_parallel_size': _positive(args.get('pipeline_parallel_size', 1), 'pipeline_parallel_size'),
        'decode_context_parallel_size': _positive(args.get('decode_context_parallel_size', 1),
                                                  'decode_context_parallel_size'),
        'kv_cache_dtype': str(args.get('kv_cache_dtype') or 'auto'),
        'dtype': str(args.get('dtype') or 'auto'),
    }
    utilization = args.get('gpu_memory_utilization', DEFAULT_GPU_MEMORY_UTILIZATION)
    try:
        utilization = float(utilization)
    except (TypeError, ValueError):
        raise FitError('gpu_memory_utilization %r is not a number' % (utilization,))
    if not 0 < utilization <= 1:
        raise FitError('gpu_memory_utilization %r is not in (0, 1]' % (utilization,))
    settings['gpu_memory_utilization'] = utilization
    if 'max_model_len' in args and args['max_model_len'] is not None:
        settings['max_model_len'] = parse_token_count(args['max_model_len'])
        settings['max_model_len_from'] = 'serve_args'
    else:
        # vLLM derives it from the model's config; the first of these keys that is set.
        derived = next((text[key] for key in CONTEXT_KEYS if isinstance(text.get(key), int)), None)
        if derived is None:
            raise FitError('max_model_len is not set and config.json names no context length')
        settings['max_model_len'] = derived
        settings['max_model_len_from'] = 'config.json'
    return settings


def judge(config, weights_bytes, gpu_memory_mib, serve_args=None, speculative_config=None, draft_config=None,
          draft_weights_bytes=0, allowance_gib=DEFAULT_ALLOWANCE_GIB, margin_gib=DEFAULT_MARGIN_GIB,
          what='the model', settings_from='vllm_serve_args'):
    """The verdict (fits, tight or refused), the reason in one sentence, and the figures behind it.

    A draft (speculative_config with an eagle, eagle3 or draft_model method) needs draft_config and
    draft_weights_bytes; an mtp draft reuses the target's num_nextn_predict_layers and files.
    """
    settings = serve_settings(config, serve_args)
    tp = settings['tensor_parallel_size']
    pp = settings['pipeline_parallel_size']
    element = kv_element_bytes(settings['kv_cache_dtype'], settings['dtype'])
    kv_bytes, kind = kv_cache_per_token(config, tp, pp, settings['decode_context_parallel_size'], element)

    spec = speculative_config or {}
    draft = draft_kind(spec)
    draft_kv_bytes = 0
    draft_weights_gpu = 0.0
    draft_tp = None
    if draft == 'model':
        if not draft_config:
            raise FitError('the draft %s needs its config.json to be judged' % (spec.get('model') or '(unnamed)'))
        draft_tp = _positive(spec.get('draft_tensor_parallel_size') or tp, 'draft_tensor_parallel_size')
        draft_kv_bytes = kv_cache_per_token(draft_config, draft_tp, 1, 1, element)[0]
        draft_weights_gpu = float(draft_weights_bytes or 0) / draft_tp
    elif draft == 'mtp':
        mtp_layers = int(language_config(config).get('num_nextn_predict_layers') or 0)
        draft_kv_bytes = kv_cache_per_token(config, tp, 1, settings['decode_context_parallel_size'], element,
                                            layers=mtp_layers)[0]

    needed_gpus = tp * pp
    gpus = list(gpu_memory_mib or [])
    figures = {
        'attention': kind,
        'tensor_parallel_size': tp,
        'pipeline_parallel_size': pp,
        'decode_context_parallel_size': settings['decode_context_parallel_size'],
        'kv_cache_dtype': settings['kv_cache_dtype'],
        'gpu_memory_utilization': settings['gpu_memory_utilization'],
        'max_model_len': settings['max_model_len'],
        'max_model_len_from': settings['max_model_len_from'],
        'draft': draft,
        'draft_tensor_parallel_size': draft_tp,
        'gpus': len(gpus),
        'allowance_gib': round(float(allowance_gib), 3),
        'margin_gib': round(float(margin_gib), 3),
    }
    variables = ['%s.max_model_len' % settings_from, '%s.gpu_memory_utilization' % settings_from]
    if len(gpus) < needed_gpus:
        return _verdict('refused', '%s does not fit: tensor_parallel_size x pipeline_parallel_size in %s asks for %d '
                        'GPUs, the node has %d' % (what, settings_from, needed_gpus, len(gpus)),
                        figures, ['%s.tensor_parallel_size' % settings_from,
                                  '%s.pipeline_parallel_size' % settings_from])

    total = min(gpus[:needed_gpus]) * MIB
    weights_gpu = float(weights_bytes) / needed_gpus
    requested = settings['gpu_memory_utilization'] * total
    allowance = float(allowance_gib) * GIB
    margin = float(margin_gib) * GIB
    available = requested - weights_gpu - draft_weights_gpu - allowance
    per_token = kv_bytes + draft_kv_bytes
    max_len = settings['max_model_len']
    needed = per_token * max_len if max_len else 0.0
    headroom = available - needed
    fixed = weights_gpu + draft_weights_gpu + allowance
    figures.update({
        'gpu_total_gib': _round_gib(total),
        'kv_bytes_per_token': kv_bytes,
        'draft_kv_bytes_per_token': draft_kv_bytes,
        'kv_gib_per_token': per_token / float(GIB),
        'weights_gib': _round_gib(weights_gpu),
        'draft_weights_gib': _round_gib(draft_weights_gpu),
        'requested_gib': _round_gib(requested),
        'available_gib': _round_gib(available),
        'kv_needed_gib': _round_gib(needed),
        'headroom_gib': _round_gib(headroom),
        'max_model_len_estimate': _tokens(available, per_token),
        'max_model_len_safe': _tokens(available - margin, per_token),
        'gpu_memory_utilization_needed': round((fixed + needed + margin) / total, 4),
        'fp8_kv_needed_gib': _round_gib(needed / element) if element > 1 else None,
    })

    budget = '%.2f x %s - %s of weights%s - %s allowance' % (
        settings['gpu_memory_utilization'], _gib(total), _gib(weights_gpu),
        ' - %s of draft weights' % _gib(draft_weights_gpu) if draft_weights_gpu else '', _gib(allowance))
    if available <= 0:
        return _verdict('refused', '%s does not fit: its weights and the allowance take all of each GPU (%s leaves '
                        '%s); raise gpu_memory_utilization in %s or tensor_parallel_size / pipeline_parallel_size'
                        % (what, budget, _gib(available), settings_from), figures, variables)
    if not max_len:
        verdict = 'tight' if available < margin else 'fits'
        return _verdict(verdict, '%s leaves %s for KV cache on each GPU (%s, margin +/-%s); vLLM picks max_model_len '
                        'itself, about %s tokens' % (what, _gib(available), budget, _gib(margin),
                                                     _count(figures['max_model_len_estimate'])), figures, variables)

    demand = ('one request of max_model_len %s needs %s of KV cache on each GPU (%s bytes = %.3g GiB a token, %s)'
              % (_count(max_len), _gib(needed), _count(per_token), per_token / float(GIB),
                 _per_token_detail(kind, kv_bytes, draft_kv_bytes, tp, settings['decode_context_parallel_size'])))
    remedy = _remedy(figures, settings, settings_from)
    if headroom < -margin:
        return _verdict('refused', '%s does not fit: %s, but %s leaves %s, %s short, beyond the estimate\'s margin '
                        'of +/-%s. %s' % (what, demand, budget, _gib(available), _gib(-headroom), _gib(margin), remedy),
                        figures, variables)
    if headroom < margin:
        return _verdict('tight', '%s may not fit: %s, and %s leaves %s, within the estimate\'s margin of +/-%s, so '
                        'vLLM decides at start. %s' % (what, demand, budget, _gib(available), _gib(margin), remedy),
                        figures, variables)
    return _verdict('fits', '%s fits: %s; %s leaves %s (margin +/-%s), room for about %s tokens'
                    % (what, demand, budget, _gib(available), _gib(margin),
                       _count(figures['max_model_len_estimate'])), figures, variables)


def _per_token_detail(kind, kv_bytes, draft_kv_bytes, tp, dcp):
    if kind == 'mla' and dcp > 1:
        detail = 'the MLA latent, its tokens spread over %d decode-context-parallel ranks' % dcp
    elif kind == 'mla':
        detail = 'the MLA latent, whole on each of %d tensor-parallel ranks' % tp
    else:
        detail = 'K and V of this rank\'s KV heads'
    if draft_kv_bytes:
        detail += ', %s of them the draft\'s' % _count(draft_kv_bytes)
    return detail


def _remedy(figures, settings, settings_from):
    """What would make it fit clearly: the longest context, the utilization, fp8 KV cache."""
    steps = []
    if figures['max_model_len_safe'] > 0:
        steps.append('max_model_len at most %s' % _count(figures['max_model_len_safe']))
    if figures['gpu_memory_utilization_needed'] <= 1:
        steps.append('gpu_memory_utilization at least %.2f' % _ceil2(figures['gpu_memory_utilization_needed']))
    tail = ''
    if figures['fp8_kv_needed_gib'] is not None:
        tail = ', or kv_cache_dtype fp8 (%s)' % _gib(figures['fp8_kv_needed_gib'] * GIB)
    if not steps:
        return 'No max_model_len or gpu_memory_utilization in %s makes room%s.' % (settings_from, tail)
    return 'To fit clearly, set %s in %s%s.' % (' or '.join(steps), settings_from, tail)


def _verdict(verdict, msg, figures, variables):
    return {'verdict': verdict, 'fits': verdict != 'refused', 'msg': msg, 'figures': figures, 'variables': variables}


def _tokens(room_bytes, per_token):
    return int(room_bytes // per_token) if room_bytes > 0 and per_token else 0


def _round_gib(value):
    return round(value / float(GIB), 3)


def _gib(value):
    return '%.2f GiB' % (value / float(GIB))


def _count(value):
    return '{:,}'.format(int(value)) if value == int(value) else '{:,.1f}'.format(value)


def _ceil2(value):
    return math.ceil(value * 100 - 1e-9) / 100.0
