"""``acurank report``: tables, significance, Pareto plots, allocation analysis and traces over runs.

Mounted by the main app (:func:`mount`); its errors go through the app's one handler.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import InputError
from ..io.plan import FilePlan
from ..evaluation import DEFAULT_MEASURE
from ..report.render import REPORT_FORMATS
from .flags import (Overwrite, Rendering, declared, measure_option, method_option, methods_option, plot_option, rel_level_option,
                    renders, resolved_parameters)

RUNS_HELP = """Naming runs (the same options for table, pareto and allocation):

--runs DIR: runs in DIR/<dataset>/<method>.run (or .run.gz), qrels in
DIR/<dataset>/qrels.txt, stats beside each run as <method>.stats.jsonl,
optional DIR/<dataset>/topics.tsv (for WIG); a DIR holding *.run files
itself is one dataset named after DIR. Repeatable.

--run DATASET:METHOD=PATH adds one run (DATASET may be left out when there
is one dataset); --qrels DATASET=PATH, --stats DATASET:METHOD=PATH and
--topics DATASET=PATH name the other files. --dataset and --method restrict
and order the columns and rows.

The first-stage run (--first-stage, default bm25) counts 0 calls; it is
also where WIG takes its scores from.
"""

HELP = (
    "Effectiveness/efficiency reports over finished runs: `table` (methods x datasets, macro nDCG@10 "
    "and calls, significance marks), `efficiency` (calls, window size, tokens, latency, FLOPs), `pareto` (nDCG@10 against cost, PNG/SVG), `allocation` (calls "
    "against WIG and difficulty, easy/hard split) and `trace` (mu +/- sigma per AcuRank iteration).\n\n"
    "Example: scripts/simulate_all.sh out/sim && acurank report table --runs out/sim --baseline sw-1 --format markdown"
)

report_app = typer.Typer(name="report", help=HELP, no_args_is_help=True, add_completion=False, rich_markup_mode=None,
                         pretty_exceptions_enable=False)


# ----------------------------------------------------------------------------- shared options

# Each an ``Annotated`` type holding the flag; its default is the parameter's.
RunsOpt = Annotated[Optional[list[Path]], typer.Option("--runs", "-r", help="Directory DIR/<dataset>/<method>.run with DIR/<dataset>/qrels.txt (repeatable).")]
RunOpt = Annotated[Optional[list[str]], typer.Option("--run", help="DATASET:METHOD=PATH, one TREC run (repeatable).")]
QrelsOpt = Annotated[Optional[list[str]], typer.Option("--qrels", help="DATASET=PATH qrels (repeatable; overrides DIR/<dataset>/qrels.txt).")]
StatsOpt = Annotated[Optional[list[str]], typer.Option("--stats", help="DATASET:METHOD=PATH stats JSONL (default: X.stats.jsonl beside X.run).")]
TopicsOpt = Annotated[Optional[list[str]], typer.Option("--topics", help="DATASET=PATH topics qid<TAB>text (for WIG's |q|; default DIR/<dataset>/topics.tsv).")]
DatasetOpt = Annotated[Optional[list[str]], typer.Option("--dataset", "-d", help="Datasets to show, in this order (repeatable; default all).")]
FirstOpt = Annotated[str, typer.Option("--first-stage", help="Method name of the first-stage run among the runs (0 calls; WIG scores); a file is named by --run DATASET:NAME=PATH.")]
MeasureOpt = measure_option(str, "Measure: {names}.")
RelOpt = rel_level_option()
BaselineOpt = Annotated[Optional[list[str]], typer.Option("--baseline", "-b", help="Baseline METHOD for every dataset, or DATASET=METHOD (repeatable).")]


#: The run-naming options every report command over runs shares (type with its flag, default): added to each
#: command's signature by :func:`naming_runs`, which hands them to the command as one :class:`RunSources`.
FilesArg = Annotated[Optional[list[str]], typer.Argument(help="Runs of one dataset, as eval takes them (METHOD = the file name without "
                                                         ".run); with --qrels PATH.", show_default=False)]
_SOURCES = {"files": (FilesArg, None), "runs": (RunsOpt, None), "run": (RunOpt, None), "qrels": (QrelsOpt, None),
            "stats": (StatsOpt, None), "topics": (TopicsOpt, None), "dataset": (DatasetOpt, None),
            "first_stage": (FirstOpt, "bm25")}


@dataclass(frozen=True)
class RunSources:
    """Where a report's runs, qrels, stats and topics come from (the shared options)."""

    files: list | None
    runs: list | None
    run: list | None
    qrels: list | None
    stats: list | None
    topics: list | None
    dataset: list | None
    first_stage: str

    def collection(self, method=None, measure: str = DEFAULT_MEASURE, rel_level: int = 1):
        from ..report.collection import build_collection

        named = [f"{_method_name(path, i)}={path}" for i, path in enumerate(self.files or (), 1)]  # as eval takes them
        return build_collection(
            dirs=[str(p) for p in self.runs or ()], runs=[*named, *(self.run or ())], qrels=self.qrels or (), stats=self.stats or (),
            topics=self.topics or (), datasets=self.dataset or (), methods=method or (), first_stage=self.first_stage,
            measure=measure, rel_level=rel_level,
        )


