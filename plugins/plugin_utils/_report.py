# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Presenting stored benchmark results: the console table, the Markdown report and its charts."""

from __future__ import annotations

import dataclasses
import datetime
import io
import os
import re
import tempfile
import typing as t
from collections.abc import Iterable, Mapping

from ansible_collections.llmops.vllm.plugins.module_utils._start_phases import PHASE_LABELS, seconds_text
from ansible_collections.llmops.vllm.plugins.plugin_utils._comparison import (
    ComparisonError,
    ComparisonRow,
    comparison_rows,
    output_throughput,
)
from ansible_collections.llmops.vllm.plugins.plugin_utils._ranking import percent_text
from ansible_collections.llmops.vllm.plugins.plugin_utils._workloads import DEFAULT_WORKLOAD

CHART_UNAVAILABLE = 'Chart not drawn: matplotlib is not importable on the controller.'
# What a variant's result shows when no trial decided on it: a comparison alone proves nothing either way.
UNDECIDED = 'undecided'

_DECISION_WORDS = {'keep': 'kept', 'roll_back': 'rolled back', 'another_pair': 'measuring another pair'}
_OUTCOME_WORDS = {'faster': 'faster', 'not_slower': 'not slower', 'slower': 'slower', 'inconclusive': 'inconclusive',
                  'slo_breached': 'breaks its SLO', 'futility': 'stopped for futility'}


def decisions_by_trial(decisions: Iterable[t.Any]) -> dict[tuple[str, str, str, str], Mapping[str, t.Any]]:
    """Stored decisions (results_store DecisionRecord) by host, model, variant and run: the latest wins."""
    return {(decision.host, decision.model, decision.variant, decision.run_id): decision.document
            for decision in decisions}


def decision_text(document: Mapping[str, t.Any]) -> str:
    """'rolled back (inconclusive)': what the decision function decided, in the words every output uses."""
    decision = _DECISION_WORDS.get(document.get('decision'), str(document.get('decision')))
    return f"{decision} ({_OUTCOME_WORDS.get(document.get('outcome'), document.get('outcome'))})"


@dataclasses.dataclass(frozen=True)
class ReportOutcome:
    """What writing a report did, or would do in check mode."""

    path: str
    charts: tuple[str, ...]
    groups: Mapping[tuple[str, str], list[ComparisonRow]]
    changed: bool
    before: str
    after: str
    chart_note: str | None


def recorded_starts(trials: Iterable[t.Any]) -> dict[tuple[str, str], list[dict[str, t.Any]]]:
    """The timed starts that trial records hold (results_store HistoryEntry), per host and model, each once.

    A trial is recorded more than once (under way, then decided, or its rollback failing), and each record
    holds every start timed so far in that trial: the latest record of a trial (host, model, run and
    variant) holds them all. Each start gets the record's time and run.
    """
    latest: dict[tuple[str, str, str, str], t.Any] = {}
    for entry in trials:
        starts = entry.document.get('starts')
        if isinstance(starts, list) and starts:
            # Records from before run IDs existed cannot be told apart: each stands alone.
            latest[(entry.host, entry.model, entry.run_id or entry.recorded_at, entry.variant)] = entry
    by_node: dict[tuple[str, str], list[dict[str, t.Any]]] = {}
    for (host, model, dummy, dummy), entry in latest.items():
        for start in entry.document['starts']:
            if isinstance(start, Mapping) and isinstance(start.get('phases'), list) and start['phases']:
                by_node.setdefault((host, model), []).append(
                    {**start, 'recorded_at': entry.recorded_at, 'run_id': entry.run_id})
    return by_node


def rule_summary(baseline_variant: str) -> str:
    return (f"Baseline variant '{baseline_variant}'. A variant's verdict is the decision of the trial that measured"
            " it; a result that no trial decided is undecided. Changes are in percent of the baseline measured in the"
            " same run, or else the latest one before it. A decided variant's output tok/s change is the decision's own,"
            " over every pair of lifetimes it looked at; every other change is of the last lifetime of each side alone"
            " (one pair).")


