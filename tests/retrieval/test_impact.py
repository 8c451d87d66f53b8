"""Learned sparse (impact) retrieval: an impact index built from a JsonVectorCollection the test writes,
searched with pre-encoded queries, against dot products computed by hand; the CLI's errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from acurank_cli.errors import InputError

from conftest import acurank

#: quantized term weights; "common" is in every document (idf 0: Pyserini drops it from queries)
DOCS = {
    "d1": {"alpha": 3, "beta": 1},
    "d2": {"beta": 5, "gamma": 2},
    "d3": {"alpha": 1, "gamma": 4, "delta": 2},
    "d4": {"delta": 7},
    "d5": {"epsilon": 9},
}
QUERIES = {
    "q1": {"alpha": 2, "gamma": 3, "common": 50},
    "q2": {"delta": 1, "beta": 2},
    "q3": {"zeta": 4},  # in no document
}


def dot(q: dict, d: dict) -> int:
    return sum(w * d.get(t, 0) for t, w in q.items() if t != "common")


@pytest.fixture(scope="module")
def files(tmp_path_factory, jvm) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("impact")
    vectors = folder / "vectors.jsonl"
    vectors.write_text("".join(json.dumps({"id": d, "contents": f"passage {d}", "vector": {**v, "common": 1}}) + "\n"
                               for d, v in DOCS.items()))
    queries = folder / "queries.jsonl"
    queries.write_text("".join(json.dumps({"qid": q, "vector": v}) + "\n" for q, v in QUERIES.items()))
    acurank("index", "--impact", "--input", vectors, "--index", folder / "index", "--threads", "1", "-q")
    return {"vectors": vectors, "queries": queries, "index": folder / "index", "dir": folder}


def test_impact_search_ranks_by_the_hand_computed_dot_product(files):
    """q1 = 2 alpha + 3 gamma (+ common, dropped): d3 2*1 + 3*4 = 14, d1 2*3 = 6, d2 3*2 = 6 (tie: docid order,
    the later one a hair lower, as Anserini splits ties), d4 and d5 0 (not retrieved). q2 = delta + 2 beta:
    d2 10, d4 7, d1 2, d3 2. q3 matches nothing."""
    out = acurank("retrieve", "--index", files["index"], "--encoded-queries", files["queries"], "--hits", "10", "-q").stdout
    run: dict[str, list[tuple[str, float]]] = {}
    for line in out.splitlines():
        qid, _, docid, rank, score, tag = line.split()
        run.setdefault(qid, []).append((docid, float(score)))
        assert tag == "impact" and int(rank) == len(run[qid])
    assert [d for d, _ in run["q1"]] == ["d3", "d1", "d2"] and [d for d, _ in run["q2"]] == ["d2", "d4", "d1", "d3"]
    assert "q3" not in run
    for qid, hits in run.items():
        for docid, score in hits:
            assert score == pytest.approx(dot(QUERIES[qid], DOCS[docid]), abs=1e-5)
    assert run["q1"][1][1] > run["q1"][2][1]  # the tie split
    assert (14, 6, 6, 10, 7, 2, 2) == (dot(QUERIES["q1"], DOCS["d3"]), dot(QUERIES["q1"], DOCS["d1"]),
                                        dot(QUERIES["q1"], DOCS["d2"]), dot(QUERIES["q2"], DOCS["d2"]),
                                        dot(QUERIES["q2"], DOCS["d4"]), dot(QUERIES["q2"], DOCS["d1"]),
                                        dot(QUERIES["q2"], DOCS["d3"]))


def test_topics_pick_and_order_the_encoded_queries_and_texts_come_from_the_index(files):
    topics = files["dir"] / "topics.tsv"
    topics.write_text("q2\tdelta beta\nq1\talpha gamma\n")
    out = acurank("retrieve", "--index", files["index"], "--encoded-queries", files["queries"], "--topics", topics,
                  "--hits", "2", "--tag", "splade", "-q").stdout
    assert [line.split()[0] for line in out.splitlines()] == ["q2", "q2", "q1", "q1"]
    from acurank_cli.retrieval.lucene import fetch_docs

    assert fetch_docs(files["index"], ["d3"])["d3"].text == "passage d3"


def test_bad_vectors_and_queries_are_refused_with_file_and_line(files, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "x", "vector": {"a": 1}}) + "\n" + json.dumps({"id": "y", "vector": {"a": 0.37}}) + "\n")
    proc = acurank("index", "--impact", "--input", bad, "--index", tmp_path / "i", "-q", check=False)
    assert proc.returncode == 2 and f"{bad}" in proc.stderr and "line 2" in proc.stderr and "integers" in proc.stderr
    topics = tmp_path / "t.tsv"
    topics.write_text("q9\tnothing\n")
    proc = acurank("retrieve", "--index", files["index"], "--encoded-queries", files["queries"], "--topics", topics,
                   check=False)
    assert proc.returncode == 2 and "no encoded vector for query q9" in proc.stderr
    from acurank_cli.retrieval.impact import read_encoded_queries

    dup = tmp_path / "dup.jsonl"
    dup.write_text('{"qid": "a", "vector": {}}\n{"qid": "a", "vector": {}}\n')
    with pytest.raises(InputError, match="line 2: query a appears twice"):
        read_encoded_queries(dup)


def test_an_impact_prebuilt_name_is_looked_up_as_an_impact_index(jvm, monkeypatch):
    """The SPLADE++ ED name is in Anserini's impact catalogue, not the BM25 one; the download itself is
    replaced by a failure (never fetched in a test)."""
    import pyserini.util

    from acurank_cli.retrieval.lucene import _prebuilt

    def offline(name, **kw):
        raise ValueError(f"no network for {name}")

    monkeypatch.setattr(pyserini.util, "download_prebuilt_index", offline)
    with pytest.raises(InputError) as bm25:
        _prebuilt("msmarco-v1-passage.splade-pp-ed")
    assert "neither an index folder" in str(bm25.value)
    with pytest.raises(InputError) as impact:
        _prebuilt("msmarco-v1-passage.splade-pp-ed", impact=True)
    assert "could not be downloaded (no network for msmarco-v1-passage.splade-pp-ed)" in str(impact.value)
