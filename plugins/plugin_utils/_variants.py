# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) llmops.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Baseline server settings plus per-variant overrides, resolved into what each variant's unit runs.

Every problem is reported at once, each prefixed with the variable (and variant and key) it comes from,
so that a bad inventory fails on the controller before anything on a host changes.
"""

from __future__ import annotations

import copy
import hashlib
import ipaddress
import json
import math
import re
from collections.abc import Mapping

from ansible_collections.llmops.vllm.plugins.module_utils._type_names import plain_type_name
from ansible_collections.llmops.vllm.plugins.module_utils._unit_adoption import unit_name_problem

from ansible_collections.llmops.vllm.plugins.plugin_utils._spec_decode import (
    METHOD_PACKAGES,
    canonical_method,
    check_speculative_config,
    parse_version,
)
from ansible_collections.llmops.vllm.plugins.plugin_utils._systemd_escape import (
    ENVIRONMENT_NAME,
    format_exec_command,
    unit_setting_text,
)

VARIANT_KEYS = ("allow_unknown_keys", "description", "environment", "pip_packages", "serve_args",
                "speculative_config", "tests_environment", "vllm_version")
# Environment variables that change how the whole engine runs, not the speculation: NCCL's transports, CUDA's and
# torch's allocators and devices. A trial whose two sides differ in one of them measures that difference too.
ENGINE_WIDE_ENVIRONMENT = re.compile(r"(?:NCCL|CUDA|NVIDIA|TORCH|PYTORCH)_")
# A version names its venv directory (<vllm_venv_root>/<version>): a release and local tags, no path separators.
VERSION_TEXT = re.compile(r"[0-9][0-9A-Za-z.+-]*\Z")
# One distribution pinned to one release, as pip reads it; both parts also name the variant's venv directory.
PINNED_PACKAGE = re.compile(r"([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)==([0-9][0-9A-Za-z.+-]*)\Z")
# A venv directory named after its packages stays well inside a file name's 255 bytes; longer lists get a digest.
VENV_LABEL_MAX_LENGTH = 100
MODEL_KEYS = ("name", "path", "served_name")
NAME_MAX_LENGTH = 64
VARIANT_NAME = "[a-z0-9][a-z0-9_-]*"
MODEL_NAME = "[a-z0-9][a-z0-9._-]*"
FLAG_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")
# Directories written into several unit settings, some of which split at whitespace: kept plain.
PLAIN_PATH = re.compile(r"/[A-Za-z0-9._/@+-]*\Z")
MODEL_LENGTH = re.compile(r"[0-9]+(?:\.[0-9]+)?[kKmMgG]\Z")
SERVER_MODULE = "vllm.entrypoints.openai.api_server"

DEFAULT_BASELINE = "baseline"

# vLLM flags that this collection renders from its own variables, and where to set them instead.
_RESERVED_FLAGS = {
    "api_key": "vllm_secret_environment.VLLM_API_KEY (a 0600 environment file: a flag would put the key on the "
               "unit's command line, which every local user can read)",
    "hf_token": "vllm_secret_environment.HF_TOKEN (a 0600 environment file: a flag would put the token on the "
                "unit's command line, which every local user can read)",
    "model": "vllm_model.path",
    "served_model_name": "vllm_model.served_name",
    "host": "vllm_host",
    "speculative_config": "the variant's speculative_config",
    "spec_method": "the variant's speculative_config",
    "spec_model": "the variant's speculative_config",
    "spec_tokens": "the variant's speculative_config",
}


# Ranges vLLM's own config classes enforce at start-up: (integers only, lowest, lowest excluded, highest).
_SERVE_ARG_RANGES = {
    "gpu_memory_utilization": (False, 0, True, 1),
    "max_num_seqs": (True, 1, False, None),
    "max_num_batched_tokens": (True, 1, False, None),
    "block_size": (True, 1, False, None),
    "pipeline_parallel_size": (True, 1, False, None),
    "data_parallel_size": (True, 1, False, None),
    "shutdown_timeout": (True, 0, False, None),
}
# Environment names that hold credentials by convention; their values belong in a 0600 file.
SECRET_NAME = re.compile(r"(?:^|_)(?:TOKEN|KEY|APIKEY)$|PASSWORD|PASSWD|SECRET|CREDENTIAL", re.IGNORECASE)
# POSIX portable user and group names, as useradd accepts them by default.
ACCOUNT_NAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}\Z")

# How long systemd waits before restarting a unit that failed (RestartSec=).
RESTART_SEC = 30
# A server that crashes late in its load restarts about once per load time: the restart-rate window must span
# this many loads (and their waits) for the burst limit to ever stop a crash loop.
START_LIMIT_BURST = 3


class VariantError(ValueError):
    """Settings that cannot be turned into a working unit; problems lists every reason."""

    def __init__(self, problems):
        self.problems = list(problems)
        super().__init__("invalid vLLM service settings:\n" + "\n".join("- " + p for p in self.problems))


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _is_port(value):
    return _is_int(value) and 1 <= value <= 65535


def _text(value):
    """A scalar as text: numbers in their shortest form (0.92), Ansible's tagged strings as plain str."""
    return str(value)


