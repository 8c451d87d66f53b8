"""acurank report: collections and tables (macro averaging, significance in the records), every renderer, the CLI, the bundled samples."""

from __future__ import annotations

import csv
import io
import json
import statistics
from pathlib import Path

import pytest
from scipy import stats as sst

from acurank_cli.errors import InputError
from conftest import acurank

from acurank_cli.io.run_files import read_stats, stats_path_for
from acurank_cli.report.collection import build_collection, macro
from acurank_cli.report.render import (
    Cell,
    Table,
    latex_escape,
    to_csv,
    to_json,
    to_latex,
    to_markdown,
    to_terminal,
)
from acurank_cli.report.significance import (
    mark,
    permutation_test,
)
from acurank_cli.report.tables import build_table, measure_label, parse_baselines
from acurank_cli.report.trace_plot import (
    build_trace_report,
    read_trace,
)

from report_helpers import (cli, SAMPLE, N_DOCS, _write_run, _noisy_order, make_dataset, _ndcg, _report, _md_rows, _check_png, _check_svg, make_trace)  # noqa: F401


# ----------------------------------------------------------------------------- collection & table


def test_macro_average_and_calls(runs_dir):
    coll = build_collection(dirs=[runs_dir])
    assert list(coll.datasets) == ["alpha", "beta"]
    rep = build_table([coll], {"alpha": "base", "beta": "base"})
    rows = {r["method"]: r for r in rep.data["methods"]}
    per_ds = {}
    for ds in ("alpha", "beta"):
        nd = _ndcg(runs_dir / ds, "fancy")
        per_ds[ds] = statistics.fmean(nd.values())
        assert rows["fancy"]["datasets"][ds]["ndcg_cut_10"] == pytest.approx(per_ds[ds])
    # macro: mean per dataset first, then unweighted over datasets (not pooled over queries)
    assert rows["fancy"]["macro"]["ndcg_cut_10"] == pytest.approx((per_ds["alpha"] + per_ds["beta"]) / 2)
    # calls: mean over judged queries only (the unjudged query with 10000 calls is ignored)
    stats = read_stats(runs_dir / "alpha" / "fancy.stats.jsonl")
    alpha_calls = statistics.fmean(r.calls for q, r in stats.items() if not q.endswith("unjudged"))
    assert rows["fancy"]["datasets"]["alpha"]["calls"] == pytest.approx(alpha_calls)
    assert rows["base"]["macro"]["calls"] == 9.0
    assert rows["bm25"]["macro"]["calls"] == 0.0  # first stage: no stats needed
    assert rows["solo"]["macro"]["ndcg_cut_10"] is None  # missing from beta: no macro value
    assert rows["solo"]["datasets"]["beta"] is None
    assert macro([0.2, 0.4]) == pytest.approx(0.3) and macro([0.2, None]) is None
    # order: first stage, then by macro calls (unknown last)
    assert [r["method"] for r in rep.data["methods"]] == ["bm25", "base", "fancy", "solo"]


def test_significance_in_json_matches_direct_tests(runs_dir):
    coll = build_collection(dirs=[runs_dir])
    rep = build_table([coll], {"alpha": "base", "beta": "base"}, test="permutation", resamples=2000, seed=5)
    v = next(r for r in rep.data["methods"] if r["method"] == "fancy")["datasets"]["alpha"]["vs_baseline"]
    a, b = _ndcg(runs_dir / "alpha", "fancy"), _ndcg(runs_dir / "alpha", "base")
    qids = sorted(a)
    assert v["p_ttest"] == pytest.approx(float(sst.ttest_rel([a[q] for q in qids], [b[q] for q in qids]).pvalue))
    assert v["p_permutation"] == pytest.approx(
        permutation_test([a[q] for q in qids], [b[q] for q in qids], resamples=2000, seed=5).pvalue)
    assert v["mark"] == ("▲" if v["delta"] > 0 else "▼") + mark(v["p_permutation"])  # with its direction
    base = next(r for r in rep.data["methods"] if r["method"] == "base")["datasets"]["alpha"]
    assert "vs_baseline" not in base  # the baseline is not tested against itself


