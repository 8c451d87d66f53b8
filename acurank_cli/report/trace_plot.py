"""Rating traces (``acurank rerank --trace``): mu +/- sigma per iteration for one query, and the
paper-style per-iteration table (mu, sigma, s = P(x > t), rank) for chosen documents.

A trace file holds one JSON record per query and AcuRank iteration:
``{"qid", "method", "iteration", "phase", "t", "docs": [{"docid", "mu", "sigma", "s", "rank"}]}`` (and, with
``--pivot``, ``"pivot": {"mu", "sigma"}``: the reference player's rating, drawn dotted with its band);
iteration 0 is the state after the initial pass. When a query's iteration counter goes back (a
resumed run recorded the query again), the later sequence replaces the earlier one.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from pathlib import Path

from ..errors import InputError
from ..io.sources import open_text, source_name
from ..io.line_records import trace_record
from ..records import DocRating, TraceRecord
from .render import MISSING, Table, num, save_figure
from .render import Report


def read_trace(src: str | Path, qid: str, method: str | None = None) -> tuple[str, list[TraceRecord]]:
    """The steps of ``qid`` (and ``method`` when the file holds several methods for that query)."""
    name = source_name(src)
    seqs: dict[str, list[TraceRecord]] = {}
    qids_seen: list[str] = []
    with open_text(src) as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip() or (qid not in line and len(qids_seen) >= 8):
                continue  # cheap skip: a record of this query must contain its qid
            try:
                rec = json.loads(line)
                q = str(rec["qid"])
            except (json.JSONDecodeError, KeyError, TypeError):
                raise InputError("bad trace record (expected JSON with 'qid')", name, lineno) from None
            if q != qid:
                if len(qids_seen) < 8 and q not in qids_seen:
                    qids_seen.append(q)
                continue
            try:
                step = trace_record(rec)
            except (KeyError, TypeError, ValueError):
                raise InputError(
                    "bad trace record (expected iteration, phase, t and docs [{docid, mu, sigma, s, rank}])", name, lineno
                ) from None
            m = step.method
            seq = seqs.setdefault(m, [])
            if seq and step.iteration <= seq[-1].iteration:
                seq.clear()  # the counter went back: a resumed run recorded the query again
            seq.append(step)
    if not seqs:
        hint = f" (queries in the file include {', '.join(qids_seen)})" if qids_seen else ""
        raise InputError(f"query {qid!r} not in the trace{hint}", name)
    if method is not None:
        if method not in seqs:
            raise InputError(f"query {qid!r}: no trace for method {method!r} (found {', '.join(seqs)})", name)
        return method, seqs[method]
    if len(seqs) > 1:
        raise InputError(f"query {qid!r} has traces of several methods ({', '.join(seqs)}): choose one with --method", name)
    return next(iter(seqs.items()))


def _rating(r: DocRating) -> dict:
    """A rating as the report's records give it."""
    return {"mu": r.mu, "sigma": r.sigma, "s": r.s, "rank": r.rank}


def x_values(steps: Sequence[TraceRecord]) -> tuple[list[int], str]:
    """x positions: the iteration counter when it strictly increases, else the step number."""
    its = [s.iteration for s in steps]
    if all(b > a for a, b in itertools.pairwise(its)):
        return its, "iteration (adaptive groups so far; 0 = after the initial pass)"
    return list(range(len(steps))), "trace step (0 = after the initial pass)"


def top_docids(steps: Sequence[TraceRecord], top: int) -> list[str]:
    """The ``top`` documents by final mu (ties by docid)."""
    final = steps[-1].by_docid
    return sorted(final, key=lambda d: (-final[d].mu, d))[:top]


