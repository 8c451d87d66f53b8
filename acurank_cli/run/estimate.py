"""``rerank --dry-run``: the bill before the first call, from a rehearsal of the method with no model.

**Calls.** The method is played ``rehearsals`` times over the run's queries against the simulated reranker (the
specified oracle: grades plus seeded Gaussian noise, :mod:`~acurank_cli.rerankers.backends.simulated`), each time
with another seed. Its grades are the run's own when it reranks with the simulated reranker (same qrels, same
noise: the run is one more draw of the same rehearsal); else, with ``--qrels``, the qrels and each candidate's
first-stage score standardised per query, the rehearsals taking them in turn (a model's order lies between the two,
nearer one or the other by a measure not known before the run); else the first-stage scores alone. Its noise is the
run's ``--sim-noise`` for the simulated reranker, else ``--rehearsal-noise`` (default 1, the simulated reranker's
own default). How the noise is drawn follows the backend: once per window for a listwise LLM, whose answers to
overlapping windows need not agree; once per query and document for a pointwise backend (MiniLM, a cross-encoder:
:attr:`~acurank_cli.rerankers.backend.BackendSpec.pointwise`), which orders every window by the same scores, so its
answers agree across windows and the ratings settle in fewer calls (the simulated reranker's persistent noise;
DL19 with MiniLM: 729-737 calls predicted, 714 made, against 1,988 with noise drawn per window: BENCHMARKS.md 28).
A query's calls are the median of its rehearsals and, as a 90% interval, the least and the most of
them (of 20 exchangeable draws, a 21st, the run itself when it reranks with the simulated reranker, falls between
the least and the most with probability 19/21 = 90.5%; with two models in turn the interval spans both, and its
coverage of a real model's calls is measured, not derived: BENCHMARKS.md 28c); the total's figures are those of the
rehearsals' totals.
Rehearsals run in parallel processes, one a core. A method whose calls are the same in every rehearsal (sliding windows,
``acurank-N`` at its budget, TourRank, the static TrueSkill methods) is marked exact: its calls never depend on the
answers.

**Tokens.** Each query's candidates, in windows of the method's size (its first round's, :func:`~acurank_cli.method.strategy.first_round`)
and of half that size, each candidate once, are prompted by the backend's prompt-only form
(:meth:`~acurank_cli.rerankers.backend.BackendChoice.prompter`, counted with the backend's own tokenizer), and a full
answer for each window counted the same way: the line through the two sizes' means gives the tokens a call and a
document (:class:`Cost`), in and out. Each rehearsal's tokens are its calls and documents sent on that line, so the
tokens have their own median and interval (an adaptive method's later windows are smaller than its first). Later windows hold
documents that the answers decide, so even an exact method's tokens are an estimate (within a few percent:
BENCHMARKS.md 28). A run that thinks (``--thinking on|gated``) is rehearsed thinking as it would (gated: by its
own gate): each thought is billed as output tokens at the simulated reranker's cost, or at the most a model's
thought may take (its ``--thinking-budget``: a bound, as a thought may end sooner). Money: tokens times
``--price-in``/``--price-out`` (currency per million tokens).
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
#: how a bill names its rehearsals' grades, by how many models they take in turn (:func:`rehearsal_grades`)
GRADES = {1: "each query's first-stage scores, standardised",
          2: "the qrels given and each query's first-stage scores standardised, in turn"}
#: how a bill says that a pointwise backend's rehearsal drew its noise once per query and document
PERSISTENT = " drawn once per query and document: a pointwise reranker's answers agree across windows"


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

    def as_dict(self, digits: int = 2) -> dict[str, float]:
        return {"low": round(self.low, digits), "median": round(self.median, digits), "high": round(self.high, digits)}


@dataclass(frozen=True)
class Cost:
    """A query's tokens as a line in its rehearsal's counts: ``per_call`` + ``per_doc`` x documents, in and out."""

    per_call: tuple[float, float]
    per_doc: tuple[float, float]

    def of(self, calls: int, docs: int) -> tuple[float, float]:
        return (self.per_call[0] * calls + self.per_doc[0] * docs, self.per_call[1] * calls + self.per_doc[1] * docs)


@dataclass(frozen=True)
class QueryBill:
    """One query's predicted cost (tokens None: the backend reads no prompt)."""

    qid: str
    calls: Spread
    input_tokens: Spread | None = None
    output_tokens: Spread | None = None


