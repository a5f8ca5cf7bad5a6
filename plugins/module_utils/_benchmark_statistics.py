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

import functools
import math

# The continued fraction of the incomplete beta function converges in a few dozen terms for the
# degrees of freedom a benchmark has; the cap only guards against a loop that never ends.
_MAX_FRACTION_TERMS = 500
_TINY = 1e-300

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


def _beta_fraction(a, b, x):
    """The continued fraction of the regularized incomplete beta function, evaluated by Lentz's method."""
    numerator_c = 1.0
    denominator_d = 1.0 - (a + b) * x / (a + 1.0)
    denominator_d = 1.0 / (denominator_d if abs(denominator_d) > _TINY else _TINY)
    value = denominator_d
    for m in range(1, _MAX_FRACTION_TERMS):
        for coefficient in (m * (b - m) * x / ((a + 2 * m - 1.0) * (a + 2 * m)),
                            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1.0))):
            denominator_d = 1.0 + coefficient * denominator_d
            denominator_d = 1.0 / (denominator_d if abs(denominator_d) > _TINY else _TINY)
            numerator_c = 1.0 + coefficient / numerator_c
            numerator_c = numerator_c if abs(numerator_c) > _TINY else _TINY
            step = denominator_d * numerator_c
            value *= step
        if abs(step - 1.0) < 1e-15:
            break
    return value


def regularized_beta(a, b, x):
    """I_x(a, b), the regularized incomplete beta function, for a, b > 0 and 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    # The fraction converges fast only below the mean of the beta distribution; above it, use the mirror.
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, 1.0 - x) / b


def t_two_sided_tail(value, degrees_of_freedom):
    """P(|T| > value) for Student's t with the given degrees of freedom."""
    return regularized_beta(degrees_of_freedom / 2.0, 0.5,
                            degrees_of_freedom / (degrees_of_freedom + value * value))


# A few (degrees, confidence) pairs recur in every decision and look; each costs a bisection.
@functools.lru_cache(maxsize=256)
def t_critical(degrees_of_freedom, confidence):
    """Two-sided critical value of Student's t: P(|T| <= value) = confidence.

    Computed, not looked up, so that any confidence (the verdict's 95%, a stricter level for a
    test repeated over several looks) comes from the same code; bisection to about 1e-12.
    """
    if degrees_of_freedom < 1:
        raise ValueError("degrees of freedom must be at least 1, got %r" % (degrees_of_freedom,))
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie strictly between 0 and 1, got %r" % (confidence,))
    tail = 1.0 - confidence
    low, high = 0.0, 1.0
    while t_two_sided_tail(high, degrees_of_freedom) > tail:
        low, high = high, high * 2.0
    while high - low > 1e-12 * high:
        middle = (low + high) / 2.0
        if t_two_sided_tail(middle, degrees_of_freedom) > tail:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0


def t_critical_95(degrees_of_freedom):
    """Two-sided 95% critical value of Student's t."""
    return t_critical(degrees_of_freedom, 0.95)


def welch_half_width(first, second, confidence=0.95):
    """Half-width of Welch's interval of the difference of the means of two samples, or None.

    None when a sample has fewer than two values (no spread to measure). The Welch-Satterthwaite
    degrees of freedom are rounded down, which widens the interval: the safe side.
    """
    if len(first) < 2 or len(second) < 2:
        return None
    share_first = _sample_variance(first) / len(first)
    share_second = _sample_variance(second) / len(second)
    spread = math.sqrt(share_first + share_second)
    if spread == 0:
        return 0.0
    degrees = (share_first + share_second) ** 2 / (
        share_first ** 2 / (len(first) - 1) + share_second ** 2 / (len(second) - 1))
    return t_critical(max(1, int(degrees)), confidence) * spread


def _sample_variance(samples):
    mean = math.fsum(samples) / len(samples)
    return math.fsum((sample - mean) ** 2 for sample in samples) / (len(samples) - 1)


def mean_ci95(samples):
    """Mean of two or more samples and the half-width of its 95% confidence interval (Student's t)."""
    count = len(samples)
    mean = math.fsum(samples) / count
    return mean, t_critical_95(count - 1) * math.sqrt(_sample_variance(samples) / count)


def summarize_errors(outcomes):
    """Failed requests grouped by error kind: ``{kind: {count, first_message}}``."""
    errors = {}
    for outcome in outcomes:
        if outcome.success:
            continue
        entry = errors.setdefault(outcome.error_kind, {"count": 0, "first_message": outcome.error_message})
        entry["count"] += 1
    return errors


