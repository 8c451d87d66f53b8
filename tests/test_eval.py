"""`acurank eval` against pytrec_eval itself: trec_eval and ir_measures names, -c / --no-fill, --qids."""

from __future__ import annotations

import json
import statistics

import pytest
import pytrec_eval

from acurank_cli.io.readers import read_qrels, read_run

from conftest import DATA
from conftest import acurank

#: our name -> (pytrec_eval measure, relevance level)
NAMES = {
    "ndcg": ("ndcg", 1), "ndcg_cut.10": ("ndcg_cut_10", 1), "ndcg_cut_10": ("ndcg_cut_10", 1), "map": ("map", 2),
    "recall.100": ("recall_100", 2), "P.10": ("P_10", 2), "recip_rank": ("recip_rank", 2),
    "nDCG@10": ("ndcg_cut_10", 1), "nDCG": ("ndcg", 1), "AP": ("map", 2), "R@100": ("recall_100", 2),
    "P@10": ("P_10", 2), "RR": ("recip_rank", 2),
}


def _reference(run_path, qrels_path, measure, level, queries=None):
    qrels = read_qrels(qrels_path)
    run = read_run(run_path).scores()
    values = pytrec_eval.RelevanceEvaluator(qrels, {measure}, relevance_level=level).evaluate(run)
    over = queries if queries is not None else list(qrels)
    return statistics.fmean(values.get(q, {measure: 0.0})[measure] for q in over)


def _eval(*args):
    lines = acurank("eval", *args, "--format", "tsv").stdout.splitlines()
    return {l.split("\t")[0]: float(l.split("\t")[2]) for l in lines if l.split("\t")[1] == "all"}


@pytest.mark.parametrize("level", [1, 2])
def test_every_name_equals_pytrec_eval_on_dl19_bm25(sample, level):
    run, qrels = sample / "dl19" / "bm25.run", sample / "dl19" / "qrels.txt"
    args = [x for name in NAMES for x in ("-m", name)]
    got = _eval(run, "--qrels", qrels, "-l", level, *args)
    for name, (measure, binary) in NAMES.items():
        key = name.replace(".", "_")  # trec_eval prints dotted names with "_"; ir_measures names have no dots
        expected = _reference(run, qrels, measure, level if binary == 2 else 1)
        assert got[key] == pytest.approx(expected, abs=5e-5), (name, level)
    assert got["ndcg"] == 0.4602 and got["ndcg_cut_10"] == 0.5058  # trec_eval's ndcg is not ndcg_cut_10


def test_fill_and_no_fill_on_a_five_query_run(sample):
    run, qrels = DATA / "dl19-first5-minilm-acurank.run", sample / "dl19" / "qrels.txt"
    five = list(read_run(run))
    assert len(five) == 5
    assert _eval(run, "--qrels", qrels, "--no-fill")["ndcg_cut_10"] == 0.7956
    assert _eval(run, "--qrels", qrels)["ndcg_cut_10"] == 0.0925  # trec_eval -c: the other 38 queries score 0
    assert _eval(run, "--qrels", qrels, "--no-fill")["ndcg_cut_10"] == round(_reference(run, qrels, "ndcg_cut_10", 1, five), 4)
    # --qids restricts run and qrels alike: the same 5 queries, averaged over those 5
    assert _eval(run, "--qrels", qrels, "--qids", ",".join(five))["ndcg_cut_10"] == 0.7956


def test_trec_eval_layout_and_unknown_measure(sample):
    out = acurank("eval", sample / "dl19" / "bm25.run", "--qrels", sample / "dl19" / "qrels.txt", "-m", "P.10",
                  "-q", "--format", "trec_eval").stdout.splitlines()
    assert out[-1] == "P_10                  \tall\t0.6186" and len(out) == 44
    bad = acurank("eval", sample / "dl19" / "bm25.run", "--qrels", sample / "dl19" / "qrels.txt", "-m", "ndgc@10",
                  check=False)
    assert bad.returncode == 2 and "unknown measure 'ndgc@10'" in bad.stderr and "Traceback" not in bad.stderr


def test_measures_beyond_pytrec_eval_are_computed_or_refused(sample, tmp_path):
    """Issue 36 item 2: Judged@10, ERR@10, alpha_nDCG@10 (valid ir_measures names that pytrec_eval does not
    compute) ended in a ValueError traceback in eval and report."""
    from conftest import acurank

    qrels = tmp_path / "q.txt"
    qrels.write_text("q1 0 a 2\nq1 0 b 0\nq2 0 c 1\n")
    run = tmp_path / "r.run"
    run.write_text("q1 Q0 a 1 3 t\nq1 Q0 x 2 2 t\nq1 Q0 b 3 1 t\nq2 Q0 y 1 2 t\nq2 Q0 c 2 1 t\n")
    out = json.loads(acurank("eval", run, "--qrels", qrels, "-m", "Judged@2", "-m", "Judged@3", "-f", "json").stdout)
    # by hand: q1 top 2 = a (judged), x (not): 1/2; q2 top 2 = y (not), c (judged): 1/2. Top 3 of q1: 2/3; q2: 1/2
    assert out["Judged@2"] == pytest.approx(0.5) and out["Judged@3"] == pytest.approx((2 / 3 + 1 / 2) / 2)
    for command in (("eval", run), ("report", "table", run)):
        bad = acurank(*command, "--qrels", qrels, "-m", "alpha_nDCG@10", check=False)
        assert bad.returncode == 2 and "Traceback" not in bad.stderr
        assert "alpha_nDCG@10 cannot be computed here (computed by the pyndeval provider" in bad.stderr


def test_coverage_is_reported_when_a_run_holds_part_of_the_qrels(sample, tmp_path):
    """Issue 36 item 6: a run over a subset of the qrels' queries was averaged over all of them (the others as 0)
    with no word, in eval and report."""
    from conftest import acurank

    qrels = sample / "dl19" / "qrels.txt"
    lines = (sample / "dl19" / "bm25.run").read_text().splitlines(keepends=True)
    qids = list(dict.fromkeys(l.split()[0] for l in lines))
    part = tmp_path / "part.run"
    part.write_text("".join(l for l in lines if l.split()[0] in qids[:5]))
    ev = acurank("eval", part, "--qrels", qrels)
    assert f"warning: {part}: 5 of the 43 qrels queries are in the run; the mean counts the others as 0" in ev.stderr
    whole = acurank("eval", sample / "dl19" / "bm25.run", "--qrels", qrels)
    assert "qrels queries are in the run" not in whole.stderr
    rep = acurank("report", "table", part, "--qrels", qrels)
    assert "warning: dl19/part: 5 of the 43 qrels queries are in the run; the others count as 0" in rep.stderr
