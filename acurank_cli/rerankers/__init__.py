"""Rerankers: backends that execute windows (simulated, minilm, hf:, openai:, and plug-ins)."""

from .backend import REGISTRY, RerankerBase, build_reranker, register

__all__ = ["REGISTRY", "RerankerBase", "build_reranker", "register"]
