# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fleet's streaming client counts a broken stream, a refused request and a pause in service as a user would."""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / 'fleet' / 'stream_client.py'
SPEC = importlib.util.spec_from_file_location('stream_client', SCRIPT)
stream_client = importlib.util.module_from_spec(SPEC)
sys.modules['stream_client'] = stream_client
SPEC.loader.exec_module(stream_client)


class Server(ThreadingHTTPServer):
    """Answers each request as the next item of its script says, then streams complete answers."""

    daemon_threads = True

    def __init__(self, script):
        super().__init__(('127.0.0.1', 0), Handler)
        self.script, self.lock, self.bodies, self.arrivals = list(script), threading.Lock(), [], []


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):  # noqa: N802 (the name http.server calls)
        self.server.arrivals.append(time.monotonic())
        self.server.bodies.append(json.loads(self.rfile.read(int(self.headers['Content-Length']))))
        with self.server.lock:
            step = self.server.script.pop(0) if self.server.script else 'ok'
        if step == '503':
            self.send_response(503)
            self.send_header('Content-Length', '0')
            self.end_headers()
            return
        if step.startswith('pause'):
            time.sleep(float(step.split()[1]))
        self.send_response(200)
        self.send_header('Content-Type', 'text/event-stream')
        self.end_headers()
        for token in ('one', 'two'):
            self.wfile.write(f'data: {{"choices": [{{"text": "{token}"}}]}}\n\n'.encode())
            self.wfile.flush()
        if step != 'cut':
            self.wfile.write(b'data: [DONE]\n\n')
        self.wfile.flush()
        self.close_connection = True


def run_client(tmp_path, script, seconds=1.5, concurrency=1, options=(), server=None):
    server = server or Server(script)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    stop, out = tmp_path / 'stop', tmp_path / 'figures.json'
    threading.Timer(seconds, stop.touch).start()
    try:
        code = stream_client.main(['stream_client.py', '--url', f'http://127.0.0.1:{server.server_address[1]}',
                                   '--model', 'tiny-llama', '--stop-file', str(stop), '--out', str(out),
                                   '--concurrency', str(concurrency), '--timeout', '10', *options])
    finally:
        server.shutdown()
        server.server_close()
    return code, json.loads(out.read_text(encoding='utf-8')), server.bodies


def test_every_request_streams_and_none_fails(tmp_path, capsys):
    code, figures, bodies = run_client(tmp_path, [], concurrency=2)
    assert code == 0
    assert figures['failed'] == 0 and figures['sent'] == figures['completed'] > 5
    assert figures['stopped_by'] == 'stop file'
    assert bodies[0]['stream'] is True and bodies[0]['model'] == 'tiny-llama'
    assert capsys.readouterr().out.startswith('failed client requests during a fleet-wide variant rollout: 0 (sent ')


def test_a_refused_request_and_a_stream_cut_short_are_failures(tmp_path):
    dummy, figures, dummy_bodies = run_client(tmp_path, ['ok', '503', 'cut', 'ok'])
    assert figures['failed'] == 2
    assert figures['failures'] == {'HTTP 503': 1, 'stream ended without [DONE]': 1}
    assert figures['sent'] == figures['completed'] + 2


def test_the_longest_wait_for_an_answer_is_the_gap_in_service(tmp_path):
    dummy, figures, dummy_bodies = run_client(tmp_path, ['ok', 'pause 0.6', 'ok'], seconds=2.0)
    assert figures['failed'] == 0
    assert 0.55 <= figures['longest_gap_seconds'] < 1.5


def test_a_worker_pauses_after_each_answer_and_the_pause_is_no_gap_in_service(tmp_path):
    server = Server([])
    dummy, figures, dummy_bodies = run_client(tmp_path, [], seconds=1.6, options=['--pause', '0.5'], server=server)
    assert figures['failed'] == 0 and 2 <= figures['sent'] <= 4
    # One worker: each request starts at least the pause after the one before it was answered.
    assert all(later - earlier >= 0.5 for earlier, later in zip(server.arrivals, server.arrivals[1:]))
    assert figures['longest_gap_seconds'] < 0.4
