# This module_utils file is private to the llmops.vllm collection; it may change without notice.
# Copyright (c) 2025, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Streaming load against an OpenAI-compatible server, timed the way ``vllm bench serve`` times it.

Only the standard library is used, so the load generator runs on the controller or on any
host a play delegates to without installing anything.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import random
import re
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

from ansible_collections.llmops.vllm.plugins.module_utils._benchmark_options import SAMPLING_PARAMETERS, measured_prompts
from ansible_collections.llmops.vllm.plugins.module_utils._benchmark_statistics import (
    run_output_throughput,
    summarize_errors,
    summarize_level,
)
from ansible_collections.llmops.vllm.plugins.module_utils._prometheus_text import (
    foreign_requests,
    parse_samples,
    server_requests,
    spec_decode_delta,
    spec_decode_totals,
)
from ansible_collections.llmops.vllm.plugins.module_utils._prompt_sets import built_in_requests, padded_request
from ansible_collections.llmops.vllm.plugins.module_utils._replay_files import CHARACTERS_PER_TOKEN, read_replay_file
from ansible_collections.llmops.vllm.plugins.module_utils._sequential_stop import losing

ENDPOINT_PATHS = {
    "completions": "/v1/completions",
    "chat": "/v1/chat/completions",
}

# A token chunk is one whose "choices" list is not empty (vllm bench serve's rule); the final usage
# chunk has "choices": []. An unescaped quote can only start a key or a whole string value in JSON,
# so these byte patterns cannot be fooled by generated text, which arrives with its quotes escaped.
_NONEMPTY_CHOICES = re.compile(rb'"choices"\s*:\s*\[\s*[^\s\]]')
_USAGE_OBJECT = re.compile(rb'"usage"\s*:\s*\{')
# Every chunk carries "finish_reason": null but the last of a choice; only that one is a string.
_FINISH_REASON = re.compile(rb'"finish_reason"\s*:\s*"([^"]*)"')
# With stream_options.continuous_usage_stats (vLLM's, tested in its tests/entrypoints/openai/test_completion.py
# test_completion_stream_options) every token chunk carries the output tokens so far: a stream cut at a window's end
# is counted exactly, several tokens a chunk under speculative decoding included.
_COMPLETION_TOKENS = re.compile(rb'"completion_tokens"\s*:\s*(\d+)')

_READ_SIZE = 65536
_ERROR_BODY_LIMIT = 65536
_MESSAGE_LIMIT = 300

# Raised when a kept-alive connection turns out to have been closed by the server while idle.
_STALE_CONNECTION_ERRORS = (
    http.client.RemoteDisconnected,
    BrokenPipeError,
    ConnectionResetError,
    ConnectionAbortedError,
)


class BenchmarkAborted(Exception):
    """Every warm-up request failed, so measuring would only record the same failure again."""

    def __init__(self, message, errors):
        super(BenchmarkAborted, self).__init__(message)
        self.errors = errors


class RequestOutcome:
    """What one streamed request produced; times are seconds from ``time.perf_counter``."""

    __slots__ = (
        "success",
        "ttft",
        "latency",
        "itl",
        "output_tokens",
        "prompt_tokens",
        "error_kind",
        "error_message",
        "finish_reason",
        "cut",
        "in_window",
        "window_tokens",
    )

    def __init__(self):
        self.success = False
        self.ttft = 0.0
        self.latency = 0.0
        self.itl = []
        self.output_tokens = 0
        self.prompt_tokens = 0
        self.error_kind = None
        self.error_message = None
        self.finish_reason = None
        # A time-boxed window's: whether the window's end cut the stream, whether the request was sent inside the
        # window (after its warm-up), and the output tokens that arrived inside it.
        self.cut = False
        self.in_window = True
        self.window_tokens = 0

    def fail(self, kind, message):
        self.success = False
        self.error_kind = kind
        self.error_message = message[:_MESSAGE_LIMIT]
        return self


