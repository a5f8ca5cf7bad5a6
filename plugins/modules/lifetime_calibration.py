# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done on the controller by the action plugin of the same name; this file documents it.

from __future__ import annotations

DOCUMENTATION = r"""
module: lifetime_calibration
short_description: Say what a node's baseline lifetimes mean for the trials it can afford
version_added: 1.2.0
author:
  - llmops.vllm maintainers (!UNKNOWN)
description:
  - Takes the lifetimes of the baseline that a calibration measured (warm restarts, each benchmarked) and says, per
    workload and concurrency level, how much the speed of a lifetime varies from one start to the next (the lifetime
    CV) and from run to run inside one (the run CV), how long a warm restart and a cold load take, whether the starts
    fall into two groups (Sarle's bimodality coefficient above 5/9) or drift from start to start.
  - From the lifetime CV and the trial's rule it works out how many lifetimes a side a trial needs before a variant as
    fast as the baseline is kept at O(margin_pct), and how many minutes the node is out of service for it. When that
    exceeds O(max_lifetimes), RV(resolvable) is false and the report says up front that the margin cannot be resolved
    on this node.
  - The level whose lifetimes vary most speaks for the node (RV(lifetime_cv_pct) and the rest); RV(levels) has each.
  - Runs on the controller and changes nothing.
options:
  lifetimes:
    description:
      - The calibration's lifetimes in the order started, each a dict with C(benchmark), that lifetime's
        M(llmops.vllm.openai_benchmark) result (or one per workload), as the C(llmops.vllm.vllm_switch) role keeps them.
    type: list
    elements: dict
    required: true
  warm_restart_seconds:
    description: Seconds that each warm restart of the calibration took, from the stop to a ready server.
    type: list
    elements: float
    default: []
  node_history:
    description:
      - The node's history of trials, as RV(llmops.vllm.trial_record_info#module:history) returns it; the first start of
        each trial's variant there is a cold load.
    type: list
    elements: dict
    default: []
  baseline_name:
    description: The baseline variant, whose starts in the history are warm.
    type: str
    default: baseline
  benchmark_seconds:
    description: How long benchmarking one lifetime took, in seconds.
    type: float
  history_lifetimes:
    description: How many lifetimes of the baseline the node had stored before this calibration.
    type: int
    default: 0
  margin_pct:
    description: The trials' margin (C(vllm_switch_margin_pct)).
    type: float
    default: 8.0
  keep_when:
    description: The trials' rule (C(vllm_switch_keep_when)).
    type: str
    choices: [not_slower, faster]
    default: not_slower
  max_lifetimes:
    description: The most lifetimes a side of a trial (C(vllm_switch_max_lifetimes)).
    type: int
    default: 10
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
seealso:
  - module: llmops.vllm.trial_decision
"""

EXAMPLES = r"""
- name: Say what the calibration found
  llmops.vllm.lifetime_calibration:
    lifetimes: "{{ calibration_lifetimes }}"
    warm_restart_seconds: [41.2, 39.8, 40.5]
    margin_pct: 8
  register: calibration

- name: Show it
  ansible.builtin.debug:
    msg: "{{ calibration.report }}"
"""

RETURN = r"""
lifetime_cv_pct:
  description: How much the speed of a lifetime varies from one start to the next, in percent.
  returned: always
  type: float
  sample: 3.1
run_cv_pct:
  description: How much runs inside one lifetime vary, in percent; V(null) with one run a lifetime.
  returned: always
  type: float
runs_per_lifetime:
  description: The runs a lifetime that pay, 2 where the run CV is at least the lifetime CV, else 1.
  returned: always
  type: int
warm_restart_s:
  description: The median warm restart, in seconds.
  returned: always
  type: float
cold_load_s:
  description: The median cold load on record, in seconds; V(null) before the node's first trial.
  returned: always
  type: float
cold_warm_ratio:
  description: RV(cold_load_s) over RV(warm_restart_s).
  returned: always
  type: float
bimodal:
  description: Whether the starts fall into two groups.
  returned: always
  type: bool
drift:
  description: The straight-line trend from start to start (C(pct_per_start), C(correlation)) and whether it drifts.
  returned: always
  type: dict
lifetimes_needed:
  description: Lifetimes a side after which a variant as fast as the baseline is kept; V(null) past 50.
  returned: always
  type: int
dark_minutes:
  description: Minutes the node is out of service for such a trial.
  returned: always
  type: float
resolvable:
  description: Whether RV(lifetimes_needed) is within O(max_lifetimes).
  returned: always
  type: bool
levels:
  description: The same figures for every workload and level, each naming its C(workload) and C(max_concurrency).
  returned: always
  type: list
  elements: dict
baseline_lifetimes:
  description:
    - The calibration's lifetimes as the node's history keeps them (as RV(llmops.vllm.trial_decision#module:baseline_lifetimes)),
      for later trials to count.
  returned: always
  type: list
  elements: dict
report:
  description: What an operator reads, line by line.
  returned: always
  type: list
  elements: str
"""
