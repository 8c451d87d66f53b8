"""``acurank eval``: runs through ir_measures/pytrec_eval (trec_eval semantics), in every output format."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, List, Optional

import typer

from ..errors import InputError
from ..evaluation import DEFAULT_MEASURE
from ..report.render import Format, Report, Table, num
from .flags import Measures, Qids, RelLevel, Rendering, renders, say

if TYPE_CHECKING:
    from ..evaluation import Evaluation

#: What eval renders: the report formats plus trec_eval's line layouts.
EVAL_FORMATS = (Format.terminal, Format.tsv, Format.trec_eval, Format.json, Format.csv, Format.markdown, Format.latex)


@dataclass(frozen=True)
class EvalRow:
    """One evaluated run: its path, the evaluation and mean calls (None without stats)."""

    run: str
    evaluation: "Evaluation"
    mean_calls: float | None


def _tables(rows: list[EvalRow], measures: list[str], per_query: bool, title: str,
            names: dict[str, str]) -> list[Table]:
    """Tables for people: every measure under its one canonical name (``names``: label -> ir_measures name)."""
    table = Table(title, ["run", *(names[m] for m in measures), "calls/query"])
    for row in rows:
        table.add(row.run, *(num(row.evaluation.mean(m)) for m in measures),
                  "" if row.mean_calls is None else num(row.mean_calls, 2))
    tables = [table]
    if per_query and rows:
        pq = Table("per query", ["qid", *(names[m] + (f" {Path(r.run).name}" if len(rows) > 1 else "")
                                          for r in rows for m in measures)])
        for qid in rows[0].evaluation.per_query:
            pq.add(qid, *(num(r.evaluation.per_query[qid][m]) for r in rows for m in measures))
        tables.append(pq)
    return tables


def _records(rows: list[EvalRow], measures: list[str], per_query: bool) -> list[dict]:
    out = []
    for row in rows:
        rec = {"run": row.run, "queries": len(row.evaluation.per_query), "fill": row.evaluation.fill,
               **{m: row.evaluation.mean(m) for m in measures}}
        if row.mean_calls is not None:
            rec["mean_calls"] = row.mean_calls
        if per_query:
            rec["per_query"] = row.evaluation.per_query
        out.append(rec)
    return out


def _lines(rows: list[EvalRow], measures: list[str], per_query: bool, width: int, with_calls: bool) -> str:
    """``measure<TAB>qid|all<TAB>value`` lines (+ the run path with several runs), names padded to ``width``."""
    suffix = (lambda r: f"\t{r.run}") if len(rows) > 1 else (lambda r: "")
    out = []
    for row in rows:
        if per_query:
            for qid, values in row.evaluation.per_query.items():
                out.extend(f"{m:<{width}}\t{qid}\t{values[m]:.4f}{suffix(row)}" for m in measures)
        out.extend(f"{m:<{width}}\tall\t{row.evaluation.mean(m):.4f}{suffix(row)}" for m in measures)
        if with_calls and row.mean_calls is not None:
            out.append(f"{'mean_calls':<{width}}\tall\t{row.mean_calls:.2f}{suffix(row)}")
    return "".join(line + "\n" for line in out)


def eval_report(rows: list[EvalRow], measures: list[str], per_query: bool, title: str,
                names: dict[str, str] | None = None) -> Report:
    """The evaluation of ``rows`` as a :class:`~acurank_cli.report.render.Report` (the one renderer of eval and
    report): the tables (terminal, markdown, LaTeX) name measures by ``names`` (label -> display name; default the
    label), the machine formats (tsv, trec_eval, json, csv) by the label asked."""
    names = names or {m: m for m in measures}
    records = _records(rows, measures, per_query)
    flat = [{k: v for k, v in r.items() if k != "per_query"} for r in records]
    lines = {Format.tsv: _lines(rows, measures, per_query, 0, True),
             Format.trec_eval: _lines(rows, measures, per_query, 22, False)}
    return Report(_tables(rows, measures, per_query, title, names), flat,
                  records if len(records) != 1 else records[0], lines, EVAL_FORMATS)


def _mean_calls(path: Path, run: str, queries: set[str], wanted: set[str] | None = None) -> float | None:
    """Mean calls per query from the run's stats file (checked to be the run's: ``queries`` are its qids), over the
    ``wanted`` queries when --qids names them (None when there is no stats file, or it has none of them)."""
    from ..io.run_files import stats_of_run

    if not path.exists():
        return None
    records, gap = stats_of_run(path, run, queries, wanted)
    if gap:
        say(gap)
    return statistics.fmean(r.calls for r in records.values()) if records else None


def _check_against_qrels(path: str, run: dict, judged: dict, qrels: str, *, fill: bool = True,
                         held: int | None = None, emptied: Sequence[str] = ()) -> None:
    """Foreign qrels (no query in common) are an error; few shared queries, a run that covers only part of the
    qrels' queries, and an unfinished run (its meta file says it was made for more queries) are warnings.
    ``emptied``: the run's queries cut to nothing (no line): its queries with the others, and counted 0 where the mean
    fills (without --no-fill, as trec_eval, a query with no line is out of the mean)."""
    run = [*run, *emptied] if fill else list(run)
    from ..io.run_files import unfinished

    from ..evaluation import check_judged, coverage

    check_judged(run, judged, qrels, path)
    shared = len(set(run) & set(judged))
    if shared < len(run) / 2:
        say(f"warning: {path}: only {shared} of its {len(run)} queries are judged in {qrels}")
    covered = coverage(run, judged, fill, "--no-fill")
    if covered is not None:
        say(f"warning: {path}: {covered}")
    left = unfinished(path, len(run) if held is None else held) if path != "-" else None  # held: before --qids
    if left:
        say(f"warning: {path} is unfinished ({left}); rerun its rerank command to finish it")


@renders(EVAL_FORMATS, None, " (default: terminal on a terminal, tsv otherwise)", "Write here instead of stdout.")
def eval_cmd(
    runs: Annotated[List[str], typer.Argument(help="One or more TREC runs ('-' = stdin).")],
    *,
    qrels: Annotated[str, typer.Option("--qrels", help="TREC qrels file, a Pyserini qrels name, or irds:<id> (ir_datasets).")],
    measure: Measures = [DEFAULT_MEASURE],  # noqa: B006 - typer reads the default
    rel_level: RelLevel = 1,
    per_query: Annotated[bool, typer.Option("--per-query", "-q", metavar="", help="Also per-query values (trec_eval -q).")] = False,
    no_fill: Annotated[bool, typer.Option("--no-fill", metavar="", help="Average over the run's judged queries (trec_eval's default) instead of all the qrels' queries, missing ones scoring 0 (trec_eval -c, the default here).")] = False,
    qids: Qids = None,
    stats: Annotated[Optional[str], typer.Option("--stats", help="Stats JSONL of the (single) run: adds mean calls. Default: X.stats.jsonl beside X.run.")] = None,
    out: Rendering = None,
    floor: Annotated[Optional[List[str]], typer.Option("--min", metavar="MEASURE=VALUE", help="CI gate, repeatable: fail (exit 1) when a run's mean of MEASURE is below VALUE.")] = None,
    base_run: Annotated[Optional[str], typer.Option("--against", metavar="BASE.run", help="CI gate: fail (exit 1) when a run is worse than BASE.run on a measure by more than --max-drop, or significantly (paired t at --alpha).")] = None,
    max_drop: Annotated[Optional[float], typer.Option("--max-drop", min=0.0, show_default=False, help="--against: the largest drop of a mean allowed (default 0).")] = None,
    alpha: Annotated[Optional[float], typer.Option("--alpha", min=0.0, max=1.0, show_default=False, help="--against: a drop with a paired t-test p below this fails (default 0.05).")] = None,
) -> None:
    """Evaluate runs through ir_measures/pytrec_eval (trec_eval semantics); with --min or --against, gate them
    (exit 1 and one line per failed gate; exit 0 and a "gates held" line per run, naming each gate)."""
    from ..evaluation import evaluate, parse_measures
    from ..io.collection_files import read_qids
    from ..io.sources import one_stdin
    from ..retrieval.resolve import load_qrels

    if stats and len(runs) != 1:
        raise InputError("--stats goes with a single run")
    for flag, value in (("--max-drop", max_drop), ("--alpha", alpha)):  # a gate's setting without the gate: refused
        if value is not None and base_run is None:
            raise InputError(f"{flag} sets the gate against a baseline run; give --against BASE.run, or drop it")
    max_drop, alpha = (0.0 if max_drop is None else max_drop), (0.05 if alpha is None else alpha)
    shown = {str(m.measure): m.label for m in parse_measures(measure, rel_level)}
    floor_gates = [_floor(text, rel_level, shown) for text in floor or []]
    measure = list(measure) + [g.name for g in floor_gates if g.label not in shown.values()]
    parsed = parse_measures(measure, rel_level)
    one_stdin([*(("RUN", r) for r in runs), ("--qrels", qrels), ("--qids", qids)])
    _plan(runs, qrels, qids, stats, base_run).write("--output", out.output).check(out.overwrite)
    judged = load_qrels(qrels)
    wanted = read_qids(qids) if qids is not None else None
    if wanted is not None:
        _check_wanted(wanted, judged, qrels)
        judged = {q: v for q, v in judged.items() if q in wanted}
    fill = not no_fill
    rows, gated = _evaluated(runs, judged, qrels, wanted, stats=stats, measure=measure, rel_level=rel_level, fill=fill)
    base = None if base_run is None else evaluate(_covering(base_run, gated, wanted), judged, measure, rel_level, fill=fill)
    averaging = rows[0].evaluation.averaging if rows else ""
    if out.fmt in (Format.tsv, Format.trec_eval):
        say(f"{qrels}: averaged over {averaging}")
    out.emit(eval_report(rows, [m.label for m in parsed], per_query, f"{qrels}: averaged over {averaging}",
                         {m.label: m.name for m in parsed}))
    if floor_gates or base is not None:
        _gate(rows, floor_gates, base_run, base, [(m.name, m.label) for m in parsed], max_drop=max_drop, alpha=alpha)


def _scores(path: str, wanted: set[str] | None, emptied: set[str]) -> tuple[dict, set[str]]:
    """The run's scores (of the --qids queries) and the queries the file holds: one run in memory at a time, as
    one qid -> docid -> score mapping (what ir_measures takes); ``emptied``: the queries its stats record as cut to
    nothing (with some, a file with no line is a run, not an empty file)."""
    from ..io.runs import read_scores

    parsed = read_scores(path, empty_ok=bool(emptied))
    return ({q: d for q, d in parsed.items() if q in wanted} if wanted is not None else parsed), set(parsed)


def _emptied(path: str, stats: str | None = None) -> set[str]:
    """The queries a run's stats (``stats``, else X.stats.jsonl beside the run) record as cut to nothing."""
    from ..io.run_files import cut_to_nothing, stats_path_for

    return cut_to_nothing(stats or (stats_path_for(path) if path != "-" else None))


