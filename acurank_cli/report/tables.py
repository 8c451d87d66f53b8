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
from .significance import MARKS, mark, paired_ttest, paired_values, permutation_test

TEST_NAMES = {"ttest": "paired t-test", "permutation": "randomisation test"}


def measure_label(measure: str) -> str:
    """Display name: ndcg_cut_10 -> nDCG@10, P_10 -> P@10, recall_100 -> R@100, map -> MAP."""
    for prefix, label in (("ndcg_cut_", "nDCG@"), ("P_", "P@"), ("recall_", "R@")):
        if measure.startswith(prefix):
            return label + measure[len(prefix):]
    return {"map": "MAP", "recip_rank": "MRR", "ndcg": "nDCG"}.get(measure, measure)


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


def compare(coll: Collection, dataset: str, method: str, baseline: str, resamples: int, seed: int) -> dict:
    """Both paired tests of ``method`` against ``baseline`` on one dataset."""
    qids, a, b = paired_values(coll.per_query(dataset, method), coll.per_query(dataset, baseline))
    t = paired_ttest(a, b)
    p = permutation_test(a, b, resamples=resamples, seed=seed)
    return {
        "baseline": baseline,
        "queries": len(qids),
        "delta": (sum(a) - sum(b)) / len(qids) if qids else None,
        "t": t.statistic,
        "p_ttest": t.pvalue,
        "p_permutation": p.pvalue,
    }


def build_main_table(
    coll: Collection,
    baselines: dict[str, str] | None = None,
    test: str = "ttest",
    resamples: int = 10_000,
    seed: int = 0,
    percent: bool = False,
) -> Report:
    """Compute every cell of the method x dataset table (see the module docstring)."""
    if test not in TEST_NAMES:
        raise InputError(f"--test must be ttest or permutation, not {test!r}")
    baselines = {ds: b for ds, b in (baselines or {}).items() if ds in coll.datasets}
    for b in set(baselines.values()):
        if not any(coll.has(ds, b) for ds in coll.datasets):
            raise InputError(f"--baseline {b!r} has no run (methods: {', '.join(coll.methods())})")
    baselines = {ds: b for ds, b in baselines.items() if coll.has(ds, b)}
    datasets = list(coll.datasets)
    methods = ordered_methods(coll)
    label = measure_label(coll.measure)
    scale, digits = (100.0, 2) if percent else (1.0, 4)
    rows: list[dict] = []
    for m in methods:
        per_ds: dict[str, dict | None] = {}
        for ds in datasets:
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
                cmp = compare(coll, ds, m, b, resamples, seed)
                cmp["mark"] = mark(cmp["p_ttest" if test == "ttest" else "p_permutation"])
                entry["vs_baseline"] = cmp
            per_ds[ds] = entry
        macro_score = macro([e[coll.measure] if e else None for e in per_ds.values()])
        macro_calls = macro([e["calls"] if e else None for e in per_ds.values()])
        macro_rounds = macro([e["rounds"] if e else None for e in per_ds.values()])
        rows.append({"method": m, "datasets": per_ds,
                     "macro": {coll.measure: macro_score, "calls": macro_calls, "rounds": macro_rounds}})

    def best(values: list[float | None]) -> float | None:
        vals = [round(v * scale, digits) for v in values if v is not None and math.isfinite(v)]
        return max(vals) if vals else None

    best_ds = {ds: best([r["datasets"][ds][coll.measure] if r["datasets"][ds] else None for r in rows]) for ds in datasets}
    best_macro = best([r["macro"][coll.measure] for r in rows])
    multi = len(datasets) > 1
    columns = ["Method"] + [f"{ds} {label}" if not multi else ds for ds in datasets]
    if multi:
        columns += [f"Avg {label}", "Avg calls/q", "Avg rounds/q"]
    else:
        columns += ["Calls/q", "Rounds/q"]
    title = f"{label} and reranker calls per query"
    table = Table(title, columns)
    records = []
    for r in rows:
        cells: list[Cell | str] = [r["method"]]
        rec: dict = {"method": r["method"]}
        for ds in datasets:
            e = r["datasets"][ds]
            if e is None:
                cells.append(MISSING)
                rec.update({f"{ds}_{coll.measure}": None, f"{ds}_calls": None})
                continue
            v = e[coll.measure]
            sig = e.get("vs_baseline", {}).get("mark", "")
            cells.append(Cell(num(v * scale, digits) + sig, bold=best_ds[ds] is not None and round(v * scale, digits) == best_ds[ds]))
            rec[f"{ds}_{coll.measure}"] = v
            rec[f"{ds}_calls"] = e["calls"]
            if "vs_baseline" in e:
                rec[f"{ds}_p_ttest"] = e["vs_baseline"]["p_ttest"]
                rec[f"{ds}_p_permutation"] = e["vs_baseline"]["p_permutation"]
                rec[f"{ds}_mark"] = sig
        mv, mc = r["macro"][coll.measure], r["macro"]["calls"]
        if multi:
            cells.append(Cell(num(None if mv is None else mv * scale, digits),
                              bold=mv is not None and best_macro is not None and round(mv * scale, digits) == best_macro))
            cells.append(num(mc, 2))
            cells.append(num(r["macro"]["rounds"], 2))
        else:
            only = r["datasets"][datasets[0]]
            cells.append(num(only["calls"] if only else None, 2))
            cells.append(num(only["rounds"] if only else None, 2))
        rec[f"macro_{coll.measure}"] = mv
        rec["macro_calls"] = mc
        rec["macro_rounds"] = r["macro"]["rounds"]
        table.add(*cells)
        records.append(rec)
    if coll.first_stage in methods and len(methods) > 1 and methods[0] == coll.first_stage:
        table.rules.add(1)
    notes = []
    if baselines:
        names = sorted(set(baselines.values()))
        against = names[0] if len(names) == 1 else ", ".join(f"{d}: {b}" for d, b in baselines.items())
        levels = ", ".join(f"{s} p < {lvl:g}" for lvl, s in sorted(MARKS, key=lambda x: -x[0]))
        extra = f", {resamples} sign flips, seed {seed}" if test == "permutation" else ""
        notes.append(f"{levels}: {TEST_NAMES[test]} (two-sided{extra}) against {against} on the judged queries.")
        missing = [d for d in datasets if d not in baselines]
        if missing:
            notes.append(f"No baseline on {', '.join(missing)}: no marks there.")
    notes.append(
        f"{label}{' x 100' if percent else ''}: mean over judged queries (missing -> 0); "
        + ("Avg: unweighted mean over datasets; " if multi else "")
        + f"calls/q and rounds/q (sequential reranker batches: the latency) from the stats files "
        f"({MISSING} = no stats); bold = best."
    )
    table.notes = notes
    data = {
        "measure": coll.measure,
        "label": label,
        "datasets": datasets,
        "first_stage": coll.first_stage,
        "significance": {
            "test": test,
            "marks": {s: lvl for lvl, s in MARKS},
            "baseline": baselines,
            "resamples": resamples,
            "seed": seed,
            "two_sided": True,
        },
        "methods": rows,
    }
    return Report([table], records, data)
