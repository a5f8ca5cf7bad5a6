# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import json

import pytest

from ansible_collections.llmops.vllm.plugins.plugin_utils._documented_options import documented_argument_spec
from ansible_collections.llmops.vllm.plugins.plugin_utils._trial_settings import (
    drain_warnings,
    constraint_problems,
    hook_problems,
    secret_problems,
    trial_setting_problems,
    unknown_variable_warnings,
)
from ansible_collections.llmops.vllm.plugins.plugin_utils._variable_names import known_variable_names, role_argument_specs

GOOD = {
    'vllm_switch_keep_when': 'not_slower',
    'vllm_switch_margin_pct': 8.0,
    'vllm_switch_min_runs': 3,
    'vllm_switch_slo': {'p99_ttft_ms': 2000, 'by_concurrency': {4: {'p99_tpot_ms': 50}}},
    'vllm_switch_benchmark': {'prompt_set': 'code_editing', 'concurrency': [1, 4], 'num_prompts': 32},
    'vllm_switch_drain_hook_before': {'argv': ['lb', 'drain', 'node-1']},
    'vllm_switch_drain_hook_after': {'url': 'https://lb.example/api/enable', 'method': 'PUT', 'status_code': [200, 204]},
    'vllm_switch_notify_hook': {},
    'vllm_secret_environment': {'VLLM_API_KEY': 'sk-abc'},
    'vllm_pip_constraints': {'0.32.0': ['torch==2.13.0+cpu', "numpy<2; python_version < '3.12'"]},
    'vllm_switch_ca_path': '',
    'vllm_switch_preflight_downgrade': ['pcie_width_below_max'],
    'vllm_serve_args': {'ssl_certfile': '/etc/vllm/cert.pem', 'ssl_keyfile': '/etc/vllm/key.pem'},
}


def problems_with(**changes):
    return trial_setting_problems(dict(GOOD, **changes))


def test_settings_that_follow_every_rule_have_no_problem():
    assert trial_setting_problems(GOOD) == []
    assert trial_setting_problems({}) == []


