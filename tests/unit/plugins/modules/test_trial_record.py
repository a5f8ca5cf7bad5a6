# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""trial_record writes a trial's record and the node's history; trial_record_info reads both back."""

from __future__ import annotations

import json

import pytest

from ansible_collections.llmops.vllm.plugins.modules import trial_record, trial_record_info
from wait_fakes import run_module


def call(monkeypatch, module, check_mode=False, **args):
    failed, result = run_module(monkeypatch, module, args, check_mode)
    return dict(result, failed=True) if failed else result


def test_a_record_is_the_variants_latest_and_a_line_of_the_history(tmp_path, monkeypatch):
    directory = tmp_path / 'kimi-k2.5'
    started = call(monkeypatch, trial_record, path=str(directory), record={'variant': 'ngram', 'outcome': 'in_progress'})
    decided = call(monkeypatch, trial_record, path=str(directory),
                   record={'variant': 'ngram', 'outcome': 'rolled_back', 'reason': 'slower at concurrency 8'})
    assert (started['entries'], decided['entries'], decided['path']) == (1, 2, str(directory / 'ngram.json'))
    assert json.loads((directory / 'ngram.json').read_text(encoding='utf-8')) == decided['record']
    assert oct((directory / 'ngram.json').stat().st_mode & 0o777) == '0o644'
    read = call(monkeypatch, trial_record_info, path=str(directory))
    assert read['records'] == {'ngram': decided['record']}
    assert read['history'] == [started['record'], decided['record']]
    assert (read['changed'], read['skipped_lines'], read['unreadable_records']) == (False, 0, [])


def test_a_record_that_is_not_the_latest_only_joins_the_history(tmp_path, monkeypatch):
    directory = tmp_path / 'kimi-k2.5'
    kept = call(monkeypatch, trial_record, path=str(directory), record={'variant': 'ngram', 'outcome': 'kept'})
    again = call(monkeypatch, trial_record, path=str(directory), latest=False,
                 record={'variant': 'ngram', 'outcome': 'kept', 'reason': 'served again, as kept by its trial'})
    assert (again['latest'], again['entries']) == (False, 2)
    read = call(monkeypatch, trial_record_info, path=str(directory))
    assert read['records'] == {'ngram': kept['record']}
    assert read['history'] == [kept['record'], again['record']]


def test_check_mode_writes_nothing(tmp_path, monkeypatch):
    result = call(monkeypatch, trial_record, check_mode=True, path=str(tmp_path / 'm'),
                  record={'variant': 'ngram', 'outcome': 'kept'})
    assert (result['changed'], result['entries']) == (True, 1)
    assert not (tmp_path / 'm').exists()


@pytest.mark.parametrize('record, message', [
    ({'variant': 'ngram'}, 'record: must hold outcome'),
    ({'variant': '../etc/passwd', 'outcome': 'kept'}, "record.variant: '../etc/passwd' is not a variant name"),
    ({'variant': '.hidden', 'outcome': 'kept'}, "record.variant: '.hidden' is not a variant name"),
])
def test_a_record_that_names_no_variant_file_is_refused(tmp_path, monkeypatch, record, message):
    result = call(monkeypatch, trial_record, path=str(tmp_path), record=record)
    assert result['failed'] and result['msg'].startswith(message)
    assert list(tmp_path.iterdir()) == []


def test_a_torn_last_line_and_an_unreadable_record_are_skipped_and_said(tmp_path, monkeypatch):
    call(monkeypatch, trial_record, path=str(tmp_path), record={'variant': 'ngram', 'outcome': 'kept'})
    with (tmp_path / 'history.jsonl').open('a', encoding='utf-8') as handle:
        handle.write('{"variant": "eagle3", "outc')
    (tmp_path / 'eagle3.json').write_text('{"variant": "eag', encoding='utf-8')
    read = call(monkeypatch, trial_record_info, path=str(tmp_path))
    assert [entry['variant'] for entry in read['history']] == ['ngram']
    assert (read['skipped_lines'], read['unreadable_records'], sorted(read['records'])) == (1, ['eagle3.json'], ['ngram'])


def test_a_model_never_tried_has_no_records_and_an_empty_history(tmp_path, monkeypatch):
    read = call(monkeypatch, trial_record_info, path=str(tmp_path / 'never'))
    assert (read['records'], read['history'], read['skipped_lines']) == ({}, [], 0)
    assert call(monkeypatch, trial_record_info, path=str(tmp_path), history=False)['history'] == []
