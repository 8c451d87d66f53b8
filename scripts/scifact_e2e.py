#!/usr/bin/env python
"""SciFact end to end through the CLI: index 5,183 docs, BM25 top-100 for 300 test queries, nDCG@10.

    python scripts/scifact_e2e.py [--data sample_runs/scifact] [--work DIR] [--threads 2]

Every step runs as its own ``acurank`` process, so the times include Python + JVM start-up.
Prints index seconds, retrieve seconds, queries/second, time to first query (command start to the
first run line of a one-query ``retrieve`` on stdout) and nDCG@10 against Pyserini's BEIR flat
BM25 figure (0.6789). Exits 1 when nDCG@10 does not round to 0.6789.
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from acurank_cli.evaluation import evaluate
from acurank_cli.io.collection_files import read_qrels
from acurank_cli.io.runs import read_run

REFERENCE_NDCG10 = 0.6789  # Pyserini BEIR (v1.0.0) SciFact, flat index, BM25 k1=0.9 b=0.4


def acurank_cmd() -> list[str]:
    """The ``acurank`` command line (``python -m acurank_cli``)."""
    return [sys.executable, "-m", "acurank_cli"]


def child_cpu() -> float:
    """CPU seconds (user + system) used so far by finished child processes (all their threads)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


CPU: dict[str, float] = {}


def run(cmd: list[str], **kw) -> tuple[subprocess.CompletedProcess, float]:
    started, cpu = time.perf_counter(), child_cpu()
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, cwd=ROOT, **kw)
    wall = time.perf_counter() - started
    command = next(a for a in cmd if a in ("index", "retrieve", "rerank"))
    CPU[command] = child_cpu() - cpu
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}")
    return proc, wall


def time_to_first_line(cmd: list[str]) -> float:
    """Wall seconds from spawning ``cmd`` to its first stdout line."""
    started = time.perf_counter()
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT) as proc:
        line = proc.stdout.readline()
        first = time.perf_counter() - started
        _, err = proc.communicate()
    if proc.returncode != 0 or not line.strip():
        sys.stderr.write(err)
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}")
    return first


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=ROOT / "sample_runs" / "scifact")
    ap.add_argument("--work", type=Path, default=None, help="Folder for the index and run (default: a temp folder).")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--hits", type=int, default=100)
    ap.add_argument("--rerank", default=None, metavar="METHOD",
                    help="Also rerank the BM25 run with METHOD (e.g. acurank) and --reranker, texts from the index.")
    ap.add_argument("--reranker", default="minilm")
    args = ap.parse_args()

    corpus = args.data / "corpus.jsonl.gz"
    topics = args.data / "topics.beir-v1.0.0-scifact.test.tsv.gz"
    qrels_path = args.data / "qrels.beir-v1.0.0-scifact.test.txt"
    work = args.work or Path(tempfile.mkdtemp(prefix="scifact-e2e-"))
    work.mkdir(parents=True, exist_ok=True)
    index = work / "index"
    if index.exists():
        shutil.rmtree(index)
    acurank = acurank_cmd()
    print(f"command: {' '.join(Path(a).name if i == 0 else a for i, a in enumerate(acurank))}; work: {work}")

    # 1. index
    proc, index_wall = run([*acurank, "index", "--input", str(corpus), "--index", str(index), "--threads", str(args.threads)])
    m = re.search(r"indexed (\d+) docs.* in ([\d.]+) s", proc.stderr)
    docs, index_inner = (int(m.group(1)), float(m.group(2))) if m else (None, None)

    # 2. time to first query: a one-query retrieve, from spawn to its first run line
    one = work / "one-query.tsv"
    with gzip.open(topics, "rt", encoding="utf-8") as fh:
        one.write_text(fh.readline(), encoding="utf-8")
    ttfq = time_to_first_line([*acurank, "retrieve", "--index", str(index), "--topics", str(one), "--hits", str(args.hits), "-q"])

    # 3. all queries
    run_path = work / "bm25.run"
    proc, retrieve_wall = run(
        [*acurank, "retrieve", "--index", str(index), "--topics", str(topics), "--hits", str(args.hits),
         "--threads", str(args.threads), "--output", str(run_path)]
    )
    m = re.search(r"retrieved (\d+) queries.* in ([\d.]+) s \((\d+) q/s", proc.stderr)
    n_queries, retrieve_inner = (int(m.group(1)), float(m.group(2))) if m else (None, None)

    # 4. evaluate
    runs = read_run(run_path)
    ev = evaluate(runs.scores(), read_qrels(qrels_path),
                  ("ndcg_cut_10", "recall_100"))
    ndcg, recall = ev.mean("ndcg_cut_10"), ev.mean("recall_100")

    print(f"index:    {docs} docs; {index_inner:.2f} s indexing, {index_wall:.2f} s wall (incl. JVM start), "
          f"{CPU['index']:.2f} CPU s")
    print(f"retrieve: {n_queries} queries x top-{args.hits}, {args.threads} threads; {retrieve_inner:.2f} s searching "
          f"({n_queries / retrieve_inner:.0f} q/s), {retrieve_wall:.2f} s wall ({n_queries / retrieve_wall:.0f} q/s end to end), "
          f"{CPU['retrieve']:.2f} CPU s")
    print(f"time to first query: {ttfq:.2f} s (command start -> first run line, one-query retrieve)")
    print(f"nDCG@10:  {ndcg:.4f} (reference {REFERENCE_NDCG10}, diff {ndcg - REFERENCE_NDCG10:+.4f}); R@100 {recall:.4f}")
    if args.rerank:
        reranked = work / f"{args.rerank}.run"
        proc, rerank_wall = run(
            [*acurank, "rerank", str(run_path), "--method", args.rerank, "--reranker", args.reranker,
             "--index", str(index), "--topics", str(topics), "--qrels", str(qrels_path), "--no-cache", "--quiet",
             "--batch-queries", "8", "--output", str(reranked), "--stats", str(work / f"{args.rerank}.stats.jsonl")]
        )
        rr = read_run(reranked)
        ev2 = evaluate(rr.scores(), read_qrels(qrels_path))
        summary = proc.stderr.strip().splitlines()[-1]
        print(f"rerank:   {args.rerank} with {args.reranker}: nDCG@10 {ev2.mean('ndcg_cut_10'):.4f} "
              f"(BM25 {ndcg:.4f}); {rerank_wall:.1f} s wall; {summary}")
    print(f"cpus: {os.cpu_count()}, load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(0 if round(ndcg, 4) == REFERENCE_NDCG10 else 1)


if __name__ == "__main__":
    main()
