"""Which documents AcuRank still has to rerank: the uncertainty rules behind ``--uncertainty``, and the
threshold t with sum_i P(x_i > t) = k that the paper's rule is built on.

``threshold`` (the paper's): s_i = P(x_i > t) with t solving sum_i P(x_i > t) = k; C = {eps < s_i < 1 - eps}.

``exact``: p_i = P(r_i <= k), the probability that document i ranks in the top k when the x_j ~ N(mu_j,
sigma_j^2) are independent (the paper's Eq. 1 summed over r <= k); C = {eps < p_i < 1 - eps}.

``entropy``: the entropy of document i's rank distribution truncated at k, pi_i = (P(r_i = 1), ...,
P(r_i = k), P(r_i > k)); C = {H_i > h(eps)} with h the binary entropy. Since H_i >= h(p_i), every document
the exact rule calls uncertain is uncertain here too; documents sure to be in the top k but not sure of
their place are added. (The entropy of the rank *indicator* alone is h(p_i), a function of |p_i - 1/2|,
so thresholding it would be the exact rule again.)

All rules order documents by their probability of being in the top k (s_i or p_i) and make the final
pass over {that probability > eps}.

How the exact probabilities are computed (``rank_probabilities``)
-----------------------------------------------------------------
P(r_i = c + 1) = integral of phi_i(x) P(N_-i(x) = c) dx, where N_-i(x) counts the other documents above x:
a Poisson-binomial count with success probabilities q_j(x) = P(x_j > x). Only c < k matters.

1. A shared grid over x: every document contributes nodes mu_j + sigma_j z (z uniform on [-8.5, 8.5]),
   kept inside [x_lo, x_hi] where below x_lo at least k + 1 documents lie above x (so no document ranks
   in the top k from there) and above x_hi no document lies; thinned by rank to at most
   max(256, 25,600 / n) nodes, or, when there are few distinct nodes, every cell split evenly up to it.
2. Truncated Poisson-binomial recursions over documents at every node, once forwards (prefix) and once
   backwards (suffix), so that leaving document i out is a product of its prefix and suffix: no division,
   no cancellation, float64 throughout.
3. Per document and grid cell, phi_i times the linear interpolant of P(N_-i = c) is integrated in closed
   form (exact for narrow phi_i). Those weights only *share out* the cell's exact total: summed over i,
   the integral of phi_i(x) P(N_-i(x) = c) over a cell is the increase of P(N(x) <= c) across it (the
   density of the (c+1)-th largest value), which the full recursion gives at the nodes. So every rank
   r <= k is held by exactly one document in total (sum_i P(r_i = r) = 1 and sum_i p_i = k up to rounding)
   whatever the grid, and the grid only decides how each cell's mass is shared.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .. import idle
from .acurank_params import Uncertainty
from .trueskill_fast import INV_SQRT_2PI


_phi = None
_PHI_LOCK = threading.Lock()


def _import_ndtr() -> None:
    global _phi
    with _PHI_LOCK:
        if _phi is None:
            from scipy.special import ndtr as phi

            _phi = phi


def prefetch() -> None:
    """Import scipy's ``ndtr`` while the process waits on the model (:mod:`acurank_cli.idle`): its import is 0.2-0.3 s
    of a start, and no rating is assessed before a run's first windows answer."""
    if _phi is None:
        idle.when_waiting(_import_ndtr)


def ndtr(x):
    """Phi(x): scipy's ``special.ndtr``, imported at the first use if :func:`prefetch`'s import has not been done."""
    if _phi is None:
        _import_ndtr()
    return _phi(x)

#: Phi(-8.5) is about 1e-17: beyond 8.5 sigma a document's mass is below float64 resolution.
Z_SPAN = 8.5
#: Node offsets in units of sigma each document contributes to the shared grid.
Z_NODES = np.linspace(-Z_SPAN, Z_SPAN, 69)
#: The grid's size: at least MIN_NODES, and up to NODE_WORK / n for small n (the recursions cost n x nodes).
MIN_NODES = 256
NODE_WORK = 25_600

#: z with Phi(z) = 1 - 0.001: the paper's fallback for t when n <= k.
Z_999 = 3.0902


# -- the paper's rule: the threshold t and s_i ---------------------------------------------------------