def _evaluated(runs: list[str], judged: dict, qrels: str, wanted: set[str] | None, *, stats: str | None,
               measure: list[str], rel_level: int, fill: bool) -> tuple[list[EvalRow], dict[str, set]]:
    """Each run evaluated (checked against the qrels, its mean calls from its stats), and the queries of each
    (what --against must cover)."""
    from ..evaluation import evaluate
    from ..io.run_files import stats_path_for

    if stats is not None and stats != "-" and not Path(stats).is_file():  # a stats file named is read, never passed by
        raise InputError("--stats: " + ("is a directory, expected a file" if Path(stats).is_dir() else "no such file"),
                         stats)
    rows, gated = [], {}
    for path in runs:
        beside = stats_path_for(path) if path != "-" else None
        emptied = _emptied(path, stats)  # finished with no line (--cut): the run's queries
        run, held = _scores(path, wanted, emptied)
        emptied -= held
        shown = sorted(q for q in emptied if wanted is None or q in wanted)
        gated[path] = set(run) | set(shown)
        # the stats checked to be the run's first: another run's would count its queries in the lines below
        calls = _mean_calls(Path(stats) if stats else beside, path, held, wanted) if stats or beside else None
        if not fill and not set(run) & set(judged):  # a mean of nothing, which a gate would read as 0
            raise InputError("--no-fill averages over the run's judged queries that have a line, and it has none"
                             + (f" ({len(shown)} cut to nothing)" if shown else "")
                             + ": leave out --no-fill to count the qrels' queries it lacks as 0", path)
        _check_against_qrels(path, run, judged, qrels, fill=fill, held=len(held) + len(emptied), emptied=shown)
        rows.append(EvalRow(path, evaluate(run, judged, measure, rel_level, fill=fill), calls))
    return rows, gated