def test_baselines_parsing():
    assert parse_baselines(["sw-1"], ["a", "b"]) == {"a": "sw-1", "b": "sw-1"}
    assert parse_baselines(["b=tour", "sw-1"], ["a", "b"]) == {"a": "sw-1", "b": "tour"}
    with pytest.raises(InputError):
        parse_baselines(["zz=sw-1"], ["a"])
    assert measure_label("ndcg_cut_10") == "nDCG@10" and measure_label("P_10") == "P@10"


def test_explicit_runs_and_stats_override(runs_dir, tmp_path):
    alt = tmp_path / "alt.stats.jsonl"
    alt.write_text("".join(json.dumps({"qid": f"alphaq{i}", "calls": 2}) + "\n" for i in range(14)))
    coll = build_collection(
        runs=[f"alpha:base={runs_dir / 'alpha' / 'base.run'}", f"alpha:bm25={runs_dir / 'alpha' / 'bm25.run'}"],
        qrels=[f"alpha={runs_dir / 'alpha' / 'qrels.txt'}"],
        stats=[f"alpha:base={alt}"],
    )
    assert coll.mean_cost("alpha", "base") == 2.0
    # one dataset: names may be left out
    coll = build_collection(runs=[f"fancy={runs_dir / 'beta' / 'fancy.run'}"], qrels=[str(runs_dir / "beta" / "qrels.txt")])
    assert list(coll.datasets) == ["beta"] and coll.mean_cost("beta", "fancy") is not None  # stats found beside
    # a folder of runs is one dataset named after it
    assert list(build_collection(dirs=[runs_dir / "beta"]).datasets) == ["beta"]
    assert stats_path_for(Path("x/acurank-H.run.gz")) == Path("x/acurank-H.stats.jsonl")
    # runs named one by one without --qrels: the qrels beside them (the same as naming it)
    beside = build_collection(runs=[f"gamma:m={runs_dir / 'beta' / 'fancy.run'}"])
    assert beside.datasets["gamma"].qrels_path == runs_dir / "beta" / "qrels.txt"
    assert beside.mean("gamma", "m") == build_collection(
        runs=[f"gamma:m={runs_dir / 'beta' / 'fancy.run'}"], qrels=[f"gamma={runs_dir / 'beta' / 'qrels.txt'}"]).mean("gamma", "m")
    lone = tmp_path / "lone"
    lone.mkdir()
    (lone / "m.run").write_bytes((runs_dir / "beta" / "fancy.run").read_bytes())
    with pytest.raises(InputError, match=r"^dataset 'gamma' has no qrels: put qrels.txt beside its runs or pass --qrels"):
        build_collection(runs=[f"gamma:m={lone / 'm.run'}"])
    with pytest.raises(InputError, match=r"^dataset 'gamma': its runs lie beside different qrels files \(.*alpha/qrels.txt, "
                                         r".*beta/qrels.txt\): pass --qrels gamma=PATH$"):
        build_collection(runs=[f"gamma:a={runs_dir / 'alpha' / 'base.run'}", f"gamma:b={runs_dir / 'beta' / 'fancy.run'}"])
    with pytest.raises(InputError, match="--method"):
        build_collection(dirs=[runs_dir], methods=["nope"])


def test_resumed_stats_last_record_wins(tmp_path):
    p = tmp_path / "s.stats.jsonl"
    p.write_text(json.dumps({"qid": "1", "calls": 3}) + "\n" + json.dumps({"qid": "1", "calls": 7}) + "\n")
    assert read_stats(p)["1"].calls == 7
    p.write_text("{not json\n")
    with pytest.raises(InputError):
        read_stats(p)


# ------------------------------------------------------------------------------------- renderers


def test_markdown_cells(runs_dir):
    rep = _report(runs_dir)
    rows = _md_rows(to_markdown(rep.tables))
    assert rows[0] == ["Method", "alpha", "beta", "Avg nDCG@10", "Avg calls/q", "Avg rounds/q"]
    assert set(rows[1]) <= {":---", "---:"}
    body = {r[0]: r for r in rows[2:]}
    fancy = next(r for r in rep.data["methods"] if r["method"] == "fancy")
    assert body["fancy"][1].strip("*").rstrip("†‡▲▼") == f"{fancy['datasets']['alpha']['ndcg_cut_10']:.4f}"
    assert body["fancy"][1].strip("*").endswith(fancy["datasets"]["alpha"]["vs_baseline"]["mark"])
    assert body["fancy"][1].startswith("**")  # best on alpha
    assert body["solo"][2] == "–" and body["bm25"][4] == "0.00" and body["bm25"][5] == "0.00"
    assert body["fancy"][5] == "–"  # these stats files record no rounds
    assert any("‡" in c for c in body["fancy"])  # fancy beats bm25 clearly


