# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The roles stay orchestration: few facts, few private names, shallow includes, entry points only across roles.

What decides lives in Python (a switch's state is one document that llmops.vllm.trial_advance moves on); the YAML
around it takes steps and passes their results. These figures are how a new maintainer would see that it stays so:
a role that grows set_fact tasks, private variables or include chains is growing state and decisions in YAML again.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
ROLES = REPO / 'roles'
SET_FACT = re.compile(r'^\s*(- )?(ansible\.builtin\.)?set_fact:', re.MULTILINE)
PRIVATE = re.compile(r'\b__?vllm_[a-z0-9_]+')
INCLUDES = ('ansible.builtin.include_tasks', 'ansible.builtin.import_tasks', 'ansible.builtin.include_role',
            'ansible.builtin.import_role')


def task_files():
    return sorted(ROLES.glob('*/tasks/*.yml'))


def test_the_roles_hold_at_most_fifteen_set_fact_tasks():
    counts = {str(path.relative_to(REPO)): len(SET_FACT.findall(path.read_text(encoding='utf-8')))
              for path in task_files()}
    assert sum(counts.values()) <= 15, {path: count for path, count in counts.items() if count}


def test_the_roles_use_at_most_forty_private_names():
    names = set()
    for path in task_files() + sorted(ROLES.glob('*/vars/*.yml')):
        names.update(name for name in PRIVATE.findall(path.read_text(encoding='utf-8')) if name.startswith('_'))
    assert len(names) <= 40, sorted(names)


def _tasks(items):
    """Every task of a task list, those in blocks, rescues and always sections included."""
    for item in items or ():
        if not isinstance(item, dict):
            continue
        yield item
        for section in ('block', 'rescue', 'always'):
            yield from _tasks(item.get(section))


def _included(role, path):
    """(role, task file) for each file that a task file includes or imports, its own role's or another's."""
    found = []
    for task in _tasks(yaml.safe_load(path.read_text(encoding='utf-8'))):
        for keyword in INCLUDES:
            argument = task.get(keyword)
            if argument is None:
                continue
            if keyword.endswith('_tasks'):
                name = argument if isinstance(argument, str) else argument.get('file')
                # A file chosen at run time (step_<name>.yml) may be any of the role's files of that shape.
                if '{{' in name:
                    prefix = name.split('{{')[0]
                    found.extend((role, candidate.name) for candidate in (ROLES / role / 'tasks').glob(prefix + '*.yml'))
                else:
                    found.append((role, name))
            else:
                other = argument['name'].split('.')[-1]
                found.append((other, (argument.get('tasks_from') or 'main').removesuffix('.yml') + '.yml'))
    return found


def test_no_task_file_lies_more_than_four_includes_below_its_role_s_main():
    deepest = {}

    def walk(role, name, depth, seen):
        path = ROLES / role / 'tasks' / name
        deepest[(role, name, seen[0])] = max(depth, deepest.get((role, name, seen[0]), 0))
        for included in _included(role, path):
            if included not in seen:
                walk(*included, depth + 1, seen + (included,))

    for main in sorted(ROLES.glob('*/tasks/main.yml')):
        role = main.parent.parent.name
        walk(role, 'main.yml', 0, ((role, 'main.yml'),))
    too_deep = sorted((f'{role}/{name}', depth) for (role, name, dummy), depth in deepest.items() if depth > 4)
    assert too_deep == []
    # The walk reached the switch's step files, the unit role's waits and the node role's hooks.
    assert max(depth for (role, name, dummy), depth in deepest.items() if role == 'vllm_switch' and
               name == 'main.yml') == 0
    assert {('vllm_unit', 'wait.yml'), ('vllm_node', 'hook.yml')} <= {(role, name) for role, name, dummy in deepest}


def test_a_role_includes_of_another_role_only_the_entry_points_it_declares():
    for path in task_files():
        role = path.parent.parent.name
        for other, name in _included(role, path):
            if other == role:
                continue
            specs = yaml.safe_load((ROLES / other / 'meta' / 'argument_specs.yml').read_text(encoding='utf-8'))
            assert name.removesuffix('.yml') in specs['argument_specs'], (str(path.relative_to(REPO)), other, name)


def test_a_playbook_includes_of_a_role_only_the_entry_points_it_declares():
    for path in sorted((REPO / 'playbooks').glob('*.yml')):
        for play in yaml.safe_load(path.read_text(encoding='utf-8')) or ():
            for section in ('pre_tasks', 'tasks', 'post_tasks'):
                for task in _tasks(play.get(section)):
                    argument = task.get('ansible.builtin.include_role')
                    if argument is None:
                        continue
                    role = argument['name'].split('.')[-1]
                    entry = (argument.get('tasks_from') or 'main').removesuffix('.yml')
                    specs = yaml.safe_load((ROLES / role / 'meta' / 'argument_specs.yml').read_text(encoding='utf-8'))
                    assert entry in specs['argument_specs'], (path.name, role, entry)
