"""fast_trueskill.fast_update against the trueskill package (ratings.library_update)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import trueskill
import trueskill.backends
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acurank_cli.method import trueskill_fast as ft
from acurank_cli.method.trueskill_fast import fast_update
from acurank_cli.method.trueskill import ENV, get_updater, library_update
from acurank_cli.method.acurank_params import Updater

TOL = 0.0  # bit-identical to trueskill.rate: exact equality, as the README and --updater promise


def _both(mu, sigma, order):
    """Run library and fast on copies; return (lib_mu, lib_sigma, fast_mu, fast_sigma)."""
    mu = np.asarray(mu, dtype=np.float64)
    sigma = np.asarray(sigma, dtype=np.float64)
    m1, s1, m2, s2 = mu.copy(), sigma.copy(), mu.copy(), sigma.copy()
    library_update(m1, s1, order)
    fast_update(m2, s2, order)
    return m1, s1, m2, s2


def _maxdiff(m1, s1, m2, s2) -> float:
    return float(max(np.max(np.abs(m1 - m2)), np.max(np.abs(s1 - s2))))


# ---------------------------------------------------------------------------------------------
# constants and the library's own normal functions
# ---------------------------------------------------------------------------------------------
def test_constants_match_library_environment():
    assert (ft.MU, ft.SIGMA, ft.BETA, ft.TAU, ft.DRAW_PROBABILITY) == (
        ENV.mu, ENV.sigma, ENV.beta, ENV.tau, ENV.draw_probability)
    assert ft.DRAW_MARGIN == trueskill.calc_draw_margin(ENV.draw_probability, 2, ENV)
    assert ENV.cdf is trueskill.backends.cdf  # the reference really uses the built-in backend


@pytest.mark.parametrize("x", [-40.0, -12.3, -3.0, -1e-3, 0.0, 0.2, 1.7, 5.5, 9.0, 27.0])
def test_normal_functions_are_the_libraries(x):
    assert ft._cdf(x) == trueskill.backends.cdf(x)
    assert ft._pdf(x) == trueskill.backends.pdf(x)
    assert ft._erfc(x) == trueskill.backends.erfc(x)

def test_library_cdf_is_not_the_exact_one():
    # why math.erfc / scipy cannot be used: the library's approximation is off by ~1e-8
    for x in (-1e-3, 0.0, 0.2):
        assert abs(ft._cdf(x) - 0.5 * math.erfc(-x / math.sqrt(2.0))) > 1e-9


@pytest.mark.parametrize("p", [0.0, 0.01, 0.3, 0.5, 0.55, 0.9, 0.999, 1.0])
def test_ppf_is_the_libraries(p):
    # 0 and 1 take erfcinv's clamps (y <= 0, y >= 2); 0.5 is y == 1, where its two halves meet
    assert ft._ppf(p) == trueskill.backends.ppf(p)


# ---------------------------------------------------------------------------------------------
# property test
# ---------------------------------------------------------------------------------------------
_wide = st.tuples(st.floats(0.5, 60.0), st.floats(0.05, 20.0))
_bm25 = st.floats(5.0, 30.0).map(lambda m: (m, m / 3.0))  # AcuRank's initial ratings
_converged = st.tuples(st.floats(5.0, 30.0), st.floats(0.6, 1.0))  # sigma ~0.8 after many windows
_player = st.one_of(_wide, _bm25, _converged)


@st.composite
def windows(draw):
    n = draw(st.integers(2, 30))
    extra = draw(st.integers(0, 4))  # candidates outside the window must stay untouched
    kind = draw(st.sampled_from(["wide", "bm25", "converged", "mixed"]))
    player = {"wide": _wide, "bm25": _bm25, "converged": _converged, "mixed": _player}[kind]
    ratings = draw(st.lists(player, min_size=n + extra, max_size=n + extra))
    order = draw(st.permutations(range(n + extra)))[:n]
    mu = np.array([r[0] for r in ratings])
    sigma = np.array([r[1] for r in ratings])
    return mu, sigma, list(order)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(windows())
def test_matches_library_on_random_windows(window):
    mu, sigma, order = window
    m1, s1, m2, s2 = mu.copy(), sigma.copy(), mu.copy(), sigma.copy()
    try:
        library_update(m1, s1, order)
    except FloatingPointError:
        # the library gives up (its erfc approximation underflows): so must we, untouched
        with pytest.raises(FloatingPointError):
            fast_update(m2, s2, order)
        assert np.array_equal(m2, mu) and np.array_equal(s2, sigma)
        return
    fast_update(m2, s2, order)
    assert _maxdiff(m1, s1, m2, s2) <= TOL
    outside = np.setdiff1d(np.arange(len(mu)), order)
    assert np.array_equal(m2[outside], mu[outside]) and np.array_equal(s2[outside], sigma[outside])


# ---------------------------------------------------------------------------------------------
# deterministic cases
# ---------------------------------------------------------------------------------------------
FIXED_MU = np.array([
    21.4, 18.9, 25.2, 12.7, 30.0, 9.8, 15.5, 22.1, 17.3, 11.0,
    26.6, 14.2, 19.9, 8.4, 23.7, 13.1, 16.8, 20.5, 10.3, 28.9,
])
FIXED_ORDER = [4, 0, 7, 2, 12, 19, 10, 1, 14, 17, 6, 8, 16, 11, 3, 15, 9, 5, 18, 13]


def test_fixed_window():
    mu, sigma = FIXED_MU.copy(), FIXED_MU / 3.0
    m1, s1, m2, s2 = _both(mu, sigma, FIXED_ORDER)
    assert _maxdiff(m1, s1, m2, s2) <= TOL
    # pinned values of the trueskill 0.4.5 reference (guards the reference itself)
    assert m2[4] == pytest.approx(42.73395490447938, abs=1e-9)
    assert s2[4] == pytest.approx(6.27852757788034, abs=1e-9)
    assert m2[13] == pytest.approx(5.87330410448509, abs=1e-9)
    assert s2[13] == pytest.approx(2.4954140884375717, abs=1e-9)


@pytest.mark.parametrize("n", [2, 3, 4, 20, 50, 100])
@pytest.mark.parametrize("kind", ["bm25", "converged"])
def test_window_sizes_up_to_100(n, kind):
    rng = np.random.default_rng(1000 + n)
    mu = rng.uniform(5.0, 30.0, n)
    sigma = mu / 3.0 if kind == "bm25" else rng.uniform(0.6, 1.0, n)
    order = list(np.argsort(-(mu + rng.normal(0.0, 3.0, n))))  # a noisy ranker
    assert _maxdiff(*_both(mu, sigma, order)) <= TOL


def test_order_may_be_any_int_sequence():
    mu, sigma = FIXED_MU.copy(), FIXED_MU / 3.0
    ref = _both(mu, sigma, FIXED_ORDER)
    for order in (np.array(FIXED_ORDER), tuple(FIXED_ORDER), [np.int64(i) for i in FIXED_ORDER]):
        m, s = mu.copy(), sigma.copy()
        fast_update(m, s, order)
        assert np.max(np.abs(m - ref[0])) <= TOL and np.max(np.abs(s - ref[1])) <= TOL


def test_winner_far_ahead_zero_precision_messages():
    # w underflows to ~0: the library's SumFactor hits 1/0.0 (ZeroDivisionError -> infinite
    # variance -> an empty message); the outcome is just the tau-inflated prior.
    for mu, sigma in [([60.0, 0.5], [0.05, 0.05]), ([60.0, 0.5, 0.4], [0.05] * 3),
                      ([60.0, 59.0, 0.5, 0.45, 0.4], [0.05] * 5)]:
        m1, s1, m2, s2 = _both(mu, sigma, list(range(len(mu))))
        assert _maxdiff(m1, s1, m2, s2) <= TOL


def test_floating_point_error_like_library():
    n = 46  # best-first order against steeply increasing mu: the library's W leaves (0, 1)
    mu, sigma = np.linspace(0.5, 60.0, n), np.full(n, 1.0)
    with pytest.raises(FloatingPointError) as lib:
        library_update(mu.copy(), sigma.copy(), list(range(n)))
    m, s = mu.copy(), sigma.copy()
    with pytest.raises(FloatingPointError) as ours:
        fast_update(m, s, list(range(n)))
    assert str(ours.value) == str(lib.value)  # the same words as the library
    assert np.array_equal(m, mu) and np.array_equal(s, sigma)


@pytest.mark.parametrize("mu", [[0.1, 300.0, 600.0], [0.1, 0.2, 300.0]])
def test_chain_beyond_the_erfc_gives_up_like_the_library(mu):
    # upsets by hundreds of sigma inside a chain of three: the cdf underflows to exactly 0 (v = -x, w = 0)
    mu, sigma = np.array(mu), np.ones(3)
    with pytest.raises(FloatingPointError) as lib:
        library_update(mu.copy(), sigma.copy(), [0, 1, 2])
    m, s = mu.copy(), sigma.copy()
    with pytest.raises(FloatingPointError) as ours:
        fast_update(m, s, [0, 1, 2])
    assert str(ours.value) == str(lib.value) and np.array_equal(m, mu) and np.array_equal(s, sigma)


def test_two_candidates_beyond_the_erfc_give_up_like_the_library():
    # the underdog wins by 300 sigma: the library's cdf underflows to 0 (v = -x, w = 0) and it raises
    mu, sigma = np.array([0.1, 300.0]), np.array([1.0, 1.0])
    with pytest.raises(FloatingPointError) as lib:
        library_update(mu.copy(), sigma.copy(), [0, 1])
    m, s = mu.copy(), sigma.copy()
    with pytest.raises(FloatingPointError) as ours:
        fast_update(m, s, [0, 1])
    assert str(ours.value) == str(lib.value) and np.array_equal(m, mu) and np.array_equal(s, sigma)


def test_invalid_input():
    """The library's errors, in its words (trueskill.rate with one group; trueskill.Rating(sigma=0))."""
    mu, sigma = np.array([20.0, 10.0]), np.array([2.0, 0.0])
    for order in ([0], [], [0, 1]):
        with pytest.raises(ValueError) as lib:
            library_update(mu.copy(), sigma.copy(), order)
        with pytest.raises(ValueError) as ours:
            fast_update(mu, sigma, order)
        assert str(ours.value) == str(lib.value)
    assert str(ours.value) == "sigma**2 should be greater than 0"


