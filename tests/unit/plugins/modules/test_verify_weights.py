# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import json
import struct

import pytest

from ansible_collections.llmops.vllm.plugins.modules import verify_weights
from wait_fakes import run_module

COMMIT = '5f1c2a0e4b7d9a3c6e8f0b1d2c4e6a8b0c2d4e6f'


@pytest.fixture
def call(monkeypatch):
    def run(**args):
        failed, result = run_module(monkeypatch, verify_weights, args)
        return dict(result, failed=True) if failed else result
    return run


def write_safetensors(path, tensors):
    """A real safetensors file: name -> number of float32 values, laid out one after another."""
    header, offset = {'__metadata__': {'format': 'pt'}}, 0
    for name, count in tensors.items():
        header[name] = {'dtype': 'F32', 'shape': [count], 'data_offsets': [offset, offset + 4 * count]}
        offset += 4 * count
    raw = json.dumps(header).encode('utf-8')
    path.write_bytes(struct.pack('<Q', len(raw)) + raw + b'\0' * offset)
    return 8 + len(raw) + offset


def sharded_model(directory):
    directory.mkdir(parents=True)
    (directory / 'config.json').write_text('{"model_type": "llama"}', encoding='utf-8')
    sizes = [write_safetensors(directory / 'model-00001-of-00002.safetensors', {'embed': 64, 'layer.0': 32}),
             write_safetensors(directory / 'model-00002-of-00002.safetensors', {'layer.1': 32, 'head': 64})]
    (directory / 'model.safetensors.index.json').write_text(json.dumps({'weight_map': {
        'embed': 'model-00001-of-00002.safetensors', 'layer.0': 'model-00001-of-00002.safetensors',
        'layer.1': 'model-00002-of-00002.safetensors', 'head': 'model-00002-of-00002.safetensors'}}), encoding='utf-8')
    return sizes


def test_a_whole_sharded_model_passes_with_its_files_and_sizes(tmp_path, call):
    sizes = sharded_model(tmp_path / 'model')
    result = call(path=str(tmp_path / 'model'), what='the model of baseline')
    assert 'failed' not in result and result['problems'] == []
    assert [entry['size'] for entry in result['files']] == sizes and result['bytes'] == sum(sizes)
    assert result['msg'].startswith('the model of baseline is whole: 2 weight files, 0.0 MB, in ')


def test_a_shard_cut_short_or_missing_fails_naming_it(tmp_path, call):
    sharded_model(tmp_path / 'model')
    second = tmp_path / 'model' / 'model-00002-of-00002.safetensors'
    second.write_bytes(second.read_bytes()[:-100])
    result = call(path=str(tmp_path / 'model'), what='the draft of eagle3')
    assert result['failed'] and result['msg'].startswith('the draft of eagle3 is not whole on the node: ')
    assert result['problems'] == ['%s has %d bytes, its header says %d (cut short)' % (
        second, second.stat().st_size, second.stat().st_size + 100)]
    second.unlink()
    assert call(path=str(tmp_path / 'model'))['problems'] == ['%s is missing' % second]


def test_a_shard_of_another_revision_lacks_the_tensors_the_index_places_in_it(tmp_path, call):
    sharded_model(tmp_path / 'model')
    write_safetensors(tmp_path / 'model' / 'model-00002-of-00002.safetensors', {'layer.1': 32, 'lm_head': 64})
    assert call(path=str(tmp_path / 'model'))['problems'] == [
        '%s lacks 1 tensors that model.safetensors.index.json places in it, for example head'
        % (tmp_path / 'model' / 'model-00002-of-00002.safetensors')]


def test_a_hub_model_is_found_by_its_branch_or_commit_in_the_cache(tmp_path, call):
    repo = tmp_path / 'hub' / 'models--lightseekorg--kimi-k2.5-eagle3'
    sharded_model(repo / 'snapshots' / COMMIT)
    (repo / 'refs').mkdir()
    (repo / 'refs' / 'main').write_text(COMMIT + '\n', encoding='utf-8')
    for revision in (None, 'main', COMMIT):
        result = call(repo_id='lightseekorg/kimi-k2.5-eagle3', revision=revision, hub_cache=str(tmp_path / 'hub'))
        assert result['path'] == str(repo / 'snapshots' / COMMIT) and result['problems'] == []
    other = call(repo_id='lightseekorg/kimi-k2.5-eagle3', revision='a' * 40, hub_cache=str(tmp_path / 'hub'),
                 what='the draft of eagle3')
    assert other['failed'] and other['msg'].startswith('the draft of eagle3 is not on the node: lightseekorg/')
    assert 'snapshots/' + 'a' * 40 in other['msg']


def test_a_directory_that_is_not_there_or_holds_no_weights_fails(tmp_path, call):
    assert call(path=str(tmp_path / 'absent'))['problems'] == ['%s does not exist on the node' % (tmp_path / 'absent')]
    (tmp_path / 'empty').mkdir()
    assert call(path=str(tmp_path / 'empty'))['problems'] == [
        '%s has no config.json' % (tmp_path / 'empty'),
        '%s holds no weights (no model.safetensors.index.json, *.safetensors or pytorch_model*.bin)' % (tmp_path / 'empty')]


def test_a_file_that_is_not_safetensors_is_named(tmp_path, call):
    (tmp_path / 'model').mkdir()
    (tmp_path / 'model' / 'config.json').write_text('{}', encoding='utf-8')
    (tmp_path / 'model' / 'model.safetensors').write_bytes(b'<html>rate limited</html>')
    assert call(path=str(tmp_path / 'model'))['problems'] == [
        '%s is not a whole safetensors file: header length %d is not that of a safetensors file'
        % (tmp_path / 'model' / 'model.safetensors', struct.unpack('<Q', b'<html>ra')[0])]