@dataclass(frozen=True)
class Bill:
    """The run's predicted cost: per query, in total, and how it was predicted."""

    queries: tuple[QueryBill, ...]
    total: QueryBill
    #: every rehearsal gave every query the same calls (sliding windows, TourRank: their calls never depend on the
    #: answers; an adaptive method's may agree by chance on a few queries)
    exact: bool
    rehearsal: str
    prices: tuple[float, float] | None = None

    def money(self, bill: QueryBill) -> Spread | None:
        if bill.input_tokens is None or self.prices is None:
            return None
        (p_in, p_out), t_in, t_out = (p / 1e6 for p in self.prices), bill.input_tokens, bill.output_tokens
        return Spread(t_in.low * p_in + t_out.low * p_out, t_in.median * p_in + t_out.median * p_out,
                      t_in.high * p_in + t_out.high * p_out)


def rehearsal(options: Any, simulated: bool, tasks: Sequence[RankingTask], qrels: Any, noise: float | None,
              rehearsals: int) -> tuple[tuple, float, range, str]:
    """How a bill rehearses a run (``rerank --dry-run``'s and the API's ``estimate``): (the grades, the noise, the
    seeds, what the grades are). Against the simulated reranker, as a run of it goes: its qrels, its ``--sim-noise``
    (``noise``: another) and seeds after its ``--sim-seed``; else the grades of :func:`rehearsal_grades` at ``noise``
    (None: 1), seeds from 0."""
    if simulated:
        base = int(options.sim_seed) + 1
        return (qrels,), float(options.sim_noise) if noise is None else noise, range(base, base + rehearsals), \
            "the run's qrels and noise"
    models = rehearsal_grades(tasks, qrels or None)
    return models, 1.0 if noise is None else noise, range(rehearsals), GRADES[len(models)]


def rehearsal_grades(tasks: Sequence[RankingTask], qrels: Mapping[str, Mapping[str, int]] | None
                     ) -> tuple[dict[str, dict[str, float]], ...]:
    """The rehearsals' grades, one mapping a model of the reranker, the rehearsals taking them in turn: with qrels,
    the qrels and each query's first-stage scores standardised; without, the first-stage scores alone (a query
    whose scores are all equal: every grade 0). A model's order lies between the judgements and the first stage,
    nearer one or the other by a measure unknown before the run; rehearsing both makes the interval span both (the
    qrels alone put MiniLM's ``acurank-H`` calls below the interval on 7 of DL19's 43 queries, the first stage alone
    above it on 11: BENCHMARKS.md 28c)."""
    first = _first_stage(tasks)
    if qrels:
        return ({t.qid: dict(qrels.get(t.qid, {})) for t in tasks}, first)
    return (first,)


def _first_stage(tasks: Sequence[RankingTask]) -> dict[str, dict[str, float]]:
    """Each query's first-stage scores, standardised within it (all equal: every grade 0)."""
    out: dict[str, dict[str, float]] = {}
    for t in tasks:
        scores = [c.score for c in t.candidates]
        mean = statistics.fmean(scores) if scores else 0.0
        sd = statistics.pstdev(scores) if len(scores) > 1 else 0.0
        out[t.qid] = {c.docid: ((c.score - mean) / sd if sd > 0 else 0.0) for c in t.candidates}
    return out


@dataclass(frozen=True)
class Thought:
    """How a run thinks, as a rehearsal plays it (``--thinking on|gated``): the settings (which windows think), the
    gate (gated: the run's own), the factor a thought puts on the rehearsal's noise (the simulated reranker's
    ``--sim-think-noise``; 1 for a model, of which nothing is assumed) and the tokens a thought is billed at (the
    simulated reranker's cost; a model's: the most its thought may take, ``--thinking-budget``)."""

    settings: Any
    gate: Any
    noise: float
    tokens: int


#: what a bill says of a model whose thoughts have no bound (:func:`unbounded`), after why
UNBOUNDED = (", so the bill's thought tokens bound nothing (give --thinking-budget N: each thought at most N tokens, "
             "billed so)")


