# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
import time

import pytest

from ansible_collections.llmops.vllm.plugins.plugin_utils._results_store import (
    SCHEMA_VERSION,
    BenchmarkRecord,
    HistoryEntry,
    ResultsStore,
    ResultsStoreError,
    records_from_result,
)

# fork keeps the collection loader of this process, so the children import the store as it does.
FORK = multiprocessing.get_context('fork')


def make_record(variant='baseline', throughput=100.0, run_id='run-1', recorded_at='2026-05-09T07:35:25Z', **metrics):
    return BenchmarkRecord(
        recorded_at=recorded_at, run_id=run_id, host='gpu-node-1', model='kimi-k2.5', variant=variant,
        metrics={'max_concurrency': 4, 'output_throughput': throughput, **metrics},
        labels={'model': 'kimi-k2.5', 'variant': variant, 'unit_checksum': 'abc', 'vllm_version': '0.33.0',
                'speculative_config': {'method': 'ngram', 'num_speculative_tokens': 5}},
        options={'num_prompts': 32, 'seed': 0},
        task='Benchmark',
    )


def test_new_database_has_current_schema_in_wal_mode(tmp_path):
    path = tmp_path / 'nested' / 'results.sqlite3'
    with ResultsStore(str(path)) as store:
        assert store.schema_version == SCHEMA_VERSION
    connection = sqlite3.connect(path)
    try:
        assert connection.execute('PRAGMA journal_mode').fetchone()[0] == 'wal'
        columns = {row[1] for row in connection.execute('PRAGMA table_info(results)')}
    finally:
        connection.close()
    assert {'recorded_at', 'run_id', 'host', 'model', 'variant', 'unit_checksum', 'vllm_version',
            'speculative_config', 'options', 'metrics', 'task_failed', 'output_throughput',
            'median_tpot_ms', 'median_ttft_ms', 'spec_decode_acceptance_rate'} <= columns


def test_records_round_trip_with_key_columns(tmp_path):
    path = str(tmp_path / 'results.sqlite3')
    record = make_record('ngram', 80.0, median_tpot_ms=12.5, spec_decode_acceptance_rate=65.6, failed=2)
    with ResultsStore(path) as store:
        row_ids = store.add([record])
    with ResultsStore(path) as store:
        [stored] = store.records()
    assert stored.row_id == row_ids[0]
    assert stored.metrics == record.metrics
    assert stored.labels == record.labels
    assert stored.options == record.options
    assert (stored.host, stored.model, stored.variant, stored.task, stored.task_failed) == \
        ('gpu-node-1', 'kimi-k2.5', 'ngram', 'Benchmark', False)
    connection = sqlite3.connect(path)
    try:
        row = connection.execute(
            'SELECT unit_checksum, vllm_version, speculative_config, max_concurrency, output_throughput,'
            ' median_tpot_ms, spec_decode_acceptance_rate, failed_requests FROM results').fetchone()
    finally:
        connection.close()
    assert row == ('abc', '0.33.0', '{"method": "ngram", "num_speculative_tokens": 5}', 4, 80.0, 12.5, 65.6, 2)


def test_reopening_a_database_keeps_its_rows(tmp_path):
    path = str(tmp_path / 'results.sqlite3')
    with ResultsStore(path) as store:
        store.add([make_record()])
    with ResultsStore(path) as store:
        store.add([make_record('ngram')])
        assert [record.variant for record in store.records()] == ['baseline', 'ngram']


def test_a_database_of_a_newer_schema_is_refused_untouched(tmp_path):
    path = tmp_path / 'results.sqlite3'
    connection = sqlite3.connect(path)
    connection.execute(f'PRAGMA user_version = {SCHEMA_VERSION + 1}')
    connection.close()
    with pytest.raises(ResultsStoreError, match=f'schema version {SCHEMA_VERSION + 1}, newer'):
        ResultsStore(str(path))
    connection = sqlite3.connect(path)
    try:
        assert connection.execute("SELECT count(*) FROM sqlite_master WHERE name = 'results'").fetchone()[0] == 0
    finally:
        connection.close()


def test_stored_rows_cannot_be_rewritten(tmp_path):
    path = str(tmp_path / 'results.sqlite3')
    with ResultsStore(path) as store:
        store.add([make_record()])
    connection = sqlite3.connect(path)
    try:
        with pytest.raises(sqlite3.DatabaseError, match='append-only'):
            connection.execute("UPDATE results SET output_throughput = 1000")
    finally:
        connection.close()


