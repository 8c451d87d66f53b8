"""A fast, bit-faithful re-implementation of ``trueskill.TrueSkill().rate`` for one reranked window.

The reference (``method.trueskill.library_update``) builds the trueskill package's factor graph with one
Python object per player and per message.  :func:`fast_update` runs the *same* factor graph with
the *same* message schedule and the *same* floating-point operations in the same order, compiled by
numba (``_rate``), the Gaussian messages kept in flat float64 arrays of natural parameters ``(pi, tau)``
(precision and precision-adjusted mean):

* rating layer (prior + dynamic tau), performance layer (beta), team-performance layer, per candidate;
* the team-difference chain (n-1 sum factors + truncation factors), whose forward/backward sweeps
  are sequential, repeated until the largest truncation-factor update is <= ``MIN_DELTA`` or
  ``MAX_ITERATIONS`` sweeps have run;
* the way back up (team perf -> perf -> rating).

The library's default ``backends`` normal cdf/pdf/ppf are reproduced here (its own rational
``erfc`` approximation, *not* ``math.erfc``), as are its ``x ** 2`` / ``x ** -2`` powers: these go
through libm ``pow`` (``math.pow`` with the exponent a run-time value, so the compiler cannot turn it into
``x * x``, which is not always ``pow``'s result). The compiled code is IEEE arithmetic without fast-math
(no contraction into fused multiply-adds, no reassociation) and calls the same libm ``exp`` and ``pow``
as CPython; Intel's SVML, which numba would use for vectorised loops, is turned off. Where Python would
raise (a division by zero, ``sqrt`` of a negative, an overflowing power) the kernel returns a status and
:func:`fast_update` raises that exception, having modified nothing. Why numba and not the earlier
float-list loop in Python: the same arithmetic, 8x faster a window (BENCHMARKS.md, section 1), which
acurank-auto needs (it updates five noise models per answer).

Only the configuration AcuRank uses is supported: the default environment (mu 25, sigma 25/3,
beta 25/6, tau 25/300, static draw probability 0.10, min_delta 1e-4), or that environment with
another performance noise beta (acurank-auto's noise models; the draw margin scales with beta as the
library's does), a free-for-all of one-player teams with unit weights, and strict ranks 0, 1, ...,
n-1 (no ties).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

from .compiled import interpreted, jit  # numba, with Intel's SVML off (its pow/exp are not libm's)

__all__ = ["BETA", "DRAW_MARGIN", "DRAW_PROBABILITY", "MIN_DELTA", "MU", "SIGMA", "TAU", "fast_update"]

# --------------------------------------------------------------------------------------------
# Constants, spelt exactly as the trueskill package computes them.
# --------------------------------------------------------------------------------------------
MU = 25.0
SIGMA = MU / 3
BETA = SIGMA / 2
TAU = SIGMA / 100
DRAW_PROBABILITY = 0.10
#: ``rate``'s default ``min_delta``: the sweeps stop once the largest update is <= this.
MIN_DELTA = 0.0001
#: ``run_schedule`` runs at most this many forward/backward sweeps.
MAX_ITERATIONS = 10

_BETA2 = BETA ** 2
_TAU2 = TAU ** 2
_SQRT2 = math.sqrt(2)
#: 1 / sqrt(2 pi), as the trueskill package spells it (the uncertainty rules use it too).
INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)
_INF = float("inf")


# --------------------------------------------------------------------------------------------
# The trueskill package's default ("backends" fallback) normal distribution functions.
# --------------------------------------------------------------------------------------------
def _erfc(x: float) -> float:
    """Complementary error function: the Numerical-Recipes Chebyshev fit the library uses."""
    z = abs(x)
    t = 1.0 / (1.0 + z / 2.0)
    r = t * math.exp(
        -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
            -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (
                -0.82215223 + t * 0.17087277))))))))
    )
    return 2.0 - r if x < 0 else r


def _cdf(x: float) -> float:
    return 0.5 * _erfc(-x / _SQRT2)


def _pdf(x: float) -> float:
    return INV_SQRT_2PI * math.exp(-(x ** 2 / 2))


def _erfcinv(y: float) -> float:
    """Inverse of :func:`_erfc`: rational initial guess plus two Newton-like (Halley) steps."""
    if y >= 2:
        return -100.0
    if y <= 0:
        return 100.0
    lower = y < 1
    if not lower:
        y = 2 - y
    t = math.sqrt(-2 * math.log(y / 2.0))
    x = -0.70711 * ((2.30753 + t * 0.27061) / (1.0 + t * (0.99229 + t * 0.04481)) - t)
    for _ in range(2):
        err = _erfc(x) - y
        x += err / (1.12837916709551257 * math.exp(-(x ** 2)) - x * err)
    return x if lower else -x


def _ppf(p: float) -> float:
    return 0 - 1 * math.sqrt(2) * _erfcinv(2 * p)


#: ppf((p + 1) / 2) * sqrt(2): the draw margin's factor of beta. Python evaluates the library's
#: ``ppf(...) * math.sqrt(size) * beta`` left to right, so this product times beta is its number exactly.
_DRAW_FACTOR = _ppf((DRAW_PROBABILITY + 1) / 2.0) * math.sqrt(2)


def draw_margin(beta: float) -> float:
    """Draw margin for every adjacent pair (two one-player teams): ppf((p + 1) / 2) * sqrt(2) * beta."""
    return _DRAW_FACTOR * beta


DRAW_MARGIN = draw_margin(BETA)


def _floating_point_error() -> FloatingPointError:
    # Same exception (type and text) the library raises when W leaves (0, 1).
    return FloatingPointError('Cannot calculate correctly, set backend to "mpmath"')


#: What the kernel reports instead of raising (compiled code returns a status; :func:`fast_update` raises the
#: library's exception for it, having modified nothing).
OK, GIVE_UP, ZERO_DIVISION, DOMAIN, OVERFLOW = range(5)
_ERRORS = {
    ZERO_DIVISION: lambda: ZeroDivisionError("float division by zero"),
    DOMAIN: lambda: ValueError("math domain error"),
    OVERFLOW: lambda: OverflowError("(34, 'Numerical result out of range')"),
}

#: The powers the library takes, passed to the kernel as run-time values: a constant exponent would let the
#: compiler turn ``x ** 2`` into ``x * x``, which is not always libm ``pow``'s result.
_POWERS = np.array([2.0, -2.0])

#: The soft factors' w is kept in [W_MIN, W_MAX] (graded outcomes): w -> 1 would give a message of infinite
#: precision. Below, an upset the reranker was unsure of can make w negative (the answer widens the
#: difference's variance); w <= 0 would give the truncation message precision <= 0, and a zero-precision
#: message carries no mean through the library's sum factors (they read it as "mean 0, infinite variance"), so
#: the answer's evidence would be dropped exactly where it contradicts the ratings. The D marginal's mean after
#: moment matching, (ct + sqrt(cp) v) / cp, does not depend on w: a small positive w keeps it, and the
#: variance shrinks by a negligible s^2 W_MIN / c^2.
W_MIN = 1e-6
W_MAX = 1.0 - 1e-9


@jit(error_model="numpy")
def _sum2(p1, t1, c1, p2, t2, c2):  # pragma: no cover - compiled (its lines run as machine code)
    """Generic ``SumFactor.update`` for two (cavity) terms ``(p, t)`` with coefficients ``c``: the library's
    handling of a zero-precision term (its mean counts as 0, its variance as infinite, so the outgoing message
    has precision 0). Returns (pi, tau, status)."""
    mu = c1 * (p1 if p1 == 0 else t1 / p1)
    pi_inv = _INF if p1 == 0 else c1 * c1 / p1
    mu += c2 * (p2 if p2 == 0 else t2 / p2)
    if pi_inv != _INF:
        pi_inv = _INF if p2 == 0 else pi_inv + c2 * c2 / p2
    if pi_inv == 0:
        return 0.0, 0.0, ZERO_DIVISION
    pi = 1.0 / pi_inv
    return pi, pi * mu, OK


@jit(error_model="numpy")
def _truncate(x, Dp, Dt, Up, Ut, dm, soft, graded, powers):  # pragma: no cover - compiled
    """TruncateFactor(x).up(): moment-match D_x (v_win / w_win, or with ``graded`` the soft factor's v and w:
    for Z = (1 - q) + (2q - 1) Phi(xx), v = (2q - 1) phi(xx) / Z = d ln Z / d xx and w = v (v + xx), kept in
    [W_MIN, W_MAX] (see W_MIN); q = 1 is the hard factor). Returns (Variable.delta of the library, status)."""
    dp = Dp[x]
    dt = Dt[x]
    up_ = Up[x]
    ut = Ut[x]
    cp = dp - up_
    ct = dt - ut
    if cp < 0:
        return 0.0, DOMAIN
    s = math.sqrt(cp)
    if s == 0:
        return 0.0, ZERO_DIVISION
    xx = ct / s - dm * s
    # the library's cdf: 0.5 * erfc(-xx / sqrt 2), its Chebyshev erfc
    e = -xx / _SQRT2
    z = -e if e < 0 else e
    t = 1.0 / (1.0 + z / 2.0)
    r = t * math.exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (
        0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (
            1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))))
    denom = 0.5 * (2.0 - r if e < 0 else r)
    sq = math.pow(xx, powers[0])
    if sq == _INF:
        return 0.0, OVERFLOW
    pdf = INV_SQRT_2PI * math.exp(-(sq / 2))
    if not graded:
        v = pdf / denom if denom else -xx
        w = v * (v + xx)
        if not 0 < w < 1:
            return 0.0, GIVE_UP
    else:
        q = soft[x]
        b = 2.0 * q - 1.0
        zq = (1.0 - q) + b * denom
        v = b * pdf / zq if zq else -xx
        w = v * (v + xx)
        w = W_MIN if w < W_MIN else w if w < W_MAX else W_MAX
    den = 1.0 - w
    np_ = cp / den
    nt = (ct + s * v) / den
    Up[x] = (np_ + up_) - dp
    Ut[x] = (nt + ut) - dt
    Dp[x] = np_
    Dt[x] = nt
    pd = abs(dp - np_)
    if pd == _INF:
        return 0.0, OK
    a = abs(dt - nt)
    b = math.sqrt(pd)
    return (b if b > a else a), OK  # Python's max(a, b), NaN included


@jit(error_model="numpy")
def _down(x, Tp, Tt, Lp, Lt, Rp, Rt, Dp, Dt, Ep, Et):  # pragma: no cover - compiled
    """SumFactor(x).down(): the message to D_x = T_x - T_{x+1} from the cavities of T_x and T_{x+1}. Returns
    the cavities, their (1/pi, tau/pi), whether no division failed (the library's fast path: the up message
    then reuses them) and a status."""
    ap, at, bp, bt, ia, qa, ib, qb, ok_a, ok_b = _cavities(x, Tp, Tt, Lp, Lt, Rp, Rt)
    ok = ok_a and ok_b and ia + ib != 0
    status = OK
    if ok:
        pi = 1.0 / (ia + ib)
        tau = pi * (qa - qb)
    else:  # the library's ZeroDivisionError path
        pi, tau, status = _sum2(ap, at, 1.0, bp, bt, -1.0)
    Dp[x] = (Dp[x] - Ep[x]) + pi
    Dt[x] = (Dt[x] - Et[x]) + tau
    Ep[x] = pi
    Et[x] = tau
    return ap, at, bp, bt, ia, qa, ib, qb, ok, status


@jit(error_model="numpy")
def _up_left(x, Tp, Tt, Lp, Lt, Rp, Rt, Dp, Dt, Ep, Et, ap, at, bp, bt, ib, qb, ok):  # pragma: no cover
    """SumFactor(x).up(0): message to T_x = D_x + T_{x+1} (``ib``, ``qb``: T_{x+1}'s cavity as 1/pi and tau/pi,
    usable when ``ok``). The mirror of :func:`_up_right`; one function for both directions measured 60% slower
    a window (the compiler no longer specialises the direction), so the library's two messages stay two."""
    cp = Dp[x] - Ep[x]
    ct = Dt[x] - Et[x]
    status = OK
    if ok and cp != 0 and 1.0 / cp + ib != 0:
        pi = 1.0 / (1.0 / cp + ib)
        tau = pi * (ct / cp + qb)
    else:
        pi, tau, status = _sum2(cp, ct, 1.0, bp, bt, 1.0)
    Tp[x] = ap + pi
    Tt[x] = at + tau
    Lp[x] = pi
    Lt[x] = tau
    return status


