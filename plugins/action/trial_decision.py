# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import os
import sqlite3

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.llmops.vllm.plugins.plugin_utils._decision import (
    DEFAULT_MARGIN_PCT,
    KEEP_WHEN,
    MIN_RUNS,
    NOT_SLOWER,
    DecisionError,
    decide_workloads,
    history_from_records,
)
from ansible_collections.llmops.vllm.plugins.plugin_utils._callback_settings import callback_setting
from ansible_collections.llmops.vllm.plugins.plugin_utils._results_store import ResultsStore, ResultsStoreError

_ARGUMENT_SPEC = {
    'variant': {'type': 'raw', 'required': True},
    'baseline': {'type': 'raw', 'required': True},
    'variant_name': {'type': 'str', 'required': True},
    'baseline_name': {'type': 'str', 'default': 'baseline'},
    'model': {'type': 'str', 'required': True},
    'host': {'type': 'str'},
    'unit_checksum': {'type': 'str'},
    'baseline_unit_checksum': {'type': 'str'},
    'identity': {'type': 'str'},
    'baseline_identity': {'type': 'str'},
    'baseline_lifetime': {'type': 'str'},
    'keep_when': {'type': 'str', 'default': NOT_SLOWER, 'choices': list(KEEP_WHEN)},
    'margin_pct': {'type': 'float', 'default': DEFAULT_MARGIN_PCT},
    'min_runs': {'type': 'int', 'default': MIN_RUNS},
    'database': {'type': 'path'},
    'history': {'type': 'bool', 'default': True},
    'slo': {'type': 'dict'},
    'workload_slo': {'type': 'dict', 'default': {}},
    'accept_foreign_traffic': {'type': 'bool', 'default': False},
}


class ActionModule(ActionBase):
    """Decide on the controller, where the callback keeps the baseline's history."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=_ARGUMENT_SPEC)
        host = args['host'] or (task_vars or {}).get('inventory_hostname')
        history = []
        database = None
        if args['history']:
            database = args['database'] or callback_setting('database')
            history = _stored_history(database, host, args)
        try:
            answer = decide_workloads(args['variant'], args['baseline'], history=history, keep_when=args['keep_when'],
                                      margin_pct=args['margin_pct'], min_runs=args['min_runs'],
                                      baseline_lifetime=args['baseline_lifetime'], slo=args['slo'],
                                      workload_slo=args['workload_slo'],
                                      accept_foreign_traffic=args['accept_foreign_traffic'])
        except DecisionError as error:
            raise AnsibleActionFail(f'trial_decision: {error}') from error
        result.update(answer)
        result.update(changed=False, host=host, model=args['model'], variant=args['variant_name'],
                      baseline=args['baseline_name'], unit_checksum=args['unit_checksum'], identity=args['identity'],
                      history_database=database)
        result['msg'] = '%s: %s (%s)' % (args['variant_name'], 'keep' if answer['decision'] == 'keep' else 'roll back',
                                         answer['reason'])
        return result


def _stored_history(database, host, args):
    if not database or not os.path.exists(database):
        return []
    try:
        with ResultsStore(database) as store:
            records = store.records(host=host, model=args['model'], variant=args['baseline_name'])
    except (sqlite3.Error, OSError, ResultsStoreError) as error:
        raise AnsibleActionFail(f'trial_decision: could not read the baseline history from {database}: {error}'
                                ) from error
    return history_from_records(records, host=host, model=args['model'], baseline=args['baseline_name'],
                                unit_checksum=args['baseline_unit_checksum'], identity=args['baseline_identity'])
