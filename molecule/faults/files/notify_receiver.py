"""Stand in for the operator's notification endpoint: keep what each POST says, with its Authorization header.

The fallback test points the node's fallback at it. Each request's JSON body is appended to --out as one line,
as {"authorization": ..., "body": ...}. Exits once it has received --count requests, or after --timeout seconds
(exit 1).
"""

import argparse
import http.server
import json
import sys
import threading


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--address", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args()
    done = threading.Event()
    received = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - the name http.server calls
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"null")
            with open(args.out, "a", encoding="utf-8") as handle:
                handle.write(json.dumps({"authorization": self.headers.get("Authorization"), "body": body}) + "\n")
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()
            received.append(body)
            if len(received) >= args.count:
                done.set()

        def log_message(self, *dummy):
            pass

    server = http.server.HTTPServer((args.address, args.port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    finished = done.wait(args.timeout)
    server.shutdown()
    return 0 if finished else 1


if __name__ == "__main__":
    sys.exit(main())