def test_percent_option(runs_dir):
    rows = _md_rows(to_markdown(_report(runs_dir, percent=True).tables))
    value = next(r for r in rows if r[0] == "base")[1].strip("*†‡▲▼")
    assert 1 < float(value) < 100 and len(value.split(".")[1]) == 2


def test_csv_parses(runs_dir):
    rep = _report(runs_dir)
    rows = list(csv.DictReader(io.StringIO(to_csv(rep.records))))
    by = {r["method"]: r for r in rows}
    assert set(by) == {"bm25", "base", "fancy", "solo"}
    fancy = next(r for r in rep.data["methods"] if r["method"] == "fancy")
    assert float(by["fancy"]["alpha_ndcg_cut_10"]) == pytest.approx(fancy["datasets"]["alpha"]["ndcg_cut_10"])
    assert float(by["fancy"]["alpha_p_ttest"]) == pytest.approx(fancy["datasets"]["alpha"]["vs_baseline"]["p_ttest"], rel=1e-8)
    assert float(by["fancy"]["macro_calls"]) == pytest.approx(fancy["macro"]["calls"])
    assert by["solo"]["macro_ndcg_cut_10"] == ""


def test_latex(runs_dir, tmp_path):
    rep = _report(runs_dir)
    tex = to_latex(rep.tables)
    assert "\\begin{tabular}{lrrrrr}" in tex and "\\toprule" in tex and "\\bottomrule" in tex
    assert "$^{\\ddagger}$" in tex and "\\textbf{" in tex
    body = [l for l in tex.splitlines() if l.startswith("fancy &")]
    assert len(body) == 1 and body[0].count("&") == 5 and body[0].endswith("\\\\")
    assert latex_escape("my_method 50%") == "my\\_method 50\\%"
    t = Table("t", ["Method", "x"])
    t.add("a_b", Cell("1†", bold=True))
    assert "a\\_b & \\textbf{1$^{\\dagger}$} \\\\" in to_latex([t])


def test_json_strict(runs_dir):
    rep = _report(runs_dir)
    data = json.loads(to_json(rep.data))
    assert data["significance"]["baseline"] == {"alpha": "bm25", "beta": "bm25"}
    assert data["significance"]["marks"] == {"‡": 0.01, "†": 0.05}
    assert json.loads(to_json({"x": float("nan"), "y": [float("inf")]})) == {"x": None, "y": [None]}


def test_terminal(runs_dir):
    buf = io.StringIO()
    to_terminal(_report(runs_dir).tables, file=buf)
    out = buf.getvalue()
    assert "fancy" in out and "Avg nDCG@10" in out and "bm25" in out and "paired t-test" in out



# --------------------------------------------------------------------------------------------- CLI





@pytest.mark.parametrize("fmt", ["terminal", "markdown", "csv", "latex", "json"])
def test_cli_table_formats(runs_dir, fmt):
    res = cli(*["report", "table", "--runs", str(runs_dir), "--baseline", "base", "-f", fmt])
    assert res.returncode == 0, (res.stdout + res.stderr)
    assert "fancy" in res.stdout
    if fmt == "json":
        data = json.loads(res.stdout)
        assert data["significance"]["baseline"] == {"alpha": "base", "beta": "base"}
    if fmt == "csv":
        assert next(csv.reader(io.StringIO(res.stdout)))[0] == "method"


def test_cli_table_options(runs_dir, tmp_path):
    out = tmp_path / "t.md"
    res = cli(*["report", "table", "--runs", str(runs_dir), "--method", "fancy", "--method", "base",
                              "--dataset", "beta", "-b", "base", "--test", "permutation", "--resamples", "500",
                              "-f", "markdown", "-o", str(out)])
    assert res.returncode == 0, (res.stdout + res.stderr)
    rows = _md_rows(out.read_text())
    assert rows[0] == ["Method", "beta nDCG@10", "Calls/q", "Rounds/q"]
    assert [r[0] for r in rows[2:]] == ["fancy", "base"]
    assert "randomisation test (two-sided, 500 sign flips, seed 0)" in out.read_text()