@pytest.mark.parametrize('changes, expected', [
    ({'vllm_switch_keep_when': 'fastest'}, 'vllm_switch_keep_when must be one of not_slower, faster'),
    ({'vllm_switch_margin_pct': 'eight'}, "vllm_switch_margin_pct must be a finite number, got 'eight'"),
    ({'vllm_switch_margin_pct': -1}, 'vllm_switch_margin_pct must not be negative'),
    ({'vllm_switch_margin_pct': 150}, 'vllm_switch_margin_pct must be below 100'),
    ({'vllm_switch_min_runs': 0}, 'vllm_switch_min_runs must be a positive integer, got 0'),
    ({'vllm_switch_min_runs': 2.5}, 'vllm_switch_min_runs must be a positive integer, got 2.5'),
    ({'vllm_switch_slo': {'p99_ttft_msx': 100}}, 'vllm_switch_slo.p99_ttft_msx: unknown key'),
    ({'vllm_switch_slo': {'by_concurrency': {16: {'p99_ttft_ms': 100}}}},
     'vllm_switch_slo.by_concurrency.16: no workload measures concurrency 16 (they measure 1, 4)'),
    ({'vllm_switch_benchmark': {'concurrency': [4, 0]}},
     'vllm_switch_benchmark.concurrency must list at least one level, each at least 1'),
    ({'vllm_switch_benchmark': {'concurrency': 'many'}}, 'vllm_switch_benchmark: '),
    ({'vllm_switch_benchmark': [{'name': 'a', 'num_prompts': 0}, {'name': 'b', 'temperature': -1}]},
     'vllm_switch_benchmark[0].num_prompts must be at least 1'),
    ({'vllm_switch_benchmark': [{'name': 'a', 'num_prompts': 0}, {'name': 'b', 'temperature': -1}]},
     'vllm_switch_benchmark[1].temperature must be a finite number of at least 0'),
    ({'vllm_switch_benchmark': {'temperature': 1.0, 'top_p': 1.5}},
     'vllm_switch_benchmark.top_p must be greater than 0 and at most 1'),
    ({'vllm_switch_benchmark': {'top_k': 'ten'}}, 'vllm_switch_benchmark: '),
    ({'vllm_switch_benchmark': {'sampling_seed': 1.5}}, 'vllm_switch_benchmark: '),
    ({'vllm_switch_benchmark': [{'name': 'a', 'presence_penalty': 4}]},
     'vllm_switch_benchmark[0].presence_penalty must be between -2 and 2'),
    ({'vllm_switch_benchmark': {'tools': [{'type': 'function'}]}}, 'vllm_switch_benchmark.tools needs endpoint: chat'),
    ({'vllm_switch_benchmark': {'burstiness': 2}}, 'vllm_switch_benchmark: '),
    ({'vllm_switch_benchmark': [{'name': 'a', 'concurrency': [1], 'slo': {'by_concurrency': {8: {'p99_ttft_ms': 9}}}}]},
     'vllm_switch_benchmark[0].slo.by_concurrency.8: this workload does not measure concurrency 8'),
    ({'vllm_switch_benchmark': {'prompt_set': '/nowhere/replay.jsonl'}},
     "vllm_switch_benchmark.prompt_set: '/nowhere/replay.jsonl' is neither a built-in prompt set"),
    ({'vllm_switch_benchmark': {'prompt_set': {'replay': 'x.jsonl'}}},
     'vllm_switch_benchmark.prompt_set: must name a built-in prompt set or the path of a replay file, got dict'),
    ({'vllm_switch_answer_tolerance': 1.5},
     'vllm_switch_answer_tolerance must be a share of the requests from 0 to 1, got 1.5'),
    ({'vllm_switch_answer_tolerance': 'lots'},
     "vllm_switch_answer_tolerance must be a share of the requests from 0 to 1, got 'lots'"),
    ({'vllm_switch_answer_requests': 0}, 'vllm_switch_answer_requests must be a whole number of at least 1, got 0'),
    ({'vllm_switch_answer_max_tokens': 2.5},
     'vllm_switch_answer_max_tokens must be a whole number of at least 1, got 2.5'),
    ({'vllm_switch_engine_args_timeout': 0},
     'vllm_switch_engine_args_timeout must be a whole number of at least 1, got 0'),
    ({'vllm_switch_lifetime_runs': 0}, 'vllm_switch_lifetime_runs must be a whole number of at least 1, got 0'),
    ({'vllm_switch_calibration_lifetimes': 5},
     'vllm_switch_calibration_lifetimes must be a whole number of at least 8 (fewer cannot tell bimodal starts from '
     'spread ones), got 5'),
    ({'vllm_switch_max_lifetimes': 13},
     'vllm_switch_max_lifetimes must be a whole number from 1 (one lifetime a side) to 12, got 13'),
    ({'vllm_switch_max_lifetimes': 'ten'},
     "vllm_switch_max_lifetimes must be a whole number from 1 (one lifetime a side) to 12, got 'ten'"),
    ({'vllm_switch_preflight_downgrade': ['pcie_width_below_max', 'row_remap_pendng']},
     "vllm_switch_preflight_downgrade: 'row_remap_pendng' is no rule of the GPU preflight (its rules: "
     "compile_cache_disk_low, "),
    ({'vllm_switch_preflight_downgrade': 'persistence_off'},
     'vllm_switch_preflight_downgrade: must be a list of rule names, got str'),
    ({'vllm_switch_ca_path': 'certs/ca.pem'}, "vllm_switch_ca_path: must be an absolute path of a PEM file"),
    ({'vllm_serve_args': {'ssl_certfile': 'cert.pem', 'ssl_keyfile': '/k.pem'}},
     "vllm_serve_args.ssl_certfile: must be an absolute path on the node"),
    ({'vllm_serve_args': {'ssl_certfile': '/c.pem'}}, 'vllm_serve_args.ssl_keyfile: required with ssl_certfile'),
    ({'vllm_variants': {'tls': {'serve_args': {'ssl_keyfile': 'k.pem', 'ssl_certfile': '/c.pem'}}}},
     'vllm_variants.tls.serve_args.ssl_keyfile: must be an absolute path on the node'),
    ({'vllm_switch_phase_stall_timeouts': {'cuda_graph': 1800}},
     "vllm_switch_phase_stall_timeouts.cuda_graph: no such phase of a vLLM start (did you mean 'cuda_graphs'?); the "
     "phases are engine_init, weights_loaded, torch_compile, kv_cache, cuda_graphs, warmup, api_up, "),
    ({'vllm_switch_phase_stall_timeouts': {'warmup': -5}},
     'vllm_switch_phase_stall_timeouts.warmup: must be a whole number of seconds, 0 or more, got -5'),
    ({'vllm_switch_phase_stall_timeouts': [1800]},
     'vllm_switch_phase_stall_timeouts: must map phase names to seconds, got list'),
    ({'vllm_switch_benchmark': {'duration_s': 0}},
     'vllm_switch_benchmark.duration_s must be a positive number of seconds'),
    ({'vllm_switch_benchmark': {'duration_s': 600, 'num_prompts': 48}},
     'vllm_switch_benchmark.duration_s and num_prompts cannot both be set'),
    ({'vllm_switch_benchmark': {'duration_s': 60, 'warmup_s': 120}},
     'vllm_switch_benchmark.duration_s must be at least warmup_s (120 s)'),
    ({'vllm_switch_benchmark': {'duration_s': 600, 'request_rate': 2}},
     'vllm_switch_benchmark.duration_s cannot go with request_rate'),
    ({'vllm_switch_benchmark': {'warmup_s': 60}}, 'vllm_switch_benchmark: '),
    ({'vllm_switch_max_dark_minutes': 0},
     'vllm_switch_max_dark_minutes: must be a positive number of minutes (or null for no budget), got 0'),
    ({'vllm_switch_max_dark_minutes': 'four hours'},
     "vllm_switch_max_dark_minutes: must be a positive number of minutes (or null for no budget), got 'four hours'"),
    # Three 30-minute starts (the baseline's restart, the variant's load, the rollback's restart) are 90 minutes.
    ({'vllm_switch_max_dark_minutes': 60, 'vllm_expected_load_seconds': 1800},
     'vllm_switch_max_dark_minutes: 60 min is below the smallest trial: one lifetime a side, rolled back, starts the '
     'model 3 times, 90 min at vllm_expected_load_seconds=1800'),
])
def test_each_bad_setting_is_named_with_its_rule(changes, expected):
    problems = problems_with(**changes)

    assert any(problem.startswith(expected) for problem in problems), problems


