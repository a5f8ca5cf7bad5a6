# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.filter.stop_when_slower import stop_when_slower


def looped(*workloads):
    """What a task looped over workloads registers: one openai_benchmark result per item."""
    return {'changed': False, 'results': [
        {'item': {'name': name}, 'labels': {'workload': name}, 'results': levels} for name, levels in workloads]}


def test_the_workloads_levels_become_baseline_runs():
    baseline = looped(
        ('chat', [{'max_concurrency': 1, 'output_throughput': 50.0, 'output_throughput_repeats': [49.0, 51.0]}]),
        ('code', [{'max_concurrency': 1, 'output_throughput': 70.0, 'output_throughput_repeats': [69.0, 71.0, 70.0]},
                  {'max_concurrency': 8, 'output_throughput': 300.0}]),
    )

    option = stop_when_slower(baseline, 'code', keep_when='faster', margin_pct=5)

    assert option == {'baseline_runs': {1: [69.0, 71.0, 70.0], 8: [300.0]}, 'keep_when': 'faster', 'margin_pct': 5.0}


def test_a_single_unlabelled_result_is_the_default_workload():
    option = stop_when_slower({'results': [{'max_concurrency': 4, 'output_throughput_repeats': [10.0, 11.0]}]})
    assert option == {'baseline_runs': {4: [10.0, 11.0]}, 'keep_when': 'not_slower', 'margin_pct': 8.0}


@pytest.mark.parametrize('baseline, kwargs, message', [
    (looped(('chat', [])), {'workload': 'code'}, "the baseline has no result of workload 'code'"),
    ({'results': []}, {'keep_when': 'quicker'}, 'keep_when must be one of not_slower, faster'),
    ({'results': [{'max_concurrency': 4}]}, {}, 'a benchmark level has no output_throughput'),
    ('none', {}, 'the baseline must be an openai_benchmark result'),
])
def test_what_cannot_be_read_fails_naming_it(baseline, kwargs, message):
    with pytest.raises(AnsibleFilterError, match=message):
        stop_when_slower(baseline, **kwargs)
