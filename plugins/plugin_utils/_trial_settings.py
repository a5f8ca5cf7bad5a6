# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Every setting of a trial checked on the controller, before any host is contacted.

A trial costs the node an hour or more of being out of service; a typo found at the decision, after
the variant has loaded and both sides were benchmarked, costs all of it. So each rule that the role,
the benchmark module or the decision would apply later is applied here first, with the rule's own
declaration: the decision's (check_decision_settings, check_slo, merged_slo), the benchmark
module's argument spec and value rules (module_utils/_benchmark_options), the replay file reader.
Each problem names the variable, where in it, and the rule; a secret's value never appears.
"""

from __future__ import annotations

import difflib
import os
import re
import typing as t
from collections.abc import Iterable, Mapping

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.llmops.vllm.plugins.module_utils._benchmark_options import (
    ARGUMENT_SPEC,
    REQUIRED_BY,
    option_problems,
)
from ansible_collections.llmops.vllm.plugins.module_utils._gpu_findings import RULE_NAMES as GPU_PREFLIGHT_RULES
from ansible_collections.llmops.vllm.plugins.module_utils._prompt_sets import CHAT_GENERATORS, GENERATORS
from ansible_collections.llmops.vllm.plugins.module_utils._replay_files import ReplayFileError, read_replay_file
from ansible_collections.llmops.vllm.plugins.module_utils._start_phases import PHASE_LABELS
from ansible_collections.llmops.vllm.plugins.module_utils._type_names import plain_type_name
from ansible_collections.llmops.vllm.plugins.plugin_utils._answer_gate import AnswerGateError, check_tolerance
from ansible_collections.llmops.vllm.plugins.plugin_utils._decision import (
    DecisionError,
    check_decision_settings,
    check_slo,
    merged_slo,
)
from ansible_collections.llmops.vllm.plugins.plugin_utils._benchmark_client import BenchmarkClientError, benchmark_endpoint
from ansible_collections.llmops.vllm.plugins.plugin_utils._calibration import CALIBRATION_LIFETIMES
from ansible_collections.llmops.vllm.plugins.plugin_utils._trial import MAX_LIFETIMES, MIN_LIFETIMES
from ansible_collections.llmops.vllm.plugins.plugin_utils._variable_names import role_argument_specs
from ansible_collections.llmops.vllm.plugins.plugin_utils._workloads import WorkloadError, benchmark_workloads

# The hooks of a switch and what each key of one means: a command (argv) or an HTTP call (url and the rest).
HOOK_VARIABLES = ('vllm_switch_drain_hook_before', 'vllm_switch_drain_hook_after', 'vllm_switch_notify_hook')
_COMMAND_KEYS = ('argv',)
_HTTP_KEYS = ('url', 'method', 'headers', 'body', 'status_code')
_HTTP_METHODS = ('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS')
_URL = re.compile(r'https?://[^\s/?#]+[^\s]*\Z')
# A pip requirement or constraint line starts with a project name; one that starts with "-" is an option
# (--index-url, -e, -r), which a constraints file would obey.
_REQUIREMENT = re.compile(r'[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,\s-]*\])?\s*([<>=!~;@ ]|\Z)')
_TLS_ARGS = ('ssl_certfile', 'ssl_keyfile', 'ssl_ca_certs')
# A benchmark's URL and model come from the deployment; the values checked for their rules only.
_PLACEHOLDER_TARGET = {'base_url': 'http://settings-check.invalid', 'model': 'settings-check'}


def trial_setting_problems(settings: Mapping[str, t.Any], check_replay_files: bool = True) -> list[str]:
    """Every problem of a trial's settings, each naming the variable and the rule; [] when none.

    ``settings`` maps variable names (``vllm_switch_slo``, ...) to their values, as the inventory
    gives them after templating; a variable that is absent is not checked. ``check_replay_files``
    says whether the benchmark client runs on this controller, where its replay files must then
    exist and parse.
    """
    problems: list[str] = []
    problems.extend(_decision_problems(settings))
    problems.extend(_answer_check_problems(settings))
    workloads = _workload_problems(settings, problems, check_replay_files)
    if workloads is not None:
        problems.extend(_slo_level_problems(settings.get('vllm_switch_slo'), workloads))
    for variable in HOOK_VARIABLES:
        problems.extend(hook_problems(settings.get(variable), variable))
    problems.extend(secret_problems(settings.get('vllm_secret_environment')))
    problems.extend(constraint_problems(settings.get('vllm_pip_constraints')))
    problems.extend(_tls_problems(settings))
    problems.extend(preflight_problems(settings.get('vllm_switch_preflight_downgrade')))
    problems.extend(_prefetch_problems(settings))
    problems.extend(phase_stall_problems(settings.get('vllm_switch_phase_stall_timeouts')))
    problems.extend(dark_budget_problems(settings))
    return problems


# A trial, however short its benchmarks, restarts the baseline, loads the variant and, rolled back, restarts the
# baseline again: three starts of the model.
SMALLEST_TRIAL_STARTS = 3


def dark_budget_problems(settings: Mapping[str, t.Any]) -> list[str]:
    """A dark-minutes budget must be a positive number of minutes that holds at least the smallest trial's starts.

    The node's own figures (its recorded starts and speeds) are checked against the budget on the node, before
    anything stops; here only what the inventory says is known: the expected load time.
    """
    where = 'vllm_switch_max_dark_minutes'
    budget = settings.get(where)
    if budget is None:
        return []
    try:
        minutes = float(budget) if isinstance(budget, str) else budget
    except ValueError:
        minutes = budget
    if isinstance(minutes, bool) or not isinstance(minutes, (int, float)) or not 0 < minutes < float('inf'):
        return ['%s: must be a positive number of minutes (or null for no budget), got %r' % (where, budget)]
    load = settings.get('vllm_expected_load_seconds')
    try:
        load_s = float(load) if load is not None else None
    except (TypeError, ValueError):
        return []
    if load_s and minutes * 60.0 < SMALLEST_TRIAL_STARTS * load_s:
        smallest = SMALLEST_TRIAL_STARTS * load_s / 60.0
        return ['%s: %g min is below the smallest trial: one lifetime a side, rolled back, starts the model %d times, '
                '%g min at vllm_expected_load_seconds=%g' % (where, minutes, SMALLEST_TRIAL_STARTS, smallest, load_s)]
    return []


def phase_stall_problems(limits: t.Any) -> list[str]:
    """A phase limit that names no phase of a vLLM start would silently leave that phase at the stall timeout."""
    if limits is None:
        return []
    if not isinstance(limits, Mapping):
        return ['vllm_switch_phase_stall_timeouts: must map phase names to seconds, got %s' % plain_type_name(limits)]
    names = [name for name, _label in PHASE_LABELS]
    problems = []
    for name, seconds in sorted(limits.items(), key=lambda item: str(item[0])):
        if name not in names:
            close = difflib.get_close_matches(str(name), names, n=1)
            problems.append('vllm_switch_phase_stall_timeouts.%s: no such phase of a vLLM start%s; the phases are %s'
                            % (name, " (did you mean '%s'?)" % close[0] if close else '', ', '.join(names)))
        elif isinstance(_integer(seconds), bool) or not isinstance(_integer(seconds), int) or _integer(seconds) < 0:
            problems.append('vllm_switch_phase_stall_timeouts.%s: must be a whole number of seconds, 0 or more, got %r'
                            % (name, seconds))
    return problems


def preflight_problems(downgrade: t.Any) -> list[str]:
    """A downgrade list must name the GPU preflight's rules: a mistyped name would silently keep its error."""
    where = 'vllm_switch_preflight_downgrade'
    if downgrade is None:
        return []
    if not isinstance(downgrade, list) or not all(isinstance(name, str) for name in downgrade):
        return ['%s: must be a list of rule names, got %s' % (where, plain_type_name(downgrade))]
    return ['%s: %r is no rule of the GPU preflight (its rules: %s)%s'
            % (where, name, ', '.join(GPU_PREFLIGHT_RULES), did_you_mean(name, GPU_PREFLIGHT_RULES))
            for name in downgrade if name not in GPU_PREFLIGHT_RULES]


