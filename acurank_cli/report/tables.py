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
from dataclasses import dataclass

from ..errors import InputError
from .collection import Collection, macro, natural_key
from .render import MISSING, Cell, Table, num
from .significance import (CI_KINDS, CORRECTIONS, MARKS, adjust, mark, paired_ci, paired_ttest, paired_values,
                           permutation_test)

TEST_NAMES = {"ttest": "paired t-test", "permutation": "randomisation test"}


def measure_label(measure: str, rel_level: int = 1) -> str:
    """Display name, the one eval's tables use: ir_measures' (ndcg_cut_10 -> nDCG@10, P_10 -> P@10,
    recall_100 -> R@100, map -> AP, recip_rank -> RR)."""
    from ..evaluation import display_name

    return display_name(measure, rel_level)


@dataclass
class Report:
    """A rendered-ready report: display tables, flat CSV records, a JSON-able dict."""

    tables: list[Table]
    records: list[dict]
    data: dict


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


def compare(coll: Collection, dataset: str, method: str, baseline: str, resamples: int, seed: int,
            ci: str = "none") -> dict:
    """Both paired tests of ``method`` against ``baseline`` on one dataset (and the CI of the difference)."""
    qids, a, b = paired_values(coll.per_query(dataset, method), coll.per_query(dataset, baseline))
    t = paired_ttest(a, b)
    p = permutation_test(a, b, resamples=resamples, seed=seed)
    out = {
        "baseline": baseline,
        "queries": len(qids),
        "delta": (sum(a) - sum(b)) / len(qids) if qids else None,
        "t": t.statistic,
        "p_ttest": t.pvalue,
        "p_permutation": p.pvalue,
    }
    if ci != "none":
        interval = paired_ci(a, b, ci, resamples=resamples, seed=seed)
        out["ci"] = {"kind": ci, "level": 0.95, "low": interval and interval[0], "high": interval and interval[1]}
    return out


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


def measure_rows(coll: Collection, baselines: dict[str, str], test: str, resamples: int, seed: int,
                 correction: str = "none", ci: str = "none") -> list[dict]:
    """Per method (table order): per dataset its mean measure, costs and comparison with the baseline, and
    the macro averages. The marks follow the chosen test's p-value after the correction, applied per dataset
    over every method compared with its baseline."""
    rows: list[dict] = []
    for m in ordered_methods(coll):
        per_ds: dict[str, dict | None] = {}
        for ds in coll.datasets:
            if not coll.has(ds, m):
                per_ds[ds] = None
                continue
            costs = {k: coll.mean_cost(ds, m, k) for k in ("calls", "tokens", "seconds", "rounds")}
            calls = coll.per_query_cost(ds, m, "calls")
            entry = {
                coll.measure: coll.mean(ds, m),
                "queries": len(coll.per_query(ds, m)),
                **costs,
                "stats_queries": None if calls is None else len(calls),
            }
            b = baselines.get(ds)
            if b and b != m:
                entry["vs_baseline"] = compare(coll, ds, m, b, resamples, seed, ci)
            per_ds[ds] = entry
        macro_score = macro([e[coll.measure] if e else None for e in per_ds.values()])
        macro_calls = macro([e["calls"] if e else None for e in per_ds.values()])
        macro_rounds = macro([e["rounds"] if e else None for e in per_ds.values()])
        rows.append({"method": m, "datasets": per_ds,
                     "macro": {coll.measure: macro_score, "calls": macro_calls, "rounds": macro_rounds}})
    key = "p_ttest" if test == "ttest" else "p_permutation"
    for ds in coll.datasets:
        family = [r["datasets"][ds]["vs_baseline"] for r in rows if r["datasets"][ds] and "vs_baseline" in r["datasets"][ds]]
        for cmp, adjusted in zip(family, adjust([c[key] for c in family], correction)):
            cmp["p_adjusted"] = adjusted
            cmp["correction"] = correction
            sig = mark(adjusted)
            # with its direction: better (▲) or worse (▼) than the baseline, as ranx's reports mark it
            cmp["mark"] = (UP if (cmp.get("delta") or 0) > 0 else DOWN) + sig if sig else ""
    return rows


