"""`acurank rerank --reranker hf:DIR` end to end with a tiny random Llama built offline."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from test_cli import ENV, small_run  # noqa: E402
from test_llm_tiny import CHAT_TEMPLATE, _build_model_dir  # noqa: E402


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
