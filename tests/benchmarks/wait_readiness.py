#!/usr/bin/env python
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""P1: how long after a vLLM server becomes ready does the waiting task return?

Compares llmops.vllm.wait_for_openai_endpoint with the common idiom (ansible.builtin.uri on
/health with until/retries/delay: 5), each run through ansible-playbook against localhost.

A local server on 127.0.0.1 stands in for vLLM: its socket is bound but not listening, so
connections are refused as while a model loads, until the script makes it listen and serve
/health, /v1/models and /version. The ready moment is drawn uniformly 2 to 7 seconds after the
task starts (after the module is surely polling, and spread over a whole 5-second retry period of
the idiom). The task has returned when ansible-playbook prints its result line.

Usage: python tests/benchmarks/wait_readiness.py [--trials 5] [--seed 1]
Prints every trial, both medians and their ratio; exits 1 when ours misses its target
(median <= 0.3 s and at least 8 times lower than the idiom's).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import shutil
import statistics
import sys
import tempfile
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from socketserver import ThreadingMixIn

from playbook_stream import PlaybookStream

REPO = pathlib.Path(__file__).resolve().parents[2]
MODEL = "bench-tiny"
TARGET_MEDIAN = 0.3
TARGET_RATIO = 8.0
TRIAL_TIMEOUT = 60.0

OURS = """
- name: P1 ours
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Wait for the server
      llmops.vllm.wait_for_openai_endpoint:
        base_url: "{url}"
        model: {model}
        timeout: 60
"""

IDIOM = """
- name: P1 idiom
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Wait for the server
      ansible.builtin.uri:
        url: "{url}/health"
      register: health
      until: health.status == 200
      retries: 60
      delay: 5
"""


class _Handler(BaseHTTPRequestHandler):
    ROUTES = {
        "/health": b"",
        "/v1/models": json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model"}]}).encode(),
        "/version": json.dumps({"version": "0.32.0"}).encode(),
    }

    def do_GET(self):
        body = self.ROUTES.get(self.path)
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Length", str(len(body or b"")))
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, format, *args):  # pylint: disable=redefined-builtin
        pass


class _Server(ThreadingMixIn, HTTPServer):
    daemon_threads = True


class LoadingServer:
    """Refuses connections (bound, not listening) until ready() is called."""

    def __init__(self):
        self._server = _Server(("127.0.0.1", 0), _Handler, bind_and_activate=False)
        self._server.server_bind()
        self.url = "http://127.0.0.1:%d" % self._server.server_address[1]
        self._thread = None

    def ready(self):
        self._server.server_activate()
        moment = time.monotonic()
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return moment

    def close(self):
        if self._thread is not None:
            self._server.shutdown()
        self._server.server_close()


def workspace():
    """A config and collection path of our own, so the repo's ansible.cfg and callbacks stay out of it."""
    root = pathlib.Path(tempfile.mkdtemp(prefix="wait-readiness-"))
    link = root / "collections" / "ansible_collections" / "llmops" / "vllm"
    link.parent.mkdir(parents=True)
    link.symlink_to(REPO, target_is_directory=True)
    (root / "ansible.cfg").write_text(textwrap.dedent("""\
        [defaults]
        collections_path = {collections}
        stdout_callback = ansible.builtin.default
        retry_files_enabled = False
        """).format(collections=root / "collections"), encoding="utf-8")
    return root


def ansible_playbook():
    beside = pathlib.Path(sys.executable).parent / "ansible-playbook"
    return str(beside) if beside.exists() else shutil.which("ansible-playbook")


def trial(work, template, delay):
    """Run one playbook; make the server ready `delay` s after its task starts; return the latency."""
    server = LoadingServer()
    playbook = work / "playbook.yml"
    playbook.write_text(template.format(url=server.url, model=MODEL), encoding="utf-8")
    command = [ansible_playbook(), "-i", "localhost,", "-c", "local",
               "-e", "ansible_python_interpreter=%s" % sys.executable, str(playbook)]
    run = PlaybookStream(command, work, dict(os.environ, ANSIBLE_CONFIG=str(work / "ansible.cfg")))
    ready_at = None
    ready_moment = None
    try:
        end = time.monotonic() + TRIAL_TIMEOUT
        while time.monotonic() < end:
            waiting_to_open = ready_at is not None and ready_moment is None
            arrived = run.next_line(ready_at if waiting_to_open else end)
            if arrived is None:
                if waiting_to_open:
                    ready_moment = server.ready()
                continue
            seen, line = arrived
            if line is None or line.startswith(("fatal:", "failed:")):
                break
            if line.startswith("TASK [Wait for the server]"):
                ready_at = seen + delay
            elif ready_moment is not None and line.startswith("ok: [localhost]"):
                return seen - ready_moment
        raise run.failure("trial")
    finally:
        run.close(TRIAL_TIMEOUT)
        server.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--trials", type=int, default=5, help="trials per contender (default 5)")
    parser.add_argument("--seed", type=int, default=1, help="seed for the ready moments")
    args = parser.parse_args()
    draw = random.Random(args.seed)
    work = workspace()
    results = {"ours": [], "idiom": []}
    try:
        for number in range(1, args.trials + 1):
            for name, template in (("ours", OURS), ("idiom", IDIOM)):
                delay = draw.uniform(2.0, 7.0)
                latency = trial(work, template, delay)
                results[name].append(latency)
                print("trial %d %-5s ready %.2f s after task start, detected after %.3f s"
                      % (number, name, delay, latency), flush=True)
    finally:
        shutil.rmtree(str(work), ignore_errors=True)

    ours = statistics.median(results["ours"])
    idiom = statistics.median(results["idiom"])
    ratio = idiom / ours
    print("P1 median, llmops.vllm.wait_for_openai_endpoint: %.3f s" % ours)
    print("P1 median, ansible.builtin.uri until/retries/delay 5: %.3f s" % idiom)
    print("ratio: %.1fx lower" % ratio)
    met = ours <= TARGET_MEDIAN and ratio >= TARGET_RATIO
    print("target (median <= %.1f s and >= %.0fx lower): %s" % (TARGET_MEDIAN, TARGET_RATIO, "met" if met else "MISSED"))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
