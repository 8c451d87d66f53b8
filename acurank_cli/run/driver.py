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

import itertools
import time
from dataclasses import dataclass, field
from typing import Callable, Hashable, Iterable, Iterator, Mapping, Protocol, Sequence

from .. import signals
from ..method.strategy import Strategy
from ..records import (Answer, CallTally, Doc, IterationRecord, Phase, QueryOutcome, RankingTask, RerankRequest, RerankResult, pivot_id,
                       Step, StopReason, final_ranking)
from ..rerankers.backend import RerankerBase
from ..method.thinking_gate import ThinkingGate
from .budget_grants import BudgetGrants
from .lanes import Job, Lanes


def task_scores(task: RankingTask) -> dict[str, float | None]:
    """Each candidate's first-stage score, the prompt's view of it (``{score}``); None for a pivot (--pivot), which no
    retriever scored, and for each where no score was given (the places that stand in are no retriever's)."""
    if not task.scored:
        return {c.docid: None for c in task.candidates} | {pivot_id(task.qid): None}
    return {c.docid: c.score for c in task.candidates} | {pivot_id(task.qid): None}  # no retriever scored a pivot


def window_request(task: RankingTask, window: Sequence[str], texts: Mapping[str, Doc], scores: Mapping[str, float],
                   think: bool | None = None) -> RerankRequest:
    """A window of a text backend's as the driver sends it (``acurank prompt render`` builds the same)."""
    return RerankRequest(task.qid, task.query, tuple(window), tuple(texts[d] for d in window), think,
                         scores=tuple(scores[d] for d in window), instruction=task.instruction)


class Intake(Protocol):
    """Where the driver's queries come from: a run's tasks (in input order) or a server's queue
    (:class:`~acurank_cli.serve.admission.Feed`), each taken as an :class:`Admission`."""

    wake: Callable[[], None] | None  # set by the driver: called when something arrives or is withdrawn

    @property
    def exhausted(self) -> bool: ...  # nothing more will come

    def take(self) -> "Admission | None": ...  # the next admitted task, None when none waits

    def withdrawn(self) -> Iterable[Hashable]: ...  # the keys withdrawn since last asked

    def wait(self) -> None: ...  # until something may be taken or withdrawn


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
    absolute: dict | None = None  # docid -> the backend's own score of it (RerankResult.absolute), where it gives one
    place: int = 0  # its place in the input (the order of the outcomes)

    def answer(self, j: int, request: RerankRequest, result: RerankResult) -> None:
        """Window ``j``'s answer for the plan, and its documents' absolute scores where the backend gave them."""
        self.results[j] = Answer(result.order, result.scores)
        if result.absolute is not None:
            if self.absolute is None:
                self.absolute = {}
            self.absolute.update(zip(request.docids, result.absolute))

    @classmethod
    def of(cls, admission: "Admission", place: int) -> "_Active":
        """An admitted task in flight, its plan started (nothing sent yet)."""
        a = admission
        return cls(a.task, iter(a.strategy.plan(a.task)), a.strategy, a.docs, a.key, place=place)


StepHook = Callable[[RankingTask, Step], None]