def _decision_problems(settings):
    names = ('keep_when', 'margin_pct', 'min_runs', 'slo')
    if not any('vllm_switch_' + name in settings for name in names):
        return []
    keep_when = settings.get('vllm_switch_keep_when', 'not_slower')
    margin = settings.get('vllm_switch_margin_pct', 8.0)
    min_runs = _integer(settings.get('vllm_switch_min_runs', 3))
    problems = []
    try:
        check_decision_settings(keep_when, margin, min_runs, prefix='vllm_switch_')
    except DecisionError as error:
        problems.append(str(error))
    try:
        check_slo(settings.get('vllm_switch_slo'))
    except DecisionError as error:
        problems.append(str(error))
    return problems


def _answer_check_problems(settings):
    problems = []
    if 'vllm_switch_answer_tolerance' in settings:
        tolerance = settings['vllm_switch_answer_tolerance']
        try:
            # -e name=0.3 gives the string "0.3", which the role's argument spec reads as a float.
            tolerance = float(tolerance) if isinstance(tolerance, str) else tolerance
        except ValueError:
            pass
        try:
            check_tolerance(tolerance, 'vllm_switch_answer_tolerance')
        except AnswerGateError as error:
            problems.append(str(error))
    for name in ('vllm_switch_answer_requests', 'vllm_switch_answer_max_tokens', 'vllm_switch_engine_args_timeout',
                 'vllm_switch_lifetime_runs', 'vllm_switch_calibration_runs'):
        value = _integer(settings.get(name, 1))
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            problems.append('%s must be a whole number of at least 1, got %r' % (name, value))
    lifetimes = _integer(settings.get('vllm_switch_max_lifetimes', 1))
    if isinstance(lifetimes, bool) or not isinstance(lifetimes, int) or not (
            lifetimes == 0 or MIN_LIFETIMES <= lifetimes <= MAX_LIFETIMES):
        problems.append('vllm_switch_max_lifetimes must be a whole number from %d (one lifetime a side) to %d, got %r'
                        % (MIN_LIFETIMES, MAX_LIFETIMES, lifetimes))
    calibration = _integer(settings.get('vllm_switch_calibration_lifetimes', CALIBRATION_LIFETIMES))
    if isinstance(calibration, bool) or not isinstance(calibration, int) or calibration < CALIBRATION_LIFETIMES:
        problems.append('vllm_switch_calibration_lifetimes must be a whole number of at least %d (fewer cannot tell '
                        'bimodal starts from spread ones), got %r' % (CALIBRATION_LIFETIMES, calibration))
    return problems


