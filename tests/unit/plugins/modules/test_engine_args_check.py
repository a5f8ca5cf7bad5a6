# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""engine_args_check runs its proof script in a real interpreter against a stand-in vLLM package.

The stand-in has vLLM's import paths and calls (the serve parser, the serve-argument check, the engine
configuration) with a few of vLLM's refusals: suffix decoding without arctic-inference, mtp on a model
without MTP layers, a context longer than the model's, an unknown flag. The script, the environment files and
the answer are the module's own."""

from __future__ import annotations

import os
import sys
import tempfile
import textwrap

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils import _engine_args
from ansible_collections.llmops.vllm.plugins.modules import engine_args_check

from ansible_collections.llmops.vllm.tests.unit.plugins.modules.wait_fakes import run_module

STAND_IN = {
    'vllm/__init__.py': '',
    'vllm/entrypoints/__init__.py': '',
    'vllm/entrypoints/launchers/__init__.py': '',
    'vllm/entrypoints/launchers/cli_args.py': '''
        def make_arg_parser(parser):
            parser.add_argument("--model", required=True)
            parser.add_argument("--max-model-len", type=int)
            parser.add_argument("--speculative-config")
            parser.add_argument("--port", type=int, default=8000)
            return parser

        def validate_parsed_serve_args(args):
            if args.port == 0:
                raise TypeError("port must not be 0")
        ''',
    'vllm/utils/__init__.py': '',
    'vllm/utils/argparse_utils.py': '''
        import argparse

        class FlexibleArgumentParser(argparse.ArgumentParser):
            pass
        ''',
    'vllm/engine/__init__.py': '',
    'vllm/engine/arg_utils.py': '''
        import json, os, types

        class AsyncEngineArgs:
            def __init__(self, args):
                self.args = args

            @classmethod
            def from_cli_args(cls, args):
                return cls(args)

            def create_engine_config(self):
                with open(os.path.join(self.args.model, "config.json")) as handle:
                    model = json.load(handle)
                length = self.args.max_model_len or model["max_position_embeddings"]
                if length > model["max_position_embeddings"]:
                    raise ValueError("User-specified max_model_len (%d) is greater than the derived "
                                     "max_model_len (%d)" % (length, model["max_position_embeddings"]))
                speculative = json.loads(self.args.speculative_config) if self.args.speculative_config else None
                if speculative and speculative["method"] == "suffix" and not os.environ.get("HAS_ARCTIC"):
                    raise ImportError("Arctic Inference is required for suffix decoding.")
                if speculative and speculative["method"] == "mtp" and not model.get("num_nextn_predict_layers"):
                    raise NotImplementedError("Unsupported speculative method: 'mtp'")
                print("INFO the engine configuration is built as user", os.environ.get("USER"))
                spec = speculative and types.SimpleNamespace(
                    method=speculative["method"], num_speculative_tokens=speculative.get("num_speculative_tokens"))
                return types.SimpleNamespace(model_config=types.SimpleNamespace(max_model_len=length),
                                             speculative_config=spec)
        ''',
}


@pytest.fixture
def node(tmp_path):
    """A stand-in vLLM on PYTHONPATH (set by the unit's environment file, as a venv's site-packages would be),
    a model directory, and the unit's argv."""
    site = tmp_path / 'site'
    for name, text in STAND_IN.items():
        path = site / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    model = tmp_path / 'model'
    model.mkdir()
    (model / 'config.json').write_text('{"max_position_embeddings": 2048}')
    env_file = tmp_path / 'unit.env'
    env_file.write_text('# written by the role\nPYTHONPATH=%s\nVLLM_CPU_KVCACHE_SPACE="1"\n' % site)

    class Node:
        def argv(self, *extra):
            return [sys.executable, '-m', 'vllm.entrypoints.openai.api_server', '--model', str(model)] + list(extra)

        def run(self, monkeypatch, *extra, check_mode=False, **args):
            args.setdefault('environment_files', [str(env_file), '-' + str(tmp_path / 'absent.secrets.env')])
            args.update(argv=self.argv(*extra), name='vllm-x.service')
            return run_module(monkeypatch, engine_args_check, args, check_mode=check_mode)

    node = Node()
    node.tmp_path = tmp_path
    node.env_file = env_file
    node.model = model
    return node


def test_arguments_vllm_accepts_pass_with_the_configuration_it_built(node, monkeypatch):
    failed, result = node.run(monkeypatch, '--speculative-config', '{"method": "ngram", "num_speculative_tokens": 5}')
    assert not failed, result['msg']
    assert result['accepted'] is True
    assert result['speculative_method'] == 'ngram'
    assert result['num_speculative_tokens'] == 5
    assert result['max_model_len'] == 2048
    assert result['refusal'] is None
    assert result['changed'] is False