class Driver:
    """Runs one strategy over many queries with one reranker, batching windows across queries."""

    def __init__(
        self,
        strategy: Strategy,
        reranker: RerankerBase,
        docs: dict[str, Doc] | None = None,
        batch_queries: int = 1,
        *,
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
            act.scores = task_scores(act.task)
        return window_request(act.task, window, texts, act.scores, think)

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
                absolute=act.absolute,
            )
        step = act.step
        if self.gate is not None:
            act.step = step = self.gate.apply(step, act.tally)
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
        under a query-set budget (its ``set_budget``) the :class:`~.budget_grants.BudgetGrants` decide which steps
        are sent, refused or wait. Any other strategy flows: each query advances as soon as its windows are
        answered (:meth:`_flow`)."""
        strategy = self.strategy.for_run()
        if not strategy.lockstep:
            yield from self._flow(_Intake(tasks, strategy, self.texts_of))
            return
        yield from self._lockstep(list(tasks), strategy)

    def _lockstep(self, tasks: list[RankingTask], strategy: Strategy) -> Iterator[QueryOutcome]:
        """Every query advances together, a step at a time, the steps sent as the query-set budget grants them."""
        budget = strategy.set_budget
        grants = None if budget is None else BudgetGrants(budget.calls(len(tasks)), budget.wave)
        active: list[_Active] = []
        finished: dict[int, QueryOutcome] = {}  # place in the input -> outcome, until those before it are out
        for place, task in enumerate(tasks):  # every query in one batch, in input order
            act = _Active.of(Admission(task, strategy, None if self.texts_of is None else self.texts_of(task)), place)
            done = self._advance(act, None)
            if done is not None:
                finished[place] = done
            else:
                active.append(act)
        next_out = 0
        while True:
            while next_out in finished:
                yield finished.pop(next_out)
                next_out += 1
            if not active:
                return
            granted, refused = set(range(len(active))), set()
            if grants is not None:
                granted, refused = grants.grant([(act.task.qid, act.step) for act in active])
            self._execute([act for i, act in enumerate(active) if i in granted])
            still = []
            for i, act in enumerate(active):
                if i not in granted and i not in refused:
                    still.append(act)  # waits for a later wave
                    continue
                outcome = self._advance(act, act.results if i in granted else None)
                if outcome is not None:
                    finished[act.place] = outcome
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
        signals.check()  # a signal Python could not raise where it landed: no call after it
        t0 = time.perf_counter()
        results: list[RerankResult] = self.reranker.rerank(requests)
        share = (time.perf_counter() - t0) / len(requests)
        for (act, j), req, res in zip(owners, requests, results):
            act.answer(j, req, res)
            act.tally.record(len(req.docids), res, share)
        for act in {id(a): a for a, _ in owners}.values():
            act.tally.rounds += 1  # this query waited for this batch

    def serve(self, feed: Intake) -> Iterator[QueryOutcome]:
        """Rerank what ``feed`` admits, for as long as it is open: each request's outcome yielded the moment it is
        complete (in no set order; its ``key`` says whose), every request's windows through the one queue."""
        yield from self._flow(feed, ordered=False)

    def _flow(self, intake: Intake, ordered: bool = True) -> Iterator[QueryOutcome]:
        """Up to ``batch_queries`` queries in flight, each advanced as soon as its step is answered (its next
        windows queued at once), the backend fed by :class:`Lanes`; outcomes in input order (``ordered``: a
        finished query waits for the ones before it, at most ``4 x batch_queries`` of them held) or as each is
        complete."""
        flight = _Flight(self, Lanes(self.reranker), ordered)
        intake.wake = flight.lanes.wake
        try:
            while True:
                yield from flight.released()  # first: what a finished query frees (--max-cost) is known to the intake
                while len(flight.flying) < self.batch_queries and len(flight.finished) < 4 * self.batch_queries:
                    admission = intake.take()
                    if admission is None:
                        break
                    act = flight.enter(admission)
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
    """The queries in flight of one :meth:`Driver._flow`: those with windows out (``flying``), the finished ones held
    until those before them in the input are out (``finished``, by each query's ``place``)."""

    def __init__(self, driver: Driver, lanes: Lanes, ordered: bool):
        self.driver, self.lanes, self.ordered = driver, lanes, ordered
        self.flying: dict[int, _Active] = {}  # id(_Active) -> the query in flight with windows out
        self.finished: dict[int, QueryOutcome] = {}
        self.next_out = 0
        self.places = itertools.count()

    def enter(self, admission: "Admission") -> _Active:
        """The next admitted task as a query in flight, its place in the input recorded."""
        return _Active.of(admission, next(self.places))

    def go(self, act: _Active, done: QueryOutcome | None) -> Iterator[QueryOutcome]:
        """After a step of ``act``: its outcome when it is done, else its next windows queued."""
        if done is None:
            done = self._send(act)
        if done is None:
            return
        if not self.ordered:
            yield done
        else:
            self.finished[act.place] = done

    def _send(self, act: _Active) -> QueryOutcome | None:
        """Queue the current step's windows; a step with none to send is answered at once (its plan goes on)."""
        while True:
            act.results = [tuple(range(len(w))) for w in act.step.windows]
            # a run: the query that has waited least goes first (then input order), so every query's chain of
            # steps advances evenly and no late starter is left alone at the end with its slots idle; a server:
            # the request that came first goes first, so each is answered as soon as it can be (the same work,
            # a lower median latency)
            rank = (act.tally.rounds, act.place) if self.ordered else (act.place,)
            jobs = [Job(act, j, self.driver._request(act, j), rank)
                    for j, w in enumerate(act.step.windows) if len(w) >= 2]
            if jobs:
                signals.check()  # a signal Python could not raise where it landed: no call after it
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

    def answered(self, job: Job, result: RerankResult, seconds: float) -> _Active | None:
        """Record one window's answer; the query when its whole step is answered (it waited for this step)."""
        act = job.owner
        if act.withdrawn:
            return None
        act.answer(job.j, job.request, result)
        act.tally.record(len(job.request.docids), result, seconds)
        act.pending -= 1
        if act.pending:
            return None
        del self.flying[id(act)]
        act.tally.rounds += 1
        return act


#: what a run's task source gives for "none now, more later" (``--max-cost``'s gate, until a query in flight ends): the
#: driver takes again after its next answer
WAIT = object()


class _Intake:
    """The tasks of a run, admitted in input order (:data:`WAIT`: none now)."""

    def __init__(self, tasks: Iterable[RankingTask], strategy: Strategy,
                 texts_of: Callable[[RankingTask], Mapping[str, Doc]] | None = None):
        self.pending, self.strategy, self.texts_of = iter(tasks), strategy, texts_of
        self.exhausted = False
        self.wake: Callable[[], None] | None = None

    def take(self) -> Admission | None:
        """The next task, or None when there is none left."""
        if self.exhausted:
            return None
        task = next(self.pending, None)
        if task is WAIT:
            return None
        if task is None:
            self.exhausted = True
            return None
        return Admission(task, self.strategy, None if self.texts_of is None else self.texts_of(task))

    def withdrawn(self) -> tuple:
        return ()

    def wait(self) -> None:  # nothing in flight: a task list's source has a task, or ends (the cap's gate waits only
        pass  # while a query is in flight)


@dataclass(frozen=True)
class Admission:
    """One task admitted to the driver: the task, the method that plans it (a served request's: a run of its own,
    ``Strategy.for_run``), its documents' passages (None: the driver's ``docs``), and who asked (a served
    request's ``key``, unique while it is in flight; None for a run's task)."""

    task: RankingTask
    strategy: Strategy
    docs: Mapping[str, Doc] | None = None
    key: Hashable = None


__all__ = ["Admission", "Driver", "Intake", "StepHook"]