def unbounded(prompter: Any) -> str | None:
    """Why some call's thought has no bound (a served model that thinks with no --thinking-budget), or None."""
    said = getattr(prompter, "unbounded", None)
    return None if said is None else said()


def thought_of(options: Any, gate: Any, simulated: bool, prompter: Any = None) -> Thought | None:
    """The run's thinking for its rehearsals, from the backend's options record and the run's gate (None: it does
    not think); ``prompter``: the backend's prompts, whose builder reserves a thought on every call where the model
    reasons without --thinking (a served reasoning model's --reasoning-effort, bounded by --thinking-budget)."""
    import dataclasses

    from ..rerankers.listwise.thinking import Thinking, ThinkingOptions, thought_cost

    reserved = int(getattr(getattr(prompter, "builder", None), "thought_budget", 0) or 0)
    if getattr(options, "thinking", None) is None and not reserved:
        return None
    settings = ThinkingOptions.of(options)
    if settings.thinks:
        factor = float(options.sim_think_noise) if simulated else 1.0
        return Thought(settings, gate, factor, thought_cost(options))
    if reserved:  # every call reasons, its thought at most the budget
        return Thought(dataclasses.replace(settings, thinking=Thinking.on), None, 1.0, reserved)
    return None


def rehearse(strategy: Strategy, tasks: Sequence[RankingTask], models: Sequence[Mapping[str, Mapping[str, float]]],
             noise: float, seeds: Sequence[int], *, persistent: bool = False, thought: Thought | None = None
             ) -> dict[str, list[tuple[int, int, int]]]:
    """Each query's calls, documents sent and thought tokens in each rehearsal (the driver playing the method against
    the simulated reranker; the n-th seed's grades are ``models[n % len(models)]``; ``persistent``: its error drawn
    once per query and document, for a pointwise backend; ``thought``: the run's thinking, played as it runs)."""
    calls: dict[str, list[tuple[int, int, int]]] = {t.qid: [] for t in tasks}
    workers = min(len(seeds), os.cpu_count() or 1)
    turns = [(n % len(models), seed) for n, seed in enumerate(seeds)]
    global _REHEARSED
    if workers > 1 and "fork" in multiprocessing.get_all_start_methods():
        # a forked worker inherits it (a strategy need not pickle)
        _REHEARSED = (strategy, tasks, models, noise, persistent, thought)
        try:
            with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
                played = list(pool.map(_forked, turns))
        finally:
            _REHEARSED = None
    else:
        played = [_play(strategy, tasks, models[m], (noise, persistent), s, thought) for m, s in turns]
    for one in played:
        for qid, n in one.items():
            calls[qid].append(n)
    return calls


#: what forked rehearsal workers play (set only while they run)
_REHEARSED: tuple | None = None


def _forked(turn: tuple[int, int]) -> dict[str, tuple[int, int, int]]:
    strategy, tasks, models, noise, persistent, thought = _REHEARSED
    return _play(strategy, tasks, models[turn[0]], (noise, persistent), turn[1], thought)


def _play(strategy: Strategy, tasks: Sequence[RankingTask], grades: Mapping[str, Mapping[str, float]],
          noise: tuple[float, bool], seed: int, thought: Thought | None = None) -> dict[str, tuple[int, int, int]]:
    """One rehearsal: each query's calls, documents sent and thought tokens (``noise``: its sd, and whether it is
    drawn once per query and document, the same in every window, and none per window; ``thought``: the run's
    thinking, its thoughts billed at :attr:`Thought.tokens` each)."""
    from ..rerankers.backends.simulated import SimulatedReranker
    from .driver import Driver

    sd, persistent = noise
    thinks = {} if thought is None else {"thinking": thought.settings, "think_noise": thought.noise,
                                         "think_tokens": thought.tokens}
    oracle = (SimulatedReranker(dict(grades), noise=0.0, seed=seed, persistent=sd, **thinks) if persistent else
              SimulatedReranker(dict(grades), noise=sd, seed=seed, **thinks))
    driver = Driver(strategy.for_run(), oracle, None, max(1, len(tasks)), gate=None if thought is None else thought.gate)
    return {o.qid: (o.tally.calls, o.tally.docs_sent, o.tally.reasoning_tokens) for o in driver.run(tasks)}


