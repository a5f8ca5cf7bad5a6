#!/usr/bin/python
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: wait_for_drain
short_description: Wait until a vLLM server has no request running or waiting, before it is stopped
version_added: 1.1.0
description:
  - Reads vLLM's own gauges C(vllm:num_requests_running) and C(vllm:num_requests_waiting) from its Prometheus
    endpoint until both are zero, or until O(timeout) seconds have passed.
  - Meant for the moment after the node was taken out of the load balancer and before its serving unit stops,
    so that requests already in flight finish instead of being cut off.
  - A timeout is reported, not failed; the caller stops the server anyway, and vLLM's C(--shutdown-timeout)
    gives the requests still running that much longer after C(SIGTERM). A server that does not answer has
    nothing in flight.
author:
  - llmops.vllm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - llmops.vllm.tls_client
attributes:
  check_mode:
    support: full
    details: In check mode the gauges are read once and reported; nothing is waited for.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  metrics_url:
    description: The server's Prometheus endpoint, for example V(http://127.0.0.1:8000/metrics).
    type: str
    required: true
  timeout:
    description: Seconds to wait at most for the requests in flight to finish.
    type: float
    default: 120
  interval:
    description: Seconds between two readings.
    type: float
    default: 1
  progress_interval:
    description: Seconds between two progress lines in the returned RV(progress); V(0) records none.
    type: float
    default: 30
seealso:
  - module: llmops.vllm.wait_for_gpu_memory
"""

EXAMPLES = r"""
- name: Let the requests in flight finish before the serving unit stops
  llmops.vllm.wait_for_drain:
    metrics_url: http://127.0.0.1:8000/metrics
    timeout: 300
  register: drain

- name: Say how the drain went
  ansible.builtin.debug:
    msg: "{{ drain.msg }}"
"""

RETURN = r"""
in_flight_at_start:
  description: Requests running or waiting at the first reading; V(null) when the server did not answer.
  returned: always
  type: int
  sample: 6
running:
  description: Requests running at the last reading.
  returned: always
  type: int
  sample: 0
waiting:
  description: Requests waiting at the last reading.
  returned: always
  type: int
  sample: 0
drained:
  description: Whether nothing was in flight at the end.
  returned: always
  type: bool
timed_out:
  description: Whether O(timeout) passed with requests still in flight.
  returned: always
  type: bool
elapsed:
  description: Seconds spent, from a monotonic clock.
  returned: always
  type: float
  sample: 14.2
progress:
  description: One line per O(progress_interval) with the counts at that moment.
  returned: always
  type: list
  elements: str
"""

import functools
import http.client
import ssl
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.vllm.plugins.module_utils._load_generation import fetch_text
from ansible_collections.llmops.vllm.plugins.module_utils._prometheus_text import parse_samples, requests_in_flight
from ansible_collections.llmops.vllm.plugins.module_utils._tls import client_context


def read_in_flight(metrics_url, timeout, ssl_context=None):
    """(running, waiting), or None when the server does not answer or exports no such gauges.

    A TLS failure is raised: read as "nothing in flight", it would let the stop cut requests off.
    """
    try:
        return requests_in_flight(parse_samples(fetch_text(metrics_url, timeout, ssl_context)))
    except ssl.SSLError:
        raise
    except (OSError, http.client.HTTPException, ValueError):
        return None


def wait_for_drain(metrics_url, timeout, interval, progress_interval, check_mode=False, read=read_in_flight,
                   clock=time.monotonic, sleep=time.sleep):
    """Poll the gauges until nothing is in flight or the timeout passes; the monotonic clock bounds the wait."""
    started = clock()
    # One reading may take a few seconds, never the whole budget.
    read_timeout = max(1.0, min(5.0, timeout))
    first = read(metrics_url, read_timeout)
    current = first
    progress = []
    next_progress = progress_interval
    while current is not None and sum(current) > 0 and not check_mode:
        elapsed = clock() - started
        if elapsed >= timeout:
            break
        if progress_interval and elapsed >= next_progress:
            progress.append("%.0f s: %d running, %d waiting" % (elapsed, current[0], current[1]))
            next_progress += progress_interval
        sleep(min(interval, max(0.0, timeout - elapsed)))
        current = read(metrics_url, read_timeout)
    elapsed = round(clock() - started, 1)
    running, waiting = current if current is not None else (0, 0)
    return {
        "in_flight_at_start": None if first is None else sum(first),
        "running": running,
        "waiting": waiting,
        "drained": running + waiting == 0,
        "timed_out": not check_mode and running + waiting > 0,
        "elapsed": elapsed,
        "progress": progress,
    }


def message(result, check_mode):
    if result["in_flight_at_start"] is None:
        return "The server does not answer at its metrics endpoint: nothing is in flight."
    if check_mode:
        return "Check mode: %d requests in flight now; nothing was waited for." % result["in_flight_at_start"]
    if result["timed_out"]:
        return ("Drain timed out after %.1f s: %d of %d requests still in flight (%d running, %d waiting); the server's"
                " --shutdown-timeout decides what becomes of them." % (
                    result["elapsed"], result["running"] + result["waiting"], result["in_flight_at_start"],
                    result["running"], result["waiting"]))
    return "Drained %d requests in flight in %.1f s." % (result["in_flight_at_start"], result["elapsed"])


def main():
    module = AnsibleModule(
        argument_spec=dict(
            metrics_url=dict(type="str", required=True),
            timeout=dict(type="float", default=120),
            interval=dict(type="float", default=1),
            progress_interval=dict(type="float", default=30),
            validate_certs=dict(type="bool", default=True),
            ca_path=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    for name in ("timeout", "interval"):
        if not params[name] > 0:
            module.fail_json(msg="%s must be a positive number of seconds, got %s" % (name, params[name]))
    read = functools.partial(read_in_flight, ssl_context=client_context(params["validate_certs"], params["ca_path"]))
    try:
        result = wait_for_drain(params["metrics_url"], params["timeout"], params["interval"], params["progress_interval"],
                                check_mode=module.check_mode, read=read)
    except ssl.SSLError as exc:
        module.fail_json(msg="Cannot read %s over TLS, so the requests in flight are unknown: %s (see validate_certs "
                             "and ca_path)" % (params["metrics_url"], exc))
    result["msg"] = message(result, module.check_mode)
    if result["timed_out"]:
        module.warn(result["msg"])
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
