"""Adaptive allocation: does a method spend its reranker calls on the hard queries?

Per query we relate the method's calls to query difficulty, measured two ways: WIG, a pre-reranking
query-performance predictor computed from the first-stage scores, and nDCG@10 itself. The easy/hard
split follows the AcuRank paper's appendix table: queries are split at the baseline's mean nDCG@10
(easy: baseline nDCG@10 >= that mean, hard: below), and per bucket we report the number of queries,
both methods' mean nDCG@10 and mean calls, and the differences.

WIG (weighted information gain; Zhou & Croft, "Query performance prediction in web search
environments", SIGIR 2007) is, in its usual form,

    WIG(q) = 1/k * sum_{d in D_k} (score(q, d) - score(q, C)) / sqrt(|q|),

with D_k the top k documents, score(q, C) the query's score against the whole collection and |q| the
number of query terms. With only a first-stage run at hand, this module uses, for a query whose
candidate scores are s_1 >= s_2 >= ... >= s_n:

    x_i  = log(1 + s_i)                      (the paper's log(1 + s) transform of BM25 scores)
    ref  = (1/n) * sum_{i=1..n} x_i          (corpus-level reference: there is no collection score,
                                              so the mean over the full candidate list stands in)
    WIG  = (1/k') * sum_{i=1..k'} (x_i - ref) / sqrt(|q|),   k' = min(k, n), k = 50 by default,

where |q| is the number of word tokens (``\\w+``, lower-cased) of the query text when topics are
available, and 1 otherwise (the report then says the WIG is unnormalised). Higher WIG predicts an
easier query. Scores must exceed -1 for the transform.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence

from ..errors import InputError
from .collection import Collection
from .panels import grid_shape, panel_axes
from .render import Table, num, pval, save_figure
from .significance import spearman
from .render import Report
from .tables import measure_label


def query_length(text: str) -> int:
    """|q|: the number of word tokens (``\\w+``) in the lower-cased query text (at least 1)."""
    return max(1, len(re.findall(r"\w+", text.lower())))


def wig(scores: Sequence[float], k: int = 50, qlen: int | None = None) -> float:
    """WIG of one query from its first-stage scores (any order), as defined in the module docstring."""
    if k < 1:
        raise ValueError("k must be at least 1")
    if not scores:
        return float("nan")
    if min(scores) <= -1.0:
        raise InputError(f"first-stage score {min(scores)} <= -1: log(1 + s) is undefined")
    x = sorted((math.log1p(s) for s in scores), reverse=True)
    ref = statistics.fmean(x)
    top = x[: min(k, len(x))]
    return sum(v - ref for v in top) / len(top) / math.sqrt(qlen or 1)


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def analyse(
    coll: Collection, dataset: str, method: str, baseline: str | None = None, k: int = 50
) -> dict:
    """Correlations and the easy/hard split for ``method`` on ``dataset`` (see the module docstring).

    Queries analysed: judged, present in the method's stats and in the first-stage run."""
    label = measure_label(coll.measure, coll.rel_level)
    if not coll.has(dataset, coll.first_stage):
        if "/" in coll.first_stage or coll.first_stage.endswith(".run"):  # a file: the flag names a method
            raise InputError(f"--first-stage {coll.first_stage!r} names the first stage's method among the runs (e.g. "
                             f"bm25), not a file: give the file as --run {dataset}:bm25=PATH and --first-stage bm25")
        raise InputError(
            f"dataset {dataset!r} has no first-stage run {coll.first_stage!r} for WIG "
            f"(put {coll.first_stage}.run beside the runs or use --first-stage)"
        )
    calls = coll.per_query_cost(dataset, method, "calls")
    if calls is None:
        raise InputError(f"method {method!r} on {dataset!r} has no stats file (needed for calls)")
    first = coll.run(dataset, coll.first_stage).candidates()
    topics = coll.datasets[dataset].topics()
    eff = coll.per_query(dataset, method)
    qids = sorted(q for q in calls if q in first)
    if topics is not None:
        missing = [q for q in qids if q not in topics]
        if missing:
            raise InputError(f"topics of {dataset!r} lack query {missing[0]} (needed for WIG's |q|)")
    per_query = []
    for q in qids:
        qlen = query_length(topics[q]) if topics is not None else None
        per_query.append({"qid": q, "wig": wig([c.score for c in first[q]], k, qlen), "calls": calls[q], coll.measure: eff[q]})
    result = {
        "dataset": dataset,
        "method": method,
        "queries": len(qids),
        "wig_k": k,
        "wig_normalised": topics is not None,
        "correlations": {},
        "per_query": per_query,
    }
    c = [r["calls"] for r in per_query]
    pairs = [("calls vs WIG", [r["wig"] for r in per_query]), (f"calls vs {label} ({method})", [r[coll.measure] for r in per_query])]
    if baseline:
        if not coll.has(dataset, baseline):
            raise InputError(f"--baseline {baseline!r} has no run on dataset {dataset!r}")
        base_eff = coll.per_query(dataset, baseline)
        base_calls = coll.per_query_cost(dataset, baseline, "calls")
        for r in per_query:
            r[f"baseline_{coll.measure}"] = base_eff[r["qid"]]
            r["baseline_calls"] = None if base_calls is None else base_calls.get(r["qid"])
        pairs.append((f"calls vs {label} ({baseline})", [r[f"baseline_{coll.measure}"] for r in per_query]))
    for name, values in pairs:
        rho, p = spearman(c, values)
        result["correlations"][name] = {"rho": rho, "p": p, "n": len(c)}
    if baseline:
        result["split"] = split_easy_hard(per_query, coll.measure, baseline)
    return result


