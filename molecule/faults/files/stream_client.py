"""Send long completions the moment a go-file appears, finish them, and record how each one ended.

It stands in for production traffic behind a load balancer during a switch. The switch's before-hook
creates the go-file, waits until these requests stream, and only then takes the node out of service:
so requests are running when the drain begins, while the two cores of the mock node are not kept busy
(starving the switch's own SSH sessions) before that. Each request is written to the output as one
JSON record: when it was sent and finished (wall clock), and whether it completed.
"""

import argparse
import http.client
import json
import os
import threading
import time


def stream_once(host, port, model, max_tokens, timeout):
    body = json.dumps({"model": model, "prompt": "Write a long story about a lighthouse keeper.", "stream": True,
                       "max_tokens": max_tokens, "ignore_eos": True, "temperature": 0}).encode()
    connection = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        connection.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        if response.status != 200:
            return "HTTP %d" % response.status
        data = response.read().decode("utf-8", "replace")
        return None if "data: [DONE]" in data else "the stream ended before [DONE]"
    except (OSError, http.client.HTTPException) as exc:
        return "%s: %s" % (type(exc).__name__, exc)
    finally:
        connection.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--go", required=True, help="send the requests when this file appears")
    parser.add_argument("--out", required=True)
    parser.add_argument("--streams", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--give-up-after", type=float, default=900)
    args = parser.parse_args()
    records = []
    lock = threading.Lock()
    started = time.monotonic()
    while not os.path.exists(args.go) and time.monotonic() - started < args.give_up_after:
        time.sleep(0.1)

    def send():
        sent = time.time()
        error = stream_once(args.host, args.port, args.model, args.max_tokens, timeout=args.give_up_after)
        with lock:
            records.append({"sent": sent, "finished": time.time(), "ok": error is None, "error": error})

    threads = [threading.Thread(target=send) for dummy in range(args.streams)] if os.path.exists(args.go) else []
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump({"records": records}, handle)


if __name__ == "__main__":
    main()
