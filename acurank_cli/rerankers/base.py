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
from dataclasses import dataclass, fields
from typing import Any, Callable, Mapping, Sequence

from ..errors import InputError
from ..plugins import PluginModules
from ..params import check_domains, flag_of
from ..records import RerankRequest, RerankResult

#: Called with (index in the batch, result) as each result is ready.
ResultSink = Callable[[int, RerankResult], None]


class RerankerBase:
    """Executes windows: one RerankResult (a permutation of positions) per request."""

    name: str = "reranker"
    #: Whether windows carry passage texts. For a registered backend the registration decides
    #: (:meth:`BackendSpec.texts_needed`, set on the instance by :func:`build_reranker`); this default
    #: serves rerankers handed over as objects.
    needs_texts: bool = True
    #: Queries worth advancing together by default (--batch-queries): 1 for a model that answers a batch no
    #: faster than its windows one by one (CPU models, the oracle); more for engines and servers that
    #: batch or serve requests concurrently. The results never depend on it.
    batch_queries: int = 1
    #: How the scheduler feeds the backend (:class:`~acurank_cli.run.driver.Lanes`): ``lanes`` calls of
    #: :meth:`rerank` may run at once (a server's requests in flight), each of at most ``lane_batch`` windows (None:
    #: every window waiting, as one batch: the batch engines and CPU models, one lane).
    lanes: int = 1
    lane_batch: int | None = None

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

    def prompt_keys(self, requests: Sequence[RerankRequest]) -> list[str]:
        """:meth:`prompt_key` of every request (a backend elsewhere answers them in one round trip)."""
        return [self.prompt_key(r) for r in requests]

    def fingerprint(self) -> dict[str, Any]:
        """What a run records about the reranker (resume continues only when it matches)."""
        return self.cache_identity() or {"backend": self.name}

    def notes(self) -> list[str]:
        """Lines worth telling the user once at start (how prompts are made, fallbacks taken)."""
        return []

    def provenance(self) -> dict[str, Any]:
        """What a run records of the model that answered (see :mod:`acurank_cli.run.provenance`): from the
        cache identity, the backend, model, revision, weights digest, dtype and prompt format; the device it ran
        on; a backend with local weights adds their sha256 (``weights_sha256``)."""
        identity = self.cache_identity() or {"backend": self.name}
        keep = ("backend", "model", "revision", "gguf_sha256", "package", "files", "dtype", "prompt_format", "answer")
        out = {k: identity[k] for k in keep if k in identity}
        source = getattr(self, "source", None)
        if source is not None and hasattr(source, "weights_sha256"):
            out["weights_sha256"] = source.weights_sha256()
        device = getattr(self, "device", None)
        if device is not None:
            out["device"] = str(device)
        return out

    def parameters(self) -> int | None:
        """The model's parameter count, for the FLOPs estimate (None: unknown, e.g. a remote model)."""
        return None

    def use_store(self, call_cache: str | None) -> None:
        """The call cache's path (None: no cache), for a backend that keeps a persistent store beside it
        (the local encoders' embeddings); the default keeps nothing."""

    def close(self) -> None:
        """Release resources (default: nothing)."""


class LRU(OrderedDict):
    """A small bounded mapping (least recently used entries go first)."""

    def __init__(self, size: int):
        super().__init__()
        self.size = size

    def touch(self, key):
        """The value for ``key`` (now the most recently used), or None."""
        if key not in self:
            return None
        self.move_to_end(key)
        return self[key]

    def put(self, key, value) -> None:
        """Store ``value``; the least recently used entry goes when the mapping is full."""
        self[key] = value
        self.move_to_end(key)
        if len(self) > self.size:
            self.popitem(last=False)

    def get_or(self, key, make):
        found = self.touch(key)
        if found is None:
            found = make()
            self.put(key, found)
        return found


@dataclass(frozen=True)
class NoOptions:
    """A backend without options."""


