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
import dataclasses
import heapq
import itertools
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Hashable, Iterable, Iterator, Mapping

from ..method.strategy import Strategy
from ..records import (Answer, CallTally, Doc, IterationRecord, Phase, QueryOutcome, RankingTask, RerankRequest, RerankResult,
                       Step, StopReason, final_ranking)
from ..rerankers.backend import RerankerBase
from ..rerankers.listwise.thinking import ThinkingGate
from .budget_grants import Allocation


@dataclass
class _Active:
    """Book-keeping for one query in flight."""

    task: RankingTask
    plan: Iterator
    strategy: Strategy
    #: the passages of this query's documents (a served request's own); None: the driver's
    docs: Mapping[str, Doc] | None = None
    #: who asked for it (a served request), so that it can be withdrawn
    key: Hashable = None
    step: Step | None = None
    started: float = field(default_factory=time.perf_counter)
    tally: CallTally = field(default_factory=CallTally)
    iterations: list[IterationRecord] = field(default_factory=list)
    results: list = field(default_factory=list)
    stop: StopReason | None = None
    beta: float | None = None
    final: Callable | None = None  # the done step's ratings snapshot (lazy)
    pending: int = 0  # windows of its step not yet answered
    withdrawn: bool = False  # its windows not yet sent are dropped, its answers in flight ignored
    scores: dict | None = None  # docid -> first-stage score (made at its first window, for text backends)