def threshold(mu: np.ndarray, sigma: np.ndarray, k: int) -> float:
    """t with sum_i P(x_i > t) = k (x_i ~ N(mu_i, sigma_i^2)): the root bracketed to 1e-12.

    f(t) = sum_i Phi((mu_i - t) / sigma_i) - k is strictly decreasing; safeguarded Newton steps
    shrink a bisection bracket [lo, hi] (f(lo) > 0 >= f(hi)) until it is narrower than 1e-12.
    """
    n = len(mu)
    if n <= k:
        return float(np.min(mu - Z_999 * sigma))
    inv = 1.0 / sigma
    lo = float((mu - 40.0 * sigma).min())  # the array's own reductions: np.min/np.sum's result, without their wrapper
    hi = float((mu + 40.0 * sigma).max())
    # Start from the k-th largest mu: the root lies near it.
    t = float(np.partition(mu, n - k)[n - k])
    for _ in range(200):
        z = (mu - t) * inv
        f = float(ndtr(z).sum()) - k
        if f > 0:
            lo = t
        else:
            hi = t
        if hi - lo <= 1e-12:
            break
        slope = float((np.exp(-0.5 * z * z) * inv).sum()) * INV_SQRT_2PI
        # Newton, overshooting the root by a hair so the bracket closes from both sides.
        nxt = t + f / slope + math.copysign(4e-13, f) if slope > 0 else 0.5 * (lo + hi)
        if not lo < nxt < hi:
            nxt = 0.5 * (lo + hi)
            if not lo < nxt < hi:
                break
        t = nxt
    return 0.5 * (lo + hi)


def exceed_probability(mu: np.ndarray, sigma: np.ndarray, t: float) -> np.ndarray:
    """s_i = P(x_i > t) = 1 - Phi((t - mu_i) / sigma_i)."""
    return 1.0 - ndtr((t - mu) / sigma)


# -- the exact rank probabilities ------------------------------------------------------------------


@dataclass(frozen=True)
class Assessment:
    """One iteration's verdict: ``prob[i]`` is document i's probability of being in the top k under the
    rule (s_i or p_i; it orders the groups and decides the final pass), ``uncertain[i]`` whether i is in C,
    ``t`` the threshold (the threshold rule only)."""

    prob: np.ndarray
    uncertain: np.ndarray
    t: float | None = None