def test_cli_errors_exit_2(runs_dir, tmp_path):
    res = cli(*["report", "table", "--runs", str(tmp_path / "missing")])
    assert res.returncode == 2 and "acurank: error:" in (res.stdout + res.stderr)
    res = cli(*["report", "table", "--runs", str(runs_dir), "--baseline", "nope"])
    assert res.returncode == 2 and "nope" in (res.stdout + res.stderr)
    res = cli(*["report", "table", "--runs", str(runs_dir), "-f", "html"])
    assert res.returncode == 2
    res = cli(*["report", "table", "--run", "x.run"])
    assert res.returncode == 2 and "DATASET:METHOD=PATH" in (res.stdout + res.stderr)


def test_cli_pareto(runs_dir, tmp_path):
    res = cli(*["report", "pareto", "--runs", str(runs_dir), "--view", "all", "--x", "tokens",
                              "--plot", str(tmp_path / "p.png"), "--plot", str(tmp_path / "p.svg"), "-f", "json"])
    assert res.returncode == 0, (res.stdout + res.stderr)
    _check_png(tmp_path / "p.png")
    _check_svg(tmp_path / "p.svg")
    data = json.loads(res.stdout)
    assert set(data["views"]) == {"alpha", "beta", "macro"} and data["x"] == "tokens"


def test_cli_allocation(runs_dir, tmp_path):
    res = cli(*["report", "allocation", "--runs", str(runs_dir), "--baseline", "base",
                              "--plot", str(tmp_path / "a.png"), "-f", "json"])
    assert res.returncode == 0, (res.stdout + res.stderr)
    data = json.loads(res.stdout)
    assert {(a["dataset"], a["method"]) for a in data["analyses"]} == {("alpha", "fancy"), ("alpha", "solo"), ("beta", "fancy")}
    _check_png(tmp_path / "a.png")


def test_cli_trace(tmp_path):
    tr = tmp_path / "t.jsonl"
    make_trace(tr)
    png = tmp_path / "q2.png"
    res = cli(*["report", "trace", str(tr), "--qid", "q2", "--docid", "d1", "--plot", str(png), "-f", "csv"])
    assert res.returncode == 0, (res.stdout + res.stderr)
    _check_png(png)
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert len(rows) == 5 and rows[0]["docid"] == "d1"
    res = cli(*["report", "trace", str(tr), "--qid", "q9", "--no-plot"])
    assert res.returncode == 2 and "q9" in (res.stdout + res.stderr)


def test_cli_help_documents_layout():
    res = cli(*["report", "table", "--help"])
    assert res.returncode == 0
    assert "DIR/<dataset>/<method>.run" in (res.stdout + res.stderr) and "DATASET:METHOD=PATH" in (res.stdout + res.stderr)


# ------------------------------------------------------------------------------- bundled samples


@pytest.mark.skipif(not (SAMPLE / "dl19" / "bm25.run").exists(), reason="sample_runs not present yet")
def test_sample_runs_bm25_reference():
    coll = build_collection(dirs=[SAMPLE])
    ref = {"dl19": 0.5058, "dl20": 0.4796, "dl23": 0.2624}  # PROVENANCE.md
    for ds, value in ref.items():
        if ds in coll.datasets and coll.has(ds, "bm25"):
            assert coll.mean(ds, "bm25") == pytest.approx(value, abs=5e-5)


# --- several measures, corrections and confidence intervals ------------------------------------------


def test_holm_and_bonferroni_by_hand():
    from acurank_cli.report.significance import adjust

    p = [0.01, 0.04, 0.03, None]
    # Holm: ascending 0.01 x 3 = 0.03; 0.03 x 2 = 0.06; 0.04 x 1 = 0.04 -> running max 0.06
    assert adjust(p, "holm")[:3] == pytest.approx([0.03, 0.06, 0.06]) and adjust(p, "holm")[3] is None
    assert adjust(p, "bonferroni")[:3] == pytest.approx([0.03, 0.12, 0.09]) and adjust(p, "bonferroni")[3] is None
    assert adjust([0.5, 0.7], "holm") == pytest.approx([1.0, 1.0]) and adjust(p, "none") == p
    with pytest.raises(ValueError):
        adjust(p, "sidak")


