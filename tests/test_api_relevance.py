"""P(relevant) in the Python API and its adapters: ``Reranker(calibration=...)`` gives each document the map's
P(relevant) of its final rating, the query P(none); ``cut`` and ``min_p_relevant`` stop the list where relevance ends;
LangChain and LlamaIndex report it as their relevance score; PyTerrier adds a ``p_relevant`` column."""

from __future__ import annotations

import json
import re
import math

import pytest

from conftest import SAMPLE

from acurank_cli import Reranker
from acurank_cli.errors import InputError
from acurank_cli.records import DocRating
from acurank_cli.relevance import CalibrationMap, p_none

DL19 = SAMPLE / "dl19"
#: a map written by hand: P = sigmoid(-1 + 0.8 logit(p_topk) + 1.5 z_mu - 0.3 log(rank))
MAP = CalibrationMap(2, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0), (0.8, 1.5, -0.3), -1.0)


def first_queries(count: int = 3, depth: int = 40):
    blocks: dict[str, list[dict]] = {}
    for line in (DL19 / "bm25.run").read_text().splitlines():
        q, _, d, r, s, _ = line.split()
        if int(r) <= depth:
            blocks.setdefault(q, []).append({"id": d, "text": f"passage {d}", "score": float(s)})
    return list(blocks.items())[:count]


@pytest.fixture(scope="module")
def rr():
    with Reranker("simulated", method="acurank", cache=None, qrels=str(DL19 / "qrels.txt"), calibration=MAP,
                  init="score") as built:
        yield built


def test_p_relevant_is_the_maps_probability_of_each_final_rating(rr):
    for qid, docs in first_queries():
        out = rr.rerank("q", docs, qid=qid)
        ratings = [DocRating(docid=d.id, mu=d.mu, sigma=d.sigma, s=0.0, rank=d.rank, p_topk=d.p_topk) for d in out]
        assert [d.p_relevant for d in out] == pytest.approx(MAP.probabilities(ratings), abs=1e-12)
        assert out.p_none == pytest.approx(p_none([d.p_relevant for d in out]))
        assert len(out) == len(docs)


def test_cut_and_min_p_relevant_stop_the_list(rr, tmp_path):
    for qid, docs in first_queries():
        whole = rr.rerank("q", docs, qid=qid)
        ps = sorted((d.p_relevant for d in whole), reverse=True)
        values = [math.prod(1 - p for p in ps)] + [2 * sum(ps[:k]) / (k + sum(ps)) for k in range(1, len(ps) + 1)]
        k = max(range(len(values)), key=lambda i: (values[i], -i))
        cut = rr.rerank("q", docs, qid=qid, cut="f1")
        assert len(cut) == k and {d.id for d in cut} == {d.id for d in sorted(whole, key=lambda d: -d.p_relevant)[:k]}
        assert [d.rank for d in cut] == sorted(d.rank for d in cut)  # still in the method's order
        kept = rr.rerank("q", docs, qid=qid, min_p_relevant=0.5)
        assert [d.id for d in kept] == [d.id for d in whole if d.p_relevant >= 0.5]
        assert rr.rerank("q", docs, qid=qid, cut="p:0.5").docs == kept.docs  # min_p_relevant=X is the cut p:X
        both = rr.rerank("q", docs, qid=qid, cut="f1", min_p_relevant=0.5)  # f1 over the whole list, then p:0.5
        assert both.docs == tuple(d for d in cut.docs if d.p_relevant >= 0.5)
    assert rr.rerank("q", [], qid="none").p_none == 1.0
    with pytest.raises(InputError, match="cut 'top'"):
        rr.rerank("q", first_queries(1)[0][1], cut="top")
    with pytest.raises(InputError, match="min_p_relevant=1.5"):
        rr.rerank("q", first_queries(1)[0][1], min_p_relevant=1.5)


