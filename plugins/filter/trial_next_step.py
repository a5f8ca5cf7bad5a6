# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: trial_next_step
short_description: The next step of a trial, from the steps it has taken
version_added: 1.1.0
author:
  - llmops.vllm maintainers (!UNKNOWN)
description:
  - The one rule of the C(llmops.vllm.vllm_switch) role for the order of a trial's steps and for what a failure
    at each step leads to.
  - For a variant - V(check) it while the baseline serves, V(serve) the baseline, V(benchmark) it, V(begin) (the
    record that the trial is under way, written before anything stops), V(serve) the variant, V(benchmark) it,
    V(decide), then V(keep) or V(roll_back), then V(done).
  - For the baseline - V(serve) it, V(persist) it, V(done).
  - A failure before the baseline stops leads to V(stop), with nothing stopped. A failure while the variant
    serves or is decided on leads to V(roll_back) with outcome V(failed), and then to V(stop).
options:
  _input:
    description:
      - The steps taken so far, oldest first; V([]) before the first.
      - Each is a step as this filter returned it, with C(failed) (bool) and, when it failed, C(msg). A
        V(decide) step carries the decision's C(answer) (C(decision) and C(reason)).
    type: list
    elements: dict
    required: true
  plan:
    description:
      - What the trial is.
      - C(variant) and C(baseline), the names of the variants; the trial of the baseline only serves it.
      - C(benchmark) (default V(true)) - whether the sides are benchmarked.
      - C(decide) (default V(true)) - whether the benchmarks are decided on; V(false) in check mode, where
        the variant is kept as the trial found it.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Ask for the trial's next step
  ansible.builtin.set_fact:
    next_step: "{{ steps_taken | llmops.vllm.trial_next_step({'variant': 'ngram', 'baseline': 'baseline'}) }}"
"""

RETURN = r"""
_value:
  description: The step to take.
  type: dict
  contains:
    step:
      description: V(check), V(serve), V(benchmark), V(begin), V(decide), V(keep), V(roll_back), V(persist), V(stop) or V(done).
      type: str
    side:
      description: For V(serve) and V(benchmark), V(baseline) or V(variant); V(null) otherwise.
      type: str
    outcome:
      description: For V(roll_back), what the trial's record says - V(rolled_back) (the decision) or V(failed).
      type: str
    reason:
      description: For V(keep) and V(roll_back), why; V(null) for a keep that nothing decided.
      type: str
    msg:
      description: For V(stop), what went wrong.
      type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.plugin_utils._trial_steps import TrialStepError, next_step


def trial_next_step(taken, plan):
    try:
        return next_step(taken, plan)
    except TrialStepError as error:
        raise AnsibleFilterError(f'trial_next_step: {error}') from error


class FilterModule:
    def filters(self):
        return {'trial_next_step': trial_next_step}