@jit(error_model="numpy")
def _up_right(x, Tp, Tt, Lp, Lt, Rp, Rt, Dp, Dt, Ep, Et, ap, at, bp, bt, ia, qa, ok):  # pragma: no cover
    """SumFactor(x).up(1): message to T_{x+1} = T_x - D_x (``ia``, ``qa``: T_x's cavity, usable when ``ok``)."""
    cp = Dp[x] - Ep[x]
    ct = Dt[x] - Et[x]
    status = OK
    if ok and cp != 0 and ia + 1.0 / cp != 0:
        pi = 1.0 / (ia + 1.0 / cp)
        tau = pi * (qa - ct / cp)
    else:
        pi, tau, status = _sum2(ap, at, 1.0, cp, ct, -1.0)
    Tp[x + 1] = bp + pi
    Tt[x + 1] = bt + tau
    Rp[x] = pi
    Rt[x] = tau
    return status


@jit(error_model="numpy")
def _up(x, left, Tp, Tt, Lp, Lt, Rp, Rt, Dp, Dt, Ep, Et, ap, at, bp, bt, ia, qa, ib, qb, ok):  # pragma: no cover
    """SumFactor(x).up toward T_x (``left``: :func:`_up_left`, with T_{x+1}'s cavity ``ib``, ``qb``) or toward
    T_{x+1} (:func:`_up_right`, with T_x's ``ia``, ``qa``): the one dispatch of the chain's sweeps and its ends."""
    if left:
        return _up_left(x, Tp, Tt, Lp, Lt, Rp, Rt, Dp, Dt, Ep, Et, ap, at, bp, bt, ib, qb, ok)
    return _up_right(x, Tp, Tt, Lp, Lt, Rp, Rt, Dp, Dt, Ep, Et, ap, at, bp, bt, ia, qa, ok)


