# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Whole switches replayed from canned step results, the way the vllm_switch role's loop takes them.

Each test drives _trial.advance() from new() to its end, answering every step the state names as the node would
(a Node below stands in for the role's step files), and asserts what a run leaves: the steps in order, the record
and the history lines that would be written, the store's rows, and what close() tells the hooks and the play.
"""

from __future__ import annotations

import copy
import itertools

import pytest

from ansible_collections.llmops.vllm.plugins.plugin_utils import _trial as trial

NOW = 1_790_000_000.0
UNITS = {'baseline': 'vllm-kimi-baseline.service', 'ngram': 'vllm-kimi-ngram.service',
         'eagle3': 'vllm-kimi-eagle3.service'}


def spec(name, venv='/opt/vllm/0.32.0', version='0.32.0', speculative=None):
    argv = [f'{venv}/bin/python', '-m', 'vllm.entrypoints.openai.api_server', '--model', '/srv/models/kimi',
            '--served-model-name', 'kimi', '--tensor-parallel-size', '8']
    if speculative:
        argv += ['--speculative-config', '{"method": "ngram"}']
    return {'name': name, 'unit_name': UNITS[name], 'env_file': f'/etc/vllm/kimi-{name}.env', 'argv': argv,
            'speculative_config': speculative, 'vllm_version': version, 'venv': venv}


def settings(**overrides):
    value = {
        'kind': 'switch', 'host': 'gpu-node-01', 'model': 'kimi', 'variant': 'ngram', 'baseline': 'baseline',
        'sides': {'baseline': spec('baseline'), 'variant': spec('ngram', speculative={'method': 'ngram'})},
        'units': dict(UNITS), 'versions': {name: '0.32.0' for name in UNITS}, 'max_lifetimes': 4, 'keep_when': 'not_slower', 'margin_pct': 8.0,
        'workloads': [{'name': 'code_editing', 'options': {'concurrency': [1, 8], 'num_prompts': 48}, 'slo': {}}],
        'benchmark': True, 'answer_check': True, 'check_mode': False, 'vllm_version': '0.32.0',
        'expected_load_s': 1800, 'stream_tok_s': 74, 'kept_reason': None,
    }
    value.update(overrides)
    return value


def level(concurrency, speed, failed=0, foreign=0, p99_ttft=800.0):
    return {'max_concurrency': concurrency, 'output_throughput': speed, 'output_throughput_repeats': [speed],
            'completed': 48, 'failed': failed, 'errors': {'http_500': {'count': failed}} if failed else {},
            'duration': 48 * 200 / speed, 'total_output_tokens': 48 * 200, 'median_tpot_ms': 1000 / speed,
            'median_ttft_ms': 300.0, 'p99_ttft_ms': p99_ttft, 'foreign_requests': foreign,
            'prompt_set_sha256': 'p' * 64, 'max_input_tokens': 900, 'max_tokens_share': 0.0}


def answers(texts, workload='code_editing'):
    return {'changed': False, 'results': [{'answers': [{'text': text, 'finish_reason': 'stop', 'reasoning_characters': 0,
                                                        'tool_calls': []} for text in texts],
                                           'prompt_set_sha256': 'a' * 64, 'labels': {'workload': workload}}]}


def checksum(path):
    """A stand-in sha256 for each of the model's files: its name spelled out to 64 characters."""
    return (path.rsplit('/', 1)[-1].encode().hex() * 8)[:64]


UNIT_SUM = {name: checksum('/etc/systemd/system/' + unit) for name, unit in UNITS.items()}
ENV_SUM = {name: checksum(f'/etc/vllm/kimi-{name}.env') for name in UNITS}


GOOD = ['def f(x):\n    return x + %d\n' % index for index in range(8)]


class Node:
    """Answers each step as the node and the role's step files would, from canned speeds and faults.

    speeds maps a side to its output tok/s, one per lifetime in turn (the last repeats); faults maps a step (and
    side) to the failed result it gives, the first time it is taken or at the lifetime given.
    """

    def __init__(self, speeds, running=('baseline',), faults=None, records=None, history=None, holder=None,
                 variant_answers=None, failed_requests=0, foreign=0, p99_ttft=800.0, check_mode=False):
        self.speeds = {side: list(values) for side, values in speeds.items()}
        self.lifetime = {'baseline': 0, 'variant': 0}
        self.running = [UNITS[name] for name in running]
        self.faults = dict(faults or {})
        self.records = dict(records or {})
        self.history = list(history or [])
        self.holder = holder or {'user': 'ops', 'controller': 'ctl', 'run_id': 'r' * 32, 'playbook': 'deploy_ngram.yml'}
        self.variant_answers = variant_answers or GOOD
        self.failed_requests, self.foreign, self.p99_ttft = failed_requests, foreign, p99_ttft
        self.check_mode = check_mode
        self.invocations = itertools.count(1)
        self.written = []
        self.stored = []
        self.hooks = []
        self.reports = []

    def result(self, step, state):
        name, side = step['step'], step.get('side')
        if step.get('out_of_service'):
            self.hooks.append(step['notice'])
        keys = [key for key in ((name, side, 'rolling back') if step.get('rolling_back') else None, (name, side), name)
                if key in self.faults]
        fault = self.faults[keys[0]] if keys else None
        if fault is not None and (fault.get('lifetime') in (None, self.lifetime.get(side))):
            del self.faults[keys[0]]
            if fault.get('running') is not None:
                self.running = [UNITS[unit] for unit in fault['running']]
            return dict({key: value for key, value in fault.items() if key not in ('lifetime', 'running')},
                        failed=True, unit_states=self.unit_states())
        return getattr(self, 'step_' + name)(step, state)

    def unit_states(self):
        """What `systemctl is-active` prints for the model's units, in the order the state lists them."""
        return ['active' if unit in self.running else 'inactive' for unit in UNITS.values()]

    def step_lock(self, step, state):
        return {'holder': self.holder}

    def step_inspect(self, step, state):
        # sha256sum prints '<digest>  <path>' for each file it read.
        lines = ['%s  %s' % (checksum(path), path) for path in step['files']]
        return {'unit_states': self.unit_states(), 'sha256sum': lines, 'records': self.records,
                'history': self.history}

    def step_check(self, step, state):
        return {}

    def step_serve(self, step, state):
        # A unit that runs on is only waited for: the wait sees no start to time.
        started = step['restart'] or step['unit'] not in self.running
        if not self.check_mode:
            self.running = [step['unit']]
        ready = {'version': '0.32.0'}
        if started:
            ready.update(start_phases=[{'phase': 'weights', 'ended_at_s': 40.0}], start_summary='ready in 40 s',
                         kv_cache={'tokens': 262144})
        return {'ready': ready, 'invocation': 'inv-%d' % next(self.invocations)}

    def step_benchmark(self, step, state):
        side = step['side']
        speeds = self.speeds[side]
        speed = speeds[min(self.lifetime[side], len(speeds) - 1)]
        if step['workload_index'] == len(state['settings']['workloads']) - 1:
            self.lifetime[side] += 1
        failed = self.failed_requests if side == 'variant' else 0
        result = {'changed': False, 'labels': dict(step['labels']),
                  'options': dict(step['workload']['options'], max_tokens=256),
                  'results': [level(concurrency, speed * (0.9 if concurrency == 8 else 1.0), failed=failed,
                                    foreign=self.foreign if side == 'baseline' else 0, p99_ttft=self.p99_ttft)
                              for concurrency in (1, 8)]}
        return {'benchmark': result}

    def step_answers(self, step, state):
        return {'answers': answers(GOOD if step['side'] == 'baseline' else self.variant_answers)}

    def step_begin(self, step, state):
        self.written.append(('latest', step['record']))
        return {'record': step['record']}

    def step_persist(self, step, state):
        return {}

    def step_record(self, step, state):
        self.written.append(('latest' if step.get('latest') else 'history', step['record']))
        return {'record': step['record']}


def replay(node, **overrides):
    """Run a switch to its end, in no more turns than its state allows; return the last state, the steps named, and
    what close() says."""
    clock = itertools.count(0)
    state = trial.new(settings(check_mode=node.check_mode, **overrides), NOW)
    named = []
    while state['next']['step'] not in ('done', 'stop'):
        step = copy.deepcopy(state['next'])
        named.append(step)
        result = node.result(step, state)
        state = trial.advance(state, result, NOW + 60 * next(clock))
        assert len(state['steps']) <= state['step_limit']
        if state['store']:
            node.stored.append(state['store'])
        node.reports.extend(state['report'])
    return state, named, trial.close(state, NOW + 60 * next(clock))


def names(steps):
    return [step['step'] + (' ' + step['side'] if step.get('side') else '') for step in steps]


def history_lines(node):
    """Every record the run wrote is a line of the node's history (trial_record appends each)."""
    return [record for dummy, record in node.written]


def stored_history(node):
    return [row['history'] for row in node.stored if row.get('history')]


def baseline_history(speeds, identity_of=None):
    """Earlier trials' records that kept baseline lifetimes of this identity (the node's own history)."""
    state = trial.new(settings(), NOW)
    unit = UNIT_SUM['baseline']
    parts = trial.trial_identity(trial.parts_of_spec(spec('baseline'), unit, ENV_SUM['baseline'], '0.32.0'))
    return [{'variant': 'eagle3', 'baseline': 'baseline', 'outcome': 'rolled_back', 'decision': {
        'baseline_lifetimes': [{'workload': 'code_editing', 'max_concurrency': concurrency,
                                'output_throughput': speed * (0.9 if concurrency == 8 else 1.0),
                                'lifetime': f'old-{index}', 'prompt_set_sha256': 'p' * 64, 'unit_checksum': unit,
                                'identity': identity_of or parts['sha256']}
                               for index, speed in enumerate(speeds) for concurrency in (1, 8)]}}] if state else []


def assert_trial_record(record, outcome, reason_start):
    assert record['variant'] == 'ngram' and record['baseline'] == 'baseline' and record['model'] == 'kimi'
    assert record['outcome'] == outcome
    assert record['reason'].startswith(reason_start), record['reason']
    assert record['unit'] == UNITS['ngram'] and record['unit_checksum'] == UNIT_SUM['ngram']
    assert record['identity']['parts']['unit'] == UNIT_SUM['ngram'] and len(record['identity']['sha256']) == 64
    assert record['identity']['parts']['environment'] == ENV_SUM['ngram']
    assert record['started_by'] == 'ops@ctl' and record['run_id'] == 'r' * 32 and record['playbook'] == 'deploy_ngram.yml'
    assert record['recorded_at'].endswith('+00:00') and record['started_at'].endswith('+00:00')


def test_a_faster_variant_is_kept_at_the_first_look_and_its_record_holds_the_decision():
    node = Node({'baseline': [1000, 1004, 998], 'variant': [1200, 1196, 1205]})
    state, named, closing = replay(node)

    assert names(named) == [
        'lock', 'inspect', 'check variant', 'serve baseline', 'begin',
        'serve baseline', 'benchmark baseline', 'answers baseline', 'serve variant', 'benchmark variant',
        'answers variant',
        'serve baseline', 'benchmark baseline', 'serve variant', 'benchmark variant',
        'persist', 'record']
    assert state['next']['step'] == 'done'
    # The baseline serving before the trial is only waited for, then restarted: its first lifetime starts as the
    # variant's will; every later lifetime is a switch from the other side.
    assert not named[3]['restart'] and named[5]['restart'] and not named[8]['restart'] and not named[11]['restart']
    # The node leaves service once, before the first stop, and the hook is told with the plan made beforehand.
    assert [step['step'] for step in named if step['out_of_service']] == ['serve']
    assert node.hooks[0]['event'] == 'dark' and node.hooks[0]['estimate']['least_minutes'] > 0
    in_progress, kept = history_lines(node)
    assert in_progress['outcome'] == 'in_progress' and in_progress['finished_at'] is None
    assert_trial_record(kept, 'kept', 'at concurrency')
    assert kept['decision']['decision'] == 'keep' and kept['decision']['pairs'] == 2
    assert kept['decision']['correctness']['passed']
    assert len(kept['decision']['baseline_lifetimes']) == 4
    assert [start['variant'] for start in kept['starts']] == ['baseline', 'ngram', 'baseline', 'ngram']
    assert len(state['looks']) == 2
    assert kept['benchmark_timing'] and kept['dark_plan']['lifetimes'] == {'fewest': 2, 'most': 4}
    # The store has each benchmark, the one decision that ends the trial, and both history lines.
    assert sum(1 for row in node.stored if row.get('benchmark')) == 4
    assert [row['decision']['decision'] for row in node.stored if row.get('decision')] == ['keep']
    assert stored_history(node) == history_lines(node)
    assert closing['outcome']['outcome'] == 'kept' and closing['outcome']['serving'] == ['ngram']
    assert [notice['event'] for notice in closing['notices']] == ['serving', 'decision']
    assert 'vllm_switch_active_variant{model="kimi",variant="ngram"} 1' in closing['textfile']
    assert closing['in_service']


def test_a_variant_kept_after_several_pairs_reports_every_look():
    node = Node({'baseline': [1000, 1020, 990, 1010], 'variant': [1005, 1025, 995, 1012]})
    state, named, closing = replay(node)

    assert len(state['looks']) == 3
    record = history_lines(node)[-1]
    assert record['outcome'] == 'kept' and record['decision']['pairs'] == 3 and record['decision']['look'] == 2
    assert [row['side'] for row in record['decision']['lifetimes']] == ['baseline'] * 3 + ['variant'] * 3
    assert [look[-2].split(': ')[1] for look in state['looks']] == ['another_pair (inconclusive)'] * 2 + [
        'keep (not_slower)']
    assert all(look[-1].startswith('the node has been out of service') for look in state['looks'])
    assert 'one more pair costs about' in state['looks'][0][-1]
    assert closing['lines'][0].startswith('gpu-node-01 was out of service for') and 'over 3 lifetimes' in closing['lines'][0]


def test_a_slower_variant_is_rolled_back_and_the_baseline_serves():
    node = Node({'baseline': [1000, 1005], 'variant': [600, 610]})
    state, named, closing = replay(node)

    assert names(named)[-3:] == ['serve baseline', 'persist', 'record'] and named[-3]['rolling_back']
    record = history_lines(node)[-1]
    assert_trial_record(record, 'rolled_back', 'at concurrency')
    assert record['decision']['outcome'] == 'slower' and 'slower' in record['reason']
    assert node.running == [UNITS['baseline']] and state['next']['step'] == 'done'
    assert closing['outcome']['serving'] == ['baseline'] and closing['outcome']['recorded'] == 'rolled_back'


def test_a_variant_whose_change_is_on_the_losing_side_stops_for_futility():
    node = Node({'baseline': [1000, 1100], 'variant': [850, 1000]})
    state, named, closing = replay(node)

    record = history_lines(node)[-1]
    assert record['outcome'] == 'rolled_back' and record['decision']['outcome'] == 'futility'
    assert len(state['looks']) == 2


def test_an_undecided_trial_rolls_back_as_inconclusive_at_the_maximum_and_says_what_would_decide():
    node = Node({'baseline': [1000, 1080, 960], 'variant': [990, 1060, 940]})
    state, named, closing = replay(node, max_lifetimes=3)

    record = history_lines(node)[-1]
    assert record['outcome'] == 'rolled_back' and record['decision']['outcome'] == 'inconclusive'
    assert record['decision']['pairs'] == 3 and 'pair' in (record['decision']['to_decide'] or '')


def test_a_plan_longer_than_the_dark_minutes_budget_is_refused_before_anything_stops_with_what_would_fit():
    # Four lifetimes a side at the fresh node's assumed figures (30-minute loads): about 5 hours, rolled back.
    node = Node({'baseline': [1000], 'variant': [1200]})
    state, named, closing = replay(node, max_dark_minutes=120)

    assert names(named) == ['lock', 'inspect']
    assert state['next']['step'] == 'stop'
    message = state['next']['msg']
    assert 'vllm_switch_max_dark_minutes=120' in message and '4 lifetimes a side and rolled back' in message
    # One lifetime a side, rolled back: two stops, two benchmarks and three 30-minute starts, under 120 minutes.
    assert 'vllm_switch_max_lifetimes=1' in message
    assert node.running == [UNITS['baseline']] and not node.written and not node.hooks
    assert state['dark']['since'] is None and not state['dark']['out']


def test_a_plan_within_the_budget_runs_as_planned():
    node = Node({'baseline': [1000, 1004, 998], 'variant': [1200, 1196, 1205]})
    state, named, closing = replay(node, max_dark_minutes=300)

    assert state['dark']['plan']['most_minutes'] <= 300
    assert history_lines(node)[-1]['outcome'] == 'kept'


def test_a_trial_that_another_pair_would_take_past_the_budget_ends_undecided_and_puts_the_baseline_back():
    # The plan (1-s loads, a fast stream) fits 16 minutes, but each pair really takes 4 minutes: after the third pair,
    # out of service 14 minutes, another pair and the rollback would pass the budget.
    node = Node({'baseline': [1000, 1080, 960], 'variant': [990, 1060, 940]})
    state, named, closing = replay(node, max_lifetimes=4, expected_load_s=1, stream_tok_s=1000, max_dark_minutes=16)

    assert state['dark']['plan']['most_minutes'] <= 16
    record = history_lines(node)[-1]
    assert record['outcome'] == 'rolled_back' and record['decision']['rule'] == 'dark_budget'
    assert record['decision']['outcome'] == 'inconclusive' and record['decision']['pairs'] == 3
    assert record['reason'].startswith('undecided after 3 lifetimes a side')
    assert 'vllm_switch_max_dark_minutes=16' in record['reason']
    assert names(named)[-3:] == ['serve baseline', 'persist', 'record'] and named[-3]['rolling_back']
    assert node.running == [UNITS['baseline']]
    # Without the budget the same node runs to its fourth pair.
    unbounded = Node({'baseline': [1000, 1080, 960], 'variant': [990, 1060, 940]})
    replay(unbounded, max_lifetimes=4, expected_load_s=1, stream_tok_s=1000)
    assert history_lines(unbounded)[-1]['decision']['pairs'] == 4


def test_one_lifetime_a_side_decides_from_the_node_s_history_of_the_baseline():
    node = Node({'baseline': [1000], 'variant': [1002]}, history=baseline_history([990, 1010, 1003, 996, 1007, 1001]))
    state, named, closing = replay(node, max_lifetimes=1)

    assert len(state['looks']) == 1
    record = history_lines(node)[-1]
    assert record['outcome'] == 'kept', record['reason']
    assert record['decision']['looks'][0]['history_lifetimes'] == 6


def test_one_lifetime_a_side_without_history_is_rolled_back_as_inconclusive_and_says_how_to_decide():
    node = Node({'baseline': [1000], 'variant': [1002]})
    state, named, closing = replay(node, max_lifetimes=1)

    record = history_lines(node)[-1]
    assert record['outcome'] == 'rolled_back' and record['decision']['outcome'] == 'inconclusive'
    assert 'calibrate' in record['reason']


def test_a_variant_that_crashes_at_start_is_rolled_back_as_failed_and_the_run_stops_with_the_cause():
    crash = {'msg': 'vllm-kimi-ngram.service failed after 12.0 s: engine core died', 'crash_noticed_after': 12.0,
             'fatal_line': 'RuntimeError: CUDA error: out of memory', 'journal': ['...'], 'elapsed': 14.2,
             'unrelated': 'dropped'}
    node = Node({'baseline': [1000], 'variant': [1000]}, faults={('serve', 'variant'): crash})
    state, named, closing = replay(node)

    assert names(named)[-4:] == ['serve variant', 'serve baseline', 'persist', 'record']
    record = history_lines(node)[-1]
    assert_trial_record(record, 'failed', 'vllm-kimi-ngram.service failed after 12.0 s')
    assert record['failure']['fatal_line'] == 'RuntimeError: CUDA error: out of memory'
    assert 'unrelated' not in record['failure'] and record['decision'] is None
    assert state['next'] == dict(state['next'], step='stop')
    assert state['next']['msg'].startswith('ngram failed and was rolled back; baseline serves again. Cause: ')
    assert closing['outcome']['outcome'] == 'failed' and node.running == [UNITS['baseline']]


def test_a_load_that_stalls_is_rolled_back_and_its_record_says_where_it_stalled():
    stall = {'msg': 'vllm-kimi-ngram.service stalled: no new log line for 600 s', 'stalled': True,
             'last_progress_line': 'Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 45%',
             'last_progress_phase': 'cuda_graphs', 'seconds_since_progress': 600.0, 'stall_limit': 600,
             'stalled_phase': 'torch_compile', 'repeated_line': 'WARNING [shm_broadcast.py:501] No available shared '
             'memory broadcast block found in 60 seconds.'}
    node = Node({'baseline': [1000], 'variant': [1000]}, faults={('serve', 'variant'): stall})
    state, named, closing = replay(node)

    record = history_lines(node)[-1]
    assert record['outcome'] == 'failed' and record['failure']['stalled'] is True
    assert record['failure']['last_progress_phase'] == 'cuda_graphs'
    assert {key: record['failure'][key] for key in ('stall_limit', 'stalled_phase', 'repeated_line')} == {
        key: stall[key] for key in ('stall_limit', 'stalled_phase', 'repeated_line')}
    # The variant's start was watched for a stall; the rollback's start of the baseline is not (only the unit's death
    # or the readiness timeout fails it): a stall there would leave nothing serving.
    serves = [step for step in named if step['step'] == 'serve']
    assert [(step['side'], step['stall_check']) for step in serves[-2:]] == [('variant', True), ('baseline', False)]
    assert all(step['stall_check'] for step in serves[:-1])


def test_the_silent_phases_limits_come_from_the_nodes_recorded_starts_and_else_from_the_settings():
    recorded = {'starts': [{'unit': UNITS['ngram'], 'variant': 'ngram', 'seconds': 1900.0,
                            'phases': [{'name': 'weights_loaded', 'seconds': 1500.0},
                                       {'name': 'cuda_graphs', 'seconds': 200.0}]}]}
    node = Node({'baseline': [1000], 'variant': [1000]}, history=[recorded])
    state, named, closing = replay(node, phase_stall_timeouts={'cuda_graphs': 1800, 'warmup': 1800})

    serves = [step for step in named if step['step'] == 'serve']
    # The node's own graph capture (200 s x 1.5); its warm-up was never recorded, so the setting's 1,800 s holds.
    assert serves and all(step['phase_stall_timeouts'] == {'cuda_graphs': 300, 'warmup': 1800} for step in serves)


def test_a_variant_that_answers_otherwise_is_rolled_back_as_incorrect_whatever_its_speed():
    wrong = [text.replace('return', 'yield') for text in GOOD]
    node = Node({'baseline': [1000, 1002], 'variant': [1300, 1310]}, variant_answers=wrong)
    state, named, closing = replay(node)

    record = history_lines(node)[-1]
    assert record['outcome'] == 'rolled_back' and record['decision']['outcome'] == 'incorrect'
    assert record['reason'].startswith('incorrect: ')
    # The answers are read once a side, in the first pair; the first look already rolls back.
    assert names(named).count('answers baseline') == 1 and len(state['looks']) == 1


def test_foreign_traffic_in_the_baseline_s_benchmark_rolls_back_as_inconclusive():
    node = Node({'baseline': [1000, 1000], 'variant': [1000, 1000]}, foreign=3)
    state, named, closing = replay(node)

    record = history_lines(node)[-1]
    assert record['outcome'] == 'rolled_back' and record['decision']['outcome'] == 'inconclusive'
    assert record['decision']['contaminated'][0]['side'] == 'baseline'
    assert 'contaminated' in record['reason']
    assert record['decision']['baseline_lifetimes'] == []


def test_failed_requests_in_the_variant_s_benchmark_roll_back_as_failed():
    node = Node({'baseline': [1000], 'variant': [1000]}, failed_requests=2)
    state, named, closing = replay(node)

    record = history_lines(node)[-1]
    assert record['outcome'] == 'failed' and record['reason'].startswith('ngram failed 4 requests during its benchmark')
    # The partial result was stored all the same.
    assert [row['benchmark']['labels']['variant'] for row in node.stored if row.get('benchmark')] == ['baseline', 'ngram']
    assert state['next']['step'] == 'stop'


def test_a_broken_slo_is_judged_once_at_the_decision_and_rolls_back():
    node = Node({'baseline': [1000], 'variant': [1000]}, p99_ttft=5000.0)
    state, named, closing = replay(node, slo={'p99_ttft_ms': 1000})

    record = history_lines(node)[-1]
    assert record['outcome'] == 'rolled_back' and record['decision']['outcome'] == 'slo_breached'
    # Not at the first pair: the looks keep the variant at the second, and only then is the SLO judged.
    assert len(state['looks']) == 2 and record['decision']['rule'] == 'slo'
    assert record['reason'].startswith('breaks its SLO at concurrency 1: p99 TTFT 5000.0 ms > 1000 ms, over 2 '
                                       'lifetime(s) pooled')
    assert '; speed alone: at concurrency 1: not slower' in record['reason']
    (level, *others) = record['decision']['slo_judged']
    assert level['breaches'] == ['p99 TTFT 5000.0 ms > 1000 ms']
    # These results carry no per-request samples: the lifetimes' own figures are judged, and said to be.
    assert level['judged_as']['p99_ttft_ms'].startswith('the median of 2 lifetimes')
    # Each workload's record still names the SLO it was held to.
    assert [item['slo'] for item in record['decision']['workloads']] == [{'p99_ttft_ms': 1000.0}]


def test_an_slo_that_holds_is_judged_once_and_keeps():
    node = Node({'baseline': [1000], 'variant': [1000]}, p99_ttft=800.0)
    state, named, closing = replay(node, slo={'p99_ttft_ms': 1000})

    record = history_lines(node)[-1]
    assert record['outcome'] == 'kept' and record['decision']['slo_judged'][0]['breaches'] == []


def test_a_slower_variant_that_also_breaks_the_slo_is_rolled_back_for_the_breach():
    node = Node({'baseline': [1000, 1005], 'variant': [600, 610]}, p99_ttft=5000.0)
    state, named, closing = replay(node, slo={'p99_ttft_ms': 1000})

    record = history_lines(node)[-1]
    assert record['decision']['outcome'] == 'slo_breached' and '; speed alone: at concurrency 1: slower' in record['reason']


def test_a_rolled_back_pin_is_recorded_with_its_release_and_not_tried_again_with_the_same_identity():
    pinned = spec('ngram', venv='/opt/vllm/0.33.0', version='0.33.0', speculative={'method': 'ngram'})
    sides = {'baseline': spec('baseline'), 'variant': pinned}
    node = Node({'baseline': [1000, 1005], 'variant': [600, 610]})
    state, named, closing = replay(node, sides=sides)
    record = history_lines(node)[-1]
    assert record['outcome'] == 'rolled_back' and record['vllm_version'] == '0.33.0'
    assert record['identity']['parts']['venv'] == '/opt/vllm/0.33.0'

    again = Node({'baseline': [1000], 'variant': [1000]}, records={'ngram': record})
    state, named, closing = replay(again, sides=sides)
    assert names(named) == ['lock', 'inspect']
    assert state['mode'] == 'report' and state['next']['step'] == 'done'
    assert 'was already tried as trial' in state['report'][-1] and 'baseline serves' in state['report'][-1]
    assert again.written == [] and closing['outcome']['outcome'] == 'unchanged'
    assert closing['outcome']['recorded'] == 'rolled_back'


def test_check_mode_walks_one_pair_without_benchmarks_and_keeps():
    node = Node({'baseline': [1000], 'variant': [1000]}, check_mode=True)
    state, named, closing = replay(node)

    assert names(named) == ['lock', 'inspect', 'check variant', 'serve baseline', 'begin', 'serve variant', 'persist',
                            'record']
    assert not any(step['out_of_service'] for step in named) and node.hooks == []
    assert history_lines(node)[-1]['outcome'] == 'kept'


def test_a_rollback_that_fails_is_recorded_with_both_causes_and_says_nothing_serves():
    crash = {'msg': 'engine core died'}
    node = Node({'baseline': [1000], 'variant': [1000]},
                faults={('serve', 'variant'): crash,
                        ('serve', 'baseline', 'rolling back'): {'msg': 'GPUs still held by PID 4242'}})
    state, named, closing = replay(node)

    record = history_lines(node)[-1]
    assert record['outcome'] == 'failed'
    assert record['reason'] == 'engine core died; the rollback to baseline failed too: GPUs still held by PID 4242'
    assert state['next']['msg'] == ('ngram ended (failed: engine core died) and baseline could not be started again: '
                                    'GPUs still held by PID 4242. No unit of kimi serves on gpu-node-01.')


def test_a_failure_before_the_trial_begins_stops_with_nothing_stopped_and_nothing_recorded():
    node = Node({'baseline': [1000], 'variant': [1000]},
                faults={'check': {'msg': 'vllm_variant=ngram: the GPUs are held by PID 7. Nothing was stopped.'}})
    state, named, closing = replay(node)

    assert names(named) == ['lock', 'inspect', 'check variant']
    assert state['next'] == {**state['next'], 'step': 'stop',
                             'msg': 'vllm_variant=ngram: the GPUs are held by PID 7. Nothing was stopped.'}
    assert node.written == [] and closing['notices'] == [] and not closing['in_service']


def test_a_lock_held_by_another_run_stops_before_anything_is_read_and_writes_no_textfile():
    node = Node({'baseline': [1000], 'variant': [1000]},
                faults={'lock': {'msg': 'the switch lock is held by ops@other since 10:00'}})
    state, named, closing = replay(node)

    assert names(named) == ['lock'] and state['next']['step'] == 'stop' and closing['textfile'] is None


def test_a_running_variant_that_was_kept_is_only_confirmed():
    node = Node({'baseline': [1000], 'variant': [1000]}, running=('ngram',))
    identity = trial.trial_identity(trial.parts_of_spec(spec('ngram', speculative={'method': 'ngram'}),
                                                        UNIT_SUM['ngram'], ENV_SUM['ngram'], '0.32.0'))
    node.records = {'ngram': {'variant': 'ngram', 'outcome': 'kept', 'unit_checksum': UNIT_SUM['ngram'],
                              'identity': identity,
                              'finished_at': '2026-12-01T10:00:00+00:00'}}
    state, named, closing = replay(node)

    assert names(named) == ['lock', 'inspect', 'serve variant', 'persist'] and state['mode'] == 'confirm'
    assert not named[2]['restart'] and not named[2]['out_of_service']
    assert closing['outcome'] == {**closing['outcome'], 'outcome': 'unchanged', 'recorded': 'kept', 'serving': ['ngram']}


def test_an_operators_rollback_blocks_the_running_variant_and_serves_the_baseline():
    node = Node({'baseline': [1000], 'variant': [1000]}, running=('ngram',))
    state, named, closing = replay(node, variant='baseline', sides={'baseline': spec('baseline'),
                                                                    'variant': spec('baseline')},
                                   block_rolled_back=True)

    assert names(named) == ['lock', 'inspect', 'record', 'serve baseline', 'persist']
    blocked = history_lines(node)[0]
    assert blocked['variant'] == 'ngram' and blocked['outcome'] == 'blocked'
    assert blocked['reason'].startswith('rolled back by operator ops@ctl at ') and blocked['vllm_version'] == '0.32.0'
    assert named[3]['out_of_service'] and node.running == [UNITS['baseline']]
    # Putting the baseline back is never failed for a stall alone.
    assert named[3]['stall_check'] is False


def test_a_calibration_restarts_the_baseline_and_adds_its_summary_to_the_history():
    node = Node({'baseline': [1000, 1020, 990, 1010]})
    state, named, closing = replay(node, kind='calibrate', variant='baseline',
                                   sides={'baseline': spec('baseline'), 'variant': spec('baseline')},
                                   calibration_lifetimes=4)

    assert names(named) == ['lock', 'inspect'] + ['serve baseline', 'benchmark baseline'] * 4 + ['record']
    assert all(step['restart'] for step in named if step['step'] == 'serve')
    (kind, record), = node.written
    assert kind == 'history' and record['outcome'] == 'calibrated' and record['variant'] == 'baseline'
    assert len(record['decision']['baseline_lifetimes']) == 8
    assert state['report'] == [] and state['calibration']['lifetimes'] == 4


def test_a_calibration_longer_than_the_dark_minutes_budget_is_refused_before_anything_stops():
    # Eight warm restarts at the fresh node's assumed 30-minute loads and 3-minute benchmarks: over four hours.
    node = Node({'baseline': [1000]})
    state, named, closing = replay(node, kind='calibrate', variant='baseline',
                                   sides={'baseline': spec('baseline'), 'variant': spec('baseline')},
                                   calibration_lifetimes=8, max_dark_minutes=240)

    assert names(named) == ['lock', 'inspect'] and state['next']['step'] == 'stop'
    assert state['next']['msg'].startswith("the calibration's 8 warm restarts of the baseline may keep the node out "
                                           'of service for')
    assert 'vllm_switch_max_dark_minutes=240; 7 fit' in state['next']['msg']
    assert node.running == [UNITS['baseline']] and not node.written
    # With the node's warm restart known to take 5 minutes, the same calibration fits.
    node = Node({'baseline': [1000]})
    state, named, closing = replay(node, kind='calibrate', variant='baseline',
                                   sides={'baseline': spec('baseline'), 'variant': spec('baseline')},
                                   calibration_lifetimes=8, max_dark_minutes=240, expected_warm_restart_s=300)
    assert node.written[-1][1]['outcome'] == 'calibrated'


def test_a_state_that_asks_for_more_steps_than_its_limit_is_refused():
    state = trial.new(settings(), NOW)
    state['step_limit'] = 1
    state = trial.advance(state, {'holder': {}}, NOW)
    with pytest.raises(trial.TrialError, match='without an end'):
        trial.advance(state, {}, NOW)


def test_a_failed_looped_task_speaks_through_its_failed_item():
    failed = {'failed': True, 'msg': 'One or more items failed',
              'results': [{'failed': False}, {'failed': True, 'msg': 'benchmark timed out', 'elapsed': 3.0}]}
    assert trial.failure_of(failed) == {'failed': True, 'msg': 'benchmark timed out', 'elapsed': 3.0}


def test_a_server_that_dies_mid_benchmark_leaves_its_partial_result_stored_and_the_trial_fails():
    died = {'failed': True, 'msg': 'the server stopped answering: 10 of 48 requests failed',
            'results': [level(1, 900.0, failed=10)], 'labels': {'variant': 'ngram', 'workload': 'code_editing'}}
    node = Node({'baseline': [1000], 'variant': [1000]})
    node.step_benchmark = lambda step, state, original=node.step_benchmark: (
        {'benchmark': died} if step['side'] == 'variant' else original(step, state))
    state, named, closing = replay(node)

    assert [row['benchmark']['labels']['variant'] for row in node.stored if row.get('benchmark')] == ['baseline', 'ngram']
    assert node.stored[-2]['benchmark']['failed'] is True
    record = history_lines(node)[-1]
    assert record['outcome'] == 'failed' and record['reason'] == 'the server stopped answering: 10 of 48 requests failed'
    assert node.running == [UNITS['baseline']] and state['next']['step'] == 'stop'


def test_a_benchmark_that_gives_no_result_within_its_limit_fails_the_trial():
    node = Node({'baseline': [1000], 'variant': [1000]})
    node.step_benchmark = lambda step, state: {'benchmark': None}
    state, named, closing = replay(node)

    record = history_lines(node)[-1]
    assert record['outcome'] == 'failed' and 'gave no result within its time limit' in record['reason']


def test_a_target_whose_unit_is_not_installed_stops_before_anything_is_checked():
    node = Node({'baseline': [1000], 'variant': [1000]})
    inspect = node.step_inspect
    node.step_inspect = lambda step, state: dict(inspect(step, state), sha256sum=[
        line for line in inspect(step, state)['sha256sum'] if 'ngram.service' not in line])
    state, named, closing = replay(node)

    assert names(named) == ['lock', 'inspect'] and state['next']['step'] == 'stop'
    assert state['next']['msg'] == ('vllm_variant=ngram: vllm-kimi-ngram.service is not installed on gpu-node-01; '
                                    'deploy it first with the llmops.vllm.vllm_service role.')


def test_a_blocked_variant_is_refused_with_nothing_changed_unless_unblocked():
    blocked = {'ngram': {'variant': 'ngram', 'outcome': 'blocked', 'reason': 'rolled back by operator ops@ctl at noon',
                         'unit_checksum': UNIT_SUM['ngram']}}
    state, named, closing = replay(Node({'baseline': [1000], 'variant': [1000]}, records=blocked))
    assert state['next']['msg'] == ('ngram is blocked on gpu-node-01: rolled back by operator ops@ctl at noon. Nothing '
                                    'was changed; set vllm_switch_unblock=true to try it again.')
    node = Node({'baseline': [1000, 1005], 'variant': [600, 610]}, records=blocked)
    state, named, closing = replay(node, unblock=True)
    assert history_lines(node)[-1]['outcome'] == 'rolled_back'


def test_an_interrupted_trial_is_made_again_and_says_why():
    interrupted = {'ngram': {'variant': 'ngram', 'outcome': 'in_progress', 'unit_checksum': UNIT_SUM['ngram'],
                             'started_at': '2026-12-01T10:00:00+00:00', 'started_by': 'ops@other'}}
    node = Node({'baseline': [1000, 1005], 'variant': [600, 610]}, running=('ngram',), records=interrupted)
    state, named, closing = replay(node)

    assert state['mode'] == 'trial' and state['trial_state']['retried'] == 'interrupted'
    assert ('The trial of ngram started at 2026-12-01T10:00:00+00:00 by ops@other never finished (the run was '
            'interrupted); it was left running undecided, and it is tried again against baseline.') in node.reports
    assert history_lines(node)[-1]['outcome'] == 'rolled_back' and node.running == [UNITS['baseline']]
    # The baseline is started for the trial, so the variant's run that was left going stops first.
    assert named[3]['out_of_service'] and named[3]['unit'] == UNITS['baseline']


def test_a_kept_target_that_does_not_run_serves_again_when_an_experiment_asks_for_its_winner():
    identity = trial.trial_identity(trial.parts_of_spec(spec('ngram', speculative={'method': 'ngram'}),
                                                        UNIT_SUM['ngram'], ENV_SUM['ngram'], '0.32.0'))
    kept = {'ngram': {'variant': 'ngram', 'outcome': 'kept', 'unit_checksum': UNIT_SUM['ngram'], 'identity': identity,
                      'finished_at': '2026-12-01T10:00:00+00:00', 'reason': 'faster'}}
    node = Node({'baseline': [1000], 'variant': [1000]}, records=kept)
    state, named, closing = replay(node, decided_serves='target')

    assert names(named) == ['lock', 'inspect', 'serve variant', 'persist', 'record'] and state['step_limit'] == 5
    (kind, entry), = node.written
    assert kind == 'history' and entry['outcome'] == 'kept'
    assert entry['reason'] == f"served again, as kept by trial {identity['short']} on 2026-12-01T10:00:00+00:00"
    assert closing['outcome']['outcome'] == 'kept' and closing['outcome']['serving'] == ['ngram']


@pytest.mark.parametrize('overrides, running, message', [
    ({'variant': 'ngram'}, ('baseline',), 'vllm_variant is ngram, but a calibration measures the baseline (baseline); '
                                          'leave vllm_variant unset. Nothing was changed.'),
    ({}, ('ngram',), 'The calibration restarts vllm-kimi-baseline.service, but it does not serve on gpu-node-01 '
                     '(vllm-kimi-ngram.service runs). Switch to baseline first (ansible-playbook llmops.vllm.rollback); '
                     'nothing was changed.'),
])
def test_a_calibration_that_cannot_measure_the_serving_baseline_changes_nothing(overrides, running, message):
    arguments = dict(kind='calibrate', variant='baseline', sides={'baseline': spec('baseline'),
                                                                  'variant': spec('baseline')}, calibration_lifetimes=8)
    if overrides.get('variant') == 'ngram':
        arguments.update(variant='ngram', sides={'baseline': spec('baseline'),
                                                 'variant': spec('ngram', speculative={'method': 'ngram'})})
    state, named, closing = replay(Node({'baseline': [1000]}, running=running), **arguments)
    assert names(named) == ['lock', 'inspect'] and state['next'] == {**state['next'], 'step': 'stop', 'msg': message}


def test_what_systemd_and_sha256sum_print_is_read_as_they_print_it():
    state = trial.new(settings(), NOW)
    assert trial.running_units(state, ['active', 'inactive', 'activating']) == [UNITS['baseline'], UNITS['eagle3']]
    with pytest.raises(trial.TrialError, match='named 2 states for the model.s 3 units'):
        trial.running_units(state, ['active', 'inactive'])
    digest = 'a' * 64
    assert trial.checksums_of([f'{digest}  /etc/vllm/kimi-baseline.env', f'{digest} */etc/systemd/system/x.service',
                               'sha256sum: /etc/vllm/missing.env: No such file or directory']) == {
        '/etc/vllm/kimi-baseline.env': digest, '/etc/systemd/system/x.service': digest}
