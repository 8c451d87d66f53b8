"""The Strategy base: a strategy only decides which windows to rerank and consumes permutations.

A strategy's ``plan(task)`` is a generator: it yields a :class:`Step` (independent windows of docids),
receives one permutation per window (positions, best first) and finally returns the ranking. A step
without windows sends nothing and costs nothing: a strategy whose queries learn from each other yields one
to wait until every query of the run has answered the same round (see ``lockstep``).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, ClassVar, Generator, Sequence

from ..params import check_domains
from ..records import Ranked, RankingTask, Step

if TYPE_CHECKING:
    import numpy as np

Permutation = tuple[int, ...]
Plan = Generator[Step, Sequence[Permutation], tuple[Ranked, ...]]


class Strategy:
    """Decides windows (never executes them). Every hook the driver, the job and the API call is declared
    here with the value that means "nothing special"; a strategy overrides what it uses."""

    name: str
    #: How first-stage scores start TrueSkill ratings (None: they only order the input).
    init: ClassVar[object] = None
    #: A query-set budget the driver allocates over the whole run (AcuRank's --budget-total), or None.
    set_budget: ClassVar[object] = None
    #: Its steps say how unsettled each window's ratings are (``Step.unsettled``): what gated thinking
    #: (``--thinking gated``) needs; a method without an uncertainty refuses it.
    knows_uncertainty: ClassVar[bool] = False

    def __post_init__(self) -> None:
        """A strategy that is its own parameter record (a frozen dataclass whose fields are options, as the
        baselines are) refuses a value outside a field's domain when it is built."""
        check_domains(self)

    @property
    def lockstep(self) -> bool:
        """Every query must advance in step with the others (the run is one batch; a resumed run replays its
        finished queries from the call cache): a query-set budget, or what a query learns from the others."""
        return self.set_budget is not None

    @property
    def cutoff(self) -> int | None:
        """The k that the final ratings' p_topk refers to (None: the method has no ratings)."""
        return None

    def plan(self, task: RankingTask) -> Plan:  # pragma: no cover - abstract
        """Yield steps of windows, receive permutations, return the final ranking."""
        raise NotImplementedError

    def most_calls(self, task: RankingTask) -> int | None:
        """The most calls the method can make on ``task``, whatever the answers (what ``--max-cost`` reserves for a
        query in flight); None: the method does not say."""
        return None

    def check(self, task: RankingTask) -> None:
        """Raise InputError, before any call, for a task the method's parameters cannot honour."""

    def check_set(self, tasks: Sequence[RankingTask]) -> None:
        """Raise InputError, before any call, for a set of tasks the method cannot honour as a whole."""

    def warnings(self, tasks: Sequence[RankingTask]) -> list[str]:
        """What the user should be warned of before the first call, about these tasks under this method's settings
        (said once a run, on stderr even with --quiet); none by default."""
        return []

    def parameters(self) -> object:
        """The record of the method's parameters (what a run's fingerprint records): the strategy itself where it is
        that record (the baselines' frozen dataclasses), its params record otherwise."""
        return self

    def for_run(self) -> "Strategy":
        """The strategy for one run of the driver: a fresh copy where the run holds state (what a query learns
        from the others), the strategy itself otherwise."""
        return self


def check_tasks(strategy: Strategy, tasks: Sequence[RankingTask]) -> list[str]:
    """Every task, and the set of them, checked by the strategy before the first model call; returns what the user
    should know before it starts (a k that every candidate list is within: nothing to decide after the first pass)."""
    k = strategy.cutoff
    covered, largest, count = 0, 0, 0
    for task in tasks:
        strategy.check(task)
        count += 1
        if k is not None and task.n <= k:
            covered, largest = covered + 1, max(largest, task.n)
    strategy.check_set(tasks)
    warned = [f"warning: {w}" for w in strategy.warnings(tasks)]
    if not covered:
        return warned
    return warned + [f"k = {k} and {covered} of the {count} queries have at most {largest} candidates: every candidate of "
            f"those is in the top {k} for certain, so nothing is uncertain after the first pass and the windows after "
            "it (AcuRank's final pass) only refine the order by mu; a k below the candidate count lets the method "
            "decide a top k"]


def expect_kernels(strategy: Strategy, tasks: Sequence[RankingTask]) -> None:
    """Tell the compiled kernels what the run may ask of them (its queries' most calls; unknown where the method does
    not say): a small run rates its windows before numba would have loaded (:mod:`acurank_cli.method.compiled`)."""
    from .compiled import expect

    most = [strategy.most_calls(t) for t in tasks]
    expect(None if any(m is None for m in most) else sum(most))


def apply(window: Sequence[str], perm: Permutation) -> list[str]:
    """The window's docids in the reranker's returned order."""
    return [window[i] for i in perm]


def query_rng(seed: int, qid: str, salt: str) -> random.Random:
    """A per-query RNG derived from the run's seed (reproducible across runs and batching)."""
    return random.Random(f"acurank|{seed}|{qid}|{salt}")


def sort_by(order: list[int], key: np.ndarray) -> list[int]:
    """Stable sort of candidate indices by ``key`` descending (its values as Python floats: the same comparisons,
    without indexing the array once per comparison key)."""
    values = key.tolist() if hasattr(key, "tolist") else key
    return sorted(order, key=lambda i: -values[i])


def chunks(items: Sequence[int], m: int) -> list[list[int]]:
    """Consecutive groups of m (the last may be shorter): windows and AcuRank's groups."""
    return [list(items[j : j + m]) for j in range(0, len(items), m)]


def played_calls(strategy: Strategy, task: RankingTask) -> int:
    """The calls of ``strategy``'s plan for ``task`` played with every window answered in the order it was sent: its
    most calls where its windows never depend on the answers (TourRank's groups and the static TrueSkill stages are
    set by the number of candidates alone). A window of one document is never sent, so it is not counted."""
    from ..records import Answer

    plan = strategy.plan(task)
    calls = 0
    try:
        step = next(plan)
        while True:
            calls += sum(1 for w in step.windows if len(w) >= 2)
            step = plan.send(tuple(Answer(tuple(range(len(w)))) for w in step.windows))
    except StopIteration:
        return calls


def first_round(strategy: Strategy, task: RankingTask) -> list[tuple[str, ...]]:
    """The windows (two documents or more: a window of one is never sent) of the method's first round for
    ``task``, decided with no answer (a step without windows, a wait for the other queries, is passed)."""
    strategy.check(task)
    plan = strategy.for_run().plan(task)
    try:
        step = next(plan)
        while not any(len(w) >= 2 for w in step.windows):
            step = plan.send(tuple(tuple(range(len(w))) for w in step.windows))
    except StopIteration:
        return []
    finally:
        plan.close()
    return [w for w in step.windows if len(w) >= 2]