def test_a_time_boxed_workload_passes():
    assert problems_with(vllm_switch_benchmark={'prompt_set': 'code_editing', 'concurrency': [1, 4],
                                                'duration_s': 600, 'warmup_s': 60, 'warmup_requests': 0}) == []


@pytest.mark.parametrize('budget', [240, '240', 90.5, None])
def test_a_dark_minutes_budget_that_holds_the_smallest_trial_passes(budget):
    assert problems_with(vllm_switch_max_dark_minutes=budget, vllm_expected_load_seconds=1800) == []


def test_a_mistyped_preflight_rule_is_offered_the_nearest_name():
    problems = problems_with(vllm_switch_preflight_downgrade=['row_remap_pendng'])

    assert problems[0].endswith('; did you mean row_remap_pending?')


def test_an_slo_set_alone_is_checked_too():
    problems = trial_setting_problems({'vllm_switch_slo': {'p99_ttft_msx': 100}})

    assert len(problems) == 1 and problems[0].startswith('vllm_switch_slo.p99_ttft_msx: unknown key')


def test_a_disabled_benchmark_is_not_checked():
    assert problems_with(vllm_switch_benchmark={'concurrency': [0]}, vllm_switch_benchmark_enabled=False) == []


def test_a_replay_file_must_parse_on_the_controller(tmp_path):
    broken = tmp_path / 'broken.jsonl'
    broken.write_text('{"prompt": 3}\n', encoding='utf-8')
    good = tmp_path / 'good.jsonl'
    good.write_text(json.dumps({'prompt': 'Say hello.'}) + '\n', encoding='utf-8')

    problems = problems_with(vllm_switch_benchmark={'prompt_set': str(broken), 'concurrency': [1, 4]})

    assert len(problems) == 1 and problems[0].startswith('vllm_switch_benchmark.prompt_set: the replay file cannot be used')
    assert problems_with(vllm_switch_benchmark={'prompt_set': str(good), 'concurrency': [1, 4]}) == []
    # A client elsewhere reads its own files; the controller has nothing to check.
    assert trial_setting_problems(dict(GOOD, vllm_switch_benchmark={'prompt_set': '/on/the/node.jsonl', 'concurrency': [4]}),
                                  check_replay_files=False) == []


