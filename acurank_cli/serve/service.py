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

import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, replace

from ..errors import InputError, OptionError
from ..method.registry import method_options
from ..method.strategy import Strategy
from ..params import ParameterError
from ..relevance import SAID, Cut, Pivot, aim_cut, check_pivot, cut_asked, pivoted
from ..records import QueryOutcome, RankingTask, Step
from ..rerankers.counted import Counted
from ..run.documents import Prepared, output_of, relevance_scores
from ..run.passages import DEFAULT_WORDS, Passages, Split, split
from .admission import Admission, Feed
from ..run.pipeline import Methods, Session, Unservable, check_servable
from .metrics import Metrics
from .protocol import BadRequest, Limits, RerankCall


class BackendFailed(Exception):
    """The backend failed while this request's windows were out (the message is the backend's, one line)."""


@dataclass(frozen=True)
class Ticket:
    """An admitted request: what it asked, its task, the method planning it, and its answer to come."""

    call: RerankCall
    prepared: Prepared
    strategy: Strategy
    future: Future
    admitted: float
    #: the request's documents as passages (the server's --passages, or the request's max_chunks_per_doc); None: whole
    split: Split | None = None
    #: where the request's list stops (its ``cut``), or None
    cut: Cut | None = None


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
    session = Session(methods.strategy, reranker, backend_options, ray, Passages.of(*passages))  # checked, not built
    try:
        before_load()
        session.start(cache, None)
    except BaseException:
        session.close()
        raise
    return RerankService(session, methods, limits, calibration=calibrated, allow_map_mismatch=allow_map_mismatch)


