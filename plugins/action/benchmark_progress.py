# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    """Run the module in the async directory that ansible.builtin.async_status reads.

    That directory is the connection's shell option, known only on the controller. It is passed
    unexpanded: the module expands a leading ~ on the host, where async_status would spend a round
    trip asking for the home directory.
    """

    TRANSFERS_FILES = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        args = dict(self._task.args)
        if not args.get('async_dir'):
            args['async_dir'] = self.get_shell_option('async_dir', default='~/.ansible_async')
        result.update(self._execute_module(module_name='llmops.vllm.benchmark_progress', module_args=args,
                                           task_vars=task_vars))
        return result
