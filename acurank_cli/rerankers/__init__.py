"""Rerankers: backends that execute windows (simulated, minilm, hf:, openai:)."""

from .base import REGISTRY, Reranker, build_reranker

__all__ = ["REGISTRY", "Reranker", "build_reranker"]
