"""Engine overhead per query and per call, split into TrueSkill updates, threshold/probabilities and
the rest, with the simulated reranker (its own time is excluded from the engine time).

    python benchmarks/engine_overhead.py [--queries 20] [--updater library fast]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import Timers, instrument_acurank, save, table, tasks_of_size  # noqa: E402

from acurank_cli.run.driver import Driver  # noqa: E402
from acurank_cli.rerankers.backends.simulated import SimulatedReranker  # noqa: E402
from acurank_cli.method.registry import build_strategy  # noqa: E402

METHODS = ["sw-1", "tourrank-1", "ts-5-2-2-1", "acurank-9", "acurank", "acurank-H"]


def measure(method: str, n: int, updater: str, queries: int) -> dict:
    """Run one method over ``queries`` tasks of size n; return per-query and per-call timings."""
    tasks, qrels = tasks_of_size(n, limit=queries)
    timers = Timers()
    with instrument_acurank(timers):
        strategy = build_strategy(method, updater=updater) if not method.startswith(("sw", "tourrank")) else build_strategy(method)
        driver = Driver(strategy, SimulatedReranker(qrels))
        w0, c0 = time.perf_counter(), time.process_time()
        outs = list(driver.run(tasks))
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    calls = sum(o.tally.calls for o in outs)
    rerank = sum(o.rerank_seconds for o in outs)
    update = timers.wall.get("update", 0.0)
    thresh = timers.wall.get("threshold", 0.0)
    engine = wall - rerank
    q = len(outs)
    return {
        "method": method, "n": n, "updater": updater, "queries": q,
        "calls/q": round(calls / q, 2),
        "wall s/q": round(wall / q, 4), "cpu s/q": round(cpu / q, 4),
        "engine s/q": round(engine / q, 4),
        "update ms/call": round(1000 * update / max(calls, 1), 3),
        "threshold ms/call": round(1000 * thresh / max(calls, 1), 3),
        "rest ms/call": round(1000 * (engine - update - thresh) / max(calls, 1), 3),
        "non-update ms/call": round(1000 * (engine - update) / max(calls, 1), 3),
        "reranker s/q": round(rerank / q, 4),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--queries", type=int, default=20, help="queries per measurement (n = 100)")
    ap.add_argument("--queries-1000", type=int, default=4, help="queries per measurement at n = 1000")
    ap.add_argument("--updater", nargs="+", default=["library", "fast"])
    ap.add_argument("--methods", nargs="+", default=METHODS)
    args = ap.parse_args()
    rows = []
    for n, q in ((100, args.queries), (1000, args.queries_1000)):
        for method in args.methods:
            for updater in args.updater:
                if method.startswith(("sw", "tourrank")) and updater != args.updater[0]:
                    continue
                row = measure(method, n, updater, q)
                rows.append(row)
                print(f"  {method} n={n} {updater}: {row['engine s/q']} s/q engine", file=sys.stderr)
    cols = ["method", "n", "updater", "queries", "calls/q", "wall s/q", "engine s/q", "update ms/call",
            "threshold ms/call", "rest ms/call", "non-update ms/call"]
    print(table(rows, cols))
    print("results:", save("engine_overhead", {"rows": rows}))


if __name__ == "__main__":
    main()