def test_a_cut_that_keeps_nothing_still_accounts_for_its_calls(rr):
    """A list cut to nothing is an answer, not a query without documents: its calls, P(none) and stop are the
    query's (an empty RerankOutput is falsy, and was once taken for a query that had none)."""
    qid, docs = first_queries(1)[0]
    whole = rr.rerank("q", docs, qid=qid)
    empty = rr.rerank("q", docs, qid=qid, min_p_relevant=1.0)
    assert len(empty) == 0 and empty.calls == whole.calls > 0 and empty.stop == whole.stop is not None
    assert empty.p_none == pytest.approx(whole.p_none) and empty.p_none < 1.0
    assert rr.rerank("q", [], qid=qid).calls == 0 and rr.rerank("q", [], qid=qid).p_none == 1.0


def test_without_a_map_the_new_cuts_are_refused_and_outputs_unchanged(tmp_path):
    with Reranker("simulated", cache=None, qrels=str(DL19 / "qrels.txt")) as plain:
        qid, docs = first_queries(1)[0]
        out = plain.rerank("q", docs, qid=qid)
        assert out.p_none is None and all(d.p_relevant is None for d in out)
        for kwargs in ({"cut": "f1"}, {"min_p_relevant": 0.5}):
            with pytest.raises(InputError, match="calibration=MAP.json"):
                plain.rerank("q", docs, qid=qid, **kwargs)
    with pytest.raises(InputError, match="method 'sw-1' keeps no ratings"):
        Reranker("simulated", method="sw-1", cache=None, qrels=str(DL19 / "qrels.txt"), calibration=MAP)
    MAP.save(tmp_path / "m.json")
    with Reranker("simulated", cache=None, qrels=str(DL19 / "qrels.txt"), calibration=str(tmp_path / "m.json")) as rr:
        assert rr.calibration == MAP
    with pytest.raises(InputError, match="no such file"):
        Reranker("simulated", cache=None, qrels=str(DL19 / "qrels.txt"), calibration=str(tmp_path / "none.json"))


def test_a_pivot_per_call_and_a_map_fit_with_one():
    """``pivot=``: a reference player in every window of the call (the simulated reranker's: "simulated"); a map fit
    with a pivot reads where each document stands against it, and needs one at every call."""
    # P = sigmoid(z_pivot): the map reads only the document's standardised distance above the pivot
    pivoted = CalibrationMap(2, (0.0,) * 5, (1.0,) * 5, (0.0, 0.0, 0.0, 1.0, 0.0), 0.0)
    qid, docs = first_queries(1)[0]
    with Reranker("simulated", cache=None, qrels=str(DL19 / "qrels.txt"), calibration=pivoted, init="score") as rr:
        with pytest.raises(InputError) as refused:
            rr.rerank("q", docs, qid=qid)
        assert str(refused.value) == ("calibration: the map was fit with a pivot in every window, and this call has "
                                      "none: give pivot")
        with pytest.raises(InputError) as refused:  # a batch's keyword is pivots (it said pivot, which it refuses)
            rr.rerank_batch([("q", docs)], qids=[qid])
        assert str(refused.value) == (f"query {qid}: calibration: the map was fit with a pivot in every window, and "
                                      "this call has none: give pivots")
        with pytest.raises(InputError) as refused:  # a passage for a reranker that reads none (the CLI's rule)
            rr.rerank("q", docs, qid=qid, pivot="a passage at the boundary")
        assert str(refused.value) == ("pivot: the simulated reranker reads no texts; give pivot='simulated' (its "
                                      "grade: sim_pivot_grade)")
        out = rr.rerank("q", docs, qid=qid, pivot="simulated")
        assert len(out) == len(docs) and all(not d.id.startswith("acurank-pivot") for d in out)
        assert out.calls == rr.rerank("q", docs, qid=qid, pivot="simulated").calls
        # z_pivot = (mu - mu_pivot) / sqrt(sigma^2 + sigma_pivot^2): above the pivot at the top, below at the bottom
        ps = [d.p_relevant for d in out]
        assert ps[0] > 0.5 > ps[-1] and sum(ps[:10]) > sum(ps[-10:])
    with Reranker("simulated", cache=None, qrels=str(DL19 / "qrels.txt"), calibration=MAP) as rr:
        with pytest.raises(InputError) as refused:
            rr.rerank("q", docs, qid=qid, pivot="simulated")
        assert str(refused.value) == ("calibration: the map was fit without a pivot, and this call has one: leave "
                                      "pivot out, or fit a map with one")
    with Reranker("simulated", method="sw-1", cache=None, qrels=str(DL19 / "qrels.txt")) as rr:
        with pytest.raises(InputError) as refused:
            rr.rerank("q", docs, qid=qid, pivot="simulated")
        assert str(refused.value) == "pivot: method 'sw-1' rates no pivot (the acurank methods do)"
    # a reranker that reads texts takes a passage, not the simulated reranker's pivot (a server never called)
    with Reranker("openai:gpt-4o-mini", base_url="http://127.0.0.1:9/v1", cache=None) as rr:
        with pytest.raises(InputError) as refused:
            rr.rerank("q", docs, qid=qid, pivot="simulated")
        assert str(refused.value) == ("pivot='simulated' is the simulated reranker's pivot; reranker "
                                      "openai:gpt-4o-mini reads texts: give each query's pivot passage")


