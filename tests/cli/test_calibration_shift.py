"""Issue 83, item 3: a calibration map records its fitting queries' first-stage signals (each query's top and median
score), and a run applying it compares its own queries' with them before any call (two-sided Mann-Whitney per
signal, Bonferroni over the two, alpha 0.01: acurank_cli/relevance/shift.py). The expected p is computed here from
the run files with scipy, not read from the code; the API says the same of its first 20 queries, once."""

from __future__ import annotations

import json
import statistics
import warnings

import pytest
from scipy.stats import mannwhitneyu

from conftest import ROOT, acurank

DL19, DL23 = ROOT / "sample_runs" / "dl19", ROOT / "sample_runs" / "dl23"


def _signals(run_path, qids=None) -> dict[str, list[float]]:
    scores: dict[str, list[float]] = {}
    for line in run_path.read_text().splitlines():
        q, _, _, _, s, _ = line.split()
        if qids is None or q in qids:
            scores.setdefault(q, []).append(float(s))
    return {"top": [max(v) for v in scores.values()], "median": [statistics.median(v) for v in scores.values()]}


def _expected_p(fit: dict, here: dict) -> float:
    return min(1.0, 2 * min(mannwhitneyu(here[n], fit[n], alternative="two-sided").pvalue for n in ("top", "median")))


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """A map fit on DL19's first 21 judged queries (acurank-9, the simulated reranker); the other 22 held back."""
    tmp = tmp_path_factory.mktemp("shift")
    judged = sorted({line.split()[0] for line in (DL19 / "qrels.txt").read_text().splitlines()})
    fit, held = judged[:21], judged[21:]
    acurank("rerank", DL19 / "bm25.run", "--method", "acurank-9", "--reranker", "simulated", "--qrels",
            DL19 / "qrels.txt", "--qids", ",".join(fit), "--calibrate", DL19 / "qrels.txt", "--relevant-grade", "2",
            "--calibration", tmp / "map.json", "-o", tmp / "fit.run")
    return tmp, fit, held


def test_the_map_records_its_fitting_queries_signals(fitted):
    tmp, fit, _ = fitted
    recorded = json.loads((tmp / "map.json").read_text())["fit"]["signals"]
    expected = _signals(DL19 / "bm25.run", set(fit))
    assert sorted(recorded["top"]) == sorted(expected["top"]) and sorted(recorded["median"]) == sorted(expected["median"])


@pytest.mark.parametrize("where, qids, shifted", [("dl19", "held", False), ("dl23", None, True)])
def test_a_run_is_told_once_before_any_call_when_its_queries_are_unlike_the_maps(fitted, tmp_path, where, qids,
                                                                                 shifted):
    tmp, fit, held = fitted
    data = DL19 if where == "dl19" else DL23
    picked = ["--qids", ",".join(held)] if qids == "held" else []
    ran = acurank("rerank", data / "bm25.run", "--method", "acurank-9", "--reranker", "simulated", "--qrels",
                  data / "qrels.txt", *picked, "--calibration", tmp / "map.json", "-o", tmp_path / "x.run")
    said = [line for line in ran.stderr.splitlines() if "first-stage scores differ" in line]
    meta = json.loads((tmp_path / "x.run.meta.json").read_text())["calibration_shift"]
    here = _signals(data / "bm25.run", set(held) if qids == "held" else None)
    assert meta["p"] == pytest.approx(_expected_p(_signals(DL19 / "bm25.run", set(fit)), here), rel=1e-9)
    assert meta["shifted"] is shifted and meta["fitted"] == 21 and meta["queries"] == len(here["top"])
    assert len(said) == (1 if shifted else 0)
    if shifted:  # before the run's first line: said before any call
        assert said[0].startswith("acurank: warning: --calibration: these 82 queries' first-stage scores differ from "
                                  "the 21 the map was fit on") and meta["p"] < 0.01
        assert ran.stderr.index(said[0]) < ran.stderr.index("acurank: acurank-9 with reranker")


