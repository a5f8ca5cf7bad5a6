# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pytest

from ansible_collections.llmops.vllm.plugins.plugin_utils import _comparison
from ansible_collections.llmops.vllm.plugins.plugin_utils._comparison import (
    ComparisonError,
    benchmark_levels,
    comparison_rows,
    differing_options,
    level_change,
    percent_change,
)
from ansible_collections.llmops.vllm.plugins.plugin_utils._results_store import BenchmarkRecord


def level(throughput, concurrency=4, **metrics):
    return {'max_concurrency': concurrency, 'output_throughput': throughput, **metrics}


def test_the_design_brief_example_changes_by_the_ratio_of_the_two_figures():
    # n-gram at 60 tok/s against the 74 tok/s baseline: (60 - 74) / 74 = -18.92%.
    change = level_change(level(60.0, median_tpot_ms=15.84, median_ttft_ms=90.0),
                          level(74.0, median_tpot_ms=13.2, median_ttft_ms=100.0))
    assert change.delta_pct == pytest.approx(-18.918918918)
    assert change.tpot_delta_pct == pytest.approx(20.0)
    assert change.ttft_delta_pct == pytest.approx(-10.0)
    assert (change.variant_output_throughput, change.baseline_output_throughput) == (60.0, 74.0)


def test_the_mean_of_repeats_is_compared_not_the_pooled_figure():
    change = level_change(level(0.0, output_throughput_mean=103.0, output_throughput_ci95=1.5),
                          level(90.0, output_throughput_mean=100.0, output_throughput_ci95=2.0))
    assert (change.baseline_output_throughput, change.delta_pct) == (100.0, pytest.approx(3.0))


def test_a_change_carries_no_label_of_its_own():
    # One verdict: the decision's. A comparison that said "faster" or "slower" could disagree with it.
    fields = set(level_change(level(200.0), level(100.0)).as_dict())
    assert not fields & {'verdict', 'not_slower', 'threshold_pct', 'method', 'lower_bound_pct'}
    assert not {'FASTER', 'SLOWER', 'WITHIN_NOISE', 'compare_results', 'overall_verdict'} & set(vars(_comparison))


def test_missing_latency_gives_no_latency_delta():
    change = level_change(level(100.0, median_tpot_ms=10.0), level(100.0))
    assert (change.tpot_delta_pct, change.ttft_delta_pct) == (None, None)


@pytest.mark.parametrize('variant, baseline, message', [
    ({'max_concurrency': 4}, level(1.0), 'the variant has no output_throughput'),
    (level(1.0), level(0.0), 'the baseline produced no output tokens'),
    (level('fast'), level(1.0), "output_throughput of the variant must be a number, got 'fast'"),
    (level(True), level(1.0), 'must be a number, got True'),
    (level(float('nan')), level(1.0), 'must be finite'),
])
def test_incomparable_levels_are_refused(variant, baseline, message):
    with pytest.raises(ComparisonError, match=message):
        level_change(variant, baseline)


def test_percent_change_of_unknown_or_zero_is_unknown():
    assert percent_change(None, 1.0) is None
    assert percent_change(1.0, 0) is None
    assert percent_change(15.0, 12.0) == 25.0


@pytest.mark.parametrize('value, message', [
    ('fast', 'must be an openai_benchmark result'),
    ({'results': 'x'}, 'the results of the variant must be a list'),
    ({'results': []}, 'the variant holds no benchmark results'),
    ([1, 2], 'every result of the variant must be a dictionary'),
])
def test_benchmark_levels_rejects_what_is_not_a_result(value, message):
    with pytest.raises(ComparisonError, match=message):
        benchmark_levels(value, 'variant')


def test_differing_options_ignore_what_does_not_change_the_workload():
    first = {'num_prompts': 32, 'prompt_set': 'code_editing', 'concurrency': [1, 4], 'timeout': 600, 'repeats': 1}
    second = {'num_prompts': 64, 'prompt_set': 'code_editing', 'concurrency': [4], 'timeout': 60, 'seed': 1}
    assert differing_options(first, second) == ['num_prompts', 'seed']


