"""p_topk = P(rank <= k) under AcuRank's final ratings: in the trace's final step (and only there), summing
to k, equal to what the API reports, and higher for relevant documents."""

from __future__ import annotations

import json

import pytest

from conftest import acurank, small_run


def test_trace_carries_p_topk_on_the_final_ratings_only(sample, tmp_path):
    run, qids = small_run(sample, tmp_path, queries=3)
    trace = tmp_path / "t.jsonl"
    qrels = sample / "dl19" / "qrels.txt"
    acurank("rerank", run, "--reranker", "simulated", "--qrels", qrels, "--trace", trace, "-o", tmp_path / "a.run")
    recs = [json.loads(x) for x in trace.read_text().splitlines()]
    for qid in qids:
        steps = [r for r in recs if r["qid"] == qid]
        assert steps[-1]["phase"] == "done" and all("p_topk" not in d for r in steps[:-1] for d in r["docs"])
        final = steps[-1]["docs"]
        assert sum(d["p_topk"] for d in final) == pytest.approx(10.0, abs=1e-6)
        assert all(0.0 <= d["p_topk"] <= 1.0 for d in final)
        grades = {line.split()[2]: int(line.split()[3]) for line in qrels.read_text().splitlines() if line.split()[0] == qid}
        rel = [d["p_topk"] for d in final if grades.get(d["docid"], 0) >= 2]
        non = [d["p_topk"] for d in final if grades.get(d["docid"], 0) == 0]
        assert rel and non and sum(rel) / len(rel) > sum(non) / len(non)


def test_api_p_topk_is_the_final_ratings(sample):
    from acurank_cli import Reranker
    from acurank_cli.io.collection_files import read_qrels
    from acurank_cli.io.runs import read_run

    run = read_run(sample / "dl19" / "bm25.run")
    qrels = read_qrels(sample / "dl19" / "qrels.txt")
    qid = next(iter(run))
    docs = [{"id": c.docid, "text": "", "score": c.score} for c in run[qid]]
    with Reranker("simulated", method="acurank", init="score", qrels=qrels, cache=None) as rr:
        out = rr.rerank("q", docs, qid=qid)
    assert out.k == 10 and sum(d.p_topk for d in out) == pytest.approx(10.0, abs=1e-6)
    with Reranker("simulated", method="sw-1", qrels=qrels, cache=None) as rr:
        plain = rr.rerank("q", docs, qid=qid)
        with pytest.raises(ValueError, match="min_p_topk needs a method with ratings"):
            rr.rerank("q", docs, qid=qid, min_p_topk=0.5)
    assert plain.k is None and all(d.p_topk is None for d in plain)
