"""Effectiveness/cost Pareto plots: one point per method, the non-dominated frontier drawn as a staircase.

A method is on the frontier when no other method is at least as cheap and at least as effective, and
strictly better in one of the two. Costs (x) are per-query means from the stats files: reranker
calls, tokens (input + output) or wall seconds; the first-stage run costs 0. ``macro`` averages both
axes over the datasets shown (only methods present in all of them).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from .collection import COST_KINDS, Collection, macro
from .render import PLOT_SUFFIXES, Table, num, save_figure
from .panels import grid_shape, panel_axes
from .render import Report
from .tables import measure_label, ordered_methods

X_LABELS = {"calls": "mean reranker calls per query", "tokens": "mean tokens per query (input + output)",
            "seconds": "mean wall seconds per query",
            "rounds": "mean sequential reranker rounds per query (latency)",
            "flops": "mean estimated FLOPs per query (2 x parameters x tokens)"}


@dataclass(frozen=True)
class Point:
    """One method on one view: cost x, effectiveness y, whether it is on the Pareto frontier."""

    method: str
    x: float
    y: float
    frontier: bool = False


def pareto_frontier(points: Sequence[tuple[float, float]]) -> list[bool]:
    """For (cost, effectiveness) pairs: True where no other pair dominates (lower cost is better)."""
    out = []
    for i, (x, y) in enumerate(points):
        dominated = any(
            (x2 <= x and y2 >= y) and (x2 < x or y2 > y) for j, (x2, y2) in enumerate(points) if j != i
        )
        out.append(not dominated)
    return out


def view_points(coll: Collection, view: str, x_kind: str) -> tuple[list[Point], list[str]]:
    """Points of one view (a dataset name or ``macro``) and the methods left out (with the reason)."""
    if x_kind not in COST_KINDS:
        raise InputError(f"--x must be one of {', '.join(COST_KINDS)}, not {x_kind!r}")
    datasets = list(coll.datasets) if view == "macro" else [view]
    if view != "macro" and view not in coll.datasets:
        raise InputError(f"--view {view!r}: unknown dataset (datasets: {', '.join(coll.datasets)}, or macro)")
    pts, skipped = [], []
    for m in ordered_methods(coll):
        if not all(coll.has(d, m) for d in datasets):
            skipped.append(f"{m} (no run on {', '.join(d for d in datasets if not coll.has(d, m))})")
            continue
        x = macro([coll.mean_cost(d, m, x_kind) for d in datasets])
        if x is None:
            skipped.append(f"{m} (no {x_kind} in its stats)")
            continue
        pts.append(Point(m, x, macro([coll.mean(d, m) for d in datasets])))
    flags = pareto_frontier([(p.x, p.y) for p in pts])
    pts = [Point(p.method, p.x, p.y, f) for p, f in zip(pts, flags)]
    if pts and all(p.x == 0 for p in pts) and x_kind != "calls":
        raise InputError(f"--x {x_kind}: no method's stats record any {x_kind} (all zero)")
    return pts, skipped


def plot_pareto(
    views: Sequence[tuple[str, list[Point]]],
    outputs: Sequence[str | Path],
    x_kind: str = "calls",
    y_label: str = "nDCG@10",
    log_x: bool = False,
) -> list[Path]:
    """Draw one panel per view and save to every output (format from the suffix: png, svg, pdf)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for out in outputs:
        if Path(out).suffix.lower() not in PLOT_SUFFIXES:
            raise InputError(f"--out {out}: plot files must end in {', '.join(PLOT_SUFFIXES)}")
    n = len(views)
    rows, cols = grid_shape(n)
    with plt.rc_context({"svg.hashsalt": "acurank", "font.size": 9}):
        fig = plt.figure(figsize=(5.2 * cols, 4.0 * rows))
        axes = panel_axes(fig, n, rows, cols)
        for ax, (title, pts) in zip(axes, views):
            _draw(ax, title, pts, x_kind, y_label, log_x)
        fig.tight_layout()
        for ax, (_, pts) in zip(axes, views):
            _place_labels(ax, pts)
        written = []
        for out in outputs:
            path = Path(out)
            path.parent.mkdir(parents=True, exist_ok=True)
            meta = {"Date": None} if path.suffix.lower() == ".svg" else None
            save_figure(fig, path, dpi=200, metadata=meta)
            written.append(path)
        plt.close(fig)
    return written


def _draw(ax, title: str, pts: list[Point], x_kind: str, y_label: str, log_x: bool) -> None:
    ax.set_title(title)
    ax.set_xlabel(X_LABELS[x_kind])
    ax.set_ylabel(y_label)
    ax.grid(True, alpha=0.3, linewidth=0.6)
    if not pts:
        ax.text(0.5, 0.5, "no methods with costs", ha="center", va="center", transform=ax.transAxes)
        return
    front = sorted((p for p in pts if p.frontier), key=lambda p: (p.x, -p.y))
    rest = [p for p in pts if not p.frontier]
    if rest:
        ax.scatter([p.x for p in rest], [p.y for p in rest], s=36, facecolors="white", edgecolors="0.45",
                   linewidths=1.2, zorder=3, label="dominated")
    ax.step([p.x for p in front], [p.y for p in front], where="post", color="C3", linewidth=1.4, zorder=2,
            label="Pareto frontier")
    ax.scatter([p.x for p in front], [p.y for p in front], s=40, color="C3", zorder=4)
    if log_x:
        ax.set_xscale("symlog", linthresh=1.0)
    ax.margins(x=0.12, y=0.1)
    ax.legend(loc="lower right", fontsize=8, frameon=False)


