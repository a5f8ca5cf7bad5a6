#!/usr/bin/env python
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Interrupted runs converge: SIGKILL deploy-ngram at each phase of a trial, rerun it, check the node.

For every kill point the script starts `playbooks/deploy-ngram.yml -e vllm_switch_force=true` against
the mock GPU node (molecule/mock_host), waits until the run reaches the phase, and kills the whole
run with SIGKILL (ansible-playbook, its workers and their SSH clients, as when a CI runner or a
terminal dies). Then it reruns the same command to its end and checks the node:

- exactly one unit of the model runs: the baseline, or n-gram with a trial record that says kept;
- the rerun succeeded: the killed run's lock did not block it (it was taken over as stale);
- no switch lock is left on the node;
- the results database passes SQLite's integrity check.

The kill points: during the baseline's stop, the wait for free GPU memory, the target's load, the
target's benchmark, and the rollback (that run carries a p99 TTFT SLO of 1 ms, so that it rolls back).

Usage: python tests/benchmarks/interrupted_runs.py [--points stop,gpu_wait,load,benchmark,rollback]
Boots the mock host when it is down (and takes it down again). Prints the matrix, kill point by
outcome, and exits 1 when any rerun did not converge.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "molecule" / "mock_host"))
import mock_host  # noqa: E402  pylint: disable=wrong-import-position
from playbook_stream import PlaybookStream  # noqa: E402  pylint: disable=wrong-import-position

MODEL = "tiny-llama"
RUN_TIMEOUT = 900.0
# A small benchmark and two lifetimes a side keep each trial short.
SMALL_BENCHMARK = {"vllm_switch_benchmark": {"prompt_set": "code_editing", "num_prompts": 8, "concurrency": [4],
                                             "max_tokens": 64, "warmup_requests": 1},
                   "vllm_switch_max_lifetimes": 2}
SLO_NO_SERVER_MEETS = {"vllm_switch_slo": {"p99_ttft_ms": 1}}

# kill point -> (the task line that starts the phase, which occurrence of it, seconds to wait after it,
#                extra variables of the run). The unit role's start runs for every serve step: the baseline
# confirmed, then restarted for its first lifetime, then the variant's load, then the rollback's start.
KILL_POINTS = {
    "stop": ("TASK [llmops.vllm.vllm_unit : Stop the units that must not serve]", 1, 0.5, {}),
    "gpu_wait": ("TASK [llmops.vllm.vllm_unit : Wait until the GPUs' memory is free]", 2, 0.2, {}),
    "load": ("TASK [llmops.vllm.vllm_unit : Start the unit]", 3, 6.0, {}),
    "benchmark": ("TASK [llmops.vllm.vllm_switch : Start in the background the benchmark of workload default]", 2, 4.0,
                  {}),
    "rollback": ("TASK [llmops.vllm.vllm_unit : Start the unit]", 4, 3.0, SLO_NO_SERVER_MEETS),
}


def on_mock_host(command):
    # Right after a kill the node may be busy enough to miss SSH's connect timeout: try again.
    for attempt in range(5):
        result = subprocess.run(mock_host.ssh_argv(command), capture_output=True, text=True, check=False)
        if result.returncode != 255:
            return result.stdout.strip()
        time.sleep(2 * (attempt + 1))
    raise RuntimeError("mock host unreachable over SSH: %s" % result.stderr.strip())


def playbook_command(extra):
    return [str(pathlib.Path(sys.executable).parent / "ansible-playbook"), "-i", str(REPO / "inventories" / "mock"),
            str(REPO / "playbooks" / "deploy-ngram.yml"), "-e", "vllm_switch_force=true",
            "-e", json.dumps(dict(SMALL_BENCHMARK, **extra))]


def killed_run(env, point):
    """Run deploy-ngram until the kill point, then SIGKILL the whole run; return seconds it ran."""
    marker, occurrence, delay, extra = KILL_POINTS[point]
    run = PlaybookStream(playbook_command(extra), REPO, env, new_session=True)
    started = time.monotonic()
    seen = 0
    kill_at = None
    try:
        while True:
            arrived = run.next_line(kill_at if kill_at is not None else started + RUN_TIMEOUT)
            if arrived is None:
                if kill_at is None:
                    raise run.failure("the run to kill at %s" % point)
                break
            line = arrived[1]
            if line is None:
                raise run.failure("the run to kill at %s (it ended first)" % point)
            if line.startswith(marker):
                seen += 1
                if seen == occurrence:
                    kill_at = arrived[0] + delay
        os.killpg(run.process.pid, signal.SIGKILL)
        return time.monotonic() - started
    finally:
        run.process.wait(timeout=30)


