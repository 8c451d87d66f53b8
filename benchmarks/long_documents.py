"""Long documents: ranking by passages (MaxP) against today's truncation, at equal calls and at equal cost.

    PYTHONPATH=. python benchmarks/long_documents.py --run SCIFACT_BM25_RUN [--passages 128:64] [--work DIR]

SciFact (complete, bundled in sample_runs/scifact: 5,183 abstracts, median 192 words, 85% longer than 128 words;
MiniLM reads 256 tokens of a text) with the MiniLM reranker and acurank. The BM25 run is ``acurank index`` +
``acurank retrieve --hits 100`` of the same corpus (``scripts/scifact_e2e.py --work DIR`` leaves it as
DIR/bm25.run). Every configuration runs as ``acurank rerank`` (the CLI as a user runs it), its calls and tokens read
from its stats, its nDCG@10 from ``acurank_cli.evaluation`` against the qrels:

- truncation: documents whole, each cut by the model to its 256 tokens (today's behaviour);
- truncation, acurank-H: the same with the paper's higher-budget variant (more calls);
- passages: ``--passages WORDS:STRIDE`` with MaxP, unconstrained;
- passages at equal calls: ``--budget-total`` = the truncation run's total calls (the query-set budget);
- truncation under ``--budget-total`` = its own calls: the control for the query-set budget's own effect (it
  spreads the calls over the queries where they are worth most);
- passages at equal cost: ``--budget-total`` chosen so the passages' input tokens come to the truncation run's (the
  calls those tokens buy at the equal-calls run's tokens per call);
- truncation at the equal-cost run's calls (``--budget-total``) and with the initial pass only (``acurank-5``: five
  windows of 20): whether fewer calls alone explain a difference;
- the passages' initial pass alone (``--budget-total`` = its windows);
- FirstP: ``--passage-score firstp`` (truncation to WORDS words).

Results: benchmarks/results/long_documents.json (and the table printed, as BENCHMARKS.md shows it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from acurank_cli.evaluation import evaluate  # noqa: E402
from acurank_cli.io.collection_files import read_qrels  # noqa: E402
from acurank_cli.io.run_files import read_stats  # noqa: E402
from acurank_cli.io.runs import read_run  # noqa: E402

SCIFACT = ROOT / "sample_runs" / "scifact"


def rerank(name: str, args, extra: list[str]) -> dict:
    """One configuration through the CLI: its nDCG@10, calls and tokens (per query), wall seconds."""
    out = args.work / f"{name}.run"
    command = [sys.executable, "-m", "acurank_cli", "rerank", str(args.run), "--reranker", "minilm",
               "--corpus", str(SCIFACT / "corpus.jsonl.gz"), "--topics", str(SCIFACT / "topics.beir-v1.0.0-scifact.test.tsv.gz"),
               "-o", str(out), "-q", *extra]
    started = time.perf_counter()
    if not out.exists() or args.again:
        subprocess.run([*command, "--overwrite"], check=True, cwd=ROOT,
                       env={**os.environ, "ACURANK_CACHE": str(args.work / "calls.sqlite")})
    wall = time.perf_counter() - started
    stats = list(read_stats(out.with_suffix(".stats.jsonl")).values())
    qrels = read_qrels(SCIFACT / "qrels.beir-v1.0.0-scifact.test.txt")
    ndcg = evaluate(read_run(out).scores(), qrels, ["nDCG@10"]).mean("nDCG@10")
    q = len(stats)
    calls, tokens = sum(s.calls for s in stats), sum(s.input_tokens or 0 for s in stats)
    ranked = sum(s.passages.ranked for s in stats if s.passages is not None)
    initial = sum(s.iterations[0].groups for s in stats if s.iterations)
    return {"name": name, "flags": " ".join(extra), "ndcg@10": round(ndcg, 4), "queries": q,
            "calls": calls, "calls_per_query": round(calls / q, 2), "tokens_per_query": round(tokens / q),
            "tokens_per_call": round(tokens / max(1, calls), 1),
            "players_per_query": round(ranked / q, 1) if ranked else None, "initial_calls": initial,
            "wall_s": round(wall, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=Path, required=True, help="SciFact's BM25 top-100 run")
    ap.add_argument("--passages", default="128:64")
    ap.add_argument("--work", type=Path, default=ROOT / "out" / "long_documents")
    ap.add_argument("--again", action="store_true", help="rerun configurations whose run exists")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "long_documents.json")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    rows = [rerank("truncation", args, []), rerank("truncation-H", args, ["--method", "acurank-H"])]
    trunc = rows[0]
    # the control for the query-set budget's own effect: truncation under the budget of its own calls
    rows.append(rerank("truncation-set-budget", args, ["--budget-total", str(trunc["calls"])]))
    passages = rerank("passages", args, ["--passages", args.passages])
    rows.append(passages)
    least = passages["initial_calls"]  # a query-set budget must cover every query's initial pass
    if trunc["calls"] < least:  # smaller passages: their initial pass alone costs more than truncation's whole run
        note = (f"not possible: the passages' initial pass alone takes {least} calls "
                f"({least / passages['queries']:.2f} a query), truncation's whole run {trunc['calls']}")
        rows += [{"name": "passages-equal-calls", "note": note}, {"name": "passages-equal-cost", "note": note}]
        afford = least
    else:
        equal = rerank("passages-equal-calls", args,
                       ["--passages", args.passages, "--budget-total", str(trunc["calls"])])
        rows.append(equal)
        # the calls the truncation run's input tokens buy at the passages' tokens per call under that budget
        afford = max(least, int(trunc["tokens_per_query"] * trunc["queries"] / equal["tokens_per_call"]))
        rows.append(rerank("passages-equal-cost", args, ["--passages", args.passages, "--budget-total", str(afford)]))
    # fewer calls alone (MiniLM's later windows can pull a good BM25 order away): truncation at those calls
    rows.append(rerank("truncation-at-those-calls", args, ["--budget-total", str(afford)]))
    rows.append(rerank("truncation-initial-pass", args, ["--method", "acurank-5"]))
    # the passages' initial pass alone: the query-set budget of exactly its windows
    rows.append(rerank("passages-initial-pass", args, ["--passages", args.passages, "--budget-total",
                                                       str(passages["initial_calls"])]))
    rows.append(rerank("firstp", args, ["--passages", args.passages, "--passage-score", "firstp"]))
    args.out.write_text(json.dumps({"dataset": "scifact (300 test queries, BM25 top-100)", "reranker": "minilm",
                                    "method": "acurank", "passages": args.passages, "rows": rows}, indent=1) + "\n")
    print("| configuration | flags | nDCG@10 | calls/query | input tokens/query | players/query |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        if "note" in r and "ndcg@10" not in r:
            print(f"| {r['name']} | | {r['note']} | | | |")
            continue
        print(f"| {r['name']} | `{r['flags'] or '(none)'}` | {r['ndcg@10']:.4f} | {r['calls_per_query']:.2f} | "
              f"{r['tokens_per_query']} | {r['players_per_query'] or 100} |")


if __name__ == "__main__":
    main()
