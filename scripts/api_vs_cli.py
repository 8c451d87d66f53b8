#!/usr/bin/env python3
"""The same DL19 queries through `acurank rerank` and through the Python API: nDCG@10 and calls.

    python scripts/api_vs_cli.py [--reranker minilm] [--method acurank] [--dataset dl19]
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from acurank_cli import Reranker
from acurank_cli.evaluation import evaluate
from acurank_cli.io.collection_files import read_qrels
from acurank_cli.io.runs import read_run

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reranker", default="minilm")
    ap.add_argument("--method", default="acurank")
    ap.add_argument("--dataset", default="dl19")
    a = ap.parse_args()
    data = ROOT / "sample_runs" / a.dataset
    qrels = read_qrels(data / "qrels.txt")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cli.run"
        subprocess.run([sys.executable, "-m", "acurank_cli", "rerank", str(data / "bm25.run"), "--method", a.method,
                        "--reranker", a.reranker, "--qrels", str(data / "qrels.txt"), "--no-cache", "-o", str(out),
                        "--batch-queries", "8", "--quiet"], check=True)
        cli_calls = [json.loads(l)["calls"] for l in (Path(tmp) / "cli.stats.jsonl").read_text().splitlines()]
        cli_run = read_run(out).scores()
    topics = dict(l.split("\t", 1) for l in (data / "topics.tsv").read_text().splitlines())
    with gzip.open(data / "passages.jsonl.gz", "rt") as fh:
        docs = {r["_id"]: r for r in map(json.loads, fh)}
    run = read_run(data / "bm25.run")
    with Reranker(a.reranker, method=a.method, init="score", batch_queries=8, qrels=qrels) if a.reranker == "simulated" \
            else Reranker(a.reranker, method=a.method, init="score", batch_queries=8) as rr:
        outs = rr.rerank_batch([(topics[q], [{"id": c.docid, "text": docs[c.docid]["text"], "score": c.score}
                                             for c in cs]) for q, cs in run.items()], qids=list(run))
    api_run = {o.qid: {d.id: d.score for d in o} for o in outs}
    for name, r, calls in (("cli", cli_run, cli_calls), ("api", api_run, [o.calls for o in outs])):
        ev = evaluate(r, qrels, ["ndcg_cut_10"], 1)
        print(f"{name}: nDCG@10 {ev.mean('ndcg_cut_10'):.4f}  calls/query {statistics.fmean(calls):.2f}  "
              f"queries {len(r)}")
    same = sum(sorted(cli_run[q], key=cli_run[q].get) == sorted(api_run[q], key=api_run[q].get) for q in run)
    print(f"identical rankings: {same}/{len(run)}")


if __name__ == "__main__":
    main()
