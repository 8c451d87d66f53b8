"""The main report table: methods as rows, datasets as columns, macro averages, significance marks.

Macro averages follow the paper: the mean over a dataset's judged queries first, then the unweighted
mean over datasets (a method missing from any dataset has no macro value). Calls are macro-averaged
the same way from the per-query stats. Significance is computed per dataset against a baseline
method, paired over the judged queries, with both the paired t-test and the sign-flip randomisation
test; the table's marks follow the test chosen with ``--test``, and JSON/CSV hold both p-values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..errors import InputError
from .collection import Collection, macro, natural_key
from .render import MISSING, Cell, Report, Table, num
from .significance import (CI_KINDS, CORRECTIONS, MARKS, adjust, mark, paired_ci, paired_ttest, paired_values,
                           permutation_test)

TEST_NAMES = {"ttest": "paired t-test", "permutation": "randomisation test"}


def measure_label(measure: str, rel_level: int = 1) -> str:
    """Display name, the one eval's tables use: ir_measures' (ndcg_cut_10 -> nDCG@10, P_10 -> P@10,
    recall_100 -> R@100, map -> AP, recip_rank -> RR)."""
    from ..evaluation import display_name

    return display_name(measure, rel_level)


def parse_baselines(specs: Sequence[str], datasets: Sequence[str]) -> dict[str, str]:
    """``--baseline METHOD`` (every dataset) and/or ``--baseline DATASET=METHOD`` -> {dataset: method}.

    A named entry wins over an unnamed one, whatever their order."""
    out: dict[str, str] = {}
    named: dict[str, str] = {}
    for spec in specs:
        ds, sep, method = spec.partition("=")
        if not sep:
            out.update({d: spec for d in datasets})
        elif ds not in datasets:
            raise InputError(f"--baseline {spec!r}: unknown dataset {ds!r} (datasets: {', '.join(datasets)})")
        else:
            named[ds] = method
    out.update(named)
    return out


def ordered_methods(coll: Collection) -> list[str]:
    """--method order if given; else the first stage, then by macro calls ascending, then name."""
    if coll.method_order is not None:
        return coll.methods()

    def key(m: str):
        calls = macro([coll.mean_cost(d, m) if coll.has(d, m) else None for d in coll.datasets])
        return (m != coll.first_stage, math.inf if calls is None else calls, natural_key(m))

    return sorted(coll.methods(), key=key)


@dataclass(frozen=True)
class Interval:
    """The confidence interval of a mean paired difference."""

    kind: str
    level: float
    low: float | None
    high: float | None

    def to_json(self) -> dict:
        return {"kind": self.kind, "level": self.level, "low": self.low, "high": self.high}


@dataclass(frozen=True)
class Comparison:
    """A method against the baseline on one dataset: the mean paired difference, both paired tests, the CI, and
    once the table's family is known the corrected p-value and the mark."""

    baseline: str
    queries: int
    delta: float | None
    t: float | None
    p_ttest: float | None
    p_permutation: float | None
    ci: Interval | None = None
    p_adjusted: float | None = None
    correction: str = "none"
    mark: str = ""

    def p(self, test: str) -> float | None:
        """The p-value of the test the table marks by (``ttest`` or ``permutation``)."""
        return self.p_ttest if test == "ttest" else self.p_permutation

    def to_json(self) -> dict:
        out = {"baseline": self.baseline, "queries": self.queries, "delta": self.delta, "t": self.t,
               "p_ttest": self.p_ttest, "p_permutation": self.p_permutation}
        if self.ci is not None:
            out["ci"] = self.ci.to_json()
        out.update({"p_adjusted": self.p_adjusted, "correction": self.correction, "mark": self.mark})
        return out


@dataclass(frozen=True)
class DatasetScore:
    """A method on one dataset: the measure's mean, the mean costs per query from the stats, the comparison."""

    value: float
    queries: int
    calls: float | None
    tokens: float | None
    seconds: float | None
    rounds: float | None
    #: queries with stats (None: no stats file)
    stats_queries: int | None
    vs_baseline: Comparison | None = None

    def to_json(self, measure: str) -> dict:
        out = {measure: self.value, "queries": self.queries, "calls": self.calls, "tokens": self.tokens,
               "seconds": self.seconds, "rounds": self.rounds, "stats_queries": self.stats_queries}
        if self.vs_baseline is not None:
            out["vs_baseline"] = self.vs_baseline.to_json()
        return out


@dataclass(frozen=True)
class MethodRow:
    """One method's row for one measure: per dataset its score (None: no run there), and the macro averages."""

    method: str
    measure: str
    datasets: dict[str, DatasetScore | None]
    macro: float | None
    macro_calls: float | None
    macro_rounds: float | None

    def to_json(self) -> dict:
        return {"method": self.method,
                "datasets": {ds: None if e is None else e.to_json(self.measure) for ds, e in self.datasets.items()},
                "macro": {self.measure: self.macro, "calls": self.macro_calls, "rounds": self.macro_rounds}}


