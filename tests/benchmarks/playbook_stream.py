# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""ansible-playbook run in the background, each output line stamped with the moment it arrived.

The latency benchmarks time a task by the moment ansible-playbook prints its result line, which
is what an operator watching the run sees.
"""

from __future__ import annotations

import queue
import subprocess
import threading
import time


class PlaybookStream:
    """One ansible-playbook process whose stdout and stderr lines are read as they come."""

    def __init__(self, command, cwd, env, new_session=False):
        # In a session of its own the run can be killed whole, workers and SSH clients included.
        self.process = subprocess.Popen(command, cwd=str(cwd), env=dict(env, PYTHONUNBUFFERED="1"),
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        start_new_session=new_session)
        self.transcript = []
        self._lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            self._lines.put((time.monotonic(), line.rstrip("\n")))
        self._lines.put((time.monotonic(), None))

    def next_line(self, until):
        """Return (arrival time, line), line None at the end of output, or None when `until` passed first."""
        try:
            seen, line = self._lines.get(timeout=max(0.0, until - time.monotonic()))
        except queue.Empty:
            return None
        if line is not None:
            self.transcript.append(line)
        return seen, line

    def failure(self, what):
        return RuntimeError("%s did not end as expected:\n%s" % (what, "\n".join(self.transcript)))

    def close(self, timeout):
        self.process.wait(timeout=timeout)
