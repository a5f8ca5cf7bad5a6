# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""How long a start may stay silent in each phase before its wait calls it stalled, from the node's own starts.

Some phases of a vLLM start log nothing but a carriage-return bar for minutes (CUDA-graph capture, the kernels'
warm-up and autotune), and how long depends on the node: its cards, its driver, its caches. The operator names those
phases, with a limit for a node that has no start on record (vllm_switch_phase_stall_timeouts, whose defaults come
from published starts, docs/waiting.md). Once the node has recorded starts, its slowest start of such a phase, times
STALL_LIMIT_FACTOR, is that phase's limit instead: its own figure, larger or smaller than the published one. A
phase's length bounds its longest silence, so no start like those on record is ever failed for a stall.
"""

from __future__ import annotations

import math
import typing as t
from collections.abc import Iterable, Mapping

# How much slower than its slowest recorded start a phase may run before its silence counts as a hang.
STALL_LIMIT_FACTOR = 1.5


def phase_stall_limits(history: Iterable[t.Any], configured: Mapping[str, t.Any],
                       factor: float = STALL_LIMIT_FACTOR) -> dict[str, int]:
    """{phase: seconds} for each phase in configured: factor times its slowest start in history, else configured's.

    history is the node's records (trial_record_info's history): each record's ``starts`` lists its starts, each
    with ``phases`` as the readiness wait timed them ({name, seconds}). Whole seconds, rounded up, as the wait takes
    them.
    """
    slowest: dict[str, float] = {}
    for entry in history:
        starts = entry.get('starts') if isinstance(entry, Mapping) else None
        for start in starts if isinstance(starts, list) else ():
            phases = start.get('phases') if isinstance(start, Mapping) else None
            for phase in phases if isinstance(phases, list) else ():
                if not isinstance(phase, Mapping) or phase.get('name') not in configured:
                    continue
                seconds = phase.get('seconds')
                if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and seconds >= 0:
                    slowest[phase['name']] = max(slowest.get(phase['name'], 0.0), float(seconds))
    return {name: int(math.ceil(slowest[name] * factor)) if name in slowest else int(limit)
            for name, limit in configured.items()}
