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
many queries advance together (default: the backend's, 8 for ``vllm:`` and ``openai:``, else 1, as
the CLI). The defaults are the CLI's, from one place
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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Union

from .errors import InputError
from .io.collection_files import passage_title
from .io.sources import check_id
from .params import ParameterError, at_least, between
from .method.strategy import Strategy
from .records import CallTally, Candidate, Doc, Phase, QueryOutcome, RankingTask, Step, StopReason
from .rerankers.backend import RerankerBase
from .run import pipeline

DocLike = Union[str, Mapping[str, Any], Doc]


@dataclass(frozen=True, kw_only=True)
class RankedDoc:
    """One reranked document: its id, text, final rating and where it started."""

    id: str
    text: str
    title: str
    rank: int  # 1 = best
    score: float  # the run file's score (AcuRank: mu; baselines: positional)
    mu: float | None  # final TrueSkill rating (None for methods without ratings)
    sigma: float | None
    first_stage_rank: int
    first_stage_score: float
    metadata: Mapping[str, Any] = field(default_factory=dict)
    #: P(rank <= k) under the final ratings N(mu, sigma^2) (exact, as --uncertainty exact computes it; k is
    #: the method's cutoff, RerankOutput.k; the final ratings' DocRating.p_topk): a calibrated 0-1 relevance
    #: signal; None for methods without ratings
    p_topk: float | None = None


class Tokens(NamedTuple):
    """Tokens a query's calls cost."""

    input: int
    output: int


@dataclass(frozen=True, kw_only=True)
class RerankOutput:
    """The ranked documents of one query and the honest accounting of what it cost."""

    qid: str
    query: str
    docs: tuple[RankedDoc, ...]
    tally: CallTally  # calls, cached calls, docs sent, tokens in/out, parse outcomes
    seconds: float
    stop: StopReason | None  # why an adaptive method stopped (tau, budget, call-cap, ...)
    #: the cutoff that p_topk refers to (AcuRank's k); None when the method has no ratings
    k: int | None = None
    #: what the call site should know to read the output (e.g. that a query with at most k documents has every
    #: p_topk 1.0: each of them is in the top k for certain); None when nothing needs saying
    note: str | None = None

    @property
    def calls(self) -> int:
        """Reranker calls the method made for this query (cached ones included)."""
        return self.tally.calls

    @property
    def tokens(self) -> Tokens:
        """Input and output tokens of those calls (``out.tokens.input``; also unpacks as a pair)."""
        return Tokens(self.tally.input_tokens, self.tally.output_tokens)

    def top(self, k: int) -> tuple[RankedDoc, ...]:
        """The best ``k`` documents."""
        return self.docs[:k]

    def __iter__(self):
        return iter(self.docs)

    def __len__(self) -> int:
        return len(self.docs)


def _doc(item: DocLike, i: int) -> tuple[Doc, float | None, dict]:
    """(record, first-stage score or None, metadata) for one input document."""
    if isinstance(item, Doc):
        check_id(item.docid, f"document {i}: id", "")
        return item, None, {}
    if isinstance(item, str):
        return Doc(str(i), item), None, {}
    if isinstance(item, Mapping):
        text = item.get("text", item.get("content", item.get("page_content")))
        if not isinstance(text, str):
            raise InputError(f"document {i}: needs a 'text' string")
        try:
            title = passage_title(item.get("title"))
        except TypeError as exc:
            raise InputError(f"document {i}: {exc}") from None
        docid = check_id(str(item.get("id", i)), f"document {i}: id", "")
        score = item.get("score")
        meta = {k: v for k, v in item.items() if k not in ("text", "title", "id", "score")}
        if score is not None:
            try:
                score = float(score)
            except (TypeError, ValueError):
                raise InputError(f"document {i}: 'score' must be a number, got {score!r}") from None
        return Doc(docid, text, title), score, meta
    raise InputError(f"document {i}: expected a string, a dict or a Doc, got {type(item).__name__}")


