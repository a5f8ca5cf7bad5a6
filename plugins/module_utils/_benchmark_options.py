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
    num_prompts=dict(type="int", default=50),
    concurrency=dict(type="list", elements="int", default=[1]),
    request_rate=dict(type="float"),
    burstiness=dict(type="float"),
    max_tokens=dict(type="int", default=256, no_log=False),
    temperature=dict(type="float", default=0.0),
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

REQUIRED_BY = dict(burstiness="request_rate")


def option_problems(params):
    """What is wrong with a full set of parameters (defaults applied), as (option, rule) pairs.

    ``"%s %s" % pair`` reads as a sentence: ``num_prompts must be at least 1``.
    """
    problems = []
    for name in ("num_prompts", "max_tokens", "repeats"):
        if params[name] < 1:
            problems.append((name, "must be at least 1"))
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
    if params["temperature"] < 0:
        problems.append(("temperature", "must not be negative"))
    elif not params["temperature"] < math.inf:
        problems.append(("temperature", "must be a finite number"))
    if params["base_url"].rstrip("/").endswith("/v1"):
        problems.append(("base_url", "is the server root: drop the trailing /v1"))
    if params["stop_when_slower"] is not None:
        problems.extend(_stop_problems(params["stop_when_slower"]))
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
