# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The example HAProxy drain hook (roles/vllm_node/files/hooks), against a fake runtime API on a unix socket.

The fake answers as HAProxy's stats socket does in non-interactive mode: one command per connection, an empty
answer when a set succeeds, a sentence when it does not, and show stat as CSV with a '# ' header.
"""

from __future__ import annotations

import importlib.util
import socket
import threading
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / 'roles' / 'vllm_node' / 'files' / 'hooks' / 'haproxy_server_state.py'
SPEC = importlib.util.spec_from_file_location('haproxy_server_state', SCRIPT)
hook = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(hook)

HEADER = '# pxname,svname,qcur,qmax,scur,smax,slim,stot,status\n'


class FakeHaproxy:
    """Servers of one backend; a drained server's sessions end one per show stat."""

    def __init__(self, path, sessions):
        self.states = {name: 'ready' for name in sessions}
        self.sessions = dict(sessions)
        self.commands = []
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(8)
        threading.Thread(target=self.serve, daemon=True).start()

    def answer(self, line):
        words = line.split()
        if words[:2] == ['set', 'server'] and len(words) == 5 and words[3] == 'state':
            backend, dummy, server = words[2].partition('/')
            if backend != 'vllm':
                return 'No such backend.\n'
            if server not in self.states:
                return 'No such server.\n'
            self.states[server] = words[4]
            return '\n'
        if words == ['show', 'stat']:
            rows = [HEADER, 'vllm,FRONTEND,,,3,9,100,40,OPEN\n']
            for name, state in self.states.items():
                if state == 'drain' and self.sessions[name] > 0:
                    self.sessions[name] -= 1
                status = {'ready': 'UP', 'drain': 'DRAIN', 'maint': 'MAINT'}[state]
                rows.append(f'vllm,{name},0,0,{self.sessions[name]},4,,12,{status}\n')
            return ''.join(rows) + '\n'
        return 'Unknown command.\n'

    def serve(self):
        while True:
            try:
                connection, dummy = self.listener.accept()
            except OSError:
                return
            with connection:
                line = connection.recv(4096).decode().strip()
                self.commands.append(line)
                connection.sendall(self.answer(line).encode())


@pytest.fixture
def haproxy(tmp_path):
    fake = FakeHaproxy(tmp_path / 'admin.sock', {'gpu-node-01': 3, 'gpu-node-02': 1})
    yield fake, str(tmp_path / 'admin.sock')
    fake.listener.close()


def test_drain_waits_until_the_sessions_in_flight_have_ended_and_ready_puts_the_server_back(haproxy, capsys):
    fake, address = haproxy
    assert hook.main(['--socket', address, '--backend', 'vllm', '--server', 'gpu-node-01', 'drain']) == 0
    assert fake.states == {'gpu-node-01': 'drain', 'gpu-node-02': 'ready'}
    assert fake.sessions['gpu-node-01'] == 0
    assert capsys.readouterr().out.startswith('drained vllm/gpu-node-01: 2 sessions in flight ended in ')
    assert hook.main(['--socket', address, '--backend', 'vllm', '--server', 'gpu-node-01', 'ready']) == 0
    assert fake.states['gpu-node-01'] == 'ready'
    assert capsys.readouterr().out == 'vllm/gpu-node-01 set to ready\n'
    assert fake.commands[0] == 'set server vllm/gpu-node-01 state drain'


def test_a_drain_that_does_not_end_in_time_fails_saying_how_many_remain(haproxy):
    fake, address = haproxy
    fake.sessions['gpu-node-01'] = 10**6
    started = time.monotonic()
    with pytest.raises(hook.RuntimeApiError, match=r'vllm/gpu-node-01 still has \d+ sessions after 1 s of drain'):
        hook.drain(address, 'vllm', 'gpu-node-01', timeout=1, interval=0.1)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize('backend, server, message', [
    ('vllm', 'gpu-node-09', 'HAProxy refused "set server vllm/gpu-node-09 state maint": No such server.'),
    ('other', 'gpu-node-01', 'HAProxy refused "set server other/gpu-node-01 state maint": No such backend.'),
])
def test_what_haproxy_refuses_fails_the_hook_with_haproxys_words(haproxy, capsys, backend, server, message):
    dummy, address = haproxy
    assert hook.main(['--socket', address, '--backend', backend, '--server', server, 'maint']) == 1
    assert capsys.readouterr().err == f'haproxy_server_state: {message}\n'


def test_an_unreachable_runtime_api_is_named(tmp_path, capsys):
    address = str(tmp_path / 'absent.sock')
    assert hook.main(['--socket', address, '--backend', 'vllm', '--server', 'x', 'ready']) == 1
    assert capsys.readouterr().err.startswith(f'haproxy_server_state: cannot reach the HAProxy runtime API at {address}: ')
