"""acurank-auto: AcuRank that learns its model of the reranker from the reranker's own answers.

AcuRank rates every candidate N(mu_i, sigma_i^2) and updates the ratings from each answer as a TrueSkill
game whose performance noise beta is the library's 25/6, whatever reranker answers. beta says how much one
answer is worth against the first-stage prior: a consistent reranker deserves a small beta (one answer
nearly settles an order), a self-contradicting one a large beta (the prior keeps its weight). Here beta is
learned, and what a consistent reranker proves by transitivity is used.

Noise models. The query's candidates are rated by G models at once, one per beta_g = c_g * S, where S is
the median initial sigma of the query (so the grid is free of the first stage's score scale) and c_g the
grid (``--beta-grid``, default 1/16, 1/8, 1/4, 1, 4: steps of 2 where consistent rerankers choose, of 4 above;
the seven values 1/16 ... 4 in steps of 2 gave the comparison's verdicts, each figure within 0.005, at about
1.2x the five values' engine time; BENCHMARKS.md 12 has the measured ratios to acurank's). Every answer updates
every model (TrueSkill with its own beta_g, the same factor graph as AcuRank's).

Choosing a model. Before an answer updates them, each model predicts the window's order by its mu. The
prediction scores its agreement with the answer where it matters, at the top: the nDCG of the predicted
order with the answer as the ideal one,

    a_g = sum_r gain(pos(pi_g(r))) / log2(2 + r)  /  sum_r gain(r) / log2(2 + r),   gain(p) = 1 / log2(2 + p),

where pi_g(r) is the document model g puts at rank r and pos(d) its place in the answer (0 = best). A
rank-based score is used rather than the answer's likelihood: with many near-ties (the non-relevant bulk
of a list) the reranker's order among them is noise, the likelihood of that noise favours the largest
beta whatever the reranker's noise on what matters, while an order among ties that no model can predict
costs every model alike. The scores a_g are summed over every answer of every query of the run
(``--beta-pool run``: the queries advance in step, and a decision at round r uses the answers of the
rounds before it from all queries, so the outcome depends neither on query order nor on batching), or of
the query alone (``--beta-pool query``). Each iteration uses the model with the highest total (ties: the
middle one of the tied); before any answer has told the models apart, the grid's starting value (marked *,
default 1/4).

Transitive evidence. The answers also build the query's tournament graph (:mod:`.graph`: "ranked directly
above", kept as its transitive closure). Each window is presented in an order the graph agrees with (a
document's ancestors within the window first, then by mu), so a consistent reranker is never asked to
contradict itself. Before each iteration: if the first k of the order by (documents provably above,
provably below, mu) are each resolved (related to every other candidate) and none lies on a cycle, the
top k and its order are proven for a reranker that does not contradict itself, and the query stops
(``certified``; the output puts that top k first in its proven order, the rest by mu). A reranker that
contradicts itself makes cycles, and then nothing is certified through them: the ratings decide.

Otherwise each iteration is AcuRank's (threshold rule, C = {eps < s_i < 1 - eps} under the chosen model,
groups of m in s_i order, the final pass over {s_i > eps} when |C| < tau, the budget B or the cap N), and
the final order is by the chosen model's mu.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from .compiled import jit

from ..records import Phase, Ranked, RankingTask, Step, StopReason
from .acurank import Ratings
from .strategy import Plan, Strategy, chunks, sort_by
from .choices import Outcome, Pool, Uncertainty
from .graph import ABOVE, BELOW, KNOWN, SAME, TournamentGraph
from .acurank_params import AutoParams
from .trueskill import confidence, get_row_updater, task_priors
from .uncertainty import assess


def agreement(mu: np.ndarray, window: Sequence[int], perm: Sequence[int]) -> float:
    """How well ``mu`` predicted an answer: ``window`` holds the candidate indices as presented, ``perm`` the
    answer (positions in the window, best first). The nDCG of the order by mu (ties in presented order, what
    the model knew) with the answer as the ideal, gains and discounts 1/log2(2 + position)."""
    return float(agreements(mu[None, :], window, perm)[0])


def agreements(mu: np.ndarray, window: Sequence[int], perm: Sequence[int]) -> np.ndarray:
    """:func:`agreement` of every row of ``mu`` (one a noise model)."""
    window = np.asarray(window, dtype=np.intp)
    return _agreements(mu, window, np.asarray(perm, dtype=np.intp), _discounts(len(window)))


@jit()
def _agreements(mu, window, perm, disc):  # pragma: no cover - compiled
    """Per row g: the nDCG of the order by row g's mu (descending, ties in presented order: a stable sort of -mu)
    with the answer as the ideal: sum_r disc[pos(pi_g(r))] disc[r] / sum_r disc[r]^2, summed in rank order."""
    n = window.size
    place = np.empty(n, dtype=np.intp)
    for j in range(n):
        place[perm[j]] = j  # answer position of each presented doc
    ideal = 0.0
    for j in range(n):
        ideal += disc[j] * disc[j]
    out = np.empty(mu.shape[0])
    order = np.empty(n, dtype=np.intp)
    for g in range(mu.shape[0]):
        for j in range(n):  # insertion sort: stable
            x = mu[g, window[j]]
            i = j
            while i > 0 and mu[g, window[order[i - 1]]] < x:
                order[i] = order[i - 1]
                i -= 1
            order[i] = j
        dcg = 0.0
        for r in range(n):
            dcg += disc[place[order[r]]] * disc[r]
        out[g] = dcg / ideal
    return out


@functools.lru_cache(maxsize=64)
def _discounts(n: int) -> np.ndarray:
    out = 1.0 / np.log2(2.0 + np.arange(n))
    out.flags.writeable = False
    return out


class Evidence:
    """The models' summed agreement scores, and the choice they make: the run's (one object shared by every
    query of a run) or one query's. In a run, a query adds its scores as its answers arrive and reads the
    choice only after every query has answered the round (the driver's lockstep and the plan's wait steps)."""

    def __init__(self, size: int, start: int):
        self.total = np.zeros(size)
        self.start = start

    def add(self, scores: np.ndarray) -> None:
        self.total += scores

    def choice(self) -> int:
        """The model with the highest total (ties: the middle one of the tied); the start before any answer
        has told the models apart."""
        best = self.total.max()
        tied = np.flatnonzero(self.total >= best - 1e-9)
        if len(tied) == len(self.total):
            return self.start
        return int(tied[len(tied) // 2])


class NoiseModels:
    """One query's ratings under every beta of the grid: ``mu[g]``, ``sigma[g]`` for model g."""

    def __init__(self, mu: np.ndarray, sigma: np.ndarray, betas: Sequence[float], update_rows,
                 outcome: Outcome = Outcome.order):
        self.betas = tuple(float(b) for b in betas)
        self.mu = np.tile(mu, (len(self.betas), 1))
        self.sigma = np.tile(sigma, (len(self.betas), 1))
        self._update_rows = update_rows
        self.outcome = outcome

    def answer(self, window: Sequence[int], perm: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Score every model's prediction of an answer (``window``: candidate indices as presented, ``perm``:
        positions best first), then update every model with it; returns the scores and the answer as candidate
        indices, best first."""
        window = np.asarray(window, dtype=np.intp)
        positions = np.asarray(perm, dtype=np.intp)
        ranked = window[positions]
        scores = agreements(self.mu, window, positions)
        soft = confidence(perm) if self.outcome is Outcome.graded else None
        self._update_rows(self.mu, self.sigma, ranked, self.betas, **({} if soft is None else {"confidence": soft}))
        return scores, ranked


def present(window: Sequence[int], reach: np.ndarray, mu: np.ndarray) -> list[int]:
    """The window in an order the answers so far agree with: by the number of the window's documents
    provably above each (its ancestors in the closure ``reach``), then by mu, then as given."""
    return _present(np.asarray(window, dtype=np.intp), reach, mu).tolist()


@jit()
def _present(window, reach, mu):  # pragma: no cover - compiled (exact: counts and comparisons)
    n = window.size
    ancestors = np.zeros(n, dtype=np.int64)
    for a in range(n):
        for b in range(n):
            if reach[window[a], window[b]]:
                ancestors[b] += 1
    order = np.empty(n, dtype=np.intp)
    for j in range(n):  # insertion sort by (ancestors ascending, mu descending): stable, ties as given
        i = j
        while i > 0 and (ancestors[order[i - 1]] > ancestors[j] or (
                ancestors[order[i - 1]] == ancestors[j] and mu[window[order[i - 1]]] < mu[window[j]])):
            order[i] = order[i - 1]
            i -= 1
        order[i] = j
    return window[order]


def certified_top(graph: TournamentGraph, mu: np.ndarray, k: int) -> list[int] | None:
    """The proven top k, best first, or None: the first k by (in, out, -mu, index) when each is resolved and on
    no cycle (so each one's rank is exactly its in-count)."""
    top = _certified_top(graph.tally, mu, k)
    return [int(i) for i in top] if len(top) else None


@jit()
def _certified_top(tally, mu, k):  # pragma: no cover - compiled (exact: counts and comparisons)
    """:func:`certified_top`'s candidates, or an empty array: the first min(k, n) by (in, out, -mu, index), picked
    one at a time, stopping at the first that is unresolved or on a cycle (``tally``: the graph's counts)."""
    n = mu.size
    n_in = tally[ABOVE] - tally[SAME]
    n_out = tally[BELOW] - tally[SAME]
    top = np.empty(min(k, n), dtype=np.intp)
    taken = np.zeros(n, dtype=np.bool_)
    for r in range(top.size):
        best = -1
        for u in range(n):
            if taken[u]:
                continue
            if best < 0 or n_in[u] < n_in[best] or (n_in[u] == n_in[best] and (
                    n_out[u] < n_out[best] or (n_out[u] == n_out[best] and mu[u] > mu[best]))):
                best = u
        if tally[KNOWN, best] < n - 1 or tally[SAME, best]:
            return top[:0]
        taken[best] = True
        top[r] = best
    return top



@dataclass(frozen=True)
class _Play:
    """One query's state under acurank-auto, as every step reads it: its document ids, the noise models' ratings,
    the tournament graph, the run's (or the query's) evidence, and the prior sigmas."""

    docids: list[str]
    models: "NoiseModels"
    graph: TournamentGraph
    evidence: "Evidence"
    prior: np.ndarray

class AcuRankAuto(Strategy):
    """acurank-auto and acurank-auto-N (at most N calls a query)."""

    knows_uncertainty = True

    def __init__(self, name: str, params: AutoParams, evidence: Evidence | None = None):
        self.name = name
        self.params = params
        self._update_rows = get_row_updater(params.updater)
        self._evidence = evidence

    def parameters(self):
        return self.params

    @property
    def init(self):
        return self.params.init

    @property
    def lockstep(self) -> bool:
        return self.params.beta_pool is Pool.run

    @property
    def cutoff(self) -> int:
        return self.params.k

    def for_run(self) -> "AcuRankAuto":
        """A copy holding this run's evidence (pooled over its queries with ``--beta-pool run``)."""
        pooled = Evidence(len(self.params.factors), self.params.start) if self.lockstep else None
        return AcuRankAuto(self.name, self.params, pooled)

    def check(self, task: RankingTask) -> None:
        self.params.check_task(task.n, task.qid)

    def adaptive_budget(self, n: int) -> int:
        """B: adaptive groups allowed (acurank-auto-N: N minus the initial pass's windows)."""
        p = self.params
        return p.budget if p.cap is None else max(0, p.cap - p.initial_calls(n))

    def _step(self, play: "_Play", groups, phase: Phase, iteration: int, uncertain: int | None, snapshot=None):
        """Send the groups; score and update every model, grow the graph; then (pooled) wait for the run."""
        docids, models, graph, evidence = play.docids, play.models, play.graph, play.evidence
        chosen = evidence.choice()
        gate = Ratings(docids, models.mu[chosen], models.sigma[chosen], play.prior).unsettled(groups)
        perms = yield Step(windows=tuple(tuple(docids[i] for i in g) for g in groups), phase=phase,
                           iteration=iteration, uncertain=uncertain, snapshot=snapshot, unsettled=gate)
        scores = np.zeros(len(self.params.factors))
        for group, perm in zip(groups, perms):
            if len(group) >= 2:
                agree, ranked = models.answer(group, perm)
                scores += agree
                graph.add_order(ranked)
        evidence.add(scores)
        if evidence is self._evidence:  # after a final pass too: the end's choice is read at the round's end
            yield Step(windows=(), phase=Phase.wait, iteration=iteration)

    def plan(self, task: RankingTask) -> Plan:
        p = self.params
        mu0, sigma0 = task_priors(task, p.init, p.sigma, p.m)
        n = len(mu0)
        scale = float(np.median(sigma0)) if n else 1.0
        models = NoiseModels(mu0, sigma0, [c * scale for c in p.factors], self._update_rows, p.outcome)
        evidence = self._evidence if self._evidence is not None else Evidence(len(p.factors), p.start)
        graph = TournamentGraph(n)
        docids = [c.docid for c in task.candidates]
        step = functools.partial(self._step, _Play(docids, models, graph, evidence, sigma0))
        windows = chunks(range(n), p.m)
        yield from step(windows, Phase.initial, 0, None)
        g = evidence.choice()
        order = sort_by([i for w in windows for i in sort_by(w, models.mu[g])], models.mu[g])
        budget = self.adaptive_budget(n)
        stop = StopReason.budget if p.cap is None else StopReason.call_cap
        iteration = 0
        proven = None
        while iteration < budget:
            g = evidence.choice()
            mu, sigma = models.mu[g], models.sigma[g]
            proven = certified_top(graph, mu, p.k)
            if proven is not None:
                stop = StopReason.certified
                break
            a = assess(Uncertainty.threshold, mu, sigma, p.k, p.eps)
            order = sort_by(order, a.prob)
            chosen = [i for i in order if a.uncertain[i]]
            uncertain = len(chosen)
            final = uncertain < p.tau
            if final:
                chosen = [i for i in order if a.prob[i] > p.eps]
            groups = [present(c, graph.reach, mu) for c in chunks(chosen, p.m)[: budget - iteration]]
            if not groups:
                stop = StopReason.tau if final else StopReason.converged
                break
            snapshot = Ratings(docids, mu, sigma).snapshot(p.k, p.eps, a=a)
            yield from step(groups, Phase.final if final else Phase.adaptive, iteration, uncertain, snapshot)
            iteration += len(groups)
            if final:
                stop = StopReason.tau if len(chunks(chosen, p.m)) == len(groups) else stop
                break
        g = evidence.choice()
        ratings = Ratings(docids, models.mu[g], models.sigma[g])
        ranked = sort_by(order, ratings.mu)
        if proven is not None:
            first = set(proven)
            ranked = proven + [i for i in ranked if i not in first]
        yield Step(windows=(), phase=Phase.done, iteration=iteration, uncertain=None, stop=stop,
                   snapshot=ratings.snapshot(p.k, p.eps, final=True),
                   beta=models.betas[g])
        return tuple(Ranked(docids[i], float(ratings.mu[i])) for i in ranked)