def _json(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _check_name(problems, where, name, pattern):
    """Names end up in unit and file names: keep them to a portable alphabet and length."""
    if not isinstance(name, str) or not re.match(pattern + r"\Z", name) or len(name) > NAME_MAX_LENGTH:
        problems.append("%s: %r must match %s and be at most %d characters (it becomes part of unit names)"
                        % (where, name, pattern, NAME_MAX_LENGTH))
        return False
    return True


def _check_mapping(problems, where, value):
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        problems.append("%s: must be a mapping, got %s" % (where, plain_type_name(value)))
        return {}
    return value


def _check_serve_arg(problems, where, value):
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, str):
        if "\x00" in value:
            problems.append("%s: contains a NUL character, which no process argument can hold" % where)
    elif isinstance(value, float):
        if not math.isfinite(value):
            problems.append("%s: must be a finite number, got %r" % (where, value))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            if isinstance(item, (bool, list, tuple, Mapping)) or item is None:
                problems.append("%s[%d]: list items must be strings or numbers, got %r" % (where, index, item))
            else:
                _check_serve_arg(problems, "%s[%d]" % (where, index), item)
    elif isinstance(value, Mapping):
        try:
            _json(value)
        except (TypeError, ValueError) as exc:
            problems.append("%s: cannot be written as JSON (%s)" % (where, exc))
    elif not _is_int(value):
        problems.append("%s: must be a string, number, boolean, null, list or mapping, got %s"
                        % (where, plain_type_name(value)))


def _check_serve_args(problems, where, serve_args, reserved):
    for key, value in serve_args.items():
        here = "%s.%s" % (where, key)
        if not isinstance(key, str) or not FLAG_NAME.match(key):
            problems.append("%s: flag names are snake_case ([a-z][a-z0-9_]*), e.g. max_model_len for "
                            "--max-model-len" % here)
        elif key in reserved:
            problems.append("%s: set by this collection from %s, not through serve_args" % (here, reserved[key]))
        else:
            before = len(problems)
            _check_serve_arg(problems, here, value)
            if len(problems) == before:
                _check_serve_arg_range(problems, here, key, value)


def _host_problem(host):
    """Why host cannot be the address vLLM binds (--host), or None: the port and the scheme live elsewhere."""
    if not isinstance(host, str) or not host or re.search(r"[\s\x00]", host):
        return "must be an address or host name without whitespace, got %r" % (host,)
    if "/" in host:
        return "must be an address or host name, not a URL or a path, got %r; the port goes in vllm_port" % (host,)
    if ":" in host:
        bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        try:
            ipaddress.IPv6Address(bare)
        except ValueError:
            return "%r looks like address:port; give the address here and the port in vllm_port" % (host,)
        if bare != host:
            return "write an IPv6 address without brackets (vLLM's --host takes %s), got %r" % (bare, host)
    return None


def _check_max_model_len(problems, where, value):
    # vLLM takes a positive count, a human-readable one ("32k", "1.5M"), or -1 / "auto" to fit the GPUs.
    if value is None or value == -1 or value == "auto":
        return
    if _is_int(value):
        if value < 1:
            problems.append("%s: vLLM requires a positive number of tokens (or -1 / 'auto' to fit the GPUs), got %r"
                            % (where, value))
        return
    if isinstance(value, str) and MODEL_LENGTH.match(value.strip()) and float(value.strip()[:-1] or 0) > 0:
        return
    problems.append("%s: must be a positive number of tokens, written as an integer or as in '32k' or '1.5M' "
                    "(or -1 / 'auto'), got %r" % (where, value))


def _check_serve_arg_range(problems, where, key, value):
    if key == "max_model_len":
        _check_max_model_len(problems, where, value)
        return
    if key not in _SERVE_ARG_RANGES or value is None:
        return
    integer, lowest, exclusive, highest = _SERVE_ARG_RANGES[key]
    number_ok = _is_int(value) or (not integer and isinstance(value, float))
    if not number_ok:
        problems.append("%s: must be %s, got %s" % (where, "an integer" if integer else "a number",
                                                    plain_type_name(value)))
        return
    below = value <= lowest if exclusive else value < lowest
    if below or (highest is not None and value > highest):
        if highest is None:
            bounds = "> %s" % lowest if exclusive else ">= %s" % lowest
        else:
            bounds = "in (%s, %s]" % (lowest, highest) if exclusive else "in [%s, %s]" % (lowest, highest)
        problems.append("%s: vLLM requires a value %s, got %r" % (where, bounds, value))


