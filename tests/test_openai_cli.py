"""`acurank rerank --reranker openai:...` end to end against a loopback server: batching, tokens, cache."""

from __future__ import annotations

import json
import subprocess
import sys

from test_cli import ENV, small_run
from test_openai_backend import FakeServer


def test_rerank_through_openai_compatible_server(sample, tmp_path):
    run, qids = small_run(sample, tmp_path, queries=3, depth=40)
    cache, stats, out = tmp_path / "calls.sqlite", tmp_path / "s.jsonl", tmp_path / "o.run"
    env = {k: v for k, v in ENV.items() if k != "OPENAI_API_KEY"}
    with FakeServer(lambda q, attempt: ("ok", 0.05)) as server:
        args = [sys.executable, "-m", "acurank_cli", "rerank", str(run), "--method", "acurank",
                "--reranker", "openai:fake-model", "--base-url", server.base_url, "--concurrency", "4",
                "--batch-queries", "3", "--topics", str(sample / "dl19" / "topics.tsv"),
                "--corpus", str(sample / "dl19" / "passages.jsonl.gz"), "--cache", str(cache)]
        first = subprocess.run([*args, "--stats", str(stats), "--output", str(out)], capture_output=True, text=True, env=env)
        assert first.returncode == 0, first.stderr
        requests_first = len(server.bodies)
        second = subprocess.run(args, capture_output=True, text=True, env=env)
        assert second.returncode == 0, second.stderr
        assert len(server.bodies) == requests_first  # everything came from the cache
    records = [json.loads(l) for l in stats.read_text().splitlines()]
    calls = sum(r["calls"] for r in records)
    cached = sum(r["cached_calls"] for r in records)  # identical prompts repeat within a run too
    assert [r["qid"] for r in records] == qids and calls - cached == requests_first
    assert all(r["input_tokens"] == 100 * r["calls"] and r["output_tokens"] == 7 * r["calls"] for r in records)
    assert len({json.dumps(b["messages"]) for b in server.bodies}) == requests_first  # never paid twice
    assert all(r["parse_counts"] == {"ok": r["calls"]} for r in records)
    assert server.max_in_flight > 1  # windows of several groups/queries were in flight together
    assert all(b["model"] == "fake-model" and b["messages"][0]["role"] == "system" for b in server.bodies)
    assert second.stdout == out.read_text()
    assert " 0 to the model" in second.stderr and "tokens in" in first.stderr
