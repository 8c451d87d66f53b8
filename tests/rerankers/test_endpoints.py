"""Many endpoints (repeated --base-url): least-in-flight routing, failover, per-endpoint accounting.

The endpoints are real server processes on loopback (benchmarks/serial_server.py) that answer one
request at a time in a fixed time and log every request as it arrives and as it is answered.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from acurank_cli.records import Doc, RerankRequest
from acurank_cli.rerankers.backend import build_reranker
from acurank_cli.rerankers.backends.openai_transport import PROXY_VARIABLES, BackendError, base_urls, tls_needed
from conftest import ENV, small_run

SERVER = Path(__file__).resolve().parents[2] / "benchmarks" / "serial_server.py"


class Endpoint:
    """One serial_server.py process: ``url``, ``log`` (recv/done lines), ``kill()``."""

    def __init__(self, tmp_path: Path, name: str, delay: float):
        self.log = tmp_path / f"{name}.log"
        self.proc = subprocess.Popen([sys.executable, str(SERVER), "--delay", str(delay), "--log", str(self.log)],
                                     stdout=subprocess.PIPE, text=True)
        port = int(self.proc.stdout.readline().split()[1])
        self.url = f"http://127.0.0.1:{port}/v1"

    def lines(self, what: str) -> list[str]:
        if not self.log.exists():
            return []
        return [l.split()[1] for l in self.log.read_text().splitlines() if l.startswith(what + " ")]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()


@pytest.fixture
def endpoints(tmp_path):
    started: list[Endpoint] = []

    def start(n: int, delay: float) -> list[Endpoint]:
        new = [Endpoint(tmp_path, f"ep{len(started) + i}", delay) for i in range(n)]
        started.extend(new)
        return new

    yield start
    for ep in started:
        ep.kill()


def _windows(count: int, size: int = 5) -> list[RerankRequest]:
    return [RerankRequest(f"q{k}", f"query {k}", tuple(f"d{k}-{j}" for j in range(size)),
                          tuple(Doc(f"d{k}-{j}", f"passage {j} of query {k}") for j in range(size)))
            for k in range(count)]


def test_base_urls_normalised_deduplicated_in_order():
    assert base_urls(["http://b:1", "http://a:2/v1/", "http://b:1/v1"]) == ("http://b:1/v1", "http://a:2/v1")
    assert base_urls("http://h:9") == ("http://h:9/v1",)
    assert base_urls(None) == ("https://api.openai.com/v1",)


def test_a_certificate_store_is_loaded_only_where_tls_can_be_reached(monkeypatch):
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    assert tls_needed(["http://127.0.0.1:8000/v1", "http://gpu-box:8000/v1"]) is False
    assert tls_needed(["http://127.0.0.1:8000/v1", "https://api.example.com/v1"]) is True
    assert tls_needed(["https://api.openai.com/v1"]) is True
    for name in ("HTTPS_PROXY", "http_proxy", "ALL_PROXY"):
        with monkeypatch.context() as m:
            m.setenv(name, "https://proxy.example:3128")
            assert tls_needed(["http://127.0.0.1:8000/v1"]) is True, name


def test_least_in_flight_spreads_a_batch_evenly(endpoints, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    eps = endpoints(4, 0.2)
    rr = build_reranker("openai:m", base_url=[e.url for e in eps], concurrency=1, retries=2)
    t0 = time.monotonic()
    results = rr.rerank(_windows(16))
    wall = time.monotonic() - t0
    served = [r.endpoint for r in results]
    # 16 windows, 4 endpoints, one request at a time each: 4 apiece, 4 x 0.2 s in all (not 16 x 0.2)
    assert sorted(served.count(e.url) for e in eps) == [4, 4, 4, 4]
    assert 0.8 <= wall < 2.4, wall
    assert [len(e.lines("recv")) for e in eps] == [4, 4, 4, 4]
    assert rr.cache_identity()["base_url"] == "replicas"


def test_a_dead_endpoint_is_set_aside_and_its_requests_served_elsewhere(endpoints, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    live, dead = endpoints(2, 0.01)
    dead.kill()
    rr = build_reranker("openai:m", base_url=[dead.url, live.url], concurrency=2, retries=3, set_aside=30.0)
    results = rr.rerank(_windows(10))
    assert {r.endpoint for r in results} == {live.url}
    assert len(live.lines("recv")) == 10
    assert rr.stats["attempts"] <= 10 + 2  # the dead one was tried at most once per free slot, then set aside


def test_every_endpoint_refusing_fails_at_once_in_one_line(endpoints, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    a, b = endpoints(2, 0.01)
    a.kill()
    b.kill()
    rr = build_reranker("openai:m", base_url=[a.url, b.url], retries=6, set_aside=0.05)
    t0 = time.monotonic()
    with pytest.raises(BackendError, match=r"^openai: cannot connect to any of http://127.*, http://127.* "
                                           r"\(connection refused\): is the server running\?"):
        rr.rerank(_windows(3))
    assert time.monotonic() - t0 < 2.0


def _args(run, sample, urls, cache, out):
    return [sys.executable, "-m", "acurank_cli", "rerank", str(run), "--method", "acurank",
            "--reranker", "openai:fake", *[x for u in urls for x in ("--base-url", u)], "--concurrency", "1",
            "--batch-queries", "3", "--topics", str(sample / "dl19" / "topics.tsv"),
            "--corpus", str(sample / "dl19" / "passages.jsonl.gz"), "--cache", str(cache), "--output", str(out)]


def test_endpoint_killed_mid_run_the_run_finishes_identically_and_pays_once(sample, tmp_path, endpoints):
    """Kill one of two endpoints mid-run: the run finishes on the other, its output equals an
    uninterrupted run's, and paid requests <= distinct prompts + requests in flight at the kill."""
    run, _ = small_run(sample, tmp_path, queries=3, depth=40)
    env = {k: v for k, v in ENV.items() if k != "OPENAI_API_KEY"}
    (ref_ep,) = endpoints(1, 0.0)
    ref = tmp_path / "ref.run"
    subprocess.run(_args(run, sample, [ref_ep.url], tmp_path / "ref.sqlite", ref), check=True, env=env,
                   capture_output=True)

    a, b = endpoints(2, 0.03)
    out, stats = tmp_path / "two.run", tmp_path / "two.stats.jsonl"
    proc = subprocess.Popen(_args(run, sample, [a.url, b.url], tmp_path / "two.sqlite", out), env=env,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and not (len(b.lines("done")) >= 8 and len(b.lines("recv")) > len(b.lines("done"))):
        time.sleep(0.002)  # kill while b holds a request
    assert proc.poll() is None, "the run ended before the kill"
    b.kill()
    in_flight_at_kill = len(b.lines("recv")) - len(b.lines("done"))
    assert in_flight_at_kill >= 1
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert out.read_text() == ref.read_text()
    paid = a.lines("recv") + b.lines("recv")
    distinct = set(paid)
    assert distinct == set(ref_ep.lines("recv"))
    assert len(paid) <= len(distinct) + in_flight_at_kill, (len(paid), len(distinct), in_flight_at_kill)
    served: dict[str, int] = {}
    for line in stats.read_text().splitlines():
        for url, n in json.loads(line)["endpoints"].items():
            served[url] = served.get(url, 0) + n
    assert served[a.url] == len(a.lines("done")) and served[b.url] == len(b.lines("done")) >= 8
    assert "served by" in err
    print(f"paid {len(paid)}, distinct {len(distinct)}, in flight at the kill {in_flight_at_kill}, served {served}")


def test_cli_with_no_server_listening_says_it_once_and_fast(sample, tmp_path, endpoints):
    (dead,) = endpoints(1, 0.0)
    dead.kill()
    run, _ = small_run(sample, tmp_path, queries=2, depth=20)
    env = {k: v for k, v in ENV.items() if k != "OPENAI_API_KEY"}
    t0 = time.monotonic()
    proc = subprocess.run(_args(run, sample, [dead.url], tmp_path / "c.sqlite", tmp_path / "o.run"), env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 2 and time.monotonic() - t0 < 20
    errors = [l for l in proc.stderr.splitlines() if "error" in l]
    assert errors == [f"acurank: error: openai: cannot connect to {dead.url} (connection refused): is the server "
                      # each request in flight is its own call of the backend (the scheduler's lanes): a batch of 1
                      f"running? (0 of 1 windows of this batch finished); 0 finished queries are in {tmp_path / 'o.run'}; "
                      "rerun the same command to resume (finished model calls are in the call cache)"], proc.stderr


def test_one_endpoint_backs_off_two_endpoints_fail_over_at_once(monkeypatch):
    """A 500 from the only endpoint waits the backoff (>= base/2) before the retry; with a second
    endpoint free, the retry goes there at once and the failing one is set aside."""
    from fake_chat_server import FakeServer

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    first_fails = lambda q, attempt: ("status", 500, {}, 0.0) if attempt == 0 else ("ok", 0.0)  # noqa: E731
    with FakeServer(first_fails) as only:
        rr = build_reranker("openai:m", base_url=only.base_url, retries=2, retry_base=0.6, concurrency=1)
        t0 = time.monotonic()
        rr.rerank(_windows(1))
        assert time.monotonic() - t0 >= 0.3 and rr.stats["retries"] == 1
    with FakeServer(lambda q, a: ("status", 500, {}, 0.0)) as bad, FakeServer(lambda q, a: ("ok", 0.0)) as good:
        rr = build_reranker("openai:m", base_url=[bad.base_url, good.base_url], retries=2, retry_base=0.6,
                            concurrency=1, set_aside=30.0)
        t0 = time.monotonic()
        results = rr.rerank(_windows(4))
        assert time.monotonic() - t0 < 0.3
        assert {r.endpoint for r in results} == {good.base_url} and len(bad.bodies) == 1
