"""``acurank rerank`` and ``acurank baseline``: a TREC run in, a reranked TREC run out.

The flags are the method's (:class:`~acurank_cli.method.registry.MethodOptions`), the job's and every
registered backend's (added from their options records by :func:`with_backend_flags`). A flag left out is
None: the defaults are the pipeline's (:data:`acurank_cli.run.pipeline.DEFAULTS`) and the method's own.
Nothing here imports numpy; the work starts in :func:`acurank_cli.run.job.run_job`.
"""

from __future__ import annotations

import inspect
from typing import Annotated, Optional

import typer

from ..method.params import Init, Partition, StopRule, Uncertainty, Updater
from ..method.registry import known_methods
from ..run.pipeline import DEFAULTS
from .options import Qids, err


def rerank(
    ctx: typer.Context,
    run: Annotated[str, typer.Argument(help="TREC run, or a candidate file (RankGPT JSON, AcuRank/RankLLM JSONL); '-' = stdin.")],
    method: Annotated[Optional[str], typer.Option("--method", help=f"Method (default {DEFAULTS.method}): {known_methods()}.")] = None,
    reranker: Annotated[str, typer.Option("--reranker", help="Backend: minilm (the embedded offline model) | hf:MODEL | vllm:MODEL | openai:MODEL | simulated (a qrels oracle, for research) | a plug-in.")] = DEFAULTS.backend,
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
    depth: Annotated[int, typer.Option("--depth", "--hits", min=1, help="Rerank the top N candidates per query (--hits, as in retrieve).")] = 100,
    qids: Qids = None,
    skip_missing: Annotated[bool, typer.Option("--skip-missing", metavar="", help="Skip candidates without text / queries without topic.")] = False,
    k: Annotated[Optional[int], typer.Option("--k", help="AcuRank cutoff k (default 10).")] = None,
    eps: Annotated[Optional[float], typer.Option("--eps", help="AcuRank tolerance eps (variant default).")] = None,
    tau: Annotated[Optional[int], typer.Option("--tau", help="AcuRank stop threshold tau (variant default).")] = None,
    window: Annotated[Optional[int], typer.Option("--window", help="Window size m (default 20).")] = None,
    budget: Annotated[Optional[int], typer.Option("--budget", help="AcuRank cap B on adaptive groups (default 100).")] = None,
    max_rounds: Annotated[Optional[int], typer.Option("--max-rounds", min=1, help="AcuRank cap R on sequential reranker rounds (latency): the initial pass is round 1, each iteration one more; the last round is a final pass.")] = None,
    init: Annotated[Optional[Init], typer.Option("--init", help="Rating init: score (mu=score, sigma=mu/3), zscore, uniform.")] = None,
    partition: Annotated[Optional[Partition], typer.Option("--partition", help="Cut C into groups in s_i order or shuffled.")] = None,
    stop: Annotated[Optional[StopRule], typer.Option("--stop", help="Stop rule: uncertain (|C| < tau) or topk-stable.")] = None,
    uncertainty: Annotated[Optional[Uncertainty], typer.Option("--uncertainty", help="AcuRank's uncertain set: threshold (the paper's s_i = P(x_i > t)), exact (p_i = P(rank <= k)) or entropy (of the rank distribution truncated at k).")] = None,
    sigma: Annotated[Optional[str], typer.Option("--sigma", help="AcuRank initial sigma: mu/3 (default, the paper), mu/2, or fixed:V (the variance ablation).")] = None,
    budget_total: Annotated[Optional[str], typer.Option("--budget-total", help="AcuRank query-set budget: Bx (B calls per query on average over the run, e.g. 9x) or a total; after every query's initial pass, optional iterations go to the queries whose top k is most uncertain, --budget-wave at a time.")] = None,
    budget_wave: Annotated[Optional[int], typer.Option("--budget-wave", help="With --budget-total: iterations granted per allocation wave (default 8).")] = None,
    seed: Annotated[Optional[int], typer.Option("--seed", help="Seed for shuffles (TourRank, random partition; default 0).")] = None,
    updater: Annotated[Optional[Updater], typer.Option("--updater", help="TrueSkill update: fast (vectorised, bit-identical; the default) or library (trueskill.rate).")] = None,
    batch_queries: Annotated[Optional[int], typer.Option("--batch-queries", min=1, help="Advance Q queries together so their windows share batches (default: the backend's, 8 for vllm: and openai:, else 1; results do not depend on it).")] = DEFAULTS.batch_queries,
    cache: Annotated[Optional[str], typer.Option("--cache", help="SQLite call cache (default: $ACURANK_CACHE or ~/.cache/acurank/calls.sqlite).")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", metavar="", help="Do not read or write the call cache.")] = False,
    model_params: Annotated[Optional[float], typer.Option("--model-params", help="Model parameters for the stats' FLOPs estimate, 2 x parameters x (input + output tokens), e.g. 7.24e9 for a remote RankZephyr (default: counted from the model for hf:, vllm: and minilm; none otherwise).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", metavar="", help="No progress display (it is off anyway when stderr is not a terminal).")] = False,
    **backend_options,
) -> None:
    """Rerank a first-stage run with AcuRank (or a baseline) and write a TREC run."""
    from ..method.registry import MethodOptions
    from ..run import pipeline
    from ..run.inputs import InputSpec
    from ..run.job import OutputSpec, RerankJob, run_job

    baseline_only = ctx.info_name == "baseline"
    options = MethodOptions(k=k, eps=eps, tau=tau, m=window, budget=budget, max_rounds=max_rounds, init=init,
                            partition=partition, stop=stop, seed=seed, updater=updater, uncertainty=uncertainty, sigma=sigma,
                            budget_total=budget_total, budget_wave=budget_wave)
    strategy = pipeline.method(method, options, pipeline.ScoreSource.run_file, baseline_only)
    job = RerankJob(
        inputs=InputSpec(run, depth, topics, corpus, index, dataset, qrels, qids, skip_missing),
        strategy=strategy,
        backend=reranker,
        outputs=OutputSpec(output, overwrite, tag or _default_tag(strategy.name, reranker), stats, trace),
        backend_options={key: v for key, v in backend_options.items() if v is not None},
        cache=None if no_cache else (cache or DEFAULTS.cache),
        batch_queries=batch_queries,
        quiet=quiet,
        model_params=model_params,
    )
    run_job(job, err())


def _default_tag(method: str, reranker: str) -> str:
    """The method's name; ``METHOD.simulated`` for the simulated reranker (a qrels oracle, not a model)."""
    return f"{method}.simulated" if reranker == "simulated" else method


def with_backend_flags(command):
    """Add every registered backend's options (its options record's fields) to ``command`` as flags.

    Typer reads a command's flags from its signature; plug-in backends bring their own options, so the
    signature is extended here, once. A flag left out is None, so each backend gets only what was given and
    its own defaults otherwise; a flag of another backend is an error naming the chosen backend's options.
    """
    import typing

    from ..rerankers.base import cli_options

    hints = typing.get_type_hints(command, include_extras=True)  # the Annotated flags, resolved
    params = [p.replace(annotation=hints.get(p.name, p.annotation))
              for p in inspect.signature(command).parameters.values() if p.kind is not p.VAR_KEYWORD]
    for name, opt in cli_options().items():
        default = opt.field.default
        shown = f" (default {default})" if default not in (None, False) else ""
        extra = {"metavar": ""} if opt.kind is bool else {}  # a flag takes no value: show none
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=Optional[opt.kind],
                                        default=typer.Option(None, opt.flag, help=opt.help + shown, **extra)))
    command.__signature__ = inspect.Signature(params)
    command.__annotations__ = {p.name: p.annotation for p in params if p.annotation is not p.empty}
    return command


def baseline_command():
    """``baseline``: ``rerank`` with a --method help and default that name only the baselines."""

    def baseline(ctx: typer.Context, **kwargs) -> None:
        rerank(ctx, **kwargs)

    sig = inspect.signature(rerank)
    method = Annotated[Optional[str], typer.Option("--method", help=f"Baseline (default {DEFAULTS.baseline}): "
                                                   f"{known_methods(True)}.")]
    params = [p.replace(annotation=method) if p.name == "method" else p for p in sig.parameters.values()]
    baseline.__signature__ = sig.replace(parameters=params)
    baseline.__annotations__ = {p.name: p.annotation for p in params}
    return baseline


def mount(app: typer.Typer) -> None:
    if not hasattr(rerank, "__signature__"):
        with_backend_flags(rerank)
    app.command("rerank", help="Rerank a run with AcuRank (any method, default acurank).")(rerank)
    app.command("baseline", help="Rerank a run with a baseline: sw-x, tourrank-x, ts-c1-c2-..., blitz-kW (default sw-1).")(
        baseline_command())
