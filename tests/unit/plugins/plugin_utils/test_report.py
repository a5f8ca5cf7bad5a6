# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import dataclasses
import sys

import pytest

from ansible_collections.llmops.vllm.plugins.plugin_utils._comparison import comparison_rows
from ansible_collections.llmops.vllm.plugins.plugin_utils._report import (
    CHART_UNAVAILABLE,
    markdown_report,
    text_table,
    write_report,
)
from ansible_collections.llmops.vllm.plugins.plugin_utils._results_store import BenchmarkRecord, HistoryEntry

RUN_1 = 'aaaaaaaa11111111'
RUN_2 = 'bbbbbbbb22222222'


def record(variant, run_id, recorded_at, host='gpu-node-1', row_id=None, task_failed=False, identity=None, **metrics):
    labels = {'vllm_version': '0.33.0', 'unit_checksum': f'{variant}0123456789abcdef'}
    if identity:
        labels['trial_identity'] = identity
    return BenchmarkRecord(
        recorded_at=recorded_at, run_id=run_id, host=host, model='kimi-k2.5', variant=variant,
        metrics={'max_concurrency': 4, **metrics}, row_id=row_id, task_failed=task_failed,
        labels=labels, options={'num_prompts': 32},
    )


# Hand-checked: against the 74.0 tok/s baseline of run 1, n-gram is (60 - 74) / 74 = -18.9% and
# slower; EAGLE-3 of run 2, which measured no baseline, is (81.4 - 74) / 74 = +10.0% and faster.
# TPOT 15.84 and 11.88 ms against 13.2 ms are +20.0% and -10.0%; TTFT 90 and 110 ms against 100 ms
# are -10.0% and +10.0%.
RECORDS = [
    record('baseline', RUN_1, '2026-05-01T10:00:00Z', row_id=1,
           output_throughput=74.0, median_tpot_ms=13.2, median_ttft_ms=100.0, failed=0),
    record('ngram', RUN_1, '2026-05-01T10:20:00Z', row_id=2, output_throughput=60.0, median_tpot_ms=15.84,
           p90_tpot_ms=17.5, p99_tpot_ms=19.25, median_ttft_ms=90.0, p90_ttft_ms=130.0, p99_ttft_ms=180.5,
           spec_decode_acceptance_rate=65.6, failed=0),
    record('eagle3', RUN_2, '2026-05-02T09:00:00Z', row_id=3, identity='e3' * 32, output_throughput=81.4, median_tpot_ms=11.88,
           median_ttft_ms=110.0, spec_decode_acceptance_rate=52.0, failed=2),
    record('baseline', RUN_2, '2026-05-02T09:30:00Z', host='gpu-node-2', row_id=4, output_throughput=71.0,
           output_throughput_mean=70.0, output_throughput_ci95=1.3, median_tpot_ms=14.0, median_ttft_ms=95.0),
]


