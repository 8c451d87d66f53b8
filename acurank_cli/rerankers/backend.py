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

import enum
import json
from collections import OrderedDict
from dataclasses import dataclass, fields
from typing import Any, Callable, Mapping, Sequence

from ..errors import InputError, OptionError
from ..plugins import Declared, PluginModules, Registry, declared_files, declared_options
from ..params import NotAnOption, check_domains
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
    #: How the scheduler feeds the backend (:class:`~acurank_cli.run.lanes.Lanes`): ``lanes`` calls of
    #: :meth:`rerank` may run at once (a server's requests in flight), each of at most ``lane_batch`` windows (None:
    #: every window waiting, as one batch: the batch engines and CPU models, one lane).
    lanes: int = 1
    lane_batch: int | None = None
    #: whether a request's ``instruction`` reaches the model (a listwise LLM's prompt)
    takes_instruction: bool = False
    #: whether every answer carries each document's own score (:attr:`~acurank_cli.records.RerankResult.absolute`:
    #: a pointwise backend's); the call cache answers again an entry kept without them
    gives_absolute: bool = False

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

    def window_tokens(self, request: RerankRequest) -> tuple[int, int] | None:
        """The tokens a call on ``request``'s window takes, in and out, as the backend counts them, with no call (the
        bill's, :mod:`acurank_cli.run.estimate`); None: it counts none."""
        return None

    def bind_calls(self) -> None:
        """``--max-cost``: hold every call within the tokens its bound reserved (:func:`~acurank_cli.run.money.call_bound`:
        the context in, the answer's and the thought's budget out). A backend whose calls stop there already does
        nothing (hf: and vllm: generate at most the answer's budget; the simulated reranker counts it); one whose
        server would not stop there caps its requests, or refuses in one line where no cap holds (openai:)."""
        return None

    def unbounded(self) -> str | None:
        """Why some call's tokens have no bound, in words (a served model that thinks with no thought budget), or
        None: what ``--max-cost`` refuses (:meth:`bind_calls`) and the dry run's bill says it cannot count."""
        return None

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


class BackendWrapper(RerankerBase):
    """A backend around another (``inner``), in its shape: its name, whether it reads texts, its lanes and batches,
    its identity, fingerprint, provenance and prompts are the inner backend's, and every call goes to it, unless a
    subclass changes what it is for. The one kind of thing that stands between the driver and a backend:

    * the call cache (:class:`~acurank_cli.rerankers.cache.CachedReranker`): answers a prompt it has seen;
    * the server's counter (:class:`~acurank_cli.rerankers.counted.Counted`): counts each batch for /metrics;
    * the Ray pool (:class:`~acurank_cli.run.ray_executor.RayPool`): runs the calls in actors, where the inner
      backend is built (here it is known by what the actors report of it).

    Another executor or decorator subclasses this and overrides what it changes (usually :meth:`rerank`)."""

    def __init__(self, inner: RerankerBase):
        self.inner = inner
        self.name = inner.name
        self.needs_texts = inner.needs_texts
        self.batch_queries = inner.batch_queries
        self.lanes, self.lane_batch = inner.lanes, inner.lane_batch
        self.takes_instruction = getattr(inner, "takes_instruction", False)

    def rerank(self, requests: Sequence[RerankRequest], on_result: ResultSink | None = None) -> list[RerankResult]:
        return self.inner.rerank(requests, on_result)

    def cache_identity(self) -> dict[str, Any] | None:
        return self.inner.cache_identity()

    def prompt_key(self, request: RerankRequest) -> str:
        return self.inner.prompt_key(request)

    def prompt_keys(self, requests: Sequence[RerankRequest]) -> list[str]:
        return self.inner.prompt_keys(requests)

    def fingerprint(self) -> dict[str, Any]:
        return self.inner.fingerprint()

    def notes(self) -> list[str]:
        return self.inner.notes()

    def provenance(self) -> dict[str, Any]:
        return self.inner.provenance()

    def parameters(self) -> int | None:
        return self.inner.parameters()

    def use_store(self, call_cache: str | None) -> None:
        self.inner.use_store(call_cache)

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        """Anything else a caller asks of the backend (its thinking options, a prompt log) is the inner one's."""
        if name == "inner":  # not yet set (unpickling, a failed __init__): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)