def test_history_entries_round_trip_append_only_and_a_version_2_database_gains_the_table(tmp_path):
    path = str(tmp_path / 'results.sqlite3')
    connection = sqlite3.connect(path)
    try:
        # A database written by the previous release: results and decisions, schema version 2.
        connection.execute('CREATE TABLE results (id INTEGER PRIMARY KEY, x TEXT)')
        connection.execute('CREATE TABLE decisions (id INTEGER PRIMARY KEY, x TEXT)')
        connection.execute('PRAGMA user_version = 2')
        connection.commit()
    finally:
        connection.close()
    kept = {'variant': 'ngram', 'model': 'kimi-k2.5', 'outcome': 'kept', 'recorded_at': '2026-12-01T09:00:00+00:00',
            'run_id': 'abc123', 'identity': {'sha256': 'f' * 64, 'parts': {}}, 'started_by': 'ops@bastion'}
    blocked = dict(kept, outcome='blocked', recorded_at='2026-12-01T10:00:00+00:00', identity=None)
    with ResultsStore(path) as store:
        assert store.schema_version == SCHEMA_VERSION
        store.add_history(HistoryEntry(host='gpu-node-1', document=kept))
        store.add_history(HistoryEntry(host='gpu-node-1', document=blocked))
        entries = store.history(host='gpu-node-1', model='kimi-k2.5')
    assert [(entry.outcome, entry.identity, entry.run_id) for entry in entries] == [
        ('kept', 'f' * 64, 'abc123'), ('blocked', None, 'abc123')]
    assert entries[0].document == kept
    connection = sqlite3.connect(path)
    try:
        with pytest.raises(sqlite3.DatabaseError, match='append-only'):
            connection.execute("UPDATE history SET outcome = 'kept'")
    finally:
        connection.close()


def test_the_timed_starts_of_a_trial_record_come_back_for_the_report(tmp_path):
    from ansible_collections.llmops.vllm.plugins.plugin_utils._report import recorded_starts
    start = {'unit': 'vllm-kimi-k2.5-eagle3.service', 'variant': 'eagle3', 'summary': 'first completion after 28m07s',
             'seconds': 1686.95, 'phases': [{'name': 'weights_loaded', 'label': 'weights load', 'seconds': 1561.2,
                                             'ended_at_s': 1561.2},
                                            {'name': 'first_completion', 'label': 'first completion',
                                             'seconds': 125.75, 'ended_at_s': 1686.95}]}
    under_way = {'variant': 'eagle3', 'model': 'kimi-k2.5', 'outcome': 'in_progress', 'run_id': 'abc123',
                 'recorded_at': '2026-12-01T09:00:00+00:00', 'starts': []}
    decided = dict(under_way, outcome='rolled_back', recorded_at='2026-12-01T09:40:00+00:00', starts=[start])
    with ResultsStore(str(tmp_path / 'results.sqlite3')) as store:
        store.add_history(HistoryEntry(host='gpu-node-1', document=under_way))
        store.add_history(HistoryEntry(host='gpu-node-1', document=decided))
        entries = store.history()
    assert entries[1].document['starts'] == [start]
    assert recorded_starts(entries) == {('gpu-node-1', 'kimi-k2.5'): [
        dict(start, recorded_at='2026-12-01T09:40:00+00:00', run_id='abc123')]}


def test_a_batch_is_stored_whole_or_not_at_all(tmp_path):
    path = str(tmp_path / 'results.sqlite3')

    def batch_that_breaks():
        yield make_record('ngram')
        raise RuntimeError('the play broke mid-batch')

    with ResultsStore(path) as store:
        store.add([make_record()])
        with pytest.raises(RuntimeError):
            store.add(batch_that_breaks())
        assert [record.variant for record in store.records()] == ['baseline']


def test_records_can_be_selected_by_host_model_and_variant(tmp_path):
    other_host = BenchmarkRecord(recorded_at='2026-05-09T07:00:00Z', run_id='run-0', host='gpu-node-2',
                                 model='kimi-k2.5', variant='baseline', metrics={'output_throughput': 1.0})
    with ResultsStore(str(tmp_path / 'results.sqlite3')) as store:
        store.add([make_record(), make_record('ngram'), other_host])
        assert [record.variant for record in store.records(host='gpu-node-1')] == ['baseline', 'ngram']
        assert [record.host for record in store.records(variant='baseline')] == ['gpu-node-2', 'gpu-node-1']
        assert store.records(model='other') == []


def test_records_from_result_splits_levels_and_labels_them():
    result = {
        'results': [{'max_concurrency': 1, 'output_throughput': 70.0}, {'max_concurrency': 4, 'output_throughput': 200.0}],
        'labels': {'model': 'kimi-k2.5', 'variant': 'eagle3'},
        'options': {'model': 'Kimi-K2.5', 'num_prompts': 32},
    }
    records = records_from_result(result, host='gpu-node-1', run_id='r', recorded_at='2026-05-09T07:35:25Z',
                                  task='Benchmark', task_failed=True)
    assert [(record.max_concurrency, record.variant, record.model, record.task_failed) for record in records] == \
        [(1, 'eagle3', 'kimi-k2.5', True), (4, 'eagle3', 'kimi-k2.5', True)]