def test_markdown_report_of_a_hand_checked_history():
    groups = comparison_rows(RECORDS, RECORDS, 'baseline')
    lines = markdown_report(RECORDS, groups, 'baseline', charts={('gpu-node-1', 'kimi-k2.5'): 'chart.png'}).splitlines()
    assert lines[:4] == [
        '# vLLM variant benchmarks',
        '',
        '4 results from 2 runs, the latest recorded at 2026-05-02T09:30:00Z.',
        "Baseline variant 'baseline'. A variant's verdict is the decision of the trial that measured it; a result"
        ' that no trial decided is undecided. Changes are in percent of the baseline measured in the same run, or'
        " else the latest one before it. A decided variant's output tok/s change is the decision's own, over every pair"
        ' of lifetimes it looked at; every other change is of the last lifetime of each side alone (one pair).',
    ]
    first = lines.index('## `gpu-node-1` / `kimi-k2.5`')
    second = lines.index('## `gpu-node-2` / `kimi-k2.5`')
    node_1 = lines[first:second]
    assert node_1[4:9] == [
        '| variant | workload | concurrency | output tok/s | Δ output | median TPOT (ms) | p90 | p99 | Δ TPOT'
        ' | median TTFT (ms) | p90 | p99 | Δ TTFT | acceptance | verdict | baseline |',
        '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |',
        '| baseline | default | 4 | 74.0 |  | 13.20 | – | – |  | 100.0 | – | – |  | – | baseline | – |',
        '| eagle3 | default | 4 | 81.4 | +10.0% | 11.88 | – | – | -10.0% | 110.0 | – | – | +10.0% | 52.0% | undecided'
        ' | 74.0 tok/s, earlier run `aaaaaaaa` (2026-05-01T10:00:00Z) |',
        '| ngram | default | 4 | 60.0 | -18.9% | 15.84 | 17.50 | 19.25 | +20.0% | 90.0 | 130.0 | 180.5 | -10.0%'
        ' | 65.6% | undecided | 74.0 tok/s, same run (2026-05-01T10:00:00Z) |',
    ]
    assert '- eagle3 at concurrency 4: no baseline in the same run; compared with the baseline of run aaaaaaaa' \
           ' recorded at 2026-05-01T10:00:00Z.' in node_1
    assert '- eagle3 at concurrency 4: 2 requests failed.' in node_1
    history = node_1[node_1.index('### History') + 4:]
    assert history[:3] == [
        '| 2026-05-01T10:00:00Z | `aaaaaaaa` | baseline | default | 4 | 74.0 | 13.20 | 100.0 | – | 0 | 0.33.0'
        ' | unit `baseline0123` |  |',
        # A result with a trial identity names it; older ones name their unit.
        '| 2026-05-02T09:00:00Z | `bbbbbbbb` | eagle3 | default | 4 | 81.4 | 11.88 | 110.0 | 52.0% | 2 | 0.33.0'
        ' | `e3e3e3e3e3e3` |  |',
        '| 2026-05-01T10:20:00Z | `aaaaaaaa` | ngram | default | 4 | 60.0 | 15.84 | 90.0 | 65.6% | 0 | 0.33.0'
        ' | unit `ngram0123456` |  |',
    ]
    assert '![Output tokens/s over time on gpu-node-1, kimi-k2.5](chart.png)' in node_1
    # The mean of the repeats and its 95% interval are shown, not the pooled throughput.
    assert '| baseline | default | 4 | 70.0 ± 1.3 |  | 14.00 | – | – |  | 95.0 | – | – |  | – | baseline | – |' \
        in lines[second:]
    assert not any(line.startswith('![') for line in lines[second:])


def test_console_table_of_the_same_history():
    # Only the trial that measured n-gram decided on it: eagle3's +10% is shown, but nobody decided it is faster.
    groups = comparison_rows(RECORDS, RECORDS, 'baseline')
    decided = {('gpu-node-1', 'kimi-k2.5', 'ngram', RUN_1): {'decision': 'roll_back', 'outcome': 'slower',
                                                             'reason': 'slower at concurrency 4'}}
    lines = text_table(groups, 'baseline', decided).splitlines()
    assert lines[0] == 'host gpu-node-1, model kimi-k2.5'
    assert lines[1].split() == ['variant', 'workload', 'conc', 'output', 'tok/s', 'vs', 'base', 'TPOT', 'ms', 'p99',
                                'vs', 'base', 'TTFT', 'ms', 'p99', 'vs', 'base', 'accept', 'verdict', 'baseline']
    assert lines[3].split() == ['eagle3', 'default', '4', '81.4', '+10.0%', '11.88', '–', '-10.0%', '110.0', '–',
                                '+10.0%', '52.0%', 'undecided', 'earlier', 'run', 'aaaaaaaa', '(2026-05-01T10:00:00Z)']
    assert lines[4].split() == ['ngram', 'default', '4', '60.0', '-18.9%', '15.84', '19.25', '+20.0%', '90.0',
                                '180.5', '-10.0%', '65.6%', 'rolled', 'back', '(slower)', 'this',
                                'run']
    assert '  decision on ngram: rolled back (slower), slower at concurrency 4' in lines
    assert '  note: eagle3 at concurrency 4: 2 requests failed.' in lines
    assert lines.index('host gpu-node-2, model kimi-k2.5') > 0


def test_each_workload_is_judged_against_the_baseline_of_the_same_workload():
    def labelled(variant, workload, throughput, row_id):
        return BenchmarkRecord(recorded_at='2026-05-03T10:00:00Z', run_id=RUN_1, host='node', model='kimi-k2.5',
                               variant=variant, metrics={'max_concurrency': 8, 'output_throughput': throughput},
                               labels={'workload': workload}, row_id=row_id)

    records = [labelled('baseline', 'chat', 50.0, 1), labelled('baseline', 'tools', 200.0, 2),
               labelled('ngram', 'chat', 55.0, 3), labelled('ngram', 'tools', 100.0, 4)]
    lines = text_table(comparison_rows(records, records, 'baseline'), 'baseline').splitlines()

    rows = [line.split()[:5] for line in lines[2:6]]
    assert rows == [['baseline', 'chat', '8', '50.0', '–'], ['baseline', 'tools', '8', '200.0', '–'],
                    ['ngram', 'chat', '8', '55.0', '+10.0%'], ['ngram', 'tools', '8', '100.0', '-50.0%']]