def counts_tokens(backend: Any) -> bool:
    """Whether ``backend`` counts a window's tokens with no call (it gives :meth:`RerankerBase.window_tokens`): the
    one test the API's bill and ``--max-cost``'s refusal ask (a stand-in without the method counts none)."""
    return getattr(type(backend), "window_tokens", RerankerBase.window_tokens) is not RerankerBase.window_tokens


def innermost(backend: RerankerBase, wanted: Callable[[Any], bool]) -> Any:
    """The first of ``backend`` and the backends it wraps (``inner``: the call cache, counters) that ``wanted``
    accepts, or None."""
    while backend is not None and not wanted(backend):
        backend = getattr(backend, "inner", None)
    return backend


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
    #: a listwise LLM's prompts without its model (``acurank prompt render``, ``--dry-run``): ``prompts(arg,
    #: options)`` -> a :class:`~.listwise.reranker.ListwiseLLM` whose ``prompt`` and ``prompt_record`` work and whose
    #: model was never loaded nor called, or None where those options read no prompt; None: the backend reads none
    prompts: Callable[[str, Any], RerankerBase] | None = None
    #: the bill's token count without the model, for a backend that reads no prompt but counts tokens (minilm):
    #: ``counts(arg, options)`` -> a :class:`RerankerBase` whose :meth:`~RerankerBase.window_tokens` works (a
    #: listwise LLM's is its ``prompts``); None: none
    counts: Callable[[str, Any], RerankerBase] | None = None
    #: the backend is the rehearsals' own oracle (the simulated reranker): ``--dry-run`` rehearses it with its own
    #: noise, seed and qrels (its options' ``sim_noise``, ``sim_seed``), which its calls then reproduce
    oracle: bool = False
    #: what the backend keeps on disk at the call cache's path: "calls" (the call cache), "embeddings" (the store
    #: beside it); each is opened before the backend is built, so a path it refuses costs no model load
    keeps: tuple[str, ...] = ()
    #: the backend scores each document alone (a bi-encoder, a cross-encoder) and orders a window by those scores:
    #: its answers agree across windows, so ``--dry-run`` rehearses it with an error drawn once per query and document
    #: (the simulated reranker's persistent noise), not once per window as a listwise LLM's
    pointwise: bool = False
    #: what the backend refuses at start that needs nothing loaded or called (an API key where it talks to OpenAI):
    #: ``ready(arg, options)`` raises its one line; a dry run, which builds no backend, asks it (None: nothing)
    ready: Callable[[str, Any], None] | None = None

    @property
    def record(self) -> type:
        """The record whose option fields are this backend's options (its registry entry's record)."""
        return self.options

    def option_names(self) -> set[str]:
        """Every field of its options record: the flags and the keywords only the API gives (``qrels``)."""
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
            raise NotAnOption(f"reranker {self.prefix!r} has no option", unknown,
                              [decl.name for _, decl in declared_options(self.options)], BACKENDS.flags())
        record = self.options(**{k: v for k, v in given.items() if v is not None})
        check_domains(record, f" (reranker {self.prefix})")
        return record


def option_help(option: Declared, baseline_only: bool = False) -> str:
    """A backend option's help: the backends that take it, its declaration's help and its default."""
    default = option.owners[0][1]
    default = default.value if isinstance(default, enum.Enum) else default  # as users type it: text, not AnswerMode.text
    shown = f" (default {default})" if default not in (None, False) else ""
    return f"{', '.join(b.prefix for b, _ in option.owners)}: {option.decl.help}{shown}"


#: Modules that register the built-in backends; each keeps its heavy imports inside the factory.
BACKEND_MODULES = tuple(f"backends.{m}" for m in ("simulated", "minilm", "cross_encoder", "hf", "vllm", "openai"))


#: The backends: the built-ins (:data:`BACKEND_MODULES`), then plug-ins (the ``acurank.rerankers`` entry points and
#: ``ACURANK_BACKENDS``), each module's backends registered at its import (:func:`register`).
BACKENDS: Registry[BackendSpec] = Registry(
    "reranker", PluginModules("reranker", "acurank.rerankers", "ACURANK_BACKENDS",
                              tuple(f"{__package__}.{m}" for m in BACKEND_MODULES)),
    "acurank_cli/rerankers/option_groups.py", option_help)

