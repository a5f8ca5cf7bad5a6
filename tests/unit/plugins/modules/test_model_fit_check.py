# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""model_fit_check on canned nodes: published models' config.json (sources in
tests/unit/fixtures/model_configs/README.md: moonshotai/Kimi-K2.5 as transformers prints it, meta-llama/Llama-3.1-8B,
TorchSpec's Kimi-K2.5 EAGLE-3 draft shapes), real safetensors files, and nvidia-smi faked at its command line."""

from __future__ import annotations

import json
import pathlib
import shutil
import struct

import pytest

from ansible.module_utils import basic

from ansible_collections.llmops.vllm.plugins.modules import model_fit_check
from wait_fakes import run_module

CONFIGS = pathlib.Path(__file__).resolve().parents[2] / 'fixtures' / 'model_configs'
GIB = 1024 ** 3
KIMI_WEIGHTS = int(554.30 * GIB)
RTX_PRO_6000 = 97887
PRODUCTION = {'tensor_parallel_size': 8, 'max_model_len': 262144, 'gpu_memory_utilization': 0.92,
              'tool_call_parser': 'kimi_k2', 'trust_remote_code': True}
COMMIT = '5f1c2a0e4b7d9a3c6e8f0b1d2c4e6a8b0c2d4e6f'


@pytest.fixture
def call(monkeypatch):
    def run(check_mode=False, **args):
        failed, result = run_module(monkeypatch, model_fit_check, args, check_mode=check_mode)
        return dict(result, failed=True) if failed else result
    return run


@pytest.fixture
def nvidia_smi(monkeypatch):
    """nvidia-smi on the node: what it prints, whether it is installed, and the command lines it got."""
    node = {'installed': True, 'rc': 0, 'out': '%d\n' % RTX_PRO_6000 * 8, 'err': '', 'argv': []}

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return '/usr/bin/' + name if node['installed'] else None

    def run_command(self, argv, **kwargs):
        node['argv'].append(argv)
        return node['rc'], node['out'], node['err']

    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path', get_bin_path)
    monkeypatch.setattr(basic.AnsibleModule, 'run_command', run_command)
    return node


def model_dir(directory, config_name, weights=None):
    """A model directory with a published config.json and one real (small) safetensors shard."""
    directory.mkdir(parents=True)
    shutil.copy(CONFIGS / config_name, directory / 'config.json')
    header = json.dumps({'w': {'dtype': 'BF16', 'shape': [weights or 64], 'data_offsets': [0, 2 * (weights or 64)]}})
    raw = header.encode('utf-8')
    (directory / 'model.safetensors').write_bytes(struct.pack('<Q', len(raw)) + raw + b'\0' * 2 * (weights or 64))
    return directory


def test_the_production_baseline_fails_before_anything_stops_with_the_figures(tmp_path, call, nvidia_smi):
    model_dir(tmp_path / 'Kimi-K2.5', 'kimi-k2.5.config.json')
    result = call(path=str(tmp_path / 'Kimi-K2.5'), serve_args=PRODUCTION, weights_bytes=KIMI_WEIGHTS,
                  what='kimi-k2.5 baseline')
    assert result['failed'] and result['verdict'] == 'refused' and result['fits'] is False
    assert result['msg'].startswith('kimi-k2.5 baseline does not fit: one request of max_model_len 262,144 needs '
                                    '17.16 GiB of KV cache on each GPU (70,272 bytes = 6.54e-05 GiB a token')
    assert 'leaves 12.66 GiB, 4.50 GiB short, beyond the estimate\'s margin of +/-2.00 GiB' in result['msg']
    assert result['variables'] == ['vllm_serve_args.max_model_len', 'vllm_serve_args.gpu_memory_utilization']
    assert result['figures']['kv_needed_gib'] == 17.156 and result['figures']['available_gib'] == 12.658
    assert result['gpu_memory_mib'] == [RTX_PRO_6000] * 8 and result['path'] == str(tmp_path / 'Kimi-K2.5')
    assert nvidia_smi['argv'] == [['/usr/bin/nvidia-smi', '--query-gpu=memory.total', '--format=csv,noheader,nounits']]


def test_within_the_margin_it_warns_and_succeeds_in_check_mode_too(tmp_path, call, nvidia_smi, monkeypatch):
    warnings = []
    monkeypatch.setattr(basic.AnsibleModule, 'warn', lambda self, text: warnings.append(text))
    model_dir(tmp_path / 'Kimi-K2.5', 'kimi-k2.5.config.json')
    for check_mode in (False, True):
        result = call(check_mode=check_mode, path=str(tmp_path / 'Kimi-K2.5'),
                      serve_args=dict(PRODUCTION, max_model_len=200000), weights_bytes=KIMI_WEIGHTS,
                      what='kimi-k2.5 baseline')
        assert 'failed' not in result and result['changed'] is False
        assert result['verdict'] == 'tight' and result['fits'] is True
        assert result['msg'].startswith('kimi-k2.5 baseline may not fit: ')
    assert warnings == [result['msg']] * 2


def test_a_model_without_mla_is_measured_on_disk_and_fits(tmp_path, call, nvidia_smi):
    model_dir(tmp_path / 'Llama-3.1-8B', 'llama-3.1-8b.config.json', weights=1024)
    result = call(path=str(tmp_path / 'Llama-3.1-8B'), gpu_memory_mib=[RTX_PRO_6000], what='llama-3.1-8b')
    figures = result['figures']
    assert 'failed' not in result and result['verdict'] == 'fits'
    assert figures['attention'] == 'gqa' and figures['kv_bytes_per_token'] == 131072
    assert figures['max_model_len'] == 131072 and figures['kv_needed_gib'] == 16.0
    # The one shard's size, read from disk: no nvidia-smi, since gpu_memory_mib was given.
    assert figures['weights_gib'] == round((tmp_path / 'Llama-3.1-8B' / 'model.safetensors').stat().st_size / GIB, 3)
    assert nvidia_smi['argv'] == [] and result['gpu_memory_mib'] == [RTX_PRO_6000]


