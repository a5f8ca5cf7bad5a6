# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.llmops.vllm.plugins.plugin_utils._results_store import (
    BenchmarkRecord,
    DecisionRecord,
    HistoryEntry,
    ResultsStore,
)

REPO = Path(__file__).resolve().parents[4]
COLLECTIONS = REPO.parents[2] if REPO.parent.parent.name == 'ansible_collections' else REPO / '.cache' / 'collections'


@pytest.fixture
def project(tmp_path):
    """A configuration whose callback database the report must default to; its noise_pct is deprecated, ignored."""
    config = tmp_path / 'config'
    (config / 'results').mkdir(parents=True)
    (tmp_path / 'elsewhere').mkdir()
    (config / 'ansible.cfg').write_text(
        f'[defaults]\ncollections_path = {COLLECTIONS}\n'
        '[callback_variant_benchmarks]\ndatabase = results/benchmarks.sqlite3\nnoise_pct = 25\n',
        encoding='utf-8')
    with ResultsStore(str(config / 'results' / 'benchmarks.sqlite3')) as store:
        store.add([
            BenchmarkRecord(recorded_at='2026-05-01T10:00:00Z', run_id='aaaaaaaa1111', host='gpu-node-1',
                            model='kimi-k2.5', variant='baseline', metrics={'max_concurrency': 4, 'output_throughput': 74.0}),
            BenchmarkRecord(recorded_at='2026-05-01T10:20:00Z', run_id='aaaaaaaa1111', host='gpu-node-1',
                            model='kimi-k2.5', variant='ngram', metrics={'max_concurrency': 4, 'output_throughput': 60.0}),
        ])
    return tmp_path


def ansible_playbook(project, playbook, *arguments):
    env = {key: value for key, value in os.environ.items() if not key.startswith(('ANSIBLE_', 'LLMOPS_VLLM_'))}
    env.update(ANSIBLE_CONFIG=str(project / 'config' / 'ansible.cfg'), ANSIBLE_NOCOLOR='1',
               ANSIBLE_LOCAL_TEMP=str(project / 'tmp'))
    return subprocess.run([str(Path(sys.executable).parent / 'ansible-playbook'), str(playbook), *arguments],
                          cwd=project / 'elsewhere', env=env, capture_output=True, text=True, timeout=300, check=False)


def test_report_playbook_writes_the_report_once(project):
    run = ansible_playbook(project, REPO / 'playbooks' / 'report.yml')
    assert run.returncode == 0, run.stdout + run.stderr
    assert 'changed=1' in run.stdout
    # The default destination is relative to the current directory; the database is the callback's, from
    # ansible.cfg. No trial decided on n-gram, so its -18.9% is shown and labelled by nobody.
    report = (project / 'elsewhere' / 'results' / 'benchmarks.md').read_text(encoding='utf-8')
    assert '| ngram | default | 4 | 60.0 | -18.9% |' in report
    assert '| undecided |' in report and 'noise band' not in report
    if importlib.util.find_spec('matplotlib'):
        assert (project / 'elsewhere' / 'results' / 'benchmarks-gpu-node-1-kimi-k2.5.png').exists()
    else:
        assert 'Chart not drawn: matplotlib is not importable on the controller.' in run.stdout

    again = ansible_playbook(project, REPO / 'playbooks' / 'report.yml')
    assert again.returncode == 0, again.stdout + again.stderr
    assert 'changed=0' in again.stdout


STARTS_PLAYBOOK = """
- name: Report the timed starts
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Write the report
      llmops.vllm.benchmark_report:
        dest: starts/report.md
      register: report

    - name: The starts chart is listed last
      ansible.builtin.assert:
        that:
          - report.charts | length == (2 if drawn | bool else 0)
          - (report.charts | last).endswith('/starts/report-starts.png') if drawn | bool else report.chart_note is defined
"""