def text_table(groups: Mapping[tuple[str, str], list[ComparisonRow]], baseline_variant: str,
               decisions: Mapping[tuple[str, str, str, str], Mapping[str, t.Any]] | None = None) -> str:
    """Fixed-width tables for the console, one per host and model, with their notes below.

    A variant decided on in the row's run shows that decision; any other variant's result is undecided.
    """
    decisions = decisions or {}
    header = ('variant', 'workload', 'conc', 'output tok/s', 'vs base', 'TPOT ms', 'p99', 'vs base', 'TTFT ms', 'p99',
              'vs base', 'accept', 'verdict', 'baseline')
    right_aligned = set(range(2, 12))
    blocks = []
    for (host, model), rows in groups.items():
        cells = [header] + [_row_cells(row, baseline_variant, _describe_baseline_plain, decisions, ('p99',))
                            for row in rows]
        widths = [max(len(line[column]) for line in cells) for column in range(len(header))]
        lines = [f'host {host}, model {model}']
        for line in cells:
            padded = [value.rjust(width) if column in right_aligned else value.ljust(width)
                      for column, (value, width) in enumerate(zip(line, widths))]
            lines.append('  ' + '  '.join(padded).rstrip())
        lines.extend(f'  note: {note}' for note in _notes(rows))
        lines.extend(f'  decision on {variant}: {decision_text(document)}, {document.get("reason")}'
                     for variant, document in _decisions_of(rows, decisions))
        blocks.append('\n'.join(lines))
    return '\n\n'.join(blocks)