def _check_environment(problems, where, environment, refuse_secrets=False):
    for key, value in environment.items():
        here = "%s.%s" % (where, key)
        if not isinstance(key, str) or not ENVIRONMENT_NAME.match(key):
            problems.append("%s: not a valid environment variable name (letters, digits, _; no leading digit)"
                            % here)
        elif isinstance(value, bool) or not (value is None or _is_int(value) or isinstance(value, (str, float))):
            # The value is left out of the message: the same check guards secrets.
            problems.append("%s: must be a string or a number (quote booleans: '1', 'true'), got %s"
                            % (here, plain_type_name(value)))
        elif isinstance(value, str) and "\x00" in value:
            problems.append("%s: contains a NUL character, which no environment variable can hold" % here)
        elif refuse_secrets and SECRET_NAME.search(key):
            problems.append("%s: looks like a secret, and this file is world-readable; set it in "
                            "vllm_secret_environment, which goes to a 0600 file" % here)


def _check_tensor_parallel_size(problems, where, serve_args, gpu_count):
    tensor_parallel_size = serve_args.get("tensor_parallel_size")
    if tensor_parallel_size is None:
        return
    if not _is_int(tensor_parallel_size) or tensor_parallel_size < 1:
        problems.append("%s.tensor_parallel_size: must be an integer >= 1, got %r" % (where, tensor_parallel_size))
    elif _is_int(gpu_count) and gpu_count >= 1 and gpu_count % tensor_parallel_size:
        problems.append("%s.tensor_parallel_size: %d does not divide vllm_gpu_count (%d)"
                        % (where, tensor_parallel_size, gpu_count))


# Flags that start or join a deployment spanning several nodes; each node would need units these roles do not write.
_MULTI_NODE_FLAGS = ("nnodes", "node_rank", "headless", "master_addr", "master_port", "data_parallel_address",
                     "data_parallel_rpc_port", "data_parallel_start_rank")
SPANS_NODES = "docs/architecture.md, \"Beyond one node\""


def _check_one_node(problems, where, serve_args, gpu_count):
    """A unit of these roles is the whole server on one node; a model that spans nodes is refused, saying why."""
    backend = serve_args.get("distributed_executor_backend")
    if backend == "ray":
        problems.append("%s.distributed_executor_backend: 'ray' runs the model as a Ray cluster across nodes, which "
                        "these roles do not deploy yet (they write one unit per node; see %s); on one node leave it "
                        "unset or use 'mp'" % (where, SPANS_NODES))
    for flag in _MULTI_NODE_FLAGS:
        if serve_args.get(flag) not in (None, False):
            problems.append("%s.%s: joins a deployment that spans nodes, which these roles do not deploy yet (see %s)"
                            % (where, flag, SPANS_NODES))
    sizes = [serve_args.get(name) for name in ("tensor_parallel_size", "pipeline_parallel_size")]
    # A tensor-parallel size that does not fit the node is reported on its own (_check_tensor_parallel_size).
    fits = _is_int(gpu_count) and gpu_count >= 1 and all(size is None or (_is_int(size) and size >= 1) for size in sizes)
    if fits and gpu_count % (sizes[0] or 1) == 0:
        needed = (sizes[0] or 1) * (sizes[1] or 1)
        if needed > gpu_count:
            problems.append("%s: tensor_parallel_size x pipeline_parallel_size needs %d GPUs, more than this node's "
                            "vllm_gpu_count (%d): the model would span nodes, which these roles do not deploy yet "
                            "(see %s)" % (where, needed, gpu_count, SPANS_NODES))


def environment_strings(environment, where):
    """Return a copy of environment with every value as text, or raise VariantError naming where."""
    problems = []
    environment = _check_mapping(problems, where, environment)
    _check_environment(problems, where, environment)
    if problems:
        raise VariantError(problems)
    return dict((key, _text(value)) for key, value in environment.items() if value is not None)


def _flag_words(key, value):
    """The argv words of one vLLM flag: true -> --flag, false/null -> nothing, list -> --flag a b."""
    flag = "--" + key.replace("_", "-")
    if value is True:
        return [flag]
    if value is False or value is None:
        return []
    if isinstance(value, Mapping):
        return [flag, _json(value)]
    if isinstance(value, (list, tuple)):
        return [flag] + [_text(item) for item in value] if value else []
    return [flag, _text(value)]


