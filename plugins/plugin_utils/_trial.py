# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""One switch of a node, a trial above all, as one state document that advance() moves on one step at a time.

The role takes the step that the state names (``next``), does its side effects on the node, and gives advance()
what the step found; advance() folds that into the state and names the next step. Everything that decides lives
here: the order of the steps, which lifetimes a trial measures, when a look decides, what a failure at each step
leads to, and what the trial's record says. Nothing of a trial lives in the play's facts but this document, so a
whole trial can be replayed from canned step results (tests/unit/plugins/plugin_utils/test_trial_replay.py).

A switch runs in one of these modes, chosen once the node has been read (the ``inspect`` step, after ``lock``):

- trial: a variant against the baseline. Check the variant while the baseline serves, make sure the baseline
  serves, begin (prefetch the variant's weights; the record that a trial is under way, written before anything
  stops), then pairs of server lifetimes: restart the baseline warm and benchmark it, serve the variant (a cold load
  first, a warm start after) and benchmark it, and after every pair look (_lifetime_decision.decide): keep, roll
  back, or another pair, up to max_lifetimes a side. The first lifetime of each side also has its greedy answers
  read. Then the variant is enabled at boot (persist), or the baseline served again and enabled, and the trial is
  recorded. A failure once the trial has begun rolls back to the baseline; any earlier failure stops the run with
  nothing stopped.
- baseline: the target is the baseline (an operator's rollback): the variants it pulls are recorded (blocked, or
  pulled), then the baseline serves and is enabled at boot.
- confirm: the target already serves as its trial left it: its readiness is confirmed and it stays enabled.
- report: the target's trial was decided with this very identity and it does not run: the decision is reported
  and what serves after it is made to (the baseline, or the kept target when an experiment asks for it).
- calibrate: the serving baseline is restarted warm calibration_lifetimes times and benchmarked each time; the
  spread of its lifetimes is summarised and added to the node's history.

Each step's result is a mapping. A failed step gives ``failed: true`` with ``msg`` and whatever the failing task
returned (failure_of() keeps what says why: the fatal journal line, the stall, the GPU holders), and
``unit_states``, what runs after the failure, which the rollback starts from. The steps and their results:

