#!/usr/bin/env python
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""How often the keep-or-roll-back rule errs: simulated trials against a server of known speed.

Every trial is what the switch role does on a node: the baseline's current lifetime is
benchmarked (R runs), the variant is started (a new lifetime) and benchmarked (R runs), and
llmops.vllm's decision function (plugins/plugin_utils/_decision.py, the one the role calls)
decides, with the stored history of the baseline's H earlier lifetimes. The simulated server's
speed is set per variant; each lifetime multiplies it by 1 + N(0, drift) (what changes from one
start to the next: memory placement, clocks, compiled graphs), and each run by 1 + N(0, noise).

Scenarios, each over --trials trials:
- A/A: the variant is the baseline under another name; a rollback is a false rollback.
- 10% slower: a keep is the costly error.
- 10% faster, keep_when=faster: a keep is the power to find a real gain.

Usage: python tests/benchmarks/verdict_error_rates.py [--trials 4000] [--seed 1]
         [--drift 1.5] [--noise 1.0] [--repeats 5] [--history 8] [--margin 5] [--run-seconds 120]
Prints the rates for the given noise levels and, with --sweep, a table over noise levels, repeats
and history sizes. Exits 1 when a target is missed at the given settings.
"""

from __future__ import annotations

import argparse
import pathlib
import random
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / ".cache" / "collections"))

from ansible_collections.llmops.vllm.plugins.plugin_utils import _decision  # noqa: E402  pylint: disable=wrong-import-position

TARGETS = {"aa_false_rollback": 0.05, "slower_kept": 0.01, "faster_power": 0.90}
LEVEL = 4


def lifetime_runs(rng, speed, drift_pct, noise_pct, repeats):
    """One server lifetime's benchmark: R runs around the lifetime's own speed."""
    lifetime_speed = speed * (1.0 + rng.gauss(0.0, drift_pct / 100.0))
    return [lifetime_speed * (1.0 + rng.gauss(0.0, noise_pct / 100.0)) for dummy in range(repeats)]


def level(runs):
    return {"max_concurrency": LEVEL, "output_throughput_repeats": runs, "output_throughput": sum(runs) / len(runs),
            "failed": 0}


def trial(rng, effect_pct, keep_when, settings):
    """Run one simulated trial; return the decision function's answer."""
    speed = 100.0
    history = []
    for number in range(settings.history):
        runs = lifetime_runs(rng, speed, settings.drift, settings.noise, settings.repeats)
        history.append({"max_concurrency": LEVEL, "lifetime": "earlier-%d" % number,
                        "output_throughput": sum(runs) / len(runs)})
    baseline = level(lifetime_runs(rng, speed, settings.drift, settings.noise, settings.repeats))
    variant = level(lifetime_runs(rng, speed * (1.0 + effect_pct / 100.0), settings.drift, settings.noise,
                                  settings.repeats))
    return _decision.decide({"results": [variant]}, {"results": [baseline]}, history=history, keep_when=keep_when,
                            margin_pct=settings.margin, min_runs=min(_decision.MIN_RUNS, settings.repeats),
                            baseline_lifetime="current")


def rates(settings, seed):
    rng = random.Random(seed)
    counts = {"aa_false_rollback": 0, "slower_kept": 0, "faster_power": 0}
    for dummy in range(settings.trials):
        if trial(rng, 0.0, _decision.NOT_SLOWER, settings)["decision"] != _decision.KEEP:
            counts["aa_false_rollback"] += 1
        if trial(rng, -10.0, _decision.NOT_SLOWER, settings)["decision"] == _decision.KEEP:
            counts["slower_kept"] += 1
        if trial(rng, 10.0, _decision.FASTER, settings)["decision"] == _decision.KEEP:
            counts["faster_power"] += 1
    return {name: count / settings.trials for name, count in counts.items()}


def met(figures):
    return (figures["aa_false_rollback"] <= TARGETS["aa_false_rollback"]
            and figures["slower_kept"] <= TARGETS["slower_kept"]
            and figures["faster_power"] >= TARGETS["faster_power"])


def line(settings, figures):
    cost_min = 2 * settings.repeats * settings.run_seconds / 60.0
    return ("drift %4.1f%%  noise %4.1f%%  repeats %d  history %2d  margin %4.1f%%  |  A/A false rollback %5.1f%%"
            "  10%%-slower kept %5.2f%%  10%%-faster power %5.1f%%  |  benchmark %3.0f min/trial  %s"
            % (settings.drift, settings.noise, settings.repeats, settings.history, settings.margin,
               100 * figures["aa_false_rollback"], 100 * figures["slower_kept"], 100 * figures["faster_power"],
               cost_min, "met" if met(figures) else "MISSED"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--trials", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--drift", type=float, default=1.0, help="lifetime-to-lifetime CV in percent")
    parser.add_argument("--noise", type=float, default=1.0, help="run-to-run CV within a lifetime in percent")
    parser.add_argument("--repeats", type=int, default=_decision.MIN_RUNS, help="runs per side")
    parser.add_argument("--history", type=int, default=8, help="earlier baseline lifetimes in the store")
    parser.add_argument("--margin", type=float, default=_decision.DEFAULT_MARGIN_PCT)
    parser.add_argument("--run-seconds", type=float, default=120.0, help="seconds one benchmark run takes")
    parser.add_argument("--sweep", action="store_true", help="also print a table over noise, repeats, history")
    args = parser.parse_args()

    figures = rates(args, args.seed)
    print("Targets: A/A false rollback <= 5%%, 10%%-slower kept <= 1%%, 10%%-faster power >= 90%% "
          "(keep_when=faster), %d trials each." % args.trials)
    print(line(args, figures))
    if args.sweep:
        for drift, noise in ((0.0, 1.0), (1.0, 1.0), (1.5, 1.0), (3.0, 2.0), (11.0, 9.0)):
            for repeats in (3, 5):
                for history in (0, 3, 8, 20):
                    settings = argparse.Namespace(**dict(vars(args), drift=drift, noise=noise, repeats=repeats,
                                                         history=history))
                    print(line(settings, rates(settings, args.seed)))
    return 0 if met(figures) else 1


if __name__ == "__main__":
    sys.exit(main())
