# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done on the controller by the action plugin of the same name; this file documents it.

from __future__ import annotations

DOCUMENTATION = r"""
module: benchmark_report
short_description: Write the Markdown report of stored vLLM benchmark results
version_added: 1.0.0
author:
  - llmops.vllm maintainers (!UNKNOWN)
description:
  - Reads the benchmark results that P(llmops.vllm.results_store#module) stored
    and writes a Markdown report of them on the controller. Per host and model it has a table of the
    latest result of every variant against the baseline, with its changes and the decision of the trial
    that measured it, and the history of every variant over time.
  - When the Python module C(matplotlib) is importable on the controller, a PNG chart of output
    tokens/s per variant over time is written beside the report for every host and model, named after
    the report, host and model. Without it the report says that the chart was not drawn.
  - Where the trial records hold timed starts (the C(starts) that the C(llmops.vllm.vllm_switch) role records from
    P(llmops.vllm.wait_for_openai_endpoint#module)'s RV(llmops.vllm.wait_for_openai_endpoint#module:start_phases)),
    each host's and model's section has a table of them (unit, whole start, each phase), and with C(matplotlib) a
    PNG with one stacked horizontal bar per start is written beside the report, named C(<stem>-starts.png).
    Without starts on record the report has neither.
  - A variant's verdict is the decision that M(llmops.vllm.trial_decision) took in the run that measured it;
    a result that no trial decided is shown as undecided, whatever its change. Changes are against the
    baseline of the same host, model and concurrency measured in the same run, or else against the latest one
    recorded before it, which the report then notes.
  - Files are only replaced when their content changes, so running it twice reports no change.
options:
  dest:
    description:
      - Path of the Markdown file on the controller. Its directory is created when missing.
      - A relative path is relative to the current directory of C(ansible-playbook).
    type: path
    required: true
  database:
    description:
      - SQLite database to read, on the controller. The task fails when it does not exist.
      - Defaults to the O(llmops.vllm.variant_benchmarks#callback:database) that the callback is
        configured to write to.
    type: path
  baseline_variant:
    description:
      - Variant label of the known-good configuration.
      - Defaults to the O(llmops.vllm.variant_benchmarks#callback:baseline_variant) of the callback's configuration.
    type: str
  noise_pct:
    description:
      - Deprecated and ignored; it will be removed in release 2.0.0. Results are no longer labelled by a noise
        band; a verdict is a trial's decision.
    type: float
  chart:
    description:
      - Whether to draw the charts. Without C(matplotlib) no chart is drawn either way.
    type: bool
    default: true
  rankings:
    description:
      - The rankings of compared variants to show first in their host's and model's section, as
        C(llmops.vllm.compare_variants) makes them.
      - Each item has C(host), C(model), C(best) and C(ranked), the rows of P(llmops.vllm.variant_ranking#filter).
    type: list
    elements: dict
    default: []
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
attributes:
  action:
    support: full
  async:
    support: none
  bypass_host_loop:
    support: none
  check_mode:
    support: full
  diff_mode:
    support: full
    details: The diff shows the change to the Markdown file; charts are only listed.
  platform:
    platforms: posix
    details: Runs on the controller whatever the target host is.
notes:
  - Run it once, for example on V(localhost) or with C(run_once), since every host would write the same files.
requirements:
  - C(matplotlib) on the controller, only for the charts.
seealso:
  - plugin: llmops.vllm.variant_benchmarks
    plugin_type: callback
  - module: llmops.vllm.trial_decision
"""

EXAMPLES = r"""
- name: Write the report from the results store
  llmops.vllm.benchmark_report:
    dest: results/benchmarks.md
  delegate_to: localhost
  run_once: true

- name: Report from a copy of another controller's database, without charts
  llmops.vllm.benchmark_report:
    database: /srv/backups/benchmarks.sqlite3
    dest: /srv/www/reports/benchmarks.md
    chart: false
  register: report

- name: Show which variants their trials rolled back
  ansible.builtin.debug:
    msg: "{{ report.comparisons | selectattr('decision', 'equalto', 'roll_back') | map(attribute='variant') | list }}"
"""

RETURN = r"""
dest:
  description: Absolute path of the Markdown report.
  returned: success
  type: str
  sample: /home/ops/llmops/results/benchmarks.md
charts:
  description:
    - Absolute paths of the PNG charts, empty when none was drawn.
    - The chart of the starts, when there is one, comes last.
  returned: success
  type: list
  elements: str
  sample: [/home/ops/llmops/results/benchmarks-gpu-node-1-kimi-k2.5.png, /home/ops/llmops/results/benchmarks-starts.png]
chart_note:
  description: Why no chart was drawn although O(chart) was requested.
  returned: when matplotlib is not importable
  type: str
  sample: "Chart not drawn: matplotlib is not importable on the controller."
stored_results:
  description: Number of results read from the database.
  returned: success
  type: int
  sample: 12
comparisons:
  description: The latest result of every variant at every concurrency level, as in the report's tables.
  returned: success
  type: list
  elements: dict
  contains:
    host:
      description: Inventory host that was benchmarked.
      type: str
      sample: gpu-node-1
    model:
      description: Model label of the result.
      type: str
      sample: kimi-k2.5
    variant:
      description: Variant label of the result.
      type: str
      sample: ngram
    max_concurrency:
      description: Concurrency level, V(null) for no limit.
      type: int
      sample: 4
    recorded_at:
      description: When the result was recorded, UTC, ISO 8601.
      type: str
      sample: "2026-05-09T07:35:25Z"
    run_id:
      description: ID of the C(ansible-playbook) run that recorded it.
      type: str
      sample: 3f2a9c1b0d6e4b7f9a8c1d2e3f4a5b6c
    verdict:
      description:
        - The outcome that the trial which measured the result decided, as M(llmops.vllm.trial_decision) returns
          it (V(faster), V(not_slower), V(slower), V(inconclusive), V(slo_breached) or V(incorrect)).
        - V(baseline) for the baseline's own rows; V(undecided) when no trial decided on the result.
        - Changed in release 1.2.0; it was a comparison of its own before, which could disagree with the decision.
      type: str
      sample: slower
    decision:
      description: V(keep) or V(roll_back), what that trial did; V(null) for the baseline and undecided results.
      type: str
      sample: roll_back
      version_added: 1.2.0
    delta_pct:
      description: Change in output throughput against the baseline, in percent; V(null) without a baseline.
      type: float
      sample: -37.8
    baseline_run_id:
      description: Run whose baseline the result was compared with; V(null) without one.
      type: str
    baseline_same_run:
      description: Whether that baseline was measured in the same run.
      type: bool
    task_failed:
      description: Whether the benchmark task that produced the result failed.
      type: bool
    problem:
      description: Why the result has no change against a baseline, V(null) when it has one.
      type: str
"""