def test_suffix_without_its_package_is_refused_quoting_vllm(node, monkeypatch):
    failed, result = node.run(monkeypatch, '--speculative-config', '{"method": "suffix"}')
    assert failed
    assert result['accepted'] is False
    assert result['stage'] == 'engine_config'
    assert result['refusal'] == ('ImportError while building the engine configuration: '
                                 'Arctic Inference is required for suffix decoding.')
    assert 'vllm-x.service' in result['msg']


def test_the_environment_files_reach_vllm(node, monkeypatch):
    # The same suffix variant passes once the unit's environment says the package is there.
    with open(node.env_file, 'a') as handle:
        handle.write('HAS_ARCTIC=1\n')
    failed, result = node.run(monkeypatch, '--speculative-config', '{"method": "suffix"}')
    assert not failed, result['msg']
    assert result['speculative_method'] == 'suffix'


def test_mtp_on_a_model_without_mtp_layers_is_refused(node, monkeypatch):
    failed, result = node.run(monkeypatch, '--speculative-config', '{"method": "mtp", "num_speculative_tokens": 1}')
    assert failed
    assert result['refusal'] == ("NotImplementedError while building the engine configuration: "
                                 "Unsupported speculative method: 'mtp'")


def test_a_context_longer_than_the_models_is_refused(node, monkeypatch):
    failed, result = node.run(monkeypatch, '--max-model-len', '65536')
    assert failed
    assert 'max_model_len (65536) is greater than' in result['refusal']


def test_an_unknown_flag_is_refused_by_the_parser(node, monkeypatch):
    failed, result = node.run(monkeypatch, '--max-modle-len', '1024')
    assert failed
    assert result['stage'] == 'parse'
    assert result['refusal'].startswith('SystemExit while parsing the arguments')
    assert any('unrecognized arguments: --max-modle-len' in line for line in result['log_tail'])


def test_a_failed_serve_argument_check_names_its_stage(node, monkeypatch):
    failed, result = node.run(monkeypatch, '--port', '0')
    assert failed
    assert result['refusal'] == 'TypeError while checking the serve arguments: port must not be 0'


def test_a_venv_without_vllm_is_not_a_refusal(node, monkeypatch):
    failed, result = node.run(monkeypatch, environment_files=[])
    assert failed
    assert result['refusal'] is None
    assert result['msg'].startswith('Could not have vLLM check the arguments of vllm-x.service')
    assert "ModuleNotFoundError: No module named 'vllm'" in result['msg']


def test_a_missing_required_environment_file_fails_before_running(node, monkeypatch):
    failed, result = node.run(monkeypatch, environment_files=[str(node.tmp_path / 'gone.env')])
    assert failed
    assert 'gone.env' in result['msg']
    assert result['elapsed'] == 0.0


def test_a_command_line_that_is_not_vllms_server_is_refused_before_running(monkeypatch):
    failed, result = run_module(monkeypatch, engine_args_check, dict(argv=['/usr/bin/python3', 'server.py']))
    assert failed
    assert "argv must start with the venv's python, -m and vLLM's server module" in result['msg']


def test_a_proof_that_does_not_answer_in_time_fails(node, monkeypatch):
    slow = node.tmp_path / 'site' / 'vllm' / 'engine' / 'arg_utils.py'
    slow.write_text('import time\ntime.sleep(30)\n')
    failed, result = node.run(monkeypatch, timeout=2)
    assert failed
    assert result['msg'].endswith('vLLM did not answer within 2 s')


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists('/usr/bin/python3'), reason='dropping to another user needs root')
def test_the_proof_runs_as_the_units_user(monkeypatch):
    # Outside pytest's private temporary directory, which only root may enter; the system's interpreter, which
    # every user may run.
    with tempfile.TemporaryDirectory(dir='/tmp') as base:
        os.chmod(base, 0o755)
        for name, text in STAND_IN.items():
            path = os.path.join(base, 'site', name)
            os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
            with open(path, 'w') as handle:
                handle.write(textwrap.dedent(text))
        os.makedirs(os.path.join(base, 'model'), mode=0o755)
        with open(os.path.join(base, 'model', 'config.json'), 'w') as handle:
            handle.write('{"max_position_embeddings": 2048}')
        for root, dirs, files in os.walk(base):
            for name in dirs:
                os.chmod(os.path.join(root, name), 0o755)
            for name in files:
                os.chmod(os.path.join(root, name), 0o644)
        env_file = os.path.join(base, 'unit.env')
        with open(env_file, 'w') as handle:
            handle.write('PYTHONPATH=%s\n' % os.path.join(base, 'site'))
        failed, result = run_module(monkeypatch, engine_args_check, dict(
            argv=['/usr/bin/python3', '-m', 'vllm.entrypoints.openai.api_server', '--model',
                  os.path.join(base, 'model')],
            environment_files=[env_file], user='nobody'))
    assert not failed, result['msg']
    assert 'INFO the engine configuration is built as user nobody' in result['log_tail']


