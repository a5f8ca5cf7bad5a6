# This module_utils file is private to the llmops.vllm collection: its API may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Probe a vLLM OpenAI-compatible server through its start-up stages, and wait until it serves."""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.error
import urllib.request

from ansible_collections.llmops.vllm.plugins.module_utils._deadline import Backoff, Deadline, StaleToken, read_boot_id
from ansible_collections.llmops.vllm.plugins.module_utils._start_phases import (
    is_wait_symptom,
    kv_cache_capacity,
    milestone_of,
    phase_in_progress,
    start_phases,
    start_summary,
)
from ansible_collections.llmops.vllm.plugins.module_utils._systemd_unit import (
    JournalReadError,
    engine_died,
    find_fatal_cause,
    latest_phase_line,
    unit_problem,
    without_noise,
)

# Short enough that a watched unit is looked at again within about half a second even when a
# server accepts connections and then hangs; a local vLLM answers these in milliseconds.
PROBE_TIMEOUT = 0.5
# The first completion after start-up may wait for warm-up work; it is the last stage anyway.
SMOKE_TIMEOUT = 30.0
SMOKE_PROMPT = "Hello"
# While the server loads, the newest lines tell its phase.
JOURNAL_SCAN_LINES = 200
# Once it has died, the cause may sit anywhere in the run: Triton alone prints over a thousand
# leak lines after a worker's death. The whole run is read, up to this cap (about 10 MB), once per
# failure; a 30-minute load of a large model logs a few thousand lines.
JOURNAL_CAUSE_LINES = 100000
JOURNAL_RETURN_LINES = 20
# journald reads a dying process's last output asynchronously; give it a moment to catch up.
JOURNAL_SETTLE = 0.3
PHASE_LINE_CHARS = 160
# GPU memory that grows by this much counts as progress: weights and KV cache reach the GPUs while the journal is
# silent (journald holds a progress bar's carriage-return updates until its line ends).
GPU_PROGRESS_MIB = 256
# Seconds between two looks for progress: each reads the journal and the GPUs.
STALL_CHECK_INTERVAL = 5.0


class Unreachable(Exception):
    """No HTTP answer at all (refused, timed out, reset)."""

    def __init__(self, reason, refused=False):
        super().__init__(reason)
        self.reason = reason
        self.refused = refused


class NotServable(Exception):
    """The server answered in a way that waiting longer will not change."""

    def __init__(self, reason, seen):
        super().__init__(reason)
        self.seen = seen


class Reply:
    def __init__(self, status, body):
        self.status = status
        self.body = body

    def json(self):
        try:
            return json.loads(self.body.decode("utf-8"))
        except ValueError:
            return None

    def error_text(self):
        """The message of an OpenAI-style error body, else the start of the body."""
        document = self.json()
        if isinstance(document, dict):
            error = document.get("error", document)
            message = error.get("message") if isinstance(error, dict) else error
            if message:
                return str(message)
        return self.body.decode("utf-8", "replace")[:200]


def api_root(base_url):
    """Accept the server root or an OpenAI-style base URL ending in /v1; return the root."""
    root = base_url.rstrip("/")
    if root.endswith("/v1"):
        root = root[:-len("/v1")]
    return root


def _reason(exc):
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "no answer within the probe timeout"
    return str(exc) or type(exc).__name__


def model_ids(document):
    if not isinstance(document, dict) or not isinstance(document.get("data"), list):
        return None
    return [entry.get("id") for entry in document["data"] if isinstance(entry, dict) and entry.get("id")]


class Observation:
    """What one pass through the stages found."""

    def __init__(self):
        self.reached = []
        self.ready = False
        self.last_seen = ""
        self.models = []
        # A 5xx for the smoke completion: an API server whose engine may have died behind it.
        self.server_error = False


