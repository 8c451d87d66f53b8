"""report/pareto.py: the frontier, the points and the plots (PNG, SVG), a cost the stats lack."""

from __future__ import annotations

import statistics

import pytest

from acurank_cli.errors import InputError

from acurank_cli.report.collection import (
    build_collection,
)
from acurank_cli.report.pareto import (
    build_pareto,
    pareto_frontier,
    plot_pareto,
    view_points,
)

from report_helpers import (cli, SAMPLE, N_DOCS, _write_run, _noisy_order, make_dataset, _ndcg, _report, _md_rows, _check_png, _check_svg, make_trace)  # noqa: F401


# ------------------------------------------------------------------------------------------ plots


def test_pareto_frontier_logic():
    pts = [(0, 0.5), (9, 0.78), (13, 0.77), (10, 0.84), (50, 0.88), (50, 0.86), (90, 0.88)]
    assert pareto_frontier(pts) == [True, True, False, True, True, False, False]
    assert pareto_frontier([(1, 1), (1, 1)]) == [True, True]  # equal points do not dominate each other


def test_pareto_points_and_plot(runs_dir, tmp_path):
    coll = build_collection(dirs=[runs_dir])
    pts, skipped = view_points(coll, "macro", "calls")
    assert {p.method for p in pts} == {"bm25", "base", "fancy"} and any("solo" in s for s in skipped)
    by = {p.method: p for p in pts}
    assert by["bm25"].x == 0 and by["bm25"].frontier
    assert by["fancy"].y == pytest.approx(statistics.fmean([coll.mean("alpha", "fancy"), coll.mean("beta", "fancy")]))
    tok, _ = view_points(coll, "alpha", "tokens")
    assert {p.method: p.x for p in tok}["base"] == pytest.approx(9 * 1050)
    computed, rep = build_pareto(coll, ["alpha", "beta", "macro"], "seconds")
    outs = plot_pareto(computed, [tmp_path / "p.png", tmp_path / "p.svg"], "seconds")
    _check_png(outs[0])
    _check_svg(outs[1])
    assert {r["view"] for r in rep.records} == {"alpha", "beta", "macro"}
    with pytest.raises(InputError):
        plot_pareto(computed, [tmp_path / "p.gif"])


def test_pareto_tokens_missing(tmp_path):
    make_dataset(tmp_path / "r", "alpha", 3, tokens=False)
    coll = build_collection(dirs=[tmp_path / "r"])
    with pytest.raises(InputError, match="tokens"):  # only the first stage (0 tokens) would be left
        view_points(coll, "alpha", "tokens")
    pts, skipped = view_points(coll, "alpha", "seconds")
    assert [p.method for p in pts] == ["bm25", "base", "fancy"] and not skipped
    with pytest.raises(InputError):
        view_points(coll, "alpha", "bogus")