@dataclass(frozen=True)
class _Prepared:
    task: RankingTask
    docs: dict[str, Doc]
    meta: dict[str, dict]


def prepare(query: str, items: Sequence[DocLike], qid: str = "q") -> _Prepared:
    """A RankingTask from API documents (ids unique; scores rank-based when missing, see module doc). Documents
    given with scores are taken in score order, highest first (ties in input order), whatever order they come
    in: the first-stage ranking is the scores', as a run file's is."""
    if not isinstance(query, str) or not query.strip():
        raise InputError("the query must be a non-empty string")
    check_id(str(qid), "qid", "")
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        raise TypeError(f"docs must be a sequence of strings, dicts or Docs, got {type(items).__name__} "
                        "(wrap a single document in a list)")
    parsed = [_doc(item, i) for i, item in enumerate(items)]
    first: dict[str, int] = {}
    for i, (d, _, _) in enumerate(parsed):
        if first.setdefault(d.docid, i) != i:
            raise InputError(f"query {qid}: document id {d.docid!r} is given twice (documents {first[d.docid]} and {i}): "
                             "ids must be unique within a query")
    scores = [s for _, s, _ in parsed]
    if all(s is None for s in scores):
        scores = [float(len(parsed) - i) for i in range(len(parsed))]  # the input order
    elif any(s is None for s in scores):
        raise InputError("give a score for every document or for none")
    order = sorted(range(len(parsed)), key=lambda i: -scores[i])  # stable: ties keep the input order
    cands = tuple(Candidate(parsed[i][0].docid, float(scores[i])) for i in order)
    return _Prepared(RankingTask(qid, query, cands), {d.docid: d for d, _, _ in parsed},
                     {d.docid: m for d, _, m in parsed})