def _check_wanted(wanted: set[str], judged: dict, qrels: str) -> None:
    """--qids must name a query the qrels judge: with none, the mean would be over 0 queries (refused, as rerank
    refuses a --qids query its run lacks); the unjudged ones of a longer list (a topics file) are said in a line."""
    unjudged = sorted(q for q in wanted if q not in judged)
    if len(unjudged) == len(wanted):
        raise InputError(f"--qids names no query that the qrels {qrels} judge (e.g. {unjudged[0]}): nothing to average")
    if unjudged:
        say(f"warning: --qids: {len(unjudged)} of its {len(wanted)} queries are not judged in {qrels} (e.g. "
            f"{unjudged[0]}): left out")


def _plan(runs: list[str], qrels: str, qids: str | None, stats: str | None, base_run: str | None):
    """The files eval reads (runs, qrels, a --qids file, stats given or beside each run, the base run)."""
    from ..io.run_files import stats_path_for
    from ..io.plan import FilePlan
    from ..io.collection_files import qids_file
    from ..retrieval.resolve import as_file

    plan = FilePlan().read("--qrels", as_file(qrels)).read("--qids", qids_file(qids)).read("--stats", stats)
    for run in runs:
        plan.read("RUN", run)
        if run != "-" and stats is None and stats_path_for(run).is_file():
            plan.read("(the stats beside RUN)", stats_path_for(run))
    return plan.read("--against", base_run)


