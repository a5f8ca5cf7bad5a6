# Copyright (c) llmops.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Variants resolved into units: the merge, the rendered command line, and every bad input refused."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.llmops.vllm.plugins.doc_fragments.variant_settings import ModuleDocFragment
from ansible_collections.llmops.vllm.plugins.plugin_utils._documented_options import documented_argument_spec
from ansible_collections.llmops.vllm.plugins.plugin_utils._variants import (
    VariantError,
    complete_settings,
    environment_strings,
    resolve_variants,
)
from ansible_collections.llmops.vllm.tests.unit.plugins.module_utils.systemd_syntax import parse_exec_command

DECLARED = documented_argument_spec(ModuleDocFragment.DOCUMENTATION)
NGRAM = {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4}
EAGLE3 = {"method": "eagle3", "model": "lightseekorg/kimi-k2.5-eagle3", "num_speculative_tokens": 4,
          "draft_tensor_parallel_size": 8}


def kimi(**changes):
    """The production node's settings, with changes applied (None deletes a setting)."""
    settings = {
        "variants": {
            "ngram": {"speculative_config": NGRAM, "description": "seed experiment"},
            "eagle3": {"speculative_config": EAGLE3, "environment": {"EXTRA": "1"}},
        },
        "model": {"name": "kimi-k2.5", "path": "/srv/models/moonshotai/Kimi-K2.5", "served_name": "kimi"},
        "serve_args": {"tensor_parallel_size": 8, "max_model_len": 262144, "gpu_memory_utilization": 0.92,
                       "trust_remote_code": True, "tool_call_parser": "kimi_k2"},
        "environment": {"OMP_NUM_THREADS": 8},
        "baseline": "baseline",
        "host": "0.0.0.0",
        "port": 8000,
        "gpu_count": 8,
        "venv": "/opt/vllm/venv",
        "version": "0.32.0",
        "config_dir": "/etc/vllm",
        "state_dir": "/var/lib/vllm",
    }
    settings = copy.deepcopy(settings)
    for key, value in changes.items():
        if value is None:
            settings.pop(key)
        else:
            settings[key] = value
    return settings


def resolve(**changes):
    settings = kimi(**changes)
    variants = settings.pop("variants")
    return resolve_variants(variants, complete_settings(settings, DECLARED))


def with_variant(name, overrides):
    variants = kimi()["variants"]
    variants[name] = overrides
    return variants


def test_the_baseline_is_resolved_even_without_an_entry():
    specs = resolve()
    assert sorted(specs) == ["baseline", "eagle3", "ngram"]
    baseline = specs["baseline"]
    assert baseline["baseline"] is True
    assert baseline["speculative_config"] is None
    assert baseline["unit_name"] == "vllm-kimi-k2.5-baseline.service"
    assert baseline["env_file"] == "/etc/vllm/kimi-k2.5-baseline.env"
    assert baseline["secrets_env_file"] == "/etc/vllm/kimi-k2.5.secrets.env"


def test_argv_is_the_server_then_sorted_flags_then_the_speculative_config():
    argv = resolve()["eagle3"]["argv"]
    assert argv == [
        "/opt/vllm/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server",
        "--model", "/srv/models/moonshotai/Kimi-K2.5", "--served-model-name", "kimi",
        "--host", "0.0.0.0", "--port", "8000",
        "--gpu-memory-utilization", "0.92", "--max-model-len", "262144", "--tensor-parallel-size", "8",
        "--tool-call-parser", "kimi_k2", "--trust-remote-code",
        "--speculative-config",
        '{"draft_tensor_parallel_size":8,"method":"eagle3","model":"lightseekorg/kimi-k2.5-eagle3",'
        '"num_speculative_tokens":4}',
    ]


def test_a_variant_with_its_own_release_runs_from_the_venv_of_that_release():
    variants = with_variant("upgrade", {"vllm_version": "0.33.0", "description": "the next release"})
    specs = resolve(variants=variants, venv="/opt/vllm/0.32.0", venv_root="/opt/vllm/")
    assert (specs["upgrade"]["vllm_version"], specs["upgrade"]["venv"]) == ("0.33.0", "/opt/vllm/0.33.0")
    assert specs["upgrade"]["argv"][0] == "/opt/vllm/0.33.0/bin/python"
    # The baseline and the variants without a release of their own keep the shared venv.
    assert {name: spec["venv"] for name, spec in specs.items() if name != "upgrade"} == {
        "baseline": "/opt/vllm/0.32.0", "eagle3": "/opt/vllm/0.32.0", "ngram": "/opt/vllm/0.32.0"}
    assert specs["baseline"]["vllm_version"] == "0.32.0"
    # Naming the shared release is the same as naming none.
    same = resolve(variants=with_variant("again", {"vllm_version": "0.32.0"}), venv="/opt/vllm/0.32.0")
    assert same["again"]["venv"] == "/opt/vllm/0.32.0"


