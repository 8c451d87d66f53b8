"""The SQLite call cache: hits are never sent again, misses go as one batch, nothing secret is stored."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

from acurank_cli.cache import CachedReranker
from acurank_cli.records import RerankRequest, RerankResult

from test_cli import ENV, small_run


class CountingBackend:
    """A deterministic backend that records every batch it executes (reverses the window)."""

    name = "counting"
    needs_texts = True

    def __init__(self):
        self.batches: list[int] = []

    def cache_identity(self):
        return {"backend": "counting", "model": "m", "temperature": 0}

    def prompt_key(self, request):
        return request.query + "\n" + "\n".join(request.texts)

    def rerank(self, requests):
        self.batches.append(len(requests))
        return [RerankResult(tuple(reversed(range(len(r.docids)))), 10, 3, 0.5, "ok", False, "[2] > [1]", "counting")
                for r in requests]


def test_cache_hits_and_batched_misses(tmp_path):
    inner = CountingBackend()
    cache = CachedReranker(inner, tmp_path / "c.sqlite")
    reqs = [RerankRequest("1", "q", ("a", "b"), ("ta", "tb")), RerankRequest("1", "q", ("c", "d"), ("tc", "td"))]
    first = cache.rerank(reqs)
    assert inner.batches == [2] and not any(r.cached for r in first)
    again = cache.rerank(reqs + [RerankRequest("2", "q2", ("a", "b"), ("ta", "tb"))])
    assert inner.batches == [2, 1]  # only the new prompt is sent
    assert [r.cached for r in again] == [True, True, False]
    assert again[0].order == first[0].order and again[0].input_tokens == 10 and again[0].raw == "[2] > [1]"
    cache.close()
    reopened = CachedReranker(CountingBackend(), tmp_path / "c.sqlite")
    assert all(r.cached for r in reopened.rerank(reqs))


def test_identity_changes_the_key(tmp_path):
    a, b = CountingBackend(), CountingBackend()
    b.cache_identity = lambda: {"backend": "counting", "model": "other"}
    req = RerankRequest("1", "q", ("a", "b"), ("ta", "tb"))
    assert CachedReranker(a, tmp_path / "x.sqlite").key(req) != CachedReranker(b, tmp_path / "y.sqlite").key(req)


def test_repeated_command_makes_zero_model_calls(sample, tmp_path):
    run, _ = small_run(sample, tmp_path, queries=2, depth=20)
    cache = tmp_path / "calls.sqlite"
    args = [sys.executable, "-m", "acurank_cli", "rerank", str(run), "--method", "acurank-9", "--reranker", "minilm",
            "--topics", str(sample / "dl19" / "topics.tsv"), "--corpus", str(sample / "dl19" / "passages.jsonl.gz"),
            "--cache", str(cache)]
    env = {**ENV, "OPENAI_API_KEY": "sk-secret-should-not-be-stored"}
    first = subprocess.run(args, capture_output=True, text=True, env=env, check=True)
    second = subprocess.run(args, capture_output=True, text=True, env=env, check=True)
    assert first.stdout == second.stdout
    assert ", 0 cached" in first.stderr
    assert " 0 to the model" in second.stderr
    rows = sqlite3.connect(cache).execute("SELECT identity, raw FROM calls").fetchall()
    assert rows and all("sk-secret" not in identity + raw for identity, raw in rows)
    assert b"sk-secret" not in cache.read_bytes()


def test_finished_calls_are_kept_when_a_batch_fails(tmp_path):
    class Failing(CountingBackend):
        def rerank(self, requests):
            done = super().rerank(requests[:1])
            exc = RuntimeError("retries exhausted")
            exc.results = done + [None] * (len(requests) - 1)
            raise exc

    reqs = [RerankRequest("1", "q", ("a", "b"), ("ta", "tb")), RerankRequest("1", "q", ("c", "d"), ("tc", "td"))]
    cache = CachedReranker(Failing(), tmp_path / "c.sqlite")
    import pytest

    with pytest.raises(RuntimeError):
        cache.rerank(reqs)
    inner = CountingBackend()
    again = CachedReranker(inner, tmp_path / "c.sqlite").rerank(reqs)
    assert [r.cached for r in again] == [True, False] and inner.batches == [1]