def test_paired_confidence_intervals_by_hand():
    from scipy import stats as sst

    from acurank_cli.report.significance import paired_ci

    a, b = [1.0, 2.0, 3.0, 4.0], [0.0, 0.0, 0.0, 0.0]
    # mean 2.5, sd 1.2910, t_0.975,3 = 3.1824: 2.5 +- 3.1824 x 1.2910 / 2 = [0.4457, 4.5543]
    lo, hi = paired_ci(a, b, "t")
    assert (lo, hi) == pytest.approx((0.4457, 4.5543), abs=1e-4)
    assert (lo, hi) == pytest.approx(sst.t.interval(0.95, 3, loc=2.5, scale=sst.sem([1, 2, 3, 4])))
    boot = paired_ci(a, b, "bootstrap", resamples=4000, seed=3)
    assert boot == paired_ci(a, b, "bootstrap", resamples=4000, seed=3)  # seeded
    assert 1.0 <= boot[0] < 2.5 < boot[1] <= 4.0  # percentiles of means of resampled {1, 2, 3, 4}
    assert paired_ci([1.0], [0.0], "t") is None and paired_ci(a, b, "none") is None


def test_table_with_three_measures_holm_and_cis(runs_dir, tmp_path):
    args = ["report", "table", "--runs", runs_dir, "-m", "nDCG@10", "-m", "AP", "-m", "P@5", "--baseline", "base",
            "--correction", "holm", "--ci", "t"]
    data = json.loads(acurank(*args, "-f", "json").stdout)
    assert len(data["measures"]) == 3 and set(data["tables"]) == set(data["measures"])
    from acurank_cli.report.significance import adjust, mark

    for ms, table in data["tables"].items():
        assert table["significance"]["correction"] == "holm"
        rows = [r for r in table["methods"] if r["datasets"]["alpha"] and "vs_baseline" in r["datasets"]["alpha"]]
        raw = [r["datasets"]["alpha"]["vs_baseline"]["p_ttest"] for r in rows]
        for r, adj in zip(rows, adjust(raw, "holm")):
            vs = r["datasets"]["alpha"]["vs_baseline"]
            assert vs["p_adjusted"] == pytest.approx(adj)
            assert vs["mark"] == (("▲" if vs["delta"] > 0 else "▼") + mark(adj) if mark(adj) else "")
            assert vs["ci"]["low"] <= vs["delta"] <= vs["ci"]["high"]
    md = acurank(*args, "-f", "markdown").stdout
    assert "| Method | alpha nDCG@10 | alpha AP | alpha P@5 | beta nDCG@10 |" in md
    assert "Holm-corrected" in md and "**Difference against base [95% CI]**" in md
    tex = acurank(*args, "-f", "latex").stdout
    assert tex.count("\\begin{tabular}") == 2 and "Holm-corrected" in tex
    csv_text = acurank(*args, "-f", "csv").stdout
    header = csv_text.splitlines()[0].split(",")
    assert {"alpha_nDCG@10_ci_low", "alpha_AP_p_adjusted", "beta_P@5_mark", "macro_AP"} <= set(header)
    bad = acurank("report", "table", "--runs", runs_dir, "--correction", "sidak", check=False)
    assert bad.returncode == 2 and "--correction must be one of none, holm, bonferroni" in bad.stderr


def test_trace_defaults_to_the_top_4_and_names_steps_and_the_counter_apart(tmp_path):
    tr = tmp_path / "t.jsonl"
    make_trace(tr)
    method, steps = read_trace(tr, "q1")
    rep = build_trace_report(steps, "q1", method)
    assert len(rep.tables[0].rows) == 4
    title, note = rep.tables[0].title, rep.tables[0].notes[0]
    assert f"last of {len(steps)} recorded steps" in title and f"{steps[-1].iteration} adaptive groups" in title
    assert f"{len(steps)} recorded steps" in note and "recorded iterations" not in note


@pytest.mark.parametrize("n, shape", [(1, (1, 1)), (2, (1, 2)), (3, (1, 3)), (4, (2, 2)), (5, (2, 3)), (6, (2, 3)),
                                      (8, (4, 2)), (9, (3, 3))])