def test_a_variants_speculative_config_is_checked_against_its_own_release():
    # Medusa is accepted on the shared 0.32.0 and gone from 0.33.
    medusa = {"method": "medusa", "model": "org/medusa-heads", "num_speculative_tokens": 3}
    assert resolve(variants=with_variant("heads", {"speculative_config": medusa}))["heads"]["vllm_version"] == "0.32.0"
    upgraded = {"vllm_version": "0.33.0", "speculative_config": medusa}
    with pytest.raises(VariantError) as caught:
        resolve(variants=with_variant("heads", upgraded), venv_root="/opt/vllm")
    assert [problem for problem in caught.value.problems if "heads" in problem] == [
        problem for problem in caught.value.problems if problem.startswith("vllm_variants.heads.speculative_config")]
    assert caught.value.problems


@pytest.mark.parametrize("overrides, changes, message", [
    ({"vllm_version": "0.33.0"}, {},
     "vllm_variants.upgrade.vllm_version: 0.33.0 needs a venv of its own; set vllm_venv_root"),
    ({"vllm_version": "../../etc"}, {"venv_root": "/opt/vllm"},
     'vllm_variants.upgrade.vllm_version: must be a vLLM release such as "0.32.0"'),
    ({"vllm_version": "0.33.0"}, {"venv_root": "opt/vllm"},
     "vllm_venv_root: must be an absolute path"),
])
def test_a_release_of_its_own_is_refused_without_a_place_for_its_venv(overrides, changes, message):
    with pytest.raises(VariantError) as caught:
        resolve(variants=with_variant("upgrade", overrides), **changes)
    assert any(message in problem for problem in caught.value.problems), caught.value.problems


SUFFIX = {"method": "suffix"}


def test_a_variant_with_packages_of_its_own_runs_from_a_venv_of_its_own():
    variants = with_variant("suffix", {"speculative_config": SUFFIX,
                                       "pip_packages": ["Arctic_Inference==0.3.0", "aaa-extra==1.2"]})
    specs = resolve(variants=variants, venv="/opt/vllm/0.32.0", venv_root="/opt/vllm")
    suffix = specs["suffix"]
    # Sorted by the name pip compares, kept as written; the venv is named after them, beside the release's.
    assert suffix["pip_packages"] == ["aaa-extra==1.2", "Arctic_Inference==0.3.0"]
    assert suffix["venv"] == "/opt/vllm/0.32.0+aaa-extra-1.2+Arctic_Inference-0.3.0"
    assert suffix["argv"][0] == suffix["venv"] + "/bin/python"
    assert suffix["vllm_version"] == "0.32.0"
    # The package changes vLLM wherever it is installed: the baseline's venv stays without it.
    assert (specs["baseline"]["venv"], specs["baseline"]["pip_packages"]) == ("/opt/vllm/0.32.0", [])
    # With a release of its own too, the packages sit on top of that release.
    upgraded = resolve(variants=with_variant("suffix", {"speculative_config": SUFFIX, "vllm_version": "0.33.0",
                                                        "pip_packages": ["arctic-inference==0.3.0"]}),
                       venv="/opt/vllm/0.32.0", venv_root="/opt/vllm")
    assert upgraded["suffix"]["venv"] == "/opt/vllm/0.33.0+arctic-inference-0.3.0"


def test_a_long_package_list_names_its_venv_by_digest():
    pins = ["package-number-%02d==1.0.%d" % (index, index) for index in range(12)]
    specs = resolve(variants=with_variant("many", {"pip_packages": pins}), venv_root="/opt/vllm")
    venv = specs["many"]["venv"]
    assert venv.startswith("/opt/vllm/0.32.0+packages-") and len(venv.rsplit("/", 1)[1]) < 64
    # The same packages in another order are the same venv; another release of one of them is not.
    again = resolve(variants=with_variant("many", {"pip_packages": pins[::-1]}), venv_root="/opt/vllm")
    assert again["many"]["venv"] == venv
    moved = resolve(variants=with_variant("many", {"pip_packages": pins[:-1] + ["package-number-11==2.0"]}),
                    venv_root="/opt/vllm")
    assert moved["many"]["venv"] != venv