def test_registered_as_fast_updater():
    assert get_updater(Updater.fast).__wrapped__ is fast_update  # behind the mpmath fallback (beyond double precision)


# ---------------------------------------------------------------------------------------------
# a whole AcuRank-like run: errors must not accumulate
# ---------------------------------------------------------------------------------------------
def test_sequence_of_updates_stays_close():
    rng = np.random.default_rng(42)
    n_cand, window, steps = 100, 20, 50
    relevance = rng.normal(0.0, 1.0, n_cand)
    bm25 = np.clip(17.0 + 4.0 * relevance + rng.normal(0.0, 3.0, n_cand), 5.0, 30.0)
    lib_mu, lib_sigma = bm25.copy(), bm25 / 3.0
    fast_mu, fast_sigma = lib_mu.copy(), lib_sigma.copy()
    worst = 0.0
    for _ in range(steps):
        # the next window: mostly the currently best-looking candidates, plus random ones
        top = np.argsort(-fast_mu)[:12]
        rest = rng.choice(np.setdiff1d(np.arange(n_cand), top), window - 12, replace=False)
        cand = np.concatenate([top, rest])
        order = list(cand[np.argsort(-(relevance[cand] + rng.normal(0.0, 0.3, window)))])
        library_update(lib_mu, lib_sigma, order)
        fast_update(fast_mu, fast_sigma, order)
        worst = max(worst, _maxdiff(lib_mu, lib_sigma, fast_mu, fast_sigma))
        assert worst <= TOL
    assert lib_sigma[top].max() < 2.0  # the run really went to converged (small) sigmas


