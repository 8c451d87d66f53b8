"""What the Python API answers (beside it, :mod:`acurank_cli.api`): a query's :class:`RerankOutput`, its
:class:`RankedDoc` records best first with the honest accounting of its calls, and :func:`relevance_scores`, the
0-1 score per document that the server and the LangChain and LlamaIndex adapters report. Every entrance's answer is
made of these (:func:`acurank_cli.run.request.answer`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, NamedTuple

from .records import CallTally, PassageSpan, StopReason


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
    #: the method's cutoff, RerankOutput.k; the final ratings' DocRating.p_topk): how sure the method is that the
    #: document is among this list's best k. It is relative, not P(relevant): it sums to k over every list, relevant
    #: documents or none (use ``p_relevant``); None for methods without ratings
    p_topk: float | None = None
    #: P(grade >= the map's grade) from a calibration map (``Reranker(calibration=...)``, docs/relevance.md); None
    #: without a map
    p_relevant: float | None = None
    #: ranked by passages (``passages=``): the passage the document's score came from (its best under MaxP), where
    #: it lies in ``text``; None when the document was not split
    passage: PassageSpan | None = None

    @property
    def passage_text(self) -> str | None:
        """The scoring passage's text (None when the document was not split)."""
        return None if self.passage is None else self.text[self.passage.char_start: self.passage.char_end]


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
    #: P(no document of the list is relevant), from the calibration map (None without one); the list may be empty
    #: where a cut found nothing relevant
    p_none: float | None = None

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


def relevance_scores(out: RerankOutput, n: int) -> list[float]:
    """A 0-1 relevance score per returned document: P(relevant) with a calibration map, else p_topk, or for a method
    without ratings the position 1 - (rank - 1) / n (what the LangChain and LlamaIndex adapters report)."""
    return [d.p_relevant if d.p_relevant is not None else d.p_topk if d.p_topk is not None
            else 1.0 - (d.rank - 1) / max(1, n) for d in out.docs]


__all__ = ["RankedDoc", "RerankOutput", "Tokens", "relevance_scores"]
