# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

OPTIONS = '{endpoint: completions, model: tiny-served, num_prompts: 32, request_rate: null, burstiness: 1.0}'

FIRST_RUN = f"""
- name: Benchmarks of one run
  hosts: bench-node
  gather_facts: false
  collections: [fake.bench]
  tasks:
    - name: Baseline
      openai_benchmark:
        labels: {{model: tiny, variant: baseline, unit_checksum: sum-of-baseline, vllm_version: 0.32.0}}
        options: {OPTIONS}
        results:
          - {{max_concurrency: 1, output_throughput: 50.0, median_tpot_ms: 20.0, median_ttft_ms: 30.0, completed: 32, failed: 0}}
          - {{max_concurrency: 4, output_throughput: 99.0, output_throughput_mean: 100.0, output_throughput_ci95: 2.0,
              median_tpot_ms: 10.0, median_ttft_ms: 40.0, completed: 32, failed: 0}}
      delegate_to: localhost
      register: baseline_run

    - name: Store the baseline
      llmops.vllm.results_store:
        benchmark: "{{{{ baseline_run }}}}"
        task: Baseline

    - name: Variants
      openai_benchmark:
        labels:
          model: tiny
          variant: "{{{{ item.variant }}}}"
          speculative_config: {{method: ngram, num_speculative_tokens: 5, prompt_lookup_max: 4}}
        options: {OPTIONS}
        results: "{{{{ item.results }}}}"
      delegate_to: localhost
      loop:
        - variant: ngram
          results: [{{max_concurrency: 4, output_throughput: 80.0, median_tpot_ms: 12.5, median_ttft_ms: 36.0,
                      spec_decode_acceptance_rate: 65.6, completed: 32, failed: 0}}]
        - variant: eagle3
          results: [{{max_concurrency: 4, output_throughput: 103.0, output_throughput_mean: 103.0,
                      output_throughput_ci95: 1.5, completed: 32, failed: 0}}]
      register: variant_runs

    - name: Store the variants
      llmops.vllm.results_store:
        benchmark: "{{{{ variant_runs }}}}"
        task: Variants

    - name: A benchmark that failed after measuring
      openai_benchmark:
        fail: true
        labels: {{model: tiny, variant: broken}}
        options: {OPTIONS}
        results: [{{max_concurrency: 4, output_throughput: 10.0, completed: 1, failed: 31}}]
      ignore_errors: true
      register: broken_run

    - name: Store what the failed benchmark measured
      llmops.vllm.results_store:
        benchmark: "{{{{ broken_run }}}}"
        task: A benchmark that failed after measuring

    - name: Looped tasks of other modules are not benchmarks
      ansible.builtin.debug:
        msg: "{{{{ item }}}}"
      loop: [1, 2]
      register: not_a_benchmark

    - name: Store nothing of them
      llmops.vllm.results_store:
        benchmark: "{{{{ not_a_benchmark }}}}"
"""

SECOND_RUN = f"""
- name: A later run without a baseline
  hosts: bench-node
  gather_facts: false
  collections: [fake.bench]
  tasks:
    - name: Only the variant
      openai_benchmark:
        labels: {{model: tiny, variant: eagle3}}
        options: {OPTIONS}
        results: [{{max_concurrency: 4, output_throughput: 120.0, completed: 32, failed: 0}}]
      register: variant_run

    - name: Store it
      llmops.vllm.results_store:
        benchmark: "{{{{ variant_run }}}}"
"""


def table_row(stdout, variant):
    rows = [line.split() for line in stdout.splitlines() if line.startswith(f'  {variant} ')]
    assert len(rows) == 1, stdout
    return rows[0]


