# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import datetime
import time

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.llmops.vllm.plugins.modules.switch_lock import DOCUMENTATION
from ansible_collections.llmops.vllm.plugins.plugin_utils._controller_run import controller_identity, process_alive
from ansible_collections.llmops.vllm.plugins.plugin_utils._documented_options import documented_argument_spec
from ansible_collections.llmops.vllm.plugins.plugin_utils._switch_lock import (
    FREE,
    HELD,
    MINE,
    STALE,
    describe,
    lock_verdict,
)

# The module's own options on the node, which only this plugin sets: a playbook that gives one is refused.
_NODE_OPTIONS = ('op', 'holder', 'expected_run_id')
_ARGUMENT_SPEC = {name: spec for name, spec in documented_argument_spec(DOCUMENTATION).items() if name not in _NODE_OPTIONS}
_MODULE = 'llmops.vllm.switch_lock'


class ActionModule(ActionBase):
    """Decide on the controller, where the holder's process can be looked at; the node only swaps files."""

    TRANSFERS_FILES = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=_ARGUMENT_SPEC)
        self._task_vars = task_vars
        self._path = args['path']
        me = controller_identity(datetime.datetime.now(datetime.timezone.utc))
        if args['state'] == 'absent':
            result.update(self._release(me))
            return result
        started = time.monotonic()
        deadline = started + max(0, args['wait'])
        waiting_shown = False
        while True:
            read = self._node('read')
            holder = read['holder']
            verdict = lock_verdict(holder, me, datetime.datetime.now(datetime.timezone.utc), process_alive,
                                   args['stale_after'], written_at=read.get('written_at'))
            if self._play_context.check_mode:
                result.update(changed=verdict['verdict'] != MINE, holder=holder, verdict=verdict['verdict'],
                              waited=0.0, msg=f"Check mode: {verdict['reason']}; nothing was written.")
                return result
            outcome = self._act(verdict, holder, me)
            if outcome is not None:
                outcome['waited'] = round(time.monotonic() - started, 1)
                result.update(outcome)
                return result
            if verdict['verdict'] == HELD and time.monotonic() >= deadline:
                raise AnsibleActionFail(
                    f"{self._host()} is being switched by another run: {verdict['reason']}. Wait for it to finish, or"
                    f" set vllm_switch_lock_wait to wait for it (seconds). Lock: {self._path}",
                    result=dict(holder=holder, waited=round(time.monotonic() - started, 1)))
            if verdict['verdict'] == HELD:
                if not waiting_shown:
                    self._display.display(f"{self._host()}: waiting up to {args['wait']} s for the switch lock,"
                                          f" {verdict['reason']}")
                    waiting_shown = True
                time.sleep(min(args['poll'], max(0.0, deadline - time.monotonic())))

    def _act(self, verdict, holder, me):
        """Take the lock as the verdict allows; None when another run got in first or holds it."""
        if verdict['verdict'] == MINE:
            return {'changed': False, 'holder': holder, 'verdict': MINE, 'msg': verdict['reason']}
        if verdict['verdict'] == FREE:
            answer = self._node('create', holder=me)
            if answer['done']:
                return {'changed': True, 'holder': me, 'verdict': FREE, 'msg': f'Took the switch lock {self._path}.'}
            return None
        if verdict['verdict'] == STALE:
            answer = self._node('replace', holder=me, expected_run_id=(holder or {}).get('run_id') or '')
            if answer['done']:
                self._display.warning(f"{self._host()}: took over a stale switch lock: {verdict['reason']}.")
                return {'changed': True, 'holder': me, 'verdict': STALE,
                        'taken_over': {'holder': holder, 'reason': verdict['reason']},
                        'msg': f"Took over a stale switch lock: {verdict['reason']}."}
            return None
        return None

    def _release(self, me):
        holder = self._node('read')['holder']
        # Another run's lock is never given back from here.
        if holder is None:
            reason = 'no lock is held'
        elif holder.get('run_id') != me['run_id']:
            reason = 'held by ' + describe(holder)
        elif self._play_context.check_mode:
            reason = 'check mode'
        else:
            reason = None
        if reason is not None:
            return {'changed': False, 'holder': holder, 'waited': 0.0, 'msg': f'Nothing to give back: {reason}.'}
        answer = self._node('remove', expected_run_id=me['run_id'])
        return {'changed': answer['done'], 'holder': answer['holder'], 'waited': 0.0,
                'msg': 'Gave back the switch lock.' if answer['done'] else 'The lock was no longer this run\'s.'}

    def _node(self, op, **extra):
        answer = self._execute_module(module_name=_MODULE, module_args=dict(path=self._path, op=op, **extra),
                                      task_vars=self._task_vars)
        if answer.get('failed'):
            raise AnsibleActionFail(answer.get('msg') or f'{_MODULE} failed', result=answer)
        return answer

    def _host(self):
        return (self._task_vars or {}).get('inventory_hostname') or 'the node'
