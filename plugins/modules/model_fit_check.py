#!/usr/bin/python
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: model_fit_check
short_description: Estimate whether a model and its draft leave room for one request of max_model_len
version_added: 1.1.0
description:
  - Estimates, before anything stops, whether vLLM will find room on each GPU for the KV cache of one request
    as long as C(max_model_len). vLLM checks this itself only after it has loaded the weights, and refuses to
    start when the room is short.
  - Reads the model's C(config.json) and the size of its weight files, from a directory or a Hugging Face hub
    cache snapshot, and the GPUs' total memory from O(gpu_memory_mib) or C(nvidia-smi).
  - "KV cache a token and GPU: for MLA models (C(kv_lora_rank) in C(config.json), such as DeepSeek-V3 and
    Kimi-K2.5), kv_lora_rank plus qk_rope_head_dim, times the layers, times the bytes an element, held whole by
    every tensor-parallel rank; otherwise 2 (K and V) times max(1, kv_heads // tensor_parallel_size) times
    head_dim times the layers times the bytes an element. 2 bytes an element, 1 with an fp8 C(kv_cache_dtype)."
  - "Room on each GPU: C(gpu_memory_utilization) times the GPU's total memory, less the weights' size on disk
    divided by C(tensor_parallel_size) times C(pipeline_parallel_size), the draft's weights and the allowance
    (O(allowance_gib)) for activations, CUDA graphs, non-torch memory and the layers tensor parallelism
    replicates. C(docs/model-fit.md) gives where the allowance and the margin come from."
  - A draft of an C(eagle), C(eagle3) or C(draft_model) O(speculative_config) adds its weights (divided by its
    C(draft_tensor_parallel_size)) and its own KV cache, read from its C(config.json); C(mtp) adds the target's
    C(num_nextn_predict_layers).
  - Fails when the KV cache of one request exceeds the room by more than O(margin_gib), with the figures and the
    variables to change. Within the margin it warns and succeeds, since vLLM decides at start.
author:
  - llmops.vllm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: The check only reads; it runs the same in check mode.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  path:
    description: The model's directory on the node. Mutually exclusive with O(repo_id).
    type: path
  repo_id:
    description: The model's hub repository (C(org/name)), looked up in O(hub_cache).
    type: str
  revision:
    description: The branch, tag or commit of O(repo_id); V(main) when not set.
    type: str
  hub_cache:
    description:
      - The hub cache (C($HF_HOME/hub)) that holds O(repo_id), and the draft when O(speculative_config) names it
        by its hub repository.
    type: path
  serve_args:
    description:
      - The server's vLLM flags in snake_case, as C(vllm_serve_args) merged with a variant's C(serve_args).
      - Read here are C(tensor_parallel_size), C(pipeline_parallel_size), C(decode_context_parallel_size),
        C(max_model_len) (an integer, text such as V(256k) or V(256K), or V(auto)), C(gpu_memory_utilization)
        (vLLM's default V(0.9) when not set), C(kv_cache_dtype) and C(dtype). Others are ignored.
      - Without C(max_model_len), the model's context length from C(config.json) counts, as in vLLM.
    type: dict
    default: {}
  speculative_config:
    description:
      - The variant's C(speculative_config). Its C(model) is the draft's directory (an absolute path) or hub
        repository (found in O(hub_cache) at its C(revision)), unless O(draft_path) is set.
      - Methods without a draft model (C(ngram), C(suffix)) add nothing.
    type: dict
  draft_path:
    description: The draft's directory on the node, instead of resolving C(speculative_config.model).
    type: path
  gpu_memory_mib:
    description:
      - Each GPU's total memory in MiB, as C(nvidia-smi --query-gpu=memory.total) reports it (V(97887) for an
        RTX PRO 6000 Blackwell).
      - When not set, the module asks C(nvidia-smi) on the node. The first C(tensor_parallel_size x
        pipeline_parallel_size) GPUs count; the smallest of them sets the room.
    type: list
    elements: int
  weights_bytes:
    description:
      - The model's weight files' total size, for example the RV(llmops.vllm.verify_weights#module:bytes) of an
        earlier check; when not set, the module adds up the weight files it finds.
    type: int
  draft_weights_bytes:
    description: The same for the draft.
    type: int
  allowance_gib:
    description:
      - GiB each GPU needs besides weights and KV cache. The default is calibrated on published starts of
        Kimi-K2.5 on eight 96 GB cards; C(docs/model-fit.md) says how.
    type: float
    default: 6.0
  margin_gib:
    description: How far, in GiB a GPU, the estimate may be off; within it the module warns instead of failing.
    type: float
    default: 2.0
  what:
    description: What is checked, for the messages, for example V(kimi-k2.5 baseline).
    type: str
    default: the model
  settings_from:
    description:
      - Where the flags come from, named in the messages with the variables to change, for example
        V(vllm_serve_args) or V(vllm_variants.eagle3.serve_args).
    type: str
    default: vllm_serve_args
notes:
  - The estimate divides the weights' size on disk evenly across ranks. Embeddings and the LM head are split by
    vLLM too, but some layers are replicated on every rank and quantized weights can be repacked; the allowance
    and the margin take this in.
seealso:
  - module: llmops.vllm.verify_weights
  - module: llmops.vllm.engine_args_check
"""

EXAMPLES = r"""
- name: Check that the baseline holds one request of max_model_len before anything stops
  llmops.vllm.model_fit_check:
    path: /srv/models/moonshotai/Kimi-K2.5
    serve_args: "{{ vllm_serve_args }}"
    what: kimi-k2.5 baseline
  register: baseline_fit

- name: Check the eagle3 variant, its draft in the hub cache, on GPUs of known size
  llmops.vllm.model_fit_check:
    path: /srv/models/moonshotai/Kimi-K2.5
    hub_cache: /var/lib/vllm/.cache/huggingface/hub
    serve_args: "{{ vllm_serve_args | combine(vllm_variants.eagle3.serve_args | default({})) }}"
    speculative_config: "{{ vllm_variants.eagle3.speculative_config }}"
    gpu_memory_mib: [97887, 97887, 97887, 97887, 97887, 97887, 97887, 97887]
    what: kimi-k2.5 eagle3
    settings_from: vllm_variants.eagle3.serve_args
  register: eagle3_fit
"""

RETURN = r"""
verdict:
  description: V(fits), V(tight) (within the margin; a warning) or V(refused) (the module fails).
  returned: when the figures could be worked out
  type: str
  sample: refused
fits:
  description: Whether the verdict lets the server start (V(fits) or V(tight)).
  returned: when the figures could be worked out
  type: bool
  sample: false
figures:
  description:
    - The estimate, per GPU. Sizes in GiB, rounded to the MiB.
    - C(kv_bytes_per_token) and C(draft_kv_bytes_per_token) are the model's and the draft's share of a token's
      KV cache on one GPU; C(kv_gib_per_token) their sum in GiB.
    - C(available_gib) is the room for KV cache, C(kv_needed_gib) what one request of C(max_model_len) takes,
      C(headroom_gib) the difference.
    - C(max_model_len_estimate) is the longest request the room holds, C(max_model_len_safe) the longest that
      still fits when the estimate is off by the margin, C(gpu_memory_utilization_needed) the utilization at
      which it fits by the margin, C(fp8_kv_needed_gib) the need with an fp8 KV cache (null when it is fp8).
  returned: when the figures could be worked out
  type: dict
  sample:
    attention: mla
    tensor_parallel_size: 8
    pipeline_parallel_size: 1
    decode_context_parallel_size: 1
    kv_cache_dtype: auto
    gpu_memory_utilization: 0.92
    max_model_len: 262144
    max_model_len_from: serve_args
    draft: none
    draft_tensor_parallel_size: null
    gpus: 8
    gpu_total_gib: 95.593
    kv_bytes_per_token: 70272
    draft_kv_bytes_per_token: 0
    kv_gib_per_token: 6.54458999633789e-05
    weights_gib: 69.287
    draft_weights_gib: 0.0
    requested_gib: 87.945
    allowance_gib: 6.0
    available_gib: 12.658
    kv_needed_gib: 17.156
    headroom_gib: -4.498
    margin_gib: 2.0
    max_model_len_estimate: 193409
    max_model_len_safe: 162849
    gpu_memory_utilization_needed: 0.988
    fp8_kv_needed_gib: 8.578
variables:
  description: The variables to change when it does not fit, named after O(settings_from).
  returned: when the figures could be worked out
  type: list
  elements: str
  sample: [vllm_serve_args.max_model_len, vllm_serve_args.gpu_memory_utilization]
path:
  description: The model's directory (for a hub model, its snapshot).
  returned: when the model was found
  type: str
  sample: /srv/models/moonshotai/Kimi-K2.5
draft_path:
  description: The draft's directory, or null without a draft model.
  returned: when the model was found
  type: str
  sample: /srv/models/lightseekorg/kimi-k2.5-eagle3-mla
gpu_memory_mib:
  description: The GPUs' total memory that was used, in MiB.
  returned: when the figures could be worked out
  type: list
  elements: int
  sample: [97887, 97887, 97887, 97887, 97887, 97887, 97887, 97887]
msg:
  description: One sentence for the operator, with the figures (GiB a token, needed, available, margin).
  returned: always
  type: str
  sample: >-
    kimi-k2.5 baseline does not fit: one request of max_model_len 262,144 needs 17.16 GiB of KV cache on each GPU
    (70,272 bytes = 6.54e-05 GiB a token, the MLA latent, whole on each of 8 tensor-parallel ranks), but 0.92 x
    95.59 GiB - 69.29 GiB of weights - 6.00 GiB allowance leaves 12.66 GiB, 4.50 GiB short, beyond the estimate's
    margin of +/-2.00 GiB. To fit clearly, set max_model_len at most 162,849 or gpu_memory_utilization at least
    0.99 in vllm_serve_args, or kv_cache_dtype fp8 (8.58 GiB).
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.vllm.plugins.module_utils._model_fit import (
    FitError, draft_kind, gpu_memory_totals, judge)
from ansible_collections.llmops.vllm.plugins.module_utils._weights import WeightsError, check_weights, hub_snapshot


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path'),
            repo_id=dict(type='str'),
            revision=dict(type='str'),
            hub_cache=dict(type='path'),
            serve_args=dict(type='dict', default={}),
            speculative_config=dict(type='dict'),
            draft_path=dict(type='path'),
            gpu_memory_mib=dict(type='list', elements='int'),
            weights_bytes=dict(type='int'),
            draft_weights_bytes=dict(type='int'),
            allowance_gib=dict(type='float', default=6.0),
            margin_gib=dict(type='float', default=2.0),
            what=dict(type='str', default='the model'),
            settings_from=dict(type='str', default='vllm_serve_args'),
        ),
        mutually_exclusive=[('path', 'repo_id')],
        required_one_of=[('path', 'repo_id')],
        required_by={'repo_id': 'hub_cache'},
        supports_check_mode=True,
    )
    params = module.params
    what = params['what']
    spec = params['speculative_config'] or {}
    try:
        directory = params['path'] or hub_snapshot(params['hub_cache'], params['repo_id'], params['revision'])
        draft_directory = None
        if draft_kind(spec) == 'model':
            draft_directory = params['draft_path'] or _draft_directory(spec, params['hub_cache'])
    except (WeightsError, FitError) as exc:
        module.fail_json(msg='cannot judge whether %s fits: %s' % (what, exc))
    result = dict(changed=False, path=directory, draft_path=draft_directory)
    try:
        config = _config(directory)
        weights = params['weights_bytes']
        if weights is None:
            weights = _weights_size(directory, 'the model')
        draft_config, draft_weights = None, 0
        if draft_directory:
            draft_config = _config(draft_directory)
            draft_weights = params['draft_weights_bytes']
            if draft_weights is None:
                draft_weights = _weights_size(draft_directory, 'the draft')
        gpus = params['gpu_memory_mib'] or _gpu_memory(module)
        answer = judge(config, weights, gpus, params['serve_args'], spec, draft_config, draft_weights,
                       params['allowance_gib'], params['margin_gib'], what, params['settings_from'])
    except FitError as exc:
        module.fail_json(msg='cannot judge whether %s fits: %s' % (what, exc), **result)
    result.update(verdict=answer['verdict'], fits=answer['fits'], figures=answer['figures'],
                  variables=answer['variables'], gpu_memory_mib=gpus)
    if not answer['fits']:
        module.fail_json(msg=answer['msg'], **result)
    if answer['verdict'] == 'tight':
        module.warn(answer['msg'])
    module.exit_json(msg=answer['msg'], **result)


