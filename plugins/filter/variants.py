# Copyright (c) llmops.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters that validate vLLM variants and resolve them into unit contents.

Their documentation lives beside this file, one sidecar per filter (variant_specs.yml, variant_spec.yml,
environment_file.yml), as ansible-doc expects for a file that defines several filters.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.plugin_utils._systemd_escape import format_environment_file
from ansible_collections.llmops.vllm.plugins.plugin_utils._variants import (
    VariantError,
    environment_strings,
    resolve_variant,
    resolve_variants,
)


def variant_specs(variants, model, serve_args=None, environment=None, baseline="baseline", host="127.0.0.1",
                  port=8000, gpu_count=1, venv="/opt/vllm/venv", version=None, config_dir="/etc/vllm",
                  state_dir="/var/lib/vllm", secret_environment_names=None, user=None, group=None,
                  supplementary_groups=None, stop_timeout=None, system_call_filter=None, device_allow=None,
                  venv_root=None):
    """Return variant name -> resolved variant for every variant and the baseline."""
    try:
        return resolve_variants(variants, model, serve_args=serve_args, environment=environment, baseline=baseline,
                                host=host, port=port, gpu_count=gpu_count, venv=venv, version=version,
                                config_dir=config_dir, state_dir=state_dir,
                                secret_environment_names=secret_environment_names, user=user, group=group,
                                supplementary_groups=supplementary_groups, stop_timeout=stop_timeout,
                                system_call_filter=system_call_filter, device_allow=device_allow,
                                venv_root=venv_root)
    except VariantError as exc:
        raise AnsibleFilterError(str(exc)) from None


def variant_spec(variants, name, model, serve_args=None, environment=None, baseline="baseline", host="127.0.0.1",
                 port=8000, gpu_count=1, venv="/opt/vllm/venv", version=None, config_dir="/etc/vllm",
                 state_dir="/var/lib/vllm", secret_environment_names=None, user=None, group=None,
                 supplementary_groups=None, stop_timeout=None, system_call_filter=None, device_allow=None,
                 venv_root=None):
    """Return the resolved variant called name; an unknown name is an error naming vllm_variant."""
    try:
        return resolve_variant(variants, name, model, serve_args=serve_args, environment=environment,
                               baseline=baseline, host=host, port=port, gpu_count=gpu_count, venv=venv,
                               version=version, config_dir=config_dir, state_dir=state_dir,
                               secret_environment_names=secret_environment_names, user=user, group=group,
                               supplementary_groups=supplementary_groups, stop_timeout=stop_timeout,
                               system_call_filter=system_call_filter, device_allow=device_allow,
                               venv_root=venv_root)
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
            "variant_spec": variant_spec,
            "environment_file": environment_file,
        }