def plot_trace(
    steps: Sequence[TraceRecord], qid: str, method: str, outputs: Sequence[str | Path], top: int = 4,
    docids: Sequence[str] = (),
) -> list[Path]:
    """mu per iteration with a +/- sigma band for the top documents (and any --docid), t dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chosen = list(dict.fromkeys(list(top_docids(steps, top)) + list(docids)))
    xs, xlabel = x_values(steps)
    final = steps[-1].by_docid
    with plt.rc_context({"svg.hashsalt": "acurank", "font.size": 9}):
        fig, ax = plt.subplots(figsize=(9.5, 5.2))
        cmap = plt.get_cmap("tab10" if len(chosen) <= 10 else "tab20")
        for i, d in enumerate(chosen):
            pts = [(x, s.by_docid[d]) for x, s in zip(xs, steps) if d in s.by_docid]
            if not pts:
                continue
            px = [p[0] for p in pts]
            mu = [p[1].mu for p in pts]
            sd = [p[1].sigma for p in pts]
            color = cmap(i % cmap.N)
            rank = final[d].rank if d in final else None
            label = f"{rank if rank is not None else '?'}. {d}"
            ax.plot(px, mu, marker="o", markersize=2.5, linewidth=1.3, color=color, label=label, zorder=3)
            ax.fill_between(px, [m - s for m, s in zip(mu, sd)], [m + s for m, s in zip(mu, sd)],
                            color=color, alpha=0.10, linewidth=0, zorder=2)
        pv = [(x, s.pivot) for x, s in zip(xs, steps) if s.pivot is not None]
        if pv:  # --pivot: the reference player, rated in the same game (the relevance boundary it stands for)
            px, pmu, psd = [p[0] for p in pv], [p[1][0] for p in pv], [p[1][1] for p in pv]
            ax.plot(px, pmu, linestyle=":", marker="s", markersize=2.5, color="dimgray", linewidth=1.3, label="pivot",
                    zorder=4)
            ax.fill_between(px, [m - s for m, s in zip(pmu, psd)], [m + s for m, s in zip(pmu, psd)], color="gray",
                            alpha=0.12, linewidth=0, zorder=1)
        tx = [(x, s.t) for x, s in zip(xs, steps) if s.t is not None and math.isfinite(s.t)]
        if tx:
            ax.plot([p[0] for p in tx], [p[1] for p in tx], linestyle="--", color="black", linewidth=1.1,
                    label="threshold t", zorder=4)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("rating mu (band: mu ± sigma)")
        ax.set_title(f"query {qid}, {method}: top {min(top, len(final))} documents by final mu")
        ax.grid(True, alpha=0.3, linewidth=0.6)
        if len(xs) <= 25:
            ax.set_xticks(xs)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7.5, frameon=False,
                  title="final rank. docid", title_fontsize=8)
        fig.tight_layout()
        written = []
        for out in outputs:
            path = Path(out)
            if path.suffix.lower() not in (".png", ".svg", ".pdf"):
                raise InputError(f"--out {out}: plot files must end in .png, .svg or .pdf")
            path.parent.mkdir(parents=True, exist_ok=True)
            save_figure(fig, path, dpi=200, metadata={"Date": None} if path.suffix.lower() == ".svg" else None)
            written.append(path)
        plt.close(fig)
    return written


def build_trace_report(steps: Sequence[TraceRecord], qid: str, method: str, docids: Sequence[str] = (), top: int = 4) -> Report:
    """With ``docids``: per document, one row per iteration (mu, sigma, s, rank), as the paper's
    case-study table. Without: the top documents at the last iteration, with their rank after the
    initial pass."""
    data = {
        "qid": qid,
        "method": method,
        "iterations": [{"iteration": s.iteration, "phase": s.phase.value, "t": s.t,
                        **({} if s.pivot is None else {"pivot": {"mu": s.pivot[0], "sigma": s.pivot[1]}})}
                       for s in steps],
    }
    records = []
    if docids:
        for d in docids:
            if not any(d in s.by_docid for s in steps):
                raise InputError(f"--docid {d!r} is not among query {qid}'s traced documents")
        table = Table(f"query {qid}, {method}: ratings per iteration",
                      ["Docid", "Iteration", "Phase", "t", "μ", "σ", "s = P(x>t)", "Rank"],
                      align=["l", "r", "l", "r", "r", "r", "r", "r"])
        data["docs"] = {}
        for d in docids:
            table.rules.add(len(table.rows))
            data["docs"][d] = []
            for s in steps:
                r = s.by_docid.get(d)
                if r is None:
                    continue
                cells = [d, str(s.iteration), s.phase.value, num(s.t, 3), num(r.mu, 3), num(r.sigma, 3), num(r.s, 4),
                         str(r.rank)]
                table.add(*cells)
                row = {"iteration": s.iteration, "phase": s.phase.value, "t": s.t, **_rating(r)}
                data["docs"][d].append(row)
                records.append({"qid": qid, "method": method, "docid": d, **row})
        table.rules.discard(0)
    else:
        first, last = steps[0], steps[-1]
        table = Table(f"query {qid}, {method}: top {top} documents at the last of {len(steps)} recorded steps "
                      f"({last.phase.value}, {last.iteration} adaptive groups reranked)",
                      ["Rank", "Docid", "μ", "σ", "s = P(x>t)", "Rank after initial pass"],
                      align=["r", "l", "r", "r", "r", "r"])
        data["top"] = []
        for d in top_docids(steps, top):
            r = last.by_docid[d]
            r0 = first.by_docid[d].rank if d in first.by_docid else None
            table.add(str(r.rank), d, num(r.mu, 3), num(r.sigma, 3), num(r.s, 4), MISSING if r0 is None else str(r0))
            row = {"docid": d, **_rating(r), "initial_rank": r0}
            data["top"].append(row)
            records.append({"qid": qid, "method": method, **row})
        note = (f"{len(steps)} recorded steps (one per reranking round, and the final ratings); the iteration "
                f"counter is AcuRank's: adaptive groups reranked so far ({last.iteration} at the end). Final t = "
                f"{num(last.t, 3)}. Use --docid to see one document's ratings at every step.")
        table.notes = [note]
    return Report([table], records, data)
