"""The reranking service behind ``acurank serve``: one :class:`~acurank_cli.run.pipeline.Session` (the composition
root the CLI and the Python API use: the backend built once behind the call cache, the methods a request may ask
for), and one driver thread that serves every request's windows through the one scheduler
(:meth:`~acurank_cli.run.pipeline.Session.serve`): requests that arrive together share the backend's batches and
slots, each answered the moment its own query is complete.

A request is admitted (checked, its method chosen) in the caller's thread, before any call; it waits in the
:class:`~acurank_cli.serve.admission.Feed` while ``max_in_flight`` queries are in flight, and is refused (429) when
``max_queued`` more already wait. A caller that leaves (disconnects, times out) withdraws its request: its windows
not yet sent are dropped. A backend that fails fails the requests in flight (502) and serving goes on.
"""

from __future__ import annotations

import sys
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from ..errors import InputError
from ..method.registry import method_options
from ..method.strategy import Strategy
from ..relevance import SAID
from ..records import QueryOutcome, RankingTask, Step
from ..rerankers.counted import Counted
from ..results import relevance_scores
from ..run.passages import Passages
from ..run.request import Admitted, Asked, Request
from .admission import Admission, Feed
from ..run.pipeline import Session
from .metrics import Metrics
from .protocol import REQUEST_FIELDS, BadRequest, Limits, RerankCall


def _refused(exc: InputError, call: RerankCall) -> BadRequest:
    """A refusal of the session's as the server says it: one line naming the request's field (``exc.field``), the
    server's own settings as its flags and the request's by their names; said of the request, not of its internal
    query id, where it is about its documents."""
    field = exc.field or "documents"
    if (exc.source or "").startswith("documents["):  # one document: named
        return BadRequest(" ".join(str(exc).split()), exc.source)
    if exc.of_documents:
        said = " ".join(str(InputError(exc.said_to(REQUEST_FIELDS), exc.source, exc.line)).split())
        for internal, words in ((f"query {call.id}: ", ""), (f"query {call.id} doc ", "document "),
                                (f"query {call.id} ", "the request "), (call.id, "the request")):
            said = said.replace(internal, words)  # "query the request: document id ..." read as a query's name
        return BadRequest(f"documents: {said}", field)
    return BadRequest(" ".join(exc.said_to(REQUEST_FIELDS).split()), field)


class BackendFailed(Exception):
    """The backend failed while this request's windows were out (the message is the backend's, one line)."""


@dataclass(frozen=True)
class Ticket:
    """An admitted request: what it asked, the session's admission of it (its task, passages and cut), the method
    planning it (this request's own run of it), and its answer to come."""

    call: RerankCall
    admitted: Admitted
    strategy: Strategy
    future: Future
    admitted_at: float


def start_service(reranker: str, method: str | None, flags: dict, limits: Limits, cache: str | None, *,
                  calibration: str | None = None, passages: tuple = (None, None, None), ray=None,
                  before_load=lambda: None, allow_map_mismatch: bool = False) -> "RerankService":
    """The one start-up of ``acurank serve`` and ``acurank mcp``: the method and the map checked, the session
    built (``passages``: the --passages, --passage-score and --max-passages flags; ``ray``: the cluster's options),
    ``before_load`` called (serve binds its port, mcp imports the SDK: both fail before the backend loads), the
    backend started behind the cache, and the service over it."""
    from ..run import pipeline

    options, backend_options = pipeline.split_options(flags)
    methods, calibrated = pipeline.served_methods(method, options, calibration, passages[0], reranker=reranker,
                                                  allow_map_mismatch=allow_map_mismatch)
    session = Session(methods.strategy, reranker, backend_options, ray, Passages.of(*passages), methods=methods,
                      calibration=calibrated, allow_map_mismatch=allow_map_mismatch)  # checked, not built
    try:
        before_load()
        session.start(cache, None)
    except BaseException:
        session.close()
        raise
    return RerankService(session, limits)


