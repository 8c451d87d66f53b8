"""A loopback OpenAI-compatible chat server that answers ONE request at a time in a fixed time.

It stands for one GPU replica without batching: requests queue, each takes ``--delay`` seconds.
The answer ranks the window's passages by the sha1 of their text (deterministic, content-dependent).
Every request is logged when it arrives (``recv``) and when it is answered (``done``) with the
sha256 of its messages, flushed at once, so a test can count paid requests and distinct prompts
even after the server is killed.

    python benchmarks/serial_server.py --delay 0.2 --log paid.log   # prints "port N" on stdout
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PASSAGE = re.compile(r"^\[(\d+)\] (.*)$", flags=re.MULTILINE)


def answer(user: str) -> tuple[str, int]:
    """``[i] > [j] > ...``: the passages ordered by the sha1 of their text."""
    passages = PASSAGE.findall(user)
    order = sorted(passages, key=lambda p: hashlib.sha1(p[1].encode()).hexdigest())
    return " > ".join(f"[{i}]" for i, _ in order), len(passages)


def serve(delay: float, log_path: str | None, port: int = 0) -> ThreadingHTTPServer:
    busy = threading.Lock()  # one request at a time
    log_lock = threading.Lock()
    log = open(log_path, "a", encoding="utf-8") if log_path else None

    def note(what: str, digest: str) -> None:
        if log is not None:
            with log_lock:
                log.write(f"{what} {digest}\n")
                log.flush()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            digest = hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).hexdigest()
            note("recv", digest)
            content, n = answer(body["messages"][-1]["content"])
            with busy:
                time.sleep(delay)
            data = json.dumps({
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": 1000, "completion_tokens": 4 * n},
            }).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            note("done", digest)

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 64

    return Server(("127.0.0.1", port), Handler)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--delay", type=float, default=0.2)
    ap.add_argument("--log", default=None)
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    httpd = serve(args.delay, args.log, args.port)
    print(f"port {httpd.server_address[1]}", flush=True)
    sys.stdout.close()
    httpd.serve_forever(poll_interval=0.05)


if __name__ == "__main__":
    main()
