#!/usr/bin/env python
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""How much foreign traffic during one side's benchmark biases a trial, and whether it is caught.

Against the running mock node (``make demo`` first), within one lifetime of the baseline (switched
to first, without a trial): the benchmark of the inventory's workload, quiet, then while N foreign streams run beside it (the
faults scenario's stream client, started when the benchmark starts), then quiet again. Prints
each run's output tok/s, mean TPOT and the ``foreign_requests`` that the server's own counters
showed, the bias (how much faster a variant measured quietly would look against the loaded
baseline), and what llmops.vllm.trial_decision answers for the loaded baseline against the quiet
one, as it would for a variant measured out of service.

    python3 tests/benchmarks/foreign_traffic.py [--streams 8] [--max-tokens 1900]

Only loopback addresses of the mock node are contacted; every request loop is bounded.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time

import yaml

from mock_runs import ROOT, benchmark, playbook

sys.path.insert(0, os.path.join(ROOT, ".cache", "collections"))

# pylint: disable=wrong-import-position
from ansible_collections.llmops.vllm.plugins.plugin_utils._decision import decide  # noqa: E402

MOCK_VARS = os.path.join(ROOT, "inventories", "mock", "group_vars", "vllm_nodes", "vllm.yml")
STREAM_CLIENT = os.path.join(ROOT, "molecule", "faults", "files", "stream_client.py")


def loaded(streams, max_tokens, settings):
    """benchmark() while the stream client keeps ``streams`` foreign streams going, started again as they end."""
    work = tempfile.mkdtemp(prefix="foreign-streams-")
    go = os.path.join(work, "go")
    with open(go, "w", encoding="utf-8"):
        pass
    done = threading.Event()

    def keep_streaming():
        # Bounded: each round is one client of ``streams`` requests, and the rounds stop with the benchmark.
        for dummy in range(100):
            if done.is_set():
                return
            subprocess.run([sys.executable, STREAM_CLIENT, "--host", settings["vllm_host"],
                            "--port", str(settings["vllm_port"]), "--model", settings["vllm_model"]["served_name"],
                            "--go", go, "--out", os.path.join(work, "client.json"), "--streams", str(streams),
                            "--max-tokens", str(max_tokens), "--give-up-after", "600"], check=False, timeout=900)

    streamer = threading.Thread(target=keep_streaming, daemon=True)
    streamer.start()
    try:
        time.sleep(2)
        return benchmark("loaded")
    finally:
        done.set()
        streamer.join(timeout=900)


def line(label, levels):
    level = levels[0]
    return "%-8s %8.1f output tok/s  TPOT %7.2f ms  foreign_requests %s" % (
        label, level["output_throughput"], level.get("mean_tpot_ms") or float("nan"), level.get("foreign_requests"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=1900)
    args = parser.parse_args()
    with open(MOCK_VARS, encoding="utf-8") as handle:
        settings = yaml.safe_load(handle)
    # The baseline serves, switched to without a trial; all three benchmarks measure this one lifetime.
    playbook("switch-variant.yml", {"vllm_variant": "baseline", "vllm_switch_benchmark_enabled": False})
    quiet = benchmark("quiet")
    busy = loaded(args.streams, args.max_tokens, settings)
    quiet_again = benchmark("quiet")
    for label, levels in (("quiet", quiet), ("loaded", busy), ("quiet", quiet_again)):
        print(line(label, levels))
    reference = (quiet[0]["output_throughput"] + quiet_again[0]["output_throughput"]) / 2
    print("bias: a variant as fast as the baseline, measured quietly, looks %+.1f%% against the loaded baseline"
          % ((reference / busy[0]["output_throughput"] - 1) * 100))
    answer = decide({"results": quiet_again}, {"results": busy})
    print("decision on it: %s, %s" % (answer["outcome"], answer["reason"]))
    accepted = decide({"results": quiet_again}, {"results": busy}, accept_foreign_traffic=True)
    print("the same, foreign traffic accepted: %s, %s" % (accepted["outcome"], accepted["reason"]))


if __name__ == "__main__":
    main()
