# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pytest

from ansible_collections.llmops.vllm.plugins.plugin_utils._benchmark_client import (
    BenchmarkClientError,
    benchmark_endpoint,
)

NODE = 'gpu-node-01.example.invalid'

# (bind address, node_address, client, connection) -> (base_url, delegate_to, client)
REACHABLE = [
    # A controller-side client reaches a wildcard bind through the node's address.
    pytest.param('0.0.0.0', None, 'controller', None, f'http://{NODE}:8000', 'localhost', 'controller',
                 id='controller-wildcard-v4-inventory-name'),
    pytest.param('0.0.0.0', '10.0.0.7', 'controller', 'ssh', 'http://10.0.0.7:8000', 'localhost', 'controller',
                 id='controller-wildcard-v4-ansible-host'),
    pytest.param('::', '2001:db8::7', 'controller', None, 'http://[2001:db8::7]:8000', 'localhost', 'controller',
                 id='controller-wildcard-v6-bracketed'),
    pytest.param('', '10.0.0.7', 'controller', None, 'http://10.0.0.7:8000', 'localhost', 'controller',
                 id='controller-empty-bind-is-wildcard'),
    pytest.param(None, '10.0.0.7', 'controller', None, 'http://10.0.0.7:8000', 'localhost', 'controller',
                 id='controller-no-bind-is-wildcard'),
    pytest.param('[::]', '10.0.0.7', 'controller', None, 'http://10.0.0.7:8000', 'localhost', 'controller',
                 id='controller-bracketed-wildcard'),
    # A specific address is used as it is.
    pytest.param('10.0.0.8', '10.0.0.7', 'controller', None, 'http://10.0.0.8:8000', 'localhost', 'controller',
                 id='controller-specific-v4'),
    pytest.param('2001:db8::8', None, 'controller', None, 'http://[2001:db8::8]:8000', 'localhost', 'controller',
                 id='controller-specific-v6'),
    pytest.param('vllm.internal', None, 'controller', None, 'http://vllm.internal:8000', 'localhost', 'controller',
                 id='controller-specific-name'),
    # Loopback is reachable from the controller only when the node is the controller.
    pytest.param('127.0.0.1', None, 'controller', 'local', 'http://127.0.0.1:8000', 'localhost', 'controller',
                 id='controller-loopback-local-connection'),
    pytest.param('127.77.0.10', '127.77.0.10', 'controller', 'ssh', 'http://127.77.0.10:8000', 'localhost',
                 'controller', id='controller-loopback-node-on-loopback'),
    pytest.param('::1', 'localhost', 'controller', None, 'http://[::1]:8000', 'localhost', 'controller',
                 id='controller-v6-loopback-node-is-localhost'),
    pytest.param('localhost', '::1', 'controller', None, 'http://localhost:8000', 'localhost', 'controller',
                 id='controller-localhost-node-on-v6-loopback'),
    # A node-side client uses loopback for a wildcard bind, the bind address otherwise.
    pytest.param('0.0.0.0', '10.0.0.7', 'node', None, 'http://127.0.0.1:8000', NODE, 'node', id='node-wildcard-v4'),
    pytest.param('', '10.0.0.7', 'node', None, 'http://127.0.0.1:8000', NODE, 'node', id='node-empty-bind'),
    pytest.param('::', '10.0.0.7', 'node', None, 'http://[::1]:8000', NODE, 'node', id='node-wildcard-v6'),
    pytest.param('::1', '10.0.0.7', 'node', None, 'http://[::1]:8000', NODE, 'node', id='node-v6-loopback'),
    pytest.param('127.0.0.1', '10.0.0.7', 'node', 'ssh', 'http://127.0.0.1:8000', NODE, 'node', id='node-loopback'),
    # Bound to 127.77.0.10 only, the server does not answer on 127.0.0.1.
    pytest.param('127.77.0.10', '10.0.0.7', 'node', None, 'http://127.77.0.10:8000', NODE, 'node',
                 id='node-other-loopback-address'),
    pytest.param('10.0.0.8', '10.0.0.7', 'node', None, 'http://10.0.0.8:8000', NODE, 'node', id='node-specific-v4'),
    pytest.param('fd00::8', '10.0.0.7', 'node', None, 'http://[fd00::8]:8000', NODE, 'node', id='node-specific-v6'),
]


@pytest.mark.parametrize(('bind', 'node_address', 'client', 'connection', 'base_url', 'delegate_to', 'runs_on'),
                         REACHABLE)
def test_where_the_client_runs_and_what_it_connects_to(bind, node_address, client, connection, base_url,
                                                       delegate_to, runs_on):
    assert benchmark_endpoint(bind, 8000, NODE, node_address=node_address, client=client,
                              connection=connection) == {
        'base_url': base_url, 'delegate_to': delegate_to, 'client': runs_on}


