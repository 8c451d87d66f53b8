"""Batched windows vs one window at a time, for the real offline model (minilm, compute-bound on a CPU)
and for an OpenAI-compatible loopback server answering in a fixed time (latency-bound, like a GPU server).

Batched: every window of an iteration, across ``--batch-queries`` queries, goes to the model as one
batch (uncached passages encoded together). One at a time: the same windows, one model call each.
Also reports the engine's share of wall time (engine = wall - reranker time).

    python benchmarks/batching.py [--dataset dl19] [--queries 12] [--methods sw-1 acurank] [--delay 0.05]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import save, table  # noqa: E402

from acurank_cli.run.driver import Driver  # noqa: E402
from acurank_cli.run.inputs import InputSpec  # noqa: E402
from acurank_cli.rerankers.backend import RerankerBase, build_reranker  # noqa: E402
from acurank_cli.method.registry import build_strategy  # noqa: E402


class OneAtATime(RerankerBase):
    """Executes a batch as separate single-window calls (the unbatched baseline)."""

    def __init__(self, inner):
        self.inner, self.name, self.needs_texts = inner, inner.name, True

    def rerank_batch(self, requests):
        return [self.inner.rerank([r])[0] for r in requests]


def measure(method: str, mode: str, inputs, batch_queries: int, backend: str = "minilm", **options) -> dict:
    reranker = build_reranker(backend, batch_size=8, **options)  # fresh: no embeddings cached
    if mode == "one-at-a-time":
        reranker, batch_queries = OneAtATime(reranker), 1
    driver = Driver(build_strategy(method), reranker, inputs.docs, batch_queries=batch_queries)
    t0 = time.perf_counter()
    outs = list(driver.run(inputs.tasks))
    wall = time.perf_counter() - t0
    rerank = sum(o.rerank_seconds for o in outs)
    return {
        "backend": backend.split(":")[0], "method": method, "mode": mode, "queries": len(outs),
        "calls": sum(o.tally.calls for o in outs), "wall s": round(wall, 2),
        "queries/s": round(len(outs) / wall, 3),
        "engine % of wall": round(100 * (wall - rerank) / wall, 2),
        "ranking": [[r.docid for r in o.ranking] for o in outs],
    }


def encoding_throughput(inputs, sizes=(1, 5, 20, 64, 160), texts: int = 320) -> list[dict]:
    """Passages per second of the MiniLM forward pass at several batch sizes (is the model compute-bound?)."""
    from acurank_cli.rerankers.backends.minilm import passage_text

    reranker = build_reranker("minilm")
    pool = [passage_text(inputs.docs[c.docid]) for t in inputs.tasks for c in t.candidates][:texts]
    rows = []
    for size in sizes:
        reranker._cache.clear()
        reranker.chunk = size
        t0 = time.perf_counter()
        reranker.embed(pool)
        wall = time.perf_counter() - t0
        rows.append({"batch": size, "passages": len(pool), "wall s": round(wall, 2),
                     "passages/s": round(len(pool) / wall, 1)})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dataset", default="dl19")
    ap.add_argument("--queries", type=int, default=12)
    ap.add_argument("--batch-queries", type=int, default=8)
    ap.add_argument("--methods", nargs="+", default=["sw-1", "acurank"])
    ap.add_argument("--delay", type=float, default=0.05, help="loopback server seconds per reply")
    ap.add_argument("--concurrency", type=int, default=16, help="openai: requests in flight when batched")
    ap.add_argument("--skip-minilm", action="store_true")
    ap.add_argument("--throughput", action="store_true", help="also MiniLM passages/s by forward batch size")
    args = ap.parse_args()
    root = Path(__file__).resolve().parents[1] / "sample_runs" / args.dataset
    inputs = InputSpec(run=str(root / "bm25.run"), depth=100, topics=str(root / "topics.tsv"),
                       corpus=str(root / "passages.jsonl.gz")).load(True)
    inputs.tasks = inputs.tasks[: args.queries]
    rows = []

    def compare(backend: str, **options) -> None:
        for method in args.methods:
            pair = [measure(method, mode, inputs, args.batch_queries, backend, **options)
                    for mode in ("one-at-a-time", "batched")]
            same = pair[0].pop("ranking") == pair[1].pop("ranking") and pair[0]["calls"] == pair[1]["calls"]
            for row in pair:
                row["same results"] = same
            pair[1]["speed-up"] = round(pair[0]["wall s"] / pair[1]["wall s"], 2)
            rows.extend(pair)
            print(f"  {backend} {method}: {pair[0]['wall s']} s -> {pair[1]['wall s']} s", file=sys.stderr)

    if not args.skip_minilm:
        compare("minilm")
    from openai_concurrency import start_server

    httpd, _, _ = start_server(args.delay)
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        compare("openai:loopback", base_url=url, concurrency=args.concurrency)
    finally:
        httpd.shutdown()
    throughput = encoding_throughput(inputs) if args.throughput else []
    if throughput:
        print(table(throughput, ["batch", "passages", "wall s", "passages/s"]))
    print(table(rows, ["backend", "method", "mode", "queries", "calls", "wall s", "queries/s", "engine % of wall",
                       "speed-up", "same results"]))
    print("results:", save("batching", {"dataset": args.dataset, "batch_queries": args.batch_queries,
                                        "openai_delay_s": args.delay, "openai_concurrency": args.concurrency, "rows": rows,
                                        "minilm_throughput": throughput}))


if __name__ == "__main__":
    main()
