# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The decision's seeded error rates, at a trial count that fits make test: the same simulation as
tests/benchmarks/verdict_error_rates.py (whose full table takes minutes), run through the decision function
the role calls. A change to the rule that makes it roll back A/A trials, keep slower variants or miss real
gains fails here, not only in the benchmark script nobody reran."""

from __future__ import annotations

import argparse
import importlib.util
import math
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
    values = dict(trials=TRIALS, drift=1.0, noise=1.0, repeats=verdict_error_rates._decision.MIN_RUNS, history=8,
                  margin=verdict_error_rates._decision.DEFAULT_MARGIN_PCT, run_seconds=120.0)
    values.update(overrides)
    return argparse.Namespace(**values)


def slack(rate):
    """Three binomial standard errors at the target's rate: a seeded count of TRIALS trials is itself a sample."""
    return 3 * math.sqrt(rate * (1 - rate) / TRIALS)


@pytest.mark.parametrize('seed', [1, 2])
def test_error_rates_meet_their_targets_at_the_default_settings(seed):
    figures = verdict_error_rates.rates(settings(), seed)
    targets = verdict_error_rates.TARGETS
    assert figures['aa_false_rollback'] <= targets['aa_false_rollback'] + slack(targets['aa_false_rollback'])
    assert figures['slower_kept'] <= targets['slower_kept'] + slack(targets['slower_kept'])
    assert figures['faster_power'] >= targets['faster_power'] - slack(targets['faster_power'])


def test_a_noisier_server_makes_the_rule_no_likelier_to_keep_a_slower_variant():
    # Lifetimes that drift three times as much cost A/A trials (inconclusive, docs/benchmarking.md), not keeps of
    # a slower variant: the interval widens with the history's spread.
    figures = verdict_error_rates.rates(settings(drift=3.0, noise=2.0), 3)
    target = verdict_error_rates.TARGETS['slower_kept']
    assert figures['slower_kept'] <= target + slack(target)


def test_the_simulation_can_miss_a_target():
    # The check is not vacuous: with no margin, no history and one run a side, the rule errs past its targets.
    figures = verdict_error_rates.rates(settings(drift=11.0, noise=9.0, repeats=1, history=0, margin=0.0), 1)
    assert not verdict_error_rates.met(figures)
