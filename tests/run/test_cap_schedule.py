"""``--max-cost`` with queries in flight: how many queries start does not depend on the order in which answers
arrive. The gate (:meth:`~acurank_cli.run.money.Cap.gate`) starts the next query when spent + the bounds of the
queries in flight + its own bound stay within the cap. An answer releases its query's bound and spends its cost, which
is at most that bound, so the left side never grows while a query waits: it is smallest once every query before it
has finished, where it is sum of their costs + its bound. So query i starts, under every schedule, exactly when
every query before it started and cost_0 + ... + cost_(i-1) + bound_i <= cap: the figure a bill run one query at a
time predicts.

The schedules here are the driver's choices (:data:`~acurank_cli.run.driver.WAIT`: take the gate again once an
answer came): how many queries are in flight, and which of them answers first, drawn at random."""

from __future__ import annotations

import random

import pytest

from acurank_cli.method.registry import build_strategy
from acurank_cli.records import CallTally, Candidate, QueryOutcome, RankingTask
from acurank_cli.run.driver import WAIT
from acurank_cli.run.money import Cap, Prices

PRICES = Prices(1000.0, 0.0)  # a thousand a million input tokens: a token costs 0.001
PER_CALL = (4096, 0)  # a call's bound: 4,096 input tokens, 4.096


def _tasks(rng: random.Random, count: int) -> list[RankingTask]:
    """Queries of 20 to 100 candidates: sw-1 (m 20, step 10) makes 1 to 9 calls each, so their bounds differ."""
    return [RankingTask(f"q{i}", "q", tuple(Candidate(f"d{j}", 100.0 - j) for j in range(rng.randint(20, 100))))
            for i in range(count)]


def _costs(cap: Cap, tasks: list[RankingTask], rng: random.Random) -> dict[str, int]:
    """What each query spends, in tokens: any figure from 0 to its bound (a call's prompt is rarely the context)."""
    return {t.qid: rng.randint(0, round(cap.bound(t) / 0.001)) for t in tasks}


def _started(limit: float, tasks: list[RankingTask], tokens: dict[str, int], schedule: random.Random) -> list[str]:
    """The queries the gate starts when the driver keeps up to a drawn number of queries in flight and, whenever it
    must (a WAIT) or chooses to, takes an answer from a drawn one of them."""
    cap = Cap(limit, PRICES, build_strategy("sw-1"), PER_CALL)
    started, flight = [], []
    lanes = schedule.randint(1, 8)

    def answer() -> None:
        qid = flight.pop(schedule.randrange(len(flight)))
        cap.finished(QueryOutcome(qid=qid, method="sw-1", ranking=(), tally=CallTally(calls=1, input_tokens=tokens[qid])))

    for task in cap.gate(tasks, len(tasks)):
        if task is WAIT:  # none fits now: the driver takes the gate again once an answer came
            answer()
            continue
        started.append(task.qid)
        flight.append(task.qid)
        while len(flight) >= lanes or (flight and schedule.random() < 0.5):  # answers come while others start
            answer()
    while flight:
        answer()
    return started


def _one_at_a_time(limit: float, tasks: list[RankingTask], tokens: dict[str, int]) -> int:
    """By the rule: query i starts while cost_0 + ... + cost_(i-1) + bound_i <= limit."""
    cap = Cap(limit, PRICES, build_strategy("sw-1"), PER_CALL)
    spent = 0.0
    for i, task in enumerate(tasks):
        if spent + cap.bound(task) > limit + 1e-12:
            return i
        spent += PRICES.cost(tokens[task.qid], 0)
    return len(tasks)


@pytest.mark.parametrize("seed", range(12))
def test_how_many_queries_start_does_not_depend_on_the_order_answers_arrive(seed):
    rng = random.Random(seed)
    tasks = _tasks(rng, 30)
    cap = Cap(0.0, PRICES, build_strategy("sw-1"), PER_CALL)
    tokens = _costs(cap, tasks, rng)
    bounds = [cap.bound(t) for t in tasks]
    assert bounds == [4.096 * (1 + -(-(len(t.candidates) - 20) // 10)) for t in tasks]  # sw-1's calls, by hand
    limit = rng.uniform(max(bounds), sum(bounds))  # the first query always fits; not every one does
    expected = _one_at_a_time(limit, tasks, tokens)
    for draw in range(25):
        started = _started(limit, tasks, tokens, random.Random(f"{seed}|{draw}"))
        assert started == [t.qid for t in tasks[:expected]], (seed, draw)
    assert 0 < expected  # a cap that starts some


def test_a_query_that_costs_more_than_its_bound_would_make_the_count_depend_on_timing():
    """Why the bound must hold: a query that spends past its bound raises the left side when it answers, and then
    whether the next started depends on whether it was taken before or after that answer. (The bound is the most a
    query can cost whatever the answers: the method's most calls times the context and the answer's budget.)"""
    rng = random.Random(3)
    tasks = _tasks(rng, 6)
    cap = Cap(0.0, PRICES, build_strategy("sw-1"), PER_CALL)
    tokens = {t.qid: round(cap.bound(t) / 0.001) * 3 for t in tasks}  # three times the bound
    limit = sum(cap.bound(t) for t in tasks[:2]) + 0.001
    seen = {len(_started(limit, tasks, tokens, random.Random(d))) for d in range(40)}
    assert len(seen) > 1, seen
