# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done on the controller by the action plugin of the same name; this file documents it.

from __future__ import annotations

DOCUMENTATION = r"""
module: trial_decision
short_description: Decide whether to keep a benchmarked vLLM variant or roll back to the baseline
version_added: 1.1.0
author:
  - llmops.vllm maintainers (!UNKNOWN)
description:
  - Decides whether to keep a variant, from a trial's server lifetimes (O(lifetimes)) and the baseline's earlier
    lifetimes in the node's own history (O(node_history)), with the one rule every trial of the collection uses
    (the C(decide) function of C(plugins/plugin_utils/_lifetime_decision.py), which M(llmops.vllm.trial_advance) calls
    after every pair of lifetimes). It answers V(keep), V(roll_back) or V(another_pair), with the rule that decided, a
    reason in one sentence and the figures behind it.
  - Each lifetime's figure is the mean of its runs' output throughputs on a log scale; after every pair from the second
    on (or the one pair of a trial of one lifetime a side, O(max_lifetimes=1)) a 99% interval of the change, widened by
    the baseline's stored lifetimes, keeps the variant (at most O(margin_pct) slower at 99.5%, or shown faster with
    O(keep_when=faster)), rolls it back as V(slower) or for V(futility), or asks for another pair; at O(max_lifetimes)
    a side an undecided trial rolls back as V(inconclusive). A within-lifetime interval never decides alone - one
    lifetime a side with no stored lifetime of the baseline rolls back as inconclusive, saying how to decide it.
  - The latest pair passes the checks that speed cannot outweigh first - failed requests, foreign traffic in the
    server's own counters, latency SLOs (O(slo), O(workload_slo)) - and the answers (O(variant_answers),
    O(baseline_answers)) pass the answer gate, or the variant rolls back as V(incorrect) whatever its speed.
  - Given O(variant) and O(baseline) without O(lifetimes), they are one lifetime a side.
  - The answer carries this trial's clean baseline measurements (RV(baseline_lifetimes)); the trial's
    record keeps them, and later trials learn the baseline's lifetimes from them.
  - A trial may measure several workloads (kinds of traffic); each result names its workload with the label
    C(workload). Every workload and concurrency level is looked at on its own, and the variant is kept only when
    every one keeps it.
  - Runs on the controller and changes nothing.
options:
  accept_foreign_traffic:
    description:
      - A level whose server served requests that the benchmark did not send (its C(foreign_requests), from the
        server's own counters) is contaminated; the two sides were not measured alike, and the trial rolls back
        as V(inconclusive), the reason naming the side, the level and the count.
      - V(true) decides on such levels all the same, and RV(foreign_traffic_accepted) says so.
    type: bool
    default: false
    version_added: 1.2.0
  variant:
    description:
      - The variant's benchmark, as registered from M(llmops.vllm.openai_benchmark), or its list of results. A
        looped task's registered result (one M(llmops.vllm.openai_benchmark) result per workload) is taken too.
    type: raw
  baseline:
    description: The baseline's benchmark from the same trial, in the same form; with O(variant), one lifetime a side.
    type: raw
  variant_name:
    description: Name of the variant under trial.
    type: str
    required: true
  baseline_name:
    description: Name of the baseline variant, whose stored results form the history.
    type: str
    default: baseline
  model:
    description: The model's short name (C(vllm_model.name)), as the benchmark labels carry it.
    type: str
    required: true
  host:
    description: Inventory name of the node; defaults to the host the task runs for.
    type: str
  unit_checksum:
    description: SHA-256 of the variant's unit file, returned as it is so that the stored decision names the unit.
    type: str
  identity:
    description:
      - The variant's trial identity (the C(sha256) of P(llmops.vllm.trial_identity#filter)), returned as it is so
        that the stored decision names everything that served.
    type: str
  baseline_identity:
    description:
      - The baseline's trial identity. Stored results of the baseline with another identity (another environment
        or vLLM version behind the same unit) are not its history; results stored without one still count.
    type: str
  baseline_unit_checksum:
    description:
      - SHA-256 of the baseline's unit file. Only history of this exact unit counts; when not set, every
        stored lifetime of the baseline does.
    type: str
  baseline_lifetime:
    description:
      - Deprecated and ignored; removed in 2.0.0. Each benchmark names its own lifetime (its C(lifetime) label,
        systemd's C(InvocationID) of its unit).
    type: str
  keep_when:
    description: V(not_slower) keeps a variant shown to be at most O(margin_pct) slower; V(faster) also needs a level shown faster.
    type: str
    choices: [not_slower, faster]
    default: not_slower
  margin_pct:
    description: How much slower, in percent of the baseline's output tokens/s, a kept variant may be shown to be at most.
    type: float
    default: 8.0
  min_runs:
    description: Deprecated and ignored; removed in 2.0.0. A trial decides by its lifetimes.
    type: int
  node_history:
    description:
      - The node's history of trials, oldest first, as RV(llmops.vllm.trial_record_info#module:history) returns it.
      - The baseline's earlier lifetimes are the RV(baseline_lifetimes) that decided trials of the same baseline
        variant, unit checksum (O(baseline_unit_checksum)) and identity (O(baseline_identity)) kept there.
    type: list
    elements: dict
    default: []
    version_added: 1.2.0
  database:
    description:
      - Deprecated and ignored; it will be removed in release 2.0.0. The history is the node's, O(node_history).
    type: path
  history:
    description: Whether to learn the baseline's earlier lifetimes from O(node_history) at all.
    type: bool
    default: true
  slo:
    description:
      - Latency limits the variant must meet at every level, else it is rolled back. Absolute limits in
        milliseconds by metric name, any of C({median,p90,p99}_{ttft,tpot,itl,e2el}_ms), for example
        C(p99_ttft_ms=2000).
      - C(max_regression_pct) maps metric names to the largest rise, in percent of the baseline's same
        figure, for example C(p99_ttft_ms=20) under it.
      - C(by_concurrency) maps a level to limits of the same shape, which replace the general ones key by key.
      - A bad key or value fails the task naming it, before anything is decided.
    type: dict
  workload_slo:
    description:
      - SLOs of single workloads by workload name, each of the shape of O(slo) and laid over it key by key.
    type: dict
    default: {}
  variant_answers:
    description:
      - The variant's greedy answers, as registered from M(llmops.vllm.answer_check) (one result per workload from a
        looped task, each labelled with its C(workload)). With O(baseline_answers), the correctness gate runs, and a
        variant whose answers differ from the baseline's beyond O(answer_tolerance) is rolled back as
        V(incorrect), whatever its speed, with examples (RV(correctness)).
    type: raw
    version_added: 1.2.0
  baseline_answers:
    description: The baseline's answers to the same requests, in the same form.
    type: raw
    version_added: 1.2.0
  answer_tolerance:
    description:
      - How far, as a share of the requests, each figure of the variant's answers may lie from the baseline's (the
        share of greedy answers that differ, of valid tool calls, of answers that call a tool, of answers with
        reasoning, and the distance between the finish reasons). From 0 to 1.
      - The engine's own nondeterminism sets how low it can go; docs/benchmarking.md gives the A/A rate measured.
    type: float
    default: 0.25
    version_added: 1.2.0
  lifetimes:
    description:
      - Every server lifetime of a trial by lifetimes, in the order measured, each a dict with C(side) (V(baseline) or
        V(variant)), C(benchmark) (that lifetime's M(llmops.vllm.openai_benchmark) result, or one per workload) and
        C(uptime_s) (how long its server had served when the benchmark began). O(variant) and O(baseline) are then
        the latest lifetime of each side.
      - Given, the trial is decided by lifetimes (docs/benchmarking.md). Per workload and level, each lifetime's
        figure is the mean of its runs on a log scale; the change is the mean of the variant's lifetimes against the
        baseline's, with a 99% interval whose baseline spread includes its stored lifetimes of the same identity
        (O(node_history)) and whose variant spread comes from its own lifetimes (never less than the baseline's),
        with Welch-Satterthwaite degrees of freedom. Before two lifetimes a side, and while no rule below holds, the
        answer is V(another_pair).
      - The rules, in order. V(slower), the interval's upper end below -O(margin_pct), rolls back. V(not_slower),
        its lower end at least -O(margin_pct), keeps (O(keep_when=faster) also needs a level whose lower end is above
        zero). V(futility), the change itself on the losing side, rolls back. At O(max_lifetimes) a side, a trial that
        none of these decides rolls back as V(inconclusive), and RV(to_decide) says how many more pairs would
        probably decide it. O(min_runs) does not apply.
      - Failed requests and foreign traffic are checked on the latest pair, and the correctness gate on the answers
        given, before any look. O(slo) is judged once, when the looks have decided, on each side's requests pooled
        over all its lifetimes (every request's latencies, RV(slo_judged)); below 100 pooled requests a p99
        limit is judged on their p90. A breach rolls back as V(slo_breached), whatever speed decided.
    type: list
    elements: dict
    default: []
    version_added: 1.2.0
  max_lifetimes:
    description:
      - With O(lifetimes), the lifetimes a side after which an undecided trial rolls back as V(inconclusive).
    type: int
    default: 10
    version_added: 1.2.0
  dark_seconds:
    description:
      - With O(lifetimes), how long the node has been out of service for this trial, in seconds; the answer says it
        in minutes (RV(dark_minutes)).
    type: float
    version_added: 1.2.0
  pair_seconds:
    description:
      - With O(lifetimes), how long the latest pair of lifetimes took, in seconds, which is what one more pair would cost
        (RV(pair_minutes)).
    type: float
    version_added: 1.2.0
  starts:
    description:
      - The starts of this trial, each a dict with C(variant) (the variant's name) and C(kv_cache), the
        RV(llmops.vllm.wait_for_openai_endpoint#module:kv_cache) of that start; the C(llmops.vllm.vllm_switch)
        role passes those it waited through.
      - The last start of O(variant_name) that logged its KV cache is compared with what its workloads needed
        (RV(kv_cache)); a shortfall is flagged with a warning, and does not change the decision.
    type: list
    elements: dict
    default: []
    version_added: 1.2.0
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
seealso:
  - module: llmops.vllm.openai_benchmark
  - plugin: llmops.vllm.variant_benchmarks
    plugin_type: callback
"""

