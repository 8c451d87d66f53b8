"""report/significance.py: paired t, permutation and Spearman tests against scipy and brute force, and their marks."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sst


from acurank_cli.report.significance import (
    mark,
    paired_ttest,
    permutation_test,
    spearman,
)

from report_helpers import (cli, SAMPLE, N_DOCS, _write_run, _noisy_order, make_dataset, _ndcg, _report, _md_rows, _check_png, _check_svg, make_trace)  # noqa: F401


# ---------------------------------------------------------------------------------- significance


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=3, max_size=40))
def test_paired_ttest_matches_scipy(pairs):
    a = [p[0] for p in pairs]
    b = [p[1] for p in pairs]
    ours = paired_ttest(a, b)
    ref = sst.ttest_rel(a, b)
    d = np.subtract(a, b)
    if np.all(d == d[0]):  # zero variance: scipy gives nan; we define p = 1 (no difference) or 0
        assert ours.pvalue == (1.0 if d[0] == 0 else 0.0)
        return
    if not np.isfinite(ref.pvalue) or d.std(ddof=1) < 1e-9:
        return  # variance lost to rounding in scipy's formula; nothing to compare
    assert ours.pvalue == pytest.approx(float(ref.pvalue), rel=1e-6, abs=1e-12)
    assert ours.statistic == pytest.approx(float(ref.statistic), rel=1e-6)


def test_ttest_edge_cases():
    assert paired_ttest([0.5, 0.5, 0.5], [0.5, 0.5, 0.5]).pvalue == 1.0
    assert math.isnan(paired_ttest([1.0], [0.0]).pvalue)


def _scipy_exact(a, b):
    res = sst.permutation_test(
        (np.asarray(a), np.asarray(b)), lambda x, y, axis: np.mean(x - y, axis=axis),
        permutation_type="samples", n_resamples=np.inf, alternative="two-sided", vectorized=True,
    )
    return float(res.pvalue)


@pytest.mark.parametrize("seed", range(6))
def test_exact_permutation_matches_scipy_and_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = 9
    a = rng.integers(0, 5, n) / 4.0  # coarse values: ties and zero differences happen
    b = rng.integers(0, 5, n) / 4.0
    ours = permutation_test(a, b, resamples=10_000).pvalue
    d = a - b
    brute = np.mean([abs(np.mean(np.array(s) * d)) >= abs(d.mean()) - 1e-12
                     for s in itertools.product((1, -1), repeat=n)])
    assert ours == pytest.approx(brute, abs=1e-12)
    assert ours == pytest.approx(_scipy_exact(a, b), abs=1e-9)


def test_randomised_permutation_close_to_scipy_and_seeded():
    rng = np.random.default_rng(7)
    a = rng.uniform(0, 1, 40)
    b = np.clip(a - 0.04 + rng.normal(0, 0.15, 40), 0, 1)
    p1 = permutation_test(a, b, resamples=10_000, seed=3).pvalue
    assert p1 == permutation_test(a, b, resamples=10_000, seed=3).pvalue  # reproducible
    ref = sst.permutation_test((a, b), lambda x, y, axis: np.mean(x - y, axis=axis), permutation_type="samples",
                               n_resamples=20_000, alternative="two-sided", vectorized=True, random_state=1).pvalue
    assert abs(p1 - ref) < 0.02
    assert abs(p1 - paired_ttest(a, b).pvalue) < 0.05  # large-sample agreement with the t-test
    # never zero: (hits + 1) / (resamples + 1)
    assert permutation_test(np.ones(40), np.zeros(40), resamples=999).pvalue == pytest.approx(1 / 1000)


def test_permutation_identical_inputs():
    assert permutation_test([0.3, 0.4, 0.5], [0.3, 0.4, 0.5]).pvalue == 1.0


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.floats(-5, 5, allow_nan=False)), min_size=3, max_size=30))
def test_spearman_matches_scipy(pairs):
    x = [float(p[0]) for p in pairs]
    y = [p[1] for p in pairs]
    rho, p = spearman(x, y)
    ref = sst.spearmanr(x, y)
    if not np.isfinite(ref.statistic):
        assert math.isnan(rho)
        return
    assert rho == pytest.approx(float(ref.statistic), abs=1e-9)
    assert p == pytest.approx(float(ref.pvalue), rel=1e-6, abs=1e-9)


def test_marks():
    assert mark(0.009) == "‡" and mark(0.01) == "†" and mark(0.049) == "†"
    assert mark(0.05) == "" and mark(None) == "" and mark(float("nan")) == ""


