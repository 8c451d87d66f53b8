"""``rerank --dry-run``: the bill before the first call, from a rehearsal of the method with no model.

**Calls.** The method is played ``rehearsals`` times over the run's queries against the simulated reranker (the
specified oracle: grades plus seeded Gaussian noise, :mod:`~acurank_cli.rerankers.backends.simulated`), each time
with another seed. Its grades are the run's own when it reranks with the simulated reranker (same qrels, same
noise: the run is one more draw of the same rehearsal); else the qrels given with ``--qrels``; else each candidate's
first-stage score, standardised per query (a model that mostly agrees with the first stage). Its noise is the
run's ``--sim-noise`` for the simulated reranker, else ``--rehearsal-noise`` (default 1, the simulated reranker's
own default). A query's calls are the median of its rehearsals and, as a 90% interval, the least and the most of
them (of 20 exchangeable draws, a 21st, the run itself when it reranks with the simulated reranker, falls between
the least and the most with probability 19/21 = 90.5%); the total's figures are those of the rehearsals' totals.
Rehearsals run in parallel processes, one a core. A method whose calls are the same in every rehearsal (sliding windows,
``acurank-N`` at its budget, TourRank, the static TrueSkill methods) is marked exact: its calls never depend on the
answers.

**Tokens.** Each query's candidates, in windows of the method's size (its first round's, :func:`~.render.first_round`)
that hold each candidate once, are prompted by the backend's prompt-only form
(:meth:`~acurank_cli.rerankers.backend.BackendChoice.prompter`, counted with the backend's own tokenizer); a query's
input tokens are its calls times their mean, and its output tokens its calls times the tokens of a full answer for
a window of that size, counted the same way. Later windows hold
documents that the answers decide, so even an exact method's tokens are an estimate (within a few percent:
BENCHMARKS.md 28). Money: tokens times ``--price-in``/``--price-out`` (currency per million tokens).
"""

from __future__ import annotations

import multiprocessing
import os
import statistics
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..method.strategy import Strategy
from ..records import Doc, RankingTask

#: rehearsals by default: the least and the most of 20 draws hold a 21st with probability 19/21 (a 90.5% interval)
REHEARSALS = 20


@dataclass(frozen=True)
class Spread:
    """A predicted figure: the median and the 90% interval (equal for an exact figure)."""

    low: float
    median: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> "Spread":
        """The median and the least and most of ``values``: of n exchangeable draws, a further one falls between
        the least and the most with probability (n - 1) / (n + 1), 90.5% for 20."""
        return cls(float(min(values)), float(statistics.median(values)), float(max(values)))

    def times(self, factor: float) -> "Spread":
        return Spread(self.low * factor, self.median * factor, self.high * factor)

    def as_dict(self, digits: int = 2) -> dict[str, float]:
        return {"low": round(self.low, digits), "median": round(self.median, digits), "high": round(self.high, digits)}


@dataclass(frozen=True)
class QueryBill:
    """One query's predicted cost."""

    qid: str
    calls: Spread
    #: tokens of a call, in and out (None: the backend reads no prompt, so no tokens are counted)
    per_call: tuple[float, float] | None


@dataclass(frozen=True)
class Bill:
    """The run's predicted cost: per query, in total, and how it was predicted."""

    queries: tuple[QueryBill, ...]
    total_calls: Spread
    #: every rehearsal gave every query the same calls: the method's calls do not depend on the answers
    exact: bool
    rehearsal: str
    prices: tuple[float, float] | None = None

    def tokens(self, bill: QueryBill | None = None) -> tuple[Spread, Spread] | None:
        """Input and output tokens of a query (None: the whole run)."""
        rows = self.queries if bill is None else (bill,)
        if any(r.per_call is None for r in rows):
            return None
        if bill is not None:
            return bill.calls.times(bill.per_call[0]), bill.calls.times(bill.per_call[1])
        calls = sum(r.calls.median for r in rows) or 1.0  # the total's tokens a call: the queries' own, weighted
        per_in = sum(r.calls.median * r.per_call[0] for r in rows) / calls
        per_out = sum(r.calls.median * r.per_call[1] for r in rows) / calls
        return self.total_calls.times(per_in), self.total_calls.times(per_out)

    def money(self, bill: QueryBill | None = None) -> Spread | None:
        tokens = self.tokens(bill)
        if tokens is None or self.prices is None:
            return None
        t_in, t_out = tokens
        p_in, p_out = (p / 1e6 for p in self.prices)
        return Spread(t_in.low * p_in + t_out.low * p_out, t_in.median * p_in + t_out.median * p_out,
                      t_in.high * p_in + t_out.high * p_out)


