# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The runbook runner reads the marks and judges output as the runbooks' readers would."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / 'runbooks' / 'runbook.py'
SPEC = importlib.util.spec_from_file_location('runbook', SCRIPT)
runbook = importlib.util.module_from_spec(SPEC)
# dataclasses look their module up by name.
sys.modules['runbook'] = runbook
SPEC.loader.exec_module(runbook)

ROLLBACK = '''# Rolling back now

<!-- setup: echo planted > state.txt -->

<!-- run -->
```sh
cat state.txt && echo "Rolling mock-gpu-node back to baseline (1 node(s), one at a time)."
```

What it prints:

<!-- expect -->
```text
planted
Rolling mock-gpu-node back to ... (1 node(s), one at a time).
```

```sh
echo an example that is not run
```
'''


def test_the_marked_blocks_are_read_in_order_and_unmarked_ones_left_out():
    found = runbook.blocks(ROLLBACK)
    assert [(block.kind, block.text) for block in found] == [
        ('setup', 'echo planted > state.txt'),
        ('run', 'cat state.txt && echo "Rolling mock-gpu-node back to baseline (1 node(s), one at a time)."'),
        ('expect', 'planted\nRolling mock-gpu-node back to ... (1 node(s), one at a time).'),
    ]


def test_expected_lines_match_across_wrapping_with_dots_for_any_text():
    output = 'Rolling mock-gpu-node back to\n   baseline (1 node(s), one at a time).\n'
    assert runbook.missing('Rolling mock-gpu-node back to ... (1 node(s), one at a time).', output) == []
    assert runbook.missing('Rolling mock-gpu-node back to eagle3', output) == ['Rolling mock-gpu-node back to eagle3']


def test_a_runbook_runs_against_a_real_shell_and_names_what_no_longer_shows(tmp_path):
    path = tmp_path / 'rollback.md'
    path.write_text(ROLLBACK, encoding='utf-8')
    assert runbook.run(path, tmp_path) == []
    path.write_text(ROLLBACK.replace('back to ... (1', 'forward to ... (1'), encoding='utf-8')
    assert runbook.run(path, tmp_path) == [
        'rollback.md:13: the output no longer shows: Rolling mock-gpu-node forward to ... (1 node(s), one at a time).']
    path.write_text(ROLLBACK.replace('cat state.txt', 'cat missing.txt'), encoding='utf-8')
    assert runbook.run(path, tmp_path) == ['rollback.md:6: run command failed with rc 1']


@pytest.mark.parametrize('text, message', [
    ('<!-- run -->\n\nplain text\n', 'line 1: <!-- run --> is not followed by a fenced block'),
    ('<!-- run -->\n```sh\necho\n', 'line 2: the fenced block is never closed'),
    ('<!-- expect -->\n```text\nx\n```\n', 'line 2: an expect block must follow a run block'),
])
def test_a_badly_marked_runbook_is_refused(text, message):
    with pytest.raises(ValueError, match=message):
        runbook.blocks(text)


def test_a_refusal_the_runbook_shows_must_fail_and_teardown_runs_whatever_happened(tmp_path):
    text = '''<!-- teardown: rm -f planted.txt -->
<!-- setup: echo x > planted.txt -->
<!-- run: fails -->
```sh
echo "ngram is blocked" && false
```

<!-- expect -->
```text
ngram is blocked
```
'''
    path = tmp_path / 'refusal.md'
    path.write_text(text, encoding='utf-8')
    assert runbook.run(path, tmp_path) == []
    assert not (tmp_path / 'planted.txt').exists()
    path.write_text(text.replace(' && false', ''), encoding='utf-8')
    assert runbook.run(path, tmp_path) == [
        'refusal.md:4: the command should have failed, as the runbook says, and succeeded']
    assert not (tmp_path / 'planted.txt').exists()


def test_every_runbook_is_run_by_exactly_one_scenario_and_has_marked_blocks():
    root = SCRIPT.parents[2]
    scheduled = [path for paths in runbook.order(root).values() for path in paths]
    written = sorted(path for path in (root / 'docs' / 'runbooks').glob('*.md') if path.name != 'README.md')
    assert sorted(scheduled) == written and len(set(scheduled)) == len(scheduled)
    for path in written:
        kinds = [block.kind for block in runbook.blocks(path.read_text(encoding='utf-8'))]
        assert 'run' in kinds and 'expect' in kinds, path.name