def markdown_report(records: list[t.Any], groups: Mapping[tuple[str, str], list[ComparisonRow]],
                    baseline_variant: str,
                    charts: Mapping[tuple[str, str], str] | None = None, chart_note: str | None = None,
                    decisions: Iterable[t.Any] = (), trials: Iterable[t.Any] = (),
                    rankings: Iterable[Mapping[str, t.Any]] = (), starts_chart: str | None = None) -> str:
    """The whole report: per host and model, the latest result of each variant, then the history.

    trials holds the nodes' trial histories (results_store HistoryEntry): every trial's outcome, switch and
    rollback, shown with who made it. rankings (compare-variants, _ranking.rank_variants with host and model)
    come first in their section. The starts that trial records hold are tabled per node, phase by phase;
    starts_chart is the file name of their chart relative to the report.

    groups are the comparison_rows of the records; charts maps (host, model) to the file name of
    the chart relative to the report.
    """
    charts = charts or {}
    decisions = list(decisions)
    trials = list(trials)
    rankings = list(rankings)
    by_trial = decisions_by_trial(decisions)
    starts = recorded_starts(trials)
    lines = ['# vLLM variant benchmarks', '']
    if not records:
        lines.append('No benchmark results are stored yet.')
        return '\n'.join(lines) + '\n'
    runs = {record.run_id for record in records}
    latest = max(record.recorded_at for record in records)
    lines += [
        f"{_count(len(records), 'result')} from {_count(len(runs), 'run')}, the latest recorded at {latest}.",
        rule_summary(baseline_variant),
        '',
    ]
    if chart_note:
        lines += [chart_note, '']
    for (host, model), rows in groups.items():
        history = [record for record in records if (record.host, record.model) == (host, model)]
        lines += [f'## {_code(host)} / {_code(model)}', '']
        for ranking in rankings:
            if (ranking.get('host'), ranking.get('model')) == (host, model):
                lines += _ranking_section(ranking)
        lines += ['### Latest result of each variant', '']
        lines += _markdown_table(
            ('variant', 'workload', 'concurrency', 'output tok/s', 'Δ output', 'median TPOT (ms)', 'p90', 'p99',
             'Δ TPOT', 'median TTFT (ms)', 'p90', 'p99', 'Δ TTFT', 'acceptance', 'verdict', 'baseline'),
            [_row_cells(row, baseline_variant, _describe_baseline_markdown, by_trial, ('p90', 'p99')) for row in rows],
            right_aligned=set(range(2, 14)))
        notes = _notes(rows)
        if notes:
            lines += [''] + [f'- {note}' for note in notes]
        decided = [decision for decision in decisions if (decision.host, decision.model) == (host, model)]
        if decided:
            lines += ['', '### Decisions', '']
            lines += _markdown_table(
                ('recorded (UTC)', 'run', 'variant', 'decision', 'reason', 'rule'),
                [(decision.recorded_at, f'`{decision.run_id[:8]}`', decision.variant, decision_text(decision.document),
                  str(decision.document.get('reason')), str(decision.document.get('rule'))) for decision in decided],
                right_aligned=set())
        node_trials = [entry for entry in trials if (entry.host, entry.model) == (host, model)]
        if node_trials:
            lines += ['', '### Trials', '']
            lines += _markdown_table(
                ('recorded', 'by', 'run', 'variant', 'trial', 'outcome', 'reason'),
                [(entry.recorded_at, str(entry.document.get('started_by') or '–'),
                  f'`{entry.run_id[:8]}`' if entry.run_id else '–', entry.variant,
                  f'`{entry.identity[:12]}`' if entry.identity else '–', entry.outcome.replace('_', ' '),
                  str(entry.document.get('reason') or '')) for entry in node_trials],
                right_aligned=set())
        if (host, model) in starts:
            lines += ['', '### Starts', ''] + _starts_table(starts[(host, model)])
        lines += ['', '### History', '']
        lines += _markdown_table(
            ('recorded (UTC)', 'run', 'variant', 'workload', 'concurrency', 'output tok/s', 'median TPOT (ms)',
             'median TTFT (ms)', 'acceptance', 'failed requests', 'vLLM', 'trial', 'note'),
            [_history_cells(record) for record in sorted(history, key=_history_order)],
            right_aligned={4, 5, 6, 7, 8, 9})
        if (host, model) in charts:
            lines += ['', f'![Output tokens/s over time on {host}, {model}]({charts[(host, model)]})']
        lines.append('')
    if starts_chart:
        lines += ['## Starts by phase', '', f'![Each start of a unit, phase by phase]({starts_chart})', '']
    return '\n'.join(lines)


def _starts_table(starts: list[Mapping[str, t.Any]]) -> list[str]:
    """One row per start: when, which unit, the whole start, then each phase (– where a start did not log it)."""
    seen = {phase.get('name') for start in starts for phase in start['phases'] if isinstance(phase, Mapping)}
    columns = [(name, label) for name, label in PHASE_LABELS if name in seen]
    rows = []
    for start in starts:
        phases = {phase.get('name'): phase for phase in start['phases'] if isinstance(phase, Mapping)}
        rows.append((str(start.get('recorded_at') or '–'), f"`{start['run_id'][:8]}`" if start.get('run_id') else '–',
                     str(start.get('unit') or '–'), str(start.get('variant') or '–'),
                     _seconds_cell(start.get('seconds')))
                    + tuple(_seconds_cell(phases[name].get('seconds')) if name in phases else '–'
                            for name, dummy in columns))
    return _markdown_table(('recorded', 'run', 'unit', 'variant', 'total') + tuple(label for dummy, label in columns),
                           rows, right_aligned=set(range(4, 5 + len(columns))))


def _seconds_cell(seconds: t.Any) -> str:
    try:
        return seconds_text(float(seconds))
    except (TypeError, ValueError):
        return '–'


def _phase_name(label: str) -> str:
    """The phase name behind a legend label, unknown names last."""
    return next((name for name, words in PHASE_LABELS if words == label), PHASE_LABELS[-1][0])


