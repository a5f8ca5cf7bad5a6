# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""An action plugin's argument spec, read from its module's DOCUMENTATION.

An option documented once is validated as documented: a type, choice or default that the docs and
the code would otherwise each state cannot drift apart.
"""

from __future__ import annotations

import typing as t

import yaml

_SPEC_KEYS = ('type', 'elements', 'default', 'choices', 'required', 'no_log', 'aliases')


def documented_argument_spec(documentation: str) -> dict[str, dict[str, t.Any]]:
    """The argument spec that DOCUMENTATION's options describe, suboptions included."""
    options = (yaml.safe_load(documentation) or {}).get('options') or {}
    return _specs(options)


def _specs(options):
    specs = {}
    for name, option in options.items():
        spec = {key: option[key] for key in _SPEC_KEYS if key in option}
        if 'suboptions' in option:
            spec['options'] = _specs(option['suboptions'])
        specs[name] = spec
    return specs