def test_an_unknown_user_fails_before_running(node, monkeypatch):
    failed, result = node.run(monkeypatch, user='no-such-user-llmops')
    assert failed
    assert 'the user no-such-user-llmops does not exist on the node' in result['msg']


def test_environment_files_are_read_as_systemd_reads_them(tmp_path):
    first = tmp_path / 'a.env'
    first.write_text('# comment\n; also a comment\nA=1\nB="two words"\nC=\'x\'\n\nnot a line\nD=a=b\n')
    second = tmp_path / 'b.env'
    second.write_text('A=overridden\n')
    environment = _engine_args.unit_environment([str(first), str(second), '-' + str(tmp_path / 'none.env')],
                                                {'PATH': '/usr/bin', 'A': 'base'})
    assert environment == {'PATH': '/usr/bin', 'A': 'overridden', 'B': 'two words', 'C': 'x', 'D': 'a=b'}


def test_the_answer_is_the_last_marker_line():
    output = 'log\n%s{"stage": "parse"}\nmore log\n%s{"stage": "done"}\n' % (_engine_args.MARKER, _engine_args.MARKER)
    assert _engine_args.parse_answer(output) == {'stage': 'done'}
    assert _engine_args.parse_answer('no marker here') is None
    assert _engine_args.log_tail(output) == ['log', 'more log']


def test_environment_files_the_role_writes_read_back_unchanged(tmp_path):
    from ansible_collections.llmops.vllm.plugins.plugin_utils._systemd_escape import format_environment_file
    values = {'PLAIN': '1', 'QUOTES': 'say "hi"', 'DOLLAR': '$HOME and ${USER}', 'BACKSLASH': r'a\b\\c',
              'TICK': '`date`', 'SPACES': '  two  spaces '}
    path = tmp_path / 'written.env'
    path.write_text(format_environment_file(values))
    assert _engine_args.read_environment_file(str(path)) == values


NGRAM = ('--speculative-config', '{"method": "ngram", "num_speculative_tokens": 5}')


def remembered(node):
    return sorted(path.name for path in (node.tmp_path / 'accepted').glob('*.json'))


def counting_proofs(monkeypatch):
    """Count the proofs that ran vLLM (the module's own run_proof, wrapped)."""
    ran = []
    real = engine_args_check.run_proof

    def run_proof(*args, **kwargs):
        ran.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(engine_args_check, 'run_proof', run_proof)
    return ran


def test_accepted_arguments_are_remembered_and_answered_again_without_vllm(node, monkeypatch):
    ran = counting_proofs(monkeypatch)
    cache = str(node.tmp_path / 'accepted')
    failed, first = node.run(monkeypatch, *NGRAM, cache_dir=cache)
    assert not failed, first['msg']
    assert first['cached'] is False
    assert len(remembered(node)) == 1
    assert oct((node.tmp_path / 'accepted' / remembered(node)[0]).stat().st_mode & 0o777) == '0o600'
    failed, second = node.run(monkeypatch, *NGRAM, cache_dir=cache)
    assert not failed, second['msg']
    assert second['cached'] is True
    assert len(ran) == 1
    for name in ('accepted', 'speculative_method', 'num_speculative_tokens', 'max_model_len', 'stage'):
        assert second[name] == first[name]
    assert second['changed'] is False


