# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: dark_window_plan
short_description: How long a trial will keep the node out of service, before anything stops
version_added: 1.1.0
author:
  - llmops.vllm maintainers (!UNKNOWN)
description:
  - Takes the node's trial records (each variant's latest, as M(llmops.vllm.trial_record_info) returns them) and plans
    the node's dark window for a trial of O(variant) against O(baseline), from the baseline's first benchmark until a
    side serves again.
  - Starts come from the starts that earlier trials timed; a variant's first start in a trial is cold, every other one
    warm. Benchmarks come from the seconds a request took at each workload's concurrency (the records'
    C(benchmark_timing), see P(llmops.vllm.benchmark_timing#filter)). A figure the node has not measured is assumed
    from O(expected_load_s) or O(stream_tok_s), and the answer lists it under RV(_value.assumed).
  - The llmops.vllm.vllm_switch role prints the plan before the baseline stops and passes it to the notification hook.
options:
  _input:
    description: The node's records, by variant.
    type: dict
    required: true
  baseline:
    description: The baseline's variant name.
    type: str
    required: true
  variant:
    description: The variant under trial.
    type: str
    required: true
  workloads:
    description: The trial's workloads, as P(llmops.vllm.benchmark_workloads#filter) returns them.
    type: list
    elements: dict
    required: true
  max_lifetimes:
    description: The most lifetimes a side (V(0) for a trial of one lifetime a side).
    type: int
    default: 0
  expected_load_s:
    description: Seconds a start is assumed to take where the node has timed none.
    type: float
  stream_tok_s:
    description: Output tokens a second of one stream, assumed where the node measured no speed for a workload.
    type: float
  expected_warm_restart_s:
    description: Seconds a warm restart is assumed to take where the node has timed none; unset, as long as a load.
    type: float
    version_added: 1.2.0
seealso:
  - module: llmops.vllm.trial_record_info
"""

EXAMPLES = r"""
- name: Plan the node's dark window
  ansible.builtin.set_fact:
    dark_plan: >-
      {{ recorded.records | llmops.vllm.dark_window_plan(baseline='baseline', variant='ngram', workloads=workloads,
                                                        max_lifetimes=10, expected_load_s=1800) }}

- name: Say it
  ansible.builtin.debug:
    msg: "{{ dark_plan.lines }}"
"""

RETURN = r"""
_value:
  description: The plan.
  type: dict
  contains:
    least_minutes:
      description: Minutes out of service when the variant is kept at the first look (the shortest trial); null when a figure is missing.
      type: float
    most_minutes:
      description: Minutes out of service at the most lifetimes a side and a rollback (the longest); null when a figure is missing.
      type: float
    lifetimes:
      description: The fewest and most lifetimes a side the plan counts (C(fewest), C(most)).
      type: dict
    pair_minutes:
      description: Minutes that each pair of lifetimes after the fewest adds; null for one lifetime a side.
      type: float
    warm_restart_s:
      description: Seconds of a warm restart.
      type: float
    cold_load_s:
      description: Seconds of the variant's cold load.
      type: float
    stop_s:
      description: Seconds of a stop.
      type: float
    benchmark_s:
      description: Seconds of one side's benchmark, every workload and level.
      type: float
    measured:
      description: The figures taken from the node's records.
      type: list
      elements: str
    assumed:
      description: The figures assumed.
      type: list
      elements: str
    lines:
      description: What the operator reads.
      type: list
      elements: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.plugin_utils._dark_window import DarkWindowError, plan


def dark_window_plan(records, baseline, variant, workloads, max_lifetimes=0, expected_load_s=None, stream_tok_s=None,
                     expected_warm_restart_s=None):
    try:
        return plan(records, baseline=baseline, variant=variant, workloads=workloads, max_lifetimes=int(max_lifetimes),
                    expected_load_s=None if expected_load_s in (None, '') else float(expected_load_s),
                    stream_tok_s=None if stream_tok_s in (None, '') else float(stream_tok_s),
                    expected_warm_restart_s=(None if expected_warm_restart_s in (None, '')
                                             else float(expected_warm_restart_s)))
    except (DarkWindowError, TypeError, ValueError) as error:
        raise AnsibleFilterError(f'dark_window_plan: {error}') from error


class FilterModule:
    def filters(self):
        return {'dark_window_plan': dark_window_plan}
