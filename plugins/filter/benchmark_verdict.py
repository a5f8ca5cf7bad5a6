# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: benchmark_verdict
short_description: Judge a benchmarked variant against the baseline
version_added: 1.0.0
author:
  - llmops.vllm maintainers (!UNKNOWN)
description:
  - Compares the output throughput (tokens/s) of a variant with that of the baseline at every
    concurrency level both were measured at, and says whether the variant is faster, slower or
    within noise.
  - When both levels carry a 95% confidence interval (C(output_throughput_ci95), from
    O(llmops.vllm.openai_benchmark#module:repeats) greater than 1), the variant is faster (slower) when
    the 95% interval of the difference of the means, of half-width sqrt(h_variant^2 + h_baseline^2),
    lies entirely above (below) zero. Otherwise the difference has to leave the band of
    plus or minus O(noise_pct) percent of the baseline.
  - With several levels the variant is slower if any level is slower, otherwise faster if any level
    is faster, otherwise within noise.
  - The P(llmops.vllm.variant_benchmarks#callback) callback and M(llmops.vllm.benchmark_report) judge
    with the same rule results that no trial decided on.
  - This is a comparison, not a decision. Whether to keep a variant is decided by
    M(llmops.vllm.trial_decision), which also requires enough runs, no failed requests and an interval
    that covers the baseline's between-lifetime noise.
options:
  _input:
    description:
      - The variant's benchmark, as the registered result of M(llmops.vllm.openai_benchmark), its
        RV(llmops.vllm.openai_benchmark#module:results) list, or one element of that list.
    type: raw
    required: true
  baseline:
    description:
      - The baseline's benchmark, in any of the forms of the input.
    type: raw
    required: true
  noise_pct:
    description:
      - Half-width of the noise band in percent of the baseline's output throughput, used where the
        two sides do not both carry a 95% confidence interval.
    type: float
    default: 8.0
seealso:
  - plugin: llmops.vllm.variant_benchmarks
    plugin_type: callback
"""

EXAMPLES = r"""
- name: Benchmark the variant that was just started
  llmops.vllm.openai_benchmark:
    base_url: http://127.0.0.1:8000
    model: tiny-llama
    repeats: 3
  register: variant_run
  delegate_to: localhost

- name: Say how the variant compares with the baseline (to keep or roll back, use llmops.vllm.trial_decision)
  ansible.builtin.debug:
    msg: "{{ (variant_run | llmops.vllm.benchmark_verdict(baseline_run, noise_pct=3)).verdict }}"

- name: Show the throughput change at concurrency 4
  ansible.builtin.debug:
    msg: >-
      {{ variant_run.results | selectattr('max_concurrency', 'equalto', 4) | first
         | llmops.vllm.benchmark_verdict(baseline_run.results[0]) }}
"""

RETURN = r"""
_value:
  description: The verdict, with the numbers it was taken from.
  type: dict
  contains:
    verdict:
      description: V(faster), V(slower) or V(within_noise), over all shared concurrency levels.
      type: str
      sample: slower
    not_slower:
      description:
        - Whether the measurement shows the variant to be at most O(noise_pct) percent slower at every
          shared level. V(within_noise) alone does not say so, since a noisy measurement is within noise of anything.
        - At a level with confidence intervals on both sides, the lower end of the 95% interval of the
          difference must be at least -O(noise_pct) percent; without them, the change itself.
      type: bool
      sample: false
    delta_pct:
      description: Mean over the shared levels of the change in output throughput, in percent of the baseline.
      type: float
      sample: -18.9
    noise_pct:
      description: The noise band that was applied where confidence intervals were missing.
      type: float
      sample: 5.0
    levels:
      description: One judgement per concurrency level both results share, in the variant's order.
      type: list
      elements: dict
      contains:
        max_concurrency:
          description: The concurrency level, V(null) for no limit.
          type: int
        verdict:
          description: V(faster), V(slower) or V(within_noise) at this level.
          type: str
        delta_pct:
          description: Change in output throughput, in percent of the baseline.
          type: float
        method:
          description: V(ci95) when confidence intervals decided, V(noise_band) otherwise.
          type: str
        threshold_pct:
          description: How far, in percent of the baseline, the change had to go to count.
          type: float
        variant_output_throughput:
          description: The variant's output tokens/s (the mean of the repeats when there were several).
          type: float
        baseline_output_throughput:
          description: The baseline's output tokens/s (the mean of the repeats when there were several).
          type: float
        tpot_delta_pct:
          description: Change in median time per output token, in percent; V(null) when either side lacks it.
          type: float
        ttft_delta_pct:
          description: Change in median time to first token, in percent; V(null) when either side lacks it.
          type: float
        lower_bound_pct:
          description: The lower end of the 95% interval of the change, in percent (the change itself without intervals).
          type: float
        not_slower:
          description: Whether RV(_value.levels[].lower_bound_pct) is at least -O(noise_pct).
          type: bool
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.plugin_utils._comparison import (
    DEFAULT_NOISE_PCT,
    ComparisonError,
    compare_results,
)


def benchmark_verdict(variant, baseline, noise_pct=DEFAULT_NOISE_PCT):
    try:
        noise_pct = float(noise_pct)
    except (TypeError, ValueError):
        raise AnsibleFilterError(f'benchmark_verdict: noise_pct must be a number, got {noise_pct!r}') from None
    try:
        return compare_results(variant, baseline, noise_pct)
    except ComparisonError as error:
        raise AnsibleFilterError(f'benchmark_verdict: {error}') from error


class FilterModule:
    def filters(self):
        return {'benchmark_verdict': benchmark_verdict}
