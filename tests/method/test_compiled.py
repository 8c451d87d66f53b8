"""The kernels' compiler is loaded at the first kernel call, not at import: a run's first windows go out before
numba (0.25 s to import, ~0.4 s to load its cached code) and scipy (0.2 s) are imported (method/compiled.py); a
process's first windows are rated by the kernels' Python source unless a run expects more than that allowance
(tests/method/test_interpreted_kernel.py compares the two)."""

from __future__ import annotations

import subprocess
import sys

import pytest

# A fresh interpreter per case: this test process has long since loaded numba for the other tests.
FIRST_STEP = """
import sys
from acurank_cli.method import compiled
from acurank_cli.method.registry import build_strategy
if {large}:
    compiled.expect(None)  # a run that cannot say how many windows it rates: numba at the first
from acurank_cli.records import Candidate, RankingTask
task = RankingTask("q1", "query", tuple(Candidate(f"d{i}", 100.0 - i) for i in range(100)))
plan = build_strategy({method!r}).for_run().plan(task)
step = next(plan)
print(len(step.windows), "numba" in sys.modules, "scipy" in sys.modules)
step = plan.send([tuple(range(len(w))) for w in step.windows])  # the first answers: the kernels rate them
while step.phase.name == "wait":
    step = next(plan)
from acurank_cli.method import trueskill_fast
print("numba" in sys.modules, type(trueskill_fast._rate).__module__.split(".")[0])
"""


@pytest.mark.parametrize("method, large, rated", [
    ("acurank", True, "True numba"), ("acurank-H", True, "True numba"), ("acurank-auto-9", True, "True numba"),
    # within the allowance: the TrueSkill update from its source (numba never imported)...
    ("acurank", False, "False acurank_cli"), ("acurank-H", False, "False acurank_cli"),
    # ...but acurank-auto's agreement kernel has no interpreted form: it loads numba
    ("acurank-auto-9", False, "True numba")])
def test_the_first_windows_are_planned_before_numba_and_scipy_are_imported(method, large, rated):
    code = FIRST_STEP.replace("{method!r}", repr(method)).replace("{large}", str(large))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    first, after = out.stdout.splitlines()
    assert first == "5 False False"  # the initial pass: 100 documents in windows of 20, no compiler, no scipy
    assert after == rated  # answered: numba loaded and the module's kernel numba's dispatcher, or the source's


def test_a_kernel_declared_after_the_load_is_compiled_at_once_and_kernels_call_kernels():
    code = """
import numpy as np
from acurank_cli.method import compiled
from acurank_cli.method.trueskill_fast import fast_update
compiled.expect(None)  # numba at the first kernel call
mu, sigma = np.array([25.0, 25.0, 25.0]), np.array([25 / 3] * 3)
fast_update(mu, sigma, [2, 0, 1])  # _rate calls _rate_in, _down, ...: each found as numba's in the module
print(compiled.loaded(), mu[2] > mu[0] > mu[1])

@compiled.jit()
def twice(x):
    return 2 * x

print(type(twice).__module__.split(".")[0], twice(21))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True", "True", "numba", "42"]
