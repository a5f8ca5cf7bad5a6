# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import json
import time

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.llmops.vllm.plugins.modules.trial_advance import DOCUMENTATION
from ansible_collections.llmops.vllm.plugins.plugin_utils import _trial
from ansible_collections.llmops.vllm.plugins.plugin_utils._documented_options import documented_argument_spec

_ONE_OF = ('new', 'result', 'failed_result', 'close')


class ActionModule(ActionBase):
    """Advance the switch's state on the controller: the decisions are _trial's, the side effects the role's."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp, task_vars
        dummy, args = self.validate_argument_spec(argument_spec=documented_argument_spec(DOCUMENTATION))
        given = [name for name in _ONE_OF if (args[name] if name == 'close' else args[name] is not None)]
        if len(given) != 1:
            raise AnsibleActionFail(f'trial_advance: give exactly one of {", ".join(_ONE_OF)}, got {given or "none"}')
        now = time.time()
        state = _plain(args['state'])
        try:
            if args['new'] is not None:
                state = _trial.new(_plain(args['new']), now)
            elif args['close']:
                result.update(changed=False, closing=_trial.close(state, now))
                return result
            elif args['failed_result'] is not None:
                failure = _trial.failure_of(_plain(args['failed_result']))
                if args['unit_states'] is not None:
                    failure['unit_states'] = list(args['unit_states'])
                state = _trial.advance(state, failure, now)
            else:
                state = _trial.advance(state, _plain(args['result']), now)
        except _trial.TrialError as error:
            # The state given is handed back, so that the role's rescue still knows where the switch stood.
            result.update(failed=True, msg=f'trial_advance: {error}', state=args['state'],
                          next=(args['state'] or {}).get('next'))
            return result
        following = state['next']
        result.update(changed=False, state=state, next=following,
                      msg=f"next: {following['step']}{' ' + following['side'] if following.get('side') else ''}")
        return result


def _plain(value):
    # Ansible's tagged strings and lazy containers as plain JSON values: the state is a document, stored as such.
    return json.loads(json.dumps(value, default=str)) if value is not None else None
