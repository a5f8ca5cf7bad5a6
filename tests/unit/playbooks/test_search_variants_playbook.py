# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The variant search's role tasks, run by ansible-playbook on canned trial records, without a node.

search_points.yml, resolve.yml and search.yml run against a local connection whose state directory holds
the records. In check mode search.yml only reads them and says what it would load; without check mode a
search that its records have settled already loads nothing, so nothing of the node is needed either. What
the tasks print is checked against what llmops.vllm.search_step answers for the same records, so that the
records, the declared variants, the baseline and the caps reach it as the role read them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
MOCK_VARS = yaml.safe_load((REPO / "inventories" / "mock" / "group_vars" / "vllm_nodes" / "vllm.yml").read_text())

from ansible_collections.llmops.vllm.plugins.filter.search_grid import search_grid  # noqa: E402
from ansible_collections.llmops.vllm.plugins.filter.search_step import search_step  # noqa: E402

NGRAM = {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4}
VARIANT = {"method": "ngram"}

PLAYBOOK = """
- name: Run the variant search's tasks on canned records
  hosts: node
  connection: local
  gather_facts: false
  tasks:
    - name: Work out the points
      ansible.builtin.include_role:
        name: llmops.vllm.vllm_experiment
        tasks_from: search_points.yml
    - name: Resolve the variants
      ansible.builtin.include_role:
        name: llmops.vllm.vllm_switch
        tasks_from: resolve.yml
    - name: Search
      ansible.builtin.include_role:
        name: llmops.vllm.vllm_experiment
        tasks_from: search.yml
"""


def record(variant, outcome, variant_tps, baseline_tps, variant_tpot, baseline_tpot, rates, at):
    """A trial record as the switch writes it (plugins/plugin_utils/_trial.py), with one decided level."""
    return {
        "variant": variant, "model": "tiny-llama", "baseline": "baseline", "outcome": outcome,
        "reason": "%s at concurrency 4: %+.1f%% (95%% interval -3.0%% to +3.0%%)" % (
            "not slower" if outcome == "kept" else "slower", (variant_tps - baseline_tps) * 100.0 / baseline_tps),
        "started_at": at, "finished_at": at, "recorded_at": at,
        "decision": {"decision": "keep" if outcome == "kept" else "roll_back", "levels": [{
            "max_concurrency": 4, "workload": None, "variant_output_throughput": variant_tps,
            "baseline_output_throughput": baseline_tps, "variant_tpot_ms": variant_tpot,
            "baseline_tpot_ms": baseline_tpot, "acceptance_rates": rates, "acceptance_length": 1 + sum(rates)}]},
    }