class LoadRun:
    """The outcomes of one pass over a list of requests, and how long the pass took; or, windowed, of one time-boxed
    window, whose duration is the window's."""

    __slots__ = ("outcomes", "duration", "window")

    def __init__(self, outcomes, duration, window=None):
        self.outcomes = outcomes
        self.duration = duration
        # A time-boxed run's window, (start, end) in perf_counter seconds; None for a run over a count of requests.
        self.window = window

    @property
    def windowed(self):
        return self.window is not None


def _http_connection(url, timeout, ssl_context=None):
    """An unopened connection to the host of ``url``, and the URL's parts."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("%r is not an http:// or https:// URL" % url)
    if parts.scheme == "https":
        return http.client.HTTPSConnection(parts.hostname, parts.port, timeout=timeout, context=ssl_context), parts
    return http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout), parts


class OpenAITarget:
    """The endpoint that requests go to, resolved once so each request only sends bytes."""

    def __init__(self, base_url, endpoint, api_key, timeout, ssl_context=None):
        dummy, parts = _http_connection(base_url, timeout)
        self.url = base_url
        self.ssl_context = ssl_context
        self.path = parts.path.rstrip("/") + ENDPOINT_PATHS[endpoint]
        self.timeout = timeout
        self.headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if api_key:
            self.headers["Authorization"] = "Bearer %s" % api_key

    def connection(self):
        return _http_connection(self.url, self.timeout, self.ssl_context)[0]


def request_body(endpoint, model, request, options, index=0):
    """The JSON body of one streamed request, with usage requested so token counts are exact.

    ``request`` is a prompt-set request (``prompt`` or ``messages``, optional ``tools``,
    ``max_tokens`` and captured ``sampling``); ``options`` are the module's; ``index`` is the
    request's place in the benchmark. A request's own output length is capped by ``max_tokens``.

    Sampling: what a replayed request captured, else the module's options; a parameter neither
    names is left out, so vLLM samples it with the model's generation_config.json default, as it
    does for clients that name none. With ``sampling_seed`` request ``index`` gets that seed plus
    ``index``: both sides of a trial then draw with the same seed for the same prompt.
    """
    body = {
        "model": model,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if options.get("duration_s") is not None:
        body["stream_options"]["continuous_usage_stats"] = True
    for name in SAMPLING_PARAMETERS:
        if options.get(name) is not None:
            body[name] = options[name]
    if options.get("sampling_seed") is not None:
        body["seed"] = options["sampling_seed"] + index
    body.update(request.get("sampling") or {})
    max_tokens = min(request.get("max_tokens") or options["max_tokens"], options["max_tokens"])
    if endpoint == "chat":
        body["messages"] = request.get("messages") or [{"role": "user", "content": request["prompt"]}]
        body["max_completion_tokens"] = max_tokens
        tools = request.get("tools") or options.get("tools")
        if tools:
            body["tools"] = tools
        if tools and options.get("tool_choice"):
            body["tool_choice"] = options["tool_choice"]
        if options.get("chat_template_kwargs"):
            body["chat_template_kwargs"] = options["chat_template_kwargs"]
    else:
        if "prompt" not in request:
            raise ValueError("a request with messages needs endpoint chat; /v1/completions takes a prompt")
        body["prompt"] = request["prompt"]
        body["max_tokens"] = max_tokens
    if options["ignore_eos"]:
        body["ignore_eos"] = True
    return json.dumps(body).encode("utf-8")


def load_requests(prompt_set, count, seed, context_tokens=None):
    """``count`` requests from a built-in set (seeded) or a replay file, padded to ``context_tokens``.

    A file's requests are used in order and repeated when it holds fewer than ``count``.
    """
    requests = built_in_requests(prompt_set, count, seed)
    if requests is None:
        recorded = read_replay_file(prompt_set)
        requests = [recorded[index % len(recorded)] for index in range(count)]
    if context_tokens:
        rng = random.Random("context:%d" % seed)
        requests = [padded_request(request, context_tokens * CHARACTERS_PER_TOKEN, rng) for request in requests]
    return requests


def arrival_offsets(count, request_rate, burstiness, rng):
    """Seconds after the start at which each request is sent (all zero when the rate is unlimited).

    Gaps follow a gamma distribution with shape ``burstiness`` (1 gives a Poisson process), and
    are rescaled so the last request goes out at ``count / request_rate``, as vllm bench serve
    does, so that throughput does not drift with the seed.
    """
    if request_rate is None:
        return [0.0] * count
    theta = 1.0 / (request_rate * burstiness)
    offsets = []
    elapsed = 0.0
    for dummy in range(count):
        elapsed += rng.gammavariate(burstiness, theta)
        offsets.append(elapsed)
    scale = count / request_rate / elapsed
    return [offset * scale for offset in offsets]


def _error_message(document):
    """The human-readable part of an OpenAI or vLLM error object."""
    if isinstance(document, dict):
        inner = document.get("error", document)
        if isinstance(inner, dict):
            for key in ("message", "detail"):
                if inner.get(key):
                    return str(inner[key])
        elif inner:
            return str(inner)
    return json.dumps(document)


def _error_kind(exc):
    if isinstance(exc, ConnectionRefusedError):
        return "connection_refused"
    if isinstance(exc, socket.timeout):
        return "timeout"
    if isinstance(exc, (http.client.IncompleteRead,) + _STALE_CONNECTION_ERRORS):
        return "connection_closed"
    if isinstance(exc, (http.client.HTTPException, ValueError)):
        return "protocol_error"
    return "connection_error"


class _StreamingSession:
    """One kept-alive connection, used by one worker thread for its requests in turn."""

    def __init__(self, target):
        self._target = target
        self._connection = target.connection()

    def close(self):
        self._connection.close()

    def post(self, body, window=None):
        """Stream one request. ``window`` (start, end), perf_counter times, time-boxes it: at the end the stream is
        cut (not failed), and only the tokens that arrived inside the window are its ``window_tokens``."""
        outcome = RequestOutcome()
        until = window[1] if window is not None else None
        try:
            response, sock, started = self._send(body, until)
            if response.status != 200:
                detail = response.read(_ERROR_BODY_LIMIT)
                return outcome.fail("http_%d" % response.status, self._status_message(response, detail))
            self._read_stream(response, sock, started, outcome, window)
        except socket.timeout as exc:
            if until is not None and time.perf_counter() >= until:
                # The window closed before the server answered: nothing of this request falls inside it.
                outcome.cut = outcome.success = True
            else:
                outcome.fail(_error_kind(exc), "%s: %s" % (type(exc).__name__, exc))
        except (OSError, http.client.HTTPException, ValueError) as exc:
            outcome.fail(_error_kind(exc), "%s: %s" % (type(exc).__name__, exc))
        if not outcome.success or outcome.cut:
            # A cut stream is abandoned mid-answer; closing the connection makes vLLM abort the request.
            self._connection.close()
        return outcome

    def _send(self, body, until=None):
        """Send the request; a kept-alive connection the server dropped while idle is retried once."""
        reused = self._connection.sock is not None
        try:
            return self._attempt(body, until)
        except _STALE_CONNECTION_ERRORS:
            if not reused:
                raise
            self._connection.close()
            return self._attempt(body, until)

    def _attempt(self, body, until=None):
        connection = self._connection
        started = time.perf_counter()
        timeout = self._target.timeout
        if until is not None:
            timeout = max(0.001, min(timeout, until - started))
        connection.timeout = timeout
        if connection.sock is not None:
            connection.sock.settimeout(timeout)
        connection.request("POST", self._target.path, body, self._target.headers)
        # getresponse() drops the connection's reference when the server will close, so keep ours.
        sock = connection.sock
        return connection.getresponse(), sock, started

    @staticmethod
    def _status_message(response, detail):
        text = detail.decode("utf-8", "replace")
        try:
            message = _error_message(json.loads(text))
        except ValueError:
            message = text.strip()
        return "HTTP %d %s: %s" % (response.status, response.reason, message)

    def _read_stream(self, response, sock, started, outcome, window=None):
        """Consume the SSE stream, timing token chunks as they arrive and decoding only usage/errors.

        With a window (start, end), reading stops at its end: the stream is cut, its tokens and times are those of
        the chunks that arrived before, and its ``window_tokens`` those that arrived after the window's start.
        """
        deadline = started + self._target.timeout
        window_start, window_end = window if window is not None else (None, None)
        limit = deadline if window_end is None else min(deadline, window_end)
        if response.chunked:
            body = _ChunkedBody()
            read_raw = response.fp.read1
        else:
            body = None
            read_raw = response.read1
        perf_counter = time.perf_counter
        itl = outcome.itl
        nonempty_choices = _NONEMPTY_CHOICES.search
        usage_object = _USAGE_OBJECT.search
        finish_reason = _FINISH_REASON.search
        completion_tokens = _COMPLETION_TOKENS.search
        last_token_at = None
        token_chunks = 0
        # Output tokens so far, and as of the window's start: the server's own count where each chunk carries it
        # (continuous usage), else one a chunk.
        tokens = 0
        tokens_before_window = 0
        usage = None
        done = False
        pending = b""
        arrived = started
        while body is None or not body.finished:
            # Measured from the last arrival rather than re-reading the clock: one clock read per
            # network read keeps the per-token cost down.
            remaining = limit - arrived
            if remaining <= 0 and window_end is not None and arrived >= window_end:
                return self._cut(response, outcome, started, last_token_at, tokens, tokens_before_window)
            if remaining <= 0:
                raise socket.timeout("no complete response within %s s" % self._target.timeout)
            sock.settimeout(remaining)
            try:
                data = read_raw(_READ_SIZE)
            except socket.timeout:
                if window_end is not None and perf_counter() >= window_end:
                    return self._cut(response, outcome, started, last_token_at, tokens, tokens_before_window)
                raise
            if not data:
                if body is not None:
                    raise http.client.IncompleteRead(pending, None)
                break
            arrived = perf_counter()
            if window_end is not None and arrived > window_end:
                # What this read brought arrived after the window closed.
                return self._cut(response, outcome, started, last_token_at, tokens, tokens_before_window)
            if body is not None:
                data = body.feed(data)
            if pending:
                data = pending + data
            lines = data.split(b"\n")
            pending = lines.pop()
            for line in lines:
                if not line.startswith(b"data:"):
                    continue
                payload = line[5:].strip()
                if payload == b"[DONE]":
                    done = True
                    continue
                has_token = nonempty_choices(payload)
                # A token chunk's own usage (continuous usage) is read by its count alone; the final usage chunk,
                # which has no choice, and any error are decoded.
                if b'"error"' in payload or (not has_token and b'"usage"' in payload and usage_object(payload)):
                    document = json.loads(payload)
                    if not isinstance(document, dict):
                        raise ValueError("stream event is not a JSON object: %r" % payload[:80])
                    if document.get("error"):
                        return outcome.fail("stream_error", _error_message(document))
                    usage = document.get("usage") or usage
                if has_token:
                    if last_token_at is None:
                        outcome.ttft = arrived - started
                    else:
                        itl.append(arrived - last_token_at)
                    last_token_at = arrived
                    token_chunks += 1
                    counted = completion_tokens(payload) if window is not None else None
                    tokens = int(counted.group(1)) if counted else token_chunks
                    if window_start is not None and arrived < window_start:
                        tokens_before_window = tokens
                # vLLM writes compact JSON, so the common chunk is skipped without a regex search.
                if b'"finish_reason"' in payload and b'"finish_reason":null' not in payload:
                    reason = finish_reason(payload)
                    if reason is not None:
                        outcome.finish_reason = reason.group(1).decode("utf-8", "replace")
        # The body was read past http.client; closing the response lets the connection serve the next one.
        response.close()
        if not done:
            return outcome.fail("incomplete_stream", "the stream ended before 'data: [DONE]'")
        if last_token_at is None:
            return outcome.fail("no_tokens", "the stream carried no token chunk")
        outcome.success = True
        outcome.latency = last_token_at - started
        # Without usage (a server that ignores stream_options) chunks are the best count there is.
        outcome.output_tokens = (usage or {}).get("completion_tokens") or token_chunks
        outcome.prompt_tokens = (usage or {}).get("prompt_tokens") or 0
        if window is not None:
            outcome.window_tokens = max(0, outcome.output_tokens - tokens_before_window)
        return outcome

    @staticmethod
    def _cut(response, outcome, started, last_token_at, tokens, tokens_before_window):
        """The stream as it stood when its window closed: a partial answer, neither completed nor failed."""
        response.close()
        outcome.success = outcome.cut = True
        outcome.output_tokens = tokens
        outcome.latency = last_token_at - started if last_token_at is not None else 0.0
        outcome.window_tokens = max(0, tokens - tokens_before_window)
        return outcome


class _ChunkedBody:
    """Undoes HTTP/1.1 chunked framing a whole network read at a time.

    Servers send each SSE event as its own chunk, and http.client returns one chunk per call with
    several Python calls each, which would dominate the client's cost per token.
    """

    __slots__ = ("_framing", "_left", "_after_payload", "finished")

    def __init__(self):
        self._framing = b""
        self._left = 0
        self._after_payload = False
        self.finished = False

    def feed(self, data):
        """The payload bytes in ``data``; framing cut off at the end of it is kept for the next call."""
        if self._framing:
            data = self._framing + data
        payload = []
        position = 0
        end = len(data)
        while position < end and not self.finished:
            if self._left:
                stop = min(end, position + self._left)
                payload.append(data[position:stop])
                self._left -= stop - position
                self._after_payload = not self._left
                position = stop
                continue
            start = position
            if self._after_payload:
                position += 2
            line_end = data.find(b"\r\n", position)
            if line_end < 0:
                position = start
                break
            size = int(data[position:line_end].split(b";", 1)[0], 16)
            if size < 0:
                raise ValueError("negative chunk size")
            if size == 0:
                # The last chunk: the body ends with the blank line after its optional trailers.
                body_end = data.find(b"\r\n\r\n", line_end)
                if body_end < 0:
                    position = start
                    break
                self.finished = True
                position = body_end + 4
            else:
                self._left = size
                position = line_end + 2
            self._after_payload = False
        self._framing = data[position:]
        return b"".join(payload)


def run_load(target, bodies, concurrency, offsets, progress=None):
    """Send every body with at most ``concurrency`` in flight, each no earlier than its offset.

    ``progress`` (a _benchmark_progress.ProgressWriter) is told of every request as it finishes.
    """
    sessions = []
    local = threading.local()

    def send(body):
        session = getattr(local, "session", None)
        if session is None:
            session = local.session = _StreamingSession(target)
            sessions.append(session)
        outcome = session.post(body)
        if progress is not None:
            progress.request_done(outcome)
        return outcome

    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="openai-load") as pool:
        started = time.perf_counter()
        futures = []
        for body, offset in zip(bodies, offsets):
            delay = started + offset - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            futures.append(pool.submit(send, body))
        outcomes = [future.result() for future in futures]
        duration = time.perf_counter() - started
    for session in sessions:
        session.close()
    return LoadRun(outcomes, duration)


def run_window(target, next_body, concurrency, warmup_s, duration_s, progress=None):
    """Keep ``concurrency`` streams busy (closed loop: each sends its next request as its last ends) for ``warmup_s``
    and then the ``duration_s`` window that is measured; every stream still open at the window's end is cut there.

    ``next_body`` gives the next request body; it is called under a lock. The run's duration is the window's, and
    its requests are marked as sent inside the window or during the warm-up.
    """
    lock = threading.Lock()
    outcomes = []
    started = time.perf_counter()
    window = (started + warmup_s, started + warmup_s + duration_s)

    def stream():
        session = _StreamingSession(target)
        try:
            while time.perf_counter() < window[1]:
                with lock:
                    body = next_body()
                sent = time.perf_counter()
                outcome = session.post(body, window)
                outcome.in_window = sent >= window[0]
                with lock:
                    outcomes.append(outcome)
                if progress is not None:
                    progress.request_done(outcome)
        finally:
            session.close()

    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="openai-window") as pool:
        for future in [pool.submit(stream) for dummy in range(concurrency)]:
            future.result()
    return LoadRun(outcomes, duration_s, window)


# Requests prepared for each window, per stream: a window draws its prompts in order from its own share, so that no
# window is helped by a prefix cache that an earlier one filled; a window that needs more starts its share again.
WINDOW_REQUESTS_PER_STREAM = 64


def window_bodies(bodies):
    """A function that gives the bodies in turn, starting again after the last."""
    position = [0]

    def next_body():
        body = bodies[position[0] % len(bodies)]
        position[0] += 1
        return body

    return next_body


def fetch_text(url, timeout, ssl_context=None):
    """GET a small text document such as /metrics; raises OSError, HTTPException or ValueError."""
    connection, parts = _http_connection(url, timeout, ssl_context)
    try:
        connection.request("GET", (parts.path or "/") + ("?" + parts.query if parts.query else ""))
        response = connection.getresponse()
        body = response.read()
    finally:
        connection.close()
    if response.status != 200:
        raise ValueError("HTTP %d %s" % (response.status, response.reason))
    return body.decode("utf-8", "replace")


def _scrape(metrics_url, timeout, level, warnings, ssl_context=None):
    """The server's samples, or None (with a warning) when its metrics cannot be read."""
    try:
        return parse_samples(fetch_text(metrics_url, timeout, ssl_context))
    except (OSError, http.client.HTTPException, ValueError) as exc:
        warnings.append(
            "Could not read %s (%s: %s); spec-decode acceptance is not reported for concurrency %d, nor are "
            "requests that the benchmark did not send." % (metrics_url, type(exc).__name__, exc, level)
        )
        return None


