"""A LlamaIndex node postprocessor that reranks with AcuRank (``pip install 'acurank[llamaindex]'``).

    from acurank_cli import Reranker
    from acurank_cli.integrations.llamaindex import AcuRankNodePostprocessor
    post = AcuRankNodePostprocessor(reranker=Reranker("minilm"), top_n=5)
    nodes = post.postprocess_nodes(retrieved_nodes, query_str="what is ...")

Nodes keep their metadata; each returned NodeWithScore carries the final mu as its score (the
retriever's scores, when every node has one, start the ratings).
"""

from __future__ import annotations

from typing import Any, List, Optional

from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle
from pydantic import Field

from ..api import Reranker


class AcuRankNodePostprocessor(BaseNodePostprocessor):
    """Reranks retrieved nodes with an :class:`~acurank_cli.api.Reranker`; keeps the best ``top_n``."""

    reranker: Any = Field(description="an acurank_cli.Reranker", exclude=True)
    top_n: int = 3

    @classmethod
    def class_name(cls) -> str:
        return "AcuRankNodePostprocessor"

    def _postprocess_nodes(self, nodes: List[NodeWithScore],
                           query_bundle: Optional[QueryBundle] = None) -> List[NodeWithScore]:
        if query_bundle is None:
            raise ValueError("AcuRankNodePostprocessor needs the query (query_bundle or query_str)")
        if not nodes:
            return []
        if not isinstance(self.reranker, Reranker):
            raise TypeError("reranker must be an acurank_cli.Reranker")
        have_scores = all(n.score is not None for n in nodes)
        items = []
        for i, n in enumerate(nodes):
            item = {"id": str(i), "text": n.node.get_content(metadata_mode=MetadataMode.NONE)}
            if have_scores:
                item["score"] = float(n.score)
            items.append(item)
        out = self.reranker.rerank(query_bundle.query_str, items)
        return [NodeWithScore(node=nodes[int(r.id)].node, score=r.score) for r in out.top(self.top_n)]


__all__ = ["AcuRankNodePostprocessor"]
