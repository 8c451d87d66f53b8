"""The reranker contract and registry: a reranker only executes a batch of windows.

Every backend derives from :class:`RerankerBase`, whose hooks have one default each:

* ``rerank(requests, on_result)``: one :class:`RerankResult` per request; ``on_result(i, result)`` is
  called as each result is ready (the call cache commits it then, so a kill loses only calls in flight);
* ``cache_identity()``: what besides the prompt decides the answer; ``None`` (the default) = never cached;
* ``prompt_key(request)``: the exact model input (the cache key's second half);
* ``fingerprint()``: the identity a run file records for resume (defaults to ``cache_identity`` or name);
* ``close()``: release models, files, connections.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..errors import InputError
from ..records import RerankRequest, RerankResult

#: Called with (index in the batch, result) as each result is ready.
ResultSink = Callable[[int, RerankResult], None]


class RerankerBase:
    """Executes windows: one RerankResult (a permutation of positions) per request."""

    name: str = "reranker"
    needs_texts: bool = True

    def rerank(self, requests: Sequence[RerankRequest], on_result: ResultSink | None = None) -> list[RerankResult]:
        """Rerank every request (all are independent and may run as one batch)."""
        results = self.rerank_batch(requests)
        if on_result is not None:
            for i, result in enumerate(results):
                on_result(i, result)
        return results

    def rerank_batch(self, requests: Sequence[RerankRequest]) -> list[RerankResult]:  # pragma: no cover
        """Backends that finish a batch at once implement this; streaming ones override ``rerank``."""
        raise NotImplementedError

    def cache_identity(self) -> dict[str, Any] | None:
        """What besides the prompt decides the answer; None: results are not cached."""
        return None

    def prompt_key(self, request: RerankRequest) -> str:
        """The model's exact input for ``request`` (default: the query and the docs' title/text)."""
        return json.dumps([request.query, [[d.title, d.text] for d in request.docs]], ensure_ascii=False,
                          separators=(",", ":"))

    def fingerprint(self) -> dict[str, Any]:
        """What a run records about the reranker (resume continues only when it matches)."""
        return self.cache_identity() or {"backend": self.name}

    def notes(self) -> list[str]:
        """Lines worth telling the user once at start (how prompts are made, fallbacks taken)."""
        return []

    def close(self) -> None:
        """Release resources (default: nothing)."""


# The protocol name the rest of the package uses.
Reranker = RerankerBase


class LRU(OrderedDict):
    """A small bounded mapping (least recently used entries go first)."""

    def __init__(self, size: int):
        super().__init__()
        self.size = size

    def get_or(self, key, make):
        if key in self:
            self.move_to_end(key)
            return self[key]
        value = make()
        self[key] = value
        if len(self) > self.size:
            self.popitem(last=False)
        return value


@dataclass(frozen=True)
class BackendSpec:
    """A registered backend: ``prefix`` (as in ``--reranker prefix:arg``) and its factory."""

    prefix: str
    factory: Callable[[str, dict[str, Any]], RerankerBase]
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


def build_reranker(spec: str, **options: Any) -> RerankerBase:
    """Build the backend named by ``--reranker`` (``simulated``, ``minilm``, ``hf:DIR``, ``openai:MODEL``)."""
    backend, arg = lookup(spec)
    return backend.factory(arg, options)
