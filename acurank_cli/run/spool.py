"""The queries of a run held on disk, not in memory: what bounds a rerank's memory by its batch.

A run is read once, query by query; each query to rerank goes into a :class:`Spool`, an unnamed temporary file
(in ``$TMPDIR``, removed when closed or when the process ends) with an offset per query, and is read back when
the driver asks for it: only the queries of the current batch (and the few finished ones waiting for an earlier
query, to be written in input order) are in memory. Records are ``marshal``-ed tuples of strings and floats, the
fastest exact round trip of the standard library for them (a score comes back the same float).
"""

from __future__ import annotations

import marshal
import tempfile
from typing import Any, Iterator

from ..records import Candidate, RankingTask


class Spool:
    """Records by key in a temporary file: ``put`` appends (a later record of a key replaces it), ``get`` reads."""

    def __init__(self) -> None:
        self._fh = tempfile.TemporaryFile(prefix="acurank-spool-")
        self._at: dict[str, tuple[int, int]] = {}
        self._end = 0

    def put(self, key: str, value: Any) -> None:
        data = marshal.dumps(value)
        self._fh.seek(self._end)
        self._fh.write(data)
        self._at[key] = (self._end, len(data))
        self._end += len(data)

    def get(self, key: str) -> Any:
        offset, size = self._at[key]
        self._fh.seek(offset)
        return marshal.loads(self._fh.read(size))

    def __contains__(self, key: str) -> bool:
        return key in self._at

    def keys(self) -> list[str]:
        """The keys in the order they were first put."""
        return list(self._at)

    def close(self) -> None:
        self._fh.close()


def unpacked(record: tuple[tuple[str, ...], tuple[float, ...]]) -> tuple[Candidate, ...]:
    return tuple(map(Candidate, *record))


class Tasks:
    """A run's tasks in input order, each read back from disk when iterated (``heads``: qid -> (query, docids,
    scores)), and the candidates each query keeps without reranking them, read by :meth:`tail` (``tails``: qid ->
    (docids, scores); apart, so that iterating the tasks never reads them): re-iterable, with a length; indexing
    reads them all."""

    def __init__(self, heads: Spool, tails: Spool, order: list[str]):
        self._heads, self._tails, self._order = heads, tails, order

    def __len__(self) -> int:
        return len(self._order)

    def __iter__(self) -> Iterator[RankingTask]:
        for qid in self._order:
            query, docids, scores = self._heads.get(qid)
            yield RankingTask(qid, query, unpacked((docids, scores)))

    def __getitem__(self, index):
        return list(self)[index]

    def tail(self, qid: str) -> tuple[Candidate, ...]:
        """The candidates of ``qid`` written under its reranked ones without being reranked (none: ``()``)."""
        return unpacked(self._tails.get(qid)) if qid in self._tails else ()

    def close(self) -> None:
        self._heads.close()
        self._tails.close()