EXAMPLES = r"""
- name: Read what the node has learnt
  llmops.vllm.trial_record_info:
    path: /var/lib/vllm-switch/kimi-k2.5
  register: node_trials

- name: Decide on the n-gram trial
  llmops.vllm.trial_decision:
    variant: "{{ ngram_run }}"
    baseline: "{{ baseline_run }}"
    variant_name: ngram
    model: kimi-k2.5
    keep_when: not_slower
    node_history: "{{ node_trials.history }}"
  register: decision

- name: Decide on a trial of two workloads (registered from a looped benchmark), with a TTFT limit for one
  llmops.vllm.trial_decision:
    variant: "{{ ngram_workloads }}"
    baseline: "{{ baseline_workloads }}"
    variant_name: ngram
    model: kimi-k2.5
    slo:
      max_regression_pct:
        p99_tpot_ms: 10
    workload_slo:
      chat_thinking:
        p99_ttft_ms: 3000
  register: decision

- name: Roll back unless the decision keeps the variant
  ansible.builtin.debug:
    msg: "{{ decision.reason }}"
  when: decision.decision != 'keep'
"""

RETURN = r"""
decision:
  description: V(keep) or V(roll_back); with O(lifetimes), also V(another_pair) while the looks have not decided.
  returned: always
  type: str
  sample: roll_back
outcome:
  description:
    - V(faster), V(not_slower), V(slower), V(inconclusive) or V(slo_breached), over all levels; V(incorrect) when the
      variant failed the correctness gate (RV(correctness)), whatever its speed; V(futility) when a trial by lifetimes
      stopped because the change itself lies on the losing side.
  returned: always
  type: str
  sample: inconclusive
rule:
  description: The rule that was applied, in words.
  returned: always
  type: str
  sample: "keep_when=not_slower: keep when every level is shown to be at most 8.0% slower"
reason:
  description: Why, in one sentence, with what would decide it when the evidence was too thin.
  returned: always
  type: str
  sample: "inconclusive at concurrency 4: -3.1% (95% interval -14.2% to +8.0%) output tok/s vs the baseline; the interval
    reaches past -8.0%; to decide it: within-lifetime noise decides the width (+/-11.1%): more repeats or more prompts
    per run narrow it"
to_decide:
  description: What would decide an inconclusive trial; V(null) otherwise.
  returned: always
  type: str
lifetimes:
  description:
    - With O(lifetimes), one row per server lifetime of the trial, in the order measured per side.
  returned: when O(lifetimes) was given
  type: list
  elements: dict
  contains:
    side:
      description: V(baseline) or V(variant).
      type: str
    number:
      description: The lifetime's number on its side, from 1.
      type: int
    invocation:
      description: The InvocationID of the unit's start that the lifetime was.
      type: str
    uptime_s:
      description: How long the server had served when its benchmark began, in seconds.
      type: float
    runs:
      description: The benchmark runs measured in the lifetime, over every level.
      type: int
    output_throughput:
      description: The geometric mean of those runs' output tokens/s.
      type: float
    outlier:
      description: Whether the lifetime lies far from its side's others at some level (a modified z-score above 3.5).
      type: bool
looks:
  description:
    - With O(lifetimes), each workload's and level's look, the latest one.
    - Each has C(action), C(rule), C(change_pct), C(low_pct) and C(high_pct) (the 99% interval), C(df), the lifetimes
      of each side and those stored, C(outliers), C(unstable) and C(pairs_to_decide).
  returned: when O(lifetimes) was given
  type: list
  elements: dict
look:
  description: With O(lifetimes), the number of this look (the first comes after the second pair).
  returned: when O(lifetimes) was given
  type: int
pairs:
  description: With O(lifetimes), the pairs of lifetimes measured.
  returned: when O(lifetimes) was given
  type: int
unstable:
  description: With O(lifetimes), whether the variant's lifetimes spread at least twice as much as the baseline's.
  returned: when O(lifetimes) was given
  type: bool
dark_minutes:
  description: O(dark_seconds) in minutes.
  returned: when O(lifetimes) was given
  type: float
pair_minutes:
  description: O(pair_seconds) in minutes.
  returned: when O(lifetimes) was given
  type: float
report:
  description:
    - With O(lifetimes), what an operator reads after the look, line by line - the lifetime table (side, invocation,
      uptime, runs, figure), each level's interval and rule, the decision, the flags, and the node's dark minutes with
      what one more pair would cost.
  returned: when O(lifetimes) was given
  type: list
  elements: str
delta_pct:
  description: Mean change in output tokens/s over the levels, in percent of the baseline.
  returned: always
  type: float
keep_when:
  description: The O(keep_when) applied.
  returned: always
  type: str
margin_pct:
  description: The O(margin_pct) applied.
  returned: always
  type: float
min_runs:
  description: The O(min_runs) applied.
  returned: always
  type: int
failed_requests:
  description: Failed requests of each side, summed over levels and runs.
  returned: always
  type: dict
  sample: {"variant": 0, "baseline": 0}
history:
  description: How many earlier baseline lifetimes bounded the interval, and a note saying so (or that there were none).
  returned: always
  type: dict
  sample: {"earlier_lifetimes": 0, "note": "no earlier baseline lifetimes of this host, model and unit: the interval covers
    only the noise within one lifetime"}
levels:
  description: The figures of every concurrency level both sides share.
  returned: always
  type: list
  elements: dict
  contains:
    max_concurrency:
      description: The level; V(null) for no limit.
      type: int
    status:
      description: V(faster), V(not_slower), V(slower) or V(inconclusive).
      type: str
    delta_pct:
      description: Change in output tokens/s, in percent of the baseline.
      type: float
    lower_pct:
      description: Lower end of the 95% interval of the change; V(null) without one.
      type: float
    upper_pct:
      description: Upper end of the 95% interval of the change; V(null) without one.
      type: float
    half_width_pct:
      description: The half-width used, the wider of the two below.
      type: float
    within_half_width_pct:
      description: Welch's half-width over the runs of the two sides; V(null) with fewer than two runs a side.
      type: float
    between_half_width_pct:
      description: The half-width the baseline's lifetimes show; V(null) with fewer than two lifetimes.
      type: float
    between_cv_pct:
      description: Coefficient of variation of the baseline's lifetime means, in percent.
      type: float
    lifetimes:
      description: Baseline lifetimes counted, this trial's included.
      type: int
    variant_output_throughput:
      description: The variant's mean output tokens/s.
      type: float
    baseline_output_throughput:
      description: The baseline's mean output tokens/s.
      type: float
    variant_runs:
      description: Runs of the variant.
      type: int
    baseline_runs:
      description: Runs of the baseline.
      type: int
    too_few_runs:
      description: Whether either side had fewer than O(min_runs) runs.
      type: bool
    tpot_delta_pct:
      description: Change in median TPOT, in percent; V(null) when either side lacks it.
      type: float
    ttft_delta_pct:
      description: Change in median TTFT, in percent; V(null) when either side lacks it.
      type: float
    variant_tpot_ms:
      description: The variant's median TPOT in milliseconds; V(null) when its benchmark lacks it.
      type: float
      version_added: 1.1.0
    baseline_tpot_ms:
      description: The baseline's median TPOT in milliseconds; V(null) when its benchmark lacks it.
      type: float
      version_added: 1.1.0
    acceptance_rates:
      description:
        - For each draft position, the share of the variant's drafts whose token there was accepted; V(null) when
          the variant's benchmark did not read vLLM's speculative-decoding counters.
      type: list
      elements: float
      version_added: 1.1.0
    acceptance_length:
      description: The variant's mean tokens gained per draft (1 + accepted / drafts); V(null) when not measured.
      type: float
      version_added: 1.1.0
    variant_max_tokens_share:
      description:
        - Share of the variant's answers at this level that stopped at C(max_tokens), from 0 to 1; V(null) when its
          benchmark did not report finish reasons.
      type: float
      version_added: 1.2.0
    baseline_max_tokens_share:
      description: As RV(levels[].variant_max_tokens_share), for the baseline.
      type: float
      version_added: 1.2.0
    stopped_early:
      description: Whether the variant's benchmark stopped early at this level; its runs are judged whatever O(min_runs) says.
      type: bool
      version_added: 1.1.0
    slo_breaches:
      description: What of this level breaks O(slo), in words; empty when it holds.
      type: list
      elements: str
    workload:
      description: The workload of the level, when the trial measured named workloads.
      type: str
workloads:
  description: The answer for each workload, in the order measured; one entry, C(default), for a single workload.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The workload.
      type: str
    decision:
      description: V(keep) or V(roll_back) for this workload alone.
      type: str
    outcome:
      description: The outcome for this workload.
      type: str
    reason:
      description: The reason for this workload.
      type: str
    delta_pct:
      description: Mean change in output tokens/s over the workload's levels, in percent.
      type: float
    slo:
      description: The SLO applied to this workload.
      type: dict
slo:
  description: The O(slo) applied, with numbers as floats; V(null) without one.
  returned: always
  type: dict
slo_judged:
  description:
    - With O(lifetimes), once the looks have decided, the SLO as judged on each side's requests pooled over all its
      lifetimes, one entry per workload and level that has an SLO.
  returned: with O(lifetimes), when the decision is not V(another_pair)
  type: list
  elements: dict
  version_added: 1.2.0
  contains:
    workload:
      description: The workload.
      type: str
    max_concurrency:
      description: The level.
      type: int
    breaches:
      description: What breaks the SLO, in words; empty when it holds.
      type: list
      elements: str
    requests:
      description: The requests pooled on each side (C(baseline), C(variant)); V(null) for results without per-request samples.
      type: dict
    judged_as:
      description: How a metric was judged where not as named, by metric (a p99 on too few requests, ITL).
      type: dict
history_database:
  description: Deprecated, always V(null); the history is the node's, O(node_history).
  returned: always
  type: str
baseline_lifetimes:
  description:
    - This trial's clean measurements of the baseline, one per workload and concurrency level, for the node's
      history to keep. A result without a C(lifetime) label, and a level with a failed or a foreign request, is
      left out.
  returned: always
  type: list
  elements: dict
  version_added: 1.2.0
  contains:
    workload:
      description: The workload measured.
      type: str
    max_concurrency:
      description: The level; V(null) for no limit.
      type: int
    output_throughput:
      description: Output tokens/s, the mean of the level's runs.
      type: float
    lifetime:
      description: The server lifetime measured, the unit's InvocationID.
      type: str
    prompt_set_sha256:
      description: The prompt set measured, when the benchmark reported it.
      type: str
    unit_checksum:
      description: The baseline unit's checksum.
      type: str
    identity:
      description: The baseline's trial identity.
      type: str
identity:
  description: O(identity), as it was given; V(null) without one.
  returned: always
  type: str
contaminated:
  description:
    - The levels whose server served requests that the benchmark did not send, the baseline's first, each with
      C(side), C(max_concurrency), C(foreign_requests) and, for several workloads, C(workload).
  returned: always
  type: list
  elements: dict
  sample: [{side: baseline, max_concurrency: 4, foreign_requests: 37}]
  version_added: 1.2.0
foreign_traffic_accepted:
  description: Whether contaminated levels were decided on all the same (O(accept_foreign_traffic)).
  returned: always
  type: bool
  sample: false
  version_added: 1.2.0
correctness:
  description:
    - The correctness gate's figures, per workload, when O(variant_answers) and O(baseline_answers) were given;
      V(null) otherwise.
    - C(passed), C(tolerance), C(problems) and C(examples) (in words, naming the workload and the request), and
      C(workloads), each with C(requests), C(greedy_mismatches), C(greedy_mismatch_rate),
      C(finish_reason_distance) and the C(baseline)'s and C(variant)'s C(tool_calls), C(valid_tool_calls),
      C(valid_tool_call_share), C(tool_calling_share), C(reasoning_share) and C(finish_reasons).
  returned: always
  type: dict
  version_added: 1.2.0
  sample:
    passed: false
    tolerance: 0.25
    problems: ["workload default: 8 of 8 greedy answers differ from the baseline's (the tolerance allows 2)"]
    examples: ["workload default: request 1: the answers part at character 3 (the baseline's has 301 characters,
      the variant's 288)"]
kv_cache:
  description:
    - Whether the variant's KV cache held what its workloads needed. A level needs its concurrency times its longest
      prompt plus the workload's C(max_tokens); with less, vLLM preempts requests and recomputes them, and a
      variant with a smaller cache (a longer C(max_model_len), a draft model's weights) serves its longest
      requests worse than the trial's figures show.
  returned: always
  type: dict
  version_added: 1.2.0
  contains:
    variant_tokens:
      description: Tokens the variant's KV cache holds, from its last start in O(starts); V(null) when unknown.
      type: int
    baseline_tokens:
      description: The same for the baseline, when this trial started it; V(null) otherwise.
      type: int
    needs:
      description: Per workload and level, C(workload), C(max_concurrency), C(prompt_tokens), C(max_tokens) and C(tokens) needed.
      type: list
      elements: dict
    short:
      description: The levels whose need exceeds the variant's cache, in words; empty when it holds them or is unknown.
      type: list
      elements: str
  sample:
    variant_tokens: 100752
    baseline_tokens: 301056
    needs: [{workload: code_editing_thinking, max_concurrency: 8, prompt_tokens: 412, max_tokens: 16384, tokens: 134368}]
    short: ["workload code_editing_thinking at concurrency 8 needs up to 8 x (412 + 16,384) = 134,368 tokens of KV cache;
      eagle3's holds 100,752"]
stopped_early:
  description: Whether the variant's benchmark stopped early at a level, which rolls the variant back.
  returned: always
  type: bool
  sample: false
  version_added: 1.1.0
"""