def rehearsal_grades(tasks: Sequence[RankingTask], qrels: Mapping[str, Mapping[str, int]] | None
                     ) -> dict[str, dict[str, float]]:
    """The rehearsal's grades: the qrels where given, else each query's first-stage scores standardised (a query
    whose scores are all equal: every grade 0)."""
    if qrels:
        return {t.qid: dict(qrels.get(t.qid, {})) for t in tasks}
    out: dict[str, dict[str, float]] = {}
    for t in tasks:
        scores = [c.score for c in t.candidates]
        mean = statistics.fmean(scores) if scores else 0.0
        sd = statistics.pstdev(scores) if len(scores) > 1 else 0.0
        out[t.qid] = {c.docid: ((c.score - mean) / sd if sd > 0 else 0.0) for c in t.candidates}
    return out


def rehearse(strategy: Strategy, tasks: Sequence[RankingTask], grades: Mapping[str, Mapping[str, float]],
             noise: float, seeds: Sequence[int]) -> dict[str, list[int]]:
    """Each query's calls in each rehearsal (the driver playing the method against the simulated reranker)."""
    calls: dict[str, list[int]] = {t.qid: [] for t in tasks}
    workers = min(len(seeds), os.cpu_count() or 1)
    global _REHEARSED
    if workers > 1 and "fork" in multiprocessing.get_all_start_methods():
        _REHEARSED = (strategy, tasks, grades, noise)  # a forked worker inherits it (a strategy need not pickle)
        try:
            with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
                played = list(pool.map(_forked, seeds))
        finally:
            _REHEARSED = None
    else:
        played = [_play(strategy, tasks, grades, noise, s) for s in seeds]
    for one in played:
        for qid, n in one.items():
            calls[qid].append(n)
    return calls


#: what forked rehearsal workers play (set only while they run)
_REHEARSED: tuple | None = None


def _forked(seed: int) -> dict[str, int]:
    return _play(*_REHEARSED, seed)


def _play(strategy: Strategy, tasks: Sequence[RankingTask], grades: Mapping[str, Mapping[str, float]], noise: float,
          seed: int) -> dict[str, int]:
    """One rehearsal: each query's calls."""
    from ..rerankers.backends.simulated import SimulatedReranker
    from .driver import Driver

    oracle = SimulatedReranker(dict(grades), noise=noise, seed=seed)
    return {o.qid: o.tally.calls for o in Driver(strategy.for_run(), oracle, None, max(1, len(tasks))).run(tasks)}


def per_call_tokens(strategy: Strategy, task: RankingTask, docs: Mapping[str, Doc], prompter: Any
                    ) -> tuple[float, float] | None:
    """A call's input and output tokens for this query: the mean over windows of the method's size that hold every
    candidate once, prompted by the backend's prompt-only form (None: no prompter, or no window)."""
    if prompter is None:
        return None
    from ..rerankers.listwise.prompts import answer_text, counted_text
    from .render import first_round
    from .driver import task_scores, window_request

    first = first_round(strategy, task)
    if not first:
        return None
    size = max(len(w) for w in first)  # the method's window: every candidate once, in windows of that size
    ids = [c.docid for c in task.candidates]
    windows = [w for w in (tuple(ids[j:j + size]) for j in range(0, len(ids), size)) if len(w) >= 2]
    scores = task_scores(task)
    prompts = [prompter.prompt(window_request(task, w, docs, scores)) for w in windows]
    answer = counted_text(answer_text(size), prompter.builder.counter)
    return statistics.fmean(p.tokens for p in prompts), float(answer)


def estimate(strategy: Strategy, tasks: Sequence[RankingTask], docs: Mapping[str, Doc], prompter: Any, *,
             grades: Mapping[str, Mapping[str, float]], noise: float, seeds: Sequence[int],
             prices: tuple[float, float] | None, what: str) -> Bill:
    """The bill of running ``strategy`` over ``tasks`` (see the module's doc)."""
    calls = rehearse(strategy, tasks, grades, noise, seeds)
    rows = tuple(QueryBill(t.qid, Spread.of(calls[t.qid]), per_call_tokens(strategy, t, docs, prompter))
                 for t in tasks)
    totals = [sum(calls[t.qid][i] for t in tasks) for i in range(len(seeds))]
    exact = all(len(set(v)) == 1 for v in calls.values())
    return Bill(rows, Spread.of(totals), exact, what, prices)


__all__ = ["Bill", "QueryBill", "REHEARSALS", "Spread", "estimate", "rehearsal_grades"]