def test_a_cut_aims_its_calls_where_the_command_line_aims_them(tmp_path):
    """One rule for where a cut's calls go (relevance.aims): with a map fit with a pivot, ``cut`` aims AcuRank's
    uncertain set at the cut's boundary, as ``rerank --cut`` does; ``cut_target="topk"`` as ``--cut-target topk``.
    The API's kept documents and calls equal the command line's, per target, and the two targets differ."""
    from conftest import acurank

    pivoted = CalibrationMap(2, (0.0,) * 5, (1.0,) * 5, (0.0, 0.0, -0.2, 1.0, 0.0), 0.0)
    pivoted.save(tmp_path / "map.json")
    qid, docs = first_queries(1, depth=40)[0]
    runs = {}
    for target in ("cut", "topk", None):
        flags = () if target is None else ("--cut-target", target)
        out, stats = tmp_path / f"{target}.run", tmp_path / f"{target}.stats.jsonl"
        acurank("rerank", DL19 / "bm25.run", "--qids", qid, "--depth", "40", "--reranker", "simulated", "--qrels",
                DL19 / "qrels.txt", "--pivot", "simulated", "--calibration", tmp_path / "map.json", "--cut", "f1",
                *flags, "--stats", stats, "-o", out)
        runs[target] = ([line.split()[2] for line in out.read_text().splitlines()],
                        json.loads(stats.read_text().splitlines()[0])["calls"])
    assert runs[None] == runs["cut"] != runs["topk"]  # the command line's default with a pivoted map: the cut's
    with Reranker("simulated", cache=None, qrels=str(DL19 / "qrels.txt"), calibration=str(tmp_path / "map.json"),
                  init="score") as rr:
        for target in ("cut", "topk", None):
            out = rr.rerank("q", docs, qid=qid, pivot="simulated", cut="f1", cut_target=target)
            assert ([d.id for d in out], out.calls) == runs[target], target
        for target, spelt in (("cut", " CUT"), ("topk", "TopK")):  # in any case, as cut's F1 (stop 107: refused)
            out = rr.rerank("q", docs, qid=qid, pivot="simulated", cut="F1", cut_target=spelt)
            assert ([d.id for d in out], out.calls) == runs[target], spelt
        kept = rr.rerank("q", docs, qid=qid, pivot="simulated", min_p_relevant=0.5)  # the cut p:0.5, aimed alike
        assert kept.calls == rr.rerank("q", docs, qid=qid, pivot="simulated", cut="p:0.5").calls
        with pytest.raises(InputError) as refused:
            rr.rerank("q", docs, qid=qid, pivot="simulated", cut_target="cut")
        assert str(refused.value) == "cut_target says where a cut's calls go; give cut"
        with pytest.raises(InputError) as refused:
            rr.rerank("q", docs, qid=qid, pivot="simulated", cut="f1", cut_target="boundary")
        assert str(refused.value) == "cut_target 'boundary': must be one of cut, topk"


