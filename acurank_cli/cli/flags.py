"""Flags shared by several commands, declared once (``Annotated`` types), the generator of the method and backend
flags (:func:`with_generated_flags`), the --help panels they are grouped in (:data:`PANELS`, :class:`PanelledCommand`),
and the one stderr console.

Nothing here imports numpy: the CLI parses its flags and prints its help before any work starts.
``-m`` is ``--measure`` everywhere (as trec_eval's ``-m``); the window size m is ``--window``.
"""

from __future__ import annotations

import functools
import inspect
import sys
import typing
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Callable, List, Optional, Sequence

import typer
from typer.core import TyperCommand

from ..errors import InputError
from ..report.render import Format, check_format
from ..run.pipeline import BATCH_QUERIES_DEFAULT, DEFAULTS

#: The --help panels of rerank, baseline and serve, in the order they are shown: a job's own flags name theirs
#: (``rich_help_panel``), a method's options are under METHOD, a backend's under the panel of the options record that
#: declares them (``help_panel``; a plug-in's own: BACKEND).
IO, COST, LONG, RELEVANCE, METHOD, BACKEND, PROMPT, THINKING, REMOTE, SIMULATED, PERFORMANCE, SERVER = PANELS = (
    "Input and output", "The bill and money", "Long documents", "Where relevance ends", "Method", "Backend",
    "LLM prompt and answers", "Thinking", "Remote servers", "Simulated reranker", "Performance", "Server")


