# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""One look of a trial whose unit is the server lifetime: keep, roll back, or measure another pair of lifetimes.

A server's speed varies more from one start to the next than from one run to the next inside a start (Georges
et al., OOPSLA 2007; Kalibera and Jones, ISMM 2013), so the lifetime is the unit of analysis and the runs inside
one are averaged before anything else. A trial alternates warm restarts of the baseline and of the variant, and
after every pair from the second on it looks once:

- Each lifetime's figure is the mean of its runs' output throughputs on a log scale, so that a change is a ratio.
- The change is the mean of the variant's lifetimes against the mean of the baseline's, both of this trial.
- The baseline's variance between lifetimes is estimated from this trial's baseline lifetimes together with the
  stored lifetimes of the same identity (history); the variant's from its own lifetimes alone, but never taken
  as smaller than the baseline's. The two are combined with Welch-Satterthwaite degrees of freedom, and the interval is at ``confidence`` (99% by default,
  as every pair adds a look).

With d the change in percent, [L, U] its interval and m the margin, the rules, in order:

- slower: U < -m; the variant is shown to be more than m percent slower: roll back.
- keep: K >= -m (keep_when=not_slower) or K > 0 (keep_when=faster), where K is the lower end of the interval at
  ``keep_confidence`` (99.5%): keeping a slower variant is the costly error, and every look is another chance to
  keep one by luck, so the bound that keeps is stricter than the one that rolls back.
- futility: d itself is on the losing side (d < -m, or d <= 0 for keep_when=faster): more pairs would most
  likely end in a rollback, so roll back now.
- inconclusive: each side has max_lifetimes lifetimes and none of the above holds: roll back, the safe answer,
  and say how many more pairs would probably decide it.
- another pair: otherwise.

No rule fires before each side has min_lifetimes (2) lifetimes: a single lifetime shows nothing of the spread
between lifetimes, and an interval within one lifetime never decides. A trial of one lifetime a side
(max_lifetimes 1) has its one look after the first pair, with the baseline's spread taken from its stored lifetimes
alone; without any stored lifetime nothing shows how much lifetimes differ, and it rolls back as inconclusive.
"""

from __future__ import annotations

import functools
import math
import statistics
import typing as t
from collections.abc import Iterable, Sequence

from ansible_collections.llmops.vllm.plugins.module_utils._benchmark_statistics import t_critical

KEEP = 'keep'
ROLL_BACK = 'roll_back'
ANOTHER_PAIR = 'another_pair'
NOT_SLOWER = 'not_slower'
FASTER = 'faster'
KEEP_WHEN = (NOT_SLOWER, FASTER)
MIN_LIFETIMES = 2
LOOK_CONFIDENCE = 0.99
# Chosen with tests/benchmarks/verdict_error_rates.py: at 99% a variant 10% slower whose starts drift 22% was kept
# in 1.1-1.4% of trials (over 7 looks); at 99.5% in 0.8%, while an A/A trial at 3% drift still rolls back in 1.7%.
KEEP_CONFIDENCE = 0.995
# A lifetime this many robust deviations (median absolute deviation, scaled) away from its side's median is
# flagged as an outlier (Iglewicz and Hoaglin's modified z-score).
OUTLIER_SCORE = 3.5
# The least robust deviation assumed, on the log scale: 1%.
OUTLIER_FLOOR = 0.01
# A variant whose lifetimes spread at least this many times as much as the baseline's is unstable between starts.
UNSTABLE_RATIO = 2.0


class LifetimeVerdictError(ValueError):
    """The inputs cannot be judged."""


def lifetime_figure(runs: Iterable[float]) -> float:
    """One lifetime's figure: the mean of the natural logs of its runs' output throughputs (tokens/s)."""
    values = [float(value) for value in runs]
    if not values:
        raise LifetimeVerdictError('a lifetime needs at least one run')
    if any(not math.isfinite(value) or value <= 0 for value in values):
        raise LifetimeVerdictError(f'run throughputs must be positive numbers, got {values}')
    return sum(math.log(value) for value in values) / len(values)


@functools.lru_cache(maxsize=4096)
def _t_floor(df_tenths: int, confidence: float) -> float:
    return t_critical(max(1.0, df_tenths / 10.0), confidence)


def _t(df: float, confidence: float) -> float:
    """Student's t at df rounded down to a tenth (the wider interval), so that a few values recur."""
    return _t_floor(min(2000, int(df * 10)), confidence)


def _percent(log_ratio: float) -> float:
    return 100.0 * (math.exp(log_ratio) - 1.0)


def _log_margin(margin_pct: float) -> float:
    return math.log(1.0 - margin_pct / 100.0)


def _keep_words(confidence: float) -> str:
    return f'{100 * max(confidence, KEEP_CONFIDENCE):g}%'


