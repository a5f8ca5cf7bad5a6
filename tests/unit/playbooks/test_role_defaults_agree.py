# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every default an argument spec documents is the default a role really uses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

try:
    from ansible.template import trust_as_template
except ImportError:  # ansible-core before 2.19 renders any string
    def trust_as_template(text):
        return text

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
    assert ROLES == ["vllm_experiment", "vllm_node", "vllm_service", "vllm_switch", "vllm_unit"]


def test_a_variable_that_several_roles_read_has_one_default():
    """A shared setting (vllm_service's fallback writes the records that vllm_switch keeps) has one owner: the role
    that both depend on, llmops.vllm.vllm_node."""
    defaulted_by = {}
    for role in ROLES:
        path = REPO / "roles" / role / "defaults" / "main.yml"
        if path.exists():
            for name in yaml.safe_load(path.read_text(encoding="utf-8")) or {}:
                defaulted_by.setdefault(name, []).append(role)
    assert dict((name, roles) for name, roles in defaulted_by.items() if len(roles) > 1) == {}
    assert defaulted_by["vllm_switch_state_dir"] == defaulted_by["vllm_switch_notify_hook"] == ["vllm_node"]
    for role in ("vllm_service", "vllm_switch"):
        meta = yaml.safe_load((REPO / "roles" / role / "meta" / "main.yml").read_text(encoding="utf-8"))
        assert {"role": "llmops.vllm.vllm_node"} in meta["dependencies"]


@pytest.mark.parametrize("role", ROLES)
def test_documented_defaults_are_the_defaults(role):
    defaults = role_defaults()
    mismatches = []
    for name, documented in sorted(documented_defaults(role).items()):
        if name not in defaults:
            mismatches.append("%s: documented default %r, but no role's defaults/main.yml sets it" % (name, documented))
            continue
        actual = defaults[name]
        if templated(actual):
            # Documented as a path of other defaults, <vllm_state_dir>/...: both sides rendered with the defaults.
            actual = render(actual, defaults)
            documented = PLACEHOLDER.sub(lambda match: str(defaults[match.group(1)]), str(documented))
        if actual != documented:
            mismatches.append("%s: documented %r, defaults/main.yml has %r" % (name, documented, actual))
    assert mismatches == []


PLACEHOLDER = re.compile(r"<([a-z_]+)>")

# Templated defaults that document no value, only a rule in words: each rule, as the description states it,
# on variables that show it. vllm_switch_ready_timeout: "O(vllm_expected_load_seconds) plus 600";
# vllm_switch_lock_stale_after: "three ready timeouts plus an hour"; vllm_switch_tls: "whether O(vllm_serve_args)
# sets C(ssl_certfile)"; vllm_service_variants: "every variant of O(vllm_variants) plus the baseline".
RULES = {
    "vllm_switch_ready_timeout": [({"vllm_expected_load_seconds": 1800}, 2400),
                                  ({"vllm_expected_load_seconds": 60}, 660)],
    "vllm_switch_lock_stale_after": [({"vllm_switch_ready_timeout": 2400}, 3 * 2400 + 3600)],
    "vllm_switch_tls": [({"vllm_serve_args": {"ssl_certfile": "/etc/vllm/tls.crt"}}, True),
                        ({"vllm_serve_args": {"max_model_len": 4096}}, False)],
    "vllm_service_variants": [({"vllm_baseline_variant": "baseline", "vllm_variants": {"ngram": {}, "eagle3": {}}},
                               ["baseline", "ngram", "eagle3"]),
                              ({"vllm_baseline_variant": "main", "vllm_variants": {"main": {}, "ngram": {}}},
                               ["main", "ngram"])],
}


def templated(value):
    return isinstance(value, str) and "{{" in value


def render(text, variables):
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(text))


def documented_anywhere():
    return {name for role in ROLES for name in documented_defaults(role)}


def test_every_templated_default_is_checked():
    defaults = role_defaults()
    unchecked = sorted(name for name, value in defaults.items()
                       if templated(value) and name not in RULES and name not in documented_anywhere())
    assert unchecked == []


@pytest.mark.parametrize("name", sorted(RULES))
def test_templated_defaults_follow_the_rule_their_description_states(name):
    defaults = role_defaults()
    for variables, expected in RULES[name]:
        assert render(defaults[name], dict(defaults, **variables)) == expected, variables