@pytest.mark.parametrize("overrides, changes, message", [
    ({"speculative_config": SUFFIX}, {"venv_root": "/opt/vllm"},
     "vllm_variants.upgrade.pip_packages: speculative method 'suffix' needs arctic-inference in the variant's venv"),
    ({"speculative_config": SUFFIX, "pip_packages": ["numpy==2.0.0"]}, {"venv_root": "/opt/vllm"},
     "vllm_variants.upgrade.pip_packages: speculative method 'suffix' needs arctic-inference"),
    ({"speculative_config": SUFFIX, "pip_packages": ["arctic-inference==0.3.0"]}, {},
     "vllm_variants.upgrade.pip_packages: packages of the variant's own need a venv of its own"),
    ({"pip_packages": "arctic-inference==0.3.0"}, {"venv_root": "/opt/vllm"},
     "vllm_variants.upgrade.pip_packages: must be a list of pinned packages"),
    ({"pip_packages": ["arctic-inference>=0.3"]}, {"venv_root": "/opt/vllm"},
     "vllm_variants.upgrade.pip_packages[0]: 'arctic-inference>=0.3' must pin one distribution to one release"),
    ({"pip_packages": ["--index-url=http://x/ a==1"]}, {"venv_root": "/opt/vllm"},
     "vllm_variants.upgrade.pip_packages[0]: '--index-url=http://x/ a==1' must pin one distribution"),
    ({"pip_packages": ["arctic-inference[vllm]==0.3.0"]}, {"venv_root": "/opt/vllm"},
     "vllm_variants.upgrade.pip_packages[0]: 'arctic-inference[vllm]==0.3.0' must pin one distribution"),
    ({"pip_packages": ["a==1/../../x"]}, {"venv_root": "/opt/vllm"},
     "vllm_variants.upgrade.pip_packages[0]: 'a==1/../../x' must pin one distribution"),
    ({"pip_packages": ["a==1\n"]}, {"venv_root": "/opt/vllm"},
     "vllm_variants.upgrade.pip_packages[0]: 'a==1\\n' must pin one distribution"),
    ({"pip_packages": [7]}, {"venv_root": "/opt/vllm"},
     "vllm_variants.upgrade.pip_packages[0]: 7 must pin one distribution"),
    ({"pip_packages": ["Arctic_Inference==0.3.0", "arctic-inference==0.2.0"]}, {"venv_root": "/opt/vllm"},
     "vllm_variants.upgrade.pip_packages[1]: arctic-inference is pinned twice"),
])
def test_packages_of_a_variants_own_are_refused_unless_pinned_and_placed(overrides, changes, message):
    with pytest.raises(VariantError) as caught:
        resolve(variants=with_variant("upgrade", overrides), **changes)
    assert any(message in problem for problem in caught.value.problems), caught.value.problems


@pytest.mark.parametrize("value, words", [
    (True, ["--flag"]),
    (False, []),
    (None, []),
    (7, ["--flag", "7"]),
    (0.1, ["--flag", "0.1"]),
    ("text with $ and %", ["--flag", "text with $ and %"]),
    (["a", 2, 0.5], ["--flag", "a", "2", "0.5"]),
    ([], []),
    ({"b": [1, 2], "a": {"z": None, "y": "ü"}}, ["--flag", '{"a":{"y":"ü","z":null},"b":[1,2]}']),
])
def test_each_kind_of_flag_value_renders_as_documented(value, words):
    argv = resolve(serve_args={"tensor_parallel_size": 8, "flag": value})["baseline"]["argv"]
    assert argv[11:] == words + ["--tensor-parallel-size", "8"]


def test_exec_start_runs_exactly_the_argv():
    serve_args = {"tensor_parallel_size": 8, "chat_template": "/srv/templates/it's 100% $free.jinja",
                  "override_generation_config": {"note": 'say "hi" \\o/'}}
    for spec in resolve(serve_args=serve_args).values():
        assert parse_exec_command(spec["exec_start"]) == spec["argv"]


def test_variant_overrides_merge_over_the_baseline():
    variants = with_variant("eager", {"serve_args": {"max_model_len": None, "enforce_eager": True},
                                      "environment": {"OMP_NUM_THREADS": None, "NEW": 0.5}})
    spec = resolve(variants=variants)["eager"]
    assert "--max-model-len" not in spec["argv"]
    assert "--enforce-eager" in spec["argv"]
    assert spec["environment"] == {"NEW": "0.5"}
    assert resolve(variants=variants)["baseline"]["environment"] == {"OMP_NUM_THREADS": "8"}


def test_conflicts_and_ordering_are_declared_on_variants_only():
    specs = resolve()
    assert specs["baseline"]["conflicts"] == specs["baseline"]["after"] == specs["baseline"]["before"] == []
    assert specs["eagle3"]["conflicts"] == ["vllm-kimi-k2.5-baseline.service", "vllm-kimi-k2.5-ngram.service"]
    assert specs["eagle3"]["after"] == ["vllm-kimi-k2.5-baseline.service"]
    assert specs["eagle3"]["before"] == ["vllm-kimi-k2.5-ngram.service"]
    assert specs["ngram"]["after"] == ["vllm-kimi-k2.5-baseline.service", "vllm-kimi-k2.5-eagle3.service"]
    assert specs["ngram"]["before"] == []


def test_adding_a_variant_leaves_the_baseline_spec_unchanged():
    before = resolve()["baseline"]
    after = resolve(variants=with_variant("aaa", {"speculative_config": NGRAM}))["baseline"]
    assert before == after


