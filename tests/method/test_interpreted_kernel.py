"""The TrueSkill kernel run from its Python source (before numba loads, method/compiled.py) against the compiled
kernel: the same bits, the same statuses, on windows of every size and kind; and a run small enough never loads
numba, while a large one does, as before, with the same bytes."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from acurank_cli.method import compiled
from acurank_cli.method import trueskill_fast as ft

from conftest import ENV, SAMPLE, acurank


def _cases(seed: int):
    """Random windows: sizes 2 to 95 (95 reaches the erfc's limit: the library gives up), ratings from the paper's
    prior to played-out and extreme ones, hard and graded answers, one noise model or acurank-auto's rows."""
    rng = np.random.default_rng(seed)
    for i in range(400):
        n = int(rng.choice([2, 3, 5, 10, 20, 20, 20, 40, 60, 95]))
        total = n + int(rng.integers(0, 30))
        mu = rng.uniform(-5, 40, total) if i % 7 else rng.uniform(0.001, 0.05, total)
        sigma = mu / 3 if i % 3 == 0 else rng.uniform(1e-3, 12, total)
        sigma = np.abs(sigma) + 1e-9
        order = rng.permutation(total)[:n]
        confidence = rng.uniform(0.5, 1.0, n - 1) if i % 4 == 1 else None
        rows = 1 if i % 5 else int(rng.integers(2, 10))
        yield mu, sigma, order, confidence, rows


@pytest.mark.parametrize("seed", [0, 1])
def test_the_interpreted_kernel_gives_the_compiled_kernels_bits_and_statuses(seed):
    python_rate = compiled.python_source(ft._rate)
    python_rows = compiled.python_source(ft._rate_rows)
    statuses = set()
    for mu, sigma, order, confidence, rows in _cases(seed):
        idx, soft = ft._window(sigma, order, confidence)
        graded = confidence is not None
        if rows == 1:
            beta2, dm = ft._noise(ft.BETA)
            a, b = (mu.copy(), sigma.copy()), (mu.copy(), sigma.copy())
            compiled_status = compiled.dispatcher(ft._rate)(*a, idx, beta2, dm, soft, graded, ft._POWERS)
            kernel = python_rate
        else:
            betas = tuple(ft.BETA * f for f in np.linspace(0.5, 2.0, rows))
            beta2, dm = ft._noise_rows(betas)
            a = (np.tile(mu, (rows, 1)), np.tile(sigma, (rows, 1)))
            b = (a[0].copy(), a[1].copy())
            compiled_status = compiled.dispatcher(ft._rate_rows)(*a, idx, beta2, dm, soft, graded, ft._POWERS)
            kernel = python_rows
        try:
            with np.errstate(all="ignore"):
                python_status = kernel(*b, idx, beta2, dm, soft, graded, ft._POWERS)
        except (ArithmeticError, ValueError):
            statuses.add("raised")  # fast_update then runs the compiled kernel (its status and numbers)
            continue
        statuses.add(int(python_status))
        assert python_status == compiled_status
        assert a[0].tobytes() == b[0].tobytes() and a[1].tobytes() == b[1].tobytes()  # bit for bit
    assert ft.OK in statuses and ft.GIVE_UP in statuses, statuses  # both sides of the limit were compared


DL19 = SAMPLE / "dl19"
SIM = ("--reranker", "simulated", "--qrels", str(DL19 / "qrels.txt"), "--no-cache", "--quiet")
FRESH = """
import sys
from acurank_cli.method import compiled
from acurank_cli.cli.app import main
if sys.argv[1] == "all":  # every window from the source, whatever the run's size
    compiled.expect = lambda work: None
    compiled._interpretable = 10 ** 9
code = main(sys.argv[2:])
print("numba" in sys.modules, compiled.interpreted_work(), file=sys.stderr)
sys.exit(code)
"""


def _fresh(allowance: str, *args) -> tuple[str, bool, int]:
    """The run's stdout in a fresh process; whether numba was imported; the windows rated from the source."""
    ran = subprocess.run([sys.executable, "-c", FRESH, allowance, *map(str, args)], capture_output=True, text=True,
                         env=ENV, timeout=300)
    assert ran.returncode == 0, ran.stderr
    numba, interpreted = ran.stderr.strip().splitlines()[-1].split()
    return ran.stdout, numba == "True", int(interpreted)


def test_a_small_run_never_loads_numba_and_a_large_one_does_with_the_same_bytes():
    qids = list(dict.fromkeys(line.split()[0] for line in (DL19 / "bm25.run").read_text().splitlines()))
    small = ("rerank", DL19 / "bm25.run", "--method", "acurank-9", *SIM, "--qids", ",".join(qids[:5]))
    out, numba, windows = _fresh("default", *small)  # 5 queries x at most 9 calls: within the allowance
    assert not numba and 5 * 5 <= windows <= 5 * 9 and out == acurank(*small).stdout and len(out.splitlines()) == 500
    large = ("rerank", DL19 / "bm25.run", "--method", "acurank", *SIM, "--qids", ",".join(qids[:8]))
    out, numba, windows = _fresh("default", *large)  # acurank's most calls on 8 queries: beyond it
    assert numba and windows == 0  # numba from the first window, as before
    interpreted, numba, windows = _fresh("all", *large)  # the same windows, every one rated from the source
    assert not numba and windows > 8 * 5 and interpreted == out == acurank(*large).stdout


def test_where_python_raises_the_compiled_kernel_decides():
    """sigma = 1e-200: sigma ** -2 overflows. Python's pow raises there, numba's returns inf and the kernel the
    OVERFLOW status: the update made from the source gives way to the compiled one, whose error (and unchanged
    ratings) every run has always had."""
    script = """
import sys
import numpy as np
from acurank_cli.method import trueskill_fast as ft
mu, sigma = np.array([25.0, 24.0, 23.0]), np.array([8.0, 1e-200, 8.0])
try:
    ft.fast_update(mu, sigma, [0, 1, 2])
except OverflowError as exc:
    print(repr(exc), mu.tolist(), sigma.tolist(), "numba" in sys.modules)
"""
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=ENV, timeout=120)
    assert ran.stdout.strip() == ("OverflowError(\"(34, 'Numerical result out of range')\") [25.0, 24.0, 23.0] "
                                  "[8.0, 1e-200, 8.0] True"), ran.stdout + ran.stderr
