# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: variant_benchmarks
type: aggregate
short_description: Record vLLM benchmark results and compare every variant with the baseline
description:
  - Stores every result of M(llmops.vllm.openai_benchmark) in an SQLite database, one row per
    concurrency level, with the time (UTC), a run ID, the task's host, and the result's labels
    (model, variant, unit checksum, vLLM version, speculative config), benchmark options and metrics.
    A rerun adds rows and never rewrites stored ones. Results of a failed benchmark task are stored
    too when it returned any, marked as coming from a failed task.
  - Writes one JSON file per result, laid out like the file of C(vllm bench serve --save-result),
    so that tools reading those files read these too.
  - At the end of the playbook prints, per host and model, each variant measured in this run against
    the baseline measured in this run, or, failing that, against the latest stored baseline of that
    host and model, which the table then says, with the changes in percent.
  - Stores every answer of M(llmops.vllm.trial_decision) (the switch role's keep-or-roll-back decision) in
    the same database, table C(decisions), and as a JSON file. A variant decided on in this run shows that
    decision in the table, with its reason below, so that the console, the database, the JSON files and
    the report say the same. A variant's result that no trial decided is shown as undecided; the table
    never labels a result faster or slower on its own.
  - Only prints and stores. The switch role's decision reads nothing that this callback keeps, so a
    playbook run without it decides alike.
  - A run is one C(ansible-playbook) invocation. Results are recognised by the task's action,
    C(llmops.vllm.openai_benchmark) or the short name C(openai_benchmark); the host is the task's
    host even when the benchmark was delegated.
  - Storing never fails the play; a database or file that cannot be written is reported as a warning.
version_added: 1.0.0
author:
  - llmops.vllm maintainers (!UNKNOWN)
requirements:
  - Enable the callback in C(callbacks_enabled).
  - The Python module C(matplotlib) on the controller, only to draw the chart of O(report).
options:
  database:
    description:
      - SQLite database that every result is added to. Its directory is created when missing.
      - A relative path in C(ansible.cfg) is relative to the directory of that configuration file;
        one in the environment is relative to the current directory.
    type: path
    default: ~/.ansible/llmops_vllm/benchmarks.sqlite3
    ini:
      - section: callback_variant_benchmarks
        key: database
    env:
      - name: LLMOPS_VLLM_BENCHMARKS_DATABASE
  json_dir:
    description:
      - Directory that receives one JSON file per result, named after time, host, model, variant,
        concurrency and run.
      - Relative paths are resolved like those of O(database).
    type: path
    default: ~/.ansible/llmops_vllm/runs
    ini:
      - section: callback_variant_benchmarks
        key: json_dir
    env:
      - name: LLMOPS_VLLM_BENCHMARKS_JSON_DIR
  report:
    description:
      - Markdown report of everything in O(database), rewritten at the end of every playbook run that
        recorded a result. Charts are written beside it as PNG files when matplotlib is importable.
      - Not written when unset. M(llmops.vllm.benchmark_report) writes the same report on demand.
    type: path
    ini:
      - section: callback_variant_benchmarks
        key: report
    env:
      - name: LLMOPS_VLLM_BENCHMARKS_REPORT
  baseline_variant:
    description:
      - Variant label of the known-good configuration that the other variants are compared with.
    type: str
    default: baseline
    ini:
      - section: callback_variant_benchmarks
        key: baseline_variant
    env:
      - name: LLMOPS_VLLM_BENCHMARKS_BASELINE_VARIANT
  noise_pct:
    description:
      - Deprecated and ignored; it will be removed in release 2.0.0. The table no longer labels a result
        by a noise band; it shows the decision of the trial that measured it, or undecided.
    type: float
    ini:
      - section: callback_variant_benchmarks
        key: noise_pct
    env:
      - name: LLMOPS_VLLM_BENCHMARKS_NOISE_PCT
seealso:
  - module: llmops.vllm.trial_decision
  - module: llmops.vllm.benchmark_report
  - module: llmops.vllm.openai_benchmark
"""

import dataclasses
import datetime
import itertools
import json
import os
import re
import sqlite3
import uuid
from collections.abc import Mapping

from ansible.plugins.callback import CallbackBase

from ansible_collections.llmops.vllm.plugins.plugin_utils._comparison import comparison_rows
from ansible_collections.llmops.vllm.plugins.plugin_utils._decision import DECISION_KEYS
from ansible_collections.llmops.vllm.plugins.plugin_utils._report import (
    decisions_by_trial,
    rule_summary,
    text_table,
    write_atomically,
    write_report,
)
from ansible_collections.llmops.vllm.plugins.plugin_utils._results_store import (
    DecisionRecord,
    HistoryEntry,
    ResultsStore,
    ResultsStoreError,
    records_from_result,
)

_BENCHMARK_ACTIONS = frozenset(('llmops.vllm.openai_benchmark', 'openai_benchmark'))
_DECISION_ACTIONS = frozenset(('llmops.vllm.trial_decision', 'trial_decision'))
_HISTORY_ACTIONS = frozenset(('llmops.vllm.trial_record', 'trial_record', 'llmops.vllm.trial_history', 'trial_history'))

# The benchmark's endpoint option mapped to the backend name vllm bench serve writes for it.
_BACKENDS = {'completions': 'openai', 'chat': 'openai-chat'}

_STORAGE_ERRORS = (sqlite3.Error, OSError, ResultsStoreError)


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'llmops.vllm.variant_benchmarks'
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._run_id = uuid.uuid4().hex
        self._records = []
        self._decisions = []
        self._stored_rows = 0
        self._json_files = 0
        self._json_sequence = itertools.count(1)

    def v2_runner_on_ok(self, result) -> None:
        self._record(result, task_failed=False)

    def v2_runner_on_failed(self, result, ignore_errors=False) -> None:
        self._record(result, task_failed=True)

    def _record(self, result, task_failed: bool) -> None:
        task = result._task
        if task.resolved_action in _DECISION_ACTIONS or task.action in _DECISION_ACTIONS:
            if not task_failed:
                self._record_decision(result)
            return
        if task.resolved_action in _HISTORY_ACTIONS or task.action in _HISTORY_ACTIONS:
            if not task_failed and not task.check_mode:
                self._record_history(result)
            return
        if task.resolved_action not in _BENCHMARK_ACTIONS and task.action not in _BENCHMARK_ACTIONS:
            return
        outcome = result._result
        items = _loop_items(outcome)
        outcomes = [(item, bool(item.get('failed'))) for item in items] if items else [(outcome, task_failed)]
        recorded_at = datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')
        records = []
        for module_result, failed in outcomes:
            records.extend(records_from_result(
                module_result, host=result._host.get_name(), run_id=self._run_id, recorded_at=recorded_at,
                task=task.get_name(), task_failed=failed))
        if records:
            self._records.extend(self._store(records))
            self._write_json_files(records)

    def _record_decision(self, result) -> None:
        outcome = result._result
        if 'decision' not in outcome:
            return
        document = {key: outcome.get(key) for key in DECISION_KEYS}
        decision = DecisionRecord(
            recorded_at=datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ'),
            run_id=self._run_id, host=outcome.get('host') or result._host.get_name(), model=str(outcome.get('model')),
            variant=str(outcome.get('variant')), baseline=str(outcome.get('baseline')),
            unit_checksum=outcome.get('unit_checksum'), document=document)
        database = self.get_option('database')
        try:
            with ResultsStore(database) as store:
                decision = dataclasses.replace(decision, row_id=store.add_decision(decision))
        except _STORAGE_ERRORS as error:
            self._display.warning(f'variant_benchmarks: could not store the decision on {decision.variant} in'
                                  f' {database}: {error}')
        self._decisions.append(decision)
        directory = self.get_option('json_dir')
        name = _file_name((_file_time(), decision.host, decision.model, decision.variant, 'decision',
                           decision.run_id[:8]))
        path = os.path.join(directory, name)
        try:
            os.makedirs(directory, exist_ok=True)
            write_atomically(path, json.dumps(dict(dataclasses.asdict(decision)), indent=2, default=str).encode('utf-8'))
        except OSError as error:
            self._display.warning(f'variant_benchmarks: could not write {path}: {error}')
        else:
            self._json_files += 1

    def _record_history(self, result) -> None:
        # The node's history, entry by entry, so that the controller keeps it too (and the node's survives
        # an ephemeral controller).
        # trial_record returns the record it wrote, trial_history the entry.
        entry = result._result.get('record', result._result.get('entry'))
        if not isinstance(entry, Mapping):
            return
        database = self.get_option('database')
        try:
            with ResultsStore(database) as store:
                store.add_history(HistoryEntry(host=result._host.get_name(), document=dict(entry)))
        except _STORAGE_ERRORS as error:
            self._display.warning(f'variant_benchmarks: could not store the history entry of {entry.get("variant")}'
                                  f' in {database}: {error}')

    def _store(self, records):
        database = self.get_option('database')
        try:
            with ResultsStore(database) as store:
                row_ids = store.add(records)
        except _STORAGE_ERRORS as error:
            # Losing the database must not cost the benchmark: the summary and JSON files still follow.
            self._display.warning(f'variant_benchmarks: could not store {len(records)} results in {database}: {error}')
            return records
        self._stored_rows += len(row_ids)
        return [dataclasses.replace(record, row_id=row_id) for record, row_id in zip(records, row_ids)]

    def _write_json_files(self, records) -> None:
        directory = self.get_option('json_dir')
        for record in records:
            path = os.path.join(directory, _json_file_name(record, next(self._json_sequence)))
            try:
                os.makedirs(directory, exist_ok=True)
                write_atomically(path, json.dumps(_save_result_document(record), indent=2, default=str).encode('utf-8'))
            except OSError as error:
                self._display.warning(f'variant_benchmarks: could not write {path}: {error}')
            else:
                self._json_files += 1

    def v2_playbook_on_stats(self, stats) -> None:
        if not self._records:
            return
        baseline_variant = self.get_option('baseline_variant')
        if self.get_option('noise_pct') is not None:
            self._display.deprecated('The noise_pct option of the llmops.vllm.variant_benchmarks callback is ignored:'
                                     " the table shows each trial's decision", version='2.0.0',
                                     collection_name='llmops.vllm')
        groups = comparison_rows(self._records, self._records + self._stored_baselines(baseline_variant),
                                 baseline_variant)
        self._display.banner('VARIANT BENCHMARKS')
        self._display.display(f'Run {self._run_id[:8]}. {rule_summary(baseline_variant)}')
        self._display.display(text_table(groups, baseline_variant, decisions_by_trial(self._decisions)))
        self._display.display(
            f"Stored {self._stored_rows} of {len(self._records)} results in {self.get_option('database')};"
            f" {self._json_files} JSON files in {self.get_option('json_dir')}.")
        if self.get_option('report'):
            self._write_report(baseline_variant)

    def _stored_baselines(self, baseline_variant):
        """Baselines of earlier runs for the hosts and models of this run, to fall back on."""
        series = {(record.host, record.model) for record in self._records}
        try:
            with ResultsStore(self.get_option('database')) as store:
                stored = store.records(variant=baseline_variant)
        except _STORAGE_ERRORS as error:
            self._display.warning(f'variant_benchmarks: could not read earlier baselines: {error}')
            return []
        return [record for record in stored
                if record.run_id != self._run_id and (record.host, record.model) in series]

    def _write_report(self, baseline_variant) -> None:
        path = self.get_option('report')
        try:
            with ResultsStore(self.get_option('database')) as store:
                records = store.records()
                decisions = store.decisions()
                history = store.history()
            outcome = write_report(path, records, baseline_variant, decisions=decisions, history=history)
        except _STORAGE_ERRORS as error:
            self._display.warning(f'variant_benchmarks: could not write the report {path}: {error}')
            return
        self._display.display(f'Report: {outcome.path}' + (f' ({outcome.chart_note})' if outcome.chart_note else ''))


def _loop_items(outcome):
    """The items' results of a looped task, which ends with them all, each marked with its loop variable."""
    items = outcome.get('results')
    if not isinstance(items, list) or not items:
        return []
    return items if all(isinstance(item, Mapping) and 'ansible_loop_var' in item for item in items) else []


def _json_file_name(record, sequence: int) -> str:
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
