"""`python -m tests.sandbox.noisy_child --port P [--fail]`: a server that writes 32 KiB to
stderr before each answer, as a receiver's access log does over many requests; with
`--fail` it says why on stderr and exits at start (tests/sandbox/test_process.py)."""

import argparse
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

LINE = "x" * 1023 + "\n"


class Noisy(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        sys.stderr.write(LINE * 32)
        sys.stderr.flush()
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--fail", action="store_true")
    args = parser.parse_args()
    if args.fail:
        sys.exit("noisy_child: told to fail at start")
    HTTPServer(("127.0.0.1", args.port), Noisy).serve_forever()
