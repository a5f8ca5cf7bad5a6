# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import json

from ansible.errors import AnsibleError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

from ansible_collections.llmops.vllm.plugins.modules.trial_settings import DOCUMENTATION
from ansible_collections.llmops.vllm.plugins.plugin_utils._documented_options import documented_argument_spec
from ansible_collections.llmops.vllm.plugins.plugin_utils._trial_settings import (
    deprecated_settings,
    drain_warnings,
    replay_files_here,
    trial_document,
    trial_setting_problems,
    unknown_variable_warnings,
)
from ansible_collections.llmops.vllm.plugins.plugin_utils._variable_names import (
    known_variable_names,
    role_argument_specs,
)

# Checked by trial_setting_problems alone, which never quotes a secret back.
_NOT_QUOTED = ('vllm_secret_environment',)


class ActionModule(ActionBase):
    """Check the host's vllm_* variables on the controller; nothing reaches the host."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=documented_argument_spec(DOCUMENTATION))
        task_vars = task_vars or {}
        names = sorted(name for name in task_vars if name.startswith('vllm_'))
        settings, deferred = {}, []
        for name in names:
            try:
                settings[name] = _plain(self._templar.template(task_vars[name]))
            except AnsibleError:
                deferred.append(name)
        host = task_vars.get('inventory_hostname') or 'localhost'
        node = {'node_address': _plain(task_vars.get('ansible_host')),
                'connection': _plain(task_vars.get('ansible_connection'))}
        check_replay_files = args['check_replay_files']
        if check_replay_files is None:
            check_replay_files = replay_files_here(settings, host, **node)
        problems = trial_setting_problems(settings, check_replay_files=check_replay_files)
        problems.extend(_role_spec_problems(settings, problems))
        document = {}
        if not problems and args['kind'] != 'none':
            document, found = trial_document(settings, host=host, kind=args['kind'],
                                             check_mode=bool(self._play_context.check_mode), **node)
            problems.extend(found)
        known = known_variable_names()
        warnings = unknown_variable_warnings(names, known) + drain_warnings(settings)
        result.update(
            changed=False,
            checked=sorted(settings),
            deferred=deferred,
            problems=problems,
            unknown_variables=[name for name in names if name not in known],
            **document,
        )
        if warnings:
            result['warnings'] = warnings
        deprecations = deprecated_settings(settings)
        if deprecations:
            result['deprecations'] = deprecations
        if problems:
            result.update(failed=True, msg='; '.join(problems))
        else:
            result['msg'] = 'Checked %d variables on the controller: no problem.' % len(settings)
        return result


def _plain(value):
    # Ansible's tagged strings and lazy containers, as the plain YAML values the operator wrote: messages then
    # speak of str and dict, not of Ansible's own classes.
    return json.loads(json.dumps(value, default=str))


def _role_spec_problems(settings, found):
    """The roles' declared types and choices, for each variable that no closer rule has named already."""
    named = {problem.split(':')[0].split(' ')[0].split('.')[0].split('[')[0] for problem in found}
    problems = []
    for role, spec in role_argument_specs().items():
        present = {name: settings[name] for name in spec
                   if name in settings and name not in _NOT_QUOTED and name not in named}
        checked = ArgumentSpecValidator({name: spec[name] for name in present}).validate(present)
        problems.extend('%s (role llmops.vllm.%s)' % (message, role) for message in checked.error_messages)
    return problems
