# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: trial_identity
short_description: One hash over everything that decides what a variant serves, and which part of it changed
version_added: 1.1.0
author:
  - llmops.vllm maintainers (!UNKNOWN)
description:
  - Hashes the parts that decide what a variant serves, so that a trial is identified by all of them and a
    change to any one re-opens it.
  - The parts are C(unit) and C(environment) (the checksums of the unit and environment files), C(vllm_version),
    C(venv) and C(model) (both read from the command line the unit runs), C(model_revision) (the C(revision)
    serve argument), C(draft_model) and C(draft_revision) (from the speculative config). A part that is
    unknown is a value of its own, so that an unpinned draft and a pinned one are different trials.
  - Secrets are not a part; they live in a file of their own that is not hashed.
  - With O(recorded), the identity of an earlier trial, RV(_value.changed) names the parts that differ.
options:
  _input:
    description: One variant, as P(llmops.vllm.variant_specs#filter) returns each.
    type: dict
    required: true
  unit:
    description: The SHA-256 checksum of the variant's unit file; V(null) when it is not installed.
    type: str
  environment:
    description: The SHA-256 checksum of the variant's environment file; V(null) when there is none.
    type: str
  vllm_version:
    description: The vLLM version the variant runs when its spec does not name one.
    type: str
  recorded:
    description: The identity an earlier trial recorded, as this filter returned it; V(null) when there is none.
    type: dict
seealso:
  - module: llmops.vllm.trial_decision
"""

EXAMPLES = r"""
- name: Identify the trial of the target
  ansible.builtin.set_fact:
    trial_identity: >-
      {{ target_spec | llmops.vllm.trial_identity(unit=unit_file.stat.checksum, environment=env_file.stat.checksum,
                                                  vllm_version=vllm_version, recorded=trial_record.identity) }}
"""

RETURN = r"""
_value:
  description: The identity.
  type: dict
  contains:
    sha256:
      description: The hash over every part.
      type: str
    short:
      description: The first 12 hexadecimal digits of RV(_value.sha256), as reports show it.
      type: str
    parts:
      description: Every part, as text or V(null).
      type: dict
    changed:
      description: The parts that differ from O(recorded); empty without one.
      type: list
      elements: str
      sample: [environment, vllm_version]
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.plugin_utils._trial_identity import TrialIdentityError
from ansible_collections.llmops.vllm.plugins.plugin_utils._trial_identity import parts_of_spec
from ansible_collections.llmops.vllm.plugins.plugin_utils._trial_identity import trial_identity as identify


def trial_identity(spec, unit=None, environment=None, vllm_version=None, recorded=None):
    try:
        return identify(parts_of_spec(spec, unit, environment, vllm_version), recorded)
    except TrialIdentityError as error:
        raise AnsibleFilterError(f'trial_identity: {error}') from error


class FilterModule:
    def filters(self):
        return {'trial_identity': trial_identity}