def test_a_changed_argument_environment_or_model_config_is_checked_again(node, monkeypatch):
    ran = counting_proofs(monkeypatch)
    cache = str(node.tmp_path / 'accepted')
    node.run(monkeypatch, *NGRAM, cache_dir=cache)
    failed, other_length = node.run(monkeypatch, *NGRAM, '--max-model-len', '1024', cache_dir=cache)
    assert (failed, other_length['cached'], other_length['max_model_len']) == (False, False, 1024)
    with open(node.env_file, 'a') as handle:
        handle.write('VLLM_LOGGING_LEVEL=DEBUG\n')
    failed, other_environment = node.run(monkeypatch, *NGRAM, cache_dir=cache)
    assert (failed, other_environment['cached']) == (False, False)
    # A longer context in the model's config.json is what vLLM reads, though no argument changed.
    (node.model / 'config.json').write_text('{"max_position_embeddings": 4096}')
    failed, other_model = node.run(monkeypatch, *NGRAM, cache_dir=cache)
    assert (failed, other_model['cached'], other_model['max_model_len']) == (False, False, 4096)
    assert len(ran) == 4
    assert len(remembered(node)) == 4


def test_a_refusal_is_never_remembered(node, monkeypatch):
    ran = counting_proofs(monkeypatch)
    cache = str(node.tmp_path / 'accepted')
    for attempt in range(2):
        failed, result = node.run(monkeypatch, '--speculative-config', '{"method": "suffix"}', cache_dir=cache)
        assert failed and result['cached'] is False, attempt
    assert len(ran) == 2
    assert remembered(node) == []


def test_check_mode_remembers_nothing(node, monkeypatch):
    failed, result = node.run(monkeypatch, *NGRAM, cache_dir=str(node.tmp_path / 'accepted'), check_mode=True)
    assert not failed and result['accepted'] is True
    assert remembered(node) == []


def test_without_a_cache_dir_every_check_runs_vllm(node, monkeypatch):
    ran = counting_proofs(monkeypatch)
    for attempt in range(2):
        failed, result = node.run(monkeypatch, *NGRAM)
        assert not failed and result['cached'] is False, attempt
    assert len(ran) == 2


def test_a_hub_model_or_draft_is_never_answered_from_memory(tmp_path):
    model = tmp_path / 'model'
    model.mkdir()
    python = str(tmp_path / 'venv' / 'bin' / 'python')
    base = [python, '-m', 'vllm.entrypoints.openai.api_server', '--model']
    assert _engine_args.proof_key(base + [str(model)], {}) is not None
    assert _engine_args.proof_key(base + ['moonshotai/Kimi-K2.5'], {}) is None
    hub_draft = '{"method": "eagle3", "model": "lightseekorg/kimi-k2.5-eagle3", "num_speculative_tokens": 3}'
    assert _engine_args.proof_key(base + [str(model), '--speculative-config', hub_draft], {}) is None
    (tmp_path / 'draft').mkdir()
    local_draft = '{"method": "eagle3", "model": "%s", "num_speculative_tokens": 3}' % (tmp_path / 'draft')
    assert _engine_args.proof_key(base + [str(model), '--speculative-config=' + local_draft], {}) is not None
    assert _engine_args.proof_key(base + [str(model), '--tokenizer', 'org/tokenizer'], {}) is None


def test_the_key_follows_the_venvs_distributions_and_the_drafts_config(tmp_path):
    model, draft = tmp_path / 'model', tmp_path / 'draft'
    model.mkdir()
    draft.mkdir()
    site = tmp_path / 'venv' / 'lib' / 'python3.11' / 'site-packages'
    (site / 'vllm-0.32.0.dist-info').mkdir(parents=True)
    spec = '{"method": "eagle3", "model": "%s", "num_speculative_tokens": 3}' % draft
    argv = [str(tmp_path / 'venv' / 'bin' / 'python'), '-m', 'vllm.entrypoints.openai.api_server', '--model',
            str(model), '--speculative-config', spec]
    first = _engine_args.proof_key(argv, {'A': '1'})
    assert _engine_args.proof_key(argv, {'A': '1'}) == first
    (site / 'arctic_inference-0.3.0.dist-info').mkdir()
    with_package = _engine_args.proof_key(argv, {'A': '1'})
    assert with_package != first
    (draft / 'config.json').write_text('{"num_hidden_layers": 1}')
    assert _engine_args.proof_key(argv, {'A': '1'}) not in (first, with_package)
    assert _engine_args.proof_key(argv, {'A': '2'}) != _engine_args.proof_key(argv, {'A': '1'})


def test_a_damaged_memory_is_not_an_acceptance(tmp_path):
    (tmp_path / ('a' * 64 + '.json')).write_text('{"stage": "parse"')
    assert _engine_args.read_accepted(str(tmp_path), 'a' * 64) is None
    (tmp_path / ('b' * 64 + '.json')).write_text('{"stage": "engine_config"}')
    assert _engine_args.read_accepted(str(tmp_path), 'b' * 64) is None
    assert _engine_args.read_accepted(str(tmp_path / 'absent'), 'c' * 64) is None
