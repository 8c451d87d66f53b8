"""A backend whose every call is counted: the server's /metrics count of backend batches and windows
(:mod:`acurank_cli.serve.metrics`), as a :class:`~.backend.BackendWrapper` (the backend's shape, its calls passed
through)."""

from __future__ import annotations

from typing import Callable, Sequence

from ..records import RerankRequest, RerankResult
from .backend import BackendWrapper, RerankerBase, ResultSink


class Counted(BackendWrapper):
    """``inner`` with ``count(windows)`` called before each of its calls (a batch of that many windows)."""

    def __init__(self, inner: RerankerBase, count: Callable[[int], None]):
        super().__init__(inner)
        self.count = count

    def rerank(self, requests: Sequence[RerankRequest], on_result: ResultSink | None = None) -> list[RerankResult]:
        self.count(len(requests))
        return self.inner.rerank(requests, on_result)
