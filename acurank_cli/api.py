"""The Python API: AcuRank inside a RAG pipeline, on the same objects the CLI runs.

    from acurank_cli import Reranker
    rr = Reranker("minilm", method="acurank")
    out = rr.rerank("how long is a flea's life cycle", ["Fleas live ...", "The cat ..."])
    print([d.text for d in out.top(3)], out.calls)

``Reranker(backend, method=..., **options)`` takes the ``--reranker`` names (``minilm``, ``hf:DIR``,
``openai:MODEL``, ``simulated``, or any registered backend) and the ``--method`` names
(``acurank``, ``acurank-H``, ``acurank-9``, ``acurank-auto``, ``sw-1``, ...). Keyword options are the
method's options (the flags' names: ``k``, ``eps``, ``tau``, ``m`` for ``--window``, ``budget``, ``init``, ...,
declared once in :mod:`acurank_cli.method.shared_options`) and the backend's options
(``context_size``, ``base_url``, ``concurrency``, ...). ``cache=`` names the call cache (default: the
CLI's, ``$ACURANK_CACHE`` or ``~/.cache/acurank/calls.sqlite``; ``None``: none), ``batch_queries=`` how
many queries advance together (default: as the CLI's, ``run.pipeline.BATCH_QUERIES_DEFAULT``: the backend's: 8 for vllm:, at least 8 for openai: (4 x its requests in flight, --concurrency x --base-url), 16 for hf: on a GPU, 4 x the actors with --ray, else 1). The defaults are the CLI's, from one place
(:mod:`acurank_cli.run.pipeline`).

Documents are strings, dicts (``text``, optional ``title``, ``id``, ``score``, anything else is kept
as metadata) or :class:`~acurank_cli.records.Doc` records. Ratings start from the z-scores of the
first-stage scores (``init="zscore"``: mu = 10 + z, sigma = mu / 3), or of the input order (scores
n, ..., 1) when no score is given: retrievers' scores come on any scale (cosines in [0, 1] would
start every rating far below TrueSkill's beta = 25/6, where the reranker's answers barely move it).
``init="score"`` gives the paper's init (mu = score, sigma = mu / 3), as the CLI does by default.
"""

from __future__ import annotations

import asyncio
import functools
import warnings
from dataclasses import replace
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .errors import InputError
from .params import ParameterError, at_least
from .method.strategy import Strategy
from .relevance.pivot import SAID
from .rerankers.backend import RerankerBase
from .results import RankedDoc, RerankOutput, Tokens, relevance_scores
from .run import pipeline
from .io.sources import check_id
from .run.documents import DocLike, Prepared, check_sequence, output_of, prepare
from .run.request import Asked, Request

_Prepared = Prepared  # the name the previous release's callers imported

#: how ``rerank_batch`` names its settings: its queries' pivots are ``pivots`` (``pivot`` is ``rerank``'s keyword)
BATCH_SAID = replace(SAID["api"], pivot="pivots")


def _of(exc: InputError, qid: str | None) -> None:
    """Name on ``exc`` the query of a batch it is about (``qid``; None: about the batch), before where in it."""
    if qid is not None:
        exc.source = f"query {qid}" + (f": {exc.source}" if exc.source else "")


def _batch(queries: Iterable[Any], qids: Sequence[str] | None) -> tuple[list, list]:
    """A batch's (query, documents) pairs and their qids (given, or their places: "0", "1", ...), each pair a pair
    and each qid once: one line where not (an item of one element was Python's unpacking error)."""
    queries = list(queries)
    for i, item in enumerate(queries):
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise InputError(f"queries[{i}]: give a (query, documents) pair, got {type(item).__name__}"
                             + (f" of {len(item)}" if isinstance(item, (tuple, list)) else ""))
    if isinstance(qids, (str, bytes)):  # a string is a sequence of letters: each query got one
        raise InputError("qids: give a list of query ids, one per query, not a string")
    qids = list(qids) if qids is not None else [str(i) for i in range(len(queries))]
    for i, qid in enumerate(qids):  # named by its place: a bad qid is no name for its query
        if not isinstance(qid, str):
            raise InputError(f"qids[{i}]: must be a string, got {type(qid).__name__}")
        check_id(qid, f"qids[{i}]:", "")
    for (_, docs), qid in zip(queries, qids):
        try:
            check_sequence(docs)
        except TypeError as exc:
            raise TypeError(f"query {qid}: {exc}") from None
    if len(qids) != len(queries):
        raise InputError(f"qids: {len(qids)} for {len(queries)} queries: give one unique qid per query")
    twice = next((q for i, q in enumerate(qids) if q in qids[:i]), None)
    if twice is not None:
        raise InputError(f"qids: {twice!r} is given twice: give one unique qid per query")
    return queries, qids


