# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: benchmark_timing
short_description: How long each workload and level of a benchmark took, for the next trial's plan
version_added: 1.1.0
author:
  - llmops.vllm maintainers (!UNKNOWN)
description:
  - Takes a benchmark (what a task looping M(llmops.vllm.openai_benchmark) over workloads registers, one result, or a
    list of them) and gives one row per workload and concurrency level with the requests completed, their seconds
    and their output tokens.
  - The llmops.vllm.vllm_switch role keeps the baseline's rows in the trial's record, where
    P(llmops.vllm.dark_window_plan#filter) reads the node's speed.
options:
  _input:
    description: The benchmark.
    type: raw
    required: true
seealso:
  - module: llmops.vllm.openai_benchmark
"""

EXAMPLES = r"""
# {"results": [{"labels": {"workload": "chat"}, "results": [{"max_concurrency": 8, "completed": 48,
#                                                             "duration": 611.2, "total_output_tokens": 40960}]}]}
#   | llmops.vllm.benchmark_timing
#   => [{"workload": "chat", "concurrency": 8, "requests": 48, "seconds": 611.2, "output_tokens": 40960}]
- name: Keep how long the baseline's benchmark took
  ansible.builtin.set_fact:
    timing: "{{ baseline_bench | llmops.vllm.benchmark_timing }}"
"""

RETURN = r"""
_value:
  description: One row per workload and level; a level that completed nothing is left out.
  type: list
  elements: dict
  contains:
    workload:
      description: The workload's name.
      type: str
    concurrency:
      description: The level.
      type: int
    requests:
      description: Requests completed, every repeat.
      type: int
    seconds:
      description: Their seconds, every repeat.
      type: float
    output_tokens:
      description: Their output tokens.
      type: int
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.plugin_utils._dark_window import DarkWindowError, benchmark_timing as _timing


def benchmark_timing(benchmark):
    try:
        return _timing(benchmark)
    except DarkWindowError as error:
        raise AnsibleFilterError(f'benchmark_timing: {error}') from error


class FilterModule:
    def filters(self):
        return {'benchmark_timing': benchmark_timing}