class _Settings:
    """The role variables every variant shares, checked once."""

    def __init__(self, problems, model, serve_args, environment, baseline, host, port, gpu_count, venv, version,
                 config_dir, state_dir, venv_root=None, baseline_unit=None, expected_load_seconds=None):
        model = _check_mapping(problems, "vllm_model", model)
        for key in sorted(set(model) - set(MODEL_KEYS), key=str):
            problems.append("vllm_model.%s: unknown key (known: %s)" % (key, ", ".join(MODEL_KEYS)))
        self.model_name = model.get("name")
        _check_name(problems, "vllm_model.name", self.model_name, MODEL_NAME)
        self.model_path = model.get("path")
        if not isinstance(self.model_path, str) or not self.model_path.strip() or "\x00" in self.model_path:
            problems.append("vllm_model.path: required, the model directory or hub id, got %r" % (self.model_path,))
        self.served_name = model.get("served_name", self.model_name)
        if (not isinstance(self.served_name, str) or not self.served_name
                or re.search(r"[\s\x00-\x1f\x7f]", self.served_name) or self.served_name.endswith("\\")):
            problems.append("vllm_model.served_name: must be a non-empty name without whitespace, control characters "
                            "or a trailing backslash, got %r" % (self.served_name,))

        self.serve_args = _check_mapping(problems, "vllm_serve_args", serve_args)
        reserved = dict(_RESERVED_FLAGS, port="vllm_port")
        _check_serve_args(problems, "vllm_serve_args", self.serve_args, reserved)
        self.gpu_count = gpu_count
        if not _is_int(gpu_count) or gpu_count < 1:
            problems.append("vllm_gpu_count: must be an integer >= 1, got %r" % (gpu_count,))
        _check_tensor_parallel_size(problems, "vllm_serve_args", self.serve_args, gpu_count)
        _check_one_node(problems, "vllm_serve_args", self.serve_args, gpu_count)
        self.environment = _check_mapping(problems, "vllm_environment", environment)
        _check_environment(problems, "vllm_environment", self.environment, refuse_secrets=True)

        self.baseline = baseline
        self.baseline_valid = _check_name(problems, "vllm_baseline_variant", baseline, VARIANT_NAME)
        self.host = host
        host_problem = _host_problem(host)
        if host_problem:
            problems.append("vllm_host: %s" % host_problem)
        self.port = port
        if not _is_port(port):
            problems.append("vllm_port: must be an integer from 1 to 65535, got %r" % (port,))
        paths = (("vllm_venv", venv), ("vllm_config_dir", config_dir), ("vllm_state_dir", state_dir))
        for variable, path in paths:
            if not isinstance(path, str) or not PLAIN_PATH.match(path):
                problems.append("%s: must be an absolute path of letters, digits and ._/@+- only, got %r"
                                % (variable, path))
        self.venv, self.config_dir, self.state_dir = (
            path.rstrip("/") or "/" if isinstance(path, str) else path for _variable, path in paths)
        self.venv_root = None
        if venv_root is not None:
            if not isinstance(venv_root, str) or not PLAIN_PATH.match(venv_root):
                problems.append("vllm_venv_root: must be an absolute path of letters, digits and ._/@+- only, got %r"
                                % (venv_root,))
            else:
                self.venv_root = venv_root.rstrip("/") or "/"
        self.version = None
        self.version_text = None if version is None else str(version)
        if version is None:
            problems.append("vllm_version: required, the vLLM release the rules are checked against")
        else:
            self.version = _check_version(problems, "vllm_version", version)
        self.timing = None
        if _is_int(expected_load_seconds):
            self.timing = unit_timing(expected_load_seconds)
        else:
            problems.append("vllm_expected_load_seconds: must be a whole number of seconds, got %r"
                            % (expected_load_seconds,))
        # An adopted hand-made unit stays the baseline under its own name (playbooks/adopt.yml).
        self.baseline_unit = baseline_unit
        if baseline_unit is not None:
            problem = unit_name_problem(baseline_unit)
            if problem:
                problems.append(problem)
        self.valid = not problems

    def unit_name(self, variant):
        if variant == self.baseline and self.baseline_unit is not None:
            return self.baseline_unit
        return "vllm-%s-%s.service" % (self.model_name, variant)


def unit_timing(expected_load_seconds):
    """The start, restart and restart-rate settings of every unit, from the time the model takes to load.

    vLLM sends no readiness notification, so with Type=exec the start job ends at exec and TimeoutStartSec=
    bounds only what precedes it: the expected load time plus half again, rounded up. The restart-rate window
    (StartLimitIntervalSec=) spans START_LIMIT_BURST loads, each followed by the wait before its restart.
    """
    timeout_start_sec = (expected_load_seconds * 3 + 1) // 2
    return {
        "timeout_start_sec": timeout_start_sec,
        "restart_sec": RESTART_SEC,
        "start_limit_burst": START_LIMIT_BURST,
        "start_limit_interval_sec": START_LIMIT_BURST * (timeout_start_sec + RESTART_SEC),
    }


def _check_version(problems, where, version):
    """The parsed release of a version that may also name a venv directory, or None after a problem."""
    if not isinstance(version, (str, int, float)) or isinstance(version, bool) or not VERSION_TEXT.match(str(version)):
        problems.append("%s: must be a vLLM release such as \"0.32.0\" (digits first, then letters, digits and ._+-),"
                        " got %r" % (where, version))
        return None
    try:
        return parse_version(version)
    except ValueError as exc:
        problems.append("%s: %s" % (where, exc))
        return None


