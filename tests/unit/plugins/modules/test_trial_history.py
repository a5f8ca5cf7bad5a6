# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import datetime
import json

import pytest

from ansible_collections.llmops.vllm.plugins.modules import trial_history
from wait_fakes import run_module


@pytest.fixture
def append(monkeypatch):
    def run(path, entry, check_mode=False):
        failed, result = run_module(monkeypatch, trial_history, dict(path=str(path), entry=entry), check_mode)
        return dict(result, failed=True) if failed else result
    return run


def lines(path):
    return [json.loads(line) for line in path.read_text(encoding='utf-8').splitlines() if line.strip()]


def test_entries_are_appended_and_earlier_ones_kept_as_written(tmp_path, append):
    history = tmp_path / 'history.jsonl'
    first = append(history, {'variant': 'ngram', 'outcome': 'in_progress', 'user': 'ops'})
    second = append(history, {'variant': 'ngram', 'outcome': 'rolled_back', 'reason': 'slower at concurrency 8',
                              'recorded_at': '2026-12-01T09:00:00+00:00'})
    assert (first['entries'], second['entries']) == (1, 2)
    assert lines(history) == [first['entry'], second['entry']]
    # The time the module adds carries its zone.
    assert datetime.datetime.fromisoformat(first['entry']['recorded_at']).utcoffset() == datetime.timedelta(0)
    assert oct(history.stat().st_mode & 0o777) == '0o644'


def test_a_line_cut_off_by_a_killed_writer_does_not_swallow_the_next(tmp_path, append):
    history = tmp_path / 'history.jsonl'
    append(history, {'variant': 'ngram', 'outcome': 'kept'})
    with history.open('a', encoding='utf-8') as handle:
        handle.write('{"variant": "eagle3", "outc')
    append(history, {'variant': 'ngram', 'outcome': 'blocked'})
    text = history.read_text(encoding='utf-8').splitlines()
    assert json.loads(text[0])['outcome'] == 'kept' and json.loads(text[2])['outcome'] == 'blocked'
    assert text[1] == '{"variant": "eagle3", "outc'


def test_check_mode_writes_nothing_and_an_entry_without_outcome_is_refused(tmp_path, append):
    history = tmp_path / 'history.jsonl'
    assert append(history, {'variant': 'ngram', 'outcome': 'kept'}, check_mode=True)['entries'] == 1
    assert not history.exists()
    refused = append(history, {'variant': 'ngram'})
    assert refused['failed'] and refused['msg'] == 'entry: must hold outcome'
