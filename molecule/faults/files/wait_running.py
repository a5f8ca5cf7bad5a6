"""Wait until a vLLM server has at least COUNT requests in flight (vllm:num_requests_running + waiting).

The drain test's before-hook runs it between starting the client's streams and taking the node out of
service, so that the drain always begins with every stream in flight, on a slow CPU or a fast one.
Exits 1 when the count is not reached within --timeout seconds.
"""

import argparse
import sys
import time
import urllib.request


def in_flight(url):
    text = urllib.request.urlopen(url, timeout=5).read().decode("utf-8", "replace")
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(("vllm:num_requests_running", "vllm:num_requests_waiting")))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True, help="the server's /metrics")
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--timeout", type=float, default=60)
    args = parser.parse_args()
    deadline = time.monotonic() + args.timeout
    seen = 0
    while time.monotonic() < deadline:
        seen = in_flight(args.url)
        if seen >= args.count:
            print("%d requests in flight" % seen)
            return 0
        time.sleep(0.1)
    print("only %d of %d requests in flight after %.0f s" % (seen, args.count, args.timeout), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