def _variant_version(problems, settings, where, overrides):
    """(version text, parsed release, venv) the variant runs: its own vllm_version in a venv of its own, or the shared."""
    if overrides.get("vllm_version") is None or str(overrides["vllm_version"]) == settings.version_text:
        return settings.version_text, settings.version, settings.venv
    own = overrides["vllm_version"]
    release = _check_version(problems, where + ".vllm_version", own)
    if release is None:
        return None, None, None
    if settings.venv_root is None:
        # One venv per version: installing another version into the shared venv would change what the
        # running baseline restarts on.
        problems.append("%s.vllm_version: %s needs a venv of its own; set vllm_venv_root (each version is installed "
                        "in <vllm_venv_root>/<version>)" % (where, own))
        return None, None, None
    return str(own), release, "%s/%s" % (settings.venv_root, own)


def _distribution_name(name):
    """A distribution name as pip compares them (PEP 503): case and runs of -_. do not matter."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _variant_pip_packages(problems, where, overrides, speculative_config):
    """The variant's own pinned packages, sorted by name, or None after a problem.

    A speculative method whose proposer lives in another distribution (suffix: arctic-inference) needs it
    pinned here: vLLM refuses the method at start without it, after the baseline has stopped.
    """
    packages = overrides.get("pip_packages")
    if packages is None:
        packages = []
    if not isinstance(packages, (list, tuple)):
        problems.append("%s.pip_packages: must be a list of pinned packages such as [\"arctic-inference==0.3.0\"], got %s"
                        % (where, plain_type_name(packages)))
        return None
    pins = {}
    valid = True
    for index, entry in enumerate(packages):
        match = PINNED_PACKAGE.match(entry) if isinstance(entry, str) else None
        if match is None:
            problems.append("%s.pip_packages[%d]: %r must pin one distribution to one release, NAME==VERSION (no "
                            "options, ranges, extras or URLs), so that every install of the variant is the same"
                            % (where, index, entry))
            valid = False
            continue
        name = _distribution_name(match.group(1))
        if name in pins:
            problems.append("%s.pip_packages[%d]: %s is pinned twice" % (where, index, match.group(1)))
            valid = False
        pins[name] = entry
    method = speculative_config.get("method") if isinstance(speculative_config, Mapping) else None
    needed = METHOD_PACKAGES.get(canonical_method(method)) if isinstance(method, str) else None
    if needed is not None and valid and needed not in pins:
        problems.append("%s.pip_packages: speculative method %r needs %s in the variant's venv and vLLM refuses the "
                        "method without it; pin it here, e.g. [\"%s==<release>\"]. The variant then runs from a "
                        "venv of its own, since the package changes vLLM wherever it is installed"
                        % (where, method, needed, needed))
    return [pins[name] for name in sorted(pins)] if valid else None


def _variant_venv(problems, settings, where, version_text, venv, pip_packages):
    """The venv of a variant with packages of its own: <vllm_venv_root>/<version>+<packages>, apart from others."""
    if not pip_packages or venv is None:
        return venv
    if settings.venv_root is None:
        problems.append("%s.pip_packages: packages of the variant's own need a venv of its own, apart from the "
                        "baseline's; set vllm_venv_root (the variant runs from <vllm_venv_root>/<version>+<packages>)"
                        % where)
        return None
    label = "+".join(pin.replace("==", "-") for pin in pip_packages)
    if len(label) > VENV_LABEL_MAX_LENGTH:
        label = "packages-" + hashlib.sha256("\n".join(pip_packages).encode()).hexdigest()[:16]
    return "%s/%s+%s" % (settings.venv_root, version_text, label)


def _resolve_one(problems, settings, name, overrides):
    """Check one variant's overrides and, when they and the shared settings are valid, resolve its spec."""
    where = "vllm_variants.%s" % name
    overrides = _check_mapping(problems, where, overrides)
    for key in sorted(set(overrides) - set(VARIANT_KEYS), key=str):
        problems.append("%s.%s: unknown variant key (known: %s)" % (where, key, ", ".join(VARIANT_KEYS)))

    description = overrides.get("description")
    if description is None:
        description = ""
    elif not isinstance(description, str):
        problems.append("%s.description: must be a string, got %r" % (where, description))
        description = ""
    try:
        unit_setting_text(description)
    except ValueError as exc:
        problems.append("%s.description: %s" % (where, exc))

    allow_unknown_keys = overrides.get("allow_unknown_keys", False)
    if not isinstance(allow_unknown_keys, bool):
        problems.append("%s.allow_unknown_keys: must be true or false, got %r" % (where, allow_unknown_keys))

    variant_args = _check_mapping(problems, where + ".serve_args", overrides.get("serve_args"))
    _check_serve_args(problems, where + ".serve_args", variant_args, _RESERVED_FLAGS)
    serve_args = dict(settings.serve_args)
    serve_args.update(variant_args)
    port = serve_args.pop("port", settings.port)
    if "port" in variant_args and not _is_port(port):
        problems.append("%s.serve_args.port: must be an integer from 1 to 65535, got %r" % (where, port))

    _check_tensor_parallel_size(problems, where + ".serve_args", variant_args, settings.gpu_count)
    # What the baseline's own arguments break is said once, for the baseline.
    baseline_spans = []
    _check_one_node(baseline_spans, "", settings.serve_args, settings.gpu_count)
    if variant_args and not baseline_spans:
        _check_one_node(problems, where + ".serve_args", serve_args, settings.gpu_count)
    tensor_parallel_size = serve_args.get("tensor_parallel_size")
    if tensor_parallel_size is None:
        tensor_parallel_size = 1
    # A bad target size is reported where it is set; comparing the draft's size to it would only add noise.
    target_size_known = _is_int(tensor_parallel_size) and tensor_parallel_size >= 1 and not (
        _is_int(settings.gpu_count) and settings.gpu_count >= 1 and settings.gpu_count % tensor_parallel_size)

    version_text, release, venv = _variant_version(problems, settings, where, overrides)
    speculative_config = overrides.get("speculative_config")
    pip_packages = _variant_pip_packages(problems, where, overrides, speculative_config)
    venv = _variant_venv(problems, settings, where, version_text, venv, pip_packages)
    if speculative_config is not None and release is not None:
        for key, rule in check_speculative_config(speculative_config,
                                                  tensor_parallel_size if target_size_known else None,
                                                  release, allow_unknown_keys is True):
            problems.append("%s.speculative_config%s: %s" % (where, "." + str(key) if key else "", rule))
        try:
            _json(speculative_config)
        except (TypeError, ValueError) as exc:
            problems.append("%s.speculative_config: cannot be written as JSON (%s)" % (where, exc))

    variant_environment = _check_mapping(problems, where + ".environment", overrides.get("environment"))
    _check_environment(problems, where + ".environment", variant_environment, refuse_secrets=True)
    environment = dict(settings.environment)
    environment.update(variant_environment)

    if problems or not settings.valid:
        return None
    unit_description = "vLLM %s (%s)" % (settings.served_name, name) + (": " + description if description else "")
    argv = [venv + "/bin/python", "-m", SERVER_MODULE, "--model", settings.model_path,
            "--served-model-name", settings.served_name, "--host", settings.host, "--port", str(port)]
    for key in sorted(serve_args):
        argv.extend(_flag_words(key, serve_args[key]))
    if speculative_config is not None:
        argv.extend(["--speculative-config", _json(speculative_config)])
    return {
        "name": name,
        "model": settings.model_name,
        "baseline": name == settings.baseline,
        "description": description,
        "unit_name": settings.unit_name(name),
        "unit_description": unit_setting_text(unit_description),
        "env_file": "%s/%s-%s.env" % (settings.config_dir, settings.model_name, name),
        "secrets_env_file": "%s/%s.secrets.env" % (settings.config_dir, settings.model_name),
        "state_dir": settings.state_dir,
        "host": _text(settings.host),
        "port": port,
        "tensor_parallel_size": tensor_parallel_size,
        # The GPUs one server uses: tensor times pipeline parallel (the preflight counts the node's GPUs against it).
        "world_size": _world_size(tensor_parallel_size, serve_args.get("pipeline_parallel_size")),
        "vllm_version": version_text,
        "venv": venv,
        "pip_packages": pip_packages,
        "serve_args": serve_args,
        "speculative_config": speculative_config,
        "environment": dict((key, _text(value)) for key, value in environment.items() if value is not None),
        "argv": argv,
        "exec_start": format_exec_command(argv),
        **settings.timing,
    }