def run_output_throughput(run):
    """Output tokens per second of one run: the tokens of its successful requests over its duration; of a time-boxed
    window, every token that arrived inside it (streams cut at its end and streams begun in its warm-up included)."""
    if getattr(run, "windowed", False):
        return sum(outcome.window_tokens for outcome in run.outcomes if outcome.success) / run.duration
    return sum(outcome.output_tokens for outcome in run.outcomes if outcome.success) / run.duration


def finish_reasons(succeeded):
    """How the answers ended: a count per ``finish_reason``, and the share cut off at ``max_tokens``.

    An answer that stopped at ``max_tokens`` (``length``) was cut short: a thinking model cut off
    mid-thought measures a different answer from the one its users get. A server that sends no
    finish reason leaves the share unknown (None).
    """
    counts = {}
    for outcome in succeeded:
        reason = outcome.finish_reason or "unknown"
        counts[reason] = counts.get(reason, 0) + 1
    known = len(succeeded) - counts.get("unknown", 0)
    return {
        "finish_reasons": counts,
        "max_tokens_share": counts.get("length", 0) / float(known) if known else None,
    }


def summarize_level(max_concurrency, runs):
    """One result for a concurrency level, pooling the requests of all its repeats.

    Durations add up across repeats, so the throughputs are those of all requests over all the
    time spent; with more than one repeat the spread of per-repeat output throughput is added.
    """
    outcomes = [outcome for run in runs for outcome in run.outcomes]
    windowed = any(getattr(run, "windowed", False) for run in runs)
    failed = sum(1 for outcome in outcomes if not outcome.success)
    if windowed:
        # A window's latencies are those of the requests sent inside it: the completed ones, and the streams its end
        # cut, up to their last token (a cut stream has no end-to-end latency). Its tokens are all that arrived
        # inside it, streams begun in the warm-up included.
        measured = [outcome for outcome in outcomes if outcome.success and outcome.in_window]
        succeeded = [outcome for outcome in measured if not outcome.cut]
        timed = [outcome for outcome in measured if not outcome.cut or outcome.output_tokens > 0]
        output_tokens = sum(outcome.window_tokens for outcome in outcomes if outcome.success)
    else:
        succeeded = timed = [outcome for outcome in outcomes if outcome.success]
        output_tokens = sum(outcome.output_tokens for outcome in succeeded)
    duration = math.fsum(run.duration for run in runs)
    input_tokens = sum(outcome.prompt_tokens for outcome in succeeded)
    timings = {
        "ttft": [outcome.ttft for outcome in timed],
        # A stream cut after its first chunk has shown no decoding step yet: it has a TTFT and no TPOT.
        "tpot": [
            (outcome.latency - outcome.ttft) / (outcome.output_tokens - 1)
            for outcome in timed
            if outcome.output_tokens > 1 and (outcome.itl or not outcome.cut)
        ],
        "itl": [gap for outcome in timed for gap in outcome.itl],
        "e2el": [outcome.latency for outcome in succeeded],
    }
    result = {
        "max_concurrency": max_concurrency,
        "duration": duration,
        "completed": len(succeeded),
        "failed": failed,
        "total_input_tokens": input_tokens,
        # The longest prompt sets, with max_tokens, the most context one request can hold in the KV cache.
        "max_input_tokens": max((outcome.prompt_tokens for outcome in succeeded), default=0),
        "total_output_tokens": output_tokens,
        "request_throughput": len(succeeded) / duration,
        "output_throughput": output_tokens / duration,
        "total_token_throughput": (input_tokens + output_tokens) / duration,
    }
    for name in LATENCY_METRICS:
        result.update(distribution_ms(name, timings[name]))
    result["errors"] = summarize_errors(outcomes)
    result.update(finish_reasons(succeeded))
    # Every request's own latencies, so that a trial can pool a side's requests over its lifetimes and judge a
    # percentile on all of them (a p99 of one lifetime's few requests is its slowest one).
    result["latency_samples_ms"] = {name: [round(value * 1000.0, 2) for value in timings[name]]
                                    for name in ("ttft", "tpot", "e2el")}
    if windowed:
        result["window_s"] = duration / len(runs)
        result["cut_streams"] = sum(1 for outcome in outcomes if outcome.success and outcome.cut)
    if len(runs) > 1:
        per_repeat = [run_output_throughput(run) for run in runs]
        mean, half_width = mean_ci95(per_repeat)
        result["output_throughput_mean"] = mean
        result["output_throughput_ci95"] = half_width
        result["output_throughput_repeats"] = per_repeat
    return result
