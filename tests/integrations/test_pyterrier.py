"""The PyTerrier transformer: inside pt.Experiment (Holm correction, baseline 0) its figures equal `acurank rerank`
+ `acurank eval` on the same run, and its ranking equals the CLI's run, query by query; with every query in one
batch and with batches of one; an empty frame in, an empty frame out; a missing column named."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

pt = pytest.importorskip("pyterrier", reason="the pyterrier extra is not installed")
pd = pytest.importorskip("pandas")

from conftest import SAMPLE, acurank  # noqa: E402

from acurank_cli.errors import InputError  # noqa: E402
from acurank_cli.integrations.pyterrier import OUTPUT_COLUMNS, AcuRankReranker  # noqa: E402

DL19 = SAMPLE / "dl19"
QRELS = DL19 / "qrels.txt"
SIM = {"qrels": str(QRELS), "sim_noise": 1.0, "sim_seed": 0, "cache": None}


def _frames():
    run = pd.read_csv(DL19 / "bm25.run", sep=r"\s+", header=None, dtype={0: str, 2: str},
                      names=["qid", "Q0", "docno", "rank", "score", "tag"])
    topics = pd.read_csv(DL19 / "topics.tsv", sep="\t", header=None, names=["qid", "query"], dtype=str,
                         quoting=3)
    run = run.merge(topics, on="qid")[["qid", "query", "docno", "score", "rank"]]
    qrels = pd.read_csv(QRELS, sep=r"\s+", header=None, names=["qid", "iter", "docno", "label"],
                        dtype={"qid": str, "docno": str})[["qid", "docno", "label"]]
    return run, topics, qrels


def _cli(method: str, tmp_path: Path, *extra) -> tuple[Path, dict[str, float]]:
    command = "baseline" if method.startswith("sw-") else "rerank"
    out = tmp_path / f"{method}.run"
    acurank(command, DL19 / "bm25.run", "--method", method, "--reranker", "simulated", "--qrels", QRELS,
            "--sim-noise", "1", "--sim-seed", "0", "--no-cache", "-o", out, *extra)
    figures = {}
    for measure, level in (("nDCG@10", "1"), ("AP", "2")):
        record = json.loads(acurank("eval", out, "--qrels", QRELS, "-m", measure, "-l", level, "-f", "json").stdout)
        (figures[measure],) = [v for k, v in record.items() if k not in ("run", "queries", "fill", "mean_calls")]
    return out, figures


def _by_query(frame) -> dict[str, list[str]]:
    return {q: list(g.sort_values("rank")["docno"]) for q, g in frame.groupby("qid", sort=False)}


def _run_file(path: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        q, _, d, *_ = line.split()
        out.setdefault(q, []).append(d)
    return out


@pytest.mark.parametrize("method", ["acurank-9", "acurank-auto-9", "sw-1"])
def test_experiment_figures_and_ranking_equal_the_cli(method, tmp_path):
    run, topics, qrels = _frames()
    cli_run, cli = _cli(method, tmp_path)
    bm25 = pt.Transformer.from_df(run)
    for batch in (None, 1):
        reranker = AcuRankReranker("simulated", method=method, batch_queries=batch, **SIM)
        result = pt.Experiment([bm25, bm25 >> reranker], topics, qrels,
                               [pt.measures.nDCG @ 10, pt.measures.AP(rel=2)], names=["bm25", method],
                               baseline=0, correction="holm")
        row = result.set_index("name").loc[method]
        assert math.isclose(row["nDCG@10"], cli["nDCG@10"], abs_tol=1e-9), (batch, row["nDCG@10"], cli)
        assert math.isclose(row["AP(rel=2)"], cli["AP"], abs_tol=1e-9), (batch, row["AP(rel=2)"], cli)
        assert "nDCG@10 p-value" in result.columns and "nDCG@10 reject" in result.columns  # Holm, against bm25
        frame = reranker.transform(run)
        assert _by_query(frame) == _run_file(cli_run)
        assert list(frame.columns[-len(OUTPUT_COLUMNS):]) == list(OUTPUT_COLUMNS) or set(OUTPUT_COLUMNS) <= set(frame.columns)
        assert sum(a["calls"] for a in reranker.accounting.values()) > 0
        for _, g in frame.groupby("qid"):
            assert list(g["rank"]) == list(range(len(g))) and g["score"].is_monotonic_decreasing
        if method == "sw-1":
            assert frame["p_topk"].isna().all()
        else:
            assert frame["p_topk"].between(0, 1).all() and (frame["sigma"] > 0).all()


def test_an_empty_frame_gives_an_empty_frame_with_the_output_columns():
    reranker = AcuRankReranker("simulated", method="acurank", **SIM)
    empty = pd.DataFrame(columns=["qid", "query", "docno", "score"])
    out = reranker.transform(empty)
    assert len(out) == 0 and list(out.columns) == ["qid", "query", "docno", "score", "rank", "p_topk", "mu", "sigma"]


def test_a_missing_column_is_named():
    reranker = AcuRankReranker("simulated", method="acurank", **SIM)
    with pytest.raises(InputError, match="lacks column 'query'"):
        reranker.transform(pd.DataFrame({"qid": ["1"], "docno": ["d"]}))
    text_needing = AcuRankReranker("minilm", method="sw-1", cache=None)
    with pytest.raises(InputError, match="no 'text' column"):
        text_needing.transform(pd.DataFrame({"qid": ["1"], "query": ["q"], "docno": ["d"]}))


def test_minilm_on_five_queries_equals_the_cli(tmp_path):
    """MiniLM through PyTerrier and through the CLI, five queries' BM25 top 30 (the frame's rank <= 30, the CLI's
    --depth 30): the same rankings (the CLI's run keeps the BM25 order below its depth)."""
    run, topics, _ = _frames()
    five = list(dict.fromkeys(run["qid"]))[:5]
    cli_run = tmp_path / "minilm.run"
    acurank("rerank", DL19 / "bm25.run", "--method", "acurank-9", "--reranker", "minilm", "--no-cache", "--qids",
            ",".join(five), "--depth", "30", "-o", cli_run)
    reranker = AcuRankReranker("minilm", method="acurank-9", corpus=str(DL19 / "passages.jsonl.gz"), cache=None)
    frame = reranker.transform(run[run["qid"].isin(five) & (run["rank"] <= 30)])
    assert _by_query(frame) == {q: docs[:30] for q, docs in _run_file(cli_run).items()}  # the CLI keeps the tail


def test_the_docs_example_runs_as_written(tmp_path):
    """docs/pyterrier.md's example, in a fresh interpreter from the repository's root: the figures it states."""
    import subprocess
    import sys

    from conftest import ENV, ROOT, documentation
    import re

    script = tmp_path / "pt_example.py"
    script.write_text(re.search(r"<!-- pyterrier -->\n```python\n(.*?)```", documentation(), re.S).group(1))
    proc = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, env=ENV, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "0.5058" in proc.stdout and "0.7894" in proc.stdout and "0.8139" in proc.stdout, proc.stdout
    assert "8.93 calls a query" in proc.stdout or "8.930232558139535 calls a query" in proc.stdout, proc.stdout


def test_passages_equal_the_clis_and_each_split_document_names_its_passage(tmp_path):
    run, _, _ = _frames()
    two = list(dict.fromkeys(run["qid"]))[:2]
    cli_run = tmp_path / "passages.run"
    acurank("rerank", DL19 / "bm25.run", "--method", "acurank", "--reranker", "minilm", "--no-cache", "--qids",
            ",".join(two), "--passages", "60:30", "-o", cli_run)
    reranker = AcuRankReranker("minilm", method="acurank", corpus=str(DL19 / "passages.jsonl.gz"), cache=None,
                               passages="60:30")
    frame = reranker.transform(run[run["qid"].isin(two)])
    assert _by_query(frame) == _run_file(cli_run)
    split = [p for p in frame["passage"] if p]
    assert split and all(len(p.split()) == 60 for p in split)  # a split document's passage: 60 words
    assert (frame["passage"] == "").any()  # the documents of at most 60 words: whole


def test_a_frames_cells_follow_the_apis_rules_for_text_ids_and_scores():
    """Stop 103's second trial: a lone surrogate in a docno, a qid or a column of the frame's own was a
    UnicodeEncodeError (as the frame was grouped, or the output made); a float docno was taken by its text (1.0); a
    score column of texts ("3.5", "1_0") or of an integer no float holds was taken or an OverflowError. Each is now
    one line naming its row, by the API's rules (run.documents.check_unicode, score_of); numbers of any kind pass."""
    ranker = AcuRankReranker("simulated", method="sw-1", qrels={"1": {"a": 1}}, cache=None)

    def frame(**columns):
        base = {"qid": "1", "query": "how long do fleas live", "docno": ["a", "b"], "text": ["x", "y"]}
        return pd.DataFrame({k: pd.Series(v, dtype=object) if isinstance(v, list) else v
                             for k, v in {**base, **columns}.items()})

    cases = [(frame(docno=["a", "b\ud800"]), "row 1: column 'docno': not valid Unicode text (a lone surrogate, "
                                             "'\\ud800', at character 1)"),
             (frame(qid=["1\udfff", "1\udfff"]), "row 0: column 'qid': not valid Unicode text (a lone surrogate, '\\udfff', at "
                                    "character 1)"),
             (frame(src=["\udc00", "k"]), "row 0: column 'src': not valid Unicode text (a lone surrogate, '\\udc00', "
                                          "at character 0)"),
             (frame(docno=[1.0, 2.0]), "row 0: docno 1.0 must be a string or an integer"),
             # the API's id rule, said of the frame's row (it named "document 0", a place in the sorted list)
             (frame(docno=["a", "b c"]), "row 1: docno 'b c' is empty or holds whitespace or control characters"),
             # ids and the query by the API's rules, each named by its row (a missing qid was a KeyError, a float
             # one taken by its text, a query of 5 ranked as "5"; a repeated docno named places of the sorted list)
             (frame(qid=[None, None]), "row 0: qid None must be a string or an integer"),
             (frame(qid=[1.5, 1.5]), "row 0: qid 1.5 must be a string or an integer"),
             (frame(query=["q", 5]), "row 1: query 5 must be a string"),
             (frame(docno=["a", "a"], score=[0.1, 0.9]), "rows 0 and 1: query 1 gives docno a twice: docnos must be "
                                                         "unique within a query"),
             (frame(score=["3.5", "2"]), "query 1, docno a: column 'score' '3.5' is not a number"),
             (frame(score=[10 ** 400, 2]), "query 1, docno a: column 'score' is beyond the range of a 64-bit float")]
    for given, said in cases:
        with pytest.raises(InputError) as refused:
            ranker.transform(given)
        assert str(refused.value) == said
    from decimal import Decimal
    from fractions import Fraction

    out = ranker.transform(frame(score=[Decimal("3.5"), Fraction(1, 2)], docno=["a", 7]))
    assert list(out["docno"]) == ["a", 7] and len(out) == 2