def _method_name(path: str, position: int) -> str:
    """A run file's method: its name without ``.run`` or ``.run.gz`` (``out/acurank-9.run`` -> ``acurank-9``); a run read from a
    stream (``-``, a pipe, a FIFO, ``<(...)``, whose name is a descriptor's number) by its position: ``run2``."""
    from ..io.sources import streamed

    if streamed(path):  # a missing file too: its reader then says so, naming the path
        return f"run{position}"
    name = Path(path).name
    name = name[: -len(".gz")] if name.endswith(".gz") else name  # a gzipped run is named as the run
    return name[: -len(".run")] if name.endswith(".run") else name


def naming_runs(command):
    """Give ``command(sources, ...)`` the shared run-naming flags (first in its help) and call it with them
    gathered in a :class:`RunSources`."""
    own = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in resolved_parameters(command) if p.name != "sources"]
    shared = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=kind, default=default)
              for name, (kind, default) in _SOURCES.items()]

    @functools.wraps(command)
    def wrapper(**kwargs):
        return command(RunSources(**{name: kwargs.pop(name) for name in _SOURCES}), **kwargs)

    return declared(wrapper, shared + own)


def _writes(coll, out: Rendering, *outputs: tuple[str, Path | None]) -> None:
    """Every output (``--output`` and ``outputs``) checked against the files the report reads and against each
    other (see FilePlan)."""
    plan = coll.read_by(FilePlan()).write("--output", out.output)
    for flag, path in outputs:
        plan.write(flag, path)
    plan.check(out.overwrite)


# -------------------------------------------------------------------------------------- table


@report_app.command("table", help="Methods x datasets: mean nDCG@10 per dataset, macro average and mean "
                    "calls per query, with significance marks against a baseline.\n\n" + RUNS_HELP + """
Significance (per dataset, paired over the judged queries, two-sided):
† p < 0.05, ‡ p < 0.01 by the test chosen with --test; JSON and CSV hold
both p-values (paired t-test and sign-flip randomisation test).

Example: acurank report table --runs out/sim --baseline sw-1 -f latex   (out/sim: scripts/simulate_all.sh out/sim)
""")
@naming_runs
@renders(REPORT_FORMATS)
def table_cmd(
    sources: RunSources,
    *,
    method: methods_option("Methods (rows) to show, in this order (repeatable; default: first stage, then by calls).") = None,
    measure: measure_option(list[str] | None, "Measure (repeatable: one column per measure): {names}; default nDCG@10.") = None,
    rel_level: RelOpt = 1,
    baseline: BaselineOpt = None,
    test: Annotated[str, typer.Option("--test", help="Test behind the marks: ttest (paired t-test) | permutation (sign flips).")] = "ttest",
    correction: Annotated[str, typer.Option("--correction", help="Multiple-comparison correction of the marks' p-values over the methods compared on each dataset (and measure): none | holm | bonferroni.")] = "none",
    ci: Annotated[str, typer.Option("--ci", help="Also a table of the differences against the baseline with 95% confidence intervals: t (paired t) | bootstrap (paired, seeded, --resamples) | none.")] = "none",
    resamples: Annotated[int, typer.Option("--resamples", min=1, help="Sign flips of the randomisation test (exact below 2^n), bootstrap resamples of --ci bootstrap.")] = 10_000,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the randomisation test and the bootstrap.")] = 0,
    percent: Annotated[bool, typer.Option("--percent", metavar="", help="Show the measure x 100 with 2 decimals (as the paper).")] = False,
    out: Rendering = None,
) -> None:
    from ..report.tables import build_table, check_options, parse_baselines

    check_options(test, correction, ci)
    measures = list(dict.fromkeys(measure or [DEFAULT_MEASURE]))
    first = sources.collection(method, measures[0], rel_level)
    colls = [first, *(first.measured_by(m) for m in measures[1:])]
    _writes(colls[0], out)
    out.emit(build_table(colls, parse_baselines(baseline or [], list(colls[0].datasets)), test, resamples, seed,
                         percent=percent, correction=correction, ci=ci))