#: Queries in flight per lane of a backend with several (a server's requests in flight): with 2, the last queries
#: to start were left with their chains of steps while slots sat idle (sw-1, lognormal sd 0.8: 1.24x the ideal
#: wall time); with 4, 1.10x (BENCHMARKS.md 15)
QUERIES_PER_LANE = 4

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
        texts_of: Callable[[RankingTask], Mapping[str, Doc]] | None = None,
        gate: ThinkingGate | None = None,
    ):
        self.strategy = strategy
        #: gated thinking (``--thinking gated``): which windows of a step are sent thinking
        self.gate = gate
        self.reranker = reranker
        self.docs = docs or {}
        self.batch_queries = max(1, batch_queries)
        self.on_step = on_step
        #: each query's own passages where its document ids are its own (the API's documents are numbered 0, 1, ...
        #: in every query); None: ``docs``, one mapping for every query (a run's document ids are the corpus's)
        self.texts_of = texts_of

    def _request(self, act: _Active, j: int) -> RerankRequest:
        """The request for window ``j`` of the query's current step (with its gate decision, when gated)."""
        window = act.step.windows[j]
        texts = self.docs if act.docs is None else act.docs
        think = None if act.step.think is None else act.step.think[j]
        if not self.reranker.needs_texts:
            return RerankRequest(act.task.qid, act.task.query, tuple(window), (), think)
        if act.scores is None:
            act.scores = {c.docid: c.score for c in act.task.candidates}
        return RerankRequest(act.task.qid, act.task.query, tuple(window), tuple(texts[d] for d in window), think,
                             scores=tuple(act.scores[d] for d in window), instruction=act.task.instruction)

    def _advance(self, act: _Active, perms) -> QueryOutcome | None:
        """Send permutations into the plan; return the outcome when the plan has finished."""
        try:
            act.step = act.plan.send(perms) if perms is not None else next(act.plan)
        except StopIteration as stop:
            return QueryOutcome(
                qid=act.task.qid,
                method=act.strategy.name,
                ranking=final_ranking(stop.value),
                tally=act.tally,
                iterations=tuple(act.iterations),
                seconds=time.perf_counter() - act.started,
                stop=act.stop,
                beta=act.beta,
                final=act.final,
            )
        step = act.step
        if self.gate is not None and step.windows and step.unsettled is not None:
            t = act.tally  # every answer of the query's earlier steps is in: what its budget has left
            think = self.gate.decide(step.unsettled(), tuple(len(w) for w in step.windows), t.calls, t.thinking_calls,
                                     t.reasoning_tokens)
            act.step = step = dataclasses.replace(step, think=think)
        if step.stop is not None:
            act.stop = step.stop
        if step.beta is not None:
            act.beta = step.beta
        if step.phase is Phase.done and step.snapshot is not None:
            act.final = step.snapshot
        sent = tuple(len(w) for w in step.windows if len(w) >= 2)  # a window of one is never sent: no group, no call
        if sent:
            thinking = None if step.think is None else sum(
                1 for w, t in zip(step.windows, step.think) if t and len(w) >= 2)
            act.iterations.append(IterationRecord(step=len(act.iterations) + 1, iteration=step.iteration,
                                                  phase=step.phase, uncertain=step.uncertain,
                                                  groups=len(sent), window_sizes=sent, thinking=thinking))
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
            yield from self._flow(_Intake(tasks, strategy, self.texts_of))
            return
        budget = strategy.set_budget
        allocation = None
        batch = self.batch_queries
        if strategy.lockstep:
            tasks = list(tasks)
            batch = max(1, len(tasks))
        if budget is not None:
            allocation = Allocation(budget.calls(len(tasks)), budget.wave)
        intake = _Intake(tasks, strategy, self.texts_of)
        active: list[_Active] = []
        finished: dict[int, QueryOutcome] = {}
        seq: dict[int, int] = {}
        next_out = 0
        while True:
            while not intake.exhausted and len(active) < batch:
                act = intake.take(seq)
                if act is None:
                    break
                done = self._advance(act, None)
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
                outcome = self._advance(act, act.results if i in granted else None)
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
                    requests.append(self._request(act, j))
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

    def serve(self, feed: "Feed") -> Iterator[QueryOutcome]:
        """Rerank what ``feed`` admits, for as long as it is open: each request's outcome yielded the moment it is
        complete (in no set order; its ``key`` says whose), every request's windows through the one queue."""
        yield from self._flow(feed, ordered=False)

    def _flow(self, intake: "_Intake | Feed", ordered: bool = True) -> Iterator[QueryOutcome]:
        """Up to ``batch_queries`` queries in flight, each advanced as soon as its step is answered (its next
        windows queued at once), the backend fed by :class:`Lanes`; outcomes in input order (``ordered``: a
        finished query waits for the ones before it, at most ``4 x batch_queries`` of them held) or as each is
        complete."""
        flight = _Flight(self, Lanes(self.reranker), ordered)
        intake.wake = flight.lanes.wake
        try:
            while True:
                while len(flight.flying) < self.batch_queries and len(flight.finished) < 4 * self.batch_queries:
                    act = intake.take(flight.order)
                    if act is None:
                        break
                    yield from flight.go(act, self._advance(act, None))
                yield from flight.released()
                flight.withdraw(intake.withdrawn())
                if not flight.flying:
                    if intake.exhausted:
                        return
                    intake.wait()  # nothing in flight: until a request comes (or the feed closes)
                    continue
                arrived = flight.lanes.next()
                if arrived is None:  # woken: a request came or was withdrawn
                    continue
                act = flight.answered(*arrived)
                if act is not None:  # its whole step is answered
                    yield from flight.go(act, self._advance(act, act.results))
        finally:
            flight.lanes.close()