def rerun(env, point):
    completed = subprocess.run(playbook_command(KILL_POINTS[point][3]), cwd=str(REPO), env=env, capture_output=True,
                               text=True, timeout=RUN_TIMEOUT, check=False)
    # Warnings, the stale-lock takeover among them, go to stderr.
    return completed.returncode, completed.stdout + completed.stderr


def node_state():
    active = on_mock_host("systemctl list-units 'vllm-%s-*' --type=service --state=active --no-legend --plain "
                          "| awk '{print $1}'" % MODEL).split()
    record = on_mock_host("cat /var/lib/vllm-switch/%s/ngram.json 2>/dev/null" % MODEL)
    lock = on_mock_host("test -e /var/lib/vllm-switch/%s.lock && echo left || echo none" % MODEL)
    return active, (json.loads(record).get("outcome") if record else None), lock


def database_ok(path):
    with sqlite3.connect(path) as connection:
        return connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--points", default=",".join(KILL_POINTS), help="kill points, comma-separated")
    args = parser.parse_args()
    points = [point.strip() for point in args.points.split(",") if point.strip()]
    unknown = [point for point in points if point not in KILL_POINTS]
    if unknown:
        parser.error("unknown kill point %s; known: %s" % (", ".join(unknown), ", ".join(KILL_POINTS)))
    booted = not json.loads(subprocess.run([sys.executable, mock_host.__file__, "status"], capture_output=True,
                                           text=True, check=True).stdout)["running"]
    if booted:
        subprocess.run([sys.executable, mock_host.__file__, "up"], check=True)
    work = pathlib.Path(tempfile.mkdtemp(prefix="interrupted-runs-"))
    database = work / "benchmarks.sqlite3"
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
               ANSIBLE_NOCOLOR="1", LLMOPS_VLLM_BENCHMARKS_DATABASE=str(database),
               LLMOPS_VLLM_BENCHMARKS_JSON_DIR=str(work / "runs"), LLMOPS_VLLM_BENCHMARKS_REPORT=str(work / "report.md"))
    rows = []
    try:
        # The units of every variant, then the baseline serving: where each killed run starts from.
        for playbook in ("deploy-units.yml", "rollback.yml"):
            subprocess.run([str(pathlib.Path(sys.executable).parent / "ansible-playbook"), "-i",
                            str(REPO / "inventories" / "mock"), str(REPO / "playbooks" / playbook)],
                           cwd=str(REPO), env=env, check=True, capture_output=True)
        for point in points:
            ran = killed_run(env, point)
            killed_state = node_state()
            code, output = rerun(env, point)
            active, outcome, lock = node_state()
            converged = (code == 0 and len(active) == 1 and lock == "none" and database_ok(database)
                         and (active[0] == "vllm-%s-baseline.service" % MODEL
                              or (active[0] == "vllm-%s-ngram.service" % MODEL and outcome == "kept")))
            rows.append((point, "%.0f s" % ran, ",".join(killed_state[0]) or "none", killed_state[2],
                         "stale lock taken over" if "took over a stale switch lock" in output else "no stale lock",
                         str(code), ",".join(unit.split("-")[-1].split(".")[0] for unit in active) or "none",
                         outcome or "-", lock, "yes" if converged else "NO"))
            print("killed at %s; rerun exit %d, running %s, n-gram record %s, lock %s: %s"
                  % (point, code, active, outcome, lock, "converged" if converged else "NOT converged"), flush=True)
    finally:
        if booted:
            subprocess.run([sys.executable, mock_host.__file__, "down"], check=False)
    header = ("kill point", "killed after", "running after kill", "lock after kill", "rerun found", "rerun exit",
              "running after rerun", "n-gram record", "lock after rerun", "converged")
    widths = [max(len(str(row[column])) for row in rows + [header]) for column in range(len(header))]
    for row in [header] + rows:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)))
    converged = sum(row[-1] == "yes" for row in rows)
    print("interrupted runs that converged on the rerun: %d of %d" % (converged, len(rows)))
    return 0 if converged == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