def _prefetch_problems(settings):
    if not _truthy(settings.get('vllm_switch_prefetch_weights', True)):
        return []
    problems = []
    reserve = _integer(settings.get('vllm_switch_prefetch_reserve_mib', 0))
    if isinstance(reserve, bool) or not isinstance(reserve, int) or reserve < 0:
        problems.append('vllm_switch_prefetch_reserve_mib: must be 0 or more MiB, got %r' % (reserve,))
    timeout = _integer(settings.get('vllm_switch_prefetch_timeout', 1))
    if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 1:
        problems.append('vllm_switch_prefetch_timeout: must be at least 1 second, got %r' % (timeout,))
    return problems


# Settings that a trial no longer reads: what each was, and what took its place.
DEPRECATED = {
    'vllm_switch_min_runs': 'a trial measures server lifetimes, each benchmarked vllm_switch_lifetime_runs times',
    'vllm_switch_early_stop': 'a trial stops a losing variant by its futility rule after a pair of lifetimes',
}


def deprecated_settings(settings: Mapping[str, t.Any]) -> list[dict[str, str]]:
    """Ansible's deprecation entries for the settings given that a trial no longer reads, or reads another way."""
    found = [{'msg': f'{name} is ignored: {why}', 'version': '2.0.0', 'collection_name': 'llmops.vllm'}
             for name, why in DEPRECATED.items() if name in settings]
    if _integer(settings.get('vllm_switch_max_lifetimes')) == 0:
        found.append({'msg': 'vllm_switch_max_lifetimes: 0 is read as 1, one lifetime a side (whose baseline spread '
                             'comes from the node\'s history); set 1', 'version': '2.0.0',
                      'collection_name': 'llmops.vllm'})
    return found


