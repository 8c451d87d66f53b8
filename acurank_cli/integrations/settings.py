"""What a framework adapter (LangChain's compressor, LlamaIndex's postprocessor) asks of every call of its
:class:`~acurank_cli.api.Reranker`, declared once: the fields, held as given and checked by the API's own rules when
the adapter is built and when one is set (:func:`~acurank_cli.api.as_reranker`), and the keywords they become."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from ..api import as_reranker


class CallSettings(BaseModel):
    """An adapter's settings of every call (its own ``reranker`` field is declared by the adapter): a field it does
    not have is refused (a misspelt ``topn`` was dropped in silence), and so is a value of the wrong type."""

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid", validate_assignment=True)

    method: str = "acurank"
    top_n: Any = 3
    min_p_topk: Any = None
    #: with a Reranker built with a calibration map: keep what is at least this likely relevant, or stop the list
    #: where relevance ends (``cut``: "p:X" or "f1", its calls aimed as ``cut_target`` says; docs/relevance.md)
    min_p_relevant: Any = None
    cut: Any = None
    cut_target: Any = None

    @model_validator(mode="after")
    def _build(self) -> "CallSettings":
        method = self.method if "method" in self.model_fields_set else None  # given, or the default
        built = as_reranker(self.reranker, method, type(self).__name__, **self.call_settings())
        if built is not self.reranker:  # set as it is: an assignment is validated again (validate_assignment)
            object.__setattr__(self, "reranker", built)
        if self.method != built.method:  # the method the calls run, as a Reranker given without method= runs it
            object.__setattr__(self, "method", built.method)
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        """A setting set after building, checked as when built; one refused leaves the one before (pydantic had kept
        it, and every later call, or assignment, failed on it)."""
        before = self.__dict__.get(name)
        try:
            super().__setattr__(name, value)
        except ValueError:
            object.__setattr__(self, name, before)
            raise

    def call_settings(self) -> dict[str, Any]:
        """What every call asks (``top_n`` as the API's ``top_k``: it cuts the list, never k)."""
        return {"top_k": self.top_n, "min_p_topk": self.min_p_topk, "min_p_relevant": self.min_p_relevant,
                "cut": self.cut, "cut_target": self.cut_target}


__all__ = ["CallSettings"]
