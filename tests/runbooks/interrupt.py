"""Start a command and SIGKILL it, with its children, once a unit on the mock node has stopped.

The runbooks' setup for an interrupted switch: `interrupt.py UNIT -- COMMAND...` kills the command at the
point an operator fears most, after the switch stopped the serving unit and before it finished, as a closed
terminal or a rebooted controller would. Exits 0 once it has killed the command, 1 if the command ended first.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

MOCK_HOST = Path(__file__).resolve().parents[2] / 'molecule' / 'mock_host' / 'mock_host.py'


def unit_state(unit: str) -> str:
    completed = subprocess.run([sys.executable, str(MOCK_HOST), 'exec', 'systemctl', 'is-active', unit],
                               capture_output=True, text=True, check=False)
    return completed.stdout.strip()


def main(argv: list[str]) -> int:
    unit, separator, command = argv[1], argv[2], argv[3:]
    if separator != '--' or not command:
        raise SystemExit('usage: interrupt.py UNIT -- COMMAND...')
    if unit_state(unit) != 'active':
        raise SystemExit(f'{unit} is not active: there is nothing for the command to stop')
    process = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL)
    while process.poll() is None:
        # Once stopped for good: systemctl stop returned, and the switch waits for the GPUs or starts the target.
        if unit_state(unit) in ('inactive', 'failed'):
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            print(f'killed {command[0]} (pid {process.pid}) after it stopped {unit}')
            return 0
        time.sleep(1)
    print(f'{command[0]} ended (rc {process.returncode}) before it stopped {unit}')
    return 1


if __name__ == '__main__':
    sys.exit(main(sys.argv))