def benchmark_client(settings: Mapping[str, t.Any], host: str, *, node_address: t.Any = None,
                     connection: t.Any = None) -> dict[str, str]:
    """Where the benchmark client runs and the URL it reaches the server at (_benchmark_client.benchmark_endpoint)."""
    return benchmark_endpoint(
        settings.get('vllm_host'), settings.get('vllm_port'), host, node_address=node_address,
        client=settings.get('vllm_switch_benchmark_client', 'controller'), connection=connection,
        controller_host=settings.get('vllm_switch_benchmark_host', 'localhost'),
        tls=_truthy(settings.get('vllm_switch_tls', False)),
        sends_api_key='VLLM_API_KEY' in (settings.get('vllm_secret_environment') or {}))


def replay_files_here(settings: Mapping[str, t.Any], host: str, *, node_address: t.Any = None,
                      connection: t.Any = None) -> bool:
    """Whether the benchmark client runs on this controller, where its replay files must then exist and parse."""
    try:
        client = benchmark_client(settings, host, node_address=node_address, connection=connection)
    except BenchmarkClientError:
        # Said by trial_document with the rest; the files are checked as if the client ran here.
        return True
    return client['delegate_to'] in ('localhost', '127.0.0.1')


def trial_document(settings: Mapping[str, t.Any], *, host: str, kind: str = 'switch', check_mode: bool = False,
                   node_address: t.Any = None, connection: t.Any = None) -> tuple[dict[str, t.Any], list[str]]:
    """What a switch of ``host`` is, from its checked vllm_* variables: (document, problems).

    The document holds ``trial`` (the settings that llmops.vllm.trial_advance starts the switch with, _trial.new),
    ``workloads`` (vllm_switch_benchmark as the benchmark steps run it), ``benchmark_client`` (where the benchmark
    client runs and the URL it reaches the server at) and ``node_url`` (the server's URL as the node itself reaches
    it, for the readiness waits). ``settings`` must hold vllm_service_specs, which the vllm_service role's validation
    sets; problems name the variable and the rule.
    """
    problems: list[str] = []
    specs = settings.get('vllm_service_specs')
    if not isinstance(specs, Mapping) or not specs:
        return {}, ['vllm_service_specs: not set; the llmops.vllm.vllm_service role resolves the variants first']
    baseline = str(settings.get('vllm_baseline_variant') or 'baseline')
    variant = str(settings.get('vllm_variant') or baseline)
    if variant not in specs:
        problems.append("vllm_variant: unknown variant '%s'; known variants: %s" % (variant, ', '.join(sorted(specs))))
    if baseline not in specs:
        problems.append("vllm_baseline_variant: unknown variant '%s'; known variants: %s"
                        % (baseline, ', '.join(sorted(specs))))
    enabled = _truthy(settings.get('vllm_switch_benchmark_enabled', True))
    runs = settings.get('vllm_switch_calibration_runs' if kind == 'calibrate' else 'vllm_switch_lifetime_runs', 1)
    workloads = []
    if enabled or kind == 'calibrate':
        try:
            workloads = benchmark_workloads(settings.get('vllm_switch_benchmark') or {}, default_repeats=_integer(runs))
        except WorkloadError as error:
            problems.append(str(error))
    model = settings.get('vllm_model') or {}
    client = node_url = None
    try:
        node_url = benchmark_endpoint(settings.get('vllm_host'), settings.get('vllm_port'), host, client='node',
                                      tls=_truthy(settings.get('vllm_switch_tls', False)))['base_url']
        if enabled or kind == 'calibrate':
            client = benchmark_client(settings, host, node_address=node_address, connection=connection)
    except BenchmarkClientError as error:
        problems.append(str(error))
    if problems:
        return {}, problems
    lifetimes = _integer(settings.get('vllm_switch_max_lifetimes', 10))
    trial = {
        'kind': kind, 'host': host, 'model': model.get('name'), 'variant': variant, 'baseline': baseline,
        'sides': {'baseline': specs[baseline], 'variant': specs[variant]},
        'units': {name: spec['unit_name'] for name, spec in specs.items()},
        'versions': {name: spec.get('vllm_version') for name, spec in specs.items()},
        'max_lifetimes': max(MIN_LIFETIMES, lifetimes),
        'keep_when': settings.get('vllm_switch_keep_when', 'not_slower'),
        'margin_pct': float(settings.get('vllm_switch_margin_pct', 8.0)),
        'slo': settings.get('vllm_switch_slo') or {},
        'workloads': workloads,
        'benchmark': enabled,
        'check_mode': bool(check_mode),
        'answer_check': _truthy(settings.get('vllm_switch_answer_check', True)) and kind != 'calibrate',
        'answer_tolerance': float(settings.get('vllm_switch_answer_tolerance', 0.25)),
        'accept_foreign_traffic': _truthy(settings.get('vllm_switch_accept_foreign_traffic', False)),
        'force': _truthy(settings.get('vllm_switch_force', False)),
        'unblock': _truthy(settings.get('vllm_switch_unblock', False)),
        'block_rolled_back': _truthy(settings.get('vllm_switch_block_rolled_back', False)),
        'decided_serves': settings.get('vllm_switch_decided_serves', 'baseline'),
        'kept_reason': settings.get('vllm_switch_kept_reason'),
        'fail_on_rollback': _truthy(settings.get('vllm_switch_fail_on_rollback', False)),
        'calibration_lifetimes': _integer(settings.get('vllm_switch_calibration_lifetimes', CALIBRATION_LIFETIMES)),
        'vllm_version': settings.get('vllm_version'),
        'expected_load_s': settings.get('vllm_expected_load_seconds'),
        'stream_tok_s': settings.get('vllm_switch_expected_stream_tok_s'),
        'phase_stall_timeouts': settings.get('vllm_switch_phase_stall_timeouts') or {},
        'max_dark_minutes': settings.get('vllm_switch_max_dark_minutes'),
        'expected_warm_restart_s': settings.get('vllm_switch_expected_warm_restart_s'),
    }
    return {'trial': trial, 'workloads': workloads, 'benchmark_client': client, 'node_url': node_url}, []