class Reranker:
    """A reranking pipeline: one backend (``--reranker`` name) and one method (``--method`` name)."""

    def __init__(self, backend: str | RerankerBase = pipeline.DEFAULTS.backend, method: str = pipeline.DEFAULTS.method,
                 *, cache: str | None = pipeline.DEFAULTS.cache, batch_queries: int | None = pipeline.DEFAULTS.batch_queries,
                 ray: str | None = None, actors: int | None = None, gpus_per_actor: float | None = None,
                 **options: Any):
        from .run.ray_executor import ray_options

        self.method = method
        pipeline.check_batch_queries(batch_queries)
        method_options, backend_options = pipeline.split_options(options)
        self.strategy = pipeline.method(method, method_options, pipeline.ScoreSource.documents)
        self._method_options = method_options
        #: top_k -> the method with k = top_k (when the method has a cutoff k and the caller did not set it)
        self._at_k: dict[int, Strategy] = {}
        self._chosen: dict[tuple, Strategy] = {}  # method_for's
        self._session = pipeline.Session(self.strategy, backend, backend_options, ray_options(ray, actors, gpus_per_actor))
        built = self._session.start(cache, batch_queries)
        self.backend, self.reranker, self.cache_path = built.backend, built.reranker, built.cache_path
        self.batch_queries = built.batch_queries

    @property
    def gate(self):
        """Gated thinking's gate (``thinking='gated'``), or None."""
        return self._session.gate

    # -- reranking ----------------------------------------------------------------------------

    def rerank(self, query: str, docs: Sequence[DocLike], *, qid: str = "q", top_k: int | None = None,
               min_p_topk: float | None = None) -> RerankOutput:
        """Rerank one query's documents (best first) with the method and backend; ``top_k`` keeps the best
        ``top_k`` and ``min_p_topk`` (the confidence cut) those whose p_topk is at least that."""
        return self.rerank_batch([(query, docs)], qids=[qid], top_k=top_k, min_p_topk=min_p_topk)[0]

    def rerank_batch(self, queries: Iterable[tuple[str, Sequence[DocLike]]], *,
                     qids: Sequence[str] | None = None, top_k: int | None = None,
                     min_p_topk: float | None = None) -> list[RerankOutput]:
        """Rerank many queries; up to ``batch_queries`` advance together so their windows share batches.
        ``top_k`` and ``min_p_topk`` cut every query's output (see :meth:`rerank`)."""
        if self.reranker is None:
            raise InputError("this Reranker is closed: build a new one (Reranker(...)) to rerank again")
        if top_k is not None and not at_least(1).contains(top_k):
            raise ParameterError("top_k", top_k, at_least(1).describe())
        if min_p_topk is not None:
            if not between(0.0, 1.0).contains(min_p_topk):
                raise ParameterError("min_p_topk", min_p_topk, between(0.0, 1.0).describe())
            if self.cutoff is None:
                raise InputError(f"min_p_topk needs a method with ratings and a cutoff k (acurank...), not {self.method!r}")
        queries = list(queries)
        qids = list(qids) if qids is not None else [str(i) for i in range(len(queries))]
        if len(set(qids)) != len(qids) or len(qids) != len(queries):
            raise InputError("give one unique qid per query")
        prepared = [prepare(q, docs, qid) for (q, docs), qid in zip(queries, qids)]
        strategy = self.strategy_for(top_k)
        group = [p for p in prepared if p.task.n > 0]
        self._session.check([p.task for p in group], "the documents' scores", strategy)
        outputs: dict[str, RerankOutput] = {}
        ratings: dict[str, dict] = {}

        def on_step(task: RankingTask, step: Step) -> None:
            if step.phase is Phase.done and step.snapshot is not None:
                ratings[task.qid] = {d.docid: d for d in step.snapshot().docs}

        by_qid = {p.task.qid: p for p in group}
        # each query's own passages: documents without ids are numbered 0, 1, ... in every query
        texts_of = lambda task: by_qid[task.qid].docs  # noqa: E731
        for outcome in self._session.run([p.task for p in group], None, on_step, strategy, texts_of):
            outputs[outcome.qid] = output_of(by_qid[outcome.qid], outcome, ratings.pop(outcome.qid, {}), strategy.cutoff,
                                           top_k, min_p_topk)
        for p in prepared:
            if p.task.n == 0:
                outputs[p.task.qid] = RerankOutput(qid=p.task.qid, query=p.task.query, docs=(), tally=CallTally(),
                                                   seconds=0.0, stop=None, k=strategy.cutoff)
        return [outputs[qid] for qid in qids]

    def strategy_for(self, top_k: int | None) -> Strategy:
        """The method that serves a call keeping ``top_k`` documents: a method with a cutoff k (AcuRank, BlitzRank)
        runs with k = top_k unless the Reranker was built with k, so that its uncertainty, its stopping rule and
        p_topk are all about the documents kept; otherwise the method as built."""
        if top_k is None or self.strategy.cutoff is None or "k" in self._method_options:
            return self.strategy
        if top_k not in self._at_k:
            self._at_k[top_k] = pipeline.method(self.method, {**self._method_options, "k": top_k},
                                                pipeline.ScoreSource.documents)
        return self._at_k[top_k]

    def method_for(self, method: str | None = None, top_k: int | None = None, budget: int | None = None) -> Strategy:
        """The method serving one call: :meth:`strategy_for` for the Reranker's own method; another method by its
        ``--method`` name (with ``k = top_k`` where it has a cutoff), and ``budget`` calls a query where given.
        A server's per-request choice; each is built once."""
        if method is None and budget is None:
            return self.strategy_for(top_k)
        name = self.method if method is None else method
        options = dict(self._method_options) if method is None or method == self.method else {}
        if budget is not None:
            options["budget"] = budget
        key = (name, top_k, budget)
        if key not in self._chosen:
            strategy = pipeline.method(name, options, pipeline.ScoreSource.documents)
            if top_k is not None and strategy.cutoff is not None and "k" not in options:
                strategy = pipeline.method(name, {**options, "k": top_k}, pipeline.ScoreSource.documents)
            self._chosen[key] = strategy
        return self._chosen[key]

    def prepared(self, query: str, docs: Sequence[DocLike], strategy: Strategy, *, qid: str = "q") -> "_Prepared":
        """One query's documents as a task, checked under ``strategy`` before any call (what :meth:`rerank_batch`
        does first; a server's admission)."""
        p = prepare(query, docs, qid)
        if p.task.n > 0:
            self._session.check([p.task], "the documents' scores", strategy)
        return p

    @property
    def cutoff(self) -> int | None:
        """The method's cutoff k as built, which p_topk refers to (None for a method without one); a call with
        ``top_k`` and no k given at construction refers to k = top_k (:meth:`strategy_for`)."""
        return self.strategy.cutoff

    async def arerank(self, query: str, docs: Sequence[DocLike], *, qid: str = "q") -> RerankOutput:
        """:meth:`rerank` for asyncio servers (runs in a worker thread; the event loop stays free)."""
        return await asyncio.to_thread(self.rerank, query, docs, qid=qid)

    async def arerank_batch(self, queries: Iterable[tuple[str, Sequence[DocLike]]], *,
                            qids: Sequence[str] | None = None) -> list[RerankOutput]:
        """:meth:`rerank_batch` for asyncio servers."""
        return await asyncio.to_thread(self.rerank_batch, list(queries), qids=qids)

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