def outliers(figures: Sequence[float]) -> list[int]:
    """Indexes of the lifetimes whose modified z-score exceeds OUTLIER_SCORE (four lifetimes or more).

    The deviation is never taken as less than OUTLIER_FLOOR: three lifetimes within a fraction of a percent would
    otherwise make a fourth one percent away an outlier.
    """
    if len(figures) < 4:
        return []
    median = statistics.median(figures)
    deviation = max(statistics.median(abs(value - median) for value in figures), OUTLIER_FLOOR)
    return [index for index, value in enumerate(figures) if 0.6745 * abs(value - median) / deviation > OUTLIER_SCORE]


def first_look(max_lifetimes: int) -> int:
    """The pair after which a trial looks first: the second, or the one pair of a trial of one lifetime a side."""
    return 1 if max_lifetimes == 1 else MIN_LIFETIMES


def _interval(baseline: Sequence[float], variant: Sequence[float], history: Sequence[float],
              confidence: float) -> dict[str, float]:
    """The change (log scale), its half-width and degrees of freedom, and each side's spread."""
    pooled = list(baseline) + list(history)
    var_b = statistics.variance(pooled)
    # One lifetime of the variant shows nothing of its own spread: it is taken as the baseline's.
    var_v = statistics.variance(variant) if len(variant) > 1 else var_b
    n, m = len(baseline), len(variant)
    # Two or three lifetimes of the variant that happen to lie close together must not narrow the interval
    # below what the baseline's starts vary: the variant runs on the same node with more moving parts.
    part_b, part_v = var_b / n, max(var_v, var_b) / m
    variance = part_b + part_v
    change = statistics.fmean(variant) - statistics.fmean(baseline)
    if variance <= 0:
        return dict(change=change, half_width=0.0, keep_half_width=0.0, df=float(len(pooled) - 1 + max(m - 1, 0)),
                    sd_b=0.0, sd_v=0.0)
    if m < 2:
        # Both parts come from the baseline's spread, estimated from the pooled lifetimes alone.
        df = float(len(pooled) - 1)
    else:
        denominator = (part_b ** 2) / (len(pooled) - 1) + (part_v ** 2) / (m - 1)
        df = variance ** 2 / denominator if denominator > 0 else float(len(pooled) - 1 + m - 1)
    return dict(change=change, half_width=_t(df, confidence) * math.sqrt(variance),
                keep_half_width=_t(df, max(confidence, KEEP_CONFIDENCE)) * math.sqrt(variance), df=df,
                sd_b=math.sqrt(var_b), sd_v=math.sqrt(var_v))


def pairs_to_decide(baseline: Sequence[float], variant: Sequence[float], history: Sequence[float],
                    margin_pct: float, keep_when: str, confidence: float = LOOK_CONFIDENCE,
                    limit: int = 50) -> int | None:
    """How many more pairs of lifetimes would decide, if the change and both spreads stayed as measured.

    None when no number of pairs would: the change sits between the two bounds that decide (for example a
    change of -3% against a margin of 8% with keep_when=faster).
    """
    if len(baseline) + len(history) < 2 or not variant:
        return None
    now = _interval(baseline, variant, history, confidence)
    change, margin = now['change'], _log_margin(margin_pct)
    bound = 0.0 if keep_when == FASTER else margin
    wins = change > bound
    if not wins and change >= margin:
        return None
    n, m, pooled = len(baseline), len(variant), len(baseline) + len(history)
    for more in range(1, limit + 1):
        part_b, part_v = now['sd_b'] ** 2 / (n + more), max(now['sd_v'], now['sd_b']) ** 2 / (m + more)
        variance = part_b + part_v
        if variance <= 0:
            return more
        denominator = part_b ** 2 / (pooled + more - 1) + part_v ** 2 / max(m + more - 1, 1)
        df = variance ** 2 / denominator if denominator > 0 else float(pooled + m + 2 * more - 2)
        level = max(confidence, KEEP_CONFIDENCE) if wins else confidence
        half_width = _t(df, level) * math.sqrt(variance)
        if (wins and change - half_width >= bound) or (not wins and change + half_width < margin):
            return more
    return None


