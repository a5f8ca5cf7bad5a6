# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The filter as plays use it: on registered results, with the errors a play author would see."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]
# ansible-test lays the checkout out as ansible_collections/llmops/vllm; a plain checkout reaches
# itself through .cache/collections (make setup).
COLLECTIONS = REPO.parents[2] if REPO.parent.parent.name == 'ansible_collections' else REPO / '.cache' / 'collections'

PLAYBOOK = """
- name: Judge benchmark results
  hosts: localhost
  gather_facts: false
  vars:
    baseline_run:
      labels: {variant: baseline}
      results:
        - {max_concurrency: 1, output_throughput: 74.0, median_tpot_ms: 13.2, median_ttft_ms: 100.0}
        - {max_concurrency: 4, output_throughput: 200.0, output_throughput_mean: 200.0, output_throughput_ci95: 4.0}
    ngram_run:
      results:
        - {max_concurrency: 1, output_throughput: 60.0, median_tpot_ms: 15.84, median_ttft_ms: 90.0}
    eagle_run:
      results:
        - {max_concurrency: 4, output_throughput: 206.0, output_throughput_mean: 206.0, output_throughput_ci95: 3.0}
  tasks:
    - name: A slower variant, judged on whole module results
      ansible.builtin.assert:
        that:
          - verdict.verdict == 'slower'
          - verdict.delta_pct | round(2) == -18.92
          - verdict.levels | length == 1
          - verdict.levels[0].method == 'noise_band'
          - verdict.levels[0].tpot_delta_pct | round(6) == 20.0
          - verdict.levels[0].ttft_delta_pct | round(6) == -10.0
      vars:
        verdict: "{{ ngram_run | llmops.vllm.benchmark_verdict(baseline_run) }}"

    - name: Confidence intervals decide when both sides have one (6 > sqrt(4^2 + 3^2) = 5)
      ansible.builtin.assert:
        that:
          - verdict.verdict == 'faster'
          - verdict.levels[0].method == 'ci95'
          - verdict.levels[0].threshold_pct | round(6) == 2.5
      vars:
        verdict: "{{ eagle_run.results | llmops.vllm.benchmark_verdict(baseline_run.results) }}"

    - name: The noise band is a parameter
      ansible.builtin.assert:
        that:
          - (level_76 | llmops.vllm.benchmark_verdict(baseline_run.results[0], noise_pct=3)).verdict == 'within_noise'
          - (level_76 | llmops.vllm.benchmark_verdict(baseline_run.results[0], noise_pct=2)).verdict == 'faster'
          - (level_76 | llmops.vllm.benchmark_verdict(baseline_run.results[0])).noise_pct == 8.0
      vars:
        level_76: {max_concurrency: 1, output_throughput: 76.0}

    - name: Results without a shared concurrency level
      ansible.builtin.debug:
        msg: "{{ ngram_run | llmops.vllm.benchmark_verdict({'results': [baseline_run.results[1]]}) }}"
      register: no_shared_level
      ignore_errors: true

    - name: A noise band that is not a number
      ansible.builtin.debug:
        msg: "{{ ngram_run | llmops.vllm.benchmark_verdict(baseline_run, noise_pct='wide') }}"
      register: bad_noise
      ignore_errors: true

    - name: Something that is not a benchmark result
      ansible.builtin.debug:
        msg: "{{ 'fast' | llmops.vllm.benchmark_verdict(baseline_run) }}"
      register: not_a_result
      ignore_errors: true

    - name: Each mistake fails with a message that names it
      ansible.builtin.assert:
        that:
          - no_shared_level is failed
          - >-
            'benchmark_verdict: the variant (max_concurrency [1]) and the baseline (max_concurrency [4])
            share no concurrency level' in no_shared_level.msg
          - bad_noise is failed
          - "\\"benchmark_verdict: noise_pct must be a number, got 'wide'\\" in bad_noise.msg"
          - not_a_result is failed
          - "'benchmark_verdict: the variant must be an openai_benchmark result' in not_a_result.msg"
"""


def test_benchmark_verdict_in_a_play(tmp_path):
    (tmp_path / 'ansible.cfg').write_text(
        f'[defaults]\ncollections_path = {COLLECTIONS}\n', encoding='utf-8')
    (tmp_path / 'play.yml').write_text(PLAYBOOK, encoding='utf-8')
    env = {key: value for key, value in os.environ.items() if not key.startswith('ANSIBLE_')}
    env.update(ANSIBLE_CONFIG=str(tmp_path / 'ansible.cfg'), ANSIBLE_NOCOLOR='1',
               ANSIBLE_LOCAL_TEMP=str(tmp_path / 'tmp'))
    run = subprocess.run([str(Path(sys.executable).parent / 'ansible-playbook'), 'play.yml'], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert 'ok=7' in run.stdout and 'failed=0' in run.stdout and 'ignored=3' in run.stdout