def test_a_maps_k_is_kept_for_every_call():
    fitted = CalibrationMap(2, MAP.center, MAP.scale, MAP.coef, MAP.intercept, {"k": 7})
    with Reranker("simulated", cache=None, qrels=str(DL19 / "qrels.txt"), calibration=fitted) as rr:
        qid, docs = first_queries(1)[0]
        assert rr.cutoff == 7 and rr.rerank("q", docs, qid=qid, top_k=3).k == 7  # top_k cuts, k stays the map's
    with Reranker("simulated", cache=None, qrels=str(DL19 / "qrels.txt")) as rr:
        assert rr.rerank("q", docs, qid=qid, top_k=3).k == 3  # without a map, as before


def test_langchain_and_llamaindex_report_p_relevant(rr):
    pytest.importorskip("langchain_core")
    pytest.importorskip("llama_index.core")
    from langchain_core.documents import Document
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    from acurank_cli.integrations.langchain import AcuRankCompressor
    from acurank_cli.integrations.llamaindex import AcuRankNodePostprocessor

    qid, docs = first_queries(1, depth=12)[0]
    # the adapters number documents 0, 1, ...: the simulated reranker, which knows them by id, ranks them by its noise
    lc = AcuRankCompressor(reranker=rr, top_n=12, min_p_relevant=0.3)
    got = lc.compress_documents([Document(page_content=d["text"], metadata={"score": d["score"]}) for d in docs], "q")
    direct = rr.rerank("q", [{"id": str(i), "text": d["text"], "score": d["score"]} for i, d in enumerate(docs)],
                       top_k=12, min_p_relevant=0.3)
    assert [g.metadata["acurank_p_relevant"] for g in got] == [d.p_relevant for d in direct]
    assert [g.metadata["relevance_score"] for g in got] == [d.p_relevant for d in direct]
    li = AcuRankNodePostprocessor(reranker=rr, top_n=12, min_p_relevant=0.3)
    nodes = li.postprocess_nodes([NodeWithScore(node=TextNode(text=d["text"]), score=d["score"]) for d in docs],
                                 QueryBundle("q"))
    assert [n.score for n in nodes] == [d.p_relevant for d in direct]
    assert "acurank_p_relevant" in nodes[0].node.excluded_llm_metadata_keys


def test_pyterrier_adds_a_p_relevant_column(rr):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyterrier")
    from acurank_cli.integrations.pyterrier import AcuRankReranker

    qid, docs = first_queries(1, depth=25)[0]
    frame = pd.DataFrame([{"qid": qid, "query": "q", "docno": d["id"], "text": d["text"], "score": d["score"]}
                          for d in docs])
    got = AcuRankReranker(rr).transform(frame)
    direct = rr.rerank("q", docs, qid=qid)
    assert list(got["docno"]) == [d.id for d in direct]
    assert list(got["p_relevant"]) == pytest.approx([d.p_relevant for d in direct])


