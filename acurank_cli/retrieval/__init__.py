"""First-stage retrieval: BM25 over Lucene (Anserini via pyjnius) and ir_datasets topics/qrels.

Importing this package is cheap: the JVM starts on first use (see :mod:`.jvm`).
"""

from __future__ import annotations

__all__ = [
    "IndexStats",
    "build_index",
    "fetch_docs",
    "retrieve",
]


def __getattr__(name: str):
    if name in __all__:
        from . import lucene

        return getattr(lucene, name)
    raise AttributeError(name)
