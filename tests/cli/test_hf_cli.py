"""`acurank rerank --reranker hf:DIR` end to end with a tiny random Llama built offline."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from conftest import ENV, small_run  # noqa: E402
from tiny_models import CHAT_TEMPLATE, build_model_dir as _build_model_dir  # noqa: E402


def test_rerank_with_a_local_causal_lm(sample, tmp_path):
    model = _build_model_dir(tmp_path / "tiny-llama", CHAT_TEMPLATE)
    run, qids = small_run(sample, tmp_path, queries=2, depth=20)
    stats, out = tmp_path / "s.jsonl", tmp_path / "o.run"
    proc = subprocess.run(
        [sys.executable, "-m", "acurank_cli", "rerank", str(run), "--method", "acurank-9", "--reranker", f"hf:{model}",
         "--device", "cpu", "--batch-size", "4", "--context-size", "1024", "--no-cache",
         "--topics", str(sample / "dl19" / "topics.tsv"), "--corpus", str(sample / "dl19" / "passages.jsonl.gz"),
         "--output", str(out), "--stats", str(stats)],
        capture_output=True, text=True, env={**ENV, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(l) for l in stats.read_text().splitlines()]
    assert [r["qid"] for r in records] == qids
    for r in records:
        assert r["calls"] >= 1 and r["input_tokens"] > 0 and r["output_tokens"] > 0
        assert sum(r["parse_counts"].values()) == r["calls"]  # every call classified, none fatal
    lines = out.read_text().splitlines()
    assert len(lines) == 40 and len({l.split()[2] for l in lines}) == 40


def test_log_prompts_records_exactly_what_the_builder_renders(sample, tmp_path):
    """Every model call is logged; each logged prompt equals the prompt builder's for that window."""
    from acurank_cli.io.collection_files import read_corpus, read_topics
    from acurank_cli.records import RerankRequest
    from acurank_cli.rerankers.backend import build_reranker

    model = _build_model_dir(tmp_path / "tiny-llama", CHAT_TEMPLATE)
    run, qids = small_run(sample, tmp_path, queries=2, depth=20)
    log, stats = tmp_path / "prompts.jsonl", tmp_path / "s.jsonl"
    topics, corpus = sample / "dl19" / "topics.tsv", sample / "dl19" / "passages.jsonl.gz"
    proc = subprocess.run(
        [sys.executable, "-m", "acurank_cli", "rerank", str(run), "--method", "acurank-9", "--reranker", f"hf:{model}",
         "--prompt", "rankzephyr", "--device", "cpu", "--context-size", "1024", "--no-cache", "--topics", str(topics),
         "--corpus", str(corpus), "--output", str(tmp_path / "o.run"), "--stats", str(stats), "--log-prompts", str(log)],
        capture_output=True, text=True, env={**ENV, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(l) for l in log.read_text().splitlines()]
    calls = sum(json.loads(l)["calls"] for l in stats.read_text().splitlines())
    assert len(lines) == calls > 0
    builder = build_reranker(f"hf:{model}", device="cpu", context_size=1024, prompt_format="rankzephyr")
    queries = read_topics(topics)
    docs = read_corpus(corpus, {d for rec in lines for d in rec["docids"]})
    for rec in lines:
        req = RerankRequest(rec["qid"], queries[rec["qid"]], tuple(rec["docids"]), tuple(docs[d] for d in rec["docids"]))
        prompt = builder.prompt(req)
        assert rec["text"] == prompt.text and rec["format"] == "rankzephyr"
        assert rec["max_length"] == prompt.max_length and rec["prompt_tokens"] == prompt.tokens == rec["input_tokens"]
        assert rec["answer_tokens"] == prompt.answer_tokens == rec["output_tokens"]  # RankZephyr's table
        assert rec["text"].startswith("<|system|>\n") and "[1] " in rec["text"]
        assert isinstance(rec["answer"], str) and rec["parse"] in ("ok", "repaired", "unparseable")
