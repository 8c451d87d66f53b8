#!/usr/bin/env python3
"""Compare acurank with the published implementation's DL23 figures (simulated reranker, noise 1, seed 0).

    python scripts/compare_reference.py [CANDIDATES] [--methods ...] [--updater fast|library]

CANDIDATES defaults to ../shared/data/dl23/bm25-top100.acurank.jsonl (its file order is the
reference's first-stage order); sample_runs/dl23/bm25.run also works (ties ordered as trec_eval).
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time
from collections import defaultdict
from pathlib import Path

from acurank_cli.run.driver import Driver
from acurank_cli.evaluation import evaluate
from acurank_cli.io.candidates import read_candidates
from acurank_cli.io.collection_files import read_qrels
from acurank_cli.records import RankingTask
from acurank_cli.rerankers.backends.simulated import SimulatedReranker
from acurank_cli.method.registry import build_strategy

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "tests" / "data" / "reference-dl23-perquery.tsv"
METHODS = ["sw-1", "sw-2", "sw-3", "tourrank-1", "tourrank-2", "ts-5-2-2-1", "ts-5-3-3-3",
           "acurank-9", "acurank", "acurank-H", "acurank-HH"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("candidates", nargs="?", default=str(ROOT.parent / "shared/data/dl23/bm25-top100.acurank.jsonl"))
    ap.add_argument("--methods", nargs="+", default=METHODS)
    ap.add_argument("--updater", default="fast")
    args = ap.parse_args()
    if not Path(args.candidates).is_file():
        ap.error(f"no candidate file {args.candidates} (the published DL23 candidates of the shared data; give "
                 "its path, or sample_runs/dl23/bm25.run)")
    ref = defaultdict(dict)
    with REFERENCE.open() as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            ref[row["method"]][row["qid"]] = (int(row["calls"]), float(row["ndcg10"]))
    bundle, _ = read_candidates(args.candidates)
    qrels = bundle.qrels or read_qrels(ROOT / "sample_runs/dl23/qrels.txt")
    tasks = [RankingTask(q, bundle.topics.get(q, ""), c) for q, c in bundle.runs.items()]
    print("| method | nDCG@10 | ref nDCG@10 | calls/query | ref calls | same calls | s/query |")
    print("|---|---|---|---|---|---|---|")
    for method in args.methods:
        opts = {} if method.startswith(("sw", "tourrank")) else {"updater": args.updater}
        t0 = time.perf_counter()
        outs = list(Driver(build_strategy(method, **opts), SimulatedReranker(qrels)).run(tasks))
        secs = (time.perf_counter() - t0) / len(outs)
        run = {o.qid: {r.docid: r.score for r in o.ranking} for o in outs}
        ndcg = evaluate(run, qrels).mean("ndcg_cut_10")
        r = ref[method]
        same = sum(r[o.qid][0] == o.tally.calls for o in outs if o.qid in r)
        print(f"| {method} | {ndcg:.4f} | {statistics.mean(v[1] for v in r.values()):.4f} | "
              f"{statistics.mean(o.tally.calls for o in outs):.2f} | {statistics.mean(v[0] for v in r.values()):.2f} | "
              f"{same}/{len(r)} | {secs:.3f} |", flush=True)


if __name__ == "__main__":
    main()