def as_reranker(value: Any, method: str) -> "Reranker":
    """A framework adapter's ``reranker`` field: a Reranker as given, or one built from a backend spec string
    with ``method`` (TypeError otherwise)."""
    if isinstance(value, str):
        return Reranker(value, method=method)
    if not isinstance(value, Reranker):
        raise TypeError("reranker must be an acurank_cli.Reranker or a backend spec such as 'minilm'")
    return value


def relevance_scores(out: RerankOutput, n: int) -> list[float]:
    """A 0-1 relevance score per returned document: p_topk, or for a method without ratings the position
    1 - (rank - 1) / n (what the LangChain and LlamaIndex adapters report)."""
    return [d.p_topk if d.p_topk is not None else 1.0 - (d.rank - 1) / max(1, n) for d in out.docs]


def output_of(p: _Prepared, outcome: QueryOutcome, ratings: dict[str, Any], k: int | None = None,
            top_k: int | None = None, min_p_topk: float | None = None) -> RerankOutput:
    first = {c.docid: (r, c.score) for r, c in enumerate(p.task.candidates, start=1)}
    probs = {d: r.p_topk for d, r in ratings.items() if r.p_topk is not None} if k is not None else {}
    ranked = []
    for rank, r in enumerate(outcome.ranking, start=1):
        doc = p.docs[r.docid]
        rating = ratings.get(r.docid)
        ranked.append(RankedDoc(id=r.docid, text=doc.text, title=doc.title, rank=rank, score=r.score,
                                mu=rating and rating.mu, sigma=rating and rating.sigma,
                                first_stage_rank=first[r.docid][0], first_stage_score=first[r.docid][1],
                                metadata=p.meta.get(r.docid, {}), p_topk=probs.get(r.docid)))
    if top_k is not None:
        ranked = ranked[:top_k]
    if min_p_topk is not None:
        ranked = [d for d in ranked if d.p_topk is not None and d.p_topk >= min_p_topk]
    note = None
    if probs and k is not None and p.task.n <= k:
        note = (f"{p.task.n} documents for k = {k}: every document is in the top {k} for certain, so every p_topk "
                "is 1.0 (p_topk separates documents only when there are more than k)")
    return RerankOutput(qid=outcome.qid, query=p.task.query, docs=tuple(ranked), tally=outcome.tally,
                        seconds=outcome.seconds, stop=outcome.stop,
                        k=k if probs else None, note=note)


__all__ = ["RankedDoc", "RerankOutput", "Reranker", "Tokens", "as_reranker", "prepare", "relevance_scores"]
