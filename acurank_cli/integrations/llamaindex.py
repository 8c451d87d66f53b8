"""A LlamaIndex node postprocessor that reranks with AcuRank (``pip install 'acurank[llamaindex]'``).

    from acurank_cli.integrations.llamaindex import AcuRankNodePostprocessor
    post = AcuRankNodePostprocessor(reranker="minilm", top_n=5)      # or an acurank_cli.Reranker
    engine = index.as_query_engine(node_postprocessors=[post])

Each returned NodeWithScore scores P(the node is in the top k) under its final rating, in [0, 1] (for a
method without ratings, 1 - (rank - 1) / n), and its node (a copy: the caller's nodes are not touched)
carries ``acurank_rank``, ``acurank_mu``, ``acurank_sigma`` and ``acurank_p_topk`` in its metadata, left out
of what the LLM and the embedder see. ``min_p_topk`` is the confidence cut. The retriever's scores, when
every node has one, start the ratings.
"""

from __future__ import annotations

from typing import Any, List, Optional

from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle
from pydantic import Field

from ..api import relevance_scores
from .settings import CallSettings

#: the metadata keys the postprocessor adds (hidden from the LLM and the embedder)
KEYS = ("acurank_rank", "acurank_mu", "acurank_sigma", "acurank_p_topk", "acurank_p_relevant")


class AcuRankNodePostprocessor(CallSettings, BaseNodePostprocessor):
    """Reranks retrieved nodes with an :class:`~acurank_cli.api.Reranker` (or a backend spec string, built with
    ``method``); keeps the best ``top_n`` (and, with ``min_p_topk``, only the confident ones); the settings of every
    call are :class:`~.settings.CallSettings`'."""

    reranker: Any = Field(default="minilm", description="an acurank_cli.Reranker or a backend spec", exclude=True)

    @classmethod
    def class_name(cls) -> str:
        return "AcuRankNodePostprocessor"

    def _postprocess_nodes(self, nodes: List[NodeWithScore],
                           query_bundle: Optional[QueryBundle] = None) -> List[NodeWithScore]:
        if query_bundle is None:
            raise ValueError("AcuRankNodePostprocessor needs the query (query_bundle or query_str)")
        if not nodes:
            return []
        have_scores = all(n.score is not None for n in nodes)
        items = []
        for i, n in enumerate(nodes):
            item = {"id": str(i), "text": n.node.get_content(metadata_mode=MetadataMode.NONE)}
            if have_scores:
                item["score"] = float(n.score)
            items.append(item)
        out = self.reranker.rerank(query_bundle.query_str, items, **self.call_settings())
        kept = []
        for r, score in zip(out.docs, relevance_scores(out, len(nodes))):
            node = nodes[int(r.id)].node
            meta = {**node.metadata, "acurank_rank": r.rank, "acurank_mu": r.mu, "acurank_sigma": r.sigma,
                    "acurank_p_topk": r.p_topk, **({} if r.p_relevant is None else {"acurank_p_relevant": r.p_relevant})}
            hidden = {"excluded_llm_metadata_keys": sorted({*node.excluded_llm_metadata_keys, *KEYS}),
                      "excluded_embed_metadata_keys": sorted({*node.excluded_embed_metadata_keys, *KEYS})}
            kept.append(NodeWithScore(node=node.model_copy(update={"metadata": meta, **hidden}), score=score))
        return kept


__all__ = ["AcuRankNodePostprocessor"]