def split_easy_hard(per_query: list[dict], measure: str, baseline: str) -> dict:
    """Split at the baseline's mean over the analysed queries; per bucket means and deltas."""
    key_b = f"baseline_{measure}"
    threshold = _mean([r[key_b] for r in per_query])
    buckets = {
        "easy": [r for r in per_query if r[key_b] >= threshold],
        "hard": [r for r in per_query if r[key_b] < threshold],
        "all": per_query,
    }
    out = {"baseline": baseline, "threshold": threshold, "buckets": {}}
    for name, rows in buckets.items():
        eff_m = _mean([r[measure] for r in rows])
        eff_b = _mean([r[key_b] for r in rows])
        calls_m = _mean([r["calls"] for r in rows])
        bc = [r["baseline_calls"] for r in rows]
        calls_b = _mean(bc) if rows and all(v is not None for v in bc) else None
        out["buckets"][name] = {
            "queries": len(rows),
            f"baseline_{measure}": eff_b,
            measure: eff_m,
            f"delta_{measure}": None if eff_m is None or eff_b is None else eff_m - eff_b,
            "baseline_calls": calls_b,
            "calls": calls_m,
            "delta_calls": None if calls_m is None or calls_b is None else calls_m - calls_b,
        }
    return out


def build_allocation(
    coll: Collection, methods: Sequence[str], baselines: dict[str, str], k: int = 50
) -> Report:
    """Run :func:`analyse` over datasets x methods; tables for correlations and the split."""
    label = measure_label(coll.measure, coll.rel_level)
    results = [analyse(coll, ds, m, baselines.get(ds), k) for ds in coll.datasets for m in methods if coll.has(ds, m)]
    if not results:
        raise InputError("no method to analyse (give --method with a run that has stats)")
    corr = Table("Spearman correlation of reranker calls per query", ["Dataset", "Method", "Pair", "ρ", "p", "Queries"],
                 align=["l", "l", "l", "r", "r", "r"])
    records = []
    for r in results:
        for name, v in r["correlations"].items():
            corr.add(r["dataset"], r["method"], name, num(v["rho"], 3), pval(v["p"]), str(v["n"]))
            records.append({"table": "correlation", "dataset": r["dataset"], "method": r["method"], "pair": name,
                            "rho": v["rho"], "p": v["p"], "queries": v["n"]})
    corr.notes = [f"WIG from the {coll.first_stage} scores: log(1+s), k = {k}, reference = mean over the candidate list"
                  + ("" if all(r["wig_normalised"] for r in results) else "; no topics for some datasets: WIG not divided by sqrt(|q|)")
                  + ". Negative rho with WIG = more calls for harder queries."]
    tables = [corr]
    with_split = [r for r in results if "split" in r]
    if with_split:
        split = Table(
            f"Easy/hard split at the baseline's mean {label}",
            ["Dataset", "Method", "Bucket", "Queries", f"{label} base", f"{label} method", f"Δ {label}",
             "calls base", "calls method", "Δ calls"],
            align=["l", "l", "l"] + ["r"] * 7,
        )
        for r in with_split:
            s = r["split"]
            split.rules.add(len(split.rows))
            for bucket, v in s["buckets"].items():
                cells = [r["dataset"], r["method"], bucket, str(v["queries"]), num(v[f"baseline_{coll.measure}"]),
                         num(v[coll.measure]), _signed(v[f"delta_{coll.measure}"], 4), num(v["baseline_calls"], 2),
                         num(v["calls"], 2), _signed(v["delta_calls"], 2)]
                split.add(*cells)
                records.append({"table": "split", "dataset": r["dataset"], "method": r["method"], "baseline": s["baseline"],
                                "threshold": s["threshold"], "bucket": bucket, **v})
        split.rules.discard(0)
        per_ds = {r["dataset"]: f"{r['dataset']}: baseline {r['split']['baseline']}, split at {r['split']['threshold']:.4f}"
                  for r in with_split}
        split.notes = ["; ".join(per_ds.values()) + f" (easy: baseline {label} >= its mean over the analysed queries)."]
        tables.append(split)
    data = {"measure": coll.measure, "first_stage": coll.first_stage, "wig_k": k, "analyses": results}
    return Report(tables, records, data)


