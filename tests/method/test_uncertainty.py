"""The uncertainty rules (--uncertainty threshold | exact | entropy): the exact top-k and rank
probabilities against Monte Carlo and closed forms, their sums, and how AcuRank selects with them."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import ndtr

from acurank_cli.records import Phase
from acurank_cli.method.registry import build_strategy
from acurank_cli.method.acurank_params import Uncertainty
from acurank_cli.method.uncertainty import assess, binary_entropy, rank_entropy, rank_probabilities
from scripted import drive, task

K = 10


def monte_carlo(mu, sigma, k, draws=10**6, seed=0, chunk=50_000):
    """P(r_i = r) for r <= k from ``draws`` seeded draws of x ~ N(mu, sigma^2) (float64)."""
    rng = np.random.default_rng(seed)
    n = len(mu)
    kk = min(k, n)
    counts = np.zeros((n, kk))
    for _ in range(draws // chunk):
        x = mu + sigma * rng.standard_normal((chunk, n))
        top = np.argpartition(-x, kk - 1, axis=1)[:, :kk] if kk < n else np.tile(np.arange(n), (chunk, 1))
        vals = np.take_along_axis(x, top, axis=1)
        ranked = np.take_along_axis(top, np.argsort(-vals, axis=1), axis=1)
        for r in range(kk):
            counts[:, r] += np.bincount(ranked[:, r], minlength=n)
    return counts / draws


def rating_sets():
    """Random rating sets, n = 5..200, with exact ties, tiny and huge sigma (seeded)."""
    rng = np.random.default_rng(2025)
    sets = {}
    for n in (5, 12, 40, 200):
        sets[f"random-{n}"] = (rng.normal(25, 3, n), rng.uniform(0.5, 4, n))
    n = 50
    sets["ties"] = (np.round(rng.normal(25, 2, n)), np.full(n, 1.0))
    mu, sigma = rng.normal(25, 3, n), rng.uniform(0.5, 4, n)
    order = np.argsort(-mu)
    sigma[order[:12]] = 1e-6  # near-deterministic documents around the cutoff...
    mu[order[1]] = mu[order[0]]  # ...two of them exactly tied
    mu[order[9]] = mu[order[10]] + 1e-6  # ...and two a sigma apart at the k-th place
    sets["tiny"] = (mu, sigma)
    mu, sigma = rng.normal(25, 3, n), rng.uniform(0.5, 4, n)
    sigma[:3] = 1e3
    sets["huge"] = (mu, sigma)
    mu, sigma = rng.normal(25, 3, n), rng.uniform(0.5, 4, n)
    sigma[:5], sigma[5:8] = 1e-8, 1e4
    mu[5:8] = mu[0]
    sets["mixed"] = (mu, sigma)
    return sets


SETS = rating_sets()


@pytest.fixture(scope="module")
def mc_results():
    return {name: monte_carlo(mu, sigma, K, seed=i) for i, (name, (mu, sigma)) in enumerate(SETS.items())}


@pytest.mark.parametrize("name", list(SETS))
def test_exact_probabilities_agree_with_monte_carlo(name, mc_results):
    mu, sigma = SETS[name]
    mc = mc_results[name]
    top = rank_probabilities(mu, sigma, K, ranks=False).top
    ranks = rank_probabilities(mu, sigma, K)
    assert np.abs(top - mc.sum(axis=1)).max() < 2e-3
    assert np.abs(ranks.top - mc.sum(axis=1)).max() < 2e-3
    assert np.abs(ranks.rank[:, : mc.shape[1]] - mc).max() < 2e-3


@pytest.mark.parametrize("name", list(SETS))
def test_probabilities_sum_to_k_and_each_rank_to_one(name):
    mu, sigma = SETS[name]
    kk = min(K, len(mu))
    top = rank_probabilities(mu, sigma, K, ranks=False).top
    ranks = rank_probabilities(mu, sigma, K)
    assert abs(top.sum() - kk) < 1e-9
    assert np.abs(ranks.rank.sum(axis=0) - 1.0).max() < 1e-9
    assert abs(ranks.top.sum() - kk) < 1e-9


def extreme_sets_of_1000():
    rng = np.random.default_rng(7)
    n = 1000
    mu = np.sort(rng.gamma(9, 1.5, n))[::-1] + 5
    yield "init", mu, mu / 3
    yield "played", mu, rng.uniform(0.5, 3, n)
    sigma = rng.uniform(0.5, 3, n)
    sigma[::7], sigma[3::11] = 1e-9, 1e5
    yield "extreme", mu, sigma
    yield "tied", np.round(mu), np.full(n, 0.5)


@pytest.mark.parametrize("label,mu,sigma", list(extreme_sets_of_1000()), ids=lambda v: v if isinstance(v, str) else "")
def test_no_nan_or_negative_at_n_1000(label, mu, sigma):
    for probs in (rank_probabilities(mu, sigma, K, ranks=False), rank_probabilities(mu, sigma, K)):
        assert np.all(np.isfinite(probs.top)) and probs.top.min() >= 0.0 and probs.top.max() <= 1.0 + 1e-12
        assert abs(probs.top.sum() - K) < 1e-9
    assert probs.rank.min() >= 0.0 and np.all(np.isfinite(probs.rank))


@pytest.mark.parametrize("mu1,s1,mu2,s2", [(25, 2, 24, 3), (10, 1e-6, 10 + 1e-6, 1e-6), (5, 1e3, 7, 0.1), (3, 1, 3, 1)])
def test_two_documents_k1_closed_form(mu1, s1, mu2, s2):
    """n = 2, k = 1: p_1 = P(x_1 > x_2) = Phi((mu_1 - mu_2) / sqrt(sigma_1^2 + sigma_2^2))."""
    p = rank_probabilities(np.array([mu1, mu2], float), np.array([s1, s2], float), 1).top
    want = ndtr((mu1 - mu2) / math.hypot(s1, s2))
    assert p == pytest.approx([want, 1 - want], abs=1e-6)


def test_exchangeable_documents_share_equally():
    """n identical ratings: every rank r <= k has probability 1/n for each document, p_i = k/n."""
    mu, sigma = np.full(37, 20.0), np.full(37, 2.5)
    probs = rank_probabilities(mu, sigma, K)
    assert np.abs(probs.rank - 1 / 37).max() < 1e-12
    assert np.abs(rank_probabilities(mu, sigma, K, ranks=False).top - K / 37).max() < 1e-12


def test_fewer_documents_than_k_are_all_in_the_top_k():
    mu, sigma = np.array([3.0, 2.0, 1.0]), np.array([1.0, 1.0, 1.0])
    assert list(rank_probabilities(mu, sigma, K, ranks=False).top) == [1.0, 1.0, 1.0]
    ranks = rank_probabilities(mu, sigma, K)
    assert np.abs(ranks.rank.sum(axis=0) - 1).max() < 1e-9  # each rank 1..n held once in total
    assert np.abs(ranks.rank.sum(axis=1) - 1).max() < 1e-4  # each document somewhere (grid accuracy)
    a = assess(Uncertainty.exact, mu, sigma, K, 0.01)
    assert not a.uncertain.any()


def test_binary_entropy_by_hand():
    # h(0.01) = -(0.01 ln 0.01 + 0.99 ln 0.99) = 0.0460517 + 0.0099498
    assert binary_entropy(0.01) == pytest.approx(0.0560015, abs=1e-7)
    assert binary_entropy(0.5) == pytest.approx(math.log(2))
    assert binary_entropy(0.0) == 0.0 == binary_entropy(1.0)


def test_rank_entropy_by_hand():
    # (1/2, 1/2, 0 | 0): ln 2; (1/4, 1/4 | 1/2): 1.5 ln 2; certain: 0
    rank = np.array([[0.5, 0.5, 0.0], [0.25, 0.25, 0.0], [0.0, 0.0, 1.0]])
    assert rank_entropy(rank) == pytest.approx([math.log(2), 1.5 * math.log(2), 0.0])


def test_entropy_adds_documents_sure_of_the_top_k_but_not_of_their_place():
    """k = 2; A and B far above the rest with equal ratings: both surely in the top 2 (p = 1, so the
    exact and threshold rules call neither uncertain), but each is first with probability 1/2."""
    mu = np.array([100.0, 100.0, 0.0, 0.5, 1.0])
    sigma = np.ones(5)
    exact = assess(Uncertainty.exact, mu, sigma, 2, 0.01)
    entropy = assess(Uncertainty.entropy, mu, sigma, 2, 0.01)
    threshold = assess(Uncertainty.threshold, mu, sigma, 2, 0.01)
    assert list(exact.uncertain) == [False] * 5 == list(threshold.uncertain)
    assert list(entropy.uncertain) == [True, True, False, False, False]
    assert entropy.prob[:2] == pytest.approx([1.0, 1.0], abs=1e-12)


@pytest.mark.parametrize("name", list(SETS))
def test_entropy_set_contains_the_exact_set(name):
    """H_i >= h(p_i) > h(eps) whenever eps < p_i < 1 - eps."""
    mu, sigma = SETS[name]
    exact = assess(Uncertainty.exact, mu, sigma, K, 0.01).uncertain
    entropy = assess(Uncertainty.entropy, mu, sigma, K, 0.01).uncertain
    assert np.all(entropy[exact])


def test_threshold_rule_is_the_papers():
    mu, sigma = SETS["random-40"]
    a = assess(Uncertainty.threshold, mu, sigma, K, 0.01)
    assert ndtr((mu - a.t) / sigma).sum() == pytest.approx(K, abs=1e-9)
    assert np.array_equal(a.uncertain, (a.prob > 0.01) & (a.prob < 0.99))


@pytest.mark.parametrize("rule", ["exact", "entropy"])
def test_acurank_selects_with_the_chosen_rule(rule):
    """Every adaptive iteration sends exactly the rule's uncertain set of the ratings it saw, in groups
    of m ordered by p_i, and |C| is what the step reports."""
    steps, _ = drive(build_strategy("acurank", uncertainty=rule, tau=3), task(60))
    adaptive = [(s, snap) for s, snap in steps if s.phase is Phase.adaptive]
    assert adaptive, "the reversed-window reranker leaves uncertainty after the initial pass"
    for step, snap in adaptive:
        mu = np.array([d.mu for d in snap.docs])
        sigma = np.array([d.sigma for d in snap.docs])
        a = assess(Uncertainty(rule), mu, sigma, 10, 0.01)
        chosen = [snap.docs[i].docid for i in sorted(np.flatnonzero(a.uncertain), key=lambda i: -a.prob[i])]
        assert step.uncertain == len(chosen)
        assert [d for w in step.windows for d in w] == chosen
        assert all(len(w) == 20 for w in step.windows[:-1])
        assert snap.t is None and [d.s for d in snap.docs] == pytest.approx(list(a.prob), abs=1e-12)


def eq1_by_adaptive_quadrature(mu, sigma, k, i):
    """The paper's Eq. 1 summed over r <= k, done the slow way: scipy's adaptive quadrature over z
    (x = mu_i + sigma_i z) of phi(z) P(N_-i(x) < k), the count of the others above x by a direct
    Poisson-binomial recursion at every x."""
    from scipy import integrate

    def below_k(x):
        dist = np.zeros(k)
        dist[0] = 1.0
        for j in range(len(mu)):
            if j != i:
                q = ndtr((mu[j] - x) / sigma[j])
                dist[1:] = dist[1:] * (1 - q) + dist[:-1] * q
                dist[0] *= 1 - q
        return dist.sum()

    f = lambda z: math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi) * below_k(mu[i] + sigma[i] * z)  # noqa: E731
    breaks = sorted({float(np.clip((m - mu[i]) / sigma[i], -9, 9)) for m in mu})
    value, _ = integrate.quad(f, -9, 9, points=breaks, limit=400, epsabs=1e-12, epsrel=1e-10)
    return value


@pytest.mark.parametrize("name", ["random-12", "ties", "tiny", "mixed"])
def test_exact_probabilities_against_adaptive_quadrature(name):
    """Tighter than Monte Carlo allows: within 1e-4 of an independent evaluation of Eq. 1."""
    mu, sigma = SETS[name]
    pick = np.argsort(-mu)[:14]  # the documents around the cutoff, where p is neither 0 nor 1
    top = rank_probabilities(mu, sigma, K, ranks=False).top
    want = np.array([eq1_by_adaptive_quadrature(mu, sigma, K, i) for i in pick])
    assert np.abs(top[pick] - want).max() < 1e-4
