#!/usr/bin/python
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: trial_record_info
short_description: Read a node's trial records and its history of trials
version_added: 1.2.0
description:
  - Reads the latest record of every variant of one model, C(<path>/<variant>.json), and the node's append-only
    history, C(<path>/history.jsonl), as M(llmops.vllm.trial_record) writes them.
  - The history is the source of what a node has learnt. M(llmops.vllm.trial_decision) takes it as
    O(llmops.vllm.trial_decision#module:node_history), so that every controller decides alike on the same node.
  - A history line that is not a JSON object (the last line of a writer that was killed) is skipped and counted in
    RV(skipped_lines); a record file that cannot be read is named in RV(unreadable_records).
author:
  - llmops.vllm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: The module only reads.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  path:
    description: The directory of one model's records, for example C(/var/lib/vllm-switch/<model>). A missing directory has
      no records and an empty history.
    type: path
    required: true
  history:
    description: Whether to read the history too, not only the latest records.
    type: bool
    default: true
seealso:
  - module: llmops.vllm.trial_record
  - module: llmops.vllm.trial_decision
"""

EXAMPLES = r"""
- name: Read the trials of the model
  llmops.vllm.trial_record_info:
    path: /var/lib/vllm-switch/kimi-k2.5
  register: trials

- name: Say how the last n-gram trial ended
  ansible.builtin.debug:
    msg: "{{ trials.records.ngram.outcome | default('never tried') }}"
"""

RETURN = r"""
records:
  description: The latest record of each variant, by variant name.
  returned: always
  type: dict
  sample: {"ngram": {"variant": "ngram", "outcome": "rolled_back", "reason": "slower at concurrency 8"}}
history:
  description: Every entry of the history, oldest first; empty when O(history=false).
  returned: always
  type: list
  elements: dict
skipped_lines:
  description: History lines that were not a JSON object and were skipped.
  returned: always
  type: int
unreadable_records:
  description: Record files that could not be read as a record.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmops.vllm.plugins.module_utils._trial_records import (
    history_path,
    read_history,
    read_records,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(path=dict(type='path', required=True), history=dict(type='bool', default=True)),
        supports_check_mode=True,
    )
    directory = module.params['path']
    try:
        records, unreadable = read_records(directory)
        history, skipped = read_history(history_path(directory)) if module.params['history'] else ([], 0)
    except OSError as exc:
        module.fail_json(msg='could not read the trial records in %s: %s' % (directory, exc))
    if skipped:
        module.warn('%d line(s) of %s are not records and were skipped' % (skipped, history_path(directory)))
    if unreadable:
        module.warn('could not read the record file(s) %s in %s' % (', '.join(unreadable), directory))
    module.exit_json(changed=False, records=records, history=history, skipped_lines=skipped,
                     unreadable_records=unreadable)


if __name__ == '__main__':
    main()