# --------------------------------------------------------------------------------- efficiency


@report_app.command("efficiency", help="The paper's efficiency table: per dataset and method, calls, mean "
                    "window size, input and output tokens, latency and estimated FLOPs per query, and the change "
                    "in input tokens and FLOPs against a baseline.\n\n" + RUNS_HELP + """
Example: acurank report efficiency --runs out/sim --baseline sw-1 -f markdown
""")
@naming_runs
@renders(REPORT_FORMATS)
def efficiency_cmd(
    sources: RunSources,
    method: methods_option("Methods (rows) to show, in this order (repeatable; default all).") = None,
    baseline: Annotated[str | None, typer.Option("--baseline", "-b", help="Method the changes are measured against (e.g. sw-1).")] = None,
    out: Rendering = None,
) -> None:
    from ..report.efficiency import build_efficiency

    coll = sources.collection(method)
    _writes(coll, out)
    if baseline is not None and not any(coll.has(ds, baseline) for ds in coll.datasets):
        raise InputError(f"--baseline {baseline!r} has no run (methods: {', '.join(coll.methods())})")
    out.emit(build_efficiency(coll, baseline))


# ------------------------------------------------------------------------------------- pareto


@report_app.command("pareto", help="Pareto plot of nDCG@10 against mean cost per query (calls, tokens or "
                    "seconds), one point per method, the frontier drawn; also prints the points.\n\n" + RUNS_HELP + """
Example: acurank report pareto --runs out/sim --view all --plot pareto-all.png
--plot pareto-all.svg
""")
@naming_runs
@renders(REPORT_FORMATS)
def pareto_cmd(
    sources: RunSources,
    *,
    method: methods_option("Methods to plot (repeatable; default all).") = None,
    measure: MeasureOpt = DEFAULT_MEASURE,
    rel_level: RelOpt = 1,
    x: Annotated[str, typer.Option("--x", help="x axis: calls | tokens (input + output) | seconds (wall, per query) | rounds (sequential reranker batches: latency) | flops (estimated, where the stats have it).")] = "calls",
    view: Annotated[list[str] | None, typer.Option("--view", help="Panel: a dataset name, 'macro', or 'all' (each dataset + macro); repeatable. Default: macro (or the only dataset).")] = None,
    plots: plot_option("default pareto.png and pareto.svg") = None,
    log_x: Annotated[bool, typer.Option("--log-x", metavar="", help="Symmetric-log x axis (linear below 1).")] = False,
    out: Rendering = None,
) -> None:
    from ..report.pareto import build_pareto, plot_pareto
    from ..report.tables import measure_label

    coll = sources.collection(method, measure, rel_level)
    views: list[str] = []
    for v in view or (["macro"] if len(coll.datasets) > 1 else list(coll.datasets)):
        views.extend(list(coll.datasets) + ["macro"] if v == "all" else [v])
    views = list(dict.fromkeys(views))
    computed, rep = build_pareto(coll, views, x)
    outs = plots or [Path("pareto.png"), Path("pareto.svg")]
    _writes(coll, out, *(("--plot", p) for p in outs))
    written = plot_pareto(computed, outs, x, measure_label(coll.measure, coll.rel_level), log_x)
    out.emit(replace(rep, written=written))


# --------------------------------------------------------------------------------- allocation


