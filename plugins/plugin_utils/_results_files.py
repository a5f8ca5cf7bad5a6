# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The JSON files that the results store writes beside its database: one per result, laid out like the file of
vllm bench serve --save-result, and one per decision."""

from __future__ import annotations

import dataclasses
import datetime
import json
import re

# The benchmark's endpoint option mapped to the backend name vllm bench serve writes for it.
_BACKENDS = {'completions': 'openai', 'chat': 'openai-chat'}


def result_document(record) -> bytes:
    """A result's file content: the keys vllm bench serve --save-result writes, then ours under llmops_vllm."""
    return json.dumps(_save_result_document(record), indent=2, default=str).encode('utf-8')


def decision_document(decision) -> bytes:
    return json.dumps(dict(dataclasses.asdict(decision)), indent=2, default=str).encode('utf-8')


def result_file_name(record, sequence: int) -> str:
    parts = (
        _file_time(),
        record.host,
        record.model,
        record.variant,
        f'c{record.max_concurrency}' if record.max_concurrency is not None else 'cunlimited',
        record.run_id[:8],
        str(sequence),
    )
    return _file_name(parts)


def decision_file_name(decision) -> str:
    return _file_name((_file_time(), decision.host, decision.model, decision.variant, 'decision', decision.run_id[:8]))


def _file_time() -> str:
    # Microseconds: two trials decided within one second (quick plays, one controller) must still sort
    # in the order they were written.
    return datetime.datetime.now(datetime.timezone.utc).strftime('%Y%m%dT%H%M%S.%fZ')


def _file_name(parts) -> str:
    # Host and model names may hold characters a file name should not; time first, so names sort by time.
    return '_'.join(re.sub(r'[^A-Za-z0-9.-]+', '-', part) for part in parts) + '.json'


def _save_result_document(record) -> dict:
    """The keys vllm bench serve --save-result writes, then ours under llmops_vllm."""
    options = record.options
    document = {
        'date': datetime.datetime.strptime(record.recorded_at, '%Y-%m-%dT%H:%M:%SZ').strftime('%Y%m%d-%H%M%S'),
    }
    backend = _BACKENDS.get(options.get('endpoint'))
    if backend:
        document['endpoint_type'] = backend
        document['backend'] = backend
    document['label'] = record.variant
    document['model_id'] = options.get('model', record.model)
    if 'num_prompts' in options:
        document['num_prompts'] = options['num_prompts']
    if 'request_rate' in options:
        # vllm bench serve writes an unlimited rate as the string "inf".
        rate = options['request_rate']
        document['request_rate'] = 'inf' if rate is None or rate == float('inf') else rate
    if 'burstiness' in options:
        document['burstiness'] = options['burstiness']
    document.update(record.metrics)
    document['llmops_vllm'] = {
        'recorded_at': record.recorded_at,
        'run_id': record.run_id,
        'host': record.host,
        'model': record.model,
        'variant': record.variant,
        'task': record.task,
        'task_failed': record.task_failed,
        'labels': dict(record.labels),
        'options': dict(record.options),
    }
    return document
