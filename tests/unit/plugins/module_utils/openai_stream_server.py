# Copyright (c) 2025, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A scripted OpenAI streaming server on 127.0.0.1 for the load generator's tests.

Timing is made exact without real sleeps: the server moves a virtual clock (patched into the load
generator as ``time.perf_counter``) to each chunk's time before sending it, then waits until the
client has read the clock once more, which the client does exactly once per network read. Every
chunk therefore arrives alone and is stamped with the time the script gave it.
"""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HANDSHAKE_TIMEOUT = 10.0


class VirtualClock:
    """``perf_counter`` for the code under test; the test thread's own reads are not counted."""

    def __init__(self):
        self.now = 0.0
        self._owner = threading.current_thread()
        self._client_reads = 0
        self._changed = threading.Condition()

    def perf_counter(self):
        with self._changed:
            if threading.current_thread() is not self._owner:
                self._client_reads += 1
                self._changed.notify_all()
            return self.now

    def sleep(self, seconds):
        with self._changed:
            self.now += seconds

    def reads(self):
        with self._changed:
            return self._client_reads

    def wait_for_read_after(self, mark):
        with self._changed:
            if not self._changed.wait_for(lambda: self._client_reads > mark, HANDSHAKE_TIMEOUT):
                raise AssertionError("the client did not read the clock after a chunk")


class Stream:
    """What the server does with one completion request.

    ``chunks`` lists (seconds after the request arrived, tokens in the chunk). ``status`` other
    than 200 sends ``error_body`` instead of a stream. ``cut_after`` drops the connection after that
    many chunks; ``error_event`` is sent after the chunks; ``usage`` and ``done`` can be left out.
    ``stall`` sends headers and then nothing; ``hold_until`` waits until that many requests have been in
    flight at once before answering. ``framing`` other than "per_event" sends the whole body at once,
    either unchunked and closing the connection ("close_delimited") or re-cut into chunks of that many
    bytes, with chunk extensions and a trailer (an int). ``finish_reason`` ends the last chunk's choice,
    as vLLM's compact JSON does.
    """

    def __init__(self, chunks=(), prompt_tokens=7, status=200, error_body=None, cut_after=None,
                 error_event=None, usage=True, done=True, stall=False, chat=False, usage_spacing=False,
                 hold_until=None, framing="per_event", finish_reason=None):
        self.chunks = list(chunks)
        self.prompt_tokens = prompt_tokens
        self.status = status
        self.error_body = error_body
        self.cut_after = cut_after
        self.error_event = error_event
        self.usage = usage
        self.done = done
        self.stall = stall
        self.chat = chat
        self.usage_spacing = usage_spacing
        self.hold_until = hold_until
        self.framing = framing
        self.finish_reason = finish_reason


def token_event(index, tokens, chat, finish_reason=None, prompt_tokens=None):
    """One token chunk; with prompt_tokens, carrying the usage so far, as vLLM does for a request that asked for
    stream_options.continuous_usage_stats: completion_tokens counts every token streamed so far, this chunk's
    included (cumulative in chat streams too since vLLM PR 9357; vLLM issue 5708 gives the reason, several tokens a
    chunk under speculative decoding)."""
    text = "".join(" tok%d\"q\"" % (index + offset) for offset in range(tokens))
    if chat:
        choice = {"index": 0, "delta": {"content": text}, "finish_reason": finish_reason}
        body = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "tiny", "choices": [choice]}
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
        body = {"id": "cmpl-1", "object": "text_completion", "model": "tiny", "choices": [choice]}
    if prompt_tokens is not None:
        body["usage"] = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + index + tokens,
                         "completion_tokens": index + tokens}
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


