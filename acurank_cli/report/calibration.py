"""``acurank report calibration``: how well a run's P(relevant) (``rerank --calibration``, in its stats) matches
the qrels: expected calibration error, Brier score and the reliability diagram; the cut's F1 against the oracle
cut's and the fixed top-k's; how P(no relevant document) separates the queries with nothing relevant."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from pathlib import Path

from ..errors import InputError
from ..records import StatsRecord
from ..evaluation import auc, brier, calibration_error, f1_at, f1_kept, oracle_f1
from .render import Report, Table, num, save_figure


def calibration_report(stats: Mapping[str, StatsRecord], run: Mapping[str, Mapping[str, float]],
                       qrels: Mapping[str, Mapping[str, int]], grade: int | None = None, bins: int = 10,
                       name: str = "run") -> Report:
    """The report over the queries that have a relevance record and are judged in ``qrels``; ``grade`` (None: the
    map's own) is the grade relevant means."""
    rows = [(q, r) for q, r in stats.items() if r.relevance is not None]
    if not rows:
        raise InputError("the stats hold no P(relevant): rerank with --calibration MAP.json first", name)
    grades = {r.relevance.grade for _, r in rows}
    if grade is None and len(grades) > 1:
        raise InputError(f"the stats mix maps of grades {sorted(grades)}; give --relevant-grade", name)
    g = grade if grade is not None else grades.pop()
    ps, ys, f1_cut, f1_oracle, per_k, none_pos, none_neg = [], [], [], [], {}, [], []
    cut_queries = 0
    judged = [(q, r) for q, r in rows if q in qrels]
    if not judged:
        raise InputError("no query of the stats is judged in the qrels", name)
    depth = max(len(r.relevance.p) for _, r in judged)
    for q, r in judged:
        grades_q = qrels[q]
        docids = list(r.relevance.p)  # rank order (by mu)
        labels = [int(grades_q.get(d, 0) >= g) for d in docids]
        ps.extend(r.relevance.p[d] for d in docids)
        ys.extend(labels)
        f1_oracle.append(oracle_f1(labels))
        for k in range(depth + 1):
            per_k.setdefault(k, []).append(f1_at(labels, k))
        if r.relevance.kept is not None:
            cut_queries += 1
            kept = run.get(q, {})
            f1_cut.append(f1_kept(labels, [d in kept for d in docids]))
        (none_neg if sum(labels) else none_pos).append(r.relevance.p_none)
    ece, table = calibration_error(ps, ys, bins)
    score = brier(ps, ys)
    mean = lambda xs: sum(xs) / len(xs) if xs else None  # noqa: E731
    best_k = max(per_k, key=lambda k: (mean(per_k[k]), -k))
    data = {
        "queries": len(judged), "documents": len(ps), "grade": g, "base_rate": mean(ys), "mean_p": mean(ps),
        "ece": ece, "brier": score, "bins": table,
        "f1": {"cut": mean(f1_cut), "cut_queries": cut_queries, "oracle": mean(f1_oracle),
               "best_fixed_k": best_k, "best_fixed_k_f1": mean(per_k[best_k]),
               "fixed_k": {str(k): mean(v) for k, v in per_k.items() if k in (1, 3, 5, 10, 20)}},
        "nothing_here": {"queries_without_relevant": len(none_pos), "auc_p_none": auc(none_pos, none_neg)},
    }
    return _report(name, data)


def _report(name: str, data: dict[str, Any]) -> Report:
    """The report's tables (the summary, the reliability bins) and records, from its figures (``data``)."""
    f1, none = data["f1"], data["nothing_here"]
    summary = Table(f"{name}: P(relevant) (grade >= {data['grade']}) on {data['queries']} judged queries, "
                    f"{data['documents']} documents", ["Measure", "Value"])
    summary.add("expected calibration error", num(data["ece"]))
    summary.add("Brier score", num(data["brier"]))
    summary.add("share relevant / mean P(relevant)", f"{num(data['base_rate'])} / {num(data['mean_p'])}")
    cut_queries = f1["cut_queries"]
    summary.add("F1 at the run's cut" + (f" ({cut_queries} queries cut)" if cut_queries else " (no cut)"),
                num(f1["cut"]))
    summary.add("F1 at the oracle cut", num(f1["oracle"]))
    summary.add(f"F1 at the best fixed top-k here (k = {f1['best_fixed_k']}; chosen on these queries)",
                num(f1["best_fixed_k_f1"]))
    summary.add(f"ROC AUC of P(none) for the {none['queries_without_relevant']} queries with nothing relevant",
                num(none["auc_p_none"]))
    reliability = Table("reliability (equal-width bins of P(relevant))", ["Bin", "Documents", "Mean P", "Share relevant"])
    for b in data["bins"]:
        reliability.add(f"[{b['lo']:.1f}, {b['hi']:.1f})", str(b["documents"]), num(b["p"]), num(b["relevant"]))
    records = [{"bin_lo": b["lo"], "bin_hi": b["hi"], "documents": b["documents"], "mean_p": b["p"],
                "share_relevant": b["relevant"]} for b in data["bins"]]
    return Report([summary, reliability], records, data)


def plot_reliability(report: Report, paths: Sequence[Path], title: str) -> list[str]:
    """The reliability diagram: mean P(relevant) against the share relevant per bin (the diagonal is calibrated),
    bins' documents as bars below."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bins = report.data["bins"]
    fig, (ax, bar) = plt.subplots(2, 1, figsize=(5, 6), sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    ax.plot([0, 1], [0, 1], ls="--", color="grey", lw=1, label="calibrated")
    ax.plot([b["p"] for b in bins], [b["relevant"] for b in bins], marker="o", label="this run")
    ax.set_ylabel("share relevant")
    ax.set_title(f"{title}\nECE {report.data['ece']:.4f}, Brier {report.data['brier']:.4f}", fontsize=9)
    ax.legend(loc="upper left", fontsize=8)
    bar.bar([(b["lo"] + b["hi"]) / 2 for b in bins], [b["documents"] for b in bins], width=0.09, color="tab:blue")
    bar.set_xlabel("P(relevant)")
    bar.set_ylabel("documents")
    bar.set_yscale("log")
    fig.tight_layout()
    written = []
    for p in paths:
        save_figure(fig, p, dpi=120)  # written whole
        written.append(str(p))
    plt.close(fig)
    return written