# ---------------------------------------------------------------------------------------------
# direction of the update
# ---------------------------------------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(windows())
def test_update_directions(window):
    mu, sigma, order = window
    m, s = mu.copy(), sigma.copy()
    try:
        fast_update(m, s, order)
    except FloatingPointError:
        return
    win, lose = order[0], order[-1]
    # Always: the winner never loses mean, the last never gains (up to the rounding of the
    # library's Rating round trip: a winner far ahead gets an empty message).
    assert m[win] >= mu[win] - 1e-12
    assert m[lose] <= mu[lose] + 1e-12
    # Always: sigma never exceeds the tau-inflated prior sqrt(sigma^2 + tau^2) ...
    w = np.asarray(order)
    assert np.all(s[w] <= np.sqrt(sigma[w] ** 2 + ft.TAU ** 2) * (1 + 1e-12))
    # ... but it does NOT always shrink below the old sigma: a candidate the window says little
    # about (e.g. a clear winner) gets almost no information, less than the tau^2 = 0.0069 added.


def test_directions_on_realistic_initial_ratings():
    """With AcuRank's initial ratings (mu = BM25 score, sigma = mu / 3) the textbook directions
    hold strictly: winner up, last down, every sigma in the window shrinks."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(2, 31))
        mu = rng.uniform(5.0, 30.0, n)
        sigma = mu / 3.0
        order = list(rng.permutation(n))
        m, s = mu.copy(), sigma.copy()
        fast_update(m, s, order)
        assert m[order[0]] > mu[order[0]]
        assert m[order[-1]] < mu[order[-1]]
        assert np.all(s < sigma)


def test_small_sigma_can_grow_through_dynamic_tau():
    # a clear winner with a converged small sigma: the tau^2 added beats the information gained
    mu = np.array([30.0, 10.0, 9.0])
    sigma = np.array([0.05, 0.8, 0.8])
    m, s = mu.copy(), sigma.copy()
    fast_update(m, s, [0, 1, 2])
    assert s[0] > sigma[0]
    assert s[0] <= math.sqrt(sigma[0] ** 2 + ft.TAU ** 2)
    assert _maxdiff(*_both(mu, sigma, [0, 1, 2])) <= TOL


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**31 - 1), st.sampled_from([0.05, 0.3, 1.0, 25 / 6, 9.0, 40.0]))
def test_any_beta_matches_the_library_environment_with_that_beta(seed, beta):
    """acurank-auto's noise models: fast_update(beta=b) is trueskill.TrueSkill(beta=b).rate, bit for bit
    (the draw margin scales with beta), and library_update(beta=b) is that environment."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 21))
    mu = rng.uniform(1.0, 40.0, n)
    sigma = mu / 3
    order = [int(i) for i in rng.permutation(n)]
    env = trueskill.TrueSkill(beta=beta)
    try:
        new = env.rate([(env.create_rating(mu[i], sigma[i]),) for i in order])
    except FloatingPointError:
        with pytest.raises(FloatingPointError):
            fast_update(mu.copy(), sigma.copy(), order, beta=beta)
        return
    m1, s1 = mu.copy(), sigma.copy()
    fast_update(m1, s1, order, beta=beta)
    m2, s2 = mu.copy(), sigma.copy()
    library_update(m2, s2, order, beta=beta)
    for i, (r,) in zip(order, new):
        assert (m1[i], s1[i]) == (r.mu, r.sigma) == (m2[i], s2[i])
    assert ft.draw_margin(beta) == trueskill.calc_draw_margin(0.10, 2, env)


