"""One request, whichever entrance it came through. What a call asks of the session's method is one record,
:class:`Asked` (top_k, the cuts, another method and its budget, passages a document), and :func:`settle` decides what
it comes to, each rule in one place, in one order:

0. the settings in their types, in the order a server's schema checks them (``top_k``, the pivot, the cut), and the
   pivot's text as a document's;
1. the method serving it: the session's own, or another by name with a budget (a server's request), with the map's
   k kept whatever ``top_k`` says (:class:`~acurank_cli.run.pipeline.Methods`); a request served alone refuses a
   method whose queries advance together;
2. ``top_k`` and ``min_p_topk`` in their domains;
3. whether the session's calibration map applies: a method with ratings, the map's own method (unless allowed),
   documents ranked whole;
4. the pivot's rules (:mod:`acurank_cli.relevance.pivot`);
5. the cut (``cut``, and ``min_p_relevant`` as the cut ``p:X``) and where its calls go.

The command line settles its run's flags there once (``rerank``/``baseline``: :func:`acurank_cli.cli.rerank.job_of`;
its queries stream from a run file, with flat memory, and meet rules 6 to 9 as a run's:
:mod:`acurank_cli.run.preflight`, :func:`~acurank_cli.rerankers.listwise.reranker.first_window_fit`). Every other
entrance translates its own form into :class:`Request` records (a query, its documents, its instruction and pivot,
and its call's :class:`Asked`): the Python API's ``rerank``/``rerank_batch`` (and the PyTerrier, LangChain and
LlamaIndex adapters, which call it), a server's ``POST /v1/rerank`` and ``/v2/rerank`` and the MCP ``rerank`` tool;
:meth:`~acurank_cli.run.pipeline.Session.admit` settles each and applies the rest (:func:`admit`):

6. the query's instruction, the documents (:func:`~acurank_cli.run.documents.prepare`), the pivot's passage;
7. the passages (the session's, or at most ``max_chunks`` a document);
8. the set's check: every first-stage score under the method's rating init, every task (as the method runs it:
   by passages where documents are split);
9. each query's first window fitted to the backend's context.

A refusal is an :class:`~acurank_cli.errors.InputError` whose ``field`` names the request's setting it is about, in
the entrance's words (:class:`~acurank_cli.relevance.Spelling`); the command line says it as its flag, the API raises
it as it is, a server answers 400 naming the field. :meth:`~acurank_cli.run.pipeline.Session.answer` turns an
admitted request's outcome into its :class:`~acurank_cli.results.RerankOutput` (passages gathered back to documents,
P(relevant), the cuts, top_k)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from ..params import ParameterError, at_least, between

if TYPE_CHECKING:  # pragma: no cover
    from ..method.strategy import Strategy
    from ..records import QueryOutcome
    from ..relevance import Spelling
    from ..results import RerankOutput
    from .documents import Prepared
    from .passages import Passages, Split


#: the :class:`~acurank_cli.run.pipeline.Session` whose rules a request meets (its methods, map, passages, backend):
#: named, not imported, as the session imports this module
SessionLike = Any
#: the :class:`~acurank_cli.run.pipeline.Methods` a call's method is chosen from (with their map): named, not imported,
#: for the same reason
MethodsLike = Any


class Unservable(InputError):
    """A method whose queries advance together cannot be served one request at a time."""


def check_servable(strategy: Strategy) -> None:
    """Refuse (:class:`Unservable`) a method that advances every query of a run together: the server's --method and
    each request's ``method`` are checked here, the one place the rule is said."""
    if strategy.for_run().lockstep:
        raise Unservable(f"method {strategy.name!r} advances every query of a run together (a query-set budget or a "
                         "pool shared by the run's queries) and cannot be served a request at a time"
                         + (" (acurank-auto: give --beta-pool query)" if strategy.name.startswith("acurank-auto")
                            else ""))


#: a blank pivot's refusal, by every entrance that takes one in a call (a server's parse says it before admission)
PIVOT_BLANK = "pivot must not be blank (leave it out for none)"