def test_panel_grid_leaves_no_empty_panel(n, shape):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from acurank_cli.report.panels import grid_shape, panel_axes

    assert grid_shape(n) == shape
    fig = plt.figure()
    axes = panel_axes(fig, n, *shape)
    assert len(fig.axes) == len(axes) == n and all(ax.get_visible() for ax in fig.axes)
    plt.close(fig)


def test_readme_lists_only_formats_that_exist():
    import re

    from acurank_cli.report.render import Format

    from conftest import documentation

    readme = documentation()
    named = set(re.findall(r"(?:-f|--format) (\w+)", readme))
    listed = set(re.findall(r"# also: ([\w ,()]+)", readme)[0].replace("(default)", "").replace(",", " ").split())
    assert named and (named | listed) <= {f.value for f in Format}


def test_report_takes_run_files_as_eval_does(sample, tmp_path):
    """`acurank report table a.run b.run --qrels q.txt` (what an eval user types first) was an error;
    now the runs of one dataset are named by their files (METHOD = the name without .run)."""
    from conftest import acurank

    qrels = sample / "dl19" / "qrels.txt"
    for name, noise in (("good", "0"), ("poor", "2")):
        acurank("baseline", sample / "dl19" / "bm25.run", "--method", "sw-1", "--reranker", "simulated",
                "--sim-noise", noise, "--qrels", qrels, "--quiet", "-o", tmp_path / f"{name}.run")
    out = acurank("report", "table", tmp_path / "good.run", tmp_path / "poor.run", "--qrels", qrels, "-f", "json")
    rows = {r["method"]: r for r in __import__("json").loads(out.stdout)["methods"]}
    ev = {name: __import__("json").loads(acurank("eval", tmp_path / f"{name}.run", "--qrels", qrels, "-f", "json").stdout)
          for name in ("good", "poor")}
    assert set(rows) == {"good", "poor"}
    for name in rows:
        assert abs(rows[name]["datasets"]["dl19"]["ndcg_cut_10"] - ev[name]["ndcg_cut_10"]) < 1e-12


def test_marks_carry_direction_and_the_holm_family_is_named(sample, tmp_path):
    """A row significantly worse than the baseline got the same mark as one significantly better,
    and the footnote did not say that Holm's family is the rows shown."""
    import json as _json

    from conftest import acurank

    qrels = sample / "dl19" / "qrels.txt"
    for name, noise in (("good", "0"), ("mid", "0.7"), ("poor", "3")):
        acurank("baseline", sample / "dl19" / "bm25.run", "--method", "sw-1", "--reranker", "simulated",
                "--sim-noise", noise, "--qrels", qrels, "--quiet", "-o", tmp_path / f"{name}.run")
    args = ["report", "table", *(tmp_path / f"{n}.run" for n in ("good", "mid", "poor")), "--qrels", qrels,
            "--baseline", "mid", "--correction", "holm"]
    data = _json.loads(acurank(*args, "-f", "json").stdout)
    marks = {r["method"]: r["datasets"]["dl19"]["vs_baseline"]["mark"] for r in data["methods"] if r["method"] != "mid"}
    assert marks["good"].startswith("▲") and marks["poor"].startswith("▼"), marks
    md = acurank(*args, "-f", "markdown").stdout
    assert "▲/▼ better/worse than the baseline with" in md
    assert "Holm-corrected over the methods shown (the rows of this table)" in md


def test_terminal_tables_never_cut_a_method_name_or_a_figure():
    """The terminal table truncated method names (and, narrower, figures)."""
    import io as _io

    from acurank_cli.report.render import Table, to_terminal

    t = Table("t", ["Method", "dl19 nDCG@10", "dl20 nDCG@10", "dl23 nDCG@10", "calls/q", "rounds/q"])
    t.add("acurank --budget-total 9x", "0.8139▲‡", "0.8017", "0.5936", "8.94", "2.73")
    for width in (40, 60, 200):
        buf = _io.StringIO()
        to_terminal([t], file=buf, width=width)
        text = buf.getvalue()
        for cell in ("acurank --budget-total 9x", "0.8139▲‡", "0.8017", "0.5936", "8.94", "2.73"):
            assert cell in text, (width, text)