def run(tmp_path, grid, records, *arguments, **changes):
    if not ANSIBLE_PLAYBOOK.exists():
        pytest.skip("ansible-playbook is not installed beside this Python")
    state = tmp_path / "state" / "tiny-llama"
    state.mkdir(parents=True)
    for item in records:
        (state / ("%s.json" % item["variant"])).write_text(json.dumps(item), encoding="utf-8")
    host = dict(MOCK_VARS, ansible_python_interpreter=sys.executable, vllm_switch_state_dir=str(tmp_path / "state"),
                vllm_search_variant=VARIANT, vllm_search_grid=grid, **changes)
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {"node": host}}}), encoding="utf-8")
    (tmp_path / "search.yml").write_text(PLAYBOOK, encoding="utf-8")
    (tmp_path / "ansible.cfg").write_text("[defaults]\nstdout_callback = ansible.builtin.default\n", encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("ANSIBLE_", "LLMOPS_VLLM_"))}
    env.update(ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_SHOW_CUSTOM_STATS="1",
               ANSIBLE_COLLECTIONS_PATH=str(REPO / ".cache" / "collections"), ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"))
    completed = subprocess.run([str(ANSIBLE_PLAYBOOK), "-i", "hosts.yml", "search.yml", *arguments], cwd=tmp_path,
                               env=env, capture_output=True, text=True, timeout=300, check=False)
    return completed, " ".join((completed.stdout + completed.stderr).split())


def expected(grid, records, max_loads=None):
    """What search_step answers on the same inputs, with the variants the role declares."""
    points = search_grid(VARIANT, grid, known=MOCK_VARS["vllm_variants"])
    declared = {name: {"speculative_config": spec.get("speculative_config")}
                for name, spec in MOCK_VARS["vllm_variants"].items()}
    declared.update({point["name"]: {"speculative_config": point["speculative_config"]} for point in points})
    declared["baseline"] = {"speculative_config": None}
    return points, search_step(points, records=records, declared=declared, baseline="baseline", max_loads=max_loads,
                               exhaustive=False, min_error_pct=5)


# ngram, declared by the mock inventory with k 5 and prompt_lookup_max 4, measured close to the baseline with a high
# acceptance: a smaller k could be faster, so the search names a point to load.
CLOSE = record("ngram", "rolled_back", 1450.0, 1493.0, 4.0, 2.6, [0.9, 0.8, 0.7, 0.6, 0.5], "2026-12-01T10:00:00+00:00")
# The same trial far below the baseline: nothing the grid holds below k 5 can catch up.
FAR = record("ngram", "rolled_back", 929.0, 1493.0, 4.0, 2.6, [0.8, 0.7, 0.6, 0.5, 0.4], "2026-12-01T10:00:00+00:00")
GRID = {"num_speculative_tokens": [3, 5], "prompt_lookup_max": [4]}


def test_check_mode_names_the_first_load_and_its_prediction_from_the_declared_twin(tmp_path):
    points, answer = expected(GRID, [CLOSE])
    assert answer["next"] is not None and answer["predictions"][answer["next"]]["predicted_throughput"] is not None

    completed, output = run(tmp_path, GRID, [CLOSE], "--check")

    assert completed.returncode == 0, output
    prediction = answer["predictions"][answer["next"]]
    assert ("Check mode: nothing changes on node. The grid's 2 points, in search order: %s."
            % ", ".join(point["name"] for point in points)) in output
    assert ("It would load first %s: predicted %.0f tok/s (band %.0f%%) from"
            % (answer["next"], prediction["predicted_throughput"], prediction["band_pct"])) in output
    assert answer["summary"].splitlines()[0] in output
    # Check mode reports nothing per host: nothing was decided.
    assert "vllm_search" not in output


def test_a_point_that_nothing_predicts_is_named_as_such(tmp_path):
    grid = {"num_speculative_tokens": [3, 5, 7], "prompt_lookup_max": [4]}
    dummy, answer = expected(grid, [CLOSE])
    assert answer["next"] == "ngram-k7-max4"

    completed, output = run(tmp_path, grid, [CLOSE], "--check")

    assert completed.returncode == 0, output
    assert "It would load first ngram-k7-max4: nothing predicts it yet (" in output


def test_a_search_settled_by_its_records_loads_nothing_and_the_baseline_stays(tmp_path):
    dummy, answer = expected(GRID, [FAR])
    assert answer["done"] and answer["next"] is None and answer["best"] == "baseline"

    completed, output = run(tmp_path, GRID, [FAR])

    assert completed.returncode == 0, output
    assert answer["summary"].splitlines()[0] in output
    assert "serves: baseline" in output
    assert not re.search(r"To keep \S+ declared", output)
    # Nothing was loaded: the records are the one the search started from.
    assert sorted(path.name for path in (tmp_path / "state" / "tiny-llama").iterdir()) == ["ngram.json"]
    stats = re.search(r'"vllm_search": (\{.*?\})\s*\}', output)
    assert stats, output
    reported = json.loads(stats.group(1))
    assert (reported["best"], reported["loads"], reported["points"], reported["done"]) == ("baseline", 0, 2, True)


def test_the_load_cap_ends_the_search_and_says_so(tmp_path):
    # A point of the grid with a record of its own was paid for; with a cap of one load nothing more is loaded.
    paid = record("ngram-k5-max4", "rolled_back", 1450.0, 1493.0, 4.0, 2.6, [0.9, 0.8, 0.7, 0.6, 0.5],
                  "2026-12-01T11:00:00+00:00")
    dummy, answer = expected(GRID, [paid], max_loads=1)
    assert answer["next"] is None and answer["loads"] == 1

    completed, output = run(tmp_path, GRID, [paid], "--check", vllm_search_max_loads=1)

    assert completed.returncode == 0, output
    assert "It would load nothing; " + " ".join(answer["reason"].split()) in output
    assert "loads paid for: 1 of the grid's 2 points" in output
