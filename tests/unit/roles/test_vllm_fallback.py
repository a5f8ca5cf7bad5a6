# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fallback that systemd runs when a kept variant gives up restarting (roles/vllm_service/files)."""

from __future__ import annotations

import http.server
import importlib.util
import json
import shutil
import subprocess
import sys
import threading
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


class _Receiver(http.server.BaseHTTPRequestHandler):
    received: list = []

    def do_POST(self):  # noqa: N802 - the name http.server calls
        body = self.rfile.read(int(self.headers['Content-Length']))
        self.received.append((self.headers.get('Authorization'), json.loads(body)))
        self.send_response(int(self.path.rsplit('/', 1)[-1]) if self.path.startswith('/status/') else 204)
        self.send_header('Content-Length', '0')
        self.end_headers()

    def log_message(self, *args):
        pass


def _serve():
    server = http.server.HTTPServer(('127.0.0.1', 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_the_url_hook_is_told_the_fallback_with_its_headers(tmp_path):
    _Receiver.received = []
    server = _serve()
    try:
        failed = fallback.failed_variants(config(tmp_path), STATES.get)
        records = fallback.fallback_records(config(tmp_path), failed, '2026-12-01T09:00:00+00:00', 'systemd@node')
        payload = fallback.notification(dict(config(tmp_path), baseline='baseline'), records, 0)
        hook = {'url': 'http://127.0.0.1:%d/notify' % server.server_port, 'headers': {'Authorization': 'Bearer t'}}
        assert fallback.notify(hook, payload) is None
    finally:
        server.shutdown()
        server.server_close()
    [(authorization, told)] = _Receiver.received
    assert authorization == 'Bearer t'
    assert told['event'] == 'fallback' and told['outcome'] == 'fell_back' and told['variant'] == 'ngram'
    assert told['unit'] == 'vllm-tiny-llama-baseline.service' and told['baseline_started'] is True
    assert told['failed_units'] == ['vllm-tiny-llama-ngram.service'] and 'start-limit-hit' in told['reason']


def test_a_hook_that_fails_is_reported_without_its_url(tmp_path):
    _Receiver.received = []
    server = _serve()
    try:
        answered = fallback.notify({'url': 'http://127.0.0.1:%d/status/500' % server.server_port}, {'event': 'fallback'})
    finally:
        server.shutdown()
        server.server_close()
    assert answered == 'the notification hook could not be called (HTTPError)'
    # A port where nothing listens: the fallback goes on, and the message names no address.
    closed = fallback.notify({'url': 'http://127.0.0.1:%d/' % server.server_port}, {'event': 'fallback'})
    assert closed.startswith('the notification hook could not be called (') and '127.0.0.1' not in closed


def test_the_hook_file_is_read_only_where_the_role_wrote_one(tmp_path):
    assert fallback.read_hook(str(tmp_path / 'absent.json')) is None
    assert fallback.read_hook(None) is None
    (tmp_path / 'notify.json').write_text(json.dumps({'url': 'http://127.0.0.1:9/'}), encoding='utf-8')
    assert fallback.read_hook(str(tmp_path / 'notify.json')) == {'url': 'http://127.0.0.1:9/'}