def starts_chart_png(starts: Mapping[tuple[str, str], list[Mapping[str, t.Any]]]) -> bytes | None:
    """A PNG with one stacked horizontal bar per start, a segment per phase, or None without matplotlib."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return None
    bars = [(f"{host}: {start.get('unit')} ({start.get('recorded_at')})", start['phases'])
            for (host, dummy), node_starts in sorted(starts.items()) for start in node_starts]
    longest = max(float(phase.get('ended_at_s') or 0) for dummy, phases in bars for phase in phases)
    # A Kimi-K2.5 load is read in minutes, a tiny model's in seconds.
    scale, unit = (60.0, 'minutes') if longest >= 600 else (1.0, 'seconds')
    figure = Figure(figsize=(9, 1.5 + 0.45 * len(bars)), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    colours = {name: f'C{index % 10}' for index, (name, dummy) in enumerate(PHASE_LABELS)}
    labelled = set()
    # The first start at the top, as in the report's tables.
    for position, (dummy, phases) in enumerate(reversed(bars)):
        left = 0.0
        for phase in phases:
            width = float(phase.get('seconds') or 0) / scale
            name = phase.get('name')
            axes.barh(position, width, left=left, color=colours.get(name, 'grey'),
                      label=None if name in labelled else str(phase.get('label') or name))
            labelled.add(name)
            left += width
    axes.set_yticks(range(len(bars)))
    axes.set_yticklabels([label for label, dummy in reversed(bars)], fontsize='small')
    axes.set_xlabel(f'{unit} since the unit\'s main process started')
    axes.set_title('Starts by phase')
    axes.grid(True, axis='x', alpha=0.3)
    # The legend in start order, below the bars so that it hides none of them.
    order = [name for name, dummy in PHASE_LABELS]
    handles = dict(zip(axes.get_legend_handles_labels()[1], axes.get_legend_handles_labels()[0]))
    entries = sorted(handles.items(), key=lambda item: order.index(_phase_name(item[0])))
    axes.legend([handle for dummy, handle in entries], [label for label, dummy in entries], fontsize='small',
                loc='upper center', bbox_to_anchor=(0.5, -0.35 if len(bars) < 4 else -0.15), ncol=4, frameon=False)
    buffer = io.BytesIO()
    figure.savefig(buffer, format='png', bbox_inches='tight', metadata={'Software': None})
    return buffer.getvalue()


def chart_png(records: list[t.Any], title: str) -> bytes | None:
    """A PNG of output tokens/s per variant and concurrency over time, or None without matplotlib."""
    try:
        # Imported here: drawing is optional and matplotlib is slow to import for every play.
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return None
    series: dict[str, list[tuple[datetime.datetime, float]]] = {}
    for record in sorted(records, key=lambda record: (record.recorded_at, record.row_id or 0)):
        try:
            value = output_throughput(record.metrics)[0]
        except ComparisonError:
            continue
        label = f'{record.variant} (concurrency {_concurrency_text(record.max_concurrency)})'
        if record.workload != DEFAULT_WORKLOAD:
            label = f'{record.variant}, {record.workload} (concurrency {_concurrency_text(record.max_concurrency)})'
        series.setdefault(label, []).append((_parse_time(record.recorded_at), value))
    figure = Figure(figsize=(8, 4.5), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for label, points in sorted(series.items()):
        times, values = zip(*points)
        axes.plot(times, values, marker='o', label=label)
    axes.set_title(title)
    axes.set_xlabel('recorded (UTC)')
    axes.set_ylabel('output tokens/s')
    axes.set_ylim(bottom=0)
    axes.grid(True, alpha=0.3)
    if series:
        axes.legend(fontsize='small')
    figure.autofmt_xdate()
    buffer = io.BytesIO()
    # No software/version stamp, so redrawing the same history leaves the file unchanged.
    figure.savefig(buffer, format='png', metadata={'Software': None})
    return buffer.getvalue()


def _ranking_section(ranking: Mapping[str, t.Any]) -> list[str]:
    rows = [(str(row.get('rank')), str(row.get('variant')), str(row.get('outcome') or '').replace('_', ' '),
             percent_text(row.get('delta_pct')), percent_text(row.get('worst_lower_pct')),
             f"`{row['trial']}`" if row.get('trial') else '–', str(row.get('reason') or ''))
            for row in ranking.get('ranked') or []]
    lines = ['### Compared variants, ranked', '']
    lines += _markdown_table(('rank', 'variant', 'outcome', 'Δ output (mean)', 'Δ output (worst 95% low)', 'trial',
                              'reason'), rows, right_aligned={0, 3, 4})
    return lines + ['', f"Serves: {ranking.get('best')}. Only a kept variant can rank first; kept variants rank by the "
                        'lowest lower end of the 95% interval of their change in output tokens/s.', '']


def write_report(path: str, records: list[t.Any], baseline_variant: str,
                 draw_charts: bool = True, check_mode: bool = False, decisions: Iterable[t.Any] = (),
                 history: Iterable[t.Any] = (), rankings: Iterable[Mapping[str, t.Any]] = ()) -> ReportOutcome:
    """Write the Markdown report, one chart per host and model beside it, and one of the starts, when they changed."""
    history = list(history)
    report_path = os.path.abspath(path)
    directory = os.path.dirname(report_path)
    charts: dict[tuple[str, str], str] = {}
    files: dict[str, bytes] = {}
    chart_note = None
    if draw_charts and records:
        stem = os.path.splitext(os.path.basename(report_path))[0]
        for host, model in sorted({(record.host, record.model) for record in records}):
            png = chart_png([record for record in records if (record.host, record.model) == (host, model)],
                            f'{host} / {model}')
            if png is None:
                charts.clear()
                files.clear()
                chart_note = CHART_UNAVAILABLE
                break
            charts[(host, model)] = f'{stem}-{_file_part(host)}-{_file_part(model)}.png'
            files[os.path.join(directory, charts[(host, model)])] = png
    starts_chart = None
    starts = recorded_starts(history)
    if draw_charts and records and starts and chart_note is None:
        png = starts_chart_png(starts)
        if png is None:
            chart_note = CHART_UNAVAILABLE
        else:
            starts_chart = f'{stem}-starts.png'
            files[os.path.join(directory, starts_chart)] = png
    groups = comparison_rows(records, records, baseline_variant)
    after = markdown_report(records, groups, baseline_variant, charts, chart_note, decisions, history,
                            rankings, starts_chart)
    files[report_path] = after.encode('utf-8')
    changed_files = [file_path for file_path, content in files.items() if _read_bytes(file_path) != content]
    before = _read_text(report_path)
    if changed_files and not check_mode:
        os.makedirs(directory, exist_ok=True)
        for file_path in changed_files:
            write_atomically(file_path, files[file_path])
    return ReportOutcome(
        path=report_path,
        charts=tuple(os.path.join(directory, chart_name)
                     for chart_name in list(charts.values()) + ([starts_chart] if starts_chart else [])),
        groups=groups, changed=bool(changed_files), before=before, after=after, chart_note=chart_note)


def write_atomically(path: str, content: bytes) -> None:
    """Replace path in one step, so that a killed process never leaves half a file behind."""
    directory = os.path.dirname(os.path.abspath(path))
    descriptor, temporary = tempfile.mkstemp(dir=directory, prefix='.' + os.path.basename(path), suffix='.tmp')
    try:
        with os.fdopen(descriptor, 'wb') as handle:
            handle.write(content)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def _row_cells(row: ComparisonRow, baseline_variant: str, describe_baseline: t.Callable[[ComparisonRow], str],
               decisions: Mapping[tuple[str, str, str, str], Mapping[str, t.Any]],
               percentiles: tuple[str, ...]) -> tuple[str, ...]:
    record = row.record
    metrics = record.metrics
    decision = decisions.get((record.host, record.model, record.variant, record.run_id))
    if record.variant == baseline_variant:
        verdict = 'baseline'
    elif decision is not None:
        verdict = decision_text(decision)
    else:
        verdict = UNDECIDED
    if record.task_failed:
        verdict += ' (task failed)'
    deltas = (None, None, None) if row.change is None else (
        row.change.delta_pct, row.change.tpot_delta_pct, row.change.ttft_delta_pct)
    throughput_delta = _delta_text(deltas[0])
    decided = _decided_change(decision, record.workload, record.max_concurrency)
    if decided is not None and record.variant != baseline_variant:
        throughput_delta = '%s (%d %s)' % (_delta_text(decided[0]), decided[1], 'pair' if decided[1] == 1 else 'pairs')
    tpot = tuple(_number_text(metrics.get(f'{stat}_tpot_ms'), 2) for stat in percentiles)
    ttft = tuple(_number_text(metrics.get(f'{stat}_ttft_ms'), 1) for stat in percentiles)
    return (
        record.variant,
        record.workload,
        _concurrency_text(record.max_concurrency),
        _throughput_text(metrics),
        throughput_delta,
        _number_text(metrics.get('median_tpot_ms'), 2),
        *tpot,
        _delta_text(deltas[1]),
        _number_text(metrics.get('median_ttft_ms'), 1),
        *ttft,
        _delta_text(deltas[2]),
        _percent_text(metrics.get('spec_decode_acceptance_rate')),
        verdict,
        describe_baseline(row),
    )


def _decided_change(decision: Mapping[str, t.Any] | None, workload: str, concurrency: t.Any) -> tuple[float, int] | None:
    """The decision's own change of a level in output tok/s and the pairs of lifetimes it rests on, or None."""
    if not isinstance(decision, Mapping):
        return None
    for look in decision.get('looks') or ():
        if (isinstance(look, Mapping) and look.get('change_pct') is not None
                and (look.get('workload') or 'default') == (workload or 'default')
                and look.get('max_concurrency') == concurrency):
            return float(look['change_pct']), int(decision.get('pairs') or 1)
    return None


