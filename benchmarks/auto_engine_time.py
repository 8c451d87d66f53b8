"""acurank-auto's engine time per query against acurank's (within 2x), in one process.

    python benchmarks/auto_engine_time.py [--datasets dl23 ...] [--repeats 7] [--noise 1]
                                          [--grids 1/16,1/8,*1/4,1,4 1/16,1/8,*1/4,1/2,1,2,4]

Each method reranks every query of a bundled BM25 top-100 run through the driver with the simulated reranker
(seed 0); engine time = the process's CPU time for the whole run less the simulated reranker's own time
(``rerank_seconds`` of the tallies), per query. After one warm-up run of each (numba's cached code loaded),
the methods run in turn ``--repeats`` times; the medians are reported, and the ratio to acurank is the median of
the repeats' ratios (each acurank-auto run against the acurank run just before it, so a drift in the machine's
speed over the benchmark cancels), with the ratio of the two fastest runs beside it (interference only adds time).
A whole-process timing (a start-up of 1.1-2.4 s over 15 runs on 2026-11-26,
against 5-15 ms a query) is too noisy here to tell 1.9x from 2.2x.
``engine_overhead.py`` splits acurank's engine time into its parts on prefixes of the lists; this compares
whole runs of two methods. acurank-auto runs once per grid
(``--beta-grid``; the first is the default). Writes benchmarks/results/auto_engine_time.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import load, save, table  # noqa: E402

from acurank_cli.method.acurank_params import AutoParams  # noqa: E402
from acurank_cli.method.registry import build_strategy  # noqa: E402
from acurank_cli.rerankers.backends.simulated import SimulatedReranker  # noqa: E402
from acurank_cli.run.driver import Driver  # noqa: E402


def engine_ms(method: str, options: dict, tasks, qrels, noise: float) -> tuple[float, float]:
    """(engine CPU ms a query, calls a query) of one run over ``tasks``."""
    driver = Driver(build_strategy(method, **options), SimulatedReranker(qrels, noise=noise, seed=0))
    c0 = time.process_time()
    outs = list(driver.run(tasks))
    cpu = time.process_time() - c0
    reranker = sum(o.tally.rerank_seconds for o in outs)
    return (cpu - reranker) / len(outs) * 1e3, sum(o.tally.calls for o in outs) / len(outs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", nargs="+", default=["dl19", "dl20", "dl23"])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--noise", type=float, default=1.0)
    ap.add_argument("--grids", nargs="+", default=[AutoParams().beta_grid, "1/16,1/8,*1/4,1/2,1,2,4"])
    args = ap.parse_args()
    setups = [("acurank", "acurank", {})] + [(f"acurank-auto --beta-grid {g}", "acurank-auto", {"beta_grid": g})
                                             for g in dict.fromkeys(args.grids)]
    rows = []
    for ds in args.datasets:
        tasks, qrels = load(ds)
        times: dict[str, list[float]] = {label: [] for label, _, _ in setups}
        calls = {}
        for label, method, options in setups:  # warm-up
            calls[label] = engine_ms(method, options, tasks, qrels, args.noise)[1]
        for _ in range(args.repeats):
            for label, method, options in setups:
                times[label].append(engine_ms(method, options, tasks, qrels, args.noise)[0])
        for label, _, _ in setups:
            ms = statistics.median(times[label])
            ratio = statistics.median(t / b for t, b in zip(times[label], times["acurank"]))
            rows.append({"dataset": ds, "queries": len(tasks), "method": label, "calls/q": round(calls[label], 2),
                         "engine ms/q": round(ms, 2), "min": round(min(times[label]), 2),
                         "max": round(max(times[label]), 2), "x acurank": round(ratio, 2),
                         "x of minima": round(min(times[label]) / min(times["acurank"]), 2)})
    print(table(rows, ["dataset", "queries", "method", "calls/q", "engine ms/q", "min", "max", "x acurank", "x of minima"]))
    path = save("auto_engine_time", {"noise": args.noise, "repeats": args.repeats, "rows": rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