@report_app.command("allocation", help="Adaptive allocation: Spearman rho of calls per query against WIG "
                    "(first-stage query-performance predictor: log(1+s), k = 50) and against nDCG@10; the "
                    "easy/hard split at the baseline's mean nDCG@10 (queries, nDCG@10 and calls of both, deltas).\n\n"
                    + RUNS_HELP + """
WIG (Zhou & Croft 2007) per query from the first-stage scores s_i:
x_i = log(1 + s_i), ref = mean of x over the whole candidate list (no
collection score is available), WIG = mean over the top k of (x_i - ref),
divided by sqrt(|q|) when topics are known (|q| = word tokens).

Example: acurank report allocation --runs out/sim --method acurank
--baseline sw-1 --plot allocation.png
""")
@naming_runs
@renders(REPORT_FORMATS)
def allocation_cmd(
    sources: RunSources,
    *,
    method: methods_option("Methods to analyse (repeatable; default: every method with stats but the first stage and the baseline).") = None,
    measure: MeasureOpt = DEFAULT_MEASURE,
    rel_level: RelOpt = 1,
    baseline: BaselineOpt = None,
    wig_k: Annotated[int, typer.Option("--wig-k", min=1, help="k of WIG (top documents averaged).")] = 50,
    plot: plot_option("none: no plot; it draws calls against WIG") = None,
    out: Rendering = None,
) -> None:
    from ..report.allocation import build_allocation, plot_allocation
    from ..report.tables import measure_label, parse_baselines

    coll = sources.collection(None, measure, rel_level)
    _writes(coll, out, *(("--plot", p) for p in plot or ()))
    known = {m for d in coll.datasets.values() for m in d.runs}
    for m in method or ():
        if m not in known:
            raise InputError(f"--method {m!r} has no run (methods: {', '.join(sorted(known))})")
    baselines = parse_baselines(baseline or [], list(coll.datasets))
    for b in set(baselines.values()):
        if b not in known:
            raise InputError(f"--baseline {b!r} has no run (methods: {', '.join(sorted(known))})")
    if method:
        methods = list(dict.fromkeys(method))
    else:
        methods = [m for m in coll.methods() if m != sources.first_stage and m not in baselines.values()
                   and any(coll.has(d, m) and coll.run(d, m).stats_path for d in coll.datasets)]
    rep = build_allocation(coll, methods, baselines, wig_k)
    if plot:
        plot_allocation(rep, [str(p) for p in plot], measure_label(coll.measure, coll.rel_level))
    out.emit(replace(rep, written=plot or ()))


# -------------------------------------------------------------------------------------- trace


@report_app.command("trace", help="""One query's AcuRank trace (written by rerank --trace FILE).

Plots mu ± sigma per iteration for the top documents by final mu (the
threshold t dashed) and prints a table: the top documents, or with --docid
the paper-style per-iteration table (mu, sigma, s = P(x > t), rank).

Example: acurank report trace dl23.trace.jsonl --qid 2025253 --docid msmarco_passage_08_375172142
(dl23.trace.jsonl: acurank rerank sample_runs/dl23/bm25.run --reranker simulated --qrels sample_runs/dl23/qrels.txt --qids 2025253 --trace dl23.trace.jsonl -o dl23.run)
""")
@renders(REPORT_FORMATS)
def trace_cmd(
    file: Annotated[Path, typer.Argument(help="Trace JSONL written by rerank --trace ('-' = stdin, .gz ok).")],
    *,
    qid: Annotated[str, typer.Option("--qid", "-q", help="Query to show.")],
    method: method_option("Method, when the trace holds several for the query.") = None,
    docid: Annotated[list[str] | None, typer.Option("--docid", help="Documents for the per-iteration table (repeatable; also plotted).")] = None,
    top: Annotated[int, typer.Option("--top", min=1, help="How many top documents (by final mu) to plot and list (4 keeps the bands readable).")] = 4,
    plots: plot_option("default trace-<qid>.png") = None,
    no_plot: Annotated[bool, typer.Option("--no-plot", metavar="", help="Only print the table.")] = False,
    out: Rendering = None,
) -> None:
    from ..report.trace_plot import build_trace_report, plot_trace, read_trace

    src = "-" if str(file) == "-" else file
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in qid)
    outs = [] if no_plot else plots or [Path(f"trace-{safe}.png")]
    plan = FilePlan().read("FILE", src).write("--output", out.output)
    for p in outs:
        plan.write("--plot", p)
    plan.check(out.overwrite)
    name, steps = read_trace(src, qid, method)
    rep = build_trace_report(steps, qid, name, docid or (), top)
    written = plot_trace(steps, qid, name, outs, top, docid or ()) if outs else []
    out.emit(replace(rep, written=written))


