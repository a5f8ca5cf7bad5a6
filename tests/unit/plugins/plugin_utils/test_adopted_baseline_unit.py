# Copyright (c) llmops.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""An adopted hand-made unit named as the baseline's unit (vllm_baseline_unit_name), and the default kept without it."""

from __future__ import annotations

import pytest

from ansible_collections.llmops.vllm.plugins.doc_fragments.variant_settings import ModuleDocFragment
from ansible_collections.llmops.vllm.plugins.plugin_utils._documented_options import documented_argument_spec
from ansible_collections.llmops.vllm.plugins.plugin_utils._variants import (
    VariantError,
    complete_settings,
    resolve_variants,
)

DECLARED = documented_argument_spec(ModuleDocFragment.DOCUMENTATION)
NGRAM = {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4}


def resolve(**changes):
    settings = {"model": {"name": "kimi-k2.5", "path": "/srv/models/kimi", "served_name": "kimi"},
                "serve_args": {"tensor_parallel_size": 8}, "gpu_count": 8, "version": "0.32.0"}
    settings.update(changes)
    return resolve_variants({"ngram": {"speculative_config": NGRAM}, "eagle3": {}},
                            complete_settings(settings, DECLARED))


def test_without_the_setting_the_baseline_unit_keeps_its_default_name():
    specs = resolve()
    assert specs["baseline"]["unit_name"] == "vllm-kimi-k2.5-baseline.service"
    assert specs["ngram"]["conflicts"][0] == "vllm-kimi-k2.5-baseline.service"


def test_an_adopted_unit_is_the_baseline_that_every_variant_conflicts_with_and_follows():
    specs = resolve(baseline_unit_name="vllm-kimi-k25-int4.service")
    assert specs["baseline"]["unit_name"] == "vllm-kimi-k25-int4.service"
    assert specs["ngram"]["unit_name"] == "vllm-kimi-k2.5-ngram.service"
    assert specs["ngram"]["conflicts"] == ["vllm-kimi-k25-int4.service", "vllm-kimi-k2.5-eagle3.service"]
    assert specs["ngram"]["after"] == ["vllm-kimi-k25-int4.service", "vllm-kimi-k2.5-eagle3.service"]
    assert specs["eagle3"]["after"] == ["vllm-kimi-k25-int4.service"]
    # The files the unit reads keep the model's names: only the unit is the adopted one's.
    assert specs["baseline"]["env_file"] == "/etc/vllm/kimi-k2.5-baseline.env"


@pytest.mark.parametrize("name", ["vllm-kimi", "vllm kimi.service", "../x.service", "vllm@kimi.service",
                                  "/etc/systemd/system/vllm.service", "vllm-$free.service", "", ".service"])
def test_a_bad_unit_name_is_refused_naming_the_variable_and_the_rule(name):
    with pytest.raises(VariantError) as error:
        resolve(baseline_unit_name=name)
    assert [problem for problem in error.value.problems if problem.startswith("vllm_baseline_unit_name: ")]
    assert "must be a service unit name of letters, digits and _.:- that ends in .service" in str(error.value)


def test_a_variants_unit_cannot_be_named_as_the_baseline():
    with pytest.raises(VariantError) as error:
        resolve(baseline_unit_name="vllm-kimi-k2.5-ngram.service")
    assert error.value.problems == ["vllm_baseline_unit_name: vllm-kimi-k2.5-ngram.service is the unit of variant "
                                    "ngram; name the adopted unit, which differs from every variant's "
                                    "vllm-<model>-<variant>.service"]