def _world_size(tensor_parallel_size, pipeline_parallel_size):
    """Tensor times pipeline parallel size; None when either is not a whole number (already a problem then)."""
    pipeline_parallel_size = 1 if pipeline_parallel_size is None else pipeline_parallel_size
    if _is_int(tensor_parallel_size) and _is_int(pipeline_parallel_size):
        return tensor_parallel_size * pipeline_parallel_size
    return None


def _check_shutdown_timeout(problems, specs, variants, stop_timeout):
    """vLLM's drain after SIGTERM must end before systemd's TimeoutStopSec= kills what is left."""
    if not _is_int(stop_timeout):
        return
    for name in sorted(specs):
        value = specs[name]["serve_args"].get("shutdown_timeout")
        if _is_int(value) and value >= stop_timeout:
            own = "serve_args" in (variants.get(name) or {}) and "shutdown_timeout" in variants[name]["serve_args"]
            where = "vllm_variants.%s.serve_args" % name if own else "vllm_serve_args"
            problems.append("%s.shutdown_timeout: %d must be shorter than vllm_stop_timeout_seconds (%d), or systemd "
                            "kills the server before its requests in flight have drained" % (where, value, stop_timeout))
            if not own:
                return


def _check_baseline_unit(problems, settings, specs):
    """An adopted baseline's unit name must not be the unit of a variant, which would then overwrite it."""
    if settings.baseline_unit is None:
        return
    for name in sorted(specs):
        if name != settings.baseline and specs[name]["unit_name"] == settings.baseline_unit:
            problems.append("vllm_baseline_unit_name: %s is the unit of variant %s; name the adopted unit, which "
                            "differs from every variant's vllm-<model>-<variant>.service"
                            % (settings.baseline_unit, name))