def _integer(value):
    # -e name=3 gives the string "3", which the role reads with | int.
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return value


def _workload_problems(settings, problems, check_replay_files):
    """Check every workload's options and SLO; return [(where, levels, slo)] or None when they cannot be read."""
    if 'vllm_switch_benchmark' not in settings or not _truthy(settings.get('vllm_switch_benchmark_enabled', True)):
        return None
    value = settings['vllm_switch_benchmark']
    try:
        min_runs = _integer(settings.get('vllm_switch_min_runs', 3))
        # A bad minimum is said once, by the decision's rule, not again as every workload's repeats.
        repeats = min_runs if isinstance(min_runs, int) and not isinstance(min_runs, bool) and min_runs >= 1 else None
        workloads = benchmark_workloads(value, default_repeats=repeats)
    except WorkloadError as error:
        problems.append(str(error))
        return None
    single = not isinstance(value, (list, tuple))
    checked = []
    for index, workload in enumerate(workloads):
        where = 'vllm_switch_benchmark' if single else 'vllm_switch_benchmark[%d]' % index
        levels = benchmark_option_problems(workload['options'], where, problems, check_replay_files)
        try:
            slo = merged_slo(None, workload['slo'], where + '.slo')
        except DecisionError as error:
            problems.append(str(error))
            slo = {}
        checked.append((where, levels, slo))
    return checked


