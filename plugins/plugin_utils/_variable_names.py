# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The variables the collection reads, and the argument specs its roles declare for them.

Read from the collection's own files, so that a variable added to a role or a playbook is known the
moment it is written, and no list of names kept by hand can fall behind.
"""

from __future__ import annotations

import copy
import os
import re
import typing as t

import yaml

_NAME = re.compile(r'\bvllm_[a-z0-9_]+')
_SOURCES = (('playbooks', ('.yml', '.yaml')), ('roles', ('.yml', '.yaml', '.j2')))
ROLES = ('vllm_service', 'vllm_switch')


def collection_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def known_variable_names(root: str | None = None) -> set[str]:
    """Every vllm_* name that a playbook, role default, argument spec, task or template of the collection names."""
    root = root or collection_root()
    names: set[str] = set()
    for folder, suffixes in _SOURCES:
        for directory, dummy, files in os.walk(os.path.join(root, folder)):
            for name in files:
                if name.endswith(suffixes):
                    with open(os.path.join(directory, name), encoding='utf-8') as handle:
                        names.update(_NAME.findall(handle.read()))
    return names


def role_argument_specs(root: str | None = None) -> dict[str, dict[str, t.Any]]:
    """Each role's main entry point options, with nothing required: the checks see only what is set."""
    root = root or collection_root()
    specs = {}
    for role in ROLES:
        path = os.path.join(root, 'roles', role, 'meta', 'argument_specs.yml')
        with open(path, encoding='utf-8') as handle:
            options = copy.deepcopy(yaml.safe_load(handle)['argument_specs']['main'].get('options') or {})
        for option in options.values():
            option.pop('required', None)
        specs[role] = options
    return specs
