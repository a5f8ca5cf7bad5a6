# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.llmops.vllm.plugins.modules.trial_decision import DOCUMENTATION
from ansible_collections.llmops.vllm.plugins.plugin_utils._answer_gate import AnswerGateError, answer_gate
from ansible_collections.llmops.vllm.plugins.plugin_utils._decision import (
    DecisionError,
    baseline_lifetimes,
    decide_workloads,
    history_from_node,
    kv_cache_room,
    with_correctness,
)
from ansible_collections.llmops.vllm.plugins.plugin_utils._documented_options import documented_argument_spec
from ansible_collections.llmops.vllm.plugins.plugin_utils._lifetime_decision import decide_by_lifetimes, report_lines


class ActionModule(ActionBase):
    """Decide on the controller, from the trial's results and the node's own history."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=documented_argument_spec(DOCUMENTATION))
        host = args['host'] or (task_vars or {}).get('inventory_hostname')
        try:
            history = history_from_node(args['node_history'], baseline=args['baseline_name'],
                                        unit_checksum=args['baseline_unit_checksum'],
                                        identity=args['baseline_identity']) if args['history'] else []
            if args['lifetimes']:
                answer = decide_by_lifetimes(args['lifetimes'], history=history, keep_when=args['keep_when'],
                                             margin_pct=args['margin_pct'], max_lifetimes=args['max_lifetimes'],
                                             slo=args['slo'], workload_slo=args['workload_slo'],
                                             accept_foreign_traffic=args['accept_foreign_traffic'])
                answer['dark_minutes'] = None if args['dark_seconds'] is None else round(args['dark_seconds'] / 60, 2)
                answer['pair_minutes'] = None if args['pair_seconds'] is None else round(args['pair_seconds'] / 60, 2)
            else:
                answer = decide_workloads(args['variant'], args['baseline'], history=history, keep_when=args['keep_when'],
                                          margin_pct=args['margin_pct'], min_runs=args['min_runs'],
                                          baseline_lifetime=args['baseline_lifetime'], slo=args['slo'],
                                          workload_slo=args['workload_slo'],
                                          accept_foreign_traffic=args['accept_foreign_traffic'])
            answer['kv_cache'] = kv_cache_room(args['variant'], args['starts'], args['variant_name'],
                                               args['baseline_name'])
            gate = None
            if args['variant_answers'] is not None or args['baseline_answers'] is not None:
                if args['variant_answers'] is None or args['baseline_answers'] is None:
                    raise DecisionError('variant_answers and baseline_answers go together: give both or neither')
                gate = answer_gate(args['variant_answers'], args['baseline_answers'], args['answer_tolerance'])
            answer = with_correctness(answer, gate)
            measured = [item['benchmark'] for item in args['lifetimes'] if item.get('side') == 'baseline']
            answer['baseline_lifetimes'] = [
                lifetime for benchmark in (measured or [args['baseline']])
                for lifetime in baseline_lifetimes(benchmark, unit_checksum=args['baseline_unit_checksum'],
                                                   identity=args['baseline_identity'])]
            if args['lifetimes']:
                answer['report'] = report_lines(answer, args['dark_seconds'], args['pair_seconds'])
        except (DecisionError, AnswerGateError) as error:
            raise AnsibleActionFail(f'trial_decision: {error}') from error
        result.update(answer)
        if answer['kv_cache']['short']:
            result['warnings'] = ['KV cache short: %s' % short for short in answer['kv_cache']['short']]
        if args['database']:
            result['deprecations'] = [{'msg': "trial_decision: database is ignored, the history is the node's"
                                              ' (node_history)', 'version': '2.0.0', 'collection_name': 'llmops.vllm'}]
        result.update(changed=False, host=host, model=args['model'], variant=args['variant_name'],
                      baseline=args['baseline_name'], unit_checksum=args['unit_checksum'], identity=args['identity'],
                      history_database=None)
        words = {'keep': 'keep', 'another_pair': 'measure another pair'}.get(answer['decision'], 'roll back')
        result['msg'] = '%s: %s (%s)' % (args['variant_name'], words, answer['reason'])
        return result
