# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.llmops.vllm.plugins.modules.trial_decision import DOCUMENTATION
from ansible_collections.llmops.vllm.plugins.plugin_utils._decision import DecisionError, history_from_node
from ansible_collections.llmops.vllm.plugins.plugin_utils._documented_options import documented_argument_spec
from ansible_collections.llmops.vllm.plugins.plugin_utils._lifetime_decision import decide, report_lines


class ActionModule(ActionBase):
    """The one decision (_lifetime_decision.decide), on the controller, from the arguments laid out as a trial's state."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=documented_argument_spec(DOCUMENTATION))
        host = args['host'] or (task_vars or {}).get('inventory_hostname')
        lifetimes = args['lifetimes'] or [{'side': 'baseline', 'benchmark': args['baseline']},
                                          {'side': 'variant', 'benchmark': args['variant']}]
        answers = {}
        if args['variant_answers'] is not None or args['baseline_answers'] is not None:
            answers = {'variant': args['variant_answers'], 'baseline': args['baseline_answers']}
        try:
            if any(item.get('benchmark') is None for item in lifetimes if isinstance(item, dict)):
                raise DecisionError('give the lifetimes, or the variant and the baseline of one lifetime a side')
            history = history_from_node(args['node_history'], baseline=args['baseline_name'],
                                        unit_checksum=args['baseline_unit_checksum'],
                                        identity=args['baseline_identity']) if args['history'] else []
            answer = decide({
                'lifetimes': lifetimes, 'history': history, 'answers': answers, 'starts': args['starts'],
                'variant': args['variant_name'], 'baseline': args['baseline_name'], 'host': host, 'model': args['model'],
                'identities': {'variant': {'sha256': args['identity'], 'unit_checksum': args['unit_checksum']},
                               'baseline': {'sha256': args['baseline_identity'],
                                            'unit_checksum': args['baseline_unit_checksum']}},
                'settings': {'keep_when': args['keep_when'], 'margin_pct': args['margin_pct'],
                             'max_lifetimes': args['max_lifetimes'] if args['lifetimes'] else 1, 'slo': args['slo'],
                             'workload_slo': args['workload_slo'], 'answer_tolerance': args['answer_tolerance'],
                             'accept_foreign_traffic': args['accept_foreign_traffic']}})
        except DecisionError as error:
            raise AnsibleActionFail(f'trial_decision: {error}') from error
        answer['dark_minutes'] = None if args['dark_seconds'] is None else round(args['dark_seconds'] / 60, 2)
        answer['pair_minutes'] = None if args['pair_seconds'] is None else round(args['pair_seconds'] / 60, 2)
        answer['report'] = report_lines(answer, args['dark_seconds'], args['pair_seconds'])
        result.update(answer, changed=False, history_database=None)
        if answer['kv_cache']['short']:
            result['warnings'] = ['KV cache short: %s' % short for short in answer['kv_cache']['short']]
        deprecations = [{'msg': f'trial_decision: {name} is ignored, {why}', 'version': '2.0.0',
                         'collection_name': 'llmops.vllm'}
                        for name, why in (('database', "the history is the node's (node_history)"),
                                          ('min_runs', 'a trial decides by lifetimes'),
                                          ('baseline_lifetime', 'each lifetime names its own (the lifetime label)'))
                        if args[name] is not None]
        if deprecations:
            result['deprecations'] = deprecations
        words = {'keep': 'keep', 'another_pair': 'measure another pair'}.get(answer['decision'], 'roll back')
        result['msg'] = '%s: %s (%s)' % (args['variant_name'], words, answer['reason'])
        return result