def compare(coll: Collection, dataset: str, method: str, baseline: str, resamples: int, seed: int, *,
            ci: str = "none") -> Comparison:
    """Both paired tests of ``method`` against ``baseline`` on one dataset (and the CI of the difference)."""
    qids, a, b = paired_values(coll.per_query(dataset, method), coll.per_query(dataset, baseline))
    t = paired_ttest(a, b)
    p = permutation_test(a, b, resamples=resamples, seed=seed)
    interval = None
    if ci != "none":
        got = paired_ci(a, b, ci, resamples=resamples, seed=seed)
        interval = Interval(ci, 0.95, got and got[0], got and got[1])
    return Comparison(baseline, len(qids), (sum(a) - sum(b)) / len(qids) if qids else None, t=t.statistic,
                      p_ttest=t.pvalue, p_permutation=p.pvalue, ci=interval)


def check_options(test: str, correction: str, ci: str) -> None:
    """The table's test, correction and CI names (one-line errors naming the flag)."""
    if test not in TEST_NAMES:
        raise InputError(f"--test must be ttest or permutation, not {test!r}")
    if correction not in CORRECTIONS:
        raise InputError(f"--correction must be one of {', '.join(CORRECTIONS)}, not {correction!r}")
    if ci not in CI_KINDS:
        raise InputError(f"--ci must be one of {', '.join(CI_KINDS)}, not {ci!r}")


#: The direction of a significant difference from the baseline.
UP, DOWN = "▲", "▼"


def measure_rows(coll: Collection, baselines: dict[str, str], test: str, resamples: int, seed: int, *,
                 correction: str = "none", ci: str = "none") -> list[MethodRow]:
    """Per method (table order): per dataset its mean measure, costs and comparison with the baseline, and
    the macro averages. The marks follow the chosen test's p-value after the correction, applied per dataset
    over every method compared with its baseline."""
    rows: list[MethodRow] = []
    for m in ordered_methods(coll):
        per_ds: dict[str, DatasetScore | None] = {}
        for ds in coll.datasets:
            if not coll.has(ds, m):
                per_ds[ds] = None
                continue
            calls = coll.per_query_cost(ds, m, "calls")
            b = baselines.get(ds)
            per_ds[ds] = DatasetScore(
                coll.mean(ds, m), len(coll.per_query(ds, m)),
                *(coll.mean_cost(ds, m, k) for k in ("calls", "tokens", "seconds", "rounds")),
                None if calls is None else len(calls),
                compare(coll, ds, m, b, resamples, seed, ci=ci) if b and b != m else None)
        scores = list(per_ds.values())
        rows.append(MethodRow(m, coll.measure, per_ds, macro([e and e.value for e in scores]),
                              macro([e and e.calls for e in scores]), macro([e and e.rounds for e in scores])))
    for ds in coll.datasets:
        rows = _corrected(rows, ds, test, correction)
    return rows


def _corrected(rows: list[MethodRow], ds: str, test: str, correction: str) -> list[MethodRow]:
    """The rows with the comparisons on ``ds`` corrected as one family (the methods compared there): adjusted
    p-value, and the mark with its direction, better (▲) or worse (▼) than the baseline, as ranx marks it."""
    family = [i for i, r in enumerate(rows) if r.datasets[ds] and r.datasets[ds].vs_baseline]
    pvalues = [rows[i].datasets[ds].vs_baseline.p(test) for i in family]
    rows = list(rows)
    for i, adjusted in zip(family, adjust(pvalues, correction)):
        score = rows[i].datasets[ds]
        cmp = score.vs_baseline
        sig = mark(adjusted)
        cmp = replace(cmp, p_adjusted=adjusted, correction=correction,
                      mark=(UP if (cmp.delta or 0) > 0 else DOWN) + sig if sig else "")
        rows[i] = replace(rows[i], datasets={**rows[i].datasets, ds: replace(score, vs_baseline=cmp)})
    return rows


def _baselines(coll: Collection, baselines: dict[str, str] | None) -> dict[str, str]:
    baselines = {ds: b for ds, b in (baselines or {}).items() if ds in coll.datasets}
    for b in set(baselines.values()):
        if not any(coll.has(ds, b) for ds in coll.datasets):
            raise InputError(f"--baseline {b!r} has no run (methods: {', '.join(coll.methods())})")
    return {ds: b for ds, b in baselines.items() if coll.has(ds, b)}