@jit(error_model="numpy")
def _pow(x, e):  # pragma: no cover - compiled
    """``x ** e`` as Python computes it (libm pow), with its errors as statuses."""
    if x == 0 and e < 0:
        return 0.0, ZERO_DIVISION
    y = math.pow(x, e)
    if y == _INF and x != _INF:
        return 0.0, OVERFLOW
    return y, OK


#: The kernel's scratch rows (messages and marginals, each of n or n - 1 values), allocated once a call: rating
#: several rows (acurank-auto's noise models) with one scratch array saves 3-4% of the kernel's time.
_WORK_ROWS = 20


@jit(error_model="numpy")
def _rate(mu, sigma, idx, beta2, dm, soft, graded, powers):  # pragma: no cover - compiled
    """The factor graph of one window (see the module's docstring), in place; a status other than OK leaves
    ``mu`` and ``sigma`` untouched."""
    return _rate_in(np.empty((_WORK_ROWS, idx.size)), mu, sigma, idx, beta2, dm, soft, graded, powers)


@jit(error_model="numpy")
def _rate_in(work, mu, sigma, idx, beta2, dm, soft, graded, powers):  # pragma: no cover - compiled
    """:func:`_rate` with its messages in the rows of ``work`` (at least ``_WORK_ROWS`` x n)."""
    n = idx.size
    m = n - 1
    two, minus_two = powers[0], powers[1]
    # rating layer: Rating(mu, sigma), PriorFactor.down (sigma^2 + tau^2); performance layer (beta);
    # team-performance layer (a one-player team, coefficient 1)
    r_pi, r_tau, p_pi, p_tau, Tp, Tt = work[0, :n], work[1, :n], work[2, :n], work[3, :n], work[4, :n], work[5, :n]
    for i in range(n):
        pi0, status = _pow(sigma[idx[i]], minus_two)
        if status:
            return status
        val_mu = (pi0 * mu[idx[i]]) / pi0
        val_sigma = math.sqrt(1 / pi0)
        v2, status = _pow(val_sigma, two)
        if status:
            return status
        r_pi[i], status = _pow(math.sqrt(v2 + _TAU2), minus_two)
        if status:
            return status
        r_tau[i] = r_pi[i] * val_mu
        a = 1.0 / (1.0 + beta2 * r_pi[i])
        p_pi[i] = a * r_pi[i]
        p_tau[i] = a * r_tau[i]
        Tp[i] = 1.0 / (1 / p_pi[i])
        Tt[i] = Tp[i] * (p_tau[i] / p_pi[i])
    tp_pi = work[6, :n]
    tp_tau = work[7, :n]
    tp_pi[:] = Tp
    tp_tau[:] = Tt
    # the team-difference chain: every message starts as the empty Gaussian (0, 0)
    work[8:18, :m] = 0.0
    Lp, Lt, Rp, Rt, Dp = work[8, :m], work[9, :m], work[10, :m], work[11, :m], work[12, :m]
    Dt, Ep, Et, Up, Ut = work[13, :m], work[14, :m], work[15, :m], work[16, :m], work[17, :m]
    if m == 1:  # two candidates: the library alternates down / truncate on the one factor
        for _ in range(MAX_ITERATIONS):
            status = _down(0, Tp, Tt, Lp, Lt, Rp, Rt, Dp, Dt, Ep, Et)[9]
            if status:
                return status
            delta, status = _truncate(0, Dp, Dt, Up, Ut, dm, soft, graded, powers)
            if status:
                return status
            if delta <= MIN_DELTA:
                break
    else:
        # run_schedule: per sweep, forward over factors 0..m-2 (down, truncate, up to the right team), then
        # backward over m-1..1 (down, truncate, up to the left team); stop once no truncation update moved its
        # variable by more than MIN_DELTA (Variable.delta), or after MAX_ITERATIONS sweeps
        for _ in range(MAX_ITERATIONS):
            big = False
            for sweep in range(2):
                for j in range(m - 1):
                    x = m - 1 - j if sweep else j
                    ap, at, bp, bt, ia, qa, ib, qb, ok, status = _down(x, Tp, Tt, Lp, Lt, Rp, Rt, Dp, Dt, Ep, Et)
                    if status:
                        return status
                    delta, status = _truncate(x, Dp, Dt, Up, Ut, dm, soft, graded, powers)
                    if status:
                        return status
                    big = big or delta > MIN_DELTA
                    status = _up(x, sweep == 1, Tp, Tt, Lp, Lt, Rp, Rt, Dp, Dt, Ep, Et, ap, at, bp, bt, ia, qa, ib, qb, ok)
                    if status:
                        return status
            if not big:
                break
    # up both ends of the chain (their messages computed afresh, as the library does)
    for x, left in ((0, True), (m - 1, False)):
        ap, at, bp, bt, ia, qa, ib, qb, ok_a, ok_b = _cavities(x, Tp, Tt, Lp, Lt, Rp, Rt)
        status = _up(x, left, Tp, Tt, Lp, Lt, Rp, Rt, Dp, Dt, Ep, Et, ap, at, bp, bt, ia, qa, ib, qb,
                     ok_b if left else ok_a)
        if status:
            return status
    # back up: team perf -> perf (SumFactor.up), perf -> rating (LikelihoodFactor.up), read back through
    # Rating(var.mu, var.sigma)
    new_mu = work[18, :n]
    new_sigma = work[19, :n]
    for i in range(n):
        cav_p = Tp[i] - tp_pi[i]
        cav_t = Tt[i] - tp_tau[i]
        if cav_p == 0:  # the library: a zero-precision cavity's mean is 0, its variance infinite
            new_p = 0.0
            new_t = 0.0
        else:
            new_p = 1.0 / (1.0 / cav_p)
            new_t = new_p * (cav_t / cav_p)
        msg_p = (p_pi[i] + new_p) - p_pi[i]
        msg_t = (p_tau[i] + new_t) - p_tau[i]
        a = 1.0 / (1.0 + beta2 * msg_p)
        post_pi = r_pi[i] + a * msg_p
        post_tau = r_tau[i] + a * msg_t
        out_pi, status = _pow(math.sqrt(1 / post_pi), minus_two)
        if status:
            return status
        out_tau = out_pi * (post_tau / post_pi)
        new_mu[i] = out_tau / out_pi
        new_sigma[i] = math.sqrt(1 / out_pi)
    for i in range(n):
        mu[idx[i]] = new_mu[i]
        sigma[idx[i]] = new_sigma[i]
    return OK


