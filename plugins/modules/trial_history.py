#!/usr/bin/python
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: trial_history
short_description: Append one entry to a node's append-only history of trials, switches and rollbacks
version_added: 1.1.0
description:
  - Appends O(entry) as one JSON line to O(path), and never rewrites what is there, so that the history of what
    was tried on a node, by whom and with which outcome survives every later trial.
  - The line is written with one C(write) to a file opened for appending and flushed to disk before the module
    returns; a run killed while writing leaves at most one unterminated last line, which readers skip.
author:
  - llmops.vllm maintainers (!UNKNOWN)
deprecated:
  removed_in: 2.0.0
  why: M(llmops.vllm.trial_record) is the one writer of the node's records and history.
  alternative: Use M(llmops.vllm.trial_record) with O(llmops.vllm.trial_record#module:latest=false).
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: In check mode nothing is written; the entry is returned as it would be.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  path:
    description: The history file, created with mode C(0644) when missing.
    type: path
    required: true
  entry:
    description:
      - The entry. It must hold C(variant) and C(outcome); C(recorded_at), an ISO 8601 time with its time zone,
        is added when missing.
    type: dict
    required: true
seealso:
  - module: llmops.vllm.trial_record
  - module: llmops.vllm.trial_record_info
  - module: llmops.vllm.trial_decision
"""

EXAMPLES = r"""
- name: Keep the trial in the node's history
  llmops.vllm.trial_history:
    path: /var/lib/vllm-switch/kimi-k2.5/history.jsonl
    entry:
      variant: ngram
      outcome: rolled_back
      reason: slower at concurrency 8
      user: ops
      controller: bastion.example.com
      run_id: 5b0e9d3c
"""

RETURN = r"""
entry:
  description: The entry as it was written.
  returned: always
  type: dict
path:
  description: The history file.
  returned: always
  type: str
entries:
  description: How many entries the history holds now.
  returned: always
  type: int
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmops.vllm.plugins.module_utils._trial_records import (
    append_to_history,
    count_entries,
    missing_keys,
    stamped,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(path=dict(type='path', required=True), entry=dict(type='dict', required=True)),
        supports_check_mode=True,
    )
    path = module.params['path']
    entry = dict(module.params['entry'])
    missing = missing_keys(entry)
    if missing:
        module.fail_json(msg='entry: must hold %s' % ', '.join(missing), path=path)
    entry = stamped(entry)
    if module.check_mode:
        module.exit_json(changed=True, entry=entry, path=path, entries=count_entries(path) + 1)
    try:
        append_to_history(path, entry)
    except OSError as exc:
        module.fail_json(msg='could not append to %s: %s' % (path, exc), path=path)
    module.exit_json(changed=True, entry=entry, path=path, entries=count_entries(path))


if __name__ == '__main__':
    main()