def test_a_variant_may_move_to_its_own_port():
    specs = resolve(variants=with_variant("probe", {"serve_args": {"port": 8100}}))
    assert specs["probe"]["port"] == 8100
    assert "--port" in specs["probe"]["argv"] and "8100" in specs["probe"]["argv"]
    assert "port" not in specs["probe"]["serve_args"]


def test_the_baseline_may_carry_overrides_and_a_speculative_config():
    variants = with_variant("baseline", {"speculative_config": NGRAM, "description": "n-gram is the baseline"})
    spec = resolve(variants=variants)["baseline"]
    assert spec["argv"][-2] == "--speculative-config"
    assert spec["unit_description"] == "vLLM kimi (baseline): n-gram is the baseline"


def test_served_name_defaults_to_the_model_name():
    spec = resolve(model={"name": "tiny-llama", "path": "/srv/models/tiny-llama"})["baseline"]
    assert spec["argv"][6] == "tiny-llama"


def test_percent_in_a_description_is_escaped_for_the_unit():
    spec = resolve(variants=with_variant("ngram", {"speculative_config": NGRAM, "description": "9% slower"}))["ngram"]
    assert spec["unit_description"] == "vLLM kimi (ngram): 9%% slower"
    assert spec["description"] == "9% slower"


BAD_INPUTS = [
    # (changes to the production settings, text the single reported problem must contain)
    ({"model": {"name": "Kimi K2.5", "path": "/m", "served_name": "kimi"}}, "vllm_model.name: 'Kimi K2.5' must match"),
    ({"model": {"name": "k" * 65, "path": "/m"}}, "vllm_model.name: %r must match" % ("k" * 65)),
    ({"model": {"name": "kimi"}}, "vllm_model.path: required"),
    ({"model": {"name": "kimi", "path": "/m", "revision": "x"}}, "vllm_model.revision: unknown key"),
    ({"model": {"name": "kimi", "path": "/m", "served_name": "two words"}}, "vllm_model.served_name: must be"),
    ({"variants": with_variant("Eagle-3", {})}, "vllm_variants.Eagle-3: 'Eagle-3' must match"),
    ({"variants": with_variant("x" * 65, {})}, "and be at most 64 characters (it becomes part of unit names)"),
    ({"variants": with_variant("ngram", {"speculative_config": NGRAM, "extra": 1})},
     "vllm_variants.ngram.extra: unknown variant key"),
    ({"variants": with_variant("ngram", ["method", "ngram"])}, "vllm_variants.ngram: must be a mapping, got list"),
    ({"variants": with_variant("ngram", {"speculative_config": dict(NGRAM, method="lookahead")})},
     "vllm_variants.ngram.speculative_config.method: unknown method 'lookahead'"),
    ({"variants": with_variant("ngram", {"speculative_config": dict(NGRAM, num_speculative_tokens=0)})},
     "vllm_variants.ngram.speculative_config.num_speculative_tokens: must be an integer > 0, got 0"),
    ({"variants": with_variant("ngram", {"speculative_config": dict(NGRAM, prompt_lookup_min=5)})},
     "vllm_variants.ngram.speculative_config.prompt_lookup_min: must be <= prompt_lookup_max, got 5 > 4"),
    ({"variants": with_variant("eagle3", {"speculative_config": dict(EAGLE3, draft_tensor_parallel_size=2)})},
     "vllm_variants.eagle3.speculative_config.draft_tensor_parallel_size: must be 1 or the target "
     "tensor_parallel_size (8), got 2"),
    ({"variants": with_variant("eagle3", {"speculative_config": {"method": "eagle3", "num_speculative_tokens": 4}})},
     "vllm_variants.eagle3.speculative_config.model: required for method 'eagle3'"),
    ({"variants": with_variant("eagle3", {"speculative_config": dict(EAGLE3, tensor_parallel_size=8)})},
     "vllm_variants.eagle3.speculative_config.tensor_parallel_size: vLLM rejects this key"),
    ({"variants": with_variant("ngram", {"speculative_config": dict(NGRAM, lookup_window=3)})},
     "vllm_variants.ngram.speculative_config.lookup_window: unknown key"),
    ({"variants": with_variant("ngram", {"speculative_config": NGRAM, "allow_unknown_keys": "yes"})},
     "vllm_variants.ngram.allow_unknown_keys: must be true or false"),
    ({"variants": with_variant("ngram", {"speculative_config": {"method": "medusa", "model": "m",
                                                                "num_speculative_tokens": 2}}),
      "version": "0.33.0"},
     "vllm_variants.ngram.speculative_config.method: method 'medusa' was removed in vLLM 0.33"),
    ({"serve_args": {"tensor_parallel_size": 3}}, "vllm_serve_args.tensor_parallel_size: 3 does not divide "
                                                  "vllm_gpu_count (8)"),
    ({"variants": with_variant("tp4", {"serve_args": {"tensor_parallel_size": 16}})},
     "vllm_variants.tp4.serve_args.tensor_parallel_size: 16 does not divide vllm_gpu_count (8)"),
    ({"serve_args": {"tensor_parallel_size": "8"}}, "vllm_serve_args.tensor_parallel_size: must be an integer"),
    ({"serve_args": {"tensor_parallel_size": 8, "max-model-len": 4096}},
     "vllm_serve_args.max-model-len: flag names are snake_case"),
    ({"serve_args": {"tensor_parallel_size": 8, "port": 9000}},
     "vllm_serve_args.port: set by this collection from vllm_port"),
    ({"serve_args": {"tensor_parallel_size": 8, "speculative_config": NGRAM}},
     "vllm_serve_args.speculative_config: set by this collection from the variant's speculative_config"),
    ({"variants": with_variant("ngram", {"serve_args": {"model": "/other"}})},
     "vllm_variants.ngram.serve_args.model: set by this collection from vllm_model.path"),
    ({"serve_args": {"tensor_parallel_size": 8, "max_model_len": float("inf")}},
     "vllm_serve_args.max_model_len: must be a finite number"),
    ({"serve_args": {"tensor_parallel_size": 8, "allowed_origins": [["nested"]]}},
     "vllm_serve_args.allowed_origins[0]: list items must be strings or numbers"),
    ({"environment": {"HF-HOME": "/x"}}, "vllm_environment.HF-HOME: not a valid environment variable name"),
    ({"environment": {"HF_HUB_OFFLINE": True}}, "vllm_environment.HF_HUB_OFFLINE: must be a string or a number"),
    ({"variants": with_variant("ngram", {"environment": {"A": "nul\x00"}})},
     "vllm_variants.ngram.environment.A: contains a NUL character"),
    ({"variants": with_variant("ngram", {"description": "two\nlines"})},
     "vllm_variants.ngram.description: must be a single line"),
    ({"variants": dict(with_variant("a", {"serve_args": {"port": 8100}}), b={"serve_args": {"port": 8100}})},
     "vllm_variants.b.serve_args.port: port 8100 is also set by variant a"),
    ({"variants": with_variant("ngram", {"serve_args": {"port": 70000}})},
     "vllm_variants.ngram.serve_args.port: must be an integer from 1 to 65535"),
    ({"port": 0}, "vllm_port: must be an integer from 1 to 65535, got 0"),
    ({"host": "0.0.0.0 8001"}, "vllm_host: must be an address or host name without whitespace"),
    ({"host": "127.77.0.10:18000"},
     "vllm_host: '127.77.0.10:18000' looks like address:port; give the address here and the port in vllm_port"),
    ({"host": "http://gpu-node-01"}, "vllm_host: must be an address or host name, not a URL or a path"),
    ({"host": "[::1]"}, "vllm_host: write an IPv6 address without brackets (vLLM's --host takes ::1)"),
    ({"serve_args": {"tensor_parallel_size": 8, "max_model_len": 0}},
     "vllm_serve_args.max_model_len: vLLM requires a positive number of tokens (or -1 / 'auto' to fit the GPUs), got 0"),
    ({"variants": with_variant("ngram", {"serve_args": {"max_model_len": "lots"}})},
     "vllm_variants.ngram.serve_args.max_model_len: must be a positive number of tokens, written as an integer or as "
     "in '32k' or '1.5M'"),
    ({"gpu_count": 0}, "vllm_gpu_count: must be an integer >= 1, got 0"),
    ({"baseline": "Base Line"}, "vllm_baseline_variant: 'Base Line' must match"),
    ({"venv": "/opt/my venv"}, "vllm_venv: must be an absolute path"),
    ({"config_dir": "etc/vllm"}, "vllm_config_dir: must be an absolute path"),
    ({"state_dir": "/var/lib/%i"}, "vllm_state_dir: must be an absolute path"),
    ({"version": "latest"}, 'vllm_version: must be a vLLM release such as "0.32.0" (digits first, then letters, '
                            "digits and ._+-), got 'latest'"),
    ({"version": "0.32/../x"}, 'vllm_version: must be a vLLM release such as "0.32.0"'),
    ({"version": None}, "vllm_version: required"),
    ({"secret_environment_names": ["VLLM_API_KEY", "hf-token"]},
     "vllm_secret_environment.hf-token: not a valid environment variable name"),
    # Ranges vLLM enforces at start-up, caught before a 30-minute load is wasted on them.
    ({"serve_args": {"tensor_parallel_size": 8, "gpu_memory_utilization": 1.4}},
     "vllm_serve_args.gpu_memory_utilization: vLLM requires a value in (0, 1], got 1.4"),
    ({"serve_args": {"tensor_parallel_size": 8, "gpu_memory_utilization": 0}},
     "vllm_serve_args.gpu_memory_utilization: vLLM requires a value in (0, 1], got 0"),
    ({"variants": with_variant("ngram", {"serve_args": {"max_num_seqs": 0}})},
     "vllm_variants.ngram.serve_args.max_num_seqs: vLLM requires a value >= 1, got 0"),
    ({"serve_args": {"tensor_parallel_size": 8, "max_num_batched_tokens": "8k"}},
     "vllm_serve_args.max_num_batched_tokens: must be an integer, got str"),
    ({"variants": with_variant("ngram", {"speculative_config": {"method": "suffix",
                                                                "suffix_decoding_min_token_prob": 1.5},
                                         "pip_packages": ["arctic-inference==0.3.0"]}),
      "venv_root": "/opt/vllm"},
     "vllm_variants.ngram.speculative_config.suffix_decoding_min_token_prob: must be in [0, 1], got 1.5"),
    ({"variants": with_variant("eagle3", {"speculative_config": dict(EAGLE3, prompt_lookup_max=4)})},
     "vllm_variants.eagle3.speculative_config.prompt_lookup_max: only the n-gram methods (ngram, ngram_gpu) read "
     "it; vLLM ignores it for method 'eagle3'"),
    # Secrets never reach a unit's command line or its world-readable environment file.
    ({"serve_args": {"tensor_parallel_size": 8, "api_key": "sk-live"}},
     "vllm_serve_args.api_key: set by this collection from vllm_secret_environment.VLLM_API_KEY (a 0600"),
    ({"variants": with_variant("ngram", {"serve_args": {"hf_token": "hf_x"}})},
     "vllm_variants.ngram.serve_args.hf_token: set by this collection from vllm_secret_environment.HF_TOKEN"),
    ({"environment": {"HF_TOKEN": "hf_x"}},
     "vllm_environment.HF_TOKEN: looks like a secret, and this file is world-readable; set it in "
     "vllm_secret_environment"),
    ({"variants": with_variant("ngram", {"environment": {"DB_PASSWORD": "x"}})},
     "vllm_variants.ngram.environment.DB_PASSWORD: looks like a secret"),
    ({"baseline": "baselin"},
     "vllm_baseline_variant: 'baselin' is not declared in vllm_variants; declare it (an empty mapping serves the "
     "shared settings) or keep the default 'baseline'; declared: eagle3, ngram"),
    ({"user": "root"}, "vllm_user: must not be root"),
    ({"group": "vllm\nExecStartPre=/bin/sh"}, "vllm_group: 'vllm\\nExecStartPre=/bin/sh' must be a user or group name"),
    ({"supplementary_groups": ["video", "docker"]},
     "vllm_supplementary_groups[1]: 'docker' would give the server administrator rights"),
    ({"supplementary_groups": "video"}, "vllm_supplementary_groups: must be a list of group names, got str"),
    ({"serve_args": {"tensor_parallel_size": 8, "shutdown_timeout": 180}, "stop_timeout": 180},
     "vllm_serve_args.shutdown_timeout: 180 must be shorter than vllm_stop_timeout_seconds (180), or systemd kills"),
    ({"variants": with_variant("ngram", {"serve_args": {"shutdown_timeout": 600}}), "stop_timeout": 180},
     "vllm_variants.ngram.serve_args.shutdown_timeout: 600 must be shorter than vllm_stop_timeout_seconds (180)"),
    ({"serve_args": {"tensor_parallel_size": 8, "shutdown_timeout": -1}},
     "vllm_serve_args.shutdown_timeout: vLLM requires a value >= 0, got -1"),
    ({"system_call_filter": ["@system-service", "ptrace\nExecStartPre=/bin/sh"]},
     "vllm_system_call_filter[1]: 'ptrace\\nExecStartPre=/bin/sh' must be a system call or @group, optionally after ~"),
    ({"system_call_filter": "@system-service"}, "vllm_system_call_filter: must be a list, got str"),
    ({"device_allow": ["/dev/nvidia0 rwx"]},
     "vllm_device_allow[0]: '/dev/nvidia0 rwx' must be a /dev path, char-NAME or block-NAME, optionally followed by"),
]


