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
from pydantic import ConfigDict, Field, model_validator

from ..api import as_reranker, relevance_scores

#: the metadata keys the postprocessor adds (hidden from the LLM and the embedder)
KEYS = ("acurank_rank", "acurank_mu", "acurank_sigma", "acurank_p_topk", "acurank_p_relevant")


class AcuRankNodePostprocessor(BaseNodePostprocessor):
    """Reranks retrieved nodes with an :class:`~acurank_cli.api.Reranker` (or a backend spec string, built with
    ``method``); keeps the best ``top_n`` (and, with ``min_p_topk``, only the confident ones)."""

    #: a field it does not have is refused (a misspelt ``topn`` was dropped in silence), and so is a value of the
    #: wrong type: each is held as given and checked by the API's own rules when set and when the postprocessor is built
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    reranker: Any = Field(default="minilm", description="an acurank_cli.Reranker or a backend spec", exclude=True)
    method: str = "acurank"
    top_n: Any = 3
    min_p_topk: Any = None
    #: with a Reranker built with a calibration map: keep nodes whose P(relevant) is at least this, or stop the list
    #: where relevance ends (``cut``: "p:X" or "f1", its calls aimed as ``cut_target`` says; docs/relevance.md)
    min_p_relevant: Any = None
    cut: Any = None
    cut_target: Any = None

    @model_validator(mode="after")
    def _build(self) -> "AcuRankNodePostprocessor":
        method = self.method if "method" in self.model_fields_set else None  # given, or the default
        built = as_reranker(self.reranker, method, "AcuRankNodePostprocessor", **self._settings())
        if built is not self.reranker:  # set as it is: an assignment is validated again (validate_assignment)
            object.__setattr__(self, "reranker", built)
        return self

    def _settings(self) -> dict[str, Any]:
        """What every call asks (``top_n`` as the API's ``top_k``: it cuts the list, never k)."""
        return {"top_k": self.top_n, "min_p_topk": self.min_p_topk, "min_p_relevant": self.min_p_relevant,
                "cut": self.cut, "cut_target": self.cut_target}

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
        out = self.reranker.rerank(query_bundle.query_str, items, **self._settings())
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