#: prefix -> backend: the registry's entries (the name the package has always exported)
REGISTRY: dict[str, BackendSpec] = BACKENDS.entries


def register(prefix: str, takes_arg: bool, help: str, needs_texts: bool = True, options: type = NoOptions,
             prompts: Callable[[str, Any], RerankerBase] | None = None, *, oracle: bool = False,
             keeps: tuple[str, ...] = (), pointwise: bool = False, ready: Callable[[str, Any], None] | None = None,
             counts: Callable[[str, Any], RerankerBase] | None = None):
    """Decorator registering a backend: a factory ``factory(arg, options_record) -> RerankerBase``, or a
    :class:`RerankerBase` subclass (built with the options record, see :func:`_as_factory`).

    This is the one line a new backend needs, a built-in's as a plug-in's; its module is found through
    :data:`BACKEND_MODULES` (built-ins), the ``acurank.rerankers`` entry-point group (installed plug-ins) or the
    ``ACURANK_BACKENDS`` environment variable (comma-separated module names). ``prompts``: a listwise LLM's
    prompt-only factory (:attr:`BackendSpec.prompts`); ``oracle``: :attr:`BackendSpec.oracle`; ``keeps``:
    :attr:`BackendSpec.keeps` (a backend that keeps none is never wrapped in the call cache before it is built);
    ``pointwise``: :attr:`BackendSpec.pointwise`; ``ready``: :attr:`BackendSpec.ready`; ``counts``:
    :attr:`BackendSpec.counts`.
    """

    def deco(factory):
        BACKENDS.register(prefix, BackendSpec(prefix, _as_factory(factory, takes_arg), takes_arg, help,
                                              needs_texts=needs_texts, options=options, prompts=prompts,
                                              oracle=oracle, keeps=keeps, pointwise=pointwise, ready=ready,
                                              counts=counts))
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


def load_backends(strict: bool = True) -> dict[str, BackendSpec]:
    """Import every backend module (built-ins, entry points, ``ACURANK_BACKENDS``) and return the registry.

    ``strict=False`` skips a plug-in that fails to import (building the CLI's flags); ``lookup`` reports it.
    """
    return BACKENDS.load(strict)


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

    @property
    def files(self) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        """The files its options name, as (flag, path): read, and written (a log the run appends to), as its
        option groups declare them (:func:`~acurank_cli.plugins.declared_files`)."""
        return declared_files(self.options)

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


    def prompts(self) -> RerankerBase | None:
        """The backend's prompts without its model, or None where it reads none with these options."""
        return None if self.backend.prompts is None else self.backend.prompts(self.arg, self.options)

    def counter(self) -> RerankerBase | None:
        """What counts a window's tokens without the model (the bill's: :meth:`RerankerBase.window_tokens`): a
        listwise LLM's prompts, or a backend's own counter (:attr:`BackendSpec.counts`); None: the backend counts
        none."""
        if self.backend.prompts is not None:
            return self.prompts()
        return None if self.backend.counts is None else self.backend.counts(self.arg, self.options)

    def ready(self) -> None:
        """What the backend refuses at start with nothing loaded (:attr:`BackendSpec.ready`), checked now."""
        if self.backend.ready is not None:
            self.backend.ready(self.arg, self.options)

    def prompter(self) -> RerankerBase:
        """The backend's prompts without its model (``acurank prompt render``): refused in one line for a backend
        that reads no prompt."""
        prompts = self.prompts()
        if prompts is None:
            takers = ", ".join(f"{b.prefix}:" if b.takes_arg else b.prefix for b in BACKENDS.entries.values()
                               if b.prompts is not None and b is not self.backend)
            also = " (and for it with other options: see --help)" if self.backend.prompts is not None else ""
            raise OptionError(f"reranker {self.backend.prefix!r} reads no prompt{' with these options' if also else ''} "
                              f"({OptionError.literal(self.backend.help)}); prompts are rendered for {takers}{also}",
                              reranker="--reranker")
        return prompts


def build_reranker(spec: str, **options: Any) -> RerankerBase:
    """Build the backend named by ``--reranker`` (``simulated``, ``minilm``, ``hf:DIR``, ``openai:MODEL``, ...).

    ``options`` are the backend's own (its options record's fields); None means its default.
    """
    return BackendChoice.of(spec, options).build()
