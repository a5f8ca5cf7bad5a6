# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import dataclasses
import datetime
import itertools
import os
import sqlite3
from collections.abc import Mapping

from ansible.plugins.action import ActionBase

from ansible_collections.llmops.vllm.plugins.modules.results_store import DOCUMENTATION
from ansible_collections.llmops.vllm.plugins.plugin_utils._callback_settings import callback_setting
from ansible_collections.llmops.vllm.plugins.plugin_utils._controller_run import controller_identity
from ansible_collections.llmops.vllm.plugins.plugin_utils._decision import DECISION_KEYS
from ansible_collections.llmops.vllm.plugins.plugin_utils._documented_options import documented_argument_spec
from ansible_collections.llmops.vllm.plugins.plugin_utils._report import write_atomically, write_report
from ansible_collections.llmops.vllm.plugins.plugin_utils._results_files import (
    decision_document,
    decision_file_name,
    result_document,
    result_file_name,
)
from ansible_collections.llmops.vllm.plugins.plugin_utils._results_store import (
    DecisionRecord,
    HistoryEntry,
    ResultsStore,
    ResultsStoreError,
    records_from_result,
)

_STORAGE_ERRORS = (sqlite3.Error, OSError, ResultsStoreError)
_SETTINGS = ('database', 'json_dir', 'report', 'baseline_variant')


class ActionModule(ActionBase):
    """Write on the controller, where the database lives, whichever host the task names."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=documented_argument_spec(DOCUMENTATION))
        settings = {name: args[name] or callback_setting(name) for name in _SETTINGS}
        now = datetime.datetime.now(datetime.timezone.utc)
        store = _Mirror(settings, run_id=controller_identity(now)['run_id'],
                        host=(task_vars or {}).get('inventory_hostname') or 'localhost',
                        recorded_at=now.strftime('%Y-%m-%dT%H:%M:%SZ'))
        if not self._task.check_mode:
            if args['benchmark'] is not None:
                store.add_benchmark(args['benchmark'], task=args['task'])
            if args['decision'] is not None:
                store.add_decision(args['decision'])
            if args['history'] is not None:
                store.add_history(args['history'])
            store.rewrite_report()
        result.update(changed=False, database=settings['database'], run_id=store.run_id,
                      results=[dataclasses.asdict(record) for record in store.records],
                      decision=dataclasses.asdict(store.decision) if store.decision else None,
                      json_files=store.json_files, report=store.report)
        if store.warnings:
            result['warnings'] = store.warnings
        return result


def _benchmark_outcomes(benchmark):
    """(module result, failed) per benchmark run: a looped task's items, each marked with its loop variable."""
    items = benchmark.get('results')
    if isinstance(items, list) and items and all(isinstance(item, Mapping) and 'ansible_loop_var' in item
                                                 for item in items):
        return [(item, bool(item.get('failed'))) for item in items]
    return [(benchmark, bool(benchmark.get('failed')))]


class _Mirror:
    """One task's additions to the store; a failure to write costs a warning, never the play."""

    def __init__(self, settings, *, run_id, host, recorded_at):
        self._settings = settings
        self.run_id = run_id
        self._host = host
        self._recorded_at = recorded_at
        self._sequence = itertools.count(1)
        self.records = []
        self.decision = None
        self.json_files = []
        self.report = None
        self.warnings = []

    def add_benchmark(self, benchmark, *, task):
        records = []
        for module_result, failed in _benchmark_outcomes(benchmark):
            records.extend(records_from_result(module_result, host=self._host, run_id=self.run_id,
                                               recorded_at=self._recorded_at, task=task, task_failed=failed))
        if not records:
            return
        row_ids = self._write_rows(lambda store: store.add(records), f'{len(records)} results')
        self.records = [dataclasses.replace(record, row_id=row_id)
                        for record, row_id in zip(records, row_ids or itertools.repeat(None))]
        for record in self.records:
            self._write_file(result_file_name(record, next(self._sequence)), result_document(record))

    def add_decision(self, outcome):
        if 'decision' not in outcome:
            return
        decision = DecisionRecord(
            recorded_at=self._recorded_at, run_id=self.run_id, host=outcome.get('host') or self._host,
            model=str(outcome.get('model')), variant=str(outcome.get('variant')), baseline=str(outcome.get('baseline')),
            unit_checksum=outcome.get('unit_checksum'), document={key: outcome.get(key) for key in DECISION_KEYS})
        row_id = self._write_rows(lambda store: store.add_decision(decision), f'the decision on {decision.variant}')
        self.decision = dataclasses.replace(decision, row_id=row_id)
        self._write_file(decision_file_name(self.decision), decision_document(self.decision))

    def add_history(self, entry):
        self._write_rows(lambda store: store.add_history(HistoryEntry(host=self._host, document=dict(entry))),
                         f'the history entry of {entry.get("variant")}')

    def rewrite_report(self):
        path = self._settings['report']
        if not path or not (self.records or self.decision):
            return
        try:
            with ResultsStore(self._settings['database']) as store:
                records, decisions, history = store.records(), store.decisions(), store.history()
            outcome = write_report(path, records, self._settings['baseline_variant'], decisions=decisions,
                                   history=history)
        except _STORAGE_ERRORS as error:
            self.warnings.append(f'results_store: could not write the report {path}: {error}')
            return
        self.report = outcome.path

    def _write_rows(self, add, what):
        database = self._settings['database']
        try:
            with ResultsStore(database) as store:
                return add(store)
        except _STORAGE_ERRORS as error:
            self.warnings.append(f'results_store: could not store {what} in {database}: {error}')
            return None

    def _write_file(self, name, content):
        directory = self._settings['json_dir']
        path = os.path.join(directory, name)
        try:
            os.makedirs(directory, exist_ok=True)
            write_atomically(path, content)
        except OSError as error:
            self.warnings.append(f'results_store: could not write {path}: {error}')
        else:
            self.json_files.append(path)