def _check_ports(problems, settings, specs):
    """Variants normally share vllm_port; one that moves off it must not share its own port with another."""
    owners = {}
    for name in sorted(specs):
        if specs[name]["port"] != settings.port:
            owners.setdefault(specs[name]["port"], []).append(name)
    for port, names in sorted(owners.items()):
        if len(names) > 1:
            problems.append("vllm_variants.%s.serve_args.port: port %d is also set by variant %s; a port apart "
                            "from vllm_port (%d) must be unique on the host"
                            % (names[1], port, ", ".join(n for n in names if n != names[1]), settings.port))


def _link(settings, specs):
    """Declare Conflicts= and ordering on the variants only, so adding a variant never rewrites the baseline.

    systemd applies Conflicts= in both directions when one side declares it. Ordering makes the stop of the
    running server finish before the next one starts; it follows the sorted names, so it can never cycle.
    """
    others = sorted(name for name in specs if name != settings.baseline)
    for name, spec in specs.items():
        if spec["baseline"]:
            spec.update(conflicts=[], after=[], before=[])
            continue
        baseline_unit = [settings.unit_name(settings.baseline)]
        spec["conflicts"] = baseline_unit + [settings.unit_name(n) for n in others if n != name]
        spec["after"] = baseline_unit + [settings.unit_name(n) for n in others if n < name]
        spec["before"] = [settings.unit_name(n) for n in others if n > name]


def account_problems(user, group, supplementary_groups):
    """What is wrong with the account the units run as; names reach User=, Group= and SupplementaryGroups=."""
    problems = []
    for variable, name in (("vllm_user", user), ("vllm_group", group)):
        if name is None:
            continue
        if not isinstance(name, str) or not ACCOUNT_NAME.match(name):
            problems.append("%s: %r must be a user or group name (lowercase letters, digits, _ and -, at most 32, "
                            "not starting with a digit or -)" % (variable, name))
        elif name == "root":
            problems.append("%s: must not be root: the server and its model code would run with every privilege "
                            "of the node; use an unprivileged account such as vllm" % variable)
    if supplementary_groups is not None:
        if not isinstance(supplementary_groups, (list, tuple)):
            problems.append("vllm_supplementary_groups: must be a list of group names, got %s"
                            % plain_type_name(supplementary_groups))
        else:
            for index, name in enumerate(supplementary_groups):
                if not isinstance(name, str) or not ACCOUNT_NAME.match(name):
                    problems.append("vllm_supplementary_groups[%d]: %r must be a group name (lowercase letters, "
                                    "digits, _ and -)" % (index, name))
                elif name in ("root", "sudo", "wheel", "adm", "disk", "docker"):
                    problems.append("vllm_supplementary_groups[%d]: %r would give the server administrator "
                                    "rights; keep to the groups of the GPU device nodes (video, render)"
                                    % (index, name))
    return problems


# What systemd's SystemCallFilter= and DeviceAllow= take, one entry each: nothing that could end the line.
SYSTEM_CALL_ENTRY = re.compile(r"~?@?[a-z0-9_-]+\Z")
DEVICE_ALLOW_ENTRY = re.compile(r"(/dev/[A-Za-z0-9._/-]+|(char|block)-[A-Za-z0-9_*.-]+)( [rwm]{1,3})?\Z")


def sandbox_problems(system_call_filter, device_allow):
    """What is wrong with the entries that reach SystemCallFilter= and DeviceAllow=."""
    problems = []
    for variable, entries, pattern, rule in (
            ("vllm_system_call_filter", system_call_filter, SYSTEM_CALL_ENTRY,
             "a system call or @group, optionally after ~"),
            ("vllm_device_allow", device_allow, DEVICE_ALLOW_ENTRY,
             "a /dev path, char-NAME or block-NAME, optionally followed by a space and r, w, m")):
        if entries is None:
            continue
        if not isinstance(entries, (list, tuple)):
            problems.append("%s: must be a list, got %s" % (variable, plain_type_name(entries)))
            continue
        for index, entry in enumerate(entries):
            if not isinstance(entry, str) or not pattern.match(entry):
                problems.append("%s[%d]: %r must be %s" % (variable, index, entry, rule))
    return problems


