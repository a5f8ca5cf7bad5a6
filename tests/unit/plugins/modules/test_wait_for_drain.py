# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import http.server
import threading

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils._prometheus_text import parse_samples, requests_in_flight
from ansible_collections.llmops.vllm.plugins.modules.wait_for_drain import message, read_in_flight, wait_for_drain

PAGE = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="tiny"}} {running}
vllm:num_requests_running{{engine="1",model_name="tiny"}} 0.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="tiny"}} {waiting}
"""


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def scripted(readings, clock, step=0.0):
    readings = list(readings)

    def read(url, timeout):
        clock.now += step
        return readings.pop(0) if len(readings) > 1 else readings[0]
    return read


def test_the_gauges_are_summed_over_engines():
    assert requests_in_flight(parse_samples(PAGE.format(running=3.0, waiting=2.0))) == (3, 2)
    assert requests_in_flight(parse_samples("vllm:other 1\n")) is None


def test_waits_until_nothing_runs_or_waits_and_says_how_many_and_how_long():
    clock = FakeClock()
    result = wait_for_drain("u", 60, 1, 30, read=scripted([(4, 2), (3, 0), (1, 0), (0, 0)], clock), clock=clock,
                            sleep=clock.sleep)

    assert (result["in_flight_at_start"], result["drained"], result["timed_out"], result["elapsed"]) == (6, True, False, 3.0)
    assert message(result, False) == "Drained 6 requests in flight in 3.0 s."


def test_a_timeout_is_reported_with_what_is_left_and_progress_is_recorded():
    clock = FakeClock()
    result = wait_for_drain("u", 65, 5, 30, read=scripted([(2, 1)], clock), clock=clock, sleep=clock.sleep)

    assert (result["drained"], result["timed_out"], result["running"], result["waiting"]) == (False, True, 2, 1)
    assert result["elapsed"] == 65.0
    assert result["progress"] == ["30 s: 2 running, 1 waiting", "60 s: 2 running, 1 waiting"]
    assert message(result, False).startswith("Drain timed out after 65.0 s: 3 of 3 requests still in flight")


def test_a_server_that_does_not_answer_has_nothing_in_flight():
    clock = FakeClock()
    result = wait_for_drain("u", 60, 1, 30, read=scripted([None], clock), clock=clock, sleep=clock.sleep)

    assert (result["in_flight_at_start"], result["drained"], result["elapsed"]) == (None, True, 0.0)
    assert "nothing is in flight" in message(result, False)


def test_check_mode_reads_once_and_waits_for_nothing():
    clock = FakeClock()
    result = wait_for_drain("u", 60, 1, 30, check_mode=True, read=scripted([(5, 0), (0, 0)], clock), clock=clock,
                            sleep=clock.sleep)

    assert (result["in_flight_at_start"], result["timed_out"], result["elapsed"]) == (5, False, 0.0)
    assert message(result, True) == "Check mode: 5 requests in flight now; nothing was waited for."


@pytest.fixture
def metrics_server():
    pages = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = pages.pop(0).encode() if len(pages) > 1 else pages[0].encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, pages
    server.shutdown()
    server.server_close()


def test_reads_a_real_metrics_endpoint_and_waits_on_it(metrics_server):
    server, pages = metrics_server
    pages.extend([PAGE.format(running=2.0, waiting=1.0), PAGE.format(running=1.0, waiting=0.0),
                  PAGE.format(running=0.0, waiting=0.0)])
    url = "http://127.0.0.1:%d/metrics" % server.server_address[1]

    result = wait_for_drain(url, 10, 0.05, 0)

    assert (result["in_flight_at_start"], result["drained"], result["timed_out"]) == (3, True, False)
    assert read_in_flight("http://127.0.0.1:1/metrics", 1) is None
