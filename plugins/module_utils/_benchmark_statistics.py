# This module_utils file is private to the llmops.vllm collection; it may change without notice.
# Copyright (c) 2025, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The metrics ``vllm bench serve`` reports, computed from timed request outcomes.

Definitions follow vllm/benchmarks/serve.py (vLLM 0.32): TTFT is the time to the first token
chunk, E2E latency the time to the last token chunk, TPOT is (E2E - TTFT) / (output tokens - 1)
over requests with more than one output token, ITL is every gap between token chunks. Means,
population standard deviations and linearly interpolated percentiles match numpy's defaults.
"""

from __future__ import annotations

import math

# Two-sided 95% critical values of Student's t for 1..30 degrees of freedom.
_T_975 = (
    12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
    2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
    2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423,
)
_Z_975 = 1.959964

LATENCY_METRICS = ("ttft", "tpot", "itl", "e2el")


def percentile(sorted_values, q):
    """The q-th percentile (0..100) of sorted values, interpolated linearly between ranks."""
    rank = (len(sorted_values) - 1) * q / 100.0
    lower = int(math.floor(rank))
    upper = min(lower + 1, len(sorted_values) - 1)
    return sorted_values[lower] + (sorted_values[upper] - sorted_values[lower]) * (rank - lower)


def distribution_ms(name, seconds):
    """mean, median, population std, p90 and p99 of durations in seconds, as ``<stat>_<name>_ms`` keys.

    An empty list reports zeros, as vllm bench serve does.
    """
    values = sorted(seconds) or [0.0]
    mean = math.fsum(values) / len(values)
    variance = math.fsum((value - mean) ** 2 for value in values) / len(values)
    return {
        "mean_%s_ms" % name: mean * 1000.0,
        "median_%s_ms" % name: percentile(values, 50) * 1000.0,
        "std_%s_ms" % name: math.sqrt(variance) * 1000.0,
        "p90_%s_ms" % name: percentile(values, 90) * 1000.0,
        "p99_%s_ms" % name: percentile(values, 99) * 1000.0,
    }


def t_critical_95(degrees_of_freedom):
    """Two-sided 95% critical value of Student's t."""
    if degrees_of_freedom <= len(_T_975):
        return _T_975[degrees_of_freedom - 1]
    # Cornish-Fisher expansion around the normal quantile; under 1e-4 off beyond 30 degrees.
    z = _Z_975
    v = float(degrees_of_freedom)
    return (
        z
        + (z ** 3 + z) / (4 * v)
        + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * v ** 2)
        + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * v ** 3)
    )


def mean_ci95(samples):
    """Mean of two or more samples and the half-width of its 95% confidence interval (Student's t)."""
    count = len(samples)
    mean = math.fsum(samples) / count
    variance = math.fsum((sample - mean) ** 2 for sample in samples) / (count - 1)
    return mean, t_critical_95(count - 1) * math.sqrt(variance / count)


def summarize_errors(outcomes):
    """Failed requests grouped by error kind: ``{kind: {count, first_message}}``."""
    errors = {}
    for outcome in outcomes:
        if outcome.success:
            continue
        entry = errors.setdefault(outcome.error_kind, {"count": 0, "first_message": outcome.error_message})
        entry["count"] += 1
    return errors


def _output_throughput(run):
    return sum(outcome.output_tokens for outcome in run.outcomes if outcome.success) / run.duration


def summarize_level(max_concurrency, runs):
    """One result for a concurrency level, pooling the requests of all its repeats.

    Durations add up across repeats, so the throughputs are those of all requests over all the
    time spent; with more than one repeat the spread of per-repeat output throughput is added.
    """
    outcomes = [outcome for run in runs for outcome in run.outcomes]
    succeeded = [outcome for outcome in outcomes if outcome.success]
    duration = math.fsum(run.duration for run in runs)
    input_tokens = sum(outcome.prompt_tokens for outcome in succeeded)
    output_tokens = sum(outcome.output_tokens for outcome in succeeded)
    timings = {
        "ttft": [outcome.ttft for outcome in succeeded],
        "tpot": [
            (outcome.latency - outcome.ttft) / (outcome.output_tokens - 1)
            for outcome in succeeded
            if outcome.output_tokens > 1
        ],
        "itl": [gap for outcome in succeeded for gap in outcome.itl],
        "e2el": [outcome.latency for outcome in succeeded],
    }
    result = {
        "max_concurrency": max_concurrency,
        "duration": duration,
        "completed": len(succeeded),
        "failed": len(outcomes) - len(succeeded),
        "total_input_tokens": input_tokens,
        "total_output_tokens": output_tokens,
        "request_throughput": len(succeeded) / duration,
        "output_throughput": output_tokens / duration,
        "total_token_throughput": (input_tokens + output_tokens) / duration,
    }
    for name in LATENCY_METRICS:
        result.update(distribution_ms(name, timings[name]))
    result["errors"] = summarize_errors(outcomes)
    if len(runs) > 1:
        per_repeat = [_output_throughput(run) for run in runs]
        mean, half_width = mean_ci95(per_repeat)
        result["output_throughput_mean"] = mean
        result["output_throughput_ci95"] = half_width
        result["output_throughput_repeats"] = per_repeat
    return result