# ---------------------------------------------------------------------------------------------
# graded outcomes: the soft truncation factor (1 - q) + (2q - 1) 1[d > eps]
# ---------------------------------------------------------------------------------------------
def test_soft_factor_with_certainty_is_the_hard_factor():
    """q = 1 on every pair: the soft factor is the hard one, so the numbers are trueskill.rate's."""
    mu, sigma = FIXED_MU.copy(), FIXED_MU / 3.0
    m1, s1 = mu.copy(), sigma.copy()
    library_update(m1, s1, FIXED_ORDER)
    m2, s2 = mu.copy(), sigma.copy()
    fast_update(m2, s2, FIXED_ORDER, confidence=[1.0] * (len(FIXED_ORDER) - 1))
    assert np.array_equal(m1, m2) and np.array_equal(s1, s2)


def test_soft_factor_of_a_coin_flip_leaves_the_ratings():
    """q = 1/2: the factor is the constant 1/2, v = 0 and w = 0 (kept at W_MIN): the answer tells nothing, mu
    stays, sigma gains the dynamic tau, sqrt(sigma^2 + tau^2), and loses no more than a relative W_MIN."""
    mu, sigma = FIXED_MU.copy(), FIXED_MU / 3.0
    m, s = mu.copy(), sigma.copy()
    fast_update(m, s, FIXED_ORDER, confidence=[0.5] * (len(FIXED_ORDER) - 1))
    assert np.allclose(m, mu, rtol=0, atol=1e-9)
    assert np.allclose(s, np.sqrt(sigma ** 2 + ft.TAU ** 2), rtol=ft.W_MIN, atol=0)


