# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The mock host's stand-in engine speaks what the collection's own clients read of vLLM.

The scenarios that check orchestration run it in place of vLLM (molecule/mock_host/standin.yml); a client that it
answered otherwise than vLLM does would pass there and fail on a GPU node. So the very modules the roles run, the
readiness wait, the benchmark and the answer check, are run here against it, started as a unit starts vLLM.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ansible_collections.llmops.vllm.plugins.modules import answer_check, openai_benchmark, wait_for_openai_endpoint
from ansible_collections.llmops.vllm.tests.unit.plugins.modules.wait_fakes import run_module

STANDIN = Path(__file__).resolve().parents[3] / 'molecule' / 'mock_host' / 'files' / 'standin'


def free_port():
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        return probe.getsockname()[1]


@pytest.fixture
def standin(request):
    """The stand-in on a free loopback port, with vLLM's command line; its environment from the test's marker."""
    extra = getattr(request, 'param', {})
    port = free_port()
    argv = [sys.executable, '-m', 'vllm.entrypoints.openai.api_server', '--model', '/srv/models/tiny-llama',
            '--served-model-name', 'tiny-llama', '--host', '127.0.0.1', '--port', str(port), '--max-num-seqs', '2']
    argv += extra.get('argv', [])
    environment = dict(os.environ, PYTHONPATH=str(STANDIN), LLMOPS_STANDIN_LOAD_S='0.2', LLMOPS_STANDIN_TOK_S='2000',
                       **extra.get('environment', {}))
    process = subprocess.Popen(argv, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    yield process, f'http://127.0.0.1:{port}'
    process.kill()
    process.wait(timeout=10)


def ready(monkeypatch, base_url):
    failed, result = run_module(monkeypatch, wait_for_openai_endpoint,
                                {'base_url': base_url, 'model': 'tiny-llama', 'timeout': 20, 'smoke_test': True})
    assert not failed, result
    return result


def benchmark(monkeypatch, base_url, **options):
    args = {'base_url': base_url, 'model': 'tiny-llama', 'num_prompts': 8, 'concurrency': [1, 4], 'max_tokens': 32,
            'warmup_requests': 1, 'temperature': 0, 'prompt_set': 'code_editing'}
    args.update(options)
    failed, result = run_module(monkeypatch, openai_benchmark, args)
    assert not failed, result
    return {level['max_concurrency']: level for level in result['results']}


def test_the_readiness_wait_sees_vllm_s_endpoints_and_a_smoke_completion(monkeypatch, standin):
    dummy, base_url = standin
    result = ready(monkeypatch, base_url)
    assert result['ready'] and result['models'] == ['tiny-llama']
    assert {'health', 'models', 'smoke'} <= set(result['stages'])


def test_the_benchmark_measures_its_streams_and_the_server_s_own_counters(monkeypatch, standin):
    dummy, base_url = standin
    ready(monkeypatch, base_url)
    levels = benchmark(monkeypatch, base_url)
    assert [level['completed'] for level in levels.values()] == [8, 8]
    assert all(level['failed'] == 0 and level['foreign_requests'] == 0 for level in levels.values())
    # Tokens come from the server's usage; two sequences at a time (--max-num-seqs 2) serve four streams at half
    # the throughput that four slots would.
    assert levels[1]['total_output_tokens'] > 0 and levels[4]['output_throughput'] > levels[1]['output_throughput']
    assert sum(levels[4]['finish_reasons'].values()) == 8
    assert 'spec_decode_acceptance_rate' not in levels[4]


SPECULATIVE = {'argv': ['--speculative-config', '{"method": "ngram", "num_speculative_tokens": 3}']}


@pytest.mark.parametrize('standin', [SPECULATIVE], indirect=True)
def test_a_speculative_command_line_exports_vllm_s_spec_decode_counters(monkeypatch, standin):
    dummy, base_url = standin
    ready(monkeypatch, base_url)
    level = benchmark(monkeypatch, base_url, concurrency=[2])[2]
    assert 0 < level['spec_decode_acceptance_rate'] < 100
    assert len(level['spec_decode_per_position_acceptance_rates']) == 3


def greedy_texts(monkeypatch, base_url, endpoint):
    failed, result = run_module(monkeypatch, answer_check, {'base_url': base_url, 'model': 'tiny-llama',
                                                            'num_prompts': 4, 'max_tokens': 16, 'endpoint': endpoint})
    assert not failed, result
    return [answer['text'] for answer in result['answers']]


@pytest.mark.parametrize('endpoint', ['completions', 'chat'])
def test_greedy_answers_are_the_prompt_s_alone(monkeypatch, standin, endpoint):
    dummy, base_url = standin
    ready(monkeypatch, base_url)
    first = greedy_texts(monkeypatch, base_url, endpoint)
    assert all(first) and first == greedy_texts(monkeypatch, base_url, endpoint)


@pytest.mark.parametrize('standin', [{'environment': {'LLMOPS_STANDIN_HANG': 'after_weights'}}], indirect=True)
def test_a_hang_after_the_weights_logs_them_and_never_listens_nor_stops_on_sigterm(standin):
    process, dummy = standin
    lines = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any('Loading weights took' in line for line in lines):
        lines.append(process.stdout.readline())
    assert any('Loading weights took' in line for line in lines)
    process.send_signal(signal.SIGTERM)
    # As vLLM while it loads: SIGTERM is ignored, and only SIGKILL ends it.
    with pytest.raises(subprocess.TimeoutExpired):
        process.wait(timeout=1.5)
