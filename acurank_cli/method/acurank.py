"""AcuRank: uncertainty-aware adaptive reranking with TrueSkill ratings (NeurIPS 2025), Algorithm 1.

Follows docs/methods.md ("AcuRank"): an initial pass in disjoint windows of m, then adaptive
groups over the uncertain set C = {i : eps < s_i < 1 - eps}, s_i = P(x_i > t), sum_i s_i = k, until
|C| < tau (then one final pass over {s_i > eps}), a stable top-k, or a budget; final order by mu.
(The other uncertainty rules, --uncertainty exact | entropy, are in acurank_cli/method/uncertainty.py.)
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, Generator

import numpy as np

from ..params import ParameterError
from ..records import DocRating, Phase, Ranked, RankingTask, RatingsSnapshot, Step, StopReason, pivot_id
from .strategy import Plan, Strategy, chunks, query_rng, sort_by
from .acurank_params import AcuRankParams, Partition, StopRule, Uncertainty
from .trueskill import get_updater, prior_scale_problem, task_priors, update_groups
from .thinking_gate import unsettled
from .uncertainty import Assessment, assess, prefetch, top_k_probabilities


@dataclass(frozen=True)
class Choice:
    """One adaptive iteration's decision: the groups of candidate indices to rerank (already cut to what
    the budget allows), |C|, whether this is the final pass, how many groups it wanted before the cut,
    and whether it is final because the round cap R was reached (rather than |C| < tau)."""

    groups: tuple[tuple[int, ...], ...]
    uncertain: int
    final: bool
    wanted: int
    round_cap: bool


@dataclass
class Ratings:
    """One query's ratings: candidate docids, mu and sigma (updated in place), the current order. With a pivot
    (``--pivot``), mu and sigma hold one more player after the candidates: the reference player, ``pivot`` its id."""

    docids: list[str]
    mu: np.ndarray
    sigma: np.ndarray
    #: sigma before any answer (gated thinking reads how much of it is left); None: sigma as given
    prior: np.ndarray | None = None
    #: the pivot's document id (its rating is the last of mu and sigma), or None
    pivot: str | None = None

    def __post_init__(self) -> None:
        if self.prior is None:
            self.prior = self.sigma.copy()

    @property
    def n(self) -> int:
        """The candidates (the pivot not counted)."""
        return len(self.docids)

    @property
    def candidates(self) -> tuple[np.ndarray, np.ndarray]:
        """The candidates' mu and sigma (views; the pivot's rating left out)."""
        return self.mu[: self.n], self.sigma[: self.n]

    def snapshot(self, k: int, eps: float, rule: Uncertainty = Uncertainty.threshold, a: Assessment | None = None,
                 final: bool = False) -> Callable[[], RatingsSnapshot]:
        """The ratings now, with the iteration's assessment under ``rule`` at cutoff k and tolerance eps
        (None: assessed only if the snapshot is built, as for the done step, which traces and the API read
        but a plain run does not); ``final``: also p_topk = P(rank <= k) per document, exact."""
        n, docids = self.n, self.docids
        mu, sigma = self.mu[:n].copy(), self.sigma[:n].copy()
        pivot = None if self.pivot is None else (float(self.mu[n]), float(self.sigma[n]))

        def build() -> RatingsSnapshot:
            seen = a or assess(rule, mu, sigma, k, eps)
            top = top_k_probabilities(mu, sigma, k) if final else None
            ranked = sort_by(list(range(len(docids))), mu)
            return RatingsSnapshot(seen.t, tuple(
                DocRating(docid=docids[i], mu=float(mu[i]), sigma=float(sigma[i]), s=float(seen.prob[i]), rank=r,
                          p_topk=None if top is None else float(top[i]))
                for r, i in enumerate(ranked, 1)), pivot)

        return build

    def unsettled(self, groups) -> Callable[[], tuple[float, ...]]:
        """Lazily, each group's share of prior uncertainty left (:func:`~acurank_cli.method.thinking_gate.unsettled`)
        under the ratings now: gated thinking asks, a plain run does not."""
        sigma, prior, groups = self.sigma.copy(), self.prior, [list(g) for g in groups]
        return lambda: unsettled(sigma, prior, groups)


class AcuRank(Strategy):
    """The AcuRank strategy (variants acurank, acurank-H, acurank-HH, acurank-N, acurank-rR)."""

    knows_uncertainty = True

    def __init__(self, name: str, params: AcuRankParams, target=None, pivot: bool = False):
        self.name = name
        self.params = params
        self._update = get_updater(params.updater)
        #: where the uncertain set's boundary lies (None: the top k, the paper's): a cut's
        #: (:class:`~acurank_cli.relevance.CutTarget`, ``--cut``), whose size K the target says from the ratings
        self.target = target
        #: a reference player joins every window (``--pivot``, docs/relevance.md): rated in the same game, it anchors
        #: the relevance boundary; it is never ranked, assessed or counted as a candidate
        self.pivot = pivot

    def aimed_at(self, target) -> "AcuRank":
        """This method with its uncertain set around ``target``'s boundary instead of the top k's."""
        return AcuRank(self.name, self.params, target, self.pivot)

    def with_pivot(self) -> "AcuRank":
        """This method with a pivot in every window it sends."""
        return AcuRank(self.name, self.params, self.target, True)

    def _boundary(self, r: Ratings, a: Assessment) -> tuple[int, Assessment]:
        """The k the uncertain set is about and the assessment at it: the method's k, or the cut's size K under the
        ratings now, kept within 1..n-1 so that a boundary exists. The target reads P(relevant) as the map reads
        final ratings: from the exact p_topk = P(rank <= k) (``a``'s own under --uncertainty exact, computed here
        under the threshold rule, whose s_i are another quantity)."""
        if self.target is None:
            return self.params.k, a
        mu, sigma = r.candidates
        pivot = None if r.pivot is None else (float(r.mu[r.n]), float(r.sigma[r.n]))
        p_topk = a.prob if self.params.uncertainty is Uncertainty.exact else top_k_probabilities(mu, sigma, self.params.k)
        size = min(max(1, self.target.size(mu, p_topk, sigma, pivot)), max(1, r.n - 1))
        if size == self.params.k:
            return size, a
        return size, assess(self.params.uncertainty, mu, sigma, size, self.params.eps)

    def parameters(self):
        return self.params

    @property
    def init(self):
        """How ratings start from first-stage scores (their validity is checked before any call)."""
        return self.params.init

    def check(self, task: RankingTask) -> None:
        """Refuse, before any call, a task the parameters cannot honour (acurank-N below its initial pass)."""
        self.params.check_task(task.n, task.qid)

    @property
    def set_budget(self):
        """The query-set budget (--budget-total), which the driver allocates over the whole run; or None."""
        return self.params.set_budget

    @property
    def cutoff(self) -> int:
        return self.params.k

    def warnings(self, tasks) -> list[str]:
        """First-stage scores too small for the paper's prior under the fixed beta (see
        :func:`~acurank_cli.method.trueskill.prior_scale_problem`)."""
        problem = prior_scale_problem([c.score for t in tasks for c in t.candidates], self.params.init,
                                      self.params.sigma)
        return [] if problem is None else [problem]

    def check_set(self, tasks) -> None:
        """A query-set budget must cover every query's initial pass (refused before any call)."""
        budget = self.set_budget
        if budget is None:
            return
        m = self.params.m
        first = sum(t.n // m + (t.n % m >= 2) for t in tasks)  # windows of one document are never sent
        total = budget.calls(len(tasks))
        if total < first:
            raise ParameterError("budget_total", self.params.budget_total,
                                 f"at least the initial passes' {first} calls over {len(tasks)} queries "
                                 f"({first / max(1, len(tasks)):.2f}x); {total} calls given", flag="--budget-total")

    def adaptive_budget(self, n: int) -> int:
        """B: adaptive groups allowed (acurank-N: N minus the initial pass's windows)."""
        p = self.params
        return p.budget if p.cap is None else max(0, p.cap - p.initial_calls(n))

    @property
    def cap_reason(self) -> StopReason:
        """What stops a query that spends its adaptive groups: the call cap N (acurank-N) or the budget B."""
        return StopReason.call_cap if self.params.cap is not None else StopReason.budget

    # -- Algorithm 1 ---------------------------------------------------------------------------

    def most_calls(self, task: RankingTask) -> int:
        """The initial pass's windows plus the adaptive groups its budget allows (the final pass is among them): the
        call cap N for acurank-N, ceil(n/m) + B otherwise."""
        return len(chunks(range(task.n), self.params.m)) + self.adaptive_budget(task.n)

    def plan(self, task: RankingTask) -> Plan:
        """Initial pass, adaptive loop over the uncertain set, final order by mu."""
        p = self.params
        mu, sigma = task_priors(task, p.init, p.sigma, p.m)
        pivot = None
        if self.pivot and len(mu):  # the pivot's prior: the candidates' mean mu, their widest sigma
            mu, sigma, pivot = np.append(mu, mu.mean()), np.append(sigma, sigma.max()), pivot_id(task.qid)
        r = Ratings([c.docid for c in task.candidates], mu, sigma, pivot=pivot)
        order = yield from self._initial_pass(r)
        budget, stop = self.adaptive_budget(r.n), self.cap_reason
        if p.max_rounds is not None and p.max_rounds <= 1:  # the initial pass was the only round allowed
            budget, stop = 0, StopReason.round_cap
        iteration, rounds = 0, 1
        rng = query_rng(p.seed, task.qid, "partition")
        topk = tuple(order[: p.k])
        while iteration < budget:
            a = assess(p.uncertainty, *r.candidates, p.k, p.eps)
            boundary, a = self._boundary(r, a)
            order = sort_by(order, a.prob)
            choice = self.choose(order, a, rounds, budget - iteration, rng)
            if not choice.groups:
                stop = self._stop_without_groups(choice)
                break
            phase = Phase.final if choice.final else Phase.adaptive
            value = self.expected_misses(order, a, r) if p.budget_total is not None else None
            perms = yield from self._rerank(r, choice.groups, phase, iteration, choice.uncertain,
                                            snap=r.snapshot(p.k, p.eps, p.uncertainty, a), value=value)
            if perms is None:  # not granted under the query-set budget
                stop = StopReason.set_budget
                break
            iteration += len(choice.groups)
            rounds += 1
            if choice.final:
                stop = self._stop_after_final(choice)
                break
            if p.stop is StopRule.topk_stable:
                new_topk = tuple(sort_by(order, r.mu)[: boundary])
                if new_topk == topk:
                    stop = StopReason.topk_stable
                    break
                topk = new_topk
        ranked = sort_by(order, r.mu)
        yield Step(windows=(), phase=Phase.done, iteration=iteration, uncertain=None, stop=stop,
                   snapshot=r.snapshot(p.k, p.eps, p.uncertainty, final=True))
        return tuple(Ranked(r.docids[i], float(r.mu[i])) for i in ranked)

    def _initial_pass(self, r: Ratings) -> Generator[Step, object, list[int]]:
        """Disjoint windows of m in first-stage order; returns the candidates ordered by the new mu."""
        windows = chunks(range(r.n), self.params.m)
        prefetch()  # scipy's ndtr is first needed when these windows answer
        yield from self._rerank(r, windows, Phase.initial, 0, None)
        return sort_by([i for w in windows for i in sort_by(w, r.mu)], r.mu)

    def choose(self, order: list[int], a: Assessment, rounds: int, left: int, rng: random.Random) -> Choice:
        """The next iteration's groups, from the candidates in ``order`` (by a.prob, descending).

        C = the uncertain candidates; when |C| < tau (stop rule ``uncertain``) or the next round is the
        last one the round cap R allows, the pass is final and covers {prob > eps} instead. The set is cut
        into groups of m (shuffled first with ``--partition random``), at most ``left`` of them."""
        p = self.params
        chosen = [i for i in order if a.uncertain[i]]
        uncertain = len(chosen)
        final = p.stop is StopRule.uncertain and uncertain < p.tau
        round_cap = not final and p.max_rounds is not None and rounds + 1 >= p.max_rounds
        if final or round_cap:
            chosen = [i for i in order if a.prob[i] > p.eps]
        if p.partition is Partition.random:
            rng.shuffle(chosen)
        groups = chunks(chosen, p.m)
        return Choice(tuple(tuple(g) for g in groups[:left]), uncertain, final or round_cap, len(groups), round_cap)

    def _stop_without_groups(self, choice: Choice) -> StopReason:
        """Nothing to rerank: a final pass over an empty set ends by its own rule; an empty C has converged."""
        if not choice.final:
            return StopReason.converged
        return StopReason.round_cap if choice.round_cap else StopReason.tau

    def _stop_after_final(self, choice: Choice) -> StopReason:
        """After the final pass: the tau rule if the whole pass fitted in the budget, else what cut it."""
        if choice.round_cap:
            return StopReason.round_cap
        return StopReason.tau if len(choice.groups) == choice.wanted else self.cap_reason

    def expected_misses(self, order: list[int], a: Assessment, r: Ratings) -> float:
        """What the next iteration is worth under a query-set budget: k - sum of s_i over the current top k
        by mu, the expected number of true top-k documents (sum_i s_i = k) that the top k misses."""
        top = sort_by(order, r.mu)[: self.params.k]
        return float(self.params.k - sum(a.prob[i] for i in top))

    def _rerank(self, r: Ratings, groups, phase: Phase, iteration: int, uncertain: int | None, *, snap=None,
                value: float | None = None):
        """Send the groups as one step; update the ratings from the returned orders (None: not granted). With a pivot,
        every group of two or more candidates is sent with the pivot last."""
        if r.pivot is not None:
            groups = [list(g) + [r.n] if len(g) >= 2 else list(g) for g in groups]
        names = r.docids if r.pivot is None else [*r.docids, r.pivot]
        perms = yield Step(windows=tuple(tuple(names[i] for i in g) for g in groups), phase=phase,
                           iteration=iteration, uncertain=uncertain,
                           value=value, snapshot=snap, unsettled=r.unsettled(groups))
        if perms is not None:
            update_groups(self._update, r.mu, r.sigma, groups, perms, self.params.outcome)
        return perms
