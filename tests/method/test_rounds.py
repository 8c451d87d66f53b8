"""Rounds (sequential reranker batches a query waited for) and the round cap --max-rounds."""

from __future__ import annotations


import pytest

from acurank_cli.run.driver import Driver
from acurank_cli.records import Candidate, RankingTask, RerankResult
from acurank_cli.rerankers.backend import RerankerBase
from acurank_cli.rerankers.backends.simulated import SimulatedReranker
from acurank_cli.method.registry import build_strategy


class BatchRecorder(RerankerBase):
    """Returns the presented order; records which queries each batch (one backend call) served."""

    name = "recorder"
    needs_texts = False

    def __init__(self):
        self.batches: list[set[str]] = []

    def rerank_batch(self, requests):
        self.batches.append({r.qid for r in requests})
        return [RerankResult(order=tuple(reversed(range(len(r.docids))))) for r in requests]


def _tasks(sizes):
    return [RankingTask(f"q{i}", "", tuple(Candidate(f"d{j}", 50.0 - 0.3 * j) for j in range(n)))
            for i, n in enumerate(sizes)]


@pytest.mark.parametrize("method", ["sw-1", "sw-2", "tourrank-1", "ts-5-2-2-1", "acurank", "acurank-9", "acurank-r3"])
@pytest.mark.parametrize("batch_queries", [1, 3])
def test_rounds_equal_the_batches_each_query_waited_for(method, batch_queries):
    rec = BatchRecorder()
    outs = list(Driver(build_strategy(method), rec, {}, batch_queries).run(_tasks([100, 45, 1, 2, 21, 100])))
    for out in outs:
        assert out.tally.rounds == sum(out.qid in b for b in rec.batches), (method, out.qid)
    assert sum(len(b) for b in rec.batches) == sum(o.tally.rounds for o in outs)


def test_rounds_by_hand():
    rec = BatchRecorder()
    (sw,) = Driver(build_strategy("sw-1"), rec, {}).run(_tasks([100]))
    assert (sw.tally.calls, sw.tally.rounds) == (9, 9)  # a chain: every window waits for the one before
    (single,) = Driver(build_strategy("acurank-r1"), rec, {}).run(_tasks([100]))
    assert (single.tally.calls, single.tally.rounds, single.stop) == (5, 1, "round-cap")  # initial pass only


def _sim(n, qrels_every=7):
    grades = {f"d{j}": (2 if j % qrels_every == 0 else 0) for j in range(n)}
    return SimulatedReranker({"q0": grades})


@pytest.mark.parametrize("rounds", [2, 3, 5])
def test_round_cap_last_round_is_a_final_pass(rounds):
    """With R rounds: round 1 the initial pass, rounds 2..R-1 adaptive, round R a final pass over
    {s_i > eps} (as when |C| < tau); then it stops, reason round-cap (unless it stopped earlier)."""
    from acurank_cli.records import Step

    steps: list[Step] = []
    strategy = build_strategy("acurank", max_rounds=rounds)
    (out,) = Driver(strategy, _sim(100), {}, on_step=lambda t, s: steps.append(s)).run(_tasks([100]))
    sent = [s for s in steps if s.windows]
    assert len(sent) == out.tally.rounds <= rounds
    assert sent[0].phase == "initial" and [len(w) for w in sent[0].windows] == [20] * 5
    if out.stop == "round-cap":
        assert len(sent) == rounds and sent[-1].phase == "final"
        assert all(s.phase == "adaptive" for s in sent[1:-1])
    free = list(Driver(build_strategy("acurank"), _sim(100), {}).run(_tasks([100])))[0]
    assert out.tally.calls <= free.tally.calls


def test_round_cap_keeps_the_call_budget():
    (out,) = Driver(build_strategy("acurank-9", max_rounds=50), _sim(100), {}).run(_tasks([100]))
    assert out.tally.calls <= 9 and out.stop == "call-cap"