@jit(error_model="numpy")
def _cavities(x, Tp, Tt, Lp, Lt, Rp, Rt):  # pragma: no cover - compiled
    """The cavities of T_x and T_{x+1} at factor x, their (1/pi, tau/pi), and whether each division could
    be made (Python raises ZeroDivisionError where it cannot)."""
    ap = Tp[x] - Lp[x]
    at = Tt[x] - Lt[x]
    bp = Tp[x + 1] - Rp[x]
    bt = Tt[x + 1] - Rt[x]
    ok_a = ap != 0
    ok_b = bp != 0
    ia = 1.0 / ap if ok_a else 0.0
    qa = at / ap if ok_a else 0.0
    ib = 1.0 / bp if ok_b else 0.0
    qb = bt / bp if ok_b else 0.0
    return ap, at, bp, bt, ia, qa, ib, qb, ok_a, ok_b


@jit(error_model="numpy")
def _rate_rows(mu, sigma, idx, beta2, dm, soft, graded, powers):  # pragma: no cover - compiled
    """:func:`_rate` on every row g of ``mu`` and ``sigma`` with its own beta^2 and draw margin, in row order
    (a row that fails stops there: the rows before it are updated, as a loop of updates would leave them)."""
    work = np.empty((_WORK_ROWS, idx.size))
    for g in range(mu.shape[0]):
        status = _rate_in(work, mu[g], sigma[g], idx, beta2[g], dm[g], soft, graded, powers)
        if status:
            return status
    return OK


