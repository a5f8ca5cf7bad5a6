# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The trial's seeded error rates, at a trial count that fits make test: the same simulation of the whole trial by
lifetimes as tests/benchmarks/verdict_error_rates.py (whose full table takes minutes), run through the look the
role's decision calls. A change to the rule that makes it roll back A/A trials, keep slower variants or miss real
gains fails here, not only in the benchmark script nobody reran."""

from __future__ import annotations

import argparse
import importlib.util
import math
import random
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / 'benchmarks' / 'verdict_error_rates.py'
SPEC = importlib.util.spec_from_file_location('verdict_error_rates', SCRIPT)
verdict_error_rates = importlib.util.module_from_spec(SPEC)
sys.modules['verdict_error_rates'] = verdict_error_rates
SPEC.loader.exec_module(verdict_error_rates)

TRIALS = 400


def settings(**overrides):
    values = dict(trials=TRIALS, noise=1.0, runs=1, margin=8.0, max_lifetimes=10, cold=30.0, warm=5.0, bench=0.0,
                  budget=0.0, window_s=0.0, concurrency=1, answer_tokens=2000.0, answer_cv=1.0, stream_tok_s=74.0,
                  ttft_s=1.0)
    values.update(overrides)
    return argparse.Namespace(**values)


def slack(rate):
    """Three binomial standard errors at the target's rate: a seeded count of TRIALS trials is itself a sample."""
    return 3 * math.sqrt(rate * (1 - rate) / TRIALS)


@pytest.mark.parametrize('seed', [1, 2])
def test_a_fresh_node_at_three_percent_drift_meets_every_target(seed):
    result = verdict_error_rates.row(random.Random(seed), settings(), drift_pct=3.0, history=0)
    targets = verdict_error_rates.TARGETS
    assert result['aa_false_rollback'] <= targets['aa_false_rollback'] + slack(targets['aa_false_rollback'])
    assert result['slower_kept'] <= targets['slower_kept'] + slack(targets['slower_kept'])
    assert result['faster_power'] >= targets['faster_power'] - slack(targets['faster_power'])
    assert 2 <= result['lifetimes'] <= verdict_error_rates.MAX_MEAN_LIFETIMES
    # A cold load of the variant and at least three warm restarts.
    assert result['dark_minutes'] >= 30 + 3 * 5


def test_lifetimes_that_drift_far_more_than_the_margin_cost_rollbacks_not_keeps_of_a_slower_variant():
    # Eleven percent drift, the variant twice that: the safe failure is an inconclusive rollback.
    result = verdict_error_rates.row(random.Random(3), settings(), drift_pct=11.0, history=0, variant_drift_ratio=2.0)
    target = verdict_error_rates.TARGETS['slower_kept']
    assert result['slower_kept'] <= target + slack(target)
    assert result['aa_false_rollback'] > 0.5


def test_stored_lifetimes_of_the_baseline_shorten_the_trial():
    fresh = verdict_error_rates.row(random.Random(4), settings(), drift_pct=1.5, history=0)
    known = verdict_error_rates.row(random.Random(4), settings(), drift_pct=1.5, history=8)
    assert known['lifetimes'] < fresh['lifetimes']


def test_the_simulation_can_miss_a_target():
    # The check is not vacuous: a 1% margin at 5% drift cannot be resolved in ten lifetimes a side.
    result = verdict_error_rates.row(random.Random(1), settings(margin=1.0), drift_pct=5.0, history=0)
    assert verdict_error_rates.missed(result, 3.0, 0, False)


def test_the_budget_cuts_a_trial_before_another_pair_would_pass_it_and_that_costs_rollbacks():
    # Five-minute benchmarks: a pair after the first costs 20 minutes, the first 45. A budget of 100 minutes leaves
    # room for three pairs and the rollback's restart, no more.
    free = verdict_error_rates.row(random.Random(5), settings(bench=5.0), drift_pct=3.0, history=0)
    cut = verdict_error_rates.row(random.Random(5), settings(bench=5.0, budget=100.0), drift_pct=3.0, history=0)
    assert cut['lifetimes'] <= 3 and free['lifetimes'] > cut['lifetimes']
    assert cut['dark_minutes'] <= 100
    assert cut['aa_false_rollback'] > free['aa_false_rollback']


def test_a_window_s_tokens_vary_with_the_answers_that_begin_in_it_and_lose_their_prefills():
    rng = random.Random(6)
    one = [verdict_error_rates.window_factor(rng, settings(window_s=60.0)) for dummy in range(400)]
    eight = [verdict_error_rates.window_factor(rng, settings(window_s=60.0, concurrency=8)) for dummy in range(400)]
    # An answer of 2,000 tokens at 74 tok/s takes 27 s after its 1-s prefill: about 3.6% of a stream's time is prefill.
    assert 0.95 < sum(one) / len(one) < 0.98
    spread = [max(values) - min(values) for values in (one, eight)]
    # Eight streams average out what one stream's few answers do not.
    assert spread[1] < spread[0]
    assert verdict_error_rates.window_factor(rng, settings()) == 1.0