@report_app.command("calibration", help="""How well a run's P(relevant) matches the qrels: expected calibration
error, Brier score and the reliability diagram (PNG); the F1 of the run's cut against the oracle cut's and the best
fixed top-k's; the ROC AUC of P(no relevant document) for the queries with nothing relevant. The run must have been
reranked with --calibration (P(relevant) is in its stats). See docs/relevance.md.

Example: acurank report calibration dl20.run --qrels sample_runs/dl20/qrels.txt --plot reliability.png""")
@renders(REPORT_FORMATS)
def calibration_cmd(
    run: Annotated[str, typer.Argument(help="The run (rerank --calibration); its stats beside it as X.stats.jsonl.")],
    *,
    qrels: Annotated[str, typer.Option("--qrels", help="Qrels of the run's queries (not those the map was fit on).")],
    stats: Annotated[Optional[str], typer.Option("--stats", help="The run's stats JSONL (default: X.stats.jsonl beside RUN).")] = None,
    grade: Annotated[Optional[int], typer.Option("--relevant-grade", metavar="G", min=1, help="Relevant means grade >= G (default: the map's grade).")] = None,
    bins: Annotated[int, typer.Option("--bins", min=2, help="Equal-width bins of the calibration error and the diagram.")] = 10,
    plots: plot_option("none by default") = None,
    out: Rendering = None,
) -> None:
    from ..io.collection_files import read_qrels
    from ..io.run_files import read_stats, stats_path_for
    from ..io.runs import read_scores
    from ..report.calibration import calibration_report, plot_reliability

    stats_file = stats or str(stats_path_for(run))
    plan = FilePlan().read("RUN", run).read("--qrels", qrels).read("--stats", stats_file).write("--output", out.output)
    for p in plots or ():
        plan.write("--plot", p)
    plan.check(out.overwrite)
    rep = calibration_report(read_stats(stats_file), read_scores(run), read_qrels(qrels), grade, bins, run)
    written = plot_reliability(rep, plots, Path(run).name) if plots else []
    out.emit(replace(rep, written=written))


@report_app.command("provenance", help="""Where runs came from, as their meta files record it: acurank, Python,
the engines' versions (torch, transformers, vLLM, ...), the model, its revision or weights digest, device, dtype
and prompt format. Beside a table, it says which software and model made each row.

Example: acurank report provenance out/sim/dl19/acurank-9.run out/sim/dl19/sw-1.run""")
@renders(REPORT_FORMATS)
def provenance_cmd(
    runs: Annotated[list[str], typer.Argument(metavar="RUN...", help="Run files (their X.run.meta.json is read).")],
    out: Rendering = None,
) -> None:
    from ..io.meta_file import MetaFile
    from ..report.provenance_table import provenance_report

    plan = FilePlan()
    for run in runs:
        plan.read("RUN", run).read("(the meta file beside RUN)", MetaFile.path_for(run))
    plan.write("--output", out.output).check(out.overwrite)
    out.emit(provenance_report(runs))