def cost_of(strategy: Strategy, task: RankingTask, docs: Mapping[str, Doc], prompter: Any) -> Cost | None:
    """A query's tokens a call and a document, in and out: its candidates in windows of the method's size (its first
    round's) and of half that size, each candidate once in each, counted by the backend's form without its model
    (:meth:`~acurank_cli.rerankers.backend.RerankerBase.window_tokens`: a listwise LLM's prompts, minilm's
    tokenizer); the line through the two means (None: nothing counts, or no window)."""
    if prompter is None:
        return None
    from .driver import task_scores, window_request
    from ..method.strategy import first_round

    first = first_round(strategy, task)
    if not first:
        return None
    ids = [c.docid for c in task.candidates]
    scores = task_scores(task)
    points = []
    for size in sorted({max(2, max(len(w) for w in first) // 2), max(len(w) for w in first)}):
        windows = [w for w in (tuple(ids[j:j + size]) for j in range(0, len(ids), size)) if len(w) >= 2]
        counts = [prompter.window_tokens(window_request(task, w, docs, scores)) for w in windows]
        if any(c is None for c in counts):
            return None
        points.append((statistics.fmean(len(w) for w in windows), statistics.fmean(i for i, _ in counts),
                       statistics.fmean(o for _, o in counts)))
    if len(points) == 1:  # windows of two: the whole cost a call
        return Cost((points[0][1], points[0][2]), (0.0, 0.0))
    (s1, i1, o1), (s2, i2, o2) = points
    slope = ((i2 - i1) / (s2 - s1), (o2 - o1) / (s2 - s1))
    return Cost((i2 - slope[0] * s2, o2 - slope[1] * s2), slope)


def estimate(strategy: Strategy, tasks: Sequence[RankingTask], docs: Any, prompter: Any, *,
             models: Sequence[Mapping[str, Mapping[str, float]]], noise: float, seeds: Sequence[int],
             prices: tuple[float, float] | None, what: str, persistent: bool = False,
             thought: Thought | None = None) -> Bill:
    """The bill of running ``strategy`` over ``tasks`` (see the module's doc); ``docs``: the passages by id, one
    mapping for every query (a run's), or a function of a task giving its own (the API's); ``models``: the grades
    the rehearsals take in turn (:func:`rehearsal_grades`); ``thought``: the run's thinking (its thought tokens are
    output tokens, as the stats count them)."""
    played = rehearse(strategy, tasks, models, noise, seeds, persistent=persistent, thought=thought)
    texts_of = docs if callable(docs) else (lambda task: docs)
    costs = {t.qid: cost_of(strategy, t, texts_of(t), prompter) for t in tasks}
    priced = all(c is not None for c in costs.values())
    rows, totals = [], [[0.0, 0.0, 0.0] for _ in seeds]
    for t in tasks:
        draws = played[t.qid]
        tokens = [_plus(costs[t.qid].of(c, d), r) for c, d, r in draws] if priced else None
        rows.append(QueryBill(t.qid, Spread.of([c for c, _, _ in draws]),
                              None if tokens is None else Spread.of([x for x, _ in tokens]),
                              None if tokens is None else Spread.of([y for _, y in tokens])))
        for r, (c, _, _) in enumerate(draws):
            totals[r][0] += c
            if tokens is not None:
                totals[r][1] += tokens[r][0]
                totals[r][2] += tokens[r][1]
    total = QueryBill("total", Spread.of([t[0] for t in totals]),
                      Spread.of([t[1] for t in totals]) if priced else None,
                      Spread.of([t[2] for t in totals]) if priced else None)
    exact = all(len({c for c, _, _ in v}) == 1 for v in played.values())
    return Bill(tuple(rows), total, exact, what, prices)


def _plus(tokens: tuple[float, float], thought: int) -> tuple[float, float]:
    """A rehearsal's tokens in and out, its thought tokens added to those out."""
    return tokens[0], tokens[1] + thought


__all__ = ["Bill", "Cost", "GRADES", "QueryBill", "REHEARSALS", "Spread", "Thought", "estimate", "rehearsal_grades",
           "thought_of"]
