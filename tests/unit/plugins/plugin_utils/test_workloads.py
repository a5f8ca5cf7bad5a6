# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import re

import pytest

from ansible_collections.llmops.vllm.plugins.plugin_utils._workloads import (
    BENCHMARK_OPTIONS,
    WorkloadError,
    benchmark_workloads,
    workload_results,
)


def test_one_mapping_is_the_default_workload_with_the_default_repeats():
    assert benchmark_workloads({'prompt_set': 'code_editing', 'concurrency': [4], 'seed': None},
                               default_repeats=3) == [
        {'name': 'default', 'options': {'prompt_set': 'code_editing', 'concurrency': [4], 'repeats': 3}, 'slo': {}}]
    assert benchmark_workloads({}) == [{'name': 'default', 'options': {}, 'slo': {}}]
    assert benchmark_workloads(None, default_repeats=5) == [{'name': 'default', 'options': {'repeats': 5}, 'slo': {}}]


def test_a_list_gives_named_workloads_in_order_with_their_own_slo_and_overrides():
    workloads = benchmark_workloads(
        [{'name': 'code', 'endpoint': 'chat', 'prompt_set': 'code_editing', 'repeats': 5},
         {'name': 'tools', 'endpoint': 'chat', 'prompt_set': 'tool_calls', 'slo': {'p99_ttft_ms': 3000}}],
        default_repeats=3, overrides={'num_prompts': 8})

    assert workloads == [
        {'name': 'code', 'options': {'endpoint': 'chat', 'prompt_set': 'code_editing', 'repeats': 5, 'num_prompts': 8},
         'slo': {}},
        {'name': 'tools', 'options': {'endpoint': 'chat', 'prompt_set': 'tool_calls', 'num_prompts': 8, 'repeats': 3},
         'slo': {'p99_ttft_ms': 3000}},
    ]


@pytest.mark.parametrize('value, message', [
    ({'concurency': [8]}, 'vllm_switch_benchmark.concurency: unknown option; use one of name, slo, endpoint'),
    ([{'name': 'a'}, {'prompt_set': 'x'}], 'vllm_switch_benchmark[1].name must name the workload'),
    ([{'name': 'a'}, {'name': 'a'}], "vllm_switch_benchmark[1].name: 'a' names two workloads"),
    ([{'name': 'has space'}], 'vllm_switch_benchmark[0].name must name the workload'),
    ([], 'vllm_switch_benchmark lists no workload'),
    ('code_editing', 'must be a mapping of benchmark options or a list of workloads, got str'),
    ([['prompt_set']], 'vllm_switch_benchmark[0] must be a mapping of benchmark options, got list'),
    ({'slo': 5}, 'vllm_switch_benchmark.slo must be a mapping of latency limits, got int'),
])
def test_bad_workloads_are_refused_naming_the_place_and_rule(value, message):
    with pytest.raises(WorkloadError, match=re.escape(message)):
        benchmark_workloads(value)


def test_an_unknown_override_is_refused():
    with pytest.raises(WorkloadError, match='num_promts: unknown benchmark option'):
        benchmark_workloads({}, overrides={'num_promts': 3})


def test_every_option_of_the_benchmark_module_may_be_set():
    from ansible_collections.llmops.vllm.plugins.modules import openai_benchmark

    documented = set(re.findall(r'^  ([a-z_]+):\n    description:', openai_benchmark.DOCUMENTATION, re.MULTILINE))
    # stop_when_slower is the trial's, built from its baseline's runs, not a workload's; progress_file is the run's.
    deployment = {'base_url', 'model', 'api_key', 'metrics_url', 'labels', 'stop_when_slower', 'progress_file'}
    assert set(BENCHMARK_OPTIONS) == documented - deployment


def test_results_are_found_by_workload_label_in_every_registered_shape():
    code = {'labels': {'workload': 'code'}, 'results': [{'max_concurrency': 4}]}
    tools = {'labels': {'workload': 'tools'}, 'results': [{'max_concurrency': 4}]}
    plain = {'labels': {}, 'results': [{'max_concurrency': 4}]}

    assert list(workload_results({'results': [code, tools], 'msg': 'All items completed'}, 'variant')) == ['code', 'tools']
    assert workload_results([code], 'variant') == {'code': code}
    assert workload_results(plain, 'variant') == {'default': plain}
    with pytest.raises(WorkloadError, match="the baseline has two results of workload 'code'"):
        workload_results([code, code], 'baseline')
    with pytest.raises(WorkloadError, match='the variant holds no benchmark result'):
        workload_results([], 'variant')
