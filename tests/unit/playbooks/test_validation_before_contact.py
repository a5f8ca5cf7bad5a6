# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Bad input fails on the controller, naming the variable and the rule, before any host is contacted.

The node of these runs is a loopback address whose SSH port refuses connections: had a playbook
gathered facts (or run anything else on the node) before its checks, it would end UNREACHABLE
and never show the error.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
MOCK_VARS = yaml.safe_load((REPO / "inventories" / "mock" / "group_vars" / "vllm_nodes" / "vllm.yml").read_text())


def refused_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run(tmp_path, playbook, changes, *arguments):
    if not ANSIBLE_PLAYBOOK.exists():
        pytest.skip("ansible-playbook is not installed beside this Python")
    host = dict(MOCK_VARS, ansible_host="127.0.0.1", ansible_port=refused_port(), ansible_connection="ssh",
                ansible_user="nobody", **changes)
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"vllm_nodes": {"hosts": {"unreachable-node": host}}}), encoding="utf-8")
    config = tmp_path / "ansible.cfg"
    config.write_text("[defaults]\nhost_key_checking = False\n", encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("ANSIBLE_", "LLMOPS_VLLM_"))}
    env.update(ANSIBLE_CONFIG=str(config), ANSIBLE_NOCOLOR="1", ANSIBLE_COLLECTIONS_PATH=str(REPO / ".cache" / "collections"),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"))
    return subprocess.run([str(ANSIBLE_PLAYBOOK), str(REPO / "playbooks" / playbook), "-i", str(inventory), *arguments],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)


CASES = [
    ("deploy-ngram.yml", {"vllm_serve_args": dict(MOCK_VARS["vllm_serve_args"], gpu_memory_utilization=1.4)},
     "vllm_serve_args.gpu_memory_utilization: vLLM requires a value in (0, 1], got 1.4"),
    ("deploy-ngram.yml", {"vllm_switch_benchmark": {"concurency": [8]}},
     "vllm_switch_benchmark.concurency: unknown option"),
    ("deploy-ngram.yml", {"vllm_baseline_variant": "baselin"},
     "vllm_baseline_variant: 'baselin' is not declared in vllm_variants"),
    ("deploy-ngram.yml", {"vllm_switch_prefetch_timeout": 0},
     "vllm_switch_prefetch_timeout: must be at least 1 second, got 0"),
    ("deploy-units.yml", {"vllm_user": "root"}, "vllm_user: must not be root"),
    ("switch-variant.yml", {"vllm_variants": {"suffix": {"speculative_config": {"method": "suffix"}}},
                            "vllm_variant": "suffix"},
     "vllm_variants.suffix.pip_packages: speculative method 'suffix' needs arctic-inference in the variant's venv"),
    ("deploy-units.yml", {"vllm_environment": {"HF_TOKEN": "hf_not_here"}},
     "vllm_environment.HF_TOKEN: looks like a secret"),
    # The trial's own settings (llmops.vllm.trial_settings), each of which would otherwise fail on the node,
    # at the decision, or never.
    ("deploy-ngram.yml", {"vllm_switch_benchmark": {"concurrency": [4, 0]}},
     "vllm_switch_benchmark.concurrency must list at least one level, each at least 1"),
    ("deploy-ngram.yml", {"vllm_switch_min_runs": 0, "vllm_switch_drain_hook_before": {"command": ["lb", "drain"]}},
     "vllm_switch_min_runs must be a positive integer, got 0; vllm_switch_drain_hook_before.command: unknown key"),
    ("deploy-ngram.yml", {"vllm_secret_environment": {"VLLM_API_KEY": "hf_not_here\n"}},
     "vllm_secret_environment.VLLM_API_KEY: the value begins or ends with whitespace or a newline"),
    ("deploy-ngram.yml", {"vllm_host": "127.77.0.10:18000"}, "vllm_host: '127.77.0.10:18000' looks like address:port"),
    ("deploy-ngram.yml", {"vllm_serve_args": dict(MOCK_VARS["vllm_serve_args"], max_model_len=0)},
     "vllm_serve_args.max_model_len: vLLM requires a positive number of tokens"),
    # A search without a grid, and a grid with a key vLLM does not know: no point is declared or rendered.
    ("search-variants.yml", {}, "vllm_search_variant.method"),
    ("search-variants.yml", {"vllm_search_variant": {"method": "ngram"},
                             "vllm_search_grid": {"num_speculative_tokens": [1, 2], "prompt_lookup_mx": [2, 4]}},
     "vllm_search_grid.prompt_lookup_mx"),
]


@pytest.mark.parametrize("playbook, changes, message", CASES)
def test_bad_input_fails_before_the_node_is_contacted(tmp_path, playbook, changes, message):
    completed = run(tmp_path, playbook, changes)

    output = completed.stdout + completed.stderr
    assert completed.returncode != 0, output
    assert message in output
    assert "UNREACHABLE" not in output and "unreachable=1" not in output
    assert "_AnsibleTagged" not in output
    assert "hf_not_here" not in output


def test_switch_variant_checks_before_contact_too(tmp_path):
    completed = run(tmp_path, "switch-variant.yml", {}, "-e", "vllm_variant=eagle")

    output = completed.stdout + completed.stderr
    assert completed.returncode != 0, output
    assert "vllm_variant: unknown variant 'eagle'" in output
    assert "UNREACHABLE" not in output


def test_good_input_goes_on_to_contact_the_node(tmp_path):
    # The control case: with nothing wrong, the first task on the node is the fact gathering, which cannot
    # reach it, so the checks above really are what stopped the bad runs.
    completed = run(tmp_path, "deploy-ngram.yml", {})

    assert "UNREACHABLE" in completed.stdout, completed.stdout + completed.stderr


def test_a_misspelt_variable_is_named_with_the_one_meant_and_the_run_goes_on(tmp_path):
    completed = run(tmp_path, "deploy-ngram.yml", {"vllm_switch_marign_pct": 5})

    output = completed.stdout + completed.stderr
    assert ("vllm_switch_marign_pct: no role or playbook of llmops.vllm reads this variable; did you mean "
            "vllm_switch_margin_pct?") in " ".join(output.split())
    assert "UNREACHABLE" in completed.stdout, output


SEARCH = {"vllm_search_variant": {"method": "ngram"}, "vllm_search_grid": {"num_speculative_tokens": [1, 2]}}


def test_search_variants_refuses_variants_given_as_an_extra_variable(tmp_path):
    # An extra variable outranks set_fact: the grid's points could not be declared, and no unit of theirs rendered.
    completed = run(tmp_path, "search-variants.yml", SEARCH, "-e", '{"vllm_variants": {}}')

    output = completed.stdout + completed.stderr
    assert completed.returncode != 0, output
    assert "vllm_variants: given as an extra variable (-e), it cannot take the grid's points (ngram-k2, ngram-k1)" in output
    assert "UNREACHABLE" not in output


def test_a_good_grid_goes_on_to_contact_the_node(tmp_path):
    completed = run(tmp_path, "search-variants.yml", SEARCH)

    assert "UNREACHABLE" in completed.stdout, completed.stdout + completed.stderr
