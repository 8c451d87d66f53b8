"""Graded outcomes against the paper's order outcomes (``--outcome graded|order``), simulated reranker.

    python benchmarks/graded_outcomes.py OUT [--methods acurank-9 acurank] [--noise 0 0.5 1] [--seeds 0 1 2]

Every run is an ``acurank rerank`` command line (OUT/<method>-noise<x>-s<seed>-<outcome>/<dataset>.run + stats)
on the sample DL19 and DL20 BM25 top-100. Per method and noise: nDCG@10 over the two datasets' queries (each
query's value averaged over the seeds), calls a query, and the paired t-test of graded against order over those
queries. Prints a markdown table and writes OUT/graded.md. Runs that exist are kept (delete OUT to redo).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from acurank_cli.evaluation import evaluate  # noqa: E402
from acurank_cli.io.run_files import read_stats  # noqa: E402
from acurank_cli.io.collection_files import read_qrels  # noqa: E402
from acurank_cli.io.runs import read_run  # noqa: E402
from acurank_cli.report.significance import paired_ttest  # noqa: E402

ACURANK = [sys.executable, "-m", "acurank_cli"]
DATASETS = ("dl19", "dl20")


def run(out: Path, method: str, noise: float, seed: int, outcome: str, ds: str) -> tuple[dict[str, float], float]:
    """Per-query nDCG@10 and mean calls of one run (made unless it exists)."""
    sample = ROOT / "sample_runs" / ds
    target = out / f"{method}-noise{noise:g}-s{seed}-{outcome}" / f"{ds}.run"
    stats = target.with_suffix(".stats.jsonl")
    if not stats.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([*ACURANK, "rerank", str(sample / "bm25.run"), "--method", method, "--reranker", "simulated",
                        "--sim-noise", str(noise), "--sim-seed", str(seed), "--qrels", str(sample / "qrels.txt"),
                        "--outcome", outcome, "--no-cache", "--quiet", "--overwrite", "--output", str(target)],
                       check=True)
    per_query = evaluate(read_run(target).scores(), read_qrels(sample / "qrels.txt")).per_query
    calls = statistics.mean(r.calls for r in read_stats(stats).values())
    return {f"{ds}:{q}": v["ndcg_cut_10"] for q, v in per_query.items()}, calls


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--methods", nargs="+", default=["acurank-9", "acurank"])
    ap.add_argument("--noise", type=float, nargs="+", default=[0.0, 0.5, 1.0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = ap.parse_args()
    lines = ["| method | noise | order nDCG@10 (calls/q) | graded nDCG@10 (calls/q) | graded - order | p (paired t) |",
             "|---|---|---|---|---|---|"]
    for method in args.methods:
        for noise in args.noise:
            by = {}
            for outcome in ("order", "graded"):
                per_seed, calls = [], []
                for seed in args.seeds:
                    values: dict[str, float] = {}
                    seed_calls = []
                    for ds in DATASETS:
                        v, c = run(args.out, method, noise, seed, outcome, ds)
                        values.update(v)
                        seed_calls.append(c)
                    per_seed.append(values)
                    calls.append(statistics.mean(seed_calls))
                qids = sorted(per_seed[0])
                by[outcome] = ([statistics.mean(p[q] for p in per_seed) for q in qids], statistics.mean(calls))
            (a, ca), (b, cb) = by["order"], by["graded"]
            test = paired_ttest(b, a)
            lines.append(f"| {method} | {noise:g} | {statistics.mean(a):.4f} ({ca:.2f}) | {statistics.mean(b):.4f} "
                         f"({cb:.2f}) | {statistics.mean(b) - statistics.mean(a):+.4f} | {test.pvalue:.2g} |")
            print(lines[-1], flush=True)
    (args.out / "graded.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