def benchmark_option_problems(options: Mapping[str, t.Any], where: str, problems: list[str],
                              check_replay_files: bool = True) -> list[int]:
    """Append the problems of one workload's openai_benchmark options; return its concurrency levels.

    The types and defaults are the module's own argument spec, the ranges its own rules, so that
    the controller refuses exactly what the module would refuse on the node an hour later.
    """
    if 'prompt_set' in options and not isinstance(options['prompt_set'], str):
        problems.append('%s.prompt_set: must name a built-in prompt set or the path of a replay file, got %s'
                        % (where, plain_type_name(options['prompt_set'])))
        return []
    params = dict(_PLACEHOLDER_TARGET, **options)
    result = ArgumentSpecValidator(ARGUMENT_SPEC, required_by=REQUIRED_BY).validate(params)
    if result.error_messages:
        problems.extend('%s: %s' % (where, message) for message in result.error_messages)
        return []
    validated = result.validated_parameters
    problems.extend('%s.%s %s' % (where, name, rule) for name, rule in option_problems(validated))
    prompt_set = validated['prompt_set']
    if check_replay_files and prompt_set not in GENERATORS and prompt_set not in CHAT_GENERATORS:
        problems.extend(_replay_problems(prompt_set, where + '.prompt_set'))
    return [level for level in validated['concurrency'] if level >= 1]


def _replay_problems(path, where):
    try:
        read_replay_file(path)
    except OSError as error:
        known = ', '.join(sorted(GENERATORS) + sorted(CHAT_GENERATORS))
        return ['%s: %r is neither a built-in prompt set (%s) nor a replay file this controller can read (%s)'
                % (where, path, known, error.strerror or error)]
    except ReplayFileError as error:
        return ['%s: the replay file cannot be used: %s' % (where, error)]
    return []


def _slo_level_problems(general, workloads):
    """A limit for a concurrency level that no workload measures would never be checked: say so."""
    problems = []
    try:
        general_levels = sorted((check_slo(general).get('by_concurrency') or {}))
    except DecisionError:
        return problems  # Said by _decision_problems.
    measured = sorted({level for dummy, levels, dummy2 in workloads for level in levels})
    for level in general_levels:
        if measured and level not in measured:
            problems.append('vllm_switch_slo.by_concurrency.%d: no workload measures concurrency %d (they measure %s), '
                            'so this limit would never be checked' % (level, level, _levels(measured)))
    for where, levels, slo in workloads:
        for level in sorted(slo.get('by_concurrency') or {}):
            if levels and level not in levels:
                problems.append('%s.slo.by_concurrency.%d: this workload does not measure concurrency %d (it measures '
                                '%s), so this limit would never be checked' % (where, level, level, _levels(levels)))
    return problems


def _levels(levels):
    return ', '.join(str(level) for level in sorted(set(levels)))


def hook_problems(hook: t.Any, where: str) -> list[str]:
    """The rules of one operator hook: {} (none), {argv: [...]} (a command) or {url: ..., ...} (an HTTP call).

    A hook with neither argv nor url, or with a key the role does not read, would be skipped without
    a word, and a node that should leave the load balancer would keep its traffic through the trial.
    """
    if hook is None or (isinstance(hook, Mapping) and not hook):
        return []
    if not isinstance(hook, Mapping):
        return ['%s: must be a mapping, {argv: [...]} (a command) or {url: ...} (an HTTP call), got %s'
                % (where, plain_type_name(hook))]
    problems = []
    known = _COMMAND_KEYS + _HTTP_KEYS
    for key in hook:
        if key not in known:
            problems.append('%s.%s: unknown key%s; a hook takes argv (a command) or url, method, headers, body and '
                            'status_code (an HTTP call)' % (where, key, did_you_mean(str(key), known)))
    if 'argv' in hook and 'url' in hook:
        problems.append('%s: set argv (a command) or url (an HTTP call), not both' % where)
    elif 'argv' not in hook and 'url' not in hook:
        problems.append('%s: names neither argv (a command) nor url (an HTTP call), so it would never run' % where)
    if 'argv' in hook:
        argv = hook['argv']
        if (not isinstance(argv, (list, tuple)) or not argv
                or not all(isinstance(item, (str, int, float)) and not isinstance(item, bool) for item in argv)):
            problems.append('%s.argv: must be a non-empty list of strings, the command and its arguments (no shell), '
                            'got %r' % (where, argv))
        for key in _HTTP_KEYS[1:]:
            if key in hook:
                problems.append('%s.%s: applies to an HTTP call (url), not to a command (argv)' % (where, key))
    if 'url' in hook:
        problems.extend(_http_hook_problems(hook, where))
    return problems


