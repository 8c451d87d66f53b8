"""Time one multiplayer TrueSkill window update: trueskill.rate (library) vs fast_trueskill.

    python benchmarks/trueskill_update.py [--repeats N] [--seed S]

For each window size, both implementations rate the same randomly drawn windows (AcuRank-like
ratings: half fresh BM25-style mu in [5, 30] with sigma = mu / 3, half converged sigma ~0.8, a
noisy best-first order).  Reports the median milliseconds per window (overall and per kind; the
converged windows need more message-passing sweeps) and the largest absolute difference seen
on mu/sigma, prints a table and writes benchmarks/results/trueskill_update.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np
import trueskill

from acurank_cli.method.trueskill_fast import fast_update
from acurank_cli.method.trueskill import library_update

SIZES = (2, 10, 20, 50, 100)
OUT = ROOT / "benchmarks" / "results" / "trueskill_update.json"


def make_window(rng: np.random.Generator, n: int, converged: bool):
    mu = rng.uniform(5.0, 30.0, n)
    sigma = rng.uniform(0.6, 1.0, n) if converged else mu / 3.0
    order = [int(i) for i in np.argsort(-(mu + rng.normal(0.0, 3.0, n)))]
    return mu, sigma, order


def time_one(fn, mu, sigma, order) -> tuple[float, np.ndarray, np.ndarray]:
    m, s = mu.copy(), sigma.copy()
    t0 = time.perf_counter()
    fn(m, s, order)
    return (time.perf_counter() - t0) * 1e3, m, s


def bench(n: int, repeats: int, rng: np.random.Generator) -> dict:
    lib_ms, fast_ms = [], []
    worst = 0.0
    for r in range(repeats):
        mu, sigma, order = make_window(rng, n, converged=bool(r % 4 >= 2))
        # alternate which implementation runs first, so cache effects do not favour either
        if r % 2:
            tf, mf, sf = time_one(fast_update, mu, sigma, order)
            tl, ml, sl = time_one(library_update, mu, sigma, order)
        else:
            tl, ml, sl = time_one(library_update, mu, sigma, order)
            tf, mf, sf = time_one(fast_update, mu, sigma, order)
        lib_ms.append(tl)
        fast_ms.append(tf)
        worst = max(worst, float(np.max(np.abs(ml - mf))), float(np.max(np.abs(sl - sf))))
    lib, fast = statistics.median(lib_ms), statistics.median(fast_ms)
    fresh = [r % 4 < 2 for r in range(repeats)]
    return {
        "n": n,
        "repeats": repeats,
        "library_ms": lib,
        "fast_ms": fast,
        "speedup": lib / fast,
        "fresh_library_ms": statistics.median(t for t, f in zip(lib_ms, fresh) if f),
        "fresh_fast_ms": statistics.median(t for t, f in zip(fast_ms, fresh) if f),
        "converged_library_ms": statistics.median(t for t, f in zip(lib_ms, fresh) if not f),
        "converged_fast_ms": statistics.median(t for t, f in zip(fast_ms, fresh) if not f),
        "max_abs_diff": worst,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=0, help="windows per size, >= 4 (default: by size)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)

    # warm up (imports, first-call overheads)
    for n in SIZES:
        bench(n, 4, rng)

    rows = []
    for n in SIZES:
        repeats = max(4, args.repeats) if args.repeats else (200 if n <= 20 else 60)
        rows.append(bench(n, repeats, rng))

    print("ms per window, median (fresh: sigma = mu/3; converged: sigma ~0.8)")
    print(f"{'n':>4} {'library':>9} {'fast':>7} {'speedup':>8} | {'fresh lib':>9} {'fast':>6}"
          f" | {'conv. lib':>9} {'fast':>6} | {'max |diff|':>10}")
    for row in rows:
        print(f"{row['n']:>4} {row['library_ms']:>9.3f} {row['fast_ms']:>7.3f} {row['speedup']:>7.1f}x"
              f" | {row['fresh_library_ms']:>9.3f} {row['fresh_fast_ms']:>6.3f}"
              f" | {row['converged_library_ms']:>9.3f} {row['converged_fast_ms']:>6.3f}"
              f" | {row['max_abs_diff']:>10.1e}")

    result = {
        "benchmark": "trueskill_update",
        "unit": "milliseconds per window (median over repeats)",
        "python": platform.python_version(),
        "numpy": np.__version__,
        "trueskill": trueskill.__version__,
        "machine": platform.machine(),
        "seed": args.seed,
        "results": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