def _baselines(coll: Collection, baselines: dict[str, str] | None) -> dict[str, str]:
    baselines = {ds: b for ds, b in (baselines or {}).items() if ds in coll.datasets}
    for b in set(baselines.values()):
        if not any(coll.has(ds, b) for ds in coll.datasets):
            raise InputError(f"--baseline {b!r} has no run (methods: {', '.join(coll.methods())})")
    return {ds: b for ds, b in baselines.items() if coll.has(ds, b)}


def build_main_table(coll: Collection, baselines: dict[str, str] | None = None, test: str = "ttest",
                     resamples: int = 10_000, seed: int = 0, percent: bool = False, correction: str = "none",
                     ci: str = "none") -> Report:
    """The method x dataset table for one measure (see the module docstring)."""
    return build_table([coll], baselines, test, resamples, seed, percent, correction, ci)


def build_table(
    colls: Sequence[Collection],
    baselines: dict[str, str] | None = None,
    test: str = "ttest",
    resamples: int = 10_000,
    seed: int = 0,
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
    datasets = list(coll.datasets)
    methods = ordered_methods(coll)
    measures = [c.measure for c in colls]
    labels = {c.measure: measure_label(c.measure, c.rel_level) for c in colls}
    scale, digits = (100.0, 2) if percent else (1.0, 4)
    rows_by = {c.measure: measure_rows(c, baselines, test, resamples, seed, correction, ci) for c in colls}

    def best(values: list[float | None]) -> float | None:
        vals = [round(v * scale, digits) for v in values if v is not None and math.isfinite(v)]
        return max(vals) if vals else None

    multi = len(datasets) > 1
    several = len(measures) > 1

    def head(ds: str, ms: str) -> str:
        if not several:
            return ds if multi else f"{ds} {labels[ms]}"
        return f"{ds} {labels[ms]}" if multi else labels[ms]

    columns = ["Method"] + [head(ds, ms) for ds in datasets for ms in measures]
    if multi:
        columns += [f"Avg {labels[ms]}" for ms in measures] + ["Avg calls/q", "Avg rounds/q"]
    else:
        columns += ["Calls/q", "Rounds/q"]
    title = (f"{labels[measures[0]]} and reranker calls per query" if not several
             else f"{', '.join(labels[ms] for ms in measures)} and reranker calls per query")
    table = Table(title, columns)
    best_ds = {(ds, ms): best([r["datasets"][ds][ms] if r["datasets"][ds] else None for r in rows_by[ms]])
               for ds in datasets for ms in measures}
    best_macro = {ms: best([r["macro"][ms] for r in rows_by[ms]]) for ms in measures}
    records = []
    for i, m in enumerate(methods):
        cells: list[Cell | str] = [m]
        rec: dict = {"method": m}
        first = rows_by[measures[0]][i]
        for ds in datasets:
            for ms in measures:
                e = rows_by[ms][i]["datasets"][ds]
                if e is None:
                    cells.append(MISSING)
                    rec.update({f"{ds}_{ms}": None, f"{ds}_calls": None})
                    continue
                v = e[ms]
                vs = e.get("vs_baseline", {})
                sig = vs.get("mark", "")
                cells.append(Cell(num(v * scale, digits) + sig,
                                  bold=best_ds[(ds, ms)] is not None and round(v * scale, digits) == best_ds[(ds, ms)]))
                rec[f"{ds}_{ms}" if several else f"{ds}_{ms}"] = v
                rec[f"{ds}_calls"] = e["calls"]
                if vs:
                    pre = f"{ds}_{ms}_" if several else f"{ds}_"
                    rec[f"{pre}p_ttest"] = vs["p_ttest"]
                    rec[f"{pre}p_permutation"] = vs["p_permutation"]
                    if correction != "none":
                        rec[f"{pre}p_adjusted"] = vs["p_adjusted"]
                    if "ci" in vs:
                        rec[f"{pre}ci_low"], rec[f"{pre}ci_high"] = vs["ci"]["low"], vs["ci"]["high"]
                    rec[f"{pre}mark"] = sig
        mc = first["macro"]["calls"]
        if multi:
            for ms in measures:
                mv = rows_by[ms][i]["macro"][ms]
                cells.append(Cell(num(None if mv is None else mv * scale, digits),
                                  bold=mv is not None and best_macro[ms] is not None and round(mv * scale, digits) == best_macro[ms]))
            cells.append(num(mc, 2))
            cells.append(num(first["macro"]["rounds"], 2))
        else:
            only = first["datasets"][datasets[0]]
            cells.append(num(only["calls"] if only else None, 2))
            cells.append(num(only["rounds"] if only else None, 2))
        for ms in measures:
            rec[f"macro_{ms}"] = rows_by[ms][i]["macro"][ms]
        rec["macro_calls"] = mc
        rec["macro_rounds"] = first["macro"]["rounds"]
        table.add(*cells)
        records.append(rec)
    if coll.first_stage in methods and len(methods) > 1 and methods[0] == coll.first_stage:
        table.rules.add(1)
    notes = []
    if baselines:
        names = sorted(set(baselines.values()))
        against = names[0] if len(names) == 1 else ", ".join(f"{d}: {b}" for d, b in baselines.items())
        levels = (f"{UP}/{DOWN} better/worse than the baseline with "
                  + ", ".join(f"{s} p < {lvl:g}" for lvl, s in sorted(MARKS, key=lambda x: -x[0])))
        extra = f", {resamples} sign flips, seed {seed}" if test == "permutation" else ""
        corrected = (f", {correction.capitalize()}-corrected over the methods shown (the rows of this table) "
                     "compared on each dataset" + (" and measure" if several else "")) if correction != "none" else ""
        notes.append(f"{levels}: {TEST_NAMES[test]} (two-sided{extra}{corrected}) against {against} on the judged queries.")
        missing = [d for d in datasets if d not in baselines]
        if missing:
            notes.append(f"No baseline on {', '.join(missing)}: no marks there.")
    what = ", ".join(labels[ms] for ms in measures)
    notes.append(
        f"{what}{' x 100' if percent else ''}: mean over judged queries (missing -> 0); "
        + ("Avg: unweighted mean over datasets; " if multi else "")
        + f"calls/q and rounds/q (sequential reranker batches: the latency) from the stats files "
        f"({MISSING} = no stats); bold = best."
    )
    table.notes = notes
    tables = [table]
    if ci != "none" and baselines:
        tables.append(_ci_table(rows_by, methods, datasets, measures, labels, head, scale, digits, ci, baselines))
    significance = {"test": test, "marks": {s: lvl for lvl, s in MARKS}, "baseline": baselines, "resamples": resamples,
                    "seed": seed, "two_sided": True, "correction": correction, "ci": ci}
    per_measure = {ms: {"measure": ms, "label": labels[ms], "datasets": datasets, "first_stage": coll.first_stage,
                        "significance": significance, "methods": rows_by[ms]} for ms in measures}
    data = per_measure[measures[0]] if not several else {"measures": measures, "tables": per_measure}
    return Report(tables, records, data)


def _ci_table(rows_by, methods, datasets, measures, labels, head, scale, digits, ci, baselines) -> Table:
    """Differences against the baseline with their 95% confidence intervals."""
    names = sorted(set(baselines.values()))
    table = Table(f"Difference against {names[0] if len(names) == 1 else 'the baseline'} [95% CI]",
                  ["Method"] + [head(ds, ms) for ds in datasets for ms in measures])
    for i, m in enumerate(methods):
        cells: list[Cell | str] = [m]
        for ds in datasets:
            for ms in measures:
                e = rows_by[ms][i]["datasets"][ds]
                vs = (e or {}).get("vs_baseline")
                if not vs or vs.get("delta") is None:
                    cells.append(MISSING)
                    continue
                c = vs.get("ci") or {}
                lo, hi = c.get("low"), c.get("high")
                span = "" if lo is None else f" [{lo * scale:+.{digits}f}, {hi * scale:+.{digits}f}]"
                cells.append(f"{vs['delta'] * scale:+.{digits}f}{span}{vs.get('mark', '')}")
        table.add(*cells)
    table.notes = [f"Mean paired difference over the judged queries; 95% interval by "
                   f"{'the paired t distribution' if ci == 't' else 'a seeded paired bootstrap (percentile)'}."]
    return table