@dataclass(frozen=True)
class _Layout:
    """What every part of a table shares: datasets, measures with their labels, the figures' scale."""

    datasets: list[str]
    measures: list[str]
    labels: dict[str, str]
    scale: float
    digits: int

    @property
    def multi(self) -> bool:
        return len(self.datasets) > 1

    @property
    def several(self) -> bool:
        return len(self.measures) > 1

    def head(self, ds: str, ms: str) -> str:
        """A (dataset, measure) column's header."""
        if not self.several:
            return ds if self.multi else f"{ds} {self.labels[ms]}"
        return f"{ds} {self.labels[ms]}" if self.multi else self.labels[ms]

    def shown(self, v: float | None) -> float | None:
        """A figure as the table shows it (what "best" compares)."""
        return None if v is None or not math.isfinite(v) else round(v * self.scale, self.digits)

    def best(self, values: list[float | None]) -> float | None:
        vals = [x for x in map(self.shown, values) if x is not None]
        return max(vals) if vals else None

    def cell(self, v: float | None, best: float | None, suffix: str = "") -> Cell:
        return Cell(num(None if v is None else v * self.scale, self.digits) + suffix,
                    bold=v is not None and best is not None and self.shown(v) == best)


def build_table(
    colls: Sequence[Collection],
    baselines: dict[str, str] | None = None,
    test: str = "ttest",
    resamples: int = 10_000,
    seed: int = 0,
    *,
    percent: bool = False,
    correction: str = "none",
    ci: str = "none",
) -> Report:
    """Methods x (dataset, measure): one Collection per measure (the same runs), marks per measure and
    dataset after the correction; with ``ci``, a second table of the differences against the baseline and
    their 95% confidence intervals."""
    check_options(test, correction, ci)
    coll = colls[0]
    baselines = _baselines(coll, baselines)
    lay = _Layout(list(coll.datasets), [c.measure for c in colls],
                  {c.measure: measure_label(c.measure, c.rel_level) for c in colls}, *((100.0, 2) if percent else (1.0, 4)))
    methods = ordered_methods(coll)
    rows_by = {c.measure: measure_rows(c, baselines, test, resamples, seed, correction=correction, ci=ci) for c in colls}
    table = _main_table(lay, rows_by, methods)
    records = [_record(lay, rows_by, i, m, correction) for i, m in enumerate(methods)]
    if coll.first_stage in methods and len(methods) > 1 and methods[0] == coll.first_stage:
        table.rules.add(1)
    table.notes = _notes(lay, baselines, test, resamples, seed, correction=correction, percent=percent)
    tables = [table]
    if ci != "none" and baselines:
        tables.append(_ci_table(lay, rows_by, methods, ci, baselines))
    significance = {"test": test, "marks": {s: lvl for lvl, s in MARKS}, "baseline": baselines, "resamples": resamples,
                    "seed": seed, "two_sided": True, "correction": correction, "ci": ci}
    per_measure = {ms: {"measure": ms, "label": lay.labels[ms], "datasets": lay.datasets, "first_stage": coll.first_stage,
                        "significance": significance, "methods": [r.to_json() for r in rows_by[ms]]}
                   for ms in lay.measures}
    data = per_measure[lay.measures[0]] if not lay.several else {"measures": lay.measures, "tables": per_measure}
    return Report(tables, records, data)


def _main_table(lay: _Layout, rows_by: dict[str, list[MethodRow]], methods: list[str]) -> Table:
    """The display table: per method its figure per (dataset, measure) with the mark, the macro averages
    and the calls and rounds per query; the best figure of each column bold."""
    columns = ["Method"] + [lay.head(ds, ms) for ds in lay.datasets for ms in lay.measures]
    if lay.multi:
        columns += [f"Avg {lay.labels[ms]}" for ms in lay.measures] + ["Avg calls/q", "Avg rounds/q"]
    else:
        columns += ["Calls/q", "Rounds/q"]
    names = ", ".join(lay.labels[ms] for ms in lay.measures)
    table = Table(f"{names} and reranker calls per query", columns)
    best_ds = {(ds, ms): lay.best([r.datasets[ds] and r.datasets[ds].value for r in rows_by[ms]])
               for ds in lay.datasets for ms in lay.measures}
    best_macro = {ms: lay.best([r.macro for r in rows_by[ms]]) for ms in lay.measures}
    for i, m in enumerate(methods):
        cells: list[Cell | str] = [m]
        for ds in lay.datasets:
            for ms in lay.measures:
                e = rows_by[ms][i].datasets[ds]
                cells.append(MISSING if e is None else
                             lay.cell(e.value, best_ds[(ds, ms)], e.vs_baseline.mark if e.vs_baseline else ""))
        first = rows_by[lay.measures[0]][i]
        if lay.multi:
            cells += [lay.cell(rows_by[ms][i].macro, best_macro[ms]) for ms in lay.measures]
            cells += [num(first.macro_calls, 2), num(first.macro_rounds, 2)]
        else:
            only = first.datasets[lay.datasets[0]]
            cells += [num(only and only.calls, 2), num(only and only.rounds, 2)]
        table.add(*cells)
    return table