def test_every_problem_is_reported_at_once():
    problems = problems_with(vllm_switch_min_runs=0, vllm_switch_drain_hook_before={'cmd': 'x'},
                             vllm_pip_constraints={'0.32.0': ['-e .']})

    assert [problem.split(':')[0].split(' ')[0] for problem in problems] == [
        'vllm_switch_min_runs', 'vllm_switch_drain_hook_before.cmd', 'vllm_switch_drain_hook_before',
        'vllm_pip_constraints.0.32.0[0]']


@pytest.mark.parametrize('hook, expected', [
    ({'command': ['lb', 'drain']}, ['x.command: unknown key; a hook takes argv',
                                    'x: names neither argv (a command) nor url (an HTTP call), so it would never run']),
    ({'urll': 'http://lb/drain'}, ['x.urll: unknown key; did you mean url?', 'x: names neither argv']),
    ({'argv': 'lb drain'}, ['x.argv: must be a non-empty list of strings']),
    ({'argv': []}, ['x.argv: must be a non-empty list of strings']),
    ({'argv': ['lb'], 'url': 'http://lb/'}, ['x: set argv (a command) or url (an HTTP call), not both']),
    ({'argv': ['lb'], 'method': 'POST'}, ['x.method: applies to an HTTP call (url), not to a command (argv)']),
    ({'url': 'lb.example/drain'}, ['x.url: must be an http:// or https:// URL']),
    ({'url': 'http://lb/drain', 'method': 'SEND'}, ['x.method: must be one of GET, POST']),
    ({'url': 'http://lb/drain', 'status_code': 99}, ['x.status_code: must be an HTTP status (100 to 599)']),
    ({'url': 'http://lb/drain', 'headers': ['Authorization']}, ['x.headers: must map header names to strings']),
    (['lb', 'drain'], ['x: must be a mapping, {argv: [...]} (a command) or {url: ...} (an HTTP call), got list']),
])
def test_a_hook_the_role_would_skip_or_misread_is_refused(hook, expected):
    problems = hook_problems(hook, 'x')

    assert len(problems) == len(expected), problems
    for problem, start in zip(problems, expected):
        assert problem.startswith(start), problems


def test_hooks_the_role_runs_pass():
    assert hook_problems({}, 'x') == [] and hook_problems(None, 'x') == []
    assert hook_problems({'argv': ['lb', 'drain', 3]}, 'x') == []
    assert hook_problems({'url': 'http://127.0.0.1:9000/drain', 'body': {'node': 'a'}, 'headers': {'X-A': 'b'}}, 'x') == []


@pytest.mark.parametrize('value, rule', [
    ('sk-abc\n', 'the value begins or ends with whitespace or a newline'),
    (' sk-abc', 'the value begins or ends with whitespace or a newline'),
    ('', 'is empty'),
    ('sk\x07abc', 'the value holds a control character'),
    (['sk-abc'], 'must be a string, got list'),
])
def test_a_secret_that_would_not_work_is_named_but_never_quoted(value, rule):
    problems = secret_problems({'VLLM_API_KEY': value})

    assert len(problems) == 1 and problems[0].startswith('vllm_secret_environment.VLLM_API_KEY: ' + rule)
    assert 'abc' not in problems[0]


