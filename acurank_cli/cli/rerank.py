"""``acurank rerank`` and ``acurank baseline``: a TREC run in, a reranked TREC run out.

The flags are the job's (below), every registered method family's options and every registered backend's
(both generated from their declarations by :func:`with_generated_flags`: the method families' parameters
records and the backends' options records). A flag left out is None: the defaults are the pipeline's
(:data:`acurank_cli.run.pipeline.DEFAULTS`), the method's and the backend's own. ``baseline`` shows only the
baselines' method options. Nothing here imports numpy; the work starts in :func:`acurank_cli.run.job.run_job`.
"""

from __future__ import annotations

import inspect
from typing import Annotated, Optional

import typer

from ..errors import InputError
from ..method.registry import known_methods
from ..run.pipeline import DEFAULTS
from .flags import (Cache, NoCache, Overwrite, Qids, RayActors, RayAddress, RayGpus, cache_choice, declared, err,
                    resolved_parameters, say)


def rerank(
    ctx: typer.Context,
    run: Annotated[str, typer.Argument(help="TREC run, or a candidate file (RankGPT JSON, AcuRank/RankLLM JSONL); '-' = stdin.")],
    method: Annotated[Optional[str], typer.Option("--method", help=f"Method (default {DEFAULTS.method}): {known_methods()}.")] = None,
    reranker: Annotated[str, typer.Option("--reranker", help="Backend: minilm (the embedded offline model) | ce:MODEL (a cross-encoder) | hf:MODEL | vllm:MODEL | openai:MODEL | simulated (a qrels oracle, for research) | a plug-in. Which methods, prompt formats and answer modes combine with each: docs/support-matrix.md.")] = DEFAULTS.backend,
    output: Annotated[Optional[str], typer.Option("--output", "-o", help="Output run (default stdout). An existing file is resumed.")] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", metavar="", help="Start afresh instead of resuming an existing --output.")] = False,
    tag: Annotated[Optional[str], typer.Option("--tag", help="Run tag (default: the method; METHOD.simulated with the simulated reranker).")] = None,
    stats: Annotated[Optional[str], typer.Option("--stats", help="Per-query stats JSONL (calls, iterations, tokens, seconds); default X.stats.jsonl beside --output X.run.")] = None,
    trace: Annotated[Optional[str], typer.Option("--trace", help="Per-iteration ratings (mu, sigma, s_i, rank) JSONL.")] = None,
    topics: Annotated[Optional[str], typer.Option("--topics", help="Topics 'qid<TAB>text'.")] = None,
    corpus: Annotated[Optional[str], typer.Option("--corpus", help="Doc texts: JSONL {_id,title,text} or {id,contents} (.gz ok).")] = None,
    index: Annotated[Optional[str], typer.Option("--index", help="Take doc texts from a Lucene index (stored raw docs).")] = None,
    dataset: Annotated[Optional[str], typer.Option("--dataset", help="irds:<id>: topics, qrels and texts from ir_datasets.")] = None,
    qrels: Annotated[Optional[str], typer.Option("--qrels", help="Qrels (needed by the simulated reranker).")] = None,
    depth: Annotated[int, typer.Option("--depth", "--hits", min=1, help="Rerank the top N candidates per query (--hits, as in retrieve); the ones below follow the reranked head in first-stage order (stats: 'tail'), unless --drop-tail.")] = 100,
    drop_tail: Annotated[bool, typer.Option("--drop-tail", metavar="", help="Write only the reranked top --depth candidates (drop the rest of each list).")] = False,
    qids: Qids = None,
    shard: Annotated[Optional[str], typer.Option("--shard", metavar="I/N", help="Rerank only shard I of N (1 <= I <= N; a split by a hash of the query id, the same on every machine); join the parts with 'acurank merge'.")] = None,
    skip_missing: Annotated[bool, typer.Option("--skip-missing", metavar="", help="Skip candidates without text / queries without topic.")] = False,
    batch_queries: Annotated[Optional[int], typer.Option("--batch-queries", min=1, help="Queries in flight: each advances as soon as its own windows are answered, and their windows keep the backend fed (default: the backend's: 8 for vllm:, four times the requests in flight for openai: and Ray, else 1; results do not depend on it).")] = DEFAULTS.batch_queries,
    cache: Cache = None,
    no_cache: NoCache = False,
    model_params: Annotated[Optional[float], typer.Option("--model-params", help="Model parameters for the stats' FLOPs estimate, 2 x parameters x (input + output tokens), e.g. 7.24e9 for a remote RankZephyr (default: counted from the model for hf:, vllm: and minilm; none otherwise).")] = None,
    ray: RayAddress = None,
    actors: RayActors = None,
    gpus_per_actor: RayGpus = None,
    quiet: Annotated[bool, typer.Option("--quiet", metavar="", help="Errors and warnings only: no status lines, progress display or summary (progress is off anyway when stderr is not a terminal).")] = False,
    **generated,
) -> None:
    """Rerank a first-stage run with AcuRank (or a baseline) and write a TREC run."""
    from ..io.sources import check_tag
    from ..run import pipeline
    from ..run.inputs import InputSpec
    from ..io.run_files import RunFiles
    from ..run.job import RerankJob, run_job
    from ..run.ray_executor import ray_options
    from ..io.shards import Shard

    baseline_only = ctx.info_name == "baseline"
    cache = cache_choice(cache, no_cache)
    options, backend_options = pipeline.split_options(generated)
    strategy = pipeline.method(method, options, pipeline.ScoreSource.run_file, baseline_only)
    job = RerankJob(
        inputs=InputSpec(run=run, depth=depth, topics=topics, corpus=corpus, index=index, dataset=dataset,
                         qrels=qrels, qids=qids, skip_missing=skip_missing,
                         shard=None if shard is None else Shard.parse(shard), keep_tail=not drop_tail),
        strategy=strategy,
        backend=reranker,
        outputs=RunFiles(output=output, overwrite=overwrite, stats=stats, trace=trace,
                         tag=check_tag(tag) if tag is not None else _default_tag(strategy.name, reranker)),
        backend_options={key: v for key, v in backend_options.items() if v is not None},
        cache=cache,
        batch_queries=batch_queries,
        quiet=quiet,
        model_params=model_params,
        ray=ray_options(ray, actors, gpus_per_actor, flags=True),
    )
    run_job(job, err())


