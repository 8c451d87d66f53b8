"""Strategy protocol: a strategy only decides which windows to rerank and consumes permutations.

A strategy's ``plan(task)`` is a generator: it yields a :class:`Step` (independent windows of docids),
receives one permutation per window (positions, best first) and finally returns the ranking.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Generator, Protocol, Sequence

from ..records import Ranked, RankingTask, Step

if TYPE_CHECKING:
    import numpy as np

Permutation = tuple[int, ...]
Plan = Generator[Step, Sequence[Permutation], tuple[Ranked, ...]]


class Strategy(Protocol):
    """Decides windows (never executes them)."""

    name: str
    #: How first-stage scores start TrueSkill ratings (None: they only order the input).
    init: object

    def plan(self, task: RankingTask) -> Plan:  # pragma: no cover - protocol
        """Yield steps of windows, receive permutations, return the final ranking."""
        ...

    def check(self, task: RankingTask) -> None:  # pragma: no cover - protocol
        """Raise InputError, before any call, for a task the method's parameters cannot honour."""
        ...


def check_tasks(strategy: Strategy, tasks: Sequence[RankingTask]) -> None:
    """Every task checked by the strategy before the first model call (and the whole set, for a strategy
    with a query-set budget)."""
    for task in tasks:
        strategy.check(task)
    check_set = getattr(strategy, "check_set", None)
    if check_set is not None:
        check_set(tasks)


def apply(window: Sequence[str], perm: Permutation) -> list[str]:
    """The window's docids in the reranker's returned order."""
    return [window[i] for i in perm]


def query_rng(seed: int, qid: str, salt: str) -> random.Random:
    """A per-query RNG derived from the run's seed (reproducible across runs and batching)."""
    return random.Random(f"acurank|{seed}|{qid}|{salt}")


def sort_by(order: list[int], key: np.ndarray) -> list[int]:
    """Stable sort of candidate indices by ``key`` descending."""
    return sorted(order, key=lambda i: -key[i])


def chunks(items: Sequence[int], m: int) -> list[list[int]]:
    """Consecutive groups of m (the last may be shorter): windows and AcuRank's groups."""
    return [list(items[j : j + m]) for j in range(0, len(items), m)]
