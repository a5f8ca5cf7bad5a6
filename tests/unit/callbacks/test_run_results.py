# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The molecule checks read a nested run's returned values through tests/callbacks/run_results.py: it must report them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CALLBACKS = Path(__file__).resolve().parents[2] / "callbacks"

PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.set_fact:
        wanted: {outcome: first}
        unwanted: 1
    - ansible.builtin.set_fact:
        wanted: {outcome: last, reopened: [environment]}
    - ansible.builtin.set_stats:
        data: {vllm_switch: {outcome: rolled_back}}
        per_host: true
    - ansible.builtin.fail:
        msg: ignored
      ignore_errors: true
    - ansible.builtin.fail:
        msg: the run fails here
"""


def run(tmp_path, **environment):
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK, encoding="utf-8")
    env = dict(os.environ, ANSIBLE_CALLBACK_PLUGINS=str(CALLBACKS), ANSIBLE_CALLBACKS_ENABLED="run_results",
               ANSIBLE_CONFIG=str(tmp_path / "none.cfg"), **environment)
    ansible_playbook = Path(sys.executable).parent / "ansible-playbook"
    return subprocess.run([str(ansible_playbook), "-i", "localhost,", "-c", "local", str(playbook)], env=env,
                          capture_output=True, text=True, check=False, timeout=120)


def test_it_writes_the_stats_the_unignored_failure_and_the_named_facts_last_values(tmp_path):
    results = tmp_path / "results.json"
    run_ = run(tmp_path, LLMOPS_VLLM_RUN_RESULTS=str(results), LLMOPS_VLLM_RUN_RESULTS_FACTS="wanted,never_set")
    assert run_.returncode == 2, run_.stdout + run_.stderr
    written = json.loads(results.read_text(encoding="utf-8"))
    assert written["custom_stats"]["localhost"] == {"vllm_switch": {"outcome": "rolled_back"}}
    assert written["failed"] == [{"host": "localhost", "action": "ansible.builtin.fail", "msg": "the run fails here"}]
    assert written["facts"] == {"localhost": {"wanted": {"outcome": "last", "reopened": ["environment"]}}}


def test_without_a_file_named_it_writes_nothing(tmp_path):
    run_ = run(tmp_path)
    assert run_.returncode == 2, run_.stdout + run_.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["play.yml"]
