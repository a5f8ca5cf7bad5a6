# This module_utils file is private to the llmops.vllm collection; it may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""How far a running llmops.vllm.openai_benchmark has come, written by it and read while it runs.

The benchmark runs as an Ansible async job (it cannot return halfway through a stream) and keeps a
small JSON progress file beside it; llmops.vllm.benchmark_progress reads that file and the job's
status file every few seconds and answers with one progress line, so that a benchmark of an hour
shows where it is at least once a minute. The file's format has one owner: this file.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time

from ansible_collections.llmops.vllm.plugins.module_utils._benchmark_options import measured_prompts
from ansible_collections.llmops.vllm.plugins.module_utils._json_file import replace_json

PROGRESS_VERSION = 1

# How often the file is rewritten at most: a reader polls every few seconds, and a benchmark of short
# requests at high concurrency must not spend its client's time writing files.
WRITE_INTERVAL = 1.0

# Worst-case seconds of the server readings around one level (two, each a scrape plus the settle wait,
# see _load_generation._settled_reading), beyond the requests' own timeouts.
_SETTLE_ALLOWANCE = 2 * 5.0
# Room for starting Python, building the prompts and returning: the job must never be killed for these.
_STARTUP_ALLOWANCE = 120.0


class ProgressWriter:
    """Counts finished requests from any worker thread and rewrites the progress file atomically.

    ``clock`` is a monotonic clock for the elapsed times, ``wall_clock`` the epoch seconds the reader
    compares with its own clock (both run on the host that runs the benchmark).
    """

    def __init__(self, path, planned, clock=time.monotonic, wall_clock=time.time):
        self._path = path
        self._clock = clock
        self._wall_clock = wall_clock
        self._lock = threading.Lock()
        self._began = clock()
        self._level_began = self._began
        self._last_write = None
        self.broken = None
        self._state = {
            "version": PROGRESS_VERSION,
            "pid": os.getpid(),
            "started": wall_clock(),
            "updated": wall_clock(),
            "elapsed": 0.0,
            "planned": planned,
            "done": 0,
            "failed": 0,
            "output_tokens": 0,
            "concurrency": None,
            "level_planned": 0,
            "level_done": 0,
            "level_elapsed": 0.0,
            "finished": False,
        }
        # A path that cannot be written fails here, before any request is sent.
        write_atomically(self._path, self._state)

    def level(self, concurrency, planned):
        """A concurrency level begins; its pace is timed from here."""
        with self._lock:
            self._level_began = self._clock()
            self._state.update(concurrency=concurrency, level_planned=planned, level_done=0, level_elapsed=0.0)
            self._write(force=True)

    def request_done(self, outcome):
        """One request finished, successfully or not (an _load_generation.RequestOutcome)."""
        with self._lock:
            self._state["done"] += 1
            self._state["level_done"] += 1
            if outcome.success:
                self._state["output_tokens"] += outcome.output_tokens
            else:
                self._state["failed"] += 1
            self._write()

    def finish(self):
        with self._lock:
            self._state["finished"] = True
            self._write(force=True)

    def _write(self, force=False):
        now = self._clock()
        if self.broken or not force and self._last_write is not None and now - self._last_write < WRITE_INTERVAL:
            return
        self._last_write = now
        self._state.update(updated=self._wall_clock(), elapsed=now - self._began, level_elapsed=now - self._level_began)
        try:
            write_atomically(self._path, self._state)
        except OSError as exc:
            # Progress is for the operator; a full disk must not cost the measurement, so writing stops.
            self.broken = "%s: %s" % (type(exc).__name__, exc)


def write_atomically(path, document):
    """Replace ``path`` with ``document`` as JSON, so that a reader sees the old file or the new one, never half."""
    directory = os.path.dirname(os.path.abspath(path))
    # A custom async directory may not exist yet; private like Ansible's own.
    os.makedirs(directory, mode=0o700, exist_ok=True)
    replace_json(path, document)


