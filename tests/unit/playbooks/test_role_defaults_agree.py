# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every default an argument spec documents is the default a role really uses."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
ROLES = sorted(path.name for path in (REPO / "roles").iterdir() if (path / "meta" / "argument_specs.yml").exists())


def role_defaults():
    """Variable -> default over every role's defaults/main.yml: a role may document another role's variable."""
    defaults = {}
    for role in ROLES:
        path = REPO / "roles" / role / "defaults" / "main.yml"
        if path.exists():
            defaults.update(yaml.safe_load(path.read_text(encoding="utf-8")) or {})
    return defaults


def documented_defaults(role):
    """Variable -> documented default, over every entry point of the role (a task file such as search.yml has its own)."""
    specs = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text(encoding="utf-8"))
    return dict((name, option["default"]) for entry in specs["argument_specs"].values()
                for name, option in entry.get("options", {}).items() if "default" in option)


def test_every_role_is_checked():
    assert ROLES == ["vllm_service", "vllm_switch"]


@pytest.mark.parametrize("role", ROLES)
def test_documented_defaults_are_the_defaults(role):
    defaults = role_defaults()
    mismatches = []
    for name, documented in sorted(documented_defaults(role).items()):
        if name not in defaults:
            mismatches.append("%s: documented default %r, but no role's defaults/main.yml sets it" % (name, documented))
            continue
        actual = defaults[name]
        # A templated default cannot be compared by value; its description says how it is computed.
        if isinstance(actual, str) and "{{" in actual:
            continue
        if actual != documented:
            mismatches.append("%s: documented %r, defaults/main.yml has %r" % (name, documented, actual))
    assert mismatches == []