class Reranker:
    """A reranking pipeline: one backend (``--reranker`` name) and one method (``--method`` name)."""

    def __init__(self, backend: str | RerankerBase = pipeline.DEFAULTS.backend, method: str = pipeline.DEFAULTS.method,
                 *, cache: str | None = pipeline.DEFAULTS.cache, batch_queries: int | None = pipeline.DEFAULTS.batch_queries,
                 ray: str | None = None, actors: int | None = None, gpus_per_actor: float | None = None,
                 passages: str | int | None = None, passage_score: str | None = None,
                 max_passages: int | None = None, calibration: Any = None, allow_map_mismatch: bool = False,
                 **options: Any):
        from .run.passages import Passages
        from .run.ray_executor import ray_options

        self.method = method
        pipeline.check_batch_queries(batch_queries)
        if "prior" in options:  # not a backend's option: the command line's, which reads a whole run first
            raise InputError("prior: --prior em is the command line's (acurank rerank): EM estimates the share of "
                             "relevant candidates over a run's queries before any is written, and a Reranker answers "
                             "each call as it comes; apply the map as fit")
        method_options, backend_options = pipeline.split_options(options)
        from .relevance import check_origin, loaded

        calibrated = loaded(calibration)
        #: the method as built and the ones calls ask for (top_k, a server's per-request method and budget)
        self.methods = pipeline.Methods(method, method_options, pipeline.ScoreSource.documents, calibrated)
        self.strategy = self.methods.strategy
        #: long documents by their passages (``passages="WORDS[:STRIDE]"``, ``passage_score``, ``max_passages``:
        #: :mod:`acurank_cli.run.passages`), or None
        self.passages = Passages.of(passages, passage_score, max_passages)
        #: the calibration map that gives P(relevant) (``calibration=``: a map file or a
        #: :class:`~acurank_cli.relevance.CalibrationMap`; docs/relevance.md), or None
        self.calibration = _calibration(calibrated, self.strategy, self.passages)
        check_origin(calibrated, backend if isinstance(backend, str) else None, self.strategy.name, allowed=allow_map_mismatch,
                     said=SAID["api"])  # after its k and its method's ratings: the order of every entrance's checks
        from .relevance.shift import ShiftWatch

        #: the calls' queries against the map's fitting queries (a shift said once, as a CalibrationShiftWarning)
        self._watch = None if self.calibration is None else ShiftWatch(self.calibration.fit)
        self._session = pipeline.Session(self.strategy, backend, backend_options,
                                         ray_options(ray, actors, gpus_per_actor), self.passages, methods=self.methods,
                                         calibration=self.calibration, allow_map_mismatch=allow_map_mismatch)
        built = self._session.start(cache, batch_queries)
        self.backend, self.reranker, self.cache_path = built.backend, built.reranker, built.cache_path
        self.batch_queries = built.batch_queries

    @property
    def gate(self):
        """Gated thinking's gate (``thinking='gated'``), or None."""
        return self._session.gate

    # -- reranking ----------------------------------------------------------------------------

    def rerank(self, query: str, docs: Sequence[DocLike], *, qid: str = "q", top_k: int | None = None,
               min_p_topk: float | None = None, instruction: str | None = None, min_p_relevant: float | None = None,
               cut: str | None = None, pivot: str | None = None, cut_target: str | None = None) -> RerankOutput:
        """Rerank one query's documents (best first) with the method and backend; ``top_k`` keeps the best
        ``top_k`` and ``min_p_topk`` those whose p_topk is at least that; with a calibration map, ``min_p_relevant``
        keeps those whose P(relevant) is at least that and ``cut`` ("p:X" or "f1", as ``--cut``) stops the list where
        relevance ends (maybe empty), its calls aimed as ``cut_target`` says ("cut": at the cut's boundary; "topk": at
        the top k; default: at the cut where the map was fit with a pivot, as ``--cut-target``); ``pivot``: a passage at the relevance boundary written for this query, rated in
        the same game as a reference player in every window (for the simulated reranker, which reads no texts:
        ``"simulated"``; a map fit with ``--pivot`` needs one); ``instruction``: this query's task instruction (a
        listwise LLM's prompt), in place of the Reranker's."""
        request = Request(query, docs, qid, instruction=instruction, pivot=pivot,
                          asked=Asked(top_k=top_k, min_p_topk=min_p_topk, min_p_relevant=min_p_relevant, cut=cut,
                                      cut_target=cut_target))
        return self._answered([request])[0]

    def rerank_batch(self, queries: Iterable[tuple[str, Sequence[DocLike]]], *,
                     qids: Sequence[str] | None = None, top_k: int | None = None,
                     min_p_topk: float | None = None, instruction: str | None = None,
                     min_p_relevant: float | None = None, cut: str | None = None,
                     pivots: Sequence[str] | None = None, cut_target: str | None = None) -> list[RerankOutput]:
        """Rerank many queries; up to ``batch_queries`` advance together so their windows share batches.
        ``top_k``, ``min_p_topk``, ``min_p_relevant`` and ``cut`` cut every query's output (``cut_target``: where the
        cut's calls go); ``pivots``: each query's pivot passage (see :meth:`rerank`). Each query is one
        :class:`~acurank_cli.run.request.Request`, admitted by the session's rules as every entrance's is."""
        asked = Asked(top_k=top_k, min_p_topk=min_p_topk, min_p_relevant=min_p_relevant, cut=cut,
                      cut_target=cut_target)
        requests = _requests(queries, qids, pivots, instruction=instruction, asked=asked)
        try:
            return self._answered(requests, BATCH_SAID)
        except InputError as exc:  # about one of the queries: named by its qid (the caller's, or its place)
            _of(exc, exc.query)
            raise

    def _answered(self, requests: list[Request], said=SAID["api"]) -> list[RerankOutput]:
        """The requests admitted by the session's rules, as every entrance's are (``said``: in the call's keywords),
        driven and answered."""
        if self.reranker is None:
            raise InputError("this Reranker is closed: build a new one (Reranker(...)) to rerank again")
        admitted = self._session.admit(requests, said)
        for said in dict.fromkeys(w for a in admitted for w in a.warnings):  # the command line's warnings, once
            warnings.warn(said, UserWarning, stacklevel=3)
        self._watched([a.prepared.task for a in admitted if a.prepared.task.n > 0 and a.prepared.scored])
        self._judged([a.request.qid for a in admitted if a.prepared.task.n > 0])
        outputs = {a.request.qid: self._session.answer(a, outcome) for a, outcome in self._session.drive(admitted)}
        return [outputs[a.request.qid] if a.request.qid in outputs else self._session.answer(a, None)
                for a in admitted]  # a query without documents: answered with none

    @property
    def calibration_shift(self):
        """The first calls' queries (:data:`~acurank_cli.relevance.shift.WATCH_QUERIES`) compared with the map's
        fitting queries by their first-stage scores (a :class:`~acurank_cli.relevance.shift.Shift`), or None: no
        map, a map that recorded none, or too few queries yet."""
        return None if self._watch is None else self._watch.shift

    def _watched(self, tasks) -> None:
        """The queries counted toward the shift's comparison; the comparison made, a shift is warned of once."""
        if self._watch is None:
            return
        shift = self._watch.see(tasks)
        if shift is not None and shift.shifted:
            from .relevance.shift import CalibrationShiftWarning

            warnings.warn(shift.line("calibration"), CalibrationShiftWarning, stacklevel=4)  # the caller's line

    def _judged(self, qids: list[str]) -> None:
        """The simulated reranker's qrels judging none of a call's queries, warned of as the command line warns
        (:func:`~acurank_cli.rerankers.backends.simulated.unjudged`): its order is then the noise's alone."""
        qrels = getattr(self.backend, "qrels", None)
        if qrels is None:
            return
        said = pipeline.unjudged(qrels, qids, "qrels=", "this call's",
                                 " the qid of a call is its query's in the qrels: give qid=")
        if said is not None:
            warnings.warn(said, UserWarning, stacklevel=4)

    def estimate(self, queries: Iterable[tuple[str, Sequence[DocLike]]], *, qids: Sequence[str] | None = None,
                 qrels: Mapping[str, Mapping[str, int]] | None = None, rehearsals: int = 20,
                 noise: float | None = None,
                 price_in: float | None = None, price_out: float | None = None, top_k: int | None = None,
                 pivots: Sequence[str] | None = None, min_p_relevant: float | None = None, cut: str | None = None,
                 cut_target: str | None = None):
        """The bill of :meth:`rerank_batch` over ``queries`` with the same ``top_k``, ``pivots`` and cuts (which aim
        the calls and add a player to every window), before any call (``rerank --dry-run``'s,
        :mod:`acurank_cli.run.estimate`): a :class:`~acurank_cli.run.estimate.Bill` of calls, tokens (a listwise
        LLM's own prompts, built with no call) and, with both prices (a million tokens'), money; each a median and
        the least and most of ``rehearsals`` rehearsals against the simulated reranker at ``noise`` (None: 1), whose
        grades are ``qrels`` ({qid: {document id: grade}}) and each query's first-stage scores standardised, in turn,
        where qrels are given, else the first-stage scores alone; a Reranker of the simulated reranker rehearses as
        its run goes, with its qrels, noise and seeds, as ``rerank --dry-run`` does
        (:func:`~acurank_cli.run.estimate.rehearsal`). The queries are admitted by the session's rules, as
        :meth:`rerank_batch` admits them."""
        from .rerankers.backend import counts_tokens, innermost

        if not at_least(2).contains(rehearsals):
            raise ParameterError("rehearsals", rehearsals, at_least(2).describe())
        noisy = at_least(0.0, integer=False)
        if noise is not None and not noisy.contains(noise):  # --rehearsal-noise's domain (a negative one was taken)
            raise ParameterError("noise", noise, noisy.describe())
        if qrels is not None:  # the simulated reranker's qrels= rule, the one owner (a path is read as --qrels)
            from .rerankers.backends.simulated import grades_of

            qrels = grades_of(qrels)
        if (price_in is None) != (price_out is None):
            raise InputError("price_in and price_out go together (a million input tokens, a million output tokens)")
        requests = _requests(queries, qids, pivots,
                             asked=Asked(top_k=top_k, min_p_relevant=min_p_relevant, cut=cut, cut_target=cut_target))
        try:
            admitted = self._session.admit(requests, BATCH_SAID)
        except InputError as exc:  # named as rerank_batch names it
            _of(exc, exc.query)
            raise
        prepared = [a.prepared for a in admitted]  # documents whole (a pivot's passage among them)
        tasks = [p.task for p in prepared if p.task.n > 0]
        by_qid = {p.task.qid: p.docs for p in prepared}
        strategy = next((a.strategy for a in admitted if a.prepared.task.n > 0), None)
        prompter, owned = innermost(self.backend, counts_tokens), None
        if prompter is None and self._session.choice is not None:  # counts by a form of its own (--sim-tokens)
            from .run.dry_run import unlogged

            prompter = owned = unlogged(self._session.choice).counter()  # as the dry run bills: logged nowhere
        try:
            return self._billed(strategy or self.methods.for_call(top_k=top_k), tasks, by_qid, prompter, qrels=qrels,
                                noise=noise, rehearsals=rehearsals, prices=(price_in, price_out))
        finally:
            if owned is not None:  # the counter made for the bill, closed as the dry run closes its own
                owned.close()

    def _billed(self, strategy: Strategy, tasks: list, by_qid: dict, prompter: Any, *, qrels: Any,
                noise: float | None, rehearsals: int, prices: tuple):
        """The bill of :meth:`estimate`'s admitted queries (see there), by ``prompter``'s counts."""
        from .run.estimate import PERSISTENT, UNBOUNDED, estimate, rehearsal, thought_of, unbounded

        why = unbounded(prompter)
        if why is not None:  # as rerank --dry-run warns
            warnings.warn(f"{why}{UNBOUNDED}", UserWarning, stacklevel=3)  # estimate's caller
        choice = self._session.choice  # a backend given built: its thinking is its own, not rehearsed
        simulated = choice is not None and choice.backend.oracle
        models, noise, seeds, source = rehearsal(None if choice is None else choice.options, simulated, tasks,
                                                 qrels if qrels is not None or not simulated else
                                                 getattr(self.backend, "qrels", None),
                                                 noise, rehearsals)
        persistent = choice is not None and choice.backend.pointwise
        thought = None if choice is None else thought_of(choice.options, self._session.gate, simulated)
        return estimate(strategy, tasks, lambda task: by_qid[task.qid], prompter,
                        models=models, noise=noise, seeds=seeds,
                        prices=None if prices[0] is None else (float(prices[0]), float(prices[1])),
                        what=f"{rehearsals} rehearsals against the simulated reranker (noise {noise:g}"
                             f"{PERSISTENT if persistent else ''}; grades: {source})", persistent=persistent,
                        thought=thought)

    @property
    def cutoff(self) -> int | None:
        """The method's cutoff k as built, which p_topk refers to (None for a method without one); a call with
        ``top_k`` and no k given at construction refers to k = top_k (:meth:`~acurank_cli.run.pipeline.Methods.for_call`)."""
        return self.strategy.cutoff

    async def arerank(self, query: str, docs: Sequence[DocLike], **keywords: Any) -> RerankOutput:
        """:meth:`rerank` for asyncio servers, with its keywords (``qid``, ``top_k``, ``cut``, ...: they took only
        ``qid``), in a worker thread: the event loop stays free."""
        return await asyncio.to_thread(functools.partial(self.rerank, query, docs, **keywords))

    async def arerank_batch(self, queries: Iterable[tuple[str, Sequence[DocLike]]],
                            **keywords: Any) -> list[RerankOutput]:
        """:meth:`rerank_batch` for asyncio servers, with its keywords."""
        return await asyncio.to_thread(functools.partial(self.rerank_batch, list(queries), **keywords))

    def close(self) -> None:
        """Release the model, the call cache and any prompt log (closing twice is harmless; reranking after it is
        an InputError)."""
        if self.reranker is not None:
            self._session.close()
            self.reranker = None

    def __enter__(self) -> "Reranker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _calibration(value: Any, strategy: Strategy, passages: Any):
    """The map, for a method with ratings over documents ranked whole (None: none)."""
    from .relevance import check_applicable

    if value is not None:
        check_applicable(strategy, passages, "calibration")
    return value


