# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.filter.benchmark_time_limit import benchmark_time_limit


def test_options_left_out_take_the_modules_defaults():
    # One level of 50 prompts at concurrency 1, one warm-up request, a 600 s timeout, two readings.
    assert benchmark_time_limit({}) == 2 * (600 + 50 * 600 + 2 * (2 * 600 + 10)) + 120


def test_the_limit_follows_the_timeout_and_the_requests():
    short = benchmark_time_limit({'concurrency': [1, 8], 'num_prompts': 48, 'repeats': 6, 'timeout': 60})
    assert short == 2 * (60 + 6 * (48 * 60 + 6 * 60) + 2 * 2 * (2 * 60 + 10)) + 120
    assert benchmark_time_limit({'concurrency': [1, 8], 'num_prompts': 48, 'repeats': 6, 'timeout': 120}) > short


def test_a_request_rate_adds_the_time_the_arrivals_are_spread_over():
    assert (benchmark_time_limit({'request_rate': 0.5, 'burstiness': None})
            - benchmark_time_limit({})) == 2 * 100


@pytest.mark.parametrize('value', [None, [1], 'fast'])
def test_anything_but_a_mapping_is_refused(value):
    with pytest.raises(AnsibleFilterError, match='expects the benchmark options as a mapping'):
        benchmark_time_limit(value)


def test_an_unreadable_option_is_refused():
    with pytest.raises(AnsibleFilterError, match='the options cannot be read'):
        benchmark_time_limit({'concurrency': ['many']})