@pytest.mark.parametrize('constraints, expected', [
    ({'0.32.0': ['--index-url http://x']}, "vllm_pip_constraints.0.32.0[0]: '--index-url http://x' is a pip option"),
    ({'0.32.0': ['-r other.txt']}, "vllm_pip_constraints.0.32.0[0]: '-r other.txt' is a pip option"),
    ({'0.32.0': ['torch==2.13\n--pre']}, 'vllm_pip_constraints.0.32.0[0]: must be one requirement on one line'),
    ({'0.32.0': ['==2.13.0']}, "vllm_pip_constraints.0.32.0[0]: '==2.13.0' is not a requirement"),
    ({'0.32.0': 'torch==2.13.0'}, 'vllm_pip_constraints.0.32.0: must be a list of pins'),
    (['torch==2.13.0'], 'vllm_pip_constraints: must map a vLLM release to a list of pins, got list'),
])
def test_a_pin_that_pip_would_read_otherwise_is_refused(constraints, expected):
    problems = constraint_problems(constraints)

    assert len(problems) == 1 and problems[0].startswith(expected), problems


def test_pins_pip_takes_pass():
    assert constraint_problems({'0.32.0': ['torch==2.13.0+cpu', 'triton>=3.1,<4', 'flashinfer-python[all]==0.2',
                                           "numpy<2; python_version < '3.12'"]}) == []


def test_a_misspelt_variable_names_the_nearest_known_one():
    known = known_variable_names()

    warnings = unknown_variable_warnings(['vllm_switch_marign_pct', 'vllm_switch_margin_pct', 'vllm_zzz', 'other'], known)

    assert warnings == [
        'vllm_switch_marign_pct: no role or playbook of llmops.vllm reads this variable; did you mean vllm_switch_margin_pct?',
        'vllm_zzz: no role or playbook of llmops.vllm reads this variable (a typo?)',
    ]


def test_every_declared_role_variable_and_playbook_variable_is_known():
    known = known_variable_names()
    declared = {name for spec in role_argument_specs().values() for name in spec}

    assert declared <= known
    # Read by playbooks only, not by a role.
    assert {'vllm_target_hosts', 'vllm_ngram_seed_config', 'vllm_search_grid'} <= known


def test_the_role_specs_require_nothing_so_that_only_what_is_set_is_checked():
    for spec in role_argument_specs().values():
        assert spec and not any(option.get('required') for option in spec.values())


def test_an_action_validates_its_arguments_as_its_module_documents_them():
    documentation = '''
options:
  wait:
    description: How long.
    type: int
    default: 5
  mode:
    description: Which.
    type: str
    choices: [a, b]
    required: true
  nested:
    description: More.
    type: dict
    suboptions:
      depth:
        description: Deep.
        type: int
        default: 1
'''
    assert documented_argument_spec(documentation) == {
        'wait': {'type': 'int', 'default': 5},
        'mode': {'type': 'str', 'choices': ['a', 'b'], 'required': True},
        'nested': {'type': 'dict', 'options': {'depth': {'type': 'int', 'default': 1}}},
    }


def test_answer_check_settings_given_on_the_command_line_pass():
    # -e gives strings, which the role's argument spec reads as numbers.
    assert problems_with(vllm_switch_answer_tolerance='0.3', vllm_switch_answer_requests='4',
                         vllm_switch_answer_max_tokens=32) == []


def test_a_drain_shorter_than_the_longest_answer_at_the_node_s_speed_is_warned_of_with_both_figures():
    workloads = [{'name': 'short', 'max_tokens': 1024}, {'name': 'thinking', 'max_tokens': 16384}]
    warnings = drain_warnings({'vllm_switch_benchmark': workloads, 'vllm_switch_expected_stream_tok_s': 74})

    # 16,384 tokens at 74 tok/s take 221 s, against the default drain of 120 s.
    assert warnings == ["vllm_switch_drain_timeout=120 s is shorter than the longest answer the workloads allow: "
                        "workload thinking's max_tokens 16384 at 74 tok/s a stream (vllm_switch_expected_stream_tok_s) "
                        "takes 221 s, so a request still answering when the drain ends is cut off by the stop"]
    assert drain_warnings({'vllm_switch_benchmark': workloads, 'vllm_switch_expected_stream_tok_s': 74,
                           'vllm_switch_drain_timeout': 240}) == []
    # Without the node's speed nothing can be said.
    assert drain_warnings({'vllm_switch_benchmark': workloads}) == []
