# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: trial_state
short_description: What a switch does with its target, from the target's trial record and its identity now
version_added: 1.1.0
author:
  - llmops.vllm maintainers (!UNKNOWN)
description:
  - The one rule of the C(llmops.vllm.vllm_switch) role for a target that has a trial record.
  - RV(_value.settled) - a trial of this very target (same unit, nothing in its identity changed) was rolled back,
    failed or fell back in service; it is reported, not repeated, unless O(force).
  - RV(_value.stale) - the target runs, but its unit or identity changed since its trial, so it is tried again.
  - RV(_value.forced) - the target runs and O(force) asks for its trial again, so it is tried again as a stale one is.
  - RV(_value.interrupted) - a trial started and never finished.
  - RV(_value.reopened) - the parts of the identity that changed since a decided trial, to name.
  - RV(_value.serves) - for a settled target that does not run, what serves after the run (O(decided_serves)).
  - RV(_value.action) - what the switch does with the target - V(trial), V(confirm) or V(report).
  - RV(_value.retried) - why the target is tried again.
  - The baseline is never tried against itself; everything is false or empty for it, and it is confirmed when it
    runs and served (its V(trial)) otherwise.
options:
  _input:
    description: The target's trial record, as the role wrote it; V(null) or V({}) when there is none.
    type: dict
    required: true
  identity:
    description: The target's identity now, as P(llmops.vllm.trial_identity#filter) returns it with the record's.
    type: dict
    required: true
  unit_checksum:
    description: The SHA-256 of the target's unit file now.
    type: str
    required: true
  running:
    description: Whether the target's unit runs now.
    type: bool
    required: true
  baseline:
    description: Whether the target is the baseline.
    type: bool
    required: true
  force:
    description:
      - Try the target again even when a settled trial says not to, or when it runs as a trial kept it
        (C(vllm_switch_force)).
    type: bool
    default: false
  decided_serves:
    description:
      - What serves when the target's trial was decided already and the target does not run
        (C(vllm_switch_decided_serves)).
      - V(baseline) puts the baseline back; a trial that kept the target is then not settled, and is made again.
      - V(running) leaves the unit of the model that runs (the baseline starts only when none runs), and a
        trial that kept the target is settled too.
      - V(target) serves the target when its trial kept it, otherwise as V(running).
    type: str
    choices: [baseline, running, target]
    default: baseline
  others_running:
    description: Whether another unit of the model than the target runs now.
    type: bool
    default: false
seealso:
  - plugin: llmops.vllm.trial_identity
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Decide what to do with the target
  ansible.builtin.set_fact:
    state: >-
      {{ trial_record | llmops.vllm.trial_state(identity=identity, unit_checksum=unit_file.stat.checksum,
                                                running=target_unit in active_units, baseline=false) }}
"""

RETURN = r"""
_value:
  description: What to do.
  type: dict
  contains:
    settled:
      description: The trial ended against the target and nothing changed since; do not repeat it.
      type: bool
    stale:
      description: The running target changed since its trial; try it again.
      type: bool
    forced:
      description: The target runs and O(force) asks for its trial again; try it again.
      type: bool
    interrupted:
      description: A trial of the target started and never finished.
      type: bool
    reopened:
      description: The parts of the identity that changed since a decided trial.
      type: list
      elements: str
    serves:
      description: For a settled target that does not run, V(target), V(running) or V(baseline); V(null) otherwise.
      type: str
    action:
      description:
        - V(trial) - try the target against the baseline (for the baseline itself, serve it).
        - V(confirm) - the target runs as its trial left it; confirm that it serves.
        - V(report) - the target's trial was decided and it does not run; report the decision, and serve as
          RV(_value.serves) says.
      type: str
    retried:
      description:
        - Why the target is tried again - V(interrupted) (whether it runs or not), V(stale) or V(forced) (it
          runs), the first that holds.
        - V(null) otherwise.
      type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.plugin_utils._trial_identity import TrialIdentityError
from ansible_collections.llmops.vllm.plugins.plugin_utils._trial_identity import trial_state as decide


def trial_state(record, identity, unit_checksum, running, baseline, force=False, decided_serves='baseline',
                others_running=False):
    try:
        return decide(record, identity, unit_checksum, running=bool(running), baseline=bool(baseline),
                      force=bool(force), decided_serves=decided_serves, others_running=bool(others_running))
    except TrialIdentityError as error:
        raise AnsibleFilterError(f'trial_state: {error}') from error


class FilterModule:
    def filters(self):
        return {'trial_state': trial_state}