def _decisions_of(rows: Iterable[ComparisonRow], decisions: Mapping[tuple[str, str, str, str], Mapping[str, t.Any]]):
    seen = []
    for row in rows:
        key = (row.record.host, row.record.model, row.record.variant, row.record.run_id)
        if key in decisions and key not in seen:
            seen.append(key)
            yield row.record.variant, decisions[key]


def _describe_baseline_plain(row: ComparisonRow) -> str:
    if row.baseline is None:
        return '–'
    if row.baseline_from_same_run:
        return 'this run'
    return f'earlier run {row.baseline.run_id[:8]} ({row.baseline.recorded_at})'


def _describe_baseline_markdown(row: ComparisonRow) -> str:
    if row.baseline is None:
        return '–'
    source = 'same run' if row.baseline_from_same_run else f'earlier run `{row.baseline.run_id[:8]}`'
    return f'{_throughput_text(row.baseline.metrics)} tok/s, {source} ({row.baseline.recorded_at})'


def _notes(rows: Iterable[ComparisonRow]) -> list[str]:
    notes = []
    for row in rows:
        where = f'at concurrency {_concurrency_text(row.record.max_concurrency)}'
        if row.record.workload != DEFAULT_WORKLOAD:
            where = f'workload {row.record.workload}, {where}'
        subject = f'{row.record.variant} {where}'
        if row.problem:
            notes.append(f'{subject}: not compared, {row.problem}.')
        if row.baseline is not None and not row.baseline_from_same_run:
            notes.append(f'{subject}: no baseline in the same run; compared with the baseline of run'
                         f' {row.baseline.run_id[:8]} recorded at {row.baseline.recorded_at}.')
        if row.differing_options:
            notes.append(f"{subject}: benchmark options differ from the baseline's: {', '.join(row.differing_options)}.")
        if (row.baseline is not None and row.record.vllm_version and row.baseline.vllm_version
                and str(row.record.vllm_version) != str(row.baseline.vllm_version)):
            notes.append(f"{subject}: runs vLLM {row.record.vllm_version}, the baseline {row.baseline.vllm_version};"
                         ' the difference includes the release.')
        failed_requests = row.record.metrics.get('failed')
        if failed_requests:
            notes.append(f'{subject}: {failed_requests} requests failed.')
    return notes


