"""``--passages`` on the command line: DL19's passages (at most 193 words) are never longer than 200 words, so
``--passages 200`` writes the very run of a plain rerank; a shorter limit splits them and the run is still one TREC
line per document, the stats naming each split document's scoring passage; bad values are one line and exit 2
before any call; a run is not resumed under other passage settings."""

from __future__ import annotations

import gzip
import json

import pytest

from conftest import SAMPLE, acurank, small_run

from acurank_cli.run.passages import _WORD

DL19 = SAMPLE / "dl19"


def texts() -> dict[str, str]:
    with gzip.open(DL19 / "passages.jsonl.gz", "rt") as f:
        return {str(d.get("id", d.get("_id"))): d.get("contents", d.get("text")) for d in map(json.loads, f)}


def test_no_document_longer_than_the_limit_gives_the_same_run_and_a_shorter_limit_splits(sample, tmp_path):
    run, qids = small_run(sample, tmp_path, queries=2)
    common = ("--reranker", "minilm", "--corpus", DL19 / "passages.jsonl.gz", "--topics", DL19 / "topics.tsv",
              "--cache", tmp_path / "calls.sqlite")
    acurank("rerank", run, *common, "-o", tmp_path / "whole.run")
    said = acurank("rerank", run, *common, "--passages", "200", "-o", tmp_path / "p200.run").stderr
    assert (tmp_path / "p200.run").read_bytes() == (tmp_path / "whole.run").read_bytes()
    assert "0 documents split, 100.0 passages ranked/query" in said
    acurank("rerank", run, *common, "--passages", "60:30", "-o", tmp_path / "p60.run", "--trace", tmp_path / "t.jsonl")
    lines = [line.split() for line in (tmp_path / "p60.run").read_text().splitlines()]
    whole = [line.split() for line in (tmp_path / "whole.run").read_text().splitlines()]
    for q in qids:  # one line per document, ranks 1..n, scores strictly decreasing
        mine = [x for x in lines if x[0] == q]
        assert sorted(x[2] for x in mine) == sorted(x[2] for x in whole if x[0] == q)
        assert [int(x[3]) for x in mine] == list(range(1, len(mine) + 1))
        scores = [float(x[4]) for x in mine]
        assert all(a > b for a, b in zip(scores, scores[1:]))
    corpus = texts()
    stats = [json.loads(x) for x in (tmp_path / "p60.stats.jsonl").read_text().splitlines()]
    for record in stats:
        p = record["passages"]
        long = [d for d, _ in ((x[2], 0) for x in lines if x[0] == record["qid"])
                if len(_WORD.findall(corpus[d])) > 60]
        assert p["split"] == len(long) and set(p["best"]) == set(long)
        for docid, best in p["best"].items():  # the span is the passage: 60 words, cut from the document's text
            start, end = best["chars"]
            assert len(_WORD.findall(corpus[docid][start:end])) == 60 == best["words"][1] - best["words"][0]
        assert p["ranked"] > 100 and record["iterations"][0]["window_sizes"][0] == 20
    traced = json.loads((tmp_path / "t.jsonl").read_text().splitlines()[0])
    assert any("#" in d["docid"] for d in traced["docs"])  # the trace rates passages


@pytest.mark.parametrize("flags, said", [
    (("--passages", "0"), "--passages 0: must be WORDS or WORDS:STRIDE"),
    (("--passages", "10:20"), "--passages 10:20: must be WORDS:STRIDE with STRIDE at most WORDS"),
    (("--passages", "ten"), "--passages ten: must be WORDS or WORDS:STRIDE"),
    (("--passage-score", "maxp"), "--passage-score maxp: must be given only with passages"),
    (("--passages", "10", "--passage-score", "best"), "--passage-score best: must be one of maxp, firstp, sum, softmax"),
    (("--passages", "10", "--reranker", "simulated"), "splits the documents' texts, and this reranker reads none"),
])
def test_bad_passage_flags_are_one_line_and_exit_2(sample, tmp_path, flags, said):
    run, _ = small_run(sample, tmp_path, queries=1)
    got = acurank("rerank", run, "--qrels", DL19 / "qrels.txt", "--no-cache", "-o", tmp_path / "x.run", *flags,
                  check=False)
    assert got.returncode == 2, got.stderr
    assert said in got.stderr and len(got.stderr.strip().splitlines()) == 1, got.stderr
    assert not (tmp_path / "x.run").exists()


def test_a_run_is_not_resumed_under_other_passage_settings(sample, tmp_path):
    run, _ = small_run(sample, tmp_path, queries=1)
    common = ("--corpus", DL19 / "passages.jsonl.gz", "--topics", DL19 / "topics.tsv", "--cache",
              tmp_path / "calls.sqlite", "-o", tmp_path / "p.run")
    acurank("rerank", run, *common, "--passages", "60")
    got = acurank("rerank", run, *common, "--passages", "80", check=False)
    assert got.returncode == 2 and "passages" in got.stderr, got.stderr


def test_a_call_cap_is_checked_against_the_passages_before_any_call(sample, tmp_path):
    """acurank-9 fits 100 documents (5 windows), not their 60-word passages (over 200 a query: 11 windows or more)."""
    run, _ = small_run(sample, tmp_path, queries=2)
    got = acurank("rerank", run, "--method", "acurank-9", "--corpus", DL19 / "passages.jsonl.gz", "--topics",
                  DL19 / "topics.tsv", "--no-cache", "--passages", "60:30", "-o", tmp_path / "x.run", check=False)
    assert got.returncode == 2 and "initial pass alone takes" in got.stderr, got.stderr
    assert not (tmp_path / "x.run").exists()


def test_the_summary_says_when_documents_were_capped(sample, tmp_path):
    """Issue 81, item 3: --max-passages cuts a long document to its first passages; the stats said "capped", the
    summary line said only "N documents split". 10:10 with a cap of 3 reads words 0-30 of each document: every
    document longer than 30 words is capped, and the summary says how many and where reading stopped."""
    run, _ = small_run(sample, tmp_path, queries=1, depth=20)
    said = acurank("rerank", run, "--reranker", "minilm", "--corpus", DL19 / "passages.jsonl.gz", "--topics",
                   DL19 / "topics.tsv", "--no-cache", "--passages", "10:10", "--max-passages", "3",
                   "-o", tmp_path / "c.run").stderr
    record = json.loads((tmp_path / "c.stats.jsonl").read_text().splitlines()[0])
    corpus = texts()
    longer = sum(len(_WORD.findall(corpus[line.split()[2]])) > 30
                 for line in (tmp_path / "c.run").read_text().splitlines())
    assert record["passages"]["capped"] == longer > 0
    assert f"{longer} documents capped at --max-passages 3 (words past 30 not read; a larger --max-passages reads them)" \
        in said, said
