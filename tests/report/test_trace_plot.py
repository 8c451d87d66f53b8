"""report/trace_plot.py: a --trace file read back, its table and plot, a bad record."""

from __future__ import annotations

import json

import pytest

from acurank_cli.errors import InputError

from acurank_cli.report.render import (
    to_json,
    to_markdown,
)
from acurank_cli.report.trace_plot import (
    build_trace_report,
    plot_trace,
    read_trace,
    x_values,
)

from report_helpers import (cli, SAMPLE, N_DOCS, _write_run, _noisy_order, make_dataset, _ndcg, _report, _md_rows, _check_png, _check_svg, make_trace)  # noqa: F401


# ------------------------------------------------------------------------------------------ traces
def test_trace_read_table_plot(tmp_path):
    tr = tmp_path / "t.jsonl"
    make_trace(tr, resumed=True)
    method, steps = read_trace(tr, "q1")
    assert method == "acurank" and [s.iteration for s in steps] == [0, 2, 3, 4, 5]
    assert all(s.t != -99.0 for s in steps)  # the stale attempt was replaced
    xs, label = x_values(steps)
    assert xs == [0, 2, 3, 4, 5] and "iteration" in label
    rep = build_trace_report(steps, "q1", method, ["d3"])
    rows = _md_rows(to_markdown(rep.tables))
    assert rows[0] == ["Docid", "Iteration", "Phase", "t", "μ", "σ", "s = P(x>t)", "Rank"]
    assert len(rows) == 2 + 5
    assert rows[3][1] == "2" and float(rows[3][4]) == pytest.approx(steps[1].by_docid["d3"].mu, abs=1e-3)
    assert json.loads(to_json(rep.data))["docs"]["d3"][4]["rank"] == steps[4].by_docid["d3"].rank
    top = build_trace_report(steps, "q1", method, top=5)
    assert len(top.tables[0].rows) == 5 and top.data["top"][0]["rank"] == 1
    out = plot_trace(steps, "q1", method, [tmp_path / "t.png", tmp_path / "t.svg"], top=10, docids=["d14"])
    _check_png(out[0])
    _check_svg(out[1])
    with pytest.raises(InputError, match="not in the trace"):
        read_trace(tr, "zzz")
    with pytest.raises(InputError, match="--docid"):
        build_trace_report(steps, "q1", method, ["nope"])


def test_trace_bad_record(tmp_path):
    tr = tmp_path / "t.jsonl"
    tr.write_text(json.dumps({"qid": "q1", "iteration": 0}) + "\n")
    with pytest.raises(InputError, match="bad trace record"):
        read_trace(tr, "q1")


