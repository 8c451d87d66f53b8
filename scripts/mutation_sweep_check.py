"""The sweep-stopping mutants of method/trueskill_fast._chain_sweeps that survive the tests, checked on random
windows: each is applied to a copy of the module's source and compared bit for bit with trueskill.rate.

    .venv/bin/python scripts/mutation_sweep_check.py [SEED] [WINDOWS]     (default 0 3000)

Prints, per mutant, on how many windows it differs from the library (0 means not observed).
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from acurank_cli.method.trueskill import library_update  # noqa: E402

#: mutmut's name -> (the original line, the mutated line)
MUTANTS = {
    "x__chain_sweeps__mutmut_201": ("if d > eps or d < neps:", "if d > eps and d < neps:"),
    "x__chain_sweeps__mutmut_202": ("if d > eps or d < neps:", "if d >= eps or d < neps:"),
    "x__chain_sweeps__mutmut_203": ("if d > eps or d < neps:", "if d > eps or d <= neps:"),
    "x__chain_sweeps__mutmut_208": ("                        if d < 0:", "                        if d <= 0:"),
    "x__chain_sweeps__mutmut_215": ("if d != inf and sqrt(d) > eps:", "if d != inf and sqrt(d) >= eps:"),
    "x__chain_sweeps__mutmut_6": ("    inf = _INF\n", "    inf = None\n"),
}


def random_windows(seed: int, count: int):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        n = int(rng.integers(3, 31))
        kind = rng.integers(0, 4)
        if kind == 0:  # AcuRank's initial ratings
            mu = rng.uniform(5, 30, n)
            sigma = mu / 3
        elif kind == 1:  # after many windows
            mu, sigma = rng.uniform(5, 30, n), rng.uniform(0.6, 1.0, n)
        elif kind == 2:  # wide
            mu, sigma = rng.uniform(0.5, 60, n), rng.uniform(0.05, 20, n)
        else:
            mu, sigma = rng.normal(25, 8, n), rng.uniform(0.3, 8, n)
        yield mu, sigma, [int(i) for i in rng.permutation(n)]


def outcome(update, mu, sigma, order):
    m, s = mu.copy(), sigma.copy()
    try:
        update(m, s, order)
    except FloatingPointError:
        return None
    return m, s


def same(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def main() -> None:
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
    windows = list(random_windows(seed, count))
    reference = [outcome(library_update, *w) for w in windows]
    source = (ROOT / "acurank_cli" / "method" / "trueskill_fast.py").read_text()
    for name, (line, mutated) in MUTANTS.items():
        assert source.count(line) == 1, name
        module = types.ModuleType(name)
        exec(compile(source.replace(line, mutated), name, "exec"), module.__dict__)
        differs = sum(not same(outcome(module.fast_update, *w), ref) for w, ref in zip(windows, reference))
        print(f"{name}: differs from trueskill.rate on {differs} of {count} windows (seed {seed})", flush=True)


if __name__ == "__main__":
    main()
