# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Append-only SQLite store of benchmark results, one row per concurrency level, of trial decisions, and of
the nodes' trial histories (what was tried, switched and rolled back, by whom)."""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import time
import typing as t
from collections.abc import Iterable, Mapping

from ansible_collections.llmops.vllm.plugins.plugin_utils._workloads import DEFAULT_WORKLOAD

SCHEMA_VERSION = 3

# Index i holds the statements that take a database from schema version i to i + 1.
_MIGRATIONS = (
    (
        """
        CREATE TABLE results (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            recorded_at TEXT NOT NULL,
            run_id TEXT NOT NULL,
            host TEXT NOT NULL,
            model TEXT NOT NULL,
            variant TEXT NOT NULL,
            unit_checksum TEXT,
            vllm_version TEXT,
            speculative_config TEXT,
            task TEXT,
            task_failed INTEGER NOT NULL DEFAULT 0,
            max_concurrency INTEGER,
            completed INTEGER,
            failed_requests INTEGER,
            output_throughput REAL,
            output_throughput_mean REAL,
            output_throughput_ci95 REAL,
            median_tpot_ms REAL,
            median_ttft_ms REAL,
            spec_decode_acceptance_rate REAL,
            labels TEXT NOT NULL,
            options TEXT NOT NULL,
            metrics TEXT NOT NULL
        )
        """,
        "CREATE INDEX results_by_series ON results (host, model, variant, recorded_at)",
        # History is evidence: a rerun adds rows, nothing may quietly rewrite old ones.
        """
        CREATE TRIGGER results_are_append_only BEFORE UPDATE ON results
        BEGIN
            SELECT RAISE(ABORT, 'benchmark results are append-only');
        END
        """,
    ),
    (
        # What the switch role decided on a trial, in the decision function's own words.
        """
        CREATE TABLE decisions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            recorded_at TEXT NOT NULL,
            run_id TEXT NOT NULL,
            host TEXT NOT NULL,
            model TEXT NOT NULL,
            variant TEXT NOT NULL,
            baseline TEXT NOT NULL,
            unit_checksum TEXT,
            decision TEXT NOT NULL,
            outcome TEXT NOT NULL,
            reason TEXT NOT NULL,
            document TEXT NOT NULL
        )
        """,
        """
        CREATE TRIGGER decisions_are_append_only BEFORE UPDATE ON decisions
        BEGIN
            SELECT RAISE(ABORT, 'trial decisions are append-only');
        END
        """,
    ),
    (
        # The controller's copy of each node's history (llmops.vllm.trial_history), entry by entry.
        """
        CREATE TABLE history (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            recorded_at TEXT NOT NULL,
            run_id TEXT,
            host TEXT NOT NULL,
            model TEXT NOT NULL,
            variant TEXT NOT NULL,
            outcome TEXT NOT NULL,
            identity TEXT,
            document TEXT NOT NULL
        )
        """,
        """
        CREATE TRIGGER history_is_append_only BEFORE UPDATE ON history
        BEGIN
            SELECT RAISE(ABORT, 'the trial history is append-only');
        END
        """,
    ),
)

_METRIC_COLUMNS = (
    'max_concurrency',
    'completed',
    'output_throughput',
    'output_throughput_mean',
    'output_throughput_ci95',
    'median_tpot_ms',
    'median_ttft_ms',
    'spec_decode_acceptance_rate',
)


class ResultsStoreError(Exception):
    """The database cannot be used by this version of the collection."""


@dataclasses.dataclass(frozen=True)
class BenchmarkRecord:
    """One concurrency level of one benchmark task, with the labels that say what was measured."""

    recorded_at: str
    run_id: str
    host: str
    model: str
    variant: str
    metrics: Mapping[str, t.Any]
    labels: Mapping[str, t.Any] = dataclasses.field(default_factory=dict)
    options: Mapping[str, t.Any] = dataclasses.field(default_factory=dict)
    task: str | None = None
    task_failed: bool = False
    row_id: int | None = None

    @property
    def max_concurrency(self) -> int | None:
        return self.metrics.get('max_concurrency')

    @property
    def unit_checksum(self) -> str | None:
        return self.labels.get('unit_checksum')

    @property
    def trial_identity(self) -> str | None:
        """The hash over what served (llmops.vllm.trial_identity); results measured before it existed have none."""
        return self.labels.get('trial_identity')

    @property
    def workload(self) -> str:
        """The workload the level belongs to; results measured before workloads existed belong to the default one."""
        return str(self.labels.get('workload') or DEFAULT_WORKLOAD)

    @property
    def vllm_version(self) -> str | None:
        return self.labels.get('vllm_version')

    @property
    def speculative_config(self) -> t.Any:
        return self.labels.get('speculative_config')


