"""A LangChain document compressor that reranks with AcuRank (``pip install 'acurank[langchain]'``).

    from langchain_classic.retrievers import ContextualCompressionRetriever
    from acurank_cli.integrations.langchain import AcuRankCompressor
    compressor = AcuRankCompressor(reranker="minilm", top_n=5)        # or an acurank_cli.Reranker
    retriever = ContextualCompressionRetriever(base_compressor=compressor, base_retriever=your_retriever)

Each returned Document keeps its metadata, plus ``acurank_rank``, ``acurank_mu``, ``acurank_sigma``,
``acurank_p_topk`` and ``relevance_score``: P(the document is in the top k) under its final rating, in [0, 1] and
relative to the list (it sums to k; for a method without ratings, such as ``sw-1``, the position 1 - (rank - 1) / n).
``min_p_topk`` keeps only documents at least that likely to be in the top k (the confidence cut). With a Reranker
built with a calibration map, ``relevance_score`` is P(relevant) (also ``acurank_p_relevant``) and ``min_p_relevant``
keeps the documents at least that likely to be relevant (docs/relevance.md). A document's ``metadata["score"]``,
when every document has one, starts the ratings, held to the API's rule (a number, numpy's too; a text or a boolean
is refused in one line naming the document).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document

from ..api import relevance_scores
from .settings import CallSettings


class AcuRankCompressor(CallSettings, BaseDocumentCompressor):
    """Reranks retrieved documents with an :class:`~acurank_cli.api.Reranker` (or a backend spec string, built
    with ``method``); keeps the best ``top_n`` (and, with ``min_p_topk``, only the confident ones); the settings of
    every call are :class:`~.settings.CallSettings`'."""

    reranker: Any = "minilm"

    def compress_documents(self, documents: Sequence[Document], query: str,
                           callbacks: Callbacks | None = None) -> Sequence[Document]:
        if not documents:
            return []
        items: list[dict[str, Any]] = []
        have_scores = all(d.metadata.get("score") is not None for d in documents)
        for i, d in enumerate(documents):
            item: dict[str, Any] = {"id": str(i), "text": d.page_content, "title": d.metadata.get("title") or ""}
            if have_scores:  # as it is: the API's rule takes numbers (numpy's too) and refuses a text or a boolean
                item["score"] = d.metadata["score"]
            items.append(item)
        out = self.reranker.rerank(query, items, **self.call_settings())
        kept = []
        for r, score in zip(out.docs, relevance_scores(out, len(documents))):
            src = documents[int(r.id)]
            meta = {**src.metadata, "acurank_rank": r.rank, "acurank_mu": r.mu, "acurank_sigma": r.sigma,
                    "acurank_p_topk": r.p_topk, "relevance_score": score,
                    **({} if r.p_relevant is None else {"acurank_p_relevant": r.p_relevant})}
            kept.append(Document(page_content=src.page_content, metadata=meta, id=src.id))
        return kept


__all__ = ["AcuRankCompressor"]
