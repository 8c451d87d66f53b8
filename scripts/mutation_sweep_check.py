"""Mutants of the compiled TrueSkill kernel (method/trueskill_fast.py), checked on random windows: each is
applied to a copy of the module's source (compiled afresh, without numba's cache) and compared bit for bit
with trueskill.rate. mutmut cannot mutate the kernel (its trampolines are Python functions, which numba
cannot compile), so this script is that module's mutation check.

    .venv/bin/python scripts/mutation_sweep_check.py [SEED] [WINDOWS]     (default 0 3000)

Prints, per mutant, on how many windows it differs from the library (0: not observed); the sweep-stopping
variants (the first four) move the sweep at which the chain stops only when a truncation update's change
falls exactly on 1e-4, the others must differ.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from acurank_cli.method.trueskill import library_update  # noqa: E402

#: name -> (the original text, the mutated text)
MUTANTS = {
    "sweep stop >=": ("big = big or delta > MIN_DELTA", "big = big or delta >= MIN_DELTA"),
    "two-candidate stop <": ("if delta <= MIN_DELTA:", "if delta < MIN_DELTA:"),
    "delta max >=": ("return (b if b > a else a), OK", "return (b if b >= a else a), OK"),
    "infinite delta": ("    if pd == _INF:\n        return 0.0, OK", "    if pd == _INF:\n        return 1.0, OK"),
    "one sweep fewer": ("for _ in range(MAX_ITERATIONS):\n            big", "for _ in range(MAX_ITERATIONS - 1):\n            big"),
    "forward off by one": ("for j in range(m - 1):", "for j in range(m - 2):"),
    "backward from m - 2": ("x = m - 1 - j if sweep else j", "x = m - 2 - j if sweep else j"),
    "no dynamic tau": ("math.sqrt(v2 + _TAU2)", "math.sqrt(v2)"),
    "draw margin sign": ("xx = ct / s - dm * s", "xx = ct / s + dm * s"),
    "erfc branch": ("denom = 0.5 * (2.0 - r if e < 0 else r)", "denom = 0.5 * (2.0 - r if e <= 0 else r)"),
    "zero cavity": ("        if cav_p == 0:", "        if cav_p == 1:"),
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
        exec(compile(source.replace(line, mutated).replace("cache=True", "cache=False"), name, "exec"),
             module.__dict__)
        differs = sum(not same(outcome(module.fast_update, *w), ref) for w, ref in zip(windows, reference))
        print(f"{name}: differs from trueskill.rate on {differs} of {count} windows (seed {seed})", flush=True)


if __name__ == "__main__":
    main()
