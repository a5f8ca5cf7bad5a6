# This module_utils file is private to the llmops.vllm collection: its API may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""How far a vLLM start has got, read from its unit's journal: the one place for those log patterns.

Two uses: while a server loads, the newest line that tells its phase is shown as progress
(LOAD_PHASE_PATTERNS); once it serves, the journal since its main process started is cut into
timed phases at the milestones vLLM logs (MILESTONES), so that the cost of a switch is seen
phase by phase. The line texts are those of vLLM 0.32/0.33 (GPU and CPU workers); older wordings
that still appear in the field are matched too.
"""

from __future__ import annotations

import re

# Lines that tell how far a vLLM server has got while it loads (nothing listens until the end).
LOAD_PHASE_PATTERNS = (
    re.compile(r"Initializing a V\d LLM engine|[Ii]nitializing .*engine"),
    re.compile(r"Loading (?:safetensors )?checkpoint shards|Loading weights|Loading model"),
    re.compile(r"Model loading took|Loading weights took"),
    re.compile(r"torch\.compile|[Cc]ompiling a graph|Dynamo bytecode transform"),
    re.compile(r"[Mm]emory profiling|KV cache|GPU blocks|CPU blocks"),
    re.compile(r"[Cc]apturing (?:CUDA )?graphs?|[Gg]raph capturing"),
    re.compile(r"init engine .*took|[Ww]arming up|[Ww]armup"),
    re.compile(r"Starting vLLM (?:API )?server|Application startup complete"),
)


# Lines a start repeats while one process waits on another. They show that the waiting process lives, not that
# the start moved on: the same line comes once a minute through a slow silent phase (CUDA-graph capture, DeepGEMM
# warm-up) and, for ever, through a hang (an all-reduce deadlock between the workers). A stall check must not
# count them as progress.
WAIT_SYMPTOM_PATTERNS = (
    # distributed/device_communicators/shm_broadcast.py: the engine core waits on its workers' shared-memory ring
    # buffer and warns every VLLM_RINGBUFFER_WARNING_INTERVAL seconds (60 by default): "No available shared memory
    # broadcast block found in 60 seconds. This typically happens when some processes are hanging or doing some
    # time-consuming work (e.g. compilation, weight/kv cache quantization)."
    re.compile(r"No available shared memory broadcast block found in \d+ seconds"),
    # v1/engine/utils.py, at DEBUG, every STARTUP_POLL_PERIOD_MS (10 s) until the engine core's handshake:
    # "Waiting for 1 local, 0 remote core engine proc(s) to start."
    re.compile(r"Waiting for \d+ local, \d+ remote core engine proc\(s\) to (?:start|connect)"),
)


def is_wait_symptom(line):
    """Whether a journal line is one a waiting process repeats (WAIT_SYMPTOM_PATTERNS), not a step of the start."""
    return any(pattern.search(line or "") for pattern in WAIT_SYMPTOM_PATTERNS)


class Milestone:
    """A point a start passes, the log lines that mark it, and the name of the phase that ends there."""

    def __init__(self, name, label, pattern=None):
        self.name = name
        self.label = label
        self.pattern = re.compile(pattern) if pattern else None


# In start order. Each pattern matches the lines written when that step is done (with tensor
# parallelism, every worker writes its own). The first and last milestones are not logged by vLLM:
# the process start is systemd's ExecMainStartTimestampMonotonic, and the first completion (or
# readiness) is what the wait saw.
PROCESS_START = Milestone("process_start", "process start")
MILESTONES = (
    # core.py: "Initializing a V1 LLM engine (v0.32.0) with config: ..."; the engine core process
    # starts once the API server has imported vLLM and parsed its arguments.
    Milestone("engine_init", "interpreter and API start-up",
              r"Initializing a V\d LLM engine|Waiting for init message from front-end"),
    # gpu_model_runner.py "Model loading took 14.77 GiB and 25.53 seconds" (older: "... GiB memory and
    # ..."); default_loader.py "Loading weights took 24.06 seconds".
    Milestone("weights_loaded", "weights load", r"Model loading took .*GiB|Loading weights took [\d.]+ ?s"),
    # compilation/backends.py "Dynamo bytecode transform time: 12.36 s", "Compiling a graph for dynamic
    # shape takes 30.2 s", "Directly load the compiled graph(s) ... from the cache, took 4.8 s";
    # compilation/monitor.py "torch.compile took 25.93 s in total" (0.32's monitor_torch_compile; older
    # releases wrote "takes"); decorators.py "Directly load AOT compilation from path ..." on a cache hit.
    Milestone("torch_compile", "torch.compile",
              r"torch\.compile (?:takes|took) [\d.]+ ?s in total|Compiling a graph for .*takes [\d.]+ ?s"
              r"|Dynamo bytecode transform time|Directly load the compiled graph|Directly load AOT compilation"),
    # gpu_worker.py "Available KV cache memory: 2.31 GiB", "Memory profiling takes ..."; kv_cache_utils.py
    # "GPU KV cache size: 100,752 tokens", "Maximum concurrency for ..."; the CPU worker's "Auto set (...) GiB
    # for KV cache" / "Explicitly set (...) GiB for KV cache"; older engines' "# GPU blocks: N, # CPU blocks: M".
    Milestone("kv_cache", "KV-cache profiling",
              r"Available KV cache memory|[GC]PU KV cache size|Memory profiling takes|Maximum concurrency for "
              r"|set \([\d.]+/[\d.]+\) GiB for KV cache|# [GC]PU blocks"),
    # gpu_model_runner.py "Graph capturing finished in 19 secs, took 1.92 GiB".
    Milestone("cuda_graphs", "CUDA-graph capture", r"Graph capturing finished in"),
    # core.py "init engine (profile, create kv cache, warmup model) took 54.87 seconds" (newer: "took 60.86 s
    # (compilation: 30.08 s)").
    Milestone("warmup", "warm-up", r"init engine\b.*\btook [\d.]+"),
    # api_server.py "Starting vLLM API server 0 on http://..."; uvicorn "Application startup complete."
    Milestone("api_up", "API start", r"Starting vLLM (?:API )?server|Application startup complete"),
)
FIRST_COMPLETION = Milestone("first_completion", "first completion")
READY = Milestone("ready", "ready")
# Every phase name a start can have, in start order, and its words.
PHASE_LABELS = tuple((milestone.name, milestone.label) for milestone in MILESTONES + (FIRST_COMPLETION, READY))

# journald and the wait's clock disagree by a few milliseconds; lines a little before the recorded
# process start (systemd's own "Started ..." line) still belong to it.
START_SLACK_S = 1.0


def start_phases(entries, started_monotonic_s, first_completion_monotonic_s=None, smoke_test=True):
    """Cut a start into timed phases at the milestones its journal shows.

    entries are the unit's journal entries as (monotonic seconds, message) pairs, in the clock of
    systemd's ExecMainStartTimestampMonotonic (journald's __MONOTONIC_TIMESTAMP of the same boot).
    started_monotonic_s is when the main process started; first_completion_monotonic_s when the
    first completion succeeded (smoke_test true) or, without a smoke test, when the server was first
    seen ready. Lines after that end are ignored.

    A milestone is reached at the last line that marks it (with tensor parallelism, when the slowest
    worker got there), and never before an earlier milestone: steps that overlap count toward the
    earlier one. Milestones a start did not log (no CUDA graphs under enforce_eager, no compilation)
    are absent; each phase runs from the previous milestone seen to its own.

    Returns a list of {name, label, seconds, ended_at_s} in start order; ended_at_s is counted from
    the process start.
    """
    started = float(started_monotonic_s)
    end = None if first_completion_monotonic_s is None else float(first_completion_monotonic_s)
    reached = {}
    for monotonic_s, message in entries:
        if monotonic_s is None or monotonic_s < started - START_SLACK_S or (end is not None and monotonic_s > end):
            continue
        for milestone in MILESTONES:
            if milestone.pattern.search(message):
                reached[milestone.name] = max(reached.get(milestone.name, monotonic_s), monotonic_s)
    points = [(milestone, reached[milestone.name]) for milestone in MILESTONES if milestone.name in reached]
    if end is not None:
        points.append((FIRST_COMPLETION if smoke_test else READY, end))
    phases = []
    previous = started
    for milestone, at in points:
        at = max(at, previous)
        phases.append({
            "name": milestone.name,
            "label": milestone.label,
            "seconds": round(at - previous, 3),
            "ended_at_s": round(at - started, 3),
        })
        previous = at
    return phases


# kv_cache_utils.py "GPU KV cache size: 100,752 tokens, Maximum concurrency for 262,144 tokens per request:
# 0.38x" (the CPU worker says "CPU", a hybrid pool "GPU + host"; older engines wrote the two on separate lines).
_KV_CACHE_SIZE = re.compile(r"KV cache size: ([\d,]+) tokens")
_KV_CACHE_CONCURRENCY = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")


def kv_cache_capacity(entries, started_monotonic_s, end_monotonic_s=None):
    """The KV cache a start allocated, as its engine logged it, or None when the journal does not say.

    Returns {tokens, max_model_len, max_concurrency}: how many tokens of context the cache holds in
    all, and how many requests of max_model_len tokens fit at once (either of the last two None
    when not logged). The last such lines of this start count (a restarted engine logs anew).
    """
    started = float(started_monotonic_s)
    capacity = None
    for monotonic_s, message in entries:
        if monotonic_s is None or monotonic_s < started - START_SLACK_S:
            continue
        if end_monotonic_s is not None and monotonic_s > float(end_monotonic_s):
            continue
        size = _KV_CACHE_SIZE.search(message)
        if size:
            capacity = {"tokens": int(size.group(1).replace(",", "")), "max_model_len": None, "max_concurrency": None}
        concurrency = _KV_CACHE_CONCURRENCY.search(message)
        if concurrency and capacity is not None:
            capacity["max_model_len"] = int(concurrency.group(1).replace(",", ""))
            capacity["max_concurrency"] = float(concurrency.group(2))
    return capacity


def start_summary(phases):
    """One line: 'first completion after 20.1 s: interpreter and API start-up 11.2 s, weights load 6.0 s, ...'."""
    if not phases:
        return "no start phases were seen"
    last = phases[-1]
    parts = ", ".join("%s %s" % (phase["label"], seconds_text(phase["seconds"])) for phase in phases)
    return "%s after %s: %s" % (last["label"], seconds_text(last["ended_at_s"]), parts)


def seconds_text(seconds):
    """'20.1 s' below ten minutes, '25m03s' above: a Kimi-K2.5 load is read in minutes."""
    if seconds < 600:
        return "%.1f s" % seconds
    minutes, rest = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return "%dm%02ds" % (minutes, rest)
    hours, minutes = divmod(minutes, 60)
    return "%dh%02dm%02ds" % (hours, minutes, rest)


def milestone_of(line):
    """The label of the last milestone a journal line marks (with "done"), else of the phase it tells, else None."""
    line = (line or "").rsplit("\r", 1)[-1]
    for milestone in reversed(MILESTONES):
        if milestone.pattern.search(line):
            return "%s done" % milestone.label
    for pattern, milestone in zip(LOAD_PHASE_PATTERNS, _PHASE_OF_PATTERN):
        if pattern.search(line):
            return milestone
    return None


def phase_in_progress(lines):
    """The name of the phase a start is in (that of the milestone after the furthest one its lines show), else None.

    Before any milestone, the start is in its first phase (engine_init); once the API is up it is in none.
    """
    furthest = -1
    for line in lines:
        line = (line or "").rsplit("\r", 1)[-1]
        for position, milestone in enumerate(MILESTONES):
            if position > furthest and milestone.pattern.search(line):
                furthest = position
    following = furthest + 1
    return MILESTONES[following].name if following < len(MILESTONES) else None


# What each of LOAD_PHASE_PATTERNS tells, in their order.
_PHASE_OF_PATTERN = ("interpreter and API start-up", "weights load", "weights load done", "torch.compile",
                     "KV-cache profiling", "CUDA-graph capture", "warm-up", "API start")
