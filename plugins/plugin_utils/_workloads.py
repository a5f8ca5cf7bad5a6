# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Benchmark workloads: what a trial measures, as one workload or several named ones.

``vllm_switch_benchmark`` is either one mapping of llmops.vllm.openai_benchmark options (one
workload, named ``default``) or a list of them, each with a ``name``, for traffic that mixes kinds
of request (code editing with thinking, tool calls, ...). A workload may carry its own ``slo``,
which replaces the trial's SLO key by key. Every workload is measured on both sides of a trial and
the decision needs all of them.
"""

from __future__ import annotations

import re
import typing as t
from collections.abc import Mapping

from ansible_collections.llmops.vllm.plugins.module_utils._benchmark_options import ARGUMENT_SPEC
from ansible_collections.llmops.vllm.plugins.module_utils._type_names import plain_type_name

DEFAULT_WORKLOAD = 'default'

# The llmops.vllm.openai_benchmark options a workload may set: all of the module's but those that
# belong to the deployment (URL, model, key, TLS, labels) and stop_when_slower, which the trial
# builds from its baseline's runs.
_DEPLOYMENT_OPTIONS = frozenset(('base_url', 'model', 'api_key', 'metrics_url', 'labels', 'stop_when_slower',
                                 'validate_certs', 'ca_path'))
BENCHMARK_OPTIONS = tuple(name for name in ARGUMENT_SPEC if name not in _DEPLOYMENT_OPTIONS)
_WORKLOAD_KEYS = ('name', 'slo') + BENCHMARK_OPTIONS
_NAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.-]*$')


class WorkloadError(ValueError):
    """Workloads that cannot be used; the message names the variable, the place and the rule."""


def benchmark_workloads(value: t.Any, where: str = 'vllm_switch_benchmark', default_repeats: int | None = None,
                        overrides: Mapping[str, t.Any] | None = None) -> list[dict[str, t.Any]]:
    """The workloads of ``value`` as ``[{name, options, slo}]``, checked; raise WorkloadError.

    ``overrides`` (options, for example an ad-hoc run's) are laid over every workload, and
    ``default_repeats`` fills ``repeats`` where a workload sets none.
    """
    if value is None or (isinstance(value, Mapping) and not value):
        entries: list[t.Any] = [{}]
        single = True
    elif isinstance(value, Mapping):
        entries = [value]
        single = True
    elif isinstance(value, (list, tuple)):
        if not value:
            raise WorkloadError(f'{where} lists no workload; give at least one, or a mapping of options')
        entries = list(value)
        single = False
    else:
        raise WorkloadError(f'{where} must be a mapping of benchmark options or a list of workloads, '
                            f'got {plain_type_name(value)}')
    extra = dict(overrides or {})
    unknown = sorted(set(extra) - set(BENCHMARK_OPTIONS))
    if unknown:
        raise WorkloadError(f'{unknown[0]}: unknown benchmark option; use one of {", ".join(BENCHMARK_OPTIONS)}')
    workloads = []
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        here = where if single else f'{where}[{index}]'
        if not isinstance(entry, Mapping):
            raise WorkloadError(f'{here} must be a mapping of benchmark options, got {plain_type_name(entry)}')
        for key in entry:
            if key not in _WORKLOAD_KEYS:
                raise WorkloadError(f'{here}.{key}: unknown option; use one of {", ".join(_WORKLOAD_KEYS)}')
        name = entry.get('name', DEFAULT_WORKLOAD if single else None)
        if not isinstance(name, str) or not _NAME.match(name):
            raise WorkloadError(f'{here}.name must name the workload with letters, digits, ".", "_" or "-" '
                                f'(a list of workloads needs one name each), got {name!r}')
        if name in seen:
            raise WorkloadError(f'{here}.name: {name!r} names two workloads')
        seen.add(name)
        slo = entry.get('slo')
        if slo is not None and not isinstance(slo, Mapping):
            raise WorkloadError(f'{here}.slo must be a mapping of latency limits, got {plain_type_name(slo)}')
        options = {key: entry[key] for key in BENCHMARK_OPTIONS if key in entry and entry[key] is not None}
        options.update(extra)
        if default_repeats is not None:
            options.setdefault('repeats', default_repeats)
        workloads.append({'name': name, 'options': options, 'slo': dict(slo) if slo else {}})
    return workloads


def workload_results(value: t.Any, side: str) -> dict[str, Mapping[str, t.Any]]:
    """openai_benchmark results by workload name, in order.

    ``value`` is one module result, a list of them, or what a looped task registers (a mapping
    whose ``results`` are module results). A result names its workload with the label
    ``workload``; an unlabelled one is the ``default`` workload.
    """
    if isinstance(value, Mapping) and _is_loop(value.get('results')):
        items = value['results']
    elif isinstance(value, Mapping):
        items = [value]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise WorkloadError(f'the {side} must be an openai_benchmark result, got {plain_type_name(value)}')
    by_name: dict[str, Mapping[str, t.Any]] = {}
    for item in items:
        if not isinstance(item, Mapping):
            raise WorkloadError(f'the {side} holds a result that is not a mapping: {plain_type_name(item)}')
        name = str((item.get('labels') or {}).get('workload') or DEFAULT_WORKLOAD)
        if name in by_name:
            raise WorkloadError(f'the {side} has two results of workload {name!r}')
        by_name[name] = item
    if not by_name:
        raise WorkloadError(f'the {side} holds no benchmark result')
    return by_name


def _is_loop(results: t.Any) -> bool:
    # A module result's "results" are levels (max_concurrency, ...); a loop's are module results.
    return (isinstance(results, list) and bool(results)
            and all(isinstance(item, Mapping) and isinstance(item.get('results'), list) for item in results))