# --------------------------------------------------------------------------------------------
# The update.
# --------------------------------------------------------------------------------------------
def fast_update(mu: np.ndarray, sigma: np.ndarray, order: Sequence[int], beta: float = BETA,
                confidence: Sequence[float] | None = None) -> None:
    """Multiplayer TrueSkill update of one reranked window, in place (compiled factor graph).

    ``mu`` and ``sigma`` are float64 numpy arrays over all candidates; ``order`` (any 1-D integer
    sequence) lists the window's candidate indices best first, i.e. a free-for-all of one-player
    teams with ranks 0, 1, ..., len(order) - 1.  ``mu[order]`` and ``sigma[order]`` are replaced
    by the posterior ``trueskill.TrueSkill().rate`` gives (same factor graph, schedule and
    floating-point operations: the results are bit-identical in testing); other entries
    are untouched. ``beta``: the performance noise (default the library's 25/6; another value gives
    ``trueskill.TrueSkill(beta=beta).rate``, whose draw margin scales with it).

    ``confidence`` (graded outcomes): for each adjacent pair of ``order`` (x = 0 .. len - 2), the probability
    q_x in [1/2, 1] that the reranker ordered it rightly. Its truncation factor 1[d_x > eps] becomes the soft
    factor (1 - q_x) + (2 q_x - 1) 1[d_x > eps], the likelihood of the answer when the reranker errs on that
    pair with probability 1 - q_x; the schedule is the same. q_x = 1 everywhere gives the hard factors'
    numbers; q_x = 1/2 leaves the pair's means alone (see W_MIN).  Raises ``ValueError`` for fewer than two candidates
    or a zero sigma, and ``FloatingPointError`` exactly where the library does (a truncation update beyond
    the precision of its erfc approximation), in which case nothing is modified.
    """
    idx, soft = _window(sigma, order, confidence)
    beta2, dm = _noise(beta)
    _raise_for(_rated(_rate, 1, mu, sigma, (idx, beta2, dm, soft, confidence is not None, _POWERS)))


