# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The switch_lock action, run by ansible-playbook on this machine: it takes the options its module documents
and refuses the module's own, which only the action sets."""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]
COLLECTIONS = REPO.parents[2] if REPO.parent.parent.name == 'ansible_collections' else REPO / '.cache' / 'collections'

PLAYBOOK = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - llmops.vllm.switch_lock:
        path: "{{ lock }}"
        wait: "5"
        stale_after: 60
      register: taken
    - ansible.builtin.copy:
        content: "{{ taken | to_json }}"
        dest: "{{ lock }}.taken"
        mode: "0600"
    - llmops.vllm.switch_lock:
        path: "{{ lock }}"
        op: remove
      register: refused
      ignore_errors: true
    - ansible.builtin.copy:
        content: "{{ refused | to_json }}"
        dest: "{{ lock }}.refused"
        mode: "0600"
    - llmops.vllm.switch_lock:
        path: "{{ lock }}"
        state: absent
"""


def test_the_action_takes_the_documented_options_and_refuses_the_modules_own(tmp_path):
    (tmp_path / 'play.yml').write_text(PLAYBOOK, encoding='utf-8')
    env = {key: value for key, value in os.environ.items() if not key.startswith(('ANSIBLE_', 'LLMOPS_VLLM_'))}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS), ANSIBLE_NOCOLOR='1', ANSIBLE_LOCAL_TEMP=str(tmp_path / 'tmp'),
               ANSIBLE_INVENTORY_UNPARSED_WARNING='false', ANSIBLE_LOCALHOST_WARNING='false')
    lock = tmp_path / 'model.lock'
    run = subprocess.run([str(Path(sys.executable).parent / 'ansible-playbook'), 'play.yml', '-e', f'lock={lock}'],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stdout + run.stderr

    taken = json.loads((tmp_path / 'model.lock.taken').read_text(encoding='utf-8'))
    assert (taken['changed'], taken['verdict']) == (True, 'free')
    refused = json.loads((tmp_path / 'model.lock.refused').read_text(encoding='utf-8'))
    assert refused['failed'] and re.search(r'Unsupported parameters .*\bop\b', refused['msg']), refused['msg']
    assert not lock.exists()