@dataclass(frozen=True)
class BackendSpec:
    """A registered backend: ``prefix`` (``--reranker prefix:arg``), its factory and its options record."""

    prefix: str
    factory: Callable[[str, Any], RerankerBase]
    takes_arg: bool
    help: str
    needs_texts: bool = True
    options: type = NoOptions

    def option_names(self) -> set[str]:
        return {f.name for f in fields(self.options)}

    def texts_needed(self, options: Any) -> bool:
        """Whether the backend reads passage texts with this options record (a record may decide it with
        a ``needs_texts`` property, as the simulated reranker's ``--sim-tokens`` does)."""
        return bool(getattr(options, "needs_texts", self.needs_texts))

    def make_options(self, given: dict[str, Any]) -> Any:
        """The options record from keyword values (None = the default); unknown names are an error."""
        known = self.option_names()
        unknown = sorted(k for k, v in given.items() if v is not None and k not in known)
        if unknown:
            raise UnknownOption(self.prefix, unknown, [f for f in fields(self.options) if f.metadata.get("cli", True)])
        record = self.options(**{k: v for k, v in given.items() if v is not None})
        check_domains(record, f" (reranker {self.prefix})")
        return record


class UnknownOption(InputError):
    """An option the backend does not have: the API names keywords, the CLI flags."""

    def __init__(self, prefix: str, unknown: list[str], known: list[Any]):
        self.prefix, self.unknown, self.known = prefix, unknown, known
        super().__init__(self._text(lambda k: k, lambda f: f.name))

    def _text(self, name, shown) -> str:
        return (f"reranker {self.prefix!r} has no option {', '.join(name(k) for k in self.unknown)} "
                f"(its options: {', '.join(shown(f) for f in self.known) or 'none'})")

    def cli(self) -> str:
        return self._text(flag_of, _flag)


def _flag(f: Any) -> str:
    return f.metadata.get("flag") or flag_of(f.name)


REGISTRY: dict[str, BackendSpec] = {}


def register(prefix: str, takes_arg: bool, help: str, needs_texts: bool = True, options: type = NoOptions):
    """Decorator registering a backend: a factory ``factory(arg, options_record) -> RerankerBase``, or a
    :class:`RerankerBase` subclass (built with the options record, see :func:`_as_factory`).

    This is the one line a new backend needs; its module is found through :data:`BACKEND_MODULES`
    (built-ins), the ``acurank.rerankers`` entry-point group (installed plug-ins) or the
    ``ACURANK_BACKENDS`` environment variable (comma-separated module names).
    """

    def deco(factory):
        REGISTRY[prefix] = BackendSpec(prefix, _as_factory(factory, takes_arg), takes_arg, help, needs_texts, options)
        return factory

    return deco


