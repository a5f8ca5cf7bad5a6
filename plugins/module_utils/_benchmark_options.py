# This module_utils file is private to the llmops.vllm collection; it may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The options of llmops.vllm.openai_benchmark and the rules between them, declared once.

The module checks its arguments with them on the host that runs the benchmark; the controller
checks every workload of a trial with the same declarations before any host is contacted, so that
a concurrency of 0 fails in seconds instead of after the baseline has stopped.
"""

from __future__ import annotations

import math

ARGUMENT_SPEC = dict(
    base_url=dict(type="str", required=True),
    model=dict(type="str", required=True),
    api_key=dict(type="str", no_log=True),
    endpoint=dict(type="str", default="completions", choices=["completions", "chat"]),
    prompt_set=dict(type="str", default="novel_reasoning"),
    context_tokens=dict(type="int", no_log=False),
    chat_template_kwargs=dict(type="dict"),
    tools=dict(type="list", elements="dict"),
    tool_choice=dict(type="str", choices=["auto", "none", "required"]),
    num_prompts=dict(type="int"),
    duration_s=dict(type="float"),
    warmup_s=dict(type="float"),
    concurrency=dict(type="list", elements="int", default=[1]),
    request_rate=dict(type="float"),
    burstiness=dict(type="float"),
    max_tokens=dict(type="int", default=256, no_log=False),
    temperature=dict(type="float"),
    top_p=dict(type="float"),
    top_k=dict(type="int"),
    min_p=dict(type="float"),
    presence_penalty=dict(type="float"),
    frequency_penalty=dict(type="float"),
    repetition_penalty=dict(type="float"),
    sampling_seed=dict(type="int"),
    ignore_eos=dict(type="bool", default=False),
    warmup_requests=dict(type="int", default=1),
    repeats=dict(type="int", default=1),
    seed=dict(type="int", default=0),
    timeout=dict(type="float", default=600),
    metrics_url=dict(type="str"),
    labels=dict(type="dict", default={}),
    stop_when_slower=dict(
        type="dict",
        options=dict(
            baseline_runs=dict(type="dict", required=True),
            margin_pct=dict(type="float", default=8.0),
            keep_when=dict(type="str", default="not_slower", choices=["not_slower", "faster"]),
        ),
    ),
    validate_certs=dict(type="bool", default=True),
    ca_path=dict(type="path"),
)

REQUIRED_BY = dict(burstiness="request_rate", warmup_s="duration_s")

# Measured requests a level and repeat when neither a count nor a window is given.
DEFAULT_NUM_PROMPTS = 50


def measured_prompts(params):
    """The requests a level and repeat measures by count: num_prompts, or its default; None for a time-boxed window."""
    if params.get("duration_s") is not None:
        return None
    return params["num_prompts"] if params.get("num_prompts") is not None else DEFAULT_NUM_PROMPTS


# The sampling parameters a request may carry, in the names vLLM's OpenAI server reads. A request
# that names none of them is sampled with the model's generation_config.json defaults.
SAMPLING_PARAMETERS = (
    "temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty",
)

# (lowest, highest, whether the lowest is allowed, the rule as a user reads it), as vLLM's
# SamplingParams checks them, so that a value vLLM would refuse with HTTP 400 on every request of
# the trial is refused before the trial starts.
_SAMPLING_RANGES = dict(
    temperature=(0.0, math.inf, True, "must be a finite number of at least 0 (0 is greedy)"),
    top_p=(0.0, 1.0, False, "must be greater than 0 and at most 1"),
    min_p=(0.0, 1.0, True, "must be between 0 and 1"),
    presence_penalty=(-2.0, 2.0, True, "must be between -2 and 2"),
    frequency_penalty=(-2.0, 2.0, True, "must be between -2 and 2"),
    repetition_penalty=(0.0, math.inf, False, "must be a finite number greater than 0 (1 is none)"),
)


def option_problems(params):
    """What is wrong with a full set of parameters (defaults applied), as (option, rule) pairs.

    ``"%s %s" % pair`` reads as a sentence: ``num_prompts must be at least 1``.
    """
    problems = []
    for name in ("num_prompts", "max_tokens", "repeats"):
        if params[name] is not None and params[name] < 1:
            problems.append((name, "must be at least 1"))
    problems.extend(_window_problems(params))
    if not params["concurrency"] or min(params["concurrency"]) < 1:
        problems.append(("concurrency", "must list at least one level, each at least 1"))
    if params["context_tokens"] is not None and params["context_tokens"] < 1:
        problems.append(("context_tokens", "must be at least 1"))
    if params["endpoint"] != "chat":
        for name in ("chat_template_kwargs", "tools", "tool_choice"):
            if params[name] is not None:
                problems.append((name, "needs endpoint: chat"))
    if params["warmup_requests"] < 0:
        problems.append(("warmup_requests", "must not be negative"))
    for name in ("request_rate", "burstiness", "timeout"):
        value = params[name]
        if value is not None and not (0 < value < math.inf):
            problems.append((name, "must be a positive number"))
    problems.extend(sampling_problems(params, seed_key="sampling_seed"))
    if params["base_url"].rstrip("/").endswith("/v1"):
        problems.append(("base_url", "is the server root: drop the trailing /v1"))
    if params["stop_when_slower"] is not None:
        problems.extend(_stop_problems(params["stop_when_slower"]))
    return problems


def _window_problems(params):
    """A time-boxed level (duration_s) measures what its streams write in the window, so no request count goes with
    it, nor an arrival rate (the window is closed-loop at its concurrency); its warm-up must not outlast it."""
    duration, warmup = params.get("duration_s"), params.get("warmup_s")
    if duration is None:
        return []
    problems = []
    if not 0 < duration < math.inf:
        problems.append(("duration_s", "must be a positive number of seconds"))
    if params["num_prompts"] is not None:
        problems.append(("duration_s", "and num_prompts cannot both be set: a level is measured over a window or "
                                       "over a count of requests"))
    if params["request_rate"] is not None:
        problems.append(("duration_s", "cannot go with request_rate: a window is closed-loop at its concurrency"))
    if warmup is not None:
        if not 0 <= warmup < math.inf:
            problems.append(("warmup_s", "must be a number of seconds, 0 or more"))
        elif 0 < duration < math.inf and duration < warmup:
            problems.append(("duration_s", "must be at least warmup_s (%g s): a window shorter than its warm-up "
                                           "measures less than it spends" % warmup))
    return problems


def sampling_problems(sampling, where="", seed_key="seed"):
    """What vLLM would refuse in a mapping of sampling parameters (unset ones are skipped).

    ``where`` is put before each parameter's name, for a replay file's line; ``seed_key`` names
    the per-request seed (a replayed request's ``seed``, the module's ``sampling_seed``).
    """
    problems = []
    for name, (lowest, highest, lowest_allowed, rule) in _SAMPLING_RANGES.items():
        value = sampling.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            problems.append((where + name, rule))
            continue
        above_lowest = value >= lowest if lowest_allowed else value > lowest
        if not (above_lowest and value <= highest and value < math.inf):
            problems.append((where + name, rule))
    top_k = sampling.get("top_k")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < -1):
        problems.append((where + "top_k", "must be a whole number: -1 or 0 for no limit, else at least 1"))
    seed = sampling.get(seed_key)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        problems.append((where + seed_key, "must be a whole number"))
    return problems


def _stop_problems(stop):
    problems = []
    margin = stop["margin_pct"]
    if not (0 <= margin < math.inf):
        problems.append(("stop_when_slower.margin_pct", "must be a finite number of at least 0"))
    for level, runs in stop["baseline_runs"].items():
        where = "stop_when_slower.baseline_runs.%s" % level
        if level_number(level) is None:
            problems.append((where + ":", "the key must be a concurrency level (a positive integer)"))
        if not isinstance(runs, (list, tuple)) or not all(_is_rate(value) for value in runs):
            problems.append((where, "must be a list of output throughputs (finite numbers of at least 0)"))
    return problems


def level_number(key):
    """A concurrency level written as a mapping key (YAML and JSON give them as strings), or None."""
    try:
        number = int(key)
    except (TypeError, ValueError):
        return None
    return number if number >= 1 and str(number) == str(key).strip() else None


def _is_rate(value):
    if isinstance(value, bool):
        return False
    try:
        number = float(value)
    except (TypeError, ValueError):
        return False
    return 0 <= number < math.inf