class EndpointProbe:
    """Talk to one server with the standard library only (modules run on managed hosts)."""

    def __init__(self, base_url, api_key=None, ssl_context=None):
        self.root = api_root(base_url)
        self.has_api_key = bool(api_key)
        # The server is normally on the managed host itself: a proxy from the login environment
        # would only stand between the probe and the truth.
        handlers = [urllib.request.ProxyHandler({})]
        if ssl_context is not None:
            handlers.append(urllib.request.HTTPSHandler(context=ssl_context))
        self._opener = urllib.request.build_opener(*handlers)
        self._headers = {"Accept": "application/json"}
        if api_key:
            self._headers["Authorization"] = "Bearer %s" % api_key

    def request(self, path, payload=None, timeout=PROBE_TIMEOUT):
        """Return the Reply for any HTTP status; raise Unreachable when there is none."""
        headers = dict(self._headers)
        data = None
        if payload is not None:
            data = json.dumps(payload).encode("utf-8")
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(self.root + path, data=data, headers=headers)
        try:
            with self._opener.open(request, timeout=timeout) as response:
                return Reply(response.status, response.read())
        except urllib.error.HTTPError as exc:
            try:
                body = exc.read()
            except (OSError, http.client.HTTPException):
                body = b""
            return Reply(exc.code, body)
        except urllib.error.URLError as exc:
            reason = exc.reason
            raise Unreachable(_reason(reason), refused=isinstance(reason, ConnectionRefusedError)) from None
        except (OSError, http.client.HTTPException) as exc:
            raise Unreachable(_reason(exc)) from None

    def observe(self, model=None, smoke_test=False, smoke_timeout=SMOKE_TIMEOUT):
        """Walk /health, /v1/models and optionally a 1-token completion, as far as the server allows."""
        seen = Observation()
        try:
            health = self.request("/health")
        except Unreachable as exc:
            seen.last_seen = "%s on /health" % exc.reason
            return seen
        if health.status == 503:
            raise NotServable("%s/health answered 503: the engine is dead" % self.root, seen)
        if health.status != 200:
            seen.last_seen = "/health answered HTTP %d" % health.status
            return seen
        seen.reached.append("health")

        try:
            listing = self.request("/v1/models")
        except Unreachable as exc:
            seen.last_seen = "%s on /v1/models" % exc.reason
            return seen
        if listing.status in (401, 403):
            if self.has_api_key:
                raise NotServable("%s rejected the API key (HTTP %d on /v1/models)"
                                  % (self.root, listing.status), seen)
            raise NotServable("%s requires an API key (HTTP %d on /v1/models); set api_key"
                              % (self.root, listing.status), seen)
        ids = model_ids(listing.json()) if listing.status == 200 else None
        if ids is None:
            seen.last_seen = "/v1/models answered HTTP %d without a model list" % listing.status
            return seen
        seen.models = ids
        if not ids:
            seen.last_seen = "/v1/models lists no model yet"
            return seen
        if model and model not in ids:
            raise NotServable("%s is healthy but serves %s, not %r"
                              % (self.root, ", ".join(repr(i) for i in ids), model), seen)
        seen.reached.append("models")

        if smoke_test:
            payload = {"model": model or ids[0], "prompt": SMOKE_PROMPT, "max_tokens": 1, "temperature": 0}
            try:
                reply = self.request("/v1/completions", payload, timeout=smoke_timeout)
            except Unreachable as exc:
                seen.last_seen = "%s on /v1/completions" % exc.reason
                return seen
            if 400 <= reply.status < 500:
                raise NotServable("%s refused a 1-token completion (HTTP %d): %s"
                                  % (self.root, reply.status, reply.error_text()), seen)
            document = reply.json()
            seen.server_error = reply.status >= 500
            if reply.status != 200 or not isinstance(document, dict) or not document.get("choices"):
                seen.last_seen = "/v1/completions answered HTTP %d: %s" % (reply.status, reply.error_text())
                return seen
            seen.reached.append("smoke")

        seen.ready = True
        seen.last_seen = "ready"
        return seen

    def version(self):
        try:
            reply = self.request("/version")
        except Unreachable:
            return None
        document = reply.json() if reply.status == 200 else None
        return document.get("version") if isinstance(document, dict) else None


def format_duration(seconds):
    seconds = int(seconds)
    if seconds < 60:
        return "%ds" % seconds
    if seconds < 3600:
        return "%dm%02ds" % divmod(seconds, 60)
    hours, rest = divmod(seconds, 3600)
    return "%dh%02dm%02ds" % ((hours,) + divmod(rest, 60))


