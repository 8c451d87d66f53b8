"""A LangChain document compressor that reranks with AcuRank (``pip install 'acurank[langchain]'``).

    from acurank_cli import Reranker
    from acurank_cli.integrations.langchain import AcuRankCompressor
    compressor = AcuRankCompressor(reranker=Reranker("minilm"), top_n=5)
    docs = compressor.compress_documents(retrieved_docs, "what is ...")

Each returned Document keeps its metadata, plus ``acurank_rank``, ``acurank_mu``, ``acurank_sigma``
and ``relevance_score`` (the final mu); a document's ``metadata["score"]``, when present, is its
first-stage score.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from pydantic import ConfigDict

from ..api import Reranker


class AcuRankCompressor(BaseDocumentCompressor):
    """Reranks retrieved documents with an :class:`~acurank_cli.api.Reranker`; keeps the best ``top_n``."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    reranker: Reranker
    top_n: int = 3

    def compress_documents(self, documents: Sequence[Document], query: str,
                           callbacks: Callbacks | None = None) -> Sequence[Document]:
        if not documents:
            return []
        items: list[dict[str, Any]] = []
        have_scores = all(isinstance(d.metadata.get("score"), (int, float)) for d in documents)
        for i, d in enumerate(documents):
            item: dict[str, Any] = {"id": str(i), "text": d.page_content, "title": d.metadata.get("title") or ""}
            if have_scores:
                item["score"] = float(d.metadata["score"])
            items.append(item)
        out = self.reranker.rerank(query, items)
        kept = []
        for r in out.top(self.top_n):
            src = documents[int(r.id)]
            meta = {**src.metadata, "acurank_rank": r.rank, "acurank_mu": r.mu, "acurank_sigma": r.sigma,
                    "relevance_score": r.score}
            kept.append(Document(page_content=src.page_content, metadata=meta, id=src.id))
        return kept


__all__ = ["AcuRankCompressor"]
