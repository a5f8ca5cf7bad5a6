# This module_utils file is private to the llmops.vllm collection; it may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Type names for error messages, in the words of the YAML an operator wrote."""

from __future__ import annotations

from collections.abc import Mapping

# Ansible hands plugins its own subclasses (tagged strings, lazy containers), whose class names mean
# nothing to whoever wrote the inventory; bool comes first because it is also an int.
_PLAIN_TYPES = (bool, int, float, str, list, tuple, dict)


def plain_type_name(value):
    """'str', 'int', 'dict', ... for value, whatever subclass Ansible wrapped it in."""
    if value is None:
        return "null"
    for plain in _PLAIN_TYPES:
        if isinstance(value, plain):
            return "list" if plain is tuple else plain.__name__
    if isinstance(value, Mapping):
        return "dict"
    return type(value).__name__