def test_a_maps_init_is_kept_at_the_api_and_a_server_and_its_allow_flag_needs_a_map(tmp_path):
    """A map that records the init it was fit with (the command line's: score) starts the API's and a server's
    ratings from the scores as they are, where documents start from z-scores without one (a served map fit by the
    command line gave another order and other P(relevant) in silence); another init is refused in one line, as
    another k is. allow_map_mismatch is True or False, and only with a map."""
    from acurank_cli.method.choices import Init
    from acurank_cli.run import pipeline

    path = tmp_path / "map.json"
    CalibrationMap(2, (0.0,) * 3, (1.0,) * 3, (0.8, 1.5, -0.3), -1.0,
                   {"k": 10, "init": "score", "method": "acurank"}).save(path)
    qrels = str(DL19 / "qrels.txt")
    assert Reranker("simulated", qrels=qrels).strategy.params.init is Init.zscore  # documents' default
    assert Reranker("simulated", qrels=qrels, calibration=path).strategy.params.init is Init.score
    methods, _ = pipeline.served_methods(None, {}, str(path), reranker="minilm")
    assert methods.strategy.params.init is Init.score
    with pytest.raises(InputError, match=r"^calibration: the map was fit on ratings started with init score and this "
                                         r"init is zscore: give init = 'score', or fit a map with init zscore$"):
        Reranker("simulated", qrels=qrels, calibration=path, init="zscore")
    with pytest.raises(InputError, match=r"^allow_map_mismatch='no': must be True or False$"):
        Reranker("simulated", qrels=qrels, calibration=path, allow_map_mismatch="no")
    why = ("without a map to apply: it lets a map apply with another reranker or method, or to its own fitting "
           "queries; give ")
    with pytest.raises(InputError) as api:
        Reranker("simulated", qrels=qrels, allow_map_mismatch=True)
    assert str(api.value) == f"allow_map_mismatch=True {why}calibration=MAP.json, or drop it"
    with pytest.raises(InputError) as served:  # serve and mcp at start: the command line's words, as every flag's
        pipeline.served_methods(None, {}, None, reranker="minilm", allow_map_mismatch=True)
    assert str(served.value) == f"--allow-map-mismatch {why}--calibration MAP.json (without --calibrate), or drop it"


def test_langchain_and_llamaindex_take_the_apis_settings_and_refuse_what_it_refuses_when_built(rr):
    """The adapters are entrances of the API: a field they do not have is refused (a misspelt ``topn`` and ``cut``
    were dropped in silence), a value of the wrong type is refused in the API's words (``top_n="5"`` was taken as 5,
    ``True`` as 1), both when the adapter is built; ``cut`` and ``cut_target`` reach the call as the API's."""
    pytest.importorskip("langchain_core")
    pytest.importorskip("llama_index.core")
    from pydantic import ValidationError
    from langchain_core.documents import Document

    from acurank_cli.integrations.langchain import AcuRankCompressor
    from acurank_cli.integrations.llamaindex import AcuRankNodePostprocessor

    qid, docs = first_queries(1, depth=12)[0]
    with Reranker("simulated", method="acurank", cache=None, qrels=str(DL19 / "qrels.txt")) as plain:
        for adapter in (AcuRankCompressor, AcuRankNodePostprocessor):
            for given, said in (({"topn": 3}, "Extra inputs are not permitted"),
                                ({"top_n": "5"}, "top_n='5': must be an integer >= 1"),
                                ({"top_n": True}, "top_n=True: must be an integer >= 1"),
                                ({"top_n": 5.0}, "top_n=5.0: must be an integer >= 1"),
                                ({"min_p_topk": 2}, "min_p_topk=2: must be a number in [0, 1]")):
                with pytest.raises(ValidationError, match=re.escape(said)):
                    adapter(reranker=plain, **given)
            with pytest.raises(ValidationError, match=re.escape("cut needs P(relevant): build the Reranker with "
                                                                "calibration=MAP.json")):
                adapter(reranker=plain, cut="f1")  # without a map
            with pytest.raises(ValidationError, match=re.escape(  # a method beside a built Reranker was ignored
                    "method='sw-1': the Reranker given runs 'acurank', which the adapter uses")):
                adapter(reranker=plain, method="sw-1")
            built = adapter(reranker=plain, method="acurank", top_n=3)
            with pytest.raises(ValidationError, match=re.escape("top_n='5': must be an integer >= 1")):
                built.top_n = "5"  # set after building: checked as when built (it reached the call as top_k='5')
            assert built.top_n == 3  # a refused setting leaves the one before (it stayed, and every call failed)
            built.top_n = 4
            assert built.top_n == 4 and built.reranker is plain
            with Reranker("simulated", method="sw-1", cache=None, qrels=str(DL19 / "qrels.txt")) as sw:
                assert adapter(reranker=sw).method == "sw-1"  # the method its calls run (it read acurank)
            with pytest.raises(ValidationError, match=re.escape("min_p_relevant='0.3': must be a number in [0, 1]")):
                adapter(reranker=rr, min_p_relevant="0.3")
    lc = AcuRankCompressor(reranker=rr, top_n=12, cut="p:0.3", cut_target="topk")
    got = lc.compress_documents([Document(page_content=d["text"], metadata={"score": d["score"]}) for d in docs], "q")
    direct = rr.rerank("q", [{"id": str(i), "text": d["text"], "score": d["score"]} for i, d in enumerate(docs)],
                       top_k=12, cut="p:0.3", cut_target="topk")
    assert [g.metadata["acurank_p_relevant"] for g in got] == [d.p_relevant for d in direct]
    assert all(d.p_relevant >= 0.3 for d in direct)