def _http_hook_problems(hook, where):
    problems = []
    url = hook['url']
    if not isinstance(url, str) or not _URL.match(url):
        problems.append('%s.url: must be an http:// or https:// URL without whitespace, got %r' % (where, url))
    method = hook.get('method', 'POST')
    if not isinstance(method, str) or method.upper() not in _HTTP_METHODS:
        problems.append('%s.method: must be one of %s, got %r' % (where, ', '.join(_HTTP_METHODS), method))
    headers = hook.get('headers')
    if headers is not None and (not isinstance(headers, Mapping)
                                or not all(isinstance(value, (str, int, float)) for value in headers.values())):
        problems.append('%s.headers: must map header names to strings' % where)
    codes = hook.get('status_code', [200])
    codes = codes if isinstance(codes, (list, tuple)) else [codes]
    if not codes or not all(_integer(code) in range(100, 600) for code in codes):
        problems.append('%s.status_code: must be an HTTP status (100 to 599) or a list of them, got %r'
                        % (where, hook.get('status_code')))
    return problems


def secret_problems(secrets: t.Any) -> list[str]:
    """The rules of vllm_secret_environment, whose values are never quoted back.

    A value read from a file often keeps its trailing newline, which would become part of the key
    and make every request fail with 401 only after the switch.
    """
    if secrets is None:
        return []
    if not isinstance(secrets, Mapping):
        return ['vllm_secret_environment: must map environment variable names to secret values, got %s'
                % plain_type_name(secrets)]
    problems = []
    for name, value in secrets.items():
        here = 'vllm_secret_environment.%s' % name
        if not isinstance(value, (str, int)) or isinstance(value, bool):
            problems.append('%s: must be a string, got %s' % (here, plain_type_name(value)))
            continue
        text = str(value)
        if not text.strip():
            problems.append('%s: is empty' % here)
        elif text != text.strip():
            problems.append('%s: the value begins or ends with whitespace or a newline, which would become part of '
                            'the secret; strip it (for example with | trim)' % here)
        elif any(ord(character) < 32 or ord(character) == 127 for character in text):
            problems.append('%s: the value holds a control character, which an environment file cannot carry' % here)
    return problems


def constraint_problems(constraints: t.Any) -> list[str]:
    """The rules of vllm_pip_constraints: release -> list of requirement lines, none of which pip reads as an option."""
    if constraints is None:
        return []
    if not isinstance(constraints, Mapping):
        return ['vllm_pip_constraints: must map a vLLM release to a list of pins, got %s' % plain_type_name(constraints)]
    problems = []
    for release, lines in constraints.items():
        here = 'vllm_pip_constraints.%s' % release
        if not isinstance(lines, (list, tuple)):
            problems.append('%s: must be a list of pins such as "torch==2.13.0", got %s' % (here, plain_type_name(lines)))
            continue
        for index, line in enumerate(lines):
            where = '%s[%d]' % (here, index)
            if not isinstance(line, str) or '\n' in line or '\r' in line:
                problems.append('%s: must be one requirement on one line, got %r' % (where, line))
            elif line.strip().startswith('-'):
                problems.append('%s: %r is a pip option, not a pin; a constraints file takes only requirements '
                                '(put options in vllm_pip_extra_args)' % (where, line))
            elif not _REQUIREMENT.match(line.strip()):
                problems.append('%s: %r is not a requirement (a project name, then a version such as ==2.13.0)'
                                % (where, line))
    return problems


