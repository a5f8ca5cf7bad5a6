# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import math

import pytest

from ansible_collections.llmops.vllm.plugins.plugin_utils._comparison import (
    DEFAULT_NOISE_PCT,
    FASTER,
    SLOWER,
    WITHIN_NOISE,
    ComparisonError,
    benchmark_levels,
    compare_level,
    compare_results,
    comparison_rows,
    differing_options,
    overall_verdict,
    percent_change,
)
from ansible_collections.llmops.vllm.plugins.plugin_utils._results_store import BenchmarkRecord


def level(throughput, concurrency=4, **metrics):
    return {'max_concurrency': concurrency, 'output_throughput': throughput, **metrics}


def test_the_design_brief_example_is_slower():
    # n-gram at 60 tok/s against the 74 tok/s baseline: (60 - 74) / 74 = -18.92%, far outside 5%.
    judged = compare_level(level(60.0, median_tpot_ms=15.84, median_ttft_ms=90.0),
                           level(74.0, median_tpot_ms=13.2, median_ttft_ms=100.0))
    assert judged.verdict == SLOWER
    assert judged.delta_pct == pytest.approx(-18.918918918)
    assert judged.tpot_delta_pct == pytest.approx(20.0)
    assert judged.ttft_delta_pct == pytest.approx(-10.0)
    assert (judged.method, judged.threshold_pct) == ('noise_band', DEFAULT_NOISE_PCT)
    assert (judged.variant_output_throughput, judged.baseline_output_throughput) == (60.0, 74.0)


@pytest.mark.parametrize('variant, baseline, noise_pct, verdict', [
    (76.0, 74.0, 5.0, WITHIN_NOISE),   # +2.70%
    (76.0, 74.0, 2.0, FASTER),
    (72.0, 74.0, 2.0, SLOWER),         # -2.70%
    (70.0, 74.0, 5.0, SLOWER),         # -5.41%
    (210.0, 200.0, 5.0, WITHIN_NOISE),  # exactly +5%: the edge of the band is still noise
    (190.0, 200.0, 5.0, WITHIN_NOISE),
])
def test_the_noise_band_decides_without_confidence_intervals(variant, baseline, noise_pct, verdict):
    assert compare_level(level(variant), level(baseline), noise_pct).verdict == verdict


@pytest.mark.parametrize('variant_mean, verdict', [
    (103.0, FASTER),        # difference 3 > sqrt(2^2 + 1.5^2) = 2.5
    (102.0, WITHIN_NOISE),  # 2 < 2.5, although the noise band alone would be 5
    (97.0, SLOWER),         # -3 beyond -2.5, although inside the 5% noise band
])
def test_confidence_intervals_decide_when_both_sides_have_one(variant_mean, verdict):
    judged = compare_level(level(0.0, output_throughput_mean=variant_mean, output_throughput_ci95=1.5),
                           level(90.0, output_throughput_mean=100.0, output_throughput_ci95=2.0))
    assert judged.verdict == verdict
    assert judged.method == 'ci95'
    assert judged.threshold_pct == pytest.approx(2.5)
    # The mean of the repeats is compared, not the pooled output_throughput.
    assert judged.baseline_output_throughput == 100.0


@pytest.mark.parametrize('variant_mean, variant_ci, not_slower', [
    (97.0, 1.5, False),    # slower: -3 - 2.5 = -5.5% at the low end
    (99.0, 1.5, True),     # -1 - 2.5 = -3.5%, inside -5%
    (99.0, 4.0, False),    # the same mean, measured too loosely: -1 - 4.47 = -5.47%
    (105.0, 1.5, True),    # faster
])
def test_not_slower_needs_the_whole_interval_above_minus_noise(variant_mean, variant_ci, not_slower):
    judged = compare_level(level(0.0, output_throughput_mean=variant_mean, output_throughput_ci95=variant_ci),
                           level(0.0, output_throughput_mean=100.0, output_throughput_ci95=2.0), noise_pct=5.0)
    assert judged.lower_bound_pct == pytest.approx(variant_mean - 100.0 - math.hypot(variant_ci, 2.0))
    assert judged.not_slower is not_slower


def test_the_mock_node_example_is_within_noise_but_not_shown_not_slower():
    # docs/results.md: n-gram 1668.2 ± 166.2 against 2031.8 ± 364.9 tok/s, noise band 3%.
    verdict = compare_results(level(0.0, output_throughput_mean=1668.2, output_throughput_ci95=166.2),
                              level(0.0, output_throughput_mean=2031.8, output_throughput_ci95=364.9), noise_pct=3.0)
    assert verdict['verdict'] == WITHIN_NOISE
    assert verdict['not_slower'] is False
    assert verdict['levels'][0]['lower_bound_pct'] == pytest.approx(-37.63, abs=0.01)


def test_without_intervals_not_slower_is_the_change_against_the_band():
    assert compare_level(level(72.0), level(74.0), noise_pct=3.0).not_slower is True    # -2.7%
    assert compare_level(level(71.0), level(74.0), noise_pct=3.0).not_slower is False   # -4.05%


