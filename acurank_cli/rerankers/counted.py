"""A backend whose every call is counted: the server's /metrics count of backend batches and windows, and of each
window's answer (its tokens, cached or not), as a :class:`~.backend.BackendWrapper` (the backend's shape, its calls
passed through). Counted where the calls are made, not where a request is answered: the windows of a request
withdrawn, timed out or stopped at --max-calls were made and paid for too (:mod:`acurank_cli.serve.metrics`)."""

from __future__ import annotations

from typing import Callable, Sequence

from ..records import RerankRequest, RerankResult
from .backend import BackendWrapper, RerankerBase, ResultSink


class Counted(BackendWrapper):
    """``inner`` with ``count(windows)`` called before each of its calls (a batch of that many windows),
    ``each(result)`` once for each window's answer as it arrives (``on_result``) or with the batch, and
    ``settled(windows)`` once the call has returned or failed (the windows are no longer in the backend)."""

    def __init__(self, inner: RerankerBase, count: Callable[[int], None],
                 each: Callable[[RerankResult], None] | None = None, settled: Callable[[int], None] | None = None):
        super().__init__(inner)
        self.count, self.each, self.settled = count, each, settled

    def rerank(self, requests: Sequence[RerankRequest], on_result: ResultSink | None = None) -> list[RerankResult]:
        self.count(len(requests))
        try:
            return self._answered(requests, on_result)
        finally:
            if self.settled is not None:
                self.settled(len(requests))

    def _answered(self, requests: Sequence[RerankRequest], on_result: ResultSink | None) -> list[RerankResult]:
        if self.each is None:
            return self.inner.rerank(requests, on_result)
        seen: set[int] = set()

        def arrived(i: int, result: RerankResult) -> None:
            seen.add(i)
            self.each(result)
            if on_result is not None:
                on_result(i, result)

        results = self.inner.rerank(requests, arrived)
        for i, result in enumerate(results):
            if i not in seen:  # a backend that gives its answers only with the batch
                self.each(result)
        return results