@report_app.command("html", help="""A run explorer: one self-contained HTML file (no network: opens from
file://). The overview: each run's measure with its significance mark against the baseline (report table's
figures), the per-query difference as a sorted bar chart, calls and tokens per query, calls against the baseline's
measure (allocation); filter (hurt by reranking, most calls, unjudged in the top 10), find by qid or text, j/k and
Enter. Per query (#q=QID): the rankings side by side with grades coloured and each document's move, P(relevant)
and the cut, the uncertain set per step, thinking tokens, and from a trace each top document's mu ± sigma over the
steps; with --corpus each document's text (a split document's scoring passage) opens beside its row. Stats are read
beside each run (X.stats.jsonl), traces beside it too (X.trace.jsonl) or from --trace.

Example: acurank report html sample_runs/dl19/bm25.run acurank.run --qrels sample_runs/dl19/qrels.txt --topics sample_runs/dl19/topics.tsv -o explorer.html""")
def html_cmd(
    runs: Annotated[list[str], typer.Argument(help="TREC runs, the first the baseline unless --baseline (NAME=PATH, or PATH: the name is the file's without .run; a pipe or <(...) is named by its position, run2).")],
    *,
    qrels: Annotated[str, typer.Option("--qrels", help="Qrels of the runs' queries.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="The HTML file to write.")] = Path("explorer.html"),
    topics: Annotated[Optional[str], typer.Option("--topics", help="Topics 'qid<TAB>text': the queries' texts (to show and to find).")] = None,
    corpus: Annotated[Optional[str], typer.Option("--corpus", help="The documents' texts (JSONL, as rerank's --corpus): each listed document's opening words, and a split document's scoring passage (--passages), to open beside its row; read for the listed documents only.")] = None,
    trace: Annotated[Optional[list[str]], typer.Option("--trace", help="NAME=PATH: a run's --trace (repeatable; default X.trace.jsonl beside X.run when there).")] = None,
    baseline: Annotated[Optional[str], typer.Option("--baseline", "-b", help="The run the others are compared with (default the first).")] = None,
    measure: MeasureOpt = DEFAULT_MEASURE,
    rel_level: RelOpt = 1,
    overwrite: Overwrite = False,
) -> None:
    from ..io.collection_files import read_topics
    from ..io.meta_file import MetaFile
    from ..io.run_files import stats_path_for, trace_path_for
    from ..report.collection import MethodRun
    from ..report.explorer import DATASET, write_explorer
    from .flags import say

    named = [tuple(r.split("=", 1)) if "=" in r else (_method_name(r, i), r) for i, r in enumerate(runs, 1)]
    for flag, path in (*(("RUN", p) for _, p in named), ("--qrels", qrels)):
        if path == "-":  # each file is read by name (a run's stats and trace beside it): not one stream
            raise InputError(f"{flag} -: report html reads its files by name; give a file, or a pipe as <(command)")
    names = [n for n, _ in named]
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice is not None:  # one name for two runs: the page, its title and --baseline could not tell them apart
        raise InputError(f"two runs are named {twice!r}: give NAME=PATH to name them apart")
    traces = dict(t.split("=", 1) for t in trace or () if "=" in t)
    bad = [t for t in trace or () if "=" not in t] + [n for n in traces if n not in dict(named)]
    if bad:
        raise InputError(f"--trace {bad[0]}: give NAME=PATH, NAME one of the runs ({', '.join(n for n, _ in named)})")
    if baseline is not None and baseline not in dict(named):
        raise InputError(f"--baseline {baseline}: not one of the runs ({', '.join(n for n, _ in named)})")
    chosen = []
    plan = FilePlan().read("--qrels", qrels)
    for name, path in named:
        plan.read("RUN", path)
        stats, beside = stats_path_for(path), str(trace_path_for(path))  # beside X.run or X.run.gz
        found = traces.get(name) or (beside if Path(beside).is_file() else None)
        chosen.append(MethodRun(DATASET, name, Path(path), stats if stats and Path(stats).is_file() else None,
                                trace_path=None if found is None else Path(found)))
        meta = MetaFile.path_for(path)  # read for the run's settings: never written over
        for flag, extra in (("--stats", chosen[-1].stats_path), ("--trace", found),
                            ("(the meta file beside RUN)", str(meta) if meta.is_file() else None)):
            if extra:
                plan.read(flag, extra)
    for flag, given in (("--topics", topics), ("--corpus", corpus)):
        if given:
            plan.read(flag, given)
    if str(output) == "-":  # one file that opens from disk, its scripts and data inline: not a stream
        raise InputError("--output -: the explorer is one HTML file to open in a browser; give its name")
    plan.write("--output", str(output)).check(overwrite)
    size = write_explorer(chosen, qrels, output, measure=measure, rel_level=rel_level, baseline=baseline,
                          topics=read_topics(topics) if topics else None, corpus=corpus)
    say(f"wrote {output} ({size / 1024:.0f} KB, {len(chosen)} runs)")


def mount(app: typer.Typer) -> None:
    app.add_typer(report_app, name="report")
