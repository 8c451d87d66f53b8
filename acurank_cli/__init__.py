"""acurank: uncertainty-aware adaptive listwise reranking (AcuRank, NeurIPS 2025), CLI and Python API.

    from acurank_cli import Reranker
    out = Reranker("minilm", method="acurank").rerank("query", ["doc one", "doc two"])

The API (:mod:`acurank_cli.api`) is loaded on first use, so ``import acurank_cli`` stays cheap.
"""

__version__ = "0.1.0"

from .moved import install as _install_moved  # noqa: E402 - old module names of plug-ins keep importing

_install_moved()

#: Public names and the modules that define them (loaded on first access).
_EXPORTS = {
    "Reranker": "api", "RerankOutput": "api", "RankedDoc": "api",
    "RerankerBase": "rerankers.backend", "register": "rerankers.backend", "Option": "params",
    "Doc": "records", "RerankRequest": "records", "RerankResult": "records",
    "InputError": "errors", "ParameterError": "params",
}


def __getattr__(name: str):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'acurank_cli' has no attribute {name!r}")


__all__ = ["__version__", *_EXPORTS]
