# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: stop_when_slower
short_description: The stop_when_slower option of openai_benchmark, from the baseline's benchmark
version_added: 1.1.0
author:
  - llmops.vllm maintainers (!UNKNOWN)
description:
  - Takes the baseline's benchmark of a trial and gives the O(llmops.vllm.openai_benchmark#module:stop_when_slower)
    option for the variant's benchmark of one workload, so that the variant's benchmark stops as soon as a
    sequential test shows it losing against these runs.
  - C(baseline_runs) maps each concurrency level of the workload to the output throughput of each of the baseline's
    runs there (C(output_throughput_repeats), or the level's C(output_throughput) when it ran once), the same runs
    P(llmops.vllm.trial_decision#module) compares with.
  - The llmops.vllm.vllm_switch role sets it for the target's benchmark when C(vllm_switch_early_stop) is on.
options:
  _input:
    description:
      - The baseline's benchmark, as registered from M(llmops.vllm.openai_benchmark), its list of results, or what a
        task looped over workloads registers.
    type: raw
    required: true
  workload:
    description:
      - The workload (the label C(workload) of a result) whose levels are taken; V(default) for an unlabelled one.
    type: str
    default: default
  keep_when:
    description: The verdict's rule, as P(llmops.vllm.trial_decision#module) takes it.
    type: str
    choices: [not_slower, faster]
    default: not_slower
  margin_pct:
    description: The verdict's margin in percent.
    type: float
    default: 8.0
seealso:
  - module: llmops.vllm.openai_benchmark
  - module: llmops.vllm.trial_decision
"""

EXAMPLES = r"""
- name: Benchmark the variant, stopping once it is shown more than 5% slower than the baseline
  llmops.vllm.openai_benchmark:
    base_url: http://127.0.0.1:8000
    model: kimi-k2.5
    concurrency: [1, 8]
    repeats: 5
    stop_when_slower: "{{ baseline_bench | llmops.vllm.stop_when_slower(keep_when='not_slower', margin_pct=5) }}"
  delegate_to: localhost
  register: variant_bench

# {"results": [{"max_concurrency": 8, "output_throughput_repeats": [610.2, 598.7, 604.9]}]}
#   | llmops.vllm.stop_when_slower(margin_pct=5)
#   => {"baseline_runs": {8: [610.2, 598.7, 604.9]}, "keep_when": "not_slower", "margin_pct": 5.0}
"""

RETURN = r"""
_value:
  description: The O(llmops.vllm.openai_benchmark#module:stop_when_slower) option.
  type: dict
  contains:
    baseline_runs:
      description: Output tokens/s of each of the baseline's runs, by concurrency level.
      type: dict
    keep_when:
      description: O(keep_when).
      type: str
    margin_pct:
      description: O(margin_pct).
      type: float
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.plugin_utils._decision import (
    DEFAULT_MARGIN_PCT,
    KEEP_WHEN,
    NOT_SLOWER,
    DecisionError,
    runs_of,
)
from ansible_collections.llmops.vllm.plugins.plugin_utils._workloads import (
    DEFAULT_WORKLOAD,
    WorkloadError,
    workload_results,
)


def stop_when_slower(baseline, workload=DEFAULT_WORKLOAD, keep_when=NOT_SLOWER, margin_pct=DEFAULT_MARGIN_PCT):
    if keep_when not in KEEP_WHEN:
        raise AnsibleFilterError(f'stop_when_slower: keep_when must be one of {", ".join(KEEP_WHEN)}, got {keep_when!r}')
    try:
        margin = float(margin_pct)
    except (TypeError, ValueError) as error:
        raise AnsibleFilterError(f'stop_when_slower: margin_pct must be a number, got {margin_pct!r}') from error
    try:
        results = workload_results(baseline, 'baseline')
    except WorkloadError as error:
        raise AnsibleFilterError(f'stop_when_slower: {error}') from error
    if workload not in results:
        raise AnsibleFilterError(f'stop_when_slower: the baseline has no result of workload {workload!r}')
    try:
        runs = {level['max_concurrency']: runs_of(level) for level in results[workload].get('results') or []}
    except (DecisionError, KeyError, TypeError) as error:
        raise AnsibleFilterError(f'stop_when_slower: a level of the baseline cannot be read: {error}') from error
    return {'baseline_runs': runs, 'keep_when': keep_when, 'margin_pct': margin}


class FilterModule:
    def filters(self):
        return {'stop_when_slower': stop_when_slower}
