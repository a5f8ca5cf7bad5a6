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
collapsed; "..." stands for any text. A runbook may also hold setup the reader does not need to see,
in an HTML comment: <!-- setup: COMMAND -->, run before the next block (a fault to put the node in the
state the runbook is about). A command that fails, or output that no longer shows what the runbook
says, fails the runbook, naming the file, the block and the line.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

_MARK = re.compile(r'^<!--\s*(run|expect)\s*-->\s*$')
_SETUP = re.compile(r'^<!--\s*setup:\s*(.+?)\s*-->\s*$')
_FENCE = re.compile(r'^(```+)\s*([\w-]*)\s*$')


@dataclasses.dataclass
class Block:
    kind: str  # run, expect or setup
    text: str
    line: int


def blocks(markdown: str) -> list[Block]:
    """The marked blocks of a runbook, in order."""
    found = []
    lines = markdown.splitlines()
    index = 0
    while index < len(lines):
        setup = _SETUP.match(lines[index])
        mark = _MARK.match(lines[index])
        if setup:
            found.append(Block('setup', setup.group(1), index + 1))
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
            found.append(Block(mark.group(1), '\n'.join(lines[start + 1:end]), start + 1))
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


def run(path: Path, root: Path, shell=('bash', '-euo', 'pipefail', '-c'), timeout: float = 1800) -> list[str]:
    """Run one runbook; the problems, empty when everything ran and showed what it should."""
    output = None
    for block in blocks(path.read_text(encoding='utf-8')):
        if block.kind == 'expect':
            gaps = missing(block.text, output or '')
            if gaps:
                return [f'{path.name}:{block.line}: the output no longer shows: {gap}' for gap in gaps]
            continue
        completed = subprocess.run(list(shell) + [block.text], cwd=root, capture_output=True, text=True,
                                   timeout=timeout, check=False)
        output = completed.stdout + completed.stderr
        print(f'--- {path.name}:{block.line} ({block.kind}) rc={completed.returncode}\n{block.text}\n{output[-4000:]}')
        if completed.returncode != 0:
            return [f'{path.name}:{block.line}: {block.kind} command failed with rc {completed.returncode}']
    return []


def main(argv: list[str]) -> int:
    root = Path(__file__).resolve().parents[2]
    paths = [Path(arg) for arg in argv[1:]] or sorted((root / 'docs' / 'runbooks').glob('*.md'))
    problems = []
    for path in paths:
        if path.name.lower() != 'readme.md':
            problems += run(path, root)
    for problem in problems:
        print(f'FAIL {problem}')
    print(f'runbooks: {len(paths)} read, {len(problems)} problems')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
