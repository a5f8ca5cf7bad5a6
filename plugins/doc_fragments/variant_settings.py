# Copyright (c) llmops.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    """The settings every variant shares, as the variant filters take them."""

    DOCUMENTATION = r"""
options:
  model:
    description:
      - The served model, normally the role variable C(vllm_model).
      - V(name) is the slug used in unit and file names (V([a-z0-9][a-z0-9._-]*), at most 64 characters),
        V(path) the model directory or hub id on the node, V(served_name) the name clients send
        (defaults to V(name)).
    type: dict
    required: true
  serve_args:
    description:
      - Baseline vLLM flags in snake_case, normally C(vllm_serve_args).
      - V(true) renders C(--flag), V(false) and V(null) leave the flag out, a mapping renders as compact JSON with
        sorted keys, a list renders its items after one flag, an empty list leaves the flag out.
      - C(model), C(served_model_name), C(host), C(port), C(speculative_config), C(spec_method), C(spec_model)
        and C(spec_tokens) are refused here; they come from their own variables.
    type: dict
    default: {}
  environment:
    description:
      - Non-secret environment of every variant, normally C(vllm_environment). A variant's C(environment) is merged
        over it; a V(null) value there removes the variable.
    type: dict
    default: {}
  baseline:
    description:
      - Name of the known-good variant, normally C(vllm_baseline_variant). It need not appear in the input, which
        then means a baseline without overrides.
    type: str
    default: baseline
  baseline_unit_name:
    description:
      - The baseline's unit, normally C(vllm_baseline_unit_name), for a hand-made unit that the collection adopted
        (C(playbooks/adopt.yml)). Its name ends in V(.service) and has letters, digits and V(_.:-) only.
      - When not set, the baseline's unit is C(vllm-<model>-<baseline>.service), as every variant's.
    type: str
    version_added: 1.1.0
  host:
    description: Bind address of the server, normally C(vllm_host).
    type: str
    default: 127.0.0.1
  port:
    description:
      - Port shared by the variants, normally C(vllm_port). A variant may move to its own port with
        C(serve_args.port); such ports must be unique among the variants.
    type: int
    default: 8000
  gpu_count:
    description: GPUs declared for the host, normally C(vllm_gpu_count). Every C(tensor_parallel_size) must divide it.
    type: int
    default: 1
  venv:
    description: Virtual environment that holds the vLLM of O(version), normally C(vllm_venv).
    type: path
    default: /opt/vllm/venv
  venv_root:
    description:
      - Directory of one venv per vLLM version, normally C(vllm_venv_root). A variant that sets its own
        C(vllm_version) runs from C(<venv_root>/<version>); without O(venv_root) such a variant is refused.
    type: path
    version_added: 1.1.0
  version:
    description:
      - The vLLM release the node runs, normally C(vllm_version). Speculative-decoding methods are checked against
        it.
    type: str
    required: true
  config_dir:
    description: Directory of the environment files, normally C(vllm_config_dir).
    type: path
    default: /etc/vllm
  state_dir:
    description:
      - The service's writable directory (working directory and home of the caches), normally C(vllm_state_dir).
    type: path
    default: /var/lib/vllm
  secret_environment_names:
    description:
      - Names (only) of the secret environment variables, normally the keys of C(vllm_secret_environment), checked
        to be valid variable names. The values never pass through this filter.
    type: list
    elements: str
    default: []
  user:
    description:
      - The account the units run as, C(vllm_user). Checked to be a portable user name and not V(root).
    type: str
  group:
    description:
      - The units' group, C(vllm_group). Checked like O(user).
    type: str
  supplementary_groups:
    description:
      - The units' supplementary groups, C(vllm_supplementary_groups). Each must be a group name, and groups that
        grant administrator rights (V(root), V(sudo), V(wheel), V(adm), V(disk), V(docker)) are refused.
    type: list
    elements: str
  stop_timeout:
    description:
      - Seconds systemd waits for a stopping unit, C(vllm_stop_timeout_seconds). A C(shutdown_timeout) serve arg (vLLM's
        drain after SIGTERM) must be shorter.
    type: int
  expected_load_seconds:
    description:
      - How long the model takes from start to serving, normally C(vllm_expected_load_seconds). Each unit's
        C(TimeoutStartSec=) is this plus half, and its restart-rate window (C(StartLimitIntervalSec=)) spans
        C(StartLimitBurst=) such loads, each with the wait before its restart (C(RestartSec=)).
    type: int
    default: 1800
    version_added: 1.2.0
  system_call_filter:
    description:
      - The units' C(SystemCallFilter=) entries, C(vllm_system_call_filter). Each must be a system call name or an
        V(@group), optionally after V(~).
    type: list
    elements: str
  device_allow:
    description:
      - The units' C(DeviceAllow=) entries, C(vllm_device_allow). Each must be a C(/dev) path, V(char-NAME) or
        V(block-NAME), optionally followed by a space and access letters (V(r), V(w), V(m)).
    type: list
    elements: str
"""
