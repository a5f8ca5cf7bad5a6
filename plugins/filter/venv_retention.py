# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: venv_retention
short_description: The venvs of older vLLM releases to remove, keeping those in use and the newest others
version_added: 1.1.0
author:
  - llmops.vllm maintainers (!UNKNOWN)
description:
  - Each vLLM release runs from a venv of its own. A venv stays while a variant or an installed unit runs from
    it; of the others the O(keep) most recently installed stay, so that a rollback to them needs no download.
  - Only venvs with the record C(llmops-installed.txt) that the C(llmops.vllm.vllm_service) role writes are
    candidates, so a directory this collection did not install is never removed.
options:
  _input:
    description:
      - The records of the installed venvs, as C(ansible.builtin.find) returns them (C(path) of
        C(<venv>/llmops-installed.txt) and C(mtime), the install time).
    type: list
    elements: dict
    required: true
  in_use:
    description: The venvs that variants or unit files run from; executables such as C(<venv>/bin/python) name theirs.
    type: list
    elements: str
    default: []
  keep:
    description: How many venvs besides those in use stay, normally C(vllm_venv_keep).
    type: int
    default: 2
"""

EXAMPLES = r"""
- name: Pick the venvs to remove
  ansible.builtin.set_fact:
    venvs_to_remove: "{{ found.files | llmops.vllm.venv_retention(in_use=['/opt/vllm/0.32.0'], keep=2) }}"
"""

RETURN = r"""
_value:
  description: The venvs to remove, oldest first.
  type: list
  elements: str
  sample: [/opt/vllm/0.30.1]
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.plugin_utils._venv_retention import (
    VenvRetentionError,
    venv_of_executable,
    venvs_to_remove,
)


def venv_retention(installed, in_use=(), keep=2):
    used = [venv_of_executable(path) or path for path in in_use or () if isinstance(path, str)]
    try:
        return venvs_to_remove(installed or [], used, keep)
    except VenvRetentionError as error:
        raise AnsibleFilterError(f'venv_retention: {error}') from error


class FilterModule:
    def filters(self):
        return {'venv_retention': venv_retention}