class _Flight:
    """The queries in flight of one :meth:`Driver._flow`: those with windows out (``flying``), every query's place
    in the input (``order``), the finished ones held until those before them are out (``finished``)."""

    def __init__(self, driver: Driver, lanes: "Lanes", ordered: bool):
        self.driver, self.lanes, self.ordered = driver, lanes, ordered
        self.flying: dict[int, _Active] = {}  # id(_Active) -> the query in flight with windows out
        self.order: dict[int, int] = {}
        self.finished: dict[int, QueryOutcome] = {}
        self.next_out = 0

    def go(self, act: _Active, done: QueryOutcome | None) -> Iterator[QueryOutcome]:
        """After a step of ``act``: its outcome when it is done, else its next windows queued."""
        if done is None:
            done = self._send(act)
        if done is None:
            return
        place = self.order.pop(id(act))
        if not self.ordered:
            yield done
        else:
            self.finished[place] = done

    def _send(self, act: _Active) -> QueryOutcome | None:
        """Queue the current step's windows; a step with none to send is answered at once (its plan goes on)."""
        while True:
            act.results = [tuple(range(len(w))) for w in act.step.windows]
            # a run: the query that has waited least goes first (then input order), so every query's chain of
            # steps advances evenly and no late starter is left alone at the end with its slots idle; a server:
            # the request that came first goes first, so each is answered as soon as it can be (the same work,
            # a lower median latency)
            rank = (act.tally.rounds, self.order[id(act)]) if self.ordered else (self.order[id(act)],)
            jobs = [_Job(act, j, self.driver._request(act, j), rank)
                    for j, w in enumerate(act.step.windows) if len(w) >= 2]
            if jobs:
                act.pending = len(jobs)
                self.flying[id(act)] = act
                self.lanes.put(jobs)
                return None
            done = self.driver._advance(act, act.results)
            if done is not None:
                return done

    def released(self) -> Iterator[QueryOutcome]:
        """The finished outcomes whose turn has come (input order)."""
        while self.next_out in self.finished:
            yield self.finished.pop(self.next_out)
            self.next_out += 1

    def withdraw(self, keys) -> None:
        """Drop the queries of the withdrawn requests: their queued windows are dropped, answers in flight ignored."""
        for key in keys:
            for act in [a for a in self.flying.values() if a.key == key]:
                act.withdrawn = True
                del self.flying[id(act)]
                self.order.pop(id(act))

    def answered(self, job: "_Job", result: RerankResult, seconds: float) -> _Active | None:
        """Record one window's answer; the query when its whole step is answered (it waited for this step)."""
        act = job.owner
        if act.withdrawn:
            return None
        act.results[job.j] = Answer(result.order, result.scores)
        act.tally.record(len(job.request.docids), result, seconds)
        act.pending -= 1
        if act.pending:
            return None
        del self.flying[id(act)]
        act.tally.rounds += 1
        return act


class _Intake:
    """The tasks taken in input order, each as a query in flight whose place in the output is recorded."""

    def __init__(self, tasks: Iterable[RankingTask], strategy: Strategy,
                 texts_of: Callable[[RankingTask], Mapping[str, Doc]] | None = None):
        self.pending, self.strategy, self.texts_of = iter(tasks), strategy, texts_of
        self.taken = 0
        self.exhausted = False
        self.wake: Callable[[], None] | None = None

    def take(self, places: dict[int, int]) -> _Active | None:
        """The next task as a query in flight (its place in ``places``), or None when there is none left."""
        if self.exhausted:
            return None
        task = next(self.pending, None)
        if task is None:
            self.exhausted = True
            return None
        act = _Active(task, iter(self.strategy.plan(task)), self.strategy,
                      None if self.texts_of is None else self.texts_of(task))
        places[id(act)] = self.taken
        self.taken += 1
        return act

    def withdrawn(self) -> tuple:
        return ()

    def wait(self) -> None:  # pragma: no cover - a task list is never waited for: take() is None only at its end
        pass


@dataclass(frozen=True)
class Admission:
    """One request admitted to a served driver: its task, the method that plans it (a run of its own:
    ``Strategy.for_run``), its documents' passages, and who asked (``key``, unique while it is in flight)."""

    task: RankingTask
    strategy: Strategy
    docs: Mapping[str, Doc]
    key: Hashable