def test_every_adapter_refuses_a_map_fit_with_a_pivot_when_built():
    """A map fit with a pivot needs one at every call, and a LangChain, LlamaIndex or PyTerrier call carries none:
    refused when the adapter is built (every call was refused, saying to give a pivot it cannot carry)."""
    pytest.importorskip("langchain_core")
    pytest.importorskip("llama_index.core")
    pytest.importorskip("pyterrier")
    from pydantic import ValidationError

    from acurank_cli.integrations.langchain import AcuRankCompressor
    from acurank_cli.integrations.llamaindex import AcuRankNodePostprocessor
    from acurank_cli.integrations.pyterrier import AcuRankReranker

    pivoted = CalibrationMap(2, (0.0,) * 5, (1.0,) * 5, (0.0, 0.0, 0.0, 1.0, 0.0), 0.0)
    with Reranker("simulated", cache=None, qrels=str(DL19 / "qrels.txt"), calibration=pivoted, init="score") as rr:
        for adapter, build, error in ((AcuRankCompressor, lambda: AcuRankCompressor(reranker=rr), ValidationError),
                                      (AcuRankNodePostprocessor, lambda: AcuRankNodePostprocessor(reranker=rr),
                                       ValidationError),
                                      (AcuRankReranker, lambda: AcuRankReranker(rr), InputError)):
            name = adapter.__name__
            with pytest.raises(error, match=re.escape(
                    f"calibration: the map was fit with a pivot in every window, and {name}'s call has none: give a "
                    f"map fit without --pivot ({name} carries no pivot)")):
                build()


def test_estimate_bills_the_calls_of_rerank_batch_with_its_pivots_and_cuts():
    """estimate takes rerank_batch's pivots and cuts and admits its queries by the same rules: under a map fit with a
    pivot it asks for pivots (it billed calls without one, which every call refuses), and a cut aims the rehearsed
    calls as it aims the run's (a cut's bill differs from the bill without it)."""
    pivoted = CalibrationMap(2, (0.0,) * 5, (1.0,) * 5, (0.0, 0.0, 0.0, 1.0, 0.0), 0.0)
    batch = first_queries(3, depth=40)
    queries, qids = [("q", docs) for _, docs in batch], [qid for qid, _ in batch]
    with Reranker("simulated", cache=None, qrels=str(DL19 / "qrels.txt"), calibration=pivoted, init="score") as rr:
        with pytest.raises(InputError) as refused:
            rr.estimate(queries, qids=qids, rehearsals=3)
        assert str(refused.value) == (f"query {qids[0]}: calibration: the map was fit with a pivot in every window, "
                                      "and this call has none: give pivots")
        billed = rr.estimate(queries, qids=qids, rehearsals=3, pivots=["simulated"] * 3)
        cut = rr.estimate(queries, qids=qids, rehearsals=3, pivots=["simulated"] * 3, cut="p:0.5", cut_target="cut")
    assert [q.qid for q in billed.queries] == qids
    assert [q.calls.median for q in cut.queries] != [q.calls.median for q in billed.queries]