def fast_update_rows(mu: np.ndarray, sigma: np.ndarray, order: Sequence[int], betas: Sequence[float],
                     confidence: Sequence[float] | None = None) -> None:
    """``fast_update(mu[g], sigma[g], order, beta=betas[g], confidence=confidence)`` for every row g of the 2-D
    float64 arrays ``mu`` and ``sigma`` (C-ordered), in one compiled call: acurank-auto's noise models, one row
    each, rated by the same answer. The numbers are those of the loop of updates."""
    idx, soft = _window(sigma, order, confidence)
    beta2, dm = _noise_rows(betas if type(betas) is tuple else tuple(float(b) for b in betas))
    _raise_for(_rated(_rate_rows, len(beta2), mu, sigma, (idx, beta2, dm, soft, confidence is not None, _POWERS)))


def _rated(kernel, work: int, mu: np.ndarray, sigma: np.ndarray, args: tuple) -> int:
    """The kernel's status, ``mu`` and ``sigma`` updated in place (``args``: the kernel's after them): by its Python
    source while :func:`~.compiled.interpreted` allows ``work`` (on copies, kept where it returns: the compiled
    kernel's bits; where Python raises, the compiled kernel decides), else compiled."""
    # float64 only: numpy's float32 scalars would round where numba's typed code widens to float64
    source = interpreted(kernel, work) if mu.dtype == sigma.dtype == np.float64 else None
    if source is not None:
        m, s = mu.copy(), sigma.copy()
        try:
            with np.errstate(all="ignore"):  # numpy scalars: numba's error_model="numpy" (inf and nan, no warning)
                status = source(m, s, *args)
        except (ArithmeticError, ValueError):
            pass  # a Python float divided by zero, an overflowing pow: numba returns inf or a status instead
        else:
            mu[...] = m
            sigma[...] = s
            return status
    return kernel(mu, sigma, *args)


