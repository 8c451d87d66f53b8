"""The one composition root: a method, a backend, the call cache and the defaults, wired the same way for
the command line (:mod:`acurank_cli.run.job`) and the Python API (:mod:`acurank_cli.api`).

The defaults live here and nowhere else (:data:`DEFAULTS`). One rule differs by where the first-stage
scores come from, and it is stated here too: scores read from a run file are the paper's first-stage
scores (``init=score``: mu = score, sigma = mu/3), while documents handed to the API carry scores on any
scale, or none (``init=zscore``: mu = 10 + z, sigma = mu/3), see :class:`ScoreSource`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

from ..errors import InputError, OptionError
from ..method.strategy import Strategy, check_tasks, expect_kernels
from ..method.choices import Init
from ..method.registry import build_strategy, method_options
from ..params import Domain, ParameterError, at_least, check_text
from ..records import Doc, QueryOutcome, RankingTask
from ..rerankers.backend import BackendChoice, RerankerBase
from ..rerankers.backends.embeddings import check_usable
from ..rerankers.cache import default_cache_path, with_cache
from ..rerankers.listwise.thinking import gate_of
from .driver import Driver, StepHook
from .lanes import QUERIES_PER_LANE
from .request import Unservable, check_servable

if TYPE_CHECKING:
    from ..results import RerankOutput
    from .passages import Passages
    from .request import Admitted, Request


@dataclass(frozen=True)
class Defaults:
    """What a run uses when nothing is said (the CLI's flags and the API's keywords both default to these)."""

    method: str = "acurank"
    baseline: str = "sw-1"
    backend: str = "minilm"
    #: the call cache: "default" is $ACURANK_CACHE or ~/.cache/acurank/calls.sqlite; None: no cache
    cache: str | None = "default"
    #: queries advanced together (their windows share reranker batches; results do not depend on it);
    #: None: the backend's own default (:data:`BATCH_QUERIES_DEFAULT` says it)
    batch_queries: int | None = None
    #: first-stage candidates reranked per query (``--depth``; ``retrieve --hits``: candidates retrieved)
    depth: int = 100


DEFAULTS = Defaults()

#: What ``batch_queries`` None gives, said once for --help, the API and the docs (a test holds it to the backends'
#: own ``batch_queries``, hf:'s GPU default and ``QUERIES_PER_LANE``): the backend's own, and at least
#: ``QUERIES_PER_LANE`` times its lanes where it has several
BATCH_QUERIES_DEFAULT = (f"the backend's: 8 for vllm:, at least 8 for openai: ({QUERIES_PER_LANE} x its requests in "
                         f"flight, --concurrency x --base-url), 16 for hf: on a GPU, {QUERIES_PER_LANE} x the actors "
                         "with --ray, else 1")

#: --batch-queries / batch_queries=
BATCH_QUERIES: Domain = at_least(1)


class ScoreSource(str, enum.Enum):
    """Where first-stage scores come from, which decides the default rating init (see the module doc)."""

    run_file = "run_file"
    documents = "documents"

    @property
    def init(self) -> Init:
        return Init.score if self is ScoreSource.run_file else Init.zscore


@dataclass(frozen=True)
class Pipeline:
    """A built pipeline: the backend (executes windows) and the backend behind the call cache (what the driver
    calls; the backend itself when nothing is cached)."""

    backend: RerankerBase
    reranker: RerankerBase
    cache_path: str | None
    batch_queries: int

    def close(self) -> None:
        self.reranker.close()


def method(name: str | None, options: Mapping[str, Any] | None = None, source: ScoreSource = ScoreSource.run_file,
           baseline_only: bool = False) -> Strategy:
    """The strategy for a method name (default: acurank, or sw-1 for ``baseline``) with its options (keyword
    -> value; None: not given), and the rating init the score source implies unless one was given."""
    check_method_name(name)
    name = name or (DEFAULTS.baseline if baseline_only else DEFAULTS.method)
    options = {k: v for k, v in (options or {}).items() if v is not None}
    if "init" not in options and "init" in method_options(name) and source.init is not Init.score:
        options["init"] = source.init
    return build_strategy(name, options, baseline_only=baseline_only)


def check_method_name(name: Any) -> None:
    """A method's name given blank, or as anything but a string, is refused at every entrance (some took a blank
    one for the default, others refused it)."""
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ParameterError("method", name, "a method name (leave it out for the default)", flag="--method")


def check_served_backend(reranker: str | None) -> None:
    """Refuse (:class:`Unservable`) a backend that orders windows by qrels (the simulated reranker, a qrels oracle):
    a served request's documents are texts under ids of its own, in no qrels (the API and the command line take
    qrels with the queries' and documents' ids)."""
    from ..rerankers.backend import lookup

    if reranker is not None and lookup(reranker)[0].oracle:
        raise Unservable(f"--reranker {reranker}: it orders windows by qrels, and a served request's documents are in "
                         "none: serve a reranker that reads the documents' texts")


def served_methods(method: str | None, options: dict, calibration: str | None = None, passages: str | None = None,
                   *, reranker: str | None = None, allow_map_mismatch: bool = False) -> tuple["Methods", Any]:
    """A server's methods (``serve``, ``mcp``) and its calibration map (``--calibration``; None without one), checked
    before anything is built: the method servable, the map loaded, its k kept, the map applicable, and fit with this
    reranker and method (unless ``allow_map_mismatch``: --allow-map-mismatch, as ``rerank`` takes it)."""
    from ..relevance import check_applicable, check_origin, loaded

    calibrated = loaded(calibration, "--calibration")
    methods = Methods(method, options, ScoreSource.documents, calibrated, "--calibration")  # before any load
    check_servable(methods.strategy)
    check_served_backend(reranker)
    if calibrated is not None:
        check_applicable(methods.strategy, passages)
    check_origin(calibrated, reranker, methods.strategy.name, allowed=allow_map_mismatch)  # and its flag without a map
    return methods, calibrated


class Methods:
    """The methods a session's calls use: its own method as built, with k = ``top_k`` where the method has a cutoff
    and k was not given (so that its uncertainty, its stop and p_topk are about the documents kept), or another
    method by its ``--method`` name with a ``budget`` (a server's request); each built once. Documents' scores
    (``ScoreSource.documents``) decide the default rating init (a run file's, ``ScoreSource.run_file``, the command
    line's; ``baseline_only``: ``baseline``'s methods). With a calibration map, the one owner of the map's k at every
    entrance (the command line, the API, serve, MCP): the map's k for every call, another k given refused
    (:func:`~acurank_cli.relevance.keep_maps_settings`, the rule; ``flag``: how the map was named)."""

    def __init__(self, name: str | None, options: Mapping[str, Any] | None = None,
                 source: ScoreSource | None = None, calibration: Any = None, flag: str = "calibration", *,
                 baseline_only: bool = False):
        from ..relevance import keep_maps_settings

        check_method_name(name)
        self.source = source or ScoreSource.documents
        self.options = {k: v for k, v in (options or {}).items() if v is not None}
        #: the map whose k every call keeps, whichever method it names (top_k then only cuts the list)
        self.calibration, self.flag = calibration, flag
        self.strategy = method(name, self.options, self.source, baseline_only)  # its options in their domains first
        if calibration is not None and self.strategy.cutoff is not None:  # one without ratings: the map's refusal
            keep_maps_settings(calibration, self.strategy.name, self.options, flag)
            self.strategy = method(name, self.options, self.source, baseline_only)
        self.name = self.strategy.name  # as the family spells it: a call naming it in another case is its own
        self._chosen: dict[tuple, Strategy] = {}

    def for_call(self, name: str | None = None, top_k: int | None = None, budget: int | None = None) -> Strategy:
        """The method serving one call (see the class doc): a method of the session's own family takes the session's
        method options but those its name sets (:func:`~acurank_cli.method.registry.carried`: a server's
        ``--beta-pool query`` serves a request for ``acurank-auto-9`` as for ``acurank-auto``), another family none."""
        from ..method.registry import carried, spelled
        from ..relevance import keep_maps_settings

        name = None if name is None else spelled(name)
        own = name is None or name == self.name
        if own and budget is None and (top_k is None or self.strategy.cutoff is None or "k" in self.options):
            return self.strategy
        key = (self.name if name is None else name, top_k, budget)
        if key not in self._chosen:
            options = carried(self.options, self.name, key[0])
            keep_maps_settings(self.calibration, key[0], options, self.flag)  # the one rule, for the method the call names
            if budget is not None:
                options["budget"] = budget
            strategy = method(key[0], options, self.source)
            if top_k is not None and strategy.cutoff is not None and "k" not in options:
                strategy = method(key[0], {**options, "k": top_k}, self.source)
            self._chosen[key] = strategy
        return self._chosen[key]


def unjudged(qrels: Any, qids: Any, given: str, these: str, way: str = "") -> str | None:
    """The warning where the simulated reranker's ``qrels`` (``given``: how the entrance names them) judge none of
    ``these`` queries (their ``qids``): it then orders every window by its noise alone, a run of no meaning said by the
    run's checks and by the API's calls alike (the API's were silent, its default qid 'q' judged by no qrels); ``way``:
    the entrance's own way out. Here, beside the servers' refusal of a reranker that orders by qrels
    (:func:`check_served_backend`)."""
    qids = list(qids)
    if not qrels or not qids or any(qid in qrels for qid in qids):
        return None
    return (f"{given} judges none of {these} queries, so the simulated reranker orders every window by its noise "
            f"alone (qrels of another dataset?{way})")


def split_options(options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Keywords (the API's) or flags (the CLI's) split into (method options, backend options): a name any registered
    method takes is the method's, every other the backend's (whose options check their own names). The one place
    the split is made."""
    from ..method.registry import option_names

    method_keys = option_names()
    return ({k: v for k, v in options.items() if k in method_keys},
            {k: v for k, v in options.items() if k not in method_keys})


def check_batch_queries(batch_queries: int | None) -> int | None:
    if batch_queries is not None and not BATCH_QUERIES.contains(batch_queries):
        raise ParameterError("batch_queries", batch_queries, BATCH_QUERIES.describe(), "--batch-queries")
    return batch_queries


def cache_path(cache: str | None) -> str | None:
    """``--cache``'s value as a path: "default" is :func:`~acurank_cli.rerankers.cache.default_cache_path`."""
    return str(default_cache_path()) if cache == "default" else cache


def _build(built: RerankerBase, cache: str | None = DEFAULTS.cache,
           batch_queries: int | None = DEFAULTS.batch_queries) -> Pipeline:
    """Put the backend behind the call cache (when it can be cached and one is wanted); ``batch_queries``
    None: the backend's own default."""
    check_batch_queries(batch_queries)
    if batch_queries is None:  # the backend's own, and enough queries in flight to keep its lanes fed to the end
        batch_queries = max(1, int(built.batch_queries), QUERIES_PER_LANE * int(built.lanes) if built.lanes > 1 else 1)
    path = cache_path(cache)
    reranker = built
    try:
        reranker = with_cache(built, path)  # first: a cache path it refuses leaves no embedding store beside it
        built.use_store(path)
    except BaseException:
        reranker.close()  # the cache closes the backend with its database
        raise
    return Pipeline(built, reranker, path, batch_queries)


class Session:
    """One run's life, the same for the command line and the Python API: the method's checks of the tasks
    before any call, the backend looked up once (its options checked before any input is read) and built
    once behind the call cache, and the driver. The CLI adds files, progress and resume around it
    (:mod:`acurank_cli.run.job`), the API documents in and ``RerankOutput`` out (:mod:`acurank_cli.api`).

    ``backend``: a ``--reranker`` spec (default minilm) with its ``options``, or a built backend (the API);
    ``passages``: long documents ranked by their passages (:mod:`.passages`), or None: documents whole."""

    def __init__(self, strategy: Strategy, backend: str | RerankerBase | None = None,
                 options: Mapping[str, Any] | None = None, ray: Any = None, passages: "Passages | None" = None, *,
                 methods: "Methods | None" = None, calibration: Any = None, allow_map_mismatch: bool = False):
        self.strategy = strategy
        #: the methods its requests may ask for (:meth:`admit`; None: the session's own strategy for every call), the
        #: map that gives P(relevant) (None: none), and whether a request may name another method than the map's
        self.methods = methods
        self.calibration, self.allow_map_mismatch = calibration, allow_map_mismatch
        #: where windows run (:class:`~acurank_cli.run.ray_executor.RayOptions`), or None: in this process
        self.ray = ray
        self.spec = backend if isinstance(backend, str) or backend is None else None
        if ray is not None and self.spec is None:
            raise InputError("ray: give the backend by its --reranker name (each actor builds it), not a built one")
        self.backend: RerankerBase | None = backend if isinstance(backend, RerankerBase) else None
        given = sorted(k for k, v in (options or {}).items() if v is not None)
        if self.backend is not None and given:  # they would be silently ignored: the backend is built already
            raise InputError(f"backend options ({', '.join(given)}) with a backend already built: give them when "
                             f"building it")
        self.choice = None if self.backend is not None else BackendChoice.of(backend or DEFAULTS.backend, options)
        self.pipeline: Pipeline | None = None
        #: gated thinking (``--thinking gated``): the gate the driver applies to every step's windows, or None
        self.gate = gate_of(self.choice.options if self.choice is not None else getattr(self.backend, "thinking", None))
        self.check_gate(strategy)
        self.passages = passages
        if passages is not None and not self.needs_texts:
            raise OptionError("passages (--passages) splits the documents' texts, and this reranker reads none (it "
                              "ranks by document id): give a reranker that reads texts, or rank without passages")

    def check_gate(self, strategy: Strategy) -> None:
        """Gated thinking needs a method that knows how uncertain each window is (refused before anything loads)."""
        if self.gate is not None:
            self.gate.check(strategy)

    @property
    def needs_texts(self) -> bool:
        """Whether the backend reads passage texts (known before it is built)."""
        return self.backend.needs_texts if self.choice is None else self.choice.needs_texts

    def check(self, tasks: Sequence[RankingTask], source: str, strategy: Strategy | None = None,
              docs: Mapping[str, Doc] | None = None,
              texts_of: Callable[[RankingTask], Mapping[str, Doc]] | None = None, *,
              way: str = "use --init zscore") -> list[str]:
        """Before any call: every first-stage score under the method's rating init (``source`` names where they
        were read), every task and the set of them (by passages, when documents are split: their texts from
        ``docs`` or ``texts_of``, as :meth:`run` takes them); returns notes for the user (:func:`check_tasks`)."""
        from ..method.trueskill import check_scores  # numpy: not at the CLI's start

        strategy = strategy or self.strategy
        self.check_gate(strategy)
        check_scores(tasks, strategy.init, source, way)  # way: the way out of a score init score cannot rate
        if self.passages is not None:
            splitter = self._splitter(docs, texts_of)
            tasks = list(splitter.tasks(tasks))
        notes = check_tasks(strategy, tasks)
        expect_kernels(strategy, tasks)
        return notes

    def _splitter(self, docs: Mapping[str, Doc] | None,
                  texts_of: Callable[[RankingTask], Mapping[str, Doc]] | None):
        from .passages import Splitter

        return Splitter(self.passages, texts_of or (lambda task: docs or {}))

    def admit(self, requests: Sequence["Request"], said: Any, *, one_at_a_time: bool = False) -> list["Admitted"]:
        """Every rule about each request, in one order, before any call (:func:`acurank_cli.run.request.admit`):
        ``said``, how the entrance names its settings (:data:`acurank_cli.relevance.SAID`); ``one_at_a_time``: a
        server's request."""
        from .request import admit

        return admit(self, requests, said, one_at_a_time=one_at_a_time)

    def answer(self, admitted: "Admitted", outcome: QueryOutcome | None) -> "RerankOutput":
        """An admitted request's output from its outcome (:func:`acurank_cli.run.request.answer`)."""
        from .request import answer

        return answer(self, admitted, outcome)

    def drive(self, admitted: Sequence["Admitted"]) -> Iterator[tuple["Admitted", QueryOutcome]]:
        """Drive admitted requests together (one call's: one method), each with its outcome as it completes."""
        served = {a.task.qid: a for a in admitted if a.prepared.task.n > 0}
        if not served:
            return iter(())
        first = next(iter(served.values()))
        driver = Driver(first.strategy, self.pipeline.reranker, None, self.pipeline.batch_queries,
                        texts_of=lambda task: served[task.qid].docs, gate=self.gate)
        return ((served[o.qid], o) for o in driver.run([a.task for a in served.values()]))

    def check_instruction(self, instruction: str | None) -> None:
        """A query's own instruction needs a backend that puts one in its prompt (refused before any call): the one
        place the rule is said, for the API's queries and the server's requests; the text itself as every entrance
        bounds it (:func:`~acurank_cli.params.check_text`, the backend's ``--instruction`` too)."""
        check_text(instruction, "instruction")
        if instruction is not None and not getattr(self.pipeline.reranker, "takes_instruction", False):
            raise OptionError("instruction: the reranker puts no instruction in a prompt (a listwise LLM does: hf:, "
                              "vllm:, openai:)")

    def serve(self, feed: Any, in_flight: int, on_step: StepHook | None = None,
              around: Callable[[RerankerBase], RerankerBase] | None = None) -> Iterator[QueryOutcome]:
        """Serve the requests a :class:`~acurank_cli.serve.admission.Feed` admits, ``in_flight`` at once, each outcome as its query is
        complete (the server's driver thread); ``around``: a decorator of the backend (the server's counter)."""
        reranker = self.pipeline.reranker if around is None else around(self.pipeline.reranker)
        return Driver(self.strategy, reranker, None, in_flight, on_step=on_step, gate=self.gate).serve(feed)

    def load(self, context: Mapping[str, Any] | None = None, cache: str | None = None) -> RerankerBase:
        """Build the backend (once). ``context``: what the run knows that the backend may take as an option (the
        qrels), given only where it declares that option and the caller did not set it; ``cache``: the call cache
        it will run behind, opened first where the backend keeps one (a path refused before any model loads)."""
        if self.backend is None:
            check_usable(cache_path(cache), self.choice.backend.keeps)
            choice = self.choice.with_context(context)
            if self.ray is not None:
                from .ray_executor import RayPool

                self.backend = RayPool(choice, self.ray)
            else:
                self.backend = choice.build()
        return self.backend

    def start(self, cache: str | None = DEFAULTS.cache, batch_queries: int | None = DEFAULTS.batch_queries) -> Pipeline:
        """The backend behind the call cache (when one is wanted), ready to drive; ``batch_queries`` None: the
        backend's own default."""
        self.pipeline = _build(self.load(cache=cache), cache, batch_queries)
        return self.pipeline

    def run(self, tasks: Sequence[RankingTask], docs: Mapping[str, Doc] | None, on_step: StepHook | None = None,
            strategy: Strategy | None = None,
            texts_of: Callable[[RankingTask], Mapping[str, Doc]] | None = None) -> Iterator[QueryOutcome]:
        """Drive the tasks (``strategy``: another k of the same method, as the API's ``top_k`` asks); their passages
        from ``docs`` (one mapping for all) or ``texts_of`` (each query's own). With :attr:`passages`, each query's
        documents are split as the driver takes it and its outcome gathered back to documents."""
        if self.passages is None:
            return Driver(strategy or self.strategy, self.pipeline.reranker, docs, self.pipeline.batch_queries,
                          on_step=on_step, texts_of=texts_of, gate=self.gate).run(tasks)
        splitter = self._splitter(docs, texts_of)
        driver = Driver(strategy or self.strategy, self.pipeline.reranker, None, self.pipeline.batch_queries,
                        on_step=on_step, texts_of=splitter.passages_of, gate=self.gate)
        return map(splitter.gather, driver.run(splitter.tasks(tasks)))

    def close(self) -> None:
        """Release the backend, the call cache and any prompt log (closing twice is harmless)."""
        if self.pipeline is not None:
            self.pipeline.close()
        elif self.backend is not None:
            self.backend.close()
        self.pipeline = self.backend = None