def usage_event(prompt_tokens, completion_tokens, spacing):
    body = {
        "id": "cmpl-1",
        "model": "tiny",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
    separators = (", ", ": ") if spacing else (",", ":")
    return b"data: " + json.dumps(body, separators=separators).encode() + b"\n\n"


class ScriptedServer:
    """Serves ``streams`` in order to POSTs, and ``metrics_pages`` in order to GET /metrics."""

    def __init__(self, streams=(), clock=None, metrics_pages=(), close_after_each=False):
        self.streams = list(streams)
        self.clock = clock
        self.metrics_pages = list(metrics_pages)
        self.close_after_each = close_after_each
        self.requests = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Condition()
        self._release = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,), daemon=True)

    @property
    def base_url(self):
        return "http://127.0.0.1:%d" % self._httpd.server_address[1]

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc_info):
        self._release.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def _next_stream(self, body):
        with self._lock:
            self.requests.append(body)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self._lock.notify_all()
            return self.streams.pop(0)

    def _hold_until(self, count):
        with self._lock:
            if not self._lock.wait_for(lambda: self.max_in_flight >= count, HANDSHAKE_TIMEOUT):
                raise AssertionError("never had %d requests in flight" % count)

    def _finished(self):
        with self._lock:
            self.in_flight -= 1

    def _handler_class(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Like uvicorn: each chunk leaves at once instead of waiting for the last one's ACK.
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def do_GET(self):
                page = server.metrics_pages.pop(0) if server.metrics_pages else None
                if page is None:
                    self.send_error(404)
                    return
                data = page.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                length = int(self.headers["Content-Length"])
                body = json.loads(self.rfile.read(length))
                body["_authorization"] = self.headers.get("Authorization")
                body["_path"] = self.path
                stream = server._next_stream(body)
                continuous = (body.get("stream_options") or {}).get("continuous_usage_stats")
                try:
                    self._answer(stream, continuous)
                finally:
                    server._finished()
                if server.close_after_each:
                    self.close_connection = True

            def _answer(self, stream, continuous=False):
                if stream.hold_until:
                    server._hold_until(stream.hold_until)
                if stream.status != 200:
                    data = json.dumps(stream.error_body).encode()
                    self.send_response(stream.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                if stream.framing != "per_event":
                    self._answer_at_once(stream)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                if stream.stall:
                    server._release.wait()
                    return
                clock = server.clock
                started = clock.now if clock else 0.0
                produced = 0
                for index, (offset, tokens) in enumerate(stream.chunks):
                    if index == stream.cut_after:
                        self.connection.shutdown(socket.SHUT_RDWR)
                        self.close_connection = True
                        return
                    mark = clock.reads() if clock else None
                    if clock:
                        clock.now = started + offset
                    last = index == len(stream.chunks) - 1
                    self._chunk(token_event(produced, tokens, stream.chat, stream.finish_reason if last else None,
                                            stream.prompt_tokens if continuous and stream.usage else None))
                    produced += tokens
                    if clock:
                        clock.wait_for_read_after(mark)
                tail = self._tail(stream, produced)
                if tail:
                    self._chunk(tail)
                self.wfile.write(b"0\r\n\r\n")

            @staticmethod
            def _tail(stream, produced):
                tail = b""
                if stream.error_event is not None:
                    tail += b"data: " + json.dumps(stream.error_event).encode() + b"\n\n"
                if stream.usage:
                    tail += usage_event(stream.prompt_tokens, produced, stream.usage_spacing)
                if stream.done:
                    tail += b"data: [DONE]\n\n"
                return tail

            def _answer_at_once(self, stream):
                events = b""
                produced = 0
                for dummy, tokens in stream.chunks:
                    events += token_event(produced, tokens, stream.chat)
                    produced += tokens
                events += self._tail(stream, produced)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                if stream.framing == "close_delimited":
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(events)
                    self.close_connection = True
                    return
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("Trailer", "X-Checksum")
                self.end_headers()
                size = stream.framing
                body = b"".join(
                    b"%x;piece=%d\r\n%s\r\n" % (len(events[start:start + size]), start, events[start:start + size])
                    for start in range(0, len(events), size)
                )
                self.wfile.write(body + b"0\r\nX-Checksum: 1\r\n\r\n")

            def _chunk(self, data):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

        return Handler


def refused_url():
    """A loopback URL on which nothing listens."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return "http://127.0.0.1:%d" % port
