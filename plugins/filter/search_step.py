# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: search_step
short_description: The next point of a speculative-decoding search to load, or that the search is done
version_added: 1.1.0
author:
  - llmops.vllm maintainers (!UNKNOWN)
description:
  - Decides, from the trials made so far, which point of a search grid to load next, so that as few points as
    possible pay for a model load and the best one is still found.
  - "Acceptance: vLLM's per-position acceptance rates r_i, measured at a family's largest k, give every smaller k'
    of the family its tokens per verification step, 1 + r_0 + ... + r_(k'-1), without loading it. Nothing is
    predicted above the largest measured k: such a point is loaded."
  - "Cost: the time of a step, base + per draft token x k, is fitted by least squares to the trials' median TPOT
    times their tokens per step; with a single measured k the baseline (k 0) anchors the line, from two distinct k
    on it is left out. The predicted throughput scales the family's measured anchor by the modelled TPOT ratio."
  - "Order: every point that nothing predicts (each family's largest k first, families in the grid's order), then
    the point with the highest prediction, as long as its prediction raised by the error band beats the best kept
    point's measured throughput (else the baseline's). The band is 10% until a prediction has been checked by a
    trial, then the largest under-prediction seen, at least O(min_error_pct)."
  - The throughput of a trial is the mean over its levels (the workloads and concurrencies every counted trial
    measured) of the variant's output tokens/s.
  - A trial counts when it was decided with figures (outcome V(kept) or V(rolled_back) with decision levels).
    V(failed), V(fell_back) and V(blocked) points are not loaded again and cannot be best; V(in_progress) ones are.
options:
  _input:
    description: The points, as P(llmops.vllm.search_grid#filter) returns them.
    type: list
    elements: dict
    required: true
  records:
    description:
      - The trial records (what M(llmops.vllm.trial_history) and the node's per-variant records hold), of the
        points and of other declared variants. A later record of a variant replaces an earlier one; records are
        ordered by C(recorded_at) when all have it, else taken as listed.
    type: list
    elements: dict
    default: []
  declared:
    description:
      - The declared variants (C(vllm_variants)). A trial of a declared variant whose C(speculative_config) equals a
        point's counts as a measurement of that point, with no load paid by the search.
    type: dict
  baseline:
    description: The baseline variant; records measured against another baseline are not counted.
    type: str
    default: baseline
  max_loads:
    description: The most grid points the search loads by their own trials; no limit when null.
    type: int
  exhaustive:
    description: Load every point, in the same order and still predicting each first, to check the pruning.
    type: bool
    default: false
  min_error_pct:
    description: The narrowest error band, in percent, once predictions have been checked.
    type: float
    default: 5.0
seealso:
  - plugin: llmops.vllm.search_grid
    plugin_type: filter
  - module: llmops.vllm.trial_decision
"""

EXAMPLES = r"""
- name: Decide what to load next
  ansible.builtin.set_fact:
    search: >-
      {{ search_points | llmops.vllm.search_step(records=trial_records, declared=vllm_variants,
                                                 baseline='baseline', max_loads=6) }}

- name: Say what was decided
  ansible.builtin.debug:
    msg: "{{ search.summary.splitlines() + [search.reason] }}"
"""

RETURN = r"""
_value:
  description: The decision.
  type: dict
  contains:
    next:
      description: The point to load now; V(null) when the search is done.
      type: str
      sample: ngram-k2-max4
    done:
      description: Whether the search is over.
      type: bool
    loads:
      description: Grid points that their own trials loaded (seeded measurements do not count).
      type: int
    points:
      description: Points in the grid.
      type: int
    best:
      description: The kept variant with the highest measured throughput (a point, or a declared variant of the same
        config), else the baseline.
      type: str
    best_point:
      description: The point that RV(_value.best) measured; V(null) when the baseline is best.
      type: str
    best_throughput:
      description: Its measured output tokens/s (mean over levels); V(null) when the baseline is best.
      type: float
    best_record:
      description: The trial record of RV(_value.best); V(null) when the baseline is best.
      type: dict
    predictions:
      description:
        - For each point, C(predicted_throughput) (V(null) when nothing predicts it), C(band_pct) and C(basis) in
          words; measured points add C(measured_throughput).
      type: dict
    checks:
      description: For each measured point that had a prediction before its trial, C(name), C(predicted),
        C(measured) and C(error_pct) (measured above predicted is positive).
      type: list
      elements: dict
    band_pct:
      description: The error band now, in percent.
      type: float
    pruned:
      description: The points not loaded because their prediction, raised by the band, cannot beat the best.
      type: list
      elements: str
    notes:
      description: What of the records was left out, and why.
      type: list
      elements: str
    reason:
      description: Why this point is next, or why the search is done.
      type: str
    next_prediction:
      description: What is predicted for RV(_value.next), and from what, in one line; V(null) when the search is done.
      type: str
      sample: "ngram-k3-max4: predicted 1312 tok/s (band 9%) from the acceptance per position of ngram-k5-max4"
      version_added: 1.2.0
    summary:
      description:
        - "Lines of text: the first is C(loads paid for: N of the grid's M points), the second what a full grid
          would load, then one line per checked prediction (C(NAME predicted X tok/s, measured Y) and the error in
          percent) and last the best with the reason of its verdict."
      type: str
"""

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.llmops.vllm.plugins.plugin_utils._variant_search import (
    DEFAULT_MIN_ERROR_PCT,
    SearchError,
)
from ansible_collections.llmops.vllm.plugins.plugin_utils._variant_search import search_step as decide_step


def _whole(value):
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return value


def _flag(value, name):
    try:
        return boolean(value, strict=True)
    except TypeError:
        raise SearchError(f'{name} must be a boolean, got {value!r}') from None


def search_step(points, records=None, declared=None, baseline='baseline', max_loads=None, exhaustive=False,
                min_error_pct=DEFAULT_MIN_ERROR_PCT):
    try:
        if isinstance(min_error_pct, str):
            try:
                min_error_pct = float(min_error_pct)
            except ValueError:
                pass
        return decide_step(list(points or []), records=list(records or []), declared=declared, baseline=baseline,
                           max_loads=_whole(max_loads), exhaustive=_flag(exhaustive, 'exhaustive'),
                           min_error_pct=min_error_pct)
    except SearchError as error:
        raise AnsibleFilterError(f'search_step: {error}') from error


class FilterModule:
    def filters(self):
        return {'search_step': search_step}