def test_the_report_tables_and_draws_the_starts_on_record(project):
    start = {'unit': 'vllm-kimi-k2.5-ngram.service', 'variant': 'ngram', 'summary': 'first completion after 28m07s',
             'seconds': 1686.95, 'phases': [{'name': 'weights_loaded', 'label': 'weights load', 'seconds': 1561.2,
                                             'ended_at_s': 1561.2},
                                            {'name': 'first_completion', 'label': 'first completion',
                                             'seconds': 125.75, 'ended_at_s': 1686.95}]}
    with ResultsStore(str(project / 'config' / 'results' / 'benchmarks.sqlite3')) as store:
        store.add_history(HistoryEntry(host='gpu-node-1', document={
            'variant': 'ngram', 'model': 'kimi-k2.5', 'outcome': 'rolled_back', 'run_id': 'aaaaaaaa1111',
            'recorded_at': '2026-05-01T10:30:00+00:00', 'starts': [start]}))
    playbook = project / 'starts.yml'
    playbook.write_text(STARTS_PLAYBOOK, encoding='utf-8')
    drawn = importlib.util.find_spec('matplotlib') is not None
    run = ansible_playbook(project, playbook, '-e', f'drawn={drawn}')
    assert run.returncode == 0, run.stdout + run.stderr
    report = (project / 'elsewhere' / 'starts' / 'report.md').read_text(encoding='utf-8')
    assert ('| 2026-05-01T10:30:00+00:00 | `aaaaaaaa` | vllm-kimi-k2.5-ngram.service | ngram | 28m07s | 26m01s'
            ' | 125.8 s |') in report
    assert (project / 'elsewhere' / 'starts' / 'report-starts.png').exists() == drawn


CHECK_PLAYBOOK = """
- name: Preview a report
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Report in check mode
      llmops.vllm.benchmark_report:
        dest: preview/report.md
        chart: false
      check_mode: true
      diff: true
      register: preview

    - name: Look for the file
      ansible.builtin.stat:
        path: preview/report.md
      register: preview_file

    - name: Nothing was written, everything was said
      ansible.builtin.assert:
        that:
          - preview is changed
          - not preview_file.stat.exists
          - "'| ngram | default | 4 | 60.0 | -18.9% |' in preview.diff.after"
          - preview.diff.before == ''
          - preview.stored_results == 2
          - preview.charts == []
          - preview.chart_note is undefined
          - preview.comparisons | map(attribute='verdict') | list == ['baseline', 'undecided']
          - preview.comparisons | map(attribute='decision') | list == [none, none]
          - preview.comparisons[1].delta_pct | round(2) == -18.92
          - preview.comparisons[1].baseline_same_run
          - preview.comparisons[1].baseline_run_id == 'aaaaaaaa1111'
          - preview.comparisons[1].problem is none
          - preview.dest.endswith('/elsewhere/preview/report.md')

    - name: Report from a database that does not exist
      llmops.vllm.benchmark_report:
        dest: missing.md
        database: no/such.sqlite3
      register: missing
      ignore_errors: true

    - name: Report with an option it does not have
      llmops.vllm.benchmark_report:
        dest: missing.md
        colour: blue
      register: unknown_option
      ignore_errors: true

    - name: Both fail and say why
      ansible.builtin.assert:
        that:
          - missing is failed
          - "'No benchmark database at ' in missing.msg and 'no/such.sqlite3: nothing has been recorded' in missing.msg"
          - unknown_option is failed
          - "'colour' in unknown_option.msg"
"""


def test_check_mode_diff_results_and_failures(project):
    playbook = project / 'check.yml'
    playbook.write_text(CHECK_PLAYBOOK, encoding='utf-8')
    run = ansible_playbook(project, playbook)
    assert run.returncode == 0, run.stdout + run.stderr
    assert 'ignored=2' in run.stdout
    assert not (project / 'elsewhere' / 'missing.md').exists()


DECIDED_PLAYBOOK = """
- name: Report a decided trial
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Write the report, with the deprecated noise band given
      llmops.vllm.benchmark_report:
        dest: decided/report.md
        chart: false
        noise_pct: 50
      register: report

    - name: The trial's decision is the verdict, whatever the band
      ansible.builtin.assert:
        that:
          - report.comparisons | map(attribute='verdict') | list == ['baseline', 'slower']
          - report.comparisons | map(attribute='decision') | list == [none, 'roll_back']
"""


def test_a_decided_result_shows_the_decision_of_its_trial(project):
    with ResultsStore(str(project / 'config' / 'results' / 'benchmarks.sqlite3')) as store:
        store.add_decision(DecisionRecord(
            recorded_at='2026-05-01T10:25:00Z', run_id='aaaaaaaa1111', host='gpu-node-1', model='kimi-k2.5',
            variant='ngram', baseline='baseline', unit_checksum=None,
            document={'decision': 'roll_back', 'outcome': 'slower', 'reason': 'slower at concurrency 4'}))
    playbook = project / 'decided.yml'
    playbook.write_text(DECIDED_PLAYBOOK, encoding='utf-8')
    run = ansible_playbook(project, playbook)
    assert run.returncode == 0, run.stdout + run.stderr
    report = (project / 'elsewhere' / 'decided' / 'report.md').read_text(encoding='utf-8')
    assert '| – | rolled back (slower) | 74.0 tok/s, same run' in report