def test_console_table_marks_failed_tasks_and_missing_verdicts():
    records = [record('baseline', RUN_1, '2026-05-01T10:00:00Z', output_throughput=0.0),
               record('ngram', RUN_1, '2026-05-01T10:01:00Z', output_throughput=9.0, task_failed=True)]
    lines = text_table(comparison_rows(records, records, 'baseline'), 'baseline').splitlines()
    assert 'undecided (task failed)' in lines[3]
    assert '  note: ngram at concurrency 4: not compared, the baseline produced no output tokens, so there is' \
           ' nothing to compare against.' in lines


def test_an_empty_history_says_so():
    assert markdown_report([], {}, 'baseline') == '# vLLM variant benchmarks\n\nNo benchmark results are stored yet.\n'


def hide_matplotlib(monkeypatch):
    for name in ('matplotlib', 'matplotlib.figure', 'matplotlib.backends.backend_agg'):
        monkeypatch.setitem(sys.modules, name, None)


def test_write_report_changes_only_what_differs(tmp_path, monkeypatch):
    hide_matplotlib(monkeypatch)
    path = tmp_path / 'out' / 'report.md'
    preview = write_report(str(path), RECORDS[:2], 'baseline', check_mode=True)
    assert preview.changed and not path.exists()
    first = write_report(str(path), RECORDS[:2], 'baseline')
    assert first.changed and first.before == '' and path.read_text(encoding='utf-8') == first.after
    assert CHART_UNAVAILABLE in first.after and first.chart_note == CHART_UNAVAILABLE and first.charts == ()
    assert sorted(entry.name for entry in path.parent.iterdir()) == ['report.md']
    assert not write_report(str(path), RECORDS[:2], 'baseline').changed
    third = write_report(str(path), RECORDS, 'baseline')
    assert third.changed and third.before == first.after


def test_write_report_without_charts_does_not_mention_them(tmp_path):
    outcome = write_report(str(tmp_path / 'report.md'), RECORDS, 'baseline', draw_charts=False)
    assert outcome.chart_note is None and '![' not in outcome.after and 'Chart not drawn' not in outcome.after


def test_write_report_draws_one_chart_per_host_and_model(tmp_path):
    outcome = write_report(str(tmp_path / 'report.md'), RECORDS, 'baseline')
    assert [path.rsplit('/', 1)[1] for path in outcome.charts] == [
        'report-gpu-node-1-kimi-k2.5.png', 'report-gpu-node-2-kimi-k2.5.png']
    for chart in outcome.charts:
        with open(chart, 'rb') as handle:
            assert handle.read(8) == b'\x89PNG\r\n\x1a\n'
    assert '![Output tokens/s over time on gpu-node-1, kimi-k2.5](report-gpu-node-1-kimi-k2.5.png)' in outcome.after
    assert not write_report(str(tmp_path / 'report.md'), RECORDS, 'baseline').changed


def test_a_variant_on_another_vllm_release_is_flagged():
    upgrade = record('upgrade', RUN_1, '2026-05-01T10:30:00Z', row_id=5, output_throughput=80.0)
    upgrade = dataclasses.replace(upgrade, labels={**upgrade.labels, 'vllm_version': '0.34.0'})
    same = record('ngram', RUN_1, '2026-05-01T10:20:00Z', row_id=2, output_throughput=60.0)
    records = [RECORDS[0], same, upgrade]
    lines = markdown_report(records, comparison_rows(records, records, 'baseline'), 'baseline').splitlines()
    flagged = [line for line in lines if 'runs vLLM' in line]
    assert flagged == ['- upgrade at concurrency 4: runs vLLM 0.34.0, the baseline 0.33.0; the difference includes'
                       ' the release.']


