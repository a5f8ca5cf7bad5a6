"""A client that streams completions through the load balancer while a fleet switches.

    stream_client.py --url http://127.77.0.2:18080 --model tiny-llama --stop-file /tmp/stop --out result.json

Each of --concurrency workers sends one streamed completion after another, waiting --pause seconds after each
answer, until the stop file appears; then those in flight finish. A request fails when the answer is not 200,
the connection breaks, or the stream ends without its [DONE]. The longest gap in service is the longest time
during which no worker received anything (a token, or the end of a stream) while at least one request was
waiting, so a pause is no gap. It writes the figures as JSON and
prints them in one line.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import requests


class Tally:
    """What every worker saw, under one lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sent = 0
        self.completed = 0
        self.failures: Counter[str] = Counter()
        self.waiting = 0
        self.last_event = time.monotonic()
        self.longest_gap = 0.0
        self.longest_gap_ended_at = None

    def heard(self) -> None:
        with self.lock:
            now = time.monotonic()
            if self.waiting:
                gap = now - self.last_event
                if gap > self.longest_gap:
                    self.longest_gap, self.longest_gap_ended_at = gap, time.time()
            self.last_event = now

    def start(self) -> None:
        with self.lock:
            if not self.waiting:
                # A gap counts only while someone waits: idle time between requests is not a gap in service.
                self.last_event = time.monotonic()
            self.waiting += 1
            self.sent += 1

    def finish(self, failure: str | None) -> None:
        with self.lock:
            self.waiting -= 1
            if failure is None:
                self.completed += 1
            else:
                self.failures[failure] += 1


def one_request(session: requests.Session, url: str, body: dict, timeout: float, tally: Tally) -> None:
    tally.start()
    failure = None
    try:
        with session.post(url + '/v1/completions', json=body, stream=True, timeout=timeout) as answer:
            if answer.status_code != 200:
                failure = f'HTTP {answer.status_code}'
            else:
                done = False
                for line in answer.iter_lines():
                    tally.heard()
                    if line.strip() == b'data: [DONE]':
                        done = True
                if not done:
                    failure = 'stream ended without [DONE]'
    except requests.RequestException as error:
        failure = type(error).__name__
    tally.heard()
    tally.finish(failure)


def worker(args: argparse.Namespace, number: int, tally: Tally, stop: threading.Event) -> None:
    session = requests.Session()
    sequence = 0
    while not stop.is_set():
        sequence += 1
        body = {'model': args.model, 'max_tokens': args.max_tokens, 'stream': True, 'temperature': 0,
                'prompt': f'Worker {number}, request {sequence}: count from one to twenty in words.'}
        one_request(session, args.url, body, args.timeout, tally)
        stop.wait(args.pause)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--url', required=True)
    parser.add_argument('--model', required=True)
    parser.add_argument('--stop-file', required=True, type=Path)
    parser.add_argument('--out', required=True, type=Path)
    parser.add_argument('--concurrency', type=int, default=2)
    parser.add_argument('--max-tokens', type=int, default=24)
    parser.add_argument('--pause', type=float, default=0.0,
                        help='seconds each worker waits after an answer before its next request')
    parser.add_argument('--timeout', type=float, default=120.0)
    parser.add_argument('--max-seconds', type=float, default=3600.0, help='stop by itself after this long')
    args = parser.parse_args(argv[1:])
    tally, stop = Tally(), threading.Event()
    started = time.monotonic()
    workers = [threading.Thread(target=worker, args=(args, number, tally, stop), daemon=True)
               for number in range(1, args.concurrency + 1)]
    for thread in workers:
        thread.start()
    while not args.stop_file.exists() and time.monotonic() - started < args.max_seconds:
        time.sleep(0.2)
    stop.set()
    for thread in workers:
        thread.join(args.timeout)
    with tally.lock:
        figures = {
            'sent': tally.sent, 'completed': tally.completed, 'failed': sum(tally.failures.values()),
            'failures': dict(tally.failures), 'longest_gap_seconds': round(tally.longest_gap, 2),
            'longest_gap_ended_at': tally.longest_gap_ended_at, 'seconds': round(time.monotonic() - started, 1),
            'stopped_by': 'stop file' if args.stop_file.exists() else 'max seconds',
        }
    args.out.write_text(json.dumps(figures, indent=2) + '\n', encoding='utf-8')
    print(f"failed client requests during a fleet-wide variant rollout: {figures['failed']} "
          f"(sent {figures['sent']}, completed {figures['completed']}, longest gap in service "
          f"{figures['longest_gap_seconds']:.1f} s, over {figures['seconds']:.0f} s)")
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
