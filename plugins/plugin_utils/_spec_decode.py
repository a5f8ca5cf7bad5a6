# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) llmops.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The rules vLLM applies to --speculative-config, checked before a server spends minutes loading.

Checked against vllm/config/speculative.py of vLLM 0.32.0 (the SpeculativeConfig fields, the method
names and the checks in __post_init__ and _verify_args); see docs/variants.md for the table.
"""

from __future__ import annotations

import re
from collections import namedtuple
from collections.abc import Mapping

from ansible_collections.llmops.vllm.plugins.module_utils._type_names import plain_type_name

# default_tokens: what vLLM uses when num_speculative_tokens is left out; removed_in: first release without it.
_Method = namedtuple("_Method", "needs_model default_tokens removed_in", defaults=(False, None, None))


METHODS = {
    "ngram": _Method(),
    "ngram_gpu": _Method(),
    "suffix": _Method(default_tokens=24),
    "draft_model": _Method(needs_model=True),
    "eagle": _Method(needs_model=True),
    "eagle3": _Method(needs_model=True),
    "mtp": _Method(),
    "dflash": _Method(needs_model=True),
    "dspark": _Method(),
    "custom_class": _Method(needs_model=True),
    "extract_hidden_states": _Method(),
    "medusa": _Method(needs_model=True, removed_in=(0, 33)),
    "mlp_speculator": _Method(needs_model=True, removed_in=(0, 33)),
}

# Methods whose proposer vLLM imports from a distribution of its own, which the variant's venv must hold
# (vLLM 0.32.0 raises ImportError while it builds the speculative config without it).
METHOD_PACKAGES = {"suffix": "arctic-inference"}

# Model-specific MTP names that vLLM still accepts and rewrites to "mtp".
LEGACY_MTP_METHODS = frozenset((
    "bailing_hybrid_mtp", "bailing_hybrid_v3_mtp", "deepseek_mtp", "dots3_note_mtp", "ernie_mtp",
    "exaone4_5_mtp", "exaone_moe_mtp", "gemma4_mtp", "glm4_moe_lite_mtp", "glm4_moe_mtp", "glm5_next_mtp",
    "glm_ocr_mtp", "hy_v3_mtp", "hy_v4_mtp", "inkling_mtp", "kimi_k3_mtp", "longcat_flash_mtp",
    "mimo_mtp", "mimo_v2_mtp", "minimax_m3_mtp", "nemotron_h_mtp", "pangu_ultra_moe_mtp",
    "qwen3_5_mtp", "qwen3_next_mtp", "qwen4_exp_mtp", "step3p5_mtp",
))

# SpeculativeConfig fields a user may set; the engine fills target_*/draft_*_config itself.
KNOWN_KEYS = frozenset((
    "attention_backend", "code_revision", "disable_eagle_block_drop", "disable_padded_drafter_batch",
    "draft_load_config", "draft_sample_method", "draft_tensor_parallel_size", "dspark_draft_topk",
    "enable_adaptive_verification", "enforce_eager", "index_share_for_mtp_iteration", "kv_cache_dtype",
    "max_model_len", "method", "model", "moe_backend", "num_speculative_tokens",
    "num_speculative_tokens_per_batch_size", "parallel_drafting", "prompt_lookup_max", "prompt_lookup_min",
    "quantization", "rejection_sample_method", "revision", "suffix_decoding_max_cached_requests",
    "suffix_decoding_max_spec_factor", "suffix_decoding_max_tree_depth", "suffix_decoding_min_token_prob",
    "synthetic_acceptance_length", "synthetic_acceptance_rates", "use_heterogeneous_vocab",
    "use_local_argmax_reduction",
))

_RELEASE = re.compile(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?")


def parse_version(text):
    """Return the numeric release of a version string as a 3-tuple: "0.33.0rc1+cpu" -> (0, 33, 0)."""
    match = _RELEASE.match(str(text))
    if not match:
        raise ValueError("%r does not start with a numeric release such as 0.32.0" % (text,))
    return tuple(int(part or 0) for part in match.groups())


_LOOKUP_METHODS = ("ngram", "ngram_gpu")

# vLLM's SpeculativeConfig checks of the suffix-decoding fields: (key, integers only, lowest, highest).
_SUFFIX_RANGES = (
    ("suffix_decoding_max_tree_depth", True, 1, None),
    ("suffix_decoding_max_cached_requests", True, 0, None),
    ("suffix_decoding_max_spec_factor", False, 0, None),
    ("suffix_decoding_min_token_prob", False, 0, 1),
)


def _suffix_problems(config, method, method_name, spec):
    problems = []
    for key, integer, lowest, highest in _SUFFIX_RANGES:
        value = config.get(key)
        if value is None:
            continue
        if spec is not None and method_name != "suffix":
            problems.append((key, "only the suffix method reads it; vLLM ignores it for method %r" % method))
            continue
        number_ok = isinstance(value, int) if integer else isinstance(value, (int, float))
        if isinstance(value, bool) or not number_ok:
            problems.append((key, "must be %s, got %r" % ("an integer" if integer else "a number", value)))
        elif value < lowest or (highest is not None and value > highest):
            bounds = ">= %s" % lowest if highest is None else "in [%s, %s]" % (lowest, highest)
            problems.append((key, "must be %s, got %r" % (bounds, value)))
    return problems


def _positive_int(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def canonical_method(method):
    """Return the method vLLM will run: legacy model-specific MTP names become "mtp"."""
    return "mtp" if method in LEGACY_MTP_METHODS else method


def check_speculative_config(config, target_tensor_parallel_size, version, allow_unknown_keys=False):
    """Return the problems vLLM would refuse a speculative config for, as (key, rule) pairs.

    key is "" for the config as a whole. version is the declared vLLM release as a tuple.
    target_tensor_parallel_size may be None when unknown, which skips the draft-size comparison.
    """
    if not isinstance(config, Mapping):
        return [("", "must be a mapping of SpeculativeConfig fields, got %s" % plain_type_name(config))]
    problems = []
    if "tensor_parallel_size" in config:
        problems.append(("tensor_parallel_size",
                         "vLLM rejects this key in speculative_config; set draft_tensor_parallel_size instead"))
    if not allow_unknown_keys:
        for key in sorted(set(config) - KNOWN_KEYS - {"tensor_parallel_size"}, key=str):
            problems.append((key, "unknown key: vLLM refuses to start with it (set allow_unknown_keys: true "
                                  "on the variant if the vLLM version you run knows it)"))

    method = config.get("method")
    method_name = canonical_method(method) if isinstance(method, str) else None
    spec = METHODS.get(method_name)
    if method is None:
        problems.append(("method", "required, one of: %s" % ", ".join(sorted(METHODS))))
    elif spec is None:
        problems.append(("method", "unknown method %r; known: %s (or a legacy <model>_mtp name)"
                         % (method, ", ".join(sorted(METHODS)))))
    else:
        if spec.removed_in and version >= spec.removed_in:
            problems.append(("method", "method %r was removed in vLLM %d.%d (declared version %s)"
                             % (method, spec.removed_in[0], spec.removed_in[1], ".".join(map(str, version)))))

    model = config.get("model")
    if model is not None and not (isinstance(model, str) and model.strip()):
        problems.append(("model", "must be a non-empty string naming the draft model, got %r" % (model,)))
    if spec is not None and spec.needs_model and model is None:
        problems.append(("model", "required for method %r: the draft model or head to load" % method))

    tokens = config.get("num_speculative_tokens")
    if tokens is not None and not _positive_int(tokens):
        problems.append(("num_speculative_tokens", "must be an integer > 0, got %r" % (tokens,)))
    if tokens is None and spec is not None and spec.default_tokens is None and model is None:
        problems.append(("num_speculative_tokens",
                         "required for method %r: without a draft model there is no n_predict to default from"
                         % method))

    lookup = {}
    for key in ("prompt_lookup_min", "prompt_lookup_max"):
        value = config.get(key)
        if value is None:
            continue
        if _positive_int(value):
            lookup[key] = value
        else:
            problems.append((key, "must be an integer >= 1, got %r" % (value,)))
    if lookup and spec is not None and method_name not in _LOOKUP_METHODS:
        for key in sorted(lookup):
            problems.append((key, "only the n-gram methods (%s) read it; vLLM ignores it for method %r"
                             % (", ".join(_LOOKUP_METHODS), method)))
    problems.extend(_suffix_problems(config, method, method_name, spec))
    if (method_name in _LOOKUP_METHODS and len(lookup) == 2
            and lookup["prompt_lookup_min"] > lookup["prompt_lookup_max"]):
        problems.append(("prompt_lookup_min", "must be <= prompt_lookup_max, got %d > %d"
                         % (lookup["prompt_lookup_min"], lookup["prompt_lookup_max"])))

    draft_tp = config.get("draft_tensor_parallel_size")
    if draft_tp is not None and not _positive_int(draft_tp):
        problems.append(("draft_tensor_parallel_size", "must be an integer >= 1, got %r" % (draft_tp,)))
    elif draft_tp is not None and target_tensor_parallel_size is not None and draft_tp not in (
            1, target_tensor_parallel_size):
        problems.append(("draft_tensor_parallel_size", "must be 1 or the target tensor_parallel_size (%s), got %r"
                         % (target_tensor_parallel_size, draft_tp)))
    return problems