def _requests(queries: Any, qids: Any, pivots: Any, *, instruction: str | None = None, asked: Asked = Asked()
              ) -> list[Request]:
    """A batch's queries as requests (:func:`_batch`'s checks), each with its pivot (one a query), and the
    ``instruction`` and what the call asks (``asked``) they share."""
    queries, qids = _batch(queries, qids)
    if pivots is not None:
        if isinstance(pivots, str):  # a string is a sequence of letters: each query got one
            raise InputError("pivots: give a list of pivot passages, one per query, not a string")
        pivots = list(pivots)
        if len(pivots) != len(queries):
            raise InputError(f"pivots: {len(pivots)} for {len(queries)} queries: give one pivot passage per query")
    return [Request(q, docs, qid, instruction=instruction, pivot=None if pivots is None else pivots[i], asked=asked)
            for i, ((q, docs), qid) in enumerate(zip(queries, qids))]


def as_reranker(value: Any, method: str | None, adapter: str = "this adapter", **settings: Any) -> "Reranker":
    """A framework adapter's ``reranker`` field: a Reranker as given, or one built from a backend spec string
    with ``method`` (None: the default, acurank; TypeError otherwise), checked for the adapter (:func:`adapted`). A
    ``method`` given beside a built Reranker that runs another is refused (it was ignored in silence)."""
    from .method.registry import spelled

    if isinstance(value, str):
        value = Reranker(value, method=method or "acurank")
    if not isinstance(value, Reranker):
        raise TypeError("reranker must be an acurank_cli.Reranker or a backend spec such as 'minilm'")
    if method is not None and spelled(method) != spelled(value.method):
        raise InputError(f"method={method!r}: the Reranker given runs {value.method!r}, which the adapter uses; build "
                         "the Reranker with that method, or leave method out")
    return adapted(value, adapter, **settings)


def adapted(reranker: "Reranker", adapter: str, **settings: Any) -> "Reranker":
    """``reranker`` for a framework adapter, refused when the adapter is built, not at its first call, where no call
    of the adapter's could be answered: the ``settings`` it passes to every call (``top_k``: its ``top_n``; the cuts),
    by the session's own rules in the API's words, and a map fit with a pivot (an adapter carries none). The rules
    are asked of a call without documents, which calls no model."""
    said = replace(SAID["api"], top_k="top_n", this=f"{adapter}'s call",
                   pivot=f"a map fit without --pivot ({adapter} carries no pivot)")
    reranker._session.admit([Request("q", [], asked=Asked(**settings))], said)
    return reranker


__all__ = ["DocLike", "RankedDoc", "RerankOutput", "Reranker", "Tokens", "adapted", "as_reranker", "output_of", "prepare",
           "relevance_scores"]