#: Candidate label offsets (points) around a marker, tried in order; far ones get a leader line.
_OFFSETS = tuple(
    (dx * r, dy * r, ha)
    for r in (1, 2, 3, 4, 5)
    for dx, dy, ha in ((5, 4, "left"), (5, -11, "left"), (-5, 4, "right"), (-5, -11, "right"),
                       (0, 8, "center"), (0, -16, "center"))
)


def _frontier_pixels(ax, pts: list[Point]) -> list[tuple[float, float]]:
    """Points every ~2 px along the drawn frontier staircase, in display coordinates."""
    front = sorted((p for p in pts if p.frontier), key=lambda p: (p.x, -p.y))
    corners = []
    for a, b in itertools.pairwise(front):
        corners += [(a.x, a.y), (b.x, a.y)]
    if front:
        corners.append((front[-1].x, front[-1].y))
    disp = [ax.transData.transform(c) for c in corners]
    out = []
    for (x0, y0), (x1, y1) in itertools.pairwise(disp):
        steps = max(1, int(max(abs(x1 - x0), abs(y1 - y0)) / 2))
        out += [(x0 + (x1 - x0) * i / steps, y0 + (y1 - y0) * i / steps) for i in range(steps + 1)]
    return out


def _place_labels(ax, pts: list[Point]) -> None:
    """Label each point with its method (greedy, left to right): the first offset whose text box stays
    inside the axes and overlaps no earlier label, marker or the frontier line, else the least bad."""
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    markers = [ax.transData.transform((p.x, p.y)) for p in pts]
    radius = 4.0 * fig.dpi / 72.0
    placed = []
    path = _frontier_pixels(ax, pts)

    def label(p: Point, dx: float, dy: float, ha: str, far: bool):
        return ax.annotate(
            p.method, (p.x, p.y), xytext=(dx, dy), textcoords="offset points", ha=ha, va="bottom",
            fontsize=8, color="C3" if p.frontier else "0.25", zorder=5,
            arrowprops={"arrowstyle": "-", "color": "0.6", "linewidth": 0.6, "shrinkA": 1, "shrinkB": 4} if far else None,
        )

    for p in sorted(pts, key=lambda p: (p.x, -p.y)):
        best = None  # (penalty, index, box)
        for i, (dx, dy, ha) in enumerate(_OFFSETS):
            text = label(p, dx, dy, ha, far=False)  # measure the text alone, not its leader line
            box = text.get_window_extent(renderer)
            text.remove()
            inner = box.padded(2.0)  # labels keep a gap: touching texts read as one
            penalty = (
                5 * (not (frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1))
                + 3 * sum(box.x0 - radius <= mx <= box.x1 + radius and box.y0 - radius <= my <= box.y1 + radius
                          for mx, my in markers)
                + 3 * sum(inner.overlaps(b) for b in placed)
                + 1 * any(box.x0 <= lx <= box.x1 and box.y0 <= ly <= box.y1 for lx, ly in path)
            )
            if best is None or penalty < best[0]:
                best = (penalty, i, box)
            if penalty == 0:
                break
        dx, dy, ha = _OFFSETS[best[1]]
        label(p, dx, dy, ha, far=best[1] >= 6)
        placed.append(best[2])


def build_pareto(coll: Collection, views: Sequence[str], x_kind: str) -> tuple[list[tuple[str, list[Point]]], Report]:
    """Points per view plus a report (table/records/JSON) of them."""
    label = measure_label(coll.measure, coll.rel_level)
    computed = []
    table = Table(f"Pareto points: {label} against {X_LABELS.get(x_kind, x_kind)}",
                  ["View", "Method", x_kind, label, "Frontier"], align=["l", "l", "r", "r", "l"])
    records, data = [], {"measure": coll.measure, "x": x_kind, "views": {}}
    notes = []
    for view in views:
        pts, skipped = view_points(coll, view, x_kind)
        title = f"macro average over {', '.join(coll.datasets)}" if view == "macro" else view
        computed.append((title, pts))
        for p in sorted(pts, key=lambda p: p.x):
            table.add(view, p.method, num(p.x, 2), num(p.y, 4), "yes" if p.frontier else "")
            records.append({"view": view, "method": p.method, x_kind: p.x, coll.measure: p.y, "frontier": p.frontier})
        table.rules.add(len(table.rows))
        data["views"][view] = {"points": [p.__dict__ for p in pts], "skipped": skipped}
        if skipped:
            notes.append(f"{view}: left out {'; '.join(skipped)}")
    table.rules.discard(len(table.rows))
    table.notes = notes
    return computed, Report([table], records, data)
