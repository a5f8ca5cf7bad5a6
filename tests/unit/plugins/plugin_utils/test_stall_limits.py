# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The silent phases' stall limits, from a node's own recorded starts (the trial records' ``starts``)."""

from __future__ import annotations

from ansible_collections.llmops.vllm.plugins.plugin_utils._stall_limits import STALL_LIMIT_FACTOR, phase_stall_limits

PUBLISHED = {'cuda_graphs': 1800, 'warmup': 1800}


def record(*starts):
    """A trial record's starts, each a {phase: seconds} as the readiness wait timed it."""
    return {'starts': [{'unit': 'vllm-kimi-k2.5-baseline.service', 'phases': [
        {'name': name, 'label': name, 'seconds': seconds, 'ended_at_s': 0.0} for name, seconds in start.items()]}
        for start in starts]}


def test_a_node_without_starts_on_record_gets_the_published_limits():
    assert phase_stall_limits([], PUBLISHED) == PUBLISHED
    assert phase_stall_limits([{'starts': None}, 'not a record'], PUBLISHED) == PUBLISHED


def test_a_recorded_phase_gets_its_slowest_start_times_the_factor_smaller_or_larger_than_the_published():
    history = [record({'weights_loaded': 1501.2, 'cuda_graphs': 35.0, 'warmup': 3.1}),
               record({'cuda_graphs': 2100.4}, {'cuda_graphs': 40.0, 'warmup': 2.0})]

    limits = phase_stall_limits(history, PUBLISHED)

    # 2,100.4 s x 1.5 rounded up; the warm-up's slowest 3.1 s x 1.5 = 4.65, rounded up.
    assert STALL_LIMIT_FACTOR == 1.5
    assert limits == {'cuda_graphs': 3151, 'warmup': 5}
    # A phase the operator did not name as silent keeps the plain stall timeout, however long it was on record.
    assert 'weights_loaded' not in limits


def test_unreadable_phase_entries_are_left_out():
    history = [{'starts': [{'phases': [{'name': 'cuda_graphs', 'seconds': None}, {'name': 'cuda_graphs',
                                                                                  'seconds': True},
                                       'garbage', {'name': 'cuda_graphs', 'seconds': -3}]}]}]

    assert phase_stall_limits(history, {'cuda_graphs': 1800}) == {'cuda_graphs': 1800}