@pytest.mark.parametrize("system_call_filter, device_allow", [
    (["@system-service", "pidfd_getfd", "~@privileged"],
     ["char-nvidia-frontend rw", "char-nvidia-caps r", "/dev/nvidia-uvm rw", "/dev/nvidiactl"]),
    ([], []),
])
def test_sandbox_entries_systemd_takes_are_accepted(system_call_filter, device_allow):
    assert resolve(system_call_filter=system_call_filter, device_allow=device_allow)


@pytest.mark.parametrize("changes, message", BAD_INPUTS)
def test_bad_inputs_are_refused_naming_the_variable_key_and_rule(changes, message):
    with pytest.raises(VariantError) as caught:
        resolve(**changes)
    assert len(caught.value.problems) == 1, caught.value.problems
    assert message in caught.value.problems[0]
    assert str(caught.value).startswith("invalid vLLM service settings:\n- ")


def test_every_bad_input_is_reported_in_one_go():
    variants = with_variant("ngram", {"speculative_config": dict(NGRAM, num_speculative_tokens=0), "x": 1})
    with pytest.raises(VariantError) as caught:
        resolve(variants=variants, port=0, environment={"1X": "y"})
    assert caught.value.problems == [
        "vllm_environment.1X: not a valid environment variable name (letters, digits, _; no leading digit)",
        "vllm_port: must be an integer from 1 to 65535, got 0",
        "vllm_variants.ngram.x: unknown variant key (known: allow_unknown_keys, description, environment, "
        "pip_packages, serve_args, speculative_config, tests_environment, vllm_version)",
        "vllm_variants.ngram.speculative_config.num_speculative_tokens: must be an integer > 0, got 0",
    ]


