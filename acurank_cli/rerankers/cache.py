"""On-disk SQLite call cache: a window already answered (same backend, model, settings, exact prompt)
is never paid for twice. Holds permutation, raw output, token counts, latency and (scored answers) the
scores per position; never secrets. A cache file written before the scores column existed gains it."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Sequence

from ..errors import WriteFailed
from ..io.stores import refused
from ..records import ParseStatus, RerankRequest, RerankResult
from .backend import BackendWrapper, RerankerBase, ResultSink

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
    created REAL NOT NULL,
    scores TEXT,
    reasoning_tokens INTEGER,
    thinking INTEGER,
    thought TEXT
)
"""

#: columns added after the first schema: a cache file written before them gains them (NULL in older rows)
ADDED_COLUMNS = {"scores": "TEXT", "reasoning_tokens": "INTEGER", "thinking": "INTEGER", "thought": "TEXT",
                 "absolute": "TEXT"}


def default_cache_path() -> Path:
    """``$ACURANK_CACHE``, else ``$XDG_CACHE_HOME/acurank/calls.sqlite`` (``~/.cache`` by default)."""
    if os.environ.get("ACURANK_CACHE"):
        return Path(os.environ["ACURANK_CACHE"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "acurank" / "calls.sqlite"


class CachedReranker(BackendWrapper):
    """Wraps a backend that has a ``cache_identity()``; misses go to it as one batch.

    Every answer is committed the moment the backend delivers it (not when the batch ends), so a
    kill at any instant loses only the calls still in flight. Several processes may share one file
    (WAL journal, waits up to ``BUSY_SECONDS`` for a writer instead of failing "database is locked").
    """

    BUSY_SECONDS = 120.0

    def __init__(self, inner: RerankerBase, path: str | Path):
        super().__init__(inner)
        self.path = Path(path)
        self.db = self.opened(self.path)
        self._lock = threading.Lock()
        self.identity = json.dumps(inner.cache_identity(), sort_keys=True)
        self.hits = 0
        self.misses = 0

    @classmethod
    def opened(cls, path: Path) -> sqlite3.Connection:
        """The cache at ``path`` connected (the file and its folder made where missing), or the one-line refusal."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            return cls._open(path)
        except (OSError, sqlite3.Error) as exc:
            raise refused("the call cache", exc, path) from None

    @classmethod
    def _open(cls, path: Path) -> sqlite3.Connection:
        """Connect, switch to WAL and create the table. SQLite answers "database is locked" at once
        (without its busy handler) while another process switches a new file to WAL, so retry briefly."""
        deadline = time.monotonic() + cls.BUSY_SECONDS
        while True:
            db = sqlite3.connect(path, timeout=cls.BUSY_SECONDS, check_same_thread=False)
            try:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")  # a commit survives a killed process (not a power cut)
                with db:
                    db.execute(SCHEMA)
                    present = {row[1] for row in db.execute("PRAGMA table_info(calls)")}
                    for column, kind in ADDED_COLUMNS.items():
                        if column not in present:
                            db.execute(f"ALTER TABLE calls ADD COLUMN {column} {kind}")
                return db
            except sqlite3.OperationalError as exc:
                db.close()
                if "locked" not in str(exc) and "busy" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def key(self, request: RerankRequest) -> str:
        """sha256 over the backend identity and the exact prompt."""
        return self._digest(self.inner.prompt_key(request))

    def _digest(self, prompt: str) -> str:
        h = hashlib.sha256(self.identity.encode("utf-8"))
        h.update(b"\x00")
        h.update(prompt.encode("utf-8"))
        return h.hexdigest()

    def rerank(self, requests: Sequence[RerankRequest], on_result: ResultSink | None = None) -> list[RerankResult]:
        """Serve hits from the cache, send the misses to the backend in one batch, commit each answer."""
        keys = [self._digest(prompt) for prompt in self.inner.prompt_keys(requests)]
        results: list[RerankResult | None] = [None] * len(requests)
        missing: list[int] = []
        with self._lock:
            rows = [self.db.execute(
                "SELECT perm, raw, parse, input_tokens, output_tokens, latency, backend, scores, reasoning_tokens, "
                "thinking, thought, absolute FROM calls WHERE key = ?", (key,)).fetchone() for key in keys]
        stale = getattr(self.inner, "gives_absolute", False)  # an entry kept before its absolute scores were
        for i, row in enumerate(rows):
            if row is None or (stale and row[-1] is None):  # answered again (a pointwise backend: from its store)
                missing.append(i)
                continue
            perm, raw, parse, tin, tout, latency, backend, scores, reasoning, thinking, thought, absolute = row
            results[i] = RerankResult(order=tuple(json.loads(perm)), input_tokens=tin, output_tokens=tout,
                                      latency=latency, parse=ParseStatus(parse), cached=True, raw=raw,
                                      backend=backend,
                                      scores=None if scores is None else tuple(json.loads(scores)),
                                      reasoning_tokens=reasoning or 0, thinking=bool(thinking), thought=thought or "",
                                      absolute=None if absolute is None else tuple(json.loads(absolute)))
            if on_result is not None:
                on_result(i, results[i])
        self.hits += len(requests) - len(missing)
        self.misses += len(missing)
        if missing:

            def arrived(j: int, result: RerankResult) -> None:
                i = missing[j]
                self._store(keys[i], result)
                results[i] = result
                if on_result is not None:
                    on_result(i, result)

            self.inner.rerank([requests[i] for i in missing], arrived)
        return results  # type: ignore[return-value]

    def _store(self, key: str, res: RerankResult) -> None:
        try:
            self._insert(key, res)
        except sqlite3.OperationalError as exc:  # "database or disk is full", "disk I/O error", read-only: one line
            raise WriteFailed(str(self.path), OSError(0, str(exc))) from None

    def _insert(self, key: str, res: RerankResult) -> None:
        with self._lock, self.db:
            self.db.execute(
                "INSERT OR REPLACE INTO calls (key, backend, identity, perm, raw, parse, input_tokens, output_tokens, "
                "latency, created, scores, reasoning_tokens, thinking, thought, absolute) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (key, res.backend or self.name, self.identity, json.dumps(list(res.order)),
                 res.raw, str(res.parse), res.input_tokens, res.output_tokens, res.latency, time.time(),
                 None if res.scores is None else json.dumps(list(res.scores)),
                 res.reasoning_tokens or None, int(res.thinking) if res.thinking else None, res.thought or None,
                 None if res.absolute is None else json.dumps(list(res.absolute))),
            )

    def close(self) -> None:
        """Close the backend and the database."""
        self.inner.close()
        self.db.close()


def with_cache(reranker: RerankerBase, cache: str | None) -> RerankerBase:
    """Wrap ``reranker`` in the call cache when it supports caching and a cache is wanted."""
    if cache is None or reranker.cache_identity() is None:
        return reranker
    return CachedReranker(reranker, default_cache_path() if cache == "default" else cache)