@dataclass(frozen=True)
class Asked:
    """What a call asks of the session's method, one for all of its queries, whichever entrance it came through: the
    command line's flags (one for the run: ``--cut``, ``--cut-target``), the API's keywords (one for a call), a
    server's request fields. :func:`settle` decides what it comes to, the one place each rule about it is said."""

    #: keep the best top_k (the API's ``top_k``, a request's ``top_n``): it cuts the list, never changes k
    top_k: int | None = None
    #: keep the documents whose p_topk is at least this
    min_p_topk: float | None = None
    #: with a map: keep the documents whose P(relevant) is at least this (the cut ``p:X``)
    min_p_relevant: float | None = None
    #: with a map: where the list stops ("p:X" or "f1") and where the cut's calls go ("cut" or "topk")
    cut: str | None = None
    cut_target: str | None = None
    #: another of the session's methods by its ``--method`` name (a server's request), and its budget
    method: str | None = None
    budget: int | None = None
    #: at most this many passages a document (a server's ``max_chunks_per_doc``); None: the session's passages
    max_chunks: int | None = None


@dataclass(frozen=True)
class Request:
    """One query to rerank as every entrance asks it: the query and its documents (strings, dicts or
    :class:`~acurank_cli.records.Doc` records), its own instruction and pivot, and what its call asks of the session's
    method (:class:`Asked`, shared by a call's queries)."""

    query: str
    documents: Sequence[Any]
    qid: str = "q"
    #: this query's task instruction (a listwise LLM's prompt), in place of the backend's
    instruction: str | None = None
    #: a passage at the relevance boundary written for this query, rated in every window ("simulated": the simulated
    #: reranker's)
    pivot: str | None = None
    asked: Asked = Asked()


@dataclass(frozen=True)
class Settled:
    """What a call's :class:`Asked` comes to under the session's rules: the method serving it (k, budget, pivot and the
    cut's aim decided) and its cuts, in the order they apply."""

    strategy: "Strategy"
    cuts: tuple = ()
    #: whether the first cut's calls are aimed at its boundary (:func:`~acurank_cli.relevance.aims`)
    aimed: bool = False


@dataclass(frozen=True)
class Admitted:
    """A request that passed every rule: its documents as a task, the method serving it, its cuts, and its passages
    (None: documents ranked whole)."""

    request: Request
    prepared: "Prepared"
    strategy: "Strategy"
    cuts: tuple = ()
    split: "Split | None" = None
    #: what the method warns of the call's queries before any call, as the command line warns of a run's (first-stage
    #: scores off the paper's prior under init score): the API warns, a server says it in ``meta.warnings``
    warnings: tuple[str, ...] = ()

    @property
    def task(self):
        """The task the method runs: the query's passages where its documents are split."""
        return self.prepared.task if self.split is None else self.split.task

    @property
    def docs(self):
        """The texts the backend reads, by the task's ids."""
        return self.prepared.docs if self.split is None else self.split.docs


@contextmanager
def _named(field: str, of_documents: bool = False):
    """Name ``field`` on a refusal raised inside that names none yet (the entrance reports it beside the message);
    ``of_documents``: the refusal is about the call's documents (:attr:`~acurank_cli.errors.InputError.of_documents`)."""
    try:
        yield
    except InputError as exc:
        if exc.field is None:
            exc.field, exc.of_documents = field, of_documents
        raise


#: a request's own settings (a call's queries share the rest: top_k, the cut, the instruction)
_OWN = ("query", "pivot", "pivots")  # a qid's refusal names it itself (named by it, a bad one read twice or on two lines)


@contextmanager
def _of_query(qid: str):
    """Record the query (:attr:`~acurank_cli.errors.InputError.query`) a refusal about one request's query, pivot or
    documents is about, for an entrance whose call names several (a batch's refusal named none of its queries)."""
    try:
        yield
    except InputError as exc:
        if exc.of_documents or exc.field in _OWN:
            exc.query = qid
        raise


