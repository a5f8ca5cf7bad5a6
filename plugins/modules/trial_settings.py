# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done on the controller by the action plugin of the same name; this file documents it.

from __future__ import annotations

DOCUMENTATION = r"""
module: trial_settings
short_description: Check every setting of a vLLM trial on the controller, before any host is contacted
version_added: 1.2.0
author:
  - llmops.vllm maintainers (!UNKNOWN)
description:
  - Reads the host's C(vllm_*) variables and applies, on the controller, each rule that the roles, the
    benchmark module or the decision would apply later on the node, so that a typo costs seconds instead of
    a trial. Every problem is reported at once, each naming the variable, where in it, and the rule.
  - "The decision's settings: C(vllm_switch_keep_when), C(vllm_switch_margin_pct) (at least 0, below 100),
    C(vllm_switch_min_runs) (at least 1) and C(vllm_switch_slo), with the rules of
    M(llmops.vllm.trial_decision). A limit under C(by_concurrency) for a level that no workload measures
    is refused, as it would never be checked."
  - "Every workload of C(vllm_switch_benchmark): its options, with the argument spec and value rules of
    M(llmops.vllm.openai_benchmark) (a concurrency of 0, a negative temperature, ...), and, when the
    benchmark client runs on this controller, its replay file, which must exist and parse."
  - "The hooks C(vllm_switch_drain_hook_before), C(vllm_switch_drain_hook_after) and
    C(vllm_switch_notify_hook): V({}), V({argv: [...]}) or V({url: ..., method, headers, body, status_code});
    a hook with another key, or with neither C(argv) nor C(url), would be skipped without a word."
  - "C(vllm_secret_environment) values (never quoted back): not empty, no leading or trailing whitespace or
    newline, no control character. C(vllm_pip_constraints): one requirement a line, none that pip reads as an
    option. TLS paths (C(vllm_switch_ca_path), C(ssl_certfile), C(ssl_keyfile), C(ssl_ca_certs)): absolute."
  - The types and choices of every other variable that the C(llmops.vllm.vllm_service) and
    C(llmops.vllm.vllm_switch) roles declare in their argument specs, so that the roles' own checks, which
    run only once the play reaches them, cannot fail for a type.
  - A C(vllm_*) variable that no role or playbook of the collection reads is most often a typo; it gets a
    warning that names the nearest known variable.
  - A variable whose value cannot be templated yet (it needs facts that are gathered later) is left to the
    checks that run on the node.
  - Runs on the controller and changes nothing.
options:
  check_replay_files:
    description:
      - Whether the benchmark client runs on this controller, so that replay files named by
        C(vllm_switch_benchmark) must exist and parse here. Set it to V(false) when the client runs
        elsewhere.
      - When unset, they are checked when C(vllm_switch_benchmark_client) and C(vllm_switch_benchmark_host) put the
        client on this controller.
    type: bool
  kind:
    description:
      - What the checked settings are for. V(switch) and V(calibrate) also return what such a run of the
        C(llmops.vllm.vllm_switch) role is (RV(trial), RV(workloads), RV(benchmark_client), RV(node_url)), which
        needs C(vllm_service_specs) (set by the C(llmops.vllm.vllm_service) role's validation) and a known
        C(vllm_variant); V(none) only checks.
    type: str
    choices: [switch, calibrate, none]
    default: none
    version_added: 1.2.0
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Checks the same in check mode; it changes nothing in either.
  diff_mode:
    support: none
  platform:
    platforms: all
seealso:
  - module: llmops.vllm.trial_decision
  - module: llmops.vllm.openai_benchmark
"""

EXAMPLES = r"""
- name: Check the trial's settings before any host is contacted
  llmops.vllm.trial_settings:
    check_replay_files: true
  register: settings_check
"""

RETURN = r"""
checked:
  description: The names of the variables that were checked, sorted.
  returned: always
  type: list
  elements: str
  sample: [vllm_switch_benchmark, vllm_switch_margin_pct]
deferred:
  description: The variables that could not be templated on the controller and are left to the node's checks.
  returned: always
  type: list
  elements: str
  sample: []
problems:
  description: Every problem found, each naming the variable and the rule; the task fails when there is one.
  returned: always
  type: list
  elements: str
  sample: ["vllm_switch_benchmark.concurrency must list at least one level, each at least 1"]
trial:
  description:
    - What the switch is, for M(llmops.vllm.trial_advance)'s O(llmops.vllm.trial_advance#module:new) - the target and
      the baseline with their specs, every unit of the model, the decision's settings, the workloads, the run's mode.
  returned: when O(kind) is not V(none) and nothing is wrong
  type: dict
  version_added: 1.2.0
workloads:
  description: C(vllm_switch_benchmark) as the benchmark steps run it, one mapping per workload (C(name), C(options), C(slo)).
  returned: when O(kind) is not V(none) and nothing is wrong
  type: list
  elements: dict
  version_added: 1.2.0
benchmark_client:
  description:
    - Where the benchmark client runs (C(delegate_to), C(client)) and the URL it reaches the server at (C(base_url)),
      as P(llmops.vllm.benchmark_base_url#filter) works them out; null when benchmarks are off.
  returned: when O(kind) is not V(none) and nothing is wrong
  type: dict
  version_added: 1.2.0
node_url:
  description: The server's URL as the node itself reaches it, for the readiness waits and the drain.
  returned: when O(kind) is not V(none) and nothing is wrong
  type: str
  sample: http://127.0.0.1:8000
  version_added: 1.2.0
unknown_variables:
  description: The C(vllm_*) variables that no role or playbook of the collection reads, each with a warning.
  returned: always
  type: list
  elements: str
  sample: [vllm_switch_marign_pct]
"""
