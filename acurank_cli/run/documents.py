"""Documents in, ranked documents out: what the Python API and the server rank. :func:`prepare` turns a query's
documents (strings, dicts, :class:`~acurank_cli.records.Doc` records) into a task; :func:`output_of` turns the
query's outcome into a :class:`~acurank_cli.results.RerankOutput` (each document with its rank, first-stage score,
final rating and p_topk). Every entrance that takes documents goes through these by way of
:meth:`~acurank_cli.run.pipeline.Session.admit` and :meth:`~acurank_cli.run.pipeline.Session.answer`
(:mod:`acurank_cli.run.request`).

Ratings start from the z-scores of the first-stage scores (``init="zscore"``), or of the input order (scores
n, ..., 1) when no score is given (see :mod:`acurank_cli.api`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
import decimal
import numbers
from dataclasses import dataclass
from typing import Any, Union

from ..errors import InputError
from ..io.collection_files import passage_title
from ..io.sources import check_id
from ..records import Candidate, Doc, QueryOutcome, RankingTask, visible
from ..results import RankedDoc, RerankOutput

DocLike = Union[str, Mapping[str, Any], Doc]


def check_unicode(text: str, what: str, field: str | None = None) -> None:
    """A text a model can read: refused where it holds a lone surrogate (no UTF-8 encodes it: a tokenizer, a request
    body, a file would fail on it after the call began)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(f"{what}: not valid Unicode text (a lone surrogate, {text[exc.start]!r}, at character "
                         f"{exc.start})", field=field) from None


def _doc(item: DocLike, i: int) -> tuple[Doc, float | None, dict]:
    """(record, first-stage score or None, metadata) for one input document."""
    if isinstance(item, Doc):
        check_id(item.docid, f"document {i}: id", "")
        check_unicode(item.text, f"document {i}")
        check_unicode(item.title or "", f"document {i}: title")
        return item, None, {}
    if isinstance(item, str):
        check_unicode(item, f"document {i}")
        return Doc(str(i), item), None, {}
    if isinstance(item, Mapping):
        text = item.get("text")
        if not isinstance(text, str):
            raise InputError(f"document {i}: needs a 'text' string")
        check_unicode(text, f"document {i}")
        try:
            title = passage_title(item.get("title"))
        except TypeError as exc:
            raise InputError(f"document {i}: {exc}") from None
        check_unicode(title or "", f"document {i}: title")
        meta = {k: v for k, v in item.items() if k not in ("text", "title", "id", "score")}
        given = item.get("id")  # null as absent, as a score's
        return Doc(_id(i if given is None else given, i), text, title), _score(item.get("score"), i), meta
    raise InputError(f"document {i}: expected a string, a dict or a Doc, got {type(item).__name__}")


def _id(value: Any, i: int) -> str:
    """A document's id: a string, or an integer (as a run file writes it); a float, a boolean or a list was taken
    by its text (``[1]``, ``True``) and a dict refused as holding whitespace."""
    if isinstance(value, bool) or not isinstance(value, (str, numbers.Integral)):
        raise InputError(f"document {i}: 'id' must be a string or an integer, got {value!r}")
    return check_id(str(value), f"document {i}: id", "")


def _score(value: Any, i: int) -> float | None:
    """A document's first-stage score (:func:`score_of`), or None where not given."""
    if value is None:
        return None
    try:
        return score_of(value)
    except TypeError:
        raise InputError(f"document {i}: 'score' must be a number, got {value!r}") from None
    except OverflowError:
        raise InputError(f"document {i}: 'score' is beyond the range of a 64-bit float") from None


