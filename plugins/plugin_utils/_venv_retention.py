# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Which venvs of older vLLM releases go, so that a rollback needs no download and the disk does not fill.

A venv stays while any variant or any installed unit runs from it. Of the others, the most recently
installed are kept up to a count; only venvs this collection installed are ever candidates.
"""

from __future__ import annotations

import typing as t
from collections.abc import Mapping

RECORD_NAME = 'llmops-installed.txt'


class VenvRetentionError(ValueError):
    """The inputs cannot be decided on; the message says why."""


def venv_of_executable(executable: str) -> str | None:
    """/opt/vllm/0.32.0/bin/python -> /opt/vllm/0.32.0; None for an executable outside a venv's bin/."""
    head, separator, dummy = executable.rpartition('/bin/')
    return head if separator and head else None


def venvs_to_remove(installed: t.Iterable[Mapping[str, t.Any]], in_use: t.Iterable[str], keep: int) -> list[str]:
    """The venvs to remove, oldest first.

    installed: the records of what each venv holds (ansible.builtin.find's files: path of
    <venv>/llmops-installed.txt and its mtime, the install time). in_use: the venvs that variants or
    unit files run from. keep: how many venvs besides those in use stay.
    """
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
        raise VenvRetentionError(f'vllm_venv_keep: must be an integer >= 0, got {keep!r}')
    used = {path.rstrip('/') for path in in_use if isinstance(path, str)}
    candidates = []
    for record in installed:
        path = record.get('path') if isinstance(record, Mapping) else None
        if not isinstance(path, str) or not path.endswith('/' + RECORD_NAME):
            raise VenvRetentionError(f'each installed venv must be given by its {RECORD_NAME}, got {record!r}')
        venv = path[:-len(RECORD_NAME) - 1]
        if venv not in used:
            candidates.append((float(record.get('mtime') or 0), venv))
    candidates.sort(reverse=True)
    return [venv for dummy, venv in sorted(candidates[keep:])]
