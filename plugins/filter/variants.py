# Copyright (c) llmops.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters that validate vLLM variants and resolve them into unit contents.

Their documentation lives beside this file, one sidecar per filter (variant_specs.yml, environment_file.yml),
as ansible-doc expects for a file that defines several filters.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.doc_fragments.variant_settings import ModuleDocFragment
from ansible_collections.llmops.vllm.plugins.module_utils._type_names import plain_type_name
from ansible_collections.llmops.vllm.plugins.plugin_utils._documented_options import documented_argument_spec
from ansible_collections.llmops.vllm.plugins.plugin_utils._systemd_escape import format_environment_file
from ansible_collections.llmops.vllm.plugins.plugin_utils._variants import (
    VariantError,
    complete_settings,
    environment_strings,
    resolve_variants,
)

# The settings as the doc fragment declares them: their names and defaults are stated there alone.
_SETTINGS = documented_argument_spec(ModuleDocFragment.DOCUMENTATION)


def variant_specs(variants, settings=None, **keywords):
    """Return variant name -> resolved variant for every variant and the baseline.

    The shared settings come in one mapping; each may also be given as a keyword, as release 1.0 took them.
    """
    try:
        if keywords:
            if settings is not None and not isinstance(settings, Mapping):
                raise VariantError(["variant_specs: settings must be a dict, got %s" % plain_type_name(settings)])
            twice = sorted(set(keywords) & set(settings or {}))
            if twice:
                raise VariantError(["variant_specs: %s given both in settings and as a keyword" % ", ".join(twice)])
            settings = dict(settings or {}, **keywords)
        return resolve_variants(variants, complete_settings(settings, _SETTINGS, "variant_specs settings"))
    except VariantError as exc:
        raise AnsibleFilterError(str(exc)) from None


def environment_file(environment):
    """Return the body of an EnvironmentFile= that sets exactly environment."""
    try:
        return format_environment_file(environment_strings(environment, "environment_file"))
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from None


class FilterModule:
    """vLLM variant filters."""

    def filters(self):
        return {
            "variant_specs": variant_specs,
            "environment_file": environment_file,
        }
