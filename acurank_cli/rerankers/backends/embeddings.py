"""A persistent embedding store for local encoders, beside the call cache.

The call cache keys whole windows; a bi-encoder's passage embedding depends on the passage alone, so every
method over the same passages needs each embedding once. This store keeps ``text -> (unit vector, tokens)``
in SQLite, keyed by the model's identity (a digest of what decides the vector: model, package version,
pooling, truncation) and the sha256 of the text: ``calls.sqlite`` gets ``calls.embeddings.sqlite`` beside it.
Vectors are float32 bytes. ``--no-cache`` uses neither file.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any, Mapping, Sequence

from ...io.stores import refused, usable

SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings (
    model TEXT NOT NULL,
    text_sha256 TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (model, text_sha256)
)
"""


def store_path(call_cache: str | Path) -> Path:
    """Where the embeddings of a call cache's models live: ``X.sqlite`` -> ``X.embeddings.sqlite``."""
    path = Path(call_cache)
    return path.with_name(path.stem + ".embeddings.sqlite")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingStore:
    """Text -> (unit vector, token count) for one model identity, on disk."""

    BUSY_SECONDS = 120.0

    def __init__(self, path: str | Path, identity: Mapping[str, Any]):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.model = hashlib.sha256(json.dumps(identity, sort_keys=True).encode("utf-8")).hexdigest()[:32]
        self.conn = sqlite3.connect(str(self.path), timeout=self.BUSY_SECONDS, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute(SCHEMA)
        self.conn.commit()
        self.hits = 0
        self.stored = 0

    def get_many(self, texts: Sequence[str]) -> dict[str, tuple[Any, int]]:
        """The stored entries among ``texts`` (numpy float32 vectors)."""
        import numpy as np

        found: dict[str, tuple[Any, int]] = {}
        by_digest = {_digest(t): t for t in texts}
        keys = list(by_digest)
        for start in range(0, len(keys), 500):
            part = keys[start : start + 500]
            rows = self.conn.execute(
                f"SELECT text_sha256, tokens, vector FROM embeddings WHERE model = ? AND text_sha256 IN "
                f"({','.join('?' * len(part))})", [self.model, *part]).fetchall()
            for digest, tokens, blob in rows:
                found[by_digest[digest]] = (np.frombuffer(blob, dtype=np.float32).copy(), int(tokens))
        self.hits += len(found)
        return found

    def put_many(self, entries: Mapping[str, tuple[Any, int]]) -> None:
        """Store new entries (committed at once: a kill loses nothing already encoded and stored)."""
        import numpy as np

        rows = [(self.model, _digest(t), int(n), np.asarray(v, dtype=np.float32).tobytes()) for t, (v, n) in entries.items()]
        self.conn.executemany("INSERT OR IGNORE INTO embeddings VALUES (?, ?, ?, ?)", rows)
        self.conn.commit()
        self.stored += len(rows)

    def close(self) -> None:
        self.conn.close()


def opened_store(call_cache: str | Path, identity: Mapping[str, Any]) -> EmbeddingStore:
    """The store beside ``call_cache`` opened (made where missing), or the one-line refusal naming it."""
    path = store_path(call_cache)
    try:
        return EmbeddingStore(path, identity)
    except (OSError, sqlite3.Error) as exc:
        raise refused("the embedding store beside the call cache", exc, path) from None


class StoreUser:
    """A local backend that keeps per-text results (embeddings, pair scores) in an :class:`EmbeddingStore`
    beside the call cache, keyed by its ``cache_identity()``; mixed in before :class:`~.base.RerankerBase`."""

    store: EmbeddingStore | None = None
    #: each answer carries every document's own score (its cosine, its logit): RerankResult.absolute
    gives_absolute = True

    def use_store(self, call_cache: str | None) -> None:
        """Open the store beside the call cache (none without a cache)."""
        if call_cache is not None:
            self.store = opened_store(call_cache, self.cache_identity())

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None
        super().close()


def stores_of(cache: str | Path | None, keeps: Sequence[str]) -> list[tuple[Path, str]]:
    """The stores a backend that ``keeps`` them opens at ``cache`` (the call cache, the embedding store beside it), each
    with what a refusal calls it; none without a cache."""
    if cache is None or "calls" not in keeps:
        return []
    out = [(Path(cache), "the call cache")]
    if "embeddings" in keeps:
        out.append((store_path(cache), "the embedding store beside the call cache"))
    return out


def check_usable(cache: str | Path | None, keeps: Sequence[str]) -> None:
    """Check what a backend that ``keeps`` them will open at ``cache`` (:func:`stores_of`) before the backend is
    built, making nothing (:func:`~acurank_cli.io.stores.usable`): a path either refuses is the same one line,
    without first loading a model's weights, and a call refused after its backend is built leaves no empty cache
    behind. Each is made where the session starts (``Session.start``). (The command line's file plan checks the same
    stores with its outputs: :class:`~acurank_cli.io.plan.FilePlan`.)"""
    for path, what in stores_of(cache, keeps):
        usable(path, what)