def _covering(base_run: str, gated: dict[str, set], wanted: set[str] | None = None) -> dict:
    """The base run of --against (its scores, of the --qids queries), refused when it lacks queries a gated run has
    (``gated``: path -> its qids, those cut to nothing too): its missing queries would score 0 and every gate against
    it would hold by default. A query the base cut to nothing is one of its queries (it scores 0 there)."""
    emptied = _emptied(base_run)
    base = _scores(base_run, wanted, emptied)[0]
    for path, run in gated.items():
        lacking = [q for q in run if q not in base and q not in emptied]
        if lacking:
            raise InputError(f"--against {base_run} lacks {len(lacking)} of the {len(run)} queries of {path} (e.g. "
                             f"{lacking[0]}): a gate against it would hold by default; give a base run of the same "
                             "queries (or --qids to gate on the queries both have)")
    return base


def _floor(text: str, rel_level: int, shown: dict[str, str]):
    """A ``--min`` gate; a measure already shown under another name (nDCG@10 for ndcg_cut_10) is read there."""
    from ..evaluation import parse_measures, value_range
    from ..report.gates import Floor, parse_floor

    name, value = parse_floor(text)
    found = parse_measures([name], rel_level)
    if len(found) != 1:
        raise InputError(f"--min {text!r}: name one measure")
    low, high = value_range(found[0].measure)
    if not low <= value <= high:
        where = f"between {low:g} and {high:g}" if high < float("inf") else f"at least {low:g}"
        raise InputError(f"--min {text}: {found[0].name} is {where}, so this gate could never "
                         f"{'pass' if value > high else 'fail'}")
    return Floor(found[0].name, shown.get(str(found[0].measure), found[0].label), value)


def _gate(rows: list[EvalRow], floor_gates: list, base_name: str | None, base, measures: list[tuple[str, str]], *,
          max_drop: float, alpha: float) -> None:
    """Check every gate on every run: one line per failed gate and exit 1, or one "gates held" line."""
    from ..report.gates import against, floors

    results = []
    for row in rows:
        results += floors(row.run, row.evaluation, floor_gates)
        if base is not None:
            results += against(row.run, row.evaluation, base_name, base, measures, max_drop=max_drop, alpha=alpha)
    failed = [r for r in results if not r.held]
    for r in failed:
        say(f"gate failed: {r.line}")
    if failed:
        raise typer.Exit(1)
    for row in rows:
        mine = [r.summary for r in results if r.run == row.run]
        say(f"gates held on {row.run}: {'; '.join(mine)}")


def mount(app: typer.Typer) -> None:
    app.command("eval", help="Evaluate runs through ir_measures/pytrec_eval (trec_eval semantics).")(eval_cmd)
