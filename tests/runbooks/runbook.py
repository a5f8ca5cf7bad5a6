"""Run the marked command blocks of the operators' runbooks, in order, and check what they print.

A runbook (docs/runbooks/*.md) marks what an operator runs and what the output shows:

    <!-- run -->
    ```sh
    ansible-playbook playbooks/rollback.yml
    ```

    <!-- expect -->
    ```text
    Rolling mock-gpu-node back to baseline
    ... is blocked on mock-gpu-node: rolled back by operator ...
    ```

Each line of an expect block must appear in the output of the run block before it, whitespace
collapsed; "..." stands for any text. A block marked <!-- run: fails --> must fail (a refusal that the
runbook shows). A runbook may also hold what the reader does not need to see, in HTML comments:
<!-- setup: COMMAND -->, run before the next block (a fault to put the node in the state the runbook is
about), and <!-- teardown: COMMAND -->, run after the last block whatever happened. A command that fails,
or output that no longer shows what the runbook says, fails the runbook, naming the file, the block and
the line.

The runbooks run after the molecule scenario whose state they need, in the order order.yml gives:
    runbook.py --after default
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
import time
from pathlib import Path

import yaml

_MARK = re.compile(r'^<!--\s*(run|expect)(:\s*fails)?\s*-->\s*$')
_SETUP = re.compile(r'^<!--\s*(setup|teardown):\s*(.+?)\s*-->\s*$')
_FENCE = re.compile(r'^(```+)\s*([\w-]*)\s*$')


@dataclasses.dataclass
class Block:
    kind: str  # run, expect, setup or teardown
    text: str
    line: int
    fails: bool = False  # a run block whose command must fail (a refusal the runbook shows)


def blocks(markdown: str) -> list[Block]:
    """The marked blocks of a runbook, in order."""
    found = []
    lines = markdown.splitlines()
    index = 0
    while index < len(lines):
        setup = _SETUP.match(lines[index])
        mark = _MARK.match(lines[index])
        if setup:
            found.append(Block(setup.group(1), setup.group(2), index + 1))
        elif mark:
            start = index + 1
            while start < len(lines) and not lines[start].strip():
                start += 1
            fence = _FENCE.match(lines[start]) if start < len(lines) else None
            if not fence:
                raise ValueError(f'line {index + 1}: <!-- {mark.group(1)} --> is not followed by a fenced block')
            end = start + 1
            while end < len(lines) and lines[end].strip() != fence.group(1):
                end += 1
            if end == len(lines):
                raise ValueError(f'line {start + 1}: the fenced block is never closed')
            found.append(Block(mark.group(1), '\n'.join(lines[start + 1:end]), start + 1, bool(mark.group(2))))
            index = end
        index += 1
    if found and found[0].kind == 'expect':
        raise ValueError(f'line {found[0].line}: an expect block must follow a run block')
    return found


def _pattern(expected_line: str) -> re.Pattern[str]:
    parts = [re.escape(part.strip()) for part in ' '.join(expected_line.split()).split('...')]
    return re.compile(r'.*?'.join(part.replace(r'\ ', ' ') for part in parts))


def missing(expected: str, output: str) -> list[str]:
    """The lines of an expect block that the output does not show."""
    flat = ' '.join(output.split())
    return [line for line in expected.splitlines() if line.strip() and not _pattern(line).search(flat)]


def _execute(block: Block, path: Path, root: Path, shell, timeout: float) -> subprocess.CompletedProcess:
    started = time.monotonic()
    completed = subprocess.run(list(shell) + [block.text], cwd=root, capture_output=True, text=True,
                               timeout=timeout, check=False)
    output = completed.stdout + completed.stderr
    print(f'--- {path.name}:{block.line} ({block.kind}) rc={completed.returncode} in {time.monotonic() - started:.0f} s'
          f'\n{block.text}\n{output[-4000:]}', flush=True)
    return completed


def run(path: Path, root: Path, shell=('bash', '-euo', 'pipefail', '-c'), timeout: float = 1800) -> list[str]:
    """Run one runbook; the problems, empty when everything ran and showed what it should.

    Teardown commands run last, whatever happened, so that a failed runbook leaves nothing behind."""
    found = blocks(path.read_text(encoding='utf-8'))
    try:
        return _run_blocks([block for block in found if block.kind != 'teardown'], path, root, shell, timeout)
    finally:
        for block in found:
            if block.kind == 'teardown':
                _execute(block, path, root, shell, timeout)


def _run_blocks(found: list[Block], path: Path, root: Path, shell, timeout: float) -> list[str]:
    output = None
    for block in found:
        if block.kind == 'expect':
            gaps = missing(block.text, output or '')
            if gaps:
                return [f'{path.name}:{block.line}: the output no longer shows: {gap}' for gap in gaps]
            continue
        completed = _execute(block, path, root, shell, timeout)
        output = completed.stdout + completed.stderr
        if block.fails and completed.returncode == 0:
            return [f'{path.name}:{block.line}: the command should have failed, as the runbook says, and succeeded']
        if not block.fails and completed.returncode != 0:
            return [f'{path.name}:{block.line}: {block.kind} command failed with rc {completed.returncode}']
    return []


def order(root: Path) -> dict[str, list[Path]]:
    """The runbooks each molecule scenario runs, in order (order.yml)."""
    listed = yaml.safe_load((root / 'tests' / 'runbooks' / 'order.yml').read_text(encoding='utf-8'))
    return {scenario: [root / 'docs' / 'runbooks' / name for name in names] for scenario, names in listed.items()}


def main(argv: list[str]) -> int:
    root = Path(__file__).resolve().parents[2]
    if len(argv) == 3 and argv[1] == '--after':
        paths = order(root)[argv[2]]
    else:
        paths = [Path(arg).resolve() for arg in argv[1:]]
    problems = []
    for path in paths:
        problems += run(path, root)
    for problem in problems:
        print(f'FAIL {problem}')
    print(f'runbooks: {len(paths)} run, {len(problems)} problems')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
