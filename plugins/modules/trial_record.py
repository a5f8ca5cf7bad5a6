#!/usr/bin/python
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: trial_record
short_description: Write a trial's record on the node, as the variant's latest record and as a line of the history
version_added: 1.2.0
description:
  - Writes O(record) as the latest record of its variant, C(<path>/<variant>.json), replaced in one step, and appends it
    to the node's append-only history, C(<path>/history.jsonl), flushed to disk before the module returns.
  - This is the one writer of both. The C(llmops.vllm.vllm_switch) role records every step of a trial with it, and the
    fallback script that systemd runs for a variant failed in service writes through the same code.
  - M(llmops.vllm.trial_record_info) reads both back.
author:
  - llmops.vllm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: In check mode nothing is written; the record is returned as it would be.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  path:
    description: The directory of one model's records, for example C(/var/lib/vllm-switch/<model>). Created when missing.
    type: path
    required: true
  record:
    description:
      - The record. It must hold C(variant), a name of letters, digits, C(_), C(.) and C(-), and C(outcome).
      - C(recorded_at), an ISO 8601 time with its time zone, is added when missing.
    type: dict
    required: true
  latest:
    description:
      - Whether the record also becomes the variant's latest record.
      - V(false) only appends it to the history. The C(llmops.vllm.vllm_switch) role does so when it serves again a
        variant that an earlier trial kept, whose record stays the one that decided it.
    type: bool
    default: true
seealso:
  - module: llmops.vllm.trial_record_info
"""

EXAMPLES = r"""
- name: Record that the n-gram trial was rolled back
  llmops.vllm.trial_record:
    path: /var/lib/vllm-switch/kimi-k2.5
    record:
      variant: ngram
      baseline: baseline
      outcome: rolled_back
      reason: slower at concurrency 8

- name: Add to the history that the kept n-gram serves again, leaving its trial's record as it is
  llmops.vllm.trial_record:
    path: /var/lib/vllm-switch/kimi-k2.5
    record: "{{ kept_record | combine({'reason': 'served again, as kept by its trial'}) }}"
    latest: false
"""

RETURN = r"""
latest:
  description: Whether the record became the variant's latest record (O(latest)).
  returned: always
  type: bool
record:
  description: The record as it was written.
  returned: always
  type: dict
path:
  description: The variant's record file.
  returned: always
  type: str
  sample: /var/lib/vllm-switch/kimi-k2.5/ngram.json
entries:
  description: How many entries the history holds now.
  returned: always
  type: int
"""

import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmops.vllm.plugins.module_utils._trial_records import (
    append_to_history,
    count_entries,
    history_path,
    missing_keys,
    record_path,
    stamped,
    write_trial_record,
)

# A variant name becomes a file name: nothing that could leave the directory or hide the file.
_VARIANT = re.compile(r'^[A-Za-z0-9_][A-Za-z0-9_.-]*$')


def main():
    module = AnsibleModule(
        argument_spec=dict(path=dict(type='path', required=True), record=dict(type='dict', required=True),
                           latest=dict(type='bool', default=True)),
        supports_check_mode=True,
    )
    directory = module.params['path']
    record = dict(module.params['record'])
    missing = missing_keys(record)
    if missing:
        module.fail_json(msg='record: must hold %s' % ', '.join(missing))
    if not _VARIANT.match(str(record['variant'])):
        module.fail_json(msg='record.variant: %r is not a variant name (letters, digits, _, . and -)'
                         % (record['variant'],))
    record = stamped(record)
    latest = module.params['latest']
    path = record_path(directory, record['variant'])
    history = history_path(directory)
    if module.check_mode:
        module.exit_json(changed=True, record=record, path=path, latest=latest, entries=count_entries(history) + 1)
    try:
        if not os.path.isdir(directory):
            os.makedirs(directory, mode=0o755)
        if latest:
            write_trial_record(directory, record)
        else:
            append_to_history(history, record)
    except OSError as exc:
        module.fail_json(msg='could not write the record of %s in %s: %s' % (record['variant'], directory, exc))
    module.exit_json(changed=True, record=record, path=path, latest=latest, entries=count_entries(history))


if __name__ == '__main__':
    main()