class RerankService:
    """One backend and method, serving rerank requests from any number of threads."""

    def __init__(self, session: Session, methods: Methods, limits: Limits, metrics: Metrics | None = None,
                 calibration=None, allow_map_mismatch: bool = False):
        """``session``: started (its backend built behind the cache); ``methods``: the server's method and those a
        request may name; ``calibration``: the map that makes relevance_score P(relevant) (``--calibration``), or None;
        ``allow_map_mismatch``: a request may name another method than the map's (--allow-map-mismatch)."""
        self.session, self.methods, self.limits = session, methods, limits
        self.calibration, self.allow_map_mismatch = calibration, allow_map_mismatch
        self.metrics = metrics or Metrics()
        self.feed = Feed()
        self.lock = threading.Lock()
        self.tickets: dict[str, Ticket] = {}
        self.calls: dict[str, int] = {}  # the driver thread's count of each request's calls so far
        self.draining = False
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
        """Admit a request: its method and documents checked before any call (BadRequest naming the field), or
        429 when the server holds as many as it may."""
        if self.draining:
            raise BadRequest("the server is shutting down", None, 503, {"Retry-After": "5"})
        strategy = self._method(call)
        try:
            check_servable(strategy)
        except Unservable as exc:
            raise BadRequest(str(exc), "method") from None
        if self.calibration is not None:  # relevance_score is P(relevant) for every request, or the request is refused
            self._calibrable(call, strategy)
        strategy, cut = self._cut(call, self._pivoted(call, strategy))
        run = strategy.for_run()
        docs = [{"text": t, "title": title} if title else {"text": t} for t, title in zip(call.texts, call.titles)]
        try:
            prepared = self.session.prepared(call.query, docs, run, qid=call.id, instruction=call.instruction)
        except OptionError as exc:
            raise BadRequest(" ".join(str(exc).split()), "instruction") from None
        except (InputError, ParameterError) as exc:  # said of the request, not of its internal query id
            if isinstance(exc, InputError) and (exc.source or "").startswith("documents["):  # one document: named
                raise BadRequest(" ".join(str(exc).split()), exc.source) from None
            said = " ".join(str(exc).split()).replace(f"query {call.id} ", "the request ")
            said = said.replace(call.id, "the request")
            raise BadRequest(f"documents: {said}", "documents") from None
        if call.pivot is not None:  # the pivot fits the backend: its passage among the request's documents
            try:
                Pivot.given({call.id: call.pivot}, SAID["request"]).add_texts(
                    self.session.needs_texts, self.session.spec or "", [call.id], prepared.docs, SAID["request"])
            except InputError as exc:
                raise BadRequest(exc.message, "pivot") from None
        task, docs, parts = self._split(call, prepared, run)
        ticket = Ticket(call, prepared, run, Future(), time.perf_counter(), parts, cut=cut)
        with self.lock:
            if len(self.tickets) >= self.limits.max_in_flight + self.limits.max_queued:
                raise BadRequest(f"the server holds {len(self.tickets)} requests, as many as it takes "
                                 f"({self.limits.max_in_flight} in flight, {self.limits.max_queued} queued): "
                                 "try again shortly", None, 429, {"Retry-After": "1"})
            self.tickets[call.id] = ticket
        if prepared.task.n == 0:  # pragma: no cover - protocol.parse refuses an empty list
            raise BadRequest("documents must hold at least one document", "documents")
        self.feed.admit(Admission(task, run, docs, call.id))
        return ticket

    def passages_for(self, call: RerankCall) -> Passages | None:
        """How the request's documents are split: the server's --passages, with at most the request's
        ``max_chunks_per_doc`` passages a document (never more than the server's --max-passages); a request's
        ``max_chunks_per_doc`` on a server started without --passages splits into passages of
        :data:`~acurank_cli.run.passages.DEFAULT_WORDS` words. None: documents whole."""
        server, asked = self.session.passages, call.max_chunks_per_doc
        if asked is None or not self.session.needs_texts:
            return server
        if server is None:
            return Passages(DEFAULT_WORDS, DEFAULT_WORDS // 2, max_per_doc=asked)
        return replace(server, max_per_doc=min(asked, server.max_per_doc))

    def _split(self, call: RerankCall, prepared: Prepared, strategy: Strategy):
        """(task, texts, split) the request is served by: its passages where documents are split (checked by the
        method as a task of passages, before any call)."""
        spec = self.passages_for(call)
        if spec is None:
            return prepared.task, prepared.docs, None
        try:
            parts = split(prepared.task, prepared.docs, spec)
            strategy.check(parts.task)
        except (InputError, ParameterError) as exc:
            raise BadRequest(f"documents: {' '.join(str(exc).split())}".replace(call.id, "the request"),
                             "max_chunks_per_doc" if call.max_chunks_per_doc is not None else "documents") from None
        return parts.task, parts.docs, parts

    def _method(self, call: RerankCall) -> Strategy:
        """The request's method: its name alone, then with its budget, then with k = top_n, each refusal naming
        the field that caused it (each choice is built once)."""
        steps = (("method", (call.method, None, None)), ("budget", (call.method, None, call.budget)),
                 ("top_n", (call.method, call.top_n, call.budget)))
        for field, (method, top_n, budget) in steps:
            try:
                strategy = self.methods.for_call(method, top_n, budget)
            except (InputError, ParameterError) as exc:
                raise BadRequest(" ".join(str(exc).split()), field) from None
        return strategy

    def _calibrable(self, call: RerankCall, strategy: Strategy) -> None:
        """On a server with a map, a request the map cannot apply to is refused (400 naming its field), never
        answered with another quantity under the name relevance_score: a method without ratings, or documents split
        into passages, or another method than the map was fit with (unless --allow-map-mismatch: rerank's rule,
        relevance.check_origin). The map's k holds for every request (top_n only cuts the list: pipeline.Methods
        owns it)."""
        from ..relevance import check_applicable, check_origin

        try:
            check_applicable(strategy, None, "this server's --calibration map")
            check_origin(self.calibration, None, strategy.name, allowed=self.allow_map_mismatch)
        except InputError as exc:
            raise BadRequest(exc.message, "method") from None
        if self.passages_for(call) is not None:
            raise BadRequest("max_chunks_per_doc: this server answers P(relevant) (--calibration), calibrated on "
                             "documents ranked whole; send the request without max_chunks_per_doc",
                             "max_chunks_per_doc" if call.max_chunks_per_doc is not None else "documents")

    def _pivoted(self, call: RerankCall, strategy: Strategy) -> Strategy:
        """The request's method with its pivot in every window (``pivot``): the pivot's rules as every entrance says
        them (:mod:`acurank_cli.relevance`), each refusal a 400 naming ``pivot``."""
        said = SAID["request"]  # the passages: the request's max_chunks_per_doc, or this server's --passages
        said = replace(said, passages=said.passages if call.max_chunks_per_doc is not None else "this server's --passages")
        try:
            if call.pivot is not None:
                strategy = pivoted(strategy, said)
            check_pivot(call.pivot is not None, self.passages_for(call), self.calibration, said)
        except InputError as exc:
            raise BadRequest(exc.message, "pivot") from None
        return strategy

    def _cut(self, call: RerankCall, strategy: Strategy) -> tuple[Strategy, Cut | None]:
        """The request's cut (``cut`` and ``cut_target``: rerank's --cut and --cut-target, with this server's map) and
        its method, the cut's calls aimed as every entrance aims them (:func:`~acurank_cli.relevance.aims`); each
        refusal a 400 naming its field."""
        said = SAID["request"]
        try:
            cut = cut_asked(self.calibration, call.cut, call.cut_target, said)
        except InputError as exc:
            raise BadRequest(exc.message, exc.field) from None
        if cut is None:
            return strategy, None
        return aim_cut(strategy, self.calibration, cut, call.cut_target), cut

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
        if ticket.split is not None:
            outcome = ticket.split.gather(outcome)
        calibrated = self.calibration  # every admitted request can be calibrated (_calibrable)
        ratings, pivot = outcome.rated()
        out = output_of(ticket.prepared, outcome, ratings, ticket.strategy.cutoff, top_k=ticket.call.top_n,
                        relevance=calibrated, cuts=() if ticket.cut is None else (ticket.cut,), pivot=pivot)
        order = [int(d.id) for d in out.docs]
        scores = relevance_scores(out, len(ticket.call.texts))
        passages = [None if d.passage is None else {"index": d.passage.index, "text": d.passage_text,
                                                     "words": [d.passage.start, d.passage.end]} for d in out.docs]
        tally = outcome.tally
        usage = {"method": ticket.strategy.name, "calls": tally.calls, "cached_calls": tally.cached_calls,
                 "input_tokens": tally.input_tokens, "output_tokens": tally.output_tokens,
                 "rounds": tally.rounds, "seconds": round(outcome.seconds, 4),
                 "stop": outcome.stop.value if outcome.stop is not None else None,
                 "k": out.k, "relevance_score": "p_topk" if out.k is not None else "position"}
        if calibrated is not None:  # relevance_score is P(relevant); P(none) beside it
            usage.update(relevance_score="p_relevant", grade=calibrated.grade, p_none=out.p_none)
            if ticket.cut is not None:  # the list stops where relevance ends (maybe empty)
                usage.update(cut=str(ticket.cut))
        if tally.thought:  # only where the backend thinks: other answers unchanged
            usage.update(thinking_calls=tally.thinking_calls, reasoning_tokens=tally.reasoning_tokens)
        if tally.thoughts_cut:
            usage["thought_cut"] = tally.thoughts_cut
        if out.note is not None:
            usage["note"] = out.note
        if ticket.call.truncated:
            usage["truncated_documents"] = ticket.call.truncated
        if outcome.passages is not None:
            usage["passages"] = {"ranked": outcome.passages.ranked, "split": outcome.passages.split,
                                 "capped": outcome.passages.capped}
        self.metrics.calls.inc(tally.calls)
        self.metrics.cached_calls.inc(tally.cached_calls)
        self.metrics.tokens.labels("input").inc(tally.input_tokens)
        self.metrics.tokens.labels("output").inc(tally.output_tokens)
        if tally.reasoning_tokens:
            self.metrics.tokens.labels("reasoning").inc(tally.reasoning_tokens)
        self.metrics.thinking_calls.inc(tally.thinking_calls)
        self.metrics.thought_cut.inc(tally.thoughts_cut)
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
        """The backend with each of its calls (a batch of windows) counted for /metrics."""

        def count(windows: int) -> None:
            self.metrics.batches.inc()
            self.metrics.windows.inc(windows)

        return Counted(backend, count)
