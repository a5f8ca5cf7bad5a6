# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: benchmark_workloads
short_description: The checked benchmark workloads of a trial, from one mapping of options or a list of named ones
version_added: 1.1.0
author:
  - llmops.vllm maintainers (!UNKNOWN)
description:
  - Turns C(vllm_switch_benchmark) into a list of workloads, each with its C(name), the
    M(llmops.vllm.openai_benchmark) C(options) to run it with, and its own C(slo) (empty when it has none).
  - A mapping is one workload named V(default); a list gives several, each with a C(name).
  - An unknown option (a typo such as C(concurency)), a missing or repeated name or a bad SLO fails with the
    variable, the place and the rule, so that the play stops before any host changes.
options:
  _input:
    description: C(vllm_switch_benchmark), a mapping of benchmark options or a list of workloads.
    type: raw
    required: true
  default_repeats:
    description: C(repeats) of a workload that sets none.
    type: int
  overrides:
    description: Benchmark options laid over every workload, for example those of an ad-hoc run.
    type: dict
  name:
    description: The variable's name, used in error messages.
    type: str
    default: vllm_switch_benchmark
seealso:
  - module: llmops.vllm.openai_benchmark
  - module: llmops.vllm.trial_decision
"""

EXAMPLES = r"""
- name: Check the workloads before anything changes
  ansible.builtin.set_fact:
    workloads: "{{ vllm_switch_benchmark | llmops.vllm.benchmark_workloads(default_repeats=3) }}"

# [{"name": "code", "endpoint": "chat", "prompt_set": "code_editing"}, {"name": "tools", "prompt_set": "tool_calls",
#   "endpoint": "chat", "slo": {"p99_ttft_ms": 3000}}] | llmops.vllm.benchmark_workloads
#   => [{"name": "code", "options": {"endpoint": "chat", "prompt_set": "code_editing"}, "slo": {}},
#       {"name": "tools", "options": {"endpoint": "chat", "prompt_set": "tool_calls"}, "slo": {"p99_ttft_ms": 3000}}]
"""

RETURN = r"""
_value:
  description: The workloads, in the order given.
  type: list
  elements: dict
  contains:
    name:
      description: The workload's name, V(default) for a single mapping.
      type: str
    options:
      description: The M(llmops.vllm.openai_benchmark) options of the workload.
      type: dict
    slo:
      description: The workload's own SLO, laid over C(vllm_switch_slo) by M(llmops.vllm.trial_decision).
      type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.plugin_utils._decision import DecisionError, check_slo
from ansible_collections.llmops.vllm.plugins.plugin_utils._workloads import WorkloadError
from ansible_collections.llmops.vllm.plugins.plugin_utils._workloads import benchmark_workloads as checked_workloads


def benchmark_workloads(value, default_repeats=None, overrides=None, name='vllm_switch_benchmark'):
    try:
        workloads = checked_workloads(value, where=name, default_repeats=default_repeats, overrides=overrides)
        for workload in workloads:
            check_slo(workload['slo'], f"{name} workload {workload['name']}: slo")
    except (WorkloadError, DecisionError) as error:
        raise AnsibleFilterError(f'benchmark_workloads: {error}') from error
    return workloads


class FilterModule:
    def filters(self):
        return {'benchmark_workloads': benchmark_workloads}