def test_the_trials_of_a_node_are_shown_with_who_and_the_outcome():
    trials = [
        HistoryEntry(host='gpu-node-1', document={
            'variant': 'ngram', 'model': 'kimi-k2.5', 'outcome': 'rolled_back', 'run_id': 'aaaaaaaa11111111',
            'recorded_at': '2026-05-01T10:25:00+00:00', 'started_by': 'ops@bastion', 'reason': 'slower at concurrency 4',
            'identity': {'sha256': '0123456789ab' + 'c' * 52}}),
        HistoryEntry(host='gpu-node-1', document={
            'variant': 'ngram', 'model': 'kimi-k2.5', 'outcome': 'blocked', 'recorded_at': '2026-05-01T11:00:00+00:00',
            'started_by': 'ops@bastion', 'reason': 'rolled back by operator ops@bastion'}),
        HistoryEntry(host='gpu-node-2', document={'variant': 'x', 'model': 'kimi-k2.5', 'outcome': 'kept'}),
    ]
    groups = comparison_rows(RECORDS, RECORDS, 'baseline')
    lines = markdown_report(RECORDS, groups, 'baseline', trials=trials).splitlines()
    node_1 = lines[lines.index('## `gpu-node-1` / `kimi-k2.5`'):lines.index('## `gpu-node-2` / `kimi-k2.5`')]
    table = node_1[node_1.index('### Trials') + 2:node_1.index('### Trials') + 6]
    assert table == [
        '| recorded | by | run | variant | trial | outcome | reason |',
        '| --- | --- | --- | --- | --- | --- | --- |',
        '| 2026-05-01T10:25:00+00:00 | ops@bastion | `aaaaaaaa` | ngram | `0123456789ab` | rolled back'
        ' | slower at concurrency 4 |',
        '| 2026-05-01T11:00:00+00:00 | ops@bastion | – | ngram | – | blocked | rolled back by operator ops@bastion |',
    ]


def test_a_ranking_of_compared_variants_comes_first_in_its_node_section():
    from ansible_collections.llmops.vllm.plugins.plugin_utils._ranking import rank_variants
    ranking = rank_variants([
        {'variant': 'ngram', 'outcome': 'kept', 'identity': {'short': 'aaaaaaaaaaaa'}, 'reason': 'not slower',
         'decision': {'delta_pct': 6.0, 'levels': [{'delta_pct': 6.0, 'lower_pct': 1.5}]}},
        {'variant': 'eagle3', 'outcome': 'failed', 'reason': 'died at start', 'decision': None}], 'baseline')
    groups = comparison_rows(RECORDS, RECORDS, 'baseline')
    lines = markdown_report(RECORDS, groups, 'baseline',
                            rankings=[dict(ranking, host='gpu-node-1', model='kimi-k2.5')]).splitlines()
    node_1 = lines[lines.index('## `gpu-node-1` / `kimi-k2.5`'):lines.index('## `gpu-node-2` / `kimi-k2.5`')]
    assert node_1[2:8] == [
        '### Compared variants, ranked',
        '',
        '| rank | variant | outcome | Δ output (mean) | Δ output (worst 95% low) | trial | reason |',
        '| ---: | --- | --- | ---: | ---: | --- | --- |',
        '| 1 | ngram | kept | +6.0% | +1.5% | `aaaaaaaaaaaa` | not slower |',
        '| 2 | eagle3 | failed | – | – | – | died at start |',
    ]
    assert node_1[9].startswith('Serves: ngram.')
    node_2 = lines[lines.index('## `gpu-node-2` / `kimi-k2.5`'):]
    assert '### Compared variants, ranked' not in node_2


def timed_start(unit, variant, *seconds_by_name):
    """A start as the vllm_switch role records it, its phases following each other."""
    phases, ended = [], 0.0
    labels = {'engine_init': 'interpreter and API start-up', 'weights_loaded': 'weights load',
              'torch_compile': 'torch.compile', 'cuda_graphs': 'CUDA-graph capture', 'api_up': 'API start',
              'first_completion': 'first completion'}
    for name, seconds in seconds_by_name:
        ended += seconds
        phases.append({'name': name, 'label': labels[name], 'seconds': seconds, 'ended_at_s': round(ended, 3)})
    return {'unit': unit, 'variant': variant, 'phases': phases, 'summary': '…', 'seconds': round(ended, 3)}


TARGET_START = timed_start('vllm-kimi-k2.5-ngram.service', 'ngram', ('engine_init', 38.5), ('weights_loaded', 1522.7),
                           ('torch_compile', 76.0), ('cuda_graphs', 39.7), ('api_up', 7.7), ('first_completion', 2.3))