def test_an_engine_wide_variable_that_only_the_variant_sets_is_refused_unless_declared_as_what_it_tests():
    # The preflight's P2P advice, set on one side only, would make the trial compare NCCL transports.
    p2p_off = {"speculative_config": NGRAM, "environment": {"NCCL_P2P_DISABLE": "1"}}
    with pytest.raises(VariantError) as caught:
        resolve(variants=with_variant("ngram", p2p_off))
    assert caught.value.problems == [
        "vllm_variants.ngram.environment.NCCL_P2P_DISABLE: '1' here and unset on the baseline; an engine-wide setting "
        "that differs between the sides makes the trial measure it as well as the speculation. Set it for both sides "
        "in vllm_environment, or list it in vllm_variants.ngram.tests_environment when that difference is what the "
        "variant tests"]

    declared = resolve(variants=with_variant("ngram", dict(p2p_off, tests_environment=["NCCL_P2P_DISABLE"])))
    assert declared["ngram"]["environment"]["NCCL_P2P_DISABLE"] == "1"
    # Set for both sides, or a variable of the variant's own that is not engine-wide (the draft's EXTRA): no problem.
    both = resolve(environment={"OMP_NUM_THREADS": 8, "NCCL_P2P_DISABLE": "1"})
    assert both["ngram"]["environment"]["NCCL_P2P_DISABLE"] == both["baseline"]["environment"]["NCCL_P2P_DISABLE"]