def grid(mu: np.ndarray, sigma: np.ndarray, k: int, max_nodes: int | None = None) -> np.ndarray:
    """The shared, sorted grid of x values (step 1 of the module's description); needs k < n."""
    n = len(mu)
    max_nodes = max_nodes or max(MIN_NODES, NODE_WORK // n)
    x_lo = float(np.partition(mu - Z_SPAN * sigma, n - k - 1)[n - k - 1])
    x_hi = float(np.max(mu + Z_SPAN * sigma))
    nodes = (mu[:, None] + sigma[:, None] * Z_NODES).ravel()
    nodes = np.unique(np.concatenate([nodes[(nodes > x_lo) & (nodes < x_hi)], [x_lo, x_hi]]))
    if len(nodes) > max_nodes:
        nodes = nodes[np.unique(np.linspace(0, len(nodes) - 1, max_nodes).round().astype(np.int64))]
    elif len(nodes) <= max_nodes // 2:
        # Few distinct nodes (ties, or few documents): split every cell evenly up to the cap.
        parts = (max_nodes - 1) // (len(nodes) - 1)
        steps = np.arange(parts) / parts
        nodes = np.append((nodes[:-1, None] + np.diff(nodes)[:, None] * steps).ravel(), nodes[-1])
    # Drop nodes within a few ulps of their predecessor (coinciding nodes of tied documents).
    keep = np.diff(nodes) > 8.0 * np.finfo(np.float64).eps * np.abs(nodes[1:])
    return nodes[np.concatenate([[True], keep])]


_WORKSPACE = threading.local()
#: Largest scratch array (in float64s, 8 MB) kept per thread between calls.
SCRATCH_LIMIT = 1 << 20


def _scratch(name: str, shape: tuple[int, ...]) -> np.ndarray:
    """An uninitialised float64 array of ``shape``, reused across calls in this thread: AcuRank asks
    every iteration, and fresh multi-megabyte arrays each time cost more in page faults than the sums."""
    size = math.prod(shape)
    if size > SCRATCH_LIMIT:
        return np.empty(shape)  # large n: the sums dominate; keep no big buffers alive
    buf = getattr(_WORKSPACE, name, None)
    if buf is None or buf.size < size:
        buf = np.empty(size)
        setattr(_WORKSPACE, name, buf)
    return buf[:size].reshape(shape)


def _prefix_suffix(q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Truncated Poisson-binomial counts at every node, from success probabilities ``q[j]`` per node:
    ``pre[j, c]`` = P(c of the documents < j are above x), ``below[j, c]`` = P(at most c of the documents
    >= j are above x), for c < k. Both follow P'(c) = P(c) (1 - q) + P(c - 1) q (the cumulative form too)."""
    n, g = q.shape
    pre = _scratch("pre", (n + 1, k, g))
    below = _scratch("below", (n + 1, k, g))
    pre[0] = 0.0
    pre[0, 0] = 1.0
    below[n] = 1.0
    miss = 1.0 - q
    tmp = np.empty((k - 1, g))
    for j in range(n):
        np.multiply(pre[j], miss[j], out=pre[j + 1])
        np.multiply(pre[j, :-1], q[j], out=tmp)
        pre[j + 1, 1:] += tmp
    for j in range(n - 1, -1, -1):
        np.multiply(below[j + 1], miss[j], out=below[j])
        np.multiply(below[j + 1, :-1], q[j], out=tmp)
        below[j, 1:] += tmp
    return pre, below


def _cell_weights(mu: np.ndarray, sigma: np.ndarray, x: np.ndarray, u: np.ndarray, q: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """For each document i and cell [x_g, x_g+1]: the mass A = integral of phi_i, and the slope weight
    B = integral of phi_i(x) (x - x_g) / (x_g+1 - x_g), so that a linear f integrates to
    f(x_g) (A - B) + f(x_g+1) B. Closed forms from u = (x - mu_i) / sigma_i and q = P(x_i > x); the
    masses are differences of q (absolute error ~1e-16, which is all the sharing needs)."""
    mass = np.maximum(q[:, :-1] - q[:, 1:], 0.0)
    pdf = np.exp(-0.5 * u * u)
    pdf *= INV_SQRT_2PI
    moment = (mu[:, None] - x[None, :-1]) * mass + sigma[:, None] * (pdf[:, :-1] - pdf[:, 1:])
    slope = np.clip(moment / np.diff(x)[None, :], 0.0, mass)
    return mass, slope


@dataclass(frozen=True)
class RankProbabilities:
    """``rank[i, r]`` = P(r_i = r + 1) for r < k; ``top`` = P(r_i <= k). Each is shared out on its own
    (``top`` from the top-k mass), so the row sums of ``rank`` equal ``top`` only to the grid's accuracy."""

    rank: np.ndarray
    top: np.ndarray


def rank_probabilities(mu: np.ndarray, sigma: np.ndarray, k: int, *, ranks: bool = True,
                       max_nodes: int | None = None) -> RankProbabilities:
    """P(r_i = r) for r <= k (``ranks=True``) and p_i = P(r_i <= k) for independent normal x_i, computed
    as described in the module docstring. With ``ranks=False`` only p_i (cheaper; ``rank`` is empty)."""
    mu = np.asarray(mu, dtype=np.float64)
    sigma = np.asarray(sigma, dtype=np.float64)
    n = len(mu)
    if n <= k:
        if not ranks:
            return RankProbabilities(np.empty((n, 0)), np.ones(n))
        k = n  # every document is in the top k; ranks beyond n have probability 0
    x = grid(mu, sigma, min(k, n - 1), max_nodes)
    u = (x[None, :] - mu[:, None]) / sigma[:, None]
    q = ndtr(-u)  # q_j(x) = P(x_j > x)
    pre, below = _prefix_suffix(q, k)
    mass, slope = _cell_weights(mu, sigma, x, u, q)
    at_most = np.cumsum(pre[n], axis=0)  # P(N(x) <= c), all documents
    # P(N_-i(x) < k) = sum_a pre_i(a) P(N_>i(x) <= k - 1 - a)
    within = pre[:n, 0] * below[1:, k - 1]
    for a in range(1, k):
        within += pre[:n, a] * below[1:, k - 1 - a]
    w = within[:, :-1] * (mass - slope) + within[:, 1:] * slope
    # Summed over documents, the cell's top-k mass is the increase of sum_c P(N <= c) = E[(k - N)^+].
    gain = np.maximum(np.diff(at_most.sum(axis=0)), 0.0)
    top = _share(w[:, None, :], gain[None, :])[:, 0] if n > k else np.ones(n)
    if not ranks:
        return RankProbabilities(np.empty((n, 0)), top)
    after = below[1:]
    suf = _scratch("suf", after.shape)  # P(N_>i(x) = c)
    suf[:, 0] = after[:, 0]
    np.subtract(after[:, 1:], after[:, :-1], out=suf[:, 1:])
    np.maximum(suf, 0.0, out=suf)
    loo = _scratch("loo", (n, k, len(x)))  # P(N_-i(x) = c) = sum_{a <= c} pre_i(a) suf_{i+1}(c - a)
    for c in range(k):
        np.einsum("iag,iag->ig", pre[:n, : c + 1], suf[:, c::-1], out=loo[:, c])
    w = loo[:, :, :-1] * (mass - slope)[:, None, :] + loo[:, :, 1:] * slope[:, None, :]
    # The cell's mass of rank c + 1 is the increase of P(N <= c) across it.
    return RankProbabilities(_share(w, np.maximum(np.diff(at_most, axis=1), 0.0)), top)


def top_k_probabilities(mu: np.ndarray, sigma: np.ndarray, k: int) -> np.ndarray:
    """p_i = P(r_i <= k) for every document (1 when n <= k), clipped to [0, 1]: the final ratings' calibrated
    relevance signal (the API's and the trace's ``p_topk``)."""
    return np.clip(rank_probabilities(mu, sigma, k, ranks=False).top, 0.0, 1.0)


def _share(w: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """Share each cell's exact total among documents in proportion to their weights; sum over cells."""
    norm = w.sum(axis=0)
    ok = norm > 0
    factor = np.divide(totals, norm, out=np.zeros_like(norm), where=ok)
    return np.einsum("icg,cg->ic", w, factor)


def binary_entropy(p: float) -> float:
    """h(p) in nats."""
    return 0.0 if p <= 0.0 or p >= 1.0 else -(p * math.log(p) + (1 - p) * math.log1p(-p))


def rank_entropy(rank: np.ndarray) -> np.ndarray:
    """Entropy (nats) of each row's rank distribution truncated at k: P(r = 1..k) and P(r > k)."""
    rest = np.clip(1.0 - rank.sum(axis=1), 0.0, 1.0)
    probs = np.concatenate([np.clip(rank, 0.0, 1.0), rest[:, None]], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(probs > 0, -probs * np.log(probs), 0.0)
    return terms.sum(axis=1)


def _undecided(p: np.ndarray, eps: float) -> np.ndarray:
    """C = {eps < p_i < 1 - eps}: neither surely out of nor surely in the top k."""
    return (eps < p) & (p < 1.0 - eps)


def _threshold(mu: np.ndarray, sigma: np.ndarray, k: int, eps: float) -> Assessment:
    t = threshold(mu, sigma, k)
    s = exceed_probability(mu, sigma, t)
    return Assessment(s, _undecided(s, eps), t)


def _exact(mu: np.ndarray, sigma: np.ndarray, k: int, eps: float) -> Assessment:
    p = rank_probabilities(mu, sigma, k, ranks=False).top
    return Assessment(p, _undecided(p, eps))


def _entropy(mu: np.ndarray, sigma: np.ndarray, k: int, eps: float) -> Assessment:
    probs = rank_probabilities(mu, sigma, k)
    return Assessment(probs.top, rank_entropy(probs.rank) > binary_entropy(eps))


#: Registry: rule -> assess(mu, sigma, k, eps).
RULES: dict[Uncertainty, Callable[[np.ndarray, np.ndarray, int, float], Assessment]] = {
    Uncertainty.threshold: _threshold,
    Uncertainty.exact: _exact,
    Uncertainty.entropy: _entropy,
}


def assess(rule: Uncertainty, mu: np.ndarray, sigma: np.ndarray, k: int, eps: float) -> Assessment:
    """Apply ``rule`` to the current ratings."""
    return RULES[Uncertainty(rule)](mu, sigma, k, eps)
