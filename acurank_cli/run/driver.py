"""The one driver connecting strategies (decide windows) and rerankers (execute windows).

Up to ``batch_queries`` queries advance together; every window of their current steps goes to the
reranker as one batch. Windows of 0 or 1 documents are never sent and never counted as calls.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Sequence

from ..method.base import Strategy
from ..records import (Answer, CallTally, Doc, IterationRecord, QueryOutcome, RankingTask, RerankRequest, RerankResult,
                       Step, StopReason, final_ranking)
from ..rerankers.base import RerankerBase
from .allocation import Allocation


@dataclass
class _Active:
    """Book-keeping for one query in flight."""

    task: RankingTask
    plan: Iterator
    step: Step | None = None
    started: float = field(default_factory=time.perf_counter)
    tally: CallTally = field(default_factory=CallTally)
    iterations: list[IterationRecord] = field(default_factory=list)
    results: list = field(default_factory=list)
    stop: StopReason | None = None
    beta: float | None = None


StepHook = Callable[[RankingTask, Step], None]


class Driver:
    """Runs one strategy over many queries with one reranker, batching windows across queries."""

    def __init__(
        self,
        strategy: Strategy,
        reranker: RerankerBase,
        docs: dict[str, Doc] | None = None,
        batch_queries: int = 1,
        on_step: StepHook | None = None,
    ):
        self.strategy = strategy
        self.reranker = reranker
        self.docs = docs or {}
        self.batch_queries = max(1, batch_queries)
        self.on_step = on_step

    def _request(self, task: RankingTask, window: Sequence[str]) -> RerankRequest:
        docs = tuple(self.docs[d] for d in window) if self.reranker.needs_texts else ()
        return RerankRequest(task.qid, task.query, tuple(window), docs)

    def _advance(self, act: _Active, perms, strategy: Strategy) -> QueryOutcome | None:
        """Send permutations into the plan; return the outcome when the plan has finished."""
        try:
            act.step = act.plan.send(perms) if perms is not None else next(act.plan)
        except StopIteration as stop:
            return QueryOutcome(
                qid=act.task.qid,
                method=strategy.name,
                ranking=final_ranking(stop.value),
                tally=act.tally,
                iterations=tuple(act.iterations),
                seconds=time.perf_counter() - act.started,
                stop=act.stop,
                beta=act.beta,
            )
        step = act.step
        if step.stop is not None:
            act.stop = step.stop
        if step.beta is not None:
            act.beta = step.beta
        sent = tuple(len(w) for w in step.windows if len(w) >= 2)  # a window of one is never sent: no group, no call
        if sent:
            act.iterations.append(IterationRecord(len(act.iterations) + 1, step.iteration, step.phase, step.uncertain,
                                                  len(sent), sent))
        if self.on_step is not None:
            self.on_step(act.task, step)
        return None

    def run(self, tasks: Iterable[RankingTask]) -> Iterator[QueryOutcome]:
        """Rerank every task; outcomes are yielded in input order as soon as they are complete.

        A strategy in ``lockstep`` has every query advance together (one batch, whatever ``batch_queries``);
        under a query-set budget (its ``set_budget``) an :class:`~.allocation.Allocation` decides which steps
        are sent, refused or wait."""
        strategy = self.strategy.for_run()
        budget = strategy.set_budget
        allocation = None
        batch = self.batch_queries
        if strategy.lockstep:
            tasks = list(tasks)
            batch = max(1, len(tasks))
        if budget is not None:
            allocation = Allocation(budget.calls(len(tasks)), budget.wave)
        pending = iter(tasks)
        active: list[_Active] = []
        finished: dict[int, QueryOutcome] = {}
        seq: dict[int, int] = {}
        next_in, next_out = 0, 0
        exhausted = False
        while True:
            while not exhausted and len(active) < batch:
                task = next(pending, None)
                if task is None:
                    exhausted = True
                    break
                act = _Active(task, iter(strategy.plan(task)))
                seq[id(act)] = next_in
                next_in += 1
                done = self._advance(act, None, strategy)
                if done is not None:
                    finished[seq.pop(id(act))] = done
                else:
                    active.append(act)
            while next_out in finished:
                yield finished.pop(next_out)
                next_out += 1
            if not active:
                if exhausted:
                    return
                continue
            granted, refused = set(range(len(active))), set()
            if allocation is not None:
                granted, refused = allocation.grant([(act.task.qid, act.step) for act in active])
            self._execute([act for i, act in enumerate(active) if i in granted])
            still = []
            for i, act in enumerate(active):
                if i not in granted and i not in refused:
                    still.append(act)  # waits for a later wave
                    continue
                outcome = self._advance(act, act.results if i in granted else None, strategy)
                if outcome is not None:
                    finished[seq.pop(id(act))] = outcome
                else:
                    still.append(act)
            active = still

    def _execute(self, active: list[_Active]) -> None:
        """Send every window (>= 2 docs) of every active query's current step as one batch."""
        requests: list[RerankRequest] = []
        owners: list[tuple[_Active, int]] = []
        for act in active:
            act.results = [tuple(range(len(w))) for w in act.step.windows]
            for j, window in enumerate(act.step.windows):
                if len(window) >= 2:
                    requests.append(self._request(act.task, window))
                    owners.append((act, j))
        if not requests:
            return
        t0 = time.perf_counter()
        results: list[RerankResult] = self.reranker.rerank(requests)
        share = (time.perf_counter() - t0) / len(requests)
        for (act, j), req, res in zip(owners, requests, results):
            act.results[j] = Answer(res.order, res.scores)
            act.tally.record(len(req.docids), res, share)
        for act in {id(a): a for a, _ in owners}.values():
            act.tally.rounds += 1  # this query waited for this batch
