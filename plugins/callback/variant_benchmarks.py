# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: variant_benchmarks
type: aggregate
short_description: Print every variant measured in a run against the baseline, with its trial's decision
description:
  - At the end of the playbook prints, per host and model, each variant measured in this run against
    the baseline measured in this run, or, failing that, against the latest stored baseline of that
    host and model, which the table then says, with the changes in percent.
  - It prints what P(llmops.vllm.results_store#module) stored in this run, which the C(llmops.vllm.vllm_switch)
    role calls after every benchmark, decision and trial record. A variant decided on in this run shows that
    decision in the table, with its reason below, so that the console, the database, the JSON files and the
    report say the same. A variant's result that no trial decided is shown as undecided; the table never labels a
    result faster or slower on its own.
  - Only prints. It stores nothing, and the switch role's decision reads nothing that it keeps, so a playbook run
    without it stores and decides alike.
  - Its options below hold where the results store lives; P(llmops.vllm.results_store#module) and
    P(llmops.vllm.benchmark_report#module) default to them, whether or not the callback is enabled.
version_added: 1.0.0
author:
  - llmops.vllm maintainers (!UNKNOWN)
requirements:
  - Enable the callback in C(callbacks_enabled).
  - The Python module C(matplotlib) on the controller, only to draw the chart of O(report).
options:
  database:
    description:
      - SQLite database that P(llmops.vllm.results_store#module) adds every result to. Its directory is created when
        missing.
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
      - Markdown report of everything in O(database), rewritten by P(llmops.vllm.results_store#module) whenever it
        stores a result or a decision. Charts are written beside it as PNG files when matplotlib is importable.
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
  - module: llmops.vllm.results_store
  - module: llmops.vllm.trial_decision
  - module: llmops.vllm.benchmark_report
  - module: llmops.vllm.openai_benchmark
"""

import sqlite3

from ansible.plugins.callback import CallbackBase

from ansible_collections.llmops.vllm.plugins.plugin_utils._comparison import comparison_rows
from ansible_collections.llmops.vllm.plugins.plugin_utils._report import decisions_by_trial, rule_summary, text_table
from ansible_collections.llmops.vllm.plugins.plugin_utils._results_store import (
    BenchmarkRecord,
    DecisionRecord,
    ResultsStore,
    ResultsStoreError,
)

_STORE_ACTIONS = frozenset(('llmops.vllm.results_store', 'results_store'))


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'llmops.vllm.variant_benchmarks'
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._records = []
        self._decisions = []
        self._run_ids = []
        self._databases = []
        self._json_files = 0

    def v2_runner_on_ok(self, result) -> None:
        task = result._task
        if task.resolved_action not in _STORE_ACTIONS and task.action not in _STORE_ACTIONS:
            return
        stored = result._result
        self._records.extend(BenchmarkRecord(**record) for record in stored.get('results') or [])
        if stored.get('decision'):
            self._decisions.append(DecisionRecord(**stored['decision']))
        self._json_files += len(stored.get('json_files') or [])
        for key, seen in (('run_id', self._run_ids), ('database', self._databases)):
            if stored.get(key) and stored[key] not in seen:
                seen.append(stored[key])

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
        stored_rows = sum(record.row_id is not None for record in self._records)
        self._display.banner('VARIANT BENCHMARKS')
        self._display.display(f'Run {", ".join(run_id[:8] for run_id in self._run_ids)}. {rule_summary(baseline_variant)}')
        self._display.display(text_table(groups, baseline_variant, decisions_by_trial(self._decisions)))
        self._display.display(
            f"Stored {stored_rows} of {len(self._records)} results in {', '.join(self._databases)};"
            f" {self._json_files} JSON files.")

    def _stored_baselines(self, baseline_variant):
        """Baselines of earlier runs for the hosts and models of this run, to fall back on."""
        series = {(record.host, record.model) for record in self._records}
        stored = []
        for database in self._databases:
            try:
                with ResultsStore(database) as store:
                    stored.extend(store.records(variant=baseline_variant))
            except (sqlite3.Error, OSError, ResultsStoreError) as error:
                self._display.warning(f'variant_benchmarks: could not read earlier baselines: {error}')
        return [record for record in stored
                if record.run_id not in self._run_ids and (record.host, record.model) in series]
