# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done on the controller by the action plugin of the same name; this file documents it.

from __future__ import annotations

DOCUMENTATION = r"""
module: results_store
short_description: Add benchmark results, a trial decision or a history entry to the controller's results store
version_added: 1.2.0
author:
  - llmops.vllm maintainers (!UNKNOWN)
description:
  - Adds what one task returned to the SQLite database on the controller that
    P(llmops.vllm.benchmark_report#module) reports from, and writes the matching JSON files beside it.
  - O(benchmark) is the registered result of P(llmops.vllm.openai_benchmark#module), looped or not. Each
    concurrency level becomes one row of table C(results), with the time (UTC), the run, the host, and the
    result's labels, options and metrics, and one JSON file laid out like the file of
    C(vllm bench serve --save-result). Results of a failed benchmark are stored too when it returned any, marked
    as coming from a failed task.
  - O(decision) is the registered result of P(llmops.vllm.trial_decision#module); it becomes one row of table
    C(decisions) and one JSON file.
  - O(history) is the record that P(llmops.vllm.trial_record#module) returned; it becomes one row of table
    C(history). The node's own history stays the source that decisions learn from; this is its mirror.
  - Rows are only ever added. Every task of one C(ansible-playbook) run files its rows under the same run, so that
    a decision and the results it was taken on share their run.
  - The store mirrors what happened and never fails the play on its account; a database or file that cannot be
    written is reported as a warning. The task never reports a change, since it changes nothing of what it manages,
    and an idempotent play stays unchanged with it.
  - The P(llmops.vllm.variant_benchmarks#callback) callback prints what this module stored; the store is written
    whether or not the callback is enabled.
options:
  benchmark:
    description:
      - A registered result of P(llmops.vllm.openai_benchmark#module), or of a task that looped over it.
    type: dict
  decision:
    description:
      - A registered result of P(llmops.vllm.trial_decision#module).
    type: dict
  history:
    description:
      - A record of the node's trial history, as P(llmops.vllm.trial_record#module) returns it in
        RV(llmops.vllm.trial_record#module:record).
    type: dict
  task:
    description:
      - What measured the results, stored with each of them.
    type: str
  database:
    description:
      - SQLite database on the controller. Its directory is created when missing.
      - Defaults to the O(llmops.vllm.variant_benchmarks#callback:database) of the callback's configuration
        (C(ansible.cfg) or environment), whether or not the callback is enabled.
    type: path
  json_dir:
    description:
      - Directory on the controller that receives one JSON file per result and per decision.
      - Defaults to the O(llmops.vllm.variant_benchmarks#callback:json_dir) of the callback's configuration.
    type: path
  report:
    description:
      - Markdown report of everything in O(database), rewritten when this task stored something.
      - Defaults to the O(llmops.vllm.variant_benchmarks#callback:report) of the callback's configuration; none is
        written when that is unset too.
    type: path
  baseline_variant:
    description:
      - Variant label of the known-good configuration, for O(report).
      - Defaults to the O(llmops.vllm.variant_benchmarks#callback:baseline_variant) of the callback's configuration.
    type: str
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
    details: Nothing is stored in check mode.
  diff_mode:
    support: none
  platform:
    platforms: posix
    details: Runs on the controller whatever the target host is; the rows name the task's host.
seealso:
  - plugin: llmops.vllm.variant_benchmarks
    plugin_type: callback
  - module: llmops.vllm.benchmark_report
  - module: llmops.vllm.openai_benchmark
  - module: llmops.vllm.trial_decision
  - module: llmops.vllm.trial_record
"""

EXAMPLES = r"""
- name: Benchmark the running unit
  llmops.vllm.openai_benchmark:
    base_url: http://127.0.0.1:8000
    model: kimi-k2.5
    concurrency: [1, 8]
    labels:
      model: kimi-k2.5-int4
      variant: ngram
  register: ngram_benchmark

- name: Keep its results on the controller
  llmops.vllm.results_store:
    benchmark: "{{ ngram_benchmark }}"
    task: Benchmark ngram

- name: Keep them in a database of their own
  llmops.vllm.results_store:
    benchmark: "{{ ngram_benchmark }}"
    database: /srv/benchmarks/kimi.sqlite3
    json_dir: /srv/benchmarks/runs
"""

RETURN = r"""
database:
  description: The database that was written to.
  returned: always
  type: str
run_id:
  description: The run that the rows were filed under; every task of one C(ansible-playbook) run has the same.
  returned: always
  type: str
  sample: 5c0f6f2ad1a94e0c8d0e3b1f7a2d9c41
results:
  description: The results that were stored, one per concurrency level, with their row in table C(results).
  returned: always
  type: list
  elements: dict
  contains:
    row_id:
      description: The row's id; V(null) when the database could not be written.
      type: int
    host:
      description: The node that was measured.
      type: str
    model:
      description: The model label.
      type: str
    variant:
      description: The variant label.
      type: str
    metrics:
      description: The level's metrics as P(llmops.vllm.openai_benchmark#module) returned them.
      type: dict
decision:
  description: The decision that was stored, with its row in table C(decisions); V(null) without O(decision).
  returned: always
  type: dict
json_files:
  description: The JSON files written.
  returned: always
  type: list
  elements: str
report:
  description: The report that was rewritten; V(null) when none was.
  returned: always
  type: str
"""
