# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The filter as plays use it, and the URLs the role and the benchmark playbook derive from the
production inventory, which binds the server to 0.0.0.0."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[4]
# ansible-test lays the checkout out as ansible_collections/llmops/vllm; a plain checkout reaches
# itself through .cache/collections (make setup).
COLLECTIONS = REPO.parents[2] if REPO.parent.parent.name == 'ansible_collections' else REPO / '.cache' / 'collections'
PRODUCTION_NODE = 'gpu-node-01.example.invalid'
REPORT_MARK = 'BENCHMARK-CLIENT-REPORT '

PLAYBOOK = """
- name: Work out benchmark clients
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Wildcard binds, from the controller and from the node
      ansible.builtin.assert:
        that:
          - >-
            '0.0.0.0' | llmops.vllm.benchmark_base_url(8000, 'gpu-node-01', node_address='10.0.0.7')
            == {'base_url': 'http://10.0.0.7:8000', 'delegate_to': 'localhost', 'client': 'controller'}
          - >-
            '::' | llmops.vllm.benchmark_base_url('8000', 'gpu-node-01', client='node')
            == {'base_url': 'http://[::1]:8000', 'delegate_to': 'gpu-node-01', 'client': 'node'}
          - >-
            ('::' | llmops.vllm.benchmark_base_url(8000, 'gpu-node-01', node_address='2001:db8::7')).base_url
            == 'http://[2001:db8::7]:8000'
          - >-
            ('127.0.0.1' | llmops.vllm.benchmark_base_url(8000, 'gpu-node-01', connection='local')).base_url
            == 'http://127.0.0.1:8000'
          - >-
            ('0.0.0.0' | llmops.vllm.benchmark_base_url(port=8000, node='gpu-node-01', controller_host='loadgen'))
            .delegate_to == 'loadgen'

    - name: A loopback server seen from a remote controller
      ansible.builtin.debug:
        msg: "{{ '127.0.0.1' | llmops.vllm.benchmark_base_url(8000, 'gpu-node-01', node_address='10.0.0.7') }}"
      register: loopback
      ignore_errors: true

    - name: A client that is neither the controller nor the node
      ansible.builtin.debug:
        msg: "{{ '0.0.0.0' | llmops.vllm.benchmark_base_url(8000, 'gpu-node-01', client='elsewhere') }}"
      register: bad_client
      ignore_errors: true

    - name: Each mistake fails with a message that names the variable to change
      ansible.builtin.assert:
        that:
          - loopback is failed
          - "\\"benchmark_base_url: vllm_host is '127.0.0.1', a loopback address\\" in loopback.msg"
          - "'Set vllm_switch_benchmark_client: node' in loopback.msg"
          - bad_client is failed
          - "'benchmark_base_url: vllm_switch_benchmark_client must be one of controller, node' in bad_client.msg"
"""


def _environment(tmp_path: Path) -> dict[str, str]:
    (tmp_path / 'ansible.cfg').write_text(f'[defaults]\ncollections_path = {COLLECTIONS}\n', encoding='utf-8')
    env = {key: value for key, value in os.environ.items() if not key.startswith(('ANSIBLE_', 'LLMOPS_VLLM_'))}
    env.update(ANSIBLE_CONFIG=str(tmp_path / 'ansible.cfg'), ANSIBLE_NOCOLOR='1',
               ANSIBLE_LOCAL_TEMP=str(tmp_path / 'tmp'))
    return env


