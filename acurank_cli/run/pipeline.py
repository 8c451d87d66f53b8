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
from typing import Any, Mapping

from ..method.base import Strategy
from ..method.choices import Init
from ..method.registry import build_strategy, method_options
from ..params import Domain, ParameterError, at_least
from ..rerankers.base import RerankerBase, build_reranker, lookup
from ..rerankers.cache import default_cache_path, with_cache


@dataclass(frozen=True)
class Defaults:
    """What a run uses when nothing is said (the CLI's flags and the API's keywords both default to these)."""

    method: str = "acurank"
    baseline: str = "sw-1"
    backend: str = "minilm"
    #: the call cache: "default" is $ACURANK_CACHE or ~/.cache/acurank/calls.sqlite; None: no cache
    cache: str | None = "default"
    #: queries advanced together (their windows share reranker batches; results do not depend on it);
    #: None: the backend's own default (``RerankerBase.batch_queries``: 8 for vllm: and openai:, else 1)
    batch_queries: int | None = None


DEFAULTS = Defaults()

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
    """A built pipeline: the strategy (decides windows), the backend (executes them) and the backend
    behind the call cache (what the driver calls; the backend itself when nothing is cached)."""

    strategy: Strategy
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
    name = name or (DEFAULTS.baseline if baseline_only else DEFAULTS.method)
    options = {k: v for k, v in (options or {}).items() if v is not None}
    if "init" not in options and "init" in method_options(name) and source.init is not Init.score:
        options["init"] = source.init
    return build_strategy(name, options, baseline_only=baseline_only)


def check_backend(spec: str, options: Mapping[str, Any]) -> bool:
    """Check the backend's options before any input is read (a flag the backend does not take or a value
    outside its domain is refused); return whether it reads passage texts with these options."""
    found = lookup(spec)[0]
    return found.texts_needed(found.make_options(dict(options)))


def backend(spec: str | RerankerBase | None, options: Mapping[str, Any] | None = None,
            context: Mapping[str, Any] | None = None) -> RerankerBase:
    """The backend named by ``spec`` (default minilm), or ``spec`` itself when it is one already.
    ``context``: what the job knows that a backend may take as an option (the qrels); given only to a
    backend that declares that option and when the caller did not set it."""
    if isinstance(spec, RerankerBase):
        return spec
    spec = spec or DEFAULTS.backend
    options = {k: v for k, v in (options or {}).items() if v is not None}
    known = lookup(spec)[0].option_names()
    for key, value in (context or {}).items():
        if key in known and key not in options:
            options[key] = value
    return build_reranker(spec, **options)


def check_batch_queries(batch_queries: int | None) -> int | None:
    if batch_queries is not None and not BATCH_QUERIES.contains(batch_queries):
        raise ParameterError("batch_queries", batch_queries, BATCH_QUERIES.describe(), "--batch-queries")
    return batch_queries


def build(strategy: Strategy, built: RerankerBase, cache: str | None = DEFAULTS.cache,
          batch_queries: int | None = DEFAULTS.batch_queries) -> Pipeline:
    """Put the backend behind the call cache (when it can be cached and one is wanted); ``batch_queries``
    None: the backend's own default."""
    check_batch_queries(batch_queries)
    if batch_queries is None:
        batch_queries = max(1, int(getattr(built, "batch_queries", 1)))
    path = str(default_cache_path()) if cache == "default" else cache
    try:
        built.use_store(path)
        reranker = with_cache(built, path)
    except BaseException:
        built.close()
        raise
    return Pipeline(strategy, built, reranker, path, batch_queries)
