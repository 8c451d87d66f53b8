"""The SQLite call cache: hits are never sent again, misses go as one batch, nothing secret is stored."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from acurank_cli.rerankers.cache import CachedReranker
from acurank_cli.records import Doc, RerankRequest, RerankResult
from acurank_cli.rerankers.backend import RerankerBase

from conftest import ENV, small_run


def _req(qid, query, docids, texts):
    return RerankRequest(qid, query, docids, tuple(Doc(d, t) for d, t in zip(docids, texts)))


class CountingBackend(RerankerBase):
    """A deterministic backend that records every batch it executes (reverses the window)."""

    name = "counting"
    needs_texts = True

    def __init__(self):
        self.batches: list[int] = []

    def cache_identity(self):
        return {"backend": "counting", "model": "m", "temperature": 0}

    def rerank_batch(self, requests):
        self.batches.append(len(requests))
        return [RerankResult(order=tuple(reversed(range(len(r.docids)))), input_tokens=10, output_tokens=3,
                             latency=0.5, parse="ok", cached=False, raw="[2] > [1]", backend="counting")
                for r in requests]


def test_cache_hits_and_batched_misses(tmp_path):
    inner = CountingBackend()
    cache = CachedReranker(inner, tmp_path / "c.sqlite")
    reqs = [_req("1", "q", ("a", "b"), ("ta", "tb")), _req("1", "q", ("c", "d"), ("tc", "td"))]
    first = cache.rerank(reqs)
    assert inner.batches == [2] and not any(r.cached for r in first)
    again = cache.rerank(reqs + [_req("2", "q2", ("a", "b"), ("ta", "tb"))])
    assert inner.batches == [2, 1]  # only the new prompt is sent
    assert [r.cached for r in again] == [True, True, False]
    assert again[0].order == first[0].order and again[0].input_tokens == 10 and again[0].raw == "[2] > [1]"
    cache.close()
    reopened = CachedReranker(CountingBackend(), tmp_path / "c.sqlite")
    assert all(r.cached for r in reopened.rerank(reqs))


def test_identity_changes_the_key(tmp_path):
    a, b = CountingBackend(), CountingBackend()
    b.cache_identity = lambda: {"backend": "counting", "model": "other"}
    req = _req("1", "q", ("a", "b"), ("ta", "tb"))
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


def test_each_answer_is_committed_as_it_arrives(tmp_path):
    """A backend that delivers one answer and then dies: that answer is already in the database."""

    class DiesAfterOne(CountingBackend):
        def rerank(self, requests, on_result=None):
            first = super().rerank_batch(requests[:1])[0]
            on_result(0, first)
            committed = sqlite3.connect(tmp_path / "c.sqlite").execute("SELECT count(*) FROM calls").fetchone()[0]
            assert committed == 1  # visible to another connection before the batch ends
            raise RuntimeError("killed mid-batch")

    reqs = [_req("1", "q", ("a", "b"), ("ta", "tb")), _req("1", "q", ("c", "d"), ("tc", "td"))]
    with pytest.raises(RuntimeError):
        CachedReranker(DiesAfterOne(), tmp_path / "c.sqlite").rerank(reqs)
    inner = CountingBackend()
    again = CachedReranker(inner, tmp_path / "c.sqlite").rerank(reqs)
    assert [r.cached for r in again] == [True, False] and inner.batches == [1]


def test_two_processes_share_one_cache(tmp_path):
    """Two writers on one file, many small transactions each: both finish, every row is there."""
    script = """
import sys
from acurank_cli.rerankers.cache import CachedReranker
from acurank_cli.records import Doc, RerankRequest, RerankResult
from acurank_cli.rerankers.backend import RerankerBase

class Echo(RerankerBase):
    name = "echo"
    def cache_identity(self):
        return {"backend": "echo"}
    def rerank_batch(self, requests):
        return [RerankResult(order=(1, 0), input_tokens=1, output_tokens=1, latency=0.0, parse="ok", cached=False,
                             raw="[2] > [1]", backend="echo") for _ in requests]

cache = CachedReranker(Echo(), sys.argv[1])
who = sys.argv[2]
for i in range(300):
    cache.rerank([RerankRequest(who, f"{who} {i}", ("a", "b"), (Doc("a", "x"), Doc("b", "y")))])