def _ansible_playbook(tmp_path: Path, *args: str, **extra_env: str) -> subprocess.CompletedProcess:
    env = _environment(tmp_path)
    env.update(extra_env)
    return subprocess.run([str(Path(sys.executable).parent / 'ansible-playbook'), *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def test_benchmark_base_url_in_a_play(tmp_path):
    (tmp_path / 'play.yml').write_text(PLAYBOOK, encoding='utf-8')
    run = _ansible_playbook(tmp_path, 'play.yml')
    assert run.returncode == 0, run.stdout + run.stderr
    assert 'ok=4' in run.stdout and 'failed=0' in run.stdout and 'ignored=2' in run.stdout


def _benchmark_playbook_client_expression() -> str:
    # The benchmark playbook's own expression, so that the test follows any change to it.
    plays = yaml.safe_load((REPO / 'playbooks' / 'benchmark.yml').read_text(encoding='utf-8'))
    return plays[0]['vars']['vllm_benchmark_client']


def _inventory_urls(tmp_path: Path, inventory: str, *extra_vars: str) -> dict[str, dict]:
    """What the role's resolve.yml and the benchmark playbook make of an inventory of the repository.

    Only set_fact, assert and debug run, which never connect; ssh is replaced by false, so a task
    that tried (the mock node may be up) would fail the test as unreachable.
    """
    playbook = [{
        'name': 'Resolve the benchmark client',
        'hosts': 'vllm_nodes',
        'gather_facts': False,
        'vars': {'benchmark_playbook_client': _benchmark_playbook_client_expression()},
        'tasks': [
            {'name': 'Resolve as the switch role does',
             'ansible.builtin.include_role': {'name': 'llmops.vllm.vllm_switch', 'tasks_from': 'resolve.yml'}},
            {'name': 'Report', 'ansible.builtin.debug': {'msg': REPORT_MARK + '{{ report | to_json }}'}, 'vars': {
                'report': {
                    'role_benchmark': '{{ _vllm_switch_resolved.benchmark_client }}',
                    'role_wait_url': '{{ _vllm_switch_resolved.node_url }}',
                    'playbook_benchmark': '{{ benchmark_playbook_client }}',
                }}},
        ],
    }]
    (tmp_path / 'resolve.yml').write_text(yaml.safe_dump(playbook, sort_keys=False), encoding='utf-8')
    # The production secrets live in a vault that is not in the repository.
    args = ['-i', str(REPO / 'inventories' / inventory), '-e', 'vault_vllm_api_key=x', '-e', 'vault_hf_token=y']
    for extra in extra_vars:
        args += ['-e', extra]
    run = _ansible_playbook(tmp_path, *args, 'resolve.yml', ANSIBLE_SSH_EXECUTABLE=shutil.which('false') or 'false')
    assert run.returncode == 0, run.stdout + run.stderr
    # The default callback shows msg as a JSON string; the report inside it is JSON again.
    reports = re.findall(rf'"msg": ("{REPORT_MARK}.*")$', run.stdout, flags=re.MULTILINE)
    assert len(reports) == 1, run.stdout
    return json.loads(json.loads(reports[0])[len(REPORT_MARK):])


@pytest.mark.parametrize(('extra_vars', 'base_url', 'delegate_to', 'client', 'wait_url'), [
    pytest.param((), f'https://{PRODUCTION_NODE}:8000', 'localhost', 'controller', 'https://127.0.0.1:8000',
                 id='controller'),
    pytest.param(('vllm_switch_benchmark_client=node',), 'https://127.0.0.1:8000', PRODUCTION_NODE, 'node',
                 'https://127.0.0.1:8000', id='node'),
    # Without TLS the API key may only go to a client on the node.
    pytest.param(('vllm_switch_benchmark_client=node', 'vllm_switch_tls=false'), 'http://127.0.0.1:8000',
                 PRODUCTION_NODE, 'node', 'http://127.0.0.1:8000', id='node-plain-http'),
])
def test_production_inventory_benchmarks_the_deployed_server(tmp_path, extra_vars, base_url, delegate_to, client,
                                                             wait_url):
    urls = _inventory_urls(tmp_path, 'production', *extra_vars)
    expected = {'base_url': base_url, 'delegate_to': delegate_to, 'client': client}
    assert urls['role_benchmark'] == expected
    assert urls['playbook_benchmark'] == expected
    # The readiness wait runs on the node whichever client benchmarks.
    assert urls['role_wait_url'] == wait_url


def test_production_inventory_without_tls_refuses_to_send_the_key_across_the_network(tmp_path):
    with pytest.raises(AssertionError) as failed:
        _inventory_urls(tmp_path, 'production', 'vllm_switch_tls=false')
    output = re.sub(r'\s+', ' ', str(failed.value))
    assert 'the API key (vllm_secret_environment.VLLM_API_KEY) would cross the network in clear, from localhost to ' \
           f'http://{PRODUCTION_NODE}:8000' in output


def test_mock_inventory_benchmarks_from_the_controller(tmp_path):
    # The mock node is a container on the controller, bound to and reached at a loopback address:
    # the controller-side client that molecule's scenarios use must stay allowed.
    urls = _inventory_urls(tmp_path, 'mock')
    expected = {'base_url': 'http://127.77.0.10:18000', 'delegate_to': 'localhost', 'client': 'controller'}
    assert urls['role_benchmark'] == expected
    assert urls['playbook_benchmark'] == expected
    assert urls['role_wait_url'] == 'http://127.77.0.10:18000'
