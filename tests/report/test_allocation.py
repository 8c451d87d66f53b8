"""report/allocation.py: WIG by hand, the allocation analysis (Spearman rho of calls against difficulty) and its report."""

from __future__ import annotations

import csv
import io
import json
import math
import statistics

import pytest
from scipy import stats as sst

from acurank_cli.errors import InputError

from acurank_cli.io.runs import read_run
from acurank_cli.report.allocation import analyse, build_allocation, query_length, wig
from acurank_cli.report.collection import (
    build_collection,
)
from acurank_cli.report.render import (
    to_csv,
    to_json,
    to_markdown,
)

from report_helpers import (cli, SAMPLE, N_DOCS, _write_run, _noisy_order, make_dataset, _ndcg, _report, _md_rows, _check_png, _check_svg, make_trace)  # noqa: F401


# ------------------------------------------------------------------------------------------- WIG


def test_wig_hand_computed():
    e = math.e
    scores = [e**3 - 1, e**2 - 1, e - 1, 0.0]  # log(1+s) = 3, 2, 1, 0; reference (mean) = 1.5
    assert wig(scores, k=2) == pytest.approx(((3 - 1.5) + (2 - 1.5)) / 2)  # 1.0
    assert wig(scores, k=2, qlen=4) == pytest.approx(0.5)  # / sqrt(4)
    assert wig(list(reversed(scores)), k=1) == pytest.approx(1.5)  # order does not matter
    assert wig(scores, k=50) == pytest.approx(0.0)  # k >= n: deviations from the mean sum to 0
    with pytest.raises(InputError):
        wig([1.0, -1.0])
    assert query_length("What is the WIG, anyway?") == 5



# ------------------------------------------------------------------------------------- allocation


def test_allocation_analysis(runs_dir):
    coll = build_collection(dirs=[runs_dir])
    res = analyse(coll, "alpha", "fancy", "base", k=5)
    pq = res["per_query"]
    assert res["queries"] == 14 and len(pq) == 14  # the unjudged query is not analysed
    first = read_run(runs_dir / "alpha" / "bm25.run")
    topics = dict(line.split("\t") for line in (runs_dir / "alpha" / "topics.tsv").read_text().splitlines())
    q0 = pq[0]
    assert q0["wig"] == pytest.approx(wig([c.score for c in first[q0["qid"]]], 5, query_length(topics[q0["qid"]])))
    rho, p = sst.spearmanr([r["calls"] for r in pq], [r["wig"] for r in pq])
    assert res["correlations"]["calls vs WIG"]["rho"] == pytest.approx(rho)
    assert res["correlations"]["calls vs WIG"]["p"] == pytest.approx(p)
    rho2, _ = sst.spearmanr([r["calls"] for r in pq], [r["ndcg_cut_10"] for r in pq])
    assert res["correlations"]["calls vs nDCG@10 (fancy)"]["rho"] == pytest.approx(rho2)
    split = res["split"]
    base = [r["baseline_ndcg_cut_10"] for r in pq]
    assert split["threshold"] == pytest.approx(statistics.fmean(base))
    easy, hard, every = (split["buckets"][k] for k in ("easy", "hard", "all"))
    assert easy["queries"] + hard["queries"] == every["queries"] == 14
    assert easy["queries"] == sum(b >= split["threshold"] for b in base)
    easy_rows = [r for r in pq if r["baseline_ndcg_cut_10"] >= split["threshold"]]
    assert easy["calls"] == pytest.approx(statistics.fmean(r["calls"] for r in easy_rows))
    assert easy["baseline_calls"] == 9.0 and easy["delta_calls"] == pytest.approx(easy["calls"] - 9.0)
    assert hard["delta_ndcg_cut_10"] == pytest.approx(hard["ndcg_cut_10"] - hard["baseline_ndcg_cut_10"])
    assert easy["baseline_ndcg_cut_10"] >= split["threshold"] > hard["baseline_ndcg_cut_10"]


def test_allocation_report_renders(runs_dir):
    coll = build_collection(dirs=[runs_dir])
    rep = build_allocation(coll, ["fancy"], {"alpha": "base", "beta": "base"})
    md = to_markdown(rep.tables)
    assert "calls vs WIG" in md and "| alpha | fancy | easy |" in md
    rows = list(csv.DictReader(io.StringIO(to_csv(rep.records))))
    assert {r["table"] for r in rows} == {"correlation", "split"}
    assert json.loads(to_json(rep.data))["analyses"][0]["wig_k"] == 50


def test_allocation_without_topics_is_unnormalised(tmp_path):
    make_dataset(tmp_path / "r", "alpha", 4)
    (tmp_path / "r" / "alpha" / "topics.tsv").unlink()
    coll = build_collection(dirs=[tmp_path / "r"])
    res = analyse(coll, "alpha", "fancy")
    assert res["wig_normalised"] is False and "split" not in res
    coll.first_stage = "nope"
    with pytest.raises(InputError, match="first-stage"):
        analyse(coll, "alpha", "fancy")




def test_a_first_stage_given_as_a_file_is_said_to_be_a_method_name(runs_dir):
    """--first-stage names a method among the runs: a path was read as a name, and told to put 'PATH.run' beside."""
    from acurank_cli.errors import InputError

    path = str(runs_dir / "alpha" / "bm25.run")
    coll = build_collection(dirs=[runs_dir], first_stage=path)
    with pytest.raises(InputError) as refused:
        analyse(coll, "alpha", "fancy", "base", k=5)
    assert str(refused.value) == (f"--first-stage {path!r} names the first stage's method among the runs (e.g. bm25), "
                                  "not a file: give the file as --run alpha:bm25=PATH and --first-stage bm25")
