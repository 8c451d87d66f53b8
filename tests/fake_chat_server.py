"""A loopback chat-completions server the OpenAI backend's tests (and the CLI's, the support matrix's) talk to:
scripted replies, in-flight counting, the bodies and keys it was sent."""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeServer:
    """A loopback chat-completions server. ``script(query, attempt) -> action`` decides each reply.

    Actions: ``("ok", delay)``, ``("status", code, headers, delay)``, ``("garbage", delay)``.
    Replies rank the passages in reverse (``[n] > ... > [1]``) with usage 100 / 7.
    """

    def __init__(self, script, respond=None):
        self.script = script
        #: respond(n, body) -> (status, payload): the reply to an "ok" action instead of the reversed ranking
        self.respond = respond
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.attempts: dict[str, list[float]] = {}
        self.auth: list[str | None] = []
        self.bodies: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                user = body["messages"][-1]["content"]
                said = re.search(r"search query: (.*?)\.\n", user)  # the published prompt's; a template's: its opening
                query = said.group(1) if said else user[:80]
                n = len(re.findall(r"^\[(?:\d+|[A-Z])\] ", user, flags=re.MULTILINE))
                with server.lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                    tries = server.attempts.setdefault(query, [])
                    tries.append(time.monotonic())
                    attempt = len(tries) - 1
                    server.auth.append(self.headers.get("Authorization"))
                    server.bodies.append(body)
                try:
                    action = server.script(query, attempt)
                    time.sleep(action[-1])
                    if action[0] == "ok" and server.respond is not None:
                        code, payload = server.respond(n, body)
                        self._send(code, json.dumps(payload).encode(), {})
                    elif action[0] == "ok" and body.get("logprobs"):
                        self._send(200, json.dumps(logits_reply(n, body["top_logprobs"])).encode(), {})
                    elif action[0] == "ok":
                        answer = " > ".join(f"[{i}]" for i in range(n, 0, -1))
                        payload = {
                            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}}],
                            "usage": {"prompt_tokens": 100, "completion_tokens": 7},
                        }
                        self._send(200, json.dumps(payload).encode(), {})
                    elif action[0] == "garbage":
                        self._send(200, b"<html>not json</html>", {})
                    else:
                        _, code, headers, _ = action
                        self._send(code, json.dumps({"error": {"message": f"scripted {code}"}}).encode(), headers)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    with server.lock:
                        server.in_flight -= 1

            def _send(self, code, data, headers):
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def letter_logprob(i: int, n: int) -> float:
    """The scripted first-token log-probability of the window's i-th letter: the last letter is the likeliest."""
    return -0.1 * (n - i)


def logits_reply(n: int, top: int) -> dict:
    """A one-token chat completion with ``logprobs``: every letter of the window (the first also as " A", one
    nat less likely) and one token that is no letter, best first, at most ``min(top, 20)`` of them (OpenAI's cap)."""
    alts = [(chr(65 + i), letter_logprob(i, n)) for i in range(n)] + [(" A", letter_logprob(0, n) - 1.0), ("[", -0.05)]
    alts.sort(key=lambda a: -a[1])
    alts = alts[: min(top, 20)]
    first = {"token": alts[0][0], "logprob": alts[0][1], "top_logprobs": [{"token": t, "logprob": lp} for t, lp in alts]}
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": alts[0][0]},
                         "logprobs": {"content": [first]}}], "usage": {"prompt_tokens": 100, "completion_tokens": 1}}
