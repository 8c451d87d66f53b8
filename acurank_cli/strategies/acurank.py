"""AcuRank: uncertainty-aware adaptive reranking with TrueSkill ratings (NeurIPS 2025).

Follows ../shared/spec/acurank-semantics.md: initial pass in disjoint windows of m, then adaptive
groups over the uncertain set C = {i : eps < s_i < 1 - eps}, s_i = P(x_i > t), sum_i s_i = k.
(Other uncertainty rules, --uncertainty exact | entropy, are in acurank_cli/uncertainty.py.)
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from ..params import ANY_INT, ParameterError, at_least, between, check_domains, param
from ..ratings import Init, Updater, get_updater, initial_ratings, update_groups
from ..records import DocRating, Phase, Ranked, RankingTask, RatingsSnapshot, Step
from ..uncertainty import Assessment, Uncertainty, assess
from .base import Plan, query_rng


class Partition(str, enum.Enum):
    """How the uncertain set C is cut into groups of m: in s_i order, or shuffled (ablation)."""

    sequential = "sequential"
    random = "random"


class StopRule(str, enum.Enum):
    """When to stop: |C| < tau (then one final pass), or top-k unchanged after an iteration."""

    uncertain = "uncertain"
    topk_stable = "topk-stable"


@dataclass(frozen=True)
class AcuRankParams:
    """Parameters in the paper's names: cutoff k, tolerance eps, stop threshold tau, window m,
    adaptive-group budget B (``budget``) or total call cap N (``cap``, acurank-N)."""

    k: int = param(10, at_least(1))
    #: eps < 1/2, or {eps < s_i < 1 - eps} is empty
    eps: float = param(0.01, between(0.0, 0.5, lo_open=True, hi_open=True))
    tau: int = param(10, at_least(0))  # 0: never stop on |C| < tau (only when C is empty or B is spent)
    #: a window of one document is never sent: m >= 2
    m: int = param(20, at_least(2), flag="--window")
    budget: int = param(100, at_least(0))
    cap: int | None = param(None, at_least(1), flag="acurank-N")
    init: Init = Init.score
    partition: Partition = Partition.sequential
    stop: StopRule = StopRule.uncertain
    seed: int = param(0, ANY_INT)
    updater: Updater = Updater.fast
    #: Round cap R (--max-rounds): the initial pass is round 1, each adaptive iteration one round; the
    #: last allowed round is a final pass over {s_i > eps}, as when |C| < tau. None: no cap.
    max_rounds: int | None = param(None, at_least(1))
    #: Which documents are uncertain (--uncertainty): threshold (the paper's s_i), exact (p_i = P(r_i <= k))
    #: or entropy (of the rank distribution truncated at k); see acurank_cli/uncertainty.py.
    uncertainty: Uncertainty = Uncertainty.threshold

    def __post_init__(self) -> None:
        """Check every parameter's domain; accept plain strings for the enum-valued ones (as from a
        config or a script)."""
        check_domains(self)
        for name, kind in (("init", Init), ("partition", Partition), ("stop", StopRule), ("updater", Updater),
                           ("uncertainty", Uncertainty)):
            value = getattr(self, name)
            try:
                object.__setattr__(self, name, kind(value))
            except ValueError:
                raise ParameterError(name, value, "one of " + ", ".join(v.value for v in kind)) from None

    def check_task(self, n: int, qid: str) -> None:
        """acurank-N promises at most N calls: N must cover the initial pass over n candidates."""
        if self.cap is not None and self.cap < math.ceil(n / self.m):
            raise InputError(f"acurank-{self.cap}: query {qid} has {n} candidates, whose initial pass alone takes "
                             f"{math.ceil(n / self.m)} calls of m = {self.m}; use acurank-N with N >= "
                             f"{math.ceil(n / self.m)} or a smaller --depth")


def sort_by(order: list[int], key: np.ndarray) -> list[int]:
    """Stable sort of candidate indices by ``key`` descending."""
    return sorted(order, key=lambda i: -key[i])


class AcuRank:
    """The AcuRank strategy (variants acurank, acurank-H, acurank-HH, acurank-N)."""

    def __init__(self, name: str, params: AcuRankParams):
        self.name = name
        self.params = params
        self._update = get_updater(params.updater)

    @property
    def init(self):
        """How ratings start from first-stage scores (their validity is checked before any call)."""
        return self.params.init

    def check(self, task: RankingTask) -> None:
        """Refuse, before any call, a task the parameters cannot honour (acurank-N below its initial pass)."""
        self.params.check_task(task.n, task.qid)

    def adaptive_budget(self, n: int) -> int:
        """B: adaptive groups allowed (acurank-N: N minus the initial pass's windows)."""
        p = self.params
        if p.cap is None:
            return p.budget
        return max(0, p.cap - math.ceil(n / p.m))

    def plan(self, task: RankingTask) -> Plan:
        """Initial pass, adaptive loop over the uncertain set, final order by mu."""
        p = self.params
        docids = [c.docid for c in task.candidates]
        n = len(docids)
        mu, sigma = initial_ratings([c.score for c in task.candidates], p.init, task.qid)

        def snapshot(a: Assessment | None = None):
            """The ratings now, with the iteration's assessment (None: assessed only if the snapshot is
            built, as for the done step, which traces and the API read but a plain run does not)."""
            mu_now, sigma_now = mu.copy(), sigma.copy()

            def build() -> RatingsSnapshot:
                seen = a or assess(p.uncertainty, mu_now, sigma_now, p.k, p.eps)
                ranked = sort_by(list(range(n)), mu_now)
                return RatingsSnapshot(seen.t, tuple(
                    DocRating(docids[i], float(mu_now[i]), float(sigma_now[i]), float(seen.prob[i]), r)
                    for r, i in enumerate(ranked, 1)
                ))

            return build

        def rerank(groups, phase: Phase, iteration: int, uncertain: int | None, snap=None):
            perms = yield Step(
                tuple(tuple(docids[i] for i in g) for g in groups), phase, iteration, uncertain, snapshot=snap
            )
            update_groups(self._update, mu, sigma, groups, perms)
            return perms

        # Initial pass: disjoint windows of m in first-stage order.
        order = list(range(n))
        windows = [order[s : s + p.m] for s in range(0, n, p.m)]
        yield from rerank(windows, Phase.initial, 0, None)
        order = [i for w in windows for i in sort_by(w, mu)]
        order = sort_by(order, mu)

        budget = self.adaptive_budget(n)
        capped = "call-cap" if p.cap is not None else "budget"
        stop = capped
        rounds = 1  # the initial pass
        if p.max_rounds is not None and p.max_rounds <= rounds:
            budget, stop = 0, "round-cap"
        iteration = 0
        rng = query_rng(p.seed, task.qid, "partition")
        topk = tuple(order[: p.k])
        while iteration < budget:
            a = assess(p.uncertainty, mu, sigma, p.k, p.eps)
            s = a.prob
            order = sort_by(order, s)
            chosen = [i for i in order if a.uncertain[i]]
            uncertain = len(chosen)
            final = p.stop is StopRule.uncertain and uncertain < p.tau
            last_round = p.max_rounds is not None and rounds + 1 >= p.max_rounds
            if last_round and not final:
                final, capped = True, "round-cap"
            if final:
                chosen = [i for i in order if s[i] > p.eps]
            if p.partition is Partition.random:
                rng.shuffle(chosen)
            groups = [chosen[j : j + p.m] for j in range(0, len(chosen), p.m)]
            wanted = len(groups)
            groups = groups[: budget - iteration]
            if not groups:
                stop = ("round-cap" if capped == "round-cap" else "tau") if final else "converged"
                break
            phase = Phase.final if final else Phase.adaptive
            yield from rerank(groups, phase, iteration, uncertain, snapshot(a))
            iteration += len(groups)
            rounds += 1
            if final:
                stop = "tau" if len(groups) == wanted and capped != "round-cap" else capped
                break
            if p.stop is StopRule.topk_stable:
                new_topk = tuple(sort_by(order, mu)[: p.k])
                if new_topk == topk:
                    stop = "topk-stable"
                    break
                topk = new_topk
        ranked = sort_by(order, mu)
        yield Step((), Phase.done, iteration, None, stop, snapshot())
        return tuple(Ranked(docids[i], float(mu[i])) for i in ranked)