def record(variant, throughput, run_id, recorded_at, concurrency=4, host='node', failed=False, row_id=None,
           options=None):
    return BenchmarkRecord(recorded_at=recorded_at, run_id=run_id, host=host, model='m', variant=variant,
                           metrics=level(throughput, concurrency), options=options or {}, task_failed=failed,
                           row_id=row_id)


def test_rows_prefer_the_baseline_of_the_same_run():
    old = record('baseline', 100.0, 'r1', '2026-05-01T00:00:00Z')
    same_run = record('baseline', 50.0, 'r2', '2026-05-02T00:00:10Z')
    variant = record('ngram', 60.0, 'r2', '2026-05-02T00:00:00Z')
    [row_baseline, row_variant] = comparison_rows([same_run, variant], [old, same_run], 'baseline')[('node', 'm')]
    assert row_baseline.record is same_run and row_baseline.change is None
    assert row_variant.baseline is same_run and row_variant.baseline_from_same_run
    assert row_variant.change.delta_pct == 20.0


def test_rows_fall_back_to_the_latest_earlier_baseline_never_a_later_one():
    older = record('baseline', 80.0, 'r1', '2026-05-01T00:00:00Z')
    newer = record('baseline', 100.0, 'r2', '2026-05-02T00:00:00Z')
    failed = record('baseline', 10.0, 'r3', '2026-05-02T12:00:00Z', failed=True)
    later = record('baseline', 1.0, 'r5', '2026-05-04T00:00:00Z')
    variant = record('eagle3', 110.0, 'r4', '2026-05-03T00:00:00Z')
    [row] = comparison_rows([variant], [older, newer, failed, later], 'baseline')[('node', 'm')]
    assert row.baseline is newer and not row.baseline_from_same_run
    assert row.change.delta_pct == pytest.approx(10.0)


def test_rows_without_a_baseline_at_that_concurrency_say_so():
    [row] = comparison_rows([record('ngram', 1.0, 'r1', '2026-05-01T00:00:00Z', concurrency=16)],
                            [record('baseline', 1.0, 'r1', '2026-05-01T00:00:00Z')], 'baseline')[('node', 'm')]
    assert (row.baseline, row.change, row.problem) == (None, None, 'no baseline measured at this concurrency')


def test_rows_keep_the_latest_of_each_series_and_sort_baseline_first():
    records = [
        record('ngram', 1.0, 'r1', '2026-05-01T00:00:00Z', row_id=1),
        record('ngram', 2.0, 'r1', '2026-05-01T00:00:00Z', row_id=2),
        record('baseline', 2.0, 'r1', '2026-05-01T00:00:00Z', concurrency=16, row_id=3),
        record('baseline', 2.0, 'r1', '2026-05-01T00:00:00Z', concurrency=1, row_id=4),
        record('baseline', 2.0, 'r1', '2026-05-01T00:00:00Z', concurrency=4, row_id=5),
        record('baseline', 7.0, 'r1', '2026-05-01T00:00:00Z', host='another', row_id=6),
    ]
    groups = comparison_rows(records, records, 'baseline')
    assert list(groups) == [('another', 'm'), ('node', 'm')]
    assert [(row.record.variant, row.record.max_concurrency) for row in groups[('node', 'm')]] == \
        [('baseline', 1), ('baseline', 4), ('baseline', 16), ('ngram', 4)]
    assert groups[('node', 'm')][-1].record.row_id == 2


def test_rows_note_differing_options_and_incomparable_metrics():
    baseline = record('baseline', 0.0, 'r1', '2026-05-01T00:00:00Z', options={'num_prompts': 32})
    variant = record('ngram', 1.0, 'r1', '2026-05-01T00:00:01Z', options={'num_prompts': 64})
    [dummy, row] = comparison_rows([baseline, variant], [baseline], 'baseline')[('node', 'm')]
    assert row.differing_options == ('num_prompts',)
    assert row.change is None
    assert 'the baseline produced no output tokens' in row.problem