def read_progress(path):
    """The progress file's document, or None while it is missing, unreadable or half-written by a foreign writer."""
    try:
        with open(path) as stream:
            document = json.load(stream)
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) and document.get("version") == PROGRESS_VERSION else None


def planned_requests(options):
    """Every request the benchmark plans to send: the warm-up, then num_prompts per level and repeat; for time-boxed
    windows, whose requests are not known ahead, at least one a stream."""
    prompts = measured_prompts(options)
    if prompts is None:
        return options["warmup_requests"] + options["repeats"] * sum(options["concurrency"])
    return options["warmup_requests"] + len(options["concurrency"]) * options["repeats"] * prompts


def job_time_limit(options):
    """Seconds after which nothing the benchmark still does can be a measurement: the async job's limit.

    The rule: every request may take the whole ``timeout``, and at most ``level`` of them run at once,
    so a run of a level takes at most ceil(num_prompts / level) timeouts, plus the time the arrival
    schedule spreads the requests over (num_prompts / request_rate); the warm-up runs at the highest
    level; each level adds two server readings. Twice that, plus two minutes, so that a slow but live
    benchmark is never killed: the limit only ends a job that hangs. ``options`` are the module's (or
    a workload's, with the module's defaults for anything left out).
    """
    timeout = float(options["timeout"])
    levels = [int(level) for level in options["concurrency"]]
    num_prompts = measured_prompts(options)
    if num_prompts is None:
        # A time-boxed run ends with its window; a request sent just before the end is cut there.
        run = [float(options.get("warmup_s") or 0.0) + float(options["duration_s"]) + timeout for level in levels]
    else:
        spread = num_prompts / float(options["request_rate"]) if options.get("request_rate") else 0.0
        run = [math.ceil(num_prompts / float(level)) * timeout + spread for level in levels]
    warmup = math.ceil(int(options["warmup_requests"]) / float(max(levels))) * timeout
    readings = len(levels) * 2 * (2 * timeout + _SETTLE_ALLOWANCE)
    worst = warmup + int(options["repeats"]) * sum(run) + readings
    return int(math.ceil(2 * worst + _STARTUP_ALLOWANCE))


def remaining_seconds(progress, now):
    """Seconds the benchmark still needs at the pace it has kept, or None while no request has finished.

    The rule: the requests left in the current concurrency level go at that level's pace so far
    (requests per second since it began), the requests of the levels after it at the whole
    benchmark's pace so far, since nothing has measured those levels yet. The estimate is as of the
    file's last update; the time since then (``now`` against its ``updated``, epoch seconds) is taken
    off, down to 0. A level that stops early (stop_when_slower) ends sooner than this says.
    """
    done = progress.get("done") or 0
    elapsed = progress.get("elapsed") or 0.0
    if done <= 0 or elapsed <= 0:
        return None
    overall_pace = done / elapsed
    level_done = progress.get("level_done") or 0
    level_left = max(0, (progress.get("level_planned") or 0) - level_done)
    later = max(0, progress["planned"] - done - level_left)
    level_elapsed = progress.get("level_elapsed") or 0.0
    level_pace = level_done / level_elapsed if level_done > 0 and level_elapsed > 0 else overall_pace
    estimate = level_left / level_pace + later / overall_pace
    since_update = max(0.0, now - (progress.get("updated") or now))
    return max(0.0, estimate - since_update)


def _duration(seconds):
    if seconds < 90:
        return "%d s" % round(seconds)
    if seconds < 90 * 60:
        return "%.1f min" % (seconds / 60.0)
    return "%.1f h" % (seconds / 3600.0)