def test_records_from_result_falls_back_for_missing_labels():
    [record] = records_from_result({'results': [{'output_throughput': 1.0}], 'options': {'model': 'served-name'}},
                                   host='h', run_id='r', recorded_at='2026-05-09T07:35:25Z')
    assert (record.model, record.variant) == ('served-name', 'unknown')
    [record] = records_from_result({'results': [{'output_throughput': 1.0}]},
                                   host='h', run_id='r', recorded_at='2026-05-09T07:35:25Z')
    assert record.model == 'unknown'


@pytest.mark.parametrize('result', [{}, {'results': 'not a list'}, {'results': []}, {'results': ['not a dict']}])
def test_records_from_result_ignores_results_without_levels(result):
    assert records_from_result(result, host='h', run_id='r', recorded_at='2026-05-09T07:35:25Z') == []


def _write_batches(path, writer, batches):
    with ResultsStore(path) as store:
        for batch in range(batches):
            store.add([make_record(f'writer{writer}', float(batch)), make_record(f'writer{writer}', float(batch))])


def test_concurrent_writers_lose_nothing(tmp_path):
    path = str(tmp_path / 'results.sqlite3')
    writers = [FORK.Process(target=_write_batches, args=(path, writer, 20)) for writer in range(4)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(60)
        assert writer.exitcode == 0
    with ResultsStore(path) as store:
        records = store.records()
    assert len(records) == 4 * 20 * 2
    for writer in range(4):
        # Each batch's two rows are adjacent: no other writer's row landed inside a transaction.
        row_ids = sorted(record.row_id for record in records if record.variant == f'writer{writer}')
        assert all(second == first + 1 for first, second in zip(row_ids[::2], row_ids[1::2]))


def _hang_mid_batch(path, started):
    def batch():
        yield make_record('doomed', 1.0)
        yield make_record('doomed', 2.0)
        started.set()
        time.sleep(60)
        yield make_record('doomed', 3.0)

    with ResultsStore(path) as store:
        store.add(batch())


def test_a_writer_killed_mid_transaction_leaves_a_usable_database(tmp_path):
    path = str(tmp_path / 'results.sqlite3')
    with ResultsStore(path) as store:
        store.add([make_record()])
    started = FORK.Event()
    writer = FORK.Process(target=_hang_mid_batch, args=(path, started))
    writer.start()
    try:
        assert started.wait(30)
        os.kill(writer.pid, signal.SIGKILL)
    finally:
        writer.join(30)
    assert writer.exitcode == -signal.SIGKILL
    with ResultsStore(path, timeout=5) as store:
        assert [record.variant for record in store.records()] == ['baseline']
        store.add([make_record('after')])
        assert [record.variant for record in store.records()] == ['baseline', 'after']
    connection = sqlite3.connect(path)
    try:
        assert connection.execute('PRAGMA integrity_check').fetchone()[0] == 'ok'
    finally:
        connection.close()


class SwitchRefusedConnection:
    """Answers 'PRAGMA journal_mode=WAL' with an error the first `refusals` times, as SQLite does to a connection
    that opens a new database while another switches it to WAL."""

    def __init__(self, refusals, error='database is locked'):
        self.refusals, self.error, self.asked = refusals, error, 0

    def execute(self, statement):
        assert statement == 'PRAGMA journal_mode=WAL'
        self.asked += 1
        if self.asked <= self.refusals:
            raise sqlite3.OperationalError(self.error)


def store_on(connection):
    store = ResultsStore.__new__(ResultsStore)
    store._connection = connection
    return store


def test_switch_to_wal_waits_out_a_locked_database():
    connection, now, slept = SwitchRefusedConnection(refusals=3), [0.0], []

    def sleep(seconds):
        slept.append(seconds)
        now[0] += seconds
    store_on(connection)._use_wal(30.0, clock=lambda: now[0], sleep=sleep)
    assert connection.asked == 4 and len(slept) == 3


def test_switch_to_wal_gives_up_after_the_timeout():
    connection, now = SwitchRefusedConnection(refusals=10 ** 6), [0.0]

    def sleep(seconds):
        now[0] += seconds
    with pytest.raises(sqlite3.OperationalError, match='locked'):
        store_on(connection)._use_wal(1.0, clock=lambda: now[0], sleep=sleep)
    assert 1.0 <= now[0] < 1.2


def test_switch_to_wal_does_not_retry_other_errors():
    connection = SwitchRefusedConnection(refusals=1, error='disk I/O error')
    with pytest.raises(sqlite3.OperationalError, match='disk I/O'):
        store_on(connection)._use_wal(30.0, sleep=lambda seconds: pytest.fail('retried'))
    assert connection.asked == 1
