# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A throwaway Ansible project in which ansible-playbook runs with the variant_benchmarks callback."""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]

# Stands in for llmops.vllm.openai_benchmark: it returns the results it is given, so a test decides
# exactly what the callback receives. fail=true fails the task with those results still attached.
FAKE_BENCHMARK_MODULE = '''#!/usr/bin/python
from __future__ import annotations

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(
        results=dict(type='list', elements='dict', default=[]),
        labels=dict(type='dict', default={}),
        options=dict(type='dict', default={}),
        fail=dict(type='bool', default=False),
    ))
    result = dict(changed=False, results=module.params['results'], labels=module.params['labels'],
                  options=module.params['options'])
    if module.params['fail']:
        module.fail_json(msg='the benchmark failed', **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
'''


def _collections_root() -> Path:
    # ansible-test runs from the checkout laid out as ansible_collections/llmops/vllm; make unit
    # runs from a checkout that reaches itself through .cache/collections (make setup).
    if REPO.parent.parent.name == 'ansible_collections':
        return REPO.parents[2]
    return REPO / '.cache' / 'collections'


@dataclasses.dataclass
class Project:
    root: Path

    @property
    def config(self) -> Path:
        return self.root / 'config' / 'ansible.cfg'

    def configure(self, **callback_options: str) -> None:
        """Write ansible.cfg in its own directory, with these [callback_variant_benchmarks] settings."""
        lines = [
            '[defaults]',
            f'collections_path = {self.root}:{_collections_root()}',
            f'inventory = {self.root / "inventory.ini"}',
            'callbacks_enabled = llmops.vllm.variant_benchmarks',
            'stdout_callback = ansible.builtin.default',
            'retry_files_enabled = False',
            '',
            '[callback_variant_benchmarks]',
        ]
        lines += [f'{key} = {value}' for key, value in callback_options.items()]
        self.config.parent.mkdir(exist_ok=True)
        self.config.write_text('\n'.join(lines) + '\n', encoding='utf-8')

    def environment(self, **extra: str) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items()
               if not key.startswith(('ANSIBLE_', 'LLMOPS_VLLM_'))}
        env.update(ANSIBLE_CONFIG=str(self.config), ANSIBLE_NOCOLOR='1', ANSIBLE_FORCE_COLOR='0',
                   ANSIBLE_LOCAL_TEMP=str(self.root / 'tmp'), ANSIBLE_REMOTE_TMP=str(self.root / 'tmp'))
        env.update(extra)
        return env

    def playbook(self, text: str, name: str = 'play.yml') -> Path:
        path = self.root / name
        path.write_text(text, encoding='utf-8')
        return path

    def command(self, playbook: Path) -> list[str]:
        return [str(Path(sys.executable).parent / 'ansible-playbook'), str(playbook)]

    def run(self, playbook: Path, **extra_env: str) -> subprocess.CompletedProcess:
        # From another directory than the configuration's, so relative settings must follow ansible.cfg.
        return subprocess.run(self.command(playbook), cwd=self.root / 'elsewhere', env=self.environment(**extra_env),
                              capture_output=True, text=True, timeout=300, check=False)

    def rows(self, database: Path, columns: str = '*') -> list[sqlite3.Row]:
        connection = sqlite3.connect(database)
        connection.row_factory = sqlite3.Row
        try:
            return connection.execute(f'SELECT {columns} FROM results ORDER BY id').fetchall()
        finally:
            connection.close()

    def json_documents(self, directory: Path) -> dict[str, dict]:
        return {path.name: json.loads(path.read_text(encoding='utf-8')) for path in sorted(directory.glob('*.json'))}


@pytest.fixture
def project(tmp_path: Path) -> Project:
    modules = tmp_path / 'ansible_collections' / 'fake' / 'bench' / 'plugins' / 'modules'
    modules.mkdir(parents=True)
    (modules / 'openai_benchmark.py').write_text(FAKE_BENCHMARK_MODULE, encoding='utf-8')
    (tmp_path / 'elsewhere').mkdir()
    (tmp_path / 'tmp').mkdir()
    # bench-node stands for a GPU node; benchmarks are delegated to localhost as on a real one.
    (tmp_path / 'inventory.ini').write_text(
        f'bench-node ansible_connection=local ansible_python_interpreter={sys.executable}\n'
        f'localhost ansible_connection=local ansible_python_interpreter={sys.executable}\n',
        encoding='utf-8')
    created = Project(tmp_path)
    created.configure(database='results/benchmarks.sqlite3', json_dir='results/runs')
    return created