def test_results_are_stored_printed_and_reported(project):
    project.configure(database='results/benchmarks.sqlite3', json_dir='results/runs', report='results/report.md')
    run = project.run(project.playbook(FIRST_RUN))
    assert run.returncode == 0, run.stdout + run.stderr
    stdout = run.stdout

    # Relative paths of ansible.cfg are relative to its directory, not to the current directory.
    results = project.config.parent / 'results'
    assert not (project.root / 'elsewhere' / 'results').exists()
    rows = project.rows(results / 'benchmarks.sqlite3')
    assert [(row['host'], row['variant'], row['max_concurrency'], row['task_failed']) for row in rows] == [
        ('bench-node', 'baseline', 1, 0),
        ('bench-node', 'baseline', 4, 0),
        ('bench-node', 'ngram', 4, 0),
        ('bench-node', 'eagle3', 4, 0),
        ('bench-node', 'broken', 4, 1),
    ]
    assert len({row['run_id'] for row in rows}) == 1
    assert all(re.fullmatch(r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ', row['recorded_at']) for row in rows)
    baseline = rows[1]
    assert (baseline['model'], baseline['unit_checksum'], baseline['vllm_version'], baseline['task']) == \
        ('tiny', 'sum-of-baseline', '0.32.0', 'Baseline')
    assert json.loads(baseline['options'])['num_prompts'] == 32
    assert json.loads(baseline['metrics'])['output_throughput_ci95'] == 2.0
    assert json.loads(rows[2]['speculative_config']) == {'method': 'ngram', 'num_speculative_tokens': 5,
                                                         'prompt_lookup_max': 4}

    documents = project.json_documents(results / 'runs')
    assert len(documents) == 5
    [ngram] = [document for name, document in documents.items() if '_ngram_c4_' in name]
    assert {key: ngram[key] for key in ('endpoint_type', 'backend', 'label', 'model_id', 'num_prompts',
                                        'request_rate', 'burstiness', 'max_concurrency', 'output_throughput',
                                        'spec_decode_acceptance_rate')} == {
        'endpoint_type': 'openai', 'backend': 'openai', 'label': 'ngram', 'model_id': 'tiny-served',
        'num_prompts': 32, 'request_rate': 'inf', 'burstiness': 1.0, 'max_concurrency': 4,
        'output_throughput': 80.0, 'spec_decode_acceptance_rate': 65.6}
    assert re.fullmatch(r'\d{8}-\d{6}', ngram['date'])
    assert ngram['llmops_vllm']['host'] == 'bench-node'
    assert ngram['llmops_vllm']['run_id'] == rows[0]['run_id']

    assert 'VARIANT BENCHMARKS' in stdout
    assert 'host bench-node, model tiny' in stdout
    assert table_row(stdout, 'ngram') == ['ngram', 'default', '4', '80.0', '-20.0%', '12.50', '–', '+25.0%', '36.0',
                                          '–', '-10.0%', '65.6%', 'undecided', 'this', 'run']
    # 103 against 100: +3%, inside a 5% band but outside the 95% interval of the difference (2.5).
    assert ' '.join(table_row(stdout, 'eagle3')) == 'eagle3 default 4 103.0 ± 1.5 +3.0% – – – – – undecided this run'
    assert ' '.join(table_row(stdout, 'broken')) == 'broken default 4 10.0 -90.0% – – – – – undecided (task failed) this run'
    assert '  note: broken at concurrency 4: 31 requests failed.' in stdout
    assert f"Stored 5 of 5 results in {results / 'benchmarks.sqlite3'}; 5 JSON files." in stdout
    # Molecule's idempotence check fails a converge whose output matches this.
    assert not re.search(r'changed=[1-9]', stdout)

    report = (results / 'report.md').read_text(encoding='utf-8')
    assert '| eagle3 | default | 4 | 103.0 ± 1.5 | +3.0% |' in report
    assert '| ngram | default | 4 | 80.0 | -20.0% | 12.50 | – | – | +25.0% | 36.0 | – | – | -10.0% | 65.6% | undecided |' \
        in report


def test_a_later_run_adds_rows_and_falls_back_to_the_stored_baseline(project):
    assert project.run(project.playbook(FIRST_RUN)).returncode == 0
    database = project.config.parent / 'results' / 'benchmarks.sqlite3'
    before = [tuple(row) for row in project.rows(database)]

    run = project.run(project.playbook(SECOND_RUN, 'second.yml'))
    assert run.returncode == 0, run.stdout + run.stderr
    after = [tuple(row) for row in project.rows(database)]
    assert after[:len(before)] == before
    assert len(after) == len(before) + 1
    assert after[-1][2] != before[0][2]  # a new run id
    # 120 against the stored 100 (the mean of the earlier baseline's repeats): +20%.
    run_id = before[0][2]
    assert ' '.join(table_row(run.stdout, 'eagle3')).startswith(
        f'eagle3 default 4 120.0 +20.0% – – – – – undecided earlier run {run_id[:8]} (')
    assert 'note: eagle3 at concurrency 4: no baseline in the same run; compared with the baseline of run' \
           f' {run_id[:8]}' in run.stdout
    # The stored baseline is the reference, not a result of this run.
    assert not [line for line in run.stdout.splitlines() if line.startswith('  baseline ')]


def test_a_database_that_cannot_be_written_warns_but_keeps_the_play_going(project):
    (project.root / 'blocker').write_text('a file where the database directory should be', encoding='utf-8')
    project.configure(database=str(project.root / 'blocker' / 'benchmarks.sqlite3'), json_dir='runs')
    run = project.run(project.playbook(SECOND_RUN))
    assert run.returncode == 0, run.stdout + run.stderr
    output = run.stdout + run.stderr
    assert 'results_store: could not store 1 results in' in output
    assert 'Stored 0 of 1 results' in run.stdout
    assert table_row(run.stdout, 'eagle3')[:4] == ['eagle3', 'default', '4', '120.0']
    assert len(project.json_documents(project.config.parent / 'runs')) == 1


def test_defaults_and_environment_settings(project):
    project.configure()
    home = project.root / 'home'
    home.mkdir()
    playbook = project.playbook(SECOND_RUN.replace('variant: eagle3', 'variant: reference'))
    run = project.run(playbook, HOME=str(home), LLMOPS_VLLM_BENCHMARKS_BASELINE_VARIANT='reference',
                      LLMOPS_VLLM_BENCHMARKS_JSON_DIR='from-environment')
    assert run.returncode == 0, run.stdout + run.stderr
    rows = project.rows(home / '.ansible' / 'llmops_vllm' / 'benchmarks.sqlite3', 'variant')
    assert [row['variant'] for row in rows] == ['reference']
    # A relative path from the environment is relative to the current directory.
    assert len(project.json_documents(project.root / 'elsewhere' / 'from-environment')) == 1
    assert table_row(run.stdout, 'reference')[-2:] == ['baseline', '–']


def test_plays_without_benchmarks_leave_no_trace(project):
    run = project.run(project.playbook("""
- name: No benchmark here
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Say hello
      ansible.builtin.debug:
        msg: hello
"""))
    assert run.returncode == 0, run.stdout + run.stderr
    assert 'VARIANT BENCHMARKS' not in run.stdout
    assert not (project.config.parent / 'results').exists()


def test_results_of_a_killed_play_are_kept(project):
    playbook = project.playbook(SECOND_RUN + """
    - name: Hang until killed
      ansible.builtin.wait_for:
        timeout: 120
""")
    database = project.config.parent / 'results' / 'benchmarks.sqlite3'
    process = subprocess.Popen(project.command(playbook), cwd=project.root / 'elsewhere', env=project.environment(),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (database.exists() and _count_rows(database)):
            assert time.monotonic() < deadline, 'the benchmark result was never stored'
            assert process.poll() is None, process.stdout.read()
            time.sleep(0.2)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        # A worker that was forking when the group was killed leaves a child behind: kill until none is left.
        for dummy in range(50):
            if subprocess.run(['pkill', '-KILL', '-f', str(project.root)], check=False).returncode == 1:
                break
            time.sleep(0.1)
        stdout = process.communicate(timeout=30)[0]
    assert 'VARIANT BENCHMARKS' not in stdout
    connection = sqlite3.connect(database)
    try:
        assert connection.execute('PRAGMA integrity_check').fetchone()[0] == 'ok'
        assert connection.execute('SELECT variant, output_throughput FROM results').fetchall() == [('eagle3', 120.0)]
    finally:
        connection.close()
    assert len(project.json_documents(project.config.parent / 'results' / 'runs')) == 1


def _count_rows(database):
    connection = sqlite3.connect(database)
    try:
        return connection.execute('SELECT count(*) FROM results').fetchone()[0]
    except sqlite3.OperationalError:
        return 0  # the schema is not created yet
    finally:
        connection.close()


class FakeVLLMServer(BaseHTTPRequestHandler):
    """Streams each completion as max_tokens one-token chunks, the way vLLM's OpenAI server does."""

    protocol_version = 'HTTP/1.0'

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
        self.send_response(200)
        self.send_header('Content-Type', 'text/event-stream')
        self.end_headers()
        for dummy in range(body['max_tokens']):
            self.wfile.write(b'data: {"choices": [{"index": 0, "text": "x"}]}\n\n')
            time.sleep(0.001)
        usage = {'prompt_tokens': 7, 'completion_tokens': body['max_tokens']}
        self.wfile.write(f'data: {json.dumps({"choices": [], "usage": usage})}\n\n'.encode())
        self.wfile.write(b'data: [DONE]\n\n')

    def do_GET(self):
        self.send_response(200)
        self.send_header('Content-Type', 'text/plain')
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_vllm():
    server = ThreadingHTTPServer(('127.0.0.1', 0), FakeVLLMServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f'http://127.0.0.1:{server.server_address[1]}'
    server.shutdown()
    server.server_close()


def test_results_of_the_real_openai_benchmark_module(project, fake_vllm):
    run = project.run(project.playbook(f"""
- name: Benchmark a fake vLLM with the collection's module
  hosts: bench-node
  gather_facts: false
  tasks:
    - name: Benchmark
      llmops.vllm.openai_benchmark:
        base_url: {fake_vllm}
        model: tiny-served
        num_prompts: 6
        concurrency: [1, 2]
        max_tokens: 5
        warmup_requests: 0
        labels: {{model: tiny, variant: baseline, vllm_version: 0.32.0}}
      delegate_to: localhost
      register: measured

    - name: Store
      llmops.vllm.results_store:
        benchmark: "{{{{ measured }}}}"
"""))
    assert run.returncode == 0, run.stdout + run.stderr
    rows = project.rows(project.config.parent / 'results' / 'benchmarks.sqlite3')
    assert [(row['host'], row['model'], row['variant'], row['max_concurrency'], row['completed'])
            for row in rows] == [('bench-node', 'tiny', 'baseline', 1, 6), ('bench-node', 'tiny', 'baseline', 2, 6)]
    for row in rows:
        metrics = json.loads(row['metrics'])
        assert metrics['total_output_tokens'] == 30
        assert row['output_throughput'] == pytest.approx(metrics['total_output_tokens'] / metrics['duration'])
        assert row['median_tpot_ms'] == metrics['median_tpot_ms'] > 0
        assert json.loads(row['options'])['base_url'] == fake_vllm
    printed = [line.split()[:3] for line in run.stdout.splitlines() if line.startswith('  baseline ')]
    assert printed == [['baseline', 'default', '1'], ['baseline', 'default', '2']]


DECIDED_TRIAL = f"""
- name: A trial decided by llmops.vllm.trial_decision
  hosts: bench-node
  gather_facts: false
  collections: [fake.bench]
  tasks:
    - name: Baseline
      openai_benchmark:
        labels: {{model: tiny, variant: baseline, unit_checksum: sum-of-baseline, lifetime: "{{{{ lifetime }}}}"}}
        options: {OPTIONS}
        results:
          - {{max_concurrency: 4, output_throughput: "{{{{ base_runs[1] }}}}", output_throughput_repeats: "{{{{ base_runs }}}}",
              completed: 32, failed: 0}}
      register: baseline_run
      delegate_to: localhost

    - name: Store the baseline
      llmops.vllm.results_store:
        benchmark: "{{{{ baseline_run }}}}"

    - name: Variant
      openai_benchmark:
        labels: {{model: tiny, variant: ngram}}
        options: {OPTIONS}
        results:
          - {{max_concurrency: 4, output_throughput: "{{{{ runs[1] }}}}", output_throughput_repeats: "{{{{ runs }}}}",
              completed: 32, failed: 0}}
      register: variant_run
      delegate_to: localhost

    - name: Store the variant
      llmops.vllm.results_store:
        benchmark: "{{{{ variant_run }}}}"

    - name: Read the node's history, as the switch role does
      llmops.vllm.trial_record_info:
        path: "{{{{ records }}}}"
      register: node_trials
      delegate_to: localhost

    - name: Decide
      llmops.vllm.trial_decision:
        variant: "{{{{ variant_run }}}}"
        baseline: "{{{{ baseline_run }}}}"
        variant_name: ngram
        model: tiny
        unit_checksum: sum-of-ngram
        baseline_unit_checksum: sum-of-baseline
        identity: identity-of-ngram
        node_history: "{{{{ node_trials.history }}}}"
      register: decision

    - name: Store the decision
      llmops.vllm.results_store:
        decision: "{{{{ decision }}}}"

    - name: Record the trial on the node, as the switch role does
      llmops.vllm.trial_record:
        path: "{{{{ records }}}}"
        record:
          variant: ngram
          baseline: baseline
          outcome: "{{{{ 'kept' if decision.decision == 'keep' else 'rolled_back' }}}}"
          decision: "{{{{ decision }}}}"
      delegate_to: localhost
      register: recorded

    - name: Store the record
      llmops.vllm.results_store:
        history: "{{{{ recorded.record }}}}"

    - name: Show it
      ansible.builtin.debug:
        msg: "DECIDED {{{{ decision.decision }}}} {{{{ decision.history.earlier_lifetimes }}}} {{{{ decision.reason }}}}"
"""


def run_trial(project, playbook, lifetime, base, speed, records='records', **extra_env):
    """One trial: the baseline ran in this lifetime at base tok/s, the variant at speed, each +/- 1 tok/s."""
    extra = json.dumps({'lifetime': lifetime, 'base_runs': [base - 1.0, base, base + 1.0],
                        'runs': [speed - 1.0, speed, speed + 1.0], 'records': str(project.root / records)})
    return subprocess.run(project.command(playbook) + ['-e', extra], cwd=project.root / 'elsewhere',
                          env=project.environment(**extra_env), capture_output=True, text=True, timeout=300,
                          check=False)


TRIALS = (('L1', 100.0), ('L2', 110.0), ('L3', 90.0))


def node_decisions(directory):
    """What the node's history says each trial decided, and from how many earlier lifetimes."""
    lines = (directory / 'history.jsonl').read_text(encoding='utf-8').splitlines()
    return [(entry['decision']['decision'], entry['decision']['outcome'], entry['decision']['history'],
             entry['decision']['reason'], entry['decision']['baseline_lifetimes'])
            for entry in map(json.loads, lines)]


def test_without_the_callback_the_node_history_decides_alike(project):
    # The decision learns from the node alone: a controller without the callback, or another controller,
    # decides each trial of the same node exactly as one with it.
    project.configure(database='results/benchmarks.sqlite3')
    playbook = project.playbook(DECIDED_TRIAL)
    for records, extra_env in (('with-callback', {}), ('without-callback', {'ANSIBLE_CALLBACKS_ENABLED': 'ansible.builtin.default'})):
        for lifetime, base in TRIALS:
            run = run_trial(project, playbook, lifetime, base, base * 0.95, records=records, **extra_env)
            assert run.returncode == 0, run.stdout + run.stderr
    with_callback = node_decisions(project.root / 'with-callback')
    # One lifetime a side: without an earlier lifetime nothing shows how lifetimes differ, and 10% apart they are
    # too far apart for -5% to be kept.
    assert [decided[:2] for decided in with_callback] == [('roll_back', 'inconclusive')] * 3
    assert [decided[2]['earlier_lifetimes'] for decided in with_callback] == [0, 1, 2]
    assert node_decisions(project.root / 'without-callback') == with_callback
    # The store is the role's own step: the controller's database got the same rows either way.
    database = project.config.parent / 'results' / 'benchmarks.sqlite3'
    stored = [(row['variant'], row['decision'], row['outcome']) for row in decisions(database)]
    assert stored[3:] == stored[:3] == [('ngram', decided[0], decided[1]) for decided in with_callback]
    assert [row['variant'] for row in project.rows(database, 'variant')] == ['baseline', 'ngram'] * 6
    history = history_rows(database)
    assert [entry['outcome'] for entry in history[3:]] == [entry['outcome'] for entry in history[:3]]


def calibrated(records, speeds):
    """The node's history after a calibration of its baseline: one lifetime at each speed (as calibrate records)."""
    records.mkdir(parents=True, exist_ok=True)
    entry = {'variant': 'baseline', 'baseline': 'baseline', 'outcome': 'calibrated', 'decision': {'baseline_lifetimes': [
        {'workload': 'default', 'max_concurrency': 4, 'output_throughput': speed, 'lifetime': 'C%d' % index,
         'unit_checksum': 'sum-of-baseline', 'prompt_set_sha256': None} for index, speed in enumerate(speeds)]}}
    (records / 'history.jsonl').write_text(json.dumps(entry) + '\n', encoding='utf-8')


def history_rows(database):
    connection = sqlite3.connect(database)
    try:
        return [json.loads(document) for (document,) in connection.execute('SELECT document FROM history ORDER BY id')]
    finally:
        connection.close()


def decisions(database):
    connection = sqlite3.connect(database)
    connection.row_factory = sqlite3.Row
    try:
        return connection.execute('SELECT * FROM decisions ORDER BY id').fetchall()
    finally:
        connection.close()


def test_a_trial_decision_is_stored_printed_and_learns_from_earlier_lifetimes(project):
    project.configure(database='results/benchmarks.sqlite3', json_dir='results/runs', report='results/report.md')
    playbook = project.playbook(DECIDED_TRIAL)
    first = run_trial(project, playbook, 'L1', 100.0, 95.0)
    assert first.returncode == 0, first.stdout + first.stderr
    # One lifetime a side and nothing on record of how the baseline's lifetimes differ: not decided, and said how.
    assert 'DECIDED roll_back 0 at concurrency 4: inconclusive after one lifetime a side' in first.stdout
    assert ' '.join(table_row(first.stdout, 'ngram')[-5:]) == 'rolled back (inconclusive) this run'
    assert '  decision on ngram: rolled back (inconclusive), at concurrency 4: inconclusive after one lifetime' in first.stdout

    # Once a calibration has recorded twelve steady lifetimes of the baseline, the same -5% is kept at one look, and
    # the table shows the decision's own change, over its one pair.
    calibrated(project.root / 'records', [100.0, 100.5, 99.5, 100.2, 99.8, 100.1, 99.9, 100.3, 99.7, 100.0, 100.4, 99.6])
    again = run_trial(project, playbook, 'L2', 100.0, 95.0)
    assert again.returncode == 0, again.stdout + again.stderr
    assert 'DECIDED keep 12 at concurrency 4: not slower: -5.0% (99% interval' in again.stdout
    assert table_row(again.stdout, 'ngram')[4:7] == ['-5.0%', '(1', 'pair)']

    results = project.config.parent / 'results'
    rows = decisions(results / 'benchmarks.sqlite3')
    assert [(row['variant'], row['decision'], row['outcome']) for row in rows] == [
        ('ngram', 'roll_back', 'inconclusive'), ('ngram', 'keep', 'not_slower')]
    assert json.loads(rows[1]['document'])['looks'][0]['history_lifetimes'] == 12
    assert rows[0]['unit_checksum'] == 'sum-of-ngram'
    assert json.loads(rows[0]['document'])['identity'] == 'identity-of-ngram'
    files = [document for name, document in project.json_documents(results / 'runs').items() if '_decision_' in name]
    assert [document['document']['reason'] for document in files] == [row['reason'] for row in rows]
    report = (results / 'report.md').read_text(encoding='utf-8')
    assert '### Decisions' in report
    assert rows[1]['reason'].split(';')[0] in report


def test_check_mode_stores_nothing(project):
    playbook = project.playbook("""
- name: A result to store, in check mode
  hosts: bench-node
  gather_facts: false
  tasks:
    - name: Store it
      llmops.vllm.results_store:
        benchmark:
          labels: {model: tiny, variant: ngram}
          results: [{max_concurrency: 4, output_throughput: 120.0, completed: 32, failed: 0}]
      register: stored

    - name: It would have been one row
      ansible.builtin.assert:
        that: stored.results == [] and stored.json_files == [] and stored.run_id | length == 32
""")
    run = subprocess.run(project.command(playbook) + ['--check'], cwd=project.root / 'elsewhere',
                         env=project.environment(), capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert not (project.config.parent / 'results').exists()
    assert project.run(playbook).returncode == 2  # without --check the row is stored, so the assert fails
    assert [row['variant'] for row in project.rows(project.config.parent / 'results' / 'benchmarks.sqlite3')] == ['ngram']
