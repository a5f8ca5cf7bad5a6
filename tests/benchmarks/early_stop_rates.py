#!/usr/bin/env python
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""How often the early stop of a trial's benchmark fires, and what it costs: simulated trials.

The server is simulated as in verdict_error_rates.py: each lifetime multiplies its speed by
1 + N(0, drift), each run by 1 + N(0, noise). The baseline's lifetime is benchmarked (R runs);
the variant's runs come one at a time, and after each from the second the sequential test
(plugins/module_utils/_sequential_stop.py, the one openai_benchmark asks) may stop them. Every
trial is also decided on all R runs of the variant without a stop (plugins/plugin_utils/_decision.py,
with H earlier baseline lifetimes), so that a stop can be compared with what the full benchmark
would have decided.

Per scenario it prints how often the stop fired, how many of those trials the full benchmark would
have kept (the stop's only real cost: a rollback instead of a keep), and the variant runs saved.

Usage: python tests/benchmarks/early_stop_rates.py [--trials 4000] [--seed 1] [--drift 1.0] [--noise 1.0]
         [--repeats 5] [--history 8] [--margin 8]
"""

from __future__ import annotations

import argparse
import pathlib
import random
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / ".cache" / "collections"))

# pylint: disable=wrong-import-position
from ansible_collections.llmops.vllm.plugins.module_utils._sequential_stop import losing  # noqa: E402
from ansible_collections.llmops.vllm.plugins.plugin_utils import _decision  # noqa: E402

LEVEL = 4


def lifetime_runs(rng, speed, settings):
    lifetime_speed = speed * (1.0 + rng.gauss(0.0, settings.drift / 100.0))
    return [lifetime_speed * (1.0 + rng.gauss(0.0, settings.noise / 100.0)) for dummy in range(settings.repeats)]


def level(runs):
    return {"max_concurrency": LEVEL, "output_throughput_repeats": runs, "output_throughput": sum(runs) / len(runs),
            "failed": 0}


def trial(rng, effect_pct, keep_when, settings):
    """(runs the variant measured before a stop or None, the full benchmark's decision)."""
    history = []
    for number in range(settings.history):
        runs = lifetime_runs(rng, 100.0, settings)
        history.append({"max_concurrency": LEVEL, "lifetime": "earlier-%d" % number,
                        "output_throughput": sum(runs) / len(runs)})
    baseline = lifetime_runs(rng, 100.0, settings)
    variant = lifetime_runs(rng, 100.0 * (1.0 + effect_pct / 100.0), settings)
    # As openai_benchmark does for a single level: no look after the last run, nothing is left to skip.
    stopped_at = next((count for count in range(2, settings.repeats)
                       if losing(baseline, variant[:count], keep_when, settings.margin)["losing"]), None)
    full = _decision.decide({"results": [level(variant)]}, {"results": [level(baseline)]}, history=history,
                            keep_when=keep_when, margin_pct=settings.margin,
                            min_runs=min(_decision.MIN_RUNS, settings.repeats), baseline_lifetime="current")
    return stopped_at, full["decision"]


def scenario(name, effect_pct, keep_when, settings, rng):
    stops = kept_anyway = saved = 0
    for dummy in range(settings.trials):
        stopped_at, decision = trial(rng, effect_pct, keep_when, settings)
        if stopped_at is not None:
            stops += 1
            saved += settings.repeats - stopped_at
            kept_anyway += decision == _decision.KEEP
    return ("%-34s stopped %5.1f%%  of those kept by the full benchmark %5.2f%%  variant runs saved %4.2f a trial"
            % (name, 100.0 * stops / settings.trials, 100.0 * kept_anyway / settings.trials,
               saved / settings.trials))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--trials", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--drift", type=float, default=1.0, help="lifetime-to-lifetime CV in percent")
    parser.add_argument("--noise", type=float, default=1.0, help="run-to-run CV within a lifetime in percent")
    parser.add_argument("--repeats", type=int, default=5, help="runs per side")
    parser.add_argument("--history", type=int, default=8, help="earlier baseline lifetimes in the store")
    parser.add_argument("--margin", type=float, default=_decision.DEFAULT_MARGIN_PCT)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print("drift %.1f%%  noise %.1f%%  repeats %d  history %d  margin %.1f%%  %d trials each"
          % (args.drift, args.noise, args.repeats, args.history, args.margin, args.trials))
    for name, effect, keep_when in (("A/A, keep_when=not_slower", 0.0, _decision.NOT_SLOWER),
                                    ("A/A, keep_when=faster", 0.0, _decision.FASTER),
                                    ("10% slower, keep_when=not_slower", -10.0, _decision.NOT_SLOWER),
                                    ("20% slower, keep_when=not_slower", -20.0, _decision.NOT_SLOWER),
                                    ("5% slower, keep_when=faster", -5.0, _decision.FASTER)):
        print(scenario(name, effect, keep_when, args, rng))
    return 0


if __name__ == "__main__":
    sys.exit(main())