- lock: ``holder``, the switch lock's holder.
- inspect: ``unit_states`` (what ``systemctl is-active`` says of each of the model's units, in the order of the
  state's ``units``), ``sha256sum`` (the lines ``sha256sum`` printed for the files that ``next.files`` names; a
  missing file prints none), ``records`` (the latest record of each variant) and ``history`` (the node's history).
- check: ``weights``, the directories the variant loads, which begin reads into the page cache.
- serve: ``ready`` (what the readiness wait found) and ``invocation`` (systemd's InvocationID of the unit that
  serves, which tells its lifetimes apart).
- benchmark: ``benchmark``, one workload's openai_benchmark result (a failed one fails the step, once stored).
- answers: ``answers``, the answer_check results of every workload.
- begin, record: ``record``, the record as the node wrote it.
- persist: nothing.

After each step, ``report`` holds what the operator reads, and ``store`` what the controller's results store takes
(a benchmark, the decision, a history line): the role shows and stores them, and nothing else builds them.
"""

from __future__ import annotations

import copy
import datetime
import typing as t
from collections.abc import Mapping, Sequence

from ansible_collections.llmops.vllm.plugins.plugin_utils import _lifetime_decision as decision
from ansible_collections.llmops.vllm.plugins.plugin_utils._calibration import CalibrationError, calibrate_levels, cold_loads
from ansible_collections.llmops.vllm.plugins.plugin_utils._dark_window import (
    DarkWindowError,
    benchmark_timing,
    budget_refusal,
    calibration_refusal,
)
from ansible_collections.llmops.vllm.plugins.plugin_utils._dark_window import plan as dark_window_plan
from ansible_collections.llmops.vllm.plugins.plugin_utils._decision import DECISION_KEYS, DecisionError, history_from_node
from ansible_collections.llmops.vllm.plugins.plugin_utils._stall_limits import phase_stall_limits
from ansible_collections.llmops.vllm.plugins.plugin_utils._trial_identity import (
    TrialIdentityError,
    parts_of_spec,
    trial_identity,
    trial_state,
)

VERSION = 1
SIDES = ('baseline', 'variant')
# What each step does; the role has one task file per step it takes (stop and done end its loop).
STEPS = {
    'lock': "takes the node's switch lock",
    'inspect': 'reads what runs, the unit and environment files and the trial records',
    'check': 'checks the variant (its weights, the GPUs, its arguments) while the baseline serves',
    'serve': 'makes one side the unit that serves: starts it, restarts it for a new lifetime, or waits for it',
    'benchmark': 'benchmarks one workload on the side that serves',
    'answers': "reads the side's greedy answers to each workload's first requests",
    'begin': "reads the variant's weights into the page cache and records that the trial is under way",
    'persist': 'enables at boot the unit that serves, and no other unit of the model',
    'record': "writes the record that the step carries on the node (the variant's latest, or the history alone)",
    'stop': 'ends the run as failed, with what went wrong',
    'done': 'nothing is left to do',
}
MIN_LIFETIMES = 1
MAX_LIFETIMES = 12
# What of a failed task says why it failed: the records keep these.
FAILURE_KEYS = ('msg', 'elapsed', 'crash_noticed_after', 'fatal_line', 'fatal_cause', 'journal', 'unit_state',
                'processes', 'gpus', 'stalled', 'last_progress_line', 'last_progress_phase', 'seconds_since_progress',
                'stall_limit', 'stalled_phase', 'repeated_line')
# Steps after which a failure, once the trial has begun and before it is decided, puts the baseline back.
_ROLLS_BACK = ('serve', 'benchmark', 'answers')
_OUTCOMES_ON_TEXTFILE = ('kept', 'rolled_back', 'failed', 'fell_back', 'blocked', 'pulled', 'unchanged')


class TrialError(ValueError):
    """The state or a step's result cannot be read; the message says what is wrong."""


def _stamp(now: float) -> str:
    """A time as the records write it: UTC, with its zone written out."""
    return datetime.datetime.fromtimestamp(now, datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%S+00:00')


def _unit_of(state: Mapping[str, t.Any], side: str) -> str:
    return state['sides'][side]['unit_name']


def _name_of(state: Mapping[str, t.Any], side: str) -> str:
    return state['variant'] if side == 'variant' else state['baseline']


def step_limit(settings: Mapping[str, t.Any], units: int) -> int:
    """The most steps a switch can take: a state that asks for more has gone round in a circle."""
    workloads = max(1, len(settings.get('workloads') or ()))
    if settings.get('kind') == 'calibrate':
        # lock, inspect; per lifetime a serve and the benchmarks; the record.
        return 3 + int(settings['calibration_lifetimes']) * (1 + workloads)
    lifetimes = int(settings['max_lifetimes'])
    # lock, inspect, the pulled variants' records, check, serve, begin; per pair two serves and the benchmarks; the
    # answers of the first pair; then the serve of a rollback, persist and record.
    return 6 + units + lifetimes * (2 + 2 * workloads) + 2 + 3


def check_settings(settings: t.Any) -> dict[str, t.Any]:
    """The settings of a switch, checked: what new() needs to plan it."""
    if not isinstance(settings, Mapping):
        raise TrialError(f'the settings must be a mapping, got {type(settings).__name__}')
    missing = [name for name in ('variant', 'baseline', 'sides', 'units', 'model', 'host') if not settings.get(name)]
    if missing:
        raise TrialError(f'the settings lack {", ".join(missing)}')
    settings = dict(settings)
    settings.setdefault('kind', 'switch')
    if settings['kind'] not in ('switch', 'calibrate'):
        raise TrialError(f"the settings' kind must be switch or calibrate, got {settings['kind']!r}")
    for side in SIDES:
        spec = (settings['sides'] or {}).get(side)
        if not isinstance(spec, Mapping) or not spec.get('unit_name'):
            raise TrialError(f'the settings need the {side}\'s spec, with its unit_name')
    lifetimes = settings.get('max_lifetimes', 10)
    if isinstance(lifetimes, str) and lifetimes.strip().isdigit():
        lifetimes = int(lifetimes)
    if isinstance(lifetimes, bool) or not isinstance(lifetimes, int) or not MIN_LIFETIMES <= lifetimes <= MAX_LIFETIMES:
        raise TrialError(f'max_lifetimes must be a whole number from {MIN_LIFETIMES} to {MAX_LIFETIMES}, '
                         f'got {lifetimes!r}')
    settings['max_lifetimes'] = lifetimes
    settings['calibration_lifetimes'] = int(settings.get('calibration_lifetimes') or 0)
    settings.setdefault('workloads', [])
    for name in ('benchmark', 'check_mode', 'answer_check', 'force', 'unblock', 'block_rolled_back',
                 'accept_foreign_traffic'):
        settings[name] = bool(settings.get(name, name in ('benchmark', 'answer_check')))
    settings.setdefault('decided_serves', 'baseline')
    return settings


def new(settings: t.Any, now: float) -> dict[str, t.Any]:
    """The state of a switch that has not begun: its first step takes the node's lock."""
    settings = check_settings(settings)
    state: dict[str, t.Any] = {
        'version': VERSION,
        'kind': settings['kind'],
        'host': settings['host'],
        'model': settings['model'],
        'variant': settings['variant'],
        'baseline': settings['baseline'],
        'sides': {side: dict(settings['sides'][side]) for side in SIDES},
        'units': dict(settings['units']),
        'versions': dict(settings.get('versions') or {}),
        'settings': {name: value for name, value in settings.items()
                     if name not in ('sides', 'units', 'versions', 'variant', 'baseline', 'model', 'host', 'kind')},
        'mode': None,
        'locked': False,
        'holder': None,
        'active': [],
        'checksums': {},
        'installed': [],
        'weights': [],
        'identities': {},
        'target_record': {},
        'trial_state': None,
        'history': [],
        'cold_loads': [],
        'dark': {'out': False, 'since': None, 'plan': {}},
        'queue': [],
        'steps': [],
        'lifetimes': [],
        'pending': None,
        'answers': {},
        'looks': [],
        'starts': [],
        'served_since': None,
        'pair_since': None,
        'issued_at': now,
        'started_at': None,
        'begun': False,
        'decision': None,
        'calibration': None,
        'failure': None,
        'outcome': None,
        'reason': None,
        'run_outcome': {'variant': settings['variant'], 'outcome': 'unchanged',
                        'reason': 'no trial ran (the target already runs, or was decided earlier)'},
        'step_limit': step_limit(settings, len(settings['units'])),
        'report': [],
        'store': {},
        'next': {'step': 'lock', 'side': None, 'out_of_service': False, 'drain': False},
    }
    return state


def _bound_steps(state: dict[str, t.Any]) -> None:
    """Once the node is read the mode is known: a switch that is no trial takes only the steps it has queued."""
    if state['mode'] in ('baseline', 'confirm', 'report') or state['next']['step'] in ('done', 'stop'):
        state['step_limit'] = len(state['steps']) + len(state['queue']) + 1


def advance(state: t.Any, result: t.Any, now: float) -> dict[str, t.Any]:
    """The state once the step it named has given its result; its ``next`` names the step after."""
    if not isinstance(state, Mapping) or state.get('version') != VERSION or not isinstance(state.get('next'), Mapping):
        raise TrialError('the state is not one that new() or advance() returned')
    state = copy.deepcopy(dict(state))
    step = state['next']
    if step['step'] in ('stop', 'done'):
        raise TrialError(f'the switch has ended ({step["step"]}); no step follows')
    result = dict(result or {}) if isinstance(result, Mapping) else None
    if result is None:
        raise TrialError('a step\'s result must be a mapping')
    if len(state['steps']) >= state['step_limit']:
        raise TrialError(f'the switch took {len(state["steps"])} steps without an end; the last was {step["step"]}')
    failed = bool(result.get('failed'))
    state['report'] = []
    state['store'] = {}
    state['steps'].append({'step': step['step'], 'side': step.get('side'),
                           'workload': (step.get('workload') or {}).get('name'),
                           'failed': failed, 'msg': str(result.get('msg') or '') if failed else None,
                           'seconds': round(max(0.0, now - state['issued_at']), 1)})
    if isinstance(result.get('unit_states'), list):
        state['active'] = running_units(state, result['unit_states'])
    if failed:
        _after_failure(state, step, result, now)
    else:
        _AFTER[step['step']](state, step, result, now)
    if step['step'] == 'inspect':
        _bound_steps(state)
    return state


# --- what follows each step ------------------------------------------------------------------------------------


def _issue(state: dict[str, t.Any], now: float, step: str, side: str | None = None, **details: t.Any) -> None:
    """Name the next step, and whether the node must first go out of service (once a run) and drain."""
    following = {'step': step, 'side': side, **details}
    if step == 'serve':
        following['unit'] = _unit_of(state, side)
        following['variant_name'] = _name_of(state, side)
        following.setdefault('restart', False)
        # A start that puts the baseline back (after a trial that did not keep its variant, or an operator's rollback)
        # is never failed for a stall alone: that would leave nothing serving. It waits up to the readiness timeout
        # while its unit lives.
        puts_back = details.get('rolling_back') or state['mode'] == 'baseline'
        following['stall_check'] = not (side == 'baseline' and puts_back)
        following['phase_stall_timeouts'] = dict(state.get('phase_stall_timeouts')
                                                 or state['settings'].get('phase_stall_timeouts') or {})
    if step == 'persist':
        following['disable'] = [unit for unit in state['units'].values()
                                if unit not in state['active'] and unit in state['installed']]
    dark = False
    if not state['settings']['check_mode']:
        if step == 'serve':
            others = [unit for unit in state['active'] if unit != following['unit']]
            dark = bool(others) or (following['restart'] and following['unit'] in state['active'])
        elif step == 'benchmark':
            dark = True
    if dark and not state['dark']['out']:
        following['out_of_service'] = True
        following['notice'] = _notice(state, now, 'dark', 'out of service', (state['active'] or [None])[0])
        state['dark']['out'] = True
        if state['dark']['since'] is None:
            state['dark']['since'] = now
    else:
        following['out_of_service'] = False
    following['drain'] = (step == 'benchmark' and side == 'baseline' and not state['settings']['check_mode']
                          and details.get('workload_index') == 0)
    state['next'] = following
    state['issued_at'] = now


def _stop(state: dict[str, t.Any], now: float, msg: str) -> None:
    _issue(state, now, 'stop', msg=msg)


def _next_in_queue(state: dict[str, t.Any], now: float) -> None:
    """The next step that was queued (an operator's rollback, a report, the end of a trial), or done."""
    if not state['queue']:
        _issue(state, now, 'done')
        return
    following = dict(state['queue'].pop(0))
    name, side = following.pop('step'), following.pop('side', None)
    if name == 'record' and 'record' not in following:
        following['record'] = _trial_record(state, now, state['outcome'], state['reason'])
    _issue(state, now, name, side, **following)


# What `systemctl is-active` says of a unit that runs, or is on its way to running.
_RUNNING = ('active', 'activating', 'reloading')


def running_units(state: Mapping[str, t.Any], unit_states: Sequence[t.Any]) -> list[str]:
    """The model's units that run, from `systemctl is-active`'s words for them, in the order of the state's units."""
    units = list(state['units'].values())
    if len(unit_states) != len(units):
        raise TrialError(f'systemctl is-active named {len(unit_states)} states for the model\'s {len(units)} units')
    return [unit for unit, word in zip(units, unit_states) if str(word).strip() in _RUNNING]


def checksums_of(lines: Sequence[t.Any]) -> dict[str, str]:
    """path -> sha256, from the lines `sha256sum` prints (a binary-mode line marks its path with '*')."""
    checksums = {}
    for line in lines:
        digest, separator, path = str(line).partition(' ')
        if separator and len(digest) == 64:
            checksums[path[1:] if path[:1] in (' ', '*') else path] = digest
    return checksums


def _files(state) -> list[str]:
    """The unit files of the model and the environment files of both sides, which the inspect step checksums."""
    files = [_UNIT_DIR + unit for unit in state['units'].values()]
    files += [state['sides'][side]['env_file'] for side in SIDES if state['sides'][side].get('env_file')]
    return sorted(set(files))


_UNIT_DIR = '/etc/systemd/system/'


def _after_lock(state, step, result, now):
    state['locked'] = True
    state['holder'] = dict(result.get('holder') or {})
    _issue(state, now, 'inspect', files=_files(state))


def _after_inspect(state, step, result, now):
    settings = state['settings']
    state['checksums'] = checksums_of(result.get('sha256sum') or [])
    state['installed'] = [unit for unit in state['units'].values() if _UNIT_DIR + unit in state['checksums']]
    records = result.get('records') or {}
    history = [entry for entry in result.get('history') or [] if isinstance(entry, Mapping)]
    target_side = 'baseline' if state['variant'] == state['baseline'] else 'variant'
    target = state['sides'][target_side]
    state['target_record'] = dict(records.get(state['variant']) or {})
    if _unit_of(state, target_side) not in state['installed']:
        _stop(state, now, f"vllm_variant={state['variant']}: {target['unit_name']} is not installed on {state['host']}; "
                          'deploy it first with the llmops.vllm.vllm_service role.')
        return
    for side in SIDES:
        state['identities'][side] = _identity(state, side, state['target_record'] if side == target_side else None)
    baseline = state['identities']['baseline']
    state['history'] = history_from_node(history, baseline=state['baseline'],
                                         unit_checksum=baseline['unit_checksum'], identity=baseline['sha256'])
    # The silent phases' stall limits, from this node's own recorded starts where it has them.
    state['phase_stall_timeouts'] = phase_stall_limits(history, settings.get('phase_stall_timeouts') or {})
    if state['kind'] == 'calibrate':
        _inspected_for_calibration(state, history, records, now)
        return
    running = _unit_of(state, target_side) in state['active']
    try:
        target_state = trial_state(state['target_record'], state['identities'][target_side],
                                   state['identities'][target_side]['unit_checksum'], running=running,
                                   baseline=target_side == 'baseline', force=settings['force'],
                                   decided_serves=settings['decided_serves'],
                                   others_running=any(unit != _unit_of(state, target_side) for unit in state['active']))
    except TrialIdentityError as error:
        raise TrialError(str(error)) from None
    state['trial_state'] = target_state
    record = state['target_record']
    if target_side == 'variant' and record.get('outcome') == 'blocked' and not settings['unblock']:
        _stop(state, now, f"{state['variant']} is blocked on {state['host']}: {record.get('reason')}. Nothing was changed; "
                          'set vllm_switch_unblock=true to try it again.')
        return
    if target_state['reopened']:
        state['report'].append(
            f"{state['variant']} was {str(record.get('outcome')).replace('_', ' ')} on {record.get('finished_at')}; its "
            f"{', '.join(target_state['reopened'])} changed since, so the trial is open again.")
    if target_side == 'baseline':
        _inspected_for_baseline(state, now)
    elif target_state['action'] == 'confirm':
        # The target serves as its trial left it: its readiness is confirmed and it stays enabled at boot.
        state['mode'] = 'confirm'
        state['queue'].append({'step': 'persist'})
        _issue(state, now, 'serve', 'variant')
    elif target_state['action'] == 'report':
        _inspected_for_report(state, now)
    else:
        state['report'].extend(_retried_lines(state))
        state['mode'] = 'trial'
        _plan_dark_window(state, records, now)
        if state['next']['step'] != 'stop':
            _issue(state, now, 'check', 'variant')


def _identity(state, side, recorded):
    spec = state['sides'][side]
    unit = state['checksums'].get(_UNIT_DIR + spec['unit_name'])
    environment = state['checksums'].get(spec.get('env_file')) if spec.get('env_file') else None
    try:
        identity = trial_identity(parts_of_spec(spec, unit, environment, state['settings'].get('vllm_version')),
                                  (recorded or {}).get('identity'))
    except TrialIdentityError as error:
        raise TrialError(str(error)) from None
    return dict(identity, unit_checksum=unit)


def _retried_lines(state):
    target_state, record = state['trial_state'], state['target_record']
    unit = _unit_of(state, 'variant')
    identity = state['identities']['variant']
    if target_state['retried'] == 'stale':
        parts = ', '.join(identity['changed']) if identity['changed'] else 'unit file'
        return [f"{unit} runs what was kept on {record.get('finished_at')}, but its {parts} changed since; it is tried "
                f"again against {state['baseline']}."]
    if target_state['retried'] == 'forced':
        last = ('last trial: ' + str(record['outcome']).replace('_', ' ')) if record.get('outcome') else 'no trial recorded'
        return [f"{unit} runs ({last}); vllm_switch_force is set, so it is tried again against {state['baseline']}."]
    if target_state['retried'] == 'interrupted':
        left = 'it was left running undecided, and ' if unit in state['active'] else ''
        return [f"The trial of {state['variant']} started at {record.get('started_at')} by "
                f"{record.get('started_by') or 'an earlier run'} never finished (the run was interrupted); {left}it is "
                f"tried again against {state['baseline']}."]
    return []


def dark_budget(settings: Mapping[str, t.Any]) -> float | None:
    """The most minutes a trial may keep the node out of service (vllm_switch_max_dark_minutes); None for no budget."""
    budget = settings.get('max_dark_minutes')
    return None if budget in (None, '', 0) else float(budget)


def _planned(state, records, variant, max_lifetimes):
    """The dark window's plan of ``variant`` against the baseline, from the node's records and the settings."""
    settings = state['settings']
    try:
        return dark_window_plan(records, baseline=state['baseline'], variant=variant, workloads=settings['workloads'],
                                max_lifetimes=max_lifetimes, expected_load_s=settings.get('expected_load_s'),
                                stream_tok_s=settings.get('stream_tok_s'),
                                expected_warm_restart_s=settings.get('expected_warm_restart_s'))
    except DarkWindowError as error:
        raise TrialError(str(error)) from None


def _plan_dark_window(state, records, now):
    settings = state['settings']
    if settings['check_mode'] or not settings['benchmark']:
        return
    plan = _planned(state, records, state['variant'], settings['max_lifetimes'])
    state['dark']['plan'] = plan
    state['report'].extend(plan['lines'])
    refusal = budget_refusal(plan, dark_budget(settings), state['variant'])
    if refusal:
        _stop(state, now, refusal)


def _inspected_for_baseline(state, now):
    """An operator's rollback records the variants it pulls, then makes the baseline serve and enables it at boot."""
    state['mode'] = 'baseline'
    settings = state['settings']
    for name, unit in state['units'].items():
        if unit in state['active'] and name != state['baseline']:
            outcome = 'blocked' if settings['block_rolled_back'] else 'pulled'
            reason = (f'rolled back by operator {_holder_words(state)} at {_stamp(now)}'
                      f'{"" if settings["block_rolled_back"] else ", not blocked"}')
            state['queue'].append({'step': 'record', 'latest': True, 'record': _record_document(
                state, now, variant=name, unit=unit, unit_checksum=state['checksums'].get(_UNIT_DIR + unit),
                outcome=outcome, reason=reason, identity=None, vllm_version=state['versions'].get(name),
                started_at=_stamp(now))})
    state['queue'].extend([{'step': 'serve', 'side': 'baseline'}, {'step': 'persist'}])
    _next_in_queue(state, now)


def _inspected_for_report(state, now):
    """A target decided with this very identity that does not run: what serves after it is made to serve."""
    state['mode'] = 'report'
    target_state, record = state['trial_state'], state['target_record']
    identity = state['identities']['variant']
    serves = {'target': state['variant'], 'baseline': state['baseline']}.get(
        target_state['serves'], ', '.join(state['active']) or 'nothing')
    state['report'].append(
        f"{state['variant']} was already tried as trial {identity['short']} (this unit, environment, vLLM version and "
        f"weights) on {record.get('finished_at')}: {str(record.get('outcome')).replace('_', ' ')} ({record.get('reason')}). "
        f"{serves} serves. Set vllm_switch_force=true to try again.")
    if target_state['serves'] == 'baseline' and _unit_of(state, 'baseline') not in state['active']:
        state['queue'].append({'step': 'serve', 'side': 'baseline'})
    elif target_state['serves'] == 'target':
        # The trial's record stays as it was (its decision is what the target serves on); the switch joins the history.
        reason = f"served again, as kept by trial {identity['short']} on {record.get('finished_at')}"
        entry = dict(record, reason=reason, run_id=state['holder'].get('run_id'),
                     playbook=state['holder'].get('playbook'), started_by=_holder_words(state), recorded_at=_stamp(now))
        state['queue'].extend([{'step': 'serve', 'side': 'variant'}, {'step': 'persist'},
                               {'step': 'record', 'latest': False, 'record': entry}])
        state['run_outcome'] = {'variant': state['variant'], 'outcome': 'kept', 'reason': reason}
    _next_in_queue(state, now)


def _inspected_for_calibration(state, history, records, now):
    state['mode'] = 'calibrate'
    if state['variant'] != state['baseline']:
        _stop(state, now, f"vllm_variant is {state['variant']}, but a calibration measures the baseline "
                          f"({state['baseline']}); leave vllm_variant unset. Nothing was changed.")
        return
    unit = _unit_of(state, 'baseline')
    if state['active'] != [unit]:
        _stop(state, now, f"The calibration restarts {unit}, but it does not serve on {state['host']} "
                          f"({', '.join(state['active']) or 'no unit of the model'} runs). Switch to {state['baseline']} "
                          'first (ansible-playbook llmops.vllm.rollback); nothing was changed.')
        return
    state['cold_loads'] = cold_loads(history, state['baseline'])
    if state['settings']['check_mode']:
        _issue(state, now, 'done')
        return
    refusal = _calibration_over_budget(state, records)
    if refusal:
        _stop(state, now, refusal)
        return
    _serve_for_lifetime(state, now, 'baseline')


def _calibration_over_budget(state, records):
    """Why a calibration does not fit the dark-minutes budget, or None: its restarts are each a stop, a warm
    restart and a benchmark of the baseline, planned from the node's own figures as a trial's are."""
    budget = dark_budget(state['settings'])
    if budget is None:
        return None
    plan = _planned(state, records, state['baseline'], 1)
    return calibration_refusal(plan, state['settings']['calibration_lifetimes'], budget)


def _after_check(state, step, result, now):
    state['weights'] = [str(path) for path in result.get('weights') or [] if path]
    _issue(state, now, 'serve', 'baseline')


def _after_begin(state, step, result, now):
    state['begun'] = True
    state['store'] = {'history': result.get('record') or step.get('record')}
    if not _benchmarked(state):
        _issue(state, now, 'serve', 'variant')
        return
    _serve_for_lifetime(state, now, 'baseline')


def _benchmarked(state) -> bool:
    return state['settings']['benchmark'] and not state['settings']['check_mode']


def _serve_for_lifetime(state, now, side):
    """A new lifetime of a side: the baseline restarts warm, the variant loads (cold the first time, warm after)."""
    if side == 'baseline':
        state['pair_since'] = now
    _issue(state, now, 'serve', side, restart=_unit_of(state, side) in state['active'])


def _after_serve(state, step, result, now):
    side = step['side']
    ready = result.get('ready') if isinstance(result.get('ready'), Mapping) else {}
    state['served_since'] = now
    # In check mode too: what a real run would have serving is what the later steps of the check look at.
    state['active'] = [step['unit']]
    phases = ready.get('start_phases')
    if isinstance(phases, list) and phases:
        last = phases[-1] if isinstance(phases[-1], Mapping) else {}
        state['starts'].append({'unit': step['unit'], 'variant': step['variant_name'], 'phases': phases,
                                'summary': ready.get('start_summary'), 'seconds': last.get('ended_at_s'),
                                'kv_cache': ready.get('kv_cache')})
    state['sides'][side]['served_version'] = ready.get('version')
    state['sides'][side]['invocation'] = result.get('invocation') or None
    if state['mode'] not in ('trial', 'calibrate') or state['outcome'] is not None:
        # A report, a confirmation, an operator's rollback, or the rollback or keep that ends a trial.
        _next_in_queue(state, now)
        return
    if state['mode'] == 'calibrate' or (state['begun'] and _benchmarked(state)):
        state['pending'] = {'side': side, 'invocation': state['sides'][side]['invocation'], 'benchmark': [],
                            'began': now}
        _issue_benchmark(state, now, side, 0)
        return
    if not state['begun']:
        _issue(state, now, 'begin', paths=state.get('weights') or [],
               record=_trial_record(state, now, 'in_progress', 'the trial has started and is not decided yet'))
        return
    # Served without a benchmark (benchmarks off, or check mode): the variant is kept as the trial found it.
    _end_trial(state, now, 'kept', state['settings'].get('kept_reason') or 'kept')


def _issue_benchmark(state, now, side, index):
    workload = state['settings']['workloads'][index]
    spec = state['sides'][side]
    identity = state['identities'].get(side) or {}
    labels = {
        'model': state['model'], 'variant': _name_of(state, side), 'workload': workload['name'],
        'unit_checksum': identity.get('unit_checksum'), 'trial_identity': identity.get('sha256'),
        'vllm_version': spec.get('served_version'), 'speculative_config': spec.get('speculative_config'),
        'argv': spec.get('argv'), 'lifetime': spec.get('invocation'),
    }
    # Beside Ansible's own job files, under a name that no other benchmark of this run takes.
    progress = f"llmops_vllm_benchmark_{state['host']}_{_name_of(state, side)}_{workload['name']}_{int(now * 1000)}.json"
    _issue(state, now, 'benchmark', side, workload=workload, workload_index=index, labels=labels,
           progress_name=progress.replace('/', '_'))


def _after_benchmark(state, step, result, now):
    side = step['side']
    benchmark = result.get('benchmark')
    if not isinstance(benchmark, Mapping):
        _after_failure(state, step, {'msg': f'the benchmark of {_name_of(state, side)} gave no result within its time '
                                            'limit'}, now)
        return
    # Stored whatever it says: the partial result of a server that died mid-benchmark shows what failed.
    state['store'] = {'benchmark': benchmark, 'task': f'Benchmark {_name_of(state, side)}'}
    if benchmark.get('failed'):
        _after_failure(state, step, {'msg': benchmark.get('msg') or 'the benchmark failed without a message'}, now)
        return
    state['pending']['benchmark'].append(dict(benchmark))
    levels = [level for level in benchmark.get('results') or [] if isinstance(level, Mapping)]
    failed = sum(int(level.get('failed') or 0) for level in levels)
    if side == 'variant' and failed and state['mode'] == 'trial':
        errors = [level.get('errors') or {} for level in levels]
        _after_failure(state, step, {'msg': f"{state['variant']} failed {failed} requests during its benchmark: {errors}"},
                       now)
        return
    index = step['workload_index'] + 1
    if index < len(state['settings']['workloads']):
        _issue_benchmark(state, now, side, index)
        return
    lifetime = state['pending']
    state['pending'] = None
    # Its uptime is how long the server had served when its benchmark began.
    state['lifetimes'].append({'side': side, 'benchmark': lifetime['benchmark'], 'invocation': lifetime['invocation'],
                               'uptime_s': round(max(0.0, lifetime['began'] - state['served_since']), 1),
                               'seconds': round(now - lifetime['began'], 1)})
    if state['mode'] == 'calibrate':
        _after_calibration_lifetime(state, now)
        return
    clean = not any(int(level.get('failed') or 0) for result in lifetime['benchmark']
                    for level in result.get('results') or [] if isinstance(level, Mapping))
    # The greedy answers are read once a side, in the first pair: a later lifetime answers alike.
    if state['settings']['answer_check'] and side not in state['answers'] and clean:
        _issue(state, now, 'answers', side, variant_name=_name_of(state, side))
        return
    _after_lifetime(state, now, side)


def _after_answers(state, step, result, now):
    state['answers'][step['side']] = result.get('answers')
    _after_lifetime(state, now, step['side'])


def _after_lifetime(state, now, side):
    """After the baseline's lifetime the variant's; after the variant's, the look at the pair (decide)."""
    if side == 'baseline':
        _serve_for_lifetime(state, now, 'variant')
        return
    try:
        answer = decision.decide(state)
    except DecisionError as error:
        raise TrialError(f'the decision cannot be made: {error}') from None
    dark_seconds = None if state['dark']['since'] is None else now - state['dark']['since']
    pair_seconds = None if state['pair_since'] is None else now - state['pair_since']
    answer['dark_minutes'] = None if dark_seconds is None else round(dark_seconds / 60, 2)
    answer['pair_minutes'] = None if pair_seconds is None else round(pair_seconds / 60, 2)
    answer['report'] = decision.report_lines(answer, dark_seconds, pair_seconds)
    state['decision'] = {key: answer.get(key) for key in DECISION_KEYS if key in answer}
    state['looks'].append(answer['report'])
    state['report'] = list(answer['report'])
    if answer['decision'] == decision.ANOTHER_PAIR:
        cut = _budget_cut(state, dark_seconds_so_far=dark_seconds, pair_seconds=pair_seconds)
        if cut is None:
            _serve_for_lifetime(state, now, 'baseline')
            return
        answer.update(decision=decision.ROLL_BACK, outcome=decision.INCONCLUSIVE, rule='dark_budget', reason=cut)
        state['decision'] = {key: answer.get(key) for key in DECISION_KEYS if key in answer}
        state['report'].append(cut)
    # A trial's decision is stored once: a look that asks for another pair decides nothing yet.
    state['store']['decision'] = answer
    _end_trial(state, now, 'kept' if answer['decision'] == decision.KEEP else 'rolled_back', answer['reason'])


def _budget_cut(state, dark_seconds_so_far, pair_seconds):
    """Why the trial ends undecided rather than measure another pair, or None while that pair fits the budget.

    Another pair would take about as long as the one just measured, and a rollback then needs a stop and the
    baseline's warm restart: if all of that passes the budget, the trial stops here, never past it.
    """
    budget = dark_budget(state['settings'])
    if budget is None or dark_seconds_so_far is None or pair_seconds is None:
        return None
    plan = state['dark']['plan'] or {}
    baseline_starts = [start['seconds'] for start in state['starts']
                       if start.get('variant') == state['baseline'] and isinstance(start.get('seconds'), (int, float))]
    warm_s = max(baseline_starts) if baseline_starts else float(plan.get('warm_restart_s') or 0.0)
    rollback_s = float(plan.get('stop_s') or 0.0) + warm_s
    projected = dark_seconds_so_far + pair_seconds + rollback_s
    if projected <= budget * 60.0:
        return None
    pairs = sum(1 for lifetime in state['lifetimes'] if lifetime['side'] == 'variant')
    return (f'undecided after {pairs} lifetimes a side: another pair ({pair_seconds / 60:.1f} min) and the rollback '
            f'({rollback_s / 60:.1f} min) would bring the time out of service to {projected / 60:.1f} min, past '
            f'vllm_switch_max_dark_minutes={budget:g} (out of service {dark_seconds_so_far / 60:.1f} min so far); '
            f'{state["baseline"]} is put back')


def _end_trial(state, now, outcome, reason):
    """Keep the variant (enable it at boot), or put the baseline back and enable it; then record the trial."""
    state['outcome'], state['reason'] = outcome, str(reason).strip()
    state['run_outcome'] = {'variant': state['variant'], 'outcome': outcome, 'reason': state['reason']}
    state['queue'].extend([{'step': 'persist'}, {'step': 'record', 'latest': True}])
    if outcome == 'kept':
        _next_in_queue(state, now)
    else:
        _issue(state, now, 'serve', 'baseline', rolling_back=True)


def _after_persist(state, step, result, now):
    _next_in_queue(state, now)


def _after_record(state, step, result, now):
    state['store'] = {'history': result.get('record') or step.get('record')}
    if step.get('then_stop'):
        _stop(state, now, step['then_stop'])
    elif state['mode'] == 'trial' and state['outcome'] == 'failed':
        _stop(state, now, f"{state['variant']} failed and was rolled back; {state['baseline']} serves again. "
                          f"Cause: {state['reason']}")
    else:
        _next_in_queue(state, now)


def _after_calibration_lifetime(state, now):
    if len(state['lifetimes']) < state['settings']['calibration_lifetimes']:
        _serve_for_lifetime(state, now, 'baseline')
        return
    settings = state['settings']
    warm = [start['seconds'] for start in state['starts'] if isinstance(start.get('seconds'), (int, float))]
    seconds = [lifetime['seconds'] for lifetime in state['lifetimes']]
    try:
        answer = calibrate_levels(state['lifetimes'], warm_restart_s=warm, cold_load_s=state['cold_loads'],
                                  baseline=state['baseline'], benchmark_s=sum(seconds) / len(seconds),
                                  history=len(state['history']), margin_pct=float(settings.get('margin_pct', 8.0)),
                                  keep_when=settings.get('keep_when', 'not_slower'),
                                  max_lifetimes=max(2, settings['max_lifetimes']))
    except (CalibrationError, DecisionError) as error:
        raise TrialError(f'the calibration cannot be summarised: {error}') from None
    state['calibration'] = {key: value for key, value in answer.items() if key != 'report'}
    state['report'] = list(answer['report'])
    record = _record_document(
        state, now, variant=state['baseline'], unit=_unit_of(state, 'baseline'),
        unit_checksum=state['identities']['baseline']['unit_checksum'], outcome='calibrated',
        reason=answer['report'][-1], identity=None, vllm_version=None, started_at=None, decision=state['calibration'])
    # Appended to the node's history only: the baseline's latest record stays what a trial or a rollback wrote.
    for key in ('identity', 'vllm_version', 'started_at', 'finished_at', 'failure', 'benchmark_timing', 'dark_plan'):
        record.pop(key, None)
    state['queue'].append({'step': 'record', 'latest': False, 'record': record})
    _next_in_queue(state, now)


def _after_failure(state, step, result, now):
    """A failed step: before the trial began nothing was stopped and the run ends; after, the baseline comes back."""
    detail = {key: result[key] for key in FAILURE_KEYS if key in result and result[key] is not None}
    msg = str(result.get('msg') or f"the {step['step']} step failed without a message").strip()
    state['steps'][-1]['failed'] = True
    state['steps'][-1]['msg'] = msg
    name = step['step']
    rolling_back = state['mode'] == 'trial' and state['outcome'] is not None and state['outcome'] != 'kept'
    if rolling_back and name in ('serve', 'persist'):
        reason = f"{state['reason']}; the rollback to {state['baseline']} failed too: {msg}"
        stop = (f"{state['variant']} ended ({state['outcome'].replace('_', ' ')}: {state['reason']}) and "
                f"{state['baseline']} could not be started again: {msg}. No unit of {state['model']} serves on "
                f"{state['host']}.")
        state['reason'] = reason
        state['run_outcome'] = {'variant': state['variant'], 'outcome': state['outcome'], 'reason': reason}
        state['queue'] = []
        _issue(state, now, 'record', latest=True, record=_trial_record(state, now, state['outcome'], reason),
               then_stop=stop)
        return
    if state['mode'] == 'trial' and state['begun'] and state['outcome'] is None and name in _ROLLS_BACK:
        state['failure'] = detail or {'msg': msg}
        _end_trial(state, now, 'failed', msg)
        return
    if name == 'lock':
        state['locked'] = False
    _stop(state, now, msg)


_AFTER = {
    'lock': _after_lock,
    'inspect': _after_inspect,
    'check': _after_check,
    'serve': _after_serve,
    'benchmark': _after_benchmark,
    'answers': _after_answers,
    'begin': _after_begin,
    'persist': _after_persist,
    'record': _after_record,
}


# --- the documents built from the state ------------------------------------------------------------------------


def _holder_words(state) -> str:
    holder = state['holder'] or {}
    return f"{holder.get('user') or '?'}@{holder.get('controller') or '?'}"


def _notice(state, now, event, phase, unit):
    """What the operator's notification hook is told: the event, the dark window's plan and how long it has been."""
    plan = state['dark']['plan'] or {}
    estimate = {key: plan[key] for key in ('least_minutes', 'most_minutes', 'assumed') if key in plan} or None
    since = state['dark']['since']
    return {'event': event, 'phase': phase, 'unit': unit, 'host': state['host'], 'model': state['model'],
            'variant': state['variant'], 'baseline': state['baseline'], 'estimate': estimate,
            'dark_minutes': None if since is None else round((now - since) / 60, 2)}


def _record_document(state, now, *, variant, unit, unit_checksum, outcome, reason, identity, vllm_version,
                     started_at, decision=None, failure=None):
    holder = state['holder'] or {}
    return {
        'variant': variant, 'model': state['model'], 'baseline': state['baseline'], 'unit': unit,
        'unit_checksum': unit_checksum, 'identity': identity, 'vllm_version': vllm_version, 'outcome': outcome,
        'reason': str(reason).strip(), 'decision': decision, 'failure': failure, 'starts': list(state['starts']),
        'benchmark_timing': [], 'dark_plan': None, 'started_at': started_at,
        'started_by': _holder_words(state), 'run_id': holder.get('run_id'), 'playbook': holder.get('playbook'),
        'finished_at': None if outcome == 'in_progress' else _stamp(now), 'recorded_at': _stamp(now),
    }


def _trial_record(state, now, outcome, reason):
    """The trial's record as the node keeps it: the variant's latest, and a line of the node's history."""
    if state['started_at'] is None:
        state['started_at'] = _stamp(now)
    identity = {key: value for key, value in state['identities']['variant'].items() if key != 'unit_checksum'}
    record = _record_document(
        state, now, variant=state['variant'], unit=_unit_of(state, 'variant'),
        unit_checksum=state['identities']['variant']['unit_checksum'], outcome=outcome, reason=reason,
        identity=identity, vllm_version=state['sides']['variant'].get('vllm_version'),
        started_at=state['started_at'], decision=_recorded_decision(state), failure=state['failure'])
    baseline_runs = [lifetime['benchmark'] for lifetime in state['lifetimes'] if lifetime['side'] == 'baseline']
    if baseline_runs:
        try:
            record['benchmark_timing'] = benchmark_timing(baseline_runs[-1])
        except DarkWindowError:
            record['benchmark_timing'] = []
    plan = {key: value for key, value in (state['dark']['plan'] or {}).items() if key != 'lines'}
    record['dark_plan'] = plan or None
    return record


def _recorded_decision(state):
    if not state['decision']:
        return None
    return {key: value for key, value in state['decision'].items() if key != 'report'}


def close(state: t.Any, now: float) -> dict[str, t.Any]:
    """What a switch does at its end, however it ended: what puts the node back, what the hooks are told, the line
    that sets the dark window against its plan, the outcome the play and the textfile collector get."""
    if not isinstance(state, Mapping) or state.get('version') != VERSION:
        raise TrialError('the state is not one that new() or advance() returned')
    dark, run = state['dark'], state['run_outcome']
    notices = []
    if dark['since'] is not None:
        notices.append(_notice(state, now, 'serving', 'in service', (state['active'] or [None])[0]))
    if run['outcome'] != 'unchanged':
        notices.append(dict(_notice(state, now, 'decision', 'decided', (state['active'] or [None])[0]), **run))
    lines = []
    plan = dark['plan'] or {}
    if dark['since'] is not None and plan:
        pairs = (state['decision'] or {}).get('pairs')
        said = (f"{plan['least_minutes']} to {plan['most_minutes']} min" if plan.get('least_minutes') is not None
                else 'nothing (a figure was missing)')
        if plan.get('pair_minutes'):
            said += f", {plan['pair_minutes']} min a pair after the first {plan['lifetimes']['fewest']}"
        lines.append(f"{state['host']} was out of service for {round((now - dark['since']) / 60, 1)} min"
                     f"{f' over {pairs} lifetimes a side' if pairs else ''}; the plan said {said}.")
    recorded = run['outcome'] if run['outcome'] != 'unchanged' else state['target_record'].get('outcome')
    serving = [name for name, unit in sorted(state['units'].items()) if unit in state['active']]
    outcome = dict(run, recorded=recorded, serving=serving,
                   reopened=list((state['trial_state'] or {}).get('reopened') or []))
    fail = None
    if state['settings'].get('fail_on_rollback') and run['outcome'] == 'rolled_back':
        fail = (f"{run['variant']} was rolled back on {state['host']}: {run['reason']} "
                '(vllm_switch_fail_on_rollback is true)')
    return {'in_service': bool(dark['out']), 'notices': notices, 'lines': lines, 'outcome': outcome,
            'stats': dict(run), 'textfile': textfile_metrics(state) if state['locked'] else None, 'fail': fail}


def textfile_metrics(state: Mapping[str, t.Any]) -> str:
    """node_exporter's textfile collector format: which variant serves, and the last outcome of the target.

    It holds no time of its own, so a rerun that changes nothing leaves the file as it was.
    """
    model, run = state['model'], state['run_outcome']
    decided = run['outcome'] if run['outcome'] != 'unchanged' else (state['target_record'].get('outcome') or 'unchanged')
    lines = ['# HELP vllm_switch_active_variant 1 for the variant of the model that the switch role left serving.',
             '# TYPE vllm_switch_active_variant gauge']
    for name, unit in sorted(state['units'].items()):
        lines.append(f'vllm_switch_active_variant{{model="{model}",variant="{name}"}} {int(unit in state["active"])}')
    lines += ['# HELP vllm_switch_last_outcome 1 for the last decision on the variant the switch role last ran for.',
              '# TYPE vllm_switch_last_outcome gauge']
    for outcome in _OUTCOMES_ON_TEXTFILE:
        lines.append(f'vllm_switch_last_outcome{{model="{model}",variant="{run["variant"]}",outcome="{outcome}"}} '
                     f'{int(decided == outcome)}')
    return '\n'.join(lines) + '\n'


def failure_of(failed_result: t.Any) -> dict[str, t.Any]:
    """What a failed task registered, as a step's result: the failed item of a looped task speaks for it."""
    if not isinstance(failed_result, Mapping):
        return {'failed': True, 'msg': 'unknown failure'}
    items = failed_result.get('results')
    if isinstance(items, Sequence) and not isinstance(items, (str, bytes)):
        failed = [item for item in items if isinstance(item, Mapping) and item.get('failed')]
        if failed:
            failed_result = failed[-1]
    answer = {key: failed_result[key] for key in FAILURE_KEYS if key in failed_result}
    answer['failed'] = True
    answer['msg'] = str(failed_result.get('msg') or 'unknown failure')
    return answer