def _window(sigma: np.ndarray, order: Sequence[int], confidence: Sequence[float] | None):
    """The window's indices and soft-factor probabilities, with the library's errors for a bad window."""
    idx = np.asarray(order, dtype=np.intp)
    if idx.ndim != 1 or idx.size < 2:
        raise ValueError("Need multiple rating groups")
    if not np.asarray(sigma, dtype=np.float64)[..., idx].all():
        raise ValueError("sigma**2 should be greater than 0")
    m = int(idx.size) - 1
    if confidence is None:
        return idx, _NO_SOFT
    soft = np.asarray(confidence, dtype=np.float64)
    if soft.ndim != 1 or soft.size != m:
        raise ValueError(f"confidence needs one value per adjacent pair ({m}), got {soft.size}")
    return idx, soft


def _noise(beta: float) -> tuple[float, float]:
    """beta^2 and the draw margin, spelt as the library computes them (the default environment's constants)."""
    return (_BETA2, DRAW_MARGIN) if beta == BETA else (beta ** 2, draw_margin(beta))


@functools.lru_cache(maxsize=256)
def _noise_rows(betas: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_noise` of every beta, as the kernel's two arrays (a query's grid: made once, read every answer)."""
    pairs = [_noise(b) for b in betas]
    return np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])  # private: the kernel only reads


def _raise_for(status: int) -> None:
    if status == GIVE_UP:
        raise _floating_point_error()
    if status != OK:
        raise _ERRORS[status]()


_NO_SOFT = np.ones(1)
