"""`acurank eval` against pytrec_eval itself: trec_eval and ir_measures names, -c / --no-fill, --qids."""

from __future__ import annotations

import json
import math
import statistics

import pytest
import pytrec_eval

from acurank_cli.io.collection_files import read_qrels
from acurank_cli.io.runs import read_run

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
    """Judged@10, ERR@10, alpha_nDCG@10 (valid ir_measures names that pytrec_eval does not
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
    """A run over a subset of the qrels' queries was averaged over all of them (the others as 0)
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


def test_measures_are_named_one_way_in_tables(sample):
    """Names switched between trec_eval's and ir_measures' styles within one table. Tables
    for people name every measure by ir_measures' canonical name (ndcg_cut_10 -> nDCG@10, map -> AP,
    recall.100 -> R@100, P.10 at -l 2 -> P(rel=2)@10); the machine formats keep the names asked."""
    args = ("eval", sample / "dl19" / "bm25.run", "--qrels", sample / "dl19" / "qrels.txt", "-m", "ndcg_cut_10",
            "-m", "map", "-m", "recall.100", "-m", "P.10", "-m", "nDCG@5", "-l", "2")
    head = acurank(*args, "-f", "markdown").stdout.splitlines()
    row = next(line for line in head if line.startswith("| run"))
    assert [c.strip() for c in row.strip("|").split("|")] == [
        "run", "nDCG@10", "AP(rel=2)", "R(rel=2)@100", "P(rel=2)@10", "nDCG@5", "calls/query"]
    tsv = acurank(*args, "-f", "tsv").stdout.splitlines()
    assert [line.split("\t")[0] for line in tsv] == ["ndcg_cut_10", "map", "recall_100", "P_10", "nDCG@5"]
    report = acurank("report", "table", sample / "dl19" / "bm25.run", "--qrels", sample / "dl19" / "qrels.txt",
                     "-m", "map", "-m", "ndcg_cut_10", "-f", "markdown").stdout
    assert "| AP" in report and "| nDCG@10" in report and "MAP" not in report and "ndcg_cut" not in report


def test_measure_parameters_are_checked_in_one_line(sample, tmp_path):
    """ir_measures asserts a measure's parameters (SDCG needs max_rel; INST's T is a float): an AssertionError
    traceback before; now one line naming the fault, exit 2, in eval and report."""
    run, qrels = sample / "dl19" / "bm25.run", sample / "dl19" / "qrels.txt"
    for command in (("eval", run), ("report", "table", run)):
        bad = acurank(*command, "--qrels", qrels, "-m", "SDCG@10", check=False)
        assert bad.returncode == 2 and "Traceback" not in bad.stderr
        assert "measure 'SDCG@10': max_rel is required (SDCG takes: cutoff" in bad.stderr
    bad = acurank("eval", run, "--qrels", qrels, "-m", "INST(T=1)", check=False)
    assert bad.returncode == 2 and "T=1 is not a valid value (a float); max_rel is required" in bad.stderr
    bad = acurank("eval", run, "--qrels", qrels, "-m", "P(foo=2)@10", check=False)
    assert bad.returncode == 2 and "measure 'P(foo=2)@10': unknown 'foo' (P takes: cutoff" in bad.stderr


def test_a_providers_warning_is_said_once(tmp_path):
    """Ir_measures' providers log a warning per evaluation (cwl_eval: "max_rel=2 but ... 3
    was observed"), so three runs said it three times. Once a process now, still through ir_measures' handler.
    A fresh process: ir_measures' handler writes to the stderr it found at import."""
    import subprocess
    import sys

    from conftest import ENV

    qrels = tmp_path / "q.txt"
    qrels.write_text("q1 0 a 3\nq1 0 b 0\nq2 0 c 1\n")
    runs = []
    for i in range(3):
        runs.append(tmp_path / f"r{i}.run")
        runs[-1].write_text(f"q1 Q0 a 1 3 t\nq1 Q0 b 2 2 t\nq2 Q0 c 1 {i + 1} t\n")
    proc = subprocess.run([sys.executable, "-m", "acurank_cli", "eval", *map(str, runs), "--qrels", str(qrels),
                           "-m", "SDCG(max_rel=2)@10", "-f", "json"], capture_output=True, text=True, env=ENV)
    assert proc.returncode == 0, proc.stderr
    said = "max_rel=2 but at least one relevance score of 3 was observed"
    assert proc.stderr.count(said) == 1, proc.stderr
    # the clipping it warns of, by hand: SDCG@10 = sum of (rel / max_rel) / log2(rank + 1) over the top 10,
    # scaled by the most it can be (every rank at max_rel): q1's a clipped 3 -> 2 is gain 1 at rank 1; q2's c
    # gain 1/2 at rank 1 (without the clipping q1 would score 1.5 / scale)
    scale = sum(1 / math.log2(r + 1) for r in range(1, 11))
    expected = (1 / scale + 0.5 / scale) / 2
    assert [r["SDCG(max_rel=2)@10"] for r in json.loads(proc.stdout)] == [pytest.approx(expected, abs=1e-12)] * 3