@dataclasses.dataclass(frozen=True)
class DecisionRecord:
    """One trial decision as stored: where and when, and the decision function's whole answer."""

    recorded_at: str
    run_id: str
    host: str
    model: str
    variant: str
    baseline: str
    unit_checksum: str | None
    document: Mapping[str, t.Any]
    row_id: int | None = None


@dataclasses.dataclass(frozen=True)
class HistoryEntry:
    """One entry of a node's trial history: a trial's start or outcome, a switch or a rollback."""

    host: str
    document: Mapping[str, t.Any]
    row_id: int | None = None

    @property
    def recorded_at(self) -> str:
        return str(self.document.get('recorded_at') or '')

    @property
    def model(self) -> str:
        return str(self.document.get('model') or 'unknown')

    @property
    def variant(self) -> str:
        return str(self.document.get('variant'))

    @property
    def outcome(self) -> str:
        return str(self.document.get('outcome'))

    @property
    def run_id(self) -> str | None:
        return self.document.get('run_id')

    @property
    def identity(self) -> str | None:
        identity = self.document.get('identity')
        return identity.get('sha256') if isinstance(identity, Mapping) else None


def records_from_result(result: Mapping[str, t.Any], *, host: str, run_id: str, recorded_at: str,
                        task: str | None = None, task_failed: bool = False) -> list[BenchmarkRecord]:
    """Split one openai_benchmark module result into one record per concurrency level.

    The model and variant come from the result's labels; the served model name stands in for an
    unlabelled model, and C(unknown) for anything else missing, so that no measurement is dropped.
    """
    levels = result.get('results')
    if not isinstance(levels, list):
        return []
    labels = dict(result.get('labels') or {})
    options = dict(result.get('options') or {})
    model = labels.get('model') or options.get('model') or 'unknown'
    variant = labels.get('variant') or 'unknown'
    return [
        BenchmarkRecord(
            recorded_at=recorded_at, run_id=run_id, host=host, model=str(model), variant=str(variant),
            metrics=dict(level), labels=labels, options=options, task=task, task_failed=task_failed,
        )
        for level in levels if isinstance(level, Mapping)
    ]


