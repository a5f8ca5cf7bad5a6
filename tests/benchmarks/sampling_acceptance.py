#!/usr/bin/env python
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""N-gram's acceptance and speed-up on the mock node at temperature 0 and at 1.0, in one run.

vLLM checks drafts by rejection sampling, so acceptance falls as the temperature rises, and a
greedy benchmark overstates what speculation gains on traffic served with sampling. Against the
running mock node (``make demo`` first): the baseline benchmarked at each temperature within one
lifetime, then the n-gram variant (switched to without a trial) the same way, then the baseline
serves again. Prints output tok/s per side, the speed-up, and n-gram's acceptance rate and length.

    python tests/benchmarks/sampling_acceptance.py [--temperatures 0 1.0]

Only loopback addresses of the mock node are contacted; every run is bounded by the workload.
"""

from __future__ import annotations

import argparse

from mock_runs import benchmark, playbook

# Switched to without a trial: what is measured here is the sampling, not a verdict. Forced, so that a variant
# whose earlier trial rolled it back still serves for the measurement.
NO_TRIAL = {"vllm_switch_benchmark_enabled": False}
FORCED = dict(NO_TRIAL, vllm_switch_force=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.0, 1.0])
    parser.add_argument("--variant", default="ngram")
    args = parser.parse_args()
    playbook("switch-variant.yml", dict(NO_TRIAL, vllm_variant="baseline"))
    baseline = {temperature: benchmark("baseline", {"temperature": temperature})[0] for temperature in args.temperatures}
    playbook("switch-variant.yml", dict(FORCED, vllm_variant=args.variant))
    try:
        variant = {temperature: benchmark(args.variant, {"temperature": temperature})[0]
                   for temperature in args.temperatures}
    finally:
        playbook("switch-variant.yml", dict(NO_TRIAL, vllm_variant="baseline"))
    header = ("temperature", "baseline tok/s", args.variant + " tok/s", "speed-up", "acceptance", "acc. length")
    print("%-11s %15s %15s %9s %11s %11s" % header)
    for temperature in args.temperatures:
        ours, theirs = variant[temperature], baseline[temperature]
        # Without a single draft in the level (no n-gram of the output matched the prompt) acceptance is undefined.
        drafted = "spec_decode_acceptance_rate" in ours
        print("%-11.2f %15.1f %15.1f %+8.1f%% %11s %11s" % (
            temperature, theirs["output_throughput"], ours["output_throughput"],
            (ours["output_throughput"] / theirs["output_throughput"] - 1) * 100,
            "%.1f%%" % ours["spec_decode_acceptance_rate"] if drafted else "no drafts",
            "%.2f" % ours["spec_decode_acceptance_length"] if drafted else "-"))


if __name__ == "__main__":
    main()