class ReadinessWait:
    """Poll a server until it serves, watching its systemd unit in between to fail fast.

    With progress_interval the wait returns early, not ready, so that a task loop can show
    progress; the returned resume token lets the next call continue the same wait (same
    deadline, restart baseline, attempt count and stage times).

    A wait that saw the server before it was ready waited through a start: with a unit, the call
    that finds it ready times that start by phase from the journal (_start_phases). A server that
    was ready at the first look was started before the wait, which cannot tell when.
    """

    def __init__(self, probe, timeout, sleep, model=None, smoke_test=False, unit=None,
                 progress_interval=0, resume=None, stall_timeout=0, gpu_memory=None, phase_stall_timeouts=None):
        self.probe = probe
        # Stall detection: with a unit, fail when neither its journal nor the endpoint (nor, where gpu_memory()
        # reads it, the GPUs' memory in use) has changed for stall_timeout seconds, or for the phase's own limit
        # (phase_stall_timeouts: {phase name: seconds}) where that is longer.
        self.stall_timeout = stall_timeout if unit else 0
        self.phase_stall_timeouts = dict(phase_stall_timeouts or {})
        self.gpu_memory = gpu_memory
        self.progress = {"at": None, "mark": None, "line": None, "gpu_mib": None, "checked": 0.0, "symptom": None,
                         "phase": None, "gpu_unread": False}
        self.model = model
        self.smoke_test = smoke_test
        self.unit = unit
        self.backoff = Backoff(cap=sleep)
        self.chunk = Deadline(progress_interval) if progress_interval else None
        self.attempts = 0
        self.stages = {}
        self.restarts_baseline = None
        self.run_started = None
        self.saw_start = False
        # For the module to pass on: what could not be read, though the wait itself went well.
        self.warnings = []
        if resume:
            self._continue(resume, timeout)
        else:
            self.deadline = Deadline(timeout)

    def _continue(self, resume, timeout):
        if resume.get("base_url") != self.probe.root or resume.get("unit") != self._unit_name():
            raise StaleToken("it was made for %s (unit %s)" % (resume.get("base_url"), resume.get("unit")))
        self.deadline = Deadline.from_token(resume, timeout)
        try:
            self.attempts = int(resume.get("attempts", 0))
            self.stages = dict((str(k), float(v)) for k, v in (resume.get("stages") or {}).items())
            baseline = resume.get("restarts_baseline")
            self.restarts_baseline = None if baseline is None else int(baseline)
            self.saw_start = bool(resume.get("saw_start", False))
            progress = resume.get("progress") or {}
            self.progress.update((key, progress.get(key)) for key in self.progress)
        except (TypeError, ValueError, AttributeError):
            raise StaleToken("it holds malformed counters") from None

    def _unit_name(self):
        return self.unit.name if self.unit else None

    def resume_token(self):
        token = self.deadline.to_token()
        token.update(attempts=self.attempts, stages=dict(self.stages), restarts_baseline=self.restarts_baseline,
                     saw_start=self.saw_start, base_url=self.probe.root, unit=self._unit_name(),
                     progress=dict(self.progress))
        return token

    def run(self, check_only=False):
        """Return the module result; result["failed"] says whether the wait failed."""
        while True:
            self.attempts += 1
            state = None
            if self.unit:
                state = self.unit.state()
                # The earliest run start seen keeps a crash's journal lines once the unit has restarted.
                if state.started_monotonic is not None:
                    self.run_started = min(self.run_started or state.started_monotonic, state.started_monotonic)
                if self.restarts_baseline is None:
                    self.restarts_baseline = state.n_restarts
                problem = unit_problem(state, self.restarts_baseline)
                if problem:
                    return self._unit_failure(state, problem, check_only)
            try:
                seen = self.probe.observe(self.model, self.smoke_test,
                                          smoke_timeout=max(PROBE_TIMEOUT, min(SMOKE_TIMEOUT, self.deadline.remaining())))
            except NotServable as exc:
                self._record(exc.seen)
                if self.unit:
                    dead = self._engine_failure(state, "answers but its engine died", check_only, settle=True,
                                                shown_dead=True)
                    if dead:
                        return dead
                result = self._result(state, ready=False, failed=not check_only, last_seen=str(exc),
                                      models=exc.seen.models)
                result["msg"] = "%s (after %.1f s)" % (exc, result["elapsed"])
                return result
            # The completion has just come back: the end of the start, in the journal's clock.
            seen_at = time.monotonic()
            self._record(seen)
            if not seen.ready:
                self.saw_start = True
            if seen.server_error and self.unit:
                # vLLM's API process outlives its engine and answers 500; the journal says why.
                dead = self._engine_failure(state, "answers but its engine died", check_only, settle=False,
                                            shown_dead=False)
                if dead:
                    return dead
            if seen.ready:
                result = self._result(state, ready=True, failed=False, last_seen=seen.last_seen, models=seen.models)
                result["version"] = self.probe.version()
                result["msg"] = "%s serves %s (vLLM %s) after %.1f s" % (
                    self.probe.root, ", ".join(seen.models), result["version"] or "of unknown version", result["elapsed"])
                if self.unit and self.saw_start and not check_only:
                    self._time_start(result, state, seen_at)
                return result
            if check_only or self.deadline.expired() or (self.chunk and self.chunk.expired()):
                return self._not_ready(state, seen, timed_out=not check_only and self.deadline.expired())
            if self.stall_timeout and self._stalled(seen):
                return self._stall(state)
            pause = self.backoff.next()
            if self.chunk:
                pause = min(pause, self.chunk.remaining())
            self.deadline.sleep(pause)

    def _stalled(self, seen):
        """Note what moved since the last look; True when nothing has for stall_timeout seconds.

        The journal and the GPUs are read every few seconds, not at every poll of the endpoint.
        """
        now = self.deadline.elapsed()
        if self.progress["at"] is not None and now < (self.progress.get("checked") or 0.0) + STALL_CHECK_INTERVAL:
            return False
        self.progress["checked"] = round(now, 3)
        lines = [line for line in self._journal() if line.strip()]
        # The lines a waiting process repeats (the engine's once-a-minute shared-memory wait) come through a hang
        # too: only the start's own lines count. vLLM's lines carry their time, so a new one never equals the last.
        own = [line for line in lines if not is_wait_symptom(line)]
        since_own = lines[len(lines) - next((n for n, line in enumerate(reversed(lines)) if not is_wait_symptom(line)),
                                            len(lines)):]
        self.progress["symptom"] = since_own[-1] if since_own else None
        # A window of the journal that holds wait lines only keeps the start's last own line.
        last_own = own[-1] if own else (self.progress["mark"] or [None])[0]
        mark = [last_own, seen.last_seen, sorted(self.stages)]
        gpu_mib = self.gpu_memory() if self.gpu_memory else None
        if self.gpu_memory and gpu_mib is None and not self.progress.get("gpu_unread"):
            self.progress["gpu_unread"] = True
            self.warnings.append("the GPUs' memory in use is not reported (NVML or nvidia-smi gives no figure): the "
                                 "stall check watches the journal and the endpoint only")
        previous_mib = self.progress["gpu_mib"]
        grew = gpu_mib is not None and previous_mib is not None and abs(gpu_mib - previous_mib) >= GPU_PROGRESS_MIB
        if self.progress["at"] is None or mark != self.progress["mark"] or grew:
            self.progress.update(at=round(now, 3), mark=mark, gpu_mib=gpu_mib,
                                 line=latest_phase_line(own) or self.progress["line"])
        self.progress["phase"] = phase_in_progress(own) or self.progress.get("phase")
        return now - self.progress["at"] >= self._stall_limit()

    def _stall_limit(self):
        """The stall timeout, or the longer limit of the phase in progress: some phases are silent by nature."""
        return max(self.stall_timeout, self.phase_stall_timeouts.get(self.progress.get("phase"), 0))

    def _stall(self, state):
        """The failure of a start that stopped making progress, naming its last progress line and phase."""
        result = self._result(state, ready=False, failed=True, last_seen="no progress")
        progress_at = float(self.progress["at"] or 0.0)
        since = round(self.deadline.elapsed() - progress_at, 1)
        line = self.progress["line"]
        phase = milestone_of(line) or "before any phase vLLM logs"
        watched = "its journal, its endpoint" + (" and the GPUs' memory" if self.gpu_memory else "")
        symptom = self.progress.get("symptom")
        result.update(stalled=True, last_progress_line=line, last_progress_phase=phase, seconds_since_progress=since,
                      repeated_line=symptom, journal=self._journal()[-JOURNAL_RETURN_LINES:])
        limit = self._stall_limit()
        result["stall_limit"] = limit
        result["stalled_phase"] = self.progress.get("phase")
        result["msg"] = "%s stalled: nothing changed in %s for %.1f s (stall limit %d s), %.1f s into the wait; " \
                        "last progress at %.1f s, in phase '%s': %s" % (
                            self.unit.name, watched, since, limit, result["elapsed"],
                            progress_at, phase, (line or "no journal line yet")[:PHASE_LINE_CHARS])
        if symptom:
            result["msg"] += "; since then the engine only repeats: %s" % symptom[:PHASE_LINE_CHARS]
        return result

    def _time_start(self, result, state, ready_at):
        """Add the start's phases to a ready result; a journal that cannot be read only costs a warning."""
        started = state.main_started_monotonic if state is not None else None
        if started is None:
            self.warnings.append("start phases not timed: systemd does not say when %s started" % self.unit.name)
            return
        try:
            entries = self.unit.journal_entries(started, boot_id=read_boot_id())
        except (JournalReadError, OSError) as exc:
            self.warnings.append("start phases not timed: %s" % exc)
            return
        phases = start_phases(entries, started, ready_at, smoke_test=self.smoke_test)
        result["start_phases"] = phases
        result["start_summary"] = start_summary(phases)
        result["kv_cache"] = kv_cache_capacity(entries, started, ready_at)

    def _record(self, seen):
        for stage in seen.reached:
            self.stages.setdefault(stage, round(self.deadline.elapsed(), 3))

    def _result(self, state, ready, failed, last_seen, models=None):
        result = {
            "ready": ready,
            "failed": failed,
            "elapsed": round(self.deadline.elapsed(), 3),
            "attempts": self.attempts,
            "stages": dict(self.stages),
            "models": models or [],
            "version": None,
            "last_seen": last_seen,
            "resume": self.resume_token(),
        }
        if state is not None:
            result["unit_state"] = state.as_dict()
        return result

    def _journal(self, lines=JOURNAL_SCAN_LINES):
        return self.unit.journal(lines, since_monotonic=self.run_started)

    def _cause(self, settle):
        """Read the run's whole journal for the first real cause; once more after a pause if none yet."""
        lines = self._journal(JOURNAL_CAUSE_LINES)
        cause = find_fatal_cause(lines)
        if cause is None and settle:
            time.sleep(JOURNAL_SETTLE)
            lines = self._journal(JOURNAL_CAUSE_LINES)
            cause = find_fatal_cause(lines)
        return lines, cause

    def _when(self):
        """When the server died, as far as this wait saw it get: the first request is the smoke test."""
        if "models" in self.stages:
            return "on its first request" if self.smoke_test and "smoke" not in self.stages else "after its API came up"
        return None

    def _failure(self, state, problem, lines, cause, check_only, elapsed):
        result = self._result(state, ready=False, failed=not check_only, last_seen="unit %s" % problem)
        # When the failure was seen, not when its journal had been read.
        result["elapsed"] = round(elapsed, 3)
        kept, dropped = without_noise(lines)
        result["journal"] = kept[-JOURNAL_RETURN_LINES:]
        if dropped:
            result["journal"].append("(%d lines of binding-leak noise such as 'nanobind: leaked ...' left out)"
                                     % dropped)
        result["fatal_line"] = cause.describe(self._when()) if cause else None
        result["fatal_cause"] = cause.as_dict() if cause else None
        text = result["fatal_line"] or (kept[-1] if kept else "the journal has no lines for this run")
        result["msg"] = "%s %s after %.1f s: %s" % (self.unit.name, problem, result["elapsed"], text)
        return result

    def _engine_failure(self, state, problem, check_only, settle, shown_dead):
        """The failure result when the journal names why the engine died behind a live API, else None.

        A 500 alone does not show a dead engine (shown_dead false): then the journal must say it died.
        """
        elapsed = self.deadline.elapsed()
        lines, cause = self._cause(settle and not check_only)
        if cause is None or not (shown_dead or engine_died(lines)):
            return None
        return self._failure(state, problem, lines, cause, check_only, elapsed)

    def _unit_failure(self, state, problem, check_only):
        elapsed = self.deadline.elapsed()
        lines, cause = self._cause(settle=not check_only)
        result = self._failure(state, problem, lines, cause, check_only, elapsed)
        exited = state.main_exited_monotonic
        # An exit from before the latest main process started is not the crash being reported.
        if exited is not None and (state.main_started_monotonic is None or exited >= state.main_started_monotonic):
            result["crash_noticed_after"] = round(max(0.0, time.monotonic() - exited), 3)
        return result

    def _not_ready(self, state, seen, timed_out):
        result = self._result(state, ready=False, failed=timed_out, last_seen=seen.last_seen, models=seen.models)
        details = ["last seen: %s" % seen.last_seen]
        if state is not None:
            lines = self._journal()
            phase = latest_phase_line(lines)
            result["journal"] = lines[-JOURNAL_RETURN_LINES:]
            result["phase_line"] = phase
            details.append("unit %s" % state.describe())
            if phase:
                details.append("log: %s" % phase[:PHASE_LINE_CHARS])
        if timed_out:
            result["msg"] = "%s not ready after %.1f s (%d attempts); %s" % (
                self.probe.root, result["elapsed"], self.attempts, "; ".join(details))
        else:
            result["msg"] = "%s elapsed, not ready yet; %s" % (format_duration(result["elapsed"]), "; ".join(details))
        return result
