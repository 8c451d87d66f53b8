"""Baselines: sliding windows (sw-x), TourRank (tourrank-x), TrueSkill-Static (ts-c1-c2-...). Their records are
also their parameters (the option fields); importing this module loads no numpy."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import InputError
from ..params import Option, at_least, check_domains
from ..records import Phase, Ranked, RankingTask, Step
from .strategy import Plan, Strategy, apply, chunks, played_calls, query_rng, sort_by
from .choices import Init, Updater
from .shared_options import INIT, SEED, UPDATER, WINDOW
from .acurank_params import coerce_choices


@dataclass(frozen=True)
class SlidingWindows(Strategy):
    """sw-x: x bottom-up passes of window m, stride m/2 (RankGPT / RankZephyr style); first-stage scores only
    order the input (no ratings: ``Strategy.init`` None), and any list can be reranked (``Strategy.check``)."""

    name: str
    passes: int = Option(domain=at_least(1), cli=False)(1)
    m: int = WINDOW(20)
    #: m / 2 (from m, not an option)
    stride: int = Option(domain=at_least(1), cli=False)(10)

    def starts(self, n: int) -> list[int]:
        """Window starts from the bottom: n-m, n-m-stride, ..., and 0 if missing."""
        starts = list(range(max(0, n - self.m), -1, -self.stride))
        if not starts or starts[-1] != 0:
            starts.append(0)
        return starts

    def most_calls(self, task: RankingTask) -> int:
        """Every pass sends a window at each start: the calls never depend on the answers."""
        return self.passes * len(self.starts(task.n)) if task.n >= 2 else 0

    def plan(self, task: RankingTask) -> Plan:
        """Each window rewrites its slice of the current list in the returned order."""
        ranking = [c.docid for c in task.candidates]
        for p in range(self.passes):
            for j, start in enumerate(self.starts(len(ranking))):
                window = tuple(ranking[start : start + self.m])
                (perm,) = yield Step(windows=(window,), phase=Phase.pass_, iteration=p + 1)
                ranking[start : start + len(window)] = apply(window, perm)
        return tuple(Ranked(d, None) for d in ranking)


@dataclass(frozen=True)
class TourRank(Strategy):
    """tourrank-x: x tournaments of five stages; documents score points per stage advanced (first-stage scores
    only order the input)."""

    name: str
    tournaments: int = Option(domain=at_least(1), cli=False)(1)
    seed: int = SEED(0)

    def check(self, task: RankingTask) -> None:
        """Every stage runs only above its size (the last one above 2): 2 candidates would get no call."""
        smallest = self.STAGES[-1][3]
        if task.n <= smallest:
            raise InputError(f"{self.name}: query {task.qid} has {task.n} candidates; TourRank's stages need more "
                             f"than {smallest} (use sw-1 for so short a list)")

    #: (candidates entering, groups, promoted per group, stage runs if n > this)
    STAGES = ((None, 5, 10, 50), (50, 5, 4, 20), (20, 1, 10, 10), (10, 1, 5, 5), (5, 1, 2, 2))

    def most_calls(self, task: RankingTask) -> int:
        """Each stage's groups are set by the number of candidates alone: the calls never depend on the answers."""
        return played_calls(self, task)

    def plan(self, task: RankingTask) -> Plan:
        """Sum points over tournaments; order by total points, ties by first-stage order."""
        docids = [c.docid for c in task.candidates]
        n = len(docids)
        total = [0] * n
        rng = query_rng(self.seed, task.qid, "tourrank")
        for tour in range(self.tournaments):
            points = [0] * n
            for stage, (top, n_groups, promote, min_n) in enumerate(self.STAGES, 1):
                if n <= min_n:
                    continue
                current = sorted(range(n), key=lambda i: -points[i])
                if top is None:
                    top, n_groups = n, max(n_groups, math.ceil(n / 20))
                entrants = current[:top]
                groups = [entrants[g::n_groups] for g in range(n_groups)]
                groups = [g for g in groups if g]
                for g in groups:
                    rng.shuffle(g)
                perms = yield Step(windows=tuple(tuple(docids[i] for i in g) for g in groups),
                                   phase=Phase(f"stage{stage}"), iteration=tour + 1)
                for g, perm in zip(groups, perms):
                    for i in apply(g, perm)[:promote]:
                        points[i] += 1
            total = [a + b for a, b in zip(total, points)]
        ranked = sorted(range(n), key=lambda i: -total[i])
        return tuple(Ranked(docids[i], None) for i in ranked)


@dataclass(frozen=True)
class TrueSkillStatic(Strategy):
    """ts-c1-c2-...: each stage reranks the current top m*c_j in groups of m, then sorts by mu."""

    name: str
    stages: tuple[int, ...]
    m: int = WINDOW(20)
    init: Init = INIT(Init.score)
    updater: Updater = UPDATER(Updater.fast)

    def __post_init__(self) -> None:
        """Check the domains; accept plain strings for the enum-valued parameters, as AcuRankParams does."""
        check_domains(self)
        coerce_choices(self)

    def most_calls(self, task: RankingTask) -> int:
        """Each stage reranks the current top m*c_j, whatever the answers: the calls never depend on them."""
        return played_calls(self, task)

    def plan(self, task: RankingTask) -> Plan:
        """No initial pass; stage budgets c_j in windows of m over the current top."""
        from .trueskill import get_updater, task_priors, update_groups

        docids = [c.docid for c in task.candidates]
        mu, sigma = task_priors(task, self.init, m=self.m)
        update = get_updater(self.updater)
        order = list(range(len(docids)))
        for j, c in enumerate(self.stages, 1):
            top = order[: self.m * c]
            groups = chunks(top, self.m)
            perms = yield Step(windows=tuple(tuple(docids[i] for i in g) for g in groups), phase=Phase.stage,
                               iteration=j)
            update_groups(update, mu, sigma, groups, perms)
            order = sort_by(order, mu)
        return tuple(Ranked(docids[i], float(mu[i])) for i in order)
