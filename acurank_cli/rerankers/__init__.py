"""Rerankers: backends that execute windows (simulated, minilm, hf:, vllm:, openai:, ce:, and plug-ins).

Two rooms and the base between them: :mod:`.backend` (the contract every backend derives from, and the registry),
with the wrappers beside it (:mod:`.cache`, :mod:`.counted`) and the options several backends share
(:mod:`.option_groups`); :mod:`.backends` (one module a backend); :mod:`.listwise` (the LLM machinery the LLM
backends share: prompts, templates, answers, thinking, parsing)."""

from .backend import REGISTRY, RerankerBase, build_reranker, register

__all__ = ["REGISTRY", "RerankerBase", "build_reranker", "register"]
