# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import os
import sqlite3

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.llmops.vllm.plugins.modules.benchmark_report import DOCUMENTATION
from ansible_collections.llmops.vllm.plugins.plugin_utils._callback_settings import callback_setting
from ansible_collections.llmops.vllm.plugins.plugin_utils._documented_options import documented_argument_spec
from ansible_collections.llmops.vllm.plugins.plugin_utils._report import UNDECIDED, decisions_by_trial, write_report
from ansible_collections.llmops.vllm.plugins.plugin_utils._results_store import ResultsStore, ResultsStoreError


class ActionModule(ActionBase):
    """Render the report on the controller, where the results store lives."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=documented_argument_spec(DOCUMENTATION))
        database = args['database'] or callback_setting('database')
        baseline_variant = args['baseline_variant'] or callback_setting('baseline_variant')
        if not os.path.exists(database):
            raise AnsibleActionFail(f'No benchmark database at {database}: nothing has been recorded there yet'
                                    ' (llmops.vllm.results_store writes it; is this the database its settings name?)')
        try:
            with ResultsStore(database) as store:
                records = store.records()
                decisions = store.decisions()
                history = store.history()
            outcome = write_report(args['dest'], records, baseline_variant, decisions=decisions,
                                   history=history, rankings=args['rankings'],
                                   draw_charts=args['chart'], check_mode=self._task.check_mode)
        except (sqlite3.Error, OSError, ResultsStoreError) as error:
            raise AnsibleActionFail(f'Could not write the report {args["dest"]} from {database}: {error}') from error
        result.update(
            changed=outcome.changed,
            dest=outcome.path,
            charts=list(outcome.charts),
            stored_results=len(records),
            comparisons=[_comparison_summary(row, baseline_variant, decisions_by_trial(decisions))
                         for rows in outcome.groups.values() for row in rows],
        )
        if args['noise_pct'] is not None:
            result['deprecations'] = [{'msg': 'benchmark_report: noise_pct is ignored, a verdict is the decision of'
                                              ' a trial', 'version': '2.0.0', 'collection_name': 'llmops.vllm'}]
        if outcome.chart_note:
            result['chart_note'] = outcome.chart_note
        if self._task.diff and outcome.changed:
            result['diff'] = {'before': outcome.before, 'after': outcome.after,
                              'before_header': outcome.path, 'after_header': outcome.path}
        return result


def _comparison_summary(row, baseline_variant, decisions):
    record = row.record
    decision = decisions.get((record.host, record.model, record.variant, record.run_id))
    if record.variant == baseline_variant:
        verdict, decision = 'baseline', None
    elif decision is None:
        verdict = UNDECIDED
    else:
        verdict, decision = decision.get('outcome'), decision.get('decision')
    return {
        'host': record.host,
        'model': record.model,
        'variant': record.variant,
        'max_concurrency': record.max_concurrency,
        'recorded_at': record.recorded_at,
        'run_id': record.run_id,
        'verdict': verdict,
        'decision': decision,
        'delta_pct': row.change.delta_pct if row.change else None,
        'baseline_run_id': row.baseline.run_id if row.baseline is not None else None,
        'baseline_same_run': row.baseline_from_same_run,
        'task_failed': record.task_failed,
        'problem': row.problem,
    }