def _default_tag(method: str, reranker: str) -> str:
    """The method's name; ``METHOD.simulated`` for the simulated reranker (a qrels oracle, not a model)."""
    return f"{method}.simulated" if reranker == "simulated" else method


def _flag_param(name: str, kind, flag: str, help: str, hidden: bool = False) -> inspect.Parameter:
    """A keyword-only parameter Typer reads as ``flag`` (None when not given; a bool is a switch ``--x/--no-x``, so
    that one whose default is on can be turned off; ``hidden``: not in the help)."""
    extra = {"metavar": ""} if kind is bool else {}  # a switch takes no value: show none
    decl = f"{flag}/--no-{flag[2:]}" if kind is bool else flag  # a switch that defaults on can be turned off
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=Optional[kind],
                             default=typer.Option(None, decl, help=help, hidden=hidden, **extra))


def with_generated_flags(command, baseline_only: bool = False):
    """Return ``command`` with every registered method family's options and every registered backend's
    options as flags (``baseline_only``: the baselines' method options only).

    Typer reads a command's flags from its signature; method families and backends (plug-ins included)
    declare their options once in their records, so the signature is extended here. A flag left out is
    None, so each method and backend gets only what was given and its own defaults otherwise; a flag the
    chosen method or backend does not take is an error naming the options it does take.
    """
    from ..method.registry import METHODS
    from ..rerankers.backend import BACKENDS

    params = [p for p in resolved_parameters(command) if p.kind is not p.VAR_KEYWORD]
    taken = {p.name for p in params}
    for registry in (METHODS, BACKENDS):  # one options table each, made into flags the same way
        for name, opt in registry.table(strict=False).items():
            if name in taken:
                raise InputError(f"{registry.what} option {name!r} has the name of a method option or a job flag: "
                                 "rename it")
            params.append(_flag_param(name, opt.decl.kind, opt.flag, registry.describe(opt, baseline_only),
                                      hidden=not registry.shown(opt, baseline_only)))
            taken.add(name)

    def generated(ctx: typer.Context, **kwargs) -> None:
        command(ctx, **kwargs)

    return declared(generated, params, command.__doc__)


def baseline_command():
    """``baseline``: ``rerank`` with the baselines' method options, and a --method help and default that name
    only the baselines."""
    command = with_generated_flags(rerank, baseline_only=True)
    method = Annotated[Optional[str], typer.Option("--method", help=f"Baseline (default {DEFAULTS.baseline}): "
                                                   f"{known_methods(True)}.")]
    return declared(command, [p.replace(annotation=method) if p.name == "method" else p
                              for p in inspect.signature(command).parameters.values()])


def merge(
    parts: Annotated[list[str], typer.Argument(help="The parts: runs made with --shard 1/N ... N/N (their stats files beside them are joined too).")],
    output: Annotated[str, typer.Option("--output", "-o", help="The joined run (its stats beside it: X.stats.jsonl).")],
    overwrite: Overwrite = False,
) -> None:
    """Join the parts of a sharded rerank/baseline into the run (and stats) the unsharded command writes."""
    from ..io.shards import merge as join

    queries, count = join(parts, output, overwrite)
    say(f"merged {count} shards: {queries} queries -> {output}")


def mount(app: typer.Typer) -> None:
    app.command("rerank", help="Rerank a run with AcuRank (any method, default acurank).")(with_generated_flags(rerank))
    app.command("baseline", help="Rerank a run with a baseline: sw-x, tourrank-x, ts-c1-c2-..., blitz-kW (default sw-1).")(
        baseline_command())
    app.command("merge", help="Join the parts of a sharded run (--shard I/N) into one run and its stats.")(merge)
