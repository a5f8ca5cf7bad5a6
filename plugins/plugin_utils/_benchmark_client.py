# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Where the benchmark client runs, and the URL at which it reaches the vLLM server.

``vllm_host`` is the address the server binds, which is not always an address a client can
connect to: a wildcard bind (0.0.0.0, ::) is no destination at all, and a loopback bind is only
reachable from the node itself. The switch role, the benchmark playbook and the readiness wait all
take their URL from here, so they can never disagree about which server they measure.
"""

from __future__ import annotations

import ipaddress
import typing as t

CONTROLLER = 'controller'
NODE = 'node'
CLIENTS = (CONTROLLER, NODE)


class BenchmarkClientError(ValueError):
    """The server cannot be reached from where the client is asked to run."""


def _ip(address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(address.strip('[]'))
    except ValueError:
        return None


def _is_wildcard(address: str) -> bool:
    ip = _ip(address)
    # An empty bind address is vLLM's own default (no --host), which listens on every address.
    return not address or (ip is not None and ip.is_unspecified)


def _is_loopback(address: str) -> bool:
    ip = _ip(address)
    if ip is None:
        # RFC 6761: localhost and every name under it resolve to loopback.
        name = address.lower().rstrip('.')
        return name == 'localhost' or name.endswith('.localhost')
    # Python before 3.13 does not call ::ffff:127.0.0.1 loopback, though the kernel routes it there.
    mapped = getattr(ip, 'ipv4_mapped', None)
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


def _is_ipv6(address: str) -> bool:
    return isinstance(_ip(address), ipaddress.IPv6Address)


def _url_host(address: str) -> str:
    # An IPv6 literal needs brackets in a URL, or its colons read as the port separator.
    return f'[{address.strip("[]")}]' if _is_ipv6(address) else address


def _port(port: t.Any) -> int:
    try:
        number = int(port)
    except (TypeError, ValueError):
        number = 0
    if isinstance(port, bool) or not 0 < number < 65536 or str(number) != str(port).strip():
        raise BenchmarkClientError(f'vllm_port must be a port number from 1 to 65535, got {port!r}')
    return number


def benchmark_endpoint(
    bind_address: t.Any,
    port: t.Any,
    node: str,
    node_address: str | None = None,
    client: str = CONTROLLER,
    connection: str | None = None,
    controller_host: str = 'localhost',
    tls: bool = False,
    sends_api_key: bool = False,
) -> dict[str, str]:
    """The client's base URL and the host it runs on, for a server on ``node`` bound to ``bind_address``.

    ``node`` is the node's inventory name, ``node_address`` its ``ansible_host`` (``node`` when
    unset) and ``connection`` its ``ansible_connection``. ``client`` says where the client runs:
    ``controller`` means on ``controller_host``, ``node`` on the node itself.

    ``tls`` says the server serves https. ``sends_api_key`` says the client sends the API key, which
    must not cross a network in clear: over plain http only a client on the node, or a controller
    that is the node, may send it.

    Returns ``base_url``, ``delegate_to`` (the inventory name to delegate the client's tasks to) and
    ``client`` (where it really runs). Raises BenchmarkClientError when the server cannot be reached
    from there, or only by sending the key in clear.
    """
    if client not in CLIENTS:
        raise BenchmarkClientError(
            f'vllm_switch_benchmark_client must be one of {", ".join(CLIENTS)}, got {client!r}')
    if not isinstance(node, str) or not node:
        raise BenchmarkClientError(f'the node (inventory_hostname) must be a host name, got {node!r}')
    number = _port(port)
    bind = '' if bind_address is None else str(bind_address).strip()
    address = str(node_address).strip() if node_address else node
    controller_host = controller_host or 'localhost'

    # vllm_switch_benchmark_host may name the node itself: the client then runs where the server does.
    if client == CONTROLLER and controller_host == node:
        client = NODE

    if client == NODE:
        delegate_to = node
        if _is_wildcard(bind):
            # A server bound to :: listens on IPv6 for certain, on IPv4 only if the kernel maps it.
            host = '::1' if _is_ipv6(bind) else '127.0.0.1'
        else:
            # A specific bind, loopback or not, listens on that address only: 127.0.0.1 would not
            # reach a server bound to 127.77.0.10.
            host = bind
    else:
        delegate_to = controller_host
        if _is_wildcard(bind):
            host = address
        elif _is_loopback(bind) and not (connection == 'local' or _is_loopback(address)):
            raise BenchmarkClientError(
                f'vllm_host is {bind!r}, a loopback address: the server listens only inside {node}, '
                f'and the benchmark client on the controller ({controller_host}) cannot reach it. '
                f'Set vllm_switch_benchmark_client: node to run the client on the node, or bind the '
                f'server to an address the controller reaches (vllm_host).')
        else:
            host = bind
        if sends_api_key and not tls and not (connection == 'local' or _is_loopback(host)):
            raise BenchmarkClientError(
                f'the API key (vllm_secret_environment.VLLM_API_KEY) would cross the network in clear, from '
                f'{controller_host} to http://{_url_host(host)}:{number}. Serve https (vllm_serve_args ssl_certfile '
                f'and ssl_keyfile), or set vllm_switch_benchmark_client: node to run the client on the node.')
    scheme = 'https' if tls else 'http'
    return {'base_url': f'{scheme}://{_url_host(host)}:{number}', 'delegate_to': delegate_to, 'client': client}