def complete_settings(given, declared, where="settings"):
    """The shared settings of every variant: given, with declared defaults for those left out.

    declared maps each setting's name to its documented spec (its default), so a setting is declared once, in
    the doc fragment that documents it. An unknown name is refused, so a typo is never silently ignored. A
    missing required setting is left None, for resolve_variants to refuse in the words of its role variable.
    """
    if given is None:
        given = {}
    if not isinstance(given, Mapping):
        raise VariantError(["%s: must be a dict of settings, got %s" % (where, plain_type_name(given))])
    unknown = sorted(set(given) - set(declared), key=str)
    if unknown:
        raise VariantError(["%s.%s: unknown setting (known: %s)" % (where, name, ", ".join(sorted(declared)))
                            for name in unknown])
    return {name: given[name] if given.get(name) is not None else copy.deepcopy(spec.get("default"))
            for name, spec in declared.items()}


def resolve_variants(variants, settings):
    """Return variant name -> resolved spec for every variant and the baseline, or raise VariantError.

    settings holds every shared setting by name (complete_settings), as the variant_settings doc fragment
    documents them.
    """
    model, baseline, stop_timeout = settings["model"], settings["baseline"], settings["stop_timeout"]
    problems = account_problems(settings["user"], settings["group"], settings["supplementary_groups"])
    problems += sandbox_problems(settings["system_call_filter"], settings["device_allow"])
    settings_checked = _Settings(problems, model, settings["serve_args"], settings["environment"], baseline,
                                 settings["host"], settings["port"], settings["gpu_count"], settings["venv"],
                                 settings["version"], settings["config_dir"], settings["state_dir"],
                                 settings["venv_root"], settings.get("baseline_unit_name"),
                                 settings["expected_load_seconds"])
    secret_environment_names = settings["secret_environment_names"]
    # Only the names come this way, so no message can ever show a secret value.
    for name in secret_environment_names or ():
        if not isinstance(name, str) or not ENVIRONMENT_NAME.match(name):
            problems.append("vllm_secret_environment.%s: not a valid environment variable name (letters, digits, "
                            "_; no leading digit)" % (name,))
    variants = _check_mapping(problems, "vllm_variants", variants)
    if settings_checked.baseline_valid and baseline != DEFAULT_BASELINE and baseline not in variants:
        # A typo here would create a new baseline unit silently, and every variant would conflict with it.
        problems.append("vllm_baseline_variant: %r is not declared in vllm_variants; declare it (an empty mapping "
                        "serves the shared settings) or keep the default %r; declared: %s"
                        % (baseline, DEFAULT_BASELINE, ", ".join(sorted(variants, key=str)) or "none"))
    names = set(variants)
    if settings_checked.baseline_valid:
        names.add(baseline)
    specs = {}
    for name in sorted(names, key=str):
        if _check_name(problems, "vllm_variants.%s" % (name,), name, VARIANT_NAME):
            variant_problems = []
            spec = _resolve_one(variant_problems, settings_checked, name, variants.get(name))
            problems.extend(variant_problems)
            if spec is not None:
                specs[name] = spec
    if problems:
        raise VariantError(problems)
    _check_baseline_unit(problems, settings_checked, specs)
    _check_ports(problems, settings_checked, specs)
    _check_shutdown_timeout(problems, specs, variants, stop_timeout)
    _check_engine_wide_environment(problems, specs, variants, baseline)
    if problems:
        raise VariantError(problems)
    _link(settings_checked, specs)
    return specs


def _check_engine_wide_environment(problems, specs, variants, baseline):
    """Both sides of a trial run the engine alike: an engine-wide variable that only one side sets, or that the sides
    set otherwise, is refused unless the variant declares it as what it tests (tests_environment)."""
    if baseline not in specs:
        return
    base = specs[baseline]["environment"]
    for name in sorted(specs):
        if name == baseline:
            continue
        declared = (variants.get(name) or {}).get("tests_environment") or []
        where = "vllm_variants.%s" % name
        if not isinstance(declared, list) or not all(isinstance(item, str) for item in declared):
            problems.append("%s.tests_environment: must be a list of environment variable names, got %r"
                            % (where, declared))
            continue
        own = specs[name]["environment"]
        for key in sorted(set(own) | set(base)):
            if not ENGINE_WIDE_ENVIRONMENT.match(key) or own.get(key) == base.get(key) or key in declared:
                continue
            problems.append(
                "%s.environment.%s: %s here and %s on the baseline; an engine-wide setting that differs between the "
                "sides makes the trial measure it as well as the speculation. Set it for both sides in "
                "vllm_environment, or list it in %s.tests_environment when that difference is what the variant tests"
                % (where, key, _shown(own.get(key)), _shown(base.get(key)), where))


def _shown(value):
    return "unset" if value is None else "%r" % (value,)