def test_a_declared_baseline_of_another_name_and_plain_settings_pass():
    specs = resolve(baseline="instruct", variants=dict(with_variant("instruct", {})), user="vllm", group="vllm",
                    supplementary_groups=["video", "render"],
                    environment={"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1"})
    assert specs["instruct"]["baseline"] and specs["ngram"]["conflicts"][0] == "vllm-kimi-k2.5-instruct.service"


def test_the_secret_file_itself_may_hold_secret_names():
    assert environment_strings({"VLLM_API_KEY": "k", "HF_TOKEN": "t"}, "vllm_secret_environment") == {
        "VLLM_API_KEY": "k", "HF_TOKEN": "t"}


def test_messages_name_plain_yaml_types_not_ansible_classes():
    class TaggedStr(str):
        pass

    with pytest.raises(VariantError) as caught:
        resolve(variants=TaggedStr("ngram"))
    assert caught.value.problems == ["vllm_variants: must be a mapping, got str"]


def test_secret_values_never_appear_in_messages():
    with pytest.raises(VariantError) as caught:
        environment_strings({"API_KEY": True, "TOKEN": ["s3cr3t"]}, "vllm_secret_environment")
    assert "s3cr3t" not in str(caught.value) and "True" not in str(caught.value)
    assert caught.value.problems == [
        "vllm_secret_environment.API_KEY: must be a string or a number (quote booleans: '1', 'true'), got bool",
        "vllm_secret_environment.TOKEN: must be a string or a number (quote booleans: '1', 'true'), got list",
    ]


def test_environment_strings_turns_numbers_into_text_and_drops_nulls():
    assert environment_strings({"A": 1, "B": 0.25, "C": None, "D": "d"}, "env") == {"A": "1", "B": "0.25", "D": "d"}


def test_left_out_settings_take_the_defaults_their_doc_fragment_declares():
    settings = complete_settings({"model": {"name": "m", "path": "/m"}, "version": "0.32.0"}, DECLARED)
    assert sorted(settings) == sorted(DECLARED)
    assert (settings["port"], settings["host"], settings["baseline"], settings["serve_args"]) == \
        (8000, "127.0.0.1", "baseline", {})
    assert settings["venv_root"] is None