def progress_line(progress, now, finished=False):
    """The line an operator reads: requests done of planned, output tok/s so far, time left.

    Output tokens count completed requests only (their server-reported usage) over the wall-clock
    time since the benchmark started, warm-up and server readings included.
    """
    if progress is None:
        return "benchmark finished" if finished else "benchmark starting"
    elapsed = max(0.0, now - progress["started"]) if not progress.get("finished") else progress.get("elapsed") or 0.0
    line = "%d/%d requests" % (progress["done"], progress["planned"])
    if progress.get("failed"):
        line += " (%d failed)" % progress["failed"]
    if progress.get("concurrency") is not None and not finished:
        line += " at concurrency %d" % progress["concurrency"]
    rate = progress["output_tokens"] / elapsed if elapsed > 0 else 0.0
    if finished:
        return "%s, %.0f output tok/s, finished after %s" % (line, rate, _duration(elapsed))
    line += ", %.0f output tok/s so far" % rate
    remaining = remaining_seconds(progress, now)
    if remaining is None:
        return "%s, %s elapsed, time left not known before the first request finishes" % (line, _duration(elapsed))
    return "%s, about %s left" % (line, _duration(remaining))


def job_status(async_dir, jid):
    """(whether the async job finished, its status document) from Ansible's job file; raises OSError if there is none.

    async_wrapper first writes {"started": true, "finished": false}, then replaces the file with the
    module's result (which has no "started"); a file being written reads as running, as
    ansible.builtin.async_status reads it.
    """
    path = os.path.join(async_dir, jid)
    with open(path) as stream:
        text = stream.read()
    try:
        document = json.loads(text)
    except ValueError:
        return False, {}
    if not isinstance(document, dict):
        return False, {}
    return "started" not in document or bool(document.get("finished")), document


def _process_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        # Someone else's process (PermissionError) is still a live process.
        return True
    return True


# How long a job file may still read as running once the benchmark's process has gone: async_wrapper
# writes the result a moment after the module exits.
GONE_GRACE = 5.0


def wait_for_job(async_dir, jid, progress_file, interval, clock=None, wall_clock=None, sleep=None, poll=0.25):
    """Wait up to ``interval`` seconds for the benchmark's async job to finish; return what it shows.

    Returns a dict with ``finished``, ``msg`` (the progress line), ``progress`` (the file's figures, or
    None before the first write), ``remaining_s``, ``elapsed`` (seconds this call waited) and, once the job has
    finished, ``job``, the benchmark module's result. A job whose
    benchmark process is gone while its job file still reads as running after GONE_GRACE seconds is
    reported with ``gone`` set, since async_status would wait for it forever. Raises OSError when
    there is no job file.
    """
    clock = clock or time.monotonic
    wall_clock = wall_clock or time.time
    sleep = sleep or time.sleep
    began = clock()
    deadline = began + max(0.0, interval)
    gone_since = None
    while True:
        finished, document = job_status(async_dir, jid)
        progress = read_progress(progress_file)
        now = clock()
        if not finished and progress is not None and not progress.get("finished") and progress.get("pid"):
            if _process_alive(progress["pid"]):
                gone_since = None
            elif gone_since is None:
                gone_since = now
            elif now - gone_since >= GONE_GRACE:
                return _answer(False, progress, wall_clock(), now - began, gone=True)
        if finished or now >= deadline:
            answer = _answer(finished, progress, wall_clock(), now - began)
            if finished:
                # The module's own result, as async_status would read it; its arguments stay behind.
                answer["job"] = dict((key, value) for key, value in document.items() if key != "invocation")
            return answer
        sleep(max(0.0, min(poll, deadline - now)))


def _answer(finished, progress, now, elapsed, gone=False):
    answer = {
        "finished": finished,
        "progress": progress,
        "remaining_s": None if finished or progress is None else remaining_seconds(progress, now),
        "elapsed": round(elapsed, 1),
        "msg": progress_line(progress, now, finished),
        "gone": gone,
    }
    if gone:
        answer["msg"] = "the benchmark process %s is gone and left no result; last seen: %s" % (
            progress["pid"], progress_line(progress, now))
    return answer
