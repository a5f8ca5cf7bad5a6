# This module_utils file is private to the llmops.vllm collection; it may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Whether a variant is already certainly losing at one concurrency level, before its last run.

A trial's verdict compares the variant's runs of a level with the baseline's at 95%. Looking at
the runs after every one of them and stopping at the first look that shows the variant losing
would test several times and so err more often than 5%. Each look therefore uses Welch's
interval at 99% (two-sided): by Bonferroni's inequality, four looks err together at most
4 x 1% = 4%, within the verdict's 5%.

Losing means the whole interval of the change in output throughput, in percent of the baseline's
mean, lies where the verdict could not keep the variant: below 0 for keep_when=faster (it cannot
be shown faster), below -margin_pct for keep_when=not_slower (it is shown to be slower by more
than the margin). Even the point estimate is then on the losing side.

The baseline and the variant run in two server lifetimes, which differ by more than the runs inside
one (on the mock node by about 11%). Where the baseline's earlier lifetimes are known (the verdict
reads them from the results store), their spread widens the interval as it widens the verdict's: at
99%, t(0.995, k - 1) x sqrt(2) x their coefficient of variation, when that is wider than Welch's.
Without it an A/A trial whose second lifetime came out 10% slower would be stopped as slower.
"""

from __future__ import annotations

import math

from ansible_collections.llmops.vllm.plugins.module_utils._benchmark_statistics import t_critical, welch_half_width

# The error of the whole sequence stays within 5% only for this many looks (Bonferroni: 4 x 1%). A look
# comes after each run of the variant from the second on, so runs 2 to 5 of a level are looked at; later
# runs are not, and the level then runs to its end for the verdict to judge.
MAX_LOOKS = 4
LOOK_CONFIDENCE = 0.99

FASTER = "faster"
NOT_SLOWER = "not_slower"
KEEP_WHEN = (NOT_SLOWER, FASTER)


def lifetime_half_width_pct(lifetime_cv_pct, lifetimes, confidence=LOOK_CONFIDENCE):
    """Half-width, in percent, of the interval of the difference of two lifetimes; None below two lifetimes."""
    if lifetime_cv_pct is None or lifetimes is None or int(lifetimes) < 2:
        return None
    return t_critical(int(lifetimes) - 1, confidence) * math.sqrt(2.0) * float(lifetime_cv_pct)


def losing(baseline_runs, variant_runs, keep_when, margin_pct, lifetime_cv_pct=None, lifetimes=None):
    """Whether the variant is already certainly losing, with the figures that say why.

    baseline_runs and variant_runs are output tokens/s per run of one level, the variant's so far.
    lifetime_cv_pct and lifetimes: the coefficient of variation of the baseline's lifetime means and
    how many lifetimes it comes from (this trial's included), as the verdict computes them; None when
    unknown, and then only the noise within the two lifetimes widens the interval.
    Returns a dict: ``losing`` (bool), ``look`` (1 for the variant's second run; None when no look
    is taken), ``variant_runs`` and ``baseline_runs`` (counts), ``delta_pct``, ``lower_pct`` and
    ``upper_pct`` (the change and its interval, in percent of the baseline's mean; None when not
    computed), ``threshold_pct`` (the bound the upper end must fall below), ``confidence_pct`` and
    ``reason`` (a sentence).
    """
    if keep_when not in KEEP_WHEN:
        raise ValueError("keep_when must be one of %s, got %r" % (", ".join(KEEP_WHEN), keep_when))
    margin_pct = float(margin_pct)
    if not math.isfinite(margin_pct) or margin_pct < 0:
        raise ValueError("margin_pct must be a finite number of at least 0, got %r" % (margin_pct,))
    baseline_runs = [float(value) for value in baseline_runs]
    variant_runs = [float(value) for value in variant_runs]
    threshold = 0.0 if keep_when == FASTER else -margin_pct
    answer = {
        "losing": False,
        "look": None,
        "variant_runs": len(variant_runs),
        "baseline_runs": len(baseline_runs),
        "delta_pct": None,
        "lower_pct": None,
        "upper_pct": None,
        "threshold_pct": threshold,
        "confidence_pct": LOOK_CONFIDENCE * 100.0,
        "keep_when": keep_when,
        "margin_pct": margin_pct,
        "between_half_width_pct": lifetime_half_width_pct(lifetime_cv_pct, lifetimes),
    }
    look = len(variant_runs) - 1
    if look < 1:
        answer["reason"] = "no look before the variant's second run"
        return answer
    if look > MAX_LOOKS:
        answer["reason"] = "no look after the variant's run %d: the error bound holds for %d looks" % (
            MAX_LOOKS + 1, MAX_LOOKS)
        return answer
    answer["look"] = look
    baseline_mean = math.fsum(baseline_runs) / len(baseline_runs) if baseline_runs else 0.0
    half_width = welch_half_width(variant_runs, baseline_runs, LOOK_CONFIDENCE)
    if half_width is None or baseline_mean <= 0:
        answer["reason"] = "no interval: the baseline needs at least two runs with output tokens"
        return answer
    delta = (math.fsum(variant_runs) / len(variant_runs) - baseline_mean) * 100.0 / baseline_mean
    spread = max(half_width * 100.0 / baseline_mean, answer["between_half_width_pct"] or 0.0)
    answer.update(delta_pct=delta, lower_pct=delta - spread, upper_pct=delta + spread)
    answer["losing"] = answer["upper_pct"] < threshold
    answer["reason"] = describe(answer)
    return answer


def describe(answer):
    """The sequential test's figures in one sentence, for a message or a decision's reason."""
    between = answer.get("between_half_width_pct")
    figures = ("%d runs of the variant against %d of the baseline: output tok/s %+.1f%% (%g%% interval %+.1f%% to"
               " %+.1f%%%s, look %d of at most %d)"
               % (answer["variant_runs"], answer["baseline_runs"], answer["delta_pct"], answer["confidence_pct"],
                  answer["lower_pct"], answer["upper_pct"],
                  "" if between is None else ", at least +/-%.1f%% from how the baseline's lifetimes differ" % between,
                  answer["look"], MAX_LOOKS))
    wanted = "faster" if answer["keep_when"] == FASTER else "at most %.1f%% slower" % answer["margin_pct"]
    if answer["losing"]:
        return "%s; the interval ends below %+.1f%%, so it cannot be shown %s" % (
            figures, answer["threshold_pct"], wanted)
    return "%s; the interval reaches %+.1f%%, so it may still be shown %s" % (
        figures, answer["threshold_pct"], wanted)
