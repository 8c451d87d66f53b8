"""On-disk SQLite call cache: a window already answered (same backend, model, settings, exact prompt)
is never paid for twice. Holds permutation, raw output, token counts and latency; never secrets."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Sequence

from .records import RerankRequest, RerankResult

SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    key TEXT PRIMARY KEY,
    backend TEXT NOT NULL,
    identity TEXT NOT NULL,
    perm TEXT NOT NULL,
    raw TEXT NOT NULL,
    parse TEXT NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    latency REAL NOT NULL,
    created REAL NOT NULL
)
"""


def default_cache_path() -> Path:
    """``$ACURANK_CACHE``, else ``$XDG_CACHE_HOME/acurank/calls.sqlite`` (``~/.cache`` by default)."""
    if os.environ.get("ACURANK_CACHE"):
        return Path(os.environ["ACURANK_CACHE"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "acurank" / "calls.sqlite"


class CachedReranker:
    """Wraps a backend with ``cache_identity()`` and ``prompt_key(request)``; misses go as one batch."""

    def __init__(self, inner, path: str | Path):
        self.inner = inner
        self.name = inner.name
        self.needs_texts = inner.needs_texts
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(SCHEMA)
        self.db.commit()
        self.identity = json.dumps(inner.cache_identity(), sort_keys=True)
        self.hits = 0
        self.misses = 0

    def key(self, request: RerankRequest) -> str:
        """sha256 over the backend identity and the exact prompt."""
        h = hashlib.sha256(self.identity.encode("utf-8"))
        h.update(b"\x00")
        h.update(self.inner.prompt_key(request).encode("utf-8"))
        return h.hexdigest()

    def rerank(self, requests: Sequence[RerankRequest]) -> list[RerankResult]:
        """Serve hits from the cache, send the misses to the backend in one batch, store them."""
        keys = [self.key(r) for r in requests]
        results: list[RerankResult | None] = [None] * len(requests)
        missing: list[int] = []
        for i, key in enumerate(keys):
            row = self.db.execute(
                "SELECT perm, raw, parse, input_tokens, output_tokens, latency, backend FROM calls WHERE key = ?",
                (key,),
            ).fetchone()
            if row is None:
                missing.append(i)
                continue
            perm, raw, parse, tin, tout, latency, backend = row
            results[i] = RerankResult(tuple(json.loads(perm)), tin, tout, latency, parse, True, raw, backend)
        self.hits += len(requests) - len(missing)
        self.misses += len(missing)
        if missing:
            batch = [requests[i] for i in missing]
            try:
                fresh = self.inner.rerank(batch)
            except Exception as exc:  # keep what finished (e.g. BackendError.results), then fail
                self._store([(keys[i], r) for i, r in zip(missing, getattr(exc, "results", None) or []) if r])
                raise
            self._store([(keys[i], r) for i, r in zip(missing, fresh)])
            for i, res in zip(missing, fresh):
                results[i] = res
        return results  # type: ignore[return-value]

    def _store(self, items: list[tuple[str, RerankResult]]) -> None:
        now = time.time()
        with self.db:
            for key, res in items:
                self.db.execute(
                    "INSERT OR REPLACE INTO calls VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (key, res.backend or self.name, self.identity, json.dumps(list(res.order)),
                     res.raw, res.parse, res.input_tokens, res.output_tokens, res.latency, now),
                )

    def close(self) -> None:
        """Close the database."""
        self.db.close()


def with_cache(reranker, cache: str | None):
    """Wrap ``reranker`` in the call cache when it supports caching and a cache is wanted."""
    if cache is None or not hasattr(reranker, "cache_identity"):
        return reranker
    return CachedReranker(reranker, default_cache_path() if cache == "default" else cache)