def _server_reading(samples):
    if samples is None:
        return None, None
    return spec_decode_totals(samples), server_requests(samples)


# How long a reading may wait for the server's queue to empty: its counters are updated a moment after the
# last chunk of a request reaches the client, and a count read too early would lend one level's requests to the
# next one, which would then look contaminated.
SETTLE_SECONDS = 5.0
SETTLE_INTERVAL = 0.2


def _settled_reading(options, level, warnings, ssl_context):
    """(spec-decode totals, server requests), read once the server's queue is empty or SETTLE_SECONDS passed."""
    reading = _server_reading(_scrape(options["metrics_url"], options["timeout"], level, warnings, ssl_context))
    deadline = time.perf_counter() + min(SETTLE_SECONDS, options["timeout"])
    while reading[1] is not None and (reading[1]["running"] or reading[1]["waiting"]) and time.perf_counter() < deadline:
        time.sleep(SETTLE_INTERVAL)
        again = _server_reading(_scrape(options["metrics_url"], options["timeout"], level, [], ssl_context))
        if again[1] is None:
            break
        reading = again
    return reading


def run_benchmark(options, progress=None):
    """Warm up, then measure every concurrency level ``repeats`` times.

    ``options`` holds the module's options (``metrics_url`` and ``burstiness`` resolved). Returns
    the per-level results and warnings; raises BenchmarkAborted when every warm-up request failed.
    ``progress`` (a _benchmark_progress.ProgressWriter) is told of each level and request.
    """
    ssl_context = options.get("ssl_context")
    target = OpenAITarget(options["base_url"], options["endpoint"], options["api_key"], options["timeout"], ssl_context)
    levels = options["concurrency"]
    windowed = options.get("duration_s") is not None
    num_prompts = measured_prompts(options)
    share = [WINDOW_REQUESTS_PER_STREAM * level if windowed else num_prompts for level in levels]
    warmup_count = options["warmup_requests"]
    # Every request gets its own prompt, so no level or repeat is helped by the prefix cache that an
    # earlier one filled; the same seed still gives the same prompts in the same order.
    requests = load_requests(
        options["prompt_set"],
        warmup_count + options["repeats"] * sum(share),
        options["seed"],
        options.get("context_tokens"),
    )
    bodies = [request_body(options["endpoint"], options["model"], request, options, index)
              for index, request in enumerate(requests)]
    if warmup_count:
        if progress is not None:
            progress.level(max(levels), warmup_count)
        warmup = run_load(target, bodies[:warmup_count], max(levels), [0.0] * warmup_count, progress)
        if not any(outcome.success for outcome in warmup.outcomes):
            errors = summarize_errors(warmup.outcomes)
            first = next(iter(errors.values()))["first_message"]
            raise BenchmarkAborted("Every warm-up request failed; the first error was: %s" % first, errors)
    offsets = None if windowed else arrival_offsets(
        num_prompts, options["request_rate"], options["burstiness"], random.Random(options["seed"])
    )
    pending_bodies = iter(bodies[warmup_count:])
    # Names the exact requests, so that a stored result says what it measured and can be rerun; the
    # text itself is never returned, so captured traffic stays on the host that holds the file.
    prompt_sha256 = hashlib.sha256(json.dumps(requests, sort_keys=True).encode("utf-8")).hexdigest()
    results = []
    warnings = []
    for position, level in enumerate(levels):
        if progress is not None:
            # A window's requests are not known ahead: at least one a stream.
            progress.level(level, options["repeats"] * (level if windowed else num_prompts))
        before, requests_before = _settled_reading(options, level, warnings, ssl_context)
        runs = []
        stop = None
        for repeat in range(options["repeats"]):
            run_bodies = [next(pending_bodies) for dummy in range(share[position])]
            if windowed:
                runs.append(run_window(target, window_bodies(run_bodies), level, options.get("warmup_s") or 0.0,
                                       options["duration_s"], progress))
            else:
                runs.append(run_load(target, run_bodies, level, offsets, progress))
            # After the very last run there is nothing left to spare.
            last = repeat == options["repeats"] - 1 and position == len(levels) - 1
            if not last:
                stop = _stop_test(options.get("stop_when_slower"), level, runs)
                if stop is not None:
                    break
        result = summarize_level(level, runs)
        result["prompt_set_sha256"] = prompt_sha256
        after = requests_after = None
        if before is not None or requests_before is not None:
            after, requests_after = _settled_reading(options, level, warnings, ssl_context)
            result.update(spec_decode_delta(before, after))
        # The server's own counters, so that traffic the benchmark did not send shows (contaminated).
        result["server_requests_before"] = requests_before
        result["server_requests_after"] = requests_after
        result["foreign_requests"] = foreign_requests(requests_before, requests_after,
                                                      sum(len(run.outcomes) for run in runs))
        if stop is not None:
            result["stopped_early"] = True
            result["stopped_early_reason"] = "stopped after run %d of %d: %s" % (
                len(runs), options["repeats"], stop["reason"])
            result["stopped_early_test"] = stop
        results.append(result)
        if stop is not None:
            break
    return results, warnings


def _stop_test(stop_when_slower, level, runs):
    """The sequential test's answer when it shows the variant losing at this level, else None."""
    if not stop_when_slower:
        return None
    baseline_runs = stop_when_slower["baseline_runs"].get(level)
    if not baseline_runs:
        return None
    answer = losing(baseline_runs, [run_output_throughput(run) for run in runs],
                    stop_when_slower["keep_when"], stop_when_slower["margin_pct"])
    return answer if answer["losing"] else None