BASELINE_START = timed_start('vllm-kimi-k2.5-baseline.service', 'baseline', ('engine_init', 40.1),
                             ('weights_loaded', 130.2), ('api_up', 6.0), ('first_completion', 1.9))


def trial_entry(outcome, recorded_at, starts, run_id=RUN_1, host='gpu-node-1'):
    return HistoryEntry(host=host, document={'variant': 'ngram', 'model': 'kimi-k2.5', 'outcome': outcome,
                                             'run_id': run_id, 'recorded_at': recorded_at, 'starts': starts})


# The trial is recorded under way (before the target starts) and once decided, holding both starts by then.
TIMED_TRIALS = [
    trial_entry('in_progress', '2026-05-01T10:00:00+00:00', []),
    trial_entry('rolled_back', '2026-05-01T10:45:00+00:00', [TARGET_START, BASELINE_START]),
]


def test_the_starts_of_a_node_are_tabled_once_each_phase_by_phase():
    groups = comparison_rows(RECORDS, RECORDS, 'baseline')
    lines = markdown_report(RECORDS, groups, 'baseline', trials=TIMED_TRIALS).splitlines()
    node_1 = lines[lines.index('## `gpu-node-1` / `kimi-k2.5`'):lines.index('## `gpu-node-2` / `kimi-k2.5`')]
    start = node_1.index('### Starts')
    assert node_1[start + 2:start + 6] == [
        '| recorded | run | unit | variant | total | interpreter and API start-up | weights load | torch.compile'
        ' | CUDA-graph capture | API start | first completion |',
        '| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
        '| 2026-05-01T10:45:00+00:00 | `aaaaaaaa` | vllm-kimi-k2.5-ngram.service | ngram | 28m07s | 38.5 s | 25m23s'
        ' | 76.0 s | 39.7 s | 7.7 s | 2.3 s |',
        '| 2026-05-01T10:45:00+00:00 | `aaaaaaaa` | vllm-kimi-k2.5-baseline.service | baseline | 178.2 s | 40.1 s'
        ' | 130.2 s | – | – | 6.0 s | 1.9 s |',
    ]
    assert node_1[start + 6] == ''
    assert '### Starts' not in lines[lines.index('## `gpu-node-2` / `kimi-k2.5`'):]


def test_without_starts_on_record_the_report_is_unchanged(tmp_path):
    untimed = [trial_entry('kept', '2026-05-01T10:45:00+00:00', [])]
    outcome = write_report(str(tmp_path / 'report.md'), RECORDS, 'baseline', history=untimed)
    assert '### Starts' not in outcome.after and 'Starts by phase' not in outcome.after
    assert not (tmp_path / 'report-starts.png').exists()
    assert outcome.after == markdown_report(RECORDS, comparison_rows(RECORDS, RECORDS, 'baseline'), 'baseline',
                                            charts={key: f'report-{key[0]}-{key[1]}.png' for key in
                                                         (('gpu-node-1', 'kimi-k2.5'), ('gpu-node-2', 'kimi-k2.5'))},
                                            trials=untimed)


def test_the_starts_are_drawn_beside_the_report(tmp_path):
    pytest.importorskip('matplotlib')
    outcome = write_report(str(tmp_path / 'report.md'), RECORDS, 'baseline', history=TIMED_TRIALS)
    assert outcome.charts[-1] == str(tmp_path / 'report-starts.png')
    with open(outcome.charts[-1], 'rb') as handle:
        assert handle.read(8) == b'\x89PNG\r\n\x1a\n'
    assert outcome.after.rstrip().endswith('![Each start of a unit, phase by phase](report-starts.png)')
    assert not write_report(str(tmp_path / 'report.md'), RECORDS, 'baseline', history=TIMED_TRIALS).changed


def test_without_matplotlib_the_starts_are_still_tabled(tmp_path, monkeypatch):
    hide_matplotlib(monkeypatch)
    outcome = write_report(str(tmp_path / 'report.md'), RECORDS, 'baseline', history=TIMED_TRIALS)
    assert '### Starts' in outcome.after and outcome.chart_note == CHART_UNAVAILABLE and outcome.charts == ()
    assert sorted(entry.name for entry in tmp_path.iterdir()) == ['report.md']
