# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""compare-variants serves the variant its trials show surest to be fast, and never one they rolled back."""

from __future__ import annotations

import pytest

from ansible_collections.llmops.vllm.plugins.filter.variant_ranking import variant_ranking
from ansible_collections.llmops.vllm.plugins.plugin_utils._ranking import RankingError, rank_variants


def record(variant, outcome, levels=(), delta=None, short='0123456789ab', reason='why'):
    decision = None if outcome in ('failed', 'blocked') else {
        'outcome': 'not_slower' if outcome == 'kept' else 'slower', 'delta_pct': delta,
        'levels': [{'max_concurrency': 4, 'delta_pct': d, 'lower_pct': low} for d, low in levels]}
    return {'variant': variant, 'outcome': outcome, 'decision': decision, 'identity': {'short': short},
            'reason': reason}


def test_the_kept_variant_surest_to_be_fast_wins_not_the_one_with_the_best_mean():
    records = [
        # A higher mean, but one level could be 6% slower.
        record('ngram_k5', 'kept', levels=[(14.0, -6.0), (10.0, 2.0)], delta=12.0),
        # A lower mean, and every level at least 1% faster.
        record('ngram_k3', 'kept', levels=[(8.0, 1.0), (7.0, 2.5)], delta=7.5),
        record('eagle3', 'rolled_back', levels=[(30.0, -40.0)], delta=30.0),
        record('broken', 'failed'),
    ]
    ranking = rank_variants(records, 'baseline')
    assert [row['variant'] for row in ranking['ranked']] == ['ngram_k3', 'ngram_k5', 'eagle3', 'broken']
    assert ranking['best'] == 'ngram_k3'
    assert ranking['ranked'][0]['worst_lower_pct'] == 1.0 and ranking['ranked'][0]['rank'] == 1
    assert ranking['table'][-1] == 'serves: ngram_k3'


def test_a_rolled_back_variant_never_serves_however_fast_it_looked():
    records = [record('eagle3', 'rolled_back', levels=[(40.0, -50.0)], delta=40.0), record('ngram', 'blocked')]
    ranking = rank_variants(records, 'baseline')
    assert ranking['best'] == 'baseline'
    assert ranking['table'][-1] == 'serves: baseline (no compared variant was kept)'


def test_levels_without_an_interval_rank_by_their_lowest_change():
    records = [record('a', 'kept', levels=[(5.0, None), (-2.0, None)], delta=1.5),
               record('b', 'kept', levels=[(1.0, None)], delta=1.0)]
    assert [row['variant'] for row in rank_variants(records, 'baseline')['ranked']] == ['b', 'a']


def test_the_table_has_one_aligned_line_per_variant():
    table = rank_variants([record('ngram', 'kept', levels=[(3.0, 0.5)], delta=3.0, reason='not slower at 4')],
                          'baseline')['table']
    assert table[0].split() == ['rank', 'variant', 'outcome', 'Δ', 'output', 'worst', '95%', 'low', 'trial', 'reason']
    assert table[1].split() == ['1', 'ngram', 'kept', '+3.0%', '+0.5%', '0123456789ab', 'not', 'slower', 'at', '4']
    assert table[0].index('variant') == table[1].index('ngram')


@pytest.mark.parametrize('records, message', [
    ([record('ngram', 'kept'), record('ngram', 'failed')], 'each variant is ranked once; twice: ngram'),
    ([record('baseline', 'kept')], "the baseline 'baseline' is what the variants are compared with"),
    ([{'outcome': 'kept'}], 'a trial record needs a variant'),
])
def test_records_that_cannot_be_ranked_are_refused(records, message):
    with pytest.raises(RankingError, match=message):
        rank_variants(records, 'baseline')


def test_the_filter_names_itself_in_its_errors():
    from ansible.errors import AnsibleFilterError
    with pytest.raises(AnsibleFilterError, match='variant_ranking: each variant is ranked once'):
        variant_ranking([record('x', 'kept'), record('x', 'kept')], 'baseline')


@pytest.mark.parametrize('names, message', [
    ([], r'vllm_compare_variants: give a non-empty list of variant names'),
    ('ngram', r'vllm_compare_variants: give a non-empty list'),
    (['ngram', 'baseline'], r'vllm_compare_variants\[1\]: baseline is the baseline'),
    (['ngram', 'eagle'], r"vllm_compare_variants\[1\]: unknown variant 'eagle'; declared: baseline, eagle3, ngram"),
    (['ngram', 'ngram'], r'vllm_compare_variants\[1\]: ngram is listed twice'),
    ([3], r'vllm_compare_variants\[0\]: a variant name, got 3'),
])
def test_a_bad_list_of_variants_to_compare_is_refused_naming_the_item(names, message):
    from ansible.errors import AnsibleFilterError
    from ansible_collections.llmops.vllm.plugins.filter.compare_plan import compare_plan
    with pytest.raises(AnsibleFilterError, match=message):
        compare_plan(names, ['baseline', 'ngram', 'eagle3'], 'baseline')


def test_the_plan_keeps_the_order_given():
    from ansible_collections.llmops.vllm.plugins.filter.compare_plan import compare_plan
    assert compare_plan(['eagle3', 'ngram'], {'baseline': 1, 'ngram': 2, 'eagle3': 3}.keys(), 'baseline') == [
        'eagle3', 'ngram']