@pytest.mark.parametrize("q, clipped", [(0.6, True), (0.8, True), (0.95, False)])
def test_soft_factor_two_players_in_closed_form(q, clipped):
    """Two players, the answer a above b (an upset: mu_a < mu_b), right with probability q. With s_i^2 =
    sigma_i^2 + tau^2, c^2 = 2 beta^2 + s_a^2 + s_b^2, t = (mu_a - mu_b - eps) / c (eps the draw margin) and
    Z = (1 - q) + (2q - 1) Phi(t): v = (2q - 1) phi(t) / Z, w = v (v + t), negative for the unsure answers
    (q = 0.6: v = 0.148, w = -0.062) and kept at W_MIN; mu_a' = mu_a + s_a^2 v / c, mu_b' = mu_b - s_b^2 v / c
    whatever w, sigma_i'^2 = s_i^2 (1 - s_i^2 w / c^2) (one factor: the schedule's fixed point is reached in one
    step). Phi is the library's erfc approximation (about 1e-7), hence the tolerance."""
    from scipy.stats import norm

    mu, sigma = np.array([20.0, 24.0]), np.array([5.0, 3.0])
    s2 = sigma ** 2 + ft.TAU ** 2
    c = math.sqrt(2 * ft.BETA ** 2 + s2.sum())
    t = (mu[0] - mu[1] - ft.DRAW_MARGIN) / c
    v = (2 * q - 1) * norm.pdf(t) / ((1 - q) + (2 * q - 1) * norm.cdf(t))
    w = v * (v + t)
    assert bool(w < 0) is clipped
    w = max(w, ft.W_MIN)
    m, s = mu.copy(), sigma.copy()
    fast_update(m, s, [0, 1], confidence=[q])
    assert m == pytest.approx([mu[0] + s2[0] * v / c, mu[1] - s2[1] * v / c], abs=1e-6)
    assert s == pytest.approx(np.sqrt(s2 * (1 - s2 * w / c ** 2)), abs=1e-6)
    # more confidence, a larger move towards the answer
    m_hard, _ = mu.copy(), sigma.copy()
    fast_update(m_hard, _, [0, 1])
    assert mu[0] < m[0] < m_hard[0]


def test_soft_factor_far_beyond_the_erfc():
    """An upset by 300 sigma the reranker was unsure of (q = 0.6): v is about 0, the ratings keep their means,
    sigma gains tau (less a relative W_MIN), and nothing raises where the hard factor gives up."""
    mu, sigma = np.array([0.1, 300.0]), np.array([1.0, 1.0])
    with pytest.raises(FloatingPointError):
        fast_update(mu.copy(), sigma.copy(), [0, 1])
    m, s = mu.copy(), sigma.copy()
    fast_update(m, s, [0, 1], confidence=[0.6])
    assert np.allclose(m, mu, atol=1e-9) and np.all(s >= sigma)


def test_rows_are_the_loop_of_updates():
    """fast_update_rows (acurank-auto's noise models, one answer) gives every row exactly the numbers of
    fast_update with that row's beta, and trueskill.rate's with that beta."""
    rng = np.random.default_rng(7)
    mu = rng.uniform(5, 30, 40)
    sigma = mu / 3
    betas = [0.3, 1.0, ft.BETA, 9.0]
    order = [int(i) for i in rng.permutation(40)[:20]]
    rows_mu, rows_sigma = np.tile(mu, (4, 1)), np.tile(sigma, (4, 1))
    ft.fast_update_rows(rows_mu, rows_sigma, order, betas)
    for g, beta in enumerate(betas):
        m, s = mu.copy(), sigma.copy()
        fast_update(m, s, order, beta=beta)
        assert np.array_equal(rows_mu[g], m) and np.array_equal(rows_sigma[g], s)
        lib_m, lib_s = mu.copy(), sigma.copy()
        library_update(lib_m, lib_s, order, beta=beta)
        assert np.array_equal(lib_m, m) and np.array_equal(lib_s, s)
