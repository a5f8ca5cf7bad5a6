# This module_utils file is private to the llmops.vllm collection; it may change without notice.
# Copyright (c) 2025, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Prometheus text exposition, and vLLM's speculative-decoding counters read from it."""

from __future__ import annotations

import re
from collections import namedtuple

Sample = namedtuple("Sample", ["name", "labels", "value"])

SpecDecodeTotals = namedtuple(
    "SpecDecodeTotals", ["drafts", "draft_tokens", "accepted_tokens", "accepted_per_position"]
)

DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED_TOKENS = "vllm:spec_decode_num_accepted_tokens_total"
ACCEPTED_PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"

_SAMPLE_LINE = re.compile(
    r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)"
    r"(?:\{(?P<labels>.*)\})?"
    r"[ \t]+(?P<value>\S+)"
    r"(?:[ \t]+-?\d+)?[ \t]*$"
)
_LABEL_PAIR = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
_LABEL_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


def _unescape(value):
    return re.sub(r"\\[\\\"n]", lambda match: _LABEL_ESCAPES[match.group(0)], value)


def parse_samples(text):
    """Every sample in a Prometheus text exposition, in order; comments and blank lines are skipped.

    Raises ValueError on a line that is not a sample, so a page that is not Prometheus text
    (an HTML error page, say) is reported instead of read as "no counters".
    """
    samples = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE_LINE.match(line)
        if match is None:
            raise ValueError("line %d is not a Prometheus sample: %.80s" % (number, line))
        labels = {}
        if match.group("labels"):
            labels = {key: _unescape(value) for key, value in _LABEL_PAIR.findall(match.group("labels"))}
        try:
            value = float(match.group("value"))
        except ValueError:
            raise ValueError("line %d has a value that is not a number: %.80s" % (number, line))
        samples.append(Sample(match.group("name"), labels, value))
    return samples


def spec_decode_totals(samples):
    """vLLM's speculative-decoding counters summed over label sets (engines), or None without them.

    A server without speculative decoding does not export these counters at all.
    """
    totals = {DRAFTS: 0.0, DRAFT_TOKENS: 0.0, ACCEPTED_TOKENS: 0.0}
    per_position = {}
    found = False
    for sample in samples:
        if sample.name in totals:
            totals[sample.name] += sample.value
            found = True
        elif sample.name == ACCEPTED_PER_POSITION and "position" in sample.labels:
            position = int(sample.labels["position"])
            per_position[position] = per_position.get(position, 0.0) + sample.value
    if not found:
        return None
    return SpecDecodeTotals(totals[DRAFTS], totals[DRAFT_TOKENS], totals[ACCEPTED_TOKENS], per_position)


def spec_decode_delta(before, after):
    """Acceptance over the interval between two readings, under vllm bench serve's result keys.

    ``spec_decode_acceptance_rate`` is accepted / drafted tokens in percent and
    ``spec_decode_acceptance_length`` is 1 + accepted tokens / drafts. Empty when either
    reading is missing or nothing was drafted in between.
    """
    if before is None or after is None:
        return {}
    drafts = after.drafts - before.drafts
    draft_tokens = after.draft_tokens - before.draft_tokens
    accepted = after.accepted_tokens - before.accepted_tokens
    if draft_tokens <= 0 or drafts <= 0:
        return {}
    return {
        "spec_decode_acceptance_rate": accepted / draft_tokens * 100.0,
        "spec_decode_acceptance_length": 1.0 + accepted / drafts,
        "spec_decode_num_drafts": int(drafts),
        "spec_decode_draft_tokens": int(draft_tokens),
        "spec_decode_accepted_tokens": int(accepted),
        "spec_decode_per_position_acceptance_rates": [
            (accepted_here - before.accepted_per_position.get(position, 0.0)) / drafts
            for position, accepted_here in sorted(after.accepted_per_position.items())
        ],
    }


RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"


def requests_in_flight(samples):
    """(running, waiting) requests summed over engines, from vLLM's gauges; None when they are absent."""
    totals = {RUNNING: 0.0, WAITING: 0.0}
    found = False
    for sample in samples:
        if sample.name in totals:
            totals[sample.name] += sample.value
            found = True
    if not found:
        return None
    return int(totals[RUNNING]), int(totals[WAITING])


FINISHED = "vllm:request_success_total"


def server_requests(samples):
    """The server's own count of finished requests (every finish reason) and its queue, or None.

    None when the page exports neither the counter nor the gauges, as a server that is not vLLM.
    """
    finished = [sample.value for sample in samples if sample.name == FINISHED]
    in_flight = requests_in_flight(samples)
    if not finished and in_flight is None:
        return None
    running, waiting = in_flight or (0, 0)
    return {"finished": int(sum(finished)), "running": running, "waiting": waiting}


def foreign_requests(before, after, sent):
    """Requests the server served or held during a level that the benchmark did not send; None without readings.

    Between two readings the server finished ``after.finished - before.finished`` requests, of which
    at most ``sent`` were the benchmark's; any still running or waiting after the level are not the
    benchmark's either, as it waits for all of its own. A request of the benchmark's that never reached
    the server (refused, say) can hide one foreign request, never add one.
    """
    if before is None or after is None:
        return None
    finished = after["finished"] - before["finished"]
    return max(0, finished - sent) + after["running"] + after["waiting"]
