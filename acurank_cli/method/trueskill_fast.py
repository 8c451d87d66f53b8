"""A fast, bit-faithful re-implementation of ``trueskill.TrueSkill().rate`` for one reranked window.

The reference (``method.trueskill.library_update``) builds the trueskill package's factor graph with one
Python object per player and per message.  :func:`fast_update` runs the *same* factor graph with
the *same* message schedule and the *same* floating-point operations in the same order, but keeps
the Gaussian messages in flat numpy arrays / float lists of natural parameters ``(pi, tau)``
(precision and precision-adjusted mean):

* rating layer (prior + dynamic tau), performance layer (beta), team-performance layer:
  one array operation per layer step over the whole window;
* the team-difference chain (n-1 sum factors + truncation factors), whose forward/backward sweeps
  are inherently sequential: a tight loop over plain Python floats, repeated until the largest
  truncation-factor update is <= ``MIN_DELTA`` or ``MAX_ITERATIONS`` sweeps have run;
* the way back up (team perf -> perf -> rating): array operations again.

The library's default ``backends`` normal cdf/pdf/ppf are reproduced here (its own rational
``erfc`` approximation, *not* ``math.erfc``), as are its ``x ** 2`` / ``x ** -2`` powers: these go
through libm ``pow``, which is not always bit-identical to ``x * x`` nor to numpy's SIMD
``np.power``, so they are evaluated per element with Python's ``**``.

Only the configuration AcuRank uses is supported: the default environment (mu 25, sigma 25/3,
beta 25/6, tau 25/300, static draw probability 0.10, min_delta 1e-4), or that environment with
another performance noise beta (acurank-auto's noise models; the draw margin scales with beta as the
library's does), a free-for-all of one-player teams with unit weights, and strict ranks 0, 1, ...,
n-1 (no ties).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

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


def draw_margin(beta: float) -> float:
    """Draw margin for every adjacent pair (two one-player teams): ppf((p + 1) / 2) * sqrt(2) * beta."""
    return _ppf((DRAW_PROBABILITY + 1) / 2.0) * math.sqrt(2) * beta


DRAW_MARGIN = draw_margin(BETA)


def _floating_point_error() -> FloatingPointError:
    # Same exception (type and text) the library raises when W leaves (0, 1).
    return FloatingPointError('Cannot calculate correctly, set backend to "mpmath"')


def _pow(values: np.ndarray, exponent: int) -> np.ndarray:
    """Elementwise ``x ** exponent`` through libm ``pow`` (numpy's SIMD power rounds differently)."""
    return np.array([v ** exponent for v in values.tolist()], dtype=np.float64)


def _sum2(p1: float, t1: float, c1: float, p2: float, t2: float, c2: float) -> tuple[float, float]:
    """Generic ``SumFactor.update`` for two (cavity) terms ``(p, t)`` with coefficients ``c``.

    Reproduces the library's handling of a zero-precision term (its mean counts as 0, its
    variance as infinite, so the outgoing message has precision 0) and its exceptions.
    """
    pi_inv = 0
    mu = 0
    for p, t, c in ((p1, t1, c1), (p2, t2, c2)):
        mu += c * (p and t / p)
        if pi_inv == _INF:
            continue
        if p == 0:
            pi_inv = _INF
        else:
            pi_inv += c ** 2 / p
    pi = 1.0 / pi_inv
    return pi, pi * mu


# --------------------------------------------------------------------------------------------
# Single message updates on the team-difference chain (readable form; used for the two-team
# case and the final "up both ends" step; _chain_sweeps inlines the same arithmetic).
#   T*: team-performance variables, L*/R*: messages from diff factor x to its left (x) and right
#   (x + 1) team, D*: diff variables, E*: diff factor -> D messages, U*: truncation -> D messages.
# --------------------------------------------------------------------------------------------
def _truncate(x, Tp, Tt, Lp, Lt, Rp, Rt, Dp, Dt, Ep, Et, Up, Ut, dm=DRAW_MARGIN, soft=None) -> float:
    """TruncateFactor(x).up(): moment-match D_x (v_win / w_win; with ``soft``, the soft factor's v and w, see
    :func:`fast_update`); returns ``Variable.delta``."""
    dp = Dp[x]
    dt = Dt[x]
    cp = dp - Up[x]
    ct = dt - Ut[x]
    s = math.sqrt(cp)
    xx = ct / s - dm * s
    denom = _cdf(xx)
    if soft is None:
        v = _pdf(xx) / denom if denom else -xx
        w = v * (v + xx)
        if not 0 < w < 1:
            raise _floating_point_error()
    else:
        v, w = _soft_vw(soft[x], xx, denom, _pdf(xx))
    den = 1.0 - w
    np_ = cp / den
    nt = (ct + s * v) / den
    Up[x] = (np_ + Up[x]) - dp
    Ut[x] = (nt + Ut[x]) - dt
    Dp[x] = np_
    Dt[x] = nt
    pd = abs(dp - np_)
    if pd == _INF:
        return 0.0
    return max(abs(dt - nt), math.sqrt(pd))


def _down(x, Tp, Tt, Lp, Lt, Rp, Rt, Dp, Dt, Ep, Et, Up, Ut) -> None:
    """SumFactor(x).down(): message to D_x = T_x - T_{x+1}."""
    ap = Tp[x] - Lp[x]
    at = Tt[x] - Lt[x]
    bp = Tp[x + 1] - Rp[x]
    bt = Tt[x + 1] - Rt[x]
    try:
        pi = 1.0 / (1 / ap + 1 / bp)
        tau = pi * (at / ap - bt / bp)
    except ZeroDivisionError:
        pi, tau = _sum2(ap, at, 1, bp, bt, -1)
    Dp[x] = (Dp[x] - Ep[x]) + pi
    Dt[x] = (Dt[x] - Et[x]) + tau
    Ep[x] = pi
    Et[x] = tau


def _up_right(x, Tp, Tt, Lp, Lt, Rp, Rt, Dp, Dt, Ep, Et, Up, Ut) -> None:
    """SumFactor(x).up(1): message to T_{x+1} = T_x - D_x."""
    ap = Tp[x] - Lp[x]
    at = Tt[x] - Lt[x]
    cp = Dp[x] - Ep[x]
    ct = Dt[x] - Et[x]
    try:
        pi = 1.0 / (1.0 / ap + 1.0 / cp)
        tau = pi * (at / ap - ct / cp)
    except ZeroDivisionError:
        pi, tau = _sum2(ap, at, 1.0, cp, ct, -1.0)
    Tp[x + 1] = (Tp[x + 1] - Rp[x]) + pi
    Tt[x + 1] = (Tt[x + 1] - Rt[x]) + tau
    Rp[x] = pi
    Rt[x] = tau


def _up_left(x, Tp, Tt, Lp, Lt, Rp, Rt, Dp, Dt, Ep, Et, Up, Ut) -> None:
    """SumFactor(x).up(0): message to T_x = D_x + T_{x+1}."""
    cp = Dp[x] - Ep[x]
    ct = Dt[x] - Et[x]
    bp = Tp[x + 1] - Rp[x]
    bt = Tt[x + 1] - Rt[x]
    try:
        pi = 1.0 / (1.0 / cp + 1.0 / bp)
        tau = pi * (ct / cp + bt / bp)
    except ZeroDivisionError:
        pi, tau = _sum2(cp, ct, 1.0, bp, bt, 1.0)
    Tp[x] = (Tp[x] - Lp[x]) + pi
    Tt[x] = (Tt[x] - Lt[x]) + tau
    Lp[x] = pi
    Lt[x] = tau


def _soft_vw(q: float, xx: float, cdf: float, pdf: float) -> tuple[float, float]:
    """v and w of the soft factor (1 - q) + (2q - 1) 1[d > eps]: with Z = (1 - q) + (2q - 1) Phi(xx),
    v = (2q - 1) phi(xx) / Z (d ln Z / d xx) and w = v (v + xx) (minus its derivative), w kept in [0, W_MAX]:
    a surprising outcome the reranker was unsure of leaves the variance as it is. q = 1 is the hard factor."""
    b = 2.0 * q - 1.0
    z = (1.0 - q) + b * cdf
    v = b * pdf / z if z else -xx
    w = v * (v + xx)
    return v, (0.0 if w < 0.0 else w if w < W_MAX else W_MAX)


#: The largest w a soft factor keeps (w -> 1 would give a message of infinite precision).
W_MAX = 1.0 - 1e-9


def _chain_sweeps(m: int, Tp, Tt, Lp, Lt, Rp, Rt, Dp, Dt, Ep, Et, Up, Ut, dm: float = DRAW_MARGIN,
                  soft=None) -> None:
    """``run_schedule``'s loop for m >= 2 team differences, fully inlined over float lists.

    Per sweep: forward over diff factors 0..m-2 (down, truncate, up to the right team), then
    backward over m-1..1 (down, truncate, up to the left team); stop once no truncation update
    moved its variable by more than MIN_DELTA (``Variable.delta``), or after MAX_ITERATIONS.
    The arithmetic is the library's, term by term; the rare zero-precision cavities (a
    truncation message with precision exactly 0, e.g. a winner far ahead) go through
    :func:`_sum2`, which mirrors the library's ZeroDivisionError handling.
    """
    sqrt = math.sqrt
    exp = math.exp
    sq2 = _SQRT2
    c0 = INV_SQRT_2PI
    inf = _INF
    eps = MIN_DELTA
    neps = -MIN_DELTA
    fwd = range(m - 1)
    bwd = range(m - 1, 0, -1)
    for _ in range(MAX_ITERATIONS):
        big = False
        for sweep in (0, 1):
            for x in (bwd if sweep else fwd):
                # -- SumFactor(x).down(): cavities of T_x and T_{x+1}, message to D_x
                ap = Tp[x] - Lp[x]
                at = Tt[x] - Lt[x]
                bp = Tp[x + 1] - Rp[x]
                bt = Tt[x + 1] - Rt[x]
                try:
                    ia = 1.0 / ap
                    qa = at / ap
                    ib = 1.0 / bp
                    qb = bt / bp
                    pi = 1.0 / (ia + ib)
                    tau = pi * (qa - qb)
                except ZeroDivisionError:
                    ia = ib = qa = qb = None
                    pi, tau = _sum2(ap, at, 1, bp, bt, -1)
                dp = (Dp[x] - Ep[x]) + pi
                dt = (Dt[x] - Et[x]) + tau
                Ep[x] = pi
                Et[x] = tau
                # -- TruncateFactor(x).up(): v_win / w_win moment matching of D_x
                up_ = Up[x]
                ut = Ut[x]
                cp = dp - up_
                ct = dt - ut
                s = sqrt(cp)
                xx = ct / s - dm * s
                e = -xx / sq2
                z = -e if e < 0 else e
                t = 1.0 / (1.0 + z / 2.0)
                r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (
                    0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (
                        1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))))
                denom = 0.5 * (2.0 - r if e < 0 else r)
                if soft is None:
                    v = (c0 * exp(-(xx ** 2 / 2))) / denom if denom else -xx
                    w = v * (v + xx)
                    if not 0 < w < 1:
                        raise _floating_point_error()
                else:
                    v, w = _soft_vw(soft[x], xx, denom, c0 * exp(-(xx ** 2 / 2)))
                den = 1.0 - w
                np_ = cp / den
                nt = (ct + s * v) / den
                Up[x] = (np_ + up_) - dp
                Ut[x] = (nt + ut) - dt
                Dp[x] = np_
                Dt[x] = nt
                if not big:
                    d = dt - nt
                    if d > eps or d < neps:
                        big = True
                    else:
                        d = dp - np_
                        if d < 0:
                            d = -d
                        if d != inf and sqrt(d) > eps:
                            big = True
                # -- SumFactor(x).up(1) (forward) / .up(0) (backward)
                cp = np_ - pi
                ct = nt - tau
                if sweep:
                    try:
                        pi = 1.0 / (1.0 / cp + ib)
                        tau = pi * (ct / cp + qb)
                    except (ZeroDivisionError, TypeError):
                        pi, tau = _sum2(cp, ct, 1.0, bp, bt, 1.0)
                    Tp[x] = ap + pi
                    Tt[x] = at + tau
                    Lp[x] = pi
                    Lt[x] = tau
                else:
                    try:
                        pi = 1.0 / (ia + 1.0 / cp)
                        tau = pi * (qa - ct / cp)
                    except (ZeroDivisionError, TypeError):
                        pi, tau = _sum2(ap, at, 1.0, cp, ct, -1.0)
                    Tp[x + 1] = bp + pi
                    Tt[x + 1] = bt + tau
                    Rp[x] = pi
                    Rt[x] = tau
        if not big:
            break


