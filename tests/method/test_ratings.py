"""Threshold solver against numerical integration; TrueSkill update direction; initialisation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import integrate, stats

from acurank_cli.errors import InputError
from acurank_cli.method.acurank_params import Init
from acurank_cli.method.uncertainty import exceed_probability, threshold
from acurank_cli.method.trueskill import initial_ratings, library_update


@settings(max_examples=40, deadline=None)
@given(st.integers(11, 120), st.integers(1, 10), st.integers(0, 10_000))
def test_threshold_solves_sum_of_exceedance(n, k, seed):
    rng = np.random.default_rng(seed)
    mu = rng.uniform(5, 30, n)
    sigma = rng.uniform(0.3, 8, n)
    t = threshold(mu, sigma, k)
    s = exceed_probability(mu, sigma, t)
    assert abs(s.sum() - k) < 1e-8
    # P(x_i > t) by numerical integration of the normal density agrees with s_i.
    for i in range(3):
        # integrate the density over [t, far right], telling quad where the peak is (a narrow peak far
        # from t is otherwise missed on an infinite interval)
        upper = max(t, mu[i]) + 40 * sigma[i]
        peak = [mu[i]] if t < mu[i] < upper else None
        val, _ = integrate.quad(lambda x, m=mu[i], sd=sigma[i]: stats.norm.pdf(x, m, sd), t, upper, points=peak, limit=200)
        assert abs(val - s[i]) < 1e-7


def test_threshold_when_n_at_most_k():
    mu, sigma = np.array([10.0, 12.0]), np.array([1.0, 2.0])
    assert threshold(mu, sigma, 10) == pytest.approx(min(10 - 3.0902, 12 - 3.0902 * 2))


def test_trueskill_update_direction():
    mu, sigma = np.array([20.0, 20.0, 20.0]), np.array([3.0, 3.0, 3.0])
    library_update(mu, sigma, [2, 0, 1])  # doc 2 wins, doc 1 loses
    assert mu[2] > 20 > mu[1]
    assert np.all(sigma < 3.0)


def test_initialisation_modes():
    mu, sigma = initial_ratings([12.0, 6.0], Init.score, "q")
    assert list(mu) == [12.0, 6.0] and list(sigma) == [4.0, 2.0]
    mu, _ = initial_ratings([3.0, 1.0, -1.0], Init.zscore, "q")
    assert mu.mean() == pytest.approx(10) and mu.std() == pytest.approx(1)
    mu, sigma = initial_ratings([-5.0], Init.uniform, "q")
    assert mu[0] == 25 and sigma[0] == pytest.approx(25 / 3)
    with pytest.raises(InputError, match="--init zscore"):
        initial_ratings([3.0, -1.0], Init.score, "q1")
    with pytest.raises(InputError, match="--init zscore"):
        initial_ratings([3.0, float("nan")], Init.score, "q1")


def test_score_problems_word_for_word():
    from acurank_cli.errors import InputError
    from acurank_cli.method.trueskill import check_scores, score_problem
    from acurank_cli.records import Candidate, RankingTask

    need = "is not positive (mu = score, sigma = mu/3 needs a positive score); use --init zscore"
    outside = "is outside 1e-100..1e+100, where the TrueSkill update stays finite; use --init zscore"
    assert score_problem(float("nan"), "score") == "is not a finite number"
    assert score_problem(float("inf"), "zscore") == "is not a finite number"
    assert score_problem(0.0, "score") == need and score_problem(-3.0, "score") == need
    assert score_problem(1e101, "score") == outside and score_problem(1e-101, "score") == outside
    for ok in (1e-100, 1e100, 12.5):  # the range's ends are inside
        assert score_problem(ok, "score") is None
    assert score_problem(-5.0, "zscore") is None and score_problem(-5.0, "uniform") is None
    tasks = [RankingTask("q1", "x", (Candidate("a", 2.0),)), RankingTask("q2", "y", (Candidate("b", 1.0), Candidate("c", 0.0)))]
    with pytest.raises(InputError) as exc:
        check_scores(tasks, "score", "run.txt")
    assert str(exc.value) == f"run.txt: query q2 doc c: first-stage score 0 {need}"
    check_scores(tasks, "zscore", "run.txt")  # any finite score starts a z-scored rating
    check_scores(tasks, None, "run.txt")  # baselines keep no ratings


def test_initial_ratings_by_hand():
    """score: mu = score (as float64), sigma = mu / 3. zscore: mu = 10 + (s - mean) / sd (population sd),
    computed on s / max|s| so that huge and subnormal scores give the same z; all equal -> 10."""
    mu, sigma = initial_ratings([3, 2], Init.score, "q")
    assert mu.dtype == np.float64 and list(mu) == [3.0, 2.0] and list(sigma) == [1.0, 2.0 / 3.0]
    z = 1.5 ** 0.5  # [1, 2, 3]: mean 2, sd sqrt(2/3): z = -/+ sqrt(3/2)
    for scale in (1.0, 1e300, 1e-310):
        mu, sigma = initial_ratings([1 * scale, 2 * scale, 3 * scale], Init.zscore, "q")
        assert mu == pytest.approx([10 - z, 10.0, 10 + z], abs=1e-9)
        assert sigma == pytest.approx([(10 - z) / 3, 10 / 3, (10 + z) / 3], abs=1e-9)
    for same in ([0.0, 0.0], [4.0, 4.0, 4.0]):
        mu, sigma = initial_ratings(same, Init.zscore, "q")
        assert list(mu) == [10.0] * len(same) and list(sigma) == [10.0 / 3] * len(same)
    mu, sigma = initial_ratings([], Init.zscore, "q")
    assert len(mu) == 0 == len(sigma)
    with pytest.raises(InputError) as exc:
        initial_ratings([1.0, 0.0], Init.score, "q1")
    assert str(exc.value) == "query q1: first-stage score 0.0 is not positive or not a number; use --init zscore"


@pytest.mark.parametrize("n,k,want", [
    # n identical N(25, 10^2): n Phi((25 - t) / 10) = k, t = 25 - 10 Phi^-1(k / n)
    (11, 10, 25 - 10 * stats.norm.ppf(10 / 11)),  # the root lies 13 below every mu (> 40 / sigma = 4)
    (40, 10, 25 - 10 * stats.norm.ppf(10 / 40)),  # and here 6.7 above every mu
])
def test_threshold_roots_far_from_every_mu(n, k, want):
    assert threshold(np.full(n, 25.0), np.full(n, 10.0), k) == pytest.approx(want, abs=1e-9)


def test_threshold_where_floats_are_coarser_than_the_bracket():
    """Around 1e5 neighbouring floats are 1.5e-11 apart: the bracket cannot shrink to 1e-12, and the
    iteration stops at the last float pair instead (the root is still within one float step)."""
    mu = 1e5 + np.arange(20.0)
    t = threshold(mu, np.ones(20), 10)
    assert isinstance(t, float) and stats.norm.sf((t - mu) / 1.0).sum() == pytest.approx(10, abs=1e-9)