def _as_factory(made: Any, takes_arg: bool) -> Callable[[str, Any], RerankerBase]:
    """A registered factory ``f(arg, options)``, or a RerankerBase subclass whose ``__init__`` takes
    ``(arg, options)``, ``(options)`` (or ``(arg)`` when ``takes_arg``), or nothing."""
    if not (isinstance(made, type) and issubclass(made, RerankerBase)):
        return made
    import inspect

    params = [p for p in inspect.signature(made).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    if len(params) >= 2:
        return lambda arg, options: made(arg, options)
    if len(params) == 1:
        return (lambda arg, options: made(arg)) if takes_arg and params[0].name == "arg" else (
            lambda arg, options: made(options))
    return lambda arg, options: made()


#: Modules that register the built-in backends; each keeps its heavy imports inside the factory.
BACKEND_MODULES = ("simulated", "minilm", "cross_encoder", "llm", "vllm_backend", "openai_backend")


#: Where backends come from (see :mod:`acurank_cli.plugins`).
PLUGINS = PluginModules("reranker", "acurank.rerankers", "ACURANK_BACKENDS",
                        tuple(f"{__package__}.{m}" for m in BACKEND_MODULES))


def load_backends(strict: bool = True) -> dict[str, BackendSpec]:
    """Import every backend module (built-ins, entry points, ``ACURANK_BACKENDS``) and return the registry.

    ``strict=False`` skips a plug-in that fails to import (building the CLI's flags); ``lookup`` reports it.
    """
    PLUGINS.load(strict)
    return REGISTRY


def lookup(spec: str) -> tuple[BackendSpec, str]:
    """The registered backend for ``--reranker prefix[:arg]`` and its argument."""
    registry = load_backends()
    prefix, _, arg = spec.partition(":")
    backend = registry.get(prefix)
    if backend is None:
        known = ", ".join(f"{b.prefix}{':ARG' if b.takes_arg else ''}" for b in registry.values())
        raise InputError(f"unknown reranker {spec!r}; known: {known}")
    if backend.takes_arg and not arg:
        raise InputError(f"reranker {prefix!r} needs an argument: {prefix}:NAME")
    if not backend.takes_arg and spec != prefix:  # a spec's argument is used or refused, never ignored
        takers = ", ".join(f"{b.prefix}:" for b in registry.values() if b.takes_arg)
        raise InputError(f"reranker {prefix!r} takes no argument ({spec!r}: {backend.help}); "
                         f"a model by name goes with {takers}")
    return backend, arg


@dataclass(frozen=True)
class BackendChoice:
    """A ``--reranker`` spec looked up once, with its options checked: what a run knows of its backend before
    anything loads (whether it reads passage texts), and what builds it."""

    backend: BackendSpec
    arg: str
    #: the options given (None values dropped) and their checked record
    given: Mapping[str, Any]
    options: Any

    @classmethod
    def of(cls, spec: str, options: Mapping[str, Any] | None = None) -> "BackendChoice":
        """Look ``spec`` up and check ``options`` (an option the backend lacks, or a value outside its domain,
        is refused here)."""
        backend, arg = lookup(spec)
        given = {k: v for k, v in (options or {}).items() if v is not None}
        return cls(backend, arg, given, backend.make_options(given))

    @property
    def needs_texts(self) -> bool:
        return self.backend.texts_needed(self.options)

    def with_context(self, context: Mapping[str, Any] | None) -> "BackendChoice":
        """``context``: what a run knows that the backend may take as an option (the qrels), used only where the
        backend declares that option and the caller did not set it."""
        known = self.backend.option_names()
        extra = {k: v for k, v in (context or {}).items() if k in known and k not in self.given}
        if not extra:
            return self
        given = {**self.given, **extra}
        return BackendChoice(self.backend, self.arg, given, self.backend.make_options(given))

    def build(self) -> RerankerBase:
        reranker = self.backend.factory(self.arg, self.options)
        # the registration owns needs_texts (the job loads texts by it before anything is built): the instance
        # carries that decision, whatever its class says
        reranker.needs_texts = self.needs_texts
        return reranker


def build_reranker(spec: str, **options: Any) -> RerankerBase:
    """Build the backend named by ``--reranker`` (``simulated``, ``minilm``, ``hf:DIR``, ``openai:MODEL``, ...).

    ``options`` are the backend's own (its options record's fields); None means its default.
    """
    return BackendChoice.of(spec, options).build()


@dataclass(frozen=True)
class CliOption:
    """One ``rerank`` flag for a backend option: its field (declared once, maybe shared by several backends
    through :mod:`acurank_cli.rerankers.options`), its type and the backends that take it."""

    field: Any
    kind: Any
    backends: tuple[str, ...]

    @property
    def flag(self) -> str:
        return _flag(self.field)

    @property
    def help(self) -> str:
        return f"{', '.join(self.backends)}: {self.field.metadata['help']}"


def cli_options() -> dict[str, CliOption]:
    """Every registered backend's CLI options, name -> :class:`CliOption`. Two backends that declare an
    option of the same name must share its declaration (an options group), or the flag would mean two things."""
    import typing

    out: dict[str, CliOption] = {}
    for spec in load_backends(strict=False).values():
        hints = typing.get_type_hints(spec.options)
        for f in fields(spec.options):
            if not f.metadata.get("cli", True):
                continue
            seen = out.get(f.name)
            if seen is None:
                out[f.name] = CliOption(f, hints[f.name], (spec.prefix,))
            elif seen.field.metadata is f.metadata or seen.field.metadata == f.metadata:
                out[f.name] = CliOption(seen.field, seen.kind, (*seen.backends, spec.prefix))
            else:
                raise InputError(f"reranker {spec.prefix!r} declares {flag_of(f.name)} differently from "
                                 f"{', '.join(seen.backends)}: share one declaration (acurank_cli/rerankers/options.py)")
    return out