def test_the_eagle3_draft_is_found_in_the_hub_cache_and_counted(tmp_path, call, nvidia_smi):
    model_dir(tmp_path / 'Kimi-K2.5', 'kimi-k2.5.config.json')
    repo = tmp_path / 'hub' / 'models--lightseekorg--kimi-k2.5-eagle3'
    model_dir(repo / 'snapshots' / COMMIT, 'kimi-k2.5-eagle3-draft.config.json')
    spec = {'method': 'eagle3', 'model': 'lightseekorg/kimi-k2.5-eagle3', 'revision': COMMIT,
            'num_speculative_tokens': 3, 'draft_tensor_parallel_size': 8}
    result = call(path=str(tmp_path / 'Kimi-K2.5'), hub_cache=str(tmp_path / 'hub'), weights_bytes=KIMI_WEIGHTS,
                  draft_weights_bytes=4 * GIB, serve_args=dict(PRODUCTION, max_model_len=131072),
                  speculative_config=spec, what='kimi-k2.5 eagle3', settings_from='vllm_variants.eagle3.serve_args')
    assert 'failed' not in result and result['verdict'] == 'fits'
    assert result['draft_path'] == str(repo / 'snapshots' / COMMIT)
    assert result['figures']['draft_kv_bytes_per_token'] == 4096 and result['figures']['draft_weights_gib'] == 0.5
    # The same variant at the inventory's 262,144 tokens is refused, naming the variant's variables.
    refused = call(path=str(tmp_path / 'Kimi-K2.5'), hub_cache=str(tmp_path / 'hub'), weights_bytes=KIMI_WEIGHTS,
                   draft_weights_bytes=4 * GIB, serve_args=PRODUCTION, speculative_config=spec,
                   what='kimi-k2.5 eagle3', settings_from='vllm_variants.eagle3.serve_args')
    assert refused['failed'] and refused['verdict'] == 'refused'
    assert 'in vllm_variants.eagle3.serve_args' in refused['msg']
    assert refused['variables'][0] == 'vllm_variants.eagle3.serve_args.max_model_len'


def test_a_draft_that_is_not_staged_cannot_be_judged(tmp_path, call, nvidia_smi):
    model_dir(tmp_path / 'Kimi-K2.5', 'kimi-k2.5.config.json')
    (tmp_path / 'hub').mkdir()
    spec = {'method': 'eagle3', 'model': 'lightseekorg/kimi-k2.5-eagle3-mla', 'num_speculative_tokens': 3}
    result = call(path=str(tmp_path / 'Kimi-K2.5'), hub_cache=str(tmp_path / 'hub'), speculative_config=spec,
                  serve_args=PRODUCTION, weights_bytes=KIMI_WEIGHTS, what='kimi-k2.5 eagle3')
    assert result['failed'] and result['msg'].startswith(
        'cannot judge whether kimi-k2.5 eagle3 fits: lightseekorg/kimi-k2.5-eagle3-mla at main is not in the hub '
        'cache')
    no_cache = call(path=str(tmp_path / 'Kimi-K2.5'), speculative_config=spec, serve_args=PRODUCTION,
                    weights_bytes=KIMI_WEIGHTS)
    assert no_cache['msg'] == ('cannot judge whether the model fits: the draft lightseekorg/kimi-k2.5-eagle3-mla is '
                               'a hub repository; set hub_cache or draft_path')


def test_missing_nvidia_smi_is_named_with_the_way_around_it(tmp_path, call, nvidia_smi):
    model_dir(tmp_path / 'Kimi-K2.5', 'kimi-k2.5.config.json')
    nvidia_smi['installed'] = False
    result = call(path=str(tmp_path / 'Kimi-K2.5'), serve_args=PRODUCTION, weights_bytes=KIMI_WEIGHTS)
    assert result['failed'] and result['msg'] == (
        "cannot judge whether the model fits: nvidia-smi is not on the node's PATH, so the GPUs' memory cannot be "
        "read; install the NVIDIA driver's tools or pass gpu_memory_mib")
    nvidia_smi.update(installed=True, rc=9, out='', err='NVIDIA-SMI has failed because it could not communicate '
                      'with the NVIDIA driver.\n')
    failed = call(path=str(tmp_path / 'Kimi-K2.5'), serve_args=PRODUCTION, weights_bytes=KIMI_WEIGHTS)
    assert failed['msg'].endswith('nvidia-smi --query-gpu=memory.total failed (rc 9): NVIDIA-SMI has failed because '
                                  'it could not communicate with the NVIDIA driver.')


def test_weights_cut_short_or_an_unreadable_config_cannot_be_judged(tmp_path, call, nvidia_smi):
    model = model_dir(tmp_path / 'Llama-3.1-8B', 'llama-3.1-8b.config.json')
    shard = model / 'model.safetensors'
    shard.write_bytes(shard.read_bytes()[:-10])
    result = call(path=str(model))
    assert result['failed'] and result['msg'].startswith('cannot judge whether the model fits: the model is not '
                                                         'whole on the node: ')
    (model / 'config.json').write_text('{"num_hidden_layers": ', encoding='utf-8')
    assert call(path=str(model), weights_bytes=1)['msg'].startswith(
        'cannot judge whether the model fits: %s cannot be read: ' % (model / 'config.json'))
