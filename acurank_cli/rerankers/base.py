"""Reranker protocol and registry: a reranker only executes a batch of windows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

from ..errors import InputError
from ..records import RerankRequest, RerankResult


class Reranker(Protocol):
    """Executes windows: one RerankResult (a permutation of positions) per request."""

    name: str
    needs_texts: bool

    def rerank(self, requests: Sequence[RerankRequest]) -> list[RerankResult]:  # pragma: no cover
        """Rerank every request (all are independent and may run as one batch)."""
        ...


@dataclass(frozen=True)
class BackendSpec:
    """A registered backend: ``prefix`` (as in ``--reranker prefix:arg``) and its factory."""

    prefix: str
    factory: Callable[[str, dict[str, Any]], Reranker]
    takes_arg: bool
    help: str
    needs_texts: bool = True


REGISTRY: dict[str, BackendSpec] = {}


def register(prefix: str, takes_arg: bool, help: str, needs_texts: bool = True):
    """Decorator registering a backend factory ``factory(arg, options) -> Reranker``."""

    def deco(factory):
        REGISTRY[prefix] = BackendSpec(prefix, factory, takes_arg, help, needs_texts)
        return factory

    return deco


#: Modules that register backends; each keeps its heavy imports (torch, httpx) inside the factory.
BACKEND_MODULES = ("simulated", "minilm", "llm", "openai_backend")


def lookup(spec: str) -> tuple[BackendSpec, str]:
    """The registered backend for ``--reranker prefix[:arg]`` and its argument."""
    import importlib

    for module in BACKEND_MODULES:
        try:
            importlib.import_module(f"{__package__}.{module}")
        except ModuleNotFoundError as exc:  # a backend module not installed in this build
            if exc.name != f"{__package__}.{module}":
                raise
    prefix, _, arg = spec.partition(":")
    backend = REGISTRY.get(prefix)
    if backend is None:
        known = ", ".join(f"{b.prefix}{':ARG' if b.takes_arg else ''}" for b in REGISTRY.values())
        raise InputError(f"unknown reranker {spec!r}; known: {known}")
    if backend.takes_arg and not arg:
        raise InputError(f"reranker {prefix!r} needs an argument: --reranker {prefix}:NAME")
    return backend, arg


def build_reranker(spec: str, **options: Any) -> Reranker:
    """Build the backend named by ``--reranker`` (``simulated``, ``minilm``, ``hf:DIR``, ``openai:MODEL``)."""
    backend, arg = lookup(spec)
    return backend.factory(arg, options)
