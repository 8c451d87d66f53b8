"""``acurank rerank``: a TREC run in, a reranked TREC run out (``acurank baseline`` is this command with the
baselines' options, :mod:`.baseline`).

The flags are the job's (below), every registered method family's options and every registered backend's
(both generated from their declarations by :func:`~.flags.with_generated_flags`: the method families' parameters
records and the backends' options records). A flag left out is None: the defaults are the pipeline's
(:data:`acurank_cli.run.pipeline.DEFAULTS`), the method's and the backend's own. Nothing here imports numpy; the work starts in :func:`acurank_cli.run.job.run_job`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Annotated, Optional

import typer

from ..run.pipeline import DEFAULTS
from .flags import (BACKEND, DEPTH_HELP, IO, PERFORMANCE, AbsoluteFlag, AllowMapMismatch, BatchQueries, Cache, Calibrate, Calibration, CutFlag, CutTarget, PivotFlag,
                    DryRunFlag, MaxCost, MaxPassages, NoCache, Overwrite, PriceIn, PriceOut, PriorFlag, RehearsalNoise, Rehearsals, RelevantGrade, ScoreColumn,
                    PanelledCommand, PassageScore, PassagesFlag, Qids, Quiet, RayActors, RayAddress, RayGpus, Reranker, cache_choice, declared, err,
                    method_option, record_parameters, resolved_parameters, with_generated_flags)


@dataclass(frozen=True)
class RerankFlags:
    """``rerank``'s own flags (and ``baseline``'s), declared once as a record: the command's signature is made from it
    (:func:`~.flags.record_parameters`; Typer reads the flags there) and the job from its values (:func:`job_of`)."""

    method: method_option(f"Method (default {DEFAULTS.method}): {{methods}}.") = None
    reranker: Reranker = DEFAULTS.backend
    output: Annotated[Optional[str], typer.Option("--output", "-o", rich_help_panel=IO, help="Output run (default stdout). An existing file is resumed.")] = None
    overwrite: Overwrite = False
    tag: Annotated[Optional[str], typer.Option("--tag", rich_help_panel=IO, help="Run tag (default: the method; METHOD.simulated with the simulated reranker).")] = None
    stats: Annotated[Optional[str], typer.Option("--stats", rich_help_panel=IO, help="Per-query stats JSONL (calls, iterations, tokens, seconds); default X.stats.jsonl beside --output X.run.")] = None
    trace: Annotated[Optional[str], typer.Option("--trace", rich_help_panel=IO, help="Per-iteration ratings (mu, sigma, s_i, rank) JSONL.")] = None
    topics: Annotated[Optional[str], typer.Option("--topics", rich_help_panel=IO, help="Topics 'qid<TAB>text'.")] = None
    corpus: Annotated[Optional[str], typer.Option("--corpus", rich_help_panel=IO, help="Doc texts: JSONL {_id,title,text} or {id,contents} (.gz ok).")] = None
    index: Annotated[Optional[str], typer.Option("--index", rich_help_panel=IO, help="Take doc texts from a Lucene index (stored raw docs).")] = None
    dataset: Annotated[Optional[str], typer.Option("--dataset", rich_help_panel=IO, help="irds:<id>: topics, qrels and texts from ir_datasets.")] = None
    qrels: Annotated[Optional[str], typer.Option("--qrels", rich_help_panel=IO, help="Qrels (needed by the simulated reranker).")] = None
    depth: Annotated[int, typer.Option("--depth", "--hits", min=1, rich_help_panel=IO, help=DEPTH_HELP["rerank"])] = DEFAULTS.depth
    drop_tail: Annotated[bool, typer.Option("--drop-tail", metavar="", rich_help_panel=IO, help="Write only the reranked top --depth candidates (drop the rest of each list).")] = False
    qids: Qids = None
    shard: Annotated[Optional[str], typer.Option("--shard", metavar="I/N", rich_help_panel=PERFORMANCE, help="Rerank only shard I of N (1 <= I <= N; a split by a hash of the query id, the same on every machine); join the parts with 'acurank merge'.")] = None
    skip_missing: Annotated[bool, typer.Option("--skip-missing", metavar="", rich_help_panel=IO, help="Skip candidates without text / queries without topic.")] = False
    passages: PassagesFlag = None
    passage_score: PassageScore = None
    max_passages: MaxPassages = None
    calibration: Calibration = None
    calibrate: Calibrate = None
    allow_map_mismatch: AllowMapMismatch = False
    absolute: AbsoluteFlag = False
    prior: PriorFlag = None
    relevant_grade: RelevantGrade = None
    cut: CutFlag = None
    cut_target: CutTarget = None
    score: ScoreColumn = None
    pivot: PivotFlag = None
    batch_queries: BatchQueries = DEFAULTS.batch_queries
    cache: Cache = None
    no_cache: NoCache = False
    model_params: Annotated[Optional[float], typer.Option("--model-params", rich_help_panel=BACKEND, help="Model parameters for the stats' FLOPs estimate, 2 x parameters x (input + output tokens), e.g. 7.24e9 for a remote RankZephyr (default: counted from the model for hf:, vllm: and minilm; none otherwise).")] = None
    ray: RayAddress = None
    actors: RayActors = None
    gpus_per_actor: RayGpus = None
    quiet: Quiet = False
    dry_run: DryRunFlag = False
    max_cost: MaxCost = None
    price_in: PriceIn = None
    price_out: PriceOut = None
    rehearsals: Rehearsals = 20
    rehearsal_noise: RehearsalNoise = None


def _rerank(
    ctx: typer.Context,
    run: Annotated[str, typer.Argument(help="TREC run, or a candidate file (RankGPT JSON, AcuRank/RankLLM JSONL); '-' = stdin.")],
    **given,
) -> None:
    """Rerank a first-stage run with AcuRank (or a baseline) and write a TREC run."""
    from ..run.dry_run import run_dry
    from ..run.job import run_job

    own = {f.name for f in fields(RerankFlags)}
    flags = RerankFlags(**{k: v for k, v in given.items() if k in own})
    job = job_of(run, flags, {k: v for k, v in given.items() if k not in own}, baseline_only=ctx.info_name == "baseline")
    (run_job if job.dry_run is None else run_dry)(job, err())


#: the command Typer reads: the run, then the record's flags (the method and backend flags are added to it by
#: :func:`~.flags.with_generated_flags`)
rerank = declared(_rerank, [*resolved_parameters(_rerank)[:2], *record_parameters(RerankFlags),
                            *resolved_parameters(_rerank)[2:]])


def job_of(run: str, flags: RerankFlags, generated: dict, *, baseline_only: bool = False):
    """The :class:`~acurank_cli.run.job.RerankJob` the flags ask for (``generated``: the method's and the backend's
    flags; ``baseline_only``: ``baseline``'s methods only): the method built, pivoted and aimed at the cut, the
    inputs, the outputs and the backend's options (each checked where its record is made)."""
    from ..io.sources import check_tag
    from ..run import pipeline
    from ..run.inputs import InputSpec
    from ..io.run_files import RunFiles
    from ..run.job import DryRun, RerankJob
    from ..run.money import Prices
    from ..run.ray_executor import ray_options
    from ..run.passages import Passages
    from ..io.shards import Shard
    from ..relevance import SAID, Pivot, options as relevance_options
    from ..run.request import Asked, settle

    f = flags
    options, backend_options = pipeline.split_options(generated)
    judged, fitted = relevance_options(f.calibration, f.calibrate, f.relevant_grade, f.cut, f.score,
                                       allow=f.allow_map_mismatch, absolute=f.absolute, prior=f.prior)
    calibration = None if judged is None else judged.calibration
    methods = pipeline.Methods(f.method, options, pipeline.ScoreSource.run_file, calibration, "--calibration",
                               baseline_only=baseline_only)  # the map's k kept, as at every entrance
    pivoted = Pivot.of(f.pivot)
    passages = Passages.of(f.passages, f.passage_score, f.max_passages)
    given = True if pivoted is not None else None  # the pivot's file read and checked above (Pivot.of)
    settled = settle(methods, Asked(cut=f.cut, cut_target=f.cut_target), SAID["cli"], passages=passages,
                     pivot=given, allow_map_mismatch=f.allow_map_mismatch)  # the rules every entrance's call meets
    strategy = settled.strategy
    if judged is not None:  # the run's cut as the rules read it, aimed as they aimed it
        judged = replace(judged, cut=settled.cuts[0] if settled.cuts else None, target=settled.aimed)
    return RerankJob(
        inputs=InputSpec(run=run, depth=f.depth, topics=f.topics, corpus=f.corpus, index=f.index, dataset=f.dataset,
                         qrels=f.qrels, qids=f.qids, skip_missing=f.skip_missing,
                         shard=None if f.shard is None else Shard.parse(f.shard), keep_tail=not f.drop_tail),
        strategy=strategy,
        backend=f.reranker,
        outputs=RunFiles(output=f.output, overwrite=f.overwrite, stats=f.stats, trace=f.trace,
                         tag=check_tag(f.tag) if f.tag is not None else _default_tag(strategy.name, f.reranker)),
        backend_options={key: v for key, v in backend_options.items() if v is not None},
        cache=cache_choice(f.cache, f.no_cache),
        batch_queries=f.batch_queries,
        quiet=f.quiet,
        model_params=f.model_params,
        ray=ray_options(f.ray, f.actors, f.gpus_per_actor, flags=True),
        passages=passages,
        relevance=judged,
        calibrate=fitted,
        pivot=pivoted,
        allow_map_mismatch=f.allow_map_mismatch,
        dry_run=DryRun.of(f.dry_run, f.rehearsals, f.rehearsal_noise),
        prices=Prices.of(f.price_in, f.price_out),
        max_cost=f.max_cost,
    )


def _default_tag(method: str, reranker: str) -> str:
    """The method's name; ``METHOD.simulated`` for the simulated reranker (a qrels oracle, not a model)."""
    return f"{method}.simulated" if reranker == "simulated" else method


def mount(app: typer.Typer) -> None:
    app.command("rerank", cls=PanelledCommand, help="Rerank a run with AcuRank (any method, default acurank).")(
        with_generated_flags(rerank))
