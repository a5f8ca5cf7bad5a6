# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import random

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils._benchmark_statistics import (
    t_critical,
    t_critical_95,
    welch_half_width,
)
from ansible_collections.llmops.vllm.plugins.module_utils._sequential_stop import MAX_LOOKS, losing

BASELINE = [100.0, 102.0, 98.0, 101.0, 99.0]


# Published two-sided 99% critical values of Student's t.
@pytest.mark.parametrize("degrees, expected", [(1, 63.657), (2, 9.925), (5, 4.032), (10, 3.169), (30, 2.750),
                                               (120, 2.617)])
def test_t_critical_at_99_percent(degrees, expected):
    assert t_critical(degrees, 0.99) == pytest.approx(expected, abs=1e-3)


def test_t_critical_rejects_what_has_no_value():
    with pytest.raises(ValueError, match="degrees of freedom"):
        t_critical(0, 0.95)
    with pytest.raises(ValueError, match="confidence"):
        t_critical(3, 1.0)


def test_welch_half_width_widens_with_the_confidence():
    first, second = [9.0, 10.0, 11.0], [19.0, 20.0, 22.0]
    assert welch_half_width(first, second, 0.99) > welch_half_width(first, second) > 0
    # Equal spreads and sizes: the Welch degrees of freedom are 2(n-1) = 4.
    assert welch_half_width([9.0, 10.0, 11.0], [19.0, 20.0, 21.0]) == pytest.approx(t_critical_95(4) * (2 / 3) ** 0.5)


def test_a_clearly_slower_variant_is_losing_with_the_figures():
    answer = losing(BASELINE, [80.0, 82.0], "not_slower", 5.0)

    assert answer["losing"] is True
    assert answer["look"] == 1
    assert (answer["variant_runs"], answer["baseline_runs"]) == (2, 5)
    assert answer["delta_pct"] == pytest.approx(-19.0)
    # Welch by hand: variances 2.5/5 and 2/2, 1 degree of freedom after rounding down.
    spread = (2.5 / 5 + 2.0 / 2) ** 0.5
    degrees = int((2.5 / 5 + 2.0 / 2) ** 2 / ((2.5 / 5) ** 2 / 4 + (2.0 / 2) ** 2 / 1))
    assert answer["upper_pct"] == pytest.approx(-19.0 + t_critical(degrees, 0.99) * spread)
    assert answer["upper_pct"] < -5.0
    assert answer["confidence_pct"] == 99.0
    assert "cannot be shown at most 5.0% slower" in answer["reason"]
    assert "-19.0%" in answer["reason"]


def test_overlapping_runs_go_on():
    answer = losing(BASELINE, [97.0, 103.0], "faster", 5.0)

    assert answer["losing"] is False
    assert answer["lower_pct"] < 0 < answer["upper_pct"]
    assert "may still be shown faster" in answer["reason"]


def test_not_slower_stops_only_beyond_the_margin():
    # About 3% slower and certainly so: losing for faster, not for a 5% margin; a 1% margin stops it.
    variant = [97.0, 97.2, 96.8, 97.1]
    tight_baseline = [100.0, 100.1, 99.9, 100.05, 99.95]
    assert losing(tight_baseline, variant, "faster", 5.0)["losing"] is True
    assert losing(tight_baseline, variant, "not_slower", 5.0)["losing"] is False
    assert losing(tight_baseline, variant, "not_slower", 1.0)["losing"] is True


def test_the_first_run_is_never_a_look():
    answer = losing(BASELINE, [10.0], "faster", 0.0)

    assert answer["losing"] is False
    assert answer["look"] is None
    assert answer["delta_pct"] is None


def test_no_look_beyond_the_cap():
    slow = [50.0, 51.0, 49.0, 50.5, 49.5, 50.0]
    assert len(slow) - 1 == MAX_LOOKS + 1
    assert losing(BASELINE, slow[:MAX_LOOKS + 1], "faster", 0.0)["losing"] is True
    beyond = losing(BASELINE, slow, "faster", 0.0)
    assert beyond["losing"] is False
    assert beyond["look"] is None
    assert "4 looks" in beyond["reason"]


def test_a_baseline_of_one_run_gives_no_interval():
    answer = losing([100.0], [10.0, 11.0], "faster", 0.0)
    assert answer["losing"] is False
    assert answer["upper_pct"] is None


def test_bad_rules_are_refused():
    with pytest.raises(ValueError, match="keep_when"):
        losing(BASELINE, [1.0, 2.0], "quicker", 5.0)
    with pytest.raises(ValueError, match="margin_pct"):
        losing(BASELINE, [1.0, 2.0], "faster", -1.0)


def a_a_stop_rate(trials, repeats, keep_when, margin_pct, seed):
    """How often the stop fires when variant and baseline are the same server (A/A), over simulated trials."""
    rng = random.Random(seed)
    fired = 0
    for dummy in range(trials):
        baseline = [rng.gauss(1000.0, 40.0) for dummy in range(repeats)]
        variant = []
        for dummy in range(repeats):
            variant.append(rng.gauss(1000.0, 40.0))
            if losing(baseline, variant, keep_when, margin_pct)["losing"]:
                fired += 1
                break
    return fired / trials


def test_a_a_trials_rarely_stop():
    # Five runs a side gives the full four looks; with keep_when=faster every look can fire. Bonferroni bounds
    # the rate at 4% (one-sided, about 2%); the seeded simulation measures it.
    rate = a_a_stop_rate(2000, 5, "faster", 0.0, seed=20261202)
    assert rate < 0.025
    # The test is not dead: a real 10% loss with the same noise stops most trials.
    rng = random.Random(7)
    stopped = 0
    for dummy in range(200):
        baseline = [rng.gauss(1000.0, 40.0) for dummy in range(5)]
        variant = [rng.gauss(900.0, 40.0) for dummy in range(5)]
        stopped += any(losing(baseline, variant[:count], "faster", 0.0)["losing"] for count in range(2, 6))
    assert stopped / 200 > 0.5


def test_the_spread_of_baseline_lifetimes_widens_the_look():
    # 12% down with tight runs: losing on the runs alone, but not where lifetimes of the baseline differ by 6%
    # (as on the mock node): an A/A trial's second lifetime can come out that much slower.
    tight_baseline = [100.0, 100.2, 99.8, 100.1, 99.9]
    variant = [88.0, 88.1, 87.9]
    alone = losing(tight_baseline, variant, "not_slower", 8.0)
    assert alone["losing"] is True
    assert alone["between_half_width_pct"] is None

    spread = losing(tight_baseline, variant, "not_slower", 8.0, lifetime_cv_pct=6.0, lifetimes=5)
    assert spread["losing"] is False
    assert spread["between_half_width_pct"] == pytest.approx(t_critical(4, 0.99) * 2.0 ** 0.5 * 6.0)
    assert spread["upper_pct"] == pytest.approx(spread["delta_pct"] + spread["between_half_width_pct"])
    assert "from how the baseline's lifetimes differ" in spread["reason"]
    # One lifetime says nothing about the spread; a certain loss stays certain with a small spread.
    assert losing(tight_baseline, variant, "not_slower", 8.0, lifetime_cv_pct=6.0, lifetimes=1)["losing"] is True
    assert losing(tight_baseline, [50.0, 50.5], "not_slower", 8.0, lifetime_cv_pct=2.0, lifetimes=4)["losing"] is True
