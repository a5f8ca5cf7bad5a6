# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fallback that systemd runs when a kept variant gives up restarting (roles/vllm_service/files)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[3] / 'roles' / 'vllm_service' / 'files' / 'vllm-fallback.py'
SPEC = importlib.util.spec_from_file_location('vllm_fallback', SCRIPT)
fallback = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(fallback)


def config(records_dir):
    return {'model': 'tiny-llama', 'baseline_unit': 'vllm-tiny-llama-baseline.service', 'records_dir': str(records_dir),
            'units': {'vllm-tiny-llama-baseline.service': 'baseline', 'vllm-tiny-llama-ngram.service': 'ngram',
                      'vllm-tiny-llama-eagle3.service': 'eagle3'}}


STATES = {
    'vllm-tiny-llama-baseline.service': {'ActiveState': 'failed', 'Result': 'exit-code'},
    'vllm-tiny-llama-ngram.service': {'ActiveState': 'failed', 'Result': 'start-limit-hit', 'NRestarts': '2'},
    'vllm-tiny-llama-eagle3.service': {'ActiveState': 'inactive', 'Result': 'success'},
}


def test_only_failed_variants_fall_back_and_the_baseline_is_never_one_of_them(tmp_path):
    failed = fallback.failed_variants(config(tmp_path), STATES.get)
    assert [(variant, unit) for variant, unit, dummy in failed] == [('ngram', 'vllm-tiny-llama-ngram.service')]


def test_the_kept_record_is_marked_fallen_back_and_appended_to_the_history(tmp_path):
    kept = {'variant': 'ngram', 'outcome': 'kept', 'unit_checksum': 'a' * 64, 'identity': {'sha256': 'b' * 64},
            'reason': 'not slower at concurrency 4'}
    (tmp_path / 'ngram.json').write_text(json.dumps(kept), encoding='utf-8')
    (tmp_path / 'history.jsonl').write_text(json.dumps(kept) + '\n', encoding='utf-8')
    failed = fallback.failed_variants(config(tmp_path), STATES.get)
    [(path, record)] = fallback.fallback_records(config(tmp_path), failed, '2026-12-01T09:00:00+00:00', 'systemd@node')
    fallback.write_trial_record(str(tmp_path), record)

    written = json.loads((tmp_path / 'ngram.json').read_text(encoding='utf-8'))
    assert written['outcome'] == 'fell_back' and written['started_by'] == 'systemd@node'
    # What identifies the trial stays, so that the switch role treats it as decided until something changes.
    assert written['unit_checksum'] == 'a' * 64 and written['identity'] == {'sha256': 'b' * 64}
    assert written['reason'] == ('vllm-tiny-llama-ngram.service failed in service (start-limit-hit, 2 restarts) and'
                                 ' systemd put vllm-tiny-llama-baseline.service back at 2026-12-01T09:00:00+00:00')
    history = [json.loads(line) for line in (tmp_path / 'history.jsonl').read_text(encoding='utf-8').splitlines()]
    assert [entry['outcome'] for entry in history] == ['kept', 'fell_back']
    assert path == str(tmp_path / 'ngram.json') and not list(tmp_path.glob('*.tmp'))


def test_a_variant_without_a_record_still_gets_one(tmp_path):
    failed = fallback.failed_variants(config(tmp_path / 'records'), STATES.get)
    [(path, record)] = fallback.fallback_records(config(tmp_path / 'records'), failed, 'T', 'systemd@node')
    fallback.write_trial_record(str(tmp_path / 'records'), record)
    assert json.loads(Path(path).read_text(encoding='utf-8'))['outcome'] == 'fell_back'


def test_installed_beside_the_record_code_the_script_needs_nothing_else(tmp_path):
    # As the role installs it: the script and module_utils/_trial_records.py in one directory, run by the node's
    # python3 without Ansible or the collection on its path.
    shutil.copy(SCRIPT, tmp_path / 'vllm-fallback.py')
    shutil.copy(SCRIPT.parents[3] / 'plugins' / 'module_utils' / '_trial_records.py', tmp_path / '_trial_records.py')
    probe = ('import importlib.util, sys\n'
             f'spec = importlib.util.spec_from_file_location("fallback", {str(tmp_path / "vllm-fallback.py")!r})\n'
             'module = importlib.util.module_from_spec(spec)\n'
             'spec.loader.exec_module(module)\n'
             'print(module.write_trial_record.__module__)\n')
    run = subprocess.run([sys.executable, '-I', '-c', probe], capture_output=True, text=True, check=False,
                         cwd=tmp_path, timeout=60)
    assert (run.returncode, run.stdout.strip()) == (0, '_trial_records'), run.stderr