def passages_for(session: "SessionLike", asked: Asked) -> "Passages | None":
    """How a call's documents are split: the session's passages, with at most the call's ``max_chunks`` passages a
    document (never more than the session's --max-passages); ``max_chunks`` where the session splits none: passages
    of :data:`~acurank_cli.run.passages.DEFAULT_WORDS` words. None: documents whole."""
    from .passages import DEFAULT_WORDS, Passages

    own, most = session.passages, asked.max_chunks
    if most is None or not session.needs_texts:
        return own
    if own is None:
        return Passages(DEFAULT_WORDS, DEFAULT_WORDS // 2, max_per_doc=most)
    return replace(own, max_per_doc=min(most, own.max_per_doc))


def settle(methods: MethodsLike, asked: Asked, said: "Spelling", *, passages: "Passages | None" = None,
           pivot: Any = None, allow_map_mismatch: bool = False, one_at_a_time: bool = False,
           most: int | None = None) -> Settled:
    """Rules 0 to 5 (see the module doc), in that order, for what a call asks (``asked``) of a session's ``methods``
    (their map: ``methods.calibration``): the settings in their types, the method serving it, ``top_k`` and
    ``min_p_topk``, whether the map applies, the pivot's rules, the cuts and where their calls go. ``pivot``: the
    call's pivot as given (None: none; a request's passage, checked as a document's text; True: one given otherwise,
    the command line's --pivot, read and checked as its file); ``passages``: how the call's documents are split
    (:func:`passages_for`); ``allow_map_mismatch``: a call may name another method than the map's;
    ``one_at_a_time``: a server's request; ``most``: the most documents of one of the call's queries. The command line
    settles its run's flags here once, each other entrance each request (:func:`admit`)."""
    _typed(asked, said, None if pivot is True else pivot)
    strategy = _method(methods, asked, said, one_at_a_time, most)
    _calibrated(methods.calibration, asked, strategy, said, (passages, allow_map_mismatch))
    strategy = _pivoted(methods.calibration, asked, strategy, said, (passages, pivot is not None))
    return Settled(*_cuts(methods.calibration, asked, strategy, said))


def _typed(asked: Asked, said: "Spelling", pivot: str | None) -> None:
    """Rule 0: the settings a server's schema types, in its order, so that a call with two faults is refused for the
    same one at every entrance: ``top_k`` in its domain, the pivot, the cut and its target strings (a number or a list
    was taken by some entrances and failed inside, after admission: a cut of 0.3), then the pivot's text by the rules
    of a document's (stop 103)."""
    if asked.top_k is not None and not at_least(1).contains(asked.top_k):
        raise ParameterError(said.top_k, asked.top_k, at_least(1).describe())
    for name, value in (("pivot", pivot), ("cut", asked.cut), ("cut_target", asked.cut_target)):
        if value is not None and not isinstance(value, str):
            raise InputError(f"{name} must be a string, got {type(value).__name__}"
                             + (f" (give {str(value)!r})" if isinstance(value, (int, float)) else ""), field=name)
    if pivot is not None:
        from ..records import visible
        from .documents import check_unicode

        if not visible(pivot):
            raise InputError(PIVOT_BLANK, field="pivot")
        check_unicode(pivot, "pivot", "pivot")


def _method(methods: MethodsLike, asked: Asked, said: "Spelling", one_at_a_time: bool,
            most: int | None = None) -> "Strategy":
    """Rules 1 and 2: the method by its name, then with its budget, then with the call's top_k (each choice built
    once), each refusal naming the setting that caused it."""
    top_k = asked.top_k  # k from top_k: never beyond the call's most documents (a top_n of 10**26 sets no such k)
    if top_k is not None and most is not None:
        top_k = min(top_k, max(1, most))
    steps = (("method", (asked.method, None, None)), ("budget", (asked.method, None, asked.budget)),
             (said.top_k, (asked.method, top_k, asked.budget)))
    for field, (name, top_k, budget) in steps:
        with _named(field):
            strategy = methods.for_call(name, top_k, budget)
    if one_at_a_time:
        with _named("method"):
            check_servable(strategy)
    if asked.min_p_topk is not None:
        if not between(0.0, 1.0).contains(asked.min_p_topk):
            raise ParameterError("min_p_topk", asked.min_p_topk, between(0.0, 1.0).describe())
        if strategy.cutoff is None:
            raise InputError(f"min_p_topk needs a method with ratings and a cutoff k (acurank...), not "
                             f"{strategy.name!r}", field="min_p_topk")
    return strategy


def _calibrated(calibration: Any, asked: Asked, strategy: "Strategy", said: "Spelling", split: tuple) -> None:
    """Rule 3: with a map, a call it cannot apply to is refused, never answered with another quantity under the name
    of P(relevant): a method without ratings or another method than the map's (a call naming one, unless allowed:
    ``split`` is (the passages, whether a mismatch is allowed); the session's own was checked when it was built), or
    documents split into passages."""
    from ..relevance import check_applicable, check_origin

    passages, allowed = split
    if calibration is None:
        return
    if asked.method is not None:
        with _named("method"):
            check_applicable(strategy, None, said.calibration)
            check_origin(calibration, None, strategy.name, allowed=allowed, said=said)
    check_applicable(strategy, passages, said.calibration, said.passages)


def _pivoted(calibration: Any, asked: Asked, strategy: "Strategy", said: "Spelling", given: tuple) -> "Strategy":
    """Rule 4: the method with the call's pivot in every window (``given``: (the passages, whether a pivot is given)),
    the pivot's rules as every entrance says them (documents ranked whole; a map fit with a pivot needs one, one fit
    without refuses it)."""
    from ..relevance import check_pivot, pivoted

    passages, pivot = given
    if asked.max_chunks is None:  # the passages, if any, are the session's own
        said = replace(said, passages=said.own_passages)
    with _named(said.pivot):
        if pivot:
            strategy = pivoted(strategy, said)
        check_pivot(pivot, passages, calibration, said)
    return strategy


def _cuts(calibration: Any, asked: Asked, strategy: "Strategy", said: "Spelling") -> tuple["Strategy", tuple, bool]:
    """Rule 5: the call's cuts (``cut``, then ``min_p_relevant`` as the cut ``p:X``: one rule), both needing the map,
    and the method with the cut's calls aimed as every entrance aims them (:func:`~acurank_cli.relevance.aims`: the
    first cut's boundary)."""
    from ..relevance import Cut, Relevance, aims, cut_asked

    also = None if asked.min_p_relevant is None else "min_p_relevant"
    parsed, target = cut_asked(calibration, asked.cut, asked.cut_target, said, also=also)
    if asked.min_p_relevant is not None and not between(0.0, 1.0).contains(asked.min_p_relevant):
        raise ParameterError("min_p_relevant", asked.min_p_relevant, between(0.0, 1.0).describe())
    cuts = tuple(c for c in (parsed, None if also is None else Cut("p", float(asked.min_p_relevant)))
                 if c is not None)
    if not cuts:
        return strategy, cuts, False
    aimed = aims(calibration, target)
    return Relevance(calibration, cuts[0], target=aimed).aimed(strategy), cuts, aimed


def _documents(session: "SessionLike", request: Request, said: "Spelling") -> "Prepared":
    """Rule 6: the query's own instruction (a backend that puts one in its prompt), its documents as a task, and its
    pivot's passage among them (the pivot fits the backend)."""
    from ..relevance import Pivot
    from .documents import prepare

    with _named("instruction"):
        session.check_instruction(request.instruction)
    with _named(said.documents, of_documents=True):
        prepared = prepare(request.query, request.documents, request.qid, request.instruction,
                           reads_texts=session.needs_texts)
    if request.pivot is not None:
        with _named(said.pivot):
            Pivot.given({request.qid: request.pivot}, said).add_texts(
                session.needs_texts, session.spec or type(session.backend).__name__, [request.qid], prepared.docs,
                said)
    return prepared


def _split(session: "SessionLike", request: Request, prepared: "Prepared", said: "Spelling") -> "Split | None":
    """Rule 7: the request's documents as passages (None: whole)."""
    from .passages import split

    spec = passages_for(session, request.asked)
    if spec is None or prepared.task.n == 0:
        return None
    with _named(said.passages if request.asked.max_chunks is not None else said.documents, of_documents=True):
        return split(prepared.task, prepared.docs, spec)


def admit(session: "SessionLike", requests: Sequence[Request], said: "Spelling", *,
          one_at_a_time: bool = False) -> list[Admitted]:
    """Every rule about each request, in the module's order, then the set's check (rule 8), before any call.
    ``said``: how the entrance names its settings; ``one_at_a_time``: a server's request, served alone (a method
    whose queries advance together refused)."""
    from ..method.trueskill import check_scores  # numpy: not at the CLI's start
    from ..method.strategy import check_tasks, expect_kernels
    from ..relevance import zscore_way

    admitted = []
    sized = [len(r.documents) for r in requests if hasattr(r.documents, "__len__")]
    most = max(sized) if len(sized) == len(requests) and sized else None  # one call's queries share one method
    for request in requests:
        with _of_query(request.qid):
            settled = settle(session.methods, request.asked, said, passages=passages_for(session, request.asked),
                             pivot=request.pivot, allow_map_mismatch=session.allow_map_mismatch,
                             one_at_a_time=one_at_a_time, most=most)
            prepared = _documents(session, request, said)
            admitted.append(Admitted(request, prepared, settled.strategy, settled.cuts,
                                     _split(session, request, prepared, said)))
    served = [a for a in admitted if a.prepared.task.n > 0]
    if served:
        strategy = served[0].strategy
        with _named("method"):  # the session's gate passed its own method: a request's other one is refused
            session.check_gate(strategy)
        for a in served:  # each call's documents named as the call gave them, its query by the batch (not "query q")
            with _of_query(a.request.qid), _named(said.documents, of_documents=True):
                check_scores([a.prepared.task], strategy.init, "the documents' scores", zscore_way(session.calibration, said),
                             who=lambda qid, docid: f"document {docid}")
        asked = any(a.split is not None and a.request.asked.max_chunks is not None for a in served)
        with _named(said.passages if asked else said.documents, of_documents=True):
            notes = check_tasks(strategy, [a.task for a in served])
        expect_kernels(strategy, [a.task for a in served])
        warned = tuple(n[len("warning: "):] for n in notes if n.startswith("warning: "))  # the rest: an answer's note
        if not any(a.prepared.scored for a in served):  # of scores given (not the places n .. 1 that stand in)
            warned = ()
        warned += _fitted(session, strategy, served, said)
        if warned:
            admitted = [replace(a, warnings=warned) if a.prepared.task.n > 0 else a for a in admitted]
    return admitted


def _fitted(session: "SessionLike", strategy: "Strategy", served: Sequence[Admitted], said: "Spelling") -> tuple:
    """Rule 9: each query's first-round window fitted to the context as the backend fits it, as the command line fits
    its run's (:func:`~acurank_cli.rerankers.listwise.reranker.first_window_fit`): a prompt that leaves no passage
    anything useful refused, passages cut below the floor warned of, once (they were silent but on the command
    line); by its passages where the documents are split."""
    from ..rerankers.listwise.reranker import first_window_fit
    from .driver import task_scores

    backend = session.pipeline.reranker if session.pipeline is not None else session.backend
    out: list[str] = []
    for a in served:
        with _of_query(a.request.qid), _named(said.documents, of_documents=True):
            fit = first_window_fit(backend, strategy, [a.task], a.docs, scores=task_scores)
        if fit is not None:  # a batch's named by its query, as its refusals are
            text = (fit.cli() if said.flags else str(fit))
            text = f"query {a.request.qid}: {text}" if len(served) > 1 else text
            out += [text] if text not in out else []
    return tuple(out)


def answer(session: "SessionLike", admitted: Admitted, outcome: "QueryOutcome | None") -> "RerankOutput":
    """The request's output from its query's outcome (None: a request without documents, answered with none): its
    passages gathered back to documents, each document's rating, p_topk and P(relevant) (with the session's map),
    cut by the request's cuts, then to its top_k and min_p_topk."""
    from ..records import CallTally
    from ..results import RerankOutput
    from .documents import output_of

    request, calibration = admitted.request, session.calibration
    if outcome is None:
        return RerankOutput(qid=request.qid, query=admitted.prepared.task.query, docs=(), tally=CallTally(),
                            seconds=0.0, stop=None, k=admitted.strategy.cutoff,
                            p_none=None if calibration is None else 1.0)
    if admitted.split is not None:
        outcome = admitted.split.gather(outcome)
    ratings, pivot = outcome.rated()
    return output_of(admitted.prepared, outcome, ratings, admitted.strategy.cutoff, top_k=request.asked.top_k,
                     min_p_topk=request.asked.min_p_topk, relevance=calibration, cuts=admitted.cuts, pivot=pivot)


__all__ = ["Admitted", "Asked", "Request", "Settled", "Unservable", "admit", "answer", "check_servable", "passages_for",
           "settle"]
