# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: benchmark_base_url
short_description: The URL at which a benchmark client reaches a node's vLLM server, and where it runs
version_added: 1.1.0
author:
  - llmops.vllm maintainers (!UNKNOWN)
description:
  - Turns the address the server binds (C(vllm_host)) into one a client can connect to, from where
    the client runs, and says which host to delegate the client's tasks to.
  - With O(client=node) the client runs on the node. A wildcard bind (V(0.0.0.0), V(::) or empty) is
    reached at loopback, V(127.0.0.1), or V(::1) for V(::); any other bind address is reached at itself.
  - With O(client=controller) the client runs on O(controller_host). A wildcard bind is reached at
    the node's address O(node_address); a loopback bind (V(127.0.0.0/8), V(::1), V(localhost)) fails,
    unless the node is the controller itself (O(connection=local), or a loopback O(node_address));
    any other bind address is used as it is.
  - When O(controller_host) is the node itself, the client runs on the node, as with O(client=node).
  - IPv6 literals are bracketed in the URL.
  - The URL is C(https) when O(tls) is set. An API key never goes to a plain C(http) URL across a
    network, see O(sends_api_key).
  - The llmops.vllm.vllm_switch role and the C(llmops.vllm.benchmark) playbook compute their URLs
    with this filter; the role's readiness wait, which runs on the node, uses O(client=node).
options:
  _input:
    description:
      - The address the server binds, C(vllm_host).
    type: str
    required: true
  port:
    description:
      - The server's port, C(vllm_port).
    type: int
    required: true
  node:
    description:
      - The node's inventory name, C(inventory_hostname); the delegate when the client runs on the node.
    type: str
    required: true
  node_address:
    description:
      - The address the controller reaches the node at, C(ansible_host). Defaults to O(node).
    type: str
  client:
    description:
      - Where the client runs, C(vllm_switch_benchmark_client).
    type: str
    choices: [controller, node]
    default: controller
  connection:
    description:
      - The node's connection plugin, C(ansible_connection); V(local) says the node is the controller.
    type: str
  controller_host:
    description:
      - The host that runs a controller-side client, C(vllm_switch_benchmark_host).
    type: str
    default: localhost
  tls:
    description:
      - Whether the server serves C(https), as vLLM does with C(--ssl-certfile) and C(--ssl-keyfile).
    type: bool
    default: false
  sends_api_key:
    description:
      - Whether the client sends an API key. Over plain C(http) the filter then fails unless the client
        runs on the node (or the controller is the node), so that the key never crosses a network in clear.
    type: bool
    default: false
seealso:
  - module: llmops.vllm.openai_benchmark
  - module: llmops.vllm.wait_for_openai_endpoint
"""

EXAMPLES = r"""
- name: Work out where the benchmark client runs and the URL it uses
  ansible.builtin.set_fact:
    bench_client: >-
      {{ vllm_host | llmops.vllm.benchmark_base_url(
           port=vllm_port, node=inventory_hostname, node_address=ansible_host | default(none),
           client=vllm_switch_benchmark_client | default('controller'),
           connection=ansible_connection | default(none)) }}

- name: Benchmark the running variant from there
  llmops.vllm.openai_benchmark:
    base_url: "{{ bench_client.base_url }}"
    model: "{{ vllm_model.served_name }}"
  delegate_to: "{{ bench_client.delegate_to }}"

- name: A URL for a task that runs on the node itself
  llmops.vllm.wait_for_openai_endpoint:
    base_url: "{{ (vllm_host | llmops.vllm.benchmark_base_url(vllm_port, inventory_hostname, client='node')).base_url }}"
    model: "{{ vllm_model.served_name }}"

# '0.0.0.0' | llmops.vllm.benchmark_base_url(8000, 'gpu-node-01')
#   => {"base_url": "http://gpu-node-01:8000", "delegate_to": "localhost", "client": "controller"}
# '::' | llmops.vllm.benchmark_base_url(8000, 'gpu-node-01', client='node')
#   => {"base_url": "http://[::1]:8000", "delegate_to": "gpu-node-01", "client": "node"}
"""

RETURN = r"""
_value:
  description: Where the client runs and the URL it uses.
  type: dict
  contains:
    base_url:
      description: The server root, without C(/v1), as the client reaches it.
      type: str
      sample: https://gpu-node-01.example.invalid:8000
    delegate_to:
      description: The host to delegate the client's tasks to, O(controller_host) or O(node).
      type: str
      sample: localhost
    client:
      description: Where the client runs, V(controller) or V(node).
      type: str
      sample: controller
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.plugin_utils._benchmark_client import (
    CONTROLLER,
    BenchmarkClientError,
    benchmark_endpoint,
)


def benchmark_base_url(bind_address, port, node, node_address=None, client=CONTROLLER, connection=None,
                       controller_host='localhost', tls=False, sends_api_key=False):
    try:
        return benchmark_endpoint(bind_address, port, node, node_address=node_address, client=client,
                                  connection=connection, controller_host=controller_host, tls=bool(tls),
                                  sends_api_key=bool(sends_api_key))
    except BenchmarkClientError as error:
        raise AnsibleFilterError(f'benchmark_base_url: {error}') from error


class FilterModule:
    def filters(self):
        return {'benchmark_base_url': benchmark_base_url}
