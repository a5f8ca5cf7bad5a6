# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done on the controller by the action plugin of the same name; this file documents it.

from __future__ import annotations

DOCUMENTATION = r"""
module: trial_advance
short_description: Move a switch of a vLLM node, a trial above all, on by one step
version_added: 1.2.0
author:
  - llmops.vllm maintainers (!UNKNOWN)
description:
  - A switch of a node (a trial of a variant against the baseline, an operator's rollback, a confirmation, a
    calibration) is one state document. This action starts it (O(new)), folds the result of the step it named into
    it (O(result), or O(failed_result) when the step failed) and names the next step, or says how the switch ends
    (O(close)).
  - Every decision of a trial is made here, in Python, and nowhere else - the order of the steps, which server
    lifetimes are measured, when a look after a pair of lifetimes keeps or rolls back the variant, what a failure
    at each step leads to (nothing stopped yet, or a rollback to the baseline), and the records the node and the
    controller's results store keep. The C(llmops.vllm.vllm_switch) role takes the steps it names and does their
    side effects.
  - Runs on the controller and changes nothing.
options:
  new:
    description:
      - The settings of a switch that has not begun, as RV(llmops.vllm.trial_settings#module:trial) gives them.
      - Exactly one of O(new), O(result), O(failed_result) and O(close) is given.
    type: dict
  state:
    description: The state that the last call returned (RV(state)); required with O(result), O(failed_result) and O(close).
    type: dict
  result:
    description:
      - What the step that RV(next) named found, step by step as the role's step files give it (for example
        C(benchmark), one workload's M(llmops.vllm.openai_benchmark) result, for a V(benchmark) step).
    type: dict
  failed_result:
    description:
      - What the failed task of the step registered (C(ansible_failed_result)); its message and what it says of why
        (the fatal journal line, a stall, the GPUs' holders) go into the trial's record.
    type: dict
  unit_states:
    description:
      - With O(failed_result), what C(systemctl is-active) says of each of the model's units after the failure, in the
        order of the state's C(units), which tells where the rollback starts from.
    type: list
    elements: str
  close:
    description: Say how the switch ends, however it ended - RV(closing).
    type: bool
    default: false
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: The state knows whether the run is in check mode from its settings; nothing is changed either way.
  diff_mode:
    support: none
  platform:
    platforms: all
notes:
  - The steps and what each result holds are described in C(plugins/plugin_utils/_trial.py); the whole of a trial
    is replayed from canned step results in C(tests/unit/plugins/plugin_utils/test_trial_replay.py).
"""

EXAMPLES = r"""
- name: Plan the switch
  llmops.vllm.trial_advance:
    new: "{{ checked.trial }}"
  register: switch

- name: Hand the benchmark of one workload to the trial
  llmops.vllm.trial_advance:
    state: "{{ switch.state }}"
    result:
      benchmark: "{{ benchmarked }}"
  register: switch

- name: Work out how the switch ends
  llmops.vllm.trial_advance:
    state: "{{ switch.state }}"
    close: true
  register: closing
"""

RETURN = r"""
state:
  description:
    - The switch's state. Its C(next) names the step to take (C(step), C(side) and what the step needs, for example
      C(unit), C(restart), C(workload), C(labels), C(record)); V(done) or V(stop) (with C(msg)) end the switch.
    - C(report) holds what the operator reads after this step, C(store) what the controller's results store takes
      (C(benchmark), C(decision) or C(history)), C(decision) the trial's decision once made.
  returned: unless O(close)
  type: dict
next:
  description: The same as C(state.next).
  returned: unless O(close)
  type: dict
  sample: {"step": "serve", "side": "variant", "unit": "vllm-kimi-k2.5-ngram.service", "restart": false}
closing:
  description:
    - How the switch ends - C(in_service) (the node was taken out of service and goes back), C(notices) (what the
      notification hook is told), C(lines) (the dark window against its plan), C(outcome) (what the play gets as
      C(vllm_switch_outcome)), C(stats) (for C(set_stats)), C(textfile) (node_exporter's metrics, or null when this
      run did not hold the lock) and C(fail) (the message of a rollback that C(vllm_switch_fail_on_rollback) fails).
  returned: with O(close)
  type: dict
"""
