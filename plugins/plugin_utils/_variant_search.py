# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Search a grid of speculative configs while loading as few of them as can still find the best one.

On the production node every trial of a config costs a model load of about half an hour (and the
baseline's reload), so a grid of 20 configs is a week-end. Most of them need no load, because of
how speculative decoding spends its time:

Acceptance. vLLM counts, per draft position i, the share r_i of drafts whose token at position i
was accepted. Acceptance stops at the first rejected token, so r_i never rises with i, and a step
that verifies a draft of k tokens yields on average 1 + r_0 + ... + r_{k-1} tokens (the bonus token
plus the accepted ones). A draft of k' < k tokens is the same draft cut short: its first k'
positions are proposed and judged exactly as before, so the rates measured at k predict the tokens
per step of every smaller k' of the same family (the points that differ only in k). One trial at a
family's largest k predicts the whole family. Nothing predicts a k' above the largest measured one
(positions that were never drafted have no rate), so such a point is always loaded: the search does
not extrapolate.

Cost. A step verifies k draft tokens in one forward pass of the target model (plus, for a draft
model, k draft passes), so its time is modelled as base + per_draft_token * k, fitted by least
squares to the trials measured so far, where a trial's step time is its median TPOT times its
tokens per step. With one distinct k the line needs a second point: the baseline (k = 0, its own
median TPOT) anchors it. That overstates the cost per draft token (the fixed cost of speculating,
which the baseline does not pay, is spread over k), which makes a smaller k look cheaper than it
is: an error towards loading it, not towards pruning it. Once two distinct k are measured the
baseline is dropped from the fit.

Prediction. TPOT(k') = step(k') / (1 + r_0 + ... + r_{k'-1}). The predicted output throughput is
the family anchor's (its largest measured k, whose rates are used) measured throughput times
TPOT(anchor) / TPOT(k'), both from the model: what TPOT leaves out (prefill, scheduling) is then
taken from a measurement rather than modelled, and a fit that misses the anchor by a few percent
does not move the whole family by that much. With no measured member in a family there is nothing
to scale (and no rates), so its points are loaded.

Error band. A point is pruned only when even its prediction raised by the band cannot beat the best
kept measurement. Before any prediction has been checked against a trial the band is 10%; after,
it is the largest under-prediction seen (measured above predicted, relative to the prediction),
never less than min_error_pct. Over-prediction does not widen it: a point predicted too high is
loaded and measured, which costs a load but cannot lose the winner; only a point predicted too low
can be pruned wrongly.

Throughput of a trial: the mean, over the levels (workload and concurrency) that every counted
trial measured, of the variant's output tokens/s; figures from several levels are averaged the
same way (TPOT, acceptance per position). A record that shares no level with the later ones (a
twin measured at another concurrency) is not counted: its throughput is of another workload.
"""

from __future__ import annotations

import itertools
import re
import statistics
import typing as t
from collections.abc import Iterable, Mapping

from ansible_collections.llmops.vllm.plugins.plugin_utils._spec_decode import (
    canonical_method,
    check_speculative_config,
)
from ansible_collections.llmops.vllm.plugins.module_utils._type_names import plain_type_name
from ansible_collections.llmops.vllm.plugins.plugin_utils._variants import NAME_MAX_LENGTH, VARIANT_NAME

K = 'num_speculative_tokens'
DEFAULT_BAND_PCT = 10.0
DEFAULT_MIN_ERROR_PCT = 5.0
# Short names of grid keys in point names; any other key is written out.
_ABBREVIATIONS = {'prompt_lookup_max': 'max', 'prompt_lookup_min': 'min'}
_NAME = re.compile(VARIANT_NAME + r'\Z')
# Outcomes of a trial that measured the point; of one that will not be loaded again; the rest may be loaded.
MEASURED = ('kept', 'rolled_back')
DEAD = ('failed', 'fell_back', 'blocked')
DEFAULT_WORKLOAD = 'default'


class SearchError(ValueError):
    """The search's inputs break a rule; the message names the variable and the rule."""


# ---------------------------------------------------------------------------------------------------- the grid

def _positive_int(value: t.Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _family_name(method: str, values: Mapping[str, int]) -> str:
    parts = [method] + ['%s%d' % (_ABBREVIATIONS.get(key, key), value) for key, value in values.items()]
    return '-'.join(parts)


def _point_name(method: str, k: int, values: Mapping[str, int]) -> str:
    parts = [method, 'k%d' % k] + ['%s%d' % (_ABBREVIATIONS.get(key, key), value) for key, value in values.items()]
    return '-'.join(parts)


def search_points(variant: t.Any, grid: t.Any, known: t.Any = None, allow_unknown_keys: bool = False,
                  variant_var: str = 'vllm_search_variant',
                  grid_var: str = 'vllm_search_grid') -> list[dict[str, t.Any]]:
    """The grid's points in search order, after checking the variant and the grid.

    variant holds what every point shares (``method`` and any other speculative_config key); grid maps
    speculative_config keys to lists of positive whole numbers, ``num_speculative_tokens`` among them.
    known is the variants already declared: a mapping of name to spec, whose speculative_config a point
    of the same name must equal, or only their names, in which case any point name among them is refused
    (its config cannot be compared).

    Order: each family's largest k first (families in the grid's order: the product of the other keys'
    values as listed), then the rest family by family, larger k first. search_step loads the anchors in
    that order and reorders the rest by prediction.
    """
    if not isinstance(variant, Mapping):
        raise SearchError(f'{variant_var} must be a mapping of speculative_config keys, got {plain_type_name(variant)}')
    method = variant.get('method')
    if not isinstance(method, str) or not method:
        raise SearchError(f'{variant_var}.method is required: the speculative method every point shares')
    if not isinstance(grid, Mapping) or not grid:
        raise SearchError(f'{grid_var} must be a non-empty mapping of speculative_config key to a list of values, '
                          f'got {plain_type_name(grid)}')
    if K not in grid:
        raise SearchError(f'{grid_var}.{K} is required: the search is over the number of draft tokens')
    for key, values in grid.items():
        here = f'{grid_var}.{key}'
        if not isinstance(key, str):
            raise SearchError(f'{grid_var}: keys must be speculative_config keys, got {key!r}')
        if key in variant:
            raise SearchError(f'{here}: {key} is set in {variant_var} too; a key is either shared or searched')
        if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
            raise SearchError(f'{here} must be a list of values, got {plain_type_name(values)}')
        values = list(values)
        if not values:
            raise SearchError(f'{here} must list at least one value')
        wrong = [value for value in values if not _positive_int(value)]
        if wrong:
            raise SearchError(f'{here}: values must be whole numbers >= 1, got {wrong[0]!r}')
        twice = sorted({value for value in values if values.count(value) > 1})
        if twice:
            raise SearchError(f'{here}: each value once; twice: {", ".join(map(str, twice))}')
    others = [key for key in grid if key != K]
    count = 1
    for values in grid.values():
        count *= len(list(values))
    if count < 2:
        raise SearchError(f'{grid_var} must give at least 2 points to search, got {count}')
    prefix = canonical_method(method).lower().replace('.', '_')
    declared = known if isinstance(known, Mapping) else None
    plain_names = isinstance(known, Iterable) and not isinstance(known, (str, bytes))
    if known is not None and declared is None and not (plain_names and all(isinstance(name, str) for name in known)):
        raise SearchError(f'known must be the declared variants (vllm_variants) or their names, got {known!r}')
    names = set(known or ())
    anchors, rest = [], []
    for combination in itertools.product(*(list(grid[key]) for key in others)):
        values = dict(zip(others, combination))
        family = _family_name(prefix, values)
        for index, k in enumerate(sorted(grid[K], reverse=True)):
            name = _point_name(prefix, k, values)
            if not _NAME.match(name) or len(name) > NAME_MAX_LENGTH:
                raise SearchError(f'{grid_var}: the point name {name!r} breaks the variant-name rule '
                                  f'({VARIANT_NAME}, at most {NAME_MAX_LENGTH} characters); shorten the keys or values')
            config = dict(variant)
            config[K] = k
            config.update(values)
            problems = check_speculative_config(config, None, (0, 0, 0), allow_unknown_keys=allow_unknown_keys)
            if problems:
                key, rule = problems[0]
                where = f'{grid_var}.{key}' if key in grid else f'{variant_var}.{key}' if key else variant_var
                raise SearchError(f'{where}: point {name}: {rule}')
            if name in names:
                spec = declared.get(name) if declared is not None else None
                if declared is None:
                    raise SearchError(f'{grid_var}: point {name} is already a declared variant (pass known as the '
                                      'mapping of declared variants to accept one with the same speculative_config)')
                own = spec.get('speculative_config') if isinstance(spec, Mapping) else None
                if own != config:
                    raise SearchError(f'{grid_var}: point {name} is already a declared variant with another '
                                      f'speculative_config ({own!r}, the point has {config!r}); rename one of them')
            point = {
                'name': name,
                'family': family,
                'k': k,
                'speculative_config': config,
                'variant': {
                    'description': 'search point of %s: %s' % (
                        family, ', '.join('%s %s' % (key, value) for key, value in config.items() if key != 'method')),
                    'speculative_config': dict(config),
                },
            }
            (anchors if index == 0 else rest).append(point)
    return anchors + rest


# ------------------------------------------------------------------------------------------------ measurements

def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _number(value: t.Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _levels(record: Mapping[str, t.Any]) -> dict[tuple, Mapping[str, t.Any]]:
    decision = record.get('decision')
    levels = decision.get('levels') if isinstance(decision, Mapping) else None
    if not isinstance(levels, list):
        return {}
    return {(level.get('workload') or DEFAULT_WORKLOAD, level.get('max_concurrency')): level
            for level in levels if isinstance(level, Mapping) and _number(level.get('variant_output_throughput'))}


class _Measurement:
    """What one counted trial says about its point, over the levels every counted trial shares."""

    def __init__(self, point, record, order, levels, seeded):
        self.point = point
        self.record = record
        self.order = order
        self.seeded = seeded
        self.kept = record.get('outcome') == 'kept'
        self.throughput = statistics.fmean(float(level['variant_output_throughput']) for level in levels)
        self.baseline_throughput = _mean([float(level['baseline_output_throughput']) for level in levels
                                          if _number(level.get('baseline_output_throughput'))])
        tpots = [_number(level.get('variant_tpot_ms')) for level in levels]
        self.tpot = statistics.fmean(tpots) if tpots and None not in tpots else None
        self.baseline_tpot = _mean([float(level['baseline_tpot_ms']) for level in levels
                                    if _number(level.get('baseline_tpot_ms'))])
        rates = self._rates(levels)
        # vLLM counts one rate per draft position, k of them; anything past k was not drafted by this config.
        self.rates = rates[:point['k']] if rates else None
        lengths = [_number(level.get('acceptance_length')) for level in levels]
        if self.rates:
            self.tokens_per_step = 1.0 + sum(self.rates)
        elif lengths and None not in lengths:
            self.tokens_per_step = statistics.fmean(lengths)
        else:
            self.tokens_per_step = None
        self.step_ms = None if self.tpot is None or self.tokens_per_step is None else self.tpot * self.tokens_per_step

    @staticmethod
    def _rates(levels):
        lists = [level.get('acceptance_rates') for level in levels]
        if not lists or any(not isinstance(rates, list) or not rates for rates in lists):
            return None
        width = min(len(rates) for rates in lists)
        columns = [[_number(rates[index]) for rates in lists] for index in range(width)]
        if any(None in column for column in columns):
            return None
        return [statistics.fmean(column) for column in columns]


def _chronological(records):
    """Records oldest first: by recorded_at (else finished_at) when every record has one, else as listed."""
    indexed = list(enumerate(records))
    stamps = [record.get('recorded_at') or record.get('finished_at') for record in records]
    if all(stamps):
        indexed.sort(key=lambda item: (str(stamps[item[0]]), item[0]))
    return [record for dummy, record in indexed]


def _comparable(latest, notes):
    """The records that can be compared, the levels they all measured, and each one's levels.

    Throughput at one concurrency says nothing of another, so records count only over the levels they
    share. From the latest record back, each record counts while it leaves at least one level shared by
    all that count; an older record measured with another workload or concurrency altogether (a twin's
    trial under another benchmark, say) is left out, and the note says so.
    """
    measured = sorted(((rank, name) for name, (rank, record) in latest.items()
                       if record.get('outcome') in MEASURED and _levels(record)), reverse=True)
    usable, common, keys = set(), None, []
    for dummy, name in measured:
        levels = set(_levels(latest[name][1]))
        if common is not None and not common & levels:
            notes.append('%s is not counted: it measured %s, which the later trials did not'
                         % (name, ', '.join('%s@%s' % key for key in sorted(levels, key=str))))
            continue
        common = levels if common is None else common & levels
        usable.add(name)
        keys.append(levels)
    return usable, common or set(), keys


def _measurements(points, records, declared, baseline, notes):
    """The counted trial of each point, the points that will not be loaded again, and the paid loads.

    A point's own trial (a record under its name) decides when it measured the point or failed; else
    the latest trial of a declared twin (another variant with the same speculative_config) does.
    """
    names = {point['name'] for point in points}
    twins = {point['name']: [] for point in points}
    for name, spec in (declared or {}).items():
        config = spec.get('speculative_config') if isinstance(spec, Mapping) else None
        for point in points:
            if name != point['name'] and config == point['speculative_config']:
                twins[point['name']].append(name)
    wanted = names.union(*twins.values())
    latest = {}
    for rank, record in enumerate(_chronological(records)):
        name = record.get('variant')
        if name not in wanted:
            continue
        if record.get('baseline') not in (None, baseline):
            notes.append('the trial of %s was measured against %s, not %s: not counted'
                         % (name, record.get('baseline'), baseline))
            continue
        latest[name] = (rank, record)
    usable, common, keys = _comparable(latest, notes)
    if keys and any(key != common for key in keys):
        notes.append('the trials measured different workloads or concurrencies; only the ones all of them share'
                     ' count: %s' % ', '.join('%s@%s' % key for key in sorted(common, key=str)))
    measured, dead, paid = {}, {}, set()
    for point in points:
        own = latest.get(point['name'])
        if own is not None and own[1].get('outcome') not in ('blocked', 'pulled'):
            paid.add(point['name'])
        source = None
        if own is not None and (point['name'] in usable or own[1].get('outcome') in DEAD):
            source = point['name']
        else:
            tried = [name for name in twins[point['name']] if name in latest]
            source = max(tried, key=lambda name: latest[name][0]) if tried else None
        if source is None:
            continue
        rank, record = latest[source]
        if record.get('outcome') in DEAD:
            dead[point['name']] = '%s %s: %s' % (source, record.get('outcome'),
                                                 record.get('reason') or 'no reason recorded')
        elif source in usable:
            levels = _levels(record)
            shared = [levels[key] for key in sorted(common, key=str)]
            measured[point['name']] = _Measurement(point, record, rank, shared, source != point['name'])
    return measured, dead, paid


# ------------------------------------------------------------------------------------------------------ model

def fit_step_cost(samples: list[tuple[float, float]], baseline_tpot: float | None) -> dict[str, t.Any] | None:
    """Least-squares line step_ms = base + per_draft_token * k through (k, step_ms) samples.

    With fewer than two distinct k, the baseline (k = 0, its TPOT as the step time: one token a step)
    is added as a sample; without it there is no line and None is returned.
    """
    points = list(samples)
    distinct = {k for k, dummy in points}
    basis = 'fitted to %d trial%s at k %s' % (len(points), '' if len(points) == 1 else 's',
                                              ', '.join('%g' % k for k in sorted(distinct)))
    if len(distinct) < 2:
        if baseline_tpot is None or not points:
            return None
        points.append((0.0, baseline_tpot))
        basis += ', anchored at the baseline (k 0, %.2f ms)' % baseline_tpot
    else:
        basis += ', baseline dropped'
    mean_k = statistics.fmean(k for k, dummy in points)
    mean_step = statistics.fmean(step for dummy, step in points)
    spread = sum((k - mean_k) ** 2 for k, dummy in points)
    slope = sum((k - mean_k) * (step - mean_step) for k, step in points) / spread
    return {'base_ms': mean_step - slope * mean_k, 'per_draft_token_ms': slope, 'basis': basis}


def tokens_per_step(rates: list[float], k: int) -> float | None:
    """Mean tokens a verification step yields with k draft tokens, from rates measured at k or above."""
    if k > len(rates):
        return None
    return 1.0 + sum(rates[:k])


def _modelled_tpot(fit, rates, k):
    """TPOT in ms at k draft tokens: the fitted step time over the tokens a step yields."""
    return (fit['base_ms'] + fit['per_draft_token_ms'] * k) / tokens_per_step(rates, k)


def _predictions(points, measured, fit):
    """Predicted throughput and its basis for every point, from the measurements given."""
    answers = {}
    for point in points:
        family = [item for item in measured.values() if item.point['family'] == point['family']]
        with_rates = [item for item in family if item.rates]
        anchor = max(with_rates, key=lambda item: (item.point['k'], item.order)) if with_rates else None
        if anchor is None:
            why = ('no trial of family %s yet' % point['family'] if not family else
                   'no per-position acceptance measured in family %s' % point['family'])
            answers[point['name']] = (None, 'must load: ' + why)
            continue
        if point['k'] > len(anchor.rates):
            answers[point['name']] = (None, 'must load: k %d is above the largest measured k of family %s (%d); '
                                            'acceptance there is not extrapolated'
                                      % (point['k'], point['family'], len(anchor.rates)))
            continue
        if fit is None:
            answers[point['name']] = (None, 'must load: no step cost yet (the trials lack a median TPOT)')
            continue
        own = _modelled_tpot(fit, anchor.rates, point['k'])
        at_anchor = _modelled_tpot(fit, anchor.rates, anchor.point['k'])
        if own <= 0 or at_anchor <= 0:
            answers[point['name']] = (None, 'must load: the step-cost fit gives no positive time (%s)' % fit['basis'])
            continue
        predicted = anchor.throughput * at_anchor / own
        basis = ('%s measured %.1f tok/s at k %d; %.2f tokens/step at k %d; step %.2f + %.2f ms x k (%s)'
                 % (anchor.point['name'], anchor.throughput, anchor.point['k'],
                    tokens_per_step(anchor.rates, point['k']), point['k'], fit['base_ms'], fit['per_draft_token_ms'],
                    fit['basis']))
        answers[point['name']] = (predicted, basis)
    return answers


def _model(points, measured):
    samples = [(float(item.point['k']), item.step_ms) for item in measured.values() if item.step_ms is not None]
    baseline_tpot = _mean([item.baseline_tpot for item in measured.values() if item.baseline_tpot is not None])
    return _predictions(points, measured, fit_step_cost(samples, baseline_tpot))


def error_band(checks: list[Mapping[str, t.Any]], min_error_pct: float) -> float:
    """The band in percent: the default before any check, then the largest under-prediction, at least min_error_pct."""
    if not checks:
        return max(DEFAULT_BAND_PCT, min_error_pct)
    under = [check['error_pct'] for check in checks if check['error_pct'] > 0]
    return max([min_error_pct] + under)


# --------------------------------------------------------------------------------------------------- decision

def _check_arguments(points, records, declared, baseline, max_loads, min_error_pct):
    if not isinstance(points, list) or not all(isinstance(point, Mapping) and point.get('name') for point in points):
        raise SearchError('search_step takes the points of llmops.vllm.search_grid, got %s' % plain_type_name(points))
    if not isinstance(records, (list, tuple)) or not all(isinstance(record, Mapping) for record in records):
        raise SearchError('records must be a list of trial records, got %s' % plain_type_name(records))
    if declared is not None and not isinstance(declared, Mapping):
        raise SearchError('declared must map variant names to their specs (vllm_variants), got %s'
                          % plain_type_name(declared))
    if not isinstance(baseline, str) or not baseline:
        raise SearchError('baseline must name the baseline variant, got %r' % (baseline,))
    if max_loads is not None and (not isinstance(max_loads, int) or isinstance(max_loads, bool) or max_loads < 1):
        raise SearchError('max_loads must be a whole number >= 1 or null, got %r' % (max_loads,))
    if isinstance(min_error_pct, bool) or not isinstance(min_error_pct, (int, float)) or min_error_pct < 0:
        raise SearchError('min_error_pct must be a number >= 0, got %r' % (min_error_pct,))


def search_step(points: list[Mapping[str, t.Any]], records: Iterable[Mapping[str, t.Any]] = (),
                declared: Mapping[str, t.Any] | None = None, baseline: str = 'baseline',
                max_loads: int | None = None, exhaustive: bool = False,
                min_error_pct: float = DEFAULT_MIN_ERROR_PCT) -> dict[str, t.Any]:
    """Which point to load next, or that the search is done, and the best point so far, with the reasons.

    records are trial records (as plugins/plugin_utils/_trial.py builds them); a record counts as a measurement of its
    point when its trial was decided with figures (outcome kept or rolled_back, with decision levels).
    A record of another declared variant (``declared``: name -> spec) whose speculative_config equals a
    point's counts for that point at no load cost. Later records of a variant replace earlier ones.
    failed, fell_back and blocked points are not loaded again and cannot be best; in_progress ones are.

    The rule: first every point nothing predicts (each family's largest unmeasured k above its largest
    measured k: it gives the rates for the family), families in the grid's order; then the unmeasured
    point with the highest prediction, while its prediction raised by the error band beats the best so
    far (the best kept point's measured throughput, else the baseline's). Done when no point remains that
    could beat it, or when max_loads grid points have been loaded by their own trials. exhaustive loads
    every point in the same order (predicting each first), to check the pruning against the full grid.
    """
    records = list(records or ())
    _check_arguments(points, records, declared, baseline, max_loads, min_error_pct)
    notes: list[str] = []
    measured, dead, paid = _measurements(points, records, declared, baseline, notes)
    loads = len(paid)

    # Replay the measurements in the order they were made: what was predicted for each before its trial.
    checks = []
    history: dict[str, _Measurement] = {}
    for item in sorted(measured.values(), key=lambda item: item.order):
        before = _model(points, history).get(item.point['name'], (None, ''))[0]
        if before is not None and before > 0:
            checks.append({'name': item.point['name'], 'predicted': before, 'measured': item.throughput,
                           'error_pct': (item.throughput - before) * 100.0 / before})
        history[item.point['name']] = item
    band = error_band(checks, float(min_error_pct))
    model = _model(points, measured)

    kept = [item for item in measured.values() if item.kept]
    best_item = max(kept, key=lambda item: item.throughput) if kept else None
    baselines = [item.baseline_throughput for item in measured.values() if item.baseline_throughput is not None]
    if best_item is not None:
        threshold = best_item.throughput
        threshold_words = '%s\'s measured %.1f tok/s' % (best_item.point['name'], best_item.throughput)
    elif baselines:
        threshold = statistics.fmean(baselines)
        threshold_words = 'the baseline\'s %.1f tok/s' % threshold
    else:
        threshold, threshold_words = None, None

    predictions = {}
    for point in points:
        predicted, basis = model[point['name']]
        name = point['name']
        entry = {'predicted_throughput': predicted, 'band_pct': band, 'basis': basis}
        if name in measured:
            entry['measured_throughput'] = measured[name].throughput
            entry['basis'] = 'measured (%s); the model now gives %s' % (
                measured[name].record.get('variant'), 'nothing' if predicted is None else '%.1f tok/s' % predicted)
        elif name in dead:
            entry['basis'] = 'not loaded again: ' + dead[name]
        predictions[name] = entry

    open_points = [point for point in points if point['name'] not in measured and point['name'] not in dead]
    unpredicted = [point for point in open_points if model[point['name']][0] is None]
    predicted = sorted((point for point in open_points if model[point['name']][0] is not None),
                       key=lambda point: -model[point['name']][0])
    pruned = []
    if exhaustive:
        queue = [(point, 'exhaustive: every point is loaded; %s' % model[point['name']][1]) for point in unpredicted]
        queue += [(point, 'exhaustive: every point is loaded; predicted %.1f tok/s' % model[point['name']][0])
                  for point in predicted]
    else:
        queue = [(point, 'nothing predicts it (%s)' % model[point['name']][1][len('must load: '):])
                 for point in unpredicted]
        for point in predicted:
            value = model[point['name']][0]
            if threshold is None or value * (1 + band / 100.0) > threshold:
                queue.append((point, 'predicted %.1f tok/s, +%.1f%% band %.1f, could beat %s'
                              % (value, band, value * (1 + band / 100.0), threshold_words or 'nothing measured yet')))
            else:
                pruned.append(point['name'])
    if queue and max_loads is not None and loads >= max_loads:
        next_name, done = None, True
        reason = ('max_loads reached (%d of %d): not loaded although it could win: %s'
                  % (loads, max_loads, ', '.join(point['name'] for point, dummy in queue)))
    elif queue:
        point, why = queue[0]
        next_name, done = point['name'], False
        reason = 'load %s: %s' % (point['name'], why)
    else:
        next_name, done = None, True
        reason = 'done: every point is measured or ruled out'
        if pruned:
            reason = ('done: no unmeasured point can beat %s, even raised by the %.1f%% error band (pruned: %s)'
                      % (threshold_words, band, ', '.join(pruned)))
    if dead:
        reason += '; not loaded again: %s' % ', '.join(sorted(dead))
    if notes:
        reason += '; ' + '; '.join(notes)

    best_name = best_item.record.get('variant') if best_item else baseline
    answer = {
        'next': next_name,
        'done': done,
        'loads': loads,
        'points': len(points),
        'best': best_name,
        'best_point': best_item.point['name'] if best_item else None,
        'best_throughput': best_item.throughput if best_item else None,
        'best_record': dict(best_item.record) if best_item else None,
        'predictions': predictions,
        'checks': checks,
        'band_pct': band,
        'pruned': pruned,
        'notes': notes,
        'reason': reason,
    }
    answer['summary'] = _summary(answer, measured, best_item)
    answer['next_prediction'] = _prediction_line(next_name, predictions)
    return answer


def _prediction_line(name, predictions):
    """What the search predicts for the point it names next, and from what, in one line (None when it names none)."""
    if name is None:
        return None
    prediction = predictions.get(name) or {}
    if prediction.get('predicted_throughput') is None:
        return '%s: nothing predicts it yet (%s)' % (name, prediction.get('basis') or 'no basis given')
    return '%s: predicted %.0f tok/s (band %.0f%%) from %s' % (
        name, prediction['predicted_throughput'], prediction.get('band_pct') or 0, prediction.get('basis'))


def _summary(answer, measured, best_item):
    seeded = sum(1 for item in measured.values() if item.seeded)
    lines = ['loads paid for: %d of the grid\'s %d points' % (answer['loads'], answer['points']),
             'a full grid would load all %d points%s' % (
                 answer['points'], '' if not seeded else '; %d measured by earlier trials of the same config' % seeded)]
    for check in answer['checks']:
        lines.append('%s predicted %.1f tok/s, measured %.1f (%+.1f%%)'
                     % (check['name'], check['predicted'], check['measured'], check['error_pct']))
    if best_item is None:
        lines.append('best: %s (no point was kept)' % answer['best'])
    else:
        record = best_item.record
        verdict = record.get('reason') or (record.get('decision') or {}).get('reason') or 'kept'
        lines.append('best: %s, %.1f tok/s measured; kept: %s' % (answer['best'], best_item.throughput, verdict))
    return '\n'.join(lines)