def _record(lay: _Layout, rows_by: dict[str, list[MethodRow]], i: int, method: str, correction: str) -> dict:
    """A method's flat CSV record: per dataset and measure the figure, calls, p-values, CI and mark; macros."""
    rec: dict = {"method": method}
    for ds in lay.datasets:
        for ms in lay.measures:
            e = rows_by[ms][i].datasets[ds]
            rec[f"{ds}_{ms}"] = None if e is None else e.value
            rec[f"{ds}_calls"] = None if e is None else e.calls
            vs = None if e is None else e.vs_baseline
            if vs is not None:
                pre = f"{ds}_{ms}_" if lay.several else f"{ds}_"
                rec[f"{pre}p_ttest"] = vs.p_ttest
                rec[f"{pre}p_permutation"] = vs.p_permutation
                if correction != "none":
                    rec[f"{pre}p_adjusted"] = vs.p_adjusted
                if vs.ci is not None:
                    rec[f"{pre}ci_low"], rec[f"{pre}ci_high"] = vs.ci.low, vs.ci.high
                rec[f"{pre}mark"] = vs.mark
    first = rows_by[lay.measures[0]][i]
    for ms in lay.measures:
        rec[f"macro_{ms}"] = rows_by[ms][i].macro
    rec["macro_calls"] = first.macro_calls
    rec["macro_rounds"] = first.macro_rounds
    return rec


def _notes(lay: _Layout, baselines: dict[str, str], test: str, resamples: int, seed: int, *, correction: str,
           percent: bool) -> list[str]:
    """What the marks mean (test, correction, baseline) and what the figures are."""
    notes = []
    if baselines:
        names = sorted(set(baselines.values()))
        against = names[0] if len(names) == 1 else ", ".join(f"{d}: {b}" for d, b in baselines.items())
        levels = (f"{UP}/{DOWN} better/worse than the baseline with "
                  + ", ".join(f"{s} p < {lvl:g}" for lvl, s in sorted(MARKS, key=lambda x: -x[0])))
        extra = f", {resamples} sign flips, seed {seed}" if test == "permutation" else ""
        corrected = (f", {correction.capitalize()}-corrected over the methods shown (the rows of this table) "
                     "compared on each dataset" + (" and measure" if lay.several else "")) if correction != "none" else ""
        notes.append(f"{levels}: {TEST_NAMES[test]} (two-sided{extra}{corrected}) against {against} on the judged queries.")
        missing = [d for d in lay.datasets if d not in baselines]
        if missing:
            notes.append(f"No baseline on {', '.join(missing)}: no marks there.")
    what = ", ".join(lay.labels[ms] for ms in lay.measures)
    notes.append(
        f"{what}{' x 100' if percent else ''}: mean over judged queries (missing -> 0); "
        + ("Avg: unweighted mean over datasets; " if lay.multi else "")
        + f"calls/q and rounds/q (sequential reranker batches: the latency) from the stats files "
        f"({MISSING} = no stats); bold = best."
    )
    return notes


def _ci_table(lay: _Layout, rows_by: dict[str, list[MethodRow]], methods: list[str], ci: str,
              baselines: dict[str, str]) -> Table:
    """Differences against the baseline with their 95% confidence intervals."""
    names = sorted(set(baselines.values()))
    table = Table(f"Difference against {names[0] if len(names) == 1 else 'the baseline'} [95% CI]",
                  ["Method"] + [lay.head(ds, ms) for ds in lay.datasets for ms in lay.measures])
    scale, digits = lay.scale, lay.digits
    for i, m in enumerate(methods):
        cells: list[Cell | str] = [m]
        for ds in lay.datasets:
            for ms in lay.measures:
                e = rows_by[ms][i].datasets[ds]
                vs = None if e is None else e.vs_baseline
                if vs is None or vs.delta is None:
                    cells.append(MISSING)
                    continue
                lo, hi = (vs.ci.low, vs.ci.high) if vs.ci is not None else (None, None)
                span = "" if lo is None else f" [{lo * scale:+.{digits}f}, {hi * scale:+.{digits}f}]"
                cells.append(f"{vs.delta * scale:+.{digits}f}{span}{vs.mark}")
        table.add(*cells)
    table.notes = [f"Mean paired difference over the judged queries; 95% interval by "
                   f"{'the paired t distribution' if ci == 't' else 'a seeded paired bootstrap (percentile)'}."]
    return table
