"""Calls and engine time as the candidate list grows (n = 50, 100, 200, 1000), simulated reranker.
The paper reports 13.0 / 18.7 / 26.5 / 68.6 calls with RankZephyr; sliding windows grow linearly.

    python benchmarks/scaling.py [--methods acurank sw-1] [--updater fast]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import save, table, tasks_of_size  # noqa: E402

from acurank_cli.run.driver import Driver  # noqa: E402
from acurank_cli.rerankers.backends.simulated import SimulatedReranker  # noqa: E402
from acurank_cli.method.registry import build_strategy  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--methods", nargs="+", default=["acurank", "acurank-H", "sw-1", "tourrank-1"])
    ap.add_argument("--sizes", nargs="+", type=int, default=[50, 100, 200, 1000])
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--updater", default="fast")
    args = ap.parse_args()
    rows = []
    for n in args.sizes:
        tasks, qrels = tasks_of_size(n, limit=args.queries)
        for method in args.methods:
            opts = {} if method.startswith(("sw", "tourrank")) else {"updater": args.updater}
            driver = Driver(build_strategy(method, **opts), SimulatedReranker(qrels))
            t0 = time.perf_counter()
            outs = list(driver.run(tasks))
            wall = time.perf_counter() - t0
            engine = wall - sum(o.rerank_seconds for o in outs)
            rows.append({
                "method": method, "n": n, "queries": len(outs),
                "mean calls": round(statistics.mean(o.tally.calls for o in outs), 2),
                "engine s/q": round(engine / len(outs), 4),
            })
            print(f"  {method} n={n}: {rows[-1]['mean calls']} calls", file=sys.stderr)
    print(table(rows, ["method", "n", "queries", "mean calls", "engine s/q"]))
    print("results:", save("scaling", {"updater": args.updater, "rows": rows}))


if __name__ == "__main__":
    main()
