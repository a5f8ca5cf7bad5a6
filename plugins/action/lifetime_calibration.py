# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.llmops.vllm.plugins.modules.lifetime_calibration import DOCUMENTATION
from ansible_collections.llmops.vllm.plugins.plugin_utils._calibration import CalibrationError, calibrate_levels
from ansible_collections.llmops.vllm.plugins.plugin_utils._decision import DecisionError
from ansible_collections.llmops.vllm.plugins.plugin_utils._documented_options import documented_argument_spec


class ActionModule(ActionBase):
    """Summarise a calibration on the controller."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp, task_vars
        dummy, args = self.validate_argument_spec(argument_spec=documented_argument_spec(DOCUMENTATION))
        try:
            answer = calibrate_levels(args['lifetimes'], warm_restart_s=args['warm_restart_seconds'],
                                      node_history=args['node_history'], baseline=args['baseline_name'],
                                      benchmark_s=args['benchmark_seconds'], history=args['history_lifetimes'],
                                      margin_pct=args['margin_pct'], keep_when=args['keep_when'],
                                      max_lifetimes=args['max_lifetimes'])
        except (CalibrationError, DecisionError) as error:
            raise AnsibleActionFail(f'lifetime_calibration: {error}') from error
        result.update(answer, changed=False)
        result['msg'] = ' '.join(answer['report'][-1:])
        return result