class PanelledCommand(TyperCommand):
    """A command whose --help lists its options in panels (:data:`PANELS`), as plain text: each option under the
    panel its declaration names, the panels in :data:`PANELS`' order; an option that names none (--help) is under
    "Options", last."""

    def format_options(self, ctx, formatter) -> None:
        args, panels = [], {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                args.append(record)
            else:
                panels.setdefault(getattr(param, "rich_help_panel", None) or "Options", []).append(record)
        if args:
            with formatter.section("Arguments"):
                formatter.write_dl(args)
        order = {panel: i for i, panel in enumerate(PANELS)}
        for panel, rows in sorted(panels.items(), key=lambda item: order.get(item[0], len(order))):
            with formatter.section(panel):
                formatter.write_dl(rows)


@lru_cache(maxsize=1)
def err():
    """The one console for status and error lines (stderr; no markup, no emoji codes, no highlighting, no
    wrapping): file names, ids, queries and passages are printed as they are (``:fire:`` stays ``:fire:``)."""
    from ..console import text_console

    return text_console(stderr=True, soft_wrap=True)


#: --ray, --actors, --gpus-per-actor: declared once for rerank, baseline and serve
RayAddress = Annotated[Optional[str], typer.Option("--ray", metavar="ADDRESS", rich_help_panel=PERFORMANCE, help="Run the windows in Ray actors: local (a cluster for this run), auto (the running cluster) or an address; the driver keeps the cache, outputs and resume. See docs/scale.md.")]
RayActors = Annotated[Optional[int], typer.Option("--actors", min=1, rich_help_panel=PERFORMANCE, help="--ray: actors, each building the backend once (default: one per GPU of the cluster, else one per CPU).")]
RayGpus = Annotated[Optional[float], typer.Option("--gpus-per-actor", min=0.0, rich_help_panel=PERFORMANCE, help="--ray: GPUs per actor (default 1 on a cluster with GPUs, else 0).")]


def say(message: str) -> None:
    """One ``acurank: ...`` line on stderr."""
    err().print(f"acurank: {message}", markup=False, soft_wrap=True)


def status(message: str, quiet: bool = False) -> None:
    """A status line (:func:`say`), unless ``--quiet``."""
    if not quiet:
        say(message)


MEASURE_HELP = ("a trec_eval name (ndcg_cut.10, map, recall.100, P.10, recip_rank, ndcg) or an ir_measures name "
                "(nDCG@10, AP, RR, R@100, P@10)")



def measure_option(kind: Any, help: str) -> Any:
    """``--measure/-m`` (``kind``: one name, or a list for a repeatable flag); ``help`` says what it does here,
    ``{names}`` standing for the names it takes."""
    return Annotated[kind, typer.Option("--measure", "-m", help=help.format(names=MEASURE_HELP))]


def rel_level_option(note: str = "") -> Any:
    """``--rel-level/-l``, the relevance level of binary measures."""
    return Annotated[int, typer.Option("--rel-level", "-l", min=1, help=f"Relevance level for binary measures (TREC DL uses 2){note}.")]


Measures = measure_option(List[str], "Measure, repeatable: {names}.")
RelLevel = rel_level_option(", as trec_eval -l")
Overwrite = Annotated[bool, typer.Option("--overwrite", metavar="", rich_help_panel=IO, help="Replace output files that exist (without it, an existing output is refused; rerank and baseline resume their --output instead).")]
Cache = Annotated[Optional[str], typer.Option("--cache", rich_help_panel=PERFORMANCE, help="SQLite call cache (default: $ACURANK_CACHE or ~/.cache/acurank/calls.sqlite).")]
NoCache = Annotated[bool, typer.Option("--no-cache", metavar="", rich_help_panel=PERFORMANCE, help="Do not read or write the call cache.")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", metavar="", rich_help_panel=IO, help="Errors and warnings only: no status lines, progress display or summary (progress is off anyway when stderr is not a terminal).")]
Qids = Annotated[Optional[str], typer.Option("--qids", rich_help_panel=IO, help="Only these queries: ids 1,2,3 (any number), or @FILE (first column: a qid list or topics; a plain FILE that exists works too).")]
#: the first-stage candidates a query keeps: rerank's --depth (also --hits, as retrieve's), retrieve's --hits and
#: convert's --depth, one default (``DEFAULTS.depth``)
DEPTH_HELP = {"rerank": "Rerank the top N candidates per query (--hits, as in retrieve); the ones below follow the reranked head in first-stage order (stats: 'tail'), unless --drop-tail.",
              "retrieve": "Candidates per query.", "convert": "Keep the top N candidates per query."}
BatchQueries = Annotated[Optional[int], typer.Option("--batch-queries", min=1, rich_help_panel=PERFORMANCE, help=f"Queries in flight: each advances as soon as its own windows are answered, and their windows keep the backend fed (default: {BATCH_QUERIES_DEFAULT}; results do not depend on it).")]
PassagesFlag = Annotated[Optional[str], typer.Option("--passages", metavar="WORDS[:STRIDE]", rich_help_panel=LONG, help="Rank documents longer than WORDS words by their passages: WORDS words each, STRIDE apart (default WORDS/2), each passage a player; one line per document, scored from its passages (--passage-score). Without it documents are ranked whole (cut to fit the window). See docs/long-documents.md.")]
PassageScore = Annotated[Optional[str], typer.Option("--passage-score", metavar="maxp|firstp|sum|softmax", rich_help_panel=LONG, help="--passages: a document's score from its passages': maxp (the best; default), firstp (the first passage only), sum, softmax (a smooth maximum).")]
MaxPassages = Annotated[Optional[int], typer.Option("--max-passages", min=1, rich_help_panel=LONG, help="--passages: passages made per document at most, its first ones (default 10, as Cohere's max_chunks_per_doc).")]
Calibration = Annotated[Optional[str], typer.Option("--calibration", metavar="MAP.json", rich_help_panel=RELEVANCE, help="A calibration map: each document's P(relevant) (grade >= the map's) and each query's P(no relevant document) go to the stats; with --calibrate, the map to fit and write. Methods with ratings (acurank...). See docs/relevance.md.")]
ServedCalibration = Annotated[Optional[str], typer.Option("--calibration", metavar="MAP.json", rich_help_panel=SERVER, help="A calibration map (fit by rerank --calibrate): relevance_score is each document's P(relevant) and meta.acurank.p_none the query's P(no relevant document), for calls at the map's k. See docs/relevance.md.")]
ServedAllowMapMismatch = Annotated[bool, typer.Option("--allow-map-mismatch", metavar="", rich_help_panel=SERVER, help="Apply --calibration even with another reranker or method than it was fit with (the server's, or one a request names; refused otherwise, at start or as a 400 naming 'method': its P(relevant) would not mean what it says).")]
AllowMapMismatch = Annotated[bool, typer.Option("--allow-map-mismatch", metavar="", rich_help_panel=RELEVANCE, help="Apply --calibration even with another reranker or method than it was fit with, or to the queries it was fit on (refused otherwise: its P(relevant) would not mean what it says).")]
Calibrate = Annotated[Optional[str], typer.Option("--calibrate", metavar="QRELS", rich_help_panel=RELEVANCE, help="Fit the --calibration map on this run's queries judged in QRELS and write it when the run ends (apply it to other queries, never the same).")]
AbsoluteFlag = Annotated[bool, typer.Option("--absolute", metavar="", rich_help_panel=RELEVANCE, help="--calibrate: the map also reads the reranker's own score of each document alone (minilm's cosine, ce:'s logit), which sees how relevant a query's candidates are as a whole; what --prior em needs. Pointwise rerankers only.")]
PriorFlag = Annotated[Optional[str], typer.Option("--prior", metavar="em", rich_help_panel=RELEVANCE, help="--calibration with a map fit with --absolute: move P(relevant) to these queries' own share of relevant candidates, estimated by EM on their candidates (labels unseen) before any query is written. See docs/relevance.md.")]
RelevantGrade = Annotated[Optional[int], typer.Option("--relevant-grade", metavar="G", min=1, rich_help_panel=RELEVANCE, help="--calibrate: relevant means grade >= this (default 1, as trec_eval; TREC DL passages: 2).")]
CutFlag = Annotated[Optional[str], typer.Option("--cut", metavar="p:X|f1", rich_help_panel=RELEVANCE, help="--calibration: each query's list stops where relevance ends: p:X keeps P(relevant) >= X; f1 keeps the top K that maximise the expected F1 (none when P(no relevant document) is higher). A query may be left with no line.")]
CutTarget = Annotated[Optional[str], typer.Option("--cut-target", metavar="cut|topk", rich_help_panel=RELEVANCE, help="--cut: where AcuRank's uncertain set lies: around the cut's boundary (cut: the calls decide which documents the cut keeps; the default with a map fit with --pivot) or around the top k's (topk: as without --cut; the default with a map fit without a pivot, where the cut's target measured more calls for a lower F1). See docs/relevance.md.")]
PivotFlag = Annotated[Optional[str], typer.Option("--pivot", metavar="FILE|simulated", rich_help_panel=RELEVANCE, help="A reference player in every window, rated in the same game, that anchors the relevance boundary: a file of 'qid<TAB>pivot passage' (a passage at the boundary, written for each query), or simulated (the simulated reranker's document of grade --sim-pivot-grade). A map fit with it reads where each document stands against it. See docs/relevance.md.")]
ScoreColumn = Annotated[Optional[str], typer.Option("--score", metavar="mu|p_relevant", rich_help_panel=RELEVANCE, help="The run's score column: mu (default) or p_relevant (--calibration; the run is then ordered by it, as trec_eval reads scores).")]
ReadDirs = Annotated[Optional[list[str]], typer.Option("--read-dir", rich_help_panel=SERVER, help="MCP: a folder whose files the evaluate tool may read (repeatable; default none: runs and qrels are given inline).")]
DryRunFlag = Annotated[bool, typer.Option("--dry-run", metavar="", rich_help_panel=COST, help="Check everything the run would check, call no model, and print the bill: calls, tokens (the backend's own count) and money per query and in total, from rehearsals of the method against the simulated reranker (a median and a 90% interval; exact where the method's calls never depend on the answers); --stats FILE: the same as JSON lines. See docs/rerank.md.")]
PriceIn = Annotated[Optional[float], typer.Option("--price-in", metavar="PRICE", min=0.0, rich_help_panel=COST, help="Price of a million input tokens: each query's money in the stats and the summary, the bill of --dry-run in money, and what --max-cost counts.")]
PriceOut = Annotated[Optional[float], typer.Option("--price-out", metavar="PRICE", min=0.0, rich_help_panel=COST, help="Price of a million output tokens (thought tokens included).")]
MaxCost = Annotated[Optional[float], typer.Option("--max-cost", metavar="MONEY", min=0.0, rich_help_panel=COST, help="A query-set budget in money (with --price-in/--price-out): no query starts whose most possible cost, with what is spent and what the queries in flight may still spend, would pass it; the queries in flight finish, and a resume continues under the same cap. See docs/rerank.md.")]
Rehearsals = Annotated[int, typer.Option("--rehearsals", min=2, rich_help_panel=COST, help="--dry-run: rehearsals of the method, each with another seed of the simulated reranker.")]
RehearsalNoise = Annotated[Optional[float], typer.Option("--rehearsal-noise", min=0.0, rich_help_panel=COST, help="--dry-run: the rehearsal's noise (default: --sim-noise with the simulated reranker, else 1.0).")]
Reranker = Annotated[str, typer.Option("--reranker", rich_help_panel=BACKEND, help="Backend: {backends}. Which methods, prompt formats and answer modes combine with each: docs/support-matrix.md.")]


def method_option(help: str) -> Any:
    """``--method``, the method a command runs (rerank, baseline, serve): ``help`` says which and its default,
    ``{methods}`` standing for the registered methods (``{baselines}``: the baselines)."""
    from ..method.registry import known_methods

    named = {key: known_methods(key == "baselines") for key in ("methods", "baselines") if f"{{{key}}}" in help}
    text = help.format(**named)
    return Annotated[Optional[str], typer.Option("--method", rich_help_panel=METHOD, help=text)]


def methods_option(help: str) -> Any:
    """``--method`` of a report: which methods' runs it reads (repeatable; ``help`` says its default)."""
    return Annotated[Optional[list[str]], typer.Option("--method", help=help)]


def plot_option(default: str) -> Any:
    """``--plot``, the plot file(s) a report draws (repeatable; .png, .svg or .pdf): ``default`` says which when none
    is given."""
    return Annotated[Optional[list[Path]], typer.Option("--plot", callback=_plots, help=f"Plot file(s): .png, .svg or .pdf (repeatable; {default}).")]


def _plots(paths: list[Path] | None) -> list[Path] | None:
    """Every report's --plot, checked as it is parsed: a suffix matplotlib would refuse after the report's work."""
    from ..report.render import PLOT_SUFFIXES

    for p in paths or ():
        if p.suffix.lower() not in PLOT_SUFFIXES:
            raise InputError(f"--plot {p}: plot files must end in {', '.join(PLOT_SUFFIXES)}")
    return paths


def cache_choice(cache: str | None, no_cache: bool) -> str | None:
    """The call cache --cache and --no-cache choose (None: no cache; the default cache when neither is given);
    both at once is refused."""
    if no_cache and cache is not None:
        raise InputError(f"--no-cache and --cache {cache} contradict each other: give one of them")
    return None if no_cache else (cache or DEFAULTS.cache)


def format_option(allowed: tuple[Format, ...], note: str = "") -> object:
    """``--format/-f`` for ``Annotated``, naming the formats a command renders (one Format enum for every command)."""
    shown = " | ".join(f.value for f in allowed)
    return typer.Option("--format", "-f", help=f"Output format: {shown}{note}.")


@dataclass(frozen=True)
class Rendering:
    """Where and how a command shows its :class:`~acurank_cli.report.render.Report`: the format chosen (checked
    before any work), ``--output`` (None: stdout) and ``--overwrite``."""

    fmt: Format
    output: Path | None
    overwrite: bool

    def emit(self, report) -> None:
        """Render the report, then say which other files the command wrote (its plots)."""
        report.emit(self.fmt, self.output)
        if report.written:
            say("wrote " + ", ".join(str(p) for p in report.written))


def renders(formats: Sequence[Format], default: str | None = "terminal", note: str = "",
            output_help: str = "Write the table/JSON here instead of stdout."):
    """Give ``command(..., out: Rendering, ...)`` the flags ``--format/-f``, ``--output/-o`` and ``--overwrite``,
    declared here once for every command that renders, in the place of its ``out`` parameter; the format is
    checked before the command runs (``default`` None: terminal on a terminal, tsv otherwise)."""

    def wrap(command: Callable) -> Callable:
        fmt_kind = Optional[str] if default is None else str
        flags = [("fmt", Annotated[fmt_kind, format_option(formats, note)], default),
                 ("output", Annotated[Optional[Path], typer.Option("--output", "-o", help=output_help)], None),
                 ("overwrite", Overwrite, False)]
        params = []
        for p in resolved_parameters(command):
            if p.name != "out":
                params.append(p)
                continue
            params += [inspect.Parameter(name, p.kind, annotation=kind, default=value) for name, kind, value in flags]

        @functools.wraps(command)
        def wrapper(*args, **kwargs):
            fmt, output, overwrite = (kwargs.pop(name) for name, _, _ in flags)
            chosen = check_format(fmt, formats) if fmt else (Format.terminal if sys.stdout.isatty() else Format.tsv)
            return command(*args, out=Rendering(chosen, output, overwrite), **kwargs)

        return declared(wrapper, params)

    return wrap


def resolved_parameters(command: Callable) -> list[inspect.Parameter]:
    """``command``'s parameters with their annotations resolved (the ``Annotated`` flags; a module with
    ``from __future__ import annotations`` holds them as strings)."""
    hints = typing.get_type_hints(command, include_extras=True)
    return [p.replace(annotation=hints.get(p.name, p.annotation)) for p in inspect.signature(command).parameters.values()]


def record_parameters(record: type) -> list[inspect.Parameter]:
    """A command's flags declared as a record (a dataclass whose fields are ``Annotated`` flags with their defaults),
    as the keyword-only parameters Typer reads (:func:`declared`)."""
    import dataclasses

    hints = typing.get_type_hints(record, include_extras=True)
    return [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, annotation=hints[f.name], default=f.default)
            for f in dataclasses.fields(record)]


def declared(function: Callable, params: list[inspect.Parameter], doc: str | None = None) -> Callable:
    """``function`` as Typer will read it: with the parameters ``params`` (their annotations the ``Annotated``
    flags). The one place the CLI rewrites a command's signature: the generated method and backend flags,
    ``baseline``'s --method, report's run-naming options."""
    function.__signature__ = inspect.Signature(params)
    function.__annotations__ = {p.name: p.annotation for p in params if p.annotation is not p.empty}
    if doc is not None:
        function.__doc__ = doc
    return function


def _flag_param(name: str, kind, flag: str, help: str, hidden: bool = False, panel: str | None = None) -> inspect.Parameter:
    """A keyword-only parameter Typer reads as ``flag`` (None when not given; a bool is a switch ``--x/--no-x``, so
    that one whose default is on can be turned off; ``hidden``: not in the help; ``panel``: its --help panel)."""
    extra = {"metavar": ""} if kind is bool else {}  # a switch takes no value: show none
    decl = f"{flag}/--no-{flag[2:]}" if kind is bool else flag  # a switch that defaults on can be turned off
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=Optional[kind],
                             default=typer.Option(None, decl, help=help, hidden=hidden, rich_help_panel=panel, **extra))