def look(baseline_runs: Sequence[Sequence[float]], variant_runs: Sequence[Sequence[float]],
         history: Sequence[float] = (), margin_pct: float = 8.0, keep_when: str = NOT_SLOWER,
         max_lifetimes: int = 6, confidence: float = LOOK_CONFIDENCE) -> dict[str, t.Any]:
    """Decide after one more pair of lifetimes.

    baseline_runs and variant_runs hold, per lifetime of this trial in the order measured, its runs' output
    throughputs in tokens/s. history holds the figures (lifetime_figure) of the baseline's stored lifetimes of the
    same identity. Returns action (keep, roll_back, another_pair), rule, the change and its interval in percent,
    the degrees of freedom, the lifetimes a side, the flags, and the reason in one sentence.
    """
    if keep_when not in KEEP_WHEN:
        raise LifetimeVerdictError(f'keep_when must be one of {", ".join(KEEP_WHEN)}, got {keep_when!r}')
    if not 0 < margin_pct < 100:
        raise LifetimeVerdictError(f'margin_pct must lie between 0 and 100, got {margin_pct!r}')
    if isinstance(max_lifetimes, bool) or not isinstance(max_lifetimes, int) or max_lifetimes < 1:
        raise LifetimeVerdictError(f'max_lifetimes must be a whole number of at least 1, got {max_lifetimes!r}')
    baseline = [lifetime_figure(runs) for runs in baseline_runs]
    variant = [lifetime_figure(runs) for runs in variant_runs]
    stored = [float(value) for value in history]
    answer: dict[str, t.Any] = dict(baseline_lifetimes=len(baseline), variant_lifetimes=len(variant),
                                    history_lifetimes=len(stored), margin_pct=margin_pct, keep_when=keep_when,
                                    confidence=confidence, change_pct=None, low_pct=None, high_pct=None,
                                    keep_low_pct=None, df=None,
                                    outliers={'baseline': outliers(baseline), 'variant': outliers(variant)},
                                    unstable=False, pairs_to_decide=None)
    fewest = first_look(max_lifetimes)
    if len(baseline) < fewest or len(variant) < fewest:
        answer.update(action=ANOTHER_PAIR, rule='too_few',
                      reason=f'{len(baseline)} baseline and {len(variant)} variant lifetime(s): at least '
                             f'{fewest} a side before any look')
        return answer
    if len(baseline) + len(stored) < 2:
        # One lifetime a side and no stored lifetime of the baseline: nothing shows how much starts differ.
        answer.update(action=ROLL_BACK, rule='inconclusive', pairs_to_decide=None,
                      reason='inconclusive after one lifetime a side: the node\'s history holds no earlier lifetime of '
                             'this baseline, so nothing shows how much its lifetimes differ; calibrate the node '
                             '(ansible-playbook llmops.vllm.calibrate) or measure at least 2 lifetimes a side '
                             '(vllm_switch_max_lifetimes)',
                      change_pct=round(_percent(statistics.fmean(variant) - statistics.fmean(baseline)), 2))
        return answer
    figures = _interval(baseline, variant, stored, confidence)
    change, half_width, margin = figures['change'], figures['half_width'], _log_margin(margin_pct)
    low, high = change - half_width, change + half_width
    keep_low = change - figures['keep_half_width']
    answer.update(change_pct=round(_percent(change), 2), low_pct=round(_percent(low), 2),
                  high_pct=round(_percent(high), 2), keep_low_pct=round(_percent(keep_low), 2),
                  df=round(figures['df'], 2),
                  unstable=len(variant) >= 3 and figures['sd_v'] >= UNSTABLE_RATIO * figures['sd_b'] > 0)
    shown = (f'{answer["change_pct"]:+.1f}% ({round(100 * confidence)}% interval {answer["low_pct"]:+.1f}% to '
             f'{answer["high_pct"]:+.1f}%) over {len(baseline)} baseline and {len(variant)} variant lifetimes'
             f'{f" and {len(stored)} stored" if stored else ""}')
    if high < margin:
        answer.update(action=ROLL_BACK, rule='slower', reason=f'slower: {shown}; more than {margin_pct:g}% slower')
    elif keep_when == NOT_SLOWER and keep_low >= margin:
        answer.update(action=KEEP, rule=NOT_SLOWER,
                      reason=f'not slower: {shown}; at most {margin_pct:g}% slower '
                             f'({_keep_words(confidence)} lower bound {answer["keep_low_pct"]:+.1f}%)')
    elif keep_when == FASTER and keep_low > 0:
        answer.update(action=KEEP, rule=FASTER,
                      reason=f'faster: {shown} ({_keep_words(confidence)} lower bound {answer["keep_low_pct"]:+.1f}%)')
    elif change < margin or (keep_when == FASTER and change <= 0):
        answer.update(action=ROLL_BACK, rule='futility',
                      reason=f'futility: {shown}; the change itself is on the losing side, so more pairs would '
                             f'most likely end in a rollback')
    elif len(baseline) >= max_lifetimes and len(variant) >= max_lifetimes:
        more = pairs_to_decide(baseline, variant, stored, margin_pct, keep_when, confidence)
        answer.update(action=ROLL_BACK, rule='inconclusive', pairs_to_decide=more,
                      reason=f'inconclusive after {max_lifetimes} lifetimes a side: {shown}; '
                             + (f'about {more} more pair(s) would probably decide it' if more
                                else 'no number of pairs would decide it at this change'))
    else:
        answer.update(action=ANOTHER_PAIR, rule='undecided',
                      pairs_to_decide=pairs_to_decide(baseline, variant, stored, margin_pct, keep_when, confidence),
                      reason=f'undecided: {shown}')
    if answer['unstable']:
        answer['reason'] += '; the variant is unstable between starts (its lifetimes spread twice as much as the baseline\'s)'
    return answer