cache.close()
"""
    db = tmp_path / "shared.sqlite"
    procs = [subprocess.Popen([sys.executable, "-c", script, str(db), who], stderr=subprocess.PIPE, text=True)
             for who in ("p1", "p2")]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errors
    assert sqlite3.connect(db).execute("SELECT count(*) FROM calls").fetchone()[0] == 600


@pytest.mark.parametrize("bad", ["missing-folder", "folder", "not-a-database", "store-blocked"])
def test_unusable_cache_is_one_line_and_leaves_nothing_beside_it(sample, tmp_path, bad):
    """A --cache that cannot be used (a folder that cannot be made, a directory, a file that is not SQLite) or
    whose embedding store beside it cannot be: exit 2, one line naming the file and the flags, no run file,
    and no ``.embeddings.sqlite`` left beside a cache that was refused (minilm keeps one there)."""
    run, _ = small_run(sample, tmp_path, queries=1, depth=5)
    blocker = tmp_path / "plain-file"
    blocker.write_text("x\n")
    cache = {"missing-folder": blocker / "sub" / "c.sqlite", "folder": tmp_path / "adir",
             "not-a-database": tmp_path / "notes.txt", "store-blocked": tmp_path / "c.sqlite"}[bad]
    if bad == "folder":
        cache.mkdir()
    if bad == "not-a-database":
        cache.write_text("not sqlite\n" * 100)
    if bad == "store-blocked":
        (tmp_path / "c.embeddings.sqlite").mkdir()  # the store's path is taken by a directory
    out = tmp_path / "o.run"
    proc = subprocess.run([sys.executable, "-m", "acurank_cli", "rerank", str(run), "--method", "acurank-9",
                           "--reranker", "minilm", "--topics", str(sample / "dl19" / "topics.tsv"),
                           "--corpus", str(sample / "dl19" / "passages.jsonl.gz"), "--cache", str(cache),
                           "-o", str(out)], capture_output=True, text=True, env=ENV)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    what = "the embedding store beside the call cache" if bad == "store-blocked" else "the call cache"
    named = tmp_path / "c.embeddings.sqlite" if bad == "store-blocked" else cache
    assert lines[0].startswith(f"acurank: error: {named}: cannot use {what} (")
    assert lines[0].endswith("give another --cache or --no-cache")
    assert not out.exists()
    if bad != "store-blocked":
        assert sorted(p.name for p in tmp_path.glob("*.embeddings.sqlite")) == []


@pytest.mark.parametrize("bad", ["folder", "not-a-database", "store-blocked"])
def test_an_unusable_cache_is_refused_before_the_backend_is_built_by_the_cli_and_the_api(sample, tmp_path, bad,
                                                                                           monkeypatch):
    """A backend that keeps a call cache (and minilm its embedding store beside it) has both opened before it is
    built: the refusal costs no model load (minilm's weights took 8 s of this line's wait; a 7B model's, minutes).
    Building is made to fail here, so a refusal that came after it would be that failure instead."""
    from acurank_cli.api import Reranker
    from acurank_cli.errors import OptionError
    from acurank_cli.rerankers.backends import minilm

    from conftest import acurank

    def never(self, *a, **kw):
        raise AssertionError("the backend was built before its cache was checked")

    monkeypatch.setattr(minilm.MiniLMReranker, "__init__", never)
    cache = {"folder": tmp_path / "adir", "not-a-database": tmp_path / "notes.txt",
             "store-blocked": tmp_path / "c.sqlite"}[bad]
    if bad == "folder":
        cache.mkdir()
    if bad == "not-a-database":
        cache.write_text("not sqlite\n" * 100)
    if bad == "store-blocked":
        (tmp_path / "c.embeddings.sqlite").mkdir()
    named = tmp_path / "c.embeddings.sqlite" if bad == "store-blocked" else cache
    run, _ = small_run(sample, tmp_path, queries=1, depth=5)
    ran = acurank("rerank", run, "--method", "acurank-9", "--reranker", "minilm", "--topics",
                  sample / "dl19" / "topics.tsv", "--corpus", sample / "dl19" / "passages.jsonl.gz", "--cache", cache,
                  "-o", tmp_path / "o.run", check=False)
    assert ran.returncode == 2 and ran.stderr.startswith(f"acurank: error: {named}: cannot use "), ran.stderr
    with pytest.raises(OptionError, match="cannot use the (call cache|embedding store beside the call cache)"):
        Reranker("minilm", "acurank-9", cache=str(cache))


def test_a_cache_given_to_a_reranker_that_keeps_no_calls_is_said_unused(sample, tmp_path):
    """--cache with a reranker that keeps no calls (the simulated reranker) did nothing and said nothing: said once."""
    from conftest import acurank

    run, _ = small_run(sample, tmp_path, queries=1, depth=5)
    ran = acurank("rerank", run, "--reranker", "simulated", "--qrels", sample / "dl19" / "qrels.txt", "--cache",
                  tmp_path / "c.sqlite", "-o", tmp_path / "x.run")
    said = [line for line in ran.stderr.splitlines() if "is not used" in line]
    assert said == [f"acurank: --cache {tmp_path / 'c.sqlite'} is not used: reranker simulated keeps no calls (it pays "
                    "for none)"] and not (tmp_path / "c.sqlite").exists()
