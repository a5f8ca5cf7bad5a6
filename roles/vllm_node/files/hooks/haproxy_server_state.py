# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""An example drain hook for the vllm_switch role: take a server out of an HAProxy backend, or put it back,
through HAProxy's runtime API (the stats socket at level admin).

    haproxy_server_state.py --socket /run/haproxy/admin.sock --backend vllm --server gpu-node-01 drain
    haproxy_server_state.py --socket 127.0.0.1:9999 --backend vllm --server gpu-node-01 ready

drain sets the server's state to drain (no new requests; those in flight go on) and waits until HAProxy
counts no session on it, up to --timeout seconds; ready puts it back; maint takes it out at once. It prints
one line of what it did and exits non-zero, saying why, when HAProxy refuses or the drain times out.

Any other load balancer plugs into the same place (vllm_switch_drain_hook_before and _after take an argv or
a URL): docs/architecture.md, "Drain before stop", shows nginx, a cloud load balancer and LiteLLM.
"""

from __future__ import annotations

import argparse
import csv
import io
import socket
import sys
import time

STATES = ('drain', 'ready', 'maint')


class RuntimeApiError(RuntimeError):
    """HAProxy refused a command, or could not be reached."""


def command(address: str, line: str, timeout: float = 5.0) -> str:
    """Send one command to the runtime API and return its whole answer (HAProxy closes after answering)."""
    if address.startswith('/'):
        family, target = socket.AF_UNIX, address
    else:
        host, dummy, port = address.rpartition(':')
        family, target = socket.AF_INET, (host or '127.0.0.1', int(port))
    try:
        with socket.socket(family, socket.SOCK_STREAM) as connection:
            connection.settimeout(timeout)
            connection.connect(target)
            connection.sendall(line.encode('ascii') + b'\n')
            chunks = []
            while True:
                chunk = connection.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
    except OSError as error:
        raise RuntimeApiError(f'cannot reach the HAProxy runtime API at {address}: {error}') from error
    return b''.join(chunks).decode('utf-8', 'replace')


def set_state(address: str, backend: str, server: str, state: str) -> None:
    answer = command(address, f'set server {backend}/{server} state {state}').strip()
    # Success is an empty answer; anything else is HAProxy saying why not ("No such server.", a permission error).
    if answer:
        raise RuntimeApiError(f'HAProxy refused "set server {backend}/{server} state {state}": {answer}')


def sessions(address: str, backend: str, server: str) -> int:
    """The sessions HAProxy counts on the server now (scur of show stat)."""
    answer = command(address, 'show stat')
    rows = csv.DictReader(io.StringIO(answer.lstrip('# ')))
    for row in rows:
        if row.get('pxname') == backend and row.get('svname') == server:
            return int(row.get('scur') or 0)
    raise RuntimeApiError(f'HAProxy has no server {backend}/{server} in show stat')


def drain(address: str, backend: str, server: str, timeout: float, interval: float = 0.5) -> str:
    started = time.monotonic()
    set_state(address, backend, server, 'drain')
    first = current = sessions(address, backend, server)
    while current > 0:
        if time.monotonic() - started >= timeout:
            raise RuntimeApiError(f'{backend}/{server} still has {current} sessions after {timeout:.0f} s of drain')
        time.sleep(interval)
        current = sessions(address, backend, server)
    return f'drained {backend}/{server}: {first} sessions in flight ended in {time.monotonic() - started:.1f} s'


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--socket', required=True, help='the stats socket: a path, or HOST:PORT')
    parser.add_argument('--backend', required=True)
    parser.add_argument('--server', required=True)
    parser.add_argument('--timeout', type=float, default=120, help='seconds a drain may take (default 120)')
    parser.add_argument('state', choices=STATES)
    args = parser.parse_args(argv)
    try:
        if args.state == 'drain':
            print(drain(args.socket, args.backend, args.server, args.timeout))
        else:
            set_state(args.socket, args.backend, args.server, args.state)
            print(f'{args.backend}/{args.server} set to {args.state}')
    except RuntimeApiError as error:
        print(f'haproxy_server_state: {error}', file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