def score_of(value: Any) -> float:
    """A caller's first-stage score as a float, the one rule of every entrance that takes values (the API, serve,
    MCP, PyTerrier's frame): a real number (an int, a float, numpy's, a Fraction, a Decimal), not a string or a
    boolean (``"3.5"`` and ``true`` were taken as numbers). TypeError where it is not one; OverflowError where no
    float holds it (an integer of 400 digits raised it, a server's 500)."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, decimal.Decimal)):
        raise TypeError(f"not a number: {value!r}")
    return float(value)


@dataclass(frozen=True)
class Prepared:
    """One query's documents as a task: the task, its passages by id and each document's metadata."""

    task: RankingTask
    docs: dict[str, Doc]
    meta: dict[str, dict]
    #: the documents came with first-stage scores (False: the scores are their input order's, n .. 1)
    scored: bool = True


#: what every entrance but the command line (a topics file's line) says of a blank query
QUERY_BLANK = "the query must be a non-empty string"

#: what the API, serve, MCP and PyTerrier say of an empty document (records.Doc.blank) where the reranker reads texts
BLANK = "has no text (its text and title are empty): a model cannot judge it; give it a text or leave it out"


def _twice(docid: str, was: int, i: int, items: Sequence[DocLike]) -> str:
    """Why documents ``was`` and ``i`` share ``docid`` (the query is named by the caller where a call has several:
    the internal qid was named, ``query q:``, which no caller gave): a document without an id of its own is named by
    its place, and may meet one that gives that place as its id."""
    placed = [j for j in (was, i) if not (isinstance(items[j], Doc) or (isinstance(items[j], Mapping)
                                                                         and items[j].get("id") is not None))]
    if placed and len(placed) < 2:
        other = i if placed[0] == was else was
        return (f"document {placed[0]} has no id and is named by its place, {docid!r}, which document {other} gives "
                "as its id: give every document an id, or none")
    return f"document id {docid!r} is given twice (documents {was} and {i}): ids must be unique within a query"


def check_sequence(items: Any) -> None:
    """A call's documents are a sequence of them (a string is one document, not a list: TypeError, the API's)."""
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        raise TypeError(f"docs must be a sequence of strings, dicts or Docs, got {type(items).__name__} "
                        "(wrap a single document in a list)")


def prepare(query: str, items: Sequence[DocLike], qid: str = "q", instruction: str | None = None,
            reads_texts: bool = False) -> Prepared:
    """A RankingTask from API documents (ids unique; scores rank-based when missing, see module doc). Documents
    given with scores are taken in score order, highest first (ties in input order), whatever order they come
    in: the first-stage ranking is the scores', as a run file's is. ``reads_texts``: the reranker reads the texts,
    so an empty document (:attr:`~acurank_cli.records.Doc.blank`) is refused, named ``documents[i]``."""
    if not isinstance(query, str) or not visible(query):
        raise InputError(QUERY_BLANK, field="query")
    check_unicode(query, "the query", "query")
    if not isinstance(qid, str):
        way = "leave it out for the default" if qid is None else f"give {str(qid)!r}"  # not "give 'None'"
        raise InputError(f"qid must be a string, got {type(qid).__name__} (a run's query ids are strings: {way})",
                         field="qid")
    check_id(qid, "qid", "")
    check_sequence(items)
    items = list(items)
    parsed = [_doc(item, i) for i, item in enumerate(items)]
    blank = next((i for i, (d, _, _) in enumerate(parsed) if d.blank), None) if reads_texts else None
    if blank is not None:  # the CLI's rule for an empty document (run/inputs.py), said of the list
        raise InputError(BLANK, f"documents[{blank}]")
    first: dict[str, int] = {}
    for i, (d, _, _) in enumerate(parsed):
        if first.setdefault(d.docid, i) != i:
            raise InputError(_twice(d.docid, first[d.docid], i, items))
    scores = [s for _, s, _ in parsed]
    scored = not all(s is None for s in scores)
    if not scored:
        scores = [float(len(parsed) - i) for i in range(len(parsed))]  # the input order
    elif any(s is None for s in scores):
        raise InputError("give a score for every document or for none")
    order = sorted(range(len(parsed)), key=lambda i: -scores[i])  # stable: ties keep the input order
    cands = tuple(Candidate(parsed[i][0].docid, float(scores[i])) for i in order)
    return Prepared(RankingTask(qid, query, cands, instruction, scored=scored), {d.docid: d for d, _, _ in parsed},
                    {d.docid: m for d, _, m in parsed}, scored)


def output_of(p: Prepared, outcome: QueryOutcome, ratings: dict[str, Any], k: int | None = None,
              *, top_k: int | None = None, min_p_topk: float | None = None, relevance: Any = None,
              cuts: Sequence[Any] = (), pivot: tuple[float, float] | None = None) -> RerankOutput:
    """The query's RerankOutput: its ranking with each document's text, metadata, first-stage rank and score, final
    rating (``ratings``: :meth:`~acurank_cli.records.QueryOutcome.final_ratings`) and p_topk at ``k``, and with a
    calibration map (``relevance``, :class:`~acurank_cli.relevance.CalibrationMap`) P(relevant) and P(none); cut by
    each of ``cuts`` (:class:`~acurank_cli.relevance.Cut`: the API's ``cut`` and its ``min_p_relevant``, the cut
    ``p:X``, over the whole list), then to ``top_k`` and to ``min_p_topk``; ``pivot``: the pivot's final (mu, sigma)
    where one was rated."""
    first = {c.docid: (r, c.score) for r, c in enumerate(p.task.candidates, start=1)}
    probs = {d: r.p_topk for d, r in ratings.items() if r.p_topk is not None} if k is not None else {}
    relevant: dict[str, float] = {}
    p_none, kept = None, None
    if relevance is not None:  # P(relevant), P(none) and the cuts (over the whole list, before top_k): one owner
        from ..relevance import judge

        judgement = judge(relevance, [ratings[r.docid] for r in outcome.ranking], pivot, cuts, outcome.absolute_scores())
        relevant = {r.docid: v for r, v in zip(outcome.ranking, judgement.p)}
        p_none, kept = judgement.p_none, set(judgement.kept)
    spans = outcome.passages.best if outcome.passages is not None else {}
    ranked = []
    for rank, r in enumerate(outcome.ranking, start=1):
        doc = p.docs[r.docid]
        rating = ratings.get(r.docid)
        ranked.append(RankedDoc(id=r.docid, text=doc.text, title=doc.title, rank=rank, score=r.score,
                                mu=rating and rating.mu, sigma=rating and rating.sigma,
                                first_stage_rank=first[r.docid][0], first_stage_score=first[r.docid][1],
                                metadata=p.meta.get(r.docid, {}), p_topk=probs.get(r.docid),
                                passage=spans.get(r.docid), p_relevant=relevant.get(r.docid)))
    if kept is not None:
        ranked = [d for i, d in enumerate(ranked) if i in kept]
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
                        k=k if probs else None, note=note, p_none=p_none)



__all__ = ["BLANK", "DocLike", "Prepared", "output_of", "prepare"]
