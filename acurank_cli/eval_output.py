"""Renderers for ``acurank eval``: a registry from output format to function (table, tsv, json)."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


from .evaluation import Evaluation


class EvalFormat(str, enum.Enum):
    """Output formats of ``acurank eval``."""

    table = "table"
    tsv = "tsv"
    json = "json"
    trec_eval = "trec_eval"


@dataclass(frozen=True)
class EvalRow:
    """One evaluated run: its path, the evaluation and mean calls (None without stats)."""

    run: str
    evaluation: Evaluation
    mean_calls: float | None


def _json(rows: list[EvalRow], measures: list[str], per_query: bool, title: str) -> None:
    out = []
    for row in rows:
        rec = {"run": row.run, "queries": len(row.evaluation.per_query), "fill": row.evaluation.fill,
               **{m: row.evaluation.mean(m) for m in measures}}
        if row.mean_calls is not None:
            rec["mean_calls"] = row.mean_calls
        if per_query:
            rec["per_query"] = row.evaluation.per_query
        out.append(rec)
    print(json.dumps(out if len(out) > 1 else out[0], indent=1))


def _lines(rows: list[EvalRow], measures: list[str], per_query: bool, width: int, with_calls: bool) -> None:
    """``measure<TAB>qid|all<TAB>value`` lines (+ the run path with several runs), names padded to ``width``."""
    suffix = (lambda r: f"\t{r.run}") if len(rows) > 1 else (lambda r: "")
    for row in rows:
        if per_query:
            for qid, values in row.evaluation.per_query.items():
                for m in measures:
                    print(f"{m:<{width}}\t{qid}\t{values[m]:.4f}{suffix(row)}")
        for m in measures:
            print(f"{m:<{width}}\tall\t{row.evaluation.mean(m):.4f}{suffix(row)}")
        if with_calls and row.mean_calls is not None:
            print(f"{'mean_calls':<{width}}\tall\t{row.mean_calls:.2f}{suffix(row)}")


def _tsv(rows: list[EvalRow], measures: list[str], per_query: bool, title: str) -> None:
    """Tab-separated ``measure<TAB>qid|all<TAB>value`` lines, and mean calls when stats are known."""
    _lines(rows, measures, per_query, 0, True)


def _trec_eval(rows: list[EvalRow], measures: list[str], per_query: bool, title: str) -> None:
    """trec_eval's own layout: ``measure`` left-justified to 22, qid (or ``all``), value to 4 places."""
    _lines(rows, measures, per_query, 22, False)


def _table(rows: list[EvalRow], measures: list[str], per_query: bool, title: str) -> None:
    """The report's terminal table (one table renderer for eval and report)."""
    from .report.render import Table, num, to_terminal

    table = Table(title, ["run", *measures, "calls/query"])
    for row in rows:
        table.add(row.run, *(num(row.evaluation.mean(m)) for m in measures),
                  "" if row.mean_calls is None else num(row.mean_calls, 2))
    tables = [table]
    if per_query:
        pq = Table("per query", ["qid", *(m + (f" {Path(r.run).name}" if len(rows) > 1 else "")
                                          for r in rows for m in measures)])
        for qid in rows[0].evaluation.per_query:
            pq.add(qid, *(num(r.evaluation.per_query[qid][m]) for r in rows for m in measures))
        tables.append(pq)
    to_terminal(tables)


RENDERERS: dict[EvalFormat, Callable[[list[EvalRow], list[str], bool, str], None]] = {
    EvalFormat.table: _table,
    EvalFormat.tsv: _tsv,
    EvalFormat.json: _json,
    EvalFormat.trec_eval: _trec_eval,
}


def render(fmt: EvalFormat, rows: list[EvalRow], measures: list[str], per_query: bool, title: str) -> None:
    """Print the evaluation of ``rows`` in ``fmt``."""
    RENDERERS[EvalFormat(fmt)](rows, measures, per_query, title)