def _draft_directory(spec, hub_cache):
    """The draft's directory: speculative_config.model as a path, or as a hub repository in the cache."""
    model = spec.get('model')
    if not model:
        raise FitError('speculative_config names no draft model')
    if os.path.isabs(model):
        return model
    if not hub_cache:
        raise FitError('the draft %s is a hub repository; set hub_cache or draft_path' % model)
    return hub_snapshot(hub_cache, model, spec.get('revision'))


def _config(directory):
    path = os.path.join(directory, 'config.json')
    try:
        with open(path, encoding='utf-8') as handle:
            config = json.load(handle)
    except (OSError, ValueError) as exc:
        raise FitError('%s cannot be read: %s' % (path, exc))
    if not isinstance(config, dict):
        raise FitError('%s is not a JSON object' % path)
    return config


def _weights_size(directory, what):
    # A size from a partial download would understate the weights, so only whole weights are judged.
    files, problems = check_weights(directory)
    if problems:
        raise FitError('%s is not whole on the node: %s' % (what, '; '.join(problems)))
    return sum(entry['size'] for entry in files)


def _gpu_memory(module):
    nvidia_smi = module.get_bin_path('nvidia-smi')
    if not nvidia_smi:
        raise FitError("nvidia-smi is not on the node's PATH, so the GPUs' memory cannot be read; "
                       "install the NVIDIA driver's tools or pass gpu_memory_mib")
    rc, out, err = module.run_command([nvidia_smi, '--query-gpu=memory.total', '--format=csv,noheader,nounits'])
    if rc != 0:
        raise FitError('nvidia-smi --query-gpu=memory.total failed (rc %d): %s' % (rc, (err or out).strip()))
    return gpu_memory_totals(out)


if __name__ == '__main__':
    main()