def _tls_problems(settings):
    problems = []
    ca_path = settings.get('vllm_switch_ca_path')
    if ca_path not in (None, '') and (not isinstance(ca_path, str) or not os.path.isabs(ca_path)):
        problems.append('vllm_switch_ca_path: must be an absolute path of a PEM file (or empty for the system CAs), '
                        'got %r' % (ca_path,))
    places = [('vllm_serve_args', settings.get('vllm_serve_args'))]
    variants = settings.get('vllm_variants')
    if isinstance(variants, Mapping):
        places.extend(('vllm_variants.%s.serve_args' % name, (overrides or {}).get('serve_args'))
                      for name, overrides in variants.items() if isinstance(overrides, Mapping))
    for where, serve_args in places:
        if not isinstance(serve_args, Mapping):
            continue
        for key in _TLS_ARGS:
            path = serve_args.get(key)
            if path is not None and (not isinstance(path, str) or not os.path.isabs(path)):
                problems.append('%s.%s: must be an absolute path on the node (the unit runs from /), got %r'
                                % (where, key, path))
        if serve_args.get('ssl_certfile') and not serve_args.get('ssl_keyfile'):
            problems.append('%s.ssl_keyfile: required with ssl_certfile, or the server cannot serve https' % where)
    return problems


def _truthy(value):
    if isinstance(value, str):
        return value.strip().lower() in ('1', 'true', 'yes', 'on', 'y', 't')
    return bool(value)


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """'; did you mean X?' for the nearest known name, or '' when none is near."""
    nearest = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    return '; did you mean %s?' % nearest[0] if nearest else ''


def drain_warnings(settings: Mapping[str, t.Any]) -> list[str]:
    """A drain shorter than the longest answer the workloads allow, at the node's stream speed, cuts answers off.

    The longest answer is a workload's max_tokens at vllm_switch_expected_stream_tok_s; without that speed nothing
    is said. Only a warning: an operator may choose to cut the longest answers rather than wait for them.
    """
    speed, value = settings.get('vllm_switch_expected_stream_tok_s'), settings.get('vllm_switch_benchmark')
    if 'vllm_switch_drain_timeout' in settings:
        drain = _integer(settings['vllm_switch_drain_timeout'])
    else:
        # The role's own default, declared once in its argument spec.
        drain = role_argument_specs()['vllm_switch']['vllm_switch_drain_timeout']['default']
    try:
        speed = float(speed)
        workloads = benchmark_workloads(value or {}, default_repeats=1)
    except (TypeError, ValueError, WorkloadError):
        return []
    if speed <= 0 or isinstance(drain, bool) or not isinstance(drain, int):
        return []
    longest = max(workloads, key=lambda workload: int(workload['options'].get('max_tokens') or ARGUMENT_SPEC[
        'max_tokens']['default']))
    tokens = int(longest['options'].get('max_tokens') or ARGUMENT_SPEC['max_tokens']['default'])
    seconds = tokens / speed
    if drain >= seconds:
        return []
    return ['vllm_switch_drain_timeout=%d s is shorter than the longest answer the workloads allow: workload %s\'s '
            'max_tokens %d at %g tok/s a stream (vllm_switch_expected_stream_tok_s) takes %.0f s, so a request still '
            'answering when the drain ends is cut off by the stop' % (drain, longest['name'], tokens, speed, seconds)]


def unknown_variable_warnings(names: Iterable[str], known: Iterable[str], prefix: str = 'vllm_') -> list[str]:
    """A warning for each name with the collection's prefix that no role or playbook of it reads.

    Such a name is most often a typo (vllm_switch_marign_pct), and the setting it was meant to
    change silently keeps its default; the warning names the nearest known variable.
    """
    known = sorted(set(known))
    warnings = []
    for name in sorted(set(names)):
        if name.startswith(prefix) and name not in known:
            warnings.append('%s: no role or playbook of llmops.vllm reads this variable%s'
                            % (name, did_you_mean(name, known) or ' (a typo?)'))
    return warnings