class RerankService:
    """One backend and method, serving rerank requests from any number of threads."""

    def __init__(self, session: Session, limits: Limits, metrics: Metrics | None = None):
        """``session``: started (its backend built behind the cache), with the server's method and those a request
        may name (``session.methods``) and the map that makes relevance_score P(relevant) (``session.calibration``,
        ``--calibration``; None: none)."""
        self.session, self.methods, self.limits = session, session.methods, limits
        self.metrics = metrics or Metrics()
        self.feed = Feed()
        self.lock = threading.Lock()
        self.tickets: dict[str, Ticket] = {}
        self.calls: dict[str, int] = {}  # the driver thread's count of each request's calls so far
        #: windows sent to the backend and not yet answered, a withdrawn request's included (they hold it till done)
        self.windows_out = 0
        self.draining = False
        from ..relevance.shift import ShiftWatch

        #: the requests whose documents carry first-stage scores, against the map's fitting queries (as the API
        #: watches its calls): compared once, at the 20th such request
        self.watch = None if session.calibration is None else ShiftWatch(session.calibration.fit)
        self.metrics.watch(self)
        self.thread = threading.Thread(target=self._serve, daemon=True, name="acurank-serve-driver")
        self.thread.start()

    # -- admission (the callers' threads) ---------------------------------------------------------

    @property
    def queued(self) -> int:
        return len(self.feed.waiting)

    @property
    def open(self) -> int:
        return len(self.tickets)

    def submit(self, call: RerankCall) -> Ticket:
        """Admit a request: every rule of the session's (:meth:`~acurank_cli.run.pipeline.Session.admit`) before any
        call, a refusal a 400 naming its field; 429 when the server holds as many as it may."""
        if self.draining:
            raise BadRequest("the server is shutting down", None, 503, {"Retry-After": "5"})
        docs = [_document(text, title, original) for text, title, original in zip(call.texts, call.titles,
                                                                                call.originals)]
        request = Request(call.query, docs, call.id, instruction=call.instruction, pivot=call.pivot,
                          asked=Asked(top_k=call.top_n, cut=call.cut, cut_target=call.cut_target, method=call.method,
                                      budget=call.budget, max_chunks=call.max_chunks_per_doc))
        try:
            [admitted] = self.session.admit([request], SAID["request"], one_at_a_time=True)
        except InputError as exc:
            raise _refused(exc, call) from None
        run = admitted.strategy.for_run()
        ticket = Ticket(call, admitted, run, Future(), time.perf_counter())
        with self.lock:
            if len(self.tickets) >= self.limits.max_in_flight + self.limits.max_queued:
                raise BadRequest(f"the server holds {len(self.tickets)} requests, as many as it takes "
                                 f"({self.limits.max_in_flight} in flight, {self.limits.max_queued} queued): "
                                 "try again shortly", None, 429, {"Retry-After": "1"})
            self.tickets[call.id] = ticket
        if admitted.prepared.task.n == 0:  # pragma: no cover - protocol.parse refuses an empty list
            raise BadRequest("documents must hold at least one document", "documents")
        self._watched(admitted.prepared)
        self.feed.admit(Admission(admitted.task, run, admitted.docs, call.id))
        return ticket

    def _watched(self, prepared) -> None:
        """A request whose documents carry scores counted toward the map's comparison; a shift, once the comparison
        is made, said once in the server's log (every later answer's meta holds the comparison)."""
        if self.watch is None or not prepared.scored:
            return
        shift = self.watch.see([prepared.task])
        if shift is not None and shift.shifted:
            print(f"acurank: {shift.line('--calibration')}", file=sys.stderr)

    @property
    def shifted(self) -> int:
        """/metrics' acurank_calibration_shifted: 1 shifted, 0 not, -1 not compared (no map, or too few requests with
        scores yet)."""
        shift = None if self.watch is None else self.watch.shift
        return -1 if shift is None else int(shift.shifted)

    def withdraw(self, ticket: Ticket) -> None:
        """The caller is gone: its windows not yet sent are dropped, its answer will not be waited for."""
        with self.lock:
            self.tickets.pop(ticket.call.id, None)
        self.calls.pop(ticket.call.id, None)
        self.feed.withdraw(ticket.call.id)
        self.metrics.withdrawn.inc()

    def answer(self, ticket: Ticket, outcome: QueryOutcome) -> tuple[list[int], list[float], dict, list]:
        """(document indices best first, their 0-1 relevance scores, the request's accounting, each document's
        scoring passage where it was split: {index, text, words} or None)."""
        out = self.session.answer(ticket.admitted, outcome)
        calibrated, cuts = self.session.calibration, ticket.admitted.cuts  # every admitted request is calibrable
        position = {docid: i for i, docid in enumerate(ticket.admitted.prepared.docs)}  # the request's order
        order = [position[d.id] for d in out.docs]
        scores = relevance_scores(out, len(ticket.call.texts))
        passages = [None if d.passage is None else {"index": d.passage.index, "text": d.passage_text,
                                                     "words": [d.passage.start, d.passage.end]} for d in out.docs]
        tally = out.tally
        usage = {"method": ticket.strategy.name, "calls": tally.calls, "cached_calls": tally.cached_calls,
                 "input_tokens": tally.input_tokens, "output_tokens": tally.output_tokens,
                 "rounds": tally.rounds, "seconds": round(out.seconds, 4),
                 "stop": out.stop.value if out.stop is not None else None,
                 "k": out.k, "relevance_score": "p_topk" if out.k is not None else "position"}
        if calibrated is not None:  # relevance_score is P(relevant); P(none) beside it
            usage.update(relevance_score="p_relevant", grade=calibrated.grade, p_none=out.p_none)
            if self.watch is not None and self.watch.shift is not None:  # the requests against the map's queries
                usage.update(calibration_shift=self.watch.shift.as_dict())
            if cuts:  # the list stops where relevance ends (maybe empty)
                usage.update(cut=str(cuts[0]))
        if tally.thought:  # only where the backend thinks: other answers unchanged
            usage.update(thinking_calls=tally.thinking_calls, reasoning_tokens=tally.reasoning_tokens)
        if tally.thoughts_cut:
            usage["thought_cut"] = tally.thoughts_cut
        if out.note is not None:
            usage["note"] = out.note
        if ticket.call.truncated:
            usage["truncated_documents"] = ticket.call.truncated
        if ticket.admitted.split is not None:
            usage["passages"] = {"ranked": ticket.admitted.split.task.n, "split": ticket.admitted.split.split,
                                 "capped": ticket.admitted.split.capped}
        return order, scores, usage, passages

    # -- the driver thread ------------------------------------------------------------------------

    def _on_step(self, task: RankingTask, step: Step) -> None:
        calls = self.calls.get(task.qid, 0) + sum(1 for w in step.windows if len(w) >= 2)
        self.calls[task.qid] = calls
        if calls > self.limits.max_calls:  # stopped here: this step's windows are withdrawn with it
            with self.lock:
                ticket = self.tickets.pop(task.qid, None)
            self.calls.pop(task.qid, None)
            self.feed.withdraw(task.qid)
            if ticket is not None and not ticket.future.done():
                name = ticket.strategy.name
                remedy = (f"give a budget of at most {self.limits.max_calls}, or a method that makes fewer"
                          if "budget" in method_options(name) else
                          "give a method that makes fewer (this one takes no budget)")
                ticket.future.set_exception(BadRequest(
                    f"method {name!r} asked for more than this server's limit of {self.limits.max_calls} calls for "
                    f"this request; {remedy}", "method", 422))

    def _serve(self) -> None:
        """Serve the feed until it is closed and empty; a backend's failure fails the requests in flight and
        serving starts again for the ones still waiting."""
        while True:
            try:
                for outcome in self.session.serve(self.feed, self.limits.max_in_flight, self._on_step, self._counted):
                    self.calls.pop(outcome.qid, None)
                    with self.lock:
                        ticket = self.tickets.pop(outcome.qid, None)
                    if ticket is not None and not ticket.future.done():
                        ticket.future.set_result(outcome)
                return
            except BaseException as exc:  # noqa: BLE001 - a backend's failure belongs to the requests it held
                message = " ".join(str(exc).split()) or type(exc).__name__
                waiting = {a.key for a in list(self.feed.waiting)}
                with self.lock:
                    failed = [t for key, t in self.tickets.items() if key not in waiting]
                    for t in failed:
                        self.tickets.pop(t.call.id, None)
                self.metrics.backend_failures.inc()
                for t in failed:
                    if not t.future.done():
                        t.future.set_exception(BackendFailed(message))
                if self.feed.exhausted:
                    return

    def close(self, timeout: float | None = None) -> None:
        """Take no more requests, let the driver finish what it holds, release the backend and the cache."""
        self.draining = True
        self.feed.close()
        self.thread.join(timeout)
        self.session.close()

    def _counted(self, backend):
        """The backend with each of its calls (a batch of windows) and each window's answer counted for /metrics."""

        metrics = self.metrics

        def count(windows: int) -> None:
            metrics.batches.inc()
            metrics.windows.inc(windows)
            with self.lock:
                self.windows_out += windows

        def settled(windows: int) -> None:
            with self.lock:
                self.windows_out -= windows

        def each(result) -> None:  # every window's answer, its request answered or not (withdrawn, timed out, capped)
            metrics.calls.inc()
            metrics.cached_calls.inc(int(result.cached))
            metrics.tokens.labels("input").inc(result.input_tokens)
            metrics.tokens.labels("output").inc(result.output_tokens)
            if result.reasoning_tokens:
                metrics.tokens.labels("reasoning").inc(result.reasoning_tokens)
            metrics.thinking_calls.inc(int(result.thinking))
            metrics.thought_cut.inc(int(result.thought_cut))

        return Counted(backend, count, each, settled)


def _document(text: str, title: str, original: Any) -> dict[str, Any]:
    """A request's document as the session takes it (the API's form): its passage text and title as read, and an
    object's own ``id`` and first-stage ``score`` where it gives them, taken as the API takes them (ids unique and
    clean, scores numbers, every document's or none)."""
    doc: dict[str, Any] = {"text": text, "title": title} if title else {"text": text}
    if isinstance(original, dict):
        doc.update({key: original[key] for key in ("id", "score") if key in original})
    return doc