def _history_cells(record: t.Any) -> tuple[str, ...]:
    metrics = record.metrics
    return (
        record.recorded_at,
        f'`{record.run_id[:8]}`',
        record.variant,
        record.workload,
        _concurrency_text(record.max_concurrency),
        _throughput_text(metrics),
        _number_text(metrics.get('median_tpot_ms'), 2),
        _number_text(metrics.get('median_ttft_ms'), 1),
        _percent_text(metrics.get('spec_decode_acceptance_rate')),
        _number_text(metrics.get('failed'), 0),
        str(record.vllm_version or '–'),
        _trial_text(record),
        'task failed' if record.task_failed else '',
    )


def _trial_text(record: t.Any) -> str:
    # Results measured before trial identities existed name their unit checksum instead.
    if record.trial_identity:
        return f'`{record.trial_identity[:12]}`'
    return f'unit `{record.unit_checksum[:12]}`' if record.unit_checksum else '–'


def _history_order(record: t.Any) -> tuple[t.Any, ...]:
    return (record.variant, record.workload, record.max_concurrency is None, record.max_concurrency or 0,
            record.recorded_at)


def _markdown_table(header: tuple[str, ...], rows: list[tuple[str, ...]], right_aligned: set[int]) -> list[str]:
    alignment = ['---:' if column in right_aligned else '---' for column in range(len(header))]
    return ['| ' + ' | '.join(_markdown_cell(cell) for cell in line) + ' |'
            for line in [header, tuple(alignment)] + rows]


