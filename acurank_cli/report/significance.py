"""Paired significance tests over per-query scores, and Spearman's rank correlation.

Both tests are two-sided and work on the per-query differences d_i = a_i - b_i:

* paired t-test: t = mean(d) / (sd(d) / sqrt(n)) with n - 1 degrees of freedom (as
  ``scipy.stats.ttest_rel``); identical scores (all d_i = 0) give p = 1;
* randomisation (sign-flip permutation) test: under H0 each d_i is equally likely to be +|d_i| or
  -|d_i|; the statistic is |mean(d)|.  When 2^(number of non-zero d_i) <= ``resamples`` every sign
  pattern is enumerated (exact p, equal to ``scipy.stats.permutation_test`` with
  ``permutation_type='samples'``); otherwise ``resamples`` seeded random sign vectors are drawn and
  p = (1 + #{|mean(d*)| >= |mean(d)|}) / (1 + resamples), which never reports p = 0.

Student's t comes from ``scipy.special`` (``stdtr``, ``stdtrit``): the functions ``scipy.stats.t``'s ``sf`` and
``ppf`` call, the same numbers, without importing ``scipy.stats`` (1.2 s of a ``report`` command's start here).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import stdtr, stdtrit

#: Marks for the tables: the first level the p-value is below wins.
MARKS = ((0.01, "‡"), (0.05, "†"))


@dataclass(frozen=True)
class TestResult:
    """A paired test's outcome: statistic (t, or mean difference), two-sided p, number of pairs."""

    statistic: float
    pvalue: float
    n: int


def _diffs(a: Sequence[float], b: Sequence[float]) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError("paired tests need two equally long 1-d sequences")
    return a - b


def paired_ttest(a: Sequence[float], b: Sequence[float]) -> TestResult:
    """Two-sided paired t-test of a against b (NaN p with fewer than two pairs)."""
    d = _diffs(a, b)
    n = len(d)
    if n < 2:
        return TestResult(float("nan"), float("nan"), n)
    mean = float(d.mean())
    sd = 0.0 if np.all(d == d[0]) else float(d.std(ddof=1))  # exact: no rounding noise for constant d
    if sd == 0.0:
        return TestResult(0.0 if mean == 0.0 else math.copysign(math.inf, mean), 1.0 if mean == 0.0 else 0.0, n)
    t = mean / (sd / math.sqrt(n))
    return TestResult(t, float(min(1.0, 2.0 * stdtr(n - 1, -abs(t)))), n)


def permutation_test(
    a: Sequence[float], b: Sequence[float], resamples: int = 10_000, seed: int = 0, chunk: int = 1000
) -> TestResult:
    """Two-sided paired randomisation test (sign flips of the differences); exact when feasible."""
    d = _diffs(a, b)
    n = len(d)
    if n == 0:
        return TestResult(float("nan"), float("nan"), 0)
    observed = float(d.mean())
    nz = d[d != 0.0]
    target = abs(observed)
    tol = 1e-12 * max(target, np.abs(nz).max() if len(nz) else 0.0)
    if len(nz) == 0:
        return TestResult(observed, 1.0, n)
    if 2 ** len(nz) <= resamples:
        k = len(nz)
        hits, total = 0, 0
        for start in range(0, 2**k, 1 << 14):
            codes = np.arange(start, min(2**k, start + (1 << 14)), dtype=np.int64)
            signs = 1.0 - 2.0 * ((codes[:, None] >> np.arange(k)) & 1)
            stat = np.abs(signs @ nz) / n
            hits += int(np.count_nonzero(stat >= target - tol))
            total += len(codes)
        return TestResult(observed, hits / total, n)
    rng = np.random.default_rng(seed)
    hits = 0
    left = resamples
    while left > 0:
        m = min(chunk, left)
        signs = rng.integers(0, 2, size=(m, len(nz)), dtype=np.int8) * 2 - 1
        stat = np.abs(signs @ nz) / n
        hits += int(np.count_nonzero(stat >= target - tol))
        left -= m
    return TestResult(observed, (hits + 1) / (resamples + 1), n)


