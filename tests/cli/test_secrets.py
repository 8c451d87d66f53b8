"""Secrets are never printed or written: a key in a --base-url query string, a user:password in it, a token given as
its user, OPENAI_API_KEY and serve's --api-key. A succeeding and a failing command with secrets in every position;
every stream and every file written (run, meta, stats, trace, prompt log, call cache) is searched for each secret."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import ENV, acurank
from fake_chat_server import FakeServer

SECRETS = ("QSECRETKEY1", "PASSWORD123", "URLTOKEN999", "ENVSECRET4567", "SERVEKEY8910")


def _leaks(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


def _files(folder) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _url(port: int, userinfo: str) -> str:
    return f"http://{userinfo}@127.0.0.1:{port}/v1?api_key=QSECRETKEY1&token=URLTOKEN999"


@pytest.mark.parametrize("userinfo", ["user:PASSWORD123", "URLTOKEN999"])
def test_no_secret_in_any_stream_or_file(tmp_path, monkeypatch, userinfo):
    monkeypatch.setenv("OPENAI_API_KEY", "ENVSECRET4567")
    common = ("--method", "acurank", "--qids", "264014", "--depth", "30", "--overwrite", "--stats",
              tmp_path / "x.stats.jsonl", "--trace", tmp_path / "x.trace.jsonl", "--log-prompts", tmp_path / "p.jsonl",
              "--cache", tmp_path / "calls.sqlite", "--retries", "0", "--timeout", "5")
    with FakeServer(lambda q, a: ("ok", 0.0)) as fake:
        port = int(fake.base_url.rsplit(":", 1)[1].split("/")[0])
        ok = acurank("rerank", "sample_runs/dl19/bm25.run", "--reranker", "openai:m", "--base-url",
                     _url(port, userinfo), "-o", tmp_path / "x.run", *common)
    assert ok.returncode == 0 and (tmp_path / "x.run.meta.json").exists(), ok.stderr
    assert "--base-url" in (tmp_path / "x.run.meta.json").read_text()  # the command line is recorded, redacted
    assert fake.bodies, "the server was asked"
    failed = acurank("rerank", "sample_runs/dl19/bm25.run", "--reranker", "openai:m", "--base-url",
                     _url(9, userinfo), "-o", tmp_path / "y.run", *common, check=False)
    assert failed.returncode != 0 and "cannot connect" in failed.stderr and "***" in failed.stderr, failed.stderr
    bad = acurank("rerank", "sample_runs/dl19/bm25.run", "--reranker", "openai:m", "--base-url",
                  f"ftp://{userinfo}@127.0.0.1:9/v1?key=QSECRETKEY1", "-o", tmp_path / "z.run", check=False)
    assert bad.returncode == 2 and "--base-url" in bad.stderr
    streams = ok.stdout + ok.stderr + failed.stdout + failed.stderr + bad.stdout + bad.stderr
    assert _leaks(streams) == []
    for path, data in _files(tmp_path).items():
        assert _leaks(data.decode("latin-1")) == [], path


def _serve(env: dict, *args: str) -> tuple[subprocess.Popen, str, list[str]]:
    """``acurank serve ARGS`` on a free loopback port: the process, its URL and the lines it said while starting."""
    proc = subprocess.Popen([sys.executable, "-m", "acurank_cli", "serve", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines, url = [], None
    deadline = time.monotonic() + 120
    while url is None and time.monotonic() < deadline and proc.poll() is None:
        line = proc.stderr.readline()
        lines.append(line)
        found = re.search(r"on (http://127\.0\.0\.1:\d+)", line)
        url = found.group(1) if found else None
    assert url, "".join(lines)
    return proc, url, lines


def test_serve_keeps_its_keys_and_the_backends_out_of_its_log_and_answers(tmp_path):
    with FakeServer(lambda q, a: ("ok", 0.0)) as fake:
        port = int(fake.base_url.rsplit(":", 1)[1].split("/")[0])
        env = {**ENV, "OPENAI_API_KEY": "ENVSECRET4567"}
        proc, url, lines = _serve(env, "--reranker", "openai:m", "--base-url", _url(port, "user:PASSWORD123"),
                                  "--api-key", "SERVEKEY8910", "--no-cache", "--method", "sw-1")
        import httpx

        head = {"Authorization": "Bearer SERVEKEY8910"}
        answer = httpx.post(url + "/v2/rerank?key=QSECRETKEY1", json={"query": "q", "documents": ["a", "b"]},
                            headers=head, timeout=60)
        refused = httpx.post(url + "/v2/rerank", json={"query": "q", "documents": ["a"]},
                             headers={"Authorization": "Bearer wrong-key-PASSWORD123"}, timeout=60)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert answer.status_code == 200 and refused.status_code == 401, (answer.text, refused.text)
    assert _leaks("".join(lines) + out + err + answer.text + refused.text) == []


# -- servers that echo what they were sent (issue 71): the path with its query, the Authorization header ----------

ECHOED = ("LEAKPASS4444", "LEAKME98765", "CLIENTTOK777", "ENVSECRET4567")
BASIC = "Ym9iOkxFQUtQQVNTNDQ0NA"  # base64 of bob:LEAKPASS4444, as an Authorization: Basic header carries it


def _echo_leaks(text: str) -> list[str]:
    from urllib.parse import quote

    return [s for s in (*ECHOED, BASIC) if s in text or quote(s) in text]


class EchoServer:
    """A loopback chat-completions server that echoes the path it was called on and the Authorization header it was
    sent: in its answer (``ok``), in a 400 (``fail``) or in a 401 (``refuse``)."""

    def __init__(self, mode: str):
        import json
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                n = len(re.findall(r"^\[\d+\] ", body["messages"][-1]["content"], flags=re.MULTILINE))
                echo = f"called at {self.path} with Authorization: {self.headers.get('Authorization')}"
                if mode == "ok":
                    ranking = " > ".join(f"[{i}]" for i in range(n, 0, -1))
                    code, payload = 200, {"choices": [{"index": 0, "message": {"role": "assistant",
                                                                              "content": f"{ranking} ({echo})"}}],
                                          "usage": {"prompt_tokens": 100, "completion_tokens": 7}}
                else:
                    code = 400 if mode == "fail" else 401
                    payload = {"error": {"message": f"model not available: {echo}"}}
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    def base_url(self, param: str = "api_key") -> str:
        return f"http://bob:LEAKPASS4444@127.0.0.1:{self.httpd.server_address[1]}/v1?{param}=LEAKME98765"


@pytest.mark.parametrize("mode", ["ok", "fail", "refuse"])
@pytest.mark.parametrize("key", [None, "ENVSECRET4567"])
def test_what_a_server_echoes_back_is_never_printed_or_written(tmp_path, monkeypatch, mode, key):
    """The key in the base URL's query, the password in its user information (and the Basic header made of it), and
    OPENAI_API_KEY (a Bearer header), echoed back by the server in its answer, a 400 or a 401: none of them in any
    stream or file, for a run that succeeds, one that fails and one refused."""
    if key:
        monkeypatch.setenv("OPENAI_API_KEY", key)
    else:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with EchoServer(mode) as server:
        ran = acurank("rerank", "sample_runs/dl19/bm25.run", "--reranker", "openai:m", "--base-url", server.base_url(),
                      "--method", "acurank", "--qids", "264014", "--depth", "30", "-o", tmp_path / "x.run",
                      "--stats", tmp_path / "x.stats.jsonl", "--trace", tmp_path / "x.trace.jsonl",
                      "--log-prompts", tmp_path / "p.jsonl", "--cache", tmp_path / "calls.sqlite", "--retries", "0",
                      "--timeout", "5", check=False)
    assert (ran.returncode == 0) == (mode == "ok"), ran.stderr
    if mode != "ok":  # the server's words are shown, its echo of the secrets masked
        assert "model not available: called at /v1/chat/completions" in ran.stderr and "***" in ran.stderr
    else:
        log = (tmp_path / "p.jsonl").read_text()
        assert "called at /v1/chat/completions" in log and "Authorization: " in log  # the answer kept, masked
    assert _echo_leaks(ran.stdout + ran.stderr) == []
    for path, data in _files(tmp_path).items():
        assert _echo_leaks(data.decode("latin-1")) == [], path


@pytest.mark.parametrize("mode", ["ok", "fail"])
def test_serve_prints_no_secret_a_client_or_its_backend_sends(mode):
    """serve's log, its answers and its errors (a backend's 400 that echoes the backend URL's ?token= and its Basic
    header; a client that sends a token in the query): no secret."""
    import httpx

    with EchoServer(mode) as backend:
        proc, url, lines = _serve({k: v for k, v in ENV.items() if k != "OPENAI_API_KEY"}, "--reranker", "openai:m",
                                  "--base-url", backend.base_url("token"), "--no-cache", "--method", "sw-1",
                                  "--retries", "0")
        answers = [httpx.post(url + path, json={"query": "q", "documents": ["a", "b"]}, timeout=60)
                   for path in ("/v2/rerank?token=CLIENTTOK777", "/v1/rerank?x=1&access_token=CLIENTTOK777")]
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert [a.status_code for a in answers] == ([200, 200] if mode == "ok" else [502, 502]), [a.text for a in answers]
    if mode == "fail":  # the backend's words are logged (the client is told to read the log), its echo masked
        assert "model not available: called at /v1/chat/completions?token=***" in err
    assert _echo_leaks("".join(lines) + out + err + "".join(a.text for a in answers)) == []


def test_redaction_by_value_and_by_name_in_any_text():
    """The secrets of a URL given to a command are masked wherever they appear later, in each encoding a server may
    echo them in; a secret-named query value is masked in a path without its URL (a secret nobody gave too)."""
    from acurank_cli import redaction

    redaction.remember_given(["--base-url", "http://ann:PW%2Fsl4sh99@127.0.0.1:1/v1?token=TOKVALUE888"], {})
    echoed = ("at /v1/chat/completions?token=TOKVALUE888; Basic YW5uOlBXL3NsNHNoOTk=; PW/sl4sh99; PW%2Fsl4sh99; "
              "TOKVALUE888")
    assert redaction.text(echoed) == "at /v1/chat/completions?token=***; Basic ***; ***; ***; ***"
    assert redaction.text('"GET /v2/rerank?x=1&access_token=zz9&k=2 HTTP/1.1"') == \
        '"GET /v2/rerank?x=1&access_token=***&k=2 HTTP/1.1"'
    assert redaction.text("a passage about keys?and=locks") == "a passage about keys?and=locks"


def test_a_secret_variable_set_changed_or_removed_mid_process_is_masked_as_it_is_now(monkeypatch):
    """Masking reads the environment's secret variables on every line (their names matched once for each set of
    names): one added, changed or removed after lines were masked is masked, or no longer, from the next line on;
    a variable whose name says nothing of secrets is left alone."""
    from acurank_cli import redaction

    monkeypatch.setenv("ACME_API_KEY", "FIRSTSECRET001")
    monkeypatch.setenv("ACME_COLOUR", "PLAINVALUE0001")
    assert redaction.text("FIRSTSECRET001 PLAINVALUE0001") == "*** PLAINVALUE0001"
    monkeypatch.setenv("ACME_API_KEY", "SECONDSECRET02")  # changed: the same names, another value
    assert redaction.text("FIRSTSECRET001 SECONDSECRET02") == "FIRSTSECRET001 ***"
    monkeypatch.setenv("LATE_TOKEN", "LATESECRET0003")  # added
    monkeypatch.delenv("ACME_COLOUR")  # and one removed: the set of names is another
    assert redaction.text("LATESECRET0003 SECONDSECRET02") == "*** ***"
    monkeypatch.delenv("LATE_TOKEN")
    assert redaction.text("LATESECRET0003") == "LATESECRET0003"
