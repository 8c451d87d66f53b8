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


def test_serve_keeps_its_keys_and_the_backends_out_of_its_log_and_answers(tmp_path):
    with FakeServer(lambda q, a: ("ok", 0.0)) as fake:
        port = int(fake.base_url.rsplit(":", 1)[1].split("/")[0])
        env = {**ENV, "OPENAI_API_KEY": "ENVSECRET4567"}
        proc = subprocess.Popen([sys.executable, "-m", "acurank_cli", "serve", "--port", "0", "--reranker",
                                 "openai:m", "--base-url", _url(port, "user:PASSWORD123"), "--api-key",
                                 "SERVEKEY8910", "--no-cache", "--method", "sw-1"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        import httpx

        lines = []
        url = None
        deadline = time.monotonic() + 120
        while url is None and time.monotonic() < deadline and proc.poll() is None:
            line = proc.stderr.readline()
            lines.append(line)
            found = re.search(r"on (http://127\.0\.0\.1:\d+)", line)
            url = found.group(1) if found else None
        assert url, "".join(lines)
        head = {"Authorization": "Bearer SERVEKEY8910"}
        answer = httpx.post(url + "/v2/rerank?key=QSECRETKEY1", json={"query": "q", "documents": ["a", "b"]},
                            headers=head, timeout=60)
        refused = httpx.post(url + "/v2/rerank", json={"query": "q", "documents": ["a"]},
                             headers={"Authorization": "Bearer wrong-key-PASSWORD123"}, timeout=60)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert answer.status_code == 200 and refused.status_code == 401, (answer.text, refused.text)
    assert _leaks("".join(lines) + out + err + answer.text + refused.text) == []
