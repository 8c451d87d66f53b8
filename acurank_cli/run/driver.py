"""The one driver connecting strategies (decide windows) and rerankers (execute windows).

Up to ``batch_queries`` queries are in flight, and each advances the moment its own windows are answered: its
next step's windows join the queue at once, and :class:`Lanes` feeds the queue to the backend continuously
(``lanes`` calls at once, each of up to ``lane_batch`` windows: a server's requests in flight, or one batch of
every waiting window for an engine), so no query waits for another's slowest window. What a query is sent and
answered does not depend on timing (its plan sees only its own answers; outcomes come out in input order), so
the run's bytes are those of the step-by-step order. A strategy in ``lockstep`` (a query-set budget, or what
queries learn from each other) advances every query together, a step at a time. Windows of 0 or 1 documents are
never sent and never counted as calls.
"""

from __future__ import annotations

import collections
import queue
import threading
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
        are sent, refused or wait. Any other strategy flows: each query advances as soon as its windows are
        answered (:meth:`_flow`)."""
        strategy = self.strategy.for_run()
        if not strategy.lockstep:
            yield from self._flow(tasks, strategy)
            return
        budget = strategy.set_budget
        allocation = None
        batch = self.batch_queries
        if strategy.lockstep:
            tasks = list(tasks)
            batch = max(1, len(tasks))
        if budget is not None:
            allocation = Allocation(budget.calls(len(tasks)), budget.wave)
        intake = _Intake(tasks, strategy)
        active: list[_Active] = []
        finished: dict[int, QueryOutcome] = {}
        seq: dict[int, int] = {}
        next_out = 0
        while True:
            while not intake.exhausted and len(active) < batch:
                act = intake.take(seq)
                if act is None:
                    break
                done = self._advance(act, None, strategy)
                if done is not None:
                    finished[seq.pop(id(act))] = done
                else:
                    active.append(act)
            while next_out in finished:
                yield finished.pop(next_out)
                next_out += 1
            if not active:
                if intake.exhausted:
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

    def _flow(self, tasks: Iterable[RankingTask], strategy: Strategy) -> Iterator[QueryOutcome]:
        """Up to ``batch_queries`` queries in flight, each advanced as soon as its step is answered (its next
        windows queued at once), the backend fed by :class:`Lanes`; outcomes in input order (a finished query
        waits for the ones before it, at most ``4 x batch_queries`` of them held)."""
        intake = _Intake(tasks, strategy)
        waiting: dict[int, int] = {}  # id(_Active) -> windows of its step not yet answered
        order: dict[int, int] = {}
        finished: dict[int, QueryOutcome] = {}
        next_out = 0
        lanes = Lanes(self.reranker)

        def send(act: _Active) -> QueryOutcome | None:
            """Queue the current step's windows; a step with none to send is answered at once (its plan goes on)."""
            while True:
                act.results = [tuple(range(len(w))) for w in act.step.windows]
                jobs = [_Job(act, j, self._request(act.task, w)) for j, w in enumerate(act.step.windows) if len(w) >= 2]
                if jobs:
                    waiting[id(act)] = len(jobs)
                    lanes.put(jobs)
                    return None
                done = self._advance(act, act.results, strategy)
                if done is not None:
                    return done

        try:
            while True:
                while (not intake.exhausted and len(waiting) < self.batch_queries
                       and len(finished) < 4 * self.batch_queries):
                    act = intake.take(order)
                    if act is None:
                        break
                    done = self._advance(act, None, strategy)
                    if done is None:
                        done = send(act)
                    if done is not None:
                        finished[order.pop(id(act))] = done
                while next_out in finished:
                    yield finished.pop(next_out)
                    next_out += 1
                if not waiting:
                    if intake.exhausted:
                        return
                    continue
                job, result, seconds = lanes.next()
                act = job.owner
                act.results[job.j] = Answer(result.order, result.scores)
                act.tally.record(len(job.request.docids), result, seconds)
                waiting[id(act)] -= 1
                if waiting[id(act)]:
                    continue
                del waiting[id(act)]
                act.tally.rounds += 1  # this query waited for this step
                done = self._advance(act, act.results, strategy)
                if done is None:
                    done = send(act)
                if done is not None:
                    finished[order.pop(id(act))] = done
        finally:
            lanes.close()