class Feed:
    """The requests of a server, for :meth:`Driver.serve`: admitted from any thread (:meth:`admit`), withdrawn
    when their caller is gone (:meth:`withdraw`); :meth:`close` lets the driver finish what it holds and end."""

    def __init__(self):
        self.lock = threading.Condition()
        self.waiting: collections.deque[Admission] = collections.deque()
        self.gone: list[Hashable] = []
        self.closed = False
        self.taken = 0
        self.wake: Callable[[], None] | None = None

    @property
    def exhausted(self) -> bool:
        with self.lock:
            return self.closed and not self.waiting

    def admit(self, admission: Admission) -> None:
        with self.lock:
            if self.closed:
                raise RuntimeError("the feed is closed")
            self.waiting.append(admission)
            self.lock.notify_all()
        if self.wake is not None:
            self.wake()

    def withdraw(self, key: Hashable) -> None:
        with self.lock:
            kept = [a for a in self.waiting if a.key != key]
            if len(kept) == len(self.waiting):  # not waiting here: in flight, or finished already
                self.gone.append(key)
            self.waiting = collections.deque(kept)
            self.lock.notify_all()
        if self.wake is not None:
            self.wake()

    def close(self) -> None:
        with self.lock:
            self.closed = True
            self.lock.notify_all()
        if self.wake is not None:
            self.wake()

    def take(self, places: dict[int, int]) -> _Active | None:
        with self.lock:
            if not self.waiting:
                return None
            a = self.waiting.popleft()
        act = _Active(a.task, iter(a.strategy.plan(a.task)), a.strategy, a.docs, a.key)
        places[id(act)] = self.taken
        self.taken += 1
        return act

    def withdrawn(self) -> list[Hashable]:
        with self.lock:
            gone, self.gone = self.gone, []
        return gone

    def wait(self) -> None:
        with self.lock:
            while not self.waiting and not self.closed and not self.gone:
                self.lock.wait(0.5)


_WAKE = object()  # on Lanes.done: the driver is woken, no answer


@dataclass(frozen=True)
class _Job:
    """One window to execute: its query in flight, its place in the step, the request, its place in the queue
    (lowest first)."""

    owner: _Active
    j: int
    request: RerankRequest
    rank: tuple = ()


class Lanes:
    """Worker threads that execute queued windows the moment a lane is free: ``reranker.lanes`` calls of
    :meth:`~acurank_cli.rerankers.backend.RerankerBase.rerank` at once, each of up to ``reranker.lane_batch``
    windows (None: every window waiting), the lowest ``rank`` first (then first queued). Answers come back through
    :meth:`next` as each arrives; a backend's error is raised there, in the driver's thread (a lane never prints).
    The backend's own thread-safety is the backend's: a server's transport is shared by its lanes, an engine has
    one lane."""

    def __init__(self, reranker: RerankerBase):
        self.reranker = reranker
        self.batch = getattr(reranker, "lane_batch", None)  # a wrapper that is no RerankerBase: one batch, one lane
        self.todo: list[tuple[tuple, int, _Job]] = []  # a heap: (rank, arrival, job)
        self.arrivals = itertools.count()
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
            for job in jobs:
                heapq.heappush(self.todo, (job.rank, next(self.arrivals), job))
            self.ready.notify(len(jobs))

    def wake(self) -> None:
        """Have :meth:`next` return None at once (the driver has something else to look at)."""
        self.done.put(_WAKE)

    def _take(self) -> list[_Job]:
        """The next call's windows: up to ``lane_batch`` of the waiting ones, lowest rank first; or every one waiting,
        in the order they were queued (an engine's batch is the same whatever the ranks)."""
        if self.batch is None:
            everything, self.todo = self.todo, []
            return [job for _, _, job in sorted(everything, key=lambda entry: entry[1]) if not job.owner.withdrawn]
        chunk: list[_Job] = []
        while self.todo and len(chunk) < self.batch:
            job = heapq.heappop(self.todo)[2]
            if not job.owner.withdrawn:
                chunk.append(job)
        return chunk

    def next(self) -> tuple[_Job, RerankResult, float] | None:
        """The next answer to arrive (job, result, its share of the call's seconds), or None when woken
        (:meth:`wake`); a backend's error raised."""
        if not self.threads and self.done.empty():  # the one lane, inline: every waiting window (or a batch)
            self._call(self._take())
        while True:
            try:
                arrived = self.done.get(timeout=0.2)  # short waits: a signal is handled at once
            except queue.Empty:
                continue
            if arrived is _WAKE:
                return None
            job, result, seconds = arrived
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
                chunk = self._take()
            try:
                self._call(chunk)
            except BaseException as exc:  # noqa: BLE001 - handed to the driver's thread, which raises it
                if not self.closed:
                    self.done.put((None, exc, 0.0))
                return

    def _call(self, chunk: list[_Job]) -> None:
        """One call of the backend (the call cache commits each answer inside it as it arrives); the answers handed
        over when it returns, with the call's seconds shared among its windows."""
        if not chunk:  # every window taken was withdrawn
            return
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
