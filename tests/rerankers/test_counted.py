"""The server's counter around a backend (rerankers/counted.py): each window's answer counted once, whether it comes
with the batch or as it arrives, and the windows held by the backend said until the call returns or fails."""

from __future__ import annotations

import pytest

from acurank_cli.records import Doc, RerankRequest, RerankResult
from acurank_cli.rerankers.backend import RerankerBase
from acurank_cli.rerankers.counted import Counted


class _Reversing(RerankerBase):
    """Answers each window reversed (7, 8, ... input tokens); streams its answers where ``stream``, and
    fails after the first answer where ``fail``; reports the counter's windows out during the call."""

    def __init__(self, stream: bool, fail: bool = False):
        self.name, self.needs_texts, self.stream, self.fail = "reversing", False, stream, fail
        self.seen_out: list[int] = []
        self.out = None

    def rerank(self, requests, on_result=None):
        self.seen_out.append(self.out())
        results = []
        for i, r in enumerate(requests):
            results.append(RerankResult(tuple(reversed(range(len(r.docs)))), input_tokens=7 + i, output_tokens=2))
            if self.stream and on_result is not None:
                on_result(i, results[-1])
            if self.fail:
                raise RuntimeError("the server went away")
        return results


def _windows(n: int) -> list[RerankRequest]:
    docs = (Doc("a", "x"), Doc("b", "y"))
    return [RerankRequest("q", "query", ("a", "b"), docs) for _ in range(n)]


@pytest.mark.parametrize("stream", [False, True])
def test_each_answer_is_counted_once_and_the_windows_out_settle(stream):
    inner, answered, state = _Reversing(stream), [], {"out": 0, "batches": 0}

    def count(n):
        state["batches"] += 1
        state["out"] += n

    def settled(n):
        state["out"] -= n

    inner.out = lambda: state["out"]
    sunk = []
    counted = Counted(inner, count, answered.append, settled)
    results = counted.rerank(_windows(3), on_result=lambda i, r: sunk.append(i))
    assert [r.input_tokens for r in answered] == [7, 8, 9] and len(results) == 3  # once each, never twice
    assert sunk == ([0, 1, 2] if stream else [])  # the caller's sink gets what the backend streams, as it would
    assert inner.seen_out == [3] and state == {"out": 0, "batches": 1}  # 3 out during the call, none after


def test_a_failed_call_counts_what_was_answered_and_holds_no_window():
    inner, answered, state = _Reversing(stream=True, fail=True), [], {"out": 0}
    inner.out = lambda: state["out"]
    counted = Counted(inner, lambda n: state.update(out=state["out"] + n), answered.append,
                      lambda n: state.update(out=state["out"] - n))
    with pytest.raises(RuntimeError, match="went away"):
        counted.rerank(_windows(2))
    assert [r.input_tokens for r in answered] == [7] and state["out"] == 0 and inner.seen_out == [2]
