# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Boundaries the wait modules talk to, faked for their tests.

- FakeClock replaces the clocks and sleeps of the wait code, so waits run instantly and events
  (a server coming up, a unit crashing) happen at exact virtual times.
- FakeVllmServer is a real HTTP server on 127.0.0.1 whose socket is bound but not listening
  until the test makes it "ready": connections are refused meanwhile, as with a loading vLLM.
- FakeSystemd answers systemctl show and journalctl like the real tools (Key=Value lines, bare
  message lines, or `-o json` entries one a line), from state the test sets.
- run_module runs a module's main() with exit_json/fail_json turned into exceptions.
"""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from socketserver import ThreadingMixIn

import pytest

from ansible.module_utils import basic

try:
    from ansible.module_utils.testing import patch_module_args
except ImportError:  # ansible-core before 2.19
    import contextlib
    from unittest import mock

    from ansible.module_utils.common.text.converters import to_bytes

    @contextlib.contextmanager
    def patch_module_args(args):
        with mock.patch.object(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args}))):
            yield


class ModuleDone(Exception):
    def __init__(self, result, failed):
        super().__init__(result.get("msg"))
        self.result = result
        self.failed = failed


def _exit_json(self, **result):
    raise ModuleDone(result, failed=False)


def _fail_json(self, msg, **result):
    result["msg"] = msg
    raise ModuleDone(result, failed=True)


def run_module(monkeypatch, module, args, check_mode=False):
    """Run module.main(); return (failed, result)."""
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", _fail_json)
    args = dict(args)
    if check_mode:
        args["_ansible_check_mode"] = True
    with patch_module_args(args):
        with pytest.raises(ModuleDone) as done:
            module.main()
    return done.value.failed, done.value.result


class FakeClock:
    """monotonic/time/sleep for the code under test; sleeping moves time and fires due events."""

    EPOCH = 1_790_000_000.0

    def __init__(self, start=5000.0):
        self.start = start
        self.now = start
        self.sleeps = []
        self._events = []

    def monotonic(self):
        return self.now

    def time(self):
        return self.EPOCH + self.now

    def at(self, offset, action):
        """Run action once the clock has moved offset seconds past its start."""
        self._events.append((self.start + offset, action))
        self._events.sort(key=lambda event: event[0])

    def sleep(self, seconds):
        assert seconds >= 0
        self.sleeps.append(seconds)
        self.now += seconds
        while self._events and self._events[0][0] <= self.now:
            self._events.pop(0)[1]()

    def elapsed(self):
        return self.now - self.start


class _Handler(BaseHTTPRequestHandler):
    def _answer(self):
        server = self.server
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        server.requests.append({"method": self.command, "path": self.path,
                                "authorization": self.headers.get("Authorization"),
                                "json": json.loads(body) if body else None})
        status, payload = server.routes.get(self.path, (404, {"error": "not found"}))
        if callable(payload):
            payload = payload()
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = _answer
    do_POST = _answer

    def log_message(self, format, *args):  # pylint: disable=redefined-builtin
        pass


class _Server(ThreadingMixIn, HTTPServer):
    daemon_threads = True


class FakeVllmServer:
    """A served vLLM as seen over HTTP, refusing connections until start()."""

    def __init__(self, model="tiny", version="0.32.0"):
        self._server = _Server(("127.0.0.1", 0), _Handler, bind_and_activate=False)
        self._server.allow_reuse_address = True
        self._server.server_bind()
        self._server.requests = []
        self._server.routes = {
            "/health": (200, b""),
            "/v1/models": (200, {"object": "list", "data": [{"id": model, "object": "model", "owned_by": "vllm"}]}),
            "/version": (200, {"version": version}),
            "/v1/completions": (200, {"object": "text_completion", "model": model,
                                      "choices": [{"index": 0, "text": " world", "finish_reason": "length"}],
                                      "usage": {"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3}}),
        }
        self._thread = None

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self._server.server_address[1]

    @property
    def routes(self):
        return self._server.routes

    @property
    def requests(self):
        return self._server.requests

    def paths(self):
        return [request["path"] for request in self.requests]

    def start(self):
        self._server.server_activate()
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def close(self):
        if self._thread is not None:
            self._server.shutdown()
        self._server.server_close()


SHOW_RUNNING = {
    "LoadState": "loaded", "ActiveState": "active", "SubState": "running", "Result": "success",
    "NRestarts": "0", "MainPID": "48190", "ExecMainCode": "0", "ExecMainStatus": "0",
    "InactiveExitTimestampMonotonic": "4990000000", "ExecMainStartTimestampMonotonic": "4990000000",
}


class FakeSystemd:
    """systemctl show / journalctl answers for one unit, from the state the test sets."""

    def __init__(self, unit="vllm-tiny-ngram.service"):
        self.unit = unit
        self.properties = dict(SHOW_RUNNING)
        self.journal = []
        # What `journalctl -o json` prints (entries, one JSON object a line), and its exit status.
        self.journal_json = ""
        self.journal_json_rc = 0
        self.commands = []
        self.show_rc = 0
        # MiB in use on each of two GPUs as nvidia-smi reports them; None: nvidia-smi fails, as with no driver.
        self.gpu_used_mib = None

    def set(self, **properties):
        self.properties.update((key, str(value)) for key, value in properties.items())

    def run_command(self, argv):
        self.commands.append(list(argv))
        tool = os.path.basename(argv[0])
        if tool == "systemctl":
            assert argv[1:3] == ["show", self.unit]
            if self.show_rc:
                return self.show_rc, "", "Failed to connect to bus: No such file or directory\n"
            wanted = argv[3].split("=", 1)[1].split(",")
            return 0, "".join("%s=%s\n" % (key, self.properties.get(key, "")) for key in wanted), ""
        if tool == "journalctl" and argv[argv.index("-o") + 1] == "json":
            if self.journal_json_rc:
                return self.journal_json_rc, "", "Failed to open journal: Permission denied\n"
            return 0, self.journal_json, ""
        if tool == "journalctl":
            count = int(argv[argv.index("-n") + 1])
            return 0, "".join(line + "\n" for line in self.journal[-count:]), ""
        if tool == "nvidia-smi":
            if self.gpu_used_mib is None:
                return 9, "", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"
            if argv[1].startswith("--query-gpu=") and self.gpu_used_mib == "[N/A]":
                # Unified memory (a GB10): the driver reports no memory figures at all.
                return 0, "".join("%d, GPU-%d, NVIDIA GB10, [N/A], [N/A]\n" % (index, index) for index in range(2)), ""
            if argv[1].startswith("--query-gpu="):
                used = int(self.gpu_used_mib)
                return 0, "".join("%d, GPU-%d, NVIDIA RTX PRO 6000, %d, 97887\n" % (index, index, used)
                                  for index in range(2)), ""
            return 0, "", ""
        raise AssertionError("unexpected command %r" % argv)

    def calls(self, tool):
        return [argv for argv in self.commands if os.path.basename(argv[0]) == tool]