def _markdown_cell(text: str) -> str:
    return text.replace('|', '\\|').replace('\n', ' ')


def _count(number: int, noun: str) -> str:
    return f'{number} {noun}' if number == 1 else f'{number} {noun}s'


def _code(text: str) -> str:
    return '`' + text.replace('`', "'") + '`'


def _throughput_text(metrics: Mapping[str, t.Any]) -> str:
    try:
        value, ci95 = output_throughput(metrics)
    except ComparisonError:
        return '–'
    return f'{value:.1f}' if ci95 is None else f'{value:.1f} ± {ci95:.1f}'


def _number_text(value: t.Any, decimals: int) -> str:
    if value is None:
        return '–'
    return f'{float(value):.{decimals}f}'


def _percent_text(percent: t.Any) -> str:
    # vllm bench serve reports the acceptance rate already in percent of drafted tokens.
    return '–' if percent is None else f'{float(percent):.1f}%'


def _delta_text(delta_pct: float | None) -> str:
    return '' if delta_pct is None else f'{delta_pct:+.1f}%'


def _concurrency_text(max_concurrency: int | None) -> str:
    return 'unlimited' if max_concurrency is None else str(max_concurrency)


def _parse_time(recorded_at: str) -> datetime.datetime:
    return datetime.datetime.strptime(recorded_at, '%Y-%m-%dT%H:%M:%SZ').replace(tzinfo=datetime.timezone.utc)


def _file_part(text: str) -> str:
    return re.sub(r'[^A-Za-z0-9._-]+', '_', text).strip('.') or '_'


def _read_bytes(path: str) -> bytes | None:
    try:
        with open(path, 'rb') as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def _read_text(path: str) -> str:
    content = _read_bytes(path)
    return '' if content is None else content.decode('utf-8', errors='replace')