class _Intake:
    """The tasks taken in input order, each as a query in flight whose place in the output is recorded."""

    def __init__(self, tasks: Iterable[RankingTask], strategy: Strategy):
        self.pending, self.strategy = iter(tasks), strategy
        self.taken = 0
        self.exhausted = False

    def take(self, places: dict[int, int]) -> _Active | None:
        """The next task as a query in flight (its place in ``places``), or None when there is none left."""
        task = next(self.pending, None)
        if task is None:
            self.exhausted = True
            return None
        act = _Active(task, iter(self.strategy.plan(task)))
        places[id(act)] = self.taken
        self.taken += 1
        return act


@dataclass(frozen=True)
class _Job:
    """One window to execute: its query in flight, its place in the step, the request."""

    owner: _Active
    j: int
    request: RerankRequest


class Lanes:
    """Worker threads that execute queued windows the moment a lane is free: ``reranker.lanes`` calls of
    :meth:`~acurank_cli.rerankers.base.RerankerBase.rerank` at once, each of up to ``reranker.lane_batch``
    windows (None: every window waiting). Answers come back through :meth:`next` as each arrives; a backend's
    error is raised there, in the driver's thread (a lane never prints). The backend's own thread-safety is the
    backend's: a server's transport is shared by its lanes, an engine has one lane."""

    def __init__(self, reranker: RerankerBase):
        self.reranker = reranker
        self.batch = getattr(reranker, "lane_batch", None)  # a wrapper that is no RerankerBase: one batch, one lane
        self.todo: collections.deque[_Job] = collections.deque()
        self.ready = threading.Condition()
        self.done: queue.SimpleQueue = queue.SimpleQueue()
        self.closed = False
        lanes = max(1, int(getattr(reranker, "lanes", 1)))
        #: one lane runs in the driver's own thread (an engine's batch: a signal stops it there, as it always has;
        #: a native library must not be left running in a thread at exit), several in worker threads
        self.threads = [threading.Thread(target=self._work, daemon=True, name=f"acurank-lane-{i}")
                        for i in range(lanes)] if lanes > 1 else []
        for thread in self.threads:
            thread.start()

    def put(self, jobs: list[_Job]) -> None:
        with self.ready:
            self.todo.extend(jobs)
            self.ready.notify(len(jobs))

    def next(self) -> tuple[_Job, RerankResult, float]:
        """The next answer to arrive (job, result, its share of the call's seconds); a backend's error raised."""
        if not self.threads and self.done.empty():  # the one lane, inline: every waiting window (or a batch)
            n = len(self.todo) if self.batch is None else min(self.batch, len(self.todo))
            self._call([self.todo.popleft() for _ in range(n)])
        while True:
            try:
                job, result, seconds = self.done.get(timeout=0.2)  # short waits: a signal is handled at once
            except queue.Empty:
                continue
            if job is None:
                raise result
            return job, result, seconds

    def _work(self) -> None:
        while True:
            with self.ready:
                while not self.todo and not self.closed:
                    self.ready.wait()
                if self.closed:
                    return
                n = len(self.todo) if self.batch is None else min(self.batch, len(self.todo))
                chunk = [self.todo.popleft() for _ in range(n)]
            try:
                self._call(chunk)
            except BaseException as exc:  # noqa: BLE001 - handed to the driver's thread, which raises it
                if not self.closed:
                    self.done.put((None, exc, 0.0))
                return

    def _call(self, chunk: list[_Job]) -> None:
        """One call of the backend (the call cache commits each answer inside it as it arrives); the answers handed
        over when it returns, with the call's seconds shared among its windows."""
        started = time.perf_counter()
        results = self.reranker.rerank([job.request for job in chunk])
        share = (time.perf_counter() - started) / len(chunk)
        for job, result in zip(chunk, results):
            self.done.put((job, result, share))

    def close(self) -> None:
        """No more work is taken; a call in progress finishes in its (daemon) thread, its answers unread."""
        with self.ready:
            self.closed = True
            self.todo.clear()
            self.ready.notify_all()