def _signed(v: float | None, digits: int) -> str:
    if v is None or not math.isfinite(v):
        return num(None)
    return f"{v:+.{digits}f}"


def plot_allocation(report: Report, outputs: Sequence[str], label: str = "nDCG@10") -> None:
    """Scatter of calls against WIG per (dataset, method); easy/hard colours when split."""
    import matplotlib

    matplotlib.use("Agg")
    from pathlib import Path

    import matplotlib.pyplot as plt

    analyses = report.data["analyses"]
    n = len(analyses)
    rows, cols = grid_shape(n)
    with plt.rc_context({"svg.hashsalt": "acurank", "font.size": 9}):
        fig = plt.figure(figsize=(4.8 * cols, 3.8 * rows))
        axes = panel_axes(fig, n, rows, cols)
        for ax, a in zip(axes, analyses):
            pq = a["per_query"]
            thr = a.get("split", {}).get("threshold")
            key_b = f"baseline_{report.data['measure']}"
            groups = [("easy", "C0", [r for r in pq if thr is not None and r[key_b] >= thr]),
                      ("hard", "C3", [r for r in pq if thr is not None and r[key_b] < thr])] if thr is not None else [("queries", "C0", pq)]
            for name, color, rs in groups:
                ax.scatter([r["wig"] for r in rs], [r["calls"] for r in rs], s=16, color=color, alpha=0.75, label=name)
            rho = a["correlations"]["calls vs WIG"]
            ax.set_title(f"{a['dataset']} {a['method']}: rho = {rho['rho']:.3f} (p = {pval(rho['p'])})")
            ax.set_xlabel("WIG (first stage)")
            ax.set_ylabel("reranker calls")
            ax.grid(True, alpha=0.3, linewidth=0.6)
            ax.legend(fontsize=8, frameon=False, title=f"by baseline {label}" if thr is not None else None, title_fontsize=8)
        fig.tight_layout()
        for out in outputs:
            path = Path(out)
            path.parent.mkdir(parents=True, exist_ok=True)
            save_figure(fig, path, dpi=200, metadata={"Date": None} if path.suffix.lower() == ".svg" else None)
        plt.close(fig)
