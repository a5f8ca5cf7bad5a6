# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.filter.benchmark_workloads import benchmark_workloads


def test_the_filter_returns_the_checked_workloads():
    assert benchmark_workloads([{'name': 'chat', 'endpoint': 'chat', 'slo': {'p99_ttft_ms': 2000}}],
                               default_repeats=3) == [
        {'name': 'chat', 'options': {'endpoint': 'chat', 'repeats': 3}, 'slo': {'p99_ttft_ms': 2000}}]


@pytest.mark.parametrize('value, message', [
    ({'concurency': [8]}, 'benchmark_workloads: vllm_switch_benchmark.concurency: unknown option'),
    ([{'name': 'chat', 'slo': {'p99_tftt_ms': 5}}],
     'benchmark_workloads: vllm_switch_benchmark workload chat: slo.p99_tftt_ms: unknown key'),
])
def test_the_filter_fails_naming_the_variable(value, message):
    with pytest.raises(AnsibleFilterError, match=message.replace('.', r'\.').replace('[', r'\[')):
        benchmark_workloads(value)
