"""How calibrated is p_topk = P(rank <= k) under AcuRank's final ratings?

    python benchmarks/p_topk_calibration.py [--dataset dl19] [--method acurank] [--noise 1.0] [--seed 0]

Reranks the sample BM25 top-100 with the simulated reranker through the Python API (the CLI's rating init,
``init="score"``), then compares each document's p_topk with whether it is in the true top k by the qrels.
Equal grades make the true top k ambiguous at its boundary: a document whose grade ties the k-th best
counts (k - c) / t, where c documents grade strictly higher and t share the boundary grade (its membership
under a random tie-break). Prints the mean p_topk of relevant and non-relevant documents among each query's
final top 20, and a reliability table (p_topk bins against the observed fraction) with the expected
calibration error (bin-weighted mean |observed - predicted|).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from acurank_cli import Reranker  # noqa: E402
from acurank_cli.io.collection_files import read_qrels  # noqa: E402
from acurank_cli.io.runs import read_run  # noqa: E402


def true_top_k(grades: dict[str, int], docids: list[str], k: int) -> dict[str, float]:
    """Each candidate's membership of the true top k by grade (fractional at a tied boundary)."""
    g = sorted((grades.get(d, 0) for d in docids), reverse=True)
    if len(docids) <= k:
        return {d: 1.0 for d in docids}
    boundary = g[k - 1]
    above = sum(1 for x in g if x > boundary)
    tied = sum(1 for x in g if x == boundary)
    return {d: 1.0 if grades.get(d, 0) > boundary else ((k - above) / tied if grades.get(d, 0) == boundary else 0.0)
            for d in docids}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="dl19")
    ap.add_argument("--method", default="acurank")
    ap.add_argument("--noise", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rel", type=int, default=2, help="grade counted as relevant in the top-20 means (TREC DL: 2)")
    args = ap.parse_args()
    folder = ROOT / "sample_runs" / args.dataset
    run = read_run(folder / "bm25.run")
    qrels = read_qrels(folder / "qrels.txt")
    queries = [q for q in run if q in qrels]
    rr = Reranker("simulated", method=args.method, init="score", qrels=qrels, sim_noise=args.noise,
                  sim_seed=args.seed, cache=None)
    batch = [("q", [{"id": c.docid, "text": "", "score": c.score} for c in run[q]]) for q in queries]
    outs = rr.rerank_batch(batch, qids=queries)
    k = outs[0].k
    pairs, rel_top, non_top = [], [], []
    for q, out in zip(queries, outs):
        ids = [d.id for d in out.docs]
        member = true_top_k(qrels[q], ids, k)
        for d in out.docs:
            pairs.append((d.p_topk, member[d.id]))
            if d.rank <= 20:
                (rel_top if qrels[q].get(d.id, 0) >= args.rel else non_top).append(d.p_topk)
    print(f"{args.dataset}, {args.method}, simulated reranker noise {args.noise} seed {args.seed}: {len(queries)} queries, "
          f"{len(pairs)} documents, k = {k}")
    print(f"mean p_topk in each query's final top 20: relevant (grade >= {args.rel}) {statistics.mean(rel_top):.3f} "
          f"({len(rel_top)} docs), non-relevant {statistics.mean(non_top):.3f} ({len(non_top)} docs)")
    print()
    print("| p_topk bin | documents | mean p_topk | observed fraction in the true top k |")
    print("|---|---|---|---|")
    edges = [0.0, 0.01, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.99, 1.0 + 1e-9]
    ece = 0.0
    for lo, hi in zip(edges, edges[1:]):
        inside = [(p, m) for p, m in pairs if lo <= p < hi]
        if not inside:
            continue
        pred = statistics.mean(p for p, _ in inside)
        obs = statistics.mean(m for _, m in inside)
        ece += len(inside) / len(pairs) * abs(obs - pred)
        print(f"| [{lo:.2f}, {min(hi, 1.0):.2f}{']' if hi > 1 else ')'} | {len(inside)} | {pred:.3f} | {obs:.3f} |")
    print()
    print(f"expected calibration error: {ece:.4f}; sum of p_topk per query = k (mean {sum(p for p, _ in pairs) / len(queries):.3f})")


if __name__ == "__main__":
    main()