@pytest.mark.parametrize("expected_load_seconds, timing", [
    # Left out: the production node's half hour. A start may take 45 minutes; three loads and waits, 2 h 16 min 30 s.
    (None, {"timeout_start_sec": 2700, "restart_sec": 30, "start_limit_burst": 3, "start_limit_interval_sec": 8190}),
    # The mock node's five minutes, as its rendered units show them.
    (300, {"timeout_start_sec": 450, "restart_sec": 30, "start_limit_burst": 3, "start_limit_interval_sec": 1440}),
    # Half again is rounded up.
    (61, {"timeout_start_sec": 92, "restart_sec": 30, "start_limit_burst": 3, "start_limit_interval_sec": 366}),
])
def test_every_unit_times_its_start_and_restarts_by_the_expected_load(expected_load_seconds, timing):
    specs = resolve() if expected_load_seconds is None else resolve(expected_load_seconds=expected_load_seconds)
    for spec in specs.values():
        assert {key: spec[key] for key in timing} == timing


@pytest.mark.parametrize("value", ["1800", 1800.0, True])
def test_an_expected_load_that_is_not_whole_seconds_is_refused(value):
    with pytest.raises(VariantError) as caught:
        resolve(expected_load_seconds=value)
    assert caught.value.problems == ["vllm_expected_load_seconds: must be a whole number of seconds, got %r" % (value,)]


def test_a_default_is_a_copy_so_that_one_resolution_cannot_change_the_next():
    first = complete_settings({}, DECLARED)
    first["serve_args"]["max_model_len"] = 4096
    assert complete_settings({}, DECLARED)["serve_args"] == {}


def test_a_misspelt_setting_is_refused_with_the_known_names():
    with pytest.raises(VariantError) as caught:
        complete_settings({"prot": 8001, "gpu_cont": 8, "port": 8001}, DECLARED, "variant_specs settings")
    assert [problem.split(" (known: ")[0] for problem in caught.value.problems] == [
        "variant_specs settings.gpu_cont: unknown setting", "variant_specs settings.prot: unknown setting"]
    assert "gpu_count, group, host, model, port, " in caught.value.problems[0]


def test_settings_that_are_not_a_mapping_are_refused():
    with pytest.raises(VariantError) as caught:
        complete_settings(["model"], DECLARED, "variant_specs settings")
    assert caught.value.problems == ["variant_specs settings: must be a dict of settings, got list"]


def test_a_required_setting_left_out_is_refused_in_the_words_of_its_role_variable():
    settings = kimi(model=None)
    variants = settings.pop("variants")
    with pytest.raises(VariantError) as caught:
        resolve_variants(variants, complete_settings(settings, DECLARED))
    assert any(problem.startswith("vllm_model") for problem in caught.value.problems)


SERVE_ARGS = kimi()["serve_args"]


@pytest.mark.parametrize("changes, message", [
    ({"serve_args": dict(SERVE_ARGS, distributed_executor_backend="ray")},
     "vllm_serve_args.distributed_executor_backend: 'ray' runs the model as a Ray cluster across nodes, which these"
     " roles do not deploy yet"),
    ({"serve_args": dict(SERVE_ARGS, pipeline_parallel_size=2)},
     "vllm_serve_args: tensor_parallel_size x pipeline_parallel_size needs 16 GPUs, more than this node's"
     " vllm_gpu_count (8): the model would span nodes"),
    ({"serve_args": dict(SERVE_ARGS, nnodes=2)},
     "vllm_serve_args.nnodes: joins a deployment that spans nodes"),
    ({"variants": with_variant("pp", {"serve_args": {"pipeline_parallel_size": 2}})},
     "vllm_variants.pp.serve_args: tensor_parallel_size x pipeline_parallel_size needs 16 GPUs"),
])
def test_a_model_that_spans_nodes_is_refused_pointing_at_the_architecture_page(changes, message):
    with pytest.raises(VariantError) as caught:
        resolve(**changes)
    assert len(caught.value.problems) == 1, caught.value.problems
    assert message in caught.value.problems[0] and 'docs/architecture.md, "Beyond one node"' in caught.value.problems[0]


def test_one_node_with_pipeline_parallel_inside_it_or_the_mp_backend_passes():
    assert resolve(serve_args=dict(SERVE_ARGS, tensor_parallel_size=4, pipeline_parallel_size=2,
                                   distributed_executor_backend="mp"),
                   variants={"ngram": {"speculative_config": NGRAM}})


@pytest.mark.parametrize("host, max_model_len", [
    ("::1", "32k"), ("0.0.0.0", -1), ("gpu-node-01.example", "auto"), ("127.77.0.10", 262144), ("fe80::1", "1.5M"),
])
def test_addresses_and_model_lengths_vllm_takes_are_accepted(host, max_model_len):
    specs = resolve(host=host, serve_args={"tensor_parallel_size": 8, "max_model_len": max_model_len})

    assert specs