def test_one_sided_interval_falls_back_to_the_noise_band():
    judged = compare_level(level(103.0, output_throughput_ci95=0.1), level(100.0), noise_pct=5)
    assert (judged.verdict, judged.method) == (WITHIN_NOISE, 'noise_band')


def test_missing_latency_gives_no_latency_delta():
    judged = compare_level(level(100.0, median_tpot_ms=10.0), level(100.0))
    assert (judged.tpot_delta_pct, judged.ttft_delta_pct) == (None, None)


@pytest.mark.parametrize('variant, baseline, noise_pct, message', [
    ({'max_concurrency': 4}, level(1.0), 5, 'the variant has no output_throughput'),
    (level(1.0), level(0.0), 5, 'the baseline produced no output tokens'),
    (level('fast'), level(1.0), 5, "output_throughput of the variant must be a number, got 'fast'"),
    (level(True), level(1.0), 5, 'must be a number, got True'),
    (level(float('nan')), level(1.0), 5, 'must be finite'),
    (level(1.0), level(1.0), -1, 'noise_pct must not be negative'),
])
def test_incomparable_levels_are_refused(variant, baseline, noise_pct, message):
    with pytest.raises(ComparisonError, match=message):
        compare_level(variant, baseline, noise_pct)


def test_percent_change_of_unknown_or_zero_is_unknown():
    assert percent_change(None, 1.0) is None
    assert percent_change(1.0, 0) is None
    assert percent_change(15.0, 12.0) == 25.0


@pytest.mark.parametrize('verdicts, overall', [
    ([FASTER, SLOWER], SLOWER),
    ([FASTER, WITHIN_NOISE], FASTER),
    ([WITHIN_NOISE, WITHIN_NOISE], WITHIN_NOISE),
    ([], WITHIN_NOISE),
])
def test_overall_verdict(verdicts, overall):
    assert overall_verdict(verdicts) == overall


def test_whole_module_results_are_compared_level_by_level():
    variant = {'results': [level(60.0, 1), level(230.0, 4), level(500.0, 16)], 'labels': {'variant': 'ngram'}}
    baseline = {'results': [level(200.0, 4), level(50.0, 1)]}
    verdict = compare_results(variant, baseline, noise_pct=5)
    assert [(judged['max_concurrency'], judged['verdict']) for judged in verdict['levels']] == \
        [(1, FASTER), (4, FASTER)]
    # +20% and +15%
    assert verdict['delta_pct'] == pytest.approx(17.5)
    assert (verdict['verdict'], verdict['noise_pct']) == (FASTER, 5.0)


def test_one_level_dicts_and_lists_are_accepted():
    assert compare_results(level(50.0), [level(100.0)])['verdict'] == SLOWER
    assert compare_results([level(100.0)], level(100.0))['delta_pct'] == 0.0


def test_results_without_a_shared_level_are_refused():
    with pytest.raises(ComparisonError, match=r'variant \(max_concurrency \[1\]\) and the baseline'
                                              r' \(max_concurrency \[4, 16\]\) share no concurrency level'):
        compare_results(level(1.0, 1), [level(1.0, 4), level(1.0, 16)])


def test_a_level_measured_twice_is_ambiguous():
    with pytest.raises(ComparisonError, match='more than one result at max_concurrency 4'):
        compare_results([level(1.0), level(2.0)], level(1.0))


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
    assert row_baseline.record is same_run and row_baseline.verdict is None
    assert row_variant.baseline is same_run and row_variant.baseline_from_same_run
    assert (row_variant.verdict.verdict, row_variant.verdict.delta_pct) == (FASTER, 20.0)


def test_rows_fall_back_to_the_latest_earlier_baseline_never_a_later_one():
    older = record('baseline', 80.0, 'r1', '2026-05-01T00:00:00Z')
    newer = record('baseline', 100.0, 'r2', '2026-05-02T00:00:00Z')
    failed = record('baseline', 10.0, 'r3', '2026-05-02T12:00:00Z', failed=True)
    later = record('baseline', 1.0, 'r5', '2026-05-04T00:00:00Z')
    variant = record('eagle3', 110.0, 'r4', '2026-05-03T00:00:00Z')
    [row] = comparison_rows([variant], [older, newer, failed, later], 'baseline')[('node', 'm')]
    assert row.baseline is newer and not row.baseline_from_same_run
    assert row.verdict.verdict == FASTER


def test_rows_without_a_baseline_at_that_concurrency_say_so():
    [row] = comparison_rows([record('ngram', 1.0, 'r1', '2026-05-01T00:00:00Z', concurrency=16)],
                            [record('baseline', 1.0, 'r1', '2026-05-01T00:00:00Z')], 'baseline')[('node', 'm')]
    assert (row.baseline, row.verdict, row.problem) == (None, None, 'no baseline measured at this concurrency')


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
    assert row.verdict is None
    assert 'the baseline produced no output tokens' in row.problem