#: Multiple-comparison corrections (--correction): each adjusts a family of p-values (one dataset and measure,
#: every method against the baseline) so that the family-wise error rate stays at the marks' levels.
CORRECTIONS = ("none", "holm", "bonferroni")


def adjust(pvalues: Sequence[float | None], method: str) -> list[float | None]:
    """Adjusted p-values: ``bonferroni`` min(1, m p); ``holm`` the step-down max over j <= i of
    min(1, (m - j + 1) p_(j)) in ascending order; ``none`` as given. Unknown p-values stay None and do not
    count in m."""
    if method not in CORRECTIONS:
        raise ValueError(f"--correction must be one of {', '.join(CORRECTIONS)}, not {method!r}")
    known = [(i, p) for i, p in enumerate(pvalues) if p is not None and math.isfinite(p)]
    out: list[float | None] = list(pvalues)
    m = len(known)
    if method == "none" or m == 0:
        return out
    if method == "bonferroni":
        for i, p in known:
            out[i] = min(1.0, m * p)
        return out
    running = 0.0
    for j, (i, p) in enumerate(sorted(known, key=lambda x: x[1])):
        running = max(running, min(1.0, (m - j) * p))
        out[i] = running
    return out


#: Confidence intervals (--ci) of the mean paired difference.
CI_KINDS = ("none", "t", "bootstrap")


def paired_ci(a: Sequence[float], b: Sequence[float], kind: str = "t", level: float = 0.95, resamples: int = 10_000,
              seed: int = 0) -> tuple[float, float] | None:
    """The ``level`` confidence interval of mean(a - b): ``t`` mean +- t_(1+level)/2,n-1 x sd / sqrt(n);
    ``bootstrap`` the percentile interval of ``resamples`` seeded resamples of the query differences.
    None with fewer than two pairs (or ``none``)."""
    if kind not in CI_KINDS:
        raise ValueError(f"--ci must be one of {', '.join(CI_KINDS)}, not {kind!r}")
    d = _diffs(a, b)
    n = len(d)
    if kind == "none" or n < 2:
        return None
    mean = float(d.mean())
    if kind == "t":
        half = float(stdtrit(n - 1, (1 + level) / 2)) * float(d.std(ddof=1)) / math.sqrt(n)
        return mean - half, mean + half
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    for start in range(0, resamples, 1000):
        m = min(1000, resamples - start)
        means[start:start + m] = d[rng.integers(0, n, size=(m, n))].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def paired_values(a: Mapping[str, float], b: Mapping[str, float]) -> tuple[list[str], list[float], list[float]]:
    """Align two per-query mappings on their common qids (sorted)."""
    qids = sorted(set(a) & set(b))
    return qids, [a[q] for q in qids], [b[q] for q in qids]


def mark(p: float | None) -> str:
    """† for p < 0.05, ‡ for p < 0.01, '' otherwise (or when p is unknown)."""
    if p is None or not math.isfinite(p):
        return ""
    for level, symbol in MARKS:
        if p < level:
            return symbol
    return ""


def spearman(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Spearman's rho (Pearson on average ranks) and its two-sided p (t approximation, n - 2 df),
    as ``scipy.stats.spearmanr``; NaN for fewer than 3 pairs or a constant variable."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n = len(x)
    if n != len(y):
        raise ValueError("spearman needs two equally long sequences")
    if n < 3:
        return float("nan"), float("nan")
    from scipy.stats import rankdata  # here: scipy.stats takes a second to import, and only allocation ranks

    rx = rankdata(x) - (n + 1) / 2.0
    ry = rankdata(y) - (n + 1) / 2.0
    den = math.sqrt(float(rx @ rx) * float(ry @ ry))
    if den == 0.0:
        return float("nan"), float("nan")
    rho = max(-1.0, min(1.0, float(rx @ ry) / den))
    if abs(rho) == 1.0:
        return rho, 0.0
    t = rho * math.sqrt((n - 2) / ((1.0 - rho) * (1.0 + rho)))
    return rho, float(2.0 * stdtr(n - 2, -abs(t)))