@pytest.mark.parametrize(('bind', 'node_address', 'connection'), [
    pytest.param('127.0.0.1', None, None, id='v4-loopback'),
    pytest.param('127.0.0.1', '10.0.0.7', 'ssh', id='v4-loopback-remote-node'),
    pytest.param('127.77.0.10', NODE, None, id='other-v4-loopback'),
    pytest.param('::1', '2001:db8::7', None, id='v6-loopback'),
    pytest.param('::ffff:127.0.0.1', '10.0.0.7', None, id='v4-mapped-loopback'),
    pytest.param('localhost', '10.0.0.7', None, id='localhost'),
    pytest.param('LocalHost.', '10.0.0.7', None, id='localhost-fqdn-any-case'),
])
def test_a_loopback_server_is_out_of_the_controllers_reach(bind, node_address, connection):
    with pytest.raises(BenchmarkClientError) as error:
        benchmark_endpoint(bind, 8000, NODE, node_address=node_address, connection=connection)
    message = str(error.value)
    assert f'vllm_host is {bind!r}, a loopback address' in message
    assert NODE in message
    assert 'Set vllm_switch_benchmark_client: node' in message


def test_the_controller_host_is_the_delegate_of_a_controller_client():
    endpoint = benchmark_endpoint('0.0.0.0', 8000, NODE, node_address='10.0.0.7', controller_host='loadgen-01')
    assert endpoint == {'base_url': 'http://10.0.0.7:8000', 'delegate_to': 'loadgen-01', 'client': 'controller'}
    assert benchmark_endpoint('0.0.0.0', 8000, NODE, controller_host='')['delegate_to'] == 'localhost'


def test_a_controller_host_that_is_the_node_runs_the_client_on_the_node():
    # The old way of benchmarking on the node (vllm_switch_benchmark_host set to it) keeps working,
    # loopback binds included.
    endpoint = benchmark_endpoint('127.0.0.1', 8000, NODE, node_address='10.0.0.7', controller_host=NODE)
    assert endpoint == {'base_url': 'http://127.0.0.1:8000', 'delegate_to': NODE, 'client': 'node'}


@pytest.mark.parametrize('port', [8000, '8000', ' 8000 '])
def test_the_port_may_come_as_text(port):
    assert benchmark_endpoint('0.0.0.0', port, NODE)['base_url'] == f'http://{NODE}:8000'


@pytest.mark.parametrize('port', [0, 65536, -1, '80a', None, True, 8000.5, ''])
def test_a_port_that_is_no_port_fails(port):
    with pytest.raises(BenchmarkClientError, match=r'^vllm_port must be a port number from 1 to 65535, got '):
        benchmark_endpoint('0.0.0.0', port, NODE)


def test_an_unknown_client_fails_naming_the_variable():
    with pytest.raises(BenchmarkClientError,
                       match=r"^vllm_switch_benchmark_client must be one of controller, node, got 'loadgen'$"):
        benchmark_endpoint('0.0.0.0', 8000, NODE, client='loadgen')


@pytest.mark.parametrize('node', ['', None])
def test_a_node_without_a_name_fails(node):
    with pytest.raises(BenchmarkClientError, match='inventory_hostname'):
        benchmark_endpoint('0.0.0.0', 8000, node)


def test_a_tls_server_gets_an_https_url():
    assert benchmark_endpoint('0.0.0.0', 8443, NODE, node_address='10.0.0.7', tls=True)['base_url'] == \
        'https://10.0.0.7:8443'
    assert benchmark_endpoint('::', 8443, NODE, client='node', tls=True)['base_url'] == 'https://[::1]:8443'


def test_an_api_key_is_not_sent_in_clear_across_the_network():
    with pytest.raises(BenchmarkClientError) as error:
        benchmark_endpoint('0.0.0.0', 8000, NODE, node_address='10.0.0.7', controller_host='loadgen-01',
                           sends_api_key=True)
    assert str(error.value) == (
        'the API key (vllm_secret_environment.VLLM_API_KEY) would cross the network in clear, from loadgen-01 to '
        'http://10.0.0.7:8000. Serve https (vllm_serve_args ssl_certfile and ssl_keyfile), or set '
        'vllm_switch_benchmark_client: node to run the client on the node.')


@pytest.mark.parametrize('bind, node_address, client, connection, tls', [
    pytest.param('0.0.0.0', '10.0.0.7', 'controller', None, True, id='https-across-the-network'),
    pytest.param('0.0.0.0', '10.0.0.7', 'node', None, False, id='client-on-the-node'),
    pytest.param('10.0.0.7', '10.0.0.7', 'node', None, False, id='client-on-the-node-own-address'),
    pytest.param('0.0.0.0', None, 'controller', 'local', False, id='controller-is-the-node'),
    pytest.param('127.77.0.10', '127.77.0.10', 'controller', None, False, id='loopback-node'),
])
def test_an_api_key_may_go_where_no_network_sees_it(bind, node_address, client, connection, tls):
    endpoint = benchmark_endpoint(bind, 8000, NODE, node_address=node_address, client=client, connection=connection,
                                  tls=tls, sends_api_key=True)
    assert endpoint['base_url'].startswith('https://' if tls else 'http://')