def backend_panel(name: str, option) -> str:
    """The --help panel of a backend option: that of the options record that declares it (``help_panel``)."""
    record = option.owners[0][0].record
    declaring = next((k for k in record.__mro__ if name in k.__dict__.get("__annotations__", {})), record)
    return declaring.__dict__.get("help_panel", BACKEND)


def backends_help() -> str:
    """The registered backends, as --reranker takes them (``hf:MODEL``; ``simulated``), in registration order."""
    from ..rerankers.backend import BACKENDS

    named = [f"{prefix}:MODEL" if spec.takes_arg else prefix for prefix, spec in BACKENDS.load(False).items()]
    return " | ".join(named + ["a plug-in (docs/extending.md)"])


def with_generated_flags(command, baseline_only: bool = False):
    """Return ``command`` with every registered method family's options and every registered backend's
    options as flags (``baseline_only``: the baselines' method options only), each in its --help panel, and the
    --reranker help naming the registered backends.

    Typer reads a command's flags from its signature; method families and backends (plug-ins included)
    declare their options once in their records, so the signature is extended here. A flag left out is
    None, so each method and backend gets only what was given and its own defaults otherwise; a flag the
    chosen method or backend does not take is an error naming the options it does take.
    """
    from ..method.registry import METHODS
    from ..rerankers.backend import BACKENDS

    params = [_named_backends(p) for p in resolved_parameters(command) if p.kind is not p.VAR_KEYWORD]
    taken = {p.name for p in params}
    for registry in (METHODS, BACKENDS):  # one options table each, made into flags the same way
        for name, opt in registry.table(strict=False).items():
            if name in taken:
                raise InputError(f"{registry.what} option {name!r} has the name of a method option or a job flag: "
                                 "rename it")
            panel = METHOD if registry is METHODS else backend_panel(name, opt)
            params.append(_flag_param(name, opt.decl.kind, opt.flag, registry.describe(opt, baseline_only),
                                      hidden=not registry.shown(opt, baseline_only), panel=panel))
            taken.add(name)

    def generated(ctx: typer.Context, **kwargs) -> None:
        command(ctx, **kwargs)

    return declared(generated, params, command.__doc__)


def _named_backends(param: inspect.Parameter) -> inspect.Parameter:
    """--reranker with its help naming the registered backends (the others as they are)."""
    if param.name != "reranker":
        return param
    kind, option = typing.get_args(param.annotation)
    shown = typer.Option(option.default, *option.param_decls, rich_help_panel=option.rich_help_panel,
                         help=option.help.format(backends=backends_help()))
    return param.replace(annotation=Annotated[kind, shown])