def test_the_api_compares_its_first_20_queries_once(fitted):
    from acurank_cli.api import Reranker
    from acurank_cli.relevance.shift import CalibrationShiftWarning

    tmp, _, held = fitted

    def queries(data, qids=None):
        blocks: dict[str, list[dict]] = {}
        for line in (data / "bm25.run").read_text().splitlines():
            q, _, d, _, s, _ = line.split()
            if qids is None or q in qids:
                blocks.setdefault(q, []).append({"id": d, "text": d, "score": float(s)})
        return list(blocks.items())

    for data, qids, shifted in ((DL23, None, True), (DL19, set(held), False)):
        grades = {}
        for line in (data / "qrels.txt").read_text().splitlines():
            q, _, d, g = line.split()
            grades.setdefault(q, {})[d] = int(g)
        with Reranker("simulated", method="acurank-9", cache=None, qrels=grades, calibration=str(tmp / "map.json"),
                      init="score") as rr:
            batch = queries(data, qids)[:20]
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                rr.rerank_batch([(f"question {q}", docs) for q, docs in batch[:10]], qids=[q for q, _ in batch[:10]])
                assert rr.calibration_shift is None  # 10 queries: not compared yet
                rr.rerank_batch([(f"question {q}", docs) for q, docs in batch[10:]], qids=[q for q, _ in batch[10:]])
                rr.rerank_batch([(f"question {q}", docs) for q, docs in batch[:3]], qids=[q for q, _ in batch[:3]])
            told = [w for w in caught if issubclass(w.category, CalibrationShiftWarning)]
            assert rr.calibration_shift is not None and rr.calibration_shift.shifted is shifted
            assert len(told) == (1 if shifted else 0) and rr.calibration_shift.queries == 20
            assert all(w.filename == __file__ for w in told)  # the caller's line, not the API's own


def test_the_api_counts_each_query_once_by_its_text_under_the_default_qid(fitted):
    """A RAG caller's calls share the default qid, a batch's are its places: each question is a query of its own (20
    questions of DL23, each asked through rerank() without a qid, are compared at the 20th), and one question asked
    again, in a batch or in other spacing and case, is one query (a batch of 20 copies was a false alarm)."""
    from acurank_cli.api import Reranker
    from acurank_cli.relevance.shift import CalibrationShiftWarning

    tmp, _, _ = fitted
    blocks: dict[str, list[dict]] = {}
    for line in (DL23 / "bm25.run").read_text().splitlines():
        q, _, d, _, s, _ = line.split()
        blocks.setdefault(q, []).append({"id": d, "text": d, "score": float(s)})
    grades: dict[str, dict[str, int]] = {}
    for line in (DL23 / "qrels.txt").read_text().splitlines():
        q, _, d, g = line.split()
        grades.setdefault("q", {})[d] = int(g)  # the default qid's grades (the simulated reranker orders by them)
    batch = list(blocks.items())[:20]
    with Reranker("simulated", method="acurank-9", cache=None, qrels=grades, calibration=str(tmp / "map.json"),
                  init="score") as rr, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(25):  # one question, again and again, in other spacing and case: one query
            rr.rerank(f"Question  {batch[0][0]}" + " " * n if n % 2 else f"question {batch[0][0]}", batch[0][1])
        rr.rerank_batch([(f"question {batch[0][0]}", batch[0][1])] * 20)  # at 20 places of a batch: one query
        assert rr.calibration_shift is None and len(rr._watch.rows) == 1
        for qid, docs in batch[1:]:
            rr.rerank(f"question {qid}", docs)
        told = [w for w in caught if issubclass(w.category, CalibrationShiftWarning)]
    assert rr.calibration_shift is not None and rr.calibration_shift.queries == 20 and rr.calibration_shift.shifted
    assert len(told) == 1