# --------------------------------------------------------------------------------------------
# The update.
# --------------------------------------------------------------------------------------------
def fast_update(mu: np.ndarray, sigma: np.ndarray, order: Sequence[int], beta: float = BETA,
                confidence: Sequence[float] | None = None) -> None:
    """Multiplayer TrueSkill update of one reranked window, in place (vectorised factor graph).

    ``mu`` and ``sigma`` are float64 numpy arrays over all candidates; ``order`` (any 1-D integer
    sequence) lists the window's candidate indices best first, i.e. a free-for-all of one-player
    teams with ranks 0, 1, ..., len(order) - 1.  ``mu[order]`` and ``sigma[order]`` are replaced
    by the posterior ``trueskill.TrueSkill().rate`` gives (same factor graph, schedule and
    floating-point operations: the results have been bit-identical in testing); other entries
    are untouched. ``beta``: the performance noise (default the library's 25/6; another value gives
    ``trueskill.TrueSkill(beta=beta).rate``, whose draw margin scales with it).

    ``confidence`` (graded outcomes): for each adjacent pair of ``order`` (x = 0 .. len - 2), the probability
    q_x in [1/2, 1] that the reranker ordered it rightly. Its truncation factor 1[d_x > eps] becomes the soft
    factor (1 - q_x) + (2 q_x - 1) 1[d_x > eps], the likelihood of the answer when the reranker errs on that
    pair with probability 1 - q_x (:func:`_soft_vw`); the schedule is the same. q_x = 1 everywhere gives the
    hard factors' numbers; q_x = 1/2 leaves the pair's ratings alone.  Raises ``ValueError`` for fewer than two candidates or a zero sigma, and
    ``FloatingPointError`` exactly where the library does (a truncation update beyond the
    precision of its erfc approximation), in which case nothing is modified.
    """
    idx = np.asarray(order, dtype=np.intp)
    if idx.ndim != 1 or idx.size < 2:
        raise ValueError("Need multiple rating groups")
    n = int(idx.size)
    m = n - 1
    beta2, dm = (_BETA2, DRAW_MARGIN) if beta == BETA else (beta ** 2, draw_margin(beta))

    # ---- rating layer: Rating(mu, sigma) then PriorFactor.down (sigma^2 + tau^2) ----------
    mu_w = np.asarray(mu, dtype=np.float64)[idx]
    sg_w = np.asarray(sigma, dtype=np.float64)[idx]
    if not sg_w.all():
        raise ValueError("sigma**2 should be greater than 0")
    pi0 = _pow(sg_w, -2)  # Rating: pi = sigma ** -2, tau = pi * mu
    val_mu = (pi0 * mu_w) / pi0  # Rating.mu
    val_sigma = np.sqrt(1 / pi0)  # Rating.sigma
    r_pi = _pow(np.sqrt(_pow(val_sigma, 2) + _TAU2), -2)
    r_tau = r_pi * val_mu

    # ---- performance layer: LikelihoodFactor.down -------------------------------------------
    a = 1.0 / (1.0 + beta2 * r_pi)
    p_pi = a * r_pi
    p_tau = a * r_tau

    # ---- team-performance layer: SumFactor.down (a one-player team, coefficient 1) ----------
    tp_pi = 1.0 / (1 / p_pi)
    tp_tau = tp_pi * (p_tau / p_pi)

    # ---- team-difference chain: sequential message passing over plain floats ---------------
    # (names as in _truncate; every message starts as the empty Gaussian (0, 0))
    Tp = tp_pi.tolist()
    Tt = tp_tau.tolist()
    Lp = [0.0] * m
    Lt = [0.0] * m
    Rp = [0.0] * m
    Rt = [0.0] * m
    Dp = [0.0] * m
    Dt = [0.0] * m
    Ep = [0.0] * m
    Et = [0.0] * m
    Up = [0.0] * m
    Ut = [0.0] * m
    chain = (Tp, Tt, Lp, Lt, Rp, Rt, Dp, Dt, Ep, Et, Up, Ut)
    soft = None if confidence is None else [float(q) for q in confidence]
    if soft is not None and len(soft) != m:
        raise ValueError(f"confidence needs one value per adjacent pair ({m}), got {len(soft)}")
    if m == 1:  # two candidates: the library just alternates down / truncate on the one factor
        for _ in range(MAX_ITERATIONS):
            _down(0, *chain)
            if _truncate(0, *chain, dm, soft) <= MIN_DELTA:
                break
    else:
        _chain_sweeps(m, *chain, dm, soft)
    # up both ends of the chain
    _up_left(0, *chain)
    _up_right(m - 1, *chain)

    # ---- back up: team perf -> perf (SumFactor.up), perf -> rating (LikelihoodFactor.up) -----
    tp_all = np.array(Tp)
    tt_all = np.array(Tt)
    cav_p = tp_all - tp_pi
    cav_t = tt_all - tp_tau
    with np.errstate(divide="ignore", invalid="ignore"):
        # library: mean of a zero-precision cavity is 0, its 1/pi "ZeroDivisionError" -> inf
        zero = cav_p == 0
        new_p = 1.0 / (1.0 / cav_p)
        new_t = new_p * (cav_t / cav_p)
        if zero.any():
            new_p[zero] = 0.0
            new_t[zero] = 0.0
    perf_pi = p_pi + new_p
    perf_tau = p_tau + new_t
    msg_p = perf_pi - p_pi
    msg_t = perf_tau - p_tau
    a = 1.0 / (1.0 + beta2 * msg_p)
    post_pi = r_pi + a * msg_p
    post_tau = r_tau + a * msg_t

    # ---- result: Rating(var.mu, var.sigma), read back through .mu / .sigma ----------------
    out_pi = _pow(np.sqrt(1 / post_pi), -2)
    out_tau = out_pi * (post_tau / post_pi)
    mu[idx] = out_tau / out_pi
    sigma[idx] = np.sqrt(1 / out_pi)