class ResultsStore:
    """An open benchmark database; use as a context manager so the connection is always closed.

    Every connection runs in WAL mode: readers never block the writer, and a process killed in
    the middle of a write loses only its own uncommitted transaction.
    """

    def __init__(self, path: str, timeout: float = 30.0) -> None:
        directory = os.path.dirname(path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        # isolation_level=None leaves transaction control to this class (explicit BEGIN IMMEDIATE),
        # so a writer takes the write lock up front instead of failing on a lock upgrade later.
        self._connection = sqlite3.connect(path, timeout=timeout, isolation_level=None)
        try:
            self._use_wal(timeout)
            self._migrate()
        except BaseException:
            self._connection.close()
            raise

    def __enter__(self) -> ResultsStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._connection.close()

    def _use_wal(self, timeout: float, clock: t.Callable[[], float] = time.monotonic,
                 sleep: t.Callable[[float], None] = time.sleep) -> None:
        """Switch the database to write-ahead logging, waiting out other connections that open it meanwhile.

        While another connection switches a new database to WAL, SQLite may answer "database is locked" at once,
        without waiting the connection's timeout (four processes opening one new file at the same moment failed
        about once in 400 opens here). The mode is kept in the file, so only the first opens ever race.
        """
        deadline = clock() + timeout
        while True:
            try:
                self._connection.execute('PRAGMA journal_mode=WAL')
                return
            except sqlite3.OperationalError as error:
                if 'locked' not in str(error) or clock() >= deadline:
                    raise
            sleep(0.05)

    @property
    def schema_version(self) -> int:
        return self._connection.execute('PRAGMA user_version').fetchone()[0]

    def _migrate(self) -> None:
        if self.schema_version == SCHEMA_VERSION:
            return
        self._connection.execute('BEGIN IMMEDIATE')
        try:
            # Read again under the write lock: another process may have migrated in the meantime.
            version = self.schema_version
            if version > SCHEMA_VERSION:
                raise ResultsStoreError(
                    f'the benchmark database has schema version {version}, newer than the version'
                    f' {SCHEMA_VERSION} this collection knows; upgrade llmops.vllm to read it')
            for statements in _MIGRATIONS[version:]:
                for statement in statements:
                    self._connection.execute(statement)
            self._connection.execute(f'PRAGMA user_version = {SCHEMA_VERSION:d}')
            self._connection.execute('COMMIT')
        except BaseException:
            self._connection.execute('ROLLBACK')
            raise

    def add(self, records: Iterable[BenchmarkRecord]) -> list[int]:
        """Insert the records in one transaction: either all of them are stored or none is."""
        row_ids = []
        self._connection.execute('BEGIN IMMEDIATE')
        try:
            for record in records:
                row_ids.append(self._insert(record))
            self._connection.execute('COMMIT')
        except BaseException:
            self._connection.execute('ROLLBACK')
            raise
        return row_ids

    def _insert(self, record: BenchmarkRecord) -> int:
        metrics = record.metrics
        columns = {
            'recorded_at': record.recorded_at,
            'run_id': record.run_id,
            'host': record.host,
            'model': record.model,
            'variant': record.variant,
            'unit_checksum': record.unit_checksum,
            'vllm_version': record.vllm_version,
            'speculative_config': _to_json(record.speculative_config),
            'task': record.task,
            'task_failed': int(record.task_failed),
            'failed_requests': metrics.get('failed'),
            'labels': _to_json(record.labels),
            'options': _to_json(record.options),
            'metrics': _to_json(metrics),
        }
        columns.update((name, metrics.get(name)) for name in _METRIC_COLUMNS)
        names = ', '.join(columns)
        placeholders = ', '.join('?' * len(columns))
        cursor = self._connection.execute(
            f'INSERT INTO results ({names}) VALUES ({placeholders})', tuple(columns.values()))
        return cursor.lastrowid

    def add_decision(self, decision: DecisionRecord) -> int:
        """Store one trial decision."""
        self._connection.execute('BEGIN IMMEDIATE')
        try:
            cursor = self._connection.execute(
                'INSERT INTO decisions (recorded_at, run_id, host, model, variant, baseline, unit_checksum,'
                ' decision, outcome, reason, document) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
                (decision.recorded_at, decision.run_id, decision.host, decision.model, decision.variant,
                 decision.baseline, decision.unit_checksum, decision.document['decision'],
                 decision.document['outcome'], decision.document['reason'], _to_json(decision.document)))
            self._connection.execute('COMMIT')
        except BaseException:
            self._connection.execute('ROLLBACK')
            raise
        return cursor.lastrowid

    def add_history(self, entry: HistoryEntry) -> int:
        """Store one entry of a node's history."""
        self._connection.execute('BEGIN IMMEDIATE')
        try:
            cursor = self._connection.execute(
                'INSERT INTO history (recorded_at, run_id, host, model, variant, outcome, identity, document)'
                ' VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
                (entry.recorded_at, entry.run_id, entry.host, entry.model, entry.variant, entry.outcome,
                 entry.identity, _to_json(entry.document)))
            self._connection.execute('COMMIT')
        except BaseException:
            self._connection.execute('ROLLBACK')
            raise
        return cursor.lastrowid

    def history(self, *, host: str | None = None, model: str | None = None) -> list[HistoryEntry]:
        """Stored history entries, oldest first."""
        wanted = {name: value for name, value in (('host', host), ('model', model)) if value is not None}
        where = ' AND '.join(f'{name} = ?' for name in wanted) or '1'
        rows = self._connection.execute(
            f'SELECT id, host, document FROM history WHERE {where} ORDER BY recorded_at, id', tuple(wanted.values()))
        return [HistoryEntry(row_id=row[0], host=row[1], document=json.loads(row[2])) for row in rows]

    def decisions(self, *, host: str | None = None, model: str | None = None) -> list[DecisionRecord]:
        """Stored decisions, oldest first."""
        wanted = {name: value for name, value in (('host', host), ('model', model)) if value is not None}
        where = ' AND '.join(f'{name} = ?' for name in wanted) or '1'
        rows = self._connection.execute(
            'SELECT id, recorded_at, run_id, host, model, variant, baseline, unit_checksum, document'
            f' FROM decisions WHERE {where} ORDER BY recorded_at, id', tuple(wanted.values()))
        return [DecisionRecord(row_id=row[0], recorded_at=row[1], run_id=row[2], host=row[3], model=row[4],
                               variant=row[5], baseline=row[6], unit_checksum=row[7], document=json.loads(row[8]))
                for row in rows]

    def records(self, *, host: str | None = None, model: str | None = None,
                variant: str | None = None) -> list[BenchmarkRecord]:
        """Stored records, oldest first, optionally only those of one host, model or variant."""
        wanted = {name: value for name, value in (('host', host), ('model', model), ('variant', variant))
                  if value is not None}
        where = ' AND '.join(f'{name} = ?' for name in wanted) or '1'
        rows = self._connection.execute(
            'SELECT id, recorded_at, run_id, host, model, variant, task, task_failed, labels, options, metrics'
            f' FROM results WHERE {where} ORDER BY recorded_at, id',
            tuple(wanted.values()))
        return [
            BenchmarkRecord(
                row_id=row[0], recorded_at=row[1], run_id=row[2], host=row[3], model=row[4], variant=row[5],
                task=row[6], task_failed=bool(row[7]), labels=json.loads(row[8]), options=json.loads(row[9]),
                metrics=json.loads(row[10]),
            )
            for row in rows
        ]


def _to_json(value: t.Any) -> str | None:
    if value is None:
        return None
    # sort_keys makes equal configurations compare equal as text in SQL queries.
    return json.dumps(value, sort_keys=True, default=str)
